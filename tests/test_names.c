/* test_names.c - the names of the public enums (src/core/names.c): for every
 * enum with a name table (dtype, backend, scheme, ckpt_scheme, rounding,
 * scale_layout, scale_mode, activation, out_quant, grouped_layout) the
 * canonical names are docs/spec.md's, distinct, one per value (ckpt_scheme:
 * none for block1x128), NULL (dtype, backend: "invalid") outside the enum;
 * every canonical name and alias parses back to its value in any ASCII case,
 * no spelling means two values, fp8kit_<enum>_alias ends with NULL; bad
 * names are INVALID_ARGUMENT with a message naming the function and listing
 * every name, NULL arguments NULL_POINTER, and *out is left alone when a
 * parse fails. The activations' own checks follow (aliases "gelu" and
 * "swish"). Build: part of CTest (tests/test_*.c). */
#include <ctype.h>
#include <stdio.h>
#include "fp8kit.h"
#include "test_util.h"

static void check_bad(const char *name)
{
    fp8kit_activation out = (fp8kit_activation)77;
    fp8kit_status st = fp8kit_activation_parse(name, &out);
    CHECK(st == FP8KIT_ERR_INVALID_ARGUMENT, "parse('%s') returned %s", name, fp8kit_status_string(st));
    CHECK(out == (fp8kit_activation)77, "parse('%s') wrote *out = %d on failure", name, (int)out);
    const char *msg = fp8kit_last_error(NULL);
    CHECK(strstr(msg, "fp8kit_activation_parse") != NULL, "message '%s' does not name the function", msg);
    for (int v = 0; v < FP8KIT_ACT_COUNT; v++) {
        const char *canon = fp8kit_activation_name((fp8kit_activation)v);
        CHECK(canon && strstr(msg, canon) != NULL, "message '%s' does not list '%s'", msg, canon ? canon : "?");
    }
    CHECK(strstr(msg, "gelu (= gelu_erf)") && strstr(msg, "swish (= silu)"), "message '%s' does not list the aliases",
          msg);
}

/* one enum's name functions, over int */
typedef struct enum_names {
    const char *label;
    int count;                       /* values 0 .. count - 1 */
    const char *const *want;         /* docs/spec.md's canonical names (NULL: none) */
    const char *outside;             /* the name outside the enum: NULL, or "invalid" */
    const char *(*name)(int v);
    const char *(*alias)(int v, int i);
    fp8kit_status (*parse)(const char *s, int *v);
} enum_names;

#define ADAPT(e, type)                                                                                           \
    static const char *e##_name_(int v) { return fp8kit_##e##_name((type)v); }                                 \
    static const char *e##_alias_(int v, int i) { return fp8kit_##e##_alias((type)v, i); }                     \
    static fp8kit_status e##_parse_(const char *s, int *v)                                                      \
    {                                                                                                            \
        type t = (type)77;                                                                                       \
        fp8kit_status st = fp8kit_##e##_parse(s, v ? &t : NULL);                                                 \
        if (v)                                                                                                   \
            *v = (int)t;                                                                                         \
        return st;                                                                                               \
    }
ADAPT(dtype, fp8kit_dtype)
ADAPT(backend, fp8kit_backend)
ADAPT(scheme, fp8kit_scheme)
ADAPT(ckpt_scheme, fp8kit_scheme)
ADAPT(rounding, fp8kit_rounding)
ADAPT(scale_layout, fp8kit_scale_layout)
ADAPT(scale_mode, fp8kit_scale_mode)
ADAPT(activation, fp8kit_activation)
ADAPT(out_quant, fp8kit_out_quant)
ADAPT(grouped_layout, fp8kit_grouped_layout)

