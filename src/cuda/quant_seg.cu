/* quant_seg.cu - CUDA quantization along rows with groups that fit in a warp:
 * mx axis -1 (32 elements, e8m0 scales, plain or blocked layout) and
 * block1x128 (128 elements, fp32 scales, plain or mn_major), plus the tensor
 * scheme (amax pass with atomicMax on the scale slot's bits, quantize pass in
 * reverse block order so the first blocks hit in L2, then the final scale).
 * Each thread owns 16-byte chunks (8 bf16/f16 or 4 f32), four loads in flight;
 * the GL lanes of a group reduce amax with warp shuffles. Scale rules are the
 * shared code of src/format/scale.h; the element step is fk_quant_*_words
 * (quant_common.cuh). */
#include "cuda/quant_common.cuh"

enum { FK_SEG_MX = 0, FK_SEG_1X128 = 1, FK_SEG_TENSOR = 2 };
#define FK_SEG_U 4 /* chunks per thread */

struct fk_seg_args {
    const void *x;
    int64_t xse, xsr;
    uint8_t *q;
    int64_t qse, qsr;
    uint32_t row0;    /* first row (e * R + r) of this launch */
    uint32_t nchunks; /* chunks in this launch: rows * ncp */
    fk_divmod dncp;   /* padded chunks per row */
    fk_divmod dR;     /* rows per expert */
    int64_t C;
    int vin, vout, rceil, pow2;
    fk_mx_scale_out mxs;
    fk_f32_scale_out fs;
    uint32_t *slot; /* tensor: the scale slot holding the amax bits */
    int64_t off0;   /* CONTIG: element offset of this launch's first chunk */
};

template <int GL> __device__ __forceinline__ uint32_t fk_group_max(uint32_t m)
{
#pragma unroll
    for (int o = 1; o < GL; o <<= 1)
        m = fk_max_u32(m, __shfl_xor_sync(0xffffffffu, m, o));
    return m;
}

/* CONTIG: x and q are contiguous, C is a multiple of the group width and the
 * bases are aligned: chunk idx starts at element off0 + idx * V, no division. */
