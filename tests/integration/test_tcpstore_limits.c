/* The limits that hold the coordinator's clients to their share, above
 * all the TCPStore port's, which checks no token: a flood of pipelined
 * gets of a large value that are never read must not hold up a client of
 * the main port, nor grow the coordinator's memory; parked waits are
 * weighed by their bytes (per connection, all together, the TCPStore
 * port's), refused past them with an error that names the limit, and
 * their memory goes back to the system when they go; writes through the
 * TCPStore port stop at its quota. Against a real c10d-coord, over
 * plain sockets; memory is the coordinator's own VmRSS/VmHWM. */
#include "coord_proc.h"
#include "cpu_time.h"
#include "raw_client.h"
#include "state_wait.h"

#include "c10d.pb-c.h"
#include "check_main.h"

#include <c10d/c10d.h>
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Under ASan the coordinator's RSS holds its quarantine and shadow
 * memory: memory bounds are asserted in plain builds only. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEMORY_CHECKED 0
#else
#define MEMORY_CHECKED 1
#endif

#define OK(call) ck_assert_msg((call) == C10D_OK, "%s: %s", #call, c10d_errmsg())

static coord_proc coord;
static int ts_port;

/* A port free on loopback now, for --tcpstore-listen. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &n), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Starts the case's coordinator with a TCPStore port and extra options
 * (NULL-terminated, at most 8). */
static void start(const char *const *extra)
{
    char port[16];
    ts_port = free_port();
    snprintf(port, sizeof port, "%d", ts_port);
    const char *args[12] = {"--tcpstore-listen", port};
    for (int i = 0; extra && extra[i]; i++)
        args[2 + i] = extra[i];
    coord_init(&coord);
    ck_assert_int_eq(coord_start(&coord, NULL, args, NULL), 0);
}

static void stop(void)
{
    coord_cleanup(&coord);
}

static int ts_connect(void)
{
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", ts_port);
    int fd = raw_connect(url);
    ck_assert_int_ge(fd, 0);
    return fd;
}

/* --- TCPStore's wire, torch 2.1's numbering (docs/tcpstore.md) --- */
enum { TS_SET = 0, TS_GET = 2, TS_CHECK = 4, TS_WAIT = 5 };

static size_t put_u64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8); /* the host's order, as TCPStore's */
    return 8;
}

static size_t put_bytes(uint8_t *p, const void *b, size_t n)
{
    size_t o = put_u64(p, n);
    memcpy(p + o, b, n);
    return o + n;
}

/* A SET of key to n bytes of value (the caller frees it); *len its size. */
static uint8_t *ts_set(const char *key, size_t n, size_t *len)
{
    uint8_t *q = malloc(1 + 8 + strlen(key) + 8 + n);
    size_t o = 0;
    q[o++] = TS_SET;
    o += put_bytes(q + o, key, strlen(key));
    o += put_u64(q + o, n);
    memset(q + o, 'v', n);
    *len = o + n;
    return q;
}

/* A query of type op (GET, CHECK, WAIT) naming keys[0..n): GET names one
 * key, bare; CHECK and WAIT a counted list. Written into q; its length. */
static size_t ts_keys_query(uint8_t *q, int op, const char *const *keys, size_t n)
{
    size_t o = 0;
    q[o++] = (uint8_t)op;
    if (op != TS_GET)
        o += put_u64(q + o, n);
    for (size_t i = 0; i < n; i++)
        o += put_bytes(q + o, keys[i], strlen(keys[i]));
    return o;
}

/* Reads exactly n bytes within timeout_ms; 0, or -1 (closed, timed out). */
static int read_exact(int fd, void *buf, size_t n, int timeout_ms)
{
    long long due = test_now_ms() + timeout_ms;
    for (size_t got = 0; got < n;) {
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)(due - test_now_ms());
        if (left <= 0 || poll(&p, 1, left) != 1)
            return -1;
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* 1 once the peer closed fd (within timeout_ms), reading what it sent. */
static int closed_by_peer(int fd, int timeout_ms)
{
    long long due = test_now_ms() + timeout_ms;
    char b[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)(due - test_now_ms());
        if (left <= 0 || poll(&p, 1, left) != 1)
            return 0;
        ssize_t r = read(fd, b, sizeof b);
        if (r <= 0)
            return 1;
    }
}