static const char *const want_dtype[] = {"f32", "f16", "bf16", "e4m3", "e5m2", "e8m0"};
static const char *const want_backend[] = {"auto", "cpu", "cuda"};
static const char *const want_scheme[] = {"tensor", "row", "block1x128", "block128x128", "mx"};
static const char *const want_ckpt_scheme[] = {"fp8-tensor", "fp8-row", NULL, "fp8-block", "mxfp8"};
static const char *const want_rounding[] = {"floor", "rceil"};
static const char *const want_scale_layout[] = {"plain", "blocked", "mn_major"};
static const char *const want_scale_mode[] = {"none", "tensor", "row", "block", "mx"};
static const char *const want_activation[] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu", "swiglu"};
static const char *const want_out_quant[] = {"none", "scaled", "mx", "block1x128"};
static const char *const want_grouped_layout[] = {"contiguous", "masked"};

#define ENUM(e, n, outside) {#e, n, want_##e, outside, e##_name_, e##_alias_, e##_parse_}
static const enum_names enums[] = {
    ENUM(dtype, FP8KIT_DTYPE_COUNT, "invalid"), ENUM(backend, 3, "invalid"), ENUM(scheme, 5, NULL),
    ENUM(ckpt_scheme, 5, NULL), ENUM(rounding, 2, NULL), ENUM(scale_layout, 3, NULL), ENUM(scale_mode, 5, NULL),
    ENUM(activation, FP8KIT_ACT_COUNT, NULL), ENUM(out_quant, 4, NULL), ENUM(grouped_layout, 2, NULL),
};

/* spellings the Names table of docs/spec.md gives, and what they mean */
static const struct { const char *e, *name; int v; } spelled[] = {
    {"dtype", "float8_e4m3fn", FP8KIT_E4M3}, {"dtype", "bfloat16", FP8KIT_BF16}, {"dtype", "half", FP8KIT_F16},
    {"dtype", "fp32", FP8KIT_F32}, {"dtype", "float8_e8m0fnu", FP8KIT_E8M0}, {"dtype", "fp8_e5m2", FP8KIT_E5M2},
    {"scheme", "per_tensor", FP8KIT_SCHEME_TENSOR}, {"scheme", "rowwise", FP8KIT_SCHEME_ROW},
    {"scheme", "1x128", FP8KIT_SCHEME_BLOCK1X128}, {"scheme", "128x128", FP8KIT_SCHEME_BLOCK128X128},
    {"scheme", "mxfp8", FP8KIT_SCHEME_MX}, {"ckpt_scheme", "block", FP8KIT_SCHEME_BLOCK128X128},
    {"ckpt_scheme", "tensor", FP8KIT_SCHEME_TENSOR}, {"ckpt_scheme", "mx", FP8KIT_SCHEME_MX},
    {"scale_layout", "swizzled", FP8KIT_LAYOUT_BLOCKED}, {"scale_mode", "tensorwise", FP8KIT_SCALE_TENSOR},
    {"scale_mode", "blockwise", FP8KIT_SCALE_BLOCK}, {"activation", "gelu", FP8KIT_ACT_GELU_ERF},
};

/* ASCII case-insensitive equality */
static int ieq(const char *a, const char *b)
{
    for (; *a && toupper((unsigned char)*a) == toupper((unsigned char)*b); a++, b++)
        ;
    return toupper((unsigned char)*a) == toupper((unsigned char)*b);
}

static void upper(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < n; i++)
        dst[i] = (char)toupper((unsigned char)src[i]);
    dst[i] = '\0';
}

