/* quant_tile.cu - CUDA quantization with fp32 scales over groups larger than a
 * warp: `row` (one scale per row) and `block128x128` (one scale per 128x128
 * tile, plain or mn_major scales). The group is loaded once into registers
 * (16-byte chunks, all loads in flight), its amax reduced across the warp /
 * CTA, then quantized from the registers. Rows longer than the register cache
 * (8 chunks per thread: 16384 bf16 elements per 256-thread row group) are
 * re-read for the elements past it. Scale rules: src/format/scale.h; element
 * step: fk_quant_div_words (quant_common.cuh: the group's reciprocal once,
 * two exact residual steps per element instead of a division). */
#include "cuda/quant_common.cuh"

#define FK_ROW_K 8 /* cached chunks per thread */

struct fk_row_args {
    const void *x;
    int64_t xse, xsr;
    uint8_t *q;
    int64_t qse, qsr;
    float *scale;
    uint32_t rows; /* E * R */
    fk_divmod dR;
    int64_t C, nch; /* elements and chunks per row */
    int vin, vout, pow2;
};

/* Max of m over the CTA (all threads get it); red holds FK_THREADS/32 words. */
__device__ __forceinline__ uint32_t fk_cta_max(uint32_t m, uint32_t *red)
{
#pragma unroll
    for (int o = 1; o < 32; o <<= 1)
        m = fk_max_u32(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
#pragma unroll
    for (int w = 1; w < FK_THREADS / 32; w++)
        m = fk_max_u32(m, red[w]);
    return m;
}

/* TPR threads per row: 32 (a warp per row, 8 rows per CTA), 128 or FK_THREADS. */
template <int DT, int E5, int TPR>
__global__ void __launch_bounds__(FK_THREADS) fk_row_kernel(const fk_row_args a)
{
    using In = fk_in<DT>;
    constexpr int V = In::V, SZ = In::SIZE;
    __shared__ uint32_t red[FK_THREADS / 32];
    const uint32_t g = blockIdx.x * (FK_THREADS / TPR) + threadIdx.x / TPR;
    const int lt = threadIdx.x % TPR;
    const bool valid = g < a.rows;
    const uint32_t e = valid ? fk_div(a.dR, g) : 0, r = valid ? g - e * a.dR.d : 0;
    const char *xr = (const char *)a.x + ((int64_t)e * a.xse + (int64_t)r * a.xsr) * SZ;
    uint8_t *qr = a.q + (int64_t)e * a.qse + (int64_t)r * a.qsr;

    uint4 cache[FK_ROW_K];
#pragma unroll
    for (int k = 0; k < FK_ROW_K; k++) {
        const int64_t ch = lt + (int64_t)k * TPR;
        const int n = valid && ch < a.nch ? (int)(a.C - ch * V < V ? a.C - ch * V : V) : 0;
        cache[k] = make_uint4(0, 0, 0, 0);
        if (n > 0)
            cache[k] = fk_load_chunk<DT>(xr + ch * V * SZ, n, a.vin);
    }
    uint32_t m = 0;
#pragma unroll
    for (int k = 0; k < FK_ROW_K; k++) {
        float f[V];
        In::unpack(cache[k], f);
        m = fk_max_u32(m, fk_chunk_amax<DT>(cache[k], f));
    }
    if (valid)
        for (int64_t ch = lt + (int64_t)FK_ROW_K * TPR; ch < a.nch; ch += TPR) {
            const int n = (int)(a.C - ch * V < V ? a.C - ch * V : V);
            float f[V];
            In::unpack(fk_load_chunk<DT>(xr + ch * V * SZ, n, a.vin), f);
#pragma unroll
            for (int i = 0; i < V; i++)
                m = fk_max_u32(m, fk_abs_bits(f[i]));
        }
#pragma unroll
    for (int o = 1; o < (TPR < 32 ? TPR : 32); o <<= 1)
        m = fk_max_u32(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (TPR > 32) { /* the TPR / 32 warps of this row */
        if ((threadIdx.x & 31) == 0)
            red[threadIdx.x >> 5] = m;
        __syncthreads();
        const int w0 = (threadIdx.x / TPR) * (TPR / 32);
        m = red[w0];
#pragma unroll
        for (int w = 1; w < TPR / 32; w++)
            m = fk_max_u32(m, red[w0 + w]);
    }
    if (!valid)
        return;
    const float S = fk_scale_f32(m, E5, a.pow2);
    const fk_div_s dS = fk_div_prep(S);
#pragma unroll
    for (int k = 0; k < FK_ROW_K; k++) {
        const int64_t ch = lt + (int64_t)k * TPR;
        if (ch >= a.nch)
            break;
        const int n = (int)(a.C - ch * V < V ? a.C - ch * V : V);
        float f[V];
        In::unpack(cache[k], f);
        uint32_t w[2] = {0, 0};
        fk_quant_div_words<E5, V>(f, dS, w);
        fk_store_codes(qr + ch * V, w[0], w[1], n, V, a.vout);
    }
    for (int64_t ch = lt + (int64_t)FK_ROW_K * TPR; ch < a.nch; ch += TPR) {
        const int n = (int)(a.C - ch * V < V ? a.C - ch * V : V);
        float f[V];
        In::unpack(fk_load_chunk<DT>(xr + ch * V * SZ, n, a.vin), f);
        uint32_t w[2] = {0, 0};
        fk_quant_div_words<E5, V>(f, dS, w);
        fk_store_codes(qr + ch * V, w[0], w[1], n, V, a.vout);
    }
    if (lt == 0)
        a.scale[g] = S;
}

struct fk_t128_args {
    const void *x;
    int64_t xse, xsr;
    uint8_t *q;
    int64_t qse, qsr;
    int64_t R, C;
    uint32_t nrb, ncb; /* tiles per expert: rows, columns */
    int vin, vout, pow2;
    fk_f32_scale_out fs;
};

template <int DT, int E5>
__global__ void __launch_bounds__(FK_THREADS) fk_t128_kernel(const fk_t128_args a)
{
    using In = fk_in<DT>;
    constexpr int V = In::V, SZ = In::SIZE;
    constexpr int CPR = 128 / V, RPP = FK_THREADS / CPR, K = 128 / RPP;
    __shared__ uint32_t red[FK_THREADS / 32];
    const uint32_t tiles = a.nrb * a.ncb;
    const uint32_t e = blockIdx.x / tiles, tr = blockIdx.x - e * tiles;
    const uint32_t rb = tr / a.ncb, cb = tr - rb * a.ncb;
    const int64_t r0 = (int64_t)rb * 128, c0 = (int64_t)cb * 128;
    const int cc = threadIdx.x % CPR, rr0 = threadIdx.x / CPR;
    const int64_t c = c0 + cc * V;
    const int nc = (int)(a.C - c < V ? (a.C - c < 0 ? 0 : a.C - c) : V);
    const char *xe = (const char *)a.x + (int64_t)e * a.xse * SZ;
    uint8_t *qe = a.q + (int64_t)e * a.qse;

    uint4 cache[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int64_t r = r0 + rr0 + k * RPP;
        cache[k] = make_uint4(0, 0, 0, 0);
        if (r < a.R && nc > 0)
            cache[k] = fk_load_chunk<DT>(xe + (r * a.xsr + c) * SZ, nc, a.vin);
    }
    uint32_t m = 0;
#pragma unroll
    for (int k = 0; k < K; k++) {
        float f[V];
        In::unpack(cache[k], f);
        m = fk_max_u32(m, fk_chunk_amax<DT>(cache[k], f));
    }
    m = fk_cta_max(m, red);
    const float S = fk_scale_f32(m, E5, a.pow2);
    const fk_div_s dS = fk_div_prep(S);
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int64_t r = r0 + rr0 + k * RPP;
        if (r >= a.R || nc <= 0)
            continue;
        float f[V];
        In::unpack(cache[k], f);
        uint32_t w[2] = {0, 0};
        fk_quant_div_words<E5, V>(f, dS, w);
        fk_store_codes(qe + r * a.qsr + c, w[0], w[1], nc, V, a.vout);
    }
    if (threadIdx.x == 0)
        fk_f32_scale_store(a.fs, e, rb, cb, S);
}

/* ------------------------------------------------------------------ host */

template <int TPR> static void (*fk_row_pick(fp8kit_dtype t, int e5))(const fk_row_args)
{
    switch (t) {
    case FP8KIT_F32: return e5 ? fk_row_kernel<FP8KIT_F32, 1, TPR> : fk_row_kernel<FP8KIT_F32, 0, TPR>;
    case FP8KIT_F16: return e5 ? fk_row_kernel<FP8KIT_F16, 1, TPR> : fk_row_kernel<FP8KIT_F16, 0, TPR>;
    default: return e5 ? fk_row_kernel<FP8KIT_BF16, 1, TPR> : fk_row_kernel<FP8KIT_BF16, 0, TPR>;
    }
}

/* row: one CTA per row at most (the widest rows), so rows (e * R + r, 32-bit
 * in the kernel) <= 2^31 - 1, the grid's x limit; any row length.
 * block128x128: one CTA per 128 x 128 tile, E * ceil(R/128) * ceil(C/128)
 * tiles <= 2^31 - 1. */
extern "C" fp8kit_status fk_cuda_tile_can_run(fp8kit_ctx *ctx, const fk_quant_job *job)
{
    const fk_mat &x = job->x;
    if (job->desc.scheme == FP8KIT_SCHEME_ROW) {
        if (x.E * x.R > ((int64_t)1 << 31) - 1)
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                           "cuda quantize row: %lld rows (the leading dims' product) exceed the kernel's limit of "
                           "2^31 - 1 rows", (long long)(x.E * x.R));
        return FP8KIT_OK;
    }
    const int64_t tiles = x.E * fk_ceil_div(x.R, 128) * fk_ceil_div(x.C, 128);
    if (tiles > ((int64_t)1 << 31) - 1)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda quantize block128x128: %lld tiles of 128 x 128 exceed the kernel's limit of 2^31 - 1 "
                       "tiles", (long long)tiles);
    return FP8KIT_OK;
}

