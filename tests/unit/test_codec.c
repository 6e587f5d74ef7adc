/* Our wire, not protobuf-c's: the control plane's framing (common/frame.h)
 * byte for byte, the message field numbers as an ABI (golden bytes that
 * fail if a field of c10d.proto is renumbered or retyped), and the words
 * both sides use for a collective (common/fingerprint.c), which reports
 * and c10d-ctl quote; a run's store prefix (common/run_scope.c), which the
 * client writes under and the coordinator deletes by. */
#include "c10d.pb-c.h"
#include "fingerprint.h"
#include "frame.h"
#include "run_scope.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(frame_header_is_length_then_request_id_little_endian)
{
    uint8_t h[C10DC_FRAME_HDR];
    c10dc_frame_header(h, 0x0102030405060708ull, 0x1234);
    /* length counts the request id (8) and the body */
    const uint8_t want[C10DC_FRAME_HDR] = {0x3c, 0x12, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1};
    ck_assert_int_eq(memcmp(h, want, sizeof want), 0);
    ck_assert_uint_eq(c10dc_get_u32(h), 0x1234 + 8);
    ck_assert_uint_eq(c10dc_get_u64(h + 4), 0x0102030405060708ull);
    /* an empty body is a frame of 8 */
    c10dc_frame_header(h, 1, 0);
    ck_assert_uint_eq(c10dc_get_u32(h), 8);
    /* the largest body a u32 length allows */
    c10dc_frame_header(h, UINT64_MAX, 0xfffffff7u);
    ck_assert_uint_eq(c10dc_get_u32(h), 0xffffffffu);
    ck_assert_uint_eq(c10dc_get_u64(h + 4), UINT64_MAX);
}
END_TEST

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static void assert_packs_to(const ProtobufCMessage *m, const char *want_hex)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(n);
    char *got = malloc(2 * n + 1);
    protobuf_c_message_pack(m, b);
    hex(b, n, got);
    ck_assert_msg(strcmp(got, want_hex) == 0, "packed %s, the wire says %s", got, want_hex);
    free(b);
    free(got);
}

/* Field numbers and types are what deployed clients and coordinators of
 * other versions speak: these bytes were written down once and must not
 * change (a new field gets a new number; these stay). */
START_TEST(field_numbers_are_an_abi)
{
    C10dpb__StoreSet set = C10DPB__STORE_SET__INIT;
    set.key = "k";
    set.value.len = 1;
    set.value.data = (uint8_t *)"v";
    C10dpb__Identity who = C10DPB__IDENTITY__INIT;
    who.has_client_id = 1;
    who.client_id = 5;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.request_id = 7;
    req.who = &who;
    req.op_case = C10DPB__REQUEST__OP_SET;
    req.set = &set;
    /* request_id=1 varint 7, who=2 {client_id}, set=11 {key=1, value=2} */
    size_t n = c10dpb__request__get_packed_size(&req);
    uint8_t *b = malloc(n);
    c10dpb__request__pack(&req, b);
    C10dpb__Request *back = c10dpb__request__unpack(NULL, n, b);
    ck_assert_ptr_nonnull(back);
    ck_assert_uint_eq(back->request_id, 7);
    ck_assert_int_eq(back->op_case, 11);
    ck_assert_str_eq(back->set->key, "k");
    c10dpb__request__free_unpacked(back, NULL);
    free(b);
    ck_assert_int_eq(C10DPB__REQUEST__OP_SET, 11);
    ck_assert_int_eq(C10DPB__REQUEST__OP_GROUP_JOIN, 24);
    ck_assert_int_eq(C10DPB__REQUEST__OP_WATCH, 26);
    ck_assert_int_eq(C10DPB__REQUEST__OP_COLL_REPORT, 28);
    ck_assert_int_eq(C10DPB__REQUEST__OP_GROUP_ENDPOINTS, 33);
    ck_assert_int_eq(C10DPB__REPLY__RESULT_GROUP_JOIN, 17);
    ck_assert_int_eq(C10DPB__REPLY__RESULT_WATCH, 18);
    ck_assert_int_eq(C10DPB__REPLY__RESULT_GROUP_ENDPOINTS, 23);

    C10dpb__GroupJoin gj = C10DPB__GROUP_JOIN__INIT;
    gj.job = "j";
    gj.name = "w";
    gj.rank = 1;
    gj.world_size = 2;
    gj.has_peers_on_demand = gj.peers_on_demand = 1;
    /* job=1 "j", name=2 "w", rank=3 1, world_size=4 2, peers_on_demand=11 1 */
    assert_packs_to(&gj.base, "0a016a120177180120025801");

    C10dpb__LostRange lr = C10DPB__LOST_RANGE__INIT;
    lr.first = 8;
    lr.last = 103;
    lr.has_state = 1;
    lr.state = C10DPB__MEMBER_STATE__MEMBER_DEAD;
    /* first=1 8, last=2 103, state=6 MEMBER_DEAD (3; field 3, the state
     * as text before issue 25, is reserved) */
    assert_packs_to(&lr.base, "080810673003");

    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.request_id = 9;
    rep.status = -6; /* C10D_EPEERLOST, sint32: zigzag 11 */
    rep.detail = "x";
    assert_packs_to(&rep.base, "0809100b1a0178");
}
END_TEST

