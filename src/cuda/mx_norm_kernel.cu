/* mx_norm_kernel.cu - the CUDA MX chunk normalization (format/mx_norm_rule.h): copies
 * one MX GEMM operand (rows x K e4m3 / e5m2 codes, e8m0 scales per 32 of K,
 * plain or blocked layout) into the workspace with every 128-wide K chunk of
 * a row that the rule accepts rewritten to one common scale; scales are
 * written in the plain layout. The MX GEMM (gemm/sm90/dense_host.cu) runs on these copies
 * and promotes such chunks once per 128 of K (gemm/sm90/kernels_dense.cu, fk_mx_stage). */
#include <cuda_runtime.h>
#include "cuda/cuda_state.h"
#include "cuda/gemm/sm90/mx_math.cuh"
#include "format/mx_norm_rule.h"

struct fk_mx_norm_args {
    const unsigned char *x; /* codes, row stride ldx bytes */
    long long ldx;
    const unsigned char *s; /* scale bytes: plain (kbs per row) or blocked (nkb 128 x 4 tiles per band) */
    int blocked, nkb, kbs;
    unsigned char *y; /* copy of the codes, row stride ldy bytes */
    long long ldy;
    unsigned char *sy; /* its scales, plain */
    int rows, e5m2;
    int vec;  /* x, y, ldx and ldy 16-byte aligned: 16-byte loads and stores */
    int word; /* a chunk's 4 scale bytes 4-byte aligned (blocked layout, or plain with kbs % 4 == 0) */
};

/* fk_mx_norm_code on the 4 codes of w (little-endian bytes): on sm_89+
 * through the hardware's exact fp8 -> f16 widening, an exact f16 multiply by
 * 2^-d (d <= 4 keeps every value in f16's range) and its nearest-even f16
 * -> fp8 conversion, NaN and Inf codes put back (tests/test_cuda_gemm_mx.c
 * compares every byte with the rule); elsewhere the rule itself. Words, not
 * byte arrays, so that nothing goes through local memory. */
static __device__ __forceinline__ uint32_t fk_mx_norm_4(uint32_t w, int d, int e5m2)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const uint32_t h = (uint32_t)(15 - d) << 10, s2 = h | (h << 16); /* 2^-d, twice */
    uint32_t lo, hi;
    if (e5m2) {
        lo = fk_cvt_fp8x2_f16x2<1>(fk_mul_f16x2(fk_cvt_f16x2_fp8x2<1>((uint16_t)w), s2));
        hi = fk_cvt_fp8x2_f16x2<1>(fk_mul_f16x2(fk_cvt_f16x2_fp8x2<1>((uint16_t)(w >> 16)), s2));
    } else {
        lo = fk_cvt_fp8x2_f16x2<0>(fk_mul_f16x2(fk_cvt_f16x2_fp8x2<0>((uint16_t)w), s2));
        hi = fk_cvt_fp8x2_f16x2<0>(fk_mul_f16x2(fk_cvt_f16x2_fp8x2<0>((uint16_t)(w >> 16)), s2));
    }
    const uint32_t out = (lo & 0xFFFFu) | (hi << 16);
    const uint32_t sp = e5m2 ? 0x7C7C7C7Cu : 0x7F7F7F7Fu; /* exponent bits all ones: Inf / NaN */
    const uint32_t keep = __vcmpeq4(w & sp, sp);         /* 0xFF per such byte */
    return (out & ~keep) | (w & keep);
#else
    uint32_t r = 0;
#pragma unroll
    for (int k = 0; k < 4; k++)
        r |= (uint32_t)fk_mx_norm_code((uint8_t)(w >> (8 * k)), d, e5m2) << (8 * k);
    return r;
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

/* Eight consecutive lanes per (row, chunk), row-major (a warp's four are
 * four consecutive chunks of one row, mostly: 512 contiguous bytes, and
 * consecutive warps continue along the row; H100, 2026-11-26: chunk-major,
 * one 128-byte line per row and warp, ran at ~1.9 TB/s), 16 codes each
 * (half a block): each lane
 * loads its codes and the chunk's scale bytes, the eight exchange their
 * halves' largest magnitudes (shuffles), all decide by the shared rule and
 * each rewrites its codes; the first lane of each block writes the block's
 * new scale byte. Warps step through the items together (the shuffles need
 * every lane); total is a multiple of 8, so the lanes of one (row, chunk)
 * are all in range or all out. The chunk's scale bytes come as one 32-bit
 * load where they are aligned (a.word). */
/* One lane's item: its (row, chunk), half block and codes (loaded). */
struct fk_mx_norm_item {
    long long r, col;
    int q, j0, nb, jq;
    bool mine;
    uint4 vv;
    uint32_t sw; /* the chunk's 4 scale bytes (blocks past K: block 0's), little-endian */
};

/* Item i (in range when i < total): indices, and the 16 codes and the
 * chunk's scale bytes when they exist. */
