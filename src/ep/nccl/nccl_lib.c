/* nccl_lib.c - loads libnccl.so.2 with dlopen once per process and looks up
 * the functions of nccl_lib.h; never unloads it. */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include "ep/nccl/nccl_lib.h"

static pthread_once_t fk_nccl_once = PTHREAD_ONCE_INIT;
static fk_nccl fk_nccl_fns;
static int fk_nccl_ok;
static char fk_nccl_why[512];

/* One symbol into *slot; 0 and the reason recorded when absent. */
static int fk_nccl_sym(void *lib, const char *name, void **slot)
{
    *slot = dlsym(lib, name);
    if (!*slot)
        snprintf(fk_nccl_why, sizeof fk_nccl_why, "libnccl.so.2 has no %s (a point-to-point capable NCCL, 2.7 or "
                 "newer, is needed)", name);
    return *slot != NULL;
}

static void fk_nccl_load(void)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(fk_nccl_why, sizeof fk_nccl_why, "libnccl.so.2 could not be loaded (%s): the expert-parallel layer "
                 "needs NCCL", e ? e : "dlopen failed");
        return;
    }
    fk_nccl *f = &fk_nccl_fns;
    /* dlsym returns void *; the function pointers are stored through it */
    if (!fk_nccl_sym(lib, "ncclGetVersion", (void **)&f->GetVersion) ||
        !fk_nccl_sym(lib, "ncclGetErrorString", (void **)&f->GetErrorString) ||
        !fk_nccl_sym(lib, "ncclGetLastError", (void **)&f->GetLastError) ||
        !fk_nccl_sym(lib, "ncclCommCount", (void **)&f->CommCount) ||
        !fk_nccl_sym(lib, "ncclCommUserRank", (void **)&f->CommUserRank) ||
        !fk_nccl_sym(lib, "ncclCommCuDevice", (void **)&f->CommCuDevice) ||
        !fk_nccl_sym(lib, "ncclCommGetAsyncError", (void **)&f->CommGetAsyncError) ||
        !fk_nccl_sym(lib, "ncclGroupStart", (void **)&f->GroupStart) ||
        !fk_nccl_sym(lib, "ncclGroupEnd", (void **)&f->GroupEnd) ||
        !fk_nccl_sym(lib, "ncclSend", (void **)&f->Send) || !fk_nccl_sym(lib, "ncclRecv", (void **)&f->Recv) ||
        !fk_nccl_sym(lib, "ncclAllReduce", (void **)&f->AllReduce))
        return;
    if (f->GetVersion(&f->version) != ncclSuccess || f->version < 2700) {
        snprintf(fk_nccl_why, sizeof fk_nccl_why, "libnccl.so.2 is version code %d; the expert-parallel layer needs "
                 "NCCL 2.7 or newer (point-to-point calls)", f->version);
        return;
    }
    fk_nccl_ok = 1;
}

const fk_nccl *fk_nccl_get(const char **why)
{
    pthread_once(&fk_nccl_once, fk_nccl_load);
    if (why)
        *why = fk_nccl_ok ? "" : fk_nccl_why;
    return fk_nccl_ok ? &fk_nccl_fns : NULL;
}

ncclResult_t fk_nccl_settle(const fk_nccl *nc, ncclComm_t comm, ncclResult_t r)
{
    while (r == ncclInProgress) {
        if (nc->CommGetAsyncError(comm, &r) != ncclSuccess)
            return ncclInternalError;
        if (r == ncclInProgress)
            sched_yield();
    }
    return r;
}
