#!/usr/bin/env python3
"""Runs PyTorch's own distributed test suite (torch/testing/_internal/
distributed/distributed_test.py, shipped with python3-torch: 279 tests) on
c10d-coord's backend, on CPU, as torch's test_distributed_spawn.py runs it
(suite.py), and prints what passed, failed and was skipped. Each test's
ranks are forked from the runner (--start spawn: spawned, as torch's
test_distributed_spawn.py does; the tests are the same, only slower).

    /usr/bin/python3 tests/torch_suite/run.py          # CI: torch1.13/ci-world2.txt at
                                                       # world 2, ci-world3.txt at 3
    venv/bin/python tests/torch_suite/run.py           # the same for its torch (2.13)
    /usr/bin/python3 tests/torch_suite/run.py --all    # all 279 at world 2 (~10 min)
    ... --groups gloo    torch's own gloo groups (the reference figures)
    ... --world 3 -k barrier test_broadcast            # a pattern, names

One coordinator (build/server/c10d-coord, its database in a temporary
directory, a free port) serves the whole run, every test's ranks meeting on
it as a job of their own, as users run job after job on one coordinator;
torch's store is the coordinator's (init_method coord://HOST:PORT: each
test's run has its own), but for tests a list file marks init=file.
Exit status: 0 when every test of a list file passed (for names, -k and
--all: when none failed), 1 otherwise, 2 on bad usage.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("C10D_BUILD_DIR", os.path.join(ROOT, "build"))
# Where the ranks import c10d_coord from (as suite.py decides).
PKG_PATH = os.environ.get("C10D_PYTHONPATH", os.path.join(ROOT, "python"))

# A world's CI selection for a torch release: the tests of that release's
# suite that pass on gloo here (and so must on coord), in torch<X.Y>/.
def ci_lists(version):
    """{world: list file} for torch `version` ("2.13.0+cpu"), maybe empty."""
    d = os.path.join(HERE, "torch" + ".".join(version.split(".")[:2]))
    return {w: os.path.join(d, f"ci-world{w}.txt") for w in (2, 3)
            if os.path.exists(os.path.join(d, f"ci-world{w}.txt"))}


def read_list(path, with_init=False):
    """Test names, one a line; '#' starts a comment. A name may be followed
    by init=file or init=coord: the init method that test runs with (with
    with_init, (name, init or None) pairs)."""
    rows = []
    with open(path) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            init = None
            for w in words[1:]:
                if not w.startswith("init=") or w[5:] not in ("file", "coord"):
                    sys.exit(f"run.py: {path}: '{w}' (want init=file or init=coord)")
                init = w[5:]
            rows.append((words[0], init) if with_init else words[0])
    return rows


# --- the coordinator -----------------------------------------------------

class Coordinator:
    """One c10d-coord for the whole run: a database in a temporary
    directory, a free port (the URL from its --ready-file)."""

    def __init__(self, tmp):
        binary = os.path.join(BUILD, "server", "c10d-coord")
        if not os.access(binary, os.X_OK):
            sys.exit(f"run.py: {binary} is not built (cmake --build build)")
        ready = os.path.join(tmp, "ready")
        self.log = open(os.path.join(tmp, "c10d-coord.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "--listen", "tcp://127.0.0.1:0", "--db", os.path.join(tmp, "coord.db"),
             "--ready-file", ready, "--log-level", "warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not (os.path.exists(ready) and open(ready).read().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"run.py: c10d-coord did not start (see {self.log.name})")
            time.sleep(0.05)
        self.url = open(ready).read().strip()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


# --- one world: run in a process of its own (WORLD_SIZE is read at import) ---

class Result(unittest.TestResult):
    """Each test's outcome, with a line on the terminal as it ends."""

    def __init__(self, out, total, world):
        super().__init__()
        self.out, self.total, self.world = out, total, world
        self.rows, self.n, self.t0 = [], 0, 0.0

    def startTest(self, test):
        super().startTest(test)
        self.t0 = time.monotonic()

    def _row(self, test, outcome, detail=""):
        self.n += 1
        name = test.id().split(".")[-1]
        took = time.monotonic() - self.t0
        self.rows.append({"name": name, "outcome": outcome, "seconds": round(took, 2),
                          "detail": detail})
        line = f"world {self.world} [{self.n}/{self.total}] {name}: {outcome} ({took:.1f} s)"
        if outcome != "passed" and detail:
            line += f": {detail[:160]}"
        print(line, file=self.out, flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._row(test, "passed")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._row(test, "skipped", reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._row(test, "failed", why(self.failures[-1][1]))

    def addError(self, test, err):
        super().addError(test, err)
        self._row(test, "failed", why(self.errors[-1][1]))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._row(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._row(test, "failed", "unexpected success")


def why(text):
    """The line of a failure's text that says what went wrong: a rank's
    exception (the suite sends their tracebacks up), else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Timeout):", ln)]
    return (errs[-1] if errs else lines[-1] if lines else "")[:400]


def run_world(args):
    """The body of `run.py --one-world`: the suite's tests named in
    args.names_file at this WORLD_SIZE; results as JSON to args.results."""
    out = os.fdopen(os.dup(1), "w")  # progress lines; everything else goes to the log
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    import suite  # after the environment is set: distributed_test reads it at import
    names = read_list(args.names_file)
    loader = unittest.TestLoader()
    known = set(loader.getTestCaseNames(suite.TestDistBackendWithSpawn))
    missing = [n for n in names if n not in known]
    if missing:
        sys.exit(f"run.py: not in torch {suite.torch.__version__}'s suite: {missing}")
    tests = unittest.TestSuite(suite.TestDistBackendWithSpawn(n) for n in names)
    result = Result(out, len(names), os.environ["WORLD_SIZE"])
    tests.run(result)
    with open(args.results, "w") as f:
        json.dump(result.rows, f)
    details = [(t.id().split(".")[-1], text) for t, text in result.failures + result.errors]
    for name, text in details:
        print(f"===== {name}\n{text}", file=sys.stderr)


def all_names(world):
    """Every test of the suite, in its order (the class's attributes,
    sorted as unittest sorts them)."""
    code = ("import suite, unittest; print('\\n'.join(unittest.TestLoader()"
            ".getTestCaseNames(suite.TestDistBackendWithSpawn)))")
    env = dict(os.environ, BACKEND="gloo", WORLD_SIZE=str(world), C10D_SUITE_GROUPS="gloo")
    p = subprocess.run([sys.executable, "-c", code], cwd=HERE, env=env, capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"run.py: listing the suite failed:\n{p.stderr[-2000:]}")
    return p.stdout.split()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="tests to run (default: the CI lists)")
    ap.add_argument("--all", action="store_true", help="every test of the suite")
    ap.add_argument("-k", dest="pattern", help="tests whose name contains this (a regex)")
    ap.add_argument("--world", type=int, action="append",
                    help="world size (repeatable; default 2, or 2 and 3 for the CI lists)")
    ap.add_argument("--groups", choices=["coord", "gloo"], default="coord",
                    help="whose process groups (default coord)")
    ap.add_argument("--init", choices=["file", "coord"], default="coord",
                    help="init_method: the coordinator's store, coord://HOST:PORT (default: "
                         "each test's run has its own), or torch's per-test file://; a list "
                         "file's init=... for one test wins")
    ap.add_argument("--start", choices=["fork", "spawn"], default="fork",
                    help="how each test's ranks start: forked from the runner, which "
                         "imported torch once (default; a test takes a second, not the "
                         "5-7 s of importing torch twice), or spawned, importing it anew, "
                         "as torch's test_distributed_spawn.py starts them")
    ap.add_argument("--timeout", type=int, default=150,
                    help="seconds a test may take before its ranks are killed (default 150)")
    ap.add_argument("--log", help="the ranks' output and each failure's full text "
                                  "(default: in the run's temporary directory, kept when "
                                  "something failed)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the run's temporary directory (database, logs) when all passed")
    ap.add_argument("--json", help="write every test's outcome here")
    ap.add_argument("--one-world", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--names-file", help=argparse.SUPPRESS)
    ap.add_argument("--results", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_world:
        return run_world(args)

    # What runs at which world size, and whether a list file says it must pass.
    LISTS = ci_lists(torch_version())
    if not (args.names or args.all or args.pattern) and not LISTS:
        print(f"torch suite: no CI lists for torch {torch_version()} (tests/torch_suite/"
              "torch<X.Y>/): nothing to run; name tests, -k or --all")
        return 0
    worlds = args.world or ([2] if (args.names or args.all or args.pattern) else [2, 3])
    plan = []  # (world, init, names, must pass)
    for w in worlds:
        if args.names or args.all or args.pattern:
            names = args.names or all_names(w)
            if args.pattern:
                names = [n for n in names if re.search(args.pattern, n)]
            plan.append((w, args.init, names, False))
        elif w in LISTS:
            rows = read_list(LISTS[w], with_init=True)
            for init in (args.init, "file" if args.init == "coord" else "coord"):
                names = [n for n, i in rows if (i or args.init) == init]
                if names:
                    plan.append((w, init, names, True))
        else:
            ap.error(f"no list for world {w}: name tests, -k or --all")
    if not any(names for _, _, names, _ in plan):
        ap.error("no test selected")

    tmp = tempfile.mkdtemp(prefix="torch-suite-")
    log_path = args.log or os.path.join(tmp, "suite.log")
    log = open(log_path, "w")
    coord = Coordinator(tmp)
    env = dict(os.environ)
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "C10D_JOB"):
        env.pop(k, None)
    # INIT_METHOD as torch's run_test.py sets it: what the suite's skips
    # look at (TestDistBackend.setUp then names each test's own file).
    # TMPDIR: the files torch's test classes make and leave (one per test)
    # go with the run's directory.
    inits = {"file": f"file://{tmp}/", "coord": "coord://" + coord.url.split("://", 1)[1]}
    env.update(BACKEND="gloo", C10D_COORD=coord.url, TMPDIR=tmp,
               C10D_SUITE_GROUPS=args.groups, C10D_SUITE_START=args.start,
               DISTRIBUTED_TESTS_DEFAULT_TIMEOUT=str(args.timeout),
               PYTHONPATH=os.pathsep.join([HERE] + [p for p in [PKG_PATH, env.get("PYTHONPATH")]
                                                    if p]))
    plane = os.environ.get("C10D_DATA_PLANE")
    groups = f"{args.groups} groups" + (f" over data plane {plane}" if plane else "")
    print(f"torch suite: {groups}, init {args.init}:// (where a list says no "
          f"other), ranks by {args.start}, coordinator {coord.url}, "
          f"log {log_path}", flush=True)
    t_all = time.monotonic()
    summary, ok = [], True
    try:
        for world, init, names, must_pass in plan:
            names_file = os.path.join(tmp, f"names-{world}-{init}.txt")
            results = os.path.join(tmp, f"results-{world}-{init}.json")
            with open(names_file, "w") as f:
                f.write("\n".join(names) + "\n")
            t0 = time.monotonic()
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one-world",
                                "--names-file", names_file, "--results", results],
                               cwd=tmp, env=dict(env, WORLD_SIZE=str(world),
                                                 INIT_METHOD=inits[init], C10D_SUITE_INIT=init),
                               stdout=sys.stdout, stderr=log)
            took = time.monotonic() - t0
            rows = json.load(open(results)) if os.path.exists(results) else []
            if p.returncode != 0 or len(rows) != len(names):
                ok = False
                done = {r["name"] for r in rows}
                rows += [{"name": n, "outcome": "failed", "seconds": 0,
                          "detail": f"not run: the runner exited {p.returncode} (see the log)"}
                         for n in names if n not in done]
            summary.append((world, init, rows, took, must_pass))
    finally:
        alive = coord.alive()
        coord.stop()
        log.close()

    print(f"\n===== torch's distributed_test.py on {args.groups} groups "
          f"(torch {torch_version()})")
    for world, init, rows, took, must_pass in summary:
        by = {o: [r for r in rows if r["outcome"] == o] for o in ("passed", "failed", "skipped")}
        print(f"world {world}, init {init}://: {len(by['passed'])} passed, "
              f"{len(by['failed'])} failed, {len(by['skipped'])} skipped, in {took:.0f} s")
        for r in by["failed"]:
            print(f"  FAILED  {r['name']}: {r['detail'][:300]}")
        for r in by["skipped"]:
            print(f"  skipped {r['name']}: {r['detail'][:120]}")
        if must_pass:
            print(f"  passed: {' '.join(r['name'] for r in by['passed'])}")
        if by["failed"] or (must_pass and by["skipped"]):
            ok = False  # a listed test must pass; a skip there hides it
    if not alive:
        print("the coordinator died during the run (its log: "
              f"{os.path.join(tmp, 'c10d-coord.log')})")
        ok = False
    kept = not ok or args.keep
    where = f" (log {log_path})" if kept or args.log else ""
    print(f"total {time.monotonic() - t_all:.0f} s: {'OK' if ok else 'FAILED'}{where}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({f"{w} {i}": rows for w, i, rows, _, _ in summary}, f, indent=1)
    if not kept:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


_version = None


def torch_version():
    global _version
    if _version:
        return _version
    p = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                       capture_output=True, text=True)
    _version = p.stdout.strip() or "?"
    return _version


if __name__ == "__main__":
    sys.exit(main())
