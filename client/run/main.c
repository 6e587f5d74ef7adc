/* c10d-run: launch a job's ranks on this host.
 *
 *   c10d-run -n 4 [--coord URL] [--job NAME] -- ./train --epochs 3
 *   c10d-run --nnodes 2 --node-rank 1 --nproc-per-node 8 --coord URL --job J -- ./train
 *
 * Starts a coordinator unless --coord names one, gives each rank the
 * torchrun-style environment (C10D_COORD, RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, GROUP_RANK, TORCHELASTIC_RESTART_COUNT, ...), passes
 * each line the ranks print on with a "[rankN]:" prefix (and to
 * --log-dir's files), forwards SIGINT/SIGTERM/SIGHUP to the ranks, and
 * exits with the status of the first rank that failed, saying which, led
 * by what the coordinator found (a desync names the rank that called the
 * other collective; every rank fails of it, in no useful order). The
 * other ranks get a moment to fail on their own (they learn of a dead
 * peer from the coordinator within about a second) before they are
 * stopped. --max-restarts N runs the job again after a failure, up to N
 * times: every local rank stopped, then all started again (the
 * coordinator makes the new ranks a new generation of the job once no
 * old one is alive).
 *
 * Which rank failed first is asked of the coordinator when several did:
 * it saw each rank's connection close, in order. The order the launcher
 * reaps them in is no guide: a rank's peers fail a few hundred
 * microseconds after it, and the rank itself may take longer than that to
 * finish exiting. */
#define _GNU_SOURCE /* nftw, strsignal */
#include "findings.h"
#include "job_key.h"
#include "relay.h"

#include <c10d/c10d.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2

static volatile sig_atomic_t got_signal, got_from_tty;
/* The ranks, for the handler: a signal is forwarded from inside it, so
 * none is lost between the loop's check and its poll. */
static pid_t *g_pids;
static volatile sig_atomic_t *g_done;
static int g_n;
/* A pipe to itself: SIGCHLD and the forwarded signals wake the poll that
 * waits for the ranks' output, their exits and the grace period's end. */
static int g_wake[2] = {-1, -1};

static void wake(void)
{
    int e = errno;
    if (g_wake[1] >= 0 && write(g_wake[1], "x", 1) < 0) {
        /* full: a wake-up is already pending */
    }
    errno = e;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    /* A terminal's ^C (the kernel's, to the whole foreground process
     * group) reached the ranks already: passed on again, a Python rank
     * would take a second KeyboardInterrupt inside its cleanup. */
    int from_tty = si && si->si_code == SI_KERNEL && sig == SIGINT;
    if (!got_signal)
        got_from_tty = from_tty;
    if (!got_signal && g_pids && !from_tty)
        for (int r = 0; r < g_n; r++)
            if (!g_done[r] && g_pids[r] > 0)
                kill(g_pids[r], sig); /* async-signal-safe */
    got_signal = sig;
    wake();
}

static void on_child(int sig)
{
    (void)sig;
    wake();
}

/* A whole number from min to max, or -1 after saying what is wrong. */
static long long parse_num(const char *opt, const char *v, long long min, long long max)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < min || x > max) {
        fprintf(stderr, "c10d-run: %s %s: want a whole number from %lld to %lld\n", opt, v, min,
                max);
        return -1;
    }
    return x;
}

/* Removes the launcher's temporary directory (the coordinator's log and
 * ready file, and its database unless --db put it elsewhere). */
static int remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

static void remove_dir(const char *dir)
{
    /* Depth first, no shell: the name comes from TMPDIR. */
    if (nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "c10d-run: could not remove %s: %s\n", dir, strerror(errno));
}

/* A launcher killed with SIGKILL leaves its temporary directory behind
 * (its ranks and coordinator go with it: PR_SET_PDEATHSIG). The next
 * launcher in the same TMPDIR removes such directories: ours (same
 * user), named c10d-run-PID-*, whose launcher PID is gone and whose
 * database nobody holds (a coordinator keeps an flock on DB.lock; one
 * still shutting down keeps its directory until next time). */
