/* The library's own time budgets, in one place: how long it lets the
 * calls it makes by itself wait, and the connection's pacing. Durations
 * in the convention of common/c10d_time.h (milliseconds, > 0).
 *
 * None of these is a user's timeout: those are converted once at the API
 * edge (c10di_timeout, internal.h) and travel with the call. A budget
 * bounds what the user did not ask for, mostly how long a call waits for
 * a coordinator it cannot reach (c10di_call's timeout_ms, on top of what
 * the coordinator itself may hold the request: conn.h). Numbers only, no
 * includes: the backends use it too without seeing the front end. */
#ifndef C10DI_BUDGETS_H
#define C10DI_BUDGETS_H

/* --- calls to the coordinator (c10di_call's timeout_ms) --- */

/* A control call (rendezvous, join begin and shadow, the endpoints of a
 * group, a job listing, a SYNC verification report): how long it waits
 * for an unreachable coordinator before it fails C10D_EUNAVAIL. */
#define C10DI_CONTROL_CALL_BUDGET_MS 30000
/* An ASYNC verification report: a coordinator down this long loses the
 * entries to verification, not the job. */
#define C10DI_REPORT_BUDGET_MS 5000
/* A heartbeat watch: the next one, packed afresh, follows it. */
#define C10DI_WATCH_BUDGET_MS 5000
/* A notice sent on the way out (leaving a group, a join shadow's
 * failure): a coordinator that is gone is not waited for. */
#define C10DI_FAREWELL_BUDGET_MS 2000
/* Added to a wait the coordinator times out itself (a join shadow held
 * for the group's timeout), so that its answer, which words the stall,
 * arrives before the client gives up on it. */
#define C10DI_COORD_ANSWERS_FIRST_MS 1000

/* --- c10d_monitored_barrier --- */

/* Rank 0 answers within its own timeout; the others allow it this much
 * beyond twice that before they give up on it. */
#define C10DI_BARRIER_ROOT_SLACK_MS 5000

/* --- the data backends (host/, nccl/) --- */

/* A host transfer that finds its peer called something else waits this
 * long, with verification on, for the coordinator's finding, which names
 * the cause better than what the peer's header shows. */
#define C10DI_HOST_FINDING_GRACE_MS 1000
/* A checked call that the program's data plane failed waits this long for
 * the coordinator's account of why (a peer that died or left is declared
 * within about a second), which names the cause where MPI's or gloo's
 * "connection reset" does not. */
#define C10DI_CHECKED_FINDING_GRACE_MS 1500
/* A NCCL communicator's clean finalize may take this long to flush; past
 * it the communicator is aborted instead. */
#define C10DI_NCCL_FINALIZE_BUDGET_MS 5000

/* --- the connection (conn.c, conn_stream.c, conn_reader.c, conn_dial.c) --- */

/* A redial waits this long for the users of the old stream to leave it;
 * past it the stream is left allocated rather than freed under them. */
#define C10DI_CONN_RETIRE_MS 2000
/* One dial attempt at most (shorter when the call's deadline is nearer). */
#define C10DI_CONN_DIAL_ATTEMPT_MS 5000
/* The same for each URL of a replicated coordinator's list: a dead host
 * (no refusal, only silence) holds up the dial of the next replica no
 * longer than this. */
#define C10DI_CONN_LIST_DIAL_ATTEMPT_MS 2000
/* "no coordinator answers" on stderr: first after it was unreachable this
 * long, then every C10DI_CONN_NOTICE_EVERY_MS; a call that waits less in
 * all than C10DI_CONN_NOTICE_MIN_WAIT_MS (a c10d-ctl call) stays quiet. */
#define C10DI_CONN_NOTICE_AFTER_MS 1000
#define C10DI_CONN_NOTICE_EVERY_MS 10000
#define C10DI_CONN_NOTICE_MIN_WAIT_MS 5000
/* A send handed to NNG is waited for this long past the call's deadline
 * before its stream is closed to end it... */
#define C10DI_CONN_SEND_OVERRUN_MS 1000
/* ...and at most this long while a TLS handshake is under way, which a
 * coordinator answers within seconds. */
#define C10DI_CONN_HANDSHAKE_MS 3000
/* A connection that took a request and said nothing back for this long
 * is asked, on connections of its own, what server it is (a coordinator
 * answers in milliseconds; an HTTP server waits for a line for ever):
 * the probe leaves a coordinator that is only slow alone. */
#define C10DI_CONN_SILENT_PROBE_MS 500
/* A replicated coordinator's leader that says nothing on its stream for
 * this long, while a call waits (no reply, to this call or another), is
 * looked past: the other replicas are asked who leads, within
 * C10DI_CONN_LEADER_PROBE_MS, and again after C10DI_CONN_LEADER_REPROBE_MS
 * while the silence lasts (2x after 4 probes that find it leading, 4x
 * after 8). Well under an election (0.75 s or more), so a frozen leader
 * costs its clients about the election; a leader that holds a get is
 * confirmed by the others and left alone. */
#define C10DI_CONN_LEADER_SILENCE_MS 300
#define C10DI_CONN_LEADER_PROBE_MS 300
#define C10DI_CONN_LEADER_REPROBE_MS 500
/* A caller waiting while another thread reads looks again this often. */
#define C10DI_CONN_RELOOK_MS 1000

#endif