extern "C" fp8kit_status fk_cuda_quant_row(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s)
{
    const fk_mat &x = job->x, &q = job->q;
    const int V = x.dtype == FP8KIT_F32 ? 4 : 8;
    const int64_t rows = x.E * x.R;
    fp8kit_status st = fk_cuda_tile_can_run(ctx, job);
    if (st)
        return st;
    fk_row_args a;
    memset(&a, 0, sizeof a);
    a.x = x.data;
    a.xse = x.se;
    a.xsr = x.sr;
    a.q = (uint8_t *)q.data;
    a.qse = q.se;
    a.qsr = q.sr;
    a.scale = (float *)job->scale;
    a.rows = (uint32_t)rows;
    a.dR = fk_divmod_make((uint32_t)x.R);
    a.C = x.C;
    a.nch = fk_ceil_div(x.C, V);
    a.vin = fk_mat_vec_ok(x, 16);
    a.vout = fk_aligned(q.data, V) && q.sr % V == 0 && q.se % V == 0;
    a.pow2 = job->desc.pow2 != 0;
    /* the fewest threads per row whose registers hold the whole row */
    if (a.nch <= 32 * FK_ROW_K)
        fk_row_pick<32>(x.dtype, job->e5m2)<<<(unsigned)fk_ceil_div(rows, FK_THREADS / 32), FK_THREADS, 0, s>>>(a);
    else if (a.nch <= 128 * FK_ROW_K)
        fk_row_pick<128>(x.dtype, job->e5m2)<<<(unsigned)fk_ceil_div(rows, FK_THREADS / 128), FK_THREADS, 0, s>>>(a);
    else
        fk_row_pick<FK_THREADS>(x.dtype, job->e5m2)<<<(unsigned)rows, FK_THREADS, 0, s>>>(a);
    FK_CUDA_LAUNCH_CHECK(ctx);
    return FP8KIT_OK;
}

