/* ctx.c - context lifetime, backend selection through the registered ops
 * tables (core/backend_ops.h), the services backends get from a context, and
 * the per-thread, per-context last-error messages (fk_fail). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/internal.h"

/* Each thread remembers the last error message of up to FK_ERR_SLOTS
 * contexts (NULL is a valid key: failures without a context). */
#define FK_ERR_SLOTS 8
typedef struct {
    const fp8kit_ctx *ctx;
    int used;
    char msg[512];
} fk_err_slot;
static _Thread_local fk_err_slot fk_errs[FK_ERR_SLOTS];
static _Thread_local int fk_err_next;

static fk_err_slot *fk_err_find(const fp8kit_ctx *ctx)
{
    for (int i = 0; i < FK_ERR_SLOTS; i++)
        if (fk_errs[i].used && fk_errs[i].ctx == ctx)
            return &fk_errs[i];
    return NULL;
}

fp8kit_status fk_fail(const fp8kit_ctx *ctx, fp8kit_status st, const char *fmt, ...)
{
    fk_err_slot *s = fk_err_find(ctx);
    if (!s) {
        s = &fk_errs[fk_err_next];
        fk_err_next = (fk_err_next + 1) % FK_ERR_SLOTS;
        s->ctx = ctx;
        s->used = 1;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->msg, sizeof s->msg, fmt, ap);
    va_end(ap);
    return st;
}

const char *fp8kit_last_error(const fp8kit_ctx *ctx)
{
    fk_err_slot *s = fk_err_find(ctx);
    return s ? s->msg : "";
}

const fk_backend_ops *fk_backend_find(fp8kit_backend id)
{
    for (int i = 0; fk_backends[i]; i++)
        if (fk_backends[i]->id == id)
            return fk_backends[i];
    return NULL;
}

int fp8kit_backend_available(fp8kit_backend b)
{
    if (b == FP8KIT_BACKEND_AUTO)
        return 1;
    const fk_backend_ops *ops = fk_backend_find(b);
    return ops && ops->available();
}

fp8kit_status fp8kit_ctx_create(fp8kit_backend backend, int device, fp8kit_ctx **out)
{
    if (!out)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ctx_create: out is NULL");
    if ((unsigned)backend > FP8KIT_BACKEND_CUDA)
        return fk_fail(NULL, FP8KIT_ERR_INVALID_ARGUMENT, "fp8kit_ctx_create: backend %d is not a fp8kit_backend", (int)backend);
    if (device < 0)
        return fk_fail(NULL, FP8KIT_ERR_INVALID_ARGUMENT, "fp8kit_ctx_create: device %d is negative", device);
    fp8kit_backend resolved = backend;
    if (backend == FP8KIT_BACKEND_AUTO)
        resolved = fp8kit_backend_available(FP8KIT_BACKEND_CUDA) ? FP8KIT_BACKEND_CUDA : FP8KIT_BACKEND_CPU;
    const fk_backend_ops *ops = fk_backend_find(resolved);
    if (!ops)
        return fk_fail(NULL, FP8KIT_ERR_BACKEND_UNAVAILABLE, "fp8kit_ctx_create: this build has no %s backend",
                       resolved == FP8KIT_BACKEND_CUDA ? "CUDA" : fp8kit_backend_name(resolved));
    if (!ops->available())
        return fk_fail(NULL, FP8KIT_ERR_BACKEND_UNAVAILABLE, "fp8kit_ctx_create: %s", ops->unavailable_reason());
    fp8kit_ctx *ctx = (fp8kit_ctx *)calloc(1, sizeof *ctx);
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_OUT_OF_MEMORY, "fp8kit_ctx_create: out of memory");
    ctx->backend = resolved;
    ctx->ops = ops;
    ctx->device = device;
    fk_tuning_defaults(&ctx->tuning);
    fk_plan_cache_init(&ctx->plans);
    fk_err_slot *s = fk_err_find(ctx); /* a stale message of a freed context at this address */
    if (s)
        s->msg[0] = 0;
    fp8kit_status st = ops->init(ctx);
    if (st == FP8KIT_OK)
        st = fk_ctx_env_defaults(ctx);
    if (st != FP8KIT_OK) {
        /* the message was recorded against ctx; move it to NULL */
        fk_fail(NULL, st, "fp8kit_ctx_create: %s", fp8kit_last_error(ctx));
        fp8kit_ctx_destroy(ctx);
        return st;
    }
    *out = ctx;
    return FP8KIT_OK;
}

fp8kit_status fp8kit_ctx_destroy(fp8kit_ctx *ctx)
{
    if (!ctx)
        return FP8KIT_OK;
    if (ctx->state && ctx->ops->fini)
        ctx->ops->fini(ctx);
    fk_plan_cache_free(&ctx->plans);
    fk_tune_free(&ctx->tune);
    free(ctx);
    return FP8KIT_OK;
}

fp8kit_backend fp8kit_ctx_backend(const fp8kit_ctx *ctx) { return ctx ? ctx->backend : FP8KIT_BACKEND_AUTO; }

/* The most threads fp8kit_ctx_set_threads accepts (fp8kit.h): FK_THREADS_PER_CPU
 * per online processor, at least FK_THREADS_FLOOR. */
#define FK_THREADS_FLOOR 64
#define FK_THREADS_PER_CPU 4
static int fk_max_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > 1L << 20)
        n = 1L << 20;
    return n * FK_THREADS_PER_CPU > FK_THREADS_FLOOR ? (int)(n * FK_THREADS_PER_CPU) : FK_THREADS_FLOOR;
}

fp8kit_status fp8kit_ctx_set_threads(fp8kit_ctx *ctx, int nthreads)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ctx_set_threads: ctx is NULL");
    if (nthreads < 0)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "fp8kit_ctx_set_threads: nthreads %d is negative", nthreads);
    const int max = fk_max_threads();
    if (nthreads > max) /* libgomp exits or overflows its stack with tens of thousands */
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                       "fp8kit_ctx_set_threads: nthreads %d is above the bound of %d (max(%d, %d x the %ld online "
                       "processors))",
                       nthreads, max, FK_THREADS_FLOOR, FK_THREADS_PER_CPU, sysconf(_SC_NPROCESSORS_ONLN));
    ctx->nthreads = nthreads;
    if (ctx->ops->threads_changed)
        ctx->ops->threads_changed(ctx);
    return FP8KIT_OK;
}

const char *fp8kit_ctx_describe(const fp8kit_ctx *ctx) { return ctx ? ctx->describe : "(null context)"; }

const fk_mem_ops *fk_ctx_mem_ops(fp8kit_ctx *ctx) { return ctx ? ctx->ops->mem : NULL; }

/* ---- services for backends (core/backend_ops.h) */
int fk_ctx_device(const fp8kit_ctx *ctx) { return ctx->device; }
int fk_ctx_threads(const fp8kit_ctx *ctx) { return ctx ? ctx->nthreads : 0; }
void *fk_ctx_state(const fp8kit_ctx *ctx) { return ctx->state; }
void fk_ctx_set_state(fp8kit_ctx *ctx, void *state) { ctx->state = state; }
int fk_ctx_autotune(const fp8kit_ctx *ctx) { return ctx->tune.mode; }
const fk_tuning *fk_ctx_tuning(const fp8kit_ctx *ctx) { return &ctx->tuning; }

void fk_ctx_set_describe(fp8kit_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->describe, sizeof ctx->describe, fmt, ap);
    va_end(ap);
}
