/* quant_colwise.cu - CUDA MXFP8 quantization along axis -2 (blocks of 32 down
 * a column, output transposed: q (E, C, R), scales (E, C, R/32)), and the fused
 * kernel that reads x once and also writes the axis -1 quantization
 * (q (E, R, C), scales (E, R, C/32)) from the same tile.
 *
 * Tiles are 128 rows x 256 bytes of row (128 bf16/f16 or 64 f32 columns). The
 * grid is persistent (as many CTAs of 256 threads as fit); each CTA walks work
 * items gridDim apart, items ordered by supertiles of 8 x 8 tiles. A tile
 * arrives in shared memory by cp.async 16-byte copies, double-buffered: the
 * next item's copies (8 per thread) are in flight while the current tile is
 * processed. The axis -1 blocks are quantized from 16-byte shared reads (4 or 8
 * lanes per block, shuffles). For axis -2 each thread takes a 32-row block of
 * two bf16 columns (32-bit reads, amax on 16-bit pairs) or of one f32/f16
 * column, and writes the codes into a transposed output tile (XOR-swizzled,
 * conflict-free), which goes out with coalesced 16-byte stores. Scales of both
 * axes are staged in shared memory and written as 4-byte words; blocked-layout
 * padding is written as zeros. */
#include <stdlib.h>
#include "cuda/quant_common.cuh"

#define FK_MXT_ROWS 128  /* rows per band: 4 blocks of 32 */
#define FK_MXT_BYTES 256 /* bytes of input row per tile */

struct fk_mxt_args {
    const void *x;
    int64_t xse, xsr, R, C;
    int64_t nbands, ntc; /* tiles per expert: bands of rows, columns */
    int64_t nbg, ntg;    /* supertiles (8 x 8 tiles) per expert */
    int64_t nitems;      /* E * nbg * ntg * 64 */
    int rceil, vin;
    /* axis -1 outputs (fused only) */
    uint8_t *q1;
    int64_t q1se, q1sr;
    int v1, s1word;
    fk_mx_scale_out s1;
    /* axis -2 outputs */
    uint8_t *q2;
    int64_t q2se, q2sr;
    int v2, s2word;
    fk_mx_scale_out s2;
};

template <int DT> static constexpr int fk_mxt_tc() { return FK_MXT_BYTES / fk_in<DT>::SIZE; }

/* ST = 2: two input tiles, the transposed output tile, staged scales of both
 * axes; ST = 3: three input tiles */
template <int DT> static size_t fk_mxt_smem(int st3)
{
    if (st3)
        return 3 * FK_MXT_ROWS * FK_MXT_BYTES;
    return 2 * FK_MXT_ROWS * FK_MXT_BYTES + fk_mxt_tc<DT>() * 128 + fk_mxt_tc<DT>() * 4 + FK_MXT_ROWS * 4;
}

/* Work item -> tile. Items run through supertiles of 8 bands x 8 tile columns,
 * bands fastest inside one, so the CTAs working at the same time complete the
 * 32-byte sectors of both scale outputs (each tile writes 4 bytes of a sector). */
struct fk_mxt_tile {
    int64_t e, band, tc;
    bool valid;
};

__device__ __forceinline__ fk_mxt_tile fk_mxt_decode(const fk_mxt_args &a, int64_t item)
{
    fk_mxt_tile t;
    const int64_t st = item >> 6, w = item & 63, rest = st / a.ntg;
    t.tc = (st - rest * a.ntg) * 8 + (w >> 3);
    t.e = rest / a.nbg;
    t.band = (rest - t.e * a.nbg) * 8 + (w & 7);
    t.valid = t.band < a.nbands && t.tc < a.ntc;
    return t;
}

/* Physical 16-byte chunk of chunk k in row c of the transposed output tile
 * (rows of 128 bytes): XOR swizzle, conflict-free for pairs of rows per lane. */
__device__ __forceinline__ int fk_mxt_swz(int c, int k) { return k ^ ((c >> 1) & 7); }

