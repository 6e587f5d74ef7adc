/* The host backend's TCP dial (client/src/host/tcp.c) against real
 * sockets: a connect that the peer's kernel never answers ends when the
 * caller's check says so (the group's deadline, a peer's loss), not after
 * the kernel's minutes of SYN retries; a refused connect is tried again
 * until the peer listens. */
#include "host/host.h"

#include "c10d_time.h"
#include "check_main.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_storage loopback(int port, socklen_t *len)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *len = sizeof *a;
    return ss;
}

static int port_of(int fd)
{
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    return ntohs(a.sin_port);
}

/* A listener with no room: backlog 0 and never accepted from. Linux drops
 * the SYN of a connect to a listener whose accept queue is full, so it is
 * retried for minutes: what a peer behind a firewall that drops packets
 * looks like. Returns the listener; the connects that filled it stay open. */
static int full_listener(int *port, int fillers[], int *nfill)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len;
    struct sockaddr_storage ss = loopback(0, &len);
    ck_assert_int_eq(bind(l, (struct sockaddr *)&ss, len), 0);
    ck_assert_int_eq(listen(l, 0), 0);
    *port = port_of(l);
    ss = loopback(*port, &len);
    *nfill = 0;
    for (int i = 0; i < 16; i++) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        fcntl(c, F_SETFL, O_NONBLOCK);
        fillers[(*nfill)++] = c;
        if (connect(c, (struct sockaddr *)&ss, len) == 0)
            continue;
        ck_assert_int_eq(errno, EINPROGRESS);
        struct pollfd p = {c, POLLOUT, 0};
        if (poll(&p, 1, 300) == 0)
            return l; /* this one hangs: the queue is full */
    }
    ck_abort_msg("16 connects to a listener with backlog 0 all completed");
    return -1;
}

typedef struct {
    int64_t until; /* when the check ends the wait */
    int calls;
    int64_t longest_gap, last; /* between two calls, in ms */
    int listen_at_call, port, listener;
} check_state;

static c10d_status deadline_check(void *arg)
{
    check_state *c = arg;
    int64_t now = c10d_now_ms();
    if (c->last && now - c->last > c->longest_gap)
        c->longest_gap = now - c->last;
    c->last = now;
    c->calls++;
    if (c->listen_at_call && c->calls == c->listen_at_call) {
        /* the peer starts listening only now: every connect so far was refused */
        int l = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        socklen_t len;
        struct sockaddr_storage ss = loopback(c->port, &len);
        ck_assert_int_eq(bind(l, (struct sockaddr *)&ss, len), 0);
        ck_assert_int_eq(listen(l, 16), 0);
        c->listener = l;
    }
    if (now >= c->until)
        return c10di_error(C10D_ETIMEDOUT, "the test's deadline passed");
    return C10D_OK;
}

START_TEST(a_connect_that_is_never_answered_ends_at_the_callers_deadline)
{
    int port, fillers[16], nfill;
    int l = full_listener(&port, fillers, &nfill);
    socklen_t len;
    struct sockaddr_storage ss = loopback(port, &len);
    int64_t t0 = c10d_now_ms();
    check_state c = {.until = t0 + 1000};
    int fd = -1;
    c10d_status st = c10di_tcp_dial(&ss, len, "rank 0 at 127.0.0.1", deadline_check, &c, &fd);
    int64_t took = c10d_now_ms() - t0;
    ck_assert_msg(st == C10D_ETIMEDOUT, "%s: %s", c10d_status_name(st), c10d_errmsg());
    ck_assert_int_eq(fd, -1);
    /* a blocking connect would have waited for the kernel (~2 minutes) */
    ck_assert_msg(took >= 1000 && took < 3000, "the dial took %lld ms", (long long)took);
    ck_assert_msg(c.longest_gap <= 600, "the check waited %lld ms between two calls",
                  (long long)c.longest_gap);
    for (int i = 0; i < nfill; i++)
        close(fillers[i]);
    close(l);
}
END_TEST

START_TEST(a_refused_connect_is_tried_again_until_the_peer_listens)
{
    /* a port nobody listens on (yet) */
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len;
    struct sockaddr_storage ss = loopback(0, &len);
    ck_assert_int_eq(bind(probe, (struct sockaddr *)&ss, len), 0);
    int port = port_of(probe);
    close(probe);
    ss = loopback(port, &len);
    check_state c = {.until = c10d_now_ms() + 20000, .listen_at_call = 3, .port = port,
                     .listener = -1};
    int fd = -1;
    c10d_status st = c10di_tcp_dial(&ss, len, "rank 0 at 127.0.0.1", deadline_check, &c, &fd);
    ck_assert_msg(st == C10D_OK, "%s: %s", c10d_status_name(st), c10d_errmsg());
    ck_assert_int_ge(c.calls, 3);
    ck_assert_int_ge(fd, 0);
    int a = accept(c.listener, NULL, NULL);
    ck_assert_int_ge(a, 0);
    close(a);
    close(fd);
    close(c.listener);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("host_tcp");
    TCase *tc = tcase_create("dial");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_connect_that_is_never_answered_ends_at_the_callers_deadline);
    tcase_add_test(tc, a_refused_connect_is_tried_again_until_the_peer_listens);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
