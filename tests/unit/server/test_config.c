/* The coordinator's command line (server/config.c): every option in
 * --help is one the parser takes, numbers outside their range are refused
 * naming the option and the range, defaults hold when nothing is said,
 * and the checks across options refuse what cannot run. */
#include "config.h"
#include "log.h"

#include "check_main.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* argv from a NULL-terminated list; parse's result. */
static int parse(c10ds_config *cfg, const char *const *args)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"c10d-coord";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    return c10ds_config_parse(cfg, argc, argv);
}

/* What parse wrote on standard output (stdout) or error (fd 2). */
static int parse_capturing(c10ds_config *cfg, const char *const *args, int fd, char *out,
                           size_t cap)
{
    fflush(stdout);
    fflush(stderr);
    FILE *t = tmpfile();
    ck_assert_ptr_nonnull(t);
    int saved = dup(fd);
    dup2(fileno(t), fd);
    int rv = parse(cfg, args);
    fflush(stdout);
    fflush(stderr);
    dup2(saved, fd);
    close(saved);
    rewind(t);
    size_t n = fread(out, 1, cap - 1, t);
    out[n] = '\0';
    fclose(t);
    return rv;
}

/* Every option with an argument that it accepts (with --db :memory: or
 * what it needs beside it), as a user writes it. */
static const struct {
    const char *name, *arg;
} every[] = {
    {"listen", "tcp://127.0.0.1:0"}, {"tcpstore-listen", "29400"}, {"metrics-listen", "9100"},
    {"db", ":memory:"},
    {"max-key-bytes", "100"}, {"max-value-bytes", "1000"}, {"max-message-bytes", "4096"},
    {"max-multi-keys", "7"}, {"max-world-size", "9"}, {"max-connection-buffer", "65536"},
    {"max-pending-bytes", "1048576"}, {"frame-timeout", "100"}, {"max-decode-bytes", "1048576"},
    {"max-reply-bytes", "1048576"}, {"max-parked", "5"}, {"max-connections", "3"},
    {"drain-timeout", "0"}, {"dedup-window", "1"}, {"heartbeat-timeout", "200"},
    {"retention", "0"}, {"busy-poll-us", "0"}, {"ready-file", "/tmp/x"}, {"log-level", "debug"}, {"raft-latency-ms", "7"},
    {"max-parked-bytes", "65536"}, {"max-connection-parked-bytes", "65537"},
    {"tcpstore-max-parked-bytes", "65538"}, {"tcpstore-max-inflight", "3"},
    {"tcpstore-max-port-inflight", "4"}, {"tcpstore-quota-bytes", "65539"},
};

START_TEST(defaults_hold_when_nothing_is_said)
{
    c10ds_config cfg;
    const char *none[] = {NULL};
    ck_assert_int_eq(parse(&cfg, none), 0);
    ck_assert_str_eq(cfg.listen_url, C10DS_DEFAULT_LISTEN);
    ck_assert_str_eq(cfg.db_path, C10DS_DEFAULT_DB);
    ck_assert_uint_eq(cfg.max_key_bytes, 4096);
    ck_assert_uint_eq(cfg.max_value_bytes, 16u << 20);
    ck_assert_uint_eq(cfg.max_message_bytes, (16u << 20) + (1u << 20));
    ck_assert_uint_eq(cfg.max_decode_bytes, 2 * cfg.max_message_bytes);
    ck_assert_int_eq(cfg.frame_timeout_ms, C10DS_DEFAULT_FRAME_TIMEOUT_MS);
    ck_assert_int_eq(cfg.heartbeat_timeout_ms, C10DS_DEFAULT_HEARTBEAT_TIMEOUT_MS);
    ck_assert_int_eq(cfg.busy_poll_us, C10DS_DEFAULT_BUSY_POLL_US);
    ck_assert_int_eq(cfg.retention_s, C10DS_DEFAULT_RETENTION_S);
    ck_assert_int_eq(cfg.raft_latency_ms, C10DS_DEFAULT_RAFT_LATENCY_MS);
    ck_assert_uint_eq(cfg.max_parked, 262144);
    ck_assert_uint_eq(cfg.max_parked_bytes, 256u << 20);
    ck_assert_uint_eq(cfg.max_conn_parked_bytes, 64u << 20);
    ck_assert_uint_eq(cfg.ts_max_parked_bytes, 64u << 20);
    ck_assert_uint_eq(cfg.ts_max_inflight, 1);
    ck_assert_uint_eq(cfg.ts_max_port_inflight, 2);
    ck_assert_uint_eq(cfg.ts_quota_bytes, 1u << 30);
    ck_assert_uint_eq(cfg.max_multi_keys, 4096);
    ck_assert_uint_eq(cfg.max_world_size, 65536);
    ck_assert_uint_eq(cfg.max_conn_buffer, 64u << 20);
    ck_assert_int_eq(cfg.drain_timeout_ms, C10DS_DEFAULT_DRAIN_TIMEOUT_MS);
    ck_assert_int_eq(cfg.dedup_window_s, 600);
    ck_assert_uint_eq(cfg.max_pending_bytes, 256u << 20);
    ck_assert_uint_eq(cfg.max_reply_bytes, 256u << 20);
    ck_assert_int_eq(cfg.log_level, C10DS_LOG_INFO);
    ck_assert_ptr_null(cfg.token);
    ck_assert_uint_gt(cfg.max_connections, 0);
    ck_assert_ptr_null(cfg.tcpstore_url);
    ck_assert_ptr_null(cfg.metrics_url);
    ck_assert_uint_eq(cfg.replica_id, 0);
    c10ds_config_free(&cfg);
}
END_TEST

