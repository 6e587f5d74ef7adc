/* TLS end to end: a coordinator on tls+tcp:// with a throwaway CA's
 * certificate; the store, a job's collectives and c10d-ctl over it, with a
 * token too; a client without the CA, with the wrong CA, or speaking plain
 * TCP gets a clear error naming TLS (and the coordinator serves the
 * others); a TLS listener without a certificate refuses to start. */
#include "coord_proc.h"
#include "tls_certs.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static coord_proc coord;
static tls_certs certs;
static char token_file[600];

#define OK(call) ck_assert_msg((call) == C10D_OK, "%s: %s", #call, c10d_errmsg())

static void setup(void)
{
    coord_init(&coord);
    ck_assert_msg(tls_make_certs(coord.dir, &certs) == 0, "openssl could not make certificates");
    snprintf(token_file, sizeof token_file, "%s/token", coord.dir);
    FILE *f = fopen(token_file, "w");
    fputs("s3cret\n", f);
    fclose(f);
    const char *args[] = {"--tls-cert", certs.cert, "--tls-key", certs.key,
                          "--token-file", token_file, NULL};
    ck_assert_int_eq(coord_start(&coord, "tls+tcp://127.0.0.1:0", args, NULL), 0);
    ck_assert_msg(strncmp(coord.url, "tls+tcp://127.0.0.1:", 20) == 0 && !strstr(coord.url, ":0"),
                  "bound URL %s", coord.url);
}

static void teardown(void)
{
    coord_cleanup(&coord);
}

static c10d_status connect_with(const char *ca, const char *token, c10d_store **s)
{
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 5000;
    o.tls_ca = ca;
    o.token = token;
    return c10d_store_connect(s, coord.url, &o);
}

START_TEST(the_store_works_over_tls_with_a_token)
{
    c10d_store *s = NULL;
    OK(connect_with(certs.ca, "s3cret", &s));
    OK(c10d_store_set(s, "k", "v", 1));
    void *v;
    size_t n;
    OK(c10d_store_get(s, "k", &v, &n, C10D_NO_WAIT));
    ck_assert_uint_eq(n, 1);
    c10d_free(v);
    int64_t x;
    OK(c10d_store_add(s, "c", 5, &x));
    ck_assert_int_eq(x, 5);
    c10d_store_close(s);
    /* TLS does not stand in for the token. */
    ck_assert_int_eq(connect_with(certs.ca, "wrong", &s), C10D_EAUTH);
}
END_TEST

START_TEST(a_client_without_the_right_ca_is_told_why)
{
    c10d_store *s = NULL;
    long long t0 = test_now_ms();
    ck_assert_int_eq(connect_with("", "s3cret", &s), C10D_EAUTH);
    ck_assert_msg(strstr(c10d_errmsg(), "TLS") && strstr(c10d_errmsg(), "C10D_TLS_CA"), "%s",
                  c10d_errmsg());
    ck_assert_int_eq(connect_with(certs.other_ca, "s3cret", &s), C10D_EAUTH);
    ck_assert_msg(strstr(c10d_errmsg(), "TLS handshake"), "%s", c10d_errmsg());
    /* At once, not after the 5 s timeout: retrying does not fix a CA. */
    ck_assert_int_lt(test_now_ms() - t0, 3000);
    /* The coordinator serves the others all along. */
    OK(connect_with(certs.ca, "s3cret", &s));
    c10d_store_close(s);
}
END_TEST

START_TEST(a_plain_tcp_client_does_not_hurt_the_coordinator)
{
    char plain[300];
    snprintf(plain, sizeof plain, "tcp://%s", coord.url + strlen("tls+tcp://"));
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 20000;
    o.token = "s3cret";
    c10d_store *s = NULL;
    /* It dialled in a tight loop until its timeout (1,114 handshakes a
     * second) and then said nobody answered; now it backs off and, after
     * three connections the server broke with a TLS record, says what
     * the port is, long before its timeout. */
    ck_assert_int_eq(c10d_store_connect(&s, plain, &o), C10D_EPROTO);
    ck_assert_msg(strstr(c10d_errmsg(), "answers in TLS") && strstr(c10d_errmsg(), "tls+tcp://"),
                  "%s", c10d_errmsg());
    /* The coordinator says so too (it logged nothing for a failed
     * handshake, though the docs said it did). */
    for (long long t0 = test_now_ms(); !coord_log_contains(&coord, "TLS handshake with 127.0.0.1:");
         usleep(20000))
        ck_assert_msg(test_now_ms() - t0 < 5000, "no log line for the failed handshakes (%s)",
                      coord.log);
    OK(connect_with(certs.ca, "s3cret", &s));
    OK(c10d_store_set(s, "still", "here", 4));
    c10d_store_close(s);
}
END_TEST

