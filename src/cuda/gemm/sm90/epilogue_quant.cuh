/* epilogue_quant.cuh - fused output quantization of the Hopper GEMM epilogue (OUTQ_MX and
 * OUTQ_BLOCK1X128): each output row quantized from the accumulator
 * fragment in registers, scales and codes written by the same warps. */
#ifndef FK_SM90_EPILOGUE_QUANT_CUH
#define FK_SM90_EPILOGUE_QUANT_CUH

#include "cuda/gemm/sm90/epilogue_op.cuh"

#ifdef __CUDACC__
/* ------------------------------------------------ fused output quantization
 * (OUTQ_MX: e8m0 scale per 32 columns of each row; OUTQ_BLOCK1X128: f32
 * scale per 128 columns). The wgmma fragment is worked on in registers,
 * 32 columns (one chunk) at a time: thread (warp w, lane l) holds rows
 * r_lo = 16 w + l / 4 and r_lo + 8, columns 8 jj + 2 (l % 4) + {0, 1} of the
 * chunk (jj = 0..3) at y[4 jj + 2 i + e]. The 4 lanes of a fragment row hold
 * all of a chunk's values of their two rows, so a group's amax is a
 * reduction over those 4 lanes, and a 4 x 4 transpose of 16-bit code pairs
 * among them gives each lane 8 consecutive codes of each row: one 8-byte
 * store per row and chunk, 32 contiguous bytes per row and warp store. */

/* y[0 .. N-1] rounded to out_hp (RNE) and widened back, in place: the value
 * docs/spec.md 3 quantizes (fp32 out_hp: unchanged). */
template <int N> static __device__ __forceinline__ void fk_epi_round_hp(float (&y)[N], int hp)
{
    if (hp == FP8KIT_BF16) {
#pragma unroll
        for (int x = 0; x < N; x += 2) {
            const uint32_t w = fk_cvt_bf16x2(y[x], y[x + 1]);
            y[x] = fk_u2f(w << 16);
            y[x + 1] = fk_u2f(w & 0xFFFF0000u);
        }
    } else if (hp == FP8KIT_F16) {
#pragma unroll
        for (int x = 0; x < N; x += 2) {
            const uint32_t w = fk_cvt_f16x2(y[x], y[x + 1]);
            y[x] = fk_epi_f16_f32(w & 0xFFFFu);
            y[x + 1] = fk_epi_f16_f32(w >> 16);
        }
    }
}

/* y of one chunk in place: act(acc * (sa * cf) + bias + beta * C) (cf =
 * alpha * tensor scales * column scale, rounded once from double; sa the
 * row scale or 1; the bias of the unused kind is 0 in the table), rounded to
 * out_hp (RNE) and widened back - the value docs/spec.md 3 quantizes - and 0 in
 * columns past N (they must not reach a group's amax). */
