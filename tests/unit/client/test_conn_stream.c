/* The stream beneath the connection (client/src/conn/: conn_stream.c,
 * conn_reader.c, conn_dial.c): with no coordinator there, EUNAVAIL
 * within the timeout, naming every URL tried; and a server whose replies
 * are frames of the right request id around a protobuf that is no Reply,
 * C10D_EPROTO saying so. */
#include "internal.h"

#include "check_main.h"
#include "frame.h"
#include "frame_server.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

START_TEST(no_coordinator_is_eunavail_within_timeout)
{
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 300;
    ck_assert_int_eq(c10d_store_connect(&s, "tcp://127.0.0.1:1", &o), C10D_EUNAVAIL);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "no coordinator answered at tcp://127.0.0.1:1"));
    /* a list: the error names every URL tried */
    ck_assert_int_eq(c10d_store_connect(&s, "tcp://127.0.0.1:1,127.0.0.1:2", &o), C10D_EUNAVAIL);
    ck_assert_msg(strstr(c10d_errmsg(), "no coordinator answered at any of tcp://127.0.0.1:1,"
                                        "tcp://127.0.0.1:2 within"), "%s", c10d_errmsg());
}
END_TEST

/* Reply bodies that protobuf-c does not take for a Reply. */
static const struct {
    const char *what;
    uint8_t body[8];
    size_t len;
} malformed[] = {
    {"an empty body (request_id and status are required)", {0}, 0},
    {"a varint cut short", {0x08, 0x80}, 2},
    /* request_id 1, status ENOTLEADER (zigzag 29), then a detail longer
     * than the frame: a malformed reply is never taken for a redirect */
    {"a string past the frame's end", {0x08, 0x01, 0x10, 0x1d, 0x1a, 0x64}, 6},
};

/* A server that answers every frame with one of the same request id
 * around malformed[which]'s body. */
typedef struct bad_server {
    int lfd;
    int which;
    char url[64];
    atomic_int stop;
    pthread_t th;
} bad_server;

/* Each frame answered with malformed[which]'s body, its request id kept. */
static int answer_malformed(int fd, uint64_t id, void *arg)
{
    const bad_server *b = arg;
    uint8_t out[C10DC_FRAME_HDR + sizeof malformed[0].body];
    size_t n = malformed[b->which].len;
    c10dc_frame_header(out, id, n);
    memcpy(out + C10DC_FRAME_HDR, malformed[b->which].body, n);
    return write(fd, out, C10DC_FRAME_HDR + n) != (ssize_t)(C10DC_FRAME_HDR + n);
}

static void *bad_server_main(void *arg)
{
    bad_server *b = arg;
    while (!atomic_load(&b->stop)) {
        struct pollfd p = {b->lfd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(b->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        frame_server_serve(fd, &b->stop, answer_malformed, b);
        close(fd);
    }
    return NULL;
}

static void bad_server_start(bad_server *b, int which)
{
    memset(b, 0, sizeof *b);
    b->which = which;
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(b->lfd, 0);
    ck_assert_int_eq(bind(b->lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(b->lfd, 4), 0);
    ck_assert_int_eq(getsockname(b->lfd, (struct sockaddr *)&a, &len), 0);
    snprintf(b->url, sizeof b->url, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
    ck_assert_int_eq(pthread_create(&b->th, NULL, bad_server_main, b), 0);
}

static void bad_server_stop(bad_server *b)
{
    atomic_store(&b->stop, 1);
    pthread_join(b->th, NULL);
    close(b->lfd);
}

/* The reply is decoded once, where the reader cuts it from the stream
 * (conn_reader.c); one that does not decode fails its call as conn.c
 * failed it when it unpacked the reply's bytes itself: C10D_EPROTO, and
 * the same words. Looped over malformed[]. */
START_TEST(a_reply_that_does_not_decode_is_eproto)
{
    bad_server b;
    bad_server_start(&b, _i);
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 5000;
    ck_assert_int_eq(c10d_store_connect(&s, b.url, &o), C10D_EPROTO);
    char want[256];
    snprintf(want, sizeof want, "undecodable reply to hello from %s (is it a c10d-coord?)", b.url);
    ck_assert_msg(strstr(c10d_errmsg(), want), "%s: %s", malformed[_i].what, c10d_errmsg());
    ck_assert_ptr_null(s);
    bad_server_stop(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conn_stream");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, no_coordinator_is_eunavail_within_timeout);
    tcase_add_loop_test(tc, a_reply_that_does_not_decode_is_eproto, 0,
                        (int)(sizeof malformed / sizeof malformed[0]));
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
