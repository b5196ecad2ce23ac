/* ckpt_api.c - the public checkpoint converter (include/fp8kit.h,
 * "checkpoints"): fp8kit_checkpoint_quantize / fp8kit_checkpoint_dequantize
 * validate the public options, translate them into st_conv_opts and run
 * st_convert; `fp8kit quantize|dequantize` and Python's quantize_checkpoint /
 * dequantize_checkpoint all come in here. A CUDA context
 * gets its staging buffers through the backend's memory ops
 * (fk_ctx_mem_ops). Errors are recorded on the context for the calling
 * thread (fk_fail). Built with src/io; src/core/ckpt_stub.c stands in for it
 * when jansson is missing. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "io/safetensors.h"

fp8kit_ckpt_opts fp8kit_ckpt_opts_default(fp8kit_scheme scheme) { return fk_ckpt_opts_defaults(scheme); }

/* ------------------------------------------------ device memory (st_mem_ops) */
typedef struct ckpt_dev {
    fp8kit_ctx *ctx;
    const fk_mem_ops *ops;
} ckpt_dev;

static void *ckpt_alloc(void *u, size_t n)
{
    ckpt_dev *d = u;
    return d->ops->alloc(d->ctx, n);
}

static void ckpt_free(void *u, void *p)
{
    ckpt_dev *d = u;
    d->ops->free(d->ctx, p);
}

static int ckpt_upload(void *u, void *dst, const void *src, size_t n)
{
    ckpt_dev *d = u;
    return d->ops->upload(d->ctx, dst, src, n) != FP8KIT_OK;
}

static int ckpt_download(void *u, void *dst, const void *src, size_t n)
{
    ckpt_dev *d = u;
    return d->ops->download(d->ctx, dst, src, n) != FP8KIT_OK;
}

static const char *ckpt_mem_error(void *u) { return fp8kit_last_error(((ckpt_dev *)u)->ctx); }

/* ------------------------------------------------------------ callbacks */
static void ckpt_note(void *u, const char *tensor, st_keep_reason why)
{
    const fp8kit_ckpt_opts *o = u;
    const char *reason = st_keep_reason_text(why);
    if (o->on_kept)
        o->on_kept(o->user, tensor, reason);
    if (why == ST_KEEP_SHAPE && o->on_warning) { /* the CLI warns about these */
        char msg[1024];
        snprintf(msg, sizeof msg, "kept in high precision: %s: %s", tensor, reason);
        o->on_warning(o->user, msg);
    }
}

static void ckpt_warn(void *u, const char *message)
{
    const fp8kit_ckpt_opts *o = u;
    if (o->on_warning)
        o->on_warning(o->user, message);
}

static void ckpt_progress(void *u, const st_stats *s, int final)
{
    const fp8kit_ckpt_opts *o = u;
    fp8kit_ckpt_progress p = {s->tensors_total, s->tensors_done, s->in_bytes_total, s->in_bytes_done, s->seconds,
                              final != 0};
    o->on_progress(o->user, &p);
}

/* ------------------------------------------------------------ validation */
static fp8kit_status ckpt_check_globs(fp8kit_ctx *ctx, const char *fn, const char *what, const char *const *g,
                                      int32_t n)
{
    if (n < 0)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: opts->n%s %d is negative", fn, what, (int)n);
    if (n > 0 && !g)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: opts->%s is NULL but opts->n%s is %d", fn, what, what,
                       (int)n);
    for (int32_t i = 0; i < n; i++)
        if (!g[i])
            return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: opts->%s[%d] is NULL", fn, what, (int)i);
    return FP8KIT_OK;
}

static fp8kit_status ckpt_check(fp8kit_ctx *ctx, const char *fn, int deq, const fp8kit_ckpt_opts *o,
                                st_scheme *scheme)
{
    fp8kit_status st;
    if ((st = ckpt_check_globs(ctx, fn, "exclude", o->exclude, o->nexclude)))
        return st;
    if (deq) {
        if ((unsigned)o->out_dtype >= (unsigned)FP8KIT_DTYPE_COUNT)
            return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: opts->out_dtype %d is not a fp8kit_dtype", fn,
                           (int)o->out_dtype);
        if (!fk_is_hp(o->out_dtype))
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                           "%s: opts->out_dtype %s: checkpoints dequantize to f32, f16 or bf16", fn,
                           fp8kit_dtype_name(o->out_dtype));
        return FP8KIT_OK;
    }
    if ((st = ckpt_check_globs(ctx, fn, "include", o->include, o->ninclude)))
        return st;
    switch (o->scheme) {
    case FP8KIT_SCHEME_TENSOR: *scheme = ST_SCHEME_FP8_TENSOR; break;
    case FP8KIT_SCHEME_ROW: *scheme = ST_SCHEME_FP8_ROW; break;
    case FP8KIT_SCHEME_BLOCK128X128: *scheme = ST_SCHEME_FP8_BLOCK; break;
    case FP8KIT_SCHEME_MX: *scheme = ST_SCHEME_MXFP8; break;
    case FP8KIT_SCHEME_BLOCK1X128:
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "%s: opts->scheme BLOCK1X128 is an activation scheme; checkpoint weights use "
                       "FP8KIT_SCHEME_BLOCK128X128 (or TENSOR, ROW, MX)", fn);
    default:
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: opts->scheme %d is not a fp8kit_scheme", fn,
                       (int)o->scheme);
    }
    if ((unsigned)o->format >= (unsigned)ST_FORMAT_COUNT) /* st_format's values are fp8kit_ckpt_format's */
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: opts->format %d is not a fp8kit_ckpt_format", fn,
                       (int)o->format);
    if ((unsigned)o->rounding > (unsigned)FP8KIT_ROUND_RCEIL)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: opts->rounding %d is not a fp8kit_rounding", fn,
                       (int)o->rounding);
    if (o->rounding != FP8KIT_ROUND_FLOOR && *scheme != ST_SCHEME_MXFP8)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                       "%s: opts->rounding RCEIL applies to the MX scheme only (%s has fp32 scales)", fn,
                       st_scheme_name(*scheme));
    if (o->pow2 && *scheme == ST_SCHEME_MXFP8)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                       "%s: opts->pow2 applies to the fp32-scale schemes (mx scales are powers of two)", fn);
    st_format f = o->format == FP8KIT_CKPT_FORMAT_DEFAULT ? st_format_default(*scheme) : (st_format)o->format;
    if (!st_format_supports(f, *scheme))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: format %s has no %s layout (use format %s)", fn,
                       st_format_name(f), st_scheme_name(*scheme),
                       st_format_name(st_format_other(*scheme, f)));
    return FP8KIT_OK;
}

