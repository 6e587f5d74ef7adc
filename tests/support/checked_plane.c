/* What the checked-call suites share; see checked_plane.h. */
#include "checked_plane.h"

#include "world_proc.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

shm_plane *plane;

void plane_new(void)
{
    plane = mmap(NULL, sizeof *plane, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(plane, MAP_FAILED);
    memset(plane, 0, sizeof *plane);
    plane->rank0_rc = -1;
}

_Atomic int alerted;
char alert_report[1024];
c10d_status alert_st;

static void on_alert(void *arg, c10d_pg *pg, c10d_status st, const char *report)
{
    (void)arg, (void)pg;
    snprintf(alert_report, sizeof alert_report, "%s", report);
    alert_st = st;
    atomic_store(&alerted, 1);
}

int plane_call(int rank, long step, int kind, float *v, c10d_checked *h)
{
    int peer = 1 - rank;
    float(*slot)[4] = plane->val[step % SLOTS];
    if (v)
        memcpy(slot[rank], v, sizeof slot[rank]);
    atomic_store(&plane->kind[rank], kind);
    atomic_store(&plane->step[rank], step);
    for (;;) {
        if (atomic_load(&plane->step[peer]) >= step) {
            if (atomic_load(&plane->step[peer]) == step && atomic_load(&plane->kind[peer]) != kind)
                ; /* the peer is in something else: hang, as MPI does */
            else {
                if (v)
                    for (int i = 0; i < 4; i++)
                        v[i] = slot[0][i] + slot[1][i];
                /* the peer may overwrite this slot only at step + SLOTS */
                return 0;
            }
        }
        if (atomic_load(&alerted) || (h && c10d_check_state(h) != C10D_OK))
            return 1;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

c10d_pg *init_plane(const char *job, int rank, c10d_verify mode, c10d_shadow_fn shadow)
{
    c10d_pg *pg = world_init_verify(world_coord.url, job, rank, 2, 30000, mode);
    if (!pg)
        return NULL;
    c10d_data_plane dp = C10D_DATA_PLANE_INIT;
    dp.on_alert = on_alert;
    dp.shadow = shadow;
    if (c10d_data_plane_set(pg, &dp) != C10D_OK) {
        fprintf(stderr, "rank %d: data_plane_set: %s\n", rank, c10d_errmsg());
        c10d_destroy(pg);
        return NULL;
    }
    return pg;
}

c10d_check_opts all_reduce_opts(void)
{
    c10d_check_opts o = C10D_CHECK_OPTS_INIT;
    o.kind = C10D_COLL_ALL_REDUCE;
    o.dtype = C10D_FLOAT32;
    o.count = 4;
    o.op = C10D_SUM;
    return o;
}

int contains(const char *msg, const char *want, int rank)
{
    if (strstr(msg, want))
        return 1;
    fprintf(stderr, "rank %d: message lacks '%s': %s\n", rank, want, msg);
    return 0;
}