/* A TCPStore client stores key (n bytes) and knows it is there. */
static int ts_store(const char *key, size_t n)
{
    int fd = ts_connect();
    size_t len;
    uint8_t *q = ts_set(key, n, &len);
    ck_assert_int_eq(raw_write_all(fd, q, len), 0);
    free(q);
    uint8_t check[64], ready = 9;
    size_t cl = ts_keys_query(check, TS_CHECK, &key, 1);
    ck_assert_int_eq(raw_write_all(fd, check, cl), 0);
    ck_assert_int_eq(read_exact(fd, &ready, 1, 30000), 0);
    ck_assert_int_eq(ready, 0); /* READY */
    return fd;
}

/* --- the flood of the TCPStore port --- */

#define BIG (16u << 20)
#define FLOODERS 32
#define GETS_EACH 200

/* The bystander's worst get of a small key on the main port while the
 * flooders' queries are with the coordinator, over ms. */
static long long worst_get_ms(c10d_store *s, int ms)
{
    long long worst = 0, end = test_now_ms() + ms;
    while (test_now_ms() < end) {
        long long t0 = test_now_ms();
        void *v;
        size_t n;
        OK(c10d_store_get(s, "bystander", &v, &n, C10D_NO_WAIT));
        c10d_free(v);
        long long took = test_now_ms() - t0;
        if (took > worst)
            worst = took;
        usleep(5000);
    }
    return worst;
}

START_TEST(a_get_flood_on_the_tcpstore_port_does_not_hold_up_the_main_port)
{
    start(NULL);
    c10d_store *s;
    OK(c10d_store_connect(&s, coord.url, NULL));
    OK(c10d_store_set(s, "bystander", "ok", 2));
    int keeper = ts_store("big", BIG); /* holds the run the flooders read in */
    long before = rss_kib(coord.pid);

    uint8_t one[32];
    const char *key = "big";
    size_t ql = ts_keys_query(one, TS_GET, &key, 1);
    uint8_t *gets = malloc(ql * GETS_EACH);
    for (int i = 0; i < GETS_EACH; i++)
        memcpy(gets + (size_t)i * ql, one, ql);
    int fl[FLOODERS];
    for (int i = 0; i < FLOODERS; i++) {
        fl[i] = ts_connect();
        ck_assert_int_eq(raw_write_all(fl[i], gets, ql * GETS_EACH), 0);
    }
    free(gets);
    /* Unbounded, each flooder had up to 128 of its gets (2 GiB of value)
     * read and packed; the bystander waited 8-14 s behind them. */
    long long worst = worst_get_ms(s, 5000);
    long peak = peak_rss_kib(coord.pid), now = rss_kib(coord.pid);
    printf("tcpstore get flood: bystander's worst get %lld ms; coordinator RSS %ld -> %ld KiB "
           "(peak %ld)\n", worst, before, now, peak);
    ck_assert_msg(worst < 2000, "a main-port get took %lld ms under the TCPStore flood", worst);
    /* one 16 MiB reply per flooder at most, within --max-reply-bytes */
    if (MEMORY_CHECKED)
        ck_assert_msg(now - before < 800 * 1024, "RSS grew %ld KiB under the flood",
                      now - before);
    for (int i = 0; i < FLOODERS; i++)
        close(fl[i]);
    close(keeper);
    c10d_store_close(s);
    stop();
}
END_TEST

/* --- parked bytes --- */

#define KEY_BYTES 4000

/* keys[0..n) of KEY_BYTES each, missing, distinct per tag (freed by
 * free_keys). */
static char **missing_keys(int tag, size_t n)
{
    char **k = malloc(n * sizeof *k);
    for (size_t i = 0; i < n; i++) {
        k[i] = malloc(KEY_BYTES + 1);
        memset(k[i], 'k', KEY_BYTES);
        snprintf(k[i], 32, "missing/%d/%zu/", tag, i);
        k[i][strlen(k[i])] = 'k';
        k[i][KEY_BYTES] = 0;
    }
    return k;
}

static void free_keys(char **k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(k[i]);
    free(k);
}

static void send_wait_for(int fd, uint64_t id, int tag, size_t n, int timeout_ms);

/* Parks a wait of n missing keys on fd, our own framing, as request id. */
static void send_wait(int fd, uint64_t id, int tag, size_t n)
{
    send_wait_for(fd, id, tag, n, 600000);
}

static void send_wait_for(int fd, uint64_t id, int tag, size_t n, int timeout_ms)
{
    char **keys = missing_keys(tag, n);
    C10dpb__Request rq = C10DPB__REQUEST__INIT;
    C10dpb__StoreWait w = C10DPB__STORE_WAIT__INIT;
    w.n_keys = n;
    w.keys = keys;
    w.has_timeout_ms = 1;
    w.timeout_ms = timeout_ms;
    rq.op_case = C10DPB__REQUEST__OP_WAIT;
    rq.wait = &w;
    ck_assert_int_eq(raw_send(fd, &rq, id), 0);
    free_keys(keys, n);
}

