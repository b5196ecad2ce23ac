/* mx_norm.cu - the CUDA MX chunk normalization (format/mx_norm.h): copies
 * one MX GEMM operand (rows x K e4m3 / e5m2 codes, e8m0 scales per 32 of K,
 * plain or blocked layout) into the workspace with every 128-wide K chunk of
 * a row that the rule accepts rewritten to one common scale; scales are
 * written in the plain layout. The MX GEMM (gemm.cu) runs on these copies
 * and promotes such chunks once per 128 of K (gemm_sm90.cu, fk_mx_stage). */
#include <cuda_runtime.h>
#include "cuda/backend.h"
#include "cuda/gemm_mx.cuh"
#include "format/mx_norm.h"

struct fk_mx_norm_args {
    const unsigned char *x; /* codes, row stride ldx bytes */
    long long ldx;
    const unsigned char *s; /* scale bytes: plain (kbs per row) or blocked (nkb 128 x 4 tiles per band) */
    int blocked, nkb, kbs;
    unsigned char *y; /* copy of the codes, row stride ldy bytes */
    long long ldy;
    unsigned char *sy; /* its scales, plain */
    float *tab;        /* optional: fp32 scales [nkb][4][rp] */
    unsigned int *flags; /* with tab: per (K block, band) {min, max finite byte, one scale per row, 0} */
    int rp, band;      /* rows rounded up to the band; rows per band */
    int rows, e5m2;
    int vec; /* x, y, ldx and ldy 16-byte aligned: 16-byte loads and stores */
};

/* fk_mx_norm_code on 16 codes: on sm_89+ through the hardware's exact fp8
 * -> f16 widening, an exact f16 multiply by 2^-d (d <= 4 keeps every value
 * in f16's range) and its nearest-even f16 -> fp8 conversion, NaN and Inf
 * codes put back (tests/test_cuda_gemm_mx.c compares every byte with the
 * rule); elsewhere the rule itself. */
static __device__ __forceinline__ void fk_mx_norm_16(unsigned char *v, int d, int e5m2)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const uint32_t h = (uint32_t)(15 - d) << 10, s2 = h | (h << 16); /* 2^-d, twice */
    const unsigned char special = e5m2 ? 0x7C : 0x7F; /* exponent bits all ones: Inf / NaN */
#pragma unroll
    for (int k = 0; k < 16; k += 2) {
        const uint16_t in = (uint16_t)(v[k] | (v[k + 1] << 8));
        uint16_t out;
        if (e5m2)
            out = fk_cvt_fp8x2_f16x2<1>(fk_mul_f16x2(fk_cvt_f16x2_fp8x2<1>(in), s2));
        else
            out = fk_cvt_fp8x2_f16x2<0>(fk_mul_f16x2(fk_cvt_f16x2_fp8x2<0>(in), s2));
        v[k] = (v[k] & special) == special ? v[k] : (unsigned char)out;
        v[k + 1] = (v[k + 1] & special) == special ? v[k + 1] : (unsigned char)(out >> 8);
    }
#else
#pragma unroll
    for (int k = 0; k < 16; k++)
        v[k] = fk_mx_norm_code(v[k], d, e5m2);
#endif
}

/* fk_mx_norm_amax of 16 codes: the codes' magnitude bits order the finite
 * values, so the largest of them (NaN / Inf codes counted as 0) decodes to
 * the largest finite magnitude. */
static __device__ __forceinline__ float fk_mx_norm_amax16(const uint4 &w, int e5m2)
{
    const uint32_t lim = e5m2 ? 0x7C7C7C7Cu : 0x7F7F7F7Fu; /* first non-finite magnitude, per byte */
    uint32_t m = 0;
    const uint32_t q[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t mag = q[i] & 0x7F7F7F7Fu;
        const uint32_t fin = __vcmpltu4(mag, lim); /* 0xFF per finite byte */
        m = __vmaxu4(m, mag & fin);
    }
    m = max(max(m & 0xFFu, (m >> 8) & 0xFFu), max((m >> 16) & 0xFFu, m >> 24));
    return fk_fp8_to_f32((uint8_t)m, e5m2);
}

/* Sets n flag records to {255, 0, 1, 0}: the identities of the folds. */
__global__ void fk_mx_norm_flags_init(unsigned int *f, long long n)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        *(uint4 *)(f + 4 * i) = make_uint4(255u, 0u, 1u, 0u);
}

/* Eight consecutive lanes per (row, chunk), chunk-major (a warp's four are
 * four rows of one chunk, mostly), 16 codes each (half a block): each lane
 * loads its codes and the chunk's scale bytes, the eight exchange their
 * halves' largest magnitudes (shuffles), all decide by the shared rule and
 * each rewrites its codes; the first lane of each block writes the block's
 * new scale (and its fp32 table entry); the first lane of the chunk folds
 * the row's final scale bytes into its band's flags. Warps step through the
 * items together (the shuffles need every lane); total is a multiple of 8,
 * so the lanes of one (row, chunk) are all in range or all out. */
