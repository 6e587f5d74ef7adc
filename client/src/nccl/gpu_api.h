/* The CUDA runtime and NCCL, loaded at run time (dlopen), not linked: a
 * binary built with them still starts on a machine with neither, and only
 * asking for NCCL there fails (C10D_EBACKEND, saying why). The headers
 * give the types; the function pointers below are filled once per process.
 * Only built when CMake found the CUDA and NCCL headers (C10D_HAVE_NCCL). */
#ifndef C10DI_GPU_API_H
#define C10DI_GPU_API_H

#include <c10d/errors.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#define C10DI_GPU_FN(name) __typeof__(name) *name

typedef struct c10di_gpu_api {
    /* CUDA runtime */
    C10DI_GPU_FN(cudaGetDeviceCount);
    C10DI_GPU_FN(cudaSetDevice);
    C10DI_GPU_FN(cudaGetErrorString);
    C10DI_GPU_FN(cudaGetLastError);
    C10DI_GPU_FN(cudaStreamCreateWithFlags);
    C10DI_GPU_FN(cudaStreamDestroy);
    C10DI_GPU_FN(cudaStreamWaitEvent);
    C10DI_GPU_FN(cudaStreamSynchronize);
    C10DI_GPU_FN(cudaEventCreateWithFlags);
    C10DI_GPU_FN(cudaEventDestroy);
    C10DI_GPU_FN(cudaEventRecord);
    C10DI_GPU_FN(cudaEventQuery);
    C10DI_GPU_FN(cudaEventSynchronize);
    C10DI_GPU_FN(cudaEventElapsedTime);
    C10DI_GPU_FN(cudaMalloc);
    C10DI_GPU_FN(cudaFree);
    C10DI_GPU_FN(cudaMemcpy);
    C10DI_GPU_FN(cudaMemcpyAsync);
    C10DI_GPU_FN(cudaMemsetAsync);
    C10DI_GPU_FN(cudaDeviceSynchronize);
    /* NCCL */
    C10DI_GPU_FN(ncclGetVersion);
    C10DI_GPU_FN(ncclGetUniqueId);
    C10DI_GPU_FN(ncclGetErrorString);
    C10DI_GPU_FN(ncclGetLastError);
    C10DI_GPU_FN(ncclCommInitRank);
    C10DI_GPU_FN(ncclCommInitRankConfig);
    C10DI_GPU_FN(ncclCommSplit);
    C10DI_GPU_FN(ncclCommGetAsyncError);
    C10DI_GPU_FN(ncclCommFinalize);
    C10DI_GPU_FN(ncclCommDestroy);
    C10DI_GPU_FN(ncclCommAbort);
    C10DI_GPU_FN(ncclAllReduce);
    C10DI_GPU_FN(ncclBroadcast);
    C10DI_GPU_FN(ncclReduce);
    C10DI_GPU_FN(ncclAllGather);
    C10DI_GPU_FN(ncclReduceScatter);
    C10DI_GPU_FN(ncclSend);
    C10DI_GPU_FN(ncclRecv);
    C10DI_GPU_FN(ncclGroupStart);
    C10DI_GPU_FN(ncclGroupEnd);
    C10DI_GPU_FN(ncclRedOpCreatePreMulSum); /* AVG over the active ranks (join) */
    C10DI_GPU_FN(ncclRedOpDestroy);
    int nccl_version;  /* ncclGetVersion's code, e.g. 22809 */
    int devices;       /* visible CUDA devices (> 0 once loaded) */
    char nccl_path[512];
} c10di_gpu_api;

/* The loaded API, valid once c10di_gpu_load has returned C10D_OK. */
extern c10di_gpu_api c10di_gpu;

/* Loads libcudart and libnccl.so.2 and counts devices, once per process.
 * C10D_OK, or C10D_EBACKEND with c10d_errmsg() saying why: "libnccl.so.2
 * not found (...)", "no CUDA device visible (...)". Later calls repeat the
 * first answer. Looks in C10D_NCCL_LIBRARY / C10D_CUDART_LIBRARY (a path)
 * if set, else the loader's search path, else the directory CMake found
 * them in. */
c10d_status c10di_gpu_load(void);

#endif
