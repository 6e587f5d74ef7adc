/* The backends by kind of device: CPU buffers go to the host backend,
 * CUDA buffers to NCCL (each, where not built, a stub that says so),
 * which kinds a group's backend setting serves, and which of a group's
 * backends serves a call (c10di_route). */
#include "backend/backends.h"
#include "group/group.h"
#include "coll/program_plane.h"

#include <stdio.h>

const c10di_backend_ops *c10di_backend_of(c10di_dev_kind kind)
{
    return kind == C10DI_DEV_CUDA ? &c10di_nccl_backend : &c10di_host_backend;
}

c10d_status c10di_backend_available(c10di_dev_kind kind)
{
    const c10di_backend_ops *ops = c10di_backend_of(kind);
    return ops->available ? ops->available() : C10D_OK;
}

unsigned c10di_backend_serves(c10d_backend backend)
{
    switch (backend) {
    case C10D_BACKEND_HOST: return 1u << C10DI_DEV_CPU;
    case C10D_BACKEND_NCCL: return 1u << C10DI_DEV_CUDA;
    default: return 1u << C10DI_DEV_CPU | 1u << C10DI_DEV_CUDA;
    }
}

c10di_dev_kind c10di_backend_home(c10d_backend backend)
{
    return backend == C10D_BACKEND_NCCL ? C10DI_DEV_CUDA : C10DI_DEV_CPU;
}

/* What the messages call a group's backend setting. */
static const char *backend_words(c10d_backend b)
{
    return b == C10D_BACKEND_NCCL ? "the NCCL backend, which takes CUDA buffers"
                                  : "the host backend, which takes CPU buffers";
}

/* Which backend serves a call on `device`: the group's backend for that
 * kind of device (CPU buffers: host, CUDA buffers: NCCL; C10D_BACKEND_AUTO
 * serves both, like torch's "cpu:gloo,cuda:nccl"). Checked before the
 * call is numbered, so a refusal leaves the group usable. */
c10d_status c10di_route(c10d_pg *pg, c10di_coll *c, int device, const char *fn)
{
    if (device == C10DI_GROUP_DEVICE && c10di_backend_home(pg->backend) == C10DI_DEV_CPU)
        device = C10D_CPU;
    /* The kind first: C10DI_ANY_CUDA becomes -1, which is also C10D_CPU's
     * value (a CUDA backend reads a negative device as its own). */
    c10di_dev_kind kind = device == C10D_CPU ? C10DI_DEV_CPU : C10DI_DEV_CUDA;
    if (device == C10DI_ANY_CUDA)
        device = -1; /* the group's CUDA device, whichever it is */
    c->device = device;
    if (c10di_program_serves(pg, kind)) { /* the program moves these (c10d_data_plane_set) */
        c->be = &c10di_external_backend;
        c->be_state = &pg->program->ext;
        return C10D_OK;
    }
    if (!(c10di_backend_serves(pg->backend) & 1u << kind)) {
        char dev[32];
        if (kind == C10DI_DEV_CPU)
            snprintf(dev, sizeof dev, "the CPU");
        else
            snprintf(dev, sizeof dev, "cuda:%d", device);
        return c10di_error(C10D_EINVAL, "%s: the tensors are on %s, but group %s uses %s "
                           "(C10D_BACKEND_AUTO serves both)", fn, dev, pg->name,
                           backend_words(pg->backend));
    }
    c10d_status st = c10di_backend_available(kind);
    if (st != C10D_OK)
        return c10di_error(st, "%s on cuda:%d: the %s backend is unavailable: %s", fn, device,
                           c10di_backend_of(kind)->name, c10d_errmsg());
    if (!pg->be[kind].state)
        return c10di_error(C10D_EBACKEND, "%s: group %s has no %s state", fn, pg->name,
                           c10di_backend_of(kind)->name);
    c->be = pg->be[kind].ops;
    c->be_state = pg->be[kind].state;
    return C10D_OK;
}