static void remove_stale_dirs(const char *tmp)
{
    DIR *d = opendir(tmp);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int pid, at = 0;
        char path[PATH_MAX], lock[PATH_MAX + 32];
        struct stat st;
        if (sscanf(e->d_name, "c10d-run-%d-%n", &pid, &at) != 1 || !at || pid <= 0 ||
            strlen(e->d_name + at) != 6 || (kill(pid, 0) == 0 || errno != ESRCH))
            continue;
        if (snprintf(path, sizeof path, "%s/%s", tmp, e->d_name) >= (int)sizeof path ||
            lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
            continue;
        snprintf(lock, sizeof lock, "%s/c10d-run.db.lock", path);
        int fd = open(lock, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd); /* a coordinator still has it */
            continue;
        }
        if (fd >= 0)
            close(fd);
        remove_dir(path);
    }
    if (d)
        closedir(d);
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: c10d-run -n N [options] -- PROGRAM [ARGS...]\n"
            "Runs N ranks of PROGRAM on this host as one c10d job (or as this host's part\n"
            "of a job across hosts: --nnodes).\n"
            "\n"
            "  -n, --nproc N        ranks on this host (the world size, with --nnodes 1);\n"
            "                       also --nproc-per-node, --nproc_per_node\n"
            "      --nnodes N       hosts in the job, each running its own c10d-run\n"
            "                       (default 1; above 1 --coord and --job are required)\n"
            "      --node-rank R    this host's number, 0..nnodes-1 (default 0; also\n"
            "                       --node_rank): its ranks are R*N .. R*N+N-1\n"
            "      --coord URL      use this coordinator instead of starting one (a\n"
            "                       replicated one: its replicas' URLs, comma-separated)\n"
            "      --job NAME       job name (default run-<pid>)\n"
            "      --db PATH        database of the coordinator started here\n"
            "                       (default: a file in a temporary directory, removed after)\n"
            "      --coord-bin PATH the c10d-coord to start (default: next to c10d-run,\n"
            "                       else the build tree's, else in PATH)\n"
            "      --grace MS       after a rank fails, how long the others get to exit on\n"
            "                       their own before SIGTERM (default 5000)\n"
            "      --max-restarts K after a failure, once every rank here is gone (--grace,\n"
            "                       then SIGTERM), start them all again, up to K times\n"
            "                       (default 0; also --max_restarts)\n"
            "      --log-dir DIR    also write each rank's output, as it printed it, to\n"
            "                       DIR/JOB/attempt_A/LOCAL_RANK/{stdout,stderr}.log\n"
            "                       (also --log_dir)\n"
            "      --no-prefix      pass the ranks' output on as it is, without \"[rankN]:\"\n"
            "  -q, --quiet          say nothing unless something fails\n"
            "  -h, --help           show this help\n"
            "  -V, --version        show the version\n"
            "\n"
            "--master-addr and --master-port (torchrun's) are refused: the ranks meet at\n"
            "the coordinator, --coord URL or the one started here.\n"
            "Each line a rank prints comes out whole, on the launcher's stdout or stderr\n"
            "as the rank printed it, after \"[rankN]:\" (N: its RANK), as torchrun --tee.\n"
            "Each rank gets C10D_COORD, C10D_JOB, RANK, LOCAL_RANK, WORLD_SIZE,\n"
            "LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE,\n"
            "ROLE_NAME, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS and\n"
            "TORCHELASTIC_RUN_ID (the job), and keeps C10D_TOKEN and C10D_TIMEOUT_MS;\n"
            "C10D_JOB_KEY, a random key per launch unless set (with --nnodes > 1, set\n"
            "the same one on every host): only ranks with it join the job's runs.\n"
            "--coord's URL and --job's name (at most %d bytes) are checked first.\n"
            "SIGINT, SIGTERM and SIGHUP are passed on to the ranks; the ranks and the\n"
            "coordinator started here die with the launcher, even one killed with SIGKILL\n"
            "(its temporary directory is then removed by the next c10d-run).\n"
            "When the job fails, the first line says what the coordinator found (a desync:\n"
            "who called what), if anything; then which rank failed first, and every\n"
            "rank's exit code.\n"
            "Exit status: 0 when every rank exited 0; else the exit status of the rank\n"
            "that failed first (in the last attempt), as the coordinator saw them go\n"
            "(128+N if killed by signal N); 2 bad usage; 1 launch failure.\n",
            C10D_MAX_JOB_BYTES);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The c10d-coord next to this executable, else the build tree's, else PATH's. */
