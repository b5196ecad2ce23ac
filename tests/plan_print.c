/* plan_print.c - the dense sm90 planner's pick for shapes on a device of any SM count, without a
 * GPU: the library's own variant table and cost model (src/cuda/gemm/sm90/choose.c), as a call
 * without tuning keys would see them. For each shape: the pick (tile, cluster, store kind, stream-K
 * parts) and its cost, and with --all every fitting candidate's cost, cheapest first; for M <= 128
 * with tensor or row scales also the small-M family's launch shape and whether it takes the call
 * (src/cuda/gemm/sm90/small_choose.c; clusters of 2^i CTAs assumed to fit SMs / 2^i at once, where
 * the library asks the device). The planner of a real call also weighs what only the call knows
 * (TMA-store eligibility, a fused 1x128 output, tuning keys): fp8kit_gemm_describe on a GPU prints
 * that plan.
 * Usage: plan_print [--sms N] [--mode tensor|tensor_fast|row|block|staged|mx|f16] [--ts 0|1|2]
 *                   [--all] MxNxK ...
 *   --sms (default 132, an H100 / H200 SXM), --mode (default tensor; row scales plan as tensor),
 *   --ts: the TMA-store kind the call may use (default 1: bf16 output, no bias or activation;
 *   2: with them; 0: none).
 * Build: with the tests, CUDA builds only (the variant table is the CUDA backend's); it reads the
 * library's internals, so it lives beside the tests, not in bench/ (which uses the public API). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FP8KIT_HAVE_CUDA
#include "cuda/gemm/design.h"
#include "cuda/gemm/sm90/choose.h"
#include "cuda/gemm/sm90/small_choose.h"

typedef struct mode_def {
    const char *name;
    int scaling, ops, promo;
} mode_def;

static const mode_def k_modes[] = {
    {"tensor", FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, 4}, {"tensor_fast", FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, 0},
    {"row", FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, 4},    {"block", FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, 4},
    {"staged", FK_SM90_SCALE_STAGED, FK_SM90_E4M3_E4M3, 4}, {"mx", FK_SM90_SCALE_MX, FK_SM90_E4M3_E4M3, 1},
    {"f16", FK_SM90_SCALE_PLAIN, FK_SM90_F16, 4},
};

static void print_cand(const char *lead, const fk_sm90_cand *c, const fk_sm90_choice *ch)
{
    printf("%s bn=%d bm=%d promo=%d cluster=%d%s tma_store=%d items=%lld waves=%lld sk_parts=%lld eff_waves=%.3f "
           "weight=%.3f cost=%.1f%s\n",
           lead, c->bn, c->bm, c->promo, c->cluster, c->cluster > 1 ? (c->mc_a ? " mc=a" : " mc=b") : "",
           c->tma_store, (long long)ch->items, (long long)ch->waves, (long long)ch->sk_parts, ch->eff_waves,
           ch->weight, ch->cost, (ch->dropped & FK_SM90_DROP_PROMO) ? " (promotion every 128 of K instead)" : "");
}

static int by_cost(const void *a, const void *b)
{
    const double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return x < y ? -1 : x > y;
}

/* The small-M family's launch shape for an M <= 128 call and whether it takes the call. */
static void print_small(long long m, long long n, long long k, int sms)
{
    const int64_t slots[4] = {sms, sms / 2, sms / 4, sms / 8};
    const int nt = m <= 32 ? 32 : m <= 64 ? 64 : 128;
    const int64_t kb = (k + 127) / 128;
    fk_small_shape c;
    if (k < 16 || !fk_small_pick(n, m, kb, nt, slots, 0, 0, 0, 0, &c)) {
        printf("  small-M family: no launch shape fits\n");
        return;
    }
    const int si = fk_small_slot_index(c);
    const char *what = !fk_small_preferred_shape(m, n, k, sms, 0) ? "declines it by shape"
                       : fk_small_too_many_waves(m, n, c, slots) ? "leaves it to the general kernel (waves)"
                                                                  : "takes it";
    printf("  small-M family %s: r=%d split=%d mc=%d cs=%d waves=%lld cost=%.0f\n", what, c.r, c.split, c.mc, c.cs,
           (long long)fk_small_waves(n, c, slots[si]), fk_small_cost(n, m, kb, nt, c, slots[si], slots[0]));
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"sms", required_argument, NULL, 's'},
                                         {"mode", required_argument, NULL, 'm'},
                                         {"ts", required_argument, NULL, 't'},
                                         {"all", no_argument, NULL, 'a'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int sms = 132, ts = 1, all = 0, o;
    const mode_def *md = &k_modes[0];
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            sms = atoi(optarg);
            break;
        case 't':
            ts = atoi(optarg);
            break;
        case 'a':
            all = 1;
            break;
        case 'm': {
            md = NULL;
            for (size_t i = 0; i < sizeof k_modes / sizeof k_modes[0]; i++)
                if (strcmp(optarg, k_modes[i].name) == 0)
                    md = &k_modes[i];
            if (!md) {
                fprintf(stderr, "plan_print: unknown mode '%s'\n", optarg);
                return 2;
            }
            break;
        }
        default:
            fprintf(stderr, "usage: plan_print [--sms N] [--mode tensor|tensor_fast|row|block|staged|mx|f16] "
                            "[--ts 0|1|2] [--all] MxNxK ...\n");
            return o == 'h' ? 0 : 2;
        }
    }
    if (sms < 1 || sms > 1024 || ts < 0 || ts > 2 || optind >= argc) {
        fprintf(stderr, "plan_print: needs 1 <= --sms <= 1024, --ts 0-2 and at least one MxNxK shape\n");
        return 2;
    }
    fk_sm90_cand cands[256];
    const int nc = fk_sm90_candidates(cands, 256);
    for (int i = optind; i < argc; i++) {
        long long m = 0, n = 0, k = 0;
        if (sscanf(argv[i], "%lldx%lldx%lld", &m, &n, &k) != 3 || m < 1 || n < 1 || k < 1) {
            fprintf(stderr, "plan_print: '%s' is not a shape MxNxK\n", argv[i]);
            return 2;
        }
        fk_sm90_ask a = fk_sm90_ask_of(m, n, (md->ops == FK_SM90_F16 ? 2 * k + 127 : k + 127) / 128, sms,
                                       md->scaling, md->ops, md->promo);
        a.ts_kind = ts;
        fk_sm90_choice ch;
        const int vi = fk_sm90_choose(cands, nc, &a, &ch);
        printf("%s %s on %d SMs:", argv[i], md->name, sms);
        if (vi < 0) {
            printf(" no variant fits\n");
            continue;
        }
        print_cand("", &cands[vi], &ch);
        if (m <= 128 && md->scaling == FK_SM90_SCALE_PLAIN && md->ops != FK_SM90_F16)
            print_small(m, n, k, sms);
        if (!all)
            continue;
        double rows[256][2];
        int nr = 0;
        for (int c = 0; c < nc; c++) {
            fk_sm90_choice one; /* a table of one: -1 when the candidate does not fit the ask; one
                                 * that fits only with the promotion fallback is listed when the pick
                                 * needed it too */
            if (fk_sm90_choose(&cands[c], 1, &a, &one) == 0 && (one.dropped & ~ch.dropped) == 0) {
                rows[nr][0] = one.cost;
                rows[nr][1] = c;
                nr++;
            }
        }
        qsort(rows, (size_t)nr, sizeof rows[0], by_cost);
        for (int r = 0; r < nr; r++) {
            fk_sm90_choice one;
            const int c = (int)rows[r][1];
            fk_sm90_choose(&cands[c], 1, &a, &one);
            print_cand("   ", &cands[c], &one);
        }
    }
    return 0;
}

#else
int main(void)
{
    printf("plan_print: built without CUDA (the variant table is the CUDA backend's), nothing to print\n");
    return 0;
}
#endif
