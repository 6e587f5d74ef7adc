/* What the store suites share (test_store_integration.c,
 * test_store_hostile.c, test_store_restart.c): the coordinator each case
 * starts, on a free port with a real database file, and clients of it. */
#ifndef C10D_TEST_STORE_COORD_H
#define C10D_TEST_STORE_COORD_H

#include "coord_proc.h"

#include <c10d/c10d.h>
#include <check.h>

/* the coordinator of the running case (the fixture starts it) */
extern coord_proc coord;

/* A store handle on url; the case fails if it cannot connect. */
c10d_store *connect_timeout(const char *url, int timeout_ms);
/* The same on the case's coordinator, 10 s timeout. */
c10d_store *connect_store(void);
/* The port of a tcp:// URL. */
int port_of(const char *url);
/* A plain TCP connection to the case's coordinator, for peers that speak
 * the framing themselves (or no protocol at all). */
int raw_connect_coord(void);

/* The call returns C10D_OK, or the case fails naming it and why. */
#define OK(call) ck_assert_msg((call) == C10D_OK, "%s: %s", #call, c10d_errmsg())

/* A test case with the coordinator fixture and the suites' timeout. */
TCase *store_tcase(const char *name);

#endif
