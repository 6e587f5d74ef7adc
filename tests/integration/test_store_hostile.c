#define _GNU_SOURCE /* memmem */
/* The coordinator against bad clients: values over its limits, frames
 * left unfinished (timed out and capped), bytes that are no protocol, a
 * wrong or missing token; everyone else is served throughout. */
#include "store_coord.h"

#include "check_main.h"
#include "frame.h"

#include "c10d.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Reads until end-of-file (0) or a 2 s timeout or error (-1). */
static int read_until_eof(int fd)
{
    char rb[256];
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t r;
    while ((r = read(fd, rb, sizeof rb)) > 0)
        ;
    return r == 0 || (r < 0 && errno == ECONNRESET) ? 0 : -1;
}

START_TEST(oversized_values_are_refused_and_the_coordinator_carries_on)
{
    coord_stop(&coord, SIGTERM);
    const char *args[] = {"--max-value-bytes", "1024", "--max-message-bytes", "8192", NULL};
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
    c10d_store *s = connect_store();
    char *big = calloc(1, 4096);
    ck_assert_int_eq(c10d_store_set(s, "big", big, 4096), C10D_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "value of 4096 bytes for key 'big' exceeds"));
    OK(c10d_store_set(s, "small", big, 1024));
    OK(c10d_store_append(s, "small", "x", 0));
    ck_assert_int_eq(c10d_store_append(s, "small", "x", 1), C10D_ETOOBIG);

    /* A raw peer that ignores the limits: its over-limit frame gets its
     * connection closed; the coordinator serves everyone else. */
    int fd = raw_connect_coord();
    uint8_t hdr[C10DC_FRAME_HDR];
    c10dc_frame_header(hdr, 1, 100000);
    ck_assert_int_eq(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    char *huge = calloc(1, 100000);
    (void)!write(fd, huge, 100000); /* may fail half-way: the coordinator hung up */
    ck_assert_msg(read_until_eof(fd) == 0, "connection not closed after an oversized frame");
    close(fd);
    void *v;
    size_t n;
    OK(c10d_store_get(s, "small", &v, &n, C10D_NO_WAIT));
    ck_assert_uint_eq(n, 1024);
    c10d_free(v);
    free(big);
    free(huge);
    c10d_store_close(s);
}
END_TEST

/* Forty connections each holding 16 MiB of an
 * unfinished frame took 645 MB, for ever. A frame left unfinished is cut
 * off after --frame-timeout; unfinished frames together are capped by
 * --max-pending-bytes; everyone else is served. */
