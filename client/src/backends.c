/* The backends by kind of device: CPU buffers go to the host backend,
 * CUDA buffers to NCCL (each, where not built, a stub that says so), and
 * which kinds a group's backend setting serves. */
#include "backends.h"

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