/* Connections the coordinator holds open now, as it says (this handle's
 * own included). */
static int64_t open_connections(c10d_store *s)
{
    c10d_coord_info *info = NULL;
    OK(c10d_store_coord_info(s, &info));
    int64_t n = info->clients;
    c10d_free(info);
    return n;
}

/* A plain socket connected to the coordinator's port (127.0.0.1). */
static int plain_socket(void)
{
    const char *colon = strrchr(coord.url, ':');
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

START_TEST(a_failed_handshake_names_a_client_that_already_hung_up)
{
    /* The coordinator logs a failed handshake once it reads the
     * connection, which may be after the client gave up: a client that
     * resets its connection can no longer be asked for its address then,
     * and the log said "TLS handshake with ? failed". It is read when the
     * connection is accepted. */
    c10d_store *s = NULL;
    OK(connect_with(certs.ca, "s3cret", &s));
    int64_t before = open_connections(s);
    int fd = plain_socket();
    ck_assert_int_ge(fd, 0);
    for (long long t0 = test_now_ms(); open_connections(s) < before + 1; usleep(10000))
        ck_assert_msg(test_now_ms() - t0 < 5000, "the coordinator never accepted it");
    static const char not_tls[16] = "not a handshake";
    ck_assert_int_eq(write(fd, not_tls, sizeof not_tls), (ssize_t)sizeof not_tls);
    struct linger reset = {1, 0}; /* close with a reset: the socket is gone at once */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    close(fd);
    for (long long t0 = test_now_ms(); !coord_log_contains(&coord, "TLS handshake with 127.0.0.1:");
         usleep(20000))
        ck_assert_msg(test_now_ms() - t0 < 5000, "no log line naming the client (%s)", coord.log);
    ck_assert(!coord_log_contains(&coord, "TLS handshake with ? failed"));
    c10d_store_close(s);
}
END_TEST

static int job_body(int rank, int n, void *arg)
{
    c10d_pg *pg = world_init(coord.url, arg, rank, n, 30000);
    if (!pg)
        return 10;
    float x[4] = {1, 2, 3, (float)rank};
    c10d_tensor t = c10d_tensor_1d(x, C10D_FLOAT32, 4);
    for (int i = 0; i < 20; i++)
        if (c10d_all_reduce(pg, &t, C10D_SUM, NULL, NULL) != C10D_OK) {
            fprintf(stderr, "rank %d: %s\n", rank, c10d_errmsg());
            return 11;
        }
    c10d_destroy(pg);
    return 0;
}

START_TEST(a_job_runs_over_tls)
{
    /* The ranks take the CA and the token from the environment. */
    setenv("C10D_TLS_CA", certs.ca, 1);
    setenv("C10D_TOKEN", "s3cret", 1);
    int failed = world_run(2, job_body, (void *)world_job("tls"), 60, NULL);
    unsetenv("C10D_TLS_CA");
    unsetenv("C10D_TOKEN");
    ck_assert_int_eq(failed, 0);
}
END_TEST

START_TEST(a_client_rides_through_a_restart_over_tls)
{
    /* The handshake is redone on the new connection and the waiting call
     * is sent again; with the watch of a job parked on the same
     * connection, a_job_runs_over_tls covers the other TLS receive path. */
    c10d_store *s = NULL;
    OK(connect_with(certs.ca, "s3cret", &s));
    int64_t x;
    OK(c10d_store_add(s, "n", 1, &x));
    char url[256];
    snprintf(url, sizeof url, "%s", coord.url);
    coord_stop(&coord, SIGKILL);
    const char *args[] = {"--tls-cert", certs.cert, "--tls-key", certs.key,
                          "--token-file", token_file, NULL};
    ck_assert_int_eq(coord_start(&coord, url, args, NULL), 0);
    OK(c10d_store_add(s, "n", 1, &x));
    ck_assert_int_eq(x, 2); /* the database kept the first */
    void *v;
    size_t n;
    OK(c10d_store_get(s, "n", &v, &n, C10D_NO_WAIT));
    c10d_free(v);
    c10d_store_close(s);
}
END_TEST

static int ctl(const char *ca, char *out, size_t outlen)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "C10D_TOKEN=s3cret %s --json --coord %s %s%s status 2>&1",
             C10D_CTL_BIN, coord.url, ca ? "--tls-ca " : "", ca ? ca : "");
    FILE *p = popen(cmd, "r");
    size_t got = fread(out, 1, outlen - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(c10d_ctl_speaks_tls)
{
    char out[8192];
    ck_assert_msg(ctl(certs.ca, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "tls+tcp://"), "%s", out);
    ck_assert_msg(ctl(certs.other_ca, out, sizeof out) == 6, "%s", out); /* not authorized */
    ck_assert_msg(strstr(out, "TLS"), "%s", out);
}
END_TEST

/* A coordinator that requires client certificates (--tls-ca): the
 * library, c10d-ctl and a job's ranks present one from C10D_TLS_CERT and
 * C10D_TLS_KEY, the options or the flags; a client without one is told
 * why. (Nothing could present one before: --tls-ca could not be used.) */
START_TEST(mutual_tls_end_to_end)
{
    coord_proc m;
    coord_init(&m);
    const char *args[] = {"--tls-cert", certs.cert, "--tls-key", certs.key, "--tls-ca", certs.ca,
                          NULL};
    ck_assert_int_eq(coord_start(&m, "tls+tcp://127.0.0.1:0", args, NULL), 0);
    /* A job, from the environment (first: NNG must not be used before a fork). */
    char saved[256];
    snprintf(saved, sizeof saved, "%s", coord.url);
    snprintf(coord.url, sizeof coord.url, "%s", m.url);
    setenv("C10D_TLS_CA", certs.ca, 1);
    setenv("C10D_TLS_CERT", certs.client_cert, 1);
    setenv("C10D_TLS_KEY", certs.client_key, 1);
    int failed = world_run(2, job_body, (void *)world_job("mtls"), 60, NULL);
    unsetenv("C10D_TLS_CERT");
    unsetenv("C10D_TLS_KEY");
    unsetenv("C10D_TLS_CA");
    ck_assert_int_eq(failed, 0);
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 5000;
    o.tls_ca = certs.ca;
    c10d_store *s = NULL;
    ck_assert_int_eq(c10d_store_connect(&s, m.url, &o), C10D_EAUTH);
    ck_assert_msg(strstr(c10d_errmsg(), "client certificate") &&
                      strstr(c10d_errmsg(), "C10D_TLS_CERT"),
                  "no certificate: %s", c10d_errmsg());
    o.tls_cert = certs.client_cert; /* a certificate without its key */
    ck_assert_int_eq(c10d_store_connect(&s, m.url, &o), C10D_EAUTH);
    ck_assert_msg(strstr(c10d_errmsg(), "needs its key"), "%s", c10d_errmsg());
    o.tls_key = certs.client_key;
    OK(c10d_store_connect(&s, m.url, &o));
    OK(c10d_store_set(s, "mtls", "ok", 2));
    c10d_store_close(s);
    /* c10d-ctl, with its flags. */
    char cmd[3000], out[8192];
    snprintf(cmd, sizeof cmd, "%s --json --coord %s --tls-ca %s --tls-cert %s --tls-key %s "
             "get mtls 2>&1", C10D_CTL_BIN, m.url, certs.ca, certs.client_cert, certs.client_key);
    FILE *p = popen(cmd, "r");
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    snprintf(coord.url, sizeof coord.url, "%s", saved);
    coord_cleanup(&m);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "ok"), "c10d-ctl: %s", out);
}
END_TEST

