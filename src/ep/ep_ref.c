/* ep_ref.c - the CPU reference of the expert-parallel layer (ep_ref.h): W
 * ranks in one process, written as plain loops from docs/ep.md. Codes and
 * scales from fp8kit_quantize on the CPU backend; the row order, the scale
 * layouts and the combine sum (fp32 in top-k order, products and sums each
 * rounded, one bf16 rounding; -ffp-contract=off keeps them apart) here. */
#include <stdlib.h>
#include <string.h>
#include "ep/ep_ref.h"
#include "format/codec.h"

/* An id as the layer sees it: -1 unless it names one of the E experts. */
static int32_t ref_id(const fp8kit_ep_config *cfg, int32_t id)
{
    return id >= 0 && id < cfg->num_experts ? id : -1;
}

/* Whether the token's ids name global expert g (at least once). */
static int ref_lists(const fp8kit_ep_config *cfg, const int32_t *ids, int32_t g)
{
    for (int64_t kk = 0; kk < cfg->top_k; kk++)
        if (ref_id(cfg, ids[kk]) == g)
            return 1;
    return 0;
}

static void *ref_calloc(size_t n) { return calloc(n ? n : 1, 1); }

/* Rank r's own tokens quantized as the layer quantizes them: (t, H) codes
 * and (t, H / 32) scale bytes (t x H / 128 f32, or e8m0). */
static fp8kit_status ref_quantize(fp8kit_ctx *cpu, const fp8kit_ep_config *cfg, const fk_ep_ref_in *in,
                                  fk_ep_ref_rank *rr)
{
    const int64_t t = in->t, H = cfg->hidden;
    rr->q = (uint8_t *)ref_calloc((size_t)(t * H));
    rr->qs = (uint8_t *)ref_calloc((size_t)(t * H / 32));
    if (!rr->q || !rr->qs)
        return FP8KIT_ERR_OUT_OF_MEMORY;
    if (t == 0)
        return FP8KIT_OK;
    fp8kit_quant_desc d = fp8kit_quant_desc_default(cfg->mx ? FP8KIT_SCHEME_MX : FP8KIT_SCHEME_BLOCK1X128);
    d.elem = cfg->fp8;
    if (cfg->mx)
        d.rounding = cfg->rounding;
    else
        d.pow2 = cfg->pow2;
    fp8kit_tensor x = fp8kit_tensor_2d((void *)in->x, in->x_dtype, t, H, H);
    fp8kit_tensor q = fp8kit_tensor_2d(rr->q, cfg->fp8, t, H, H);
    fp8kit_tensor s = cfg->mx ? fp8kit_tensor_2d(rr->qs, FP8KIT_E8M0, t, H / 32, H / 32)
                              : fp8kit_tensor_2d(rr->qs, FP8KIT_F32, t, H / 128, H / 128);
    return fp8kit_quantize(cpu, &d, &x, &q, &s, NULL);
}

