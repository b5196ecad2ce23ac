/* gemm/sm90/small.cu - the sm90_small family (small-M decode GEMM, M <= 128):
 * its compiled kernel variants (the kernel is small_kernel.cuh), the plan
 * (launch shape by small_choose.c's cost model), the launch and the family
 * entry. */
#include "cuda/gemm/sm90/small_kernel.cuh"
#include "cuda/gemm/sm90/choose.h"
#include "cuda/driver.h"

#ifdef FK_SMALL_TRACE
extern "C" int fk_small_trace_get(unsigned long long *dst, int ctas)
{
    return (int)cudaMemcpyFromSymbol(dst, fk_small_trace_buf, (size_t)ctas * 12 * 8);
}
#endif

/* ----------------------------------------------------------------- host */
typedef void (*fk_small_fn)(const CUtensorMap, const CUtensorMap, const fk_gemm_params,
                            const fk_small_params);
struct fk_small_variant {
    int nt, wab, cs; /* rows of A per stage, type pair, column split */
    fk_small_fn fn;
};
#define FK_SV(NW, WAB, CS) {CS ? 2 * NW : NW, WAB, CS, fk_small_kernel<NW, WAB, CS>}
static const fk_small_variant fk_small_variants[] = {
    FK_SV(32, 0, 0),  FK_SV(32, 1, 0),  FK_SV(32, 2, 0),  FK_SV(32, 3, 0),  FK_SV(64, 0, 0),  FK_SV(64, 1, 0),
    FK_SV(64, 2, 0),  FK_SV(64, 3, 0),  FK_SV(128, 0, 0), FK_SV(128, 1, 0), FK_SV(128, 2, 0), FK_SV(128, 3, 0),
    FK_SV(32, 0, 1),  FK_SV(32, 1, 1),  FK_SV(32, 2, 1),  FK_SV(32, 3, 1),  FK_SV(64, 0, 1),  FK_SV(64, 1, 1),
    FK_SV(64, 2, 1),  FK_SV(64, 3, 1),
};
#undef FK_SV
#define FK_SMALL_NVAR ((int)(sizeof fk_small_variants / sizeof fk_small_variants[0]))

/* The plan's config bytes. */
struct fk_small_config {
    int32_t family; /* FK_FAM_SM90_SMALL */
    int32_t variant;
    int32_t device;
    int32_t grid;
    int32_t smem;
    int16_t pdl;    /* launched with programmatic stream serialization */
    int8_t bpromo;  /* B's tensor-map L2 promotion: 0 none, 1 64 B, 2 128 B, 3 256 B */
    int8_t store;   /* the store path (gemm/store.h): general, the only one of FK_STORES_SMALL */
    fk_small_params q;
};
static_assert(sizeof(fk_small_config) <= FK_PLAN_CONFIG_BYTES, "small plan config too large");

/* Whether the small-M kernel should take a job it can run, by shape
 * (small_choose.c), unless a general-kernel override (gemm_promo, gemm_bn)
 * is set. */
static int fk_small_preferred(const fk_gemm_job *job, const fk_tuning *tu, int sm_count)
{
    return fk_small_preferred_shape(job->m, job->n, job->k, sm_count,
                                    tu->gemm_promo != FK_AUTO || tu->gemm_bn != FK_AUTO);
}

/* Whether none of the small family's launch-shape tunings is set. */
static int fk_small_free(const fk_tuning *tu)
{
    return tu->small_r == FK_AUTO && tu->small_split == FK_AUTO && tu->small_mc == FK_AUTO &&
           tu->small_cs == FK_AUTO && tu->small_mh == FK_AUTO;
}

/* Raises the shared-memory limit of the small variants vi[0] (and vi[1]
 * when >= 0) and counts the clusters of 1, 2, 4 and 8 CTAs that fit at once
 * (1 CTA per SM) into slots. */