static void find_coord(char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *dir = dirname(self);
        const char *cands[] = {"%s/c10d-coord", "%s/../server/c10d-coord"};
        for (size_t i = 0; i < 2; i++) {
            snprintf(out, cap, cands[i], dir);
            if (access(out, X_OK) == 0)
                return;
        }
    }
    snprintf(out, cap, "c10d-coord");
}

static pid_t start_coord(const char *bin, const char *db, const char *dir, char *url, size_t cap)
{
    char ready[PATH_MAX], log[PATH_MAX];
    if (snprintf(ready, sizeof ready, "%s/coord.ready", dir) >= (int)sizeof ready ||
        snprintf(log, sizeof log, "%s/coord.log", dir) >= (int)sizeof log) {
        fprintf(stderr, "c10d-run: the temporary directory's name is too long\n");
        return -1;
    }
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "a", stderr);
        (void)f;
        /* The coordinator goes with the launcher, even one killed with
         * SIGKILL (or by SIGPIPE in `c10d-run ... | head -1`); if that
         * happened before this line, now. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != launcher)
            _exit(1);
        /* A process group of its own: a terminal's ^C must not stop the
         * coordinator before the ranks it serves (they would retry it
         * until SIGTERM); the launcher stops it after them. */
        setpgid(0, 0);
        execlp(bin, bin, "--listen", "tcp://127.0.0.1:0", "--db", db, "--ready-file", ready,
               (char *)NULL);
        fprintf(stderr, "cannot run %s: %s\n", bin, strerror(errno));
        fflush(stderr); /* a file now, buffered: _exit would drop it */
        _exit(127);
    }
    int reaped = 0;
    for (int i = 0; i < 1000; i++) {
        FILE *f = fopen(ready, "r");
        if (f) {
            int ok = fgets(url, (int)cap, f) != NULL;
            fclose(f);
            if (ok) {
                url[strcspn(url, "\n")] = '\0';
                return pid;
            }
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            reaped = 1;
            break;
        }
        usleep(10000);
    }
    if (!reaped) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    /* Say why, from its log: the log goes with the temporary directory. */
    fprintf(stderr, "c10d-run: the coordinator (%s) did not start:\n", bin);
    FILE *f = fopen(log, "r");
    char line[1024];
    int lines = 0;
    while (f && fgets(line, sizeof line, f))
        lines++, fprintf(stderr, "  %s", line);
    if (f)
        fclose(f);
    if (!lines)
        fprintf(stderr, "  (it wrote nothing)\n");
    return -1;
}

static void describe_status(int st, char *out, size_t cap, int *code)
{
    if (WIFEXITED(st)) {
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(st));
        *code = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
        snprintf(out, cap, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
        *code = 128 + WTERMSIG(st);
    } else {
        snprintf(out, cap, "ended with wait status %d", st);
        *code = 1;
    }
}

/* mkdir -p. 0, or -1 with errno set. */
static int make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

typedef struct run_opts {
    int nproc;        /* ranks here */
    int nnodes;       /* hosts in the job */
    int node_rank;    /* this host's number: its ranks are node_rank*nproc .. +nproc-1 */
    int grace;        /* ms the other ranks get after a failure */
    int max_restarts;
    int quiet;
    int prefix;       /* "[rankN]:" before each line */
    const char *coord, *job, *log_dir;
    char **prog;
} run_opts;

/* How an attempt ended. */
typedef struct attempt_end {
    int first_failed; /* global rank, -1 when none failed */
    int code;         /* the launcher's exit status for it */
    int forwarded;    /* the signal passed on to the ranks, 0 for none */
} attempt_end;

/* The ranks' streams for attempt `attempt`: relays when their output is
 * captured (prefix or log files), else none (rel[] fds -1). */
