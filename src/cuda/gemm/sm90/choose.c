/* choose.c - the sm90 dense and grouped families' candidates and cost model (choose.h). */
#include "cuda/gemm/sm90/choose.h"

#include <stdio.h>
#include <string.h>

#include "cuda/gemm/design.h"

static int64_t fk_cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

/* Relative time per output column of a tile on a full device, by design
 * (docs/perf.md, "How the planner chooses", lists the runs behind each):
 * - plain fp8: 128-wide tiles do about 15% less per column than 192 or 256
 *   (256 a little more than 192); 64 costs 30% more per column than 128
 *   (each of its columns loads twice the bytes of A: the forced-width sweep
 *   at M 256-1024 in docs/perf.md);
 * - the f16 operands (precise fp32 output): 128 runs the pipelined consumer
 *   and is only ~3% behind 192;
 * - MX: 192 ahead of 128 (fitted so that the three shapes measured keep
 *   192);
 * - block scales: 128 (the pipelined consumer); wider tiles take the plain
 *   consumer and ran slower at every shape measured;
 * - 256-row tiles and 2-CTA clusters each a little slower than the
 *   single 128-row tile at the shapes measured. */
double fk_sm90_weight(const fk_sm90_cand *c)
{
    double w;
    if (c->scaling == FK_SM90_SCALE_PLAIN && c->ops == FK_SM90_F16)
        w = c->bn >= 192 ? 1.0 : 1.03;
    else if (c->scaling == FK_SM90_SCALE_PLAIN)
        w = c->bn >= 256 ? 0.98 : c->bn >= 192 ? 1.0 : c->bn >= 128 ? 1.15 : 1.5;
    else if (c->scaling == FK_SM90_SCALE_MX)
        w = c->bn >= 192 ? 1.0 : 1.10;
    else
        w = c->bn > 128 ? 1.15 : 1.0;
    if (c->bm > 128)
        w *= 1.05;
    if (c->cluster > 1)
        w *= 1.05;
    return w;
}

fk_sm90_ask fk_sm90_ask_of(int64_t m, int64_t n, int64_t nkb, int sms, int scaling, int ops, int promo)
{
    fk_sm90_ask a;
    memset(&a, 0, sizeof a);
    a.m = m;
    a.n = n;
    a.nkb = nkb;
    a.sms = sms;
    a.scaling = scaling;
    a.ops = ops;
    a.promo = promo;
    a.sk = -1;
    return a;
}

/* The hand-off of a split tail tile (partial tiles written and reduced through
 * L2, the parts' uneven finish) in tiles, paid once per turn of parts:
 * FK_SK_OVERHEAD_KB K blocks' time per part, at most FK_SK_OVERHEAD of a
 * tile. Fitted to the stream-K rows of the dense sweep, each timed beside the
 * same plan on whole tiles, and to its forced-width rows (docs/perf.md): one
 * turn costs 0.35-0.5 of a tile at 40-64 K blocks with 3-4 parts, 0.2-0.25
 * with 2, about 0.1-0.2 at 128-224 K blocks; two or three turns of short-K
 * parts cost more than a wave of whole tiles. */
#define FK_SK_OVERHEAD 0.45
#define FK_SK_OVERHEAD_KB 5.0
#define FK_SK_MAX 4 /* parts per tile the planner tries */

double fk_sm90_sk_tail_cost(int64_t s, int64_t tail, int64_t slots, int64_t nkb)
{
    if (s < 2 || tail <= 0 || slots <= 0 || nkb <= 0)
        return tail > 0 ? 1.0 : 0.0;
    const double kb = FK_SK_OVERHEAD_KB * (double)s / (double)nkb, over = kb < FK_SK_OVERHEAD ? kb : FK_SK_OVERHEAD;
    const int64_t turns = fk_cdiv(s * tail, slots);
    return (double)turns * (1.0 / (double)s + over);
}

