/* c10d-run: launch a local job of N ranks.
 *
 *   c10d-run -n 4 [--coord URL] [--job NAME] -- ./train --epochs 3
 *
 * Starts a coordinator unless --coord names one, gives each rank the
 * torchrun-style environment (C10D_COORD, RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, C10D_JOB), forwards SIGINT/SIGTERM/SIGHUP to the ranks,
 * and exits with the status of the first rank that failed, saying which.
 * The other ranks get a moment to fail on their own (they learn of a dead
 * peer from the coordinator within about a second) before they are
 * stopped.
 *
 * Which rank failed first is asked of the coordinator when several did:
 * it saw each rank's connection close, in order. The order the launcher
 * reaps them in is no guide: a rank's peers fail a few hundred
 * microseconds after it, and the rank itself may take longer than that to
 * finish exiting. */
#define _GNU_SOURCE /* nftw, strsignal */
#include <c10d/c10d.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
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

static volatile sig_atomic_t got_signal;
/* The ranks, for the handler: a signal is forwarded from inside it, so
 * none is lost between the loop's check and its blocking waitpid. */
static pid_t *g_pids;
static volatile sig_atomic_t *g_done;
static int g_n;

static void on_signal(int sig)
{
    if (!got_signal && g_pids)
        for (int r = 0; r < g_n; r++)
            if (!g_done[r] && g_pids[r] > 0)
                kill(g_pids[r], sig); /* async-signal-safe */
    got_signal = sig;
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

static void on_alarm(int sig)
{
    (void)sig;
}

/* Wakes the blocking waitpid in ms milliseconds. */
static void alarm_in(long long ms)
{
    struct itimerval it = {{0, 0}, {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000}};
    if (ms <= 0)
        it.it_value.tv_usec = 1000;
    setitimer(ITIMER_REAL, &it, NULL);
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: c10d-run -n N [options] -- PROGRAM [ARGS...]\n"
            "Runs N ranks of PROGRAM on this host as one c10d job.\n"
            "\n"
            "  -n, --nproc N        number of ranks (the world size)\n"
            "      --coord URL      use this coordinator instead of starting one (a\n"
            "                       replicated one: its replicas' URLs, comma-separated)\n"
            "      --job NAME       job name (default run-<pid>)\n"
            "      --db PATH        database of the coordinator started here\n"
            "                       (default: a file in a temporary directory, removed after)\n"
            "      --coord-bin PATH the c10d-coord to start (default: next to c10d-run,\n"
            "                       else the build tree's, else in PATH)\n"
            "      --grace MS       after a rank fails, how long the others get to exit on\n"
            "                       their own before SIGTERM (default 5000)\n"
            "  -q, --quiet          say nothing unless something fails\n"
            "  -h, --help           show this help\n"
            "  -V, --version        show the version\n"
            "\n"
            "Each rank gets C10D_COORD, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and\n"
            "C10D_JOB (and keeps C10D_TOKEN, C10D_TIMEOUT_MS from this environment).\n"
            "--coord's URL and --job's name (at most %d bytes) are checked first.\n"
            "SIGINT, SIGTERM and SIGHUP are passed on to the ranks; the ranks and the\n"
            "coordinator started here die with the launcher, even one killed with SIGKILL\n"
            "(its temporary directory is then removed by the next c10d-run).\n"
            "Exit status: 0 when every rank exited 0; else the exit status of the rank\n"
            "that failed first, as the coordinator saw them go (128+N if killed by\n"
            "signal N); 2 bad usage; 1 launch failure.\n", C10D_MAX_JOB_BYTES);
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

/* Of the ranks in failed[] (n_failed of them), the one the coordinator
 * saw go first (dead or left, earliest), or -1 if it cannot say. */
static int first_to_go(const char *coord, const char *job, const int *failed, int n_failed,
                       char *why, size_t cap)
{
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 2000;
    if (c10d_store_connect(&s, coord, &o) != C10D_OK)
        return -1;
    c10d_job_info *jobs = NULL;
    size_t nj = 0;
    int best = -1;
    int64_t best_ms = 0;
    if (c10d_store_jobs(s, job, &jobs, &nj) == C10D_OK) {
        for (size_t j = 0; j < nj; j++)
            for (size_t m = 0; m < jobs[j].n_members; m++) {
                const c10d_member_info *mi = &jobs[j].members[m];
                int was_failed = 0;
                for (int k = 0; k < n_failed; k++)
                    was_failed |= failed[k] == mi->rank;
                if (!was_failed || (mi->state != C10D_MEMBER_LEFT && mi->state != C10D_MEMBER_DEAD))
                    continue;
                if (best < 0 || mi->changed_ms < best_ms) {
                    best = mi->rank;
                    best_ms = mi->changed_ms;
                    snprintf(why, cap, "%s: %s", c10d_member_state_name(mi->state),
                             mi->reason ? mi->reason : "");
                }
            }
        c10d_free(jobs);
    }
    c10d_store_close(s);
    return best;
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

int main(int argc, char **argv)
{
    int n = 0, quiet = 0, grace = 5000;
    const char *coord = NULL, *job = NULL, *db = NULL, *coord_bin = NULL;
    static const struct option longopts[] = {
        {"nproc", required_argument, 0, 'n'}, {"coord", required_argument, 0, 'c'},
        {"job", required_argument, 0, 'j'},   {"db", required_argument, 0, 'd'},
        {"coord-bin", required_argument, 0, 'b'}, {"grace", required_argument, 0, 'g'},
        {"quiet", no_argument, 0, 'q'},       {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},     {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "+n:qhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if ((n = (int)parse_num("-n", optarg, 1, 4096)) < 0)
                return EXIT_USAGE;
            break;
        case 'c': coord = optarg; break;
        case 'j': job = optarg; break;
        case 'd': db = optarg; break;
        case 'b': coord_bin = optarg; break;
        case 'g':
            if ((grace = (int)parse_num("--grace", optarg, 0, 3600000)) < 0)
                return EXIT_USAGE;
            break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("c10d-run %s\n", c10d_version()); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (n < 1 || n > 4096 || optind >= argc) {
        fprintf(stderr, "c10d-run: %s\n", n < 1 || n > 4096 ? "-n N (1..4096) is required"
                                                            : "no program given after --");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (job && (!*job || strlen(job) > C10D_MAX_JOB_BYTES)) {
        fprintf(stderr, "c10d-run: --job: a job name is 1 to %d bytes (C10D_MAX_JOB_BYTES); "
                "this one is %zu\n", C10D_MAX_JOB_BYTES, strlen(job));
        return EXIT_USAGE;
    }
    if (coord) {
        /* A coordinator named with --coord: a URL that cannot be one is
         * refused now (the ranks would retry it until their timeout); one
         * where nothing answers is said at once (the ranks wait for it up
         * to C10D_TIMEOUT_MS, saying so). */
        c10d_store *probe = NULL;
        c10d_store_opts po = C10D_STORE_OPTS_INIT;
        po.timeout_ms = 2000;
        c10d_status st = c10d_store_connect(&probe, coord, &po);
        if (st == C10D_EINVAL) {
            fprintf(stderr, "c10d-run: --coord: %s\n", c10d_errmsg());
            return EXIT_USAGE;
        }
        if (st != C10D_OK)
            fprintf(stderr, "c10d-run: warning: %s; the ranks will keep trying\n",
                    c10d_errmsg());
        c10d_store_close(probe);
    }
    char **prog = argv + optind;

    char dir[PATH_MAX / 2], url[512], dbpath[PATH_MAX], jobname[64], bin[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    /* The launcher's pid in the name: what remove_stale_dirs goes by. */
    snprintf(dir, sizeof dir, "%s/c10d-run-%d-XXXXXX", tmp, (int)getpid());
    pid_t coord_pid = -1;
    if (!coord) {
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
        coord = url;
        if (!quiet)
            fprintf(stderr, "c10d-run: coordinator %s (pid %d, database %s)\n", coord,
                    (int)coord_pid, db ? db : dbpath);
    }
    if (!job) {
        snprintf(jobname, sizeof jobname, "run-%d", (int)getpid());
        job = jobname;
    }

    /* No SA_RESTART: a signal (or the alarm that ends a grace period)
     * interrupts the blocking waitpid below. Waiting blocked, not polling,
     * is what makes the first rank reaped the first that exited: its
     * peers fail a few milliseconds after it, never before. */
    signal(SIGPIPE, SIG_IGN); /* a closed stderr must not kill the launcher (ranks: default) */
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    struct sigaction sa_alarm = {0};
    sa_alarm.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa_alarm, NULL);

    pid_t *pids = calloc((size_t)n, sizeof *pids);
    volatile sig_atomic_t *done = calloc((size_t)n, sizeof *done);
    if (!pids || !done)
        return 1;
    g_done = done;
    g_n = n;
    char num[32];
    setenv("C10D_COORD", coord, 1);
    setenv("C10D_JOB", job, 1);
    snprintf(num, sizeof num, "%d", n);
    setenv("WORLD_SIZE", num, 1);
    setenv("LOCAL_WORLD_SIZE", num, 1);
    pid_t launcher = getpid();
    for (int r = 0; r < n; r++) {
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
            snprintf(num, sizeof num, "%d", r);
            setenv("RANK", num, 1);
            setenv("LOCAL_RANK", num, 1);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            signal(SIGPIPE, SIG_DFL);
            execvp(prog[0], prog);
            fprintf(stderr, "c10d-run: cannot run %s: %s\n", prog[0], strerror(errno));
            _exit(127);
        }
        pids[r] = pid;
        g_pids = pids;
        if (got_signal) /* came while forking: this rank missed it */
            kill(pid, got_signal);
    }
    if (!quiet)
        fprintf(stderr, "c10d-run: job %s, %d rank%s of %s\n", job, n, n == 1 ? "" : "s",
                prog[0]);

    int left = n, code = 0, first_failed = -1, forwarded = 0, n_failed = 0;
    int *failed = calloc((size_t)n, sizeof *failed), *codes = calloc((size_t)n, sizeof *codes);
    if (!failed || !codes)
        return 1;
    long long fail_at = 0;
    int stage = 0; /* 0 running, 1 SIGTERM sent, 2 SIGKILL sent */
    while (left > 0) {
        if (got_signal && !forwarded) { /* the handler forwarded it */
            forwarded = got_signal;
            fprintf(stderr, "c10d-run: %s: forwarded to the ranks\n", strsignal(got_signal));
            if (!fail_at)
                fail_at = now_ms();
        }
        int st;
        if (fail_at && stage < 2)
            alarm_in(fail_at + grace + (stage ? 3000 : 0) - now_ms());
        pid_t p = waitpid(-1, &st, 0);
        if (p > 0) {
            for (int r = 0; r < n; r++) {
                if (pids[r] != p || done[r])
                    continue;
                done[r] = 1;
                left--;
                int rc;
                char how[128];
                describe_status(st, how, sizeof how, &rc);
                codes[r] = rc;
                if (rc != 0 && stage == 0)
                    failed[n_failed++] = r;
                if (rc != 0 && first_failed < 0 && stage == 0) {
                    first_failed = r;
                    code = rc;
                    fail_at = now_ms();
                    fprintf(stderr, "c10d-run: rank %d (pid %d) %s%s\n", r, (int)p, how,
                            left ? "; waiting for the others" : "");
                } else if (rc != 0 && !quiet) {
                    fprintf(stderr, "c10d-run: rank %d (pid %d) %s\n", r, (int)p, how);
                }
            }
            continue;
        }
        if (fail_at && stage == 0 && now_ms() - fail_at > grace) {
            fprintf(stderr, "c10d-run: stopping %d rank%s still running after %d ms\n", left,
                    left == 1 ? "" : "s", grace);
            for (int r = 0; r < n; r++)
                if (!done[r])
                    kill(pids[r], SIGTERM);
            stage = 1;
        } else if (stage == 1 && now_ms() - fail_at > grace + 3000) {
            for (int r = 0; r < n; r++)
                if (!done[r])
                    kill(pids[r], SIGKILL);
            stage = 2;
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    if (n_failed > 1) {
        char why[512] = "";
        int r = first_to_go(coord, job, failed, n_failed, why, sizeof why);
        if (r >= 0 && r < n && r != first_failed) {
            fprintf(stderr, "c10d-run: rank %d failed first (the coordinator saw it %s)\n", r,
                    why);
            first_failed = r;
            code = codes[r];
        }
    }
    free(failed);
    free(codes);
    if (coord_pid > 0) {
        kill(coord_pid, SIGTERM);
        waitpid(coord_pid, NULL, 0);
        remove_dir(dir); /* with --db the database is elsewhere and stays */
    }
    if (first_failed < 0 && forwarded)
        code = 128 + forwarded;
    else if (first_failed < 0 && !quiet)
        fprintf(stderr, "c10d-run: all %d rank%s finished\n", n, n == 1 ? "" : "s");
    g_pids = NULL;
    free(pids);
    free((void *)done);
    return code;
}