static int open_relays(const run_opts *o, int attempt, relay *rel, char (*prefix)[32])
{
    int capture = o->prefix || o->log_dir;
    for (int l = 0; l < o->nproc; l++) {
        relay *out = &rel[2 * l], *err = &rel[2 * l + 1];
        if (!capture)
            continue;
        snprintf(prefix[l], sizeof prefix[l], o->prefix ? "[rank%d]:" : "",
                 o->node_rank * o->nproc + l);
        char dir[PATH_MAX], po[PATH_MAX + 16], pe[PATH_MAX + 16];
        if (o->log_dir) {
            if (snprintf(dir, sizeof dir, "%s/%s/attempt_%d/%d", o->log_dir, o->job, attempt, l) >=
                (int)sizeof dir) {
                fprintf(stderr, "c10d-run: --log-dir %s: the name is too long\n", o->log_dir);
                return -1;
            }
            if (make_dirs(dir) != 0) {
                fprintf(stderr, "c10d-run: --log-dir: cannot create %s: %s\n", dir,
                        strerror(errno));
                return -1;
            }
            snprintf(po, sizeof po, "%s/stdout.log", dir);
            snprintf(pe, sizeof pe, "%s/stderr.log", dir);
        }
        if (relay_open(out, STDOUT_FILENO, prefix[l], o->log_dir ? po : NULL) != 0 ||
            relay_open(err, STDERR_FILENO, prefix[l], o->log_dir ? pe : NULL) != 0)
            return -1;
    }
    return 0;
}

/* Every exit code, one line: what the summary ends with. */
static void print_codes(const run_opts *o, const int *codes)
{
    size_t cap = (size_t)o->nproc * 32 + 64, off = 0;
    char *line = malloc(cap);
    if (!line)
        return;
    off += (size_t)snprintf(line, cap, "c10d-run: exit codes:");
    for (int l = 0; l < o->nproc; l++)
        off += (size_t)snprintf(line + off, cap - off, "%s rank %d: %d", l ? "," : "",
                                o->node_rank * o->nproc + l, codes[l]);
    snprintf(line + off, cap - off, "\n");
    fputs(line, stderr);
    free(line);
}

/* One run of the job's local ranks, until every one has exited. *gen: the
 * generation of the last finding said (updated when this attempt's is). */
