/* names.c - the names of the public enums (docs/spec.md, "Names and
 * spellings"): ONE table per enum - dtypes, backends, quantization schemes
 * and the checkpoint converter's scheme names, MX roundings, scale layouts,
 * GEMM scale modes, activations, output quantization, grouped layouts - read
 * through fp8kit_<enum>_name / _parse / _alias by the library's messages,
 * the CLI (tools/cli_util.c) and the Python binding (python/fp8kit/_names.py).
 * A new value adds its row here (an alias a row with is_alias set). */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

typedef struct fk_name {
    const char *name;
    int value;
    int is_alias; /* 0: the canonical name (one per value), 1: another spelling */
} fk_name;

typedef struct fk_names {
    const char *parse_fn; /* the public parse function, for its messages */
    const char *what;     /* "a dtype" */
    const fk_name *rows;
    int n;
} fk_names;

#define FK_NAMES(parse_fn, what, rows) {parse_fn, what, rows, (int)(sizeof rows / sizeof rows[0])}

static const fk_name fk_dtype_rows[] = {
    {"f32", FP8KIT_F32, 0}, {"f16", FP8KIT_F16, 0}, {"bf16", FP8KIT_BF16, 0},
    {"e4m3", FP8KIT_E4M3, 0}, {"e5m2", FP8KIT_E5M2, 0}, {"e8m0", FP8KIT_E8M0, 0},
    {"fp32", FP8KIT_F32, 1}, {"float32", FP8KIT_F32, 1}, {"float", FP8KIT_F32, 1},
    {"fp16", FP8KIT_F16, 1}, {"float16", FP8KIT_F16, 1}, {"half", FP8KIT_F16, 1},
    {"bfloat16", FP8KIT_BF16, 1},
    {"float8_e4m3fn", FP8KIT_E4M3, 1}, {"e4m3fn", FP8KIT_E4M3, 1}, {"fp8_e4m3", FP8KIT_E4M3, 1},
    {"float8_e5m2", FP8KIT_E5M2, 1}, {"fp8_e5m2", FP8KIT_E5M2, 1},
    {"float8_e8m0fnu", FP8KIT_E8M0, 1}, {"e8m0fnu", FP8KIT_E8M0, 1},
};

static const fk_name fk_backend_rows[] = {
    {"auto", FP8KIT_BACKEND_AUTO, 0}, {"cpu", FP8KIT_BACKEND_CPU, 0}, {"cuda", FP8KIT_BACKEND_CUDA, 0},
};

static const fk_name fk_scheme_rows[] = {
    {"tensor", FP8KIT_SCHEME_TENSOR, 0}, {"row", FP8KIT_SCHEME_ROW, 0},
    {"block1x128", FP8KIT_SCHEME_BLOCK1X128, 0}, {"block128x128", FP8KIT_SCHEME_BLOCK128X128, 0},
    {"mx", FP8KIT_SCHEME_MX, 0},
    {"tensorwise", FP8KIT_SCHEME_TENSOR, 1}, {"per_tensor", FP8KIT_SCHEME_TENSOR, 1},
    {"rowwise", FP8KIT_SCHEME_ROW, 1}, {"per_row", FP8KIT_SCHEME_ROW, 1},
    {"1x128", FP8KIT_SCHEME_BLOCK1X128, 1}, {"128x128", FP8KIT_SCHEME_BLOCK128X128, 1},
    {"mxfp8", FP8KIT_SCHEME_MX, 1},
};

/* the checkpoint converter's names (docs/spec.md section 5; `fp8kit quantize --scheme`), then the scheme
 * names of the same scaling; block1x128 has none (activations only: weights use 128x128) */
static const fk_name fk_ckpt_scheme_rows[] = {
    {"fp8-tensor", FP8KIT_SCHEME_TENSOR, 0}, {"fp8-row", FP8KIT_SCHEME_ROW, 0},
    {"fp8-block", FP8KIT_SCHEME_BLOCK128X128, 0}, {"mxfp8", FP8KIT_SCHEME_MX, 0},
    {"tensor", FP8KIT_SCHEME_TENSOR, 1}, {"tensorwise", FP8KIT_SCHEME_TENSOR, 1},
    {"per_tensor", FP8KIT_SCHEME_TENSOR, 1},
    {"row", FP8KIT_SCHEME_ROW, 1}, {"rowwise", FP8KIT_SCHEME_ROW, 1}, {"per_row", FP8KIT_SCHEME_ROW, 1},
    {"block", FP8KIT_SCHEME_BLOCK128X128, 1}, {"block128x128", FP8KIT_SCHEME_BLOCK128X128, 1},
    {"128x128", FP8KIT_SCHEME_BLOCK128X128, 1},
    {"mx", FP8KIT_SCHEME_MX, 1},
};

