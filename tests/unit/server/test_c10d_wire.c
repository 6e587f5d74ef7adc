/* Our own protocol's wire alone (server/net/c10d_wire.c): frames cut
 * from bytes fed whole, split at every byte, and malformed; bodies
 * decoded or refused with the status and words a client is answered
 * with. No socket: the read loop around it is tested end to end
 * (tests/integration). */
#include "config.h"
#include "failure.h"
#include "net/c10d_wire.h"

#include "c10d.pb-c.h"
#include "check_main.h"
#include "frame.h"

#include <c10d/errors.h>
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BODY (1u << 20)

/* A frame of rq with request id id, appended at b + *n. */
static void put_frame(uint8_t *b, size_t *n, uint64_t id, const C10dpb__Request *rq)
{
    size_t len = c10dpb__request__get_packed_size(rq);
    c10dc_frame_header(b + *n, id, len);
    c10dpb__request__pack(rq, b + *n + C10DC_FRAME_HDR);
    *n += C10DC_FRAME_HDR + len;
}

static size_t get_frame(uint8_t *b, uint64_t id, const char *key)
{
    C10dpb__Request rq = C10DPB__REQUEST__INIT;
    C10dpb__StoreGet get = C10DPB__STORE_GET__INIT;
    get.key = (char *)key;
    rq.op_case = C10DPB__REQUEST__OP_GET;
    rq.get = &get;
    size_t n = 0;
    put_frame(b, &n, id, &rq);
    return n;
}

START_TEST(a_frame_cut_anywhere_asks_for_more_and_whole_is_cut)
{
    uint8_t b[256];
    size_t n = get_frame(b, 0x1122334455667788ull, "some/key");
    for (size_t cut = 0; cut < n; cut++) {
        c10ds_frame f;
        size_t used;
        ck_assert_int_eq(c10ds_frame_cut(b, cut, MAX_BODY, &f, &used), C10DS_FRAME_SHORT);
        ck_assert_uint_gt(used, cut);
        ck_assert_uint_le(used, n);
    }
    c10ds_frame f;
    size_t used;
    ck_assert_int_eq(c10ds_frame_cut(b, n, MAX_BODY, &f, &used), C10DS_FRAME_WHOLE);
    ck_assert_uint_eq(used, n);
    ck_assert_uint_eq(f.id, 0x1122334455667788ull);
    ck_assert_ptr_eq(f.body, b + C10DC_FRAME_HDR);
    ck_assert_uint_eq(f.body_len, n - C10DC_FRAME_HDR);
}
END_TEST

START_TEST(frames_back_to_back_are_cut_one_at_a_time)
{
    uint8_t b[512];
    size_t first = get_frame(b, 1, "a");
    size_t second = get_frame(b + first, 2, "bb");
    c10ds_frame f;
    size_t used;
    ck_assert_int_eq(c10ds_frame_cut(b, first + second, MAX_BODY, &f, &used), C10DS_FRAME_WHOLE);
    ck_assert_uint_eq(used, first);
    ck_assert_uint_eq(f.id, 1);
    ck_assert_int_eq(c10ds_frame_cut(b + used, second, MAX_BODY, &f, &used), C10DS_FRAME_WHOLE);
    ck_assert_uint_eq(f.id, 2);
}
END_TEST

START_TEST(a_frame_over_the_limit_or_too_short_is_no_frame)
{
    uint8_t b[C10DC_FRAME_HDR] = {0};
    c10ds_frame f;
    size_t used;
    c10dc_put_u32(b, 8 + 101); /* a body of 101 bytes against a limit of 100 */
    ck_assert_int_eq(c10ds_frame_cut(b, sizeof b, 100, &f, &used), C10DS_FRAME_BAD);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "a frame of 109 bytes (limit 100"));
    c10dc_put_u32(b, 8 + 100); /* at the limit: waits for the rest */
    ck_assert_int_eq(c10ds_frame_cut(b, sizeof b, 100, &f, &used), C10DS_FRAME_SHORT);
    ck_assert_uint_eq(used, 4 + 108);
    c10dc_put_u32(b, 7); /* shorter than its own request id */
    ck_assert_int_eq(c10ds_frame_cut(b, sizeof b, 100, &f, &used), C10DS_FRAME_BAD);
}
END_TEST

