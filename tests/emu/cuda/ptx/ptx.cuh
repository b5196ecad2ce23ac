/* ptx/ptx.cuh (host emulation stand-in, tests/emu only) - shadows the umbrella
 * src/cuda/ptx/ptx.cuh when epilogue_emu.cpp compiles src/cuda/gemm/sm90/store_general.cuh and the headers it includes as
 * host C++: the warpgroup's named barrier and warp shuffles become a
 * std::barrier over the 128 emulated threads and a shared exchange array; the
 * fp8 pair conversion is the shared codec (as src/cuda/ptx/cvt.cuh's own host
 * fallback); the instructions the emulated paths never reach (bulk copies)
 * are empty. */
#ifndef FK_CUDA_PTX_PTX_CUH
#define FK_CUDA_PTX_PTX_CUH

#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <barrier>
#include "format/codec.h"

using std::max;
using std::min;

extern thread_local int emu_tid;  /* thread index in the warpgroup, 0..127 */
extern std::barrier<> *emu_bar;   /* the warpgroup's barrier */
extern uint32_t emu_xchg[128];    /* shuffle exchange */

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

static inline uint32_t fk_smem_addr(const void *) { return 0; }
static inline uint32_t fk_cvt_bf16x2(float lo, float hi);
static inline uint32_t fk_cvt_f16x2(float lo, float hi);
template <int E5> static inline uint32_t fk_cvt2(float lo, float hi)
{
    return (uint32_t)fk_f32_to_fp8(lo, E5) | ((uint32_t)fk_f32_to_fp8(hi, E5) << 8);
}
template <int N> static inline void fk_bulk_wait_read(void) {}
static inline void fk_fence_proxy_async(void) {}
static inline void fk_bulk_store(void *, uint32_t, uint32_t) {}
static inline void fk_bulk_commit(void) {}

#endif
