/* Who may act on a run (docs/operations.md, "Who may do what"). The
 * coordinator's token admits a client to the coordinator; it does not
 * make the client a member of any run. Two rules on top of it:
 *
 * - A run's store (jobs/<job>/<generation>/, common/run_scope.h) is
 *   written only by clients that joined a rank of that run. Nobody writes
 *   the prefix of a generation that has not started, so the next run of a
 *   job finds its store empty, as docs/store.md promises.
 * - The arrival that starts a generation fixes its job key (C10D_JOB_KEY,
 *   made by c10d-run for each launch); a later arrival with another key is
 *   refused and logged, so a rank slot is not taken unnoticed, and the
 *   rendezvous reply (rank 0's endpoint, the data-plane secret) goes only
 *   to the run's own ranks. */
#ifndef C10DS_TRUST_H
#define C10DS_TRUST_H

#include <stdint.h>

/* The longest job key taken (c10d-run's are 32 characters): the key is
 * kept with the run, and a request must not make that row large. */
#define C10DS_MAX_JOB_KEY_BYTES 256

typedef struct c10ds_engine c10ds_engine;
typedef struct c10ds_request c10ds_request;

/* The world arrival r (a group_join) in generation gen of its job, before
 * it is recorded as a member. started: r's arrival started gen, and its
 * key (none too) becomes the run's. Otherwise r's key must be the run's:
 * if not, r is failed with C10D_EAUTH naming who started the run, the
 * refusal is logged naming r's host and pid, and -1 returned. 0: admitted. */
int c10ds_trust_arrival(c10ds_engine *e, c10ds_request *r, uint64_t gen, int started);

/* The engine's write guard (engine.h): 0 when r may write key; -1 after
 * failing r with C10D_EAUTH when key is in a run's store and r's client
 * is no rank of that run (or the run has not started). */
int c10ds_trust_store_write(c10ds_engine *e, c10ds_request *r, const char *key);

#endif