START_TEST(a_tls_hello_is_told_from_a_frame)
{
    const uint8_t hello[11] = {0x16, 3, 1, 0, 0xf4, 1, 0, 0, 0xf0, 3, 3};
    ck_assert(c10ds_tls_client_hello(hello, sizeof hello));
    ck_assert(!c10ds_tls_client_hello(hello, 10));
    uint8_t b[64];
    size_t n = get_frame(b, 9, "k");
    ck_assert(!c10ds_tls_client_hello(b, n));
}
END_TEST

/* A TCPStore client on the main port: torch 2.2's VALIDATE, torch 2.1's
 * first query naming a key; neither a frame of ours nor a lone byte that
 * could begin one. */
START_TEST(a_tcpstore_client_is_told_from_a_frame)
{
    c10ds_config cfg;
    char *argv[] = {"c10d-coord", NULL};
    ck_assert_int_eq(c10ds_config_parse(&cfg, 1, argv), 0);
    const uint8_t validate[5] = {0, 0xce, 0xf7, 0x85, 0x3c};
    ck_assert_int_eq(c10ds_c10d_stranger(validate, sizeof validate, &cfg),
                     C10DS_STRANGER_TCPSTORE);
    ck_assert_int_eq(c10ds_c10d_stranger(validate, 4, &cfg), C10DS_STRANGER_NONE);
    /* 2.1's ADD of "rdzv/x" by 1: type 3, a u64 length, the key, an i64 */
    uint8_t add[9 + 6 + 8] = {3, 6};
    memcpy(add + 9, "rdzv/x", 6);
    add[15] = 1;
    ck_assert_int_eq(c10ds_c10d_stranger(add, sizeof add, &cfg), C10DS_STRANGER_TCPSTORE);
    ck_assert_int_eq(c10ds_c10d_stranger(add, sizeof add - 1, &cfg), C10DS_STRANGER_NONE);
    const uint8_t num_keys[1] = {6};
    ck_assert_int_eq(c10ds_c10d_stranger(num_keys, 1, &cfg), C10DS_STRANGER_NONE);
    uint8_t b[64];
    for (uint64_t id = 1; id < 300; id++) { /* ours, whatever its first byte */
        size_t n = get_frame(b, id, "k");
        for (size_t cut = 1; cut <= n; cut++)
            ck_assert_int_eq(c10ds_c10d_stranger(b, cut, &cfg), C10DS_STRANGER_NONE);
    }
    const uint8_t hello[11] = {0x16, 3, 1, 0, 0xf4, 1, 0, 0, 0xf0, 3, 3};
    ck_assert_int_eq(c10ds_c10d_stranger(hello, sizeof hello, &cfg), C10DS_STRANGER_TLS);
    c10ds_config_free(&cfg);
}
END_TEST

START_TEST(a_body_is_decoded_with_the_frames_request_id)
{
    uint8_t b[256];
    size_t n = get_frame(b, 77, "the/key");
    c10ds_frame f;
    size_t used;
    ck_assert_int_eq(c10ds_frame_cut(b, n, MAX_BODY, &f, &used), C10DS_FRAME_WHOLE);
    c10ds_decode_refusal why;
    c10d_status st;
    C10dpb__Request *rq = c10ds_c10d_decode(&f, 1 << 20, &why, &st);
    ck_assert_ptr_nonnull(rq);
    ck_assert_uint_eq(rq->request_id, 77);
    ck_assert_int_eq(rq->op_case, C10DPB__REQUEST__OP_GET);
    ck_assert_str_eq(rq->get->key, "the/key");
    c10dpb__request__free_unpacked(rq, NULL);
}
END_TEST

static C10dpb__Request *decode_bytes(const uint8_t *body, size_t len, uint64_t budget,
                                     c10ds_decode_refusal *why, c10d_status *st)
{
    c10ds_frame f = {5, body, len};
    return c10ds_c10d_decode(&f, budget, why, st);
}

