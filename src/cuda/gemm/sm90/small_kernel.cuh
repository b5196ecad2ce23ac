/* small_kernel.cuh - the kernel of the small-M (decode, M <= 128) Hopper fp8 GEMM
 * (the sm90_small family; its planner and launch are in small.cu).
 *
 * A and B are swapped: rows of B fill the 64-row side of wgmma, the M rows of
 * A its N side (NT = 32, 64 or 128 rows of A per stage, zero-filled past M by
 * TMA), so the kernel computes tiles of D^T. Each CTA owns a band of R rows
 * of B (R = 1..128; the planner picks multiples of 8 by a cost model); the K
 * range of a band may be split over the `split` CTAs of a thread-block
 * cluster (1, 2 or 4), whose fp32 partial sums meet in shared memory and are
 * added through distributed shared memory in rank order (deterministic, no
 * workspace). Optionally (tuning small_mc=2) two bands share A's loads by TMA
 * multicast inside the cluster.
 *
 * CTA: 384 threads. Warpgroup 2 is the producer (one thread issues the TMA
 * loads of the band's B box (R x 128 bytes) and A's box per 128-deep K
 * block into a ring of shared-memory stages, full/empty mbarriers).
 * Warpgroups 0 and 1 consume: either each multiplies one 64-row group of
 * the band (R > 64), or - column split, M > 32 and R <= 64 - each takes
 * half of A's rows; with wgmma N <= 64 a consumer keeps two accumulator
 * sets so that K block i's wgmma overlap block i - 1's fp32 promotion
 * (every 128 of K: precise accumulation). After the main loop the
 * accumulators go transposed into the (now free) ring as an M x R fp32
 * tile; then the 256 consumer threads - with split > 1 each CTA a 1/split
 * share of the tile, reading every split peer's tile - add the partials
 * and run the fused epilogue (gemm/sm90/epilogue_op.cuh's per-element functions:
 * tensor/row scales - A's row scale is per row of D -, alpha, beta*C, bias,
 * activation, output cast, OUTQ_SCALED with amax), 4 adjacent columns of
 * one row of D per thread, coalesced; the common case (bf16 D, no C, bias,
 * activation) runs a short copy of that code (fk_small_out4_plain): the
 * general one, executed a few times per thread, cost 1-2.5 us per call in
 * instruction latency and instruction-cache misses (H100 %globaltimer
 * trace, 2026-11-25). An idle producer warp puts the tensor scales into
 * shared memory during the main loop (fk_small_warm), and the row scales of
 * the CTA's rows of A and B with them.
 * Launched with programmatic dependent launch: the CTAs of the next call
 * start as SMs free up, prefetch their first K blocks of B into L2 and
 * wait (griddepcontrol.wait) before any other global access.
 * Block scaling stays on the general kernel. */
#ifndef FK_SM90_SMALL_KERNEL_CUH
#define FK_SM90_SMALL_KERNEL_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/cuda_state.h"
#include "cuda/gemm/sm90/epilogue_op.cuh"
#include "cuda/gemm/sm90/mma.cuh"
#include "cuda/gemm/family.h"
#include "cuda/gemm/sm90/small.h"
#include "cuda/gemm/store.h"
#include "cuda/ptx/ptx.cuh"
#include "cuda/gemm/sm90/small_choose.h"


/* FK_SMALL_TRACE (a build flag for experiments, off in every build):
 * %globaltimer stamps per CTA at the kernel's phases, read back through
 * fk_small_trace_get. */
#ifdef FK_SMALL_TRACE
__device__ unsigned long long fk_small_trace_buf[1024][12];
#define FK_TR(i)                                                                   \
    do {                                                                           \
        const unsigned long long t_ = fk_globaltimer();                            \
        if (blockIdx.x < 1024)                                                     \
            fk_small_trace_buf[blockIdx.x][i] = t_;                                \
    } while (0)
#else
#define FK_TR(i) \
    do {         \
    } while (0)
#endif

#define FK_SMALL_MAXST 16       /* ring stages at most */
#define FK_SMALL_DEPTH 8        /* ring stages by default (tuning small_stages) */
#define FK_SMALL_SMEM 232448    /* dynamic shared memory requested (227 KB) */
#define FK_SMALL_THREADS 384

