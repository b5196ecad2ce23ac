/* test_api_fuzz_regress.c - regression cases found by the public-API fuzzer
 * (tests/fuzz/fuzz_api.c). Each bad call must fail with the given status,
 * leave a message, and write nothing; built with the sanitizers (e.g. the
 * build-tests-san configuration) a signed overflow in the validation aborts.
 *
 * 1. GEMM scale validation computed ceil(K / 128) as (K + 127) / 128 and the
 *    expected scale counts as unchecked products: an fp8 A of 1 x K with K
 *    close to INT64_MAX (a valid element and byte count) overflowed int64
 *    (undefined behaviour) before the call was refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8kit.h"

static int failures;

static void expect(int line, fp8kit_status got, fp8kit_status want, const fp8kit_ctx *ctx, const unsigned char *d,
                   size_t n)
{
    int untouched = 1;
    for (size_t i = 0; i < n; i++)
        untouched &= d[i] == 0xA5;
    const char *msg = fp8kit_last_error(ctx);
    if (got != want || !msg[0] || !untouched) {
        fprintf(stderr, "line %d: got %s, want %s, message \"%s\", output %s\n", line, fp8kit_status_string(got),
                fp8kit_status_string(want), msg, untouched ? "untouched" : "WRITTEN");
        failures++;
    }
}

int main(void)
{
    fp8kit_ctx *ctx;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) != FP8KIT_OK)
        return 1;
    static unsigned char small[64], dbuf[64];
    static float sbuf[4];
    const int64_t kmax = INT64_MAX, k32 = INT64_MAX - 31; /* 2^63 - 32, a multiple of 32 */

    /* block scaling, K = INT64_MAX: ceil(K / 128) overflowed */
    for (int mn_major = 0; mn_major < 2; mn_major++) {
        fp8kit_gemm_desc d;
        memset(&d, 0, sizeof d);
        d.scale_a = d.scale_b = FP8KIT_SCALE_BLOCK;
        d.scale_layout = mn_major ? FP8KIT_LAYOUT_MN_MAJOR : FP8KIT_LAYOUT_PLAIN;
        fp8kit_gemm_args a;
        memset(&a, 0, sizeof a);
        a.a = fp8kit_tensor_2d(small, FP8KIT_E4M3, 1, kmax, kmax);
        a.b = fp8kit_tensor_2d(small, FP8KIT_E4M3, 1, kmax, kmax);
        int64_t one = 1;
        a.scale_a = fp8kit_tensor_make(sbuf, FP8KIT_F32, 1, &one);
        a.scale_b = fp8kit_tensor_make(sbuf, FP8KIT_F32, 1, &one);
        a.alpha = 1.0f;
        a.d = fp8kit_tensor_2d(dbuf, FP8KIT_BF16, 1, 1, 1);
        memset(dbuf, 0xA5, sizeof dbuf);
        size_t ws = 0;
        expect(__LINE__, fp8kit_gemm_workspace_size(ctx, &d, &a, &ws), FP8KIT_ERR_INVALID_SHAPE, ctx, dbuf, sizeof dbuf);
        expect(__LINE__, fp8kit_gemm(ctx, &d, &a, NULL), FP8KIT_ERR_INVALID_SHAPE, ctx, dbuf, sizeof dbuf);
    }

    /* mx scaling, blocked layout, K = 2^63 - 32: 128 rows x ceil(K/32, 4) overflows */
    {
        fp8kit_gemm_desc d;
        memset(&d, 0, sizeof d);
        d.scale_a = d.scale_b = FP8KIT_SCALE_MX;
        d.scale_layout = FP8KIT_LAYOUT_BLOCKED;
        fp8kit_gemm_args a;
        memset(&a, 0, sizeof a);
        a.a = fp8kit_tensor_2d(small, FP8KIT_E4M3, 1, k32, k32);
        a.b = fp8kit_tensor_2d(small, FP8KIT_E4M3, 1, k32, k32);
        int64_t n = 4;
        a.scale_a = fp8kit_tensor_make(small, FP8KIT_E8M0, 1, &n);
        a.scale_b = fp8kit_tensor_make(small, FP8KIT_E8M0, 1, &n);
        a.alpha = 1.0f;
        a.d = fp8kit_tensor_2d(dbuf, FP8KIT_BF16, 1, 1, 1);
        memset(dbuf, 0xA5, sizeof dbuf);
        expect(__LINE__, fp8kit_gemm(ctx, &d, &a, NULL), FP8KIT_ERR_SIZE_OVERFLOW, ctx, dbuf, sizeof dbuf);
        /* the plain layout needs 1 x (K/32) scales: a valid count, so only the shape is wrong */
        d.scale_layout = FP8KIT_LAYOUT_PLAIN;
        expect(__LINE__, fp8kit_gemm(ctx, &d, &a, NULL), FP8KIT_ERR_INVALID_SHAPE, ctx, dbuf, sizeof dbuf);
    }

    fp8kit_ctx_destroy(ctx);
    if (failures) {
        fprintf(stderr, "test_api_fuzz_regress: %d failures\n", failures);
        return 1;
    }
    printf("test_api_fuzz_regress: all passed\n");
    return 0;
}
