/* dense_host.cu - host side of the dense Hopper GEMM (the sm90 family): fk_cuda_gemm_plan (checks
 * what the Hopper kernel needs - sm_90, alignment, supported combinations -
 * and picks a kernel variant and grid, cached by the core as the plan),
 * fk_cuda_gemm (fills the kernel parameters - the two TMA tensor maps are
 * memoized per plan - and launches; no allocation) and fk_cuda_gemm_workspace
 * (only precise fp32 output needs one: fp16 copies of A and B, gemm/sm90/f16_widen.cu).
 * The planner's choices can be forced per context through the tuning
 * overrides (core/tuning.h: gemm_small, gemm_bn, gemm_promo, gemm_cluster,
 * gemm_ts, gemm_bulk, gemm_lag, gemm_sk, gemm_pdl); fp8kit_gemm_describe
 * prints a plan's choice (fk_cuda_plan_describe). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cuda/cuda_state.h"
#include "format/geometry.h"
#include "cuda/gemm/params.h"
#include "cuda/gemm/family.h"
#include "cuda/gemm/sm90/small.h"
#include "cuda/gemm/sm90/choose.h"
#include "cuda/gemm/host.h"
#include "cuda/gemm/store.h"
#include "cuda/driver.h"
#include <stdio.h>

extern "C" fp8kit_status fk_cuda_gemm_autotune(fp8kit_ctx *ctx, const fk_gemm_job *job,
                                               const unsigned char *cands, int count,
                                               const char *signature, void *config);

/* The precise fp32-output path (gemm/sm90/f16_widen.cu; fk_f16_path and
 * fk_f16_workspace_bytes in gemm/host.h). */
fp8kit_status fk_f16_widen(fp8kit_ctx *ctx, const fk_gemm_job *job, void *ws, cudaStream_t st);

/* The plan's config bytes (FK_PLAN_CONFIG_BYTES = 64). */
struct fk_sm90_config {
    int32_t family;  /* FK_FAM_SM90 */
    int32_t variant; /* index into fk_sm90_variants */
    int32_t grid;
    int32_t group_m;
    int32_t device;
    int32_t no_bulk; /* tuning gemm_bulk=0: the general store path only */
    int32_t lag;     /* stages consumer warpgroup 1 runs behind warpgroup 0 (tuning gemm_lag) */
    int32_t sk_parts; /* stream-K tail (fk_sm90_sk_plan): parts per tail tile (0: none) */
    int32_t sk_tail;  /* tail tiles */
    int32_t sk_grid;  /* the grid with the stream-K tail */
    int32_t pdl;      /* launched with programmatic stream serialization (tuning gemm_pdl) */
    int32_t store;    /* the store path (gemm/store.h) chosen for the job */
    int32_t items;    /* the cost model's view (describe): work items (tiles, or tile pairs of a cluster) */
    int32_t slots;    /* work items running at once (SMs, or 2-CTA clusters that fit) */
    float cost;       /* the cost model's figure for the pick (0: not the model's pick) */
    int16_t considered; /* candidates the model costed */
    int16_t dropped;    /* tuning keys no variant satisfied (FK_SM90_DROP_* bits) */
};
static_assert(sizeof(fk_sm90_config) <= FK_PLAN_CONFIG_BYTES, "plan config too large");
#define FK_SM90_MAX_CANDS 128 /* variants the planner reads (the table has fewer) */

/* 128-row waves per tile of variant v (its tile height / 128). */
static int fk_waves(const fk_sm90_variant *v) { return v->waves > 1 ? v->waves : 1; }

/* Rows of B one CTA loads per K block: the tile's, or its share of a multicast tile. */
static int fk_sm90_b_box(const fk_sm90_variant *v) { return v->mc_a ? v->bn : v->bn / v->cluster; }

fk_sm90_cand fk_sm90_cand_of(const fk_sm90_variant *v)
{
    const fk_sm90_cand c = {v->bn, FK_GEMM_BM * fk_waves(v), v->cluster, v->promo, (int)v->scaling, (int)v->ops,
                            v->tma_store, v->mc_a};
    return c;
}

/* Variant v's grid of work items on an m x n output (fk_sm90_item_grid). */
static void fk_sm90_items(const fk_sm90_variant *v, int64_t m, int64_t n, int64_t *im, int64_t *in)
{
    const fk_sm90_cand c = fk_sm90_cand_of(v);
    fk_sm90_item_grid(&c, m, n, im, in);
}

int fk_sm90_cands_of(const fk_sm90_variant *tab, int count, fk_sm90_cand *out, int max)
{
    const int n = count < max ? count : max;
    for (int i = 0; i < n; i++)
        out[i] = fk_sm90_cand_of(&tab[i]);
    return n;
}

extern "C" int fk_sm90_candidates(fk_sm90_cand *out, int max)
{
    return fk_sm90_cands_of(fk_sm90_variants, fk_sm90_variant_count, out, max);
}

/* Stream-K tail (fk_sm90_sk_parts, gemm/sm90/choose.c): the last wave's
 * tiles split along K over the idle SMs; the reducing part of each tile adds
 * the others' partial tiles, kept in the workspace. tuning gemm_sk=0 turns
 * it off, gemm_sk=s asks for s parts. */
/* The stream-K area of the workspace: tail x (parts - 1) slots; first 2
 * flag words per slot (fk_sm90_sk_flag_bytes, rounded up to 256 bytes),
 * then the slots' partial tiles (128 x bn fp32 each). */
static size_t fk_sm90_sk_slots(int64_t tail, int64_t parts) { return (size_t)tail * (size_t)(parts - 1); }
static size_t fk_sm90_sk_flag_bytes(size_t slots) { return (slots * 16 + 255) / 256 * 256; }
static size_t fk_sm90_sk_bytes_of(int64_t tail, int64_t parts, int bn)
{
    if (parts < 2)
        return 0;
    const size_t slots = fk_sm90_sk_slots(tail, parts);
    return fk_sm90_sk_flag_bytes(slots) + slots * FK_GEMM_BM * (size_t)bn * 4;
}

