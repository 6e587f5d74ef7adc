/* What the stream beneath the connection shares among its files, and
 * conn.c does not see (it has conn_stream.h):
 *
 *   conn_stream.c  the calls: a waiter per call in flight, whose turn it
 *                  is to read, sending a frame, one round trip (send,
 *                  wait or read, dial again, resend) and the error it
 *                  reports; the state's init and fini
 *   conn_reader.c  the reader: sleeping on the socket (poll(2)) or on
 *                  NNG's receive, TLS's receive always armed, frames cut
 *                  from the stream, each reply decoded (protobuf-c) once
 *                  and handed to the call waiting for it
 *   conn_dial.c    getting a stream: the dialers and their TLS, a dial
 *                  (a connection to itself refused), and the failover
 *                  policy: a stream broken or dropped, a replica that
 *                  does not lead and the leader it names, the next URL,
 *                  the back-off; saying so when no coordinator answers
 *   conn_probe.c   asking the other replicas who leads when the one
 *                  served is silent (a frozen leader)
 *
 * Calls go down only: conn_stream.c calls the reader and the dial; the
 * reader calls the dial's failover (a stream broken, a replica that does
 * not lead); conn_dial.c calls neither; conn_stream.c calls the probe,
 * which dials streams of its own with the dialers only. So a new TLS stream's receive is
 * armed by the caller of c10di_conn_dial, not by the dial. Everything
 * here runs with c->mu held unless it says otherwise. */
#ifndef C10DI_CONN_STREAM_INTERNAL_H
#define C10DI_CONN_STREAM_INTERNAL_H

#include "conn/conn_stream.h"

#include <time.h>

/* Helpers the files share (static inline: nothing exported). */
static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The connection changed (mu held): everyone looks again. */
static inline void wake_all(c10di_conn *c)
{
    pthread_cond_broadcast(&c->cv);
    pthread_cond_broadcast(&c->news_cv);
}

static inline void wait_change(c10di_conn *c, int news, int64_t until_ms)
{
    struct timespec ts = {(time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000};
    pthread_cond_timedwait(news ? &c->news_cv : &c->cv, &c->mu, &ts);
}

/* --- conn_dial.c --- */

/* Dials c->urls[c->cur] (mu held, released during the dial; c->stream is
 * NULL and nobody else dials), first freeing the retired stream once
 * nobody uses it, or going where a replica that does not lead said
 * (c->redirected). On success c->stream is the new stream (a new epoch);
 * else the URL counts as failed and c->next_dial_ms says when to dial
 * again. TLS: arms no receive (c10di_conn_rx_arm is the caller's). */
void c10di_conn_dial(c10di_conn *c, int64_t deadline);
/* c's stream s broke with NNG's rv (mu held; nothing when s is no longer
 * c->stream): closed, freed by the next dial; broken before any reply, it
 * counts as a failed dial. */
void c10di_conn_broken(c10di_conn *c, nng_stream *s, int rv);
/* A replica answered on c->stream that it does not lead, naming the
 * leader's URL (leader: NULL or "" when it knows none) and saying why
 * (detail, may be NULL) (mu held): the stream is dropped and the next
 * dial goes to the leader named. The strings are copied. */
void c10di_conn_not_leader(c10di_conn *c, const char *leader, const char *detail);
/* The stream served by a replica of a list was silent for
 * C10DI_CONN_LEADER_SILENCE_MS: the leader moved to `leader` (mu held),
 * found by asking the others: the stream is dropped and the next dial
 * goes there. */
void c10di_conn_leader_moved(c10di_conn *c, const char *leader);
/* No coordinator reached for a while: says so on stderr (mu held). */
void c10di_conn_notice_unreachable(c10di_conn *c, int64_t now, int64_t deadline);

/* --- conn_probe.c --- */

/* Asks the replicas of the list other than the one served, each with a
 * hello on a connection of its own, who leads (mu held, let go
 * meanwhile; c->probing is the caller's): 1 with the URL of a replica
 * that leads, or that one of them names, other than the one served, in
 * leader; 0 when they name the one served, or none answers within
 * C10DI_CONN_LEADER_PROBE_MS. */
int c10di_conn_probe_leader(c10di_conn *c, char *leader, size_t cap);

/* --- conn_reader.c --- */

/* The caller w reads the stream (mu held, released while it sleeps) until
 * its reply came, it was asked for the reading (c10di_conn_ask_reading),
 * the stream changed or deadline; tcp://, ipc:// only. */
void c10di_conn_read_replies(c10di_conn *c, c10di_waiter *w, int parked, int64_t deadline);
/* Asks the caller reading (c->reading) to pass the reading on (mu held). */
void c10di_conn_ask_reading(c10di_conn *c);
/* TLS: arms the connection's one receive on c->stream (mu held; not while
 * c->rx_armed); c10di_conn_rx_done is rx_aio's callback. */
void c10di_conn_rx_arm(c10di_conn *c);
void c10di_conn_rx_done(void *arg);

#endif