__global__ void fk_mx_norm_kernel(const fk_mx_norm_args a)
{
    const long long chunks = (a.kbs + 3) / 4;
    const long long total = (long long)a.rows * chunks * 8;
    const int lane = threadIdx.x & 31;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < total; base += step) {
        const long long i = base + lane;
        const bool in = i < total;
        const int q = (int)(i & 7);
        const long long cr = i >> 3;
        const int c = in ? (int)(cr / a.rows) : 0;
        const long long r = in ? cr - (long long)c * a.rows : 0;
        const int j0 = 4 * c, nb = in ? min(4, a.kbs - j0) : 0, jq = q >> 1;
        const bool mine = in && jq < nb; /* this lane's 16 codes exist */
        const long long col = 128LL * c + 16 * q;
        const unsigned char *src = a.x + r * a.ldx + col;
        uint4 vv = make_uint4(0, 0, 0, 0);
        unsigned char *v = (unsigned char *)&vv;
        if (mine && a.vec) {
            vv = *(const uint4 *)src;
        } else if (mine) {
#pragma unroll
            for (int k = 0; k < 16; k++)
                v[k] = src[k];
        }
        /* the block's largest finite magnitude: this half's, then the pair's */
        float am = mine ? fk_mx_norm_amax16(vv, a.e5m2) : 0.0f;
        am = fmaxf(am, __shfl_xor_sync(0xFFFFFFFFu, am, 1));
        float amax[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            amax[j] = __shfl_sync(0xFFFFFFFFu, am, (lane & ~7) + 2 * j);
        if (!mine)
            continue;
        unsigned char sc[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            sc[j] = j < nb ? a.s[fk_mx_off(a.blocked != 0, a.nkb, a.kbs, r, j0 + j)] : 0;
        const int e = fk_mx_norm_pick(sc, amax, nb, a.e5m2);
        int d = 0;
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (j == jq && e >= 0)
                d = e - sc[j];
        if (d)
            fk_mx_norm_16(v, d, a.e5m2);
        unsigned char *dst = a.y + r * a.ldy + col;
        if (a.vec) {
            *(uint4 *)dst = vv;
        } else {
#pragma unroll
            for (int k = 0; k < 16; k++)
                dst[k] = v[k];
        }
        if ((q & 1) == 0) {
            unsigned char mys = 0;
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (j == jq)
                    mys = sc[j];
            const unsigned char out = (unsigned char)(e < 0 ? mys : e);
            a.sy[r * a.kbs + j0 + jq] = out;
            if (a.tab)
                a.tab[((long long)c * 4 + jq) * a.rp + r] = fk_mx_e8m0(out);
        }
        if (a.tab && q == 0) { /* the row's bytes after the rule, folded into its band's flags */
            unsigned int lo = 255u, hi = 0u;
            bool one = true;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (j < nb) {
                    const unsigned int b = e < 0 ? sc[j] : (unsigned int)e;
                    if (b != 255u) {
                        lo = min(lo, b);
                        hi = max(hi, b);
                    }
                    one = one && b == (e < 0 ? sc[0] : (unsigned int)e);
                }
            }
            unsigned int *f = a.flags + ((long long)c * (a.rp / a.band) + r / a.band) * 4;
            atomicMin(f, lo);
            atomicMax(f + 1, hi);
            if (!one)
                atomicAnd(f + 2, 0u);
        }
    }
}

extern "C" fp8kit_status fk_cuda_mx_norm(fp8kit_ctx *ctx, const void *x, int64_t ldx, const void *s, int blocked,
                                         int64_t rows, int64_t k, int e5m2, void *y, int64_t ldy, void *sy, void *tab,
                                         void *flags, int band, void *stream)
{
    if (rows <= 0 || k <= 0)
        return FP8KIT_OK;
    cudaStream_t st = (cudaStream_t)stream;
    fk_mx_norm_args a;
    a.x = (const unsigned char *)x;
    a.ldx = ldx;
    a.s = (const unsigned char *)s;
    a.blocked = blocked;
    a.kbs = (int)(k / 32);
    a.nkb = (int)((k + 127) / 128);
    a.y = (unsigned char *)y;
    a.ldy = ldy;
    a.sy = (unsigned char *)sy;
    a.tab = (float *)tab;
    a.flags = (unsigned int *)flags;
    a.band = band > 0 ? band : 128;
    a.rp = (int)((rows + a.band - 1) / a.band * a.band);
    a.rows = (int)rows;
    a.e5m2 = e5m2;
    a.vec = ((uintptr_t)x % 16 == 0) && ((uintptr_t)y % 16 == 0) && ldx % 16 == 0 && ldy % 16 == 0;
    if (a.tab) { /* padding rows of the tables 0; flags {255 (as the unsigned max), 0, 1, 0} before the folds */
        const size_t tb = (size_t)a.nkb * 4 * a.rp * 4, fb = (size_t)a.nkb * (a.rp / a.band) * 16;
        FK_CUDA_CHECK(ctx, cudaMemsetAsync(a.tab, 0, tb, st));
        fk_mx_norm_flags_init<<<(unsigned)((fb / 16 + 255) / 256), 256, 0, st>>>(a.flags, (long long)(fb / 16));
        FK_CUDA_LAUNCH_CHECK(ctx);
    }
    const long long total = rows * ((a.kbs + 3) / 4) * 8;
    const long long blocks = (total + 255) / 256;
    const unsigned grid = (unsigned)(blocks < 65536 ? blocks : 65536);
    fk_mx_norm_kernel<<<grid, 256, 0, st>>>(a);
    FK_CUDA_LAUNCH_CHECK(ctx);
    return FP8KIT_OK;
}
