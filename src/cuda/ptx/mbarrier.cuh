/* ptx/mbarrier.cuh - shared-memory mbarriers: init and its fence, arrive (local, expect-tx, remote, after cp.async), wait. */
#ifndef FK_CUDA_PTX_MBARRIER_CUH
#define FK_CUDA_PTX_MBARRIER_CUH

#include "cuda/ptx/cluster.cuh"
#include "cuda/ptx/common.cuh"

FK_DEV void fk_mbar_init(uint32_t bar, uint32_t count)
{
#ifdef FK_SM90_DEVICE
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
#endif
}

/* Makes barrier initialisation visible to the async proxy (TMA). */
FK_DEV void fk_fence_mbar_init(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

FK_DEV void fk_mbar_arrive(uint32_t bar)
{
#ifdef FK_SM90_DEVICE
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#endif
}

FK_DEV void fk_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
#ifdef FK_SM90_DEVICE
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
#endif
}

/* Arrives on the barrier at shared offset `bar` of cluster CTA `rank`
 * (default .release.cta semantics: it only says this warp is done reading a
 * stage; H100: .release.cluster, a cluster-scope fence per call, made the
 * GEMM kernels 2-3x slower). */
FK_DEV void fk_mbar_arrive_cta(uint32_t bar, uint32_t rank)
{
#ifdef FK_SM90_DEVICE
    const uint32_t remote = fk_mapa(bar, rank);
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
#endif
}

/* Arrives on the barrier once every cp.async this thread issued before has
 * landed (.noinc: the arrival counts against the barrier's expected count). */
FK_DEV void fk_cp_async_mbar_arrive(uint32_t bar)
{
#ifdef FK_SM90_DEVICE
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
#endif
}

/* Waits until the phase with the given parity has completed. The suspend
 * time hint (10 ms, CUTLASS's value) lets a warp whose try_wait finds the
 * phase open sleep until the barrier completes (NANOSLEEP.SYNCS) instead of
 * re-issuing the wait, which takes issue slots from the warps it shares a
 * scheduler with. */
FK_DEV void fk_mbar_wait(uint32_t bar, uint32_t parity)
{
#ifdef FK_SM90_DEVICE
    asm volatile("{\n\t"
                 ".reg .pred done;\n\t"
                 "FK_WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1, %2;\n\t"
                 "@!done bra FK_WAIT_%=;\n\t"
                 "}" ::"r"(bar),
                 "r"(parity), "r"(10000000u)
                 : "memory");
#endif
}

#endif