template <int DT, int MODE, int E5, bool CONTIG>
__global__ void __launch_bounds__(FK_THREADS) fk_seg_kernel(const fk_seg_args a)
{
    using In = fk_in<DT>;
    constexpr int V = In::V;
    constexpr int GL = MODE == FK_SEG_MX ? 32 / V : MODE == FK_SEG_1X128 ? 128 / V : 1;
    const uint32_t blk = MODE == FK_SEG_TENSOR ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const uint32_t base = blk * (uint32_t)(FK_THREADS * FK_SEG_U) + threadIdx.x;
    const uint32_t lane = threadIdx.x & 31u;
    fk_div_s tD = fk_div_prep(1.0f);
    if (MODE == FK_SEG_TENSOR)
        tD = fk_div_prep(fk_scale_f32(*a.slot, E5, a.pow2));

    uint4 raw[FK_SEG_U];
    uint32_t g[FK_SEG_U];
    int64_t c0[FK_SEG_U];
    int n[FK_SEG_U];
#pragma unroll
    for (int j = 0; j < FK_SEG_U; j++) {
        const uint32_t idx = base + j * FK_THREADS;
        raw[j] = make_uint4(0, 0, 0, 0);
        n[j] = 0;
        g[j] = 0;
        c0[j] = 0;
        if (CONTIG) {
            if (idx < a.nchunks) {
                n[j] = V;
                raw[j] = *(const uint4 *)((const char *)a.x + (a.off0 + (int64_t)idx * V) * In::SIZE);
            }
        } else if (idx < a.nchunks) {
            uint32_t gl = fk_div(a.dncp, idx);
            uint32_t k = idx - gl * a.dncp.d;
            g[j] = a.row0 + gl;
            c0[j] = (int64_t)k * V;
            if (c0[j] < a.C) {
                n[j] = (int)(a.C - c0[j] < V ? a.C - c0[j] : V);
                uint32_t e = fk_div(a.dR, g[j]), r = g[j] - e * a.dR.d;
                const char *p = (const char *)a.x + ((int64_t)e * a.xse + (int64_t)r * a.xsr + c0[j]) * In::SIZE;
                raw[j] = fk_load_chunk<DT>(p, n[j], a.vin);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < FK_SEG_U; j++) {
        float f[V];
        In::unpack(raw[j], f);
        uint32_t m = 0;
        if (MODE != FK_SEG_TENSOR)
            m = fk_group_max<GL>(fk_chunk_amax<DT>(raw[j], f));
        uint32_t w[2] = {0, 0};
        uint8_t sb = 0;
        float S = tD.s;
        if (MODE == FK_SEG_MX) {
            sb = fk_mx_scale(m, E5, a.rceil);
            fk_quant_mx_words<E5, V>(f, fk_mx_recip(sb), sb == 0xFFu, w);
        } else {
            if (MODE == FK_SEG_1X128)
                S = fk_scale_f32(m, E5, a.pow2);
            fk_quant_div_words<E5, V>(f, MODE == FK_SEG_1X128 ? fk_div_prep(S) : tD, w);
        }
        if (n[j] <= 0)
            continue;
        if (CONTIG) {
            const uint32_t idx = base + j * FK_THREADS;
            const int64_t o = a.off0 + (int64_t)idx * V;
            fk_store_codes(a.q + o, w[0], w[1], V, V, true);
            if (MODE == FK_SEG_TENSOR || (lane % GL) != 0)
                continue;
            const bool plain = MODE == FK_SEG_MX ? !a.mxs.blocked : !a.fs.mn;
            if (plain) { /* row-major scales: the element offset / group width */
                if (MODE == FK_SEG_MX)
                    a.mxs.p[o >> 5] = sb;
                else
                    a.fs.p[o >> 7] = S;
                continue;
            }
            const uint32_t gl = fk_div(a.dncp, idx), k = idx - gl * a.dncp.d, gg = a.row0 + gl;
            const uint32_t e = fk_div(a.dR, gg), r = gg - e * a.dR.d;
            if (MODE == FK_SEG_MX)
                fk_mx_scale_store(a.mxs, e, r, (int64_t)k * V / 32, sb);
            else
                fk_f32_scale_store(a.fs, e, r, (int64_t)k * V / 128, S);
            continue;
        }
        uint32_t e = fk_div(a.dR, g[j]), r = g[j] - e * a.dR.d;
        fk_store_codes(a.q + (int64_t)e * a.qse + (int64_t)r * a.qsr + c0[j], w[0], w[1], n[j], V, a.vout);
        if (MODE != FK_SEG_TENSOR && (lane % GL) == 0) {
            if (MODE == FK_SEG_MX)
                fk_mx_scale_store(a.mxs, e, r, c0[j] / 32, sb);
            else
                fk_f32_scale_store(a.fs, e, r, c0[j] / 128, S);
        }
    }
}

/* Tensor scheme pass 1: atomicMax of the amax bits into the scale slot. */
template <int DT> __global__ void __launch_bounds__(FK_THREADS) fk_amax_kernel(const fk_seg_args a)
{
    using In = fk_in<DT>;
    constexpr int V = In::V;
    __shared__ uint32_t red[FK_THREADS / 32];
    const uint32_t base = blockIdx.x * (uint32_t)(FK_THREADS * FK_SEG_U) + threadIdx.x;
    uint4 raw[FK_SEG_U];
#pragma unroll
    for (int j = 0; j < FK_SEG_U; j++) {
        const uint32_t idx = base + j * FK_THREADS;
        raw[j] = make_uint4(0, 0, 0, 0);
        if (idx < a.nchunks) {
            uint32_t gl = fk_div(a.dncp, idx);
            uint32_t k = idx - gl * a.dncp.d;
            uint32_t g = a.row0 + gl;
            int64_t c0 = (int64_t)k * V;
            if (c0 < a.C) {
                int n = (int)(a.C - c0 < V ? a.C - c0 : V);
                uint32_t e = fk_div(a.dR, g), r = g - e * a.dR.d;
                const char *p = (const char *)a.x + ((int64_t)e * a.xse + (int64_t)r * a.xsr + c0) * In::SIZE;
                raw[j] = fk_load_chunk<DT>(p, n, a.vin);
            }
        }
    }
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < FK_SEG_U; j++) {
        float f[V];
        In::unpack(raw[j], f);
        m = fk_max_u32(m, fk_chunk_amax<DT>(raw[j], f));
    }
    m = fk_group_max<32>(m);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < FK_THREADS / 32; w++)
            m = fk_max_u32(m, red[w]);
        if (m)
            atomicMax(a.slot, m);
    }
}

/* Tensor scheme pass 3: the slot's amax bits become the scale S. */
template <int E5> __global__ void fk_tensor_final_kernel(uint32_t *slot, int pow2)
{
    *(float *)slot = fk_scale_f32(*slot, E5, pow2);
}

/* ------------------------------------------------------------------ host */

typedef void (*fk_seg_fn)(const fk_seg_args);