template <int BN>
static __device__ __forceinline__ void fk_epi_rowq_y16(const fk_gemm_params &p, float (&y)[16], const float *tab,
                                                       int row_lo, int n0, int tc0, int q2, float sa_lo, float sa_hi,
                                                       float br_lo, float br_hi)
{
    const float *cf = tab + 2 * BN + 128, *bc = tab + BN;
    if (p.sa_mode != FP8KIT_SCALE_ROW && p.bias_mode != FP8KIT_BIAS_ROW) { /* sa = 1, br = 0 */
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            const int tc = tc0 + 8 * jj + q2;
            const float2 f = *(const float2 *)&cf[tc], b = *(const float2 *)&bc[tc];
            y[4 * jj] = fmaf(y[4 * jj], f.x, b.x);
            y[4 * jj + 1] = fmaf(y[4 * jj + 1], f.y, b.y);
            y[4 * jj + 2] = fmaf(y[4 * jj + 2], f.x, b.x);
            y[4 * jj + 3] = fmaf(y[4 * jj + 3], f.y, b.y);
        }
    } else {
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            const int tc = tc0 + 8 * jj + q2;
            const float2 f = *(const float2 *)&cf[tc], b = *(const float2 *)&bc[tc];
            y[4 * jj] = fmaf(y[4 * jj], sa_lo * f.x, br_lo + b.x);
            y[4 * jj + 1] = fmaf(y[4 * jj + 1], sa_lo * f.y, br_lo + b.y);
            y[4 * jj + 2] = fmaf(y[4 * jj + 2], sa_hi * f.x, br_hi + b.x);
            y[4 * jj + 3] = fmaf(y[4 * jj + 3], sa_hi * f.y, br_hi + b.y);
        }
    }
    if (p.c) {
#pragma unroll
        for (int x = 0; x < 16; x++) {
            const int row = row_lo + 8 * ((x >> 1) & 1), col = n0 + tc0 + 8 * (x >> 2) + q2 + (x & 1);
            if (row < p.m && col < p.n)
                y[x] = fmaf(p.beta, fk_epi_load(p.c, (long long)row * p.ldc + col, p.c_type), y[x]);
        }
    }
    fk_epi_act_n(y, p.act);
    fk_epi_round_hp(y, p.out_hp);
    if (n0 + tc0 + 32 > p.n) {
#pragma unroll
        for (int x = 0; x < 16; x++)
            y[x] = n0 + tc0 + 8 * (x >> 2) + q2 + (x & 1) < p.n ? y[x] : 0.0f;
    }
}

/* max |y| bits (NaN > Inf > finite as unsigned) of this lane's values of
 * one chunk in row r_lo (i = 0) or r_lo + 8 (i = 1), and its maximum over
 * the 4 lanes of the fragment row. */
static __device__ __forceinline__ uint32_t fk_epi_rowq_amax(const float (&y)[16], int i)
{
    uint32_t am = 0;
#pragma unroll
    for (int jj = 0; jj < 4; jj++)
        am = fk_max_u32(am, fk_max_u32(fk_abs_bits(y[4 * jj + 2 * i]), fk_abs_bits(y[4 * jj + 2 * i + 1])));
    return am;
}

static __device__ __forceinline__ uint32_t fk_epi_quad_max(uint32_t am)
{
    am = fk_max_u32(am, __shfl_xor_sync(0xFFFFFFFFu, am, 1));
    return fk_max_u32(am, __shfl_xor_sync(0xFFFFFFFFu, am, 2));
}

/* The 4 x 4 transpose of 16-bit code pairs among the 4 lanes (q = lane % 4)
 * of a fragment row: w0 / w1 hold this lane's pairs of column blocks jj = 0,
 * 1 / 2, 3 of one row; afterwards they hold the 8 codes of block jj = q,
 * i.e. columns 8 q .. 8 q + 7 of the chunk. Two shuffles. */
static __device__ __forceinline__ void fk_epi_quad_transpose(uint32_t &w0, uint32_t &w1, int q)
{
    const int h = q >> 1, b = q & 1;
    const uint32_t lo = 0x5410u, hi = 0x7632u; /* low / high halves of two words */
    const uint32_t keep = h ? w1 : w0;          /* blocks 2h, 2h + 1 from this lane */
    const uint32_t recv = __shfl_xor_sync(0xFFFFFFFFu, h ? w0 : w1, 2); /* ... from lane q ^ 2 */
    const uint32_t mine = fk_epi_prmt(keep, recv, b ? hi : lo);       /* block q from q, q ^ 2 */
    const uint32_t got = __shfl_xor_sync(0xFFFFFFFFu, fk_epi_prmt(keep, recv, b ? lo : hi), 1); /* q ^ 1, q ^ 3 */
    const uint32_t ev = b ? got : mine, od = b ? mine : got; /* from lanes (0, 2) / (1, 3); swapped if h */
    w0 = fk_epi_prmt(ev, od, h ? hi : lo);
    w1 = fk_epi_prmt(ev, od, h ? lo : hi);
}