static void fk_sm90_sk_plan(int want, const fk_sm90_variant *v, int64_t tiles, int64_t slots, int64_t nkb,
                            fk_sm90_config *cfg)
{
    cfg->sk_parts = cfg->sk_tail = 0;
    cfg->sk_grid = cfg->grid;
    const fk_sm90_cand c = fk_sm90_cand_of(v);
    if (!fk_sm90_sk_able(&c))
        return;
    int64_t tail = 0;
    const int64_t s = fk_sm90_sk_parts(want, tiles, slots, nkb, &tail);
    if (!s)
        return;
    cfg->sk_parts = (int32_t)s;
    cfg->sk_tail = (int32_t)tail;
    cfg->sk_grid = (int32_t)(tiles >= slots || tail * s > slots ? slots : tail * s);
}

static size_t fk_sm90_sk_bytes(const fk_sm90_config *cfg)
{
    if (cfg->family != FK_FAM_SM90 || cfg->variant < 0 || cfg->variant >= fk_sm90_variant_count)
        return 0;
    return fk_sm90_sk_bytes_of(cfg->sk_tail, cfg->sk_parts, fk_sm90_variants[cfg->variant].bn);
}

/* The MX GEMM's normalized operands (mx_norm_kernel.cu; format/mx_norm_rule.h) in the
 * workspace, each region 256-byte aligned, at offsets o[0 .. 7]: A and B
 * codes (row stride K rounded up to 16 bytes), their plain scale bytes,
 * their scales as the kernel's stage tables want them (fp32, [K block][k32
 * step][row], rows padded to the tile: 128 for A, bn for B) and per (K
 * block, tile row band) the finite exponent min / max and whether every row
 * has one scale (4 int32; fk_mx_norm_args). Returns the bytes (0: not an MX
 * job, or nothing to multiply). bn 0: the most any tile width needs. A call
 * with less workspace runs on the operands as given (every stage whose
 * scales differ inside its 128 of K then promotes every 32). */
static size_t fk_mx_copies(const fk_gemm_job *job, int bn, size_t o[8])
{
    if (job->desc.scale_a != FP8KIT_SCALE_MX || job->m <= 0 || job->n <= 0 || job->k <= 0)
        return 0;
    if (bn == 0) {
        static const int bns[3] = {64, 128, 192};
        size_t most = 0, t[8];
        for (int i = 0; i < 3; i++) {
            const size_t b = fk_mx_copies(job, bns[i], t);
            most = b > most ? b : most;
        }
        return most;
    }
    return fk_mx_regions(job->k, job->m, fk_round_up(job->m, FK_GEMM_BM), FK_GEMM_BM, job->n,
                         fk_round_up(job->n, bn), bn, o);
}

size_t fk_mx_regions(int64_t k, int64_t ra, int64_t rpa, int band_a, int64_t rb, int64_t rpb, int bn, size_t o[8])
{
    const size_t ld = (size_t)fk_round_up(k, 16), kbs = (size_t)k / 32, kb = (size_t)fk_ceil_div(k, 128);
    const size_t len[8] = {(size_t)ra * ld,          (size_t)rb * ld,          (size_t)ra * kbs,
                           (size_t)rb * kbs,         kb * 4 * (size_t)rpa * 4, kb * 4 * (size_t)rpb * 4,
                           kb * (size_t)(rpa / band_a) * 16, kb * (size_t)(rpb / bn) * 16};
    size_t at = 0;
    for (int i = 0; i < 8; i++) {
        o[i] = at;
        at += (len[i] + 255) / 256 * 256;
    }
    return at;
}

/* The operand copies a plan's fastest path reads from the workspace: the
 * precise fp32 path's fp16 copies or the MX GEMM's normalized ones (bn: the
 * plan's tile width, 0 for a bound over all). */
static size_t fk_sm90_copies_bytes(const fk_gemm_job *job, int bn)
{
    size_t o[8];
    const size_t mx = fk_mx_copies(job, bn, o);
    return mx ? mx : fk_f16_workspace_bytes(job);
}

/* Where the stream-K area starts in the workspace: after the operand
 * copies, 256-byte aligned. */
static size_t fk_sm90_sk_offset(const fk_gemm_job *job, int bn)
{
    return (fk_sm90_copies_bytes(job, bn) + 255) / 256 * 256;
}

/* The whole workspace with a stream-K area of sk bytes (none: the copies
 * alone). */
static size_t fk_sm90_ws_bytes(const fk_gemm_job *job, int bn, size_t sk)
{
    return sk ? fk_sm90_sk_offset(job, bn) + sk : fk_sm90_copies_bytes(job, bn);
}

/* A stream-K flag value no earlier launch of this process used: a
 * per-process random 64-bit salt plus the launch count times an odd
 * constant (a different value for each of 2^64 launches), with the one
 * that would be 0 (a cleared flag) replaced by 1. */
static uint64_t fk_sm90_sk_token(void)
{
    static const uint64_t salt = [] {
        uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&h;
        struct timespec ts;
        timespec_get(&ts, TIME_UTC);
        h ^= (uint64_t)ts.tv_nsec * 0xBF58476D1CE4E5B9ull ^ (uint64_t)ts.tv_sec;
        h ^= h >> 31;
        h *= 0x94D049BB133111EBull;
        return h ^ (h >> 29);
    }();
    static uint64_t count;
    const uint64_t n = __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
    const uint64_t v = salt + n * 0x9E3779B97F4A7C15ull;
    return v ? v : 1u;
}

/* Makes `dev` the current device for a scope and restores the caller's. */
struct fk_device_guard {
    int prev;
    cudaError_t err;
    explicit fk_device_guard(int dev) : prev(-1), err(cudaGetDevice(&prev))
    {
        if (err == cudaSuccess && prev != dev)
            err = cudaSetDevice(dev);
        else
            prev = -1;
    }
    ~fk_device_guard()
    {
        if (prev >= 0)
            (void)cudaSetDevice(prev);
    }
};


/* Whether a block-scaled job can take the staged-scale variants
 * (FK_SM90_SCALE_STAGED): A's 1x128 scales MN-major (the producer loads
 * 128 rows of one K block by TMA), B's 128x128 scales row-major (the 16
 * bytes holding a K block's by TMA from one vector over all of them, p.tsb:
 * rows need not be whole 16-byte groups), and the pointers of
 * fk_staged_ptrs_ok, which each run checks again. */
