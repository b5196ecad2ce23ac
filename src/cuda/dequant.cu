/* dequant.cu - CUDA dequantization y = decode(q) * S rounded to y's dtype
 * (f32/f16/bf16, RNE), for every scheme and scale layout of docs/spec.md section 2
 * (an infinite fp32 S marks a NaN group, as on the CPU: fk_deq_scale_f32).
 * Untransposed cases walk y in chunks of 8 elements along a row (every group
 * is a multiple of 8 wide, so a chunk has one scale); mx axis -2 (q stored
 * (E, C, R)) transposes through a shared-memory tile of 64 q rows x 128 bytes.
 * Codecs are the shared ones of src/format. */
#include "cuda/quant_common.cuh"

/* Output element stores: 8 fp32 values -> dtype DT at p (vec: aligned, n == 8). */
template <int DT> __device__ __forceinline__ void fk_store8(void *p, const float *v, int n, bool vec)
{
    if constexpr (DT == FP8KIT_F32) {
        if (vec && n == 8) {
            ((uint4 *)p)[0] = make_uint4(fk_f2u(v[0]), fk_f2u(v[1]), fk_f2u(v[2]), fk_f2u(v[3]));
            ((uint4 *)p)[1] = make_uint4(fk_f2u(v[4]), fk_f2u(v[5]), fk_f2u(v[6]), fk_f2u(v[7]));
            return;
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (i < n)
                ((float *)p)[i] = v[i];
    } else {
        uint16_t h[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            h[i] = DT == FP8KIT_BF16 ? fk_f32_to_bf16(v[i]) : fk_f32_to_f16(v[i]);
        if (vec && n == 8) {
            *(uint4 *)p = make_uint4(h[0] | ((uint32_t)h[1] << 16), h[2] | ((uint32_t)h[3] << 16),
                                     h[4] | ((uint32_t)h[5] << 16), h[6] | ((uint32_t)h[7] << 16));
            return;
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (i < n)
                ((uint16_t *)p)[i] = h[i];
    }
}

/* Loads n (<= 8) fp8 codes (vec: 8-byte aligned and n == 8). */
__device__ __forceinline__ uint2 fk_load_codes8(const uint8_t *p, int n, bool vec)
{
    if (vec && n == 8)
        return *(const uint2 *)p;
    uint32_t w[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 8; i++)
        if (i < n)
            w[i >> 2] |= (uint32_t)p[i] << (8 * (i & 3));
    return make_uint2(w[0], w[1]);
}

/* decode(q) * S with the NaN a result carries fixed (fk_deq_mul,
 * format/scale.h: the CPU backend's rule too; the GPU would otherwise return
 * its canonical 0x7FFFFFFF). */
#define fk_dq_mul fk_deq_mul

struct fk_dq_args {
    const uint8_t *q;
    int64_t qse, qsr;
    void *y;
    int64_t yse, ysr;
    const void *scale;
    uint32_t row0, nchunks;
    fk_divmod dncp, dR;
    int64_t R, C;
    int scheme, layout, vq, vy;
    int64_t srows, scols; /* stored scale matrix per expert (padding included) */
};

/* The dequantization multiplier of element (e, r, c). */
__device__ __forceinline__ float fk_dq_scale(const fk_dq_args &a, int64_t e, int64_t r, int64_t c)
{
    const float *sf = (const float *)a.scale;
    const int64_t per = a.srows * a.scols;
    switch (a.scheme) {
    case FP8KIT_SCHEME_TENSOR: return sf[0];
    case FP8KIT_SCHEME_ROW: return sf[e * a.R + r];
    case FP8KIT_SCHEME_BLOCK1X128:
        return a.layout == FP8KIT_LAYOUT_MN_MAJOR ? sf[e * per + (c >> 7) * a.scols + r]
                                                  : sf[e * per + r * a.scols + (c >> 7)];
    case FP8KIT_SCHEME_BLOCK128X128:
        return a.layout == FP8KIT_LAYOUT_MN_MAJOR ? sf[e * per + (c >> 7) * a.scols + (r >> 7)]
                                                  : sf[e * per + (r >> 7) * a.scols + (c >> 7)];
    default: {
        const uint8_t *s8 = (const uint8_t *)a.scale + e * per;
        return fk_e8m0_to_f32(a.layout == FP8KIT_LAYOUT_BLOCKED ? s8[fk_blocked_offset(r, c >> 5, a.scols)]
                                                                : s8[r * a.scols + (c >> 5)]);
    }
    }
}

template <int E5, int DT> __global__ void __launch_bounds__(FK_THREADS) fk_dq_kernel(const fk_dq_args a)
{
    constexpr int YS = DT == FP8KIT_F32 ? 4 : 2;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const uint32_t idx = blockIdx.x * (FK_THREADS * 2u) + j * FK_THREADS + threadIdx.x;
        if (idx >= a.nchunks)
            return;
        const uint32_t gl = fk_div(a.dncp, idx), k = idx - gl * a.dncp.d, g = a.row0 + gl;
        const uint32_t e = fk_div(a.dR, g), r = g - e * a.dR.d;
        const int64_t c = (int64_t)k * 8;
        const int n = (int)(a.C - c < 8 ? a.C - c : 8);
        const uint2 w = fk_load_codes8(a.q + (int64_t)e * a.qse + (int64_t)r * a.qsr + c, n, a.vq);
        const float S = fk_deq_scale_f32(fk_dq_scale(a, e, r, c)); /* an Inf fp32 S: a NaN group */
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[i] = fk_dq_mul(fk_fp8_to_f32((uint8_t)((i < 4 ? w.x : w.y) >> (8 * (i & 3))), E5), S);
        fk_store8<DT>((char *)a.y + ((int64_t)e * a.yse + (int64_t)r * a.ysr + c) * YS, v, n, a.vy);
    }
}

/* mx axis -2: q (E, C, R) and scales (E, C, R/32) -> y (E, R, C). One CTA per
 * tile of 64 q rows (columns c of y) x 128 q bytes (rows r of y). */
#define FK_DQT_C 64
#define FK_DQT_R 128
#define FK_DQT_PITCH (FK_DQT_R + 16)

template <int E5, int DT> __global__ void __launch_bounds__(FK_THREADS) fk_dqt_kernel(const fk_dq_args a)
{
    constexpr int YS = DT == FP8KIT_F32 ? 4 : 2;
    __shared__ __align__(16) uint8_t qs[FK_DQT_C * FK_DQT_PITCH];
    __shared__ float ss[FK_DQT_C * 4];
    const int64_t nrt = (a.R + FK_DQT_R - 1) / FK_DQT_R;
    const uint32_t e = blockIdx.z;
    const int64_t r0 = (int64_t)(blockIdx.x % nrt) * FK_DQT_R, c0 = (int64_t)blockIdx.y * FK_DQT_C;
    const uint8_t *qe = a.q + (int64_t)e * a.qse;
    /* load the q tile: 64 rows x 8 chunks of 16 bytes (R % 32 == 0: whole chunks) */
    for (int p = threadIdx.x; p < FK_DQT_C * 8; p += FK_THREADS) {
        const int cl = p / 8, k = p % 8;
        const int64_t c = c0 + cl, r = r0 + 16 * k;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (c < a.C && r < a.R) {
            const uint8_t *src = qe + c * a.qsr + r;
            if (a.vq) {
                v = *(const uint4 *)src;
            } else {
                uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
                for (int i = 0; i < 16; i++)
                    w[i >> 2] |= (uint32_t)src[i] << (8 * (i & 3));
                v = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
        *(uint4 *)(qs + cl * FK_DQT_PITCH + 16 * k) = v;
    }
    for (int p = threadIdx.x; p < FK_DQT_C * 4; p += FK_THREADS) {
        const int cl = p / 4, b = p % 4;
        const int64_t c = c0 + cl, r = r0 + 32 * b;
        ss[p] = c < a.C && r < a.R ? fk_dq_scale(a, e, c, r) : 0.0f;
    }
    __syncthreads();
    char *ye = (char *)a.y + (int64_t)e * a.yse * YS;
    for (int p = threadIdx.x; p < FK_DQT_R * (FK_DQT_C / 8); p += FK_THREADS) {
        const int rl = p / (FK_DQT_C / 8), cg = (p % (FK_DQT_C / 8)) * 8;
        const int64_t r = r0 + rl, c = c0 + cg;
        if (r >= a.R || c >= a.C)
            continue;
        const int n = (int)(a.C - c < 8 ? a.C - c : 8);
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[i] = fk_dq_mul(fk_fp8_to_f32(qs[(cg + i) * FK_DQT_PITCH + rl], E5), ss[(cg + i) * 4 + rl / 32]);
        fk_store8<DT>(ye + (r * a.ysr + c) * YS, v, n, a.vy);
    }
}

/* ------------------------------------------------------------------ host */

typedef void (*fk_dq_fn)(const fk_dq_args);

template <int E5> static fk_dq_fn fk_dq_pick(fp8kit_dtype t, bool transposed)
{
    switch (t) {
    case FP8KIT_F32: return transposed ? fk_dqt_kernel<E5, FP8KIT_F32> : fk_dq_kernel<E5, FP8KIT_F32>;
    case FP8KIT_F16: return transposed ? fk_dqt_kernel<E5, FP8KIT_F16> : fk_dq_kernel<E5, FP8KIT_F16>;
    default: return transposed ? fk_dqt_kernel<E5, FP8KIT_BF16> : fk_dq_kernel<E5, FP8KIT_BF16>;
    }
}

/* mx axis -2 (fk_dqt_kernel): a grid of ceil(R/128) x ceil(C/64) x E
 * tiles, within the grid's limits (2^31 - 1, 65535, 65535): C <= 65535 * 64
 * columns and E <= 65535 leading rows. Otherwise (fk_dq_kernel) rows
 * (e * R + r) and chunks of 8 per row are 32-bit in the kernel and a
 * launch covers at most 2^30 chunks: rows < 2^32, C <= 2^29 elements. */
extern "C" fp8kit_status fk_cuda_dequant_can_run(fp8kit_ctx *ctx, const fk_quant_job *job)
{
    const fk_mat &y = job->x;
    if (job->desc.scheme == FP8KIT_SCHEME_MX && job->desc.axis == -2) {
        const int64_t nrt = fk_ceil_div(y.R, FK_DQT_R), nct = fk_ceil_div(y.C, FK_DQT_C);
        if (nrt > ((int64_t)1 << 31) - 1 || nct > 65535 || y.E > 65535)
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                           "cuda dequantize mx axis -2: y (%lld, %lld, %lld) exceeds the kernel's grid (at most "
                           "65535 leading rows, %lld columns and 2^31 - 1 blocks of %d rows)", (long long)y.E,
                           (long long)y.R, (long long)y.C, (long long)65535 * FK_DQT_C, FK_DQT_R);
        return FP8KIT_OK;
    }
    return fk_cuda_rows_can_run(ctx, "cuda dequantize", &y);
}

extern "C" fp8kit_status fk_cuda_dequant(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s)
{
    const fk_mat &y = job->x, &q = job->q;
    const bool tr = job->desc.scheme == FP8KIT_SCHEME_MX && job->desc.axis == -2;
    const int64_t ys = (int64_t)fk_dtype_bytes(y.dtype);
    fp8kit_status st = fk_cuda_dequant_can_run(ctx, job);
    if (st)
        return st;
    fk_dq_args a;
    memset(&a, 0, sizeof a);
    a.q = (const uint8_t *)q.data;
    a.qse = q.se;
    a.qsr = q.sr;
    a.y = y.data;
    a.yse = y.se;
    a.ysr = y.sr;
    a.scale = job->scale;
    a.R = y.R;
    a.C = y.C;
    a.scheme = job->desc.scheme;
    a.layout = job->desc.scale_layout;
    a.srows = job->scale_rows;
    a.scols = job->scale_cols;
    a.vy = fk_aligned(y.data, 16) && (y.sr * ys) % 16 == 0 && (y.se * ys) % 16 == 0;
    fk_dq_fn k = job->e5m2 ? fk_dq_pick<1>(y.dtype, tr) : fk_dq_pick<0>(y.dtype, tr);
    if (tr) {
        a.vq = fk_aligned(q.data, 16) && q.sr % 16 == 0 && q.se % 16 == 0;
        const int64_t nrt = fk_ceil_div(y.R, FK_DQT_R), nct = fk_ceil_div(y.C, FK_DQT_C);
        k<<<dim3((unsigned)nrt, (unsigned)nct, (unsigned)y.E), FK_THREADS, 0, s>>>(a);
        FK_CUDA_LAUNCH_CHECK(ctx);
        return FP8KIT_OK;
    }
    a.vq = fk_aligned(q.data, 8) && q.sr % 8 == 0 && q.se % 8 == 0;
    const int64_t ncp = fk_ceil_div(y.C, 8), rows = y.E * y.R;
    a.dncp = fk_divmod_make((uint32_t)ncp);
    a.dR = fk_divmod_make((uint32_t)y.R);
    const int64_t per = ((int64_t)1 << 30) / ncp;
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        a.row0 = (uint32_t)r0;
        a.nchunks = (uint32_t)(nr * ncp);
        k<<<(unsigned)fk_ceil_div(nr * ncp, FK_THREADS * 2), FK_THREADS, 0, s>>>(a);
        FK_CUDA_LAUNCH_CHECK(ctx);
    }
    return FP8KIT_OK;
}
