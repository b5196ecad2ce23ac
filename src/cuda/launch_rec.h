/* launch_rec.h - internal hook for bench/bench_launch.c (not public API):
 * while armed, the next Hopper GEMM launch of fk_cuda_gemm is recorded
 * (kernel, grid, block, shared memory, a copy of every parameter) instead of
 * made, so the bench can time a bare launch of the very same kernel with the
 * very same parameters against the full fp8kit_gemm call. Arming is process
 * wide and one-shot; only the bench arms it. */
#ifndef FK_CUDA_LAUNCH_REC_H
#define FK_CUDA_LAUNCH_REC_H

#include <stddef.h>
#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FK_LAUNCH_REC_ARGS 8
typedef struct fk_launch_rec {
    const void *fn;       /* the kernel (host stub; cudaLaunchKernel / cudaGetFuncBySymbol) */
    unsigned grid[3], block[3];
    size_t smem;
    int pdl; /* launched with programmatic stream serialization */
    int nargs;
    void *args[FK_LAUNCH_REC_ARGS]; /* point into buf */
    unsigned char buf[2048] __attribute__((aligned(64)));
} fk_launch_rec;

/* Arms the hook: the next GEMM launch (any thread) fills *rec and returns
 * FP8KIT_OK without launching. */
void fk_launch_rec_arm(fk_launch_rec *rec);
/* The armed record, or NULL (cheap: one relaxed load). */
fk_launch_rec *fk_launch_rec_armed(void);
/* Fills rec from one launch's description and disarms the hook. */
fp8kit_status fk_launch_rec_take(fk_launch_rec *rec, const void *fn, const unsigned grid[3],
                                 const unsigned block[3], size_t smem, void *const *args,
                                 const size_t *sizes, int nargs, int pdl);

#ifdef __cplusplus
}
#endif
#endif