template <int MODE, bool CONTIG> static fk_seg_fn fk_seg_pick2(fp8kit_dtype t, int e5)
{
    switch (t) {
    case FP8KIT_F32:
        return e5 ? fk_seg_kernel<FP8KIT_F32, MODE, 1, CONTIG> : fk_seg_kernel<FP8KIT_F32, MODE, 0, CONTIG>;
    case FP8KIT_F16:
        return e5 ? fk_seg_kernel<FP8KIT_F16, MODE, 1, CONTIG> : fk_seg_kernel<FP8KIT_F16, MODE, 0, CONTIG>;
    default:
        return e5 ? fk_seg_kernel<FP8KIT_BF16, MODE, 1, CONTIG> : fk_seg_kernel<FP8KIT_BF16, MODE, 0, CONTIG>;
    }
}

template <int MODE> static fk_seg_fn fk_seg_pick(fp8kit_dtype t, int e5, bool contig)
{
    return contig ? fk_seg_pick2<MODE, true>(t, e5) : fk_seg_pick2<MODE, false>(t, e5);
}

/* Chunk width V (16 bytes of input) and lanes per group of the job's scheme
 * (mx 32 / V, block1x128 128 / V, tensor 1). */
static int fk_seg_v(const fk_quant_job *job) { return job->x.dtype == FP8KIT_F32 ? 4 : 8; }
static int fk_seg_gl(const fk_quant_job *job)
{
    const int V = fk_seg_v(job);
    return job->desc.scheme == FP8KIT_SCHEME_MX ? 32 / V : job->desc.scheme == FP8KIT_SCHEME_BLOCK1X128 ? 128 / V : 1;
}

/* The kernels index rows (e * R + r) and chunks per row in 32 bits, and a
 * launch covers at most 2^30 chunks (>= 16 rows): rows < 2^32, and at most
 * 2^26 chunks of V elements per row (2^28 f32, 2^29 f16 / bf16 elements;
 * the rows padded to whole groups, 2^26 being a multiple of every group). */
extern "C" fp8kit_status fk_cuda_seg_can_run(fp8kit_ctx *ctx, const fk_quant_job *job)
{
    const fk_mat &x = job->x;
    const int V = fk_seg_v(job);
    const char *what = job->desc.scheme == FP8KIT_SCHEME_MX           ? "mx"
                       : job->desc.scheme == FP8KIT_SCHEME_BLOCK1X128 ? "block1x128"
                                                                      : "tensor";
    if (x.E * x.R >= ((int64_t)1 << 32))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda quantize %s: %lld rows (the leading dims' product) exceed the kernel's limit of "
                       "2^32 - 1 rows", what, (long long)(x.E * x.R));
    if (fk_ceil_div(x.C, V) > ((int64_t)1 << 26))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda quantize %s: rows of %lld %s elements exceed the kernel's limit of 2^%d elements per "
                       "row%s", what, (long long)x.C, fp8kit_dtype_name(x.dtype), V == 4 ? 28 : 29,
                       x.R == 1 && x.E == 1 ? " (a 1-D tensor is one row)" : "");
    return FP8KIT_OK;
}

/* Fills the geometry shared by every launch (the job passed
 * fk_cuda_seg_can_run). */
static fp8kit_status fk_seg_setup(fp8kit_ctx *ctx, const fk_quant_job *job, fk_seg_args *a, int64_t *ncp_out)
{
    const fk_mat &x = job->x, &q = job->q;
    const int V = fk_seg_v(job);
    fp8kit_status st = fk_cuda_seg_can_run(ctx, job);
    if (st)
        return st;
    const int64_t ncp = fk_round_up(fk_ceil_div(x.C, V), fk_seg_gl(job));
    memset(a, 0, sizeof *a);
    a->x = x.data;
    a->xse = x.se;
    a->xsr = x.sr;
    a->q = (uint8_t *)q.data;
    a->qse = q.se;
    a->qsr = q.sr;
    a->dncp = fk_divmod_make((uint32_t)ncp);
    a->dR = fk_divmod_make((uint32_t)x.R);
    a->C = x.C;
    a->vin = fk_mat_vec_ok(x, 16);
    a->vout = fk_aligned(q.data, V) && q.sr % V == 0 && q.se % V == 0;
    a->rceil = job->desc.rounding == FP8KIT_ROUND_RCEIL;
    a->pow2 = job->desc.pow2 != 0;
    *ncp_out = ncp;
    return FP8KIT_OK;
}

