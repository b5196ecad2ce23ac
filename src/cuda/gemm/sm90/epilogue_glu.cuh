/* epilogue_glu.cuh - the epilogue of the gated (swiglu) Hopper GEMM tile (kernels_glu.cu):
 * y of the gate and up halves, D = silu(gate) * up, then the output cast or
 * the fused output quantization (1x128 groups span both consumer
 * warpgroups: their row maxima meet in shared memory). */
#ifndef FK_SM90_EPILOGUE_GLU_CUH
#define FK_SM90_EPILOGUE_GLU_CUH

#include "cuda/gemm/sm90/epilogue_quant.cuh"

#ifdef FK_SM90_DEVICE
/* Named barrier of the two consumer warpgroups' 1x128 exchange (1 and 2 are
 * each warpgroup's, 3 the lag's). */
#define FK_GLU_BAR 4

/* A 1 in global memory: the row factor of the gated tile's main loop when A
 * has no scale (a value ptxas cannot fold; consumer_pipe.cuh's AROW). */
static __device__ float fk_glu_one = 1.0f;

/* AROW's factor of row r: A's row scale, its tensor scale or a 1 (read in
 * every K block). */
static __device__ __forceinline__ const float *fk_glu_arow(const fk_gemm_params &p, int r)
{
    return p.sa_mode == FP8KIT_SCALE_ROW ? p.sa + min(r, p.m - 1) : p.sa_mode == FP8KIT_SCALE_TENSOR ? p.sa : &fk_glu_one;
}

/* alpha x tensor scales x B's scale of a column of y, rounded once from
 * double (as the other epilogues' column factors); 0 past y's columns. sbr:
 * the column's row scale of B (row mode, loaded by the caller); g: the
 * expert (grouped kernel; 0 otherwise), whose tensor scale of B is p.sb[g]. */
static __device__ __forceinline__ float fk_glu_colf(const fk_gemm_params &p, double ar, float sbr, bool ok, bool sa_done,
                                                    int g)
{
    if (!ok)
        return 0.0f;
    if (p.sb_mode != FP8KIT_SCALE_ROW && p.sb_mode != FP8KIT_SCALE_TENSOR && (sa_done || p.sa_mode != FP8KIT_SCALE_TENSOR))
        return p.alpha; /* (ar is alpha, exactly: no double arithmetic) */
    const double sb = p.sb_mode == FP8KIT_SCALE_ROW ? (double)sbr : p.sb_mode == FP8KIT_SCALE_TENSOR ? (double)p.sb[g] : 1.0;
    return (float)(ar * sb);
}

/* Loads v[k] = x[base + c_k] of type `type` (f32 / bf16 / f16) as fp32 for
 * this thread's NC columns c_k = n0 + 8 (k / 2) + q2 + k % 2 (clamped to
 * the last column), all issued before any is used. */
template <int NC>
static __device__ __forceinline__ void fk_glu_cols(float (&v)[NC], const void *x, long long base, int type, int n0,
                                                   int q2, int n)
{
    if (type == FP8KIT_F32) {
#pragma unroll
        for (int k = 0; k < NC; k++)
            v[k] = ((const float *)x)[base + min(n0 + 8 * (k >> 1) + q2 + (k & 1), n - 1)];
    } else {
        uint16_t u[NC];
#pragma unroll
        for (int k = 0; k < NC; k++)
            u[k] = ((const uint16_t *)x)[base + min(n0 + 8 * (k >> 1) + q2 + (k & 1), n - 1)];
#pragma unroll
        for (int k = 0; k < NC; k++)
            v[k] = type == FP8KIT_BF16 ? fk_bf16_to_f32(u[k]) : fk_f16_to_f32(u[k]);
    }
}

/* The 4 x 4 transpose of 32-bit words among the 4 lanes (q = lane % 4) of a
 * fragment row: w[jj] holds this lane's column pair of block jj (columns
 * 8 jj + 2 q, + 1); afterwards w[r] holds lane r's pair of block q, so the
 * lane has columns 8 q .. 8 q + 7 in order. Four shuffles; the rotation by
 * k keeps every register index a select, not a local-memory array. */
