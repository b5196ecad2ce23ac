/* internal.h - the core's own types: the context, its plan cache and
 * autotune table, and the core-only helpers. Backends include
 * core/backend_ops.h (the contract) instead. Nothing here is public API. */
#ifndef FK_INTERNAL_H
#define FK_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include "core/backend_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Validates a GEMM descriptor: enum ranges and the combinations every
 * backend refuses (gemm_api.c); fn names the entry point in the messages. */
fp8kit_status fk_check_gemm_desc(const fp8kit_ctx *ctx, const char *fn, const fp8kit_gemm_desc *d);

/* Validates a call exactly as fp8kit_gemm does (same statuses and messages)
 * without planning or running it (gemm_api.c; used by fp8kit_grouped_gemm);
 * overlap 0: the no-overlap rule is not applied (placeholder pointers). */
fp8kit_status fk_gemm_check(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args,
                            int overlap);

/* The alignment bits of a job's pointers that plans depend on (gemm_api.c):
 * 16 bytes for A, B, C, D and, with block scales, both scale pointers; 4
 * bytes for the bias. Every plan key that reads pointers takes them. */
unsigned fk_job_align_bits(const fk_gemm_job *j);

/* A plan in one line into buf (n bytes): the backend's description, or its
 * name (gemm_api.c; fp8kit_gemm_describe, fp8kit_grouped_gemm_describe). */
void fk_describe_plan(const fp8kit_ctx *ctx, const fk_plan *plan, char *buf, size_t n);

/* GEMM autotune table (tune.c): chosen plan configs by text key. */
#define FK_TUNE_PATH_MAX 1024
typedef struct fk_tune_entry {
    char key[FK_TUNE_KEY_BYTES];
    unsigned char config[FK_PLAN_CONFIG_BYTES];
    double us;
} fk_tune_entry;
typedef struct fk_tune {
    int mode;                     /* 0 off, 1 on */
    char path[FK_TUNE_PATH_MAX];  /* cache file, "" = memory only */
    fk_tune_entry *entries;
    int64_t count, cap;
} fk_tune;

typedef struct fk_plan_cache {
    pthread_mutex_t lock;
    fk_plan **slots; /* cap entries, NULL = empty */
    int64_t cap, count;
    uint64_t id; /* unique in the process (never 0): keys each thread's last-plan shortcut */
} fk_plan_cache;

struct fp8kit_ctx {
    fp8kit_backend backend; /* resolved: CPU or CUDA */
    const fk_backend_ops *ops;
    int device;
    int nthreads;
    fk_plan_cache plans;
    fk_tune tune;     /* guarded by plans.lock */
    fk_tuning tuning; /* overrides (fp8kit_ctx_set_tuning) */
    uint64_t tuning_key; /* a hash of the overrides, in every plan key (0: none set yet) */
    void *state;      /* the backend's */
    char describe[160];
};

/* Plan cache: finds the plan for key (len <= 160 bytes) or inserts one made by
 * init(ctx, job, config). Returns NULL only when out of memory or init fails
 * (then *st holds the status). */
const fk_plan *fk_plan_get(fp8kit_ctx *ctx, const void *key, size_t len, const fk_gemm_job *job,
                           fk_plan_init_fn init, fp8kit_status *st);
void fk_plan_cache_init(fk_plan_cache *pc);
void fk_tune_free(fk_tune *t);
void fk_plan_cache_free(fk_plan_cache *pc);
/* Gives the cache a new id, so no thread's last-plan shortcut (plan.c,
 * gemm_api.c) matches a plan made before. */
void fk_plan_cache_renew(fk_plan_cache *pc);
/* FP8KIT_TUNING and FP8KIT_AUTOTUNE[_CACHE] applied to a new context (tuning.c). */
fp8kit_status fk_ctx_env_defaults(fp8kit_ctx *ctx);

/* fp8kit_ckpt_opts_default (one definition for src/io/ckpt_api.c and the
 * src/core/ckpt_stub.c of builds without src/io). */
static inline fp8kit_ckpt_opts fk_ckpt_opts_defaults(fp8kit_scheme scheme)
{
    fp8kit_ckpt_opts o;
    memset(&o, 0, sizeof o);
    o.scheme = scheme;
    o.format = FP8KIT_CKPT_FORMAT_DEFAULT;
    /* MX checkpoints: rceil, the rule of the loaders' own MX quantizers (the
     * library's fp8kit_quant_desc default stays floor); RCEIL is refused with
     * the fp32-scale schemes */
    o.rounding = scheme == FP8KIT_SCHEME_MX ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
    o.out_dtype = FP8KIT_BF16;
    return o;
}

#ifdef __cplusplus
}
#endif
#endif