static int fk_sm90_staged_ok(const fk_gemm_job *job)
{
    const fp8kit_gemm_desc *dd = &job->desc;
    if (dd->scale_a != FP8KIT_SCALE_BLOCK || dd->scale_b != FP8KIT_SCALE_BLOCK || job->k <= 0 || fk_f16_path(job))
        return 0;
    if (job->m < FK_GEMM_BM) /* (fewer rows than A's 128-row scale box: not tried on a GPU yet) */
        return 0;
    fk_scale_geom ga, gb;
    fk_gemm_scale_geom(dd->scale_a, dd->scale_layout, 0, job->m, job->k, &ga);
    fk_gemm_scale_geom(dd->scale_b, dd->scale_layout, 1, job->n, job->k, &gb);
    const int64_t nkb = fk_ceil_div(job->k, FK_GEMM_BK);
    return ga.sr == 1 && (ga.sc * 4) % 16 == 0 && gb.sc == 1 && gb.sr >= nkb &&
           fk_staged_sb_count(1, 0, gb.grows, gb.sr, nkb) < FK_STAGED_SB_MAX && fk_staged_ptrs_ok(job);
}

/* The variant that runs what v runs with block scales read from global
 * memory (v itself unless it stages them; with the same store epilogue): a
 * call whose pointers do not fit the staged plan takes it. */
static int fk_sm90_unstaged(int vi)
{
    const fk_sm90_variant *v = &fk_sm90_variants[vi];
    if (v->scaling != FK_SM90_SCALE_STAGED)
        return vi;
    int single = -1; /* (no twin in the same cluster shape: the single-CTA one) */
    for (int i = 0; i < fk_sm90_variant_count; i++) {
        const fk_sm90_variant *u = &fk_sm90_variants[i];
        if (u->scaling != FK_SM90_SCALE_BLOCK || u->bn != v->bn || u->ops != v->ops || u->promo != v->promo ||
            fk_waves(u) != fk_waves(v) || u->tma_store != v->tma_store)
            continue;
        if (u->cluster == v->cluster && u->mc_a == v->mc_a)
            return i;
        if (u->cluster == 1 && single < 0)
            single = i;
    }
    return single;
}

/* The plan config of general variant vi for the job (shared-memory limit
 * raised for the kernel, persistent grid). */
static fp8kit_status fk_sm90_fill(fp8kit_ctx *ctx, const fk_gemm_job *job, int vi, int group_m,
                                  fk_sm90_config *cfg)
{
    const fk_cuda_state *cs = fk_cuda(ctx);
    const fk_sm90_variant *v = &fk_sm90_variants[vi];
    if ((size_t)v->smem_bytes > cs->smem_optin)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda gemm: kernel needs %d bytes of shared memory, device allows %zu",
                       v->smem_bytes, cs->smem_optin);
    fk_device_guard g(cs->device);
    FK_CUDA_CHECK(ctx, g.err);
    FK_CUDA_CHECK(ctx, cudaFuncSetAttribute((const void *)v->fn,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            v->smem_bytes));
    if (v->scaling == FK_SM90_SCALE_STAGED) { /* a call whose pointers do not fit runs the twin */
        const int t = fk_sm90_unstaged(vi);
        if (t < 0)
            return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm: no unstaged twin of variant %d", vi);
        FK_CUDA_CHECK(ctx, cudaFuncSetAttribute((const void *)fk_sm90_variants[t].fn,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                fk_sm90_variants[t].smem_bytes));
    }
    /* work items: tiles, or pairs of tiles for 2-CTA clusters */
    int64_t items_m, items_n;
    fk_sm90_items(v, job->m, job->n, &items_m, &items_n);
    const int64_t tiles = items_m * items_n;
    if (tiles > INT32_MAX / 2)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: too many output tiles");
    int64_t slots = cs->sm_count; /* work items running at once */
    if (v->cluster > 1) {
        /* clusters that fit at once: a GPC with an odd number of free SMs leaves one idle */
        int nc = 0;
        FK_CUDA_CHECK(ctx, fk_cuda_max_clusters((const void *)v->fn, v->cluster, FK_GEMM_THREADS,
                                                (size_t)v->smem_bytes, cs->sm_count, &nc));
        if (nc < 1)
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: no 2-CTA cluster of this kernel fits");
        slots = nc;
    }
    memset(cfg, 0, sizeof *cfg);
    cfg->family = FK_FAM_SM90;
    cfg->variant = vi;
    cfg->grid = (int32_t)((tiles < slots ? (tiles > 0 ? tiles : 1) : slots) * v->cluster);
    cfg->items = (int32_t)tiles;
    cfg->slots = (int32_t)slots;
    cfg->group_m = group_m;
    cfg->device = cs->device;
    const fk_tuning *tu = fk_ctx_tuning(ctx);
    cfg->no_bulk = fk_tuned(tu->gemm_bulk, 1) == 0;
    cfg->store = fk_store_plan(FK_STORES_SM90, v, job, cfg->no_bulk);
    /* programmatic dependent launch: the kernels wait (griddepcontrol.wait)
     * before any global access, so they may start while the previous grid
     * drains; and the driver enqueues such a launch ~0.4 us faster (H100,
     * 2026-11-25: 3.5-3.6 against 4.0-4.2 us per launch of the same kernel) */
    cfg->pdl = fk_tuned(tu->gemm_pdl, 1) != 0;
    /* H100, 2026-11-22: a lag of 1 stage cut bias + gelu's cost over the plain
     * GEMM at 8192^3 from +23-28% to +13% and left the other modes unchanged;
     * with the register-resident bias / activation epilogue, 2 stages beat 1
     * and 0 there (bias_gelu 900 vs 983 / 965 us, same run; +4.3% over plain
     * in a later run, where 3 stages and the TMA-store path gave no more) */
    const int heavy = job->bias || job->desc.act != FP8KIT_ACT_NONE;
    /* the MX kernel: no lag (H100, 2026-11-26, 6b8c9ec, bench/mx_peer.py: 4096x7168x16384
     * 1547 vs 1786 us, 2048x14336x4096 523 vs 553, 8192^3 1487 vs 1486) */
    cfg->lag = fk_tuned(tu->gemm_lag, v->scaling == FK_SM90_SCALE_MX ? 0 : heavy ? 2 : 1);
    if (cfg->lag < 0 || cfg->lag >= v->stages)
        cfg->lag = 0;
    const int64_t kbytes = v->ops == FK_SM90_F16 ? 2 * job->k : job->k; /* f16 variants: fp16 K */
    fk_sm90_sk_plan(tu->gemm_sk, v, tiles, slots, fk_ceil_div(kbytes, FK_GEMM_BK), cfg);
    return FP8KIT_OK;
}

