/* ptx/sync.cuh - CTA-level synchronization and control: griddepcontrol (PDL), named barriers, setmaxnreg. */
#ifndef FK_CUDA_PTX_SYNC_CUH
#define FK_CUDA_PTX_SYNC_CUH

#include "cuda/ptx/common.cuh"

/* ------------------------------------------------- programmatic dependent launch
 * fk_grid_dep_wait: wait until the grids this one depends on have completed
 * and their writes are visible (a no-op for a grid launched without the
 * programmatic-serialization attribute); fk_grid_dep_launch: let the next
 * grid of the stream start as SMs free up. */
FK_DEV void fk_grid_dep_wait(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

FK_DEV void fk_grid_dep_launch(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* ---------------------------------------------------------- named barriers */
/* Named barrier `id` over `n` threads (whole warps). */
FK_DEV void fk_named_bar_sync(int id, int n)
{
#ifdef FK_SM90_DEVICE
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
#endif
}

/* Arrives on named barrier `id` (of `n` threads) without waiting. */
FK_DEV void fk_named_bar_arrive(int id, int n)
{
#ifdef FK_SM90_DEVICE
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
#endif
}

/* ------------------------------------------------------------ setmaxnreg */
template <int N> FK_DEV void fk_setmaxnreg_inc(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

template <int N> FK_DEV void fk_setmaxnreg_dec(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

#endif
