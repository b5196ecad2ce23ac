/* test_supports.c - fp8kit_quantize_supported / fp8kit_dequantize_supported /
 * fp8kit_cast_supported on the CPU backend (the CUDA backend's kernel limits:
 * tests/test_cuda_quant.c). The CPU backend runs every call that validates,
 * so the queries answer OK for ordinary and for very large shapes (held by
 * placeholder pointers: a query reads no tensor), and for a call that does
 * not validate they give the call's own status and message (the call is
 * then made too: it fails before reading anything). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "fp8kit.h"
#include "test_util.h"

static fp8kit_ctx *ctx;

static void *ph(int i) { return (void *)(uintptr_t)((uint64_t)(i + 1) << 44); }

/* st (the query's status) is want; when it is an error, call (the call's
 * status) is the same, with the same message */
static void same(const char *what, fp8kit_status st, fp8kit_status want, const char *needle, const char *msg,
                 fp8kit_status call)
{
    CHECK(st == want, "%s: supported gives %s (%s), want %s", what, fp8kit_status_string(st), msg,
          fp8kit_status_string(want));
    if (needle)
        CHECK(strstr(msg, needle) != NULL, "%s: message '%s' does not name '%s'", what, msg, needle);
    if (want == FP8KIT_OK)
        return;
    CHECK(call == want, "%s: the call gives %s, want %s", what, fp8kit_status_string(call),
          fp8kit_status_string(want));
    CHECK(strcmp(fp8kit_last_error(ctx), msg) == 0, "%s: the call says '%s', supported said '%s'", what,
          fp8kit_last_error(ctx), msg);
}

/* quantize and dequantize of x (nd, shape) with placeholders; q / scale
 * from fp8kit_quant_shapes, then edited by the caller through *qm / *sm */
static void qdq(const char *what, fp8kit_quant_desc d, fp8kit_tensor x, fp8kit_status want, const char *needle,
                int bad_q_shape)
{
    fp8kit_tensor q, s;
    if (fp8kit_quant_shapes(&d, &x, &q, &s) != FP8KIT_OK) { /* a shape the descriptor refuses */
        q = fp8kit_tensor_make(NULL, d.elem, x.ndim, x.shape);
        s = fp8kit_tensor_make(NULL, FP8KIT_F32, 1, x.shape);
    }
    q.data = ph(1);
    s.data = ph(2);
    if (bad_q_shape)
        q.shape[0]++; /* one expert too many */
    char msg[512];
    fp8kit_status st = fp8kit_quantize_supported(ctx, &d, &x, &q, &s);
    snprintf(msg, sizeof msg, "%s", st ? fp8kit_last_error(ctx) : "");
    same(what, st, want, needle, msg, want ? fp8kit_quantize(ctx, &d, &x, &q, &s, NULL) : FP8KIT_OK);
    st = fp8kit_dequantize_supported(ctx, &d, &q, &s, &x);
    snprintf(msg, sizeof msg, "%s", st ? fp8kit_last_error(ctx) : "");
    same(what, st, want, needle, msg, want ? fp8kit_dequantize(ctx, &d, &q, &s, &x, NULL) : FP8KIT_OK);
}

static void cast(const char *what, fp8kit_tensor x, fp8kit_tensor y, fp8kit_status want, const char *needle)
{
    char msg[512];
    fp8kit_status st = fp8kit_cast_supported(ctx, &x, &y);
    snprintf(msg, sizeof msg, "%s", st ? fp8kit_last_error(ctx) : "");
    same(what, st, want, needle, msg, want ? fp8kit_cast(ctx, &x, &y, NULL) : FP8KIT_OK);
}

