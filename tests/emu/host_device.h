/* host_device.h - what the host emulations of Hopper kernel code include first:
 * the CUDA vector types, and the device qualifiers (__device__,
 * __forceinline__, ...) as plain host C++ with __CUDACC__ set, so that the
 * kernel headers compile for the host against the PTX stand-in
 * (tests/emu/cuda/ptx/ptx.cuh). */
#ifndef FK_TESTS_EMU_HOST_DEVICE_H
#define FK_TESTS_EMU_HOST_DEVICE_H

#include <cuda.h>
#include <vector_types.h>
#include <vector_functions.h>
#include <math.h>
#define __CUDACC__ 1
#undef __host__
#undef __device__
#undef __forceinline__
#undef __noinline__
#define __host__
#define __device__
#define __forceinline__ inline
#define __noinline__

#endif
