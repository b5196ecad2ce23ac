/* ckpt_stub.c - the checkpoint converter's public entry points in a library
 * built without src/io (jansson not found): they exist, check their pointers
 * like the real ones (src/io/ckpt_api.c) and report FP8KIT_ERR_UNSUPPORTED.
 * CMakeLists.txt compiles this file only when src/io is not built. */
#include "core/internal.h"

fp8kit_ckpt_opts fp8kit_ckpt_opts_default(fp8kit_scheme scheme) { return fk_ckpt_opts_defaults(scheme); }

static fp8kit_status ckpt_unsupported(fp8kit_ctx *ctx, const char *fn, const char *in, const char *out)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
    if (!in || !out)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: %s is NULL", fn, !in ? "in" : "out");
    return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                   "%s: this libfp8kit was built without safetensors support (jansson was not found when it was "
                   "built: install libjansson-dev, or the distribution's jansson package, and rebuild)", fn);
}

fp8kit_status fp8kit_checkpoint_quantize(fp8kit_ctx *ctx, const char *in, const char *out,
                                         const fp8kit_ckpt_opts *opts, fp8kit_ckpt_report *report)
{
    (void)opts, (void)report;
    return ckpt_unsupported(ctx, "fp8kit_checkpoint_quantize", in, out);
}

fp8kit_status fp8kit_checkpoint_dequantize(fp8kit_ctx *ctx, const char *in, const char *out,
                                           const fp8kit_ckpt_opts *opts, fp8kit_ckpt_report *report)
{
    (void)opts, (void)report;
    return ckpt_unsupported(ctx, "fp8kit_checkpoint_dequantize", in, out);
}
