/* small_choose.h - the small-M (decode) family's launch-shape planner: the
 * cost model that picks band height, split, multicast and column split, and
 * the rules by which the family takes a call or leaves it to the general
 * kernel. Plain host C without CUDA headers (as choose.h), so tests check it
 * on machines with no GPU and no CUDA compiler; gemm/sm90/small.cu plans and
 * launches with it. */
#ifndef FK_SM90_SMALL_CHOOSE_H
#define FK_SM90_SMALL_CHOOSE_H

#include <stdint.h>
#include "format/fk_hd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 64-row groups of B (warpgroups of the MMA) in a band of r rows: 1 (r <= 64) or 2 */
FK_HD int fk_small_bw(int r) { return r > 64 ? 2 : 1; }

/* One candidate launch shape: rows of B per CTA (band), CTAs splitting K,
 * CTAs sharing A by multicast, column split (two warpgroups side by side). */
typedef struct fk_small_shape {
    int r, split, mc, cs;
} fk_small_shape;

/* Index into a slots[4] table (clusters of 2^i CTAs that fit at once) of
 * launch shape c's clusters: split x mc CTAs each. */
int fk_small_slot_index(fk_small_shape c);

/* Waves of a launch shape: its clusters over the clusters that fit at once. */
int64_t fk_small_waves(int64_t n, fk_small_shape c, int64_t slots);

/* The model's cost of launch shape c for N x K (kb blocks of 128) with M
 * rows of A in tiles of nt columns; slots: clusters of the shape's size that
 * fit at once, sms: the SMs of this part of the grid (small_choose.c). */
double fk_small_cost(int64_t n, int64_t m, int64_t kb, int nt, fk_small_shape c, int64_t slots, int64_t sms);

/* The cheapest launch shape (slots[i]: clusters of 2^i CTAs that fit at
 * once; fr / fs / fm / fc: forced band, split, multicast, column split, 0
 * free, fc -1 off); returns 0 when nothing fits. */
int fk_small_pick(int64_t n, int64_t m, int64_t kb, int nt, const int64_t slots[4], int fr, int fs, int fm, int fc,
                  fk_small_shape *out);

/* Whether the family should take an M x N x K call it can run, by shape
 * (general_override: a tuning of the general kernel, gemm_promo or gemm_bn,
 * is set). */
int fk_small_preferred_shape(int64_t m, int64_t n, int64_t k, int sm_count, int general_override);

/* Whether launch shape c (picked with these slots) needs more waves than
 * the family takes on its own for M rows: one, two for M <= 64. */
int fk_small_too_many_waves(int64_t m, int64_t n, fk_small_shape c, const int64_t slots[4]);

#ifdef __cplusplus
}
#endif
#endif