START_TEST(every_option_taken_lands_in_its_field)
{
    const char *args[2 * (sizeof every / sizeof every[0]) + 1];
    char flags[sizeof every / sizeof every[0]][64];
    size_t n = 0;
    for (size_t i = 0; i < sizeof every / sizeof every[0]; i++) {
        snprintf(flags[i], sizeof flags[i], "--%s", every[i].name);
        args[n++] = flags[i];
        args[n++] = every[i].arg;
    }
    args[n] = NULL;
    c10ds_config cfg;
    ck_assert_int_eq(parse(&cfg, args), 0);
    ck_assert_str_eq(cfg.listen_url, "tcp://127.0.0.1:0");
    ck_assert_str_eq(cfg.tcpstore_url, "tcp://127.0.0.1:29400");
    ck_assert_str_eq(cfg.metrics_url, "http://127.0.0.1:9100"); /* loopback unless HOST is given */
    ck_assert_str_eq(cfg.db_path, ":memory:");
    ck_assert_uint_eq(cfg.max_key_bytes, 100);
    ck_assert_uint_eq(cfg.max_value_bytes, 1000);
    ck_assert_uint_eq(cfg.max_message_bytes, 4096);
    ck_assert_uint_eq(cfg.max_multi_keys, 7);
    ck_assert_uint_eq(cfg.max_world_size, 9);
    ck_assert_uint_eq(cfg.max_conn_buffer, 65536);
    ck_assert_uint_eq(cfg.max_pending_bytes, 1048576);
    ck_assert_int_eq(cfg.frame_timeout_ms, 100);
    ck_assert_uint_eq(cfg.max_decode_bytes, 1048576);
    ck_assert_uint_eq(cfg.max_reply_bytes, 1048576);
    ck_assert_uint_eq(cfg.max_parked, 5);
    ck_assert_uint_eq(cfg.max_parked_bytes, 65536);
    ck_assert_uint_eq(cfg.max_conn_parked_bytes, 65537);
    ck_assert_uint_eq(cfg.ts_max_parked_bytes, 65538);
    ck_assert_uint_eq(cfg.ts_max_inflight, 3);
    ck_assert_uint_eq(cfg.ts_max_port_inflight, 4);
    ck_assert_uint_eq(cfg.ts_quota_bytes, 65539);
    ck_assert_uint_eq(cfg.max_connections, 3);
    ck_assert_int_eq(cfg.drain_timeout_ms, 0);
    ck_assert_int_eq(cfg.dedup_window_s, 1);
    ck_assert_int_eq(cfg.heartbeat_timeout_ms, 200);
    ck_assert_int_eq(cfg.retention_s, 0);
    ck_assert_int_eq(cfg.busy_poll_us, 0);
    ck_assert_str_eq(cfg.ready_file, "/tmp/x");
    ck_assert_int_eq(cfg.raft_latency_ms, 7);
    ck_assert_int_eq(cfg.log_level, C10DS_LOG_DEBUG);
    c10ds_config_free(&cfg);
}
END_TEST

