/* small_choose.c - the small-M (decode) family's launch-shape planner (small_choose.h): its cost
 * model, the pick, and the rules for taking a call. */
#include "cuda/gemm/sm90/small_choose.h"

/* Cost model, in bytes of B streamed per SM (the slowest CTA bounds the
 * kernel; 1 unit ~ 0.04 ns on the H100), fitted to the H100 sweeps of
 * every decode shape in bench/results/perf-gemm-log-2026-11.md ("Small M, session 10": 42
 * shapes, M = 1..128, N = 576..24576, K = 1536..16384). Per 128-deep K
 * block the largest of
 * - the bytes a CTA streams, R x 128 of B plus 0.11 x A's min(M, NT) x 128
 *   (halved by multicast), scaled by the CTA's share of the device's
 *   bandwidth: active CTAs / SMs, but at least 0.95 (fewer CTAs do not
 *   stream much faster each: 64 CTAs with R 112 take as long as 128 with
 *   R 56 at N = 7168);
 * - the MMA time (4 wgmma m64nNk32 plus the fp32 promotion cost as much as
 *   streaming ~62.5 x N bytes per warpgroup in turn; the column split's two
 *   warpgroups of N = NT / 2 side by side ~2.2x one);
 * - a floor of ~0.3 us per K block whatever the band (R 24 to 64 at N =
 *   1536 - 2112 take 0.32-0.36 us per K block: fewer K blocks per CTA, not
 *   fewer bytes, make those shapes faster);
 * plus, for bands of two warpgroups of B rows (R > 64), 20 x NT (64x7168x7168
 * with R 112 split 2 takes 22.2 us, R 56 20.6; the same at M = 1: 20.2 and
 * 20.4). Each CTA of a split beyond the first adds a cluster reduction
 * (~0.5 us), the multicast cluster's start-up ~2 KB, the start and the
 * epilogue ~20 KB (less favours 3 waves of R 64 over 2 of R 96 at N =
 * 24576, K = 1536: 19.4 against 17.3 us); one more wave repeats
 * everything. slots: clusters of the shape's size that fit at once; sms:
 * the SMs of this part of the grid.
 * Against the previous model (sessions 2-8) the picks are as fast or
 * faster on every swept shape (mean 1.017 of the best launch shape against
 * 1.056; 1x2112x7168 9.9 vs 12.1 us, 1x1536x7168 8.3 vs 11.8). */
#define FK_SMALL_KB_FLOOR 7500.0

int fk_small_slot_index(fk_small_shape c) { return (c.split == 1 ? 0 : c.split == 2 ? 1 : 2) + c.mc - 1; }

/* Waves of a launch shape: its clusters over the clusters that fit at once. */
int64_t fk_small_waves(int64_t n, fk_small_shape c, int64_t slots)
{
    const int64_t clusters = ((n + c.r - 1) / c.r + c.mc - 1) / c.mc;
    return slots > 0 ? (clusters + slots - 1) / slots : clusters;
}

double fk_small_cost(int64_t n, int64_t m, int64_t kb, int nt, fk_small_shape c, int64_t slots,
                     int64_t sms)
{
    const int64_t bands = (n + c.r - 1) / c.r;
    const int64_t clusters = (bands + c.mc - 1) / c.mc;
    const int64_t waves = fk_small_waves(n, c, slots);
    const int64_t active = (clusters < slots ? clusters : slots) * c.split * c.mc;
    const int bw = fk_small_bw(c.r);
    double share = sms > 0 ? (double)active / (double)sms : 1.0;
    if (share < 0.95)
        share = 0.95;
    const double mem = ((double)c.r * 128.0 + 0.11 * (double)(m < nt ? m : nt) * 128.0 / c.mc) * share;
    const double mma = c.cs ? 62.5 * 0.5 * nt * 2.2 : 62.5 * (double)nt * (double)bw;
    double per_kb = mem > mma ? mem : mma;
    if (per_kb < FK_SMALL_KB_FLOOR)
        per_kb = FK_SMALL_KB_FLOOR;
    if (bw == 2)
        per_kb += 20.0 * nt;
    const int64_t kc = (kb + c.split - 1) / c.split;
    return (double)waves * ((double)kc * per_kb + 12000.0 * (c.split - 1) + (c.mc > 1 ? 2000.0 : 0.0) + 20000.0);
}