static fp8kit_status fk_small_cluster_slots(fp8kit_ctx *ctx, const fk_cuda_state *cs, const int vi[2], int smem,
                                            int64_t slots[4])
{
    const void *fn = (const void *)fk_small_variants[vi[0]].fn;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess || (prev != cs->device && cudaSetDevice(cs->device) != cudaSuccess)) {
        (void)cudaGetLastError();
        return fk_fail(ctx, FP8KIT_ERR_DEVICE, "cuda gemm (small M): cannot select device %d", cs->device);
    }
    cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess && vi[1] >= 0)
        e = cudaFuncSetAttribute((const void *)fk_small_variants[vi[1]].fn,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    /* clusters of 2, 4 and 8 that fit at once (1 CTA per SM) */
    slots[0] = cs->sm_count;
    slots[1] = slots[2] = slots[3] = 0;
    for (int i = 1; i < 4 && e == cudaSuccess; i++) {
        int nc = 0;
        if (fk_cuda_max_clusters(fn, 1 << i, FK_SMALL_THREADS, (size_t)smem, cs->sm_count, &nc) == cudaSuccess)
            slots[i] = nc;
        else
            (void)cudaGetLastError();
    }
    if (prev >= 0 && prev != cs->device)
        (void)cudaSetDevice(prev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fk_fail(ctx, FP8KIT_ERR_DEVICE, "cuda gemm (small M): cudaFuncSetAttribute failed: %s",
                       cudaGetErrorString(e));
    }
    return FP8KIT_OK;
}

