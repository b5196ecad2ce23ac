/* gemm/host.h - host helpers the CUDA GEMM families share (gemm/sm90/dense_host.cu,
 * gemm/sm90/f16_widen.cu): what the sm90 kernels need, the precise fp32 path, kernel
 * parameters from a job, launch configuration and the launch itself. */
#ifndef FK_CUDA_GEMM_HOST_H
#define FK_CUDA_GEMM_HOST_H

#include <cuda.h>
#include <cuda_runtime.h>
#include "cuda/cuda_state.h"
#include "cuda/gemm/sm90/choose.h"
#include "format/geometry.h"

/* What the sm90 kernels need beyond the core's checks (gemm/sm90/dense_host.cu; the general
 * and small-M families' can_implement). */
fp8kit_status fk_sm90_can_implement(fp8kit_ctx *ctx, const void *job);
/* Whether the job takes the precise fp32 path (fp16 copies; gemm/sm90/f16_widen.cu),
 * and the workspace of those copies (0 off the path). */
int fk_f16_path(const fk_gemm_job *job);
size_t fk_f16_workspace_bytes(const fk_gemm_job *job);
/* The fp16 copies as the kernel's operands (A, B, row bytes and strides), after checking the
 * call's workspace (WORKSPACE_TOO_SMALL, MISALIGNED). */
fp8kit_status fk_f16_operands(fp8kit_ctx *ctx, const fk_gemm_job *job, const void **opa, const void **opb,
                              uint64_t *kbytes, uint64_t *lda, uint64_t *ldb);

/* Whether a call's block scale pointers fit the staged-scale variants (TMA
 * sources: both 16-byte aligned; gemm/sm90/dense_host.cu,
 * gemm/sm90/grouped_host.cu). */
static inline int fk_staged_ptrs_ok(const fk_gemm_job *job)
{
    return ((uintptr_t)job->scale_a & 15u) == 0 && ((uintptr_t)job->scale_b & 15u) == 0;
}

/* The values of B's 128x128 block scales that the staged variants read as
 * one vector (p.tsb, gemm/sm90/pipeline.cuh): `groups` experts `stride`
 * values apart, each `rows` scale rows `ld` values apart of `nkb` K blocks.
 * The kernels index it with 32 bits: staged plans need fewer than
 * FK_STAGED_SB_MAX. */
static inline int64_t fk_staged_sb_count(int64_t groups, int64_t stride, int64_t rows, int64_t ld, int64_t nkb)
{
    return (groups - 1) * stride + (rows - 1) * ld + nkb;
}
#define FK_STAGED_SB_MAX ((int64_t)1 << 31)

/* The MX GEMMs' workspace regions (gemm/sm90/dense_host.cu, gemm/sm90/grouped_host.cu), each 256-byte
 * aligned, at offsets o[0 .. 7]: A's and B's normalized codes (ra, rb rows,
 * row stride K rounded up to 16 bytes), their plain scale bytes (K / 32 per
 * row), their stage tables (fp32 [K block][k32 step][row], rpa / rpb rows)
 * and flags (4 int32 per K block and band of band_a rows / of bn rows).
 * Returns the bytes. */
size_t fk_mx_regions(int64_t k, int64_t ra, int64_t rpa, int band_a, int64_t rb, int64_t rpb, int bn, size_t o[8]);

/* Kernel parameters from the job: zeroed, then shape, scale and epilogue
 * fields (gemm/sm90/dense_host.cu; the general, grouped and small-M launches use it). */
struct fk_gemm_params;
void fk_gemm_job_params(fk_gemm_params *p, const fk_gemm_job *job);

/* A kernel variant as the planner's cost model sees it (gemm/sm90/dense_host.cu;
 * the dense and grouped families' candidates). */
struct fk_sm90_variant;
fk_sm90_cand fk_sm90_cand_of(const fk_sm90_variant *v);
/* The first min(count, max) variants of tab as candidates; returns how many. */
int fk_sm90_cands_of(const fk_sm90_variant *tab, int count, fk_sm90_cand *out, int max);

/* Fills *lc for a 1-D launch of grid x block threads with smem bytes of
 * dynamic shared memory on stream st, and its attributes in at: a cluster of
 * `cluster` CTAs along x when cluster > 1, then programmatic stream
 * serialization when pdl (gemm/sm90/dense_host.cu; every GEMM launch and the cluster
 * occupancy query use it). */
void fk_launch_config(cudaLaunchConfig_t *lc, cudaLaunchAttribute at[2], unsigned grid, unsigned block, size_t smem,
                      cudaStream_t st, unsigned cluster, int pdl);

/* Launches kernel fn through cuLaunchKernelEx with its CUfunction cached in
 * *slot (NULL: none), else through the runtime (gemm/sm90/dense_host.cu). */
fp8kit_status fk_cuda_launch(fp8kit_ctx *ctx, int device, CUfunction *slot, const void *fn,
                             const cudaLaunchConfig_t *lc, void **args, const char *what);

/* The grouped families' shared pieces (gemm/sm90/grouped_host.cu): what their kernels need
 * beyond the core's checks; A's block-scale geometry of one slab (*slab: values from one
 * slab to the next, 0: one slab); rows of B's 2-D tensor map per expert. */
fp8kit_status fk_grp_check(fp8kit_ctx *ctx, const void *job);
void fk_grp_sa_geom(const fk_grouped_job *gj, fk_scale_geom *ga, int64_t *slab);
int64_t fk_grp_brows(const fk_grouped_job *gj);

/* The gated families' two tensor maps (gemm/sm90/glu_host.cu): A (rows_a, kbytes) in boxes of bm
 * rows, B (rows_b, kbytes) in 64-row boxes (gate or up rows); memoized in the plan. */
fp8kit_status fk_glu_maps(fp8kit_ctx *ctx, const fk_plan *plan, int device, const void *a, uint64_t rows_a,
                          uint64_t lda, const void *b, uint64_t rows_b, uint64_t ldb, uint64_t kbytes, int bm,
                          CUtensorMap tmaps[2]);

#endif