START_TEST(bodies_that_are_no_request_are_refused_saying_why)
{
    c10ds_decode_refusal why;
    c10d_status st;
    const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff};
    ck_assert_ptr_null(decode_bytes(garbage, sizeof garbage, 1 << 20, &why, &st));
    ck_assert_int_eq(why, C10DS_DECODE_GARBLED);
    ck_assert_int_eq(st, C10D_EPROTO);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "could not decode"));

    C10dpb__Request none = C10DPB__REQUEST__INIT; /* a newer client's op: none we know */
    uint8_t b[64];
    size_t n = c10dpb__request__pack(&none, b);
    ck_assert_ptr_null(decode_bytes(b, n, 1 << 20, &why, &st));
    ck_assert_int_eq(why, C10DS_DECODE_NO_OP);
    ck_assert_int_eq(st, C10D_EPROTO);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "names no operation"));
}
END_TEST

START_TEST(a_nul_in_a_key_and_a_costly_decode_are_refused_before_unpacking)
{
    /* Request.set holding StoreSet.key = "a\0b", written raw: protobuf-c packs
     * C strings, which cannot hold the NUL */
    const uint8_t key_field[] = {0x0a, 3, 'a', 0, 'b'}; /* StoreSet field 1, 3 bytes */
    size_t sub = sizeof key_field;
    uint8_t body[64];
    size_t bn = 0;
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field_by_name(&c10dpb__request__descriptor, "set");
    ck_assert_ptr_nonnull(fd);
    body[bn++] = (uint8_t)(fd->id << 3 | 2); /* fits one byte for field numbers < 16 */
    ck_assert_uint_lt(fd->id, 16);
    body[bn++] = (uint8_t)sub;
    memcpy(body + bn, key_field, sub);
    bn += sub;
    c10ds_decode_refusal why;
    c10d_status st;
    ck_assert_ptr_null(decode_bytes(body, bn, 1 << 20, &why, &st));
    ck_assert_int_eq(why, C10DS_DECODE_NUL);
    ck_assert_int_eq(st, C10D_EINVAL);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "holds a NUL byte"));

    /* many empty keys: cheap on the wire, costly unpacked */
    C10dpb__StoreMultiGet mget = C10DPB__STORE_MULTI_GET__INIT;
    char *keys[2000];
    for (size_t i = 0; i < 2000; i++)
        keys[i] = (char *)"";
    mget.n_keys = 2000;
    mget.keys = keys;
    C10dpb__Request big = C10DPB__REQUEST__INIT;
    big.op_case = C10DPB__REQUEST__OP_MULTI_GET;
    big.multi_get = &mget;
    size_t len = c10dpb__request__get_packed_size(&big);
    uint8_t *wire = malloc(len);
    c10dpb__request__pack(&big, wire);
    ck_assert_ptr_null(decode_bytes(wire, len, 16 * 1024, &why, &st));
    ck_assert_int_eq(why, C10DS_DECODE_OVER_BUDGET);
    ck_assert_int_eq(st, C10D_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "--max-decode-bytes"));
    C10dpb__Request *ok = decode_bytes(wire, len, 1 << 24, &why, &st); /* within a larger one */
    ck_assert_ptr_nonnull(ok);
    c10dpb__request__free_unpacked(ok, NULL);
    free(wire);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("c10d_wire");
    TCase *t = tcase_create("wire");
    tcase_add_test(t, a_frame_cut_anywhere_asks_for_more_and_whole_is_cut);
    tcase_add_test(t, frames_back_to_back_are_cut_one_at_a_time);
    tcase_add_test(t, a_frame_over_the_limit_or_too_short_is_no_frame);
    tcase_add_test(t, a_tls_hello_is_told_from_a_frame);
    tcase_add_test(t, a_tcpstore_client_is_told_from_a_frame);
    tcase_add_test(t, a_body_is_decoded_with_the_frames_request_id);
    tcase_add_test(t, bodies_that_are_no_request_are_refused_saying_why);
    tcase_add_test(t, a_nul_in_a_key_and_a_costly_decode_are_refused_before_unpacking);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return c10d_run_suite(suite());
}