/* What the kernel needs besides fk_gemm_params. */
struct fk_small_params {
    int r;        /* rows of B per band (1..128; over 64: two 64-row groups, fk_small_bw) */
    int w;        /* multiplying warpgroups: the band's 64-row groups, or 2 with column split */
    int split;    /* CTAs of a cluster sharing a band's K range */
    int mc;       /* bands per cluster sharing A's loads by TMA multicast (1, 2) */
    int stages;   /* ring depth */
    int kb_total; /* ceil(K / 128) */
    int pf;       /* K blocks of B prefetched into L2 before the previous grid ends (PDL) */
    int mh;       /* parts of M (1, 2): part h takes A's rows h NT.. (grid: mh x the CTAs of one part) */
    int ra;       /* rows of A landing in a stage: NT, or M rounded up to 8 when that is fewer (mc = mh = 1;
                   * the rows past it keep stale bytes that only reach sums of rows past M) */
    int flags;    /* FK_SMALL_ROT: each cluster starts its K range at its own offset (A's
                   * reads spread over L2); FK_SMALL_BNOHINT: B loads without the
                   * evict-first L2 hint */
};
#define FK_SMALL_ROT 1
#define FK_SMALL_BNOHINT 2
#define FK_SMALL_NOPP 4 /* one accumulator set (N <= 64 use two by default) */
#define FK_SMALL_NOPLAIN 16 /* the general epilogue code also for the plain case (fk_small_plain) */
#define FK_SMALL_EXITREL 32 /* the last cluster barrier with release / acquire semantics */

#ifdef FK_SM90_DEVICE
/* WAB: wgmma's type pair, wgmma A = our B, wgmma B = our A. */
template <int NW, int WAB>
static __device__ __forceinline__ void fk_small_mma(float *d, uint64_t da, uint64_t db, int sd)
{
    fk_wgmma<NW, WAB>::mma(d, da, db, sd);
}

/* Scales, epilogue and store of 4 adjacent sums v of row m, columns n.. of D. */
static __device__ __forceinline__ void fk_small_out4(const fk_gemm_params &p, float4 v, int m, int n,
                                                     int nv, float sa_t, float sb_t, unsigned int &amax)
{
    const float sa = p.sa_mode == FP8KIT_SCALE_ROW ? p.sa[m] : sa_t;
    const float brow = p.bias_mode == FP8KIT_BIAS_ROW ? fk_epi_load(p.bias, m, p.bias_type) : 0.0f;
    const float a[4] = {v.x, v.y, v.z, v.w};
    float y[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const bool ok = e < nv;
        const int cc = ok ? n + e : n; /* never read past N */
        const float colf = p.sb_mode == FP8KIT_SCALE_ROW ? p.sb[cc] : sb_t;
        const float bias = p.bias_mode == FP8KIT_BIAS_ROW   ? brow
                           : p.bias_mode == FP8KIT_BIAS_COL ? fk_epi_load(p.bias, cc, p.bias_type)
                                                            : 0.0f;
        /* scale product in double, one rounding to fp32 (as the CPU backend) */
        const float s = (float)((double)a[e] * ((double)sa * colf));
        y[e] = fk_epi_value(p, s, m, cc, bias);
    }
    fk_epi_store4(p, m, n, y, nv, amax);
}

/* The epilogue without C, bias, activation or output quantization, to bf16
 * (fk_small_out4 restricted to that case, bit for bit). */
static __device__ __forceinline__ bool fk_small_plain(const fk_gemm_params &p)
{
    return !p.c && !p.bias && !p.act && p.out_quant == FP8KIT_OUTQ_NONE && p.d_type == FP8KIT_BF16;
}

/* m, n: D's row and column; sa_row[ml] / sb_col[c] the row scales of row
 * ml / column c of the CTA's part / band (ml = m - m0, c = n - n0). */
static __device__ __forceinline__ void fk_small_out4_plain(const fk_gemm_params &p, float4 v, int m, int n,
                                                           int nv, float sa_t, float sb_t, const float *sa_row,
                                                           int ml, const float *sb_col, int c)
{
    const float sa = p.sa_mode == FP8KIT_SCALE_ROW ? sa_row[ml] : sa_t;
    const float a[4] = {v.x, v.y, v.z, v.w};
    uint16_t h[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const float colf = p.sb_mode == FP8KIT_SCALE_ROW ? sb_col[e < nv ? c + e : c] : sb_t;
        h[e] = fk_f32_to_bf16(p.alpha * (float)((double)a[e] * ((double)sa * colf)));
    }
    uint16_t *d = (uint16_t *)p.d + (long long)m * p.ldd + n;
    if (nv == 4 && ((uintptr_t)d & 7u) == 0) {
        *(uint2 *)d = make_uint2((uint32_t)h[0] | ((uint32_t)h[1] << 16), (uint32_t)h[2] | ((uint32_t)h[3] << 16));
    } else {
        for (int e = 0; e < nv; e++)
            d[e] = h[e];
    }
}
#endif

