/* ptx/wgmma.cuh - warpgroup MMA: fence / commit / wait, smem descriptors, wgmma.mma_async fp8 and f16. */
#ifndef FK_CUDA_PTX_WGMMA_CUH
#define FK_CUDA_PTX_WGMMA_CUH

#include "cuda/ptx/common.cuh"

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
 * lists are spelled out for N = 32, 64, 128, 192 and 256 (N / 2 accumulators). */
#define FK_R8(i) "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                 "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

/* The N = 32 form: 16 accumulators, %16/%17 descriptors, %18 scale-d (the
 * small-M kernel, gemm/sm90/small.cu). */
#ifdef FK_SM90_DEVICE
#define FK_WGMMA_BODY_16(KTY, TAIL)                                                                     \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n32" KTY " "                          \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "   \
                 "%15}, %16, %17, p, 1, 1" TAIL ";\n}\n"                                        \
                 : FK_R8(0), FK_R8(8)                                                           \
                 : "l"(da), "l"(db), "r"(sd))
#else
#define FK_WGMMA_BODY_16(KTY, TAIL) ((void)da, (void)db, (void)sd, (void)d)
#endif

/* The N = 64 form: 32 accumulators, %32/%33 descriptors, %34 scale-d. */
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
 * (gemm/sm90/f16_widen.cu): a k16 step of f16 spans the same 32 bytes of a swizzled
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

FK_WGMMA_DEF(32, 16, 0, "e4m3.e4m3")
FK_WGMMA_DEF(32, 16, 1, "e4m3.e5m2")
FK_WGMMA_DEF(32, 16, 2, "e5m2.e4m3")
FK_WGMMA_DEF(32, 16, 3, "e5m2.e5m2")
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
