/* ptx/mem.cuh - ordinary loads and stores (st.shared, ld.shared.v4, release / acquire) and the sm_80 cp.async copies and groups. */
#ifndef FK_CUDA_PTX_MEM_CUH
#define FK_CUDA_PTX_MEM_CUH

#include "cuda/ptx/common.cuh"

FK_DEV void fk_st_shared_u32(uint32_t addr, uint32_t v)
{
#ifdef FK_SM90_DEVICE
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
#endif
}

/* 16 bytes from shared memory (one ld.shared.v4.u32). */
FK_DEV uint4 fk_ld_shared_v4(uint32_t addr)
{
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
#ifdef FK_SM90_DEVICE
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
#endif
    return v;
}

/* Stream-K hand-off (gemm/sm90/kernels_dense.cu): a 64-bit store with release and a
 * load with acquire semantics at GPU scope. */
FK_DEV void fk_st_release_u64(unsigned long long *p, uint64_t v)
{
#ifdef FK_SM90_DEVICE
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#endif
}
FK_DEV uint64_t fk_ld_acquire_u64(const unsigned long long *p)
{
    uint64_t v = 0;
#ifdef FK_SM90_DEVICE
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
#endif
    return v;
}

/* ------------------------------------------------------ cp.async (sm_80+)
 * Asynchronous global -> shared copies, tracked per thread: fk_cp_async4
 * copies 4 bytes through L1 (.ca); fk_cp_async16 16 bytes past L1 (.cg),
 * the bytes past src_bytes zero-filled (src_bytes 0: nothing is read; dst
 * and src 16-byte aligned). commit closes a group, wait<N> waits until at
 * most N groups are pending, wait_all until none. */
FK_DEV void fk_cp_async4(uint32_t dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}

FK_DEV void fk_cp_async16(void *dst, const void *src, int src_bytes)
{
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes) : "memory");
}

FK_DEV void fk_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N> FK_DEV void fk_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

FK_DEV void fk_cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

#endif