START_TEST(a_collective_is_worded_alike_on_both_sides)
{
    char buf[160];
    c10dc_fp fp = {C10DC_ALL_REDUCE, 0 /* float32 */, 2, C10DC_NO_ROOT, 0 /* SUM */, 0, 0};
    ck_assert_str_eq(c10dc_fp_format(&fp, buf, sizeof buf), "ALL_REDUCE float32[2] SUM");
    c10dc_fp b = {C10DC_BROADCAST, 0, 5, 0, C10DC_NO_OP, 0, 0};
    ck_assert_str_eq(c10dc_fp_format(&b, buf, sizeof buf), "BROADCAST float32[5] root 0");
    c10dc_fp bar = {C10DC_BARRIER, 0, 0, C10DC_NO_ROOT, C10DC_NO_OP, 0, 0};
    ck_assert_str_eq(c10dc_fp_format(&bar, buf, sizeof buf), "BARRIER");
    /* what differs, named for the report */
    c10dc_fp other = fp;
    other.count = 3;
    ck_assert_str_eq(c10dc_fp_diff(&fp, &other), "shape");
    other = fp;
    other.op = 2;
    ck_assert_str_eq(c10dc_fp_diff(&fp, &other), "reduce op");
    ck_assert_ptr_null(c10dc_fp_diff(&fp, &fp));
    ck_assert_str_eq(c10dc_kind_name(C10DC_MONITORED_BARRIER), "MONITORED_BARRIER");
}
END_TEST

START_TEST(a_run_scope_is_never_inside_another_jobs)
{
    char buf[C10D_RUN_SCOPE_BYTES(16)];
    ck_assert_uint_eq(c10d_run_scope(buf, sizeof buf, "train", 3), strlen("jobs/train/3/"));
    ck_assert_str_eq(buf, "jobs/train/3/");
    /* "a" and "a/1": the second's keys must not fall under the first's */
    c10d_run_scope(buf, sizeof buf, "a/1", 2);
    ck_assert_str_eq(buf, "jobs/a%2F1/2/");
    c10d_run_scope(buf, sizeof buf, "50%", 18446744073709551615ull);
    ck_assert_str_eq(buf, "jobs/50%25/18446744073709551615/");
    /* the longest escaped name fits the room the macro asks for */
    char name[17];
    memset(name, '/', 16);
    name[16] = '\0';
    ck_assert_uint_gt(c10d_run_scope(buf, sizeof buf, name, UINT64_MAX), 0);
    /* too small: nothing claimed written */
    ck_assert_uint_eq(c10d_run_scope(buf, 8, "train", 3), 0);
    ck_assert_uint_eq(c10d_run_scope(buf, strlen("jobs/train/3/"), "train", 3), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("wire");
    tcase_add_test(tc, frame_header_is_length_then_request_id_little_endian);
    tcase_add_test(tc, field_numbers_are_an_abi);
    tcase_add_test(tc, a_collective_is_worded_alike_on_both_sides);
    tcase_add_test(tc, a_run_scope_is_never_inside_another_jobs);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
