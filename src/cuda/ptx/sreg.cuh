/* ptx/sreg.cuh - special-register reads: %cluster_ctarank, %globaltimer. */
#ifndef FK_CUDA_PTX_SREG_CUH
#define FK_CUDA_PTX_SREG_CUH

#include "cuda/ptx/common.cuh"

/* This CTA's rank in its cluster. */
FK_DEV uint32_t fk_cluster_ctarank(void)
{
    uint32_t r = 0;
#ifdef FK_SM90_DEVICE
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
    return r;
}

/* The global nanosecond timer (FK_SMALL_TRACE stamps in gemm/sm90/small.cu). */
FK_DEV unsigned long long fk_globaltimer(void)
{
    unsigned long long t = 0;
#ifdef FK_SM90_DEVICE
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
#endif
    return t;
}

#endif
