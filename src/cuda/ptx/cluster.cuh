/* ptx/cluster.cuh - thread-block clusters: mapa, distributed-shared-memory loads, barrier.cluster. */
#ifndef FK_CUDA_PTX_CLUSTER_CUH
#define FK_CUDA_PTX_CLUSTER_CUH

#include "cuda/ptx/common.cuh"

/* Address of the same shared-memory location in cluster CTA `rank`. */
FK_DEV uint32_t fk_mapa(uint32_t addr, uint32_t rank)
{
    uint32_t r = 0;
#ifdef FK_SM90_DEVICE
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
#else
    (void)addr, (void)rank;
#endif
    return r;
}

/* 16-byte load from distributed shared memory (an address from fk_mapa). */
FK_DEV float4 fk_ld_dsmem4(uint32_t addr)
{
    float4 v = {0.0f, 0.0f, 0.0f, 0.0f};
#ifdef FK_SM90_DEVICE
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(addr)
                 : "memory");
#else
    (void)addr;
#endif
    return v;
}

/* Every thread of every CTA of the cluster meets here (release / acquire). */
FK_DEV void fk_cluster_barrier(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

/* The same without the release / acquire fences: for the last barrier of a
 * kernel, which only keeps every CTA's shared memory alive until its peers'
 * distributed-shared-memory loads (whose values they have used) are done. */
FK_DEV void fk_cluster_barrier_relaxed(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\t"
                 "barrier.cluster.wait.aligned;" ::: "memory");
#endif
}

#endif
