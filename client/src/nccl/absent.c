/* A build without CUDA/NCCL headers: no NCCL backend, and a clear answer
 * to anyone who asks for it. */
#include "pg_internal.h"

const c10di_backend_ops *c10di_nccl_ops(void)
{
    return NULL;
}

c10d_status c10di_nccl_available(void)
{
    return c10di_error(C10D_EBACKEND, "this libc10dclient was built without NCCL (CMake found no "
                       "CUDA/NCCL headers; set CUDA_HOME or NCCL_HOME and rebuild)");
}
