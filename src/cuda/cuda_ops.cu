/* cuda_ops.cu - CUDA backend plumbing: device discovery (fk_cuda_available,
 * fk_cuda_device_count), the per-context state bound to one device
 * (fk_cuda_ctx_init / fk_cuda_ctx_free), binding the calling thread to the
 * context's device before each call (fk_cuda_bind), device memory for the
 * checkpoint converter (fk_cuda_mem_ops), the dispatch of
 * quantize / dequantize / cast jobs to the kernels in quant*.cu, dequant.cu
 * and cast.cu, and ops->supports (those kernels' can_run rules, the GEMM
 * families'). cudart is linked statically and never prints; with no driver
 * or no GPU, fk_cuda_available() returns 0 and fk_cuda_unavailable_reason()
 * says which (no driver, no GPU, driver older than the runtime). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/quant.h"

static pthread_once_t fk_cuda_once = PTHREAD_ONCE_INIT;
static int fk_cuda_ndev;
static char fk_cuda_why[320]; /* why there is no usable device ("" when there is one) */

/* cudart reports a missing driver as cudaErrorInsufficientDriver ("CUDA driver
 * version is insufficient"), which sends users to upgrade a driver they do
 * not have; cudaDriverGetVersion gives 0 when no libcuda could be loaded. */
static void fk_cuda_explain(cudaError_t e)
{
    int drv = 0, rt = 0;
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaGetLastError();
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    const char *nogpu = vis ? "no NVIDIA GPU visible to the driver (CUDA_VISIBLE_DEVICES is set)"
                            : "no NVIDIA GPU found by the driver";
    if (e == cudaErrorStubLibrary)
        snprintf(fk_cuda_why, sizeof fk_cuda_why,
                 "no NVIDIA driver found (libcuda.so.1 is the CUDA toolkit's stub library, not a driver): "
                 "the CUDA backend is unavailable");
    else if (drv == 0)
        snprintf(fk_cuda_why, sizeof fk_cuda_why,
                 "no NVIDIA driver found (libcuda.so.1 not loadable): the CUDA backend is unavailable");
    else if (e == cudaSuccess || e == cudaErrorNoDevice)
        snprintf(fk_cuda_why, sizeof fk_cuda_why, "%s: the CUDA backend is unavailable", nogpu);
    else if (e == cudaErrorInsufficientDriver || e == cudaErrorCallRequiresNewerDriver ||
             e == cudaErrorSymbolNotFound)
        snprintf(fk_cuda_why, sizeof fk_cuda_why,
                 "the NVIDIA driver supports CUDA %d.%d but fp8kit was built with the CUDA %d.%d runtime (%s): "
                 "the CUDA backend is unavailable until the driver is updated",
                 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10, cudaGetErrorName(e));
    else
        snprintf(fk_cuda_why, sizeof fk_cuda_why, "the CUDA runtime cannot start (%s: %s): the CUDA backend is unavailable",
                 cudaGetErrorName(e), cudaGetErrorString(e));
}

static void fk_cuda_probe(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) { /* no driver, driver too old, or no device */
        (void)cudaGetLastError();
        n = 0;
    }
    fk_cuda_ndev = n < 0 ? 0 : n;
    if (fk_cuda_ndev == 0)
        fk_cuda_explain(e);
}

extern "C" int fk_cuda_device_count(void)
{
    pthread_once(&fk_cuda_once, fk_cuda_probe);
    return fk_cuda_ndev;
}

extern "C" int fk_cuda_available(void) { return fk_cuda_device_count() > 0; }

extern "C" const char *fk_cuda_unavailable_reason(void)
{
    return fk_cuda_device_count() > 0 ? "" : fk_cuda_why;
}