static void check_enum(const enum_names *e)
{
    char up[64];
    const char *outside[] = {e->name(e->count), e->name(-1), e->name(31), e->name(1000)};
    for (int k = 0; k < 4; k++)
        CHECK(e->outside ? outside[k] && !strcmp(outside[k], e->outside) : outside[k] == NULL,
              "%s: a value outside the enum is named '%s'", e->label, outside[k] ? outside[k] : "(null)");
    CHECK(e->alias(e->count, 0) == NULL && e->alias(-1, 0) == NULL, "%s: a value outside has an alias", e->label);
    for (int v = 0; v < e->count; v++) {
        const char *n = e->name(v);
        CHECK(e->want[v] ? n && !strcmp(n, e->want[v]) : n == NULL, "%s: value %d is named '%s', want '%s'",
              e->label, v, n ? n : "(null)", e->want[v] ? e->want[v] : "(null)");
        /* the canonical name, then each alias: parses back to v, any case; means no other value */
        for (int i = -1;; i++) {
            const char *s = i < 0 ? n : e->alias(v, i);
            if (!s)
                break;
            CHECK(i < 32, "%s: value %d has no end to its aliases", e->label, v);
            if (i >= 32)
                break;
            int back = -1;
            CHECK_STATUS(e->parse(s, &back), FP8KIT_OK);
            CHECK(back == v, "%s: parse('%s') = %d, want %d", e->label, s, back, v);
            upper(up, sizeof up, s);
            back = -1;
            CHECK_STATUS(e->parse(up, &back), FP8KIT_OK);
            CHECK(back == v, "%s: parse('%s') = %d, want %d", e->label, up, back, v);
            for (int w = 0; w < e->count; w++)
                for (int j = -1; w != v; j++) {
                    const char *o = j < 0 ? e->name(w) : e->alias(w, j);
                    if (!o && j >= 0)
                        break;
                    CHECK(!o || !ieq(o, s), "%s: '%s' names values %d and %d", e->label, s, v, w);
                }
        }
        CHECK(n || e->alias(v, 0) == NULL, "%s: value %d has aliases but no name", e->label, v);
    }
    /* bad names: INVALID_ARGUMENT, *out alone, every name listed */
    static const char *const bad[] = {"", " ", "x", "f64", "tensor ", "-", "no-such-name-of-anything"};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        int out = 55;
        int known = 0;
        for (int v = 0; v < e->count; v++)
            known |= e->name(v) && ieq(e->name(v), bad[b]);
        if (known)
            continue;
        CHECK_STATUS(e->parse(bad[b], &out), FP8KIT_ERR_INVALID_ARGUMENT);
        CHECK(out == 77, "%s: parse('%s') wrote *out = %d on failure", e->label, bad[b], out);
        const char *msg = fp8kit_last_error(NULL);
        char fn[64];
        snprintf(fn, sizeof fn, "fp8kit_%s_parse", e->label);
        CHECK(strstr(msg, fn) != NULL, "%s: message '%s' does not name %s", e->label, msg, fn);
        for (int v = 0; v < e->count; v++) {
            if (e->name(v))
                CHECK(strstr(msg, e->name(v)) != NULL, "%s: message '%s' lacks '%s'", e->label, msg, e->name(v));
            for (int i = 0; e->alias(v, i); i++) {
                char pair[96];
                snprintf(pair, sizeof pair, "%s (= %s)", e->alias(v, i), e->name(v));
                CHECK(strstr(msg, pair) != NULL, "%s: message '%s' lacks '%s'", e->label, msg, pair);
            }
        }
    }
    int out = 55;
    CHECK_STATUS(e->parse(NULL, &out), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(e->parse(e->want[0], NULL), FP8KIT_ERR_NULL_POINTER);
}