/* Run by an idle producer warp while the main loop streams B: the scales go
 * into shared memory - sc[0], sc[1] the tensor scales (1 for other modes),
 * sc[FK_SMALL_SC_A + i] A's row scale of the part's row i (rows of them),
 * sc[FK_SMALL_SC_B + c] B's of the band's row c (cols of them) - and the
 * epilogue's parameters are read once, so that the epilogue after the loop
 * finds them in shared memory and the SM's constant cache instead of waiting
 * on misses. */
#define FK_SMALL_SC_A 4
#define FK_SMALL_SC_B (FK_SMALL_SC_A + 128)
#define FK_SMALL_WARM_FLOATS (FK_SMALL_SC_B + 128)
#ifdef FK_SM90_DEVICE
static __device__ __forceinline__ void fk_small_warm(const fk_gemm_params &p, float *sc, int lane, int m0,
                                                     int rows, int n0, int cols)
{
    if (lane == 0) {
        sc[0] = p.sa_mode == FP8KIT_SCALE_TENSOR ? p.sa[0] : 1.0f;
        sc[1] = p.sb_mode == FP8KIT_SCALE_TENSOR ? p.sb[0] : 1.0f;
        fk_keep_live(p.d, p.ldd, p.d_type, p.out_quant, p.act, p.bias_mode, p.alpha, p.beta);
    }
    if (p.sa_mode == FP8KIT_SCALE_ROW)
        for (int i = lane; i < rows; i += 32)
            sc[FK_SMALL_SC_A + i] = p.sa[m0 + i];
    if (p.sb_mode == FP8KIT_SCALE_ROW)
        for (int i = lane; i < cols; i += 32)
            sc[FK_SMALL_SC_B + i] = p.sb[n0 + i];
}
#endif

/* NW: wgmma N of one warpgroup; CS: the two warpgroups split A's rows (2 NW
 * of them) over one 64-row group of B, instead of taking one 64-row group
 * of B each over all NW rows of A. */