static int run_attempt(const run_opts *o, int attempt, pid_t *pids,
                       volatile sig_atomic_t *done, uint64_t *gen, attempt_end *end)
{
    int n = o->nproc, base = o->node_rank * o->nproc;
    relay *rel = calloc((size_t)n * 2, sizeof *rel);
    char(*prefix)[32] = calloc((size_t)n, sizeof *prefix);
    int *failed = calloc((size_t)n, sizeof *failed), *codes = calloc((size_t)n, sizeof *codes);
    struct pollfd *pfd = calloc((size_t)n * 2 + 1, sizeof *pfd);
    int rc = -1;
    end->first_failed = -1;
    end->code = 0;
    end->forwarded = 0;
    if (!rel || !prefix || !failed || !codes || !pfd)
        goto cleanup;
    for (int i = 0; i < 2 * n; i++) /* none open: what cleanup closes */
        rel[i] = (relay){.fd = -1, .child_fd = -1, .log = -1, .prefix = ""};
    for (int l = 0; l < n; l++) {
        pids[l] = 0;
        done[l] = 0;
    }
    if (open_relays(o, attempt, rel, prefix) != 0)
        goto cleanup;
    char num[32];
    snprintf(num, sizeof num, "%d", attempt);
    setenv("TORCHELASTIC_RESTART_COUNT", num, 1);
    pid_t launcher = getpid();
    for (int l = 0; l < n; l++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* A rank goes with its launcher, even one killed with SIGKILL:
             * nobody else would stop it, and it would retry a coordinator
             * gone with the launcher until its timeout. SIGKILL, as the
             * launcher's own escalation would end; if the launcher died
             * before this line, now. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != launcher)
                _exit(1);
            if (rel[2 * l].child_fd >= 0 && (dup2(rel[2 * l].child_fd, STDOUT_FILENO) < 0 ||
                                             dup2(rel[2 * l + 1].child_fd, STDERR_FILENO) < 0))
                _exit(127);
            snprintf(num, sizeof num, "%d", base + l);
            setenv("RANK", num, 1);
            setenv("ROLE_RANK", num, 1);
            snprintf(num, sizeof num, "%d", l);
            setenv("LOCAL_RANK", num, 1);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            signal(SIGPIPE, SIG_DFL);
            signal(SIGCHLD, SIG_DFL);
            execvp(o->prog[0], o->prog);
            fprintf(stderr, "c10d-run: cannot run %s: %s\n", o->prog[0], strerror(errno));
            _exit(127);
        }
        if (pid < 0) {
            fprintf(stderr, "c10d-run: fork: %s\n", strerror(errno));
            pid = 0; /* counted as exited below */
        }
        pids[l] = pid;
        if (rel[2 * l].child_fd >= 0) { /* the rank's ends: its end of file is its own */
            close(rel[2 * l].child_fd);
            close(rel[2 * l + 1].child_fd);
            rel[2 * l].child_fd = rel[2 * l + 1].child_fd = -1;
        }
        if (got_signal && pid > 0) /* came while forking: this rank missed it */
            kill(pid, got_signal);
    }
    if (!o->quiet && attempt == 0)
        fprintf(stderr, "c10d-run: job %s, %d rank%s of %s\n", o->job, n, n == 1 ? "" : "s",
                o->prog[0]);

    int left = n, n_failed = 0, first_local = -1;
    for (int l = 0; l < n; l++)
        if (pids[l] == 0) { /* never started */
            done[l] = 1, left--, codes[l] = 1, failed[n_failed++] = base + l;
            if (first_local < 0)
                first_local = l, end->code = 1;
        }
    long long fail_at = first_local >= 0 ? now_ms() : 0;
    int stage = 0; /* 0 running, 1 SIGTERM sent, 2 SIGKILL sent */
    while (left > 0) {
        nfds_t np = 0;
        pfd[np++] = (struct pollfd){g_wake[0], POLLIN, 0};
        for (int i = 0; i < 2 * n; i++)
            if (rel[i].fd >= 0)
                pfd[np++] = (struct pollfd){rel[i].fd, POLLIN, 0};
        int timeout = -1;
        if (fail_at && stage < 2) {
            long long t = fail_at + o->grace + (stage ? 3000 : 0) - now_ms();
            timeout = t < 0 ? 0 : t > 60000 ? 60000 : (int)t;
        }
        if (poll(pfd, np, timeout) > 0 && (pfd[0].revents & POLLIN)) {
            char drain[64];
            while (read(g_wake[0], drain, sizeof drain) > 0) {
            }
        }
        /* Before the reaping: the ranks the signal ends are its, not failures of the job. */
        if (got_signal && !end->forwarded) { /* the handler forwarded it */
            end->forwarded = got_signal;
            fprintf(stderr, "c10d-run: %s: %s\n", strsignal(got_signal),
                    got_from_tty ? "the ranks had it from the terminal" : "forwarded to the ranks");
            if (!fail_at)
                fail_at = now_ms();
        }
        for (int i = 0; i < 2 * n; i++)
            relay_read(&rel[i]);
        int st;
        /* Each rank by its pid: a coordinator this launcher started is a
         * child too, and reaping it here would leave its pid free for
         * another process by the time it is stopped. */
        for (int k = 0; k < n; k++) {
            if (done[k] || pids[k] <= 0 || waitpid(pids[k], &st, WNOHANG) != pids[k])
                continue;
            {
                int l = k;
                pid_t p = pids[k];
                /* What it printed before it went comes before the word of it. */
                relay_read(&rel[2 * l]);
                relay_read(&rel[2 * l + 1]);
                done[l] = 1;
                left--;
                int r = base + l, code;
                char how[128];
                describe_status(st, how, sizeof how, &code);
                codes[l] = code;
                if (code != 0 && stage == 0)
                    failed[n_failed++] = r;
                if (code != 0 && first_local < 0 && stage == 0) {
                    /* The coordinator's finding first: a desync fails every
                     * rank, and the one that exits first is no culprit. */
                    char finding[1200];
                    uint64_t g = 0;
                    if (!end->forwarded &&
                        run_coord_finding(o->coord, o->job, *gen, &g, finding, sizeof finding)) {
                        fprintf(stderr, "c10d-run: job %s failed: the coordinator found %s\n",
                                o->job, finding);
                        *gen = g;
                    }
                    first_local = l;
                    end->code = code;
                    fail_at = now_ms();
                    fprintf(stderr, "c10d-run: rank %d (pid %d) %s%s\n", r, (int)p, how,
                            left ? "; waiting for the others" : "");
                } else if (code != 0 && !o->quiet) {
                    fprintf(stderr, "c10d-run: rank %d (pid %d) %s\n", r, (int)p, how);
                }
            }
        }
        if (fail_at && stage == 0 && now_ms() - fail_at >= o->grace && left > 0) {
            fprintf(stderr, "c10d-run: stopping %d rank%s still running after %d ms\n", left,
                    left == 1 ? "" : "s", o->grace);
            for (int l = 0; l < n; l++)
                if (!done[l])
                    kill(pids[l], SIGTERM);
            stage = 1;
        } else if (stage == 1 && now_ms() - fail_at >= o->grace + 3000) {
            for (int l = 0; l < n; l++)
                if (!done[l])
                    kill(pids[l], SIGKILL);
            stage = 2;
        }
    }
    /* What is left in the pipes (a rank's child may hold one open: what it
     * prints later is not waited for). */
    for (int i = 0; i < 2 * n; i++) {
        relay_read(&rel[i]);
        relay_close(&rel[i]);
    }
    if (n_failed > 1) {
        char why[512] = "";
        int r = run_first_to_go(o->coord, o->job, failed, n_failed, why, sizeof why);
        if (r >= base && r < base + n && r != base + first_local) {
            fprintf(stderr, "c10d-run: rank %d failed first (the coordinator saw it %s)\n", r,
                    why);
            first_local = r - base;
            end->code = codes[first_local];
        }
    }
    if (first_local >= 0) {
        end->first_failed = base + first_local;
        print_codes(o, codes);
    }
    rc = 0;
