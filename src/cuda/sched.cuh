/* sched.cuh - output-tile scheduler of the persistent Hopper GEMM: maps a
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

#endif