static const fk_name fk_rounding_rows[] = {
    {"floor", FP8KIT_ROUND_FLOOR, 0}, {"rceil", FP8KIT_ROUND_RCEIL, 0},
};

static const fk_name fk_layout_rows[] = {
    {"plain", FP8KIT_LAYOUT_PLAIN, 0}, {"blocked", FP8KIT_LAYOUT_BLOCKED, 0},
    {"mn_major", FP8KIT_LAYOUT_MN_MAJOR, 0},
    {"swizzled", FP8KIT_LAYOUT_BLOCKED, 1},
};

static const fk_name fk_scale_mode_rows[] = {
    {"none", FP8KIT_SCALE_NONE, 0}, {"tensor", FP8KIT_SCALE_TENSOR, 0}, {"row", FP8KIT_SCALE_ROW, 0},
    {"block", FP8KIT_SCALE_BLOCK, 0}, {"mx", FP8KIT_SCALE_MX, 0},
    {"tensorwise", FP8KIT_SCALE_TENSOR, 1}, {"rowwise", FP8KIT_SCALE_ROW, 1},
    {"blockwise", FP8KIT_SCALE_BLOCK, 1}, {"mxfp8", FP8KIT_SCALE_MX, 1},
};

static const fk_name fk_act_rows[] = {
    {"none", FP8KIT_ACT_NONE, 0}, {"relu", FP8KIT_ACT_RELU, 0}, {"gelu_tanh", FP8KIT_ACT_GELU_TANH, 0},
    {"gelu_erf", FP8KIT_ACT_GELU_ERF, 0}, {"silu", FP8KIT_ACT_SILU, 0},
    {"swiglu", FP8KIT_ACT_SWIGLU, 0}, {"gelu", FP8KIT_ACT_GELU_ERF, 1}, {"swish", FP8KIT_ACT_SILU, 1},
};

static const fk_name fk_out_quant_rows[] = {
    {"none", FP8KIT_OUTQ_NONE, 0}, {"scaled", FP8KIT_OUTQ_SCALED, 0}, {"mx", FP8KIT_OUTQ_MX, 0},
    {"block1x128", FP8KIT_OUTQ_BLOCK1X128, 0},
};

static const fk_name fk_grouped_layout_rows[] = {
    {"contiguous", FP8KIT_GROUPED_CONTIGUOUS, 0}, {"masked", FP8KIT_GROUPED_MASKED, 0},
};

static const fk_names fk_dtype_names = FK_NAMES("fp8kit_dtype_parse", "a dtype", fk_dtype_rows);
static const fk_names fk_backend_names = FK_NAMES("fp8kit_backend_parse", "a backend", fk_backend_rows);
static const fk_names fk_scheme_names = FK_NAMES("fp8kit_scheme_parse", "a quantization scheme", fk_scheme_rows);
static const fk_names fk_ckpt_scheme_names =
    FK_NAMES("fp8kit_ckpt_scheme_parse", "a checkpoint scheme", fk_ckpt_scheme_rows);
static const fk_names fk_rounding_names = FK_NAMES("fp8kit_rounding_parse", "an MX rounding", fk_rounding_rows);
static const fk_names fk_layout_names = FK_NAMES("fp8kit_scale_layout_parse", "a scale layout", fk_layout_rows);
static const fk_names fk_scale_mode_names = FK_NAMES("fp8kit_scale_mode_parse", "a scale mode", fk_scale_mode_rows);
static const fk_names fk_act_names = FK_NAMES("fp8kit_activation_parse", "an activation", fk_act_rows);
static const fk_names fk_out_quant_names =
    FK_NAMES("fp8kit_out_quant_parse", "an output quantization", fk_out_quant_rows);
static const fk_names fk_grouped_layout_names =
    FK_NAMES("fp8kit_grouped_layout_parse", "a grouped layout", fk_grouped_layout_rows);

static const char *fk_name_of(const fk_names *t, int v)
{
    for (int i = 0; i < t->n; i++)
        if (!t->rows[i].is_alias && t->rows[i].value == v)
            return t->rows[i].name;
    return NULL;
}

static const char *fk_alias_of(const fk_names *t, int v, int k)
{
    for (int i = 0; i < t->n; i++)
        if (t->rows[i].is_alias && t->rows[i].value == v && k-- == 0)
            return t->rows[i].name;
    return NULL;
}

/* ASCII case-insensitive equality (no locale). */
static int fk_name_eq(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y - 'A' + 'a');
        if (x != y)
            return 0;
        if (!x)
            return 1;
    }
}

/* Looks name up in t (any ASCII case); on a miss the message lists every
 * name: "none, relu, ... or silu; aliases gelu (= gelu_erf), swish (= silu)". */