static __device__ __forceinline__ uint32_t fk_glu_pick4(const uint32_t (&v)[4], int i)
{
    return i == 0 ? v[0] : i == 1 ? v[1] : i == 2 ? v[2] : v[3];
}
static __device__ __forceinline__ void fk_glu_quad_transpose(uint32_t (&w)[4], int q)
{
    uint32_t o[4]; /* o[k]: the word of lane (q - k) & 3 */
    const int base = (int)(threadIdx.x & ~3u);
#pragma unroll
    for (int k = 0; k < 4; k++)
        o[k] = __shfl_sync(0xFFFFFFFFu, fk_glu_pick4(w, (q + k) & 3), base | ((q - k) & 3));
#pragma unroll
    for (int r = 0; r < 4; r++)
        w[r] = fk_glu_pick4(o, (q - r) & 3);
}

/* The gated tile's epilogue for one consumer warpgroup. acc: its 64 rows
 * (m0 .., stored below m_end: p.m, or the grouped kernel's group end) of
 * y's columns [gate | up] (expert g's B scales and bias: fk_glu_colf), the wgmma fragment of rows warp 16 +
 * lane / 4 + {0, 8}, columns 8 j + 2 (lane % 4) + {0, 1} at acc[4 j + 2 i +
 * e]; the up value of gate acc[x] is acc[x + NACC / 2]. SA_DONE: A's row or
 * tensor scale was applied in the main loop (consumer_pipe.cuh's AROW). n0: D's column of
 * the warpgroup's first (p.n is D's N / 2 columns; y's up column of D's
 * column c is p.glu_up + c). y = acc (sa sb alpha) + bias as the other
 * epilogues (block scales were applied in the main loop), then
 * h = silu(y_gate) y_up with the kernels' silu (epilogue_op.cuh), then the
 * store: cast (OUTQ_NONE / SCALED) or quantization (MX per 32 columns,
 * inside the warpgroup; 1x128 per 128 columns: the two warpgroups' halves,
 * whose row maxima meet in the exchange buffers xch (per warpgroup two
 * buffers of 64 rows, by tile parity `par`, so a warpgroup never writes the
 * one its peer may still read)).
 * PAIR: the paired gated tile (shape.cuh NS 3): the warpgroup holds all 128
 * columns of its rows' 1x128 groups, as two halves (par: 0, 1) in two calls;
 * the first (unless `last`: the item has one half) leaves its values in xch
 * (64 x H fp32, value x of thread t at x 128 + t, conflict-free) and its row
 * maxima in *hold_lo / *hold_hi; the second quantizes both. */
