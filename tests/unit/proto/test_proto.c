/* Our wire, not protobuf-c's (proto/c10d.proto): the message field
 * numbers as an ABI, golden bytes that fail if a field is renumbered or
 * retyped. */
#include "c10d.pb-c.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
     * as text in an earlier version, is reserved) */
    assert_packs_to(&lr.base, "080810673003");

    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.request_id = 9;
    rep.status = -6; /* C10D_EPEERLOST, sint32: zigzag 11 */
    rep.detail = "x";
    assert_packs_to(&rep.base, "0809100b1a0178");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("proto");
    TCase *tc = tcase_create("wire");
    tcase_add_test(tc, field_numbers_are_an_abi);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