/* Stores 8 codes (w0, w1) of row `row` at column col (edge: byte stores);
 * rows at or past m_end (p.m, or a group's end) are not stored. */
static __device__ __forceinline__ void fk_epi_rowq_put8(const fk_gemm_params &p, int row, int m_end, int col,
                                                        uint32_t w0, uint32_t w1, bool vec)
{
    if (row >= m_end || col >= p.n)
        return;
    uint8_t *d = (uint8_t *)p.d + (long long)row * p.ldd + col;
    if (vec && col + 8 <= p.n) {
        *(uint2 *)d = make_uint2(w0, w1);
    } else {
        const uint64_t w = ((uint64_t)w1 << 32) | w0;
#pragma unroll 1
        for (int e = 0; e < 8 && col + e < p.n; e++)
            d[e] = (uint8_t)(w >> (8 * e));
    }
}

/* Per-row factor of a group's element step: mx: q = fp8(y * f) with f the
 * scale's reciprocal; block1x128: q = fp8(fl32(y / S)) computed as in
 * quant_common.cuh (fk_div_q: y = fl32(1 / s) once, q0 = y x, two residual
 * steps, the second Markstein's correctly rounded one) for s in
 * [2^-80, 2^80]; S outside that range is first scaled by xs = 2^100 or
 * 2^-100 (s = S xs, x xs: exact, or below 2^-126 where the quotient is far
 * under the smallest fp8 value and only its sign matters). */
struct fk_epi_qf {
    float f, s, xs;
    bool nan; /* NaN / Inf in the group: every code is the canonical NaN */
};

static __device__ __forceinline__ fk_epi_qf fk_epi_qf_div(float S)
{
    fk_epi_qf d;
    d.nan = !(S == S);
    d.xs = S < 0x1p-80f ? 0x1p100f : (S > 0x1p80f ? 0x1p-100f : 1.0f);
    d.s = S * d.xs;
    d.f = 1.0f / d.s;
    return d;
}

template <bool MX> static __device__ __forceinline__ float fk_epi_qval(float x, const fk_epi_qf &d)
{
    if (MX)
        return x * d.f;
    const float xs = x * d.xs;
    float q = xs * d.f;
    q = fmaf(fmaf(-d.s, q, xs), d.f, q);
    q = fmaf(fmaf(-d.s, q, xs), d.f, q);
    return copysignf(q, xs);
}

/* Encodes one chunk y[0 .. 15] with the row factors and stores it (the
 * fp8 type is a branch around the 8 conversions only). */
template <bool MX>
static __device__ __forceinline__ void fk_epi_rowq_codes(const fk_gemm_params &p, const float *y, const fk_epi_qf &lo,
                                                         const fk_epi_qf &hi, int row_lo, int m_end, int col0, int q,
                                                         bool e5, bool vec)
{
    float v[16];
#pragma unroll
    for (int x = 0; x < 16; x++)
        v[x] = fk_epi_qval<MX>(y[x], (x & 2) ? hi : lo);
    uint32_t c[8]; /* pairs: row lo blocks 0-3, row hi blocks 0-3 */
    if (e5) {
#pragma unroll
        for (int x = 0; x < 8; x++)
            c[x] = fk_cvt2<1>(v[4 * (x & 3) + 2 * (x >> 2)], v[4 * (x & 3) + 2 * (x >> 2) + 1]);
    } else {
#pragma unroll
        for (int x = 0; x < 8; x++)
            c[x] = fk_cvt2<0>(v[4 * (x & 3) + 2 * (x >> 2)], v[4 * (x & 3) + 2 * (x >> 2) + 1]);
    }
    const uint32_t nan = e5 ? FK_E5M2_NAN * 0x01010101u : FK_E4M3_NAN * 0x01010101u;
    uint32_t w0 = lo.nan ? nan : c[0] | (c[1] << 16), w1 = lo.nan ? nan : c[2] | (c[3] << 16);
    uint32_t w2 = hi.nan ? nan : c[4] | (c[5] << 16), w3 = hi.nan ? nan : c[6] | (c[7] << 16);
    fk_epi_quad_transpose(w0, w1, q);
    fk_epi_quad_transpose(w2, w3, q);
    fk_epi_rowq_put8(p, row_lo, m_end, col0 + 8 * q, w0, w1, vec);
    fk_epi_rowq_put8(p, row_lo + 8, m_end, col0 + 8 * q, w2, w3, vec);
}