/* Identifies this build's kernel table in autotune keys, so a cache file
 * written by another build is not trusted (FNV-1a over the table). */
static const char *fk_sm90_signature(void)
{
    static char sig[32];
    if (!sig[0]) {
        uint64_t h = 1469598103934665603ull;
        int words[8];
        for (int i = 0; i < fk_sm90_variant_count; i++) {
            const fk_sm90_variant *v = &fk_sm90_variants[i];
            words[0] = v->bn; words[1] = v->promo; words[2] = v->scaling; words[3] = v->ops;
            words[4] = v->stages; words[5] = v->smem_bytes; words[6] = i;
            words[7] = -3 + 1000 * v->cluster + 10000 * v->tma_store;
            const unsigned char *b = (const unsigned char *)words;
            for (size_t j = 0; j < sizeof words; j++)
                h = (h ^ b[j]) * 1099511628211ull;
        }
        snprintf(sig, sizeof sig, "sm90f-%016llx", (unsigned long long)h); /* f: configs carry their family */
    }
    return sig;
}

/* Autotune (fp8kit_ctx_set_autotune): candidates are the heuristic's choice
 * (already in config), the small-M kernel's plan when it took the job, and
 * every general variant of the job's promotion / block / type class with
 * L2 groups of 8 and 16 tile rows; gemm/autotune.cu keeps the fastest. */
static fp8kit_status fk_sm90_tune(fp8kit_ctx *ctx, const fk_gemm_job *job, int promo, fk_sm90_scaling scaling,
                                  fk_sm90_operands ops, const unsigned char *small_cfg, void *config)
{
    enum { MAXC = 48 };
    unsigned char cands[MAXC][FK_PLAN_CONFIG_BYTES]; /* 3 KB on the stack: the plan lock is per context */
    int n = 0;
    memcpy(cands[n++], config, FK_PLAN_CONFIG_BYTES);
    if (small_cfg)
        memcpy(cands[n++], small_cfg, FK_PLAN_CONFIG_BYTES);
    for (int vi = 0; vi < fk_sm90_variant_count && n + 2 <= MAXC; vi++) {
        const fk_sm90_variant *v = &fk_sm90_variants[vi];
        if (v->promo != promo || v->scaling != scaling || v->ops != ops ||
            (job->desc.out_quant == FP8KIT_OUTQ_BLOCK1X128 && v->bn % 128) ||
            (v->tma_store && !fk_variant_tstore(v, job))) /* it would run the general epilogue */
            continue;
        for (int gm = 8; gm <= 16; gm += 8) {
            fk_sm90_config cfg;
            if (fk_sm90_fill(ctx, job, vi, gm, &cfg) != FP8KIT_OK)
                continue;
            memset(cands[n], 0, FK_PLAN_CONFIG_BYTES);
            memcpy(cands[n], &cfg, sizeof cfg);
            int dup = 0;
            for (int j = 0; j < n; j++)
                dup |= memcmp(cands[j], cands[n], FK_PLAN_CONFIG_BYTES) == 0;
            if (!dup)
                n++;
        }
    }
    return fk_cuda_gemm_autotune(ctx, job, &cands[0][0], n, fk_sm90_signature(), config);
}

/* What the sm90 kernels need beyond the core's checks (shared with the
 * small-M family): 32-bit extents, TMA's alignment, and precise fp32 output
 * (the fp16 path) with tensor or row scales only. */
fp8kit_status fk_sm90_can_implement(fp8kit_ctx *ctx, const void *jp)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    const fk_cuda_state *cs = fk_cuda(ctx);
    const fp8kit_gemm_desc *dd = &job->desc;
    if (!cs)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm: context has no CUDA state");
    const int block = dd->scale_a == FP8KIT_SCALE_BLOCK, mx = dd->scale_a == FP8KIT_SCALE_MX;
    /* docs/spec.md 3 asks rel <= 1e-5 for fp32 output. Hopper's fp8 wgmma loses bits
     * inside each k32 instruction: measured on an H200 (K = 16384, normal
     * data) 1.3e-4 with promotion every 128 of K and 4.6e-5 even after every
     * instruction. So precise fp32 output runs on fp16 copies of A and B
     * (exact) through the f16 wgmma variants (FK_SM90_F16, gemm/sm90/f16_widen.cu), with a
     * workspace; fast_accum keeps the fp8 kernel. Tensor and row scales only. */
    if (fk_f16_path(job) && (block || mx))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda gemm: precise fp32 output supports tensor and row scaling only; with %s scales "
                       "set fast_accum (fp8 tensor cores: rel ~1e-4, not docs/spec.md's 1e-5)",
                       mx ? "MX" : "block");
    if (job->m > INT32_MAX || job->n > INT32_MAX || job->k > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: M, N and K must be < 2^31");
    /* ---- what TMA needs */
    if (job->k % 16)
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, "cuda gemm: K = %lld must be a multiple of 16",
                       (long long)job->k);
    if (((uintptr_t)job->a & 15u) || ((uintptr_t)job->b & 15u))
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED,
                       "cuda gemm: A and B base pointers must be 16-byte aligned (TMA)");
    if ((job->lda % 16) || (job->ldb % 16))
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED,
                       "cuda gemm: leading dims of A (%lld) and B (%lld) must be multiples of 16 "
                       "bytes (TMA)",
                       (long long)job->lda, (long long)job->ldb);
    return FP8KIT_OK;
}

