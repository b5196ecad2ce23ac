/* test_small_choose.c - the small-M (decode) family's launch-shape planner
 * (src/cuda/gemm/sm90/small_choose.c), which needs no GPU: wave counts and
 * one cost by hand, the pick against other launch shapes over a grid of
 * shapes, forced keys, which calls the family takes by shape, and which it
 * leaves to the general kernel for their waves (the H200 shapes of
 * docs/perf.md's small-M section). */
#include <math.h>
#include <stdio.h>
#include "cuda/gemm/sm90/small_choose.h"
#include "test_util.h"

/* clusters of 1, 2, 4 and 8 CTAs that fit at once on a 132-SM device */
static const int64_t k_slots[4] = {132, 66, 33, 16};

static int nt_of(int64_t m) { return m <= 32 ? 32 : m <= 64 ? 64 : 128; }

/* The pick for M x N x K with nothing forced. */
static fk_small_shape pick(int64_t m, int64_t n, int64_t k)
{
    fk_small_shape c = {0, 0, 0, 0};
    CHECK(fk_small_pick(n, m, (k + 127) / 128, nt_of(m), k_slots, 0, 0, 0, 0, &c) == 1, "%lldx%lldx%lld: a pick",
          (long long)m, (long long)n, (long long)k);
    return c;
}

static void waves_and_cost(void)
{
    const fk_small_shape a = {56, 2, 1, 0}, b = {64, 1, 1, 1}, c = {8, 1, 2, 0};
    CHECK(fk_small_waves(10240, a, 66) == 3, "183 bands over 66 slots: 3 waves (got %lld)",
          (long long)fk_small_waves(10240, a, 66));
    CHECK(fk_small_waves(8192, b, 132) == 1, "128 bands over 132 slots: 1 wave");
    CHECK(fk_small_waves(100, c, 4) == 2, "13 bands in pairs: 7 clusters over 4 slots, 2 waves");
    /* 1 x 7168 x 7168, bands of 56: 128 CTAs of 132, per K block max(0.95..1 x (56 x 128 + 0.11 x 1 x
     * 128), 62.5 x 32) = 7164.5, under the floor 7500; 56 K blocks and the 20000 of start and epilogue */
    const fk_small_shape d = {56, 1, 1, 0};
    const double cost = fk_small_cost(7168, 1, 56, 32, d, 132, 132);
    CHECK(fabs(cost - (56.0 * 7500.0 + 20000.0)) < 1e-6, "1x7168x7168 r 56: cost %.1f, want %.1f", cost,
          56.0 * 7500.0 + 20000.0);
    /* two waves of the same: everything twice */
    const double cost2 = fk_small_cost(7168, 1, 56, 32, d, 64, 132);
    CHECK(fabs(cost2 - 2.0 * (56.0 * 7500.0 + 20000.0)) < 1e-6, "r 56 on 64 slots: two waves, cost %.1f", cost2);
}

/* Every pick costs no more than the launch shapes it was chosen from, and
 * forced keys are honoured. */