/* The reply to request id on fd must be ETOOBIG naming option. */
static void refused_naming(int fd, uint64_t id, const char *option)
{
    uint64_t got = 0;
    C10dpb__Reply *rep = raw_read_reply(fd, 30000, &got);
    ck_assert_msg(rep != NULL, "no reply to wait %llu", (unsigned long long)id);
    ck_assert_uint_eq(got, id);
    ck_assert_int_eq(rep->status, C10D_ETOOBIG);
    ck_assert_msg(rep->detail && strstr(rep->detail, option), "detail: %s", rep->detail);
    printf("refused: %s\n", rep->detail);
    c10dpb__reply__free_unpacked(rep, NULL);
}

static void parked_are(long long want)
{
    long long seen = -1;
    ck_assert_msg(wait_parked(coord.url, want, 30000, &seen), "%lld parked, not %lld", seen, want);
}

/* Each wait is 256 keys of 4,000 bytes, about 1.0 MB as sent: four fit a
 * connection's 4 MiB, six the coordinator's 6 MiB. */
START_TEST(parked_bytes_past_a_connection_or_the_coordinator_are_refused)
{
    start((const char *const[]){"--max-connection-parked-bytes", "4194304", "--max-parked-bytes",
                                "6291456", NULL});
    int a = raw_connect(coord.url), b = raw_connect(coord.url);
    ck_assert_int_ge(a, 0);
    ck_assert_int_ge(b, 0);
    for (int i = 0; i < 4; i++)
        send_wait(a, 10 + i, i, 256);
    parked_are(4);
    send_wait(a, 14, 4, 256); /* a fifth on the same connection */
    refused_naming(a, 14, "--max-connection-parked-bytes");
    send_wait(b, 20, 20, 256); /* another connection: within the coordinator's */
    parked_are(5);
    send_wait(b, 21, 21, 256);
    parked_are(6);
    send_wait(b, 22, 22, 256);
    refused_naming(b, 22, "--max-parked-bytes");
    close(a); /* its four go, and with them their bytes */
    parked_are(2);
    send_wait(b, 23, 23, 256);
    parked_are(3);
    close(b);
    stop();
}
END_TEST

/* The TCPStore port's WAITs together are held to their own limit, below
 * the coordinator's: one that would pass it closes its connection (the
 * protocol has no error to answer with), and the log says which limit. */
START_TEST(tcpstore_waits_past_their_port_limit_close_the_connection)
{
    start((const char *const[]){"--tcpstore-max-parked-bytes", "2097152", NULL});
    int fd = ts_connect();
    size_t n = 256;
    char **keys = missing_keys(1, n);
    uint8_t *q = malloc(1 + 8 + n * (8 + KEY_BYTES));
    size_t len = ts_keys_query(q, TS_WAIT, (const char *const *)keys, n);
    for (int i = 0; i < 2; i++) /* 2 x 1.0 MB: within 2 MiB */
        ck_assert_int_eq(raw_write_all(fd, q, len), 0);
    parked_are(2);
    ck_assert_int_eq(raw_write_all(fd, q, len), 0);
    ck_assert_msg(closed_by_peer(fd, 30000), "the third WAIT did not close its connection");
    ck_assert(coord_log_contains(&coord, "--tcpstore-max-parked-bytes"));
    parked_are(0);
    free(q);
    free_keys(keys, n);
    close(fd);
    stop();
}
END_TEST

/* Twelve waits of 4,096 keys of 4,000 bytes (about 200 MB) parked, then
 * their connection closed: the coordinator's RSS comes back down. It kept
 * 2.4 GB of such a flood's memory after it closed. */
/* RSS comes back within 60 MB of before (15 s at most). */
static long rss_back_to(long before)
{
    long after = rss_kib(coord.pid);
    for (long long due = test_now_ms() + 15000;
         after - before > 60 * 1024 && test_now_ms() < due; after = rss_kib(coord.pid))
        usleep(100 * 1000);
    ck_assert_msg(after - before < 60 * 1024, "RSS stayed %ld KiB above where it began",
                  after - before);
    return after;
}

