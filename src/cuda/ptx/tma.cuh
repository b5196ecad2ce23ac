/* ptx/tma.cuh - the async proxy: cp.async.bulk (tensor), prefetch.tensormap, createpolicy, fence.proxy.async. */
#ifndef FK_CUDA_PTX_TMA_CUH
#define FK_CUDA_PTX_TMA_CUH

#include "cuda/ptx/common.cuh"

FK_DEV void fk_tma_prefetch_desc(const void *tmap)
{
#ifdef FK_SM90_DEVICE
    asm volatile("prefetch.tensormap [%0];" ::"l"((uint64_t)tmap) : "memory");
#endif
}

/* 2-D tiled load of the box at (c0 = inner coordinate, c1 = outer) into
 * shared memory at dst; completion is counted in bytes on bar. */
FK_DEV void fk_tma_load_2d(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
#endif
}

/* 1-D tiled load of the box starting at element c0 (any index; elements
 * past the tensor's end read as zero) into shared memory at dst; completion is
 * counted in bytes on bar. */
FK_DEV void fk_tma_load_1d(uint32_t dst, const void *tmap, uint32_t bar, int c0)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2}], [%3];" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(c0), "r"(bar)
                 : "memory");
#endif
}

/* fk_tma_load_2d with an L2 cache hint (a policy from fk_l2_policy). */
FK_DEV void fk_tma_load_2d_hint(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1, uint64_t pol)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(c0), "r"(c1), "r"(bar), "l"(pol)
                 : "memory");
#endif
}

/* fk_tma_load_2d into the same shared-memory offset of every CTA of the
 * cluster in `mask` (bit r = CTA rank r); each destination CTA's barrier at
 * offset `bar` counts the bytes it received. */
FK_DEV void fk_tma_load_2d_mc(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1, uint16_t mask)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
                 : "memory");
#endif
}

/* The same with an L2 cache hint. */
FK_DEV void fk_tma_load_2d_mc(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1, uint16_t mask,
                              uint64_t pol)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;" ::"r"(dst),
                 "l"((uint64_t)tmap), "r"(c0), "r"(c1), "r"(bar), "h"(mask), "l"(pol)
                 : "memory");
#endif
}

/* Brings a 2-D box into L2 only (no shared memory, no completion). */
FK_DEV void fk_tma_prefetch_l2(const void *tmap, int c0, int c1)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"((uint64_t)tmap),
                 "r"(c0), "r"(c1)
                 : "memory");
#endif
}

/* L2 policies for the cache hints: evict first (data streamed once) or
 * evict last (data read by every CTA). */
FK_DEV uint64_t fk_l2_policy(bool evict_first)
{
    uint64_t pol = 0;
#ifdef FK_SM90_DEVICE
    if (evict_first)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    else
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#else
    (void)evict_first;
#endif
    return pol;
}

/* TMA tensor store of the box at (c0 = inner coordinate, c1 = outer) from
 * shared memory at src, in this thread's bulk group (fk_bulk_commit /
 * fk_bulk_wait*); elements outside the tensor are not written. */
FK_DEV void fk_tma_store_2d(const void *tmap, uint32_t src, int c0, int c1)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"((uint64_t)tmap),
                 "r"(src), "r"(c0), "r"(c1)
                 : "memory");
#endif
}

/* Orders this thread's generic-proxy shared-memory accesses with later
 * async-proxy (TMA / wgmma) accesses. */
FK_DEV void fk_fence_proxy_async(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/* Bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned)
 * from shared memory to global memory, tracked in this thread's bulk group;
 * commit closes the group; wait_read<N> waits until at most N groups still
 * read their shared source, wait<N> until at most N are incomplete. */
FK_DEV void fk_bulk_store(void *gdst, uint32_t ssrc, uint32_t bytes)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"((uint64_t)gdst), "r"(ssrc),
                 "r"(bytes)
                 : "memory");
#endif
}

/* Adds `bytes` (a multiple of 16) of fp32 at shared memory ssrc to global
 * memory at gdst (both 16-byte aligned) element by element, in L2, in this
 * thread's bulk group. The adds round to nearest even and flush subnormal
 * inputs and results to zero (the PTX ISA's cp.reduce.async.bulk .add.f32). */
FK_DEV void fk_bulk_reduce_add_f32(float *gdst, uint32_t ssrc, uint32_t bytes)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"((uint64_t)gdst),
                 "r"(ssrc), "r"(bytes)
                 : "memory");
#endif
}

FK_DEV void fk_bulk_commit(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

template <int N> FK_DEV void fk_bulk_wait_read(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
#endif
}

template <int N> FK_DEV void fk_bulk_wait(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
#endif
}

#endif