START_TEST(help_and_version_list_what_the_parser_takes)
{
    static char help[32768];
    c10ds_config cfg;
    const char *args[] = {"--help", NULL};
    ck_assert_int_eq(parse_capturing(&cfg, args, 1, help, sizeof help), 1);
    ck_assert_ptr_nonnull(strstr(help, "Usage: c10d-coord [OPTIONS]"));
    ck_assert_ptr_nonnull(strstr(help, "Exit status:"));
    const char *more[] = {"tls-cert", "tls-key", "tls-ca", "token-file", "help", "version",
                          "replica", "peers", "data-dir", "advertise-url",
                          "seed", "export"};
    int listed = 0;
    for (size_t i = 0; i < sizeof every / sizeof every[0] + sizeof more / sizeof more[0]; i++) {
        const char *name = i < sizeof every / sizeof every[0]
                               ? every[i].name
                               : more[i - sizeof every / sizeof every[0]];
        char flag[64];
        snprintf(flag, sizeof flag, "--%s ", name);
        ck_assert_msg(strstr(help, flag) != NULL, "--help does not list --%s", name);
        listed++;
    }
    /* and no option in --help that is not one of those */
    int lines = 0;
    for (const char *p = help; (p = strstr(p, "\n  ")); p++) {
        const char *q = p + 3;
        while (*q == ' ')
            q++;
        if (q[0] == '-' && (q[1] == '-' || (q[1] && q[2] == ',')) && q - p <= 9)
            lines++;
    }
    ck_assert_int_eq(lines, listed);
    /* each option's text begins at the same column, two spaces at least
     * after its name */
    const char *l = strstr(help, "\n      --max-pending-bytes N  bytes");
    ck_assert_msg(l != NULL, "%s", help);
    ck_assert_ptr_nonnull(strstr(help, "\n      --max-key-bytes N     longest key"));
    ck_assert_ptr_nonnull(strstr(help, "\n      --tcpstore-listen [HOST:]PORT\n"
                                       "                            also speak"));
    const char *version[] = {"-V", NULL};
    ck_assert_int_eq(parse_capturing(&cfg, version, 1, help, sizeof help), 1);
    ck_assert_ptr_nonnull(strstr(help, "replicas (--replica): "));
}
END_TEST

/* Each number alone, at the top of its range (past 32 bits where its
 * field is 8 bytes): it lands whole in its own field and leaves every
 * other field as it was. */
START_TEST(each_number_alone_lands_whole_and_touches_nothing_else)
{
    static const struct {
        const char *name, *arg;
        size_t at, width;
        uint64_t want;
    } cases[] = {
#define AT(f) offsetof(c10ds_config, f), sizeof(((c10ds_config *)0)->f)
        {"max-key-bytes", "65536", AT(max_key_bytes), 65536}, /* the message holds one */
        {"max-multi-keys", "1048576", AT(max_multi_keys), 1048576},
        {"max-world-size", "16777216", AT(max_world_size), 16777216},
        {"max-connection-buffer", "1099511627776", AT(max_conn_buffer), 1ull << 40},
        {"max-pending-bytes", "1099511627776", AT(max_pending_bytes), 1ull << 40},
        {"max-decode-bytes", "1099511627776", AT(max_decode_bytes), 1ull << 40},
        {"max-reply-bytes", "1099511627776", AT(max_reply_bytes), 1ull << 40},
        {"max-parked", "4294967296", AT(max_parked), 1ull << 32},
        {"max-connections", "16777216", AT(max_connections), 16777216},
        {"frame-timeout", "3600000", AT(frame_timeout_ms), 3600000},
        {"drain-timeout", "3600000", AT(drain_timeout_ms), 3600000},
        {"dedup-window", "604800", AT(dedup_window_s), 604800},
        {"heartbeat-timeout", "3600000", AT(heartbeat_timeout_ms), 3600000},
        {"retention", "315360000", AT(retention_s), 315360000},
        {"busy-poll-us", "10000", AT(busy_poll_us), 10000},
        {"raft-latency-ms", "10000", AT(raft_latency_ms), 10000},
#undef AT
    };
    c10ds_config base;
    const char *none[] = {NULL};
    ck_assert_int_eq(parse(&base, none), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", cases[i].name);
        const char *args[] = {flag, cases[i].arg, NULL};
        c10ds_config cfg;
        ck_assert_msg(parse(&cfg, args) == 0, "--%s %s refused", cases[i].name, cases[i].arg);
        uint64_t got = 0;
        if (cases[i].width == 4) {
            uint32_t v;
            memcpy(&v, (char *)&cfg + cases[i].at, sizeof v);
            got = v;
        } else {
            memcpy(&got, (char *)&cfg + cases[i].at, sizeof got);
        }
        ck_assert_msg(got == cases[i].want, "--%s %s gave %llu", cases[i].name, cases[i].arg,
                      (unsigned long long)got);
        /* the fields a large value raises to fit it, and the pointers, aside,
         * every other byte is the default's */
        static const struct {
            size_t at, len;
        } fields[] = {
#define F(f) {offsetof(c10ds_config, f), sizeof(((c10ds_config *)0)->f)}
            F(max_key_bytes), F(max_value_bytes), F(max_multi_keys), F(max_world_size),
            F(frame_timeout_ms), F(max_parked), F(drain_timeout_ms), F(dedup_window_s),
            F(heartbeat_timeout_ms), F(busy_poll_us), F(retention_s), F(log_level),
            F(replica_id), F(raft_latency_ms),
#undef F
        };
        for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
            if (fields[k].at != cases[i].at)
                ck_assert_msg(!memcmp((char *)&cfg + fields[k].at, (char *)&base + fields[k].at,
                                      fields[k].len),
                              "--%s changed the field at offset %zu", cases[i].name,
                              fields[k].at);
        c10ds_config_free(&cfg);
    }
    c10ds_config_free(&base);
}
END_TEST