int main(void)
{
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx), FP8KIT_OK);
    if (!ctx)
        return fk_test_summary("test_supports");
    const fp8kit_scheme schemes[] = {FP8KIT_SCHEME_TENSOR, FP8KIT_SCHEME_ROW, FP8KIT_SCHEME_BLOCK1X128,
                                     FP8KIT_SCHEME_BLOCK128X128, FP8KIT_SCHEME_MX};
    /* ordinary and very large shapes (beyond every CUDA kernel's limits): OK */
    const int64_t small[3] = {2, 256, 512}, huge[3] = {65536, 1 << 16, 1 << 16}, flat[1] = {(int64_t)1 << 40};
    for (int i = 0; i < 5; i++)
        for (int axis = -2; axis <= -1; axis++) {
            if (axis == -2 && schemes[i] != FP8KIT_SCHEME_MX)
                continue;
            fp8kit_quant_desc d = fp8kit_quant_desc_default(schemes[i]);
            d.axis = axis;
            qdq("ordinary", d, fp8kit_tensor_make(ph(0), FP8KIT_BF16, 3, small), FP8KIT_OK, NULL, 0);
            qdq("huge", d, fp8kit_tensor_make(ph(0), FP8KIT_F32, 3, huge), FP8KIT_OK, NULL, 0);
        }
    fp8kit_quant_desc dt = fp8kit_quant_desc_default(FP8KIT_SCHEME_TENSOR);
    qdq("1-D 2^40", dt, fp8kit_tensor_make(ph(0), FP8KIT_F16, 1, flat), FP8KIT_OK, NULL, 0);
    cast("ordinary", fp8kit_tensor_make(ph(0), FP8KIT_BF16, 3, small), fp8kit_tensor_make(ph(1), FP8KIT_E4M3, 3, small),
         FP8KIT_OK, NULL);
    cast("1-D 2^40", fp8kit_tensor_make(ph(0), FP8KIT_E5M2, 1, flat), fp8kit_tensor_make(ph(1), FP8KIT_F32, 1, flat),
         FP8KIT_OK, NULL);

    /* calls that do not validate: the call's status and message */
    fp8kit_quant_desc dm = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
    const int64_t c48[2] = {64, 48};
    qdq("mx over 48 columns", dm, fp8kit_tensor_make(ph(0), FP8KIT_BF16, 2, c48), FP8KIT_ERR_INVALID_SHAPE,
        "multiple of 32", 0);
    qdq("q with an expert too many", dm, fp8kit_tensor_make(ph(0), FP8KIT_BF16, 3, small), FP8KIT_ERR_INVALID_SHAPE,
        "q's shape", 1);
    qdq("misaligned f32 x", dm, fp8kit_tensor_make((char *)ph(0) + 2, FP8KIT_F32, 3, small), FP8KIT_ERR_MISALIGNED,
        NULL, 0);
    fp8kit_quant_desc dbad = dm;
    dbad.axis = -2;
    dbad.scheme = FP8KIT_SCHEME_ROW;
    qdq("axis -2 outside mx", dbad, fp8kit_tensor_make(ph(0), FP8KIT_BF16, 3, small), FP8KIT_ERR_UNSUPPORTED,
        "axis -2", 0);
    cast("f32 -> f16", fp8kit_tensor_make(ph(0), FP8KIT_F32, 3, small), fp8kit_tensor_make(ph(1), FP8KIT_F16, 3, small),
         FP8KIT_ERR_UNSUPPORTED, "casts go between");
    cast("shapes differ", fp8kit_tensor_make(ph(0), FP8KIT_F32, 3, small),
         fp8kit_tensor_make(ph(1), FP8KIT_E4M3, 2, small + 1), FP8KIT_ERR_INVALID_SHAPE, "same shape");
    fp8kit_tensor x = fp8kit_tensor_make(ph(0), FP8KIT_BF16, 3, small), q, s;
    CHECK_STATUS(fp8kit_quant_shapes(&dm, &x, &q, &s), FP8KIT_OK);
    q.data = ph(1);
    s.data = ph(2);
    CHECK_STATUS(fp8kit_quantize_supported(NULL, &dm, &x, &q, &s), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_dequantize_supported(NULL, &dm, &q, &s, &x), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_cast_supported(NULL, &x, &q), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_quantize_supported(ctx, NULL, &x, &q, &s), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_cast_supported(ctx, &x, NULL), FP8KIT_ERR_NULL_POINTER);
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_supports");
}
