/* cast.cu - CUDA element-wise cast without scaling between f32/f16/bf16 and
 * e4m3/e5m2 (either direction; satfinite RNE to fp8, exact from fp8, RNE to
 * bf16/f16), using the shared codecs of src/format/codec.h; to fp8 through
 * fk_cvt2 (the hardware conversion, equal to the shared codec) with NaN lanes
 * set to the canonical code. Each thread
 * converts chunks of 8 elements along a row, vector loads/stores when the
 * rows are aligned. Also fk_cuda_div_selfcheck (the quantization kernels'
 * group division against IEEE division, every bf16 / f16 input pair) and
 * fk_cuda_cvt_selfcheck: the hardware fp8 conversion
 * used by the quantization kernels (fk_cvt2) against the shared codec over all
 * 2^32 fp32 bit patterns. */
#include "cuda/quant_common.cuh"

template <int DT> struct fk_el {
    static constexpr int SIZE = DT == FP8KIT_F32 ? 4 : (DT == FP8KIT_F16 || DT == FP8KIT_BF16) ? 2 : 1;
    __device__ static __forceinline__ float get(const void *p, int i)
    {
        switch (DT) {
        case FP8KIT_F32: return ((const float *)p)[i];
        case FP8KIT_F16: return fk_f16_to_f32(((const uint16_t *)p)[i]);
        case FP8KIT_BF16: return fk_bf16_to_f32(((const uint16_t *)p)[i]);
        case FP8KIT_E4M3: return fk_e4m3_to_f32(((const uint8_t *)p)[i]);
        default: return fk_e5m2_to_f32(((const uint8_t *)p)[i]);
        }
    }
    __device__ static __forceinline__ void put(void *p, int i, float v)
    {
        switch (DT) {
        case FP8KIT_F32: ((float *)p)[i] = v; break;
        case FP8KIT_F16: ((uint16_t *)p)[i] = fk_f32_to_f16(v); break;
        case FP8KIT_BF16: ((uint16_t *)p)[i] = fk_f32_to_bf16(v); break;
        case FP8KIT_E4M3: ((uint8_t *)p)[i] = fk_f32_to_e4m3(v); break;
        default: ((uint8_t *)p)[i] = fk_f32_to_e5m2(v); break;
        }
    }
};

/* 8 elements of SIZE bytes through registers: 8, 16 or 32 bytes. */
template <int SIZE> struct fk_pack8 {
    uint32_t w[2 * SIZE];
};

struct fk_cast_args {
    const void *x;
    int64_t xse, xsr;
    void *y;
    int64_t yse, ysr;
    uint32_t row0, nchunks;
    fk_divmod dncp, dR;
    int64_t C;
    int vx, vy;
};

template <int SRC, int DST> __global__ void __launch_bounds__(FK_THREADS) fk_cast_kernel(const fk_cast_args a)
{
    using S = fk_el<SRC>;
    using D = fk_el<DST>;
    const uint32_t idx = blockIdx.x * FK_THREADS + threadIdx.x;
    if (idx >= a.nchunks)
        return;
    const uint32_t gl = fk_div(a.dncp, idx), k = idx - gl * a.dncp.d, g = a.row0 + gl;
    const uint32_t e = fk_div(a.dR, g), r = g - e * a.dR.d;
    const int64_t c = (int64_t)k * 8;
    const int n = (int)(a.C - c < 8 ? a.C - c : 8);
    const char *src = (const char *)a.x + ((int64_t)e * a.xse + (int64_t)r * a.xsr + c) * S::SIZE;
    char *dst = (char *)a.y + ((int64_t)e * a.yse + (int64_t)r * a.ysr + c) * D::SIZE;
    fk_pack8<S::SIZE> in;
    fk_pack8<D::SIZE> out;
    if (a.vx && n == 8) {
#pragma unroll
        for (int i = 0; i < 2 * S::SIZE; i += 2)
            *(uint2 *)&in.w[i] = ((const uint2 *)src)[i / 2];
    } else {
#pragma unroll
        for (int i = 0; i < 2 * S::SIZE; i++)
            in.w[i] = 0;
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (i < n)
                memcpy((char *)in.w + i * S::SIZE, src + i * S::SIZE, S::SIZE);
    }
    if constexpr (DST == FP8KIT_E4M3 || DST == FP8KIT_E5M2) { /* hardware pairs; NaN lanes -> canonical */
        constexpr int E5 = DST == FP8KIT_E5M2;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float v[4];
#pragma unroll
            for (int i = 0; i < 4; i++)
                v[i] = S::get(in.w, 4 * h + i);
            uint32_t word = fk_cvt2<E5>(v[0], v[1]) | (fk_cvt2<E5>(v[2], v[3]) << 16);
#pragma unroll
            for (int i = 0; i < 4; i++)
                if (v[i] != v[i])
                    word = (word & ~(0xFFu << (8 * i))) | (fk_nan_code<E5>() << (8 * i));
            out.w[h] = word;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++)
            D::put(out.w, i, S::get(in.w, i));
    }
    if (a.vy && n == 8) {
#pragma unroll
        for (int i = 0; i < 2 * D::SIZE; i += 2)
            ((uint2 *)dst)[i / 2] = *(const uint2 *)&out.w[i];
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (i < n)
                memcpy(dst + i * D::SIZE, (const char *)out.w + i * D::SIZE, D::SIZE);
    }
}