extern "C" fp8kit_status fk_cuda_ctx_init(fp8kit_ctx *ctx)
{
    int n = fk_cuda_device_count();
    if (n <= 0)
        return fk_fail(ctx, FP8KIT_ERR_BACKEND_UNAVAILABLE, "cuda: %s", fk_cuda_why);
    if (fk_ctx_device(ctx) < 0 || fk_ctx_device(ctx) >= n)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "cuda: device %d does not exist (%d device%s)",
                       fk_ctx_device(ctx), n, n == 1 ? "" : "s");
    cudaDeviceProp p;
    FK_CUDA_CHECK(ctx, cudaGetDeviceProperties(&p, fk_ctx_device(ctx)));
    if (p.major < 8)
        return fk_fail(ctx, FP8KIT_ERR_ARCH_MISMATCH, "cuda: %s is sm_%d%d; fp8kit's kernels need sm_80 or newer",
                       p.name, p.major, p.minor);
    int cur = -1;
    FK_CUDA_CHECK(ctx, cudaGetDevice(&cur));
    if (cur != fk_ctx_device(ctx))
        FK_CUDA_CHECK(ctx, cudaSetDevice(fk_ctx_device(ctx)));
    /* creates the primary context now, so the first call pays no start-up
     * and a broken driver is reported here rather than in a kernel call */
    FK_CUDA_CHECK(ctx, cudaFree(0));
    fk_cuda_state *s = (fk_cuda_state *)calloc(1, sizeof *s);
    if (!s)
        return fk_fail(ctx, FP8KIT_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    s->device = fk_ctx_device(ctx);
    s->cc_major = p.major;
    s->cc_minor = p.minor;
    s->sm_count = p.multiProcessorCount;
    s->smem_optin = p.sharedMemPerBlockOptin;
    snprintf(s->name, sizeof s->name, "%s", p.name);
    fk_ctx_set_state(ctx, s);
    double gib = (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0);
    fk_ctx_set_describe(ctx, "cuda: %s (sm_%d%d, %d SMs, %.0f GiB), device %d", p.name, p.major, p.minor,
                        p.multiProcessorCount, gib, fk_ctx_device(ctx));
    return FP8KIT_OK;
}

extern "C" void fk_cuda_ctx_free(fp8kit_ctx *ctx)
{
    if (!ctx)
        return;
    free(fk_ctx_state(ctx));
    fk_ctx_set_state(ctx, NULL);
}

extern "C" fp8kit_status fk_cuda_bind(fp8kit_ctx *ctx)
{
    if (!fk_ctx_state(ctx))
        return fk_fail(ctx, FP8KIT_ERR_BACKEND_UNAVAILABLE, "cuda: the context has no device state");
    int cur = -1;
    FK_CUDA_CHECK(ctx, cudaGetDevice(&cur));
    if (cur != fk_ctx_device(ctx))
        FK_CUDA_CHECK(ctx, cudaSetDevice(fk_ctx_device(ctx)));
    return FP8KIT_OK;
}

/* ------------------------------------------------------- device memory */
/* fk_mem_ops for a CUDA context (fk_ctx_mem_ops): the checkpoint converter's
 * staging buffers, on the context's device. */