int fk_small_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config, fp8kit_status *st)
{
    const fk_cuda_state *cs = fk_cuda(ctx);
    const fp8kit_gemm_desc *dd = &job->desc;
    /* tuning gemm_small=0: never, 1: whenever supported, 2: always or fail
     * (tests); unset: when fk_small_preferred says so */
    const fk_tuning *tu = fk_ctx_tuning(ctx);
    const int force = tu->gemm_small;
#define FK_SMALL_DECLINE(why)                                                                       \
    do {                                                                                            \
        if (force != 2)                                                                             \
            return 0;                                                                               \
        *st = fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: small-M path declined (gemm_small=2): %s", why); \
        return 1;                                                                                   \
    } while (0)
    if (force == 0)
        return 0;
    if (job->m < 1 || job->m > 128 || job->n < 1 || job->k < 16)
        FK_SMALL_DECLINE("needs 1 <= M <= 128, N >= 1, K >= 16");
    if (dd->scale_a == FP8KIT_SCALE_BLOCK || dd->scale_a == FP8KIT_SCALE_MX ||
        dd->scale_b == FP8KIT_SCALE_MX || dd->scale_b == FP8KIT_SCALE_BLOCK)
        FK_SMALL_DECLINE("block and mx scaling are not implemented on this path");
    if (force < 0 && !fk_small_preferred(job, tu, cs->sm_count))
        return 0;
    /* small_mh=2: M > 64 in two parts of 64 rows of A, each on its own CTAs */
    const int mh = job->m > 64 && fk_tuned(tu->small_mh, 1) == 2 ? 2 : 1;
    const int nt = job->m <= 32 ? 32 : job->m <= 64 || mh == 2 ? 64 : 128;
    const int wab = fk_sm90_fp8_pair(job->b_type, job->a_type); /* (swapped: B is the wgmma A operand) */
    int vi[2] = {-1, -1}; /* without, with column split */
    for (int i = 0; i < FK_SMALL_NVAR; i++)
        if (fk_small_variants[i].nt == nt && fk_small_variants[i].wab == wab)
            vi[fk_small_variants[i].cs] = i;
    if (vi[0] < 0)
        FK_SMALL_DECLINE("no kernel variant");
    const int smem = FK_SMALL_SMEM;
    if ((size_t)smem > cs->smem_optin)
        FK_SMALL_DECLINE("not enough shared memory");
    *st = FP8KIT_OK;
    int64_t slots[4];
    if ((*st = fk_small_cluster_slots(ctx, cs, vi, smem, slots)) != FP8KIT_OK)
        return 1;
    const int64_t kb = (job->k + FK_GEMM_BK - 1) / FK_GEMM_BK;
    fk_small_shape c;
    int64_t part_slots[4]; /* each M part has its share of the SMs */
    for (int i = 0; i < 4; i++)
        part_slots[i] = slots[i] / mh;
    (void)fk_small_pick(job->n, job->m, kb, nt, part_slots, fk_tuned(tu->small_r, 0),
                        fk_tuned(tu->small_split, 0), fk_tuned(tu->small_mc, 0),
                        tu->small_cs == FK_AUTO ? 0 : tu->small_cs ? 1 : -1, &c);
    if (c.r == 0)
        FK_SMALL_DECLINE("small_r / small_split / small_mc / small_cs do not fit this shape");
    /* an automatic choice leaves plans of too many waves to the general kernel */
    if (force < 0 && fk_small_free(tu) && fk_small_too_many_waves(job->m, job->n, c, part_slots))
        return 0;
    if (c.cs && vi[1] < 0)
        FK_SMALL_DECLINE("no column-split kernel variant");
    fk_small_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.family = FK_FAM_SM90_SMALL;
    cfg.variant = vi[c.cs];
    cfg.device = cs->device;
    const int64_t bands = (job->n + c.r - 1) / c.r;
    const int64_t grid = (bands + c.mc - 1) / c.mc * c.mc * c.split * mh;
    if (grid > INT32_MAX / 2)
        FK_SMALL_DECLINE("too many CTAs");
    cfg.grid = (int32_t)grid;
    cfg.smem = smem;
    cfg.pdl = fk_tuned(tu->small_pdl, 1) != 0;
    const int bw = fk_small_bw(c.r);
    cfg.q.r = c.r;
    cfg.q.w = c.cs ? 2 : bw;
    cfg.q.split = c.split;
    cfg.q.mc = c.mc;
    cfg.q.kb_total = (int)kb;
    cfg.q.mh = mh;
    /* A's loads stop at M rounded up to 8 (fk_sm90_box_rows); in parts or shared by multicast, whole boxes */
    cfg.q.ra = mh == 1 && c.mc == 1 ? fk_sm90_box_rows(job->m, nt) : nt;
    const int slot = bw * 64 * 128 + nt * 128;
    /* ring, barriers, fk_small_warm's scales */
    int stages = (smem - 1024 - 2 * 8 * FK_SMALL_MAXST - 4 * FK_SMALL_WARM_FLOATS) / slot;
    /* FK_SMALL_DEPTH stages by default: deeper rings (and more L2
     * prefetch) streamed B slower on the H100 (1x7168x7168: 21.2 us with
     * 8 stages, 21.8 with 16) */
    const int fst = fk_tuned(tu->small_stages, FK_SMALL_DEPTH);
    if (fst > 0 && fst < stages)
        stages = fst;
    cfg.q.stages = stages > FK_SMALL_MAXST ? FK_SMALL_MAXST : stages;
    const int fpf = tu->small_pf;
    cfg.q.pf = !cfg.pdl ? 0 : fpf >= 0 ? fpf : cfg.q.stages;
    cfg.q.flags = (fk_tuned(tu->small_rot, 0) ? FK_SMALL_ROT : 0) | (fk_tuned(tu->small_bpol, 0) ? FK_SMALL_BNOHINT : 0) |
                  (fk_tuned(tu->small_pp, 1) ? 0 : FK_SMALL_NOPP) |
                  (fk_tuned(tu->small_plain, 1) ? 0 : FK_SMALL_NOPLAIN) |
                  (fk_tuned(tu->small_exitrel, 0) ? FK_SMALL_EXITREL : 0);
    /* 128-byte L2 promotion of B's rows (the box width): 256 B was 2-3%
     * slower (the second half lands in L2 long before its K block) */
    const int promo = fk_tuned(tu->small_bpromo, 2);
    cfg.bpromo = (int8_t)(promo >= 0 && promo <= 3 ? promo : 2);
    /* 4 adjacent columns of a row per thread through the general element stores (fk_epi_store4) */
    cfg.store = (int8_t)fk_store_plan(FK_STORES_SMALL, NULL, job, 0);
    /* the partial tile (NT x (64 bw + 4) fp32) lives in the ring */
    if (cfg.q.stages < 2 || nt * (64 * bw + 4) * 4 > cfg.q.stages * slot)
        FK_SMALL_DECLINE("shared memory layout does not fit");
#undef FK_SMALL_DECLINE
    memcpy(config, &cfg, sizeof cfg);
    return 1;
}

/* B's tensor map: N x K bytes, boxes of r rows x 128 bytes, 128-byte
 * swizzle, L2 promotion by `promo` (fk_tma_map_2d_u8 with the promotion
 * as a choice: 3 = 256 B, that function's fixed value). */
static CUresult fk_small_map_b(CUtensorMap *map, const void *base, uint64_t rows, uint64_t cols, uint64_t ld,
                               uint32_t r, int promo)
{
    if (promo == 3)
        return fk_tma_map_2d_u8(map, base, rows, cols, ld, FK_GEMM_BK, r);
    fk_encode_tiled_fn fn = fk_tma_encode_fn();
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    static const CUtensorMapL2promotion pr[3] = {CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
                                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B};
    cuuint64_t dims[2] = {cols, rows};
    cuuint64_t strides[1] = {ld};
    cuuint32_t box[2] = {FK_GEMM_BK, r};
    cuuint32_t estr[2] = {1, 1};
    return fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)base, dims, strides, box, estr,
              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, pr[promo], CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* Launches small variant vi as lc describes (fk_cuda_launch: the driver's
 * cuLaunchKernelEx with the variant's CUfunction, cached per device and
 * variant, else the runtime). */
#define FK_SMALL_MAX_DEVICES 64
static CUfunction fk_small_cufn[FK_SMALL_MAX_DEVICES][FK_SMALL_NVAR];

static fp8kit_status fk_small_launch(fp8kit_ctx *ctx, int device, int vi, const cudaLaunchConfig_t *lc, void **args)
{
    const fk_small_variant *v = &fk_small_variants[vi];
    CUfunction *slot = device >= 0 && device < FK_SMALL_MAX_DEVICES ? &fk_small_cufn[device][vi] : NULL;
    return fk_cuda_launch(ctx, device, slot, (const void *)v->fn, lc, args, "cuda gemm (small M)");
}

void fk_small_describe(const fk_plan *plan, char *buf, size_t n)
{
    fk_small_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    snprintf(buf, n,
             "sm90_small variant=%d grid=%d r=%d bw=%d w=%d split=%d mc=%d mh=%d ra=%d stages=%d pf=%d flags=%d bpromo=%d "
             "pdl=%d store=%s",
             cfg.variant, cfg.grid, cfg.q.r, fk_small_bw(cfg.q.r), cfg.q.w, cfg.q.split, cfg.q.mc, cfg.q.mh, cfg.q.ra,
             cfg.q.stages, cfg.q.pf, cfg.q.flags, cfg.bpromo, cfg.pdl, fk_store_name(cfg.store));
}

fp8kit_status fk_small_gemm(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan, void *stream)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    fk_small_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    if (cfg.family != FK_FAM_SM90_SMALL || cfg.variant < 0 || cfg.variant >= FK_SMALL_NVAR || cfg.q.split < 1 ||
        cfg.q.mc < 1 || cfg.q.split * cfg.q.mc > 8 || cfg.q.stages < 2 || cfg.q.stages > FK_SMALL_MAXST ||
        cfg.q.mh < 1 || cfg.q.mh > 2 || cfg.grid % cfg.q.mh ||
        fk_store_run(FK_STORES_SMALL, cfg.store, NULL, job) != cfg.store) /* general: p.d_bulk stays 0 */
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm (small M): bad plan");
    const fk_small_variant *v = &fk_small_variants[cfg.variant];
    if (cfg.q.ra < 8 || cfg.q.ra > v->nt || cfg.q.ra % 8 || (cfg.q.ra < v->nt && (cfg.q.mc > 1 || cfg.q.mh > 1)))
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm (small M): bad plan");
    const fp8kit_gemm_desc *dd = &job->desc;
    cudaStream_t st = (cudaStream_t)stream;
    int prev = -1;
    FK_CUDA_CHECK(ctx, cudaGetDevice(&prev));
    if (prev != cfg.device)
        FK_CUDA_CHECK(ctx, cudaSetDevice(cfg.device));
    fp8kit_status rs = FP8KIT_OK;
    do {
        if (dd->out_quant == FP8KIT_OUTQ_SCALED && job->amax_d) {
            cudaError_t e = cudaMemsetAsync(job->amax_d, 0, sizeof(float), st);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                rs = fk_fail(ctx, FP8KIT_ERR_DEVICE, "cuda gemm (small M): cudaMemsetAsync: %s",
                             cudaGetErrorString(e));
                break;
            }
        }
        /* tensor maps: A (M x K, boxes of NT / mc rows), B (N x K, boxes of
         * R rows), memoized per plan like the general kernel's */
        CUtensorMap tmaps[2];
        const uint32_t abox = (uint32_t)(cfg.q.mc > 1 ? v->nt / cfg.q.mc : cfg.q.ra);
        const uint64_t tkey[11] = {(uint64_t)(uintptr_t)job->a, (uint64_t)job->m, (uint64_t)job->k,
                                   (uint64_t)job->lda, (uint64_t)abox, (uint64_t)(uintptr_t)job->b,
                                   (uint64_t)job->n, (uint64_t)job->ldb, (uint64_t)cfg.q.r | (uint64_t)cfg.bpromo << 32, FK_GEMM_BK,
                                   (uint64_t)(int64_t)FK_FAM_SM90_SMALL};
        if (!fk_plan_memo_get(plan, tkey, 11, tmaps, sizeof tmaps)) {
            memset(tmaps, 0, sizeof tmaps);
            CUresult r = fk_tma_map_2d_u8(&tmaps[0], job->a, (uint64_t)job->m, (uint64_t)job->k,
                                          (uint64_t)job->lda, FK_GEMM_BK, abox);
            if (r == CUDA_SUCCESS)
                r = fk_small_map_b(&tmaps[1], job->b, (uint64_t)job->n, (uint64_t)job->k, (uint64_t)job->ldb,
                                   (uint32_t)cfg.q.r, cfg.bpromo);
            if (r != CUDA_SUCCESS) {
                rs = fk_fail(ctx, FP8KIT_ERR_DEVICE, "cuda gemm (small M): cuTensorMapEncodeTiled failed (%d)",
                             (int)r);
                break;
            }
            fk_plan_memo_put(plan, tkey, 11, tmaps, sizeof tmaps);
        }
        fk_gemm_params p;
        fk_gemm_job_params(&p, job);
        p.num_kb = cfg.q.kb_total;
        fk_small_params q = cfg.q;
        void *args[4] = {(void *)&tmaps[0], (void *)&tmaps[1], &p, &q};
        /* cluster of split x mc CTAs; programmatic stream serialization:
         * the kernel may start while the previous kernel of the stream
         * finishes (it waits in griddepcontrol.wait before touching
         * anything but L2) */
        cudaLaunchConfig_t lc;
        cudaLaunchAttribute at[2];
        fk_launch_config(&lc, at, (unsigned)cfg.grid, FK_SMALL_THREADS, (size_t)cfg.smem, st,
                         (unsigned)(cfg.q.split * cfg.q.mc), cfg.pdl);
        rs = fk_small_launch(ctx, cfg.device, cfg.variant, &lc, args);
    } while (0);
    if (prev >= 0 && prev != cfg.device)
        (void)cudaSetDevice(prev);
    return rs;
}