/* ------------------------------------------------------------------ host */

typedef void (*fk_cast_fn)(const fk_cast_args);

template <int SRC> static fk_cast_fn fk_cast_to_fp8(fp8kit_dtype d)
{
    return d == FP8KIT_E5M2 ? fk_cast_kernel<SRC, FP8KIT_E5M2> : fk_cast_kernel<SRC, FP8KIT_E4M3>;
}

template <int SRC> static fk_cast_fn fk_cast_from_fp8(fp8kit_dtype d)
{
    return d == FP8KIT_F16 ? fk_cast_kernel<SRC, FP8KIT_F16>
           : d == FP8KIT_BF16 ? fk_cast_kernel<SRC, FP8KIT_BF16> : fk_cast_kernel<SRC, FP8KIT_F32>;
}

static fk_cast_fn fk_cast_pick(fp8kit_dtype s, fp8kit_dtype d)
{
    switch (s) { /* the core allows hp <-> fp8 only */
    case FP8KIT_F32: return fk_cast_to_fp8<FP8KIT_F32>(d);
    case FP8KIT_F16: return fk_cast_to_fp8<FP8KIT_F16>(d);
    case FP8KIT_BF16: return fk_cast_to_fp8<FP8KIT_BF16>(d);
    case FP8KIT_E4M3: return fk_cast_from_fp8<FP8KIT_E4M3>(d);
    default: return fk_cast_from_fp8<FP8KIT_E5M2>(d);
    }
}

static bool fk_is_fp8_t(fp8kit_dtype t) { return t == FP8KIT_E4M3 || t == FP8KIT_E5M2; }

/* The kernels cast between f32 / f16 / bf16 and e4m3 / e5m2 (either way);
 * rows (e * R + r) and chunks of 8 per row are 32-bit in the kernel and a
 * launch covers at most 2^30 chunks: rows < 2^32, C <= 2^29 elements. */
extern "C" fp8kit_status fk_cuda_cast_can_run(fp8kit_ctx *ctx, const fk_cast_job *job)
{
    const fk_mat &x = job->src, &y = job->dst;
    if (fk_is_fp8_t(x.dtype) == fk_is_fp8_t(y.dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda cast: %s -> %s is not a cast to or from fp8",
                       fp8kit_dtype_name(x.dtype), fp8kit_dtype_name(y.dtype));
    return fk_cuda_rows_can_run(ctx, "cuda cast", &x);
}

fp8kit_status fk_cuda_rows_can_run(fp8kit_ctx *ctx, const char *fn, const fk_mat *x)
{
    if (x->E * x->R >= ((int64_t)1 << 32))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "%s: %lld rows (the leading dims' product) exceed the kernel's limit of 2^32 - 1 rows", fn,
                       (long long)(x->E * x->R));
    if (fk_ceil_div(x->C, 8) > ((int64_t)1 << 26))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "%s: rows of %lld elements exceed the kernel's limit of 2^29 elements per row%s", fn,
                       (long long)x->C, x->R == 1 && x->E == 1 ? " (a 1-D tensor is one row)" : "");
    return FP8KIT_OK;
}

extern "C" fp8kit_status fk_cuda_cast_run(fp8kit_ctx *ctx, const fk_cast_job *job, cudaStream_t s)
{
    const fk_mat &x = job->src, &y = job->dst;
    fp8kit_status st = fk_cuda_cast_can_run(ctx, job);
    if (st)
        return st;
    const int64_t ncp = fk_ceil_div(x.C, 8), rows = x.E * x.R;
    fk_cast_args a;
    memset(&a, 0, sizeof a);
    a.x = x.data;
    a.xse = x.se;
    a.xsr = x.sr;
    a.y = y.data;
    a.yse = y.se;
    a.ysr = y.sr;
    a.C = x.C;
    a.dncp = fk_divmod_make((uint32_t)ncp);
    a.dR = fk_divmod_make((uint32_t)x.R);
    a.vx = fk_mat_vec_ok(x, 8);
    a.vy = fk_mat_vec_ok(y, 8);
    fk_cast_fn k = fk_cast_pick(x.dtype, y.dtype);
    const int64_t per = ((int64_t)1 << 30) / ncp;
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        a.row0 = (uint32_t)r0;
        a.nchunks = (uint32_t)(nr * ncp);
        k<<<(unsigned)fk_ceil_div(nr * ncp, FK_THREADS), FK_THREADS, 0, s>>>(a);
        FK_CUDA_LAUNCH_CHECK(ctx);
    }
    return FP8KIT_OK;
}
