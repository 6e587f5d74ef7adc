/* A coordinator played in process, behind the client library's connection
 * (client/src/conn/conn.h): fake_conn.c implements conn.h's functions and is
 * linked instead of conn/'s files (conn.c and the stream beneath it) into
 * c10dclient_frontend, the front end without its connection and its host
 * backend (the link seam, client/CMakeLists.txt). Every request is
 * recorded, in order, and answered at once or parked as a coordinator
 * would:
 *
 * - group_join: the rendezvous, once every member arrived (or at once,
 *   alone, under fake_coord_solo), generation 1, no endpoints;
 * - watch: parked until the job's state changes (a member lost, a join
 *   heard: what the test says) or its wait_ms passed, then the whole
 *   state, as the coordinator answers it;
 * - coll_report: OK, or the answer the test queued for the next SYNC one
 *   (a desync, in the coordinator's words); queued ones parked while the
 *   test holds them;
 * - group_leave, join_begin: OK; anything else: C10D_EUNAVAIL.
 *
 * One coordinator per process (Check runs each case in a process of its
 * own); every function is thread-safe. */
#ifndef C10D_TEST_FAKE_CONN_H
#define C10D_TEST_FAKE_CONN_H

#include "c10d.pb-c.h"

#include <c10d/errors.h>
#include <stdint.h>

/* A number that grows with every request the coordinator receives and
 * every call the fake backend runs: the order of what happened. */
uint64_t fake_tick(void);

/* 1: every rendezvous is answered at once, for the caller alone (a world
 * of several ranks played by one thread); 0 (the default): once all its
 * members arrived. */
void fake_coord_solo(int on);

/* 1: a queued (not SYNC) coll_report is parked until it is set to 0
 * again, so that what the client queues meanwhile goes in one batch. */
void fake_coord_hold_reports(int on);

/* The next SYNC coll_report is answered with st and detail (what the
 * client's c10d_errmsg() then carries). */
void fake_coord_answer_report(c10d_status st, const char *detail);

/* The job's state changes, and every watch hears it: global rank `rank`
 * is lost (C10DPB__MEMBER_STATE__MEMBER_DEAD or _LEFT, with reason). */
void fake_coord_lose(int rank, C10dpb__MemberState state, const char *reason);
/* Group rank `rank` of `group` joined region `region` after collective
 * `after_seq` (JoinState, its version the joins so far). */
void fake_coord_join(const char *group, uint32_t region, int rank, uint64_t after_seq);
/* Waits until a watch of global rank `rank` arrives that was sent after
 * it had heard every change so far (it carries the latest version):
 * what the test said is then applied. 1, or 0 after timeout_ms. */
int fake_coord_heard(int rank, int timeout_ms);

/* The requests received of one kind, in order: how many, and the i-th
 * (decoded, with the tick it arrived at; valid until the process ends).
 * NULL past the end. */
int fake_coord_count(C10dpb__Request__OpCase op);
const C10dpb__Request *fake_coord_request(C10dpb__Request__OpCase op, int i, uint64_t *tick);
/* Waits until at least n requests of that kind arrived: 1, or 0 after
 * timeout_ms. */
int fake_coord_wait_count(C10dpb__Request__OpCase op, int n, int timeout_ms);

#endif