/* 32 codes (8 words) -> dst, 16-byte stores when aligned (vec). */
__device__ __forceinline__ void fk_mxt_store32(uint8_t *dst, const uint32_t *w, int vec)
{
    if (vec) {
        ((uint4 *)dst)[0] = make_uint4(w[0], w[1], w[2], w[3]);
        ((uint4 *)dst)[1] = make_uint4(w[4], w[5], w[6], w[7]);
        return;
    }
    for (int i = 0; i < 32; i++)
        dst[i] = (uint8_t)(w[i >> 2] >> (8 * (i & 3)));
}

/* ST = 2: two tile buffers, the transposed tile staged in shared memory and
 * written coalesced, scales staged and written as words. ST = 3: three tile
 * buffers (two tiles in flight while one is processed), codes and scales
 * stored straight from registers (32 bytes per column block: whole sectors). */
template <int DT, int E5, bool ROW, int ST>
__global__ void __launch_bounds__(FK_THREADS, 2) fk_mxt_kernel(const fk_mxt_args a)
{
    using In = fk_in<DT>;
    constexpr int V = In::V, SZ = In::SIZE;
    constexpr int TC = FK_MXT_BYTES / SZ;  /* columns per tile */
    constexpr int CPR = FK_MXT_BYTES / 16; /* chunks per tile row: 16 */
    constexpr int RPP = FK_THREADS / CPR;  /* rows per load pass: 16 */
    constexpr int LPT = FK_MXT_ROWS / RPP; /* loads per thread: 8 */
    constexpr int GL = 32 / V;             /* lanes per axis -1 block */
    constexpr int S1B = TC / 32;           /* axis -1 scale bytes per row and tile */
    extern __shared__ uint4 fk_mxt_smem_raw[];
    uint8_t *in_s0 = (uint8_t *)fk_mxt_smem_raw; /* ST tile buffers */
    uint8_t *out_s = in_s0 + ST * FK_MXT_ROWS * FK_MXT_BYTES;
    uint8_t *s2_s = out_s + TC * 128;
    uint8_t *s1_s = s2_s + TC * 4;
    const int t = threadIdx.x, lane = t & 31;
    const int cc = t % CPR, rr0 = t / CPR;

    /* Tile of `item` -> buffer `buf`: asynchronous 16-byte copies (zero-filled
     * past the edges) when rows are 16-byte aligned, else plain loads. */
    auto load_tile = [&](int64_t item, int buf) {
        const fk_mxt_tile tl = fk_mxt_decode(a, item);
        if (item < a.nitems && tl.valid) {
            uint8_t *bp = in_s0 + buf * FK_MXT_ROWS * FK_MXT_BYTES;
            const char *xe = (const char *)a.x + tl.e * a.xse * SZ;
            const int64_t r0 = tl.band * FK_MXT_ROWS, c0 = tl.tc * TC;
#pragma unroll
            for (int j = 0; j < LPT; j++) {
                const int64_t r = r0 + rr0 + j * RPP, c = c0 + cc * V;
                int n = (int)(a.C - c < V ? a.C - c : V);
                if (r >= a.R || n < 0)
                    n = 0;
                uint8_t *dst = bp + (rr0 + j * RPP) * FK_MXT_BYTES + cc * 16;
                if (a.vin)
                    fk_cp_async16(dst, n > 0 ? xe + (r * a.xsr + c) * SZ : a.x, n * SZ);
                else
                    *(uint4 *)dst = n > 0 ? fk_load_chunk<DT>(xe + (r * a.xsr + c) * SZ, n, false)
                                          : make_uint4(0, 0, 0, 0);
            }
        }
        fk_cp_async_commit();
    };

    int64_t item = blockIdx.x;
    load_tile(item, 0);
    if (ST == 3)
        load_tile(item + gridDim.x, 1);
    for (int it = 0; item < a.nitems; item += gridDim.x, it++) {
        if (ST == 3) { /* the two next tiles are in flight while this one is processed */
            load_tile(item + 2 * (int64_t)gridDim.x, (it + 2) % 3);
            fk_cp_async_wait<2>();
        } else { /* the next tile is in flight while this one is processed */
            load_tile(item + gridDim.x, (it + 1) & 1);
            fk_cp_async_wait<1>();
        }
        __syncthreads();
        const fk_mxt_tile tl = fk_mxt_decode(a, item);
        if (tl.valid) { /* uniform over the CTA */
            const uint8_t *in_s = in_s0 + (it % ST) * FK_MXT_ROWS * FK_MXT_BYTES;
            uint8_t *q2e = a.q2 + tl.e * a.q2se;
            const int64_t e = tl.e, r0 = tl.band * FK_MXT_ROWS, c0 = tl.tc * TC;
            const int nblk = (int)((a.R - r0) / 32 < 4 ? (a.R - r0) / 32 : 4); /* R % 32 == 0 */

            if (ROW) { /* axis -1: blocks of 32 along the row (4 or 8 lanes) */
#pragma unroll 2
                for (int j = 0; j < LPT; j++) {
                    const int64_t r = r0 + rr0 + j * RPP, c = c0 + cc * V;
                    const uint4 raw = *(const uint4 *)(in_s + (rr0 + j * RPP) * FK_MXT_BYTES + cc * 16);
                    float f[V];
                    In::unpack(raw, f);
                    uint32_t m = fk_chunk_amax<DT>(raw, f);
#pragma unroll
                    for (int o = 1; o < GL; o <<= 1)
                        m = fk_max_u32(m, __shfl_xor_sync(0xffffffffu, m, o));
                    const uint8_t sb = fk_mx_scale(m, E5, a.rceil);
                    uint32_t w[2] = {0, 0};
                    fk_quant_mx_words<E5, V>(f, fk_mx_recip(sb), sb == 0xFFu, w);
                    if (r < a.R && c < a.C) { /* C % 32 == 0: whole chunks */
                        fk_store_codes(a.q1 + e * a.q1se + r * a.q1sr + c, w[0], w[1], V, V, a.v1);
                        if (lane % GL == 0) {
                            if (ST == 3)
                                fk_mx_scale_store(a.s1, e, r, c / 32, sb);
                            else
                                s1_s[(rr0 + j * RPP) * 4 + (cc * V) / 32] = sb;
                        }
                    }
                }
            }

            /* axis -2: 32-row column blocks -> the transposed tile out_s */
            if constexpr (DT == FP8KIT_BF16) { /* a pair of columns per thread: 32-bit reads */
                const int cp = t & 63, b = t >> 6;
                if (b < nblk && c0 + 2 * cp < a.C) {
                    const uint32_t *col = (const uint32_t *)(in_s + 32 * b * FK_MXT_BYTES) + cp;
                    uint32_t m2 = 0;
#pragma unroll
                    for (int i = 0; i < 32; i++)
                        m2 = __vmaxu2(m2, col[i * 64] & 0x7FFF7FFFu);
                    const uint8_t sb0 = fk_mx_scale((m2 & 0xFFFFu) << 16, E5, a.rceil);
                    const uint8_t sb1 = fk_mx_scale((m2 >> 16) << 16, E5, a.rceil);
                    const float rc0 = fk_mx_recip(sb0), rc1 = fk_mx_recip(sb1);
                    uint32_t w0[8], w1[8];
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        float f0[4], f1[4];
#pragma unroll
                        for (int k = 0; k < 4; k++) {
                            const uint32_t v = col[(4 * i + k) * 64];
                            f0[k] = fk_bf16_to_f32((uint16_t)(v & 0xFFFFu));
                            f1[k] = fk_bf16_to_f32((uint16_t)(v >> 16));
                        }
                        fk_quant_mx_words<E5, 4>(f0, rc0, sb0 == 0xFFu, &w0[i]);
                        fk_quant_mx_words<E5, 4>(f1, rc1, sb1 == 0xFFu, &w1[i]);
                    }
                    if (ST == 3) {
                        fk_mxt_store32(q2e + (c0 + 2 * cp) * a.q2sr + r0 + 32 * b, w0, a.v2);
                        fk_mx_scale_store(a.s2, e, c0 + 2 * cp, r0 / 32 + b, sb0);
                        if (c0 + 2 * cp + 1 < a.C) {
                            fk_mxt_store32(q2e + (c0 + 2 * cp + 1) * a.q2sr + r0 + 32 * b, w1, a.v2);
                            fk_mx_scale_store(a.s2, e, c0 + 2 * cp + 1, r0 / 32 + b, sb1);
                        }
                    } else {
                    uint8_t *o0 = out_s + (2 * cp) * 128, *o1 = o0 + 128;
                    const int sw = cp & 7;
                    *(uint4 *)(o0 + ((2 * b) ^ sw) * 16) = make_uint4(w0[0], w0[1], w0[2], w0[3]);
                    *(uint4 *)(o0 + ((2 * b + 1) ^ sw) * 16) = make_uint4(w0[4], w0[5], w0[6], w0[7]);
                    *(uint4 *)(o1 + ((2 * b) ^ sw) * 16) = make_uint4(w1[0], w1[1], w1[2], w1[3]);
                    *(uint4 *)(o1 + ((2 * b + 1) ^ sw) * 16) = make_uint4(w1[4], w1[5], w1[6], w1[7]);
                    s2_s[(2 * cp) * 4 + b] = sb0;
                    s2_s[(2 * cp + 1) * 4 + b] = sb1;
                    }
                }
            } else { /* one column per thread */
                for (int p = t; p < TC * 4; p += FK_THREADS) {
                    const int c = p % TC, b = p / TC;
                    if (c0 + c >= a.C || b >= nblk)
                        continue;
                    const uint8_t *col = in_s + 32 * b * FK_MXT_BYTES;
                    uint32_t m = 0;
#pragma unroll
                    for (int i = 0; i < 32; i++)
                        m = fk_max_u32(m, fk_abs_bits(In::elem(col + i * FK_MXT_BYTES, c)));
                    const uint8_t sb = fk_mx_scale(m, E5, a.rceil);
                    const float rc = fk_mx_recip(sb);
                    uint32_t w[8];
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        float f[4];
#pragma unroll
                        for (int k = 0; k < 4; k++)
                            f[k] = In::elem(col + (4 * i + k) * FK_MXT_BYTES, c);
                        fk_quant_mx_words<E5, 4>(f, rc, sb == 0xFFu, &w[i]);
                    }
                    if (ST == 3) {
                        fk_mxt_store32(q2e + (c0 + c) * a.q2sr + r0 + 32 * b, w, a.v2);
                        fk_mx_scale_store(a.s2, e, c0 + c, r0 / 32 + b, sb);
                        continue;
                    }
                    uint8_t *o = out_s + c * 128;
                    *(uint4 *)(o + fk_mxt_swz(c, 2 * b) * 16) = make_uint4(w[0], w[1], w[2], w[3]);
                    *(uint4 *)(o + fk_mxt_swz(c, 2 * b + 1) * 16) = make_uint4(w[4], w[5], w[6], w[7]);
                    s2_s[c * 4 + b] = sb;
                }
            }
            if constexpr (ST != 3) { /* staged outputs */
            __syncthreads();

            /* transposed tile rows (columns of x) -> q2, 16 bytes per thread */
            for (int p = t; p < TC * 8; p += FK_THREADS) {
                const int c = p / 8, k = p % 8;
                if (c0 + c >= a.C || k >= nblk * 2)
                    continue;
                const uint4 v = *(const uint4 *)(out_s + c * 128 + fk_mxt_swz(c, k) * 16);
                uint8_t *dst = q2e + (c0 + c) * a.q2sr + r0 + 16 * k;
                if (a.v2) {
                    *(uint4 *)dst = v;
                } else {
                    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
                    for (int i = 0; i < 16; i++)
                        dst[i] = (uint8_t)(w[i >> 2] >> (8 * (i & 3)));
                }
            }
            /* axis -2 scales: 4 bytes (blocks r0/32 .. +3) per column */
            for (int c = t; c < TC; c += FK_THREADS) {
                const int64_t cg = c0 + c, rb = r0 / 32;
                if (cg >= a.C)
                    continue;
                const uint32_t word = *(const uint32_t *)(s2_s + c * 4);
                const fk_mx_scale_out &o = a.s2;
                if (nblk == 4 && a.s2word && !o.blocked) {
                    *(uint32_t *)(o.p + (e * o.R + cg) * o.C32 + rb) = word;
                } else if (nblk == 4 && a.s2word && o.blocked && cg != o.R - 1 && rb + 3 != o.C32 - 1) {
                    *(uint32_t *)(o.p + e * o.Rp * o.Cp + fk_blocked_offset(cg, rb, o.Cp)) = word;
                } else {
                    for (int b = 0; b < nblk; b++)
                        fk_mx_scale_store(o, e, cg, rb + b, s2_s[c * 4 + b]);
                }
            }
            /* axis -1 scales: S1B bytes (blocks c0/32 ..) per row; the blocked
             * layout's padding rows [R, Rp) and columns [C32, Cp) as zeros */
            if (ROW && t < FK_MXT_ROWS) {
                const fk_mx_scale_out &o = a.s1;
                const int64_t r = r0 + t, cb = c0 / 32;
                uint32_t word = 0;
                if (r < a.R) {
                    for (int k = 0; k < S1B; k++)
                        if (cb + k < o.C32)
                            word |= (uint32_t)s1_s[t * 4 + k] << (8 * k);
                }
                if (o.blocked && r < o.Rp) {
                    uint8_t *be = o.p + e * o.Rp * o.Cp;
                    if (S1B == 4 && a.s1word) {
                        *(uint32_t *)(be + fk_blocked_offset(r, cb, o.Cp)) = word;
                    } else {
                        for (int k = 0; k < S1B; k++)
                            be[fk_blocked_offset(r, cb + k, o.Cp)] = (uint8_t)(word >> (8 * k));
                    }
                    if (tl.tc == a.ntc - 1)
                        for (int64_t k = cb + S1B; k < o.Cp; k++)
                            be[fk_blocked_offset(r, k, o.Cp)] = 0;
                } else if (!o.blocked && r < a.R) {
                    uint8_t *dst = o.p + (e * o.R + r) * o.C32 + cb;
                    if (S1B == 4 && a.s1word && cb + 4 <= o.C32) {
                        *(uint32_t *)dst = word;
                    } else {
                        for (int k = 0; k < S1B && cb + k < o.C32; k++)
                            dst[k] = (uint8_t)(word >> (8 * k));
                    }
                }
            }
            }
        }
        __syncthreads();
    }
}

