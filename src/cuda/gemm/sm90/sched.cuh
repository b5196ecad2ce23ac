/* gemm/sm90/sched.cuh - output-tile scheduler of the persistent Hopper GEMM: maps a
 * linear work index to a (tile row, tile column) in grouped raster order, so
 * the CTAs working at the same time share A row panels and B column panels
 * in L2. Every role of a CTA (producer, consumers) walks the same sequence:
 * index = blockIdx.x, blockIdx.x + gridDim.x, ... < tiles_m * tiles_n. */
#ifndef FK_CUDA_SCHED_CUH
#define FK_CUDA_SCHED_CUH

struct fk_tile_sched {
    int tiles_m, tiles_n;
    int group_m; /* tile rows per group (>= 1) */

    __host__ __device__ __forceinline__ int count() const { return tiles_m * tiles_n; }

    /* Groups of group_m tile rows are walked one after the other; inside a
     * group the tile row changes fastest, so consecutive indices reuse the
     * same B panel while A's group_m panels stay hot. */
    __host__ __device__ __forceinline__ void tile(int idx, int &tm, int &tn) const
    {
        const int per_group = group_m * tiles_n;
        const int g = idx / per_group;
        const int first = g * group_m;
        const int rows = min(tiles_m - first, group_m);
        const int r = idx - g * per_group;
        tm = first + r % rows;
        tn = r / rows;
    }
};

/* Grouped GEMM (fp8kit_grouped_gemm): the tile rows of all groups form one
 * sequence that the scheduler above walks (tiles_m = its length, known only
 * on the device). A table of 2 G + 2 ints in shared memory, built by every
 * CTA from the G device offsets before any work:
 *   tab[0 .. G-1]   end_g, the row after group g's last: the offsets
 *                   (contiguous layout), g M + counts[g] (masked, M rows per
 *                   expert slab)
 *   tab[G + g]      cum[g]: tile rows of groups 0 .. g-1 (cum[0] = 0), g <= G
 *   tab[2 G + 1]    1 when the offsets are invalid (then cum is garbage)
 * Group g owns tile rows cum[g] .. cum[g+1] - 1; its tile row i covers rows
 * start_g + TR i .. of A and D (start_g: fk_grp_start; TR: the kernel's tile
 * rows, 128, or 64 for the gated tile), rows at or past end_g are loaded but
 * never stored. */
#define FK_GRP_TAB_BYTES(G) (8 * ((G) + 1))

#ifdef FK_SM90_DEVICE /* (only the sm_90a kernel calls it; the host emulation test compiles this header as plain C++) */
/* Fills the table (all threads of the CTA call it; two __syncthreads) and
 * returns whether the offsets are valid: contiguous (masked_m 0): row ends,
 * non-decreasing, >= 0 and <= rows; masked: counts, 0 <= counts[g] <=
 * masked_m. Every CTA reads the same offsets, so all of them agree. */
template <int TR = 128>
static __device__ __forceinline__ bool fk_grp_prepare(const int *offs, int G, int rows, int masked_m, int *tab)
{
    int bad_count = 0;
    for (int i = threadIdx.x; i < G; i += blockDim.x) {
        const int o = offs[i];
        if (masked_m) { /* as row ends; a bad count becomes a decreasing end */
            bad_count |= o < 0 || o > masked_m;
            tab[i] = i * masked_m + min(max(o, 0), masked_m);
        } else {
            tab[i] = o;
        }
    }
    bad_count = __syncthreads_or(bad_count);
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        int carry = 0, bad = 0;
        for (int base = 0; base < G; base += 32) {
            const int i = base + lane;
            int n = 0;
            if (i < G) {
                const int o = tab[i], prev = masked_m ? i * masked_m : i ? tab[i - 1] : 0;
                if (o < prev || o > rows)
                    bad = 1;
                else
                    n = (o - prev + TR - 1) / TR;
            }
#pragma unroll
            for (int d = 1; d < 32; d <<= 1) { /* inclusive scan over the warp */
                const int v = __shfl_up_sync(0xFFFFFFFFu, n, d);
                if (lane >= d)
                    n += v;
            }
            if (i < G)
                tab[G + 1 + i] = carry + n;
            carry += __shfl_sync(0xFFFFFFFFu, n, 31);
        }
        bad = __any_sync(0xFFFFFFFFu, bad);
        if (lane == 0) {
            tab[G] = 0;
            tab[2 * G + 1] = bad | bad_count;
        }
    }
    __syncthreads();
    return tab[2 * G + 1] == 0;
}
#endif

/* The first row of group g in A and D. */
static __device__ __forceinline__ int fk_grp_start(const int *tab, int g, int masked_m)
{
    return masked_m ? g * masked_m : g ? tab[g - 1] : 0;
}

/* The group of tile row vm (< cum[G]): the g with cum[g] <= vm < cum[g+1]
 * (empty groups own no tile row), by binary search. */
static __device__ __forceinline__ int fk_grp_find(const int *cum, int G, int vm)
{
    int lo = 0, hi = G - 1;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (cum[mid + 1] > vm)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

#endif
