/* ptx/common.cuh - what every ptx/ header shares: the sm_90a device-pass guard FK_SM90_DEVICE, FK_DEV, fk_smem_addr. */
#ifndef FK_CUDA_PTX_COMMON_CUH
#define FK_CUDA_PTX_COMMON_CUH

#include <stdint.h>

/* Bodies of sm_90a-only instructions exist only in the sm_90a device pass;
 * elsewhere they compile to nothing, so files that include these headers
 * still build for sm_80 and for the host. */
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FK_SM90_DEVICE 1
#endif

#define FK_DEV static __device__ __forceinline__

/* 32-bit shared-window address of a generic pointer into shared memory. */
FK_DEV uint32_t fk_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

#endif