template <int NW, int WAB, bool CS>
__global__ void __launch_bounds__(FK_SMALL_THREADS, 1)
    fk_small_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                    const __grid_constant__ fk_gemm_params p, const __grid_constant__ fk_small_params q)
{
#ifdef FK_SM90_DEVICE
    constexpr int NT = CS ? 2 * NW : NW; /* rows of A per stage */
    extern __shared__ __align__(1024) unsigned char fk_smem[];
    if (threadIdx.x == 0)
        FK_TR(0);
    const uint32_t raw = fk_smem_addr(fk_smem);
    const uint32_t base = (raw + 1023u) & ~1023u;
    float *tile = (float *)(fk_smem + (base - raw)); /* M x R partial sums, after the main loop */
    const int bw = fk_small_bw(q.r);
    const uint32_t bslot = (uint32_t)bw * 64u * 128u, aslot = NT * 128u;
    const uint32_t sb0 = base, sa0 = base + q.stages * bslot;
    const uint32_t full0 = sa0 + q.stages * aslot, empty0 = full0 + 8 * FK_SMALL_MAXST;
    const int split = q.split, mc = q.mc, csize = split * mc;
    /* cluster rank = band-in-cluster j * split + K-split rank sr */
    const int rank = csize > 1 ? (int)fk_cluster_ctarank() : 0;
    const int sr = rank % split, j = rank / split;
    /* M part h (its CTAs are consecutive, whole clusters) and this CTA's index in it */
    const int part_ctas = (int)gridDim.x / q.mh, h = (int)blockIdx.x / part_ctas;
    const int cta = (int)blockIdx.x - h * part_ctas, m0 = h * NT;
    const int n0 = (cta / csize * mc + j) * q.r;
    const int kb0 = (int)((long long)sr * q.kb_total / split);
    const int kb1 = (int)((long long)(sr + 1) * q.kb_total / split);
    const int nk = kb1 - kb0;
    /* K blocks run kb0 + (i + kr) % nk, i = 0..nk-1: with rot, the clusters
     * start spread evenly over the range, so that at any time they read
     * different K blocks of A (all CTAs on the same lines of A at once
     * queue on a few L2 slices); the A sharers of a cluster use the same
     * order, and the order depends on the plan only (deterministic) */
    const int kr = (q.flags & FK_SMALL_ROT) ? (int)((long long)(cta / csize) * nk / ((part_ctas + csize - 1) / csize)) % nk : 0;
    if (threadIdx.x == 0) {
        fk_grid_dep_launch(); /* the next grid may take SMs as they free up */
        for (int s = 0; s < q.stages; s++) {
            fk_mbar_init(full0 + 8 * s, 1);
            fk_mbar_init(empty0 + 8 * s, 4 * q.w * mc); /* one arrival per multiplying warp of the A sharers */
        }
        fk_fence_mbar_init();
    }
    if (mc > 1)
        fk_cluster_barrier(); /* the peer's barriers exist before multicasts and remote arrivals */
    else
        __syncthreads();
    if (threadIdx.x == 0)
        FK_TR(1);
    const int wg = threadIdx.x >> 7;
    const int stride = 64 * bw + 4; /* floats per row of the partial tile (+4: no bank conflicts) */
    if (wg == 2) {
        fk_setmaxnreg_dec<40>();
        if (threadIdx.x == 256) {
            fk_tma_prefetch_desc(&ta);
            fk_tma_prefetch_desc(&tb);
            /* before the wait only L2 is warmed with B's first K blocks: L2
             * is the device's point of coherence, so a write of the
             * previous grid to B still lands before our loads read it */
            const int npf = min(nk, q.pf);
            for (int i = 0; i < npf; i++) {
                const int kb = kb0 + (i + kr < nk ? i + kr : i + kr - nk);
                fk_tma_prefetch_l2(&tb, kb * FK_GEMM_BK, n0);
            }
            fk_grid_dep_wait();
            FK_TR(2);
            const uint64_t pol_b = fk_l2_policy(true), pol_a = fk_l2_policy(false);
            const int arows = NT / mc; /* rows of A this CTA loads for the sharers */
            const uint16_t amask = (uint16_t)(mc > 1 ? (1u << sr) | (1u << (split + sr)) : 0u);
            int stage = 0;
            uint32_t phase = 0;
            for (int i = 0, kb = kb0 + kr; i < nk; i++, kb = kb + 1 == kb1 ? kb0 : kb + 1) {
                fk_mbar_wait(empty0 + 8 * stage, phase ^ 1u);
                const uint32_t full = full0 + 8 * stage;
                fk_mbar_arrive_expect_tx(full, (uint32_t)(q.r + q.ra) * 128u);
                if (q.flags & FK_SMALL_BNOHINT)
                    fk_tma_load_2d(sb0 + stage * bslot, &tb, full, kb * FK_GEMM_BK, n0);
                else
                    fk_tma_load_2d_hint(sb0 + stage * bslot, &tb, full, kb * FK_GEMM_BK, n0, pol_b);
                if (mc > 1)
                    fk_tma_load_2d_mc(sa0 + stage * aslot + (uint32_t)(j * arows * 128), &ta, full, kb * FK_GEMM_BK,
                                      m0 + j * arows, amask, pol_a);
                else
                    fk_tma_load_2d_hint(sa0 + stage * aslot, &ta, full, kb * FK_GEMM_BK, m0, pol_a);
                if (++stage == q.stages) {
                    stage = 0;
                    phase ^= 1u;
                }
            }
            FK_TR(3);
        } else if ((threadIdx.x >> 5) == 9) {
            fk_grid_dep_wait(); /* the scales may come from the previous grid */
            fk_small_warm(p, (float *)(fk_smem + (empty0 + 8 * FK_SMALL_MAXST - raw)), threadIdx.x & 31, m0,
                          min(NT, p.m - m0), n0, min(q.r, p.n - n0));
        }
        __syncwarp();
    } else {
        fk_setmaxnreg_inc<232>();
        fk_grid_dep_wait(); /* the epilogue reads scales, C, bias and writes D */
        const int tid = threadIdx.x & 127, warp = tid >> 5, lane = tid & 31;
        constexpr int NACC = NW / 2;
        float acc[NACC], accf[NACC];
#pragma unroll
        for (int i = 0; i < NACC; i++)
            accf[i] = 0.0f;
        if (wg < q.w) {
            /* the A sharer's empty barrier (same offset), for mc == 2 */
            const uint32_t peer = (uint32_t)((j ^ 1) * split + sr);
            /* the first stage's descriptors of this warpgroup's operands (B's rows take the
             * wgmma A slot), advanced by fk_sm90_desc_at */
            const uint64_t da0 = fk_wgmma_desc_sw128(sb0 + (CS ? 0 : wg * 64 * 128)),
                           db0 = fk_wgmma_desc_sw128(sa0 + (CS ? wg * NW * 128 : 0));
            /* 4 wgmma of one K block into accumulator set d (zeroed by the first) */
            auto issue = [&](float *d, int st) {
                const uint64_t da = fk_sm90_desc_at(da0, st * bslot), db = fk_sm90_desc_at(db0, st * aslot);
#pragma unroll
                for (int e = 0; e < NACC; e++)
                    fk_reg_fence(d[e]);
                fk_wgmma_fence();
#pragma unroll
                for (int ks = 0; ks < FK_GEMM_BK / 32; ks++)
                    fk_small_mma<NW, WAB>(d, fk_sm90_desc_at(da, ks * 32), fk_sm90_desc_at(db, ks * 32), ks > 0);
                fk_wgmma_commit();
#pragma unroll
                for (int e = 0; e < NACC; e++)
                    fk_reg_fence(d[e]);
            };
            /* stage st read: free it (here and at the A sharer) */
            auto release = [&](int st) {
                if (lane == 0) {
                    fk_mbar_arrive(empty0 + 8 * st);
                    if (mc > 1)
                        fk_mbar_arrive_cta(empty0 + 8 * st, (uint32_t)peer);
                }
            };
            /* fp32 promotion, in K order */
            auto promote = [&](const float *d) {
#pragma unroll
                for (int e = 0; e < NACC; e++)
                    accf[e] = accf[e] + d[e];
            };
            int stage = 0;
            uint32_t phase = 0;
            if (NW <= 64 && !(q.flags & FK_SMALL_NOPP)) {
                /* two accumulator sets: K block i's wgmma run while block
                 * i - 1's finish and are promoted; unrolled by two so that
                 * each set is named statically (ptxas serializes wgmma
                 * whose accumulators it cannot track) */
                float acc2[NACC];
                auto next = [&]() {
                    if (++stage == q.stages) {
                        stage = 0;
                        phase ^= 1u;
                    }
                };
                fk_mbar_wait(full0 + 8 * stage, phase);
                if (threadIdx.x == 0)
                    FK_TR(4);
                issue(acc, stage); /* block 0 */
                int pst = stage;
                next();
                int i = 1;
                for (; i + 1 < nk; i += 2) {
                    fk_mbar_wait(full0 + 8 * stage, phase);
                    issue(acc2, stage); /* block i */
                    fk_wgmma_wait<1>();
                    release(pst);
                    promote(acc); /* block i - 1 */
                    pst = stage;
                    next();
                    fk_mbar_wait(full0 + 8 * stage, phase);
                    issue(acc, stage); /* block i + 1 */
                    fk_wgmma_wait<1>();
                    release(pst);
                    promote(acc2); /* block i */
                    pst = stage;
                    next();
                }
                if (i < nk) { /* the last block, i = nk - 1, into acc2 */
                    fk_mbar_wait(full0 + 8 * stage, phase);
                    issue(acc2, stage);
                    fk_wgmma_wait<1>();
                    release(pst);
                    promote(acc);
                    pst = stage;
                    next();
                    fk_wgmma_wait<0>();
                    release(pst);
                    promote(acc2);
                } else {
                    fk_wgmma_wait<0>();
                    release(pst);
                    promote(acc);
                }
            } else {
                for (int i = 0; i < nk; i++) {
                    fk_mbar_wait(full0 + 8 * stage, phase);
                    issue(acc, stage);
                    fk_wgmma_wait<0>();
                    release(stage);
                    promote(acc);
                    if (++stage == q.stages) {
                        stage = 0;
                        phase ^= 1u;
                    }
                }
            }
        }
        if (threadIdx.x == 0)
            FK_TR(5);
        /* both warpgroups are done with the ring (every load into it has
         * landed): it becomes the M x R tile */
        fk_named_bar_sync(1, 256);
        if (wg < q.w) {
            /* fragment: rows (of B) warp * 16 + lane / 4 + {0, 8}, columns (rows
             * of A) 8 j + 2 (lane % 4) + {0, 1}, value accf[4 j + 2 i + e] */
            const int nb = CS ? 0 : wg * 64, mb = CS ? wg * NW : 0;
#pragma unroll
            for (int jj = 0; jj < NW / 8; jj++) {
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int nl = nb + warp * 16 + (lane >> 2) + 8 * i;
                    const int m = mb + 8 * jj + 2 * (lane & 3);
                    tile[m * stride + nl] = accf[4 * jj + 2 * i];
                    tile[(m + 1) * stride + nl] = accf[4 * jj + 2 * i + 1];
                }
            }
        }
    }
    /* cluster: partial tiles visible to the split peers; the A sharer's
     * remote arrivals on our barriers are done before anyone leaves */
    if (csize > 1)
        fk_cluster_barrier();
    else
        __syncthreads();
    if (threadIdx.x == 0)
        FK_TR(6);
    if (wg < 2) {
        /* items: (row m of the part, 4 columns); K-split rank sr takes a
         * 1/split share and adds the split partials (ranks j * split +
         * 0..split-1) in rank order */
        const int cols4 = (q.r + 3) >> 2;
        const int items = min(NT, p.m - m0) * cols4;
        const int i0 = (int)((long long)sr * items / split);
        const int i1 = (int)((long long)(sr + 1) * items / split);
        const float *sc = (const float *)(fk_smem + (empty0 + 8 * FK_SMALL_MAXST - raw));
        const float sa_t = sc[0], sb_t = sc[1];
#ifdef FK_SMALL_TRACE
        if (threadIdx.x == 0) {
            (void)fk_opaque_add_f32(sa_t, sb_t);
            FK_TR(9);
        }
#endif
        unsigned int amax = 0;
        /* item it: row m of the part, columns n..n + nv - 1 (nv 1..4; 0: none),
         * the split partials added in rank order */
        auto item = [&](int it, int &m, int &n, int &nv) -> float4 {
            m = it / cols4;
            const int c4 = (it - m * cols4) * 4;
            n = n0 + c4;
            nv = min(min(4, p.n - n), q.r - c4); /* within N and the band */
            const int off = m * stride + c4;
            if (nv <= 0 || split == 1)
                return *(const float4 *)&tile[off];
            const uint32_t a = base + 4u * (uint32_t)off;
            float4 v = fk_ld_dsmem4(fk_mapa(a, (uint32_t)(j * split)));
#pragma unroll
            for (int r = 1; r < 4; r++) { /* split <= 4 */
                if (r < split) {
                    const float4 u = fk_ld_dsmem4(fk_mapa(a, (uint32_t)(j * split + r)));
                    v.x = v.x + u.x;
                    v.y = v.y + u.y;
                    v.z = v.z + u.z;
                    v.w = v.w + u.w;
                }
            }
            return v;
        };
        if (!(q.flags & FK_SMALL_NOPLAIN) && fk_small_plain(p)) {
            /* the common case in a few instructions (the general code is
             * long: executed once or twice per thread, its issue latency
             * and instruction-cache misses dominated the epilogue) */
#pragma unroll 1
            for (int it = i0 + (int)threadIdx.x; it < i1; it += 256) {
                int m, n, nv;
                const float4 v = item(it, m, n, nv);
                if (nv > 0)
                    fk_small_out4_plain(p, v, m0 + m, n, nv, sa_t, sb_t, sc + FK_SMALL_SC_A, m, sc + FK_SMALL_SC_B,
                                            n - n0);
            }
        } else {
#pragma unroll 1
            for (int it = i0 + (int)threadIdx.x; it < i1; it += 256) {
                int m, n, nv;
                const float4 v = item(it, m, n, nv);
                if (nv <= 0)
                    continue;
#ifdef FK_SMALL_TRACE
                if (threadIdx.x == 0 && it == i0) {
                    (void)fk_opaque_add_f32(v.x, v.w);
                    FK_TR(10);
                }
#endif
                fk_small_out4(p, v, m0 + m, n, nv, sa_t, sb_t, amax);
#ifdef FK_SMALL_TRACE
                if (threadIdx.x == 0 && it == i0)
                    FK_TR(11);
#endif
            }
        }
        if (p.out_quant == FP8KIT_OUTQ_SCALED && p.amax_bits) {
            amax = __reduce_max_sync(0xFFFFFFFFu, amax);
            if ((threadIdx.x & 31) == 0 && amax)
                atomicMax(p.amax_bits, amax);
        }
    }
    if (threadIdx.x == 0)
        FK_TR(7);
    /* no CTA leaves (and frees its tile) while split peers still read it */
    if (split > 1) {
        if (q.flags & FK_SMALL_EXITREL)
            fk_cluster_barrier();
        else
            fk_cluster_barrier_relaxed();
    }
    if (threadIdx.x == 0)
        FK_TR(8);
#endif
}
#endif
