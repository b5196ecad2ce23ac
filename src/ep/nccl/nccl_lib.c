/* nccl_lib.c - loads libnccl.so.2 with dlopen once per process and looks up
 * the functions of nccl_lib.h; never unloads it. fk_dl_bind, the lookup, also
 * serves NCCL EP's loader (ncclep.c). */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include "ep/nccl/nccl_lib.h"

static pthread_once_t fk_nccl_once = PTHREAD_ONCE_INIT;
static fk_nccl fk_nccl_fns;
static int fk_nccl_ok;
static char fk_nccl_why[512];

int fk_dl_bind(void *lib, const fk_dl_fn *fns, int n, const char *lib_name, const char *need, char *why,
               size_t why_len)
{
    for (int i = 0; i < n; i++) {
        *fns[i].slot = dlsym(lib, fns[i].name);
        if (!*fns[i].slot) {
            snprintf(why, why_len, "%s has no %s (%s)", lib_name, fns[i].name, need);
            return 0;
        }
    }
    return 1;
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
    const fk_dl_fn fns[] = {
        {"ncclGetVersion", (void **)&f->GetVersion},
        {"ncclGetErrorString", (void **)&f->GetErrorString},
        {"ncclGetLastError", (void **)&f->GetLastError},
        {"ncclCommCount", (void **)&f->CommCount},
        {"ncclCommUserRank", (void **)&f->CommUserRank},
        {"ncclCommCuDevice", (void **)&f->CommCuDevice},
        {"ncclCommGetAsyncError", (void **)&f->CommGetAsyncError},
        {"ncclGroupStart", (void **)&f->GroupStart},
        {"ncclGroupEnd", (void **)&f->GroupEnd},
        {"ncclSend", (void **)&f->Send},
        {"ncclRecv", (void **)&f->Recv},
        {"ncclAllReduce", (void **)&f->AllReduce},
    };
    if (!fk_dl_bind(lib, fns, (int)(sizeof fns / sizeof fns[0]), "libnccl.so.2",
                    "a point-to-point capable NCCL, 2.7 or newer, is needed", fk_nccl_why, sizeof fk_nccl_why))
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
