/* What happens to jobs and groups, told to the modules that keep state
 * about them. liveness_ops.c announces membership changes and heartbeats
 * (watches) and asks for the parts of watch replies others own, admin_ops.c
 * for theirs of the jobs listing; rendezvous_ops.c announces a generation's
 * start, verify_ops.c collectives entered and findings made, runs.c a
 * run's end and its records reclaimed.
 * Each listener reacts inside its own module (verification in verify_ops.c,
 * join in join_events.c, runs in runs.c), so no module calls another's
 * handlers and the dependencies run one way:
 *
 *     liveness_ops ──▶ events ◀── verify_ops ◀── join_release ◀── join_ops
 *                        │            ▲               ▲
 *                        ├─listeners──┴── join_events ┘
 *                        └──────────────▶ runs (it announces run_ended, run_reclaimed)
 *
 * Every entry is optional (NULL). All run on the engine thread, inside its
 * transaction. */
#ifndef C10DS_EVENTS_H
#define C10DS_EVENTS_H

#include "c10d.pb-c.h"

#include <stdint.h>

typedef struct c10ds_engine c10ds_engine;
typedef struct c10ds_vgroup c10ds_vgroup;
typedef struct c10ds_vp2p c10ds_vp2p;

typedef struct c10ds_event_listener {
    const char *name;
    /* A member of (job, gen) died or left. */
    void (*membership_changed)(c10ds_engine *e, const char *job, uint64_t gen);
    /* A rank's watch (its heartbeat) arrived. */
    void (*watch_request)(c10ds_engine *e, const C10dpb__Watch *m);
    /* Adds this module's part to a watch reply for (job, gen); watch_done
     * frees what it added, after the reply is packed. */
    void (*watch_reply)(c10ds_engine *e, const char *job, uint64_t gen, C10dpb__WatchReply *w);
    void (*watch_done)(C10dpb__WatchReply *w);
    /* Adds to a group's entry of the jobs listing (c10d-ctl status);
     * group_info_done frees it. */
    void (*group_info)(c10ds_engine *e, const char *job, uint64_t gen, C10dpb__GroupInfo *gi);
    void (*group_info_done)(C10dpb__GroupInfo *gi);
    /* Group rank idx of g reported collectives (verify_ops.c); join_known
     * is what its report said it knew of the group's joins. */
    void (*entered)(c10ds_engine *e, c10ds_vgroup *g, int idx, uint32_t join_known);
    /* A send or recv of g that no peer's report matches yet. */
    void (*p2p_unmatched)(c10ds_engine *e, c10ds_vgroup *g, const c10ds_vp2p *x);
    /* g got its (sticky) finding. */
    void (*finding)(c10ds_engine *e, c10ds_vgroup *g);
    /* Every sweep interval (about twice a second). */
    void (*sweep)(c10ds_engine *e);
    /* Generation gen of job began to form (the job restarted): what is
     * kept in memory for its older generations can go, so a coordinator
     * that sees many restarts does not grow with each. */
    void (*generation_started)(c10ds_engine *e, const char *job, uint64_t gen);
    /* Run (job, gen) is over: none of its members is alive (runs.c, in
     * the transaction that marks the last one). What a module keeps in
     * memory for the run goes, its post-mortem (what c10d-ctl desync and
     * trace show) written to the database first: a coordinator serving a
     * day's jobs must not hold each one's state until the retention. */
    void (*run_ended)(c10ds_engine *e, const char *job, uint64_t gen);
    /* Generation gen of job was over for --retention and its records are
     * being deleted (runs.c; perhaps over several sweeps, told at each):
     * whatever is kept in memory for it goes, without writing anything of
     * it again. */
    void (*run_reclaimed)(c10ds_engine *e, const char *job, uint64_t gen);
} c10ds_event_listener;

extern const c10ds_event_listener c10ds_verify_listener; /* verify_ops.c */
extern const c10ds_event_listener c10ds_join_listener;   /* join_events.c */
extern const c10ds_event_listener c10ds_runs_listener;   /* runs.c */
extern const c10ds_event_listener c10ds_tcpstore_listener; /* groups/runs_tcpstore.c */

void c10ds_emit_membership_changed(c10ds_engine *e, const char *job, uint64_t gen);
void c10ds_emit_generation_started(c10ds_engine *e, const char *job, uint64_t gen);
void c10ds_emit_run_ended(c10ds_engine *e, const char *job, uint64_t gen);
void c10ds_emit_run_reclaimed(c10ds_engine *e, const char *job, uint64_t gen);
void c10ds_emit_watch_request(c10ds_engine *e, const C10dpb__Watch *m);
void c10ds_emit_watch_reply(c10ds_engine *e, const char *job, uint64_t gen,
                            C10dpb__WatchReply *w);
void c10ds_emit_watch_done(c10ds_engine *e, C10dpb__WatchReply *w);
void c10ds_emit_group_info(c10ds_engine *e, const char *job, uint64_t gen, C10dpb__GroupInfo *gi);
void c10ds_emit_group_info_done(c10ds_engine *e, C10dpb__GroupInfo *gi);
void c10ds_emit_entered(c10ds_engine *e, c10ds_vgroup *g, int idx, uint32_t join_known);
void c10ds_emit_p2p_unmatched(c10ds_engine *e, c10ds_vgroup *g, const c10ds_vp2p *x);
void c10ds_emit_finding(c10ds_engine *e, c10ds_vgroup *g);
void c10ds_emit_sweep(c10ds_engine *e);

#endif
