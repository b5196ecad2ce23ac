/* tuning.c - the tuning overrides' keys (one table: name, field, range,
 * meaning), their parser and printer, and the one place the library reads
 * its environment: FP8KIT_TUNING (a new context's overrides) and
 * FP8KIT_AUTOTUNE / FP8KIT_AUTOTUNE_CACHE (autotune on for every context). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

typedef struct fk_tuning_key {
    const char *name;
    size_t off;
    int lo, hi;
    const char *what;
} fk_tuning_key;

#define FK_TK(f, lo, hi, what) {#f, offsetof(fk_tuning, f), lo, hi, what}
static const fk_tuning_key fk_tuning_keys[] = {
    FK_TK(gemm_small, 0, 2, "small-M family: 0 never, 1 when it can run the job, 2 always (or fail)"),
    FK_TK(gemm_bn, 64, 256, "sm90 tile width: 64, 128, 192 or 256"),
    FK_TK(gemm_bm, 64, 256, "sm90 tile height: 128, or 256 (block scales: two 128-row waves per tile); the gated (swiglu) kernels: 64 or 128"),
    FK_TK(gemm_promo, 0, 4, "sm90 fp32 promotion interval in k32 steps: 0 (fast accumulation), 1, 2, 4"),
    FK_TK(gemm_cluster, 1, 2, "sm90 CTAs per cluster"),
    FK_TK(gemm_mc, 1, 2, "sm90 operand a 2-CTA cluster multicasts: 1 A (CTAs along N), 2 B (CTAs along M)"),
    FK_TK(gemm_ts, 0, 1, "0: no TMA-store epilogue variants"),
    FK_TK(gemm_bulk, 0, 1, "0: the general epilogue instead of the bulk-copy one"),
    FK_TK(gemm_lag, 0, 7, "stages the second consumer warpgroup runs behind the first"),
    FK_TK(gemm_sk, 0, 64, "stream-K tail: 0 off, s parts"),
    FK_TK(gemm_pdl, 0, 1, "0: launch without programmatic dependent launch"),
    FK_TK(grouped_gm, 1, 64, "grouped GEMM: tile rows per L2 group"),
    FK_TK(small_mh, 1, 2, "small-M: 2 runs M > 64 as two halves of 64 rows"),
    FK_TK(small_r, 0, 128, "small-M: rows of B per CTA (0: choose)"),
    FK_TK(small_split, 0, 4, "small-M: CTAs splitting K (0: choose)"),
    FK_TK(small_mc, 0, 2, "small-M: CTAs per cluster sharing A by multicast (0: choose)"),
    FK_TK(small_cs, 0, 1, "small-M: column split 0 off, 1 on"),
    FK_TK(small_pdl, 0, 1, "small-M: 0 launches without programmatic dependent launch"),
    FK_TK(small_stages, 1, 64, "small-M: ring stages"),
    FK_TK(small_pf, 0, 64, "small-M: stages of B prefetched to L2 before the wait"),
    FK_TK(small_rot, 0, 1, "small-M: rotate the K start per CTA"),
    FK_TK(small_bpol, 0, 1, "small-M: no L2 cache hint on B"),
    FK_TK(small_pp, 0, 1, "small-M: 0 turns off the ping-pong"),
    FK_TK(small_plain, 0, 1, "small-M: 0 turns off the plain-epilogue shortcut"),
    FK_TK(small_exitrel, 0, 1, "small-M: release the ring at exit"),
    FK_TK(small_bpromo, 0, 3, "small-M: L2 promotion of B's rows (0 none, 1 64 B, 2 128 B, 3 256 B)"),
    FK_TK(cpu_isa, 0, 2, "CPU GEMM microkernel ceiling: generic, avx2, avx512 (or 0, 1, 2)"),
};
#undef FK_TK
#define FK_NKEYS ((int)(sizeof fk_tuning_keys / sizeof fk_tuning_keys[0]))

static int *fk_field(fk_tuning *t, const fk_tuning_key *k) { return (int *)((char *)t + k->off); }

void fk_tuning_defaults(fk_tuning *t)
{
    for (int i = 0; i < FK_NKEYS; i++)
        *fk_field(t, &fk_tuning_keys[i]) = FK_AUTO;
}

static int fk_parse_value(const fk_tuning_key *k, const char *v, int *out)
{
    if (strcmp(k->name, "cpu_isa") == 0) {
        static const char *const isa[3] = {"generic", "avx2", "avx512"};
        for (int i = 0; i < 3; i++)
            if (strcmp(v, isa[i]) == 0) {
                *out = i;
                return 0;
            }
    }
    if (strcmp(v, "auto") == 0) {
        *out = FK_AUTO;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || !end || end == v || *end || x < k->lo || x > k->hi)
        return 1;
    *out = (int)x;
    return 0;
}

int fk_tuning_parse(const char *spec, fk_tuning *out, char *err, size_t errlen)
{
    fk_tuning t;
    fk_tuning_defaults(&t);
    const char *p = spec ? spec : "";
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        size_t len = strcspn(p, ", \t\n");
        char item[128];
        if (len >= sizeof item) {
            snprintf(err, errlen, "tuning item '%.40s...' is too long", p);
            return 1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        p += len;
        char *eq = strchr(item, '=');
        if (!eq) {
            snprintf(err, errlen, "tuning item '%s' is not key=value", item);
            return 1;
        }
        *eq = 0;
        const fk_tuning_key *k = NULL;
        for (int i = 0; i < FK_NKEYS && !k; i++)
            if (strcmp(item, fk_tuning_keys[i].name) == 0)
                k = &fk_tuning_keys[i];
        if (!k) {
            snprintf(err, errlen, "unknown tuning key '%s' (docs/tuning.md lists the keys)", item);
            return 1;
        }
        if (fk_parse_value(k, eq + 1, fk_field(&t, k))) {
            snprintf(err, errlen, "tuning key %s: '%s' is not auto or an integer in [%d, %d] (%s)", k->name, eq + 1,
                     k->lo, k->hi, k->what);
            return 1;
        }
    }
    *out = t;
    return 0;
}

void fk_tuning_format(const fk_tuning *t, char *buf, size_t n)
{
    size_t used = 0;
    if (n)
        buf[0] = 0;
    for (int i = 0; i < FK_NKEYS; i++) {
        const int v = *fk_field((fk_tuning *)t, &fk_tuning_keys[i]);
        if (v == FK_AUTO || used >= n)
            continue;
        int w = snprintf(buf + used, n - used, "%s%s=%d", used ? "," : "", fk_tuning_keys[i].name, v);
        used += w > 0 ? (size_t)w : 0;
    }
}

fp8kit_status fp8kit_ctx_set_tuning(fp8kit_ctx *ctx, const char *spec)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ctx_set_tuning: ctx is NULL");
    fk_tuning t;
    char err[256];
    if (fk_tuning_parse(spec, &t, err, sizeof err))
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "fp8kit_ctx_set_tuning: %s", err);
    /* plans are keyed by a hash of the overrides (FNV-1a): the same
     * overrides set again find their plans again */
    fk_tuning none;
    fk_tuning_defaults(&none);
    uint64_t h = 0; /* no overrides: the key of a context that never set any */
    if (memcmp(&t, &none, sizeof t) != 0) {
        h = 1469598103934665603ull;
        for (size_t i = 0; i < sizeof t; i++)
            h = (h ^ ((const unsigned char *)&t)[i]) * 1099511628211ull;
    }
    pthread_mutex_lock(&ctx->plans.lock);
    ctx->tuning = t;
    ctx->tuning_key = h;
    pthread_mutex_unlock(&ctx->plans.lock);
    fk_plan_cache_renew(&ctx->plans); /* per-thread shortcuts of earlier plans stop matching */
    return FP8KIT_OK;
}

