#include "dqlite_nodes.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* raft's links between the nodes, on their abstract sockets */
static int connect_abstract(void *arg, const char *address, int *fd)
{
    (void)arg;
    struct sockaddr_un u;
    memset(&u, 0, sizeof u);
    u.sun_family = AF_UNIX;
    size_t n = strlen(address + 1);
    if (address[0] != '@' || n + 1 > sizeof u.sun_path)
        return DQLITE_ERROR;
    memcpy(u.sun_path + 1, address + 1, n);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&u, (socklen_t)(sizeof(sa_family_t) + 1 + n))) {
        if (s >= 0)
            close(s);
        return DQLITE_ERROR;
    }
    *fd = s;
    return 0;
}

int dq_node_start(dq_node *n, unsigned id, const char *tag)
{
    signal(SIGPIPE, SIG_IGN);
    memset(n, 0, sizeof *n);
    snprintf(n->dir, sizeof n->dir, "/tmp/c10d-dq-XXXXXX");
    if (!mkdtemp(n->dir)) {
        perror("mkdtemp");
        return -1;
    }
    snprintf(n->addr, sizeof n->addr, "@c10d-dq-%d-%s-%u", (int)getpid(), tag, id);
    if (dqlite_node_create(id, n->addr, n->dir, &n->node) != 0 ||
        dqlite_node_set_bind_address(n->node, n->addr) != 0 ||
        dqlite_node_set_connect_func(n->node, connect_abstract, NULL) != 0 ||
        /* heartbeat 15 ms, election 150 ms: nodes on one machine */
        dqlite_node_set_network_latency_ms(n->node, 10) != 0 || dqlite_node_start(n->node) != 0) {
        fprintf(stderr, "dqlite node %u: %s\n", id,
                n->node ? dqlite_node_errmsg(n->node) : "cannot create it");
        return -1;
    }
    return 0;
}

void dq_node_stop(dq_node *n)
{
    if (n->node) {
        dqlite_node_stop(n->node);
        dqlite_node_destroy(n->node);
        n->node = NULL;
    }
    if (n->dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", n->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", n->dir);
        n->dir[0] = '\0';
    }
}
