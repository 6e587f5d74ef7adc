#include "replica_procs.h"

#include "coord_proc.h"

#include <c10d/c10d.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* A port the kernel just handed out and took back: free, most likely,
 * for the moment it takes to start the replica. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        perror("free_port");
        abort();
    }
    int port = ntohs(a.sin_port);
    close(s);
    return port;
}

void replicas_init(replica_set *rs, int n)
{
    memset(rs, 0, sizeof *rs);
    rs->n = n;
    snprintf(rs->dir, sizeof rs->dir, "/tmp/c10d-replicas-XXXXXX");
    if (!mkdtemp(rs->dir)) {
        perror("mkdtemp");
        abort();
    }
    size_t p = 0, u = 0;
    for (int i = 0; i < n; i++) {
        snprintf(rs->url[i], sizeof rs->url[i], "tcp://127.0.0.1:%d", free_port());
        p += (size_t)snprintf(rs->peers + p, sizeof rs->peers - p, "%s%d=127.0.0.1:%d",
                              i ? "," : "", i + 1, free_port());
        u += (size_t)snprintf(rs->urls + u, sizeof rs->urls - u, "%s%s", i ? "," : "",
                              rs->url[i]);
    }
}

void replica_start(replica_set *rs, int id, const char *const *extra)
{
    char idarg[16], data[320], log[320];
    snprintf(idarg, sizeof idarg, "%d", id);
    snprintf(data, sizeof data, "%s/data%d", rs->dir, id);
    snprintf(log, sizeof log, "%s/log%d", rs->dir, id);
    const char *argv[40];
    int n = 0;
    argv[n++] = C10D_COORD_BIN;
    argv[n++] = "--replica";
    argv[n++] = idarg;
    argv[n++] = "--peers";
    argv[n++] = rs->peers;
    argv[n++] = "--listen";
    argv[n++] = rs->url[id - 1];
    argv[n++] = "--data-dir";
    argv[n++] = data;
    /* heartbeat 75 ms, election after 750 ms: loopback, but a loaded
     * 2-core machine must not call elections for nothing */
    argv[n++] = "--raft-latency-ms";
    argv[n++] = "50";
    for (; extra && *extra && n < 38; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0)
            dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    rs->pid[id - 1] = pid;
}

void replica_signal_all(const replica_set *rs, int id, int sig)
{
    pid_t pid = rs->pid[id - 1];
    if (pid <= 0)
        return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    kill(pid, sig);
    int child;
    while (f && fscanf(f, "%d", &child) == 1)
        kill(child, sig);
    if (f)
        fclose(f);
}

void replica_stop(replica_set *rs, int id, int sig)
{
    pid_t pid = rs->pid[id - 1];
    if (pid <= 0)
        return;
    kill(pid, sig);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    rs->pid[id - 1] = 0;
}

void replicas_cleanup(replica_set *rs)
{
    for (int i = 1; i <= rs->n; i++)
        replica_stop(rs, i, SIGKILL);
    if (rs->dir[0]) {
        char cmd[320];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", rs->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", rs->dir);
    }
}

int replica_log_count(const replica_set *rs, int id, const char *s)
{
    char path[320], line[4096];
    snprintf(path, sizeof path, "%s/log%d", rs->dir, id);
    FILE *f = fopen(path, "r");
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found += strstr(line, s) != NULL;
    if (f)
        fclose(f);
    return found;
}

void replicas_dump_logs(const replica_set *rs)
{
    for (int i = 1; i <= rs->n; i++) {
        char path[320], line[4096];
        snprintf(path, sizeof path, "%s/log%d", rs->dir, i);
        FILE *f = fopen(path, "r");
        fprintf(stderr, "--- replica %d's log\n", i);
        while (f && fgets(line, sizeof line, f))
            fputs(line, stderr);
        if (f)
            fclose(f);
    }
}

/* Asks through the list who leads, in a child process: NNG may not be
 * used in a process that forks ranks after (it is not fork-safe). */
static int ask_leader(const replica_set *rs)
{
    pid_t pid = fork();
    if (pid == 0) {
        c10d_store_opts o = C10D_STORE_OPTS_INIT;
        o.timeout_ms = o.connect_timeout_ms = 1000;
        c10d_store *s;
        int id = 0;
        if (c10d_store_connect(&s, rs->urls, &o) == C10D_OK) {
            c10d_coord_info *info = NULL;
            const char *at;
            if (c10d_store_coord_info(s, &info) == C10D_OK && info->db_path &&
                (at = strstr(info->db_path, "replica ")) != NULL)
                sscanf(at, "replica %d", &id);
            c10d_free(info);
            c10d_store_close(s);
        }
        _exit(id > 0 && id < 100 ? id : 0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

int replicas_leader(const replica_set *rs, int timeout_ms)
{
    long long until = test_now_ms() + timeout_ms;
    do {
        int id = ask_leader(rs);
        if (id > 0)
            return id;
        usleep(20000);
    } while (test_now_ms() < until);
    return 0;
}

int replica_wait_serving(const replica_set *rs, int id, int times, int timeout_ms)
{
    long long until = test_now_ms() + timeout_ms;
    while (replica_log_count(rs, id, "serving on") < times) {
        if (test_now_ms() > until)
            return -1;
        usleep(10000);
    }
    return 0;
}

int replicas_wait_voters(const replica_set *rs, int timeout_ms)
{
    long long until = test_now_ms() + timeout_ms;
    for (;;) {
        int voters = 0;
        for (int id = 1; id <= rs->n; id++) {
            int n = replica_log_count(rs, id, "is a voter");
            voters = n > voters ? n : voters;
        }
        if (voters >= rs->n - 1)
            return 0;
        if (test_now_ms() >= until)
            return -1;
        usleep(10000);
    }
}

int replicas_start_serving(replica_set *rs, int timeout_ms)
{
    for (int i = 1; i <= rs->n; i++)
        replica_start(rs, i, NULL);
    long long until = test_now_ms() + timeout_ms;
    for (int i = 1; i <= rs->n; i++) {
        long long left = until - test_now_ms();
        if (replica_wait_serving(rs, i, 1, left > 1000 ? (int)left : 1000) != 0)
            return i;
    }
    return 0;
}