/* A replica's command line: every replica option in its field; and the
 * checks that tie --db, --replica, --peers and --export together. */
START_TEST(a_replica_takes_its_options_and_refuses_a_db)
{
    const char *args[] = {"--replica", "2", "--peers", "1=10.0.0.1:29600,2=10.0.0.2:29600",
                          "--data-dir", "/tmp/r2", "--advertise-url", "tcp://10.0.0.2:29500",
                          "--seed", "/tmp/seed.db", "--raft-latency-ms", "20", NULL};
    c10ds_config cfg;
    ck_assert_int_eq(parse(&cfg, args), 0);
    ck_assert_uint_eq(cfg.replica_id, 2);
    ck_assert_int_eq(cfg.npeers, 2);
    ck_assert_str_eq(cfg.peers[1].address, "10.0.0.2:29600");
    ck_assert_str_eq(cfg.data_dir, "/tmp/r2");
    ck_assert_str_eq(cfg.advertise_url, "tcp://10.0.0.2:29500");
    ck_assert_str_eq(cfg.seed_path, "/tmp/seed.db");
    ck_assert_int_eq(cfg.raft_latency_ms, 20);
    ck_assert_str_eq(cfg.db_path, ":memory:"); /* the leader's working copy */
    c10ds_config_free(&cfg);
    const char *no_dir[] = {"--replica", "1", "--peers", "1=10.0.0.1:29600", NULL};
    ck_assert_int_eq(parse(&cfg, no_dir), 0);
    ck_assert_str_eq(cfg.data_dir, "c10d-replica-1");
    c10ds_config_free(&cfg);
    const char *exp[] = {"--export", "/tmp/e.db", "--peers", "1=10.0.0.1:29600", NULL};
    ck_assert_int_eq(parse(&cfg, exp), 0);
    ck_assert_str_eq(cfg.export_path, "/tmp/e.db");
    c10ds_config_free(&cfg);
}
END_TEST

/* A token file's secret, its trailing newline cut. */
START_TEST(a_token_file_and_tls_paths_are_taken)
{
    char path[] = "/tmp/c10d-test-token-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "s3cret\n", 7), 7);
    close(fd);
    const char *args[] = {"--token-file", path, "--listen", "tls+tcp://127.0.0.1:0", "--tls-cert",
                          "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem", NULL};
    c10ds_config cfg;
    ck_assert_int_eq(parse(&cfg, args), 0);
    unlink(path);
    ck_assert_str_eq(cfg.token, "s3cret");
    ck_assert_str_eq(cfg.tls_cert, "c.pem");
    ck_assert_str_eq(cfg.tls_key, "k.pem");
    ck_assert_str_eq(cfg.tls_ca, "ca.pem");
    c10ds_config_free(&cfg);
}
END_TEST

