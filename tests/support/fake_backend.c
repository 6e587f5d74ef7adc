/* The CPU data plane, played in process: see fake_backend.h. It is linked
 * under the host backend's name, so the front end picks it for CPU
 * buffers as it would pick the host backend (backends.c). */
#include "fake_backend.h"
#include "fake_conn.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CALLS 256
#define MAX_OPEN 16

typedef struct fb_state {
    const c10di_be_ctx *ctx;
    int open;
} fb_state;

static struct {
    pthread_mutex_t mu;
    int hold;
    int any_from;
    fake_call calls[MAX_CALLS];
    int n_calls;
    fb_state states[MAX_OPEN];
    int n_states;
} fb = {.mu = PTHREAD_MUTEX_INITIALIZER, .any_from = -1};

void fake_backend_hold(int on)
{
    pthread_mutex_lock(&fb.mu);
    fb.hold = on;
    pthread_mutex_unlock(&fb.mu);
}

void fake_backend_any_source_from(int from)
{
    pthread_mutex_lock(&fb.mu);
    fb.any_from = from;
    pthread_mutex_unlock(&fb.mu);
}

void fake_backend_release(void)
{
    fake_backend_hold(0);
}

int fake_backend_count(void)
{
    pthread_mutex_lock(&fb.mu);
    int n = fb.n_calls;
    pthread_mutex_unlock(&fb.mu);
    return n;
}

int fake_backend_call(int i, fake_call *out)
{
    pthread_mutex_lock(&fb.mu);
    int ok = i >= 0 && i < fb.n_calls;
    if (ok)
        *out = fb.calls[i];
    pthread_mutex_unlock(&fb.mu);
    return ok;
}

int fake_backend_wait_count(int n, int timeout_ms)
{
    for (int waited = 0; fake_backend_count() < n; waited++) {
        if (waited >= timeout_ms)
            return 0;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return 1;
}

c10d_status fake_backend_failure(int rank, uint64_t seq, char *msg, size_t cap)
{
    const c10di_be_ctx *ctx = NULL;
    pthread_mutex_lock(&fb.mu);
    for (int i = 0; i < fb.n_states; i++)
        if (fb.states[i].open && fb.states[i].ctx->rank == rank)
            ctx = fb.states[i].ctx;
    pthread_mutex_unlock(&fb.mu);
    if (!ctx)
        return c10di_error(C10D_EINVAL, "fake backend: no group rank %d is open", rank);
    return c10di_be_failure(ctx, seq, msg, cap);
}

/* --- the ops --- */

static c10d_status fb_open(const c10di_be_ctx *ctx, void **state, char *buf, size_t cap,
                           size_t *len)
{
    (void)buf, (void)cap;
    *len = 0; /* nothing for peers to dial */
    pthread_mutex_lock(&fb.mu);
    if (fb.n_states == MAX_OPEN) {
        pthread_mutex_unlock(&fb.mu);
        return c10di_error(C10D_ENOMEM, "fake backend: more than %d groups", MAX_OPEN);
    }
    fb_state *s = &fb.states[fb.n_states++];
    s->ctx = ctx;
    s->open = 1;
    pthread_mutex_unlock(&fb.mu);
    *state = s;
    return C10D_OK;
}

static c10d_status fb_connect(void *state, const c10di_peers *peers)
{
    (void)state, (void)peers;
    return C10D_OK;
}

static c10d_status fb_run(void *state, c10di_coll *c)
{
    fb_state *s = state;
    pthread_mutex_lock(&fb.mu);
    if (fb.n_calls == MAX_CALLS) {
        pthread_mutex_unlock(&fb.mu);
        return c10di_error(C10D_ENOMEM, "fake backend: more than %d calls", MAX_CALLS);
    }
    int me = fb.n_calls++;
    fake_call *f = &fb.calls[me];
    *f = (fake_call){.tick = fake_tick(),
                     .rank = s->ctx->rank,
                     .kind = c->kind,
                     .dtype = c->dtype,
                     .op = c->op,
                     .count = c->count,
                     .root = c->root,
                     .tag = c->tag,
                     .seq = c->seq,
                     .divisor = c->divisor,
                     .async = c->async};
    snprintf(f->group, sizeof f->group, "%s", s->ctx->group);
    snprintf(f->what, sizeof f->what, "%s", c->what);
    c10d_status st = C10D_OK;
    /* Held: waits for the test as a real backend waits for its peers,
     * asking the front end whether to go on. */
    while (fb.hold) {
        pthread_mutex_unlock(&fb.mu);
        st = c10di_be_check(s->ctx, c, -1);
        struct timespec ts = {0, 1000000};
        if (st == C10D_OK)
            nanosleep(&ts, NULL);
        pthread_mutex_lock(&fb.mu);
        if (st != C10D_OK)
            break;
    }
    fb.calls[me].st = st;
    if (st == C10D_OK && c->kind == C10DC_RECV && c->root == C10DI_ANY_SOURCE && fb.any_from >= 0)
        c->root = fb.any_from; /* as the data plane says who sent what it took */
    pthread_mutex_unlock(&fb.mu);
    return st;
}

static void fb_close(void *state)
{
    fb_state *s = state;
    pthread_mutex_lock(&fb.mu);
    s->open = 0;
    pthread_mutex_unlock(&fb.mu);
}

const c10di_backend_ops c10di_host_backend = {
    .name = "fake",
    .kind = C10DI_DEV_CPU,
    .open = fb_open,
    .connect = fb_connect,
    .run_call = fb_run,
    .close = fb_close,
};