int64_t fk_sm90_sk_parts(int want, int64_t tiles, int64_t slots, int64_t nkb, int64_t *tail)
{
    *tail = tiles > 0 && slots > 0 ? tiles % slots : 0;
    if (want == 0 || *tail == 0)
        return 0;
    if (want > 0) { /* (parts past one wave run in turns: every CTA does its writer parts first) */
        int64_t s = want < nkb ? want : nkb;
        if (s * *tail > 4 * slots) /* at most four turns (the workspace holds s - 1 partial tiles per tail tile) */
            s = 4 * slots / *tail;
        return s < 2 ? 0 : s;
    }
    int64_t best = 0;
    double best_cost = 1.0; /* whole tiles: one more wave */
    const int64_t smax = nkb / 8 < FK_SK_MAX ? nkb / 8 : FK_SK_MAX;
    for (int64_t s = 2; s <= smax; s++) {
        const double c = fk_sm90_sk_tail_cost(s, *tail, slots, nkb);
        if (c < best_cost - 1e-9) {
            best = s;
            best_cost = c;
        }
    }
    return best;
}

int fk_sm90_sk_able(const fk_sm90_cand *c)
{
    return c->cluster <= 1 && c->scaling != FK_SM90_SCALE_MX && (c->bm <= 128);
}

void fk_sm90_item_grid(const fk_sm90_cand *c, int64_t m, int64_t n, int64_t *im, int64_t *in)
{
    const int cl = c->cluster > 1 ? c->cluster : 1;
    *im = fk_cdiv(m, c->bm > 0 ? c->bm : 128);
    *in = fk_cdiv(n, c->bn);
    if (c->mc_a)
        *in = fk_cdiv(*in, cl);
    else
        *im = fk_cdiv(*im, cl);
}

double fk_sm90_cost(const fk_sm90_cand *c, const fk_sm90_ask *a, fk_sm90_choice *out)
{
    const int cl = c->cluster > 1 ? c->cluster : 1;
    const int bm = c->bm > 0 ? c->bm : 128;
    /* a cluster's pair takes two SMs (an estimate: the kernel's own occupancy
     * query gives the plan's real count) */
    int64_t im, in;
    fk_sm90_item_grid(c, a->m, a->n, &im, &in);
    const int64_t items = im * in;
    int64_t slots = a->sms / cl;
    if (slots < 1)
        slots = 1;
    const int64_t waves = fk_cdiv(items, slots);
    int64_t tail = 0;
    const int64_t sk = fk_sm90_sk_able(c) ? fk_sm90_sk_parts(a->sk, items, slots, a->nkb, &tail) : 0;
    const double eff = sk ? (double)(items / slots) + fk_sm90_sk_tail_cost(sk, tail, slots, a->nkb) : (double)waves;
    const double w = fk_sm90_weight(c);
    const double cost = eff * (bm / 128.0) * c->bn * w;
    if (out) {
        out->items = items;
        out->slots = slots;
        out->waves = waves;
        out->sk_parts = sk;
        out->eff_waves = eff;
        out->weight = w;
        out->cost = cost;
    }
    return cost;
}

/* Whether candidate c may run the ask with promotion `promo`, the tuning
 * keys whose FK_SM90_DROP_* bits are set in `drop` ignored. */
static int fk_fits(const fk_sm90_cand *c, const fk_sm90_ask *a, int drop, int promo)
{
    if (c->scaling != a->scaling || c->ops != a->ops || c->promo != promo)
        return 0;
    if (c->tma_store && c->tma_store != a->ts_kind)
        return 0;
    if (a->width_128 && c->bn % 128)
        return 0;
    const int bn_free = !a->bn || (drop & FK_SM90_DROP_BN);
    if (!bn_free && c->bn != a->bn)
        return 0;
    if (a->bm && !(drop & FK_SM90_DROP_BM) && (c->bm > 0 ? c->bm : 128) != a->bm)
        return 0;
    if (a->cluster && !(drop & FK_SM90_DROP_CLUSTER) && (c->cluster > 1 ? c->cluster : 1) != a->cluster)
        return 0;
    if (a->mc && !(drop & FK_SM90_DROP_CLUSTER) && (c->cluster <= 1 || (c->mc_a ? 1 : 2) != a->mc))
        return 0;
    /* tiles narrower than 128 only where the 128-wide ones leave SMs idle
     * (they spread the work over more SMs) and N spans more than one; on a
     * full device they halve B's reuse (unless tuning asks for them) */
    if (bn_free && c->bn < 128) {
        const int64_t tiles128 = fk_cdiv(a->m, 128) * fk_cdiv(a->n, 128);
        if (tiles128 >= a->sms || a->n <= 64)
            return 0;
    }
    return 1;
}

