/* Every collective of the host backend, in every dtype and reduce op,
 * checked against a reference computed locally, at world sizes 1, 2, 3, 4
 * and 8: forked rank processes, a real c10d-coord, sync and async, sizes
 * from 0 elements to ones that take the ring paths and ones not divisible
 * by the world size, over shared memory.
 *
 * The checks are one battery (support/coll_battery.c, its reference
 * support/coll_reference.c), every check run in every world; the same
 * battery over TCP, IPv6 and two hosts is test_collectives_transports.c.
 * Subgroups, the monitored barrier and numbering are
 * test_collectives_groups.c's. */
#include "coll_battery.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>

START_TEST(world_1) { run_battery(1); }
END_TEST
START_TEST(world_2) { run_battery(2); }
END_TEST
START_TEST(world_3) { run_battery(3); }
END_TEST
START_TEST(world_4) { run_battery(4); }
END_TEST
START_TEST(world_8) { run_battery(8); }
END_TEST

int main(void)
{
    Suite *s = suite_create("collectives");
    TCase *tc = tcase_create("host");
    tcase_add_checked_fixture(tc, world_coord_start, world_coord_stop);
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, world_1);
    tcase_add_test(tc, world_2);
    tcase_add_test(tc, world_3);
    tcase_add_test(tc, world_4);
    tcase_add_test(tc, world_8);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