/* 12 waits of 16 MB parked on fd: RSS grew by them; returns it. */
static long twelve_parked(int fd, long before, int timeout_ms)
{
    for (int i = 0; i < 12; i++)
        send_wait_for(fd, 100 + i, i, 4096, timeout_ms);
    parked_are(12);
    long parked = rss_kib(coord.pid);
    ck_assert_msg(parked - before > 150 * 1024, "12 waits of 16 MB took only %ld KiB",
                  parked - before);
    return parked;
}

START_TEST(the_memory_of_parked_waits_goes_back_when_they_go)
{
    if (!MEMORY_CHECKED)
        return;
    start((const char *const[]){"--max-connection-parked-bytes", "1073741824",
                                "--max-parked-bytes", "1073741824", NULL});
    long before = rss_kib(coord.pid);
    int fd = raw_connect(coord.url);
    ck_assert_int_ge(fd, 0);
    long parked = twelve_parked(fd, before, 600000);
    close(fd); /* they go with their connection */
    parked_are(0);
    long after = rss_back_to(before);
    printf("parked waits: RSS %ld KiB, %ld with 12 waits parked, %ld after their connection "
           "closed\n", before, parked, after);
    /* again, their connection open: they time out */
    fd = raw_connect(coord.url);
    ck_assert_int_ge(fd, 0);
    /* 20 s: all twelve are parked before the first times out, even on a
     * loaded machine, where sending 200 MB takes seconds */
    parked = twelve_parked(fd, before, 20000);
    for (int i = 0; i < 12; i++) {
        uint64_t id;
        C10dpb__Reply *rep = raw_read_reply(fd, 60000, &id);
        ck_assert_msg(rep && rep->status == C10D_ETIMEDOUT, "wait %d did not time out", i);
        c10dpb__reply__free_unpacked(rep, NULL);
    }
    after = rss_back_to(before);
    printf("parked waits: RSS %ld KiB with 12 waits parked, %ld after they timed out\n", parked,
           after);
    close(fd);
    stop();
}
END_TEST

/* Writes through the TCPStore port stop at --tcpstore-quota-bytes: by
 * what the keys hold, not by what was written (one key overwritten ten
 * times holds one value). Past it the connection is closed (TCPStore
 * cannot answer an error) and the log names the option. */
START_TEST(tcpstore_writes_stop_at_the_port_quota)
{
    start((const char *const[]){"--tcpstore-quota-bytes", "4194304", NULL});
    size_t len;
    uint8_t *same = ts_set("same", 1u << 20, &len);
    int fd = ts_store("first", 1024);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(raw_write_all(fd, same, len), 0);
    free(same);
    uint8_t check[64], ready = 9;
    const char *key = "same";
    size_t cl = ts_keys_query(check, TS_CHECK, &key, 1);
    ck_assert_int_eq(raw_write_all(fd, check, cl), 0);
    ck_assert_msg(read_exact(fd, &ready, 1, 30000) == 0, "overwrites of one key were refused");
    ck_assert_int_eq(ready, 0);
    int refused = 0;
    for (int i = 0; i < 8 && !refused; i++) { /* 1 MiB each: the fourth passes 4 MiB */
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        uint8_t *q = ts_set(k, 1u << 20, &len);
        refused = raw_write_all(fd, q, len) != 0;
        free(q);
        const char *kk = k;
        cl = ts_keys_query(check, TS_CHECK, &kk, 1);
        refused = refused || raw_write_all(fd, check, cl) != 0 ||
                  read_exact(fd, &ready, 1, 30000) != 0;
        if (refused)
            ck_assert_msg(i >= 2, "refused at 1 MiB key %d, within the quota", i);
    }
    ck_assert_msg(refused, "8 MiB were stored through a 4 MiB quota");
    ck_assert(coord_log_contains(&coord, "--tcpstore-quota-bytes"));
    close(fd);
    /* the main port is not held to it */
    c10d_store *s;
    OK(c10d_store_connect(&s, coord.url, NULL));
    void *big = calloc(1, 8u << 20);
    OK(c10d_store_set(s, "main/big", big, 8u << 20));
    free(big);
    c10d_store_close(s);
    stop();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tcpstore_limits");
    TCase *t = tcase_create("limits");
    tcase_set_timeout(t, 180);
    tcase_add_test(t, a_get_flood_on_the_tcpstore_port_does_not_hold_up_the_main_port);
    tcase_add_test(t, parked_bytes_past_a_connection_or_the_coordinator_are_refused);
    tcase_add_test(t, tcpstore_waits_past_their_port_limit_close_the_connection);
    tcase_add_test(t, the_memory_of_parked_waits_goes_back_when_they_go);
    tcase_add_test(t, tcpstore_writes_stop_at_the_port_quota);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return c10d_run_suite(suite());
}