/* The general kernel's plan: the variant (tile width, promotion, cluster,
 * store path) by the cost model, or with autotune on the fastest of the
 * candidates, the small-M family's plan among them when it has one. */
static fp8kit_status fk_sm90_plan(fp8kit_ctx *ctx, const void *jp, void *config)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    const fk_cuda_state *cs = fk_cuda(ctx);
    const fp8kit_gemm_desc *dd = &job->desc;
    const fk_sm90_operands ab = fk_sm90_fp8_pair(job->a_type, job->b_type);
    const int block = dd->scale_a == FP8KIT_SCALE_BLOCK;
    const int mx = dd->scale_a == FP8KIT_SCALE_MX; /* its own kernel (promotion every k32) */
    fk_sm90_scaling vscaling = mx ? FK_SM90_SCALE_MX : block ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN;
    if (block && fk_sm90_staged_ok(job))
        vscaling = FK_SM90_SCALE_STAGED; /* (the block variants where no staged one fits the tuning keys) */
    const int f16 = fk_f16_path(job);
    const fk_sm90_operands vops = f16 ? FK_SM90_F16 : ab;
    /* the small-M family's plan, a candidate for autotune */
    unsigned char small_cfg[FK_PLAN_CONFIG_BYTES];
    memset(small_cfg, 0, sizeof small_cfg);
    int small = 0;
    if (fk_ctx_autotune(ctx) && fk_family_sm90_small.can_implement(ctx, job) == FP8KIT_OK) {
        fp8kit_status small_st;
        small = fk_small_plan(ctx, job, small_cfg, &small_st) && small_st == FP8KIT_OK;
    }
    /* ---- choose the variant */
    /* fp32 output keeps the promotion every 128 of K even with fast_accum:
     * unpromoted fp8 wgmma sums reach rel ~3e-3 at K = 16384, 2x cuBLASLt's
     * fast mode on split-K shapes (tests/test_cuda_vs_cublaslt.c), and docs/spec.md 3
     * bounds fp32 output by 1.5x cuBLASLt. */
    int promo = dd->fast_accum && !block && job->d_type != FP8KIT_F32 ? 0 : 4; /* f16: every 64 of K */
    const fk_tuning *tu = fk_ctx_tuning(ctx);
    promo = fk_tuned(tu->gemm_promo, promo);
    if (mx)
        promo = 1;
    /* every variant of the job's design is a candidate; tuning keys filter
     * them, and the cost model (gemm/sm90/choose.c) picks */
    fk_sm90_ask ask = fk_sm90_ask_of(job->m, job->n, fk_ceil_div(f16 ? 2 * job->k : job->k, FK_GEMM_BK),
                                     cs->sm_count, (int)vscaling, (int)vops, promo);
    ask.bn = fk_tuned(tu->gemm_bn, 0);
    ask.bm = fk_tuned(tu->gemm_bm, 0);
    ask.cluster = fk_tuned(tu->gemm_cluster, 0);
    ask.mc = fk_tuned(tu->gemm_mc, 0);
    /* the TMA-store epilogue's variants (one stage more): plain (1) or with bias / activation (2) */
    ask.ts_kind = ask.cluster <= 1 && fk_tma_store_ok(job) && fk_tuned(tu->gemm_ts, 1) != 0 ? fk_tma_store_kind(job) : 0;
    ask.width_128 = dd->out_quant == FP8KIT_OUTQ_BLOCK1X128; /* a 1x128 group must not span two tiles */
    ask.sk = tu->gemm_sk;
    fk_sm90_cand cands[FK_SM90_MAX_CANDS];
    const int nc = fk_sm90_candidates(cands, FK_SM90_MAX_CANDS);
    fk_sm90_choice pick;
    int vi = fk_sm90_choose(cands, nc, &ask, &pick);
    if (vscaling == FK_SM90_SCALE_STAGED && (vi < 0 || pick.dropped)) {
        /* tuning keys no staged variant satisfies: the global-load variants, if they do */
        fk_sm90_choice alt;
        ask.scaling = (int)FK_SM90_SCALE_BLOCK;
        const int va = fk_sm90_choose(cands, nc, &ask, &alt);
        if (va >= 0 && (vi < 0 || alt.dropped == 0)) {
            vi = va;
            pick = alt;
            vscaling = FK_SM90_SCALE_BLOCK;
        }
    }
    if (vi < 0)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: no kernel variant for this case");
    fk_sm90_config cfg;
    fp8kit_status st = fk_sm90_fill(ctx, job, vi, 8, &cfg);
    if (st != FP8KIT_OK)
        return st;
    cfg.cost = (float)pick.cost;
    cfg.considered = (int16_t)pick.considered;
    cfg.dropped = (int16_t)pick.dropped;
    memcpy(config, &cfg, sizeof cfg);
    if (fk_ctx_autotune(ctx) && !f16) /* f16: the heuristic's choice (timing would need the workspace) */
        return fk_sm90_tune(ctx, job, promo, vscaling, ab, small ? small_cfg : NULL, config);
    return FP8KIT_OK;
}

/* Launches general variant vi (pdl: with programmatic stream serialization). */
#define FK_MAX_DEVICES 64
#define FK_MAX_VARIANTS 128
static CUfunction fk_sm90_cufn[FK_MAX_DEVICES][FK_MAX_VARIANTS];

static fp8kit_status fk_sm90_launch(fp8kit_ctx *ctx, int device, int vi, unsigned grid, int pdl, void **args,
                                    cudaStream_t st)
{
    const fk_sm90_variant *v = &fk_sm90_variants[vi];
    /* (the 2-CTA variants have their cluster shape compiled in) */
    cudaLaunchConfig_t lc;
    cudaLaunchAttribute at[2];
    fk_launch_config(&lc, at, grid, FK_GEMM_THREADS, (size_t)v->smem_bytes, st, 1, pdl);
    CUfunction *slot = device >= 0 && device < FK_MAX_DEVICES && vi < FK_MAX_VARIANTS ? &fk_sm90_cufn[device][vi]
                                                                                       : NULL;
    return fk_cuda_launch(ctx, device, slot, (const void *)v->fn, &lc, args, "cuda gemm");
}