static __device__ __forceinline__ void fk_mx_norm_fetch(const fk_mx_norm_args &a, long long i, long long total,
                                                        long long chunks, fk_mx_norm_item &t)
{
    const bool in = i < total;
    t.q = (int)(i & 7);
    const long long cr = i >> 3;
    t.r = in ? cr / chunks : 0;
    const int c = in ? (int)(cr - t.r * chunks) : 0;
    t.j0 = 4 * c;
    t.nb = in ? min(4, a.kbs - t.j0) : 0;
    t.jq = t.q >> 1;
    t.mine = in && t.jq < t.nb; /* this lane's 16 codes exist */
    t.col = 128LL * c + 16 * t.q;
    const unsigned char *src = a.x + t.r * a.ldx + t.col;
    t.vv = make_uint4(0, 0, 0, 0);
    if (t.mine && a.vec) {
        t.vv = *(const uint4 *)src;
    } else if (t.mine) {
        uint32_t b[4] = {0, 0, 0, 0};
#pragma unroll
        for (int k = 0; k < 16; k++)
            b[k / 4] |= (uint32_t)src[k] << (8 * (k % 4));
        t.vv = make_uint4(b[0], b[1], b[2], b[3]);
    }
    t.sw = 0;
    if (t.mine && a.word && t.nb == 4) {
        t.sw = *(const uint32_t *)(a.s + fk_mx_off(a.blocked != 0, a.nkb, a.kbs, t.r, t.j0));
    } else if (t.mine) {
        const uint32_t b0 = a.s[fk_mx_off(a.blocked != 0, a.nkb, a.kbs, t.r, t.j0)];
        t.sw = b0;
#pragma unroll
        for (int j = 1; j < 4; j++) /* blocks past K: block 0's byte and amax 0 change nothing */
            t.sw |= (j < t.nb ? (uint32_t)a.s[fk_mx_off(a.blocked != 0, a.nkb, a.kbs, t.r, t.j0 + j)] : b0) << (8 * j);
    }
}

/* The rest of an item (every lane of the warp calls it: shuffles): the
 * block's amax, the rule, the rewritten codes and scale byte. */
