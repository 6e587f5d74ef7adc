#include "coord_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void coord_init(coord_proc *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/c10d-test-XXXXXX");
    if (!mkdtemp(c->dir)) {
        perror("mkdtemp");
        abort();
    }
    snprintf(c->db, sizeof c->db, "%s/coord.db", c->dir);
    snprintf(c->log, sizeof c->log, "%s/coord.log", c->dir);
}

int coord_start(coord_proc *c, const char *listen, const char *const *extra, int *exit_status)
{
    char ready[600];
    snprintf(ready, sizeof ready, "%s/ready", c->dir);
    unlink(ready);
    const char *argv[32];
    int n = 0;
    /* C10D_TEST_COORD_BIN: another build's coordinator, for a benchmark's
     * before and after in one run (tests/bench/bench_floods.c). */
    const char *bin = getenv("C10D_TEST_COORD_BIN");
    argv[n++] = bin && *bin ? bin : C10D_COORD_BIN;
    argv[n++] = "--listen";
    argv[n++] = listen ? listen : "tcp://127.0.0.1:0";
    argv[n++] = "--db";
    argv[n++] = c->db;
    argv[n++] = "--ready-file";
    argv[n++] = ready;
    for (; extra && *extra && n < 30; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(c->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0)
            dup2(fd, 2);
        struct rlimit rl = {(rlim_t)c->nofile, (rlim_t)c->nofile};
        if (c->nofile > 0 && setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    c->pid = pid;
    for (int i = 0; i < 1000; i++) { /* up to 10 s */
        FILE *f = fopen(ready, "r");
        if (f) {
            int ok = fgets(c->url, sizeof c->url, f) != NULL;
            fclose(f);
            if (ok) {
                c->url[strcspn(c->url, "\n")] = '\0';
                return 0;
            }
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            c->pid = 0;
            if (exit_status)
                *exit_status = st;
            return -1;
        }
        usleep(10000);
    }
    coord_stop(c, SIGKILL);
    return -1;
}

int coord_stop(coord_proc *c, int sig)
{
    int st = 0;
    if (c->pid > 0) {
        kill(c->pid, sig);
        while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
            ;
        c->pid = 0;
    }
    return st;
}

void coord_cleanup(coord_proc *c)
{
    coord_stop(c, SIGKILL);
    if (c->dir[0]) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", c->dir);
    }
}

void coord_pause(const coord_proc *c, int ms)
{
    kill(c->pid, SIGSTOP);
    long long until = test_now_ms() + ms;
    while (test_now_ms() < until)
        usleep(10000);
    kill(c->pid, SIGCONT);
}

int coord_log_contains(const coord_proc *c, const char *s)
{
    return coord_log_count(c, s) > 0;
}

int coord_log_count(const coord_proc *c, const char *s)
{
    FILE *f = fopen(c->log, "r");
    if (!f)
        return 0;
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f))
        found += strstr(line, s) != NULL;
    fclose(f);
    return found;
}