/* mx: scales and codes of one 32-column chunk (= one group) of y. */
static __device__ __forceinline__ void fk_epi_rowq_mx(const fk_gemm_params &p, const float (&y)[16], int row_lo,
                                                      int m_end, int col0, int q, bool e5, bool vec)
{
    const uint8_t s_lo = fk_mx_scale(fk_epi_quad_max(fk_epi_rowq_amax(y, 0)), e5, p.out_rceil);
    const uint8_t s_hi = fk_mx_scale(fk_epi_quad_max(fk_epi_rowq_amax(y, 1)), e5, p.out_rceil);
    if (q == 0) {
        uint8_t *sd = (uint8_t *)p.scale_d_out + col0 / 32;
        const long long ld = p.n / 32;
        if (row_lo < m_end)
            sd[(long long)row_lo * ld] = s_lo;
        if (row_lo + 8 < m_end)
            sd[(long long)(row_lo + 8) * ld] = s_hi;
    }
    fk_epi_qf lo, hi;
    lo.f = fk_mx_recip(s_lo);
    hi.f = fk_mx_recip(s_hi);
    lo.nan = s_lo == 0xFFu;
    hi.nan = s_hi == 0xFFu;
    lo.s = hi.s = lo.xs = hi.xs = 1.0f;
    fk_epi_rowq_codes<true>(p, y, lo, hi, row_lo, m_end, col0, q, e5, vec);
}

/* block1x128: lane q == 0 of each fragment row stores the f32 scales of its
 * rows r_lo and r_lo + 8 for the group starting at column col0 (rows at or
 * past m_end are not stored). */
static __device__ __forceinline__ void fk_epi_put_b128_scales(const fk_gemm_params &p, int row_lo, int m_end, int col0,
                                                              int q, float s_lo, float s_hi)
{
    if (q == 0) {
        float *sd = (float *)p.scale_d_out + col0 / 128;
        const long long ld = (p.n + 127) / 128;
        if (row_lo < m_end)
            sd[(long long)row_lo * ld] = s_lo;
        if (row_lo + 8 < m_end)
            sd[(long long)(row_lo + 8) * ld] = s_hi;
    }
}

/* block1x128: scales and codes of one 128-column group, y[0 .. 63] (its 4
 * chunks in order; chunks past N are skipped); am_lo / am_hi: this lane's
 * amax bits of the group's two rows (taken from the chunks' y before they
 * went to the accumulator registers: a bit cast of those registers here
 * makes the compiler carry them as integers through the main loop, where
 * ptxas then has to wait for every wgmma group). */
static __device__ __forceinline__ void fk_epi_rowq_b128(const fk_gemm_params &p, const float *y, uint32_t am_lo,
                                                        uint32_t am_hi, int row_lo, int m_end, int col0, int q,
                                                        bool e5, bool vec)
{
    const float s_lo = fk_scale_f32(fk_epi_quad_max(am_lo), e5, p.out_pow2);
    const float s_hi = fk_scale_f32(fk_epi_quad_max(am_hi), e5, p.out_pow2);
    fk_epi_put_b128_scales(p, row_lo, m_end, col0, q, s_lo, s_hi);
    const fk_epi_qf lo = fk_epi_qf_div(s_lo), hi = fk_epi_qf_div(s_hi);
#pragma unroll
    for (int c = 0; c < 4; c++)
        if (col0 + 32 * c < p.n)
            fk_epi_rowq_codes<false>(p, y + 16 * c, lo, hi, row_lo, m_end, col0 + 32 * c, q, e5, vec);
}

