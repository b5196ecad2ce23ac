/* ep_test_util.h - inputs for the expert-parallel tests (tests/test_ep_ref.c
 * on the CPU, tests/ep_multi_gpu.c on the GPUs): every rank's tokens (bf16),
 * top-k ids and weights from one seed, so that each process of a multi-GPU
 * run makes the same inputs for all ranks, in several routing patterns
 * (uniform, skewed towards a few experts, tokens with fewer than top_k
 * experts, repeated ids, ids outside [-1, E), experts that get no token,
 * every token to one rank). Header-only; needs test_util.h first. */
#ifndef FK_EP_TEST_UTIL_H
#define FK_EP_TEST_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include "ep/ep_ref.h"
#include "format/codec.h"

enum {
    EP_ROUTE_UNIFORM = 0, /* top_k distinct experts */
    EP_ROUTE_SKEWED,      /* distinct, most of them among the lowest ids: uneven counts */
    EP_ROUTE_SPARSE,      /* distinct, each entry -1 with probability 0.4 (some tokens have none) */
    EP_ROUTE_DUPS,        /* drawn with repetition, some -1 */
    EP_ROUTE_INVALID,     /* uniform, ~6% of the entries outside [-1, E) */
    EP_ROUTE_HOLES,       /* only experts g with g % 3 == 0: the others get no token */
    EP_ROUTE_ONE_RANK,    /* only rank 0's experts */
    EP_ROUTE_COUNT
};

static const char *const ep_route_names[EP_ROUTE_COUNT] = {"uniform", "skewed", "sparse", "dups",
                                                           "invalid", "holes", "one_rank"};

/* Every rank's inputs; in[r] points into the arrays. */
typedef struct ep_t_inputs {
    int world;
    uint16_t **x;   /* (t[r], H) bf16 */
    int32_t **ids;  /* (t[r], top_k) */
    float **w;      /* (t[r], top_k) */
    fk_ep_ref_in *in;
} ep_t_inputs;

static int ep_t_has(const int32_t *ids, int n, int32_t g)
{
    for (int j = 0; j < n; j++)
        if (ids[j] == g)
            return 1;
    return 0;
}

/* A distinct expert below `limit` (step apart: ids 0, step, 2 step, ...)
 * not among ids[0 .. n); -1 when all are taken. */
static int32_t ep_t_pick(fk_rng *rng, const int32_t *ids, int n, int64_t limit, int64_t step, int skew)
{
    const int64_t choices = (limit + step - 1) / step;
    for (int tries = 0; tries < 64; tries++) {
        double u = fk_rng_unif(rng);
        if (skew)
            u = u * u * u;
        const int32_t g = (int32_t)((int64_t)(u * (double)choices) * step);
        if (!ep_t_has(ids, n, g))
            return g;
    }
    for (int64_t g = 0; g < limit; g += step) /* dense routing: take the first free one */
        if (!ep_t_has(ids, n, (int32_t)g))
            return (int32_t)g;
    return -1;
}

static void ep_t_route(fk_rng *rng, int route, const fp8kit_ep_config *cfg, int world, int32_t *ids)
{
    const int k = (int)cfg->top_k;
    const int64_t E = cfg->num_experts, el = E / world;
    static const int32_t bad[5] = {INT32_MIN, -2, -7, INT32_MAX, 0}; /* 0 replaced by E below */
    for (int j = 0; j < k; j++) {
        int32_t g;
        switch (route) {
        case EP_ROUTE_SKEWED: g = ep_t_pick(rng, ids, j, E, 1, 1); break;
        case EP_ROUTE_DUPS: g = fk_rng_unif(rng) < 0.2 ? -1 : (int32_t)(fk_rng_u32(rng) % (uint32_t)E); break;
        case EP_ROUTE_HOLES: g = ep_t_pick(rng, ids, j, E, 3, 0); break;
        case EP_ROUTE_ONE_RANK: g = ep_t_pick(rng, ids, j, el, 1, 0); break;
        default: g = ep_t_pick(rng, ids, j, E, 1, 0); break;
        }
        if (route == EP_ROUTE_SPARSE && fk_rng_unif(rng) < 0.4)
            g = -1;
        if (route == EP_ROUTE_INVALID && fk_rng_unif(rng) < 0.06) {
            g = bad[fk_rng_u32(rng) % 5];
            if (g == 0)
                g = (int32_t)E + (int32_t)(fk_rng_u32(rng) % 3);
        }
        ids[j] = g;
    }
}

