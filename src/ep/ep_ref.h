/* ep_ref.h - the CPU reference of the expert-parallel layer
 * (include/fp8kit_ep.h): W ranks simulated in one process. Given every
 * rank's tokens, top-k ids and weights it gives every rank's expected
 * dispatch result (the masked recv layout: codes, scales, counts, and the
 * source of each row) and, given every rank's expert outputs y, every rank's
 * expected combine output. The codes and scales come from fp8kit_quantize on
 * a CPU context; the layout and the combine sum are written out here
 * directly from docs/ep.md, independently of the GPU code. The oracle of
 * tests/ep_multi_gpu.c; tests/test_ep_ref.c checks it. Built as the static
 * library fp8kit_ep_ref, never into libfp8kit. Host memory throughout. */
#ifndef FK_EP_REF_H
#define FK_EP_REF_H

#include <stdint.h>
#include "fp8kit_ep.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One rank's dispatch inputs. */
typedef struct fk_ep_ref_in {
    const void *x;          /* (t, H) row-major */
    fp8kit_dtype x_dtype;   /* f32, f16 or bf16 */
    const int32_t *ids;     /* (t, top_k) global expert ids, -1 = none; others outside [-1, E) are dropped */
    const float *w;         /* (t, top_k) */
    int64_t t;              /* 0 .. max_tokens */
} fk_ep_ref_in;

/* One rank's expected results (allocated by fk_ep_ref_dispatch; every
 * byte past a count is 0). */
typedef struct fk_ep_ref_rank {
    int64_t el, m;          /* local experts, rows per expert (W x max_tokens) */
    uint8_t *x;             /* (el, m, H) codes */
    void *scale;            /* scale_bytes bytes in the config's recv layout (fp8kit_ep_recv.scale) */
    size_t scale_bytes;
    int32_t *counts;        /* el */
    int32_t *src;           /* (el, m): source rank x max_tokens + token index of each row; -1 past the count */
    int32_t status;         /* 0, or FP8KIT_ERR_INVALID_ARGUMENT when one of this rank's ids was dropped */
    uint8_t *q;             /* (t, H) this rank's own quantized tokens and (t, H / 32) scale bytes, as sent */
    uint8_t *qs;
    uint16_t *out;          /* (t, H) bf16: set by fk_ep_ref_combine */
} fk_ep_ref_rank;

/* Dispatch of world ranks' inputs in[0 .. world) (cfg as for
 * fp8kit_ep_create, checked by fp8kit_ep_buffer_size's rules); fills
 * res[0 .. world). cpu: a CPU context (its messages report failures).
 * Free with fk_ep_ref_free, also after a failure. */
fp8kit_status fk_ep_ref_dispatch(fp8kit_ctx *cpu, const fp8kit_ep_config *cfg, int world, const fk_ep_ref_in *in,
                                 fk_ep_ref_rank *res);

/* Combine: y[p] is rank p's (el, m, H) bf16 expert outputs (contiguous;
 * rows past the counts never read); sets res[r].out for every rank. */
fp8kit_status fk_ep_ref_combine(fp8kit_ctx *cpu, const fp8kit_ep_config *cfg, int world, const fk_ep_ref_in *in,
                                const uint16_t *const *y, fk_ep_ref_rank *res);

void fk_ep_ref_free(fk_ep_ref_rank *res, int world);

#ifdef __cplusplus
}
#endif
#endif