/* An expired server certificate was reported as "Peer could not be
 * authenticated" with advice about the CA and the host name: the
 * verifier's own reason comes through now. */
START_TEST(an_expired_certificate_is_named_as_expired)
{
    coord_proc e;
    coord_init(&e);
    const char *args[] = {"--tls-cert", certs.expired, "--tls-key", certs.key, NULL};
    ck_assert_int_eq(coord_start(&e, "tls+tcp://127.0.0.1:0", args, NULL), 0);
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 5000;
    o.tls_ca = certs.ca;
    c10d_store *s = NULL;
    /* valid for 0 days from its making: expired once that second is past */
    c10d_status st;
    long long t0 = test_now_ms();
    while ((st = c10d_store_connect(&s, e.url, &o)) == C10D_OK && test_now_ms() - t0 < 5000) {
        c10d_store_close(s);
        usleep(100000);
    }
    coord_cleanup(&e);
    ck_assert_int_eq(st, C10D_EAUTH);
    ck_assert_msg(strstr(c10d_errmsg(), "expired"), "%s", c10d_errmsg());
}
END_TEST

/* A TLS client on a plain coordinator: its client hello was read as the
 * header of a 16.8 MB frame, and the client waited 30 s to be told to
 * check whether a coordinator runs there. The coordinator recognises the
 * hello, logs it and closes; the client says what it found. */
