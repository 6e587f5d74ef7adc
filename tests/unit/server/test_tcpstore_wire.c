/* TCPStore's wire alone (server/net/tcpstore_wire.c): no socket, no
 * connection, no engine. Queries fed whole, cut at every byte and
 * malformed; the requests they become; the engine's replies written as
 * TCPStore's bytes. The end-to-end half is tests/python/test_tcpstore.py
 * (torch's own TCPStore client against a real coordinator). */
#include "config.h"
#include "failure.h"
#include "net/tcpstore_runs.h"
#include "net/tcpstore_wire.h"

#include "c10d.pb-c.h"
#include "c10d_time.h"
#include "check_main.h"

#include <c10d/errors.h>
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static c10ds_config cfg;

static void setup(void)
{
    char *argv[] = {(char *)"c10d-coord", NULL};
    ck_assert_int_eq(c10ds_config_parse(&cfg, 1, argv), 0);
}

static void teardown(void)
{
    c10ds_config_free(&cfg);
}

/* A query being written as torch's client writes it. */
typedef struct qbuf {
    uint8_t b[4096];
    size_t n;
} qbuf;

static void put(qbuf *q, const void *p, size_t n)
{
    ck_assert_uint_le(q->n + n, sizeof q->b);
    memcpy(q->b + q->n, p, n);
    q->n += n;
}

static void put_u8(qbuf *q, uint8_t v)
{
    put(q, &v, 1);
}

static void put_u64(qbuf *q, uint64_t v)
{
    put(q, &v, 8);
}

static void put_str(qbuf *q, const char *s, size_t n)
{
    put_u64(q, n);
    put(q, s, n);
}

/* torch 2.2 on: the query types' numbers */
enum { V2_VALIDATE = 0, V2_SET = 1, V2_COMPARE_SET = 2, V2_GET = 3, V2_ADD = 4, V2_CHECK = 5,
       V2_WAIT = 6, V2_NUM_KEYS = 7, V2_MULTI_SET = 11, V2_PING = 13 };

START_TEST(detect_tells_the_numbering_from_the_first_bytes)
{
    uint8_t v2[5] = {0};
    uint32_t magic = C10DS_TS_MAGIC;
    memcpy(v2 + 1, &magic, 4);
    ck_assert_int_eq(c10ds_ts_detect(v2, 0), 0);
    ck_assert_int_eq(c10ds_ts_detect(v2, 4), 0); /* a 0: VALIDATE or a 1.x SET */
    ck_assert_int_eq(c10ds_ts_detect(v2, 5), 2);
    uint8_t set_v1[5] = {0, 3, 0, 0, 0}; /* a SET of a 3-byte key */
    ck_assert_int_eq(c10ds_ts_detect(set_v1, 5), 1);
    uint8_t get_v1[1] = {2};
    ck_assert_int_eq(c10ds_ts_detect(get_v1, 1), 1);
}
END_TEST

START_TEST(a_query_cut_anywhere_asks_for_more_and_whole_is_read)
{
    qbuf q = {0};
    put_u8(&q, V2_COMPARE_SET);
    put_str(&q, "key", 3);
    put_str(&q, "old", 3);
    put_str(&q, "newer", 5);
    for (size_t cut = 0; cut < q.n; cut++) {
        c10ds_ts_query f;
        size_t used = 0;
        ck_assert_int_eq(c10ds_ts_read(q.b, cut, 2, &cfg, &f, &used), C10DS_TS_SHORT);
        /* what it asks for is more than it has and never past the query */
        ck_assert_uint_gt(used, cut);
        ck_assert_uint_le(used, q.n);
    }
    c10ds_ts_query f;
    size_t used = 0;
    ck_assert_int_eq(c10ds_ts_read(q.b, q.n, 2, &cfg, &f, &used), C10DS_TS_WHOLE);
    ck_assert_uint_eq(used, q.n);
    ck_assert_int_eq(f.op, C10DS_TS_COMPARE_SET);
    ck_assert_uint_eq(f.alen, 3);
    ck_assert_mem_eq(f.a, "key", 3);
    ck_assert_mem_eq(f.b, "old", 3);
    ck_assert_uint_eq(f.clen, 5);
    ck_assert_mem_eq(f.c, "newer", 5);
}
END_TEST