extern "C" fp8kit_status fk_cuda_quant_128x128(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s)
{
    const fk_mat &x = job->x, &q = job->q;
    const int V = x.dtype == FP8KIT_F32 ? 4 : 8;
    const int64_t nrb = fk_ceil_div(x.R, 128), ncb = fk_ceil_div(x.C, 128);
    fp8kit_status st = fk_cuda_tile_can_run(ctx, job);
    if (st)
        return st;
    fk_t128_args a;
    memset(&a, 0, sizeof a);
    a.x = x.data;
    a.xse = x.se;
    a.xsr = x.sr;
    a.q = (uint8_t *)q.data;
    a.qse = q.se;
    a.qsr = q.sr;
    a.R = x.R;
    a.C = x.C;
    a.nrb = (uint32_t)nrb;
    a.ncb = (uint32_t)ncb;
    a.vin = fk_mat_vec_ok(x, 16);
    a.vout = fk_aligned(q.data, V) && q.sr % V == 0 && q.se % V == 0;
    a.pow2 = job->desc.pow2 != 0;
    a.fs.p = (float *)job->scale;
    a.fs.rows = nrb;
    a.fs.cols = ncb;
    a.fs.mn = job->desc.scale_layout == FP8KIT_LAYOUT_MN_MAJOR;
    a.fs.ld = fk_round_up(nrb, 4);
    void (*k)(const fk_t128_args);
    switch (x.dtype) {
    case FP8KIT_F32: k = job->e5m2 ? fk_t128_kernel<FP8KIT_F32, 1> : fk_t128_kernel<FP8KIT_F32, 0>; break;
    case FP8KIT_F16: k = job->e5m2 ? fk_t128_kernel<FP8KIT_F16, 1> : fk_t128_kernel<FP8KIT_F16, 0>; break;
    default: k = job->e5m2 ? fk_t128_kernel<FP8KIT_BF16, 1> : fk_t128_kernel<FP8KIT_BF16, 0>; break;
    }
    k<<<(unsigned)(x.E * nrb * ncb), FK_THREADS, 0, s>>>(a);
    FK_CUDA_LAUNCH_CHECK(ctx);
    return FP8KIT_OK;
}
