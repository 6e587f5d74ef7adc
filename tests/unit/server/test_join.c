/* The coordinator's join rule (server/join/join.c), without a network: who
 * shadows what, how many ranks contribute, when a collective may be
 * released (what each active rank entered and knows), which collectives a
 * joined rank cannot take part in, the last joiner, the released runs. */
#include "db/db.h"
#include "join/join.h"

#include "check_main.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* A region of n members, none joined. */
static c10ds_jregion *region(int n)
{
    c10ds_jregion *r = calloc(1, sizeof *r);
    r->size = n;
    r->m = calloc((size_t)n, sizeof *r->m);
    r->ranks = calloc((size_t)n, sizeof *r->ranks);
    for (int i = 0; i < n; i++) {
        r->m[i].after = C10DS_ACTIVE;
        r->ranks[i] = i;
    }
    return r;
}

static void join(c10ds_jregion *r, int idx, uint64_t after)
{
    r->m[idx].after = r->m[idx].asked = after;
    r->m[idx].order = ++r->joins;
}

static void region_free(c10ds_jregion *r)
{
    c10ds_join_region_free(r);
}

static uint64_t limit(c10ds_jregion *r, int idx, uint64_t s, uint64_t entered)
{
    uint64_t unknown[16];
    c10ds_join_unknown_after(r, unknown);
    return c10ds_join_member_limit(r, idx, s, entered, unknown);
}

START_TEST(who_shadows_and_who_contributes)
{
    c10ds_jregion *r = region(4);
    ck_assert_int_eq(c10ds_join_active_at(r, 1), 4);
    join(r, 0, 5);
    join(r, 2, 7);
    ck_assert(!c10ds_join_shadows(r, 0, 5)); /* its own collective #5 */
    ck_assert(c10ds_join_shadows(r, 0, 6));
    ck_assert(!c10ds_join_shadows(r, 2, 7));
    ck_assert(c10ds_join_shadows(r, 2, 8));
    ck_assert(!c10ds_join_shadows(r, 1, 100));
    ck_assert_int_eq(c10ds_join_active_at(r, 5), 4);
    ck_assert_int_eq(c10ds_join_active_at(r, 6), 3);
    ck_assert_int_eq(c10ds_join_active_at(r, 8), 2);
    region_free(r);
}
END_TEST

START_TEST(a_rank_must_know_every_join_before_a_collective)
{
    c10ds_jregion *r = region(3);
    join(r, 0, 5);
    /* rank 1 entered #9 but knows no join yet: nothing after #5 */
    ck_assert_uint_eq(limit(r, 1, 6, 9), 5);
    r->m[1].known = 1;
    ck_assert_uint_eq(limit(r, 1, 6, 9), 9);
    /* a second join, after #7, that rank 1 has not heard of */
    join(r, 2, 7);
    ck_assert_uint_eq(limit(r, 1, 6, 9), 7);
    r->m[1].known = 2;
    ck_assert_uint_eq(limit(r, 1, 6, 9), 9);
    /* what it entered bounds it */
    ck_assert_uint_eq(limit(r, 1, 6, 6), 6);
    region_free(r);
}
END_TEST

START_TEST(a_later_joiner_bounds_the_run_at_its_join)
{
    c10ds_jregion *r = region(3);
    join(r, 0, 5);
    join(r, 2, 7);
    r->m[2].known = 2;
    /* rank 2 is active for #6..#7, then shadowed: the active count
     * changes after #7, so a run released from #6 ends there */
    ck_assert_uint_eq(limit(r, 2, 6, 7), 7);
    ck_assert_uint_eq(limit(r, 2, 6, 20), 7);
    region_free(r);
}
END_TEST

START_TEST(a_rank_that_joined_is_not_held_to_what_it_acknowledged)
{
    /* Rank 1 joined after #8 without acknowledging rank 0's join after #5
     * (its collectives were on a GPU stream): it acknowledges nothing any
     * more, so it must not hold back #6..#8 for rank 0. */
    c10ds_jregion *r = region(3);
    join(r, 0, 5);
    join(r, 1, 8);
    ck_assert_uint_eq(limit(r, 1, 6, 8), 8);
    ck_assert_uint_eq(limit(r, 2, 6, 9), 5); /* rank 2, active, still must know */
    region_free(r);
}
END_TEST

/* The recorded join, against a real (in-memory) database. */
START_TEST(a_later_join_after_fewer_collectives_lowers_what_was_released)
{
    c10ds_db db;
    ck_assert_int_eq(c10ds_db_open(&db, ":memory:"), 0);
    c10ds_join j;
    ck_assert_int_eq(c10ds_join_init(&j, &db), 0);
    int ranks[3] = {0, 1, 2};
    c10ds_jregion *r = c10ds_join_region(&j, "job", 1, "world", 1, 3, ranks, 1, 0, 1);
    ck_assert_ptr_nonnull(r);
    c10ds_join_record(&j, r, 1, 5); /* rank 1's #4, #5 still on its stream */
    ck_assert_uint_eq(r->released, 5);
    c10ds_join_record(&j, r, 0, 3);
    ck_assert_uint_eq(r->released, 3); /* #4 and #5 are still to be released to rank 0 */
    ck_assert(!r->done);
    c10ds_join_record(&j, r, 2, 5);
    ck_assert(r->done);
    ck_assert_int_eq(r->last_joiner, 2); /* after #5 like rank 1: the higher rank */
    ck_assert_uint_eq(r->final_seq, 5);
    /* a coordinator restarted on the database finds the joins */
    c10ds_join_fini(&j);
    ck_assert_int_eq(c10ds_join_init(&j, &db), 0);
    int loaned;
    r = c10ds_join_latest(&j, "job", 1, "world", 3, ranks, &loaned);
    ck_assert_ptr_nonnull(r);
    ck_assert(r->done && r->joins == 3 && r->m[0].after == 3 && r->last_joiner == 2);
    if (loaned)
        c10ds_join_region_free(r);
    c10ds_join_fini(&j);
    c10ds_db_close(&db);
}
END_TEST

