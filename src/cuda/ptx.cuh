/* ptx.cuh - small named inline-PTX wrappers for the Hopper (sm_90a) GEMM: one
 * function per instruction (mbarrier, TMA bulk tensor copy, wgmma fp8 and
 * f16, fences, setmaxnreg, bulk stores). Bodies exist only in the sm_90a device pass
 * (FK_SM90_DEVICE); elsewhere they compile to nothing, so files that include
 * this header still build for sm_80 and for the host. */
#ifndef FK_CUDA_PTX_CUH
#define FK_CUDA_PTX_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FK_SM90_DEVICE 1
#endif

#define FK_DEV static __device__ __forceinline__

/* 32-bit shared-window address of a generic pointer into shared memory. */
FK_DEV uint32_t fk_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

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

/* ---------------------------------------------------------------- mbarrier */
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

/* Spins until the phase with the given parity has completed. */
FK_DEV void fk_mbar_wait(uint32_t bar, uint32_t parity)
{
#ifdef FK_SM90_DEVICE
    asm volatile("{\n\t"
                 ".reg .pred done;\n\t"
                 "FK_WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra FK_WAIT_%=;\n\t"
                 "}" ::"r"(bar),
                 "r"(parity)
                 : "memory");
#endif
}

/* --------------------------------------------------------------------- TMA */
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

FK_DEV void fk_st_shared_u32(uint32_t addr, uint32_t v)
{
#ifdef FK_SM90_DEVICE
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
#endif
}

/* ----------------------------------------------------------------- cluster */
/* This CTA's rank in its cluster. */
FK_DEV uint32_t fk_cluster_ctarank(void)
{
    uint32_t r = 0;
#ifdef FK_SM90_DEVICE
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
    return r;
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

/* Arrives on the barrier at shared offset `bar` of cluster CTA `rank`
 * (default .release.cta semantics: it only says this warp is done reading a
 * stage; H100: .release.cluster, a cluster-scope fence per call, made the
 * GEMM kernels 2-3x slower). */
FK_DEV void fk_mbar_arrive_cta(uint32_t bar, uint32_t rank)
{
#ifdef FK_SM90_DEVICE
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(rank));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
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

/* Stream-K hand-off (gemm_sm90.cu): a 64-bit store with release and a
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

/* Two fp32 -> packed bf16x2 / f16x2, round to nearest even (no flush to
 * zero; overflow to Inf for f16): lo in bits 0-15, hi in bits 16-31. Equal
 * to the docs/spec.md codecs except that a NaN comes out as the canonical NaN. */
FK_DEV uint32_t fk_cvt_bf16x2(float lo, float hi)
{
    uint32_t r = 0;
#ifdef FK_SM90_DEVICE
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    (void)lo, (void)hi;
#endif
    return r;
}

FK_DEV uint32_t fk_cvt_f16x2(float lo, float hi)
{
    uint32_t r = 0;
#ifdef FK_SM90_DEVICE
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    (void)lo, (void)hi;
#endif
    return r;
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

/* ------------------------------------------------------------------- wgmma */
FK_DEV void fk_wgmma_fence(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

FK_DEV void fk_wgmma_commit(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

template <int N> FK_DEV void fk_wgmma_wait(void)
{
#ifdef FK_SM90_DEVICE
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

/* Keeps the compiler from moving accesses of an accumulator register across
 * the asynchronous wgmma window. */
FK_DEV void fk_reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }

/* Shared-memory matrix descriptor for a K-major operand tile stored with the
 * 128-byte swizzle (rows of 128 bytes, 8-row atoms of 1024 bytes):
 * start address >> 4 in bits 0-13, leading byte offset (unused for this
 * layout: 1) in bits 16-29, stride byte offset 1024 >> 4 in bits 32-45,
 * base offset 0 (tiles are 1024-aligned) and layout 1 (128B) in bits 62-63.
 * Stepping along K inside the swizzle atom adds bytes to the start address. */
FK_DEV uint64_t fk_wgmma_desc_sw128(uint32_t smem_addr)
{
    uint64_t d = (uint64_t)((smem_addr & 0x3FFFFu) >> 4);
    d |= (uint64_t)1u << 16;
    d |= (uint64_t)(1024u >> 4) << 32;
    d |= (uint64_t)1u << 62;
    return d;
}

/* wgmma.mma_async m64nNk32, fp32 accumulators, fp8 A and B from shared memory
 * (K-major). scale_d = 0 overwrites d, 1 accumulates into it. The operand
 * lists are spelled out for N = 64, 128, 192 and 256 (N / 2 accumulators). */
#define FK_R8(i) "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                 "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

#ifdef FK_SM90_DEVICE
#define FK_WGMMA_BODY_32(KTY, TAIL)                                                                     \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n64" KTY " "                          \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "     \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, " \
                 "%31}, %32, %33, p, 1, 1" TAIL ";\n}\n"                                               \
                 : FK_R8(0), FK_R8(8), FK_R8(16), FK_R8(24)                                     \
                 : "l"(da), "l"(db), "r"(sd))
#else
#define FK_WGMMA_BODY_32(KTY, TAIL) ((void)da, (void)db, (void)sd, (void)d)
#endif

/* The N = 128 form: 64 accumulators, %64/%65 descriptors, %66 scale-d. */
#ifdef FK_SM90_DEVICE
#define FK_WGMMA_BODY_64(KTY, TAIL)                                                                    \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned.m64n128" KTY " "                        \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "    \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "     \
                 "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "     \
                 "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "     \
                 "%58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1" TAIL ";\n}\n"                      \
                 : FK_R8(0), FK_R8(8), FK_R8(16), FK_R8(24), FK_R8(32), FK_R8(40), FK_R8(48), \
                   FK_R8(56)                                                                   \
                 : "l"(da), "l"(db), "r"(sd))
#else
#define FK_WGMMA_BODY_64(KTY, TAIL) ((void)da, (void)db, (void)sd, (void)d)
#endif

/* The N = 192 form (96 accumulators, %96/%97 descriptors, %98 scale-d) and the
 * N = 256 form (128 accumulators, %128/%129, %130). */
#ifdef FK_SM90_DEVICE
#define FK_WGMMA_BODY_96(KTY, TAIL)                                                                       \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n192" KTY " "                             \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "                             \
                 "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "                    \
                 "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "                    \
                 "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                    \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "                    \
                 "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "                    \
                 "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "                    \
                 "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1" TAIL ";\n}\n"\
                 : FK_R8(0), FK_R8(8), FK_R8(16), FK_R8(24), FK_R8(32), FK_R8(40), FK_R8(48), FK_R8(56),\
                   FK_R8(64), FK_R8(72), FK_R8(80), FK_R8(88)                                      \
                 : "l"(da), "l"(db), "r"(sd))
#else
#define FK_WGMMA_BODY_96(KTY, TAIL) ((void)da, (void)db, (void)sd, (void)d)
#endif

#ifdef FK_SM90_DEVICE
#define FK_WGMMA_BODY_128(KTY, TAIL)                                                                      \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                     \
                 "wgmma.mma_async.sync.aligned.m64n256" KTY " "                             \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "                             \
                 "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "                    \
                 "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "                    \
                 "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                    \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "                    \
                 "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "                    \
                 "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "                    \
                 "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                    \
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "            \
                 "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "        \
                 "%120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1" TAIL ";\n}\n"      \
                 : FK_R8(0), FK_R8(8), FK_R8(16), FK_R8(24), FK_R8(32), FK_R8(40), FK_R8(48), FK_R8(56),\
                   FK_R8(64), FK_R8(72), FK_R8(80), FK_R8(88), FK_R8(96), FK_R8(104), FK_R8(112), FK_R8(120)\
                 : "l"(da), "l"(db), "r"(sd))