template <int NACC, bool SA_DONE = false, bool PAIR = false>
static __device__ __forceinline__ void fk_glu_epilogue(const fk_gemm_params &p, float (&acc)[NACC], float *xch, int m0,
                                                       int m_end, int g, int n0, int wg, int tid, int par,
                                                       bool last = true, uint32_t *hold_lo = nullptr,
                                                       uint32_t *hold_hi = nullptr)
{
    constexpr int H = NACC / 2; /* values of D per thread: 2 rows x H / 2 columns */
    const int warp = tid >> 5, lane = tid & 31, q = lane & 3, q2 = 2 * q;
    const int r_lo = warp * 16 + (lane >> 2), row_lo = m0 + r_lo;
    const double ar = (double)p.alpha * (!SA_DONE && p.sa_mode == FP8KIT_SCALE_TENSOR ? (double)p.sa[0] : 1.0);
    float sa[2] = {1.0f, 1.0f}, br[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = min(row_lo + 8 * i, p.m - 1);
        if (!SA_DONE && p.sa_mode == FP8KIT_SCALE_ROW)
            sa[i] = p.sa[row];
        if (p.bias_mode == FP8KIT_BIAS_ROW)
            br[i] = fk_epi_load(p.bias, row, p.bias_type);
    }
    const bool colb = p.bias_mode == FP8KIT_BIAS_COL;
    const long long cg = 2LL * g * p.glu_up; /* expert g's row scales of B and bias */
    /* the per-column inputs of this thread's H / 2 columns (k = 2 j + e), gate
     * and up, loaded together up front (one after the other they wait on each
     * other's latency) */
    constexpr int NC = H / 2;
    float sbg[NC] = {}, sbu[NC] = {}, bcg[NC] = {}, bcu[NC] = {};
    if (p.sb_mode == FP8KIT_SCALE_ROW) {
        fk_glu_cols(sbg, p.sb, cg, FP8KIT_F32, n0, q2, p.n);
        fk_glu_cols(sbu, p.sb, cg + p.glu_up, FP8KIT_F32, n0, q2, p.n);
    }
    if (colb) {
        fk_glu_cols(bcg, p.bias, cg, p.bias_type, n0, q2, p.n);
        fk_glu_cols(bcu, p.bias, cg + p.glu_up, p.bias_type, n0, q2, p.n);
    }
    float h[H];
#pragma unroll
    for (int j = 0; j < H / 4; j++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int c = n0 + 8 * j + q2 + e, k = 2 * j + e; /* D's column */
            const bool ok = c < p.n;
            const float fg = fk_glu_colf(p, ar, sbg[k], ok, SA_DONE, g), fu = fk_glu_colf(p, ar, sbu[k], ok, SA_DONE, g);
            const float bg = ok && colb ? bcg[k] : 0.0f;
            const float bu = ok && colb ? bcu[k] : 0.0f;
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int x = 4 * j + 2 * i + e;
                const float g = fmaf(acc[x], sa[i] * fg, br[i] + bg);
                const float u = fmaf(acc[x + H], sa[i] * fu, br[i] + bu);
                h[x] = ok ? fk_epi_ysig(g, fk_act_z(g, 4)) * u : 0.0f;
            }
        }
    }
    const bool quant = p.out_quant == FP8KIT_OUTQ_MX || p.out_quant == FP8KIT_OUTQ_BLOCK1X128;
    const bool h16 = p.d_type == FP8KIT_BF16 || p.d_type == FP8KIT_F16;
    if (!quant && h16 && (((uintptr_t)p.d | (uintptr_t)(2 * p.ldd)) & 15u) == 0) {
        /* 16-bit D: per 4 fragment blocks (32 columns), the quad's transpose gives each lane 8
         * consecutive values of each row: one 16-byte store per row */
        const bool bf = p.d_type == FP8KIT_BF16;
#pragma unroll
        for (int b4 = 0; b4 < H / 16; b4++) {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                uint32_t w[4];
#pragma unroll
                for (int jj = 0; jj < 4; jj++) {
                    const int x = 4 * (4 * b4 + jj) + 2 * i;
                    w[jj] = bf ? fk_cvt_bf16x2(h[x], h[x + 1]) : fk_cvt_f16x2(h[x], h[x + 1]);
                }
                fk_glu_quad_transpose(w, q);
                const int row = row_lo + 8 * i, c = n0 + 32 * b4 + 8 * q;
                if (row >= m_end || c >= p.n)
                    continue;
                uint16_t *d = (uint16_t *)p.d + (long long)row * p.ldd + c;
                if (c + 8 <= p.n) {
                    *(uint4 *)d = make_uint4(w[0], w[1], w[2], w[3]);
                } else {
#pragma unroll 1
                    for (int e = 0; c + e < p.n; e++)
                        d[e] = (uint16_t)(fk_glu_pick4(w, e >> 1) >> (16 * (e & 1)));
                }
            }
        }
        return;
    }
    if (!quant) {
        unsigned int amax = 0;
#pragma unroll
        for (int j = 0; j < H / 4; j++) {
            const int c = n0 + 8 * j + q2;
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int row = row_lo + 8 * i;
                if (row < m_end && c < p.n) {
                    const float y4[4] = {h[4 * j + 2 * i], h[4 * j + 2 * i + 1], 0.0f, 0.0f};
                    fk_epi_store4(p, row, c, y4, min(2, p.n - c), amax);
                }
            }
        }
        if (p.out_quant == FP8KIT_OUTQ_SCALED && p.amax_bits) {
            amax = __reduce_max_sync(0xFFFFFFFFu, amax);
            if (lane == 0 && amax)
                atomicMax(p.amax_bits, amax);
        }
        return;
    }
    fk_epi_round_hp(h, p.out_hp); /* the value docs/spec.md 3 quantizes */
    const bool e5 = p.d_type == FP8KIT_E5M2;
    const bool vec = (((uintptr_t)p.d | (uintptr_t)p.ldd) & 7u) == 0;
    if (p.out_quant == FP8KIT_OUTQ_MX) {
#pragma unroll
        for (int c = 0; c < H / 16; c++) {
            float y[16];
#pragma unroll
            for (int x = 0; x < 16; x++)
                y[x] = h[16 * c + x];
            if (n0 + 32 * c < p.n)
                fk_epi_rowq_mx(p, y, row_lo, m_end, n0 + 32 * c, q, e5, vec);
        }
        return;
    }
    /* 1x128: this warpgroup's half of the group (the planner makes BN 128), then its peer's */
    uint32_t am_lo = 0, am_hi = 0;