/* ------------------------------------------------------------ the calls */
static fp8kit_status ckpt_run(fp8kit_ctx *ctx, const char *fn, int deq, const char *in, const char *out,
                              const fp8kit_ckpt_opts *opts, fp8kit_ckpt_report *report)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
    if (!in || !out)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: %s is NULL", fn, !in ? "in" : "out");
    fp8kit_ckpt_opts dflt = fk_ckpt_opts_defaults(FP8KIT_SCHEME_BLOCK128X128);
    if (!opts) {
        if (!deq)
            return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER,
                           "%s: opts is NULL (quantize needs a scheme: fp8kit_ckpt_opts_default(scheme))", fn);
        opts = &dflt;
    }
    if (!in[0] || !out[0])
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: %s is an empty path", fn, !in[0] ? "in" : "out");
    st_scheme scheme = ST_SCHEME_FP8_TENSOR;
    fp8kit_status st = ckpt_check(ctx, fn, deq, opts, &scheme);
    if (st)
        return st;
    /* An existing OUT is refused before anything is read (st_convert checks
     * again when it creates OUT, race-free). */
    struct stat sb;
    if (!opts->force && lstat(out, &sb) == 0)
        return fk_fail(ctx, FP8KIT_ERR_IO, "%s: %s exists; set force to replace it (nothing was written)", fn, out);

    st_conv_opts o;
    memset(&o, 0, sizeof o);
    o.dequantize = deq;
    o.scheme = scheme;
    o.format = (st_format)opts->format;
    o.quantize_all = !deq && opts->quantize_all;
    o.include = deq ? NULL : opts->include;
    o.ninclude = deq ? 0 : opts->ninclude;
    o.rounding = deq ? FP8KIT_ROUND_FLOOR : opts->rounding;
    o.pow2 = !deq && opts->pow2;
    o.exclude = opts->exclude;
    o.nexclude = opts->nexclude;
    o.out_dtype = deq ? opts->out_dtype : FP8KIT_BF16;
    o.force = opts->force != 0;
    o.no_fsync = opts->no_fsync != 0;
    ckpt_dev dev = {ctx, fk_ctx_mem_ops(ctx)};
    st_mem_ops mem = {ckpt_alloc, ckpt_free, ckpt_upload, ckpt_download, ckpt_mem_error, &dev};
    o.mem = dev.ops ? &mem : NULL;
    o.note = ckpt_note;
    o.warn = ckpt_warn;
    o.note_user = (void *)opts;
    o.progress = opts->on_progress ? ckpt_progress : NULL;
    o.progress_user = (void *)opts;

    st_stats s;
    char err[1024];
    err[0] = '\0';
    st = st_convert(ctx, in, out, &o, &s, err, sizeof err);
    if (st) /* all or nothing: say which, as the one failure that moves OUT says where it went */
        return fk_fail(ctx, st, "%s: %s%s", fn, err[0] ? err : fp8kit_status_string(st),
                       s.out_changed ? "" : " (nothing was written)");
    if (report) {
        fp8kit_ckpt_report r;
        memset(&r, 0, sizeof r);
        r.tensors = s.tensors_total;
        r.quantized = s.quantized;
        r.dequantized = s.dequantized;
        r.copied = s.copied;
        r.kept = s.kept;
        r.other_files = s.other_files;
        r.in_bytes = s.in_bytes_total;
        r.out_bytes = s.out_bytes;
        r.seconds = s.seconds;
        snprintf(r.convention, sizeof r.convention, "%s", s.convention);
        *report = r;
    }
    return FP8KIT_OK;
}

fp8kit_status fp8kit_checkpoint_quantize(fp8kit_ctx *ctx, const char *in, const char *out,
                                         const fp8kit_ckpt_opts *opts, fp8kit_ckpt_report *report)
{
    return ckpt_run(ctx, "fp8kit_checkpoint_quantize", 0, in, out, opts, report);
}

fp8kit_status fp8kit_checkpoint_dequantize(fp8kit_ctx *ctx, const char *in, const char *out,
                                           const fp8kit_ckpt_opts *opts, fp8kit_ckpt_report *report)
{
    return ckpt_run(ctx, "fp8kit_checkpoint_dequantize", 1, in, out, opts, report);
}
