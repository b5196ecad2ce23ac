/* test_cuda_util.h - helpers shared by the GPU tests (tests/test_cuda_*.c):
 * device allocation that exits on failure and checked host<->device copies,
 * plus test_hp.h's float loads / stores and fp64 activations.
 * Include after test_util.h, format/codec.h and cuda_runtime.h. */
#ifndef FK_TEST_CUDA_UTIL_H
#define FK_TEST_CUDA_UTIL_H

#include <math.h>
#include "test_hp.h"

static inline void *dmalloc(size_t n)
{
    void *p = NULL;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", n);
        exit(1);
    }
    return p;
}
static inline void h2d(void *d, const void *h, size_t n)
{
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) == cudaSuccess, "h2d");
}
static inline void d2h(void *h, const void *d, size_t n)
{
    CHECK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) == cudaSuccess, "d2h");
}

#endif