#pragma unroll
    for (int x = 0; x < H; x++)
        if (x & 2)
            am_hi = fk_max_u32(am_hi, fk_abs_bits(h[x]));
        else
            am_lo = fk_max_u32(am_lo, fk_abs_bits(h[x]));
    am_lo = fk_epi_quad_max(am_lo);
    am_hi = fk_epi_quad_max(am_hi);
    if constexpr (PAIR) {
        if (par == 0 && !last) { /* the first half: held until the second's maxima are known */
#pragma unroll
            for (int x = 0; x < H; x++)
                xch[x * 128 + tid] = h[x];
            *hold_lo = am_lo;
            *hold_hi = am_hi;
            return;
        }
        if (par == 1) {
            am_lo = fk_max_u32(am_lo, *hold_lo);
            am_hi = fk_max_u32(am_hi, *hold_hi);
        }
        const float s_lo = fk_scale_f32(am_lo, e5, p.out_pow2), s_hi = fk_scale_f32(am_hi, e5, p.out_pow2);
        const int g0 = n0 & ~127; /* the group's first column */
        if (g0 < p.n)
            fk_epi_put_b128_scales(p, row_lo, m_end, g0, q, s_lo, s_hi);
        const fk_epi_qf lo = fk_epi_qf_div(s_lo), hi = fk_epi_qf_div(s_hi);
        if (par == 1) { /* the held first half: columns n0 - 2 H .. */
            float y0[H];
#pragma unroll
            for (int x = 0; x < H; x++)
                y0[x] = xch[x * 128 + tid];
#pragma unroll
            for (int c = 0; c < H / 16; c++)
                fk_epi_rowq_codes<false>(p, y0 + 16 * c, lo, hi, row_lo, m_end, n0 - 2 * H + 32 * c, q, e5, vec);
        }
#pragma unroll
        for (int c = 0; c < H / 16; c++)
            if (n0 + 32 * c < p.n)
                fk_epi_rowq_codes<false>(p, h + 16 * c, lo, hi, row_lo, m_end, n0 + 32 * c, q, e5, vec);
        return;
    }
    uint32_t *x0 = (uint32_t *)(xch - wg * 128); /* [warpgroup][parity][64 rows] */
    if (q == 0) {
        x0[wg * 128 + par * 64 + r_lo] = am_lo;
        x0[wg * 128 + par * 64 + r_lo + 8] = am_hi;
    }
    fk_named_bar_sync(FK_GLU_BAR, 256);
    am_lo = fk_max_u32(am_lo, x0[(wg ^ 1) * 128 + par * 64 + r_lo]);
    am_hi = fk_max_u32(am_hi, x0[(wg ^ 1) * 128 + par * 64 + r_lo + 8]);
    const float s_lo = fk_scale_f32(am_lo, e5, p.out_pow2), s_hi = fk_scale_f32(am_hi, e5, p.out_pow2);
    const int g0 = n0 & ~127; /* the group's first column */
    if (wg == 0 && g0 < p.n)
        fk_epi_put_b128_scales(p, row_lo, m_end, g0, q, s_lo, s_hi);
    const fk_epi_qf lo = fk_epi_qf_div(s_lo), hi = fk_epi_qf_div(s_hi);
#pragma unroll
    for (int c = 0; c < H / 16; c++)
        if (n0 + 32 * c < p.n)
            fk_epi_rowq_codes<false>(p, h + 16 * c, lo, hi, row_lo, m_end, n0 + 32 * c, q, e5, vec);
}
#endif /* FK_SM90_DEVICE */
#endif
