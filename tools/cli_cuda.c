/* cli_cuda.c - the CLI's only contact with the CUDA runtime: device queries,
 * device memory, copies, synchronisation, L2 flush and CUDA-event timing for
 * `fp8kit bench` / `fp8kit gemm` on the CUDA backend. Compiled as plain C; the
 * CUDA part exists only when CMake defines FP8KIT_HAVE_CUDA (CUDA backend
 * built), otherwise every function reports "not built with CUDA". */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static char cli_cuda_err[256] = "";

const char *cli_cuda_last_error(void) { return cli_cuda_err; }

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>

static int cli_cuda_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    snprintf(cli_cuda_err, sizeof cli_cuda_err, "%s: %s", what, cudaGetErrorString(e));
    (void)cudaGetLastError();
    return -1;
}

int cli_cuda_compiled(void) { return 1; }

int cli_cuda_device_count(char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (err) snprintf(err, errlen, "%s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return -1;
    }
    return n;
}

int cli_cuda_device_info(int device, cli_cuda_info *out, char *err, size_t errlen)
{
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess) {
        if (err) snprintf(err, errlen, "%s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        return -1;
    }
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sm_count = p.multiProcessorCount;
    out->mem_total = p.totalGlobalMem;
    int prev = 0;
    if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(device) == cudaSuccess) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) out->mem_free = fr;
        (void)cudaSetDevice(prev);
    }
    (void)cudaDriverGetVersion(&out->driver_version);
    (void)cudaRuntimeGetVersion(&out->runtime_version);
    (void)cudaGetLastError();
    return 0;
}

void *cli_cuda_malloc(size_t bytes)
{
    void *p = NULL;
    if (cli_cuda_check(cudaMalloc(&p, bytes), "cudaMalloc")) return NULL;
    return p;
}

void cli_cuda_free(void *p)
{
    if (p) (void)cudaFree(p);
}

int cli_cuda_h2d(void *dst, const void *src, size_t bytes)
{
    return cli_cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

int cli_cuda_d2h(void *dst, const void *src, size_t bytes)
{
    return cli_cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

int cli_cuda_d2d(void *dst, const void *src, size_t bytes)
{
    return cli_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0),
                          "cudaMemcpyAsync D2D");
}

int cli_cuda_sync(void) { return cli_cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

/* A buffer of twice the L2 size (at least 64 MiB), overwritten before each
 * timed repetition so no input stays cached from the previous one. Kept for
 * the life of the process. */
static void *cli_flush_buf;
static size_t cli_flush_bytes;

int cli_cuda_flush_l2(void)
{
    if (!cli_flush_buf) {
        int dev = 0, l2 = 0;
        if (cli_cuda_check(cudaGetDevice(&dev), "cudaGetDevice")) return -1;
        if (cli_cuda_check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev),
                           "cudaDeviceGetAttribute(L2)"))
            return -1;
        cli_flush_bytes = (size_t)l2 * 2 > ((size_t)64 << 20) ? (size_t)l2 * 2 : ((size_t)64 << 20);
        if (cli_cuda_check(cudaMalloc(&cli_flush_buf, cli_flush_bytes), "cudaMalloc(L2 flush)"))
            return -1;
    }
    return cli_cuda_check(cudaMemsetAsync(cli_flush_buf, 0x5A, cli_flush_bytes, 0),
                          "cudaMemsetAsync(L2 flush)");
}

static cudaEvent_t cli_ev_start, cli_ev_stop;
static int cli_ev_ready;

int cli_cuda_timer_begin(void)
{
    if (!cli_ev_ready) {
        if (cli_cuda_check(cudaEventCreate(&cli_ev_start), "cudaEventCreate") ||
            cli_cuda_check(cudaEventCreate(&cli_ev_stop), "cudaEventCreate"))
            return -1;
        cli_ev_ready = 1;
    }
    return cli_cuda_check(cudaEventRecord(cli_ev_start, 0), "cudaEventRecord");
}

int cli_cuda_timer_end(double *seconds)
{
    float ms = 0.0f;
    if (cli_cuda_check(cudaEventRecord(cli_ev_stop, 0), "cudaEventRecord") ||
        cli_cuda_check(cudaEventSynchronize(cli_ev_stop), "cudaEventSynchronize") ||
        cli_cuda_check(cudaEventElapsedTime(&ms, cli_ev_start, cli_ev_stop), "cudaEventElapsedTime"))
        return -1;
    *seconds = 1e-3 * (double)ms;
    return 0;
}

#else /* !FP8KIT_HAVE_CUDA: the CLI is CPU-only */

static int cli_no_cuda(void)
{
    snprintf(cli_cuda_err, sizeof cli_cuda_err, "fp8kit was built without the CUDA backend");
    return -1;
}

int cli_cuda_compiled(void) { return 0; }
int cli_cuda_device_count(char *err, size_t errlen)
{
    if (err) snprintf(err, errlen, "fp8kit was built without the CUDA backend");
    return -1;
}
int cli_cuda_device_info(int device, cli_cuda_info *out, char *err, size_t errlen)
{
    (void)device;
    (void)out;
    return cli_cuda_device_count(err, errlen);
}
void *cli_cuda_malloc(size_t bytes)
{
    (void)bytes;
    (void)cli_no_cuda();
    return NULL;
}
void cli_cuda_free(void *p) { (void)p; }
int cli_cuda_h2d(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return cli_no_cuda();
}
int cli_cuda_d2h(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return cli_no_cuda();
}
int cli_cuda_d2d(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return cli_no_cuda();
}
int cli_cuda_sync(void) { return cli_no_cuda(); }
int cli_cuda_flush_l2(void) { return cli_no_cuda(); }
int cli_cuda_timer_begin(void) { return cli_no_cuda(); }
int cli_cuda_timer_end(double *seconds)
{
    *seconds = 0.0;
    return cli_no_cuda();
}
#endif
