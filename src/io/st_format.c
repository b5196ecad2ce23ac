/* st_format.c - the checkpoint formats of the converter as rows of one table
 * (docs/spec.md section 5): for each, the scale tensor's name, its dtypes and
 * shapes, which schemes it writes (and is the default for), what dequantize
 * reads from it, the loader limits quantize warns about, and the builder of
 * config.json's quantization_config. st_plan.c reads rows; it never branches
 * on which format it is. */
#include <string.h>

#include "io/st_conv.h"

#define SCHEME_BIT(s) (1u << (unsigned)(s))
#define ALL_SCHEMES                                                                                            \
    (SCHEME_BIT(ST_SCHEME_FP8_TENSOR) | SCHEME_BIT(ST_SCHEME_FP8_ROW) | SCHEME_BIT(ST_SCHEME_FP8_BLOCK) |     \
     SCHEME_BIT(ST_SCHEME_MXFP8))

/* ------------------------------------------------------------------ fp8 */
/* transformers FineGrainedFP8 (quant_method "fp8"), also read by vLLM's fp8
 * loader for 128x128 blocks. transformers reads modules_to_not_convert, vLLM
 * ignored_layers. */
static json_t *fp8_quant_config(st_scheme s, int pow2, json_t *ignore)
{
    json_t *q = json_object();
    json_object_set_new(q, "quant_method", json_string("fp8"));
    json_object_set_new(q, "fmt", json_string("e4m3"));
    json_object_set_new(q, "activation_scheme", json_string("dynamic"));
    if (s == ST_SCHEME_FP8_BLOCK)
        json_object_set_new(q, "weight_block_size", json_pack("[ii]", 128, 128));
    else if (s == ST_SCHEME_MXFP8)
        json_object_set_new(q, "weight_block_size", json_pack("[ii]", 1, 32));
    else
        json_object_set_new(q, "weight_block_size", json_null());
    if ((s == ST_SCHEME_FP8_BLOCK && pow2) || s == ST_SCHEME_MXFP8)
        json_object_set_new(q, "scale_fmt", json_string("ue8m0"));
    json_object_set_new(q, "modules_to_not_convert", json_deep_copy(ignore));
    json_object_set_new(q, "ignored_layers", ignore);
    return q;
}

/* --------------------------------------------------- compressed-tensors */
/* compressed-tensors' QuantizationArgs for float8 with the given strategy. */
static json_t *ct_args(const char *strategy, int dynamic, int group, int block, int u8)
{
    json_t *a = json_object();
    json_object_set_new(a, "num_bits", json_integer(8));
    json_object_set_new(a, "type", json_string("float"));
    json_object_set_new(a, "symmetric", json_true());
    json_object_set_new(a, "group_size", group ? json_integer(group) : json_null());
    json_object_set_new(a, "strategy", json_string(strategy));
    json_object_set_new(a, "dynamic", json_boolean(dynamic));
    json_object_set_new(a, "actorder", json_null());
    json_object_set_new(a, "block_structure", block ? json_pack("[ii]", block, block) : json_null());
    json_object_set_new(a, "observer", json_null());
    json_object_set_new(a, "observer_kwargs", json_object());
    json_object_set_new(a, "scale_dtype", u8 ? json_string("torch.uint8") : json_null());
    json_object_set_new(a, "zp_dtype", u8 ? json_string("torch.uint8") : json_null());
    return a;
}

/* One config group targeting Linear, as llm-compressor's presets write it
 * (FP8_DYNAMIC for tensor / row, FP8_BLOCK, MXFP8). */
static json_t *ct_quant_config(st_scheme s, int pow2, json_t *ignore)
{
    (void)pow2;
    const char *fmt = s == ST_SCHEME_MXFP8 ? "mxfp8-quantized" : "float-quantized";
    json_t *w, *a;
    switch (s) {
    case ST_SCHEME_FP8_TENSOR: w = ct_args("tensor", 0, 0, 0, 0), a = ct_args("token", 1, 0, 0, 0); break;
    case ST_SCHEME_FP8_ROW: w = ct_args("channel", 0, 0, 0, 0), a = ct_args("token", 1, 0, 0, 0); break;
    case ST_SCHEME_FP8_BLOCK: w = ct_args("block", 0, 0, 128, 0), a = ct_args("group", 1, 128, 0, 0); break;
    default: w = ct_args("group", 0, 32, 0, 1), a = ct_args("group", 1, 32, 0, 1); break;
    }
    json_t *g = json_object(), *groups = json_object(), *q = json_object();
    json_object_set_new(g, "targets", json_pack("[s]", "Linear"));
    json_object_set_new(g, "weights", w);
    json_object_set_new(g, "input_activations", a);
    json_object_set_new(g, "output_activations", json_null());
    json_object_set_new(g, "format", json_string(fmt));
    json_object_set_new(groups, "group_0", g);
    json_object_set_new(q, "quant_method", json_string("compressed-tensors"));
    json_object_set_new(q, "format", json_string(fmt));
    json_object_set_new(q, "quantization_status", json_string("compressed"));
    json_object_set_new(q, "config_groups", groups);
    json_object_set_new(q, "ignore", ignore);
    json_object_set_new(q, "kv_cache_scheme", json_null());
    json_object_set_new(q, "global_compression_ratio", json_null());
    json_object_set_new(q, "sparsity_config", json_object());
    json_object_set_new(q, "transform_config", json_object());
    return q;
}