static void check_every_enum(void)
{
    for (size_t i = 0; i < sizeof enums / sizeof enums[0]; i++)
        check_enum(&enums[i]);
    for (size_t i = 0; i < sizeof spelled / sizeof spelled[0]; i++) {
        const enum_names *e = NULL;
        for (size_t k = 0; k < sizeof enums / sizeof enums[0]; k++)
            if (!strcmp(enums[k].label, spelled[i].e))
                e = &enums[k];
        int back = -1;
        CHECK(e && e->parse(spelled[i].name, &back) == FP8KIT_OK && back == spelled[i].v, "%s: '%s' is not %d",
              spelled[i].e, spelled[i].name, spelled[i].v);
    }
    /* block1x128 is no checkpoint scheme; "block" is no quantization scheme (1x128 or 128x128?) */
    int v = -1;
    CHECK_STATUS(ckpt_scheme_parse_("block1x128", &v), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(scheme_parse_("block", &v), FP8KIT_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    check_every_enum();

    /* docs/spec.md 3's names of the first values (a new activation is checked below without
     * an edit here: a distinct name that round trips) */
    static const char *const want[] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu", "swiglu"};
    CHECK(FP8KIT_ACT_COUNT >= (int)(sizeof want / sizeof want[0]) && FP8KIT_ACT_COUNT > FP8KIT_ACT_SILU,
          "FP8KIT_ACT_COUNT %d is below the values of the enum", FP8KIT_ACT_COUNT);

    /* every value: a canonical name, distinct, that parses back (any case) */
    for (int v = 0; v < FP8KIT_ACT_COUNT; v++) {
        const char *name = fp8kit_activation_name((fp8kit_activation)v);
        CHECK(name != NULL, "value %d has no name", v);
        if (!name)
            continue;
        if (v < (int)(sizeof want / sizeof want[0]))
            CHECK(strcmp(name, want[v]) == 0, "value %d is named '%s', want '%s'", v, name, want[v]);
        for (int w = 0; w < v; w++) {
            const char *other = fp8kit_activation_name((fp8kit_activation)w);
            CHECK(!other || strcmp(name, other) != 0, "values %d and %d share the name '%s'", w, v, name);
        }
        fp8kit_activation back = (fp8kit_activation)-1;
        CHECK_STATUS(fp8kit_activation_parse(name, &back), FP8KIT_OK);
        CHECK(back == (fp8kit_activation)v, "parse('%s') = %d, want %d", name, (int)back, v);
        char upper[32];
        size_t n = strlen(name);
        CHECK(n < sizeof upper, "name '%s' too long for the test", name);
        for (size_t i = 0; i <= n && i < sizeof upper; i++)
            upper[i] = (char)toupper((unsigned char)name[i]);
        upper[sizeof upper - 1] = '\0';
        back = (fp8kit_activation)-1;
        CHECK_STATUS(fp8kit_activation_parse(upper, &back), FP8KIT_OK);
        CHECK(back == (fp8kit_activation)v, "parse('%s') = %d, want %d", upper, (int)back, v);
    }
    /* outside the enum */
    CHECK(fp8kit_activation_name((fp8kit_activation)FP8KIT_ACT_COUNT) == NULL, "FP8KIT_ACT_COUNT has a name");
    CHECK(fp8kit_activation_name((fp8kit_activation)-1) == NULL, "-1 has a name");
    CHECK(fp8kit_activation_name((fp8kit_activation)1000) == NULL, "1000 has a name");

    /* aliases */
    static const struct { const char *name; fp8kit_activation v; } alias[] = {
        {"gelu", FP8KIT_ACT_GELU_ERF}, {"GELU", FP8KIT_ACT_GELU_ERF}, {"swish", FP8KIT_ACT_SILU},
        {"Swish", FP8KIT_ACT_SILU}};
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++) {
        fp8kit_activation back = (fp8kit_activation)-1;
        CHECK_STATUS(fp8kit_activation_parse(alias[i].name, &back), FP8KIT_OK);
        CHECK(back == alias[i].v, "parse('%s') = %d, want %d", alias[i].name, (int)back, (int)alias[i].v);
    }
    /* an alias is not a canonical name */
    for (int v = 0; v < FP8KIT_ACT_COUNT; v++) {
        const char *name = fp8kit_activation_name((fp8kit_activation)v);
        CHECK(!name || (strcmp(name, "gelu") && strcmp(name, "swish")), "alias '%s' is a canonical name", name);
    }

    /* bad names */
    static const char *const bad[] = {"", "tanh", "gelu_", "gelu tanh", " relu", "relu ", "relu\n", "sigmoid", "0",
                                      "nonee", "gelu_erff", "silu_",
                                      "a-name-much-longer-than-any-activation-name-there-is-to-check-truncation-of-the-"
                                      "message-text-in-the-error-buffer"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        check_bad(bad[i]);

    /* NULL */
    fp8kit_activation out = (fp8kit_activation)77;
    CHECK_STATUS(fp8kit_activation_parse(NULL, &out), FP8KIT_ERR_NULL_POINTER);
    CHECK(out == (fp8kit_activation)77, "parse(NULL) wrote *out");
    CHECK_STATUS(fp8kit_activation_parse("relu", NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK(strstr(fp8kit_last_error(NULL), "out is NULL") != NULL, "message '%s'", fp8kit_last_error(NULL));
    return fk_test_summary("test_names");
}