START_TEST(what_a_joined_rank_cannot_shadow)
{
    c10ds_jregion *r = region(3);
    join(r, 0, 5);
    int who;
    c10dc_fp ar = {C10DC_ALL_REDUCE, 0, 4, C10DC_NO_ROOT, 0, 0, 0};
    ck_assert_ptr_null(c10ds_join_unshadowable(r, &ar, 6, &who));
    c10dc_fp bar = {C10DC_BARRIER, 0, 0, C10DC_NO_ROOT, C10DC_NO_OP, 0, 0};
    ck_assert_ptr_null(c10ds_join_unshadowable(r, &bar, 6, &who));
    c10dc_fp rs = {C10DC_REDUCE_SCATTER, 0, 4, C10DC_NO_ROOT, 0, 0, 0};
    ck_assert_ptr_null(c10ds_join_unshadowable(r, &rs, 6, &who));
    c10dc_fp bc1 = {C10DC_BROADCAST, 0, 4, 1, C10DC_NO_OP, 0, 0};
    ck_assert_ptr_null(c10ds_join_unshadowable(r, &bc1, 6, &who));
    c10dc_fp bc0 = {C10DC_BROADCAST, 0, 4, 0, C10DC_NO_OP, 0, 0};
    ck_assert_ptr_nonnull(strstr(c10ds_join_unshadowable(r, &bc0, 6, &who), "rooted"));
    ck_assert_int_eq(who, 0);
    /* before rank 0 joined, a broadcast from it is fine */
    ck_assert_ptr_null(c10ds_join_unshadowable(r, &bc0, 5, &who));
    c10dc_fp red0 = {C10DC_REDUCE, 0, 4, 0, 0, 0, 0};
    ck_assert_ptr_nonnull(c10ds_join_unshadowable(r, &red0, 6, &who));
    c10dc_fp kinds[] = {{C10DC_ALL_GATHER, 0, 4, C10DC_NO_ROOT, C10DC_NO_OP, 0, 0},
                        {C10DC_GATHER, 0, 4, 1, C10DC_NO_OP, 0, 0},
                        {C10DC_SCATTER, 0, 4, 1, C10DC_NO_OP, 0, 0},
                        {C10DC_ALL_TO_ALL, 0, 6, C10DC_NO_ROOT, C10DC_NO_OP, 0, 0}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        ck_assert_ptr_nonnull(c10ds_join_unshadowable(r, &kinds[i], 6, &who));
        ck_assert_ptr_null(c10ds_join_unshadowable(r, &kinds[i], 5, &who)); /* nobody yet */
    }
    region_free(r);
}
END_TEST

START_TEST(the_last_joiner_is_the_latest_then_the_highest)
{
    c10ds_jregion *r = region(4);
    join(r, 3, 5);
    join(r, 0, 9);
    join(r, 2, 9);
    join(r, 1, 7);
    ck_assert_int_eq(c10ds_join_last_joiner(r), 2);
    region_free(r);
}
END_TEST

START_TEST(released_runs_merge_and_are_dropped_once_shadowed)
{
    c10ds_jregion *r = region(3);
    join(r, 0, 5);
    join(r, 1, 5);
    c10dc_fp ar = {C10DC_ALL_REDUCE, 0, 4, C10DC_NO_ROOT, 0, 0, 0};
    c10dc_fp bar = {C10DC_BARRIER, 0, 0, C10DC_NO_ROOT, C10DC_NO_OP, 0, 0};
    for (uint64_t s = 6; s < 106; s += 2) {
        ck_assert_int_eq(c10ds_join_log(r, s, s, &ar, 1), 0);
        ck_assert_int_eq(c10ds_join_log(r, s + 1, s + 1, &bar, 1), 0);
    }
    ck_assert_uint_eq(r->run_count, 100);
    ck_assert_int_eq(c10ds_join_log(r, 106, 106, &bar, 1), 0); /* merges with #105 */
    ck_assert_uint_eq(r->run_count, 100);
    ck_assert_uint_eq(c10ds_join_run(r, 99)->last, 106);
    r->m[0].asked = 50;
    c10ds_join_trim(r); /* rank 1 has shadowed nothing yet */
    ck_assert_uint_eq(r->run_count, 100);
    r->m[1].asked = 60;
    c10ds_join_trim(r); /* #6..#50 go */
    ck_assert_uint_eq(c10ds_join_run(r, 0)->first, 51);
    region_free(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("join");
    TCase *tc = tcase_create("rule");
    tcase_add_test(tc, who_shadows_and_who_contributes);
    tcase_add_test(tc, a_rank_must_know_every_join_before_a_collective);
    tcase_add_test(tc, a_later_joiner_bounds_the_run_at_its_join);
    tcase_add_test(tc, a_rank_that_joined_is_not_held_to_what_it_acknowledged);
    tcase_add_test(tc, a_later_join_after_fewer_collectives_lowers_what_was_released);
    tcase_add_test(tc, what_a_joined_rank_cannot_shadow);
    tcase_add_test(tc, the_last_joiner_is_the_latest_then_the_highest);
    tcase_add_test(tc, released_runs_merge_and_are_dropped_once_shadowed);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