static fp8kit_status fk_parse(const fk_names *t, const char *name, int *out)
{
    if (!name || !out)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "%s: %s is NULL", t->parse_fn, name ? "out" : "name");
    for (int i = 0; i < t->n; i++)
        if (fk_name_eq(name, t->rows[i].name)) {
            *out = t->rows[i].value;
            return FP8KIT_OK;
        }
    char list[448] = "";
    size_t used = 0;
    int canon = 0, aliases = 0;
    for (int i = 0; i < t->n; i++)
        canon += !t->rows[i].is_alias;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0, k = 0; i < t->n && used < sizeof list; i++) {
            const fk_name *r = &t->rows[i];
            if (r->is_alias != pass)
                continue;
            if (pass == 0)
                snprintf(list + used, sizeof list - used, "%s%s", k == 0 ? "" : k == canon - 1 ? " or " : ", ",
                         r->name);
            else
                snprintf(list + used, sizeof list - used, "%s%s (= %s)", aliases++ ? ", " : "; aliases ", r->name,
                         fk_name_of(t, r->value));
            k++;
            used = strlen(list);
        }
    return fk_fail(NULL, FP8KIT_ERR_INVALID_ARGUMENT, "%s: '%.64s' is not %s: %s", t->parse_fn, name, t->what,
                   list);
}

/* name, parse and alias of one enum, over its table */
#define FK_NAME_FUNCS(prefix, type, table)                                                                        \
    fp8kit_status prefix##_parse(const char *name, type *out)                                                     \
    {                                                                                                             \
        int v = 0;                                                                                                \
        fp8kit_status st = fk_parse(&table, name, out ? &v : NULL);                                             \
        if (st == FP8KIT_OK)                                                                                      \
            *out = (type)v;                                                                                       \
        return st;                                                                                                \
    }                                                                                                             \
    const char *prefix##_alias(type value, int i) { return fk_alias_of(&table, (int)value, i); }

FK_NAME_FUNCS(fp8kit_dtype, fp8kit_dtype, fk_dtype_names)
FK_NAME_FUNCS(fp8kit_backend, fp8kit_backend, fk_backend_names)
FK_NAME_FUNCS(fp8kit_scheme, fp8kit_scheme, fk_scheme_names)
FK_NAME_FUNCS(fp8kit_ckpt_scheme, fp8kit_scheme, fk_ckpt_scheme_names)
FK_NAME_FUNCS(fp8kit_rounding, fp8kit_rounding, fk_rounding_names)
FK_NAME_FUNCS(fp8kit_scale_layout, fp8kit_scale_layout, fk_layout_names)
FK_NAME_FUNCS(fp8kit_scale_mode, fp8kit_scale_mode, fk_scale_mode_names)
FK_NAME_FUNCS(fp8kit_activation, fp8kit_activation, fk_act_names)
FK_NAME_FUNCS(fp8kit_out_quant, fp8kit_out_quant, fk_out_quant_names)
FK_NAME_FUNCS(fp8kit_grouped_layout, fp8kit_grouped_layout, fk_grouped_layout_names)

/* the canonical names: NULL outside the enum, but for dtypes and backends, whose names
 * have always been "invalid" there (messages print them unchecked) */
const char *fp8kit_dtype_name(fp8kit_dtype t)
{
    const char *n = fk_name_of(&fk_dtype_names, (int)t);
    return n ? n : "invalid";
}

const char *fp8kit_backend_name(fp8kit_backend b)
{
    const char *n = fk_name_of(&fk_backend_names, (int)b);
    return n ? n : "invalid";
}

const char *fp8kit_scheme_name(fp8kit_scheme s) { return fk_name_of(&fk_scheme_names, (int)s); }
const char *fp8kit_ckpt_scheme_name(fp8kit_scheme s) { return fk_name_of(&fk_ckpt_scheme_names, (int)s); }
const char *fp8kit_rounding_name(fp8kit_rounding r) { return fk_name_of(&fk_rounding_names, (int)r); }
const char *fp8kit_scale_layout_name(fp8kit_scale_layout l) { return fk_name_of(&fk_layout_names, (int)l); }
const char *fp8kit_scale_mode_name(fp8kit_scale_mode m) { return fk_name_of(&fk_scale_mode_names, (int)m); }
const char *fp8kit_activation_name(fp8kit_activation a) { return fk_name_of(&fk_act_names, (int)a); }
const char *fp8kit_out_quant_name(fp8kit_out_quant q) { return fk_name_of(&fk_out_quant_names, (int)q); }
const char *fp8kit_grouped_layout_name(fp8kit_grouped_layout l) { return fk_name_of(&fk_grouped_layout_names, (int)l); }
