/* Loading the CUDA runtime and NCCL at run time: see gpu_api.h. */
#define _GNU_SOURCE /* dladdr */
#include "gpu_api.h"

#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef C10D_NCCL_LIBDIR
#define C10D_NCCL_LIBDIR "/usr/local/cuda/lib64"
#endif
#ifndef C10D_CUDART_LIBDIR
#define C10D_CUDART_LIBDIR "/usr/local/cuda/lib64"
#endif

c10di_gpu_api c10di_gpu;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static c10d_status load_status;
static char load_why[768];

/* dlopen of the first name that loads, from `env` (a path) if set, else
 * each of names as the loader finds them, else in dir. On failure, why
 * holds the first dlerror (the most telling one). */
static void *open_lib(const char *env, const char *const *names, const char *dir, char *why,
                      size_t cap)
{
    const char *path = getenv(env);
    why[0] = '\0';
    if (path && *path) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            snprintf(why, cap, "%s=%s: %s", env, path, dlerror());
        return h;
    }
    for (const char *const *n = names; *n; n++) {
        void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        if (!why[0])
            snprintf(why, cap, "%s", dlerror());
    }
    for (const char *const *n = names; *n; n++) {
        char full[1024];
        snprintf(full, sizeof full, "%s/%s", dir, *n);
        void *h = dlopen(full, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

#define XSTR(x) #x
#define STR(x) XSTR(x)
/* The symbol name after the headers' macros (a versioned name, if any). */
#define SYM(lib, fn)                                                                      \
    do {                                                                                  \
        *(void **)&c10di_gpu.fn = dlsym(lib, STR(fn));                                    \
        if (!c10di_gpu.fn) {                                                              \
            snprintf(load_why, sizeof load_why, "%s has no %s (too old?)", #lib, STR(fn)); \
            return;                                                                       \
        }                                                                                 \
    } while (0)

static void load(void)
{
    static const char *const cudart_names[] = {"libcudart.so.13", "libcudart.so.12",
                                               "libcudart.so", NULL};
    static const char *const nccl_names[] = {"libnccl.so.2", "libnccl.so", NULL};
    char why[512];
    load_status = C10D_EBACKEND;
    void *cudart = open_lib("C10D_CUDART_LIBRARY", cudart_names, C10D_CUDART_LIBDIR, why,
                            sizeof why);
    if (!cudart) {
        snprintf(load_why, sizeof load_why, "the CUDA runtime (libcudart.so) not found (%s)",
                 why);
        return;
    }
    void *nccl = open_lib("C10D_NCCL_LIBRARY", nccl_names, C10D_NCCL_LIBDIR, why, sizeof why);
    if (!nccl) {
        snprintf(load_why, sizeof load_why, "libnccl.so.2 not found (%s); set "
                 "C10D_NCCL_LIBRARY to its path", why);
        return;
    }
    SYM(cudart, cudaGetDeviceCount);
    SYM(cudart, cudaSetDevice);
    SYM(cudart, cudaGetErrorString);
    SYM(cudart, cudaGetLastError);
    SYM(cudart, cudaStreamCreateWithFlags);
    SYM(cudart, cudaStreamDestroy);
    SYM(cudart, cudaStreamWaitEvent);
    SYM(cudart, cudaStreamSynchronize);
    SYM(cudart, cudaEventCreateWithFlags);
    SYM(cudart, cudaEventDestroy);
    SYM(cudart, cudaEventRecord);
    SYM(cudart, cudaEventQuery);
    SYM(cudart, cudaEventSynchronize);
    SYM(cudart, cudaEventElapsedTime);
    SYM(cudart, cudaMalloc);
    SYM(cudart, cudaFree);
    SYM(cudart, cudaMemcpy);
    SYM(cudart, cudaMemcpyAsync);
    SYM(cudart, cudaMemsetAsync);
    SYM(cudart, cudaDeviceSynchronize);
    SYM(nccl, ncclGetVersion);
    SYM(nccl, ncclGetUniqueId);
    SYM(nccl, ncclGetErrorString);
    SYM(nccl, ncclGetLastError);
    SYM(nccl, ncclCommInitRank);
    SYM(nccl, ncclCommInitRankConfig);
    SYM(nccl, ncclCommSplit);
    SYM(nccl, ncclCommGetAsyncError);
    SYM(nccl, ncclCommFinalize);
    SYM(nccl, ncclCommDestroy);
    SYM(nccl, ncclCommAbort);
    SYM(nccl, ncclAllReduce);
    SYM(nccl, ncclBroadcast);
    SYM(nccl, ncclReduce);
    SYM(nccl, ncclAllGather);
    SYM(nccl, ncclReduceScatter);
    SYM(nccl, ncclSend);
    SYM(nccl, ncclRecv);
    SYM(nccl, ncclGroupStart);
    SYM(nccl, ncclGroupEnd);
    SYM(nccl, ncclRedOpCreatePreMulSum);
    SYM(nccl, ncclRedOpDestroy);
    Dl_info info;
    if (dladdr(*(void **)&c10di_gpu.ncclGetVersion, &info) && info.dli_fname)
        snprintf(c10di_gpu.nccl_path, sizeof c10di_gpu.nccl_path, "%s", info.dli_fname);
    c10di_gpu.ncclGetVersion(&c10di_gpu.nccl_version);
    int n = 0;
    cudaError_t e = c10di_gpu.cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(load_why, sizeof load_why, "no CUDA device visible (%s%s%s)",
                 e != cudaSuccess ? c10di_gpu.cudaGetErrorString(e) : "0 devices",
                 vis ? "; CUDA_VISIBLE_DEVICES=" : "", vis ? vis : "");
        return;
    }
    c10di_gpu.devices = n;
    load_status = C10D_OK;
}

c10d_status c10di_gpu_load(void)
{
    pthread_once(&once, load);
    if (load_status == C10D_OK)
        return C10D_OK;
    return c10di_error(load_status, "%s", load_why);
}
