/* What the connection's two halves share inside the library: conn.c (the
 * connection itself: opening it and the hello, dialling again when it
 * breaks, the coordinator's limits) and conn_call.c (calls in flight:
 * sending, reading and matching replies, resends). The connection's
 * fields are in internal.h, with the calls the rest of the library makes. */
#ifndef C10DI_CONN_INTERNAL_H
#define C10DI_CONN_INTERNAL_H

#include "internal.h"

#include <time.h>

/* Waits on c->cv, or c->news_cv for a caller only waiting for news (mu
 * held), until the monotonic time until_ms. */
static inline void wait_for(c10di_conn *c, int news, int64_t until_ms)
{
    struct timespec ts = {(time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000};
    pthread_cond_timedwait(news ? &c->news_cv : &c->cv, &c->mu, &ts);
}

static inline void wait_until(c10di_conn *c, int64_t until_ms)
{
    wait_for(c, 0, until_ms);
}

/* The connection changed (mu held): everyone looks again. */
static inline void wake_all(c10di_conn *c)
{
    pthread_cond_broadcast(&c->cv);
    pthread_cond_broadcast(&c->news_cv);
}

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* A TLS failure: a wrong CA does not get better by dialling again. */
static inline int tls_failure(int rv)
{
    return rv == NNG_EPEERAUTH || rv == NNG_ECRYPTO;
}

/* --- conn.c --- */
/* The connection s failed with rv (mu held): close it, so that every
 * operation on it ends, and let the next caller dial again. */
void c10di_conn_broken(c10di_conn *c, nng_stream *s, int rv);
/* Dials once (mu held, returns with it held); on failure the next dial
 * waits for the back-off (c->next_dial_ms). */
void c10di_conn_dial(c10di_conn *c, int64_t deadline);
/* Says on stderr, now and then, that no coordinator answers (mu held). */
void c10di_conn_notice_unreachable(c10di_conn *c, int64_t now, int64_t deadline);

/* --- conn_call.c --- */
/* send_aio's callback: the send completed (sent_mu, sent_cv). */
void c10di_conn_sent(void *arg);
/* TLS: arms the connection's one receive on c->stream (mu held). */
void c10di_conn_rx_arm(c10di_conn *c);
/* TLS: that receive's callback (c->rx_aio's), which hands replies out. */
void c10di_conn_rx_done(void *arg);

#endif