static void picks_are_cheapest(void)
{
    static const int64_t ms[] = {1, 16, 32, 64, 80, 128};
    static const int64_t ns[] = {576, 1536, 2112, 4096, 7168, 10240, 24576, 57344};
    static const int64_t ks[] = {512, 1536, 4096, 7168, 16384};
    int checked = 0;
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
            for (size_t l = 0; l < sizeof ks / sizeof ks[0]; l++) {
                const int64_t m = ms[i], n = ns[j], kb = (ks[l] + 127) / 128;
                const int nt = nt_of(m);
                const fk_small_shape c = pick(m, n, ks[l]);
                const int ci = fk_small_slot_index(c);
                const double best = fk_small_cost(n, m, kb, nt, c, k_slots[ci], k_slots[0]);
                for (int s = 1, si = 0; s <= 4 && s <= kb; s *= 2, si++)
                    for (int r = 8; r <= 128; r += 8) {
                        const fk_small_shape o = {r, s, 1, nt >= 64 && r <= 64};
                        const double oc = fk_small_cost(n, m, kb, nt, o, k_slots[si], k_slots[0]);
                        CHECK(best <= oc, "%lldx%lldx%lld: pick r %d split %d costs %.0f > r %d split %d at %.0f",
                              (long long)m, (long long)n, (long long)ks[l], c.r, c.split, best, r, s, oc);
                        checked++;
                    }
            }
    fk_small_shape f;
    CHECK(fk_small_pick(7168, 1, 56, 32, k_slots, 40, 2, 0, 0, &f) == 1 && f.r == 40 && f.split == 2,
          "forced r 40 split 2 (got r %d split %d)", f.r, f.split);
    CHECK(fk_small_pick(7168, 64, 56, 64, k_slots, 96, 0, 0, 1, &f) == 0,
          "a forced column split with bands over 64 rows fits nothing");
    CHECK(fk_small_pick(7168, 1, 2, 32, k_slots, 0, 4, 0, 0, &f) == 0, "a split of 4 over 2 K blocks fits nothing");
    printf("  picks: %d comparisons against other launch shapes\n", checked);
}

static void takes_by_shape(void)
{
    CHECK(!fk_small_preferred_shape(1, 512, 1024, 132, 0), "under 1 MiB of B: the general kernel");
    CHECK(fk_small_preferred_shape(1, 7168, 7168, 132, 0), "1x7168x7168: the small family");
    CHECK(fk_small_preferred_shape(64, 7168, 7168, 132, 0), "64x7168x7168: the small family");
    CHECK(!fk_small_preferred_shape(64, 7168, 7168, 132, 1), "a general-kernel override: the general kernel");
    CHECK(!fk_small_preferred_shape(128, 24576, 1536, 132, 0), "128x24576x1536: 128 x 64 tiles fill the SMs");
    CHECK(fk_small_preferred_shape(128, 7168, 16384, 132, 0), "128x7168x16384: the small family (K >= 7168)");
    CHECK(!fk_small_preferred_shape(64, 32768, 2048, 132, 0), "64x32768x2048: 128-wide tiles fill the SMs, K <= 2048");
}

/* The H200 shapes behind the wave rule: the family's plans of more than one
 * wave (two for M <= 64) are left to the general kernel, the others kept. */
static void waves_rule(void)
{
    static const struct {
        int64_t m, n, k;
        int leave;
    } cases[] = {
        {128, 10240, 8192, 1}, {128, 36864, 7168, 1}, {128, 57344, 8192, 1}, {128, 5120, 25600, 1},
        {64, 51200, 5120, 1},  {64, 36864, 7168, 1},  {64, 57344, 8192, 1},  {128, 4096, 7168, 0},
        {128, 8192, 8192, 0},  {128, 7168, 16384, 0}, {64, 28672, 4096, 0},  {64, 8192, 8192, 0},
        {1, 7168, 7168, 0},
        /* not measured: the thresholds themselves (two waves at M = 128 left, two at M = 64 kept, three left) */
        {128, 14336, 7168, 1}, {64, 18432, 4096, 0}, {64, 24576, 7168, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fk_small_shape c = pick(cases[i].m, cases[i].n, cases[i].k);
        const int leave = fk_small_too_many_waves(cases[i].m, cases[i].n, c, k_slots);
        CHECK(leave == cases[i].leave, "%lldx%lldx%lld: pick r %d split %d mc %d (%lld waves) %s, want %s",
              (long long)cases[i].m, (long long)cases[i].n, (long long)cases[i].k, c.r, c.split, c.mc,
              (long long)fk_small_waves(cases[i].n, c, k_slots[fk_small_slot_index(c)]),
              leave ? "left" : "kept", cases[i].leave ? "left" : "kept");
    }
}

int main(void)
{
    waves_and_cost();
    picks_are_cheapest();
    takes_by_shape();
    waves_rule();
    return fk_test_summary("test_small_choose");
}