static __device__ __forceinline__ void fk_mx_norm_finish(const fk_mx_norm_args &a, const fk_mx_norm_item &t, int lane)
{
    const long long r = t.r, col = t.col;
    const int q = t.q, j0 = t.j0, jq = t.jq;
    const bool mine = t.mine;
    uint4 vv = t.vv;
    /* the block's largest finite magnitude: this half's, then the pair's */
    float am = mine ? fk_mx_norm_amax16(vv, a.e5m2) : 0.0f;
    am = fmaxf(am, __shfl_xor_sync(0xFFFFFFFFu, am, 1));
    float amax[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        amax[j] = __shfl_sync(0xFFFFFFFFu, am, (lane & ~7) + 2 * j);
    if (!mine)
        return;
    unsigned char sc[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        sc[j] = (unsigned char)(t.sw >> (8 * j));
    /* (four blocks, a constant count: the arrays stay in registers) */
    const int e = fk_mx_norm_pick(sc, amax, 4, a.e5m2);
    int d = 0;
#pragma unroll
    for (int j = 0; j < 4; j++)
        if (j == jq && e >= 0)
            d = e - sc[j];
    if (d) {
        vv.x = fk_mx_norm_4(vv.x, d, a.e5m2);
        vv.y = fk_mx_norm_4(vv.y, d, a.e5m2);
        vv.z = fk_mx_norm_4(vv.z, d, a.e5m2);
        vv.w = fk_mx_norm_4(vv.w, d, a.e5m2);
    }
    unsigned char *dst = a.y + r * a.ldy + col;
    if (a.vec) {
        *(uint4 *)dst = vv;
    } else {
        const uint32_t b[4] = {vv.x, vv.y, vv.z, vv.w};
#pragma unroll
        for (int k = 0; k < 16; k++)
            dst[k] = (unsigned char)(b[k / 4] >> (8 * (k % 4)));
    }
    if ((q & 1) == 0) {
        unsigned char mys = 0;
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (j == jq)
                mys = sc[j];
        a.sy[r * a.kbs + j0 + jq] = (unsigned char)(e < 0 ? mys : e);
    }
}

__global__ void fk_mx_norm_kernel(const fk_mx_norm_args a)
{
    const long long chunks = (a.kbs + 3) / 4;
    const long long total = (long long)a.rows * chunks * 8;
    const int lane = threadIdx.x & 31;
    const long long step = (long long)gridDim.x * blockDim.x;
    /* two items per lane, both loads issued before either is processed:
     * twice the bytes in flight (H100, 2026-11-26: one item per lane, 40
     * registers, ran at ~1.9 TB/s, bound by the loads in flight) */
    for (long long base = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < total; base += 2 * step) {
        fk_mx_norm_item t0, t1;
        fk_mx_norm_fetch(a, base + lane, total, chunks, t0);
        fk_mx_norm_fetch(a, base + step + lane, total, chunks, t1);
        fk_mx_norm_finish(a, t0, lane);
        fk_mx_norm_finish(a, t1, lane);
    }
}

/* The MX kernel's stage tables and band flags from the normalized scale
 * bytes sy (rows x kbs, plain), the rows taken as groups of gn (the grouped
 * GEMM's experts; gn = rows: one group), each group's rows padded to rpg (a
 * multiple of band) in the tables: one warp per (K block, band of `band`
 * rows of a group); lane l takes rows l, l + 32, ... of the band:
 * tab[(kb * 4 + j) * rp + e * rpg + r] (rp = groups x rpg) = the decoded
 * byte of block 4 kb + j of row r of group e (0 for rows past the group or
 * the operand and blocks past K), and the band's record {min, max finite
 * byte, whether every row has one byte over the block, 0} (min 255 and max
 * 0 when none is finite) at flags[(kb * bands + e * rpg / band + bd) * 4]. */
__global__ void fk_mx_tables_kernel(const unsigned char *sy, int rows, int kbs, int band, int gn, int rpg, int groups,
                                    float *tab, unsigned int *flags)
{
    const int lane = threadIdx.x & 31;
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int bpg = rpg / band, bands = groups * bpg, nkb = (kbs + 3) / 4;
    const long long rp = (long long)groups * rpg;
    if (w >= (long long)nkb * bands)
        return;
    const int kb = (int)(w / bands), bb = (int)(w - (long long)kb * bands);
    const int e = bb / bpg, bd = bb - e * bpg;
    const int nb = min(4, kbs - 4 * kb);
    unsigned int lo = 255u, hi = 0u, one = 1u;
    for (int r = bd * band + lane; r < (bd + 1) * band; r += 32) {
        const long long gr = (long long)e * gn + r; /* the row of sy */
        const bool in = r < gn && gr < rows;
        unsigned int b[4] = {0u, 0u, 0u, 0u};
        if (in && nb == 4 && (kbs & 3) == 0 && ((uintptr_t)sy & 3) == 0) { /* one aligned word */
            const uint32_t w4 = *(const uint32_t *)(sy + gr * kbs + 4 * kb);
#pragma unroll
            for (int j = 0; j < 4; j++)
                b[j] = (w4 >> (8 * j)) & 255u;
        } else if (in) {
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (j < nb)
                    b[j] = sy[gr * kbs + 4 * kb + j];
        }
        if (in) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (j < nb && b[j] != 255u) {
                    lo = min(lo, b[j]);
                    hi = max(hi, b[j]);
                }
                if (j < nb && b[j] != b[0])
                    one = 0u;
            }
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
            tab[((long long)kb * 4 + j) * rp + (long long)e * rpg + r] = in && j < nb ? fk_mx_e8m0(b[j]) : 0.0f;
    }
    lo = __reduce_min_sync(0xFFFFFFFFu, lo);
    hi = __reduce_max_sync(0xFFFFFFFFu, hi);
    one = __reduce_and_sync(0xFFFFFFFFu, one);
    if (lane == 0)
        *(uint4 *)(flags + w * 4) = make_uint4(lo, hi, one, 0u);
}

extern "C" fp8kit_status fk_cuda_mx_tables(fp8kit_ctx *ctx, const void *sy, int64_t rows, int64_t k, int band,
                                          int64_t gn, int64_t rpg, void *tab, void *flags, void *stream)
{
    if (rows <= 0 || k <= 0)
        return FP8KIT_OK;
    const int kbs = (int)(k / 32), nkb = (int)((k + 127) / 128);
    const int64_t groups = (rows + gn - 1) / gn;
    const long long warps = (long long)nkb * groups * (rpg / band);
    fk_mx_tables_kernel<<<(unsigned)((warps * 32 + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
        (const unsigned char *)sy, (int)rows, kbs, band, (int)gn, (int)rpg, (int)groups, (float *)tab,
        (unsigned int *)flags);
    FK_CUDA_LAUNCH_CHECK(ctx);
    return FP8KIT_OK;
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
    a.rows = (int)rows;
    a.e5m2 = e5m2;
    a.vec = ((uintptr_t)x % 16 == 0) && ((uintptr_t)y % 16 == 0) && ldx % 16 == 0 && ldy % 16 == 0;
    a.word = (uintptr_t)s % 4 == 0 && (blocked || a.kbs % 4 == 0);
    const long long total = rows * ((a.kbs + 3) / 4) * 8;
    const long long blocks = (total + 511) / 512; /* two items per thread */
    const unsigned grid = (unsigned)(blocks < 65536 ? blocks : 65536);
    fk_mx_norm_kernel<<<grid, 256, 0, st>>>(a);
    FK_CUDA_LAUNCH_CHECK(ctx);
    if (tab) { /* one group of all rows, padded to the band */
        const int b = band > 0 ? band : 128;
        return fk_cuda_mx_tables(ctx, sy, rows, k, b, rows, (rows + b - 1) / b * b, tab, flags, stream);
    }
    return FP8KIT_OK;
}
