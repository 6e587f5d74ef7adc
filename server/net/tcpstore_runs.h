/* TCPStore clients' runs: which connections share a store, so that what
 * a finished job left is not what the next one finds.
 *
 * TCPStore's protocol names no job: on torch's own server a store lives
 * as long as the process that serves it, one job's. The coordinator
 * outlives jobs, so it gives the port's clients runs instead (docs/
 * tcpstore.md, "Runs"):
 * - torchrun's rendezvous keys, "/torch.rendezvous.<id>" and the round
 *   stores under "/torch.rendezvous.<id>.<round>/", are rendezvous <id>'s
 *   run (c10ds_ts_scope, tcpstore_wire.h); every other key is the plain
 *   run's, the one all other TCPStore clients share, as they would share
 *   one TCPStore server;
 * - a connection takes part in a run from its first query on one of the
 *   run's keys; a run is over when the last connection taking part in it
 *   closes, and the next query on its keys starts a new one, with a new
 *   number and so an empty store: a relaunch under the same rendezvous id
 *   starts fresh, and so does the next job of plain clients;
 * - a run's keys live under tcpstore/<its number>/ (groups/runs_tcpstore.h
 *   deletes them once it is over). A restart ends every run: no TCPStore
 *   client redials, and this process numbers above every earlier one.
 * One table per TCPStore listener, shared by its connections' threads. */
#ifndef C10DS_TCPSTORE_RUNS_H
#define C10DS_TCPSTORE_RUNS_H

#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_ts_runs c10ds_ts_runs;

/* Runs numbered from base + 1 (groups/runs_tcpstore.h). NULL: out of memory. */
c10ds_ts_runs *c10ds_ts_runs_new(uint64_t base);
void c10ds_ts_runs_free(c10ds_ts_runs *t);

/* One more connection takes part in the live run of scope (len bytes,
 * perhaps 0: the plain run), made if there is none: its number, 0 when
 * out of memory. */
uint64_t c10ds_ts_runs_enter(c10ds_ts_runs *t, const char *scope, size_t len);
/* A connection that entered run leaves it: 1 if it was the last (the run
 * is over), else 0. */
int c10ds_ts_runs_leave(c10ds_ts_runs *t, uint64_t run);
/* Live runs (for the tests). */
size_t c10ds_ts_runs_live(c10ds_ts_runs *t);

#endif