/* ------------------------------------------------------------------ host */

typedef void (*fk_mxt_fn)(const fk_mxt_args);

template <int DT, bool ROW> static fk_mxt_fn fk_mxt_pick2(int e5, int st3)
{
    if (st3)
        return e5 ? fk_mxt_kernel<DT, 1, ROW, 3> : fk_mxt_kernel<DT, 0, ROW, 3>;
    return e5 ? fk_mxt_kernel<DT, 1, ROW, 2> : fk_mxt_kernel<DT, 0, ROW, 2>;
}

template <bool ROW> static fk_mxt_fn fk_mxt_pick(fp8kit_dtype t, int e5, int st3, size_t *smem)
{
    switch (t) {
    case FP8KIT_F32: *smem = fk_mxt_smem<FP8KIT_F32>(st3); return fk_mxt_pick2<FP8KIT_F32, ROW>(e5, st3);
    case FP8KIT_F16: *smem = fk_mxt_smem<FP8KIT_F16>(st3); return fk_mxt_pick2<FP8KIT_F16, ROW>(e5, st3);
    default: *smem = fk_mxt_smem<FP8KIT_BF16>(st3); return fk_mxt_pick2<FP8KIT_BF16, ROW>(e5, st3);
    }
}

static void fk_mxt_scale_out(const fk_quant_job *job, int64_t rows, int64_t c32, fk_mx_scale_out *o)
{
    o->p = (uint8_t *)job->scale;
    o->R = rows;
    o->C32 = c32;
    o->blocked = job->desc.scale_layout == FP8KIT_LAYOUT_BLOCKED;
    o->Rp = o->blocked ? fk_blocked_rows(rows) : rows;
    o->Cp = o->blocked ? fk_blocked_cols(c32) : c32;
}