/* Rows of the box that loads the last tile row of A's m rows through the tail map when it is partial
 * (fk_sm90_box_rows), 0 when it is whole or its box would have 128 rows anyway. */
static int fk_sm90_a_tail_rows(int64_t m)
{
    const int rows = fk_sm90_box_rows(m % FK_GEMM_BM, FK_GEMM_BM);
    return rows < FK_GEMM_BM ? rows : 0;
}

/* The call's tensor maps (A, B, D's for the TMA-store path, A's last partial tile's: boxes of tail
 * rows, fk_sm90_a_tail_rows): encoding one costs about a microsecond of host time, so the plan memoizes
 * the last set, keyed by everything they encode (zeros for D's unless tstore, for the tail's unless M
 * leaves one; all zeros when K = 0). */
static fp8kit_status fk_sm90_maps(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan,
                                  const fk_sm90_variant *v, int device, const void *opa, const void *opb,
                                  uint64_t kbytes, uint64_t lda, uint64_t ldb, int tstore, int tail,
                                  CUtensorMap tmaps[4])
{
    enum { FK_SM90_MAPS_BYTES = 4 * sizeof(CUtensorMap) }; /* (tmaps is a pointer here) */
    if (job->k > 0) {
        const uint64_t tkey[14] = {(uint64_t)(uintptr_t)opa, (uint64_t)job->m, kbytes,
                                   lda, FK_GEMM_BM, (uint64_t)(uintptr_t)opb,
                                   (uint64_t)job->n, ldb, (uint64_t)fk_sm90_b_box(v), FK_GEMM_BK,
                                   (uint64_t)tstore, tstore ? (uint64_t)(uintptr_t)job->d : 0,
                                   tstore ? (uint64_t)job->ldd : 0, tstore ? (uint64_t)job->d_type : 0};
        static_assert(14 + FK_SM90_MAPS_BYTES / 8 <= FK_PLAN_MEMO_WORDS, "plan memo too small");
        if (!fk_plan_memo_get(plan, tkey, 14, tmaps, FK_SM90_MAPS_BYTES)) {
            memset(tmaps, 0, FK_SM90_MAPS_BYTES);
            CUresult r = fk_tma_map_2d_u8(&tmaps[0], opa, (uint64_t)job->m, kbytes, lda, FK_GEMM_BK, FK_GEMM_BM);
            if (r == CUDA_ERROR_INVALID_CONTEXT) {
                /* the driver call needs a current context, which the runtime makes
                 * current on a new thread only lazily: cudaSetDevice does it now */
                FK_CUDA_CHECK(ctx, cudaSetDevice(device));
                r = fk_tma_map_2d_u8(&tmaps[0], opa, (uint64_t)job->m, kbytes, lda, FK_GEMM_BK, FK_GEMM_BM);
            }
            if (r == CUDA_SUCCESS)
                r = fk_tma_map_2d_u8(&tmaps[1], opb, (uint64_t)job->n, kbytes, ldb, FK_GEMM_BK,
                                     (uint32_t)fk_sm90_b_box(v));
            if (r == CUDA_SUCCESS && tstore)
                r = fk_tma_map_2d_u16_sw64(&tmaps[2], job->d, job->d_type == FP8KIT_BF16, (uint64_t)job->m,
                                           (uint64_t)job->n, (uint64_t)job->ldd, 32, 16);
            if (r == CUDA_SUCCESS && tail)
                r = fk_tma_map_2d_u8(&tmaps[3], opa, (uint64_t)job->m, kbytes, lda, FK_GEMM_BK, (uint32_t)tail);
            if (r != CUDA_SUCCESS)
                return fk_fail(ctx, FP8KIT_ERR_DEVICE,
                               "cuda gemm: cuTensorMapEncodeTiled failed (%d)", (int)r);
            fk_plan_memo_put(plan, tkey, 14, tmaps, FK_SM90_MAPS_BYTES);
        }
    } else {
        memset(tmaps, 0, FK_SM90_MAPS_BYTES);
    }
    return FP8KIT_OK;
}

/* The stream-K tail's parameters when the plan has one and the call's
 * workspace has room for it (else whole tiles: *grid stays the plan's). */
static fp8kit_status fk_sm90_sk_args(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_sm90_config &cfg,
                                     cudaStream_t st, fk_gemm_params *p, unsigned *grid)
{
    if (!(cfg.sk_parts > 1 && job->workspace && ((uintptr_t)job->workspace & 15u) == 0))
        return FP8KIT_OK;
    const size_t off = fk_sm90_sk_offset(job, fk_sm90_variants[cfg.variant].bn);
    if (job->workspace_bytes < off + fk_sm90_sk_bytes(&cfg))
        return FP8KIT_OK;
    const size_t slots = fk_sm90_sk_slots(cfg.sk_tail, cfg.sk_parts);
    unsigned char *w = (unsigned char *)job->workspace + off;
    p->sk_parts = cfg.sk_parts;
    p->sk_tail = cfg.sk_tail;
    p->sk_flags = (unsigned long long *)w;
    p->sk_ws = (float *)(w + fk_sm90_sk_flag_bytes(slots));
    p->sk_token = fk_sm90_sk_token();
    *grid = (unsigned)cfg.sk_grid;
    /* captured into a CUDA graph, the token is replayed with the launch:
     * clear the flags before each replay */
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    FK_CUDA_CHECK(ctx, cudaStreamIsCapturing(st, &cap));
    if (cap != cudaStreamCaptureStatusNone)
        FK_CUDA_CHECK(ctx, cudaMemsetAsync(w, 0, slots * 16, st));
    return FP8KIT_OK;
}

