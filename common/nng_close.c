#include "nng_close.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    nng_socket sock;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;      /* guarded by mu */
    int abandoned; /* guarded by mu: the waiter gave up; the helper frees */
} closer;

static void closer_free(closer *c)
{
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void *close_main(void *arg)
{
    closer *c = arg;
    nng_close(c->sock);
    pthread_mutex_lock(&c->mu);
    c->done = 1;
    int abandoned = c->abandoned;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (abandoned)
        closer_free(c);
    return NULL;
}

int c10dc_nng_close_bounded(nng_socket sock, int timeout_ms)
{
    closer *c = calloc(1, sizeof *c);
    pthread_t th;
    pthread_condattr_t ca;
    if (!c) {
        nng_close(sock); /* nothing better to do without memory */
        return 0;
    }
    c->sock = sock;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&th, NULL, close_main, c) != 0) {
        closer_free(c);
        nng_close(sock);
        return 0;
    }
    pthread_detach(th);

    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&c->mu);
    while (!c->done && pthread_cond_timedwait(&c->cv, &c->mu, &ts) != ETIMEDOUT)
        ;
    int done = c->done;
    if (!done)
        c->abandoned = 1;
    pthread_mutex_unlock(&c->mu);
    if (done)
        closer_free(c);
    return done ? 0 : -1;
}