START_TEST(numbers_outside_their_range_are_refused_by_name)
{
    static const struct {
        const char *name, *bad, *range;
    } cases[] = {
        {"max-key-bytes", "0", "from 1 to 1048576"},
        {"frame-timeout", "99", "from 100 to 3600000"},
        {"heartbeat-timeout", "3600001", "from 200 to 3600000"},
        {"busy-poll-us", "10001", "from 0 to 10000"},
        {"max-world-size", "16777217", "from 1 to 16777216"},
        {"replica", "4294967296", "from 1 to 4294967295"},
        {"retention", "-1", "from 0 to 315360000"},
        {"dedup-window", "12x", "from 1 to 604800"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flag[64], err[1024], want[256];
        snprintf(flag, sizeof flag, "--%s", cases[i].name);
        const char *args[] = {flag, cases[i].bad, NULL};
        c10ds_config cfg;
        ck_assert_int_eq(parse_capturing(&cfg, args, 2, err, sizeof err), -1);
        snprintf(want, sizeof want, "--%s wants a number %s, not '%s'", cases[i].name,
                 cases[i].range, cases[i].bad);
        ck_assert_msg(strstr(err, want) != NULL, "%s: said '%s'", want, err);
        c10ds_config_free(&cfg);
    }
}
END_TEST

START_TEST(what_cannot_run_is_refused)
{
    static const struct {
        const char *args[7];
        const char *why;
    } cases[] = {
        {{"--bogus", NULL}, "Try 'c10d-coord --help'"},
        {{"stray", NULL}, "unexpected argument 'stray'"},
        {{"--listen", "tls+tcp://127.0.0.1:0", NULL}, "needs --tls-cert and --tls-key"},
        {{"--tls-cert", "c.pem", NULL}, "need a tls+tcp:// --listen"},
        {{"--max-message-bytes", "1024", NULL}, "must leave room for the largest key"},
        {{"--peers", "1=10.0.0.1:29600", NULL}, "go with --replica ID"},
        {{"--replica", "2", "--peers", "1=10.0.0.1:29600", NULL}, "is not in --peers"},
        {{"--peers", "1=host:29600", "--replica", "1", NULL}, "is not ID=IPv4:PORT"},
        {{"--replica", "1", "--peers", "1=10.0.0.1:29600", "-d", "x.db", NULL},
         "--replica keeps its state in dqlite, not in --db"},
        {{"--export", "e.db", "--peers", "1=10.0.0.1:29600", "-d", "x.db", NULL},
         "--export writes PATH, not --db"},
        {{"--export", "e.db", "--replica", "1", NULL}, "--export runs on its own"},
        {{"--export", "e.db", NULL}, "--export needs --peers"},
        {{"--log-level", "loud", NULL}, "--log-level wants error, warn, info or debug"},
        {{"--tcpstore-listen", "port", NULL}, "want PORT or HOST:PORT"},
        {{"--metrics-listen", "0.0.0.0:x", NULL}, "--metrics-listen 0.0.0.0:x: want PORT or HOST:PORT"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        c10ds_config cfg;
        char err[1024];
        ck_assert_msg(parse_capturing(&cfg, cases[i].args, 2, err, sizeof err) == -1,
                      "case %zu (%s) was taken", i, cases[i].args[0]);
        ck_assert_msg(strstr(err, cases[i].why) != NULL, "case %zu: want '%s', said '%s'", i,
                      cases[i].why, err);
        c10ds_config_free(&cfg);
    }
}
END_TEST

START_TEST(a_path_given_twice_keeps_the_last)
{
    const char *args[] = {"--ready-file", "/tmp/a", "--ready-file", "/tmp/b", "-d", ":memory:",
                          "-l", "ipc:///tmp/c", NULL};
    c10ds_config cfg;
    ck_assert_int_eq(parse(&cfg, args), 0);
    ck_assert_str_eq(cfg.ready_file, "/tmp/b"); /* the first freed (ASan: no leak) */
    ck_assert_str_eq(cfg.db_path, ":memory:");
    ck_assert_str_eq(cfg.listen_url, "ipc:///tmp/c");
    c10ds_config_free(&cfg);
}
END_TEST

int main(void)
{
    /* the settings the parser also reads from the environment */
    unsetenv("C10D_TOKEN");
    unsetenv("C10D_LOG_LEVEL");
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("command line");
    tcase_add_test(tc, defaults_hold_when_nothing_is_said);
    tcase_add_test(tc, every_option_taken_lands_in_its_field);
    tcase_add_test(tc, help_and_version_list_what_the_parser_takes);
    tcase_add_test(tc, each_number_alone_lands_whole_and_touches_nothing_else);
    tcase_add_test(tc, a_replica_takes_its_options_and_refuses_a_db);
    tcase_add_test(tc, a_token_file_and_tls_paths_are_taken);
    tcase_add_test(tc, numbers_outside_their_range_are_refused_by_name);
    tcase_add_test(tc, what_cannot_run_is_refused);
    tcase_add_test(tc, a_path_given_twice_keeps_the_last);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
