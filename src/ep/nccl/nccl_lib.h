/* nccl_lib.h - the NCCL functions the expert-parallel layer calls, reached
 * through dlopen("libnccl.so.2") once per process (nccl_lib.c), so libfp8kit
 * has no link dependency on NCCL. A process that already loaded NCCL (the
 * caller made its communicator with it) gets that same library back: the
 * dynamic loader returns an object already loaded under this soname.
 * nccl.h is needed at build time for the types only. */
#ifndef FK_EP_NCCL_LIB_H
#define FK_EP_NCCL_LIB_H

#include <nccl.h>

typedef struct fk_nccl {
    int version; /* ncclGetVersion's code, e.g. 22809 for 2.28.9 */
    ncclResult_t (*GetVersion)(int *version);
    const char *(*GetErrorString)(ncclResult_t result);
    const char *(*GetLastError)(ncclComm_t comm);
    ncclResult_t (*CommCount)(const ncclComm_t comm, int *count);
    ncclResult_t (*CommUserRank)(const ncclComm_t comm, int *rank);
    ncclResult_t (*CommCuDevice)(const ncclComm_t comm, int *device);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t comm, ncclResult_t *async_error);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    ncclResult_t (*Send)(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                         cudaStream_t stream);
    ncclResult_t (*Recv)(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                         cudaStream_t stream);
    ncclResult_t (*AllReduce)(const void *sendbuf, void *recvbuf, size_t count, ncclDataType_t type, ncclRedOp_t op,
                              ncclComm_t comm, cudaStream_t stream);
} fk_nccl;

/* One function of a library loaded with dlopen: its name, and where its
 * address goes (dlsym returns void *; the function pointers are stored
 * through it). */
typedef struct fk_dl_fn {
    const char *name;
    void **slot;
} fk_dl_fn;

/* Looks up the n functions of lib into their slots: 1, or 0 at the first
 * one missing, with "LIB_NAME has no NAME (NEED)" in why. */
int fk_dl_bind(void *lib, const fk_dl_fn *fns, int n, const char *lib_name, const char *need, char *why,
               size_t why_len);

/* r, or for a non-blocking communicator's ncclInProgress the result once
 * NCCL has finished enqueueing the call (polling ncclCommGetAsyncError on
 * the host; the GPU is not waited for). */
ncclResult_t fk_nccl_settle(const fk_nccl *nc, ncclComm_t comm, ncclResult_t r);

/* The functions of libnccl.so.2 (loaded on the first call, thread-safe), or
 * NULL with *why saying what is missing: the library, a function, or a
 * version without point-to-point calls (before 2.7). */
const fk_nccl *fk_nccl_get(const char **why);

#endif
