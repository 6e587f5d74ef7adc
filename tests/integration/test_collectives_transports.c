/* The collectives battery of test_collectives.c (support/coll_battery.c:
 * every collective of the host backend, in every dtype and reduce op,
 * against a reference computed locally) over other links than one host's
 * shared memory: TCP, TCP over IPv6, and two hosts (shared memory within
 * a host, TCP across). Forked rank processes, a real c10d-coord. */
#include "coll_battery.h"
#include "coord_proc.h"
#include "world_proc.h"

#include "check_main.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* The same battery over TCP links instead of shared memory. */
START_TEST(world_3_over_tcp)
{
    setenv("C10D_HOST_TRANSPORT", "tcp", 1);
    run_battery(3);
}
END_TEST

/* The host data plane over IPv6. The coordinator
 * listens on [::1], so the address each rank advertises (the one it
 * reaches the coordinator from) is IPv6, and its TCP links are too. */
START_TEST(world_3_over_tcp_on_ipv6)
{
    coord_stop(&world_coord, SIGTERM);
    ck_assert_int_eq(coord_start(&world_coord, "tcp://[::1]:0", NULL, NULL), 0);
    ck_assert_ptr_nonnull(strstr(world_coord.url, "[::1]"));
    setenv("C10D_HOST_TRANSPORT", "tcp", 1);
    run_battery(3);
    setenv("C10D_HOST_ADDR", "::1", 1); /* an IPv6 address given: was "a bad address" */
    run_battery(3);
    unsetenv("C10D_HOST_ADDR");
}
END_TEST

/* Two hosts, interleaved: ranks 0, 2, 4 on one, 1, 3, 5 on the other
 * (C10D_HOST_NAME). Shared memory within a host, TCP across; each rank's
 * segment holds its two local peers' rings only, in slots that both sides
 * must work out alike. */
static int battery_two_hosts(int rank, int n, void *arg)
{
    setenv("C10D_HOST_NAME", rank % 2 ? "host-b" : "host-a", 1);
    /* Its segment and its 2 local peers': 3 x 2 slots of ~1.3 MiB (sized
     * for all 6 members they were 3 x 6 slots, 22.5 MiB). */
    shm_limit = 9u << 20;
    return battery(rank, n, arg);
}

START_TEST(world_6_on_two_hosts)
{
    int failed = world_run(6, battery_two_hosts, (void *)world_job("coll2h"), 240, NULL);
    ck_assert_msg(failed == 0, "%d of 6 ranks failed (see stderr)", failed);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("collectives_transports");
    TCase *tc = tcase_create("host");
    tcase_add_checked_fixture(tc, world_coord_start, world_coord_stop);
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, world_3_over_tcp);
    tcase_add_test(tc, world_6_on_two_hosts);
    tcase_add_test(tc, world_3_over_tcp_on_ipv6);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
