/* bench_cuda.h - what the CUDA benchmarks share (include it after
 * <cuda_runtime.h> and fp8kit.h): CK, which exits on a CUDA error, and
 * fk_bench_open, their common start; fk_bench_today (bench_date.h), the
 * default date of their rows. */
#ifndef FK_BENCH_CUDA_H
#define FK_BENCH_CUDA_H
#include <stdio.h>
#include <stdlib.h>
#include "bench_date.h"

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* The start of benchmark `name`: a CUDA context on device 0, its properties
 * and the JSON-lines file (opened for appending; NULL without json).
 * Returns -1 when the benchmark can run, else what main returns: 0 without a
 * usable CUDA device (after saying so), 1 when the context or the file
 * cannot be had. */
static inline int fk_bench_open(const char *name, const char *json, fp8kit_ctx **ctx, struct cudaDeviceProp *prop,
                                FILE **jf)
{
    if (!fp8kit_backend_available(FP8KIT_BACKEND_CUDA)) {
        printf("%s: no usable CUDA device\n", name);
        return 0;
    }
    *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, ctx) != FP8KIT_OK) {
        fprintf(stderr, "%s: cannot create a CUDA context\n", name);
        return 1;
    }
    CK(cudaGetDeviceProperties(prop, 0));
    *jf = json ? fopen(json, "a") : NULL;
    if (json && !*jf) {
        fprintf(stderr, "%s: cannot open %s\n", name, json);
        return 1;
    }
    return -1;
}
#endif