START_TEST(unfinished_requests_are_timed_out_and_capped)
{
    coord_stop(&coord, SIGTERM);
    const char *args[] = {"--frame-timeout", "500", "--max-value-bytes", "1048576",
                          "--max-pending-bytes", "4194304", NULL};
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
    /* 1. half a request, then silence */
    int fd = raw_connect_coord();
    uint8_t hdr[C10DC_FRAME_HDR];
    c10dc_frame_header(hdr, 1, 1 << 20);
    ck_assert_int_eq(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    char part[1000] = {0};
    ck_assert_int_eq(write(fd, part, sizeof part), (ssize_t)sizeof part);
    long long t0 = test_now_ms();
    ck_assert_msg(read_until_eof(fd) == 0, "a connection holding half a request was not closed");
    long long took = test_now_ms() - t0;
    ck_assert_msg(took >= 400 && took < 1900, "closed after %lld ms (--frame-timeout 500)", took);
    ck_assert(coord_log_contains(&coord, "--frame-timeout"));
    close(fd);
    /* 2. eight connections each holding 1 MiB of a request of 1 MiB +
     * 4 KiB: 8 MiB against a 4 MiB cap. Those over it are closed. */
    int fds[8], closed = 0;
    char *mib = calloc(1, 1 << 20);
    for (int i = 0; i < 8; i++) {
        fds[i] = raw_connect_coord();
        c10dc_frame_header(hdr, 1, (1 << 20) + 4096);
        ck_assert_int_eq(write(fds[i], hdr, sizeof hdr), (ssize_t)sizeof hdr);
        (void)!write(fds[i], mib, 1 << 20); /* may stop short: the coordinator hung up */
    }
    for (int i = 0; i < 8; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        if (poll(&p, 1, 300) == 1) {
            char c;
            closed += read(fds[i], &c, 1) <= 0;
        }
    }
    ck_assert_msg(closed >= 4, "only %d of 8 connections over --max-pending-bytes were closed",
                  closed);
    ck_assert(coord_log_contains(&coord, "--max-pending-bytes"));
    /* 3. everyone else is served meanwhile */
    c10d_store *s = connect_store();
    OK(c10d_store_set(s, "k", "v", 1));
    c10d_store_close(s);
    for (int i = 0; i < 8; i++)
        close(fds[i]);
    free(mib);
}
END_TEST

START_TEST(garbage_on_the_port_does_not_hurt_others)
{
    c10d_store *s = connect_store();
    OK(c10d_store_set(s, "before", "1", 1));
    /* 1. raw TCP junk: not even a frame (its length is absurd) */
    for (int i = 0; i < 5; i++) {
        int fd = raw_connect_coord();
        char junk[512];
        for (size_t j = 0; j < sizeof junk; j++)
            junk[j] = j < 4 ? (char)0xff : (char)(rand() & 0xff);
        ck_assert_int_gt(write(fd, junk, sizeof junk), 0);
        /* The coordinator closes it: we must see end-of-file, not a
         * timeout. */
        ck_assert_msg(read_until_eof(fd) == 0, "connection not closed after junk");
        close(fd);
    }
    /* 2. a proper frame whose bytes are not a request */
    int fd = raw_connect_coord();
    uint8_t frame[C10DC_FRAME_HDR + 11];
    c10dc_frame_header(frame, 77, 11);
    memcpy(frame + C10DC_FRAME_HDR, "\xff\xff\xff\xffgarbage", 11);
    ck_assert_int_eq(write(fd, frame, sizeof frame), (ssize_t)sizeof frame);
    uint8_t rb[2048];
    size_t got = 0;
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (ssize_t r; got < C10DC_FRAME_HDR || got < 4 + c10dc_get_u32(rb);) {
        ck_assert_int_gt(r = read(fd, rb + got, sizeof rb - got), 0);
        got += (size_t)r;
    }
    /* The reply is a protocol error for that request, not silence. */
    ck_assert_uint_eq(c10dc_get_u64(rb + 4), 77);
    ck_assert_ptr_nonnull(memmem(rb, got, "could not decode", 16));
    close(fd);

    void *v;
    size_t n;
    OK(c10d_store_get(s, "before", &v, &n, C10D_NO_WAIT));
    c10d_free(v);
    OK(c10d_store_set(s, "after", "1", 1));
    c10d_store_close(s);
}
END_TEST

START_TEST(token_is_required_when_configured)
{
    coord_stop(&coord, SIGTERM);
    char tf[600];
    snprintf(tf, sizeof tf, "%s/token", coord.dir);
    FILE *f = fopen(tf, "w");
    fputs("s3cret\n", f);
    fclose(f);
    const char *args[] = {"--token-file", tf, NULL};
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 2000;
    unsetenv("C10D_TOKEN");
    ck_assert_int_eq(c10d_store_connect(&s, coord.url, &o), C10D_EAUTH);
    o.token = "wrong";
    ck_assert_int_eq(c10d_store_connect(&s, coord.url, &o), C10D_EAUTH);
    ck_assert_ptr_nonnull(strstr(c10d_errmsg(), "does not match"));
    /* Each refusal was a log line (6,000 refused
     * tokens, 6,084 lines). Warnings of one kind are limited to 10 a
     * second, the rest counted. */
    long long t0 = test_now_ms();
    for (int i = 0; i < 300; i++)
        ck_assert_int_eq(c10d_store_connect(&s, coord.url, &o), C10D_EAUTH);
    long long secs = (test_now_ms() - t0) / 1000 + 2;
    FILE *log = fopen(coord.log, "r");
    char line[4096];
    int refusals = 0;
    while (fgets(line, sizeof line, log))
        refusals += strstr(line, "token") != NULL && strstr(line, "refused") != NULL;
    fclose(log);
    ck_assert_msg(refusals <= 10 * secs, "%d log lines for 300 refused tokens in %lld s",
                  refusals, secs);
    o.token = "s3cret";
    OK(c10d_store_connect(&s, coord.url, &o));
    OK(c10d_store_set(s, "k", "v", 1));
    c10d_store_close(s);
}
END_TEST

/* Keys are C strings: protobuf-c hands a string field on cut at a NUL,
 * so a set of "a\0b" (sent by any client speaking the protocol) wrote
 * "a". It is refused before decoding, and nothing is written. */
START_TEST(a_key_with_a_nul_byte_is_refused)
{
    c10d_store *s = connect_store();
    OK(c10d_store_set(s, "a", "kept", 4));
    C10dpb__StoreSet set = C10DPB__STORE_SET__INIT;
    set.key = "aXb";
    set.value = (ProtobufCBinaryData){3, (uint8_t *)"new"};
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.request_id = 5;
    req.op_case = C10DPB__REQUEST__OP_SET;
    req.set = &set;
    size_t len = c10dpb__request__get_packed_size(&req);
    uint8_t frame[256];
    ck_assert_uint_le(C10DC_FRAME_HDR + len, sizeof frame);
    c10dc_frame_header(frame, 5, len);
    c10dpb__request__pack(&req, frame + C10DC_FRAME_HDR);
    uint8_t *x = memmem(frame + C10DC_FRAME_HDR, len, "aXb", 3);
    ck_assert_ptr_nonnull(x);
    x[1] = '\0';
    int fd = raw_connect_coord();
    ck_assert_int_eq(write(fd, frame, C10DC_FRAME_HDR + len), (ssize_t)(C10DC_FRAME_HDR + len));
    uint8_t rb[2048];
    size_t got = 0;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (ssize_t r; got < C10DC_FRAME_HDR || got < 4 + c10dc_get_u32(rb);) {
        ck_assert_int_gt(r = read(fd, rb + got, sizeof rb - got), 0);
        got += (size_t)r;
    }
    close(fd);
    C10dpb__Reply *rep = c10dpb__reply__unpack(NULL, got - C10DC_FRAME_HDR, rb + C10DC_FRAME_HDR);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->status, C10D_EINVAL);
    ck_assert_msg(rep->detail && strstr(rep->detail, "NUL"), "%s", rep->detail);
    c10dpb__reply__free_unpacked(rep, NULL);
    void *v;
    size_t n;
    OK(c10d_store_get(s, "a", &v, &n, C10D_NO_WAIT));
    ck_assert_msg(n == 4 && memcmp(v, "kept", 4) == 0, "key 'a' was overwritten");
    c10d_free(v);
    c10d_store_close(s);
}
END_TEST