/* The epilogue with fused output quantization: one compact loop over the
 * tile's 32-column chunks (one copy of the y code whatever the options and
 * the tile width). Each chunk's y (as the other epilogues define it) is
 * computed from acc[0 .. 15]. mx: the chunk is a group: its scales and
 * codes follow, and the next chunk's accumulators move down into
 * acc[0 .. 15]. block1x128 (BN % 128 == 0, which the planner guarantees, so
 * that a group never spans two tiles): the y replace the accumulators while
 * the group's 64 registers rotate by 16, so after the group's 4 chunks they
 * hold its y in order; then its scales and codes, and the next group moves
 * down. Scales through src/format (docs/spec.md 2, as the CPU backend); codes from
 * the hardware conversion (equal to the shared codec); 8-byte code stores
 * where D's base and row stride allow. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_epilogue_rowq(const fk_gemm_params &p, float (&acc)[NACC], float *tab,
                                                        const fk_epi_pre &pre, int m0, int n0, int tid, int bar_id)
{
    const int warp = tid >> 5, lane = tid & 31;
    fk_epi_tab_write<BN>(p, tab, pre, tid);
    fk_named_bar_sync(bar_id, 128);
    const int r_lo = warp * 16 + (lane >> 2), q = lane & 3, q2 = 2 * q, row_lo = m0 + r_lo;
    const bool rowsc = p.sa_mode == FP8KIT_SCALE_ROW;
    const float sa_lo = rowsc ? tab[2 * BN + r_lo] : 1.0f, sa_hi = rowsc ? tab[2 * BN + r_lo + 8] : 1.0f;
    const float br_lo = tab[2 * BN + 64 + r_lo], br_hi = tab[2 * BN + 64 + r_lo + 8];
    const bool e5 = p.d_type == FP8KIT_E5M2, mx = p.out_quant == FP8KIT_OUTQ_MX;
    const bool vec = (((uintptr_t)p.d | (uintptr_t)p.ldd) & 7u) == 0;
    const int width = mx || BN % 128 == 0 ? BN : 0; /* 1x128 needs BN % 128 == 0 (planned so) */
    uint32_t am_lo = 0, am_hi = 0; /* 1x128: the group's amax bits so far */
#pragma unroll 1
    for (int tc0 = 0; tc0 < width && n0 + (mx ? tc0 : tc0 & ~127) < p.n; tc0 += 32) {
        float y[16];
#pragma unroll
        for (int x = 0; x < 16; x++)
            y[x] = acc[x];
        fk_epi_rowq_y16<BN>(p, y, tab, row_lo, n0, tc0, q2, sa_lo, sa_hi, br_lo, br_hi);
        if (mx) {
            fk_epi_rowq_mx(p, y, row_lo, pre.m_end, n0 + tc0, q, e5, vec);
#pragma unroll
            for (int x = 0; x + 16 < NACC; x++)
                acc[x] = acc[x + 16];
        } else if constexpr (BN % 128 == 0) {
            const bool first = (tc0 & 127) == 0;
            am_lo = fk_max_u32(first ? 0u : am_lo, fk_epi_rowq_amax(y, 0));
            am_hi = fk_max_u32(first ? 0u : am_hi, fk_epi_rowq_amax(y, 1));
#pragma unroll
            for (int x = 0; x < 48; x++)
                acc[x] = acc[x + 16];
#pragma unroll
            for (int x = 0; x < 16; x++)
                acc[48 + x] = y[x];
            if ((tc0 & 127) == 96) {
                fk_epi_rowq_b128(p, acc, am_lo, am_hi, row_lo, pre.m_end, n0 + tc0 - 96, q, e5, vec);
#pragma unroll
                for (int x = 0; x + 64 < NACC; x++)
                    acc[x] = acc[x + 64];
            }
        }
    }
    /* every thread is done reading the table before the next tile rewrites it */
    fk_named_bar_sync(bar_id, 128);
}
#endif /* __CUDACC__ */
#endif