static fp8kit_status fk_sm90_run(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan, void *stream)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    fk_sm90_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    if (cfg.variant < 0 || cfg.variant >= fk_sm90_variant_count)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm: bad plan");
    if (fk_sm90_variants[cfg.variant].scaling == FK_SM90_SCALE_STAGED && !fk_staged_ptrs_ok(job))
        cfg.variant = fk_sm90_unstaged(cfg.variant); /* this call's scale pointers do not fit the staged plan */
    if (cfg.variant < 0)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm: no unstaged twin of the planned variant");
    const fk_sm90_variant *v = &fk_sm90_variants[cfg.variant];
    const fp8kit_gemm_desc *dd = &job->desc;
    cudaStream_t st = (cudaStream_t)stream;
    /* f16 variants read fp16 copies of A and B (row stride 2K bytes) from the
     * workspace: checked here too (autotune and direct callers), before
     * anything is written */
    const int f16 = v->ops == FK_SM90_F16;
    const void *opa = job->a, *opb = job->b;
    uint64_t kbytes = (uint64_t)job->k, lda = (uint64_t)job->lda, ldb = (uint64_t)job->ldb;
    if (f16) {
        const fp8kit_status fst = fk_f16_operands(ctx, job, &opa, &opb, &kbytes, &lda, &ldb);
        if (fst != FP8KIT_OK)
            return fst;
    }
    /* MX with room for the normalized copies: the GEMM reads those */
    size_t mo[8];
    const size_t mxb = fk_mx_copies(job, v->bn, mo);
    unsigned char *mxw = mxb && job->workspace && job->workspace_bytes >= mxb && ((uintptr_t)job->workspace & 15u) == 0
                             ? (unsigned char *)job->workspace
                             : NULL;
    if (mxw) {
        opa = mxw + mo[0];
        opb = mxw + mo[1];
        lda = ldb = (uint64_t)fk_round_up(job->k, 16);
    }
    fk_device_guard g(cfg.device);
    FK_CUDA_CHECK(ctx, g.err);
    if (dd->out_quant == FP8KIT_OUTQ_SCALED && job->amax_d)
        FK_CUDA_CHECK(ctx, cudaMemsetAsync(job->amax_d, 0, sizeof(float), st));
    if (job->m == 0 || job->n == 0)
        return FP8KIT_OK;

    /* the plan's store path if this call's pointers fit it, else the general one */
    const int store = fk_store_run(FK_STORES_SM90, cfg.store, v, job);
    const int tstore = store == FK_STORE_TMA;
    const int tail = job->k > 0 ? fk_sm90_a_tail_rows(job->m) : 0;
    CUtensorMap tmaps[4];
    fp8kit_status mst = fk_sm90_maps(ctx, job, plan, v, cfg.device, opa, opb, kbytes, lda, ldb, tstore, tail,
                                     tmaps);
    if (mst != FP8KIT_OK)
        return mst;
    const CUtensorMap &ta = tmaps[0], &tb = tmaps[1];

    fk_gemm_params p;
    fk_gemm_job_params(&p, job);
    if ((p.a_tail_rows = tail) != 0) {
        p.ta_tail = tmaps[3];
        p.a_tail_row0 = (int)(job->m / FK_GEMM_BM * FK_GEMM_BM);
    }
    p.num_kb = (int)fk_ceil_div((int64_t)kbytes, FK_GEMM_BK); /* stages of 128 bytes of K */
    int64_t items_m, items_n; /* (in clusters along their axis) */
    fk_sm90_items(v, job->m, job->n, &items_m, &items_n);
    p.sched.tiles_m = (int)items_m;
    p.sched.tiles_n = (int)items_n;
    p.sched.group_m = cfg.group_m;
    if (dd->scale_a == FP8KIT_SCALE_BLOCK || dd->scale_a == FP8KIT_SCALE_MX) { /* format/geometry.h */
        fk_scale_geom ga, gb;
        fk_gemm_scale_geom(dd->scale_a, dd->scale_layout, 0, job->m, job->k, &ga);
        fk_gemm_scale_geom(dd->scale_b, dd->scale_layout, 1, job->n, job->k, &gb);
        if (dd->scale_a == FP8KIT_SCALE_BLOCK) { /* A (m, kb) at m * sa_sm + kb * sa_sk, B at (n / 128) * sb_ld + kb */
            p.sa_sm = ga.sr;
            p.sa_sk = ga.sc;
            p.sb_ld = gb.sr;
        } else { /* e8m0 bytes: sa_sm the K / 32 blocks of a row; sa_sk = 1: blocked layout */
            p.sa_sm = ga.gcols;
            p.sa_sk = ga.blocked;
        }
    }
    if (v->scaling == FK_SM90_SCALE_STAGED) { /* A's scales by TMA, 128 rows of one K block per stage */
        CUresult r = fk_tma_map_2d_f32(&p.tsa, p.sa, (uint64_t)p.num_kb, (uint64_t)p.sa_sk, (uint64_t)p.sa_sk * 4,
                                       FK_GEMM_BM, 1);
        if (r == CUDA_SUCCESS) /* B's: one vector, rows sb_ld apart (boxes of 16 bytes) */
            r = fk_tma_map_1d_f32(&p.tsb, p.sb,
                                  (uint64_t)fk_staged_sb_count(1, 0, fk_ceil_div(job->n, 128), p.sb_ld, p.num_kb), 4);
        if (r != CUDA_SUCCESS)
            return fk_fail(ctx, FP8KIT_ERR_DEVICE, "cuda gemm: block scale tensor map failed (CUresult %d)", (int)r);
    }
    if (mxw) { /* the copies' scales: the helper warps copy the stage tables and band flags */
        p.sa = (const float *)(mxw + mo[2]);
        p.sb = (const float *)(mxw + mo[3]);
        p.sa_sm = job->k / 32;
        p.sa_sk = 0;
        p.mx_ta = (const float *)(mxw + mo[4]);
        p.mx_tb = (const float *)(mxw + mo[5]);
        p.mx_fa = (const int *)(mxw + mo[6]);
        p.mx_fb = (const int *)(mxw + mo[7]);
        p.mx_rpa = (int)fk_round_up(job->m, FK_GEMM_BM);
        p.mx_rpb = (int)fk_round_up(job->n, v->bn);
        p.mx_bda = FK_GEMM_BM;
        p.mx_rgb = p.mx_rpb;
    }
    /* D's store path (gemm/store.h): 2 the TMA-store epilogue, 1 the
     * bulk-copy one, 0 the general one */
    if (store == FK_STORE_TMA) {
        p.d_bulk = 2;
        p.td = tmaps[2];
    } else if (store == FK_STORE_BULK) {
        p.d_bulk = 1;
    }
    p.lag = cfg.lag;
    /* the stream-K tail when the workspace has room for it, else whole tiles */
    unsigned grid = (unsigned)cfg.grid;
    fp8kit_status kst = fk_sm90_sk_args(ctx, job, cfg, st, &p, &grid);
    if (kst != FP8KIT_OK)
        return kst;
    if (f16 && job->k > 0) {
        fp8kit_status wst = fk_f16_widen(ctx, job, job->workspace, st);
        if (wst != FP8KIT_OK)
            return wst;
    }
    void *args[3] = {(void *)&ta, (void *)&tb, &p};
    if (fk_launch_hook_fn hook = fk_cuda_launch_hook()) { /* set by test-only code (tests/hooks) */
        const unsigned grid3[3] = {grid, 1, 1}, block[3] = {FK_GEMM_THREADS, 1, 1};
        const size_t sizes[3] = {sizeof ta, sizeof tb, sizeof p};
        return hook((const void *)v->fn, grid3, block, (size_t)v->smem_bytes, args, sizes, 3, cfg.pdl);
    }
    if (mxw) {
        const int blocked = dd->scale_layout == FP8KIT_LAYOUT_BLOCKED;
        const int64_t ld = fk_round_up(job->k, 16);
        fp8kit_status nst = fk_cuda_mx_norm(ctx, job->a, job->lda, job->scale_a, blocked, job->m, job->k,
                                            job->a_type == FP8KIT_E5M2, mxw + mo[0], ld, mxw + mo[2], mxw + mo[4],
                                            mxw + mo[6], FK_GEMM_BM, (void *)st);
        if (nst == FP8KIT_OK)
            nst = fk_cuda_mx_norm(ctx, job->b, job->ldb, job->scale_b, blocked, job->n, job->k,
                                  job->b_type == FP8KIT_E5M2, mxw + mo[1], ld, mxw + mo[3], mxw + mo[5], mxw + mo[7],
                                  v->bn, (void *)st);
        if (nst != FP8KIT_OK)
            return nst;
    }
    return fk_sm90_launch(ctx, cfg.device, cfg.variant, grid, cfg.pdl, args, st);
}