#else
#define FK_WGMMA_BODY_128(KTY, TAIL) ((void)da, (void)db, (void)sd, (void)d)
#endif

/* AB: 0 = e4m3 x e4m3, 1 = e4m3 x e5m2, 2 = e5m2 x e4m3, 3 = e5m2 x e5m2
 * (m64nNk32); 4 = f16 x f16 (m64nNk16, both K-major: transpose immediates 0),
 * the precise fp32-output path on fp16 copies of the fp8 operands
 * (gemm_f16.cu): a k16 step of f16 spans the same 32 bytes of a swizzled
 * row as a k32 step of fp8, so the descriptors advance alike. */
template <int N, int AB> struct fk_wgmma;

#define FK_WGMMA_DEF_K(N, NREG, AB, KTY, TAIL)                                                  \
    template <> struct fk_wgmma<N, AB> {                                                        \
        static __device__ __forceinline__ void mma(float *d, uint64_t da, uint64_t db, int sd)  \
        {                                                                                       \
            FK_WGMMA_BODY_##NREG(KTY, TAIL);                                                    \
        }                                                                                       \
    };
#define FK_WGMMA_DEF(N, NREG, AB, TY) FK_WGMMA_DEF_K(N, NREG, AB, "k32.f32." TY, "")

FK_WGMMA_DEF(64, 32, 0, "e4m3.e4m3")
FK_WGMMA_DEF(64, 32, 1, "e4m3.e5m2")
FK_WGMMA_DEF(64, 32, 2, "e5m2.e4m3")
FK_WGMMA_DEF(64, 32, 3, "e5m2.e5m2")
FK_WGMMA_DEF(128, 64, 0, "e4m3.e4m3")
FK_WGMMA_DEF(128, 64, 1, "e4m3.e5m2")
FK_WGMMA_DEF(128, 64, 2, "e5m2.e4m3")
FK_WGMMA_DEF(128, 64, 3, "e5m2.e5m2")
FK_WGMMA_DEF(192, 96, 0, "e4m3.e4m3")
FK_WGMMA_DEF(192, 96, 1, "e4m3.e5m2")
FK_WGMMA_DEF(192, 96, 2, "e5m2.e4m3")
FK_WGMMA_DEF(192, 96, 3, "e5m2.e5m2")
FK_WGMMA_DEF(256, 128, 0, "e4m3.e4m3")
FK_WGMMA_DEF(256, 128, 1, "e4m3.e5m2")
FK_WGMMA_DEF(256, 128, 2, "e5m2.e4m3")
FK_WGMMA_DEF(256, 128, 3, "e5m2.e5m2")
FK_WGMMA_DEF_K(64, 32, 4, "k16.f32.f16.f16", ", 0, 0")
FK_WGMMA_DEF_K(128, 64, 4, "k16.f32.f16.f16", ", 0, 0")
FK_WGMMA_DEF_K(192, 96, 4, "k16.f32.f16.f16", ", 0, 0")

#undef FK_WGMMA_DEF
#undef FK_WGMMA_DEF_K

#endif