/* Makes every rank's inputs: t[r] tokens on rank r, the given routing. The
 * tokens are normal values times a per-token magnitude (2^-20 .. 2^20), with
 * an occasional outlier, so scales differ between tokens and blocks. */
static int ep_t_make(ep_t_inputs *c, const fp8kit_ep_config *cfg, int world, const int64_t *t, int route,
                     fk_rng *rng)
{
    const int64_t H = cfg->hidden, k = cfg->top_k;
    memset(c, 0, sizeof *c);
    c->world = world;
    c->x = (uint16_t **)calloc((size_t)world, sizeof *c->x);
    c->ids = (int32_t **)calloc((size_t)world, sizeof *c->ids);
    c->w = (float **)calloc((size_t)world, sizeof *c->w);
    c->in = (fk_ep_ref_in *)calloc((size_t)world, sizeof *c->in);
    if (!c->x || !c->ids || !c->w || !c->in)
        return 1;
    for (int r = 0; r < world; r++) {
        c->x[r] = (uint16_t *)malloc((size_t)(t[r] * H) * 2 + 2);
        c->ids[r] = (int32_t *)malloc((size_t)(t[r] * k) * 4 + 4);
        c->w[r] = (float *)malloc((size_t)(t[r] * k) * 4 + 4);
        if (!c->x[r] || !c->ids[r] || !c->w[r])
            return 1;
        for (int64_t i = 0; i < t[r]; i++) {
            const float mag = ldexpf(1.0f, (int)(fk_rng_u32(rng) % 41) - 20);
            for (int64_t h = 0; h < H; h++) {
                float v = (float)fk_rng_normal(rng) * mag;
                if (fk_rng_u32(rng) % 509 == 0)
                    v *= 300.0f;
                c->x[r][i * H + h] = fk_f32_to_bf16(v);
            }
            ep_t_route(rng, route, cfg, world, c->ids[r] + i * k);
            for (int64_t j = 0; j < k; j++)
                c->w[r][i * k + j] = (float)(fk_rng_unif(rng) * 2.0 - 0.25);
        }
        c->in[r].x = c->x[r];
        c->in[r].x_dtype = FP8KIT_BF16;
        c->in[r].ids = c->ids[r];
        c->in[r].w = c->w[r];
        c->in[r].t = t[r];
    }
    return 0;
}

static void ep_t_free(ep_t_inputs *c)
{
    for (int r = 0; r < c->world; r++) {
        if (c->x)
            free(c->x[r]);
        if (c->ids)
            free(c->ids[r]);
        if (c->w)
            free(c->w[r]);
    }
    free(c->x);
    free(c->ids);
    free(c->w);
    free(c->in);
    memset(c, 0, sizeof *c);
}

/* Every rank's expert outputs y[p] (el, m, H) bf16: random values on the
 * rows a dispatch filled (res[p].counts), NaN on the others (a combine that
 * read one would show it). */
static uint16_t **ep_t_make_y(fk_rng *rng, const fp8kit_ep_config *cfg, int world, const fk_ep_ref_rank *res)
{
    const int64_t H = cfg->hidden;
    uint16_t **y = (uint16_t **)calloc((size_t)world, sizeof *y);
    if (!y)
        return NULL;
    for (int p = 0; p < world; p++) {
        const int64_t el = res[p].el, m = res[p].m;
        y[p] = (uint16_t *)malloc((size_t)(el * m * H) * 2);
        if (!y[p])
            return NULL;
        for (int64_t e = 0; e < el; e++)
            for (int64_t row = 0; row < m; row++)
                for (int64_t h = 0; h < H; h++)
                    y[p][(e * m + row) * H + h] =
                        row < res[p].counts[e] ? fk_f32_to_bf16((float)fk_rng_normal(rng)) : (uint16_t)0x7FC0;
    }
    return y;
}

static void ep_t_free_y(uint16_t **y, int world)
{
    if (!y)
        return;
    for (int p = 0; p < world; p++)
        free(y[p]);
    free(y);
}

#endif
