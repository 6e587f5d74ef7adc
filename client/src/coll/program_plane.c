/* A group whose bytes the program moves itself: setting it (every member,
 * before its first call), handing it to subgroups, and telling the program
 * when a call its data plane is inside can never complete, so that it can
 * abort rather than wait in MPI or NCCL for good. */
#include "coll/program_plane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static c10d_status program_new(c10d_pg *pg, unsigned kinds, const c10d_data_plane *dp)
{
    c10di_program *p = calloc(1, sizeof *p);
    if (!p)
        return c10di_error(C10D_ENOMEM, "out of memory");
    p->kinds = kinds;
    p->ext.dp = *dp;
    p->ext.pg = pg;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_lock(&pg->w->mu); /* the watcher's scan reads it under mu */
    pg->program = p;
    pthread_mutex_unlock(&pg->w->mu);
    return C10D_OK;
}

c10d_status c10d_data_plane_set(c10d_pg *pg, const c10d_data_plane *dp)
{
    if (!pg || !dp)
        return c10di_error(C10D_EINVAL, "c10d_data_plane_set: %s is NULL", !pg ? "pg" : "dp");
    c10d_status st = c10di_opts_version("c10d_data_plane_set", "c10d_data_plane", dp->version,
                                        C10D_DATA_PLANE_VERSION);
    if (st != C10D_OK)
        return st;
    unsigned all = C10D_DATA_PLANE_CPU | C10D_DATA_PLANE_CUDA;
    if (!dp->devices || dp->devices & ~all)
        return c10di_error(C10D_EINVAL, "c10d_data_plane_set: devices is 0x%x; want "
                           "C10D_DATA_PLANE_CPU and/or C10D_DATA_PLANE_CUDA", dp->devices);
    if (pg->program)
        return c10di_error(C10D_EINVAL, "c10d_data_plane_set: group %s has its data plane set "
                           "already", pg->name);
    if (pg->seq || pg->p2p_seq)
        return c10di_error(C10D_EINVAL, "c10d_data_plane_set: group %s has run %llu calls "
                           "already; set its data plane before its first (every member at the "
                           "same point)", pg->name,
                           (unsigned long long)(pg->seq + pg->p2p_seq));
    unsigned kinds = (dp->devices & C10D_DATA_PLANE_CPU ? 1u << C10DI_DEV_CPU : 0) |
                     (dp->devices & C10D_DATA_PLANE_CUDA ? 1u << C10DI_DEV_CUDA : 0);
    return program_new(pg, kinds, dp);
}

c10d_status c10di_program_inherit(c10d_pg *parent, c10d_pg *child)
{
    if (!parent->program)
        return C10D_OK;
    return program_new(child, parent->program->kinds, &parent->program->ext.dp);
}

void c10di_program_free(c10d_pg *pg)
{
    c10di_program *p = pg->program;
    if (!p)
        return;
    /* Handles still open are the program's: c10d/checked.h asks for
     * every one to be ended before its group is destroyed. */
    pthread_mutex_destroy(&p->mu);
    free(p);
    pg->program = NULL;
}

/* A group to tell, as the scan found it. */
typedef struct told {
    c10d_pg *pg;
    c10d_status st;
    char report[1024];
} told;

void c10di_program_scan(c10di_world *w)
{
    pthread_mutex_lock(&w->alert_cb_mu); /* no group is freed meanwhile */
    size_t n = 0;
    pthread_mutex_lock(&w->mu);
    for (c10d_pg *g = w->groups; g; g = g->next_in_world)
        n += g->program && g->program->ext.dp.on_alert && !atomic_load(&g->program->alerted);
    c10d_pg **cand = n ? malloc(n * sizeof *cand) : NULL;
    size_t k = 0;
    for (c10d_pg *g = w->groups; cand && g && k < n; g = g->next_in_world)
        if (g->program && g->program->ext.dp.on_alert && !atomic_load(&g->program->alerted))
            cand[k++] = g;
    pthread_mutex_unlock(&w->mu);
    told *t = k ? malloc(sizeof *t) : NULL;
    for (size_t i = 0; t && i < k; i++) {
        c10di_program *p = cand[i]->program;
        pthread_mutex_lock(&p->mu);
        c10d_status st = p->open ? c10di_checked_failure(p->open, t->report, sizeof t->report)
                                 : C10D_OK;
        pthread_mutex_unlock(&p->mu);
        if (st == C10D_OK)
            continue;
        atomic_store(&p->alerted, 1);
        /* Outside every lock but alert_cb_mu: it may ask c10d_check_state. */
        p->ext.dp.on_alert(p->ext.dp.arg, cand[i], st, t->report);
    }
    free(t);
    free(cand);
    pthread_mutex_unlock(&w->alert_cb_mu);
}
