/* driver.h - host-side driver-API helpers of the Hopper GEMM: TMA tensor maps
 * (cuTensorMapEncodeTiled) and the kernel launch (cuLaunchKernelEx, ~0.3 us
 * cheaper per call than the runtime's launches). Driver functions are reached
 * through cudaGetDriverEntryPointByVersion so the library never links libcuda
 * and loads on machines without a GPU driver. */
#ifndef FK_CUDA_DRIVER_H
#define FK_CUDA_DRIVER_H

#include <cuda.h> /* types and enums only; no libcuda symbol is referenced */
#include <cuda_runtime.h>
#include <stdint.h>

typedef CUresult (*fk_encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                       const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                       const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                       CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* A driver entry point by name, NULL when the driver lacks it. */
static inline void *fk_driver_fn(const char *name)
{
    void *p = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !p) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

/* The driver's cuTensorMapEncodeTiled, looked up once per process (NULL when
 * the driver lacks it). Concurrent first calls store the same pointer. */
static inline fk_encode_tiled_fn fk_tma_encode_fn(void)
{
    static fk_encode_tiled_fn cached;
    fk_encode_tiled_fn fn = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
    if (!fn && (fn = (fk_encode_tiled_fn)fk_driver_fn("cuTensorMapEncodeTiled")))
        __atomic_store_n(&cached, fn, __ATOMIC_RELEASE);
    return fn;
}

/* The driver handle of kernel `fn` (a host stub) in the current device's
 * context, resolved once into *slot (a per-device, per-variant cache; NULL
 * when the runtime cannot give it). */
static inline CUfunction fk_cufn_get(CUfunction *slot, const void *fn)
{
    CUfunction f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        cudaFunction_t rf = NULL;
        if (cudaGetFuncBySymbol(&rf, fn) == cudaSuccess && rf) {
            f = (CUfunction)rf;
            __atomic_store_n(slot, f, __ATOMIC_RELEASE);
        } else {
            (void)cudaGetLastError();
        }
    }
    return f;
}

typedef CUresult (*fk_cu_launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);

/* The driver's cuLaunchKernelEx (launch attributes: clusters, programmatic
 * dependent launch), looked up once per process (NULL if absent). */
static inline fk_cu_launch_ex_fn fk_cu_launch_ex_fn_get(void)
{
    static fk_cu_launch_ex_fn cached;
    fk_cu_launch_ex_fn fn = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
    if (!fn && (fn = (fk_cu_launch_ex_fn)fk_driver_fn("cuLaunchKernelEx")))
        __atomic_store_n(&cached, fn, __ATOMIC_RELEASE);
    return fn;
}

/* Tensor map over a 2-D row-major matrix (rows x cols of dtype, row stride
 * ld_bytes) read or written in boxes of box_cols x box_rows, with the given
 * swizzle and L2 promotion; out-of-bounds box elements read as zero. Returns
 * the CUresult (CUDA_SUCCESS = 0), or CUDA_ERROR_NOT_FOUND without the entry
 * point. The helpers below name the layouts the kernels use. */
static inline CUresult fk_tma_map_2d(CUtensorMap *map, CUtensorMapDataType dtype, const void *base, uint64_t rows,
                                     uint64_t cols, uint64_t ld_bytes, uint32_t box_cols, uint32_t box_rows,
                                     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promo)
{
    fk_encode_tiled_fn fn = fk_tma_encode_fn();
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    cuuint64_t dims[2] = {cols, rows};
    cuuint64_t strides[1] = {ld_bytes};
    cuuint32_t box[2] = {box_cols, box_rows};
    cuuint32_t estr[2] = {1, 1};
    return fn(map, dtype, 2, (void *)base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promo,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* Tensor map over a vector of n f32 (16-byte aligned base, n < 2^32) read in
 * boxes of box values (box * 4 a multiple of 16) starting at any index; box
 * elements past the end read as zero. */
static inline CUresult fk_tma_map_1d_f32(CUtensorMap *map, const void *base, uint64_t n, uint32_t box)
{
    fk_encode_tiled_fn fn = fk_tma_encode_fn();
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    if (n == 0 || n >= (1ull << 32))
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t dims[1] = {n};
    cuuint64_t strides[1] = {n * 4}; /* (rank 1: no stride is read) */
    cuuint32_t boxd[1] = {box};
    cuuint32_t estr[1] = {1};
    return fn(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, (void *)base, dims, strides, boxd, estr,
              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* A byte matrix (row stride ld bytes) with the 128-byte swizzle (box_cols <= 128). */
static inline CUresult fk_tma_map_2d_u8(CUtensorMap *map, const void *base, uint64_t rows,
                                        uint64_t cols, uint64_t ld, uint32_t box_cols,
                                        uint32_t box_rows)
{
    return fk_tma_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, base, rows, cols, ld, box_cols, box_rows,
                         CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

/* A matrix of 16-bit elements (bf16 when bf, else f16; row stride ld
 * elements) with the 64-byte swizzle (box_cols * 2 must be 64). */
static inline CUresult fk_tma_map_2d_u16_sw64(CUtensorMap *map, const void *base, int bf, uint64_t rows,
                                              uint64_t cols, uint64_t ld, uint32_t box_cols, uint32_t box_rows)
{
    return fk_tma_map_2d(map, bf ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, base, rows,
                         cols, ld * 2, box_cols, box_rows, CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

/* An f32 matrix (row stride ld bytes, a multiple of 16), no swizzle. */
static inline CUresult fk_tma_map_2d_f32(CUtensorMap *map, const void *base, uint64_t rows, uint64_t cols,
                                         uint64_t ld, uint32_t box_cols, uint32_t box_rows)
{
    return fk_tma_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, base, rows, cols, ld, box_cols, box_rows,
                         CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

#endif
