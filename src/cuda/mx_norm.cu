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

/* Eight consecutive lanes per chunk, 16 codes each (half a block): each
 * lane loads its codes and the chunk's scale bytes, the eight exchange
 * their halves' largest magnitudes (shuffles), all decide by the shared
 * rule and each rewrites its codes; the first lane of each block writes the
 * block's new scale. Warps step through the chunks together (the shuffles
 * need every lane); total is a multiple of 8, so a chunk's lanes are all in
 * range or all out. */
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
        const long long rc = i >> 3;
        const long long r = in ? rc / chunks : 0;
        const int c = (int)(rc - r * chunks);
        const int j0 = 4 * c, nb = in ? min(4, a.kbs - j0) : 0, jq = q >> 1;
        const bool mine = in && jq < nb; /* this lane's 16 codes exist */
        const long long col = 128LL * c + 16 * q;
        const unsigned char *src = a.x + r * a.ldx + col;
        uint4 vv;
        unsigned char *v = (unsigned char *)&vv;
        if (mine && a.vec) {
            vv = *(const uint4 *)src;
        } else {
#pragma unroll
            for (int k = 0; k < 16; k++)
                v[k] = mine ? src[k] : 0;
        }
        /* the block's largest finite magnitude: this half's, then the pair's */
        float am = mine ? fk_mx_norm_amax(v, 16, a.e5m2) : 0.0f;
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
        const int d = e < 0 ? 0 : e - sc[jq];
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
        if ((q & 1) == 0)
            a.sy[r * a.kbs + j0 + jq] = (unsigned char)(e < 0 ? sc[jq] : e);
    }
}

extern "C" fp8kit_status fk_cuda_mx_norm(fp8kit_ctx *ctx, const void *x, int64_t ldx, const void *s, int blocked,
                                         int64_t rows, int64_t k, int e5m2, void *y, int64_t ldy, void *sy,
                                         void *stream)
{
    if (rows <= 0 || k <= 0)
        return FP8KIT_OK;
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
    a.rows = (int)rows;
    a.e5m2 = e5m2;
    a.vec = ((uintptr_t)x % 16 == 0) && ((uintptr_t)y % 16 == 0) && ldx % 16 == 0 && ldy % 16 == 0;
    const long long total = rows * ((a.kbs + 3) / 4) * 8;
    const long long blocks = (total + 255) / 256;
    const unsigned grid = (unsigned)(blocks < 65536 ? blocks : 65536);
    fk_mx_norm_kernel<<<grid, 256, 0, (cudaStream_t)stream>>>(a);
    FK_CUDA_LAUNCH_CHECK(ctx);
    return FP8KIT_OK;
}
