/* The program's own data plane as a backend: the library's collectives on
 * its buffers are refused before they are numbered (the program moves
 * them, between c10d_check_begin and c10d_check_end), and a joined rank's
 * shadow, which only this rank's data plane can take part in, goes to the
 * program's shadow callback. */
#include "external.h"

#include <stdio.h>
#include <string.h>

void c10di_external_describe(const c10di_coll *c, int device, c10d_check_opts *out)
{
    c10d_check_opts o = C10D_CHECK_OPTS_INIT;
    o.kind = (c10d_coll_kind)c->kind;
    o.dtype = c->dtype;
    o.count = (int64_t)c->count;
    o.root = c->root;
    o.op = c->op;
    o.device = device;
    o.tag = c->tag;
    o.timeout_ms = c->timeout_ms;
    *out = o;
}

/* Before a call is numbered: only a shadow is this backend's to run. */
static c10d_status prepare(void *state, c10di_coll *c)
{
    (void)state;
    if (c->shadow)
        return C10D_OK;
    return c10di_error(C10D_EINVAL, "%s: this group's %s buffers are moved by the program's "
                       "own data plane (c10d_data_plane_set): run the call there, between "
                       "c10d_check_begin and c10d_check_end",
                       c10dc_kind_name((uint32_t)c->kind),
                       c->device == C10D_CPU ? "CPU" : "CUDA");
}

static c10d_status run_call(void *state, c10di_coll *c)
{
    c10di_external *x = state;
    if (!c->shadow) /* prepare refused it */
        return c10di_error(C10D_EINVAL, "%s: not this library's to move", c->what);
    if (!x->dp.shadow)
        return c10di_error(C10D_EJOINED, "%s: this rank joined, but its data plane has no "
                           "shadow callback (c10d_data_plane.shadow), so it cannot take part "
                           "in the others' collectives", c->what);
    c10d_check_opts call;
    /* A CUDA shadow's device is the group's (c->device -1, as C10D_CPU) */
    int device = c->fp.device == C10DC_DEV_CUDA && c->device < 0 ? C10D_ANY_CUDA : c->device;
    c10di_external_describe(c, device, &call);
    c10d_status st = x->dp.shadow(x->dp.arg, x->pg, &call);
    if (st != C10D_OK)
        return c10di_error(st, "%s: the program's data plane failed to take part in it (%s)",
                           c->what, c10d_status_name(st));
    return C10D_OK;
}

static void close_state(void *state)
{
    (void)state; /* owned by the group (program_plane.c) */
}

static c10d_status connect_none(void *state, const c10di_peers *peers)
{
    (void)state, (void)peers;
    return C10D_OK;
}

const c10di_backend_ops c10di_external_backend = {
    .name = "external",
    .kind = C10DI_DEV_CPU, /* serves whichever kinds the program named */
    .connect = connect_none,
    .run_call = run_call,
    .close = close_state,
    .prepare = prepare,
};