cleanup:
    if (rel && prefix && failed && codes && pfd)
        for (int i = 0; i < 2 * n; i++)
            relay_close(&rel[i]);
    free(rel);
    free(prefix);
    free(failed);
    free(codes);
    free(pfd);
    return rc;
}

enum {
    OPT_COORD = 256,
    OPT_JOB,
    OPT_DB,
    OPT_COORD_BIN,
    OPT_GRACE,
    OPT_NNODES,
    OPT_NODE_RANK,
    OPT_MAX_RESTARTS,
    OPT_LOG_DIR,
    OPT_NO_PREFIX,
    OPT_MASTER,
};

int main(int argc, char **argv)
{
    run_opts o = {.nnodes = 1, .grace = 5000, .prefix = 1};
    const char *db = NULL, *coord_bin = NULL;
    static const struct option longopts[] = {
        {"nproc", required_argument, 0, 'n'},
        {"nproc-per-node", required_argument, 0, 'n'},
        {"nproc_per_node", required_argument, 0, 'n'},
        {"nnodes", required_argument, 0, OPT_NNODES},
        {"node-rank", required_argument, 0, OPT_NODE_RANK},
        {"node_rank", required_argument, 0, OPT_NODE_RANK},
        {"coord", required_argument, 0, OPT_COORD},
        {"job", required_argument, 0, OPT_JOB},
        {"db", required_argument, 0, OPT_DB},
        {"coord-bin", required_argument, 0, OPT_COORD_BIN},
        {"grace", required_argument, 0, OPT_GRACE},
        {"max-restarts", required_argument, 0, OPT_MAX_RESTARTS},
        {"max_restarts", required_argument, 0, OPT_MAX_RESTARTS},
        {"log-dir", required_argument, 0, OPT_LOG_DIR},
        {"log_dir", required_argument, 0, OPT_LOG_DIR},
        {"no-prefix", no_argument, 0, OPT_NO_PREFIX},
        {"master-addr", required_argument, 0, OPT_MASTER},
        {"master_addr", required_argument, 0, OPT_MASTER},
        {"master-port", required_argument, 0, OPT_MASTER},
        {"master_port", required_argument, 0, OPT_MASTER},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    int c, li = 0;
    long long x;
    while ((c = getopt_long(argc, argv, "+n:qhV", longopts, &li)) != -1) {
        switch (c) {
        case 'n':
            if ((o.nproc = (int)parse_num("-n", optarg, 1, 4096)) < 0)
                return EXIT_USAGE;
            break;
        case OPT_NNODES:
            if ((x = parse_num("--nnodes", optarg, 1, 65536)) < 0)
                return EXIT_USAGE;
            o.nnodes = (int)x;
            break;
        case OPT_NODE_RANK:
            if ((x = parse_num("--node-rank", optarg, 0, 65535)) < 0)
                return EXIT_USAGE;
            o.node_rank = (int)x;
            break;
        case OPT_COORD: o.coord = optarg; break;
        case OPT_JOB: o.job = optarg; break;
        case OPT_DB: db = optarg; break;
        case OPT_COORD_BIN: coord_bin = optarg; break;
        case OPT_GRACE:
            if ((o.grace = (int)parse_num("--grace", optarg, 0, 3600000)) < 0)
                return EXIT_USAGE;
            break;
        case OPT_MAX_RESTARTS:
            if ((o.max_restarts = (int)parse_num("--max-restarts", optarg, 0, 1000000)) < 0)
                return EXIT_USAGE;
            break;
        case OPT_LOG_DIR: o.log_dir = optarg; break;
        case OPT_NO_PREFIX: o.prefix = 0; break;
        case OPT_MASTER:
            fprintf(stderr, "c10d-run: --%s: c10d-run has no master: the ranks meet at the "
                    "coordinator (--coord URL, or the one it starts here)\n",
                    longopts[li].name);
            return EXIT_USAGE;
        case 'q': o.quiet = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("c10d-run %s\n", c10d_version()); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    int n = o.nproc;
    if (n < 1 || n > 4096 || optind >= argc) {
        fprintf(stderr, "c10d-run: %s\n", n < 1 || n > 4096 ? "-n N (1..4096) is required"
                                                            : "no program given after --");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (o.node_rank >= o.nnodes) {
        fprintf(stderr, "c10d-run: --node-rank %d: want 0 to %d (--nnodes %d)\n", o.node_rank,
                o.nnodes - 1, o.nnodes);
        return EXIT_USAGE;
    }
    if ((long long)o.nnodes * n > 1 << 20) {
        fprintf(stderr, "c10d-run: --nnodes %d of %d ranks: at most %d ranks in all\n", o.nnodes,
                n, 1 << 20);
        return EXIT_USAGE;
    }
    if (o.nnodes > 1 && (!o.coord || !o.job)) {
        /* Every host's launcher must name the same coordinator and job:
         * one started here, or a job named run-<pid>, is this host's alone. */
        fprintf(stderr, "c10d-run: --nnodes %d: name the coordinator and the job every host "
                "shares (--coord URL --job NAME)\n", o.nnodes);
        return EXIT_USAGE;
    }
    if (o.job && (!*o.job || strlen(o.job) > C10D_MAX_JOB_BYTES)) {
        fprintf(stderr, "c10d-run: --job: a job name is 1 to %d bytes (C10D_MAX_JOB_BYTES); "
                "this one is %zu\n", C10D_MAX_JOB_BYTES, strlen(o.job));
        return EXIT_USAGE;
    }
    if (o.coord) {
        /* A coordinator named with --coord: a URL that cannot be one is
         * refused now (the ranks would retry it until their timeout); one
         * where nothing answers is said at once (the ranks wait for it up
         * to C10D_TIMEOUT_MS, saying so). */
        c10d_store *probe = NULL;
        c10d_store_opts po = C10D_STORE_OPTS_INIT;
        po.timeout_ms = 2000;
        c10d_status st = c10d_store_connect(&probe, o.coord, &po);
        if (st == C10D_EINVAL || st == C10D_EPROTO) { /* EPROTO: a server that is no coordinator */
            fprintf(stderr, "c10d-run: --coord: %s\n", c10d_errmsg());
            return EXIT_USAGE;
        }
        if (st != C10D_OK)
            fprintf(stderr, "c10d-run: warning: %s; the ranks will keep trying\n",
                    c10d_errmsg());
        c10d_store_close(probe);
    }
    o.prog = argv + optind;

    char dir[PATH_MAX / 2], url[512], dbpath[PATH_MAX], jobname[64], bin[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    /* The launcher's pid in the name: what remove_stale_dirs goes by. */
    snprintf(dir, sizeof dir, "%s/c10d-run-%d-XXXXXX", tmp, (int)getpid());
    pid_t coord_pid = -1;
    if (!o.coord) {
        remove_stale_dirs(tmp);
        if (!mkdtemp(dir)) {
            perror("c10d-run: mkdtemp");
            return 1;
        }
        if (snprintf(dbpath, sizeof dbpath, "%s/c10d-run.db", dir) >= (int)sizeof dbpath)
            return 1;
        if (coord_bin)
            snprintf(bin, sizeof bin, "%s", coord_bin);
        else
            find_coord(bin, sizeof bin);
        if ((coord_pid = start_coord(bin, db ? db : dbpath, dir, url, sizeof url)) < 0) {
            remove_dir(dir);
            return 1;
        }
        o.coord = url;
        if (!o.quiet)
            fprintf(stderr, "c10d-run: coordinator %s (pid %d, database %s)\n", o.coord,
                    (int)coord_pid, db ? db : dbpath);
    }
    if (!o.job) {
        snprintf(jobname, sizeof jobname, "run-%d", (int)getpid());
        o.job = jobname;
    }

    /* No SA_RESTART: a signal interrupts the poll below; SIGCHLD and the
     * forwarded signals also wake it through g_wake, so none that comes
     * between the loop's checks and its poll is slept through. */
    signal(SIGPIPE, SIG_IGN); /* a closed stderr must not kill the launcher (ranks: default) */
    if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        perror("c10d-run: pipe");
        return 1;
    }
    struct sigaction sa = {0};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    struct sigaction sa_child = {0};
    sa_child.sa_handler = on_child;
    sa_child.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa_child, NULL);

    pid_t *pids = calloc((size_t)n, sizeof *pids);
    volatile sig_atomic_t *done = calloc((size_t)n, sizeof *done);
    if (!pids || !done)
        return 1;
    g_done = done;
    g_n = n;
    g_pids = pids;
    char num[32];
    setenv("C10D_COORD", o.coord, 1);
    setenv("C10D_JOB", o.job, 1);
    setenv("TORCHELASTIC_RUN_ID", o.job, 1);
    setenv("ROLE_NAME", "default", 1);
    snprintf(num, sizeof num, "%d", n * o.nnodes);
    setenv("WORLD_SIZE", num, 1);
    setenv("ROLE_WORLD_SIZE", num, 1);
    snprintf(num, sizeof num, "%d", n);
    setenv("LOCAL_WORLD_SIZE", num, 1);
    snprintf(num, sizeof num, "%d", o.node_rank);
    setenv("GROUP_RANK", num, 1);
    snprintf(num, sizeof num, "%d", o.nnodes);
    setenv("GROUP_WORLD_SIZE", num, 1);
    snprintf(num, sizeof num, "%d", o.max_restarts);
    setenv("TORCHELASTIC_MAX_RESTARTS", num, 1);
    /* One key for the launch: its restarts are new runs of the same job
     * and its ranks carry it into each. */
    if (run_job_key(o.nnodes, o.quiet) != 0)
        return 1;

    attempt_end end = {-1, 1, 0};
    uint64_t gen = 0;
    int launch_failed = 0;
    for (int attempt = 0; attempt <= o.max_restarts; attempt++) {
        if (run_attempt(&o, attempt, pids, done, &gen, &end) != 0) {
            launch_failed = 1; /* said why */
            break;
        }
        if (end.first_failed < 0 || end.forwarded || got_signal || attempt == o.max_restarts)
            break;
        fprintf(stderr, "c10d-run: restarting the job's %d rank%s here (restart %d of %d)\n", n,
                n == 1 ? "" : "s", attempt + 1, o.max_restarts);
    }
    int code = end.code;
    if (coord_pid > 0) {
        kill(coord_pid, SIGTERM);
        waitpid(coord_pid, NULL, 0);
        remove_dir(dir); /* with --db the database is elsewhere and stays */
    }
    if (launch_failed)
        code = 1;
    else if (end.first_failed < 0 && end.forwarded)
        code = 128 + end.forwarded;
    else if (end.first_failed < 0 && !o.quiet)
        fprintf(stderr, "c10d-run: all %d rank%s finished\n", n, n == 1 ? "" : "s");
    g_pids = NULL;
    free(pids);
    free((void *)done);
    return code;
}
