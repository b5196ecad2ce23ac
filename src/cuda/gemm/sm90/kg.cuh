/* kg.cuh - the pieces of the K-grouped Hopper GEMM kernel
 * (fp8kit_k_grouped_gemm, the MoE weight gradient; host side in
 * gemm/sm90/k_grouped_host.cu): its stage shape, work walk, offsets check and scale
 * helper warps. body_rc.cuh builds the kernel from these
 * and its own producer, row x column consumer and epilogues (fk_sm90_rc_body,
 * shared with the MX kernel).
 *
 * Work items are (group, output tile) pairs, group-major, each group's
 * tiles in the general kernel's raster order; an item runs the K blocks of
 * its group's K range only, which a table in shared memory holds (built by
 * every CTA from the device offsets, which it also checks: with invalid
 * offsets every CTA leaves before writing anything). A and B carry 1x128
 * scales along K on every row (or one tensor scale each), so the fp32
 * promotion after each 128-wide K block multiplies row scale by column
 * scale: two helper warps of the producer warpgroup copy each stage's 128
 * A scales and BN B scales into a small table next to the stage (1.0 without
 * 1x128 scales: the tensor scales then go to the epilogue), and the
 * consumers (fk_sm90_consumer_rc in consumer_rc.cuh, shared with the MX kernel)
 * promote each stage once with them. Group g's D is
 * rows g * kg_drows .. g * kg_drows + M - 1 of one ((G - 1) kg_drows + M, N)
 * view (p.m), so the dense epilogues (alpha, beta * D in place, the output
 * cast) serve unchanged; A's rows are p.kg_m. */
#ifndef FK_SM90_KG_CUH
#define FK_SM90_KG_CUH

#include "cuda/gemm/sm90/pipeline.cuh"


/* Scale table of one stage: A's 128 rows then B's BN columns (fp32). */
template <int BN> struct fk_sm90_kg_shape {
    typedef fk_sm90_shape<BN> G;
    static constexpr int SC_FLOATS = FK_GEMM_BM + BN;
    static constexpr int SC_BYTES = SC_FLOATS * 4;
    static constexpr int FIXED = G::FIXED + 64 + 16; /* + the scale tables' empty barriers, alignment */
    static constexpr int FIT = (FK_SM90_SMEM_MAX - FIXED) / (G::A_BYTES + G::B_BYTES + SC_BYTES);
    static constexpr int STAGES = FIT < 8 ? FIT : 8;
    static constexpr int SMEM = STAGES * (G::A_BYTES + G::B_BYTES + SC_BYTES) + FIXED; /* then the K table */
    static_assert(STAGES >= 3, "stage ring too shallow");
    static_assert(SC_BYTES % 16 == 0, "scale tables must stay 16-byte aligned");
};

#ifdef FK_SM90_DEVICE
/* The K table (G ints at p.grp_tab): the end of group g's K range in
 * 128-wide blocks. */
static __device__ __forceinline__ const int *fk_kg_table(const fk_gemm_params &p)
{
    extern __shared__ __align__(1024) unsigned char fk_smem[];
    return (const int *)(fk_smem + p.grp_tab);
}

/* The work sequence of a CTA (the producer's walk interface): items
 * blockIdx.x, + gridDim.x, ... < G x tiles; item t is group t / tiles. */
struct fk_kg_walk {
    int t, step, rank;
    int row0, g;
    int kb0, kb1;
    __device__ __forceinline__ fk_kg_walk() : t((int)blockIdx.x), step((int)gridDim.x), rank(0) {}
    __device__ __forceinline__ bool more(const fk_gemm_params &p) const { return t < p.grp_count * p.sched.count(); }
    __device__ __forceinline__ void tile(const fk_gemm_params &p, int &tm, int &tn)
    {
        const int per = p.sched.count();
        g = t / per;
        p.sched.tile(t - g * per, tm, tn);
        row0 = tm * FK_GEMM_BM;
        const int *kt = fk_kg_table(p);
        kb0 = g ? kt[g - 1] : 0;
        kb1 = kt[g];
    }
};

/* Fills the K table from the G device offsets (all threads; one
 * __syncthreads) and returns whether they are valid: multiples of 128,
 * non-decreasing from 0, <= K. Every CTA reads the same offsets. */
static __device__ __forceinline__ bool fk_kg_prepare(const int *offs, int G, int k, int *tab)
{
    int bad = 0;
    for (int i = threadIdx.x; i < G; i += blockDim.x) {
        const int o = offs[i], prev = i ? offs[i - 1] : 0;
        bad |= (o & 127) != 0 || o < prev || o > k;
        tab[i] = o >> 7;
    }
    return __syncthreads_or(bad) == 0;
}

/* Helper warp of one operand (B when IS_B): for every (item, K block) of
 * this CTA, in the producer's order, it copies the block's scales of the
 * tile's rows (A) or columns (B) into the stage's table with cp.async (rows
 * past the operand read its last row: their products are 0) and has each
 * lane's copies arrive on the stage's full barrier when they land, so the
 * warp runs ahead by as many stages as the ring has free; without 1x128
 * scales it stores 1.0 and arrives itself. empty0: the scale tables'
 * empty barriers (released after the consumers' promotion). */
template <int BN, bool IS_B>
static __device__ __forceinline__ void fk_kg_scales(const fk_gemm_params &p, unsigned char *sc0, uint32_t full0,
                                                    uint32_t empty0, int lane)
{
    typedef fk_sm90_kg_shape<BN> S;
    constexpr int ROWS = IS_B ? BN : FK_GEMM_BM, NW = ROWS / 32;
    const float *src = IS_B ? p.sb : p.sa;
    const long long ld = IS_B ? p.sb_ld : p.sa_sm;
    const int nrows = IS_B ? p.n : p.kg_m;
    const bool scaled = p.sa_mode == FP8KIT_SCALE_BLOCK;
    int stage = 0;
    uint32_t phase = 0;
    fk_kg_walk w;
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int r0 = IS_B ? tn * BN : w.row0;
        for (int kb = w.kb0; kb < w.kb1; kb++) {
            fk_mbar_wait(empty0 + 8 * stage, phase ^ 1u);
            float *tab = (float *)(sc0 + stage * S::SC_BYTES) + (IS_B ? FK_GEMM_BM : 0);
            if (scaled) {
#pragma unroll
                for (int i = 0; i < NW; i++)
                    fk_cp_async4(fk_smem_addr(tab + lane + 32 * i),
                                 src + (long long)min(r0 + lane + 32 * i, nrows - 1) * ld + kb);
                fk_cp_async_mbar_arrive(full0 + 8 * stage);
            } else {
#pragma unroll
                for (int i = 0; i < NW; i++)
                    tab[lane + 32 * i] = 1.0f;
                fk_mbar_arrive(full0 + 8 * stage); /* release: this lane's writes */
            }
            if (++stage == S::STAGES) {
                stage = 0;
                phase ^= 1u;
            }
        }
    }
}

#endif
#endif
