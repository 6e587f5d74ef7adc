/* The wire codec: envelopes round-trip, and garbage, truncation and
 * missing required fields are rejected rather than misread. */
#include "c10d.pb-c.h"

#include "check_main.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *pack_request(const C10dpb__Request *r, size_t *len)
{
    *len = c10dpb__request__get_packed_size(r);
    uint8_t *buf = malloc(*len);
    c10dpb__request__pack(r, buf);
    return buf;
}

START_TEST(request_round_trips_with_identity_and_binary_value)
{
    C10dpb__Identity who = C10DPB__IDENTITY__INIT;
    who.has_client_id = who.has_rank = 1;
    who.client_id = 0xfeedfacecafebeefull;
    who.rank = 3;
    who.job = "j1";
    C10dpb__StoreSet set = C10DPB__STORE_SET__INIT;
    set.key = "a/b";
    uint8_t val[] = {0, 1, 2, 0, 255};
    set.value.data = val;
    set.value.len = sizeof val;
    C10dpb__Request r = C10DPB__REQUEST__INIT;
    r.request_id = 42;
    r.who = &who;
    r.token = "secret";
    r.op_case = C10DPB__REQUEST__OP_SET;
    r.set = &set;
    size_t len;
    uint8_t *buf = pack_request(&r, &len);
    C10dpb__Request *u = c10dpb__request__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(u->request_id, 42);
    ck_assert_uint_eq(u->who->client_id, 0xfeedfacecafebeefull);
    ck_assert_int_eq(u->who->rank, 3);
    ck_assert_str_eq(u->token, "secret");
    ck_assert_int_eq(u->op_case, C10DPB__REQUEST__OP_SET);
    ck_assert_str_eq(u->set->key, "a/b");
    ck_assert_uint_eq(u->set->value.len, sizeof val);
    ck_assert_mem_eq(u->set->value.data, val, sizeof val);
    c10dpb__request__free_unpacked(u, NULL);
    free(buf);
}
END_TEST

START_TEST(rank_defaults_to_minus_one)
{
    C10dpb__Identity who = C10DPB__IDENTITY__INIT;
    ck_assert_int_eq(who.rank, -1);
}
END_TEST

START_TEST(truncated_messages_are_rejected)
{
    C10dpb__StoreGet get = C10DPB__STORE_GET__INIT;
    get.key = "some-key-long-enough";
    C10dpb__Request r = C10DPB__REQUEST__INIT;
    r.request_id = 7;
    r.op_case = C10DPB__REQUEST__OP_GET;
    r.get = &get;
    size_t len;
    uint8_t *buf = pack_request(&r, &len);
    for (size_t cut = 1; cut < len; cut++) {
        C10dpb__Request *u = c10dpb__request__unpack(NULL, cut, buf);
        /* A cut at a field boundary can leave a valid prefix, but never
         * one with the operation's required key missing. */
        if (u) {
            ck_assert(u->op_case != C10DPB__REQUEST__OP_GET || u->get->key != NULL);
            c10dpb__request__free_unpacked(u, NULL);
        }
    }
    free(buf);
}
END_TEST

START_TEST(garbage_is_rejected)
{
    uint8_t junk[256];
    srand(1);
    int rejected = 0;
    for (int trial = 0; trial < 200; trial++) {
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)rand();
        C10dpb__Request *u = c10dpb__request__unpack(NULL, sizeof junk, junk);
        if (!u)
            rejected++;
        else
            c10dpb__request__free_unpacked(u, NULL);
    }
    ck_assert_int_ge(rejected, 190); /* random bytes practically never parse */
}
END_TEST

START_TEST(missing_required_request_id_is_rejected)
{
    /* field 3 (token), a string: no request_id (field 1, required) */
    uint8_t bytes[] = {0x1a, 0x01, 'x'};
    ck_assert_ptr_null(c10dpb__request__unpack(NULL, sizeof bytes, bytes));
}
END_TEST

START_TEST(reply_round_trips_status_and_detail)
{
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.request_id = 9;
    rep.status = -3;
    rep.detail = "timed out after 300 ms waiting for keys: b, c";
    size_t len = c10dpb__reply__get_packed_size(&rep);
    uint8_t *buf = malloc(len);
    c10dpb__reply__pack(&rep, buf);
    C10dpb__Reply *u = c10dpb__reply__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(u);
    ck_assert_int_eq(u->status, -3);
    ck_assert_str_eq(u->detail, rep.detail);
    c10dpb__reply__free_unpacked(u, NULL);
    free(buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, request_round_trips_with_identity_and_binary_value);
    tcase_add_test(tc, rank_defaults_to_minus_one);
    tcase_add_test(tc, truncated_messages_are_rejected);
    tcase_add_test(tc, garbage_is_rejected);
    tcase_add_test(tc, missing_required_request_id_is_rejected);
    tcase_add_test(tc, reply_round_trips_status_and_detail);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
