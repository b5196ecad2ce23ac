/* fk_hd.h - FK_HD marks static inline helpers that compile for host (C11) and
 * device (CUDA); plus bit casts between float and uint32_t usable on both. */
#ifndef FK_HD_H
#define FK_HD_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define FK_HD static __host__ __device__ __forceinline__
#else
#define FK_HD static inline
#endif

FK_HD uint32_t fk_f2u(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

FK_HD float fk_u2f(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

FK_HD int64_t fk_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
FK_HD int64_t fk_round_up(int64_t a, int64_t b) { return fk_ceil_div(a, b) * b; }

#endif
