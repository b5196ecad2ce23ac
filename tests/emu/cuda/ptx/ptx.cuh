/* ptx/ptx.cuh (host emulation stand-in, tests/emu only) - shadows the umbrella
 * src/cuda/ptx/ptx.cuh when epilogue_emu.cpp compiles src/cuda/gemm/sm90/store_general.cuh and the headers it includes as
 * host C++: the warpgroup's named barrier and warp shuffles become a
 * std::barrier over the 128 emulated threads and a shared exchange array; the
 * fp8, bf16 and f16 pair conversions are the shared codec (as src/cuda/ptx/cvt.cuh's own host
 * fallback); shared memory is an array the test owns (emu_smem_base), the TMA
 * store a clipped copy out of it (store_tma_emu.cpp); the instructions the
 * emulated paths never reach (bulk copies) are empty. */
#ifndef FK_CUDA_PTX_PTX_CUH
#define FK_CUDA_PTX_PTX_CUH

#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <barrier>
#include <vector_types.h>
#include "format/codec.h"

using std::max;
using std::min;

inline thread_local int emu_tid;  /* thread index in the warpgroup, 0..127 */
inline std::barrier<> *emu_bar;   /* the warpgroup's barrier */
inline uint32_t emu_xchg[128];    /* shuffle exchange */

static inline void fk_named_bar_sync(int, int) { emu_bar->arrive_and_wait(); }

/* Every lane of the warpgroup calls it (the epilogue's shuffles are uniform). */
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int lane_mask)
{
    static_assert(sizeof(T) == 4, "32-bit shuffles only");
    uint32_t u, r;
    memcpy(&u, &v, 4);
    emu_xchg[emu_tid] = u;
    emu_bar->arrive_and_wait();
    r = emu_xchg[emu_tid ^ lane_mask];
    emu_bar->arrive_and_wait();
    T t;
    memcpy(&t, &r, 4);
    return t;
}

/* OUTQ_SCALED's amax reduction is not emulated (its cases are not run). */
static inline unsigned __reduce_max_sync(unsigned, unsigned v) { return v; }
static inline unsigned atomicMax(unsigned *p, unsigned v)
{
    unsigned o = *p;
    *p = v > o ? v : o;
    return o;
}

/* Shared memory: addresses are offsets from emu_smem_base (null: 0, where nothing reads them) */
inline unsigned char *emu_smem_base;
static inline uint32_t fk_smem_addr(const void *p)
{
    return emu_smem_base ? (uint32_t)((const unsigned char *)p - emu_smem_base) : 0u;
}
static inline void fk_st_shared_u32(uint32_t addr, uint32_t v) { memcpy(emu_smem_base + addr, &v, 4); }
static inline uint4 fk_ld_shared_v4(uint32_t addr)
{
    uint4 v;
    memcpy(&v, emu_smem_base + addr, 16);
    return v;
}
static inline void fk_cp_async4(uint32_t dst, const void *src) { memcpy(emu_smem_base + dst, src, 4); }
static inline void fk_cp_async_wait_all(void) {}
/* __syncwarp: a barrier over the emulated thread's warp (store_tma_emu.cpp sets them) */
inline std::barrier<> *emu_warp_bar[4];
static inline void __syncwarp(unsigned = 0xFFFFFFFFu) { emu_warp_bar[emu_tid >> 5]->arrive_and_wait(); }
/* The TMA store of a 16 x 32 box of 16-bit values, 64-byte swizzle (each row's 16-byte unit j at
 * j ^ ((row / 2) % 4)), clipped to D's rows and columns; D as emu_td describes it (the map is
 * opaque here) */
struct emu_tmap {
    unsigned char *d;
    long long ld, rows, cols;
};
inline emu_tmap emu_td;
static inline void fk_tma_store_2d(const void *, uint32_t src, int c0, int c1)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 32; c++) {
            const long long row = c1 + r, col = c0 + c;
            if (row < emu_td.rows && col < emu_td.cols)
                memcpy(emu_td.d + 2 * (row * emu_td.ld + col),
                       emu_smem_base + src + r * 64 + 16 * ((c / 8) ^ ((r >> 1) & 3)) + 2 * (c % 8), 2);
        }
}
static inline uint32_t fk_cvt_bf16x2(float lo, float hi)
{
    return fk_f32_to_bf16(lo) | ((uint32_t)fk_f32_to_bf16(hi) << 16);
}
static inline uint32_t fk_cvt_f16x2(float lo, float hi)
{
    return fk_f32_to_f16(lo) | ((uint32_t)fk_f32_to_f16(hi) << 16);
}
template <int E5> static inline uint32_t fk_cvt2(float lo, float hi)
{
    return (uint32_t)fk_f32_to_fp8(lo, E5) | ((uint32_t)fk_f32_to_fp8(hi, E5) << 8);
}
template <int N> static inline void fk_bulk_wait_read(void) {}
static inline void fk_fence_proxy_async(void) {}
static inline void fk_bulk_store(void *, uint32_t, uint32_t) {}
static inline void fk_bulk_commit(void) {}

/* Emulated thread tid's wgmma accumulator fragment of the 64-row warpgroup
 * tile at (m0, n0): rows m0 + 16 warp + lane / 4 + 8 i and columns
 * n0 + 8 j + 2 (lane % 4) + e at acc[4 j + 2 i + e], from the row-major all
 * (n columns); fill where the row is at or past row_end or the column past n. */
template <int BN>
static inline void emu_fragment(float *acc, const float *all, int n, int m0, int n0, int tid, int row_end, float fill)
{
    const int warp = tid >> 5, lane = tid & 31;
    for (int j = 0; j < BN / 8; j++)
        for (int i = 0; i < 2; i++)
            for (int e = 0; e < 2; e++) {
                const int row = m0 + warp * 16 + lane / 4 + 8 * i, col = n0 + 8 * j + 2 * (lane % 4) + e;
                acc[4 * j + 2 * i + e] = row < row_end && col < n ? all[(size_t)row * n + col] : fill;
            }
}

#endif
