/* The verification state machine (server/verify/verify_runs.c) alone: no engine,
 * no SQLite, no network. Members enter runs of collectives; the first
 * report of each seq is the reference; what differs is a desync naming
 * the field; the slowest member's progress releases memory and parked
 * SYNC reports. The sink here records what the machine says. */
#include "verify/verify.h"

#include <c10d/tensor.h>

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int desyncs;
    uint64_t seq;      /* the first desync's */
    int idx, ref_first;
    char field[32];
    int min_moves;
    uint64_t min_seen; /* g->min_entered at the last move */
} heard;

static void on_desync(void *arg, c10ds_vgroup *g, uint64_t seq, const c10ds_vrun *ref, int idx,
                      const c10dc_fp *fp, const char *field)
{
    (void)fp;
    heard *h = arg;
    if (h->desyncs++ == 0) {
        h->seq = seq;
        h->idx = idx;
        h->ref_first = ref->first;
        snprintf(h->field, sizeof h->field, "%s", field);
    }
    g->status = -1; /* sticky, as the engine's finding is */
}

static void on_min(void *arg, const c10ds_vgroup *g)
{
    heard *h = arg;
    h->min_moves++;
    h->min_seen = g->min_entered;
}

static c10ds_vgroup *group(int n)
{
    int32_t ranks[8];
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    c10ds_vgroup *g = c10ds_vgroup_new("job", 1, "world", ranks, n, n);
    ck_assert_ptr_nonnull(g);
    return g;
}

static c10dc_fp ar(uint32_t dtype, int64_t count)
{
    return (c10dc_fp){C10DC_ALL_REDUCE, dtype, count, C10DC_NO_ROOT, C10D_SUM, C10DC_DEV_CPU, 0};
}

START_TEST(members_that_agree_leave_no_runs_behind)
{
    heard h = {0};
    c10ds_vsink k = {on_desync, on_min, &h, 0};
    c10ds_vgroup *g = group(3);
    c10dc_fp fp = ar(C10D_FLOAT32, 4);
    /* rank 0 reports 1..1000 as one run, rank 1 one at a time, rank 2 in tens */
    c10ds_vgroup_enter(g, 0, 1, 1000, &fp, &k);
    for (uint64_t s = 1; s <= 1000; s++)
        c10ds_vgroup_enter(g, 1, s, s, &fp, &k);
    ck_assert_uint_eq(g->min_entered, 0); /* rank 2 has entered nothing */
    ck_assert_ptr_nonnull(c10ds_vgroup_ref(g, 500));
    for (uint64_t s = 1; s <= 1000; s += 10)
        c10ds_vgroup_enter(g, 2, s, s + 9, &fp, &k);
    ck_assert_int_eq(h.desyncs, 0);
    ck_assert_uint_eq(g->min_entered, 1000);
    ck_assert_uint_eq(h.min_seen, 1000);
    ck_assert_uint_eq(g->run_count, 0); /* every member passed: nothing kept */
    ck_assert_ptr_null(c10ds_vgroup_ref(g, 500));
    c10ds_vgroup_free(g);
}
END_TEST

START_TEST(a_member_that_differs_is_a_desync_naming_the_field)
{
    heard h = {0};
    c10ds_vsink k = {on_desync, on_min, &h, 0};
    c10ds_vgroup *g = group(2);
    c10dc_fp f32 = ar(C10D_FLOAT32, 4), f64 = ar(C10D_FLOAT64, 4);
    c10ds_vgroup_enter(g, 0, 1, 10, &f32, &k);
    c10ds_vgroup_enter(g, 1, 1, 4, &f32, &k);
    ck_assert_int_eq(h.desyncs, 0);
    c10ds_vgroup_enter(g, 1, 5, 5, &f64, &k);
    ck_assert_int_eq(h.desyncs, 1);
    ck_assert_uint_eq(h.seq, 5);
    ck_assert_int_eq(h.idx, 1);
    ck_assert_int_eq(h.ref_first, 0);
    ck_assert_str_eq(h.field, "dtype");
    /* sticky: nothing later is compared */
    c10dc_fp other = ar(C10D_INT32, 9);
    c10ds_vgroup_enter(g, 1, 6, 8, &other, &k);
    ck_assert_int_eq(h.desyncs, 1);
    c10ds_vgroup_free(g);
}
END_TEST

START_TEST(a_resend_changes_nothing_and_a_skip_is_not_compared)
{
    heard h = {0};
    c10ds_vsink k = {on_desync, on_min, &h, 0};
    c10ds_vgroup *g = group(2);
    c10dc_fp fp = ar(C10D_FLOAT32, 4), other = ar(C10D_FLOAT32, 8);
    c10ds_vgroup_enter(g, 0, 1, 5, &fp, &k);
    c10ds_vgroup_enter(g, 1, 1, 5, &fp, &k);
    int moves = h.min_moves;
    c10ds_vgroup_enter(g, 1, 1, 5, &other, &k); /* the same seqs again, even unlike */
    ck_assert_int_eq(h.desyncs, 0);
    ck_assert_int_eq(h.min_moves, moves);
    ck_assert_uint_eq(g->entered[1], 5);
    /* rank 1 issued 6..9 under OFF: moved on without comparing */
    c10ds_vgroup_enter(g, 0, 6, 9, &fp, &k);
    c10ds_vgroup_skip_to(g, 1, 9, &k);
    ck_assert_int_eq(h.desyncs, 0);
    ck_assert_uint_eq(g->min_entered, 9);
    /* the next one it reports is compared again */
    c10ds_vgroup_enter(g, 0, 10, 10, &fp, &k);
    c10ds_vgroup_enter(g, 1, 10, 10, &other, &k);
    ck_assert_int_eq(h.desyncs, 1);
    ck_assert_str_eq(h.field, "shape");
    c10ds_vgroup_free(g);
}
END_TEST

START_TEST(the_minimum_moves_once_the_last_member_at_it_moves)
{
    heard h = {0};
    c10ds_vsink k = {on_desync, on_min, &h, 0};
    c10ds_vgroup *g = group(4);
    c10dc_fp fp = ar(C10D_FLOAT32, 4);
    for (int r = 0; r < 3; r++)
        c10ds_vgroup_enter(g, r, 1, 3, &fp, &k);
    ck_assert_int_eq(h.min_moves, 0); /* rank 3 still at 0 */
    c10ds_vgroup_enter(g, 3, 1, 1, &fp, &k);
    ck_assert_int_eq(h.min_moves, 1);
    ck_assert_uint_eq(g->min_entered, 1);
    ck_assert_int_eq(g->at_min, 1);
    c10ds_vgroup_enter(g, 3, 2, 3, &fp, &k);
    ck_assert_uint_eq(g->min_entered, 3);
    ck_assert_int_eq(g->at_min, 4);
    c10ds_vgroup_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("verify_runs");
    TCase *tc = tcase_create("runs");
    tcase_add_test(tc, members_that_agree_leave_no_runs_behind);
    tcase_add_test(tc, a_member_that_differs_is_a_desync_naming_the_field);
    tcase_add_test(tc, a_resend_changes_nothing_and_a_skip_is_not_compared);
    tcase_add_test(tc, the_minimum_moves_once_the_last_member_at_it_moves);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