START_TEST(a_tls_client_on_a_plain_port_is_told_at_once)
{
    coord_proc p;
    coord_init(&p);
    ck_assert_int_eq(coord_start(&p, NULL, NULL, NULL), 0);
    char url[300];
    snprintf(url, sizeof url, "tls+%s", p.url);
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 20000;
    o.tls_ca = certs.ca;
    c10d_store *s = NULL;
    c10d_status st = c10d_store_connect(&s, url, &o);
    int logged = coord_log_contains(&p, "began a TLS handshake, and this listener is plain");
    coord_cleanup(&p);
    ck_assert_msg(st == C10D_EAUTH && strstr(c10d_errmsg(), "does not answer in TLS"), "%s: %s",
                  c10d_status_name(st), c10d_errmsg());
    ck_assert_msg(logged, "the coordinator did not log the TLS client hello");
}
END_TEST

START_TEST(a_tls_listener_needs_a_certificate)
{
    coord_proc c2;
    coord_init(&c2);
    int status = 0;
    ck_assert_int_eq(coord_start(&c2, "tls+tcp://127.0.0.1:0", NULL, &status), -1);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status %d", status);
    ck_assert(coord_log_contains(&c2, "needs --tls-cert and --tls-key"));
    /* A key that is not the certificate's. */
    const char *bad[] = {"--tls-cert", certs.cert, "--tls-key", certs.ca, NULL};
    ck_assert_int_eq(coord_start(&c2, "tls+tcp://127.0.0.1:0", bad, &status), -1);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d", status);
    ck_assert(coord_log_contains(&c2, "cannot"));
    /* A valid key that is not the certificate's: NNG took it, and the
     * coordinator "served" while every handshake failed. */
    const char *other[] = {"--tls-cert", certs.cert, "--tls-key", certs.other_key, NULL};
    ck_assert_int_eq(coord_start(&c2, "tls+tcp://127.0.0.1:0", other, &status), -1);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d", status);
    char want[1200];
    snprintf(want, sizeof want, "the TLS key %s is not the key of the certificate %s",
             certs.other_key, certs.cert);
    ck_assert_msg(coord_log_contains(&c2, want), "the refusal does not name both files");
    coord_cleanup(&c2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("tls");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_store_works_over_tls_with_a_token);
    tcase_add_test(tc, a_client_without_the_right_ca_is_told_why);
    tcase_add_test(tc, a_plain_tcp_client_does_not_hurt_the_coordinator);
    tcase_add_test(tc, a_failed_handshake_names_a_client_that_already_hung_up);
    tcase_add_test(tc, a_job_runs_over_tls);
    tcase_add_test(tc, a_client_rides_through_a_restart_over_tls);
    tcase_add_test(tc, c10d_ctl_speaks_tls);
    tcase_add_test(tc, a_tls_listener_needs_a_certificate);
    tcase_add_test(tc, mutual_tls_end_to_end);
    tcase_add_test(tc, a_tls_client_on_a_plain_port_is_told_at_once);
    tcase_add_test(tc, an_expired_certificate_is_named_as_expired);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