/* A 45 KB check, wait or multi_get naming one key
 * 4,096 times, with 16 MiB stored under it, held the engine ~100 s: each
 * existence check read the whole value, and every lookup passing the
 * value's row read it too. Now existence reads no value, a key named
 * again is looked up once, and multi_get refuses by the values' sizes
 * before reading any. The deadline that must hold is the clients'
 * timeout (10 s), which the old code missed by minutes. */
#define NAMED 4096

typedef struct flood {
    c10d_store *s;
    int rounds, done;
    c10d_status check, wait, multi_get;
    int all_exist;
    char multi_get_err[512];
} flood;

static void *flood_big_key(void *arg)
{
    flood *f = arg;
    const char *keys[NAMED];
    void *vals[NAMED];
    size_t lens[NAMED];
    for (int i = 0; i < NAMED; i++)
        keys[i] = "big";
    for (int r = 0; r < f->rounds; r++) {
        f->check = c10d_store_check(f->s, keys, NAMED, &f->all_exist);
        f->wait = c10d_store_wait(f->s, keys, NAMED, 5000);
        f->multi_get = c10d_store_multi_get(f->s, keys, NAMED, vals, lens, 5000);
        snprintf(f->multi_get_err, sizeof f->multi_get_err, "%s", c10d_errmsg());
        if (f->check != C10D_OK || f->wait != C10D_OK || f->multi_get != C10D_ETOOBIG)
            break;
        __atomic_store_n(&f->done, r + 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&f->done, -1, __ATOMIC_RELEASE); /* over */
    return NULL;
}

START_TEST(a_key_named_thousands_of_times_does_not_stall_others)
{
    c10d_store *s = connect_store();
    size_t big = 16u << 20; /* the default --max-value-bytes */
    char *v = malloc(big);
    for (size_t i = 0; i < big; i++)
        v[i] = (char)(i * 7);
    OK(c10d_store_set(s, "big", v, big));
    OK(c10d_store_set(s, "small", "s", 1));

    flood f = {.s = connect_store(), .rounds = 3};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, flood_big_key, &f), 0);
    /* A normal client's gets, answered while the flood runs. */
    int gets = 0;
    do {
        void *got;
        size_t n;
        OK(c10d_store_get(s, "small", &got, &n, C10D_NO_WAIT));
        ck_assert_uint_eq(n, 1);
        c10d_free(got);
        gets++;
    } while (__atomic_load_n(&f.done, __ATOMIC_ACQUIRE) >= 0);
    pthread_join(t, NULL);
    ck_assert_msg(f.check == C10D_OK && f.all_exist, "check: %s", c10d_strerror(f.check));
    ck_assert_msg(f.wait == C10D_OK, "wait: %s", c10d_strerror(f.wait));
    ck_assert_msg(f.multi_get == C10D_ETOOBIG, "multi_get: %s (%s)",
                  c10d_strerror(f.multi_get), f.multi_get_err);
    ck_assert_ptr_nonnull(strstr(f.multi_get_err, "--max-message-bytes"));
    ck_assert_int_ge(gets, 1);

    /* What fits is still answered, each copy of a key named again whole. */
    const char *keys[NAMED];
    void *vals[NAMED];
    size_t lens[NAMED];
    for (int i = 0; i < NAMED; i++)
        keys[i] = "small";
    OK(c10d_store_multi_get(s, keys, NAMED, vals, lens, C10D_NO_WAIT));
    for (int i = 0; i < NAMED; i++) {
        ck_assert_uint_eq(lens[i], 1);
        ck_assert_mem_eq(vals[i], "s", 1);
        c10d_free(vals[i]);
    }
    keys[1] = "big";
    OK(c10d_store_multi_get(s, keys, 3, vals, lens, C10D_NO_WAIT));
    ck_assert_uint_eq(lens[1], big);
    ck_assert_int_eq(memcmp(vals[1], v, big), 0);
    ck_assert_mem_eq(vals[2], "s", 1);
    for (int i = 0; i < 3; i++)
        c10d_free(vals[i]);
    free(v);
    c10d_store_close(f.s);
    c10d_store_close(s);
}
END_TEST