/* x and q contiguous, every chunk whole and aligned, groups never straddle rows. */
static bool fk_seg_contig(const fk_quant_job *job, int gl)
{
    const fk_mat &x = job->x, &q = job->q;
    const int V = x.dtype == FP8KIT_F32 ? 4 : 8;
    return x.sr == x.C && x.se == x.R * x.C && q.sr == q.C && q.se == q.R * q.C && x.C % (V * gl) == 0 &&
           fk_aligned(x.data, 16) && fk_aligned(q.data, V);
}

/* Launches kernel k over all rows, in pieces of at most 2^30 chunks. */
static fp8kit_status fk_seg_launch(fp8kit_ctx *ctx, const fk_quant_job *job, fk_seg_args a, int64_t ncp,
                                   fk_seg_fn k, cudaStream_t s)
{
    const int64_t rows = job->x.E * job->x.R;
    const int64_t per = ((int64_t)1 << 30) / ncp; /* rows per launch, >= 16 */
    const int64_t cpb = FK_THREADS * FK_SEG_U;
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        int64_t nr = rows - r0 < per ? rows - r0 : per;
        a.row0 = (uint32_t)r0;
        a.off0 = r0 * job->x.C;
        a.nchunks = (uint32_t)(nr * ncp);
        k<<<(unsigned)fk_ceil_div(nr * ncp, cpb), FK_THREADS, 0, s>>>(a);
        FK_CUDA_LAUNCH_CHECK(ctx);
    }
    return FP8KIT_OK;
}

extern "C" fp8kit_status fk_cuda_quant_seg(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s)
{
    const int mx = job->desc.scheme == FP8KIT_SCHEME_MX;
    const int V = fk_seg_v(job);
    fk_seg_args a;
    int64_t ncp;
    fp8kit_status st = fk_seg_setup(ctx, job, &a, &ncp);
    if (st)
        return st;
    if (mx) {
        a.mxs.p = (uint8_t *)job->scale;
        a.mxs.R = job->x.R;
        a.mxs.C32 = job->x.C / 32;
        a.mxs.blocked = job->desc.scale_layout == FP8KIT_LAYOUT_BLOCKED;
        a.mxs.Rp = job->scale_rows; /* stored rows x cols, padding included (the core's geometry) */
        a.mxs.Cp = job->scale_cols;
        fk_seg_fn k = fk_seg_pick<FK_SEG_MX>(job->x.dtype, job->e5m2, fk_seg_contig(job, 32 / V));
        return fk_seg_launch(ctx, job, a, ncp, k, s);
    }
    a.fs.p = (float *)job->scale;
    a.fs.rows = job->x.R;
    a.fs.mn = job->desc.scale_layout == FP8KIT_LAYOUT_MN_MAJOR;
    /* the grid's ceil(C / 128) columns and mn_major's row stride 4 ceil(R / 4),
     * from the stored shape the core computed (format/geometry.h) */
    a.fs.cols = a.fs.mn ? job->scale_rows : job->scale_cols;
    a.fs.ld = a.fs.mn ? job->scale_cols : fk_round_up(job->x.R, 4);
    fk_seg_fn k = fk_seg_pick<FK_SEG_1X128>(job->x.dtype, job->e5m2, fk_seg_contig(job, 128 / V));
    return fk_seg_launch(ctx, job, a, ncp, k, s);
}

extern "C" fp8kit_status fk_cuda_quant_tensor(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s)
{
    fk_seg_args a;
    int64_t ncp;
    fp8kit_status st = fk_seg_setup(ctx, job, &a, &ncp);
    if (st)
        return st;
    a.slot = (uint32_t *)job->scale;
    FK_CUDA_CHECK(ctx, cudaMemsetAsync(a.slot, 0, sizeof(uint32_t), s));
    fk_seg_fn amax = job->x.dtype == FP8KIT_F32 ? fk_amax_kernel<FP8KIT_F32>
                     : job->x.dtype == FP8KIT_F16 ? fk_amax_kernel<FP8KIT_F16> : fk_amax_kernel<FP8KIT_BF16>;
    if ((st = fk_seg_launch(ctx, job, a, ncp, amax, s)))
        return st;
    fk_seg_fn quant = fk_seg_pick<FK_SEG_TENSOR>(job->x.dtype, job->e5m2, fk_seg_contig(job, 1));
    if ((st = fk_seg_launch(ctx, job, a, ncp, quant, s)))
        return st;
    if (job->e5m2)
        fk_tensor_final_kernel<1><<<1, 1, 0, s>>>(a.slot, a.pow2);
    else
        fk_tensor_final_kernel<0><<<1, 1, 0, s>>>(a.slot, a.pow2);
    FK_CUDA_LAUNCH_CHECK(ctx);
    return FP8KIT_OK;
}