/* Band height, split, multicast and column split by the cost model (ties -
 * MMA-bound bands -: the first found, fewer splits). slots[i]: clusters of
 * 2^i CTAs that fit at once (the model charges a second wave, so splits of
 * 4 are taken only where their clusters run as one). The A multicast only
 * when forced (H100: 2-7% slower on every decode shape, bench/results/perf-gemm-log-2026-11.md
 * "Small M, session 3"). fr / fs / fm / fc: the tuning's small_r /
 * small_split / small_mc (0 = free) and column split (0 free, 1 on, -1 off). Returns 0
 * when nothing fits. */
int fk_small_pick(int64_t n, int64_t m, int64_t kb, int nt, const int64_t slots[4], int fr, int fs, int fm,
                  int fc, fk_small_shape *out)
{
    fk_small_shape best = {0, 1, 1, 0};
    double best_c = 0;
    for (int i = 0; i < 3; i++) {
        const int s = 1 << i;
        if (s > kb || (fs ? fs != s : s > 4))
            continue;
        for (int mc = 1; mc <= 2; mc++) {
            if ((fm ? fm != mc : mc > 1) || slots[i + mc - 1] < 1 || (mc > 1 && n <= 1))
                continue;
            for (int r = fr ? fr : 8; r <= (fr ? fr : 128); r += 8) {
                if (r < 1 || r > 128)
                    continue;
                fk_small_shape c = {r, s, mc, 0};
                c.cs = nt >= 64 && r <= 64 && fc >= 0 ? 1 : 0;
                if (fc > 0 && !c.cs)
                    continue;
                const double cost = fk_small_cost(n, m, kb, nt, c, slots[i + mc - 1], slots[0]);
                if (best.r == 0 || cost < best_c) {
                    best_c = cost;
                    best = c;
                }
            }
        }
    }
    *out = best;
    return best.r > 0;
}

/* Whether the small-M kernel should take a job it can run, by shape: with
 * at least 1 MiB of B, for M <= 64, and for 64 < M <= 128 when the general kernel's 128 x 64 tiles would leave a
 * quarter of the SMs idle or K >= 7168 (H100, session 10, same run:
 * 128x2112x7168 12.8 vs 16.1 us, 128x7168x7168 22.2 vs 23.1,
 * 128x7168x16384 45.0 vs 46.9, but 128x7168x2048 10.1 vs 9.2 and
 * 128x24576x1536 27.6 vs 18.3); and for 32 < M <= 64 not when the
 * general kernel's 128-wide tiles fill the SMs and K <= 2048 (64x24576x1536
 * 17.6 vs 20.8 us, 64x32768x2048 27.9 vs 29.9; but 64x18432x4096 32.9 vs
 * 32.5, 64x12288x2048 19.8 vs 12.6), unless a general-kernel override
 * (gemm_promo, gemm_bn) is set. */
int fk_small_preferred_shape(int64_t m, int64_t n, int64_t k, int sm_count, int general_override)
{
    return !(n * k < ((int64_t)1 << 20) || general_override ||
             (m > 64 && (n + 63) / 64 * 4 >= (int64_t)sm_count * 3 && k < 7168) ||
             (m > 32 && (n + 127) / 128 >= (int64_t)sm_count && k <= 2048));
}

/* Left to the general kernel when the small plan needs more than one wave
 * of CTAs (two for M <= 64): with that many bands the general kernel's
 * tiles fill the SMs and stream B once per 128 rows of A (H200,
 * 2026-11-29: 128x10240x8192 46.5 us small, 34.4 general; 128x36864x7168
 * 110 vs 85; 128x5120x25600 65 vs 50; 64x51200x5120 103 vs 90; but
 * 64x28672x4096, two waves, 45.1 vs 47.3). */
int fk_small_too_many_waves(int64_t m, int64_t n, fk_small_shape c, const int64_t slots[4])
{
    return fk_small_waves(n, c, slots[fk_small_slot_index(c)]) > (m > 64 ? 1 : 2);
}