/* An empty C10D_TOKEN (an export from a file that was not there, say)
 * ran the coordinator with no token at all, in silence; an empty token
 * file was already refused. Both are refused at start now, naming it. */
START_TEST(an_empty_token_is_refused_at_start)
{
    coord_stop(&coord, SIGTERM);
    setenv("C10D_TOKEN", "", 1);
    int status = 0;
    int rc = coord_start(&coord, NULL, NULL, &status);
    unsetenv("C10D_TOKEN");
    ck_assert_msg(rc != 0, "the coordinator started with an empty C10D_TOKEN");
    ck_assert_msg(coord_log_contains(&coord, "C10D_TOKEN is set but empty"),
                  "the refusal does not say why (log %s)", coord.log);
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0); /* unset: no token, as asked */
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("store_hostile");
    TCase *tc = store_tcase("store_hostile");
    tcase_add_test(tc, oversized_values_are_refused_and_the_coordinator_carries_on);
    tcase_add_test(tc, garbage_on_the_port_does_not_hurt_others);
    tcase_add_test(tc, unfinished_requests_are_timed_out_and_capped);
    tcase_add_test(tc, token_is_required_when_configured);
    tcase_add_test(tc, an_empty_token_is_refused_at_start);
    tcase_add_test(tc, a_key_with_a_nul_byte_is_refused);
    tcase_add_test(tc, a_key_named_thousands_of_times_does_not_stall_others);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