static bool fk_same_input(const fk_mat &a, const fk_mat &b)
{
    return a.data == b.data && a.dtype == b.dtype && a.E == b.E && a.R == b.R && a.C == b.C && a.se == b.se &&
           a.sr == b.sr;
}

extern "C" fp8kit_status fk_cuda_quantize_mx_both(fp8kit_ctx *ctx, const fk_quant_job *rowwise,
                                                  const fk_quant_job *colwise, cudaStream_t s)
{
    if (!colwise) {
        if (!rowwise)
            return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "cuda mx: no job");
        return fk_cuda_quant_seg(ctx, rowwise, s);
    }
    const fk_quant_job *cj = colwise;
    const fk_mat &x = cj->x;
    if (cj->desc.scheme != FP8KIT_SCHEME_MX || cj->desc.axis != -2 || x.R % 32)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "cuda mx: the column-wise job is not an mx axis -2 job");
    if (rowwise) {
        const fk_quant_job *rj = rowwise;
        if (rj->desc.scheme != FP8KIT_SCHEME_MX || rj->desc.axis != -1 || x.C % 32 || !fk_same_input(x, rj->x) ||
            rj->e5m2 != cj->e5m2 || rj->desc.rounding != cj->desc.rounding)
            return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                           "cuda mx: the fused jobs must be mx axis -1 and axis -2 of the same input, element "
                           "format and rounding");
    }
    const int64_t TC = FK_MXT_BYTES / (int64_t)fk_dtype_bytes(x.dtype);
    fk_mxt_args a;
    memset(&a, 0, sizeof a);
    a.x = x.data;
    a.xse = x.se;
    a.xsr = x.sr;
    a.R = x.R;
    a.C = x.C;
    a.nbands = fk_ceil_div(x.R, FK_MXT_ROWS);
    a.ntc = fk_ceil_div(x.C, TC);
    a.nbg = fk_ceil_div(a.nbands, 8);
    a.ntg = fk_ceil_div(a.ntc, 8);
    a.nitems = x.E * a.nbg * a.ntg * 64;
    a.rceil = cj->desc.rounding == FP8KIT_ROUND_RCEIL;
    a.vin = fk_mat_vec_ok(x, 16);
    a.q2 = (uint8_t *)cj->q.data;
    a.q2se = cj->q.se;
    a.q2sr = cj->q.sr;
    a.v2 = fk_aligned(a.q2, 16) && a.q2sr % 16 == 0 && a.q2se % 16 == 0;
    fk_mxt_scale_out(cj, x.C, x.R / 32, &a.s2);
    a.s2word = fk_aligned(a.s2.p, 4) && (a.s2.blocked || a.s2.C32 % 4 == 0);
    if (rowwise) {
        const int V = x.dtype == FP8KIT_F32 ? 4 : 8;
        a.q1 = (uint8_t *)rowwise->q.data;
        a.q1se = rowwise->q.se;
        a.q1sr = rowwise->q.sr;
        a.v1 = fk_aligned(a.q1, V) && a.q1sr % V == 0 && a.q1se % V == 0;
        fk_mxt_scale_out(rowwise, x.R, x.C / 32, &a.s1);
        a.s1word = fk_aligned(a.s1.p, 4) && (a.s1.blocked || a.s1.C32 % 4 == 0);
    }
    size_t smem = 0;
    /* FK_MXT_STAGES=3 selects the three-stage variant (experiment; see perf-quant.md) */
    const char *ev = getenv("FK_MXT_STAGES");
    const int st3 = ev && ev[0] == '3';
    fk_mxt_fn k = rowwise ? fk_mxt_pick<true>(x.dtype, cj->e5m2, st3, &smem)
                          : fk_mxt_pick<false>(x.dtype, cj->e5m2, st3, &smem);
    FK_CUDA_CHECK(ctx, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    FK_CUDA_CHECK(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, FK_THREADS, smem));
    /* persistent: as many CTAs as fit at once, each walks items gridDim apart */
    int64_t grid = (int64_t)(per_sm > 0 ? per_sm : 1) * fk_cuda(ctx)->sm_count;
    if (grid > a.nitems)
        grid = a.nitems;
    k<<<(unsigned)grid, FK_THREADS, smem, s>>>(a);
    FK_CUDA_LAUNCH_CHECK(ctx);
    return FP8KIT_OK;
}
