/* walk.cuh - the tile walk of the persistent Hopper GEMM kernels: dense tiles
 * (clusters, two-wave tiles, the stream-K tail) and the grouped GEMM's
 * contiguous and masked groups (fk_sm90_walk; the K-grouped walk is in
 * kg.cuh). */
#ifndef FK_SM90_WALK_CUH
#define FK_SM90_WALK_CUH

#include "cuda/gemm/params.h"
#include "cuda/ptx/ptx.cuh"
#include "cuda/gemm/sm90/sched.cuh"

#ifdef FK_SM90_DEVICE
/* The tile sequence of a CTA. Without clusters (CL = 1): work items
 * blockIdx.x, + gridDim.x, ... are tiles. With clusters of CL CTAs along M:
 * items are cluster tiles of CL x 128 rows (p.sched counts tile rows in
 * units of CL), cluster c takes items c, c + gridDim.x / CL, ... and CTA
 * rank r of it the tile row item_row * CL + r (past the last tile row for
 * an odd count: its A loads are zero-filled and its epilogue writes no row).
 * MCA: the cluster's CTAs lie along N instead (A multicast): p.sched counts
 * tile columns in units of CL, and rank r takes tile column item_col * CL + r
 * (past N for an odd count: its B loads are zero-filled, it stores nothing).
 * TM: rows per tile (128 per wave; 64 for the gated tile of kernels_glu.cu). */
template <int CL, bool GR = false, int WV = 1, int TM = FK_GEMM_BM * WV, bool MCA = false> struct fk_sm90_walk {
    static_assert(!GR || TM == FK_GEMM_BM * WV || (TM == 64 && WV == 1), "grouped walks: 128-row tiles, or the gated tile's 64");
    static_assert(!MCA || (CL > 1 && !GR), "clusters along N: dense tiles");
    int t, step, rank;
    int row0, m_end, g; /* of the current tile: first row, row limit, group */
    int kb0, kb1;       /* its K blocks */
    int part, slot;     /* stream-K: part of the tail tile (-1: a whole tile), its first slot */
    __device__ __forceinline__ fk_sm90_walk()
        : t((int)blockIdx.x / CL), step((int)gridDim.x / CL), rank(CL > 1 ? (int)fk_cluster_ctarank() : 0)
    {
    }
    /* GR: the group table (gemm/sm90/sched.cuh), read where needed rather than kept in registers */
    static __device__ __forceinline__ const int *gtab(const fk_gemm_params &p)
    {
        extern __shared__ __align__(1024) unsigned char fk_smem[];
        return (const int *)(fk_smem + p.grp_tab);
    }
    __device__ __forceinline__ bool more(const fk_gemm_params &p) const
    {
        if constexpr (GR)
            return t < gtab(p)[2 * p.grp_count] * p.sched.tiles_n;
        else
            return t < p.sched.count() + (CL == 1 ? p.sk_tail * (p.sk_parts - 1) : 0);
    }
    /* Grouped (GR): tile row tm of the sequence of all groups' tile rows
     * (the same raster order over them) maps to group g's rows. */
    __device__ __forceinline__ void tile(const fk_gemm_params &p, int &tm, int &tn)
    {
        kb0 = 0; /* a whole tile unless the stream-K tail says otherwise */
        kb1 = p.num_kb;
        part = -1;
        if constexpr (GR) {
            const int G = p.grp_count;
            const int *gtab = fk_sm90_walk::gtab(p);
            fk_tile_sched s = p.sched;
            s.tiles_m = gtab[2 * G];
            s.tile(t, tm, tn);
            g = fk_grp_find(gtab + G, G, tm);
            row0 = fk_grp_start(gtab, g, p.grp_masked_m) + (tm - gtab[G + g]) * TM;
            m_end = gtab[g];
        } else {
            int idx = t;
            const int full = p.sched.count() - p.sk_tail;
            if (CL == 1 && t >= full) {
                /* the stream-K tail (see fk_sm90_sk_plan in gemm/sm90/dense_host.cu): item
                 * full + u is part u / tail of tail tile u % tail; part p
                 * takes K range s - 1 - p, so the reducing part s - 1 (the
                 * highest CTAs) has the first, shortest one */
                const int u = t - full, s = p.sk_parts, j = u % p.sk_tail;
                part = u / p.sk_tail;
                slot = j * (s - 1);
                idx = full + j;
                const int r = s - 1 - part;
                kb0 = r * p.num_kb / s;
                kb1 = (r + 1) * p.num_kb / s;
            }
            p.sched.tile(idx, tm, tn);
            if (MCA)
                tn = tn * CL + rank;
            else
                tm = tm * CL + rank;
            row0 = tm * TM;
            m_end = p.m;
            g = 0;
        }
    }
    /* Block scales read by the consumers: A's scale of row r (clamped to the
     * rows that exist) at the tile's first K block kb0; with per-expert slabs
     * of A scales (grouped masked, mn_major: p.sa_g) the row within its slab. */
    __device__ __forceinline__ const float *sa_row(const fk_gemm_params &p, int r) const
    {
        if (GR && p.sa_g)
            return p.sa + g * p.sa_g + (long long)min(r - g * p.grp_masked_m, p.grp_masked_m - 1) * p.sa_sm +
                   kb0 * p.sa_sk;
        return p.sa + (long long)min(r, p.m - 1) * p.sa_sm + kb0 * p.sa_sk;
    }
    /* Staged block scales: the coordinates in p.tsa of the scales of the
     * tile's first row at K block kb, over the (kb, row) mn_major buffer, or
     * (grouped, p.sa_g) the slabs' (g kb + kb, row within the slab). */
    __device__ __forceinline__ int sa_x(const fk_gemm_params &p) const
    {
        return GR && p.sa_g ? row0 - g * p.grp_masked_m : row0;
    }
    __device__ __forceinline__ int sa_y(const fk_gemm_params &p, int kb) const
    {
        return GR && p.sa_g ? g * p.num_kb + kb : kb;
    }
};

/* The paired gated tile (NS 3, consumer_pipe.cuh): how many of work item tn's
 * two halves of bn / 2 of D's p.n columns hold any (1 or 2). */
static __device__ __forceinline__ int fk_glu_halves(const fk_gemm_params &p, int tn, int bn)
{
    return tn * bn + bn / 2 < p.n ? 2 : 1;
}
#endif /* FK_SM90_DEVICE */
#endif
