/* launch.cu - the launch helpers every CUDA GEMM family shares: the launch
 * configuration (clusters, programmatic dependent launch), the cluster
 * occupancy query, kernel parameters from a job, the launch itself through
 * the driver (with its cached CUfunction) or the runtime, and the test
 * hook that records launches. Declared in gemm/host.h. */
#include <string.h>
#include "cuda/cuda_state.h"
#include "cuda/driver.h"
#include "cuda/gemm/host.h"
#include "cuda/gemm/params.h"

void fk_launch_config(cudaLaunchConfig_t *lc, cudaLaunchAttribute at[2], unsigned grid, unsigned block, size_t smem,
                      cudaStream_t st, unsigned cluster, int pdl)
{
    memset(lc, 0, sizeof *lc);
    memset(at, 0, 2 * sizeof at[0]);
    unsigned na = 0;
    if (cluster > 1) {
        at[na].id = cudaLaunchAttributeClusterDimension;
        at[na].val.clusterDim.x = cluster;
        at[na].val.clusterDim.y = 1;
        at[na].val.clusterDim.z = 1;
        na++;
    }
    if (pdl) {
        at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[na].val.programmaticStreamSerializationAllowed = 1;
        na++;
    }
    lc->gridDim = dim3(grid);
    lc->blockDim = dim3(block);
    lc->dynamicSmemBytes = smem;
    lc->stream = st;
    lc->attrs = at;
    lc->numAttrs = na;
}

cudaError_t fk_cuda_max_clusters(const void *fn, int cluster, int threads, size_t smem, int sm_count, int *count)
{
    cudaLaunchConfig_t lc;
    cudaLaunchAttribute at[2];
    fk_launch_config(&lc, at, (unsigned)(cluster * (sm_count / cluster)), (unsigned)threads, smem, 0,
                     (unsigned)cluster, 0);
    *count = 0;
    return cudaOccupancyMaxActiveClusters(count, fn, &lc);
}

/* Kernel parameters from the job: all zero, then the shape and the scale and
 * epilogue fields (shared by the general, grouped and small-M kernels, which
 * add their own schedule fields). */
void fk_gemm_job_params(fk_gemm_params *p, const fk_gemm_job *job)
{
    const fp8kit_gemm_desc *dd = &job->desc;
    memset(p, 0, sizeof *p);
    p->m = (int)job->m;
    p->n = (int)job->n;
    p->k = (int)job->k;
    p->sa_mode = dd->scale_a;
    p->sb_mode = dd->scale_b;
    p->sa = (const float *)job->scale_a;
    p->sb = (const float *)job->scale_b;
    p->alpha = job->alpha;
    p->beta = job->beta;
    p->c = job->c;
    p->ldc = job->ldc;
    p->c_type = job->c_type;
    p->bias = job->bias;
    p->bias_type = job->bias_type;
    p->bias_mode = job->bias ? dd->bias : FP8KIT_BIAS_NONE;
    p->act = dd->act;
    p->d = job->d;
    p->ldd = job->ldd;
    p->d_type = job->d_type;
    p->out_quant = dd->out_quant;
    p->scale_d = job->scale_d_in;
    p->amax_bits = (unsigned int *)job->amax_d;
    p->scale_d_out = job->scale_d_out;
    p->out_hp = dd->out_hp;
    p->out_rceil = dd->out_rounding == FP8KIT_ROUND_RCEIL;
    p->out_pow2 = dd->out_pow2 != 0;
}

/* Launches kernel fn (a host stub) as lc describes through the driver's
 * cuLaunchKernelEx and fn's CUfunction, resolved once into *slot (NULL: no
 * cache, the runtime's launch), which costs ~0.3 us less host time than
 * the runtime's launch (bench_launch); falls back to cudaLaunchKernelExC
 * when the driver entry point or the handle is missing. The runtime's and
 * the driver's launch attributes share ids and layout. what: the failing
 * path's name in the message. */
fp8kit_status fk_cuda_launch(fp8kit_ctx *ctx, int device, CUfunction *slot, const void *fn,
                             const cudaLaunchConfig_t *lc, void **args, const char *what)
{
    static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute), "launch attribute layout");
    static_assert((int)cudaLaunchAttributeClusterDimension == (int)CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION &&
                      (int)cudaLaunchAttributeProgrammaticStreamSerialization ==
                          (int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                  "launch attribute ids");
    fk_cu_launch_ex_fn launch = fk_cu_launch_ex_fn_get();
    CUfunction f = launch && slot ? fk_cufn_get(slot, fn) : NULL;
    if (f) {
        CUlaunchConfig dc;
        memset(&dc, 0, sizeof dc);
        dc.gridDimX = lc->gridDim.x;
        dc.gridDimY = dc.gridDimZ = 1;
        dc.blockDimX = lc->blockDim.x;
        dc.blockDimY = dc.blockDimZ = 1;
        dc.sharedMemBytes = (unsigned)lc->dynamicSmemBytes;
        dc.hStream = (CUstream)lc->stream;
        dc.attrs = (CUlaunchAttribute *)lc->attrs;
        dc.numAttrs = lc->numAttrs;
        CUresult r = launch(&dc, f, args, NULL);
        if (r == CUDA_ERROR_INVALID_CONTEXT) {
            /* a new thread: the runtime makes the primary context current lazily */
            FK_CUDA_CHECK(ctx, cudaSetDevice(device));
            r = launch(&dc, f, args, NULL);
        }
        if (r != CUDA_SUCCESS)
            return fk_fail(ctx, r == CUDA_ERROR_OUT_OF_MEMORY ? FP8KIT_ERR_OUT_OF_MEMORY : FP8KIT_ERR_DEVICE,
                           "%s: cuLaunchKernelEx failed (CUresult %d)", what, (int)r);
        return FP8KIT_OK;
    }
    cudaError_t e = cudaLaunchKernelExC(lc, fn, args);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fk_fail(ctx, FP8KIT_ERR_DEVICE, "%s: launch failed: %s", what, cudaGetErrorString(e));
    }
    return FP8KIT_OK;
}

static fk_launch_hook_fn fk_launch_hook;
extern "C" void fk_cuda_set_launch_hook(fk_launch_hook_fn hook) { __atomic_store_n(&fk_launch_hook, hook, __ATOMIC_RELEASE); }
extern "C" fk_launch_hook_fn fk_cuda_launch_hook(void) { return __atomic_load_n(&fk_launch_hook, __ATOMIC_ACQUIRE); }