/* Whether x beats the incumbent y at equal cost: on a device the 128-wide
 * tiles do not fill, narrower (more SMs busy); else the design that does
 * more per column, then wider; then the TMA-store epilogue, single 128-row
 * tiles, no cluster. */
static int fk_better_tie(const fk_sm90_cand *x, const fk_sm90_cand *y, int partial)
{
    if (partial && x->bn != y->bn)
        return x->bn < y->bn;
    const double wx = fk_sm90_weight(x), wy = fk_sm90_weight(y);
    if (!partial && wx != wy)
        return wx < wy;
    if (x->bn != y->bn)
        return x->bn > y->bn;
    if (x->tma_store != y->tma_store)
        return x->tma_store > y->tma_store;
    if (x->bm != y->bm)
        return x->bm < y->bm;
    if (x->cluster != y->cluster)
        return x->cluster < y->cluster;
    return x->mc_a < y->mc_a;
}

int fk_sm90_choose(const fk_sm90_cand *tab, int n, const fk_sm90_ask *a, fk_sm90_choice *out)
{
    fk_sm90_choice best = {-1, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0};
    const int partial = fk_cdiv(a->m, 128) * fk_cdiv(a->n, 128) < a->sms;
    /* the tuning keys no variant satisfies are dropped in this order, then
     * the promotion falls back to every 128 of K (always as precise) */
    static const int steps[5] = {0, FK_SM90_DROP_CLUSTER, FK_SM90_DROP_BM, FK_SM90_DROP_BN, FK_SM90_DROP_PROMO};
    int drop = 0;
    for (int s = 0; s < 5 && best.index < 0; s++) {
        drop |= steps[s];
        const int promo = (drop & FK_SM90_DROP_PROMO) ? 4 : a->promo;
        if (s > 0 && s < 4) { /* a key that was not set has nothing to drop */
            const int key = steps[s] == FK_SM90_DROP_CLUSTER ? a->cluster | a->mc
                            : steps[s] == FK_SM90_DROP_BM  ? a->bm
                                                           : a->bn;
            if (!key)
                continue;
        }
        if (s == 4 && a->promo == 4)
            break;
        for (int i = 0; i < n; i++) {
            if (!fk_fits(&tab[i], a, drop, promo))
                continue;
            fk_sm90_choice c;
            fk_sm90_cost(&tab[i], a, &c);
            best.considered++;
            if (best.index < 0 || c.cost < best.cost ||
                (c.cost == best.cost && fk_better_tie(&tab[i], &tab[best.index], partial))) {
                c.index = i;
                c.considered = best.considered;
                best = c;
            }
        }
        best.dropped = drop & ((a->cluster || a->mc ? FK_SM90_DROP_CLUSTER : 0) | (a->bm ? FK_SM90_DROP_BM : 0) |
                               (a->bn ? FK_SM90_DROP_BN : 0) | (s == 4 ? FK_SM90_DROP_PROMO : 0));
    }
    if (out)
        *out = best;
    return best.index;
}

void fk_sm90_describe_pick(char *buf, size_t n, double cost, int considered, int dropped)
{
    if (considered <= 0)
        return;
    const size_t len = strlen(buf);
    snprintf(buf + len, n > len ? n - len : 0, " cost=%.1f of=%d%s%s%s%s", cost, considered,
             dropped & FK_SM90_DROP_CLUSTER ? " dropped=gemm_cluster" : "",
             dropped & FK_SM90_DROP_BM ? " dropped=gemm_bm" : "", dropped & FK_SM90_DROP_BN ? " dropped=gemm_bn" : "",
             dropped & FK_SM90_DROP_PROMO ? " dropped=gemm_promo" : "");
}