static void fk_sm90_describe(const fk_plan *plan, char *buf, size_t n)
{
    fk_sm90_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    if (cfg.variant < 0 || cfg.variant >= fk_sm90_variant_count) {
        snprintf(buf, n, "sm90 (bad plan)");
        return;
    }
    const fk_sm90_variant *v = &fk_sm90_variants[cfg.variant];
    snprintf(buf, n,
             "sm90 variant=%d bn=%d bm=%d promo=%d scaling=%s ops=%s cluster=%d%s tma_store=%d stages=%d grid=%d group_m=%d "
             "lag=%d bulk=%d store=%s sk_parts=%d sk_tail=%d pdl=%d",
             cfg.variant, v->bn, FK_GEMM_BM * fk_waves(v), v->promo,
             fk_sm90_scaling_name(v->scaling), fk_sm90_operands_name(v->ops), v->cluster,
             v->cluster > 1 ? (v->mc_a ? " mc=a" : " mc=b") : "", v->tma_store, v->stages, cfg.grid,
             cfg.group_m, cfg.lag, !cfg.no_bulk, fk_store_name(cfg.store), cfg.sk_parts, cfg.sk_tail, cfg.pdl);
    /* the cost model's inputs: work items, waves of them, the last wave's fill */
    if (cfg.slots > 0) {
        const size_t len = strlen(buf);
        const int waves = (cfg.items + cfg.slots - 1) / cfg.slots;
        const int last = cfg.items - (waves > 0 ? waves - 1 : 0) * cfg.slots;
        snprintf(buf + len, n > len ? n - len : 0, " items=%d waves=%d last_wave=%d/%d", cfg.items, waves, last,
                 cfg.slots);
    }
    /* the pick's cost (eff. waves x tile height / 128 x width x design weight) among how many */
    fk_sm90_describe_pick(buf, n, cfg.cost, cfg.considered, cfg.dropped);
}

/* The workspace of the plan's fastest path: precise fp32 output's fp16
 * copies (fk_f16_workspace_bytes), plus the stream-K tail's flags and
 * partial tiles when the plan has one (a call given less runs whole tiles).
 * plan NULL: a bound over what any plan of the job could want (the
 * autotuner may pick any tile width), made without planning, so nothing
 * runs on the job's pointers. */
static size_t fk_sm90_workspace(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    if (plan) {
        fk_sm90_config cfg;
        memcpy(&cfg, plan->config, sizeof cfg);
        return fk_sm90_ws_bytes(job, fk_sm90_variants[cfg.variant].bn, fk_sm90_sk_bytes(&cfg));
    }
    const fk_cuda_state *cs = fk_cuda(ctx);
    size_t sk = 0;
    if (cs && job->m > 0 && job->n > 0) {
        const int64_t nkb = fk_ceil_div(fk_f16_path(job) ? 2 * job->k : job->k, FK_GEMM_BK);
        static const int bns[4] = {64, 128, 192, 256};
        for (int i = 0; i < 4; i++) {
            int64_t tail = 0;
            const int64_t tiles = fk_ceil_div(job->m, FK_GEMM_BM) * fk_ceil_div(job->n, bns[i]);
            const int64_t s = fk_sm90_sk_parts(fk_ctx_tuning(ctx)->gemm_sk, tiles, cs->sm_count, nkb, &tail);
            const size_t b = fk_sm90_sk_bytes_of(tail, s, bns[i]);
            sk = b > sk ? b : sk;
        }
    }
    return fk_sm90_ws_bytes(job, 0, sk);
}

const fk_gemm_family fk_family_sm90 = {
    FK_FAM_SM90, "sm90", FK_FAM_DENSE, 90, 90, fk_sm90_can_implement, fk_sm90_plan, fk_sm90_run,
    fk_sm90_workspace, fk_sm90_describe,
};
