/* A build without CUDA/NCCL headers: no NCCL backend, and a clear answer
 * to anyone who asks for it. */
#include "backend/backend.h"

static c10d_status absent_available(void)
{
    return c10di_error(C10D_EBACKEND, "this libc10dclient was built without NCCL (CMake found no "
                       "CUDA/NCCL headers; set CUDA_HOME or NCCL_HOME and rebuild)");
}

/* Nothing but the answer: without open, no group opens it. */
const c10di_backend_ops c10di_nccl_backend = {
    .name = "nccl",
    .kind = C10DI_DEV_CUDA,
    .available = absent_available,
};
