/* bench_cuda.h - what the CUDA benchmarks share (include it after
 * <cuda_runtime.h> and fp8kit.h): CK, which exits on a CUDA error,
 * fk_bench_time_us, the median time of a step, and fk_bench_open, their
 * common start; fk_bench_today (bench_date.h), the
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

static inline int fk_bench_cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median microseconds of reps timed calls of step(arg) (3 untimed first),
 * each timed with CUDA events on the default stream after a write of flush
 * (flush_bytes, to empty L2); -1 when a step fails (nonzero). */
static inline double fk_bench_time_us(int (*step)(void *), void *arg, int reps, void *flush, size_t flush_bytes)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float *t = (float *)malloc(sizeof(float) * (size_t)reps);
    double med = -1.0;
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++)
        ok = step(arg) == 0;
    for (int i = 0; i < reps && ok; i++) {
        CK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, 0));
        CK(cudaEventRecord(e0, 0));
        ok = step(arg) == 0;
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[i], e0, e1));
    }
    if (ok) {
        qsort(t, (size_t)reps, sizeof(float), fk_bench_cmp_float);
        med = 1e3 * t[reps / 2];
    }
    free(t);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return med;
}

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
