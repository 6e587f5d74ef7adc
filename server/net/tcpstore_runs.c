/* TCPStore clients' runs: a table of the live ones (tcpstore_runs.h). A
 * handful are live at once (one per rendezvous id in use, and the plain
 * run), so a list will do. */
#include "net/tcpstore_runs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct ts_run {
    struct ts_run *next;
    uint64_t number;
    size_t refs; /* connections taking part */
    size_t len;
    char scope[]; /* len bytes */
} ts_run;

struct c10ds_ts_runs {
    pthread_mutex_t mu;
    uint64_t last; /* the last number given */
    ts_run *live;
};

c10ds_ts_runs *c10ds_ts_runs_new(uint64_t base)
{
    c10ds_ts_runs *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    pthread_mutex_init(&t->mu, NULL);
    t->last = base;
    return t;
}

void c10ds_ts_runs_free(c10ds_ts_runs *t)
{
    if (!t)
        return;
    for (ts_run *r = t->live, *n; r; r = n) {
        n = r->next;
        free(r);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

uint64_t c10ds_ts_runs_enter(c10ds_ts_runs *t, const char *scope, size_t len)
{
    pthread_mutex_lock(&t->mu);
    ts_run *r = t->live;
    while (r && !(r->len == len && memcmp(r->scope, scope, len) == 0))
        r = r->next;
    if (!r && (r = malloc(sizeof *r + len))) {
        r->number = ++t->last;
        r->refs = 0;
        r->len = len;
        memcpy(r->scope, scope, len);
        r->next = t->live;
        t->live = r;
    }
    uint64_t number = 0;
    if (r) {
        r->refs++;
        number = r->number;
    }
    pthread_mutex_unlock(&t->mu);
    return number;
}

int c10ds_ts_runs_leave(c10ds_ts_runs *t, uint64_t run)
{
    int over = 0;
    pthread_mutex_lock(&t->mu);
    for (ts_run **pp = &t->live; *pp; pp = &(*pp)->next) {
        ts_run *r = *pp;
        if (r->number != run)
            continue;
        if (--r->refs == 0) {
            *pp = r->next;
            free(r);
            over = 1;
        }
        break;
    }
    pthread_mutex_unlock(&t->mu);
    return over;
}

size_t c10ds_ts_runs_live(c10ds_ts_runs *t)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (ts_run *r = t->live; r; r = r->next)
        n++;
    pthread_mutex_unlock(&t->mu);
    return n;
}