/* ---------------------------------------------------------------- family */
/* The sm90 kernels' own needs first (fk_sm90_can_implement: when they
 * fail, the general family reports why); then no fused row quantization
 * and not the precise fp32 path. */
static fp8kit_status fk_small_can_implement(fp8kit_ctx *ctx, const void *jp)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    if (fk_sm90_can_implement(ctx, job) != FP8KIT_OK)
        return FK_DECLINED;
    const fp8kit_out_quant oq = job->desc.out_quant;
    if (oq == FP8KIT_OUTQ_MX || oq == FP8KIT_OUTQ_BLOCK1X128 || fk_f16_path(job))
        return FK_DECLINED;
    return FP8KIT_OK;
}

/* fk_small_plan's verdict; with autotune on the general family times this
 * plan among its own candidates, so the job goes on to it. */
static fp8kit_status fk_small_family_plan(fp8kit_ctx *ctx, const void *jp, void *config)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    fp8kit_status st = FP8KIT_OK;
    if (!fk_small_plan(ctx, job, config, &st))
        return FK_DECLINED;
    if (st != FP8KIT_OK)
        return st;
    return fk_ctx_autotune(ctx) ? FK_DECLINED : FP8KIT_OK;
}

static size_t fk_small_workspace(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan)
{
    (void)ctx;
    (void)jp;
    (void)plan;
    return 0;
}

const fk_gemm_family fk_family_sm90_small = {
    FK_FAM_SM90_SMALL, "sm90_small", FK_FAM_DENSE, 90, 90, fk_small_can_implement, fk_small_family_plan,
    fk_small_gemm, fk_small_workspace, fk_small_describe,
};