START_TEST(queries_back_to_back_are_read_one_at_a_time)
{
    qbuf q = {0};
    put_u8(&q, V2_ADD);
    put_str(&q, "n", 1);
    put_u64(&q, (uint64_t)-3);
    size_t first = q.n;
    put_u8(&q, V2_NUM_KEYS);
    put_u8(&q, V2_PING);
    uint32_t nonce = 77;
    put(&q, &nonce, 4);
    c10ds_ts_query f;
    size_t used;
    ck_assert_int_eq(c10ds_ts_read(q.b, q.n, 2, &cfg, &f, &used), C10DS_TS_WHOLE);
    ck_assert_uint_eq(used, first);
    ck_assert_int_eq(f.op, C10DS_TS_ADD);
    ck_assert_int_eq(f.delta, -3);
    ck_assert_int_eq(c10ds_ts_read(q.b + first, q.n - first, 2, &cfg, &f, &used), C10DS_TS_WHOLE);
    ck_assert_int_eq(f.op, C10DS_TS_NUM_KEYS);
    ck_assert_uint_eq(used, 1);
    ck_assert_int_eq(c10ds_ts_read(q.b + first + 1, q.n - first - 1, 2, &cfg, &f, &used),
                     C10DS_TS_WHOLE);
    ck_assert_int_eq(f.op, C10DS_TS_PING);
    ck_assert_uint_eq(f.u32, 77);
}
END_TEST

START_TEST(the_two_numberings_read_the_same_byte_differently)
{
    /* 3 is GET from torch 2.2 on, ADD up to 2.1 */
    qbuf q = {0};
    put_u8(&q, 3);
    put_str(&q, "k", 1);
    put_u64(&q, 5);
    c10ds_ts_query f;
    size_t used;
    ck_assert_int_eq(c10ds_ts_read(q.b, q.n, 2, &cfg, &f, &used), C10DS_TS_WHOLE);
    ck_assert_int_eq(f.op, C10DS_TS_GET);
    ck_assert_int_eq(c10ds_ts_read(q.b, q.n, 1, &cfg, &f, &used), C10DS_TS_WHOLE);
    ck_assert_int_eq(f.op, C10DS_TS_ADD);
    ck_assert_int_eq(f.delta, 5);
}
END_TEST

START_TEST(malformed_and_oversized_queries_are_refused_saying_why)
{
    c10ds_ts_query f;
    size_t used;
    uint8_t unknown = 14;
    ck_assert_int_eq(c10ds_ts_read(&unknown, 1, 2, &cfg, &f, &used), C10DS_TS_BAD);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "query type 14"));
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "2.2 or later"));

    qbuf q = {0}; /* a key one byte over the limit: refused from its length alone */
    put_u8(&q, V2_GET);
    put_u64(&q, cfg.max_key_bytes + 1);
    ck_assert_int_eq(c10ds_ts_read(q.b, q.n, 2, &cfg, &f, &used), C10DS_TS_BAD);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "--max-key-bytes"));

    qbuf m = {0};
    put_u8(&m, V2_CHECK);
    put_u64(&m, (uint64_t)cfg.max_multi_keys + 1);
    ck_assert_int_eq(c10ds_ts_read(m.b, m.n, 2, &cfg, &f, &used), C10DS_TS_BAD);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "--max-multi-keys"));

    /* under each limit, but more than --max-message-bytes all told */
    cfg.max_message_bytes = 64;
    qbuf s = {0};
    put_u8(&s, V2_SET);
    put_str(&s, "k", 1);
    put_u64(&s, 100);
    ck_assert_int_eq(c10ds_ts_read(s.b, s.n, 2, &cfg, &f, &used), C10DS_TS_BAD);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "--max-message-bytes"));
}
END_TEST

