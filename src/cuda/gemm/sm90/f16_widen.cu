/* gemm/sm90/f16_widen.cu - the precise fp32-output path of the CUDA GEMM (docs/spec.md 3: rel <=
 * 1e-5 up to K = 16384), which Hopper's fp8 wgmma cannot reach (its internal
 * sums keep ~14 bits; bench/results/perf-gemm-log-2026-11.md). e4m3 and e5m2 values are exactly
 * representable in fp16, so A and B are widened into the caller's workspace
 * (fp16, row stride K) and the general kernel runs its f16 x f16 variants
 * (FK_SM90_F16: exact products, fp32 accumulation, promotion every 64 of K). Here:
 * which jobs take the path, the workspace it needs, and the widening kernel. */
#include <cuda_fp8.h>
#include <stdint.h>
#include "cuda/cuda_state.h"

/* Whether the job runs on fp16 copies: fp32 output without fast_accum. */
int fk_f16_path(const fk_gemm_job *job)
{
    return job->d_type == FP8KIT_F32 && !job->desc.fast_accum;
}

/* Byte offset of B's copy in the workspace (A's copy at 0, 256-aligned) and
 * the total the job needs (0 when it does not take the path or K == 0). */
size_t fk_f16_b_offset(const fk_gemm_job *job)
{
    return ((size_t)job->m * (size_t)job->k * 2 + 255) & ~(size_t)255;
}

size_t fk_f16_workspace_bytes(const fk_gemm_job *job)
{
    const fp8kit_scale_mode sa = job->desc.scale_a;
    if (!fk_f16_path(job) || sa == FP8KIT_SCALE_BLOCK || sa == FP8KIT_SCALE_MX || job->m == 0 || job->n == 0 ||
        job->k == 0)
        return 0; /* block / MX: refused by the plan */
    return fk_f16_b_offset(job) + (size_t)job->n * (size_t)job->k * 2;
}

/* The operands the f16 variants read: the fp16 copies in the call's workspace
 * (row stride 2K bytes; checked here, before anything is written: size and
 * 16-byte alignment). */
fp8kit_status fk_f16_operands(fp8kit_ctx *ctx, const fk_gemm_job *job, const void **opa, const void **opb,
                              uint64_t *kbytes, uint64_t *lda, uint64_t *ldb)
{
    const size_t need = fk_f16_workspace_bytes(job);
    if (need > job->workspace_bytes || (need && !job->workspace))
        return fk_fail(ctx, FP8KIT_ERR_WORKSPACE_TOO_SMALL,
                       "cuda gemm: precise fp32 output needs %zu bytes of workspace, got %zu", need,
                       job->workspace ? job->workspace_bytes : (size_t)0);
    if (need && ((uintptr_t)job->workspace & 15u))
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED,
                       "cuda gemm: the workspace (fp16 copies of A and B) must be 16-byte aligned");
    *opa = job->workspace;
    *opb = (const unsigned char *)job->workspace + fk_f16_b_offset(job);
    *kbytes = *lda = *ldb = 2 * (uint64_t)job->k;
    return FP8KIT_OK;
}

/* Widens 16 fp8 codes (one 16-byte unit) into 16 fp16 values. e5m2 is the
 * upper byte of fp16; e4m3 goes through the (exact) hardware conversion. */
static __device__ __forceinline__ void fk_widen16(uint4 in, int e5, uint4 *out)
{
    const uint32_t w[4] = {in.x, in.y, in.z, in.w};
    uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t pair = (w[i] >> (16 * h)) & 0xFFFFu; /* codes 2i+h's two bytes */
            if (e5) {
                o[2 * i + h] = ((pair & 0xFFu) << 8) | ((pair & 0xFF00u) << 16);
            } else {
                const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)pair, __NV_E4M3);
                o[2 * i + h] = (uint32_t)r.x | ((uint32_t)r.y << 16);
            }
        }
    }
    out[0] = make_uint4(o[0], o[1], o[2], o[3]);
    out[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

/* One thread per 16-byte unit of A, then of B (grid-stride): unit i of an
 * operand is row i / kv, codes 16 * (i % kv) .. + 15 (kv = K / 16). */
__global__ void fk_f16_widen_kernel(const unsigned char *a, int64_t lda, int e5a, const unsigned char *b,
                                    int64_t ldb, int e5b, int64_t m, int64_t n, int64_t kv, uint16_t *a16,
                                    uint16_t *b16)
{
    const int64_t ua = m * kv, total = ua + n * kv;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int is_b = i >= ua;
        const int64_t j = is_b ? i - ua : i;
        const int64_t r = j / kv, c = j - r * kv;
        const unsigned char *src = is_b ? b + r * ldb : a + r * lda;
        uint16_t *dst = (is_b ? b16 : a16) + (r * kv + c) * 16;
        const uint4 v = __ldg((const uint4 *)src + c);
        fk_widen16(v, is_b ? e5b : e5a, (uint4 *)dst);
    }
}

/* Writes the fp16 copies of A and B into ws (fk_f16_workspace_bytes of it;
 * the caller checked size and alignment) on the stream. */
fp8kit_status fk_f16_widen(fp8kit_ctx *ctx, const fk_gemm_job *job, void *ws, cudaStream_t st)
{
    const fk_cuda_state *cs = fk_cuda(ctx);
    const int64_t kv = job->k / 16, units = (job->m + job->n) * kv;
    if (units == 0)
        return FP8KIT_OK;
    const int threads = 256;
    int64_t blocks = (units + threads - 1) / threads;
    const int64_t cap = (int64_t)(cs && cs->sm_count > 0 ? cs->sm_count : 132) * 16;
    if (blocks > cap)
        blocks = cap;
    unsigned char *w = (unsigned char *)ws;
    fk_f16_widen_kernel<<<(unsigned)blocks, threads, 0, st>>>(
        (const unsigned char *)job->a, job->lda, job->a_type == FP8KIT_E5M2, (const unsigned char *)job->b, job->ldb,
        job->b_type == FP8KIT_E5M2, job->m, job->n, kv, (uint16_t *)w, (uint16_t *)(w + fk_f16_b_offset(job)));
    FK_CUDA_LAUNCH_CHECK(ctx);
    return FP8KIT_OK;
}
