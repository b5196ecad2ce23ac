/* choose.h - the planner of the sm90 dense and grouped families: every kernel variant that can run
 * a job is a candidate, a cost model (waves x tile work x a per-design
 * weight) ranks them, and tuning keys filter them. Plain host C without CUDA
 * headers, so tests check it on machines with no GPU and no CUDA compiler. */
#ifndef FK_SM90_CHOOSE_H
#define FK_SM90_CHOOSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel variant as the cost model sees it (fk_sm90_variant's shape). The
 * scaling and operand codes are fk_sm90_scaling / fk_sm90_operands values. */
typedef struct fk_sm90_cand {
    int bn;        /* tile width */
    int bm;        /* tile height: 128, or 256 (two 128-row waves) */
    int cluster;   /* CTAs per cluster along M (B multicast): 1 or 2 */
    int promo;     /* wgmma k32 steps per promotion, 0 none */
    int scaling;   /* fk_sm90_scaling */
    int ops;       /* fk_sm90_operands */
    int tma_store; /* 0 general epilogue, 1 / 2 the TMA-store kinds */
    int mc_a;      /* 1: the cluster lies along N instead (A multicast) */
} fk_sm90_cand;

/* The job and the tuning as the planner sees them. */
typedef struct fk_sm90_ask {
    int64_t m, n;
    int sms;           /* streaming multiprocessors */
    int promo;         /* the promotion the job wants (4 is always acceptable) */
    int scaling, ops;  /* as fk_sm90_cand */
    int ts_kind;       /* the TMA-store kind the job may use, 0 none */
    int width_128;     /* fused 1x128 output quantization: widths that are multiples of 128 */
    int bn, bm, cluster; /* tuning keys gemm_bn / gemm_bm / gemm_cluster, 0 free */
    int mc;            /* tuning gemm_mc: the multicast operand of clusters, 1 A, 2 B, 0 free */
    int64_t nkb;       /* K blocks of 128 (of the operands' bytes: fp16 copies count twice) */
    int sk;            /* tuning gemm_sk: -1 auto, 0 off, s parts */
} fk_sm90_ask;

/* Candidate c's grid of work items on an m x n output: *im x *in items,
 * tiles or a 2-CTA cluster's tiles (along M, or along N with A multicast).
 * The cost model and the launch (gemm/sm90/dense_host.cu) both count by it. */
void fk_sm90_item_grid(const fk_sm90_cand *c, int64_t m, int64_t n, int64_t *im, int64_t *in);

/* An ask with no tuning key and no TMA-store kind, the stream-K tail left
 * to the model (sk -1). */
fk_sm90_ask fk_sm90_ask_of(int64_t m, int64_t n, int64_t nkb, int sms, int scaling, int ops, int promo);

/* The pick and what the cost model saw. */
typedef struct fk_sm90_choice {
    int index;      /* into the table, -1 when no variant fits */
    int considered; /* candidates costed */
    int dropped;    /* tuning keys no variant satisfied, dropped: FK_SM90_DROP_* bits */
    int64_t items;  /* work items (tiles, or tile pairs of a cluster) */
    int64_t slots;  /* items running at once */
    int64_t waves;  /* ceil(items / slots) */
    int64_t sk_parts; /* the stream-K tail's parts per tile (0: whole tiles) */
    double eff_waves; /* waves with the stream-K tail counted as its share */
    double weight;  /* the design's relative time per output column */
    double cost;    /* eff_waves x (bm / 128) x bn x weight */
} fk_sm90_choice;

enum { FK_SM90_DROP_CLUSTER = 1, FK_SM90_DROP_BM = 2, FK_SM90_DROP_BN = 4, FK_SM90_DROP_PROMO = 8 };
/* (gemm_mc is dropped with gemm_cluster) */

/* Stream-K tail: with tiles = W x slots + tail work items, the tail tiles
 * are split along K into s parts each; s x tail parts take ceil(s tail /
 * slots) turns of 1 / s of a tile (a tail below one wave of parts: one turn).
 * s is the count in 2 .. min(nkb / 8, 4) of the cheapest tail
 * (fk_sm90_sk_tail_cost, ties to fewer parts) when that beats whole tiles,
 * or `want` (at most nkb, and at most four turns) when > 0; 0 when under 2
 * or want is 0. *tail gets tail. */
int64_t fk_sm90_sk_parts(int want, int64_t tiles, int64_t slots, int64_t nkb, int64_t *tail);

/* The tail's time in tiles when each of its tiles is split into s parts (1:
 * whole tiles, one more wave): each turn of parts is 1 / s of a tile plus
 * the hand-off. */
double fk_sm90_sk_tail_cost(int64_t s, int64_t tail, int64_t slots, int64_t nkb);

/* Whether a candidate can run a stream-K tail (single-CTA 128-row tiles, not MX). */
int fk_sm90_sk_able(const fk_sm90_cand *c);

/* The design weight of a candidate (relative time per output column of a
 * full device; docs/perf.md has the measurements behind each). */
double fk_sm90_weight(const fk_sm90_cand *c);

/* The cheapest candidate of tab[0 .. n) for the ask (out->index -1: none
 * fits). Returns out->index. */
int fk_sm90_choose(const fk_sm90_cand *tab, int n, const fk_sm90_ask *ask, fk_sm90_choice *out);

/* The cost of candidate c for the ask, filling out's counts (index and
 * considered untouched). */
double fk_sm90_cost(const fk_sm90_cand *c, const fk_sm90_ask *ask, fk_sm90_choice *out);

/* The dense family's variant table as candidates: fills out[0 .. max) and
 * returns the count (gemm/sm90/dense_host.cu; CUDA builds only). */
int fk_sm90_candidates(fk_sm90_cand *out, int max);

/* Appends the pick's " cost=C of=N" and the dropped keys to the plan
 * description in buf (nothing when considered is 0: not the model's pick). */
void fk_sm90_describe_pick(char *buf, size_t n, double cost, int considered, int dropped);

/* Rows of a TMA box that loads the last `rest` rows of a tensor when a box of `box` rows would reach
 * past its end: `rest` rounded up to 8 (whole 128-byte swizzle atoms), at most `box`. A box past the
 * tensor's end loads slower than a whole one (H200, 2026-11-29: 129x7168x7168 38.5 us with the last
 * tile row's 128-row box, 29.1 with a 8-row one; the small-M kernel at M 80 1.3x slower than at 128);
 * the rows past the cut keep stale bytes that reach only sums of rows past the tensor, never stored.
 * The dense kernels' last tile row of A and the small-M kernel's A rows use it. */
static inline int fk_sm90_box_rows(int64_t rest, int box)
{
    const int64_t r = (rest + 7) / 8 * 8;
    return r < box ? (int)r : box;
}

#ifdef __cplusplus
}
#endif

#endif