START_TEST(a_set_becomes_our_store_set_under_tcpstore)
{
    qbuf q = {0};
    put_u8(&q, V2_SET);
    put_str(&q, "rank0", 5);
    put_str(&q, "v\0x", 3); /* values may hold NUL bytes */
    c10ds_ts_query f;
    size_t used;
    ck_assert_int_eq(c10ds_ts_read(q.b, q.n, 2, &cfg, &f, &used), C10DS_TS_WHOLE);
    C10dpb__Request *rq = c10ds_ts_request(&f, 42, NULL, NULL);
    ck_assert_ptr_nonnull(rq);
    ck_assert_uint_eq(rq->request_id, 42);
    ck_assert_int_eq(rq->op_case, C10DPB__REQUEST__OP_SET);
    ck_assert_str_eq(rq->set->key, "tcpstore/rank0");
    ck_assert_uint_eq(rq->set->value.len, 3);
    ck_assert_mem_eq(rq->set->value.data, "v\0x", 3);
    /* a copy: the read buffer is reused once the query is handed on */
    ck_assert_ptr_ne(rq->set->value.data, f.b);
    ck_assert_ptr_null(rq->token);
    c10dpb__request__free_unpacked(rq, NULL); /* as the engine frees it (ASan: nothing leaks) */
}
END_TEST

START_TEST(list_queries_carry_every_key_and_wait_forever)
{
    qbuf q = {0};
    put_u8(&q, V2_MULTI_SET);
    put_u64(&q, 3);
    put_str(&q, "a", 1);
    put_str(&q, "1", 1);
    put_str(&q, "b", 1);
    put_str(&q, "", 0);
    put_str(&q, "c", 1);
    put_str(&q, "333", 3);
    c10ds_ts_query f;
    size_t used;
    ck_assert_int_eq(c10ds_ts_read(q.b, q.n, 2, &cfg, &f, &used), C10DS_TS_WHOLE);
    C10dpb__Request *rq = c10ds_ts_request(&f, 1, NULL, NULL);
    ck_assert_ptr_nonnull(rq);
    ck_assert_int_eq(rq->op_case, C10DPB__REQUEST__OP_MULTI_SET);
    ck_assert_uint_eq(rq->multi_set->n_kvs, 3);
    ck_assert_str_eq(rq->multi_set->kvs[2]->key, "tcpstore/c");
    ck_assert_uint_eq(rq->multi_set->kvs[1]->value.len, 0);
    ck_assert_mem_eq(rq->multi_set->kvs[2]->value.data, "333", 3);
    c10dpb__request__free_unpacked(rq, NULL);

    qbuf w = {0};
    put_u8(&w, V2_WAIT);
    put_u64(&w, 2);
    put_str(&w, "x", 1);
    put_str(&w, "y", 1);
    ck_assert_int_eq(c10ds_ts_read(w.b, w.n, 2, &cfg, &f, &used), C10DS_TS_WHOLE);
    rq = c10ds_ts_request(&f, 2, NULL, NULL);
    ck_assert_ptr_nonnull(rq);
    ck_assert_int_eq(rq->op_case, C10DPB__REQUEST__OP_WAIT);
    ck_assert_uint_eq(rq->wait->n_keys, 2);
    ck_assert_str_eq(rq->wait->keys[1], "tcpstore/y");
    ck_assert(rq->wait->has_timeout_ms);
    ck_assert_int_eq(rq->wait->timeout_ms, C10D_MS_FOREVER);
    c10dpb__request__free_unpacked(rq, NULL);
}
END_TEST

START_TEST(a_key_holding_a_nul_is_refused_half_way_without_a_leak)
{
    qbuf q = {0};
    put_u8(&q, V2_MULTI_SET);
    put_u64(&q, 2);
    put_str(&q, "ok", 2);
    put_str(&q, "1", 1);
    put_str(&q, "b\0d", 3);
    put_str(&q, "2", 1);
    c10ds_ts_query f;
    size_t used;
    ck_assert_int_eq(c10ds_ts_read(q.b, q.n, 2, &cfg, &f, &used), C10DS_TS_WHOLE);
    ck_assert_ptr_null(c10ds_ts_request(&f, 1, NULL, NULL));
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "NUL byte"));
}
END_TEST

/* c10ds_ts_encode's bytes: the verdict, then the rest. */
static uint8_t *encode(c10ds_ts_op op, const C10dpb__Reply *rep, size_t *len)
{
    void *out = NULL;
    ck_assert_int_eq(c10ds_ts_encode(op, (const uint8_t *)"exp", 3, rep, &out, len), 0);
    ck_assert_uint_ge(*len, 1);
    return out;
}