static void *fk_cuda_mem_alloc(fp8kit_ctx *ctx, size_t bytes)
{
    if (fk_cuda_bind(ctx))
        return NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fk_fail(ctx, e == cudaErrorMemoryAllocation ? FP8KIT_ERR_OUT_OF_MEMORY : FP8KIT_ERR_DEVICE,
                "cudaMalloc(%zu bytes) on device %d failed: %s", bytes, fk_ctx_device(ctx), cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void fk_cuda_mem_free(fp8kit_ctx *ctx, void *p)
{
    if (!p || fk_cuda_bind(ctx))
        return;
    (void)cudaFree(p);
    (void)cudaGetLastError();
}

static fp8kit_status fk_cuda_mem_copy(fp8kit_ctx *ctx, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    fp8kit_status st = fk_cuda_bind(ctx);
    if (st || !bytes)
        return st;
    FK_CUDA_CHECK(ctx, cudaMemcpy(dst, src, bytes, kind));
    return FP8KIT_OK;
}

static fp8kit_status fk_cuda_mem_upload(fp8kit_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    return fk_cuda_mem_copy(ctx, dst, src, bytes, cudaMemcpyHostToDevice);
}

static fp8kit_status fk_cuda_mem_download(fp8kit_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    return fk_cuda_mem_copy(ctx, dst, src, bytes, cudaMemcpyDeviceToHost);
}

static const fk_mem_ops fk_cuda_mem = {fk_cuda_mem_alloc, fk_cuda_mem_free, fk_cuda_mem_upload,
                                       fk_cuda_mem_download};

/* ------------------------------------------------------------- dispatch */

/* The quantize op's kernels (fk_cuda_quantize below): tensor, block1x128 and
 * mx axis -1 on quant_seg.cu's, row and block128x128 on quant_tile.cu's, mx
 * axis -2 on quant_colwise.cu's. */
extern "C" fp8kit_status fk_cuda_quantize_can_run(fp8kit_ctx *ctx, const fk_quant_job *job)
{
    switch (job->desc.scheme) {
    case FP8KIT_SCHEME_TENSOR:
    case FP8KIT_SCHEME_BLOCK1X128:
        return fk_cuda_seg_can_run(ctx, job);
    case FP8KIT_SCHEME_ROW:
    case FP8KIT_SCHEME_BLOCK128X128:
        return fk_cuda_tile_can_run(ctx, job);
    case FP8KIT_SCHEME_MX:
        return job->desc.axis == -2 ? fk_cuda_mx_both_can_run(ctx, NULL, job) : fk_cuda_seg_can_run(ctx, job);
    }
    return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda quantize: unknown scheme %d", (int)job->desc.scheme);
}

/* ops->supports: quantize, dequantize and cast answer their kernels' can_run
 * rules (quant.h; the run paths call the same ones), GEMMs the families'
 * can_implement (fk_cuda_supports, gemm/families.cu). Nothing runs. */
static fp8kit_status fk_cuda_supports_op(fp8kit_ctx *ctx, fk_op op, const void *job)
{
    switch (op) {
    case FK_OP_QUANTIZE:
        return fk_cuda_quantize_can_run(ctx, (const fk_quant_job *)job);
    case FK_OP_DEQUANTIZE:
        return fk_cuda_dequant_can_run(ctx, (const fk_quant_job *)job);
    case FK_OP_CAST:
        return fk_cuda_cast_can_run(ctx, (const fk_cast_job *)job);
    default:
        return fk_cuda_supports(ctx, op, job);
    }
}

extern "C" fp8kit_status fk_cuda_quantize(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream)
{
    fp8kit_status st = fk_cuda_bind(ctx);
    if (st)
        return st;
    cudaStream_t s = (cudaStream_t)stream;
    switch (job->desc.scheme) {
    case FP8KIT_SCHEME_TENSOR:
        return fk_cuda_quant_tensor(ctx, job, s);
    case FP8KIT_SCHEME_ROW:
        return fk_cuda_quant_row(ctx, job, s);
    case FP8KIT_SCHEME_BLOCK1X128:
        return fk_cuda_quant_seg(ctx, job, s);
    case FP8KIT_SCHEME_BLOCK128X128:
        return fk_cuda_quant_128x128(ctx, job, s);
    case FP8KIT_SCHEME_MX:
        if (job->desc.axis == -2)
            return fk_cuda_quantize_mx_both(ctx, NULL, job, s);
        return fk_cuda_quant_seg(ctx, job, s);
    }
    return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda quantize: unknown scheme %d", (int)job->desc.scheme);
}

extern "C" fp8kit_status fk_cuda_quantize_both(fp8kit_ctx *ctx, const fk_quant_job *rowwise,
                                               const fk_quant_job *colwise, void *stream)
{
    fp8kit_status st = fk_cuda_bind(ctx);
    if (st)
        return st;
    return fk_cuda_quantize_mx_both(ctx, rowwise, colwise, (cudaStream_t)stream);
}

extern "C" fp8kit_status fk_cuda_dequantize(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream)
{
    fp8kit_status st = fk_cuda_bind(ctx);
    if (st)
        return st;
    return fk_cuda_dequant(ctx, job, (cudaStream_t)stream);
}

extern "C" fp8kit_status fk_cuda_cast(fp8kit_ctx *ctx, const fk_cast_job *job, void *stream)
{
    fp8kit_status st = fk_cuda_bind(ctx);
    if (st)
        return st;
    return fk_cuda_cast_run(ctx, job, (cudaStream_t)stream);
}

/* ------------------------------------------------------------ ops table */
extern "C" const fk_backend_ops fk_cuda_backend = {
    FP8KIT_BACKEND_CUDA,
    "cuda",
    fk_cuda_available,
    fk_cuda_unavailable_reason,
    fk_cuda_ctx_init,
    fk_cuda_ctx_free,
    NULL, /* threads_changed */
    fk_cuda_supports_op,
    fk_cuda_quantize,
    fk_cuda_quantize_both,
    fk_cuda_dequantize,
    fk_cuda_cast,
    fk_cuda_gemm_plan,
    fk_cuda_gemm,
    fk_cuda_gemm_workspace,
    fk_cuda_gemm_workspace_size,
    fk_cuda_grouped_plan,
    fk_cuda_grouped_gemm,
    &fk_cuda_mem,
    fk_cuda_plan_describe,
    fk_cuda_k_grouped_gemm,
    fk_cuda_grouped_workspace,
};