/* ---------------------------------------------------------------- table */
/* st_format indexes the rows by the public fp8kit_ckpt_format value (the
 * converter's callers pass it through unchanged) */
_Static_assert((int)ST_FORMAT_DEFAULT == (int)FP8KIT_CKPT_FORMAT_DEFAULT &&
                   (int)ST_FORMAT_FP8 == (int)FP8KIT_CKPT_FORMAT_FP8 &&
                   (int)ST_FORMAT_COMPRESSED_TENSORS == (int)FP8KIT_CKPT_FORMAT_COMPRESSED_TENSORS,
               "st_format and fp8kit_ckpt_format disagree");

static const st_format_row st_formats[ST_FORMAT_COUNT] = {
    [ST_FORMAT_FP8] = {
        .name = "fp8",
        .scale_suffix = "_scale_inv",
        .scale_key = "weight_scale_inv",
        .schemes = ALL_SCHEMES & ~SCHEME_BIT(ST_SCHEME_FP8_ROW), /* no row layout in FineGrainedFP8 */
        .default_for = SCHEME_BIT(ST_SCHEME_FP8_BLOCK),
        .fp32_scale = ST_F32,
        .mx_scale = ST_F8_E8M0,
        .tensor_rank = 0,        /* FP8Linear: 0-D */
        .expert_tensor_rank = 2, /* FP8Experts stacks them: [1, 1] */
        .block_whole_n = 1,
        .reads_1x128 = 0,
        .block_first = 1,
        .expert_unloadable = 0,
        .mx_bf16_only = 0,
        .quant_config = fp8_quant_config,
    },
    [ST_FORMAT_COMPRESSED_TENSORS] = {
        .name = "compressed-tensors",
        .scale_suffix = "_scale",
        .scale_key = "weight_scale",
        .schemes = ALL_SCHEMES,
        .default_for = ALL_SCHEMES & ~SCHEME_BIT(ST_SCHEME_FP8_BLOCK),
        .fp32_scale = ST_F32,
        .mx_scale = ST_U8, /* the same e8m0 bytes */
        .tensor_rank = 1,
        .expert_tensor_rank = 1,
        .block_whole_n = 0,
        .reads_1x128 = 1,
        .block_first = 0,
        /* transformers' fused-expert dequantization multiplies weight by scale elementwise */
        .expert_unloadable = SCHEME_BIT(ST_SCHEME_FP8_BLOCK) | SCHEME_BIT(ST_SCHEME_MXFP8),
        .mx_bf16_only = 1,
        .quant_config = ct_quant_config,
    },
};

const st_format_row *st_format_row_of(st_format f)
{
    return f > ST_FORMAT_DEFAULT && f < ST_FORMAT_COUNT ? &st_formats[f] : NULL;
}

const char *st_format_name(st_format f)
{
    const st_format_row *r = st_format_row_of(f);
    return r ? r->name : "default";
}

st_format st_format_default(st_scheme s)
{
    for (int f = ST_FORMAT_DEFAULT + 1; f < ST_FORMAT_COUNT; f++)
        if (st_formats[f].default_for & SCHEME_BIT(s))
            return (st_format)f;
    return ST_FORMAT_DEFAULT;
}

int st_format_supports(st_format f, st_scheme s)
{
    const st_format_row *r = st_format_row_of(f);
    return r && (r->schemes & SCHEME_BIT(s));
}

st_format st_format_other(st_scheme s, st_format not)
{
    for (int f = ST_FORMAT_DEFAULT + 1; f < ST_FORMAT_COUNT; f++)
        if (f != (int)not && st_format_supports((st_format)f, s))
            return (st_format)f;
    return ST_FORMAT_DEFAULT;
}
