/* launch_rec.h - launch recorder for bench/bench_launch.c, built into the
 * test-only library fp8kit_testhooks (never libfp8kit): while armed (it
 * sets the library's launch hook, fk_cuda_set_launch_hook), the next
 * Hopper GEMM launch of the general kernel is recorded
 * (kernel, grid, block, shared memory, a copy of every parameter) instead of
 * made, so the bench can time a bare launch of the very same kernel with the
 * very same parameters against the full fp8kit_gemm call. Arming is process
 * wide and one-shot; only the bench arms it. */
#ifndef FK_CUDA_LAUNCH_REC_H
#define FK_CUDA_LAUNCH_REC_H

#include <stddef.h>
#include "cuda/cuda_state.h"

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

#ifdef __cplusplus
}
#endif
#endif
