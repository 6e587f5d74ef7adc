"""c10d-run under a terminal's ^C: the kernel sends SIGINT to the whole
foreground process group, so every rank has it already and the launcher
must not pass it on a second time; the coordinator the launcher started
is in a group of its own, so it still serves the ranks after the ^C.

    launcher_tty.py C10D_RUN C10D_CTL
Each rank counts the SIGINTs it gets, then asks the coordinator for its
status: it exits 0 only with exactly one SIGINT and the coordinator up."""
import os
import pty
import select
import sys
import time

RANK = r'''
import os, signal, subprocess, sys, time
got = 0
def on_int(sig, frame):
    global got
    got += 1
signal.signal(signal.SIGINT, on_int)
print("ready", flush=True)
t = time.time()
while time.time() - t < 4 and got == 0:
    time.sleep(0.02)
time.sleep(0.5)  # a second SIGINT, passed on by the launcher, would come now
up = subprocess.run([os.environ["CTL"], "status"], capture_output=True).returncode == 0
print(f"sigints {got} coordinator {'up' if up else 'down'}", flush=True)
sys.exit(0 if got == 1 and up else 3)
'''


def main():
    run, ctl = sys.argv[1], sys.argv[2]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["CTL"] = ctl
        os.execv(run, [run, "-n", "2", "--", sys.executable, "-c", RANK])
    out = b""
    deadline = time.time() + 60
    sent = False
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if not sent and out.count(b"ready") >= 2:
            os.write(fd, b"\x03")  # ^C, as a person types it
            sent = True
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    print(text)
    ok = sent and text.count("sigints 1 coordinator up") == 2 and \
        "the ranks had it from the terminal" in text
    sys.exit(0 if ok else 1)


main()