fp8kit_status fk_ep_ref_dispatch(fp8kit_ctx *cpu, const fp8kit_ep_config *cfg, int world, const fk_ep_ref_in *in,
                                 fk_ep_ref_rank *res)
{
    if (world < 1)
        return FP8KIT_ERR_INVALID_ARGUMENT;
    memset(res, 0, sizeof *res * (size_t)world);
    size_t bytes = 0;
    fp8kit_status st = fp8kit_ep_buffer_size(cfg, world, &bytes);
    if (st)
        return st;
    const int64_t E = cfg->num_experts, H = cfg->hidden, k = cfg->top_k, mt = cfg->max_tokens;
    const int64_t el = E / world, m = world * mt, sb = H / 32, nbf = H / 128, mp4 = (m + 3) / 4 * 4;
    for (int r = 0; r < world; r++) {
        if (in[r].t < 0 || in[r].t > mt)
            return FP8KIT_ERR_INVALID_ARGUMENT;
        if ((st = ref_quantize(cpu, cfg, &in[r], &res[r])))
            return st;
        for (int64_t i = 0; i < in[r].t * k; i++)
            if (in[r].ids[i] < -1 || in[r].ids[i] >= E)
                res[r].status = FP8KIT_ERR_INVALID_ARGUMENT;
    }
    for (int p = 0; p < world; p++) {
        fk_ep_ref_rank *o = &res[p];
        o->el = el;
        o->m = m;
        o->scale_bytes = (size_t)(cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR ? el * nbf * mp4 * 4 : el * m * sb);
        o->x = (uint8_t *)ref_calloc((size_t)(el * m * H));
        o->scale = ref_calloc(o->scale_bytes);
        o->counts = (int32_t *)ref_calloc((size_t)el * 4);
        o->src = (int32_t *)ref_calloc((size_t)(el * m) * 4);
        if (!o->x || !o->scale || !o->counts || !o->src)
            return FP8KIT_ERR_OUT_OF_MEMORY;
        for (int64_t j = 0; j < el * m; j++)
            o->src[j] = -1;
        for (int64_t e = 0; e < el; e++) {
            const int32_t g = (int32_t)(p * el + e);
            int64_t row = 0;
            for (int r = 0; r < world; r++) /* by source rank, then by token */
                for (int64_t i = 0; i < in[r].t; i++) {
                    if (!ref_lists(cfg, in[r].ids + i * k, g))
                        continue;
                    const int64_t at = e * m + row;
                    memcpy(o->x + at * H, res[r].q + i * H, (size_t)H);
                    if (cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR)
                        for (int64_t b = 0; b < nbf; b++)
                            memcpy((uint8_t *)o->scale + ((e * nbf + b) * mp4 + row) * 4, res[r].qs + (i * nbf + b) * 4,
                                   4);
                    else
                        memcpy((uint8_t *)o->scale + at * sb, res[r].qs + i * sb, (size_t)sb);
                    o->src[at] = (int32_t)(r * mt + i);
                    row++;
                }
            o->counts[e] = (int32_t)row;
        }
    }
    return FP8KIT_OK;
}

/* The row of expert e on rank p that holds source key (rank x max_tokens +
 * token): rows are sorted by key. -1 when absent. */
static int64_t ref_row(const fk_ep_ref_rank *p, int64_t e, int32_t key)
{
    int64_t lo = 0, hi = p->counts[e] - 1;
    const int32_t *src = p->src + e * p->m;
    while (lo <= hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (src[mid] == key)
            return mid;
        if (src[mid] < key)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

fp8kit_status fk_ep_ref_combine(fp8kit_ctx *cpu, const fp8kit_ep_config *cfg, int world, const fk_ep_ref_in *in,
                                const uint16_t *const *y, fk_ep_ref_rank *res)
{
    (void)cpu;
    const int64_t H = cfg->hidden, k = cfg->top_k, mt = cfg->max_tokens, el = cfg->num_experts / world;
    float *acc = (float *)ref_calloc((size_t)H * sizeof(float));
    if (!acc)
        return FP8KIT_ERR_OUT_OF_MEMORY;
    for (int r = 0; r < world; r++) {
        free(res[r].out);
        res[r].out = (uint16_t *)ref_calloc((size_t)(in[r].t * H) * 2);
        if (!res[r].out) {
            free(acc);
            return FP8KIT_ERR_OUT_OF_MEMORY;
        }
        for (int64_t i = 0; i < in[r].t; i++) {
            for (int64_t h = 0; h < H; h++)
                acc[h] = 0.0f;
            for (int64_t kk = 0; kk < k; kk++) {
                const int32_t g = ref_id(cfg, in[r].ids[i * k + kk]);
                if (g < 0)
                    continue;
                const int64_t p = g / el, e = g % el;
                const int64_t row = ref_row(&res[p], e, (int32_t)(r * mt + i));
                if (row < 0) {
                    free(acc);
                    return FP8KIT_ERR_INTERNAL;
                }
                const float w = in[r].w[i * k + kk];
                const uint16_t *yr = y[p] + (e * res[p].m + row) * H;
                for (int64_t h = 0; h < H; h++) {
                    const float prod = w * fk_bf16_to_f32(yr[h]);
                    acc[h] = acc[h] + prod;
                }
            }
            for (int64_t h = 0; h < H; h++)
                res[r].out[i * H + h] = fk_f32_to_bf16(acc[h]);
        }
    }
    free(acc);
    return FP8KIT_OK;
}

void fk_ep_ref_free(fk_ep_ref_rank *res, int world)
{
    for (int r = 0; r < world; r++) {
        free(res[r].x);
        free(res[r].scale);
        free(res[r].counts);
        free(res[r].src);
        free(res[r].q);
        free(res[r].qs);
        free(res[r].out);
        memset(&res[r], 0, sizeof res[r]);
    }
}