fp8kit_status fp8kit_ctx_get_tuning(const fp8kit_ctx *ctx, char *buf, size_t n)
{
    if (!ctx || !buf)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "fp8kit_ctx_get_tuning: %s is NULL", !ctx ? "ctx" : "buf");
    char tmp[1024];
    fk_tuning_format(&ctx->tuning, tmp, sizeof tmp);
    if (strlen(tmp) >= n)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "fp8kit_ctx_get_tuning: %zu bytes are too few (need %zu)", n,
                       strlen(tmp) + 1);
    memcpy(buf, tmp, strlen(tmp) + 1);
    return FP8KIT_OK;
}

/* The environment's defaults for a new context (ctx.c calls this once). */
fp8kit_status fk_ctx_env_defaults(fp8kit_ctx *ctx)
{
    char msg[512]; /* the message is rewritten from a copy: fk_fail formats into the slot it would read */
    const char *spec = getenv("FP8KIT_TUNING");
    if (spec && *spec) {
        fp8kit_status st = fp8kit_ctx_set_tuning(ctx, spec);
        if (st != FP8KIT_OK) {
            snprintf(msg, sizeof msg, "%s", fp8kit_last_error(ctx));
            return fk_fail(ctx, st, "FP8KIT_TUNING: %s", msg);
        }
    }
    const char *tune = getenv("FP8KIT_AUTOTUNE");
    if (tune && strcmp(tune, "1") == 0) {
        const char *file = getenv("FP8KIT_AUTOTUNE_CACHE");
        fp8kit_status st = fp8kit_ctx_set_autotune(ctx, 1, file && *file ? file : NULL);
        if (st != FP8KIT_OK) {
            snprintf(msg, sizeof msg, "%s", fp8kit_last_error(ctx));
            return fk_fail(ctx, st, "FP8KIT_AUTOTUNE: %s", msg);
        }
    }
    return FP8KIT_OK;
}
