/* What the store suites share; see store_coord.h. */
#include "store_coord.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

coord_proc coord;

static void setup(void)
{
    coord_init(&coord);
    ck_assert_int_eq(coord_start(&coord, NULL, NULL, NULL), 0);
}

static void teardown(void)
{
    coord_cleanup(&coord);
}

c10d_store *connect_timeout(const char *url, int timeout_ms)
{
    c10d_store *s = NULL;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = timeout_ms;
    c10d_status st = c10d_store_connect(&s, url, &o);
    ck_assert_msg(st == C10D_OK, "connect to %s: %s", url, c10d_errmsg());
    return s;
}

c10d_store *connect_store(void)
{
    return connect_timeout(coord.url, 10000);
}

int port_of(const char *url)
{
    return atoi(strrchr(url, ':') + 1);
}

int raw_connect_coord(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port_of(coord.url))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

TCase *store_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    return tc;
}