START_TEST(replies_are_written_as_tcpstore_answers)
{
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    size_t n;
    rep.value = (ProtobufCBinaryData){2, (uint8_t *)"hi"};
    uint8_t *b = encode(C10DS_TS_GET, &rep, &n);
    uint64_t len;
    ck_assert_uint_eq(n, 1 + 8 + 2);
    ck_assert_int_eq(b[0], C10DS_TS_ANSWER);
    memcpy(&len, b + 1, 8);
    ck_assert_uint_eq(len, 2);
    ck_assert_mem_eq(b + 9, "hi", 2);
    free(b);

    b = encode(C10DS_TS_SET, &rep, &n); /* TCPStore answers a SET with nothing */
    ck_assert_uint_eq(n, 1);
    free(b);

    C10dpb__Reply num = C10DPB__REPLY__INIT;
    num.number = -7;
    b = encode(C10DS_TS_ADD, &num, &n);
    int64_t v;
    ck_assert_uint_eq(n, 9);
    memcpy(&v, b + 1, 8);
    ck_assert_int_eq(v, -7);
    free(b);

    C10dpb__Reply chk = C10DPB__REPLY__INIT;
    b = encode(C10DS_TS_CHECK, &chk, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(b[1], C10DS_TS_CHECK_NOT_READY);
    free(b);
    chk.flag = 1;
    b = encode(C10DS_TS_CHECK, &chk, &n);
    ck_assert_int_eq(b[1], C10DS_TS_CHECK_READY);
    free(b);

    C10dpb__Values vals = C10DPB__VALUES__INIT;
    ProtobufCBinaryData two[2] = {{1, (uint8_t *)"a"}, {0, NULL}};
    vals.n_values = 2;
    vals.values = two;
    C10dpb__Reply mget = C10DPB__REPLY__INIT;
    mget.values = &vals;
    b = encode(C10DS_TS_MULTI_GET, &mget, &n);
    ck_assert_uint_eq(n, 1 + 9 + 8);
    free(b);
}
END_TEST

START_TEST(a_refusal_carries_its_reason_and_a_missing_compare_set_key_its_expected)
{
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.status = C10D_ENOTFOUND;
    size_t n;
    uint8_t *b = encode(C10DS_TS_COMPARE_SET, &rep, &n);
    ck_assert_int_eq(b[0], C10DS_TS_ANSWER);
    ck_assert_uint_eq(n, 1 + 8 + 3);
    ck_assert_mem_eq(b + 9, "exp", 3);
    free(b);

    rep.detail = (char *)"no number";
    rep.status = C10D_EINVAL;
    b = encode(C10DS_TS_ADD, &rep, &n);
    ck_assert_int_eq(b[0], C10DS_TS_REFUSED);
    const char *want = "its ADD was refused: no number";
    ck_assert_uint_eq(n, 1 + strlen(want));
    ck_assert_mem_eq(b + 1, want, strlen(want));
    free(b);
}
END_TEST

/* The run each key belongs to (net/tcpstore_runs.h). */
static void scope_is(const char *key, const char *want)
{
    const uint8_t *sc;
    size_t n;
    c10ds_ts_scope((const uint8_t *)key, strlen(key), &sc, &n);
    ck_assert_msg(n == strlen(want) && memcmp(sc, want, n) == 0, "%s: '%.*s', not '%s'", key,
                  (int)n, (const char *)sc, want);
}

START_TEST(torchruns_keys_are_their_rendezvous_ids_the_rest_the_plain_runs)
{
    scope_is("/torch.rendezvous.job42", "torch.rendezvous.job42");
    scope_is("/torch.rendezvous.job42.0/MASTER_ADDR", "torch.rendezvous.job42");
    scope_is("/torch.rendezvous.job42.17/torchelastic/agent/x", "torch.rendezvous.job42");
    scope_is("torch.rendezvous.job.42", "torch.rendezvous.job.42"); /* a dot in the id */
    scope_is("/torch.rendezvous.job.42.3/k", "torch.rendezvous.job.42");
    scope_is("/torch.rendezvous.7/k", "torch.rendezvous.7"); /* no round: the id is "7" */
    scope_is("/store_based_barrier_key:1", "");
    scope_is("/torch.rendezvous.", "");
    scope_is("/torch.rendezvousjob", "");
    scope_is("", "");
}
END_TEST

static const char *a_runs_prefix(void *arg, const uint8_t *key, size_t len)
{
    const uint8_t *sc;
    size_t n;
    c10ds_ts_scope(key, len, &sc, &n);
    (*(int *)arg)++;
    return n ? "tcpstore/00000000000000b2/" : "tcpstore/00000000000000a1/";
}

START_TEST(keys_go_under_their_runs_prefix_and_num_keys_counts_the_plain_runs)
{
    qbuf q = {0};
    put_u8(&q, 0); /* 2.1's SET */
    put_str(&q, "/torch.rendezvous.r1", 20);
    put_str(&q, "v", 1);
    c10ds_ts_query f;
    size_t used;
    ck_assert_int_eq(c10ds_ts_read(q.b, q.n, 1, &cfg, &f, &used), C10DS_TS_WHOLE);
    int asked = 0;
    C10dpb__Request *rq = c10ds_ts_request(&f, 1, a_runs_prefix, &asked);
    ck_assert_ptr_nonnull(rq);
    ck_assert_str_eq(rq->set->key, "tcpstore/00000000000000b2//torch.rendezvous.r1");
    c10dpb__request__free_unpacked(rq, NULL);
    qbuf n = {0};
    put_u8(&n, 6); /* 2.1's GETNUMKEYS */
    ck_assert_int_eq(c10ds_ts_read(n.b, n.n, 1, &cfg, &f, &used), C10DS_TS_WHOLE);
    rq = c10ds_ts_request(&f, 2, a_runs_prefix, &asked);
    ck_assert_ptr_nonnull(rq);
    ck_assert_str_eq(rq->num_keys->prefix, "tcpstore/00000000000000a1/");
    ck_assert_int_eq(asked, 2);
    c10dpb__request__free_unpacked(rq, NULL);
}
END_TEST

/* The table of runs (net/tcpstore_runs.c): a run lives while a
 * connection takes part in it; the next one of its scope is new. */
START_TEST(a_run_ends_with_its_last_connection_and_the_next_is_new)
{
    c10ds_ts_runs *t = c10ds_ts_runs_new(100);
    uint64_t a = c10ds_ts_runs_enter(t, "", 0), b = c10ds_ts_runs_enter(t, "", 0);
    uint64_t r = c10ds_ts_runs_enter(t, "torch.rendezvous.x", 18);
    ck_assert_uint_eq(a, 101);
    ck_assert_uint_eq(b, a);
    ck_assert_uint_ne(r, a);
    ck_assert_uint_eq(c10ds_ts_runs_live(t), 2);
    ck_assert_int_eq(c10ds_ts_runs_leave(t, a), 0); /* one still takes part */
    ck_assert_int_eq(c10ds_ts_runs_leave(t, a), 1); /* the last: over */
    uint64_t next = c10ds_ts_runs_enter(t, "", 0);
    ck_assert_uint_gt(next, r);
    ck_assert_int_eq(c10ds_ts_runs_leave(t, r), 1);
    ck_assert_int_eq(c10ds_ts_runs_leave(t, r), 0); /* over already: nothing */
    ck_assert_uint_eq(c10ds_ts_runs_live(t), 1);
    c10ds_ts_runs_free(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tcpstore_wire");
    TCase *t = tcase_create("wire");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, detect_tells_the_numbering_from_the_first_bytes);
    tcase_add_test(t, a_query_cut_anywhere_asks_for_more_and_whole_is_read);
    tcase_add_test(t, queries_back_to_back_are_read_one_at_a_time);
    tcase_add_test(t, the_two_numberings_read_the_same_byte_differently);
    tcase_add_test(t, malformed_and_oversized_queries_are_refused_saying_why);
    tcase_add_test(t, a_set_becomes_our_store_set_under_tcpstore);
    tcase_add_test(t, list_queries_carry_every_key_and_wait_forever);
    tcase_add_test(t, a_key_holding_a_nul_is_refused_half_way_without_a_leak);
    tcase_add_test(t, replies_are_written_as_tcpstore_answers);
    tcase_add_test(t, a_refusal_carries_its_reason_and_a_missing_compare_set_key_its_expected);
    tcase_add_test(t, torchruns_keys_are_their_rendezvous_ids_the_rest_the_plain_runs);
    tcase_add_test(t, keys_go_under_their_runs_prefix_and_num_keys_counts_the_plain_runs);
    tcase_add_test(t, a_run_ends_with_its_last_connection_and_the_next_is_new);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return c10d_run_suite(suite());
}
