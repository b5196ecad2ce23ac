/* test_sm90_choose.c - the dense sm90 planner's candidates and cost model
 * (src/cuda/gemm/sm90/choose.c), which needs no GPU: hand-costed picks, the
 * stream-K split, tuning keys as filters and the keys it drops, the pick's
 * part of a plan description, the fused 1x128 output's widths, the
 * TMA-store preference, and over a grid of shapes and device sizes that
 * every pick fits the job and costs no more than any other candidate that
 * fits. With the CUDA backend compiled, the
 * fixture below must equal the library's own variant table. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cuda/gemm/design.h"
#include "cuda/gemm/sm90/choose.h"
#include "test_util.h"

/* The library's variant table as the cost model sees it (kernels_dense.cu). */
#define P FK_SM90_SCALE_PLAIN
#define B FK_SM90_SCALE_BLOCK
#define X FK_SM90_SCALE_MX
#define S FK_SM90_SCALE_STAGED
static const fk_sm90_cand k_tab[] = {
    {128, 128, 1, 4, P, 0, 0, 0}, {128, 128, 1, 4, P, 1, 0, 0}, {128, 128, 1, 4, P, 2, 0, 0}, {128, 128, 1, 4, P, 3, 0, 0},
    {64, 128, 1, 4, P, 0, 0, 0},  {128, 128, 1, 0, P, 0, 0, 0}, {64, 128, 1, 0, P, 0, 0, 0},  {128, 128, 1, 4, B, 0, 0, 0},
    {64, 128, 1, 4, B, 0, 0, 0},  {128, 128, 1, 2, P, 0, 0, 0}, {128, 128, 1, 1, P, 0, 0, 0}, {192, 128, 1, 4, P, 0, 0, 0},
    {192, 128, 1, 0, P, 0, 0, 0}, {256, 128, 1, 0, P, 0, 0, 0},
    {128, 128, 1, 4, B, 1, 0, 0}, {128, 128, 1, 4, B, 2, 0, 0}, {128, 128, 1, 4, B, 3, 0, 0},
    {192, 128, 1, 4, B, 0, 0, 0},
    {128, 128, 1, 1, X, 0, 0, 0}, {128, 128, 1, 1, X, 1, 0, 0}, {128, 128, 1, 1, X, 2, 0, 0}, {128, 128, 1, 1, X, 3, 0, 0},
    {64, 128, 1, 1, X, 0, 0, 0},  {192, 128, 1, 1, X, 0, 0, 0},
    {192, 128, 2, 4, P, 0, 0, 0}, {256, 128, 2, 0, P, 0, 0, 0},
    {128, 128, 2, 4, B, 0, 0, 0}, {192, 128, 2, 4, B, 0, 0, 0},
    {128, 128, 1, 4, S, 0, 0, 0}, {128, 128, 1, 4, S, 1, 0, 0}, {128, 128, 1, 4, S, 2, 0, 0}, {128, 128, 1, 4, S, 3, 0, 0},
    {64, 128, 1, 4, S, 0, 0, 0},  {128, 128, 2, 4, S, 0, 0, 0},  {128, 128, 1, 4, S, 0, 1, 0}, {128, 128, 1, 4, S, 0, 2, 0},
    {128, 128, 1, 4, B, 0, 1, 0}, {128, 128, 1, 4, B, 0, 2, 0},
    {128, 256, 1, 4, B, 0, 0, 0}, {128, 256, 2, 4, B, 0, 0, 0},
    {128, 256, 1, 4, S, 0, 0, 0}, {128, 256, 2, 4, S, 0, 0, 1},
    {256, 128, 1, 0, P, 0, 1, 0}, {192, 128, 1, 4, P, 0, 1, 0}, {192, 128, 1, 0, P, 0, 1, 0}, {128, 128, 1, 4, P, 0, 1, 0},
    {128, 128, 1, 0, P, 0, 1, 0},
    {256, 128, 1, 0, P, 0, 2, 0}, {192, 128, 1, 4, P, 0, 2, 0}, {192, 128, 1, 0, P, 0, 2, 0}, {128, 128, 1, 4, P, 0, 2, 0},
    {128, 128, 1, 0, P, 0, 2, 0},
    {128, 128, 1, 4, P, 4, 0, 0}, {64, 128, 1, 4, P, 4, 0, 0}, {192, 128, 1, 4, P, 4, 0, 0}, {128, 128, 1, 0, P, 4, 0, 0},
};
#undef P
#undef B
#undef X
#undef S
static const int k_n = (int)(sizeof k_tab / sizeof k_tab[0]);

static fk_sm90_ask ask_of(int64_t m, int64_t n, int64_t k, int sms, int scaling, int ops, int promo)
{
    return fk_sm90_ask_of(m, n, (k + 127) / 128, sms, scaling, ops, promo);
}

static const fk_sm90_cand *pick(const fk_sm90_ask *a, fk_sm90_choice *c)
{
    const int i = fk_sm90_choose(k_tab, k_n, a, c);
    return i >= 0 ? &k_tab[i] : NULL;
}

static int near(double x, double y) { return fabs(x - y) <= 1e-6 * fmax(1.0, fabs(y)); }

static void test_hand_costed(void)
{
    fk_sm90_choice c;
    /* plain e4m3, 4096^3, 132 SMs: 128 wide is 1024 tiles, 8 waves (a tail of
     * 100 cannot split): 8 x 128 x 1.15; 192 wide is 704 tiles = 5 x 132 +
     * 44, the tail split in 3: (5 + 1/3 + 0.45) x 192 (the hand-off: 5 K blocks per part, at most
     * 0.45 of a tile) */
    fk_sm90_ask a = ask_of(4096, 4096, 4096, 132, FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, 4);
    const fk_sm90_cand *p = pick(&a, &c);
    CHECK(p && p->bn == 192 && p->tma_store == 0 && p->cluster == 1, "4096^3 plain: 192 wide");
    CHECK(near(c.cost, (5 + 1.0 / 3 + 0.45) * 192) && c.items == 704 && c.waves == 6 && c.sk_parts == 3,
          "4096^3 plain: cost %.3f items %lld waves %lld parts %lld", c.cost, (long long)c.items, (long long)c.waves,
          (long long)c.sk_parts);
    fk_sm90_cand c128 = {128, 128, 1, 4, FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, 0, 0};
    CHECK(near(fk_sm90_cost(&c128, &a, NULL), 8 * 128 * 1.15), "4096^3 plain: the 128-wide cost");
    /* the TMA-store epilogue when the job may use it */
    a.ts_kind = 1;
    p = pick(&a, &c);
    CHECK(p && p->bn == 192 && p->tma_store == 1, "4096^3 plain, TMA store allowed: its 192-wide variant");
    a.ts_kind = 2;
    p = pick(&a, &c);
    CHECK(p && p->tma_store == 2, "bias / activation: the second TMA-store kind");

    /* block, 8192^3: 128 wide, 4096 tiles = 31 x 132 + 4, tail split in 4 (one turn of a quarter;
     * the hand-off of 4 parts of 64 K blocks: 20 / 64 of a tile) */
    a = ask_of(8192, 8192, 8192, 132, FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, 4);
    p = pick(&a, &c);
    CHECK(p && p->bn == 128 && p->bm == 128 && p->cluster == 1, "8192^3 block: 128 x 128");
    CHECK(near(c.cost, (31 + 0.25 + 20.0 / 64) * 128) && c.sk_parts == 4, "8192^3 block: cost %.3f", c.cost);
    /* the 256-row tile and the cluster are costed, not picked */
    fk_sm90_cand w2 = {128, 256, 1, 4, FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, 0, 0};
    fk_sm90_choice cw;
    CHECK(near(fk_sm90_cost(&w2, &a, &cw), 16 * 2 * 128 * 1.05) && cw.sk_parts == 0 && cw.items == 2048,
          "8192^3 block: the 256-row tile's cost (no stream-K)");
    fk_sm90_cand c2 = {128, 128, 2, 4, FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, 0, 0};
    CHECK(near(fk_sm90_cost(&c2, &a, &cw), 32 * 128 * 1.05) && cw.slots == 66, "8192^3 block: the cluster's cost");

    /* plain fp8 on a device the 128-wide tiles do not fill: 64-wide tiles weigh 1.5 (each column
     * loads twice the bytes of A), so long K at M 256-512 keeps 128 or 192 wide (the forced-width
     * sweep: 64 wide ran 0.6-0.8x cuBLASLt there, 128 wide 0.96-1.0x) */
    a = ask_of(256, 7168, 16384, 132, FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, 4);
    p = pick(&a, &c);
    CHECK(p && p->bn == 128 && c.sk_parts == 0, "256x7168x16384 plain: 128 wide, whole tiles");
    fk_sm90_cand c64 = {64, 128, 1, 4, FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, 0, 0};
    /* 64 wide: 224 tiles, a tail of 92 that no split of 2-4 parts pays for (2, 3 or 3 turns), two
     * waves; 128 wide: 112 tiles, one wave (cost 128 x 1.15) */
    CHECK(near(fk_sm90_cost(&c64, &a, NULL), 2 * 64 * 1.5) && near(c.cost, 128 * 1.15),
          "256x7168x16384 plain: the 64-wide cost %.3f, the pick's %.3f", fk_sm90_cost(&c64, &a, NULL), c.cost);
    a = ask_of(512, 4096, 7168, 132, FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, 0);
    p = pick(&a, &c);
    CHECK(p && p->bn == 128, "512x4096x7168 plain fast: 128 wide");

    /* a device the 128-wide tiles do not fill: 64 wide (more SMs busy) */
    a = ask_of(256, 1024, 4096, 132, FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, 4);
    p = pick(&a, &c);
    CHECK(p && p->bn == 64, "256x1024 block: 64 wide");
    /* ... but not for one column of tiles, nor with a fused 1x128 output */
    a.n = 64;
    p = pick(&a, &c);
    CHECK(p && p->bn == 128, "256x64 block: 128 wide");
    a.n = 1024;
    a.width_128 = 1;
    p = pick(&a, &c);
    CHECK(p && p->bn == 128, "256x1024 block, 1x128 output: 128 wide");
    /* e5m2 block has no 64-wide variant */
    a = ask_of(256, 1024, 4096, 132, FK_SM90_SCALE_BLOCK, FK_SM90_E5M2_E4M3, 4);
    p = pick(&a, &c);
    CHECK(p && p->bn == 128 && p->ops == FK_SM90_E5M2_E4M3, "256x1024 block e5m2 x e4m3: 128 wide");
    /* on a full device 64 wide only when asked */
    a = ask_of(4096, 4096, 4096, 132, FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, 4);
    p = pick(&a, &c);
    CHECK(p && p->bn == 128, "4096^3 block: 128 wide");
    a.bn = 64;
    p = pick(&a, &c);
    CHECK(p && p->bn == 64 && c.dropped == 0, "4096^3 block, gemm_bn=64: 64 wide");

    /* MX: 192 at 8192^3; 128 where a 192-wide tile would be mostly empty */
    a = ask_of(8192, 8192, 8192, 132, FK_SM90_SCALE_MX, FK_SM90_E4M3_E4M3, 1);
    p = pick(&a, &c);
    CHECK(p && p->bn == 192 && c.sk_parts == 0, "8192^3 MX: 192 wide, no stream-K");
    a.m = 32768; /* 256 tiles of 128 x 128 or of 128 x 192: two waves either way */
    a.n = 128;
    p = pick(&a, &c);
    CHECK(p && p->bn == 128, "32768x128 MX: 128 wide");
}

static void test_tuning_keys(void)
{
    fk_sm90_choice c;
    fk_sm90_ask a = ask_of(4096, 7168, 7168, 132, FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, 4);
    a.bn = 128;
    const fk_sm90_cand *p = pick(&a, &c);
    CHECK(p && p->bn == 128 && c.dropped == 0, "gemm_bn=128");
    a.bn = 96; /* no such width */
    p = pick(&a, &c);
    CHECK(p && c.dropped == FK_SM90_DROP_BN, "gemm_bn=96: dropped (%d)", c.dropped);
    a.bn = 0;
    a.bm = 256; /* 256-row tiles exist for block scales only */
    p = pick(&a, &c);
    CHECK(p && p->bm == 128 && c.dropped == FK_SM90_DROP_BM, "plain, gemm_bm=256: dropped");
    a = ask_of(4096, 7168, 7168, 132, FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, 4);
    a.bm = 256;
    p = pick(&a, &c);
    CHECK(p && p->bm == 256 && p->cluster == 1 && c.dropped == 0, "block, gemm_bm=256");
    a.cluster = 2;
    p = pick(&a, &c);
    CHECK(p && p->bm == 256 && p->cluster == 2 && c.dropped == 0, "block, gemm_bm=256, gemm_cluster=2");
    a.bm = 0;
    p = pick(&a, &c);
    CHECK(p && p->bm == 128 && p->cluster == 2 && p->bn == 128, "block, gemm_cluster=2: 128 x 128 pairs");
    a = ask_of(4096, 7168, 7168, 132, FK_SM90_SCALE_BLOCK, FK_SM90_E5M2_E5M2, 4);
    a.cluster = 2; /* no e5m2 cluster variant */
    p = pick(&a, &c);
    CHECK(p && p->cluster == 1 && p->ops == FK_SM90_E5M2_E5M2 && c.dropped == FK_SM90_DROP_CLUSTER,
          "e5m2 block, gemm_cluster=2: dropped");
    /* fast accumulation on e5m2 pairs: no such variant, promotion every 128 of K */
    a = ask_of(4096, 7168, 7168, 132, FK_SM90_SCALE_PLAIN, FK_SM90_E5M2_E5M2, 0);
    p = pick(&a, &c);
    CHECK(p && p->promo == 4 && c.dropped == FK_SM90_DROP_PROMO, "e5m2 fast accumulation: promotion 4");
    /* staged block scales: the 128-wide staged variant; a width only the global-load variants have
     * is a dropped key (the planner then takes those: dense_host.cu) */
    a = ask_of(4096, 4096, 7168, 132, FK_SM90_SCALE_STAGED, FK_SM90_E4M3_E4M3, 4);
    p = pick(&a, &c);
    CHECK(p && p->scaling == FK_SM90_SCALE_STAGED && p->bn == 128 && p->tma_store == 0 && c.dropped == 0,
          "staged: 128 wide");
    /* with a job the TMA-store epilogue takes, its staged variants of the job's kind */
    for (int kind = 1; kind <= 2; kind++) {
        a.ts_kind = kind;
        p = pick(&a, &c);
        CHECK(p && p->scaling == FK_SM90_SCALE_STAGED && p->bn == 128 && p->tma_store == kind && c.dropped == 0,
              "staged, TMA-store kind %d", kind);
    }
    a.scaling = FK_SM90_SCALE_BLOCK; /* (plain A scales: the global-load block variants have them too) */
    for (int kind = 1; kind <= 2; kind++) {
        a.ts_kind = kind;
        p = pick(&a, &c);
        CHECK(p && p->scaling == FK_SM90_SCALE_BLOCK && p->bn == 128 && p->tma_store == kind && c.dropped == 0,
              "block, TMA-store kind %d", kind);
    }
    a.scaling = FK_SM90_SCALE_STAGED;
    a.ts_kind = 0;
    a.bn = 192;
    p = pick(&a, &c);
    CHECK(p && p->scaling == FK_SM90_SCALE_STAGED && c.dropped == FK_SM90_DROP_BN, "staged, gemm_bn=192: dropped");
    a.scaling = FK_SM90_SCALE_BLOCK;
    p = pick(&a, &c);
    CHECK(p && p->bn == 192 && c.dropped == 0, "block, gemm_bn=192: 192 wide");
    /* staged 256-row tiles: single CTAs, or pairs along N sharing A (gemm_mc=1); pairs along M
     * (gemm_mc=2) exist only with 128-row staged tiles */
    a = ask_of(8192, 8192, 8192, 132, FK_SM90_SCALE_STAGED, FK_SM90_E4M3_E4M3, 4);
    a.bm = 256;
    p = pick(&a, &c);
    CHECK(p && p->scaling == FK_SM90_SCALE_STAGED && p->bm == 256 && p->cluster == 1 && c.dropped == 0,
          "staged, gemm_bm=256");
    a.cluster = 2;
    a.mc = 1;
    p = pick(&a, &c);
    CHECK(p && p->bm == 256 && p->cluster == 2 && p->mc_a == 1 && c.dropped == 0 && c.items == 32 * 32,
          "staged, gemm_bm=256, pairs along N: %lld items", (long long)c.items);
    a.mc = 2;
    p = pick(&a, &c);
    CHECK(p && p->bm == 256 && p->cluster == 1 && c.dropped == FK_SM90_DROP_CLUSTER, "staged 256 rows, gemm_mc=2: dropped");
    a.bm = 0;
    p = pick(&a, &c);
    CHECK(p && p->bm == 128 && p->cluster == 2 && p->mc_a == 0 && c.dropped == 0, "staged, gemm_mc=2: 128-row pairs");
    a.cluster = 0;
    a.mc = 1; /* gemm_mc alone asks for clusters too */
    p = pick(&a, &c);
    CHECK(p && p->cluster == 2 && p->mc_a == 1 && c.dropped == 0, "staged, gemm_mc=1 alone");
    /* a job no variant runs */
    a = ask_of(4096, 7168, 7168, 132, FK_SM90_SCALE_ROWCOL, FK_SM90_E4M3_E4M3, 4);
    CHECK(fk_sm90_choose(k_tab, k_n, &a, &c) == -1 && c.index == -1, "no variant: -1");
    CHECK(fk_sm90_choose(k_tab, 0, &a, NULL) == -1, "empty table: -1");
}

static void test_stream_k(void)
{
    int64_t tail = 0;
    CHECK(fk_sm90_sk_parts(-1, 704, 132, 32, &tail) == 3 && tail == 44, "704 tiles on 132: 3 parts of 44");
    CHECK(fk_sm90_sk_parts(0, 704, 132, 32, &tail) == 0, "gemm_sk=0: none");
    CHECK(fk_sm90_sk_parts(2, 704, 132, 32, &tail) == 2, "gemm_sk=2: 2 parts");
    CHECK(fk_sm90_sk_parts(-1, 704, 132, 8, &tail) == 0, "8 K blocks: no split");
    CHECK(fk_sm90_sk_parts(-1, 660, 132, 64, &tail) == 0 && tail == 0, "full waves: no tail");
    CHECK(fk_sm90_sk_parts(-1, 16, 132, 64, &tail) == 4 && tail == 16, "16 tiles on 132: 4 parts each");
    CHECK(fk_sm90_sk_parts(9, 16, 132, 4, &tail) == 4, "parts at most the K blocks");
    /* below one wave of parts: 76 tiles on 132 SMs, 3 parts each take two turns of a third,
     * each with its hand-off (2 (1/3 + 15 / 200) < 1); at 40 K blocks the hand-offs eat the
     * gain (2 (1/3 + 15 / 40) > 1); 112 tiles gain nothing from 2-4 parts; a forced count is kept
     * whatever the turns */
    CHECK(fk_sm90_sk_parts(-1, 76, 132, 200, &tail) == 3 && tail == 76, "76 tiles on 132, 200 K blocks: 3 parts");
    CHECK(fk_sm90_sk_parts(-1, 76, 132, 40, &tail) == 0, "76 tiles, 40 K blocks: two hand-offs eat the gain");
    CHECK(fk_sm90_sk_parts(-1, 96, 132, 56, &tail) == 0, "96 tiles, 56 K blocks: three turns of 4 parts lose");
    CHECK(fk_sm90_sk_parts(-1, 112, 132, 144, &tail) == 0, "112 tiles on 132: no split pays");
    CHECK(fk_sm90_sk_parts(4, 60, 132, 16, &tail) == 4, "gemm_sk=4 on 60 tiles: 240 parts in two turns");
    CHECK(fk_sm90_sk_parts(64, 100, 132, 200, &tail) == 5, "gemm_sk=64 on 100 tiles: at most four turns (5 parts)");
    CHECK(near(fk_sm90_sk_tail_cost(3, 76, 132, 40), 2.0 / 3 + 2 * 15.0 / 40), "tail cost, two turns");
    CHECK(near(fk_sm90_sk_tail_cost(3, 44, 132, 32), 1.0 / 3 + 0.45), "tail cost, one turn, short K (capped)");
    CHECK(near(fk_sm90_sk_tail_cost(2, 44, 132, 200), 0.5 + 10.0 / 200), "tail cost, one turn, long K");
    CHECK(near(fk_sm90_sk_tail_cost(1, 44, 132, 32), 1.0), "tail cost, whole tiles");
    const fk_sm90_cand mx = {192, 128, 1, 1, FK_SM90_SCALE_MX, 0, 0, 0}, cl = {128, 128, 2, 4, 1, 0, 0, 0},
                       w2 = {128, 256, 1, 4, 1, 0, 0, 0}, ok = {128, 128, 1, 4, 1, 0, 0, 0};
    CHECK(!fk_sm90_sk_able(&mx) && !fk_sm90_sk_able(&cl) && !fk_sm90_sk_able(&w2) && fk_sm90_sk_able(&ok),
          "stream-K: single-CTA 128-row tiles, not MX");
}

/* The pick's part of a plan description. */
static void test_describe(void)
{
    char buf[128] = "sm90 bn=128";
    fk_sm90_describe_pick(buf, sizeof buf, 12.5, 3, FK_SM90_DROP_CLUSTER | FK_SM90_DROP_BN);
    CHECK(strcmp(buf, "sm90 bn=128 cost=12.5 of=3 dropped=gemm_cluster dropped=gemm_bn") == 0, "describe: '%s'", buf);
    char same[32] = "sm90";
    fk_sm90_describe_pick(same, sizeof same, 1.0, 0, 0);
    CHECK(strcmp(same, "sm90") == 0, "describe: not the model's pick adds nothing ('%s')", same);
    char small[12] = "sm90 bn=128";
    fk_sm90_describe_pick(small, sizeof small, 1.0, 2, FK_SM90_DROP_PROMO);
    CHECK(strcmp(small, "sm90 bn=128") == 0, "describe: a full buffer stays as it was ('%s')", small);
}

/* Whether candidate c fits the ask with no key dropped (the test's own reading of choose.h). */
static int fits(const fk_sm90_cand *c, const fk_sm90_ask *a)
{
    const int64_t t128 = ((a->m + 127) / 128) * ((a->n + 127) / 128);
    return c->scaling == a->scaling && c->ops == a->ops && c->promo == a->promo &&
           (!c->tma_store || c->tma_store == a->ts_kind) && (!a->width_128 || c->bn % 128 == 0) &&
           (!a->bn || c->bn == a->bn) && (!a->bm || c->bm == a->bm) && (!a->cluster || c->cluster == a->cluster) &&
           (!a->mc || (c->cluster > 1 && (c->mc_a ? 1 : 2) == a->mc)) &&
           (a->bn || c->bn >= 128 || (t128 < a->sms && a->n > 64));
}

static void test_grid(void)
{
    static const int64_t ms[] = {1, 100, 129, 512, 1000, 2048, 4096, 6000, 16384};
    static const int64_t ns[] = {64, 200, 576, 2112, 4096, 7168, 18432, 129280};
    static const int sms[] = {132, 114, 78};
    static const int kinds[][3] = {{0, 0, 4}, {0, 0, 0}, {0, 1, 4}, {0, 3, 0}, {0, 4, 4}, {1, 0, 4},
                                   {1, 2, 4}, {2, 0, 1}, {2, 3, 1}, {0, 0, 1}, {4, 0, 4}};
    static const int tunes[][4] = {{0, 0, 0, 0},   {64, 0, 0, 0}, {192, 0, 0, 0}, {256, 0, 0, 0}, {0, 256, 0, 0},
                                   {0, 0, 2, 0},   {0, 256, 2, 0}, {0, 256, 2, 1}, {0, 0, 0, 1},   {0, 0, 2, 2}};
    long bad_fit = 0, bad_min = 0, bad_drop = 0, n = 0;
    for (unsigned k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (unsigned t = 0; t < sizeof tunes / sizeof tunes[0]; t++)
            for (int ts = 0; ts < 3; ts++)
                for (int w = 0; w < 2; w++)
                    for (unsigned s = 0; s < 3; s++)
                        for (unsigned i = 0; i < sizeof ms / sizeof ms[0]; i++)
                            for (unsigned j = 0; j < sizeof ns / sizeof ns[0]; j++) {
                                fk_sm90_ask a = ask_of(ms[i], ns[j], 7168, sms[s], kinds[k][0], kinds[k][1], kinds[k][2]);
                                a.ts_kind = ts;
                                a.width_128 = w;
                                a.bn = tunes[t][0];
                                a.bm = tunes[t][1];
                                a.cluster = tunes[t][2];
                                a.mc = tunes[t][3];
                                fk_sm90_choice c;
                                const fk_sm90_cand *p = pick(&a, &c);
                                int any = 0;
                                for (int q = 0; q < k_n; q++)
                                    any |= fits(&k_tab[q], &a);
                                n++;
                                if (!p)
                                    continue; /* (every kind here has a variant) */
                                /* with no key dropped, the pick fits and costs no more than any fitting candidate */
                                if (any != (c.dropped == 0) && bad_drop++ < 3)
                                    fprintf(stderr, "  %lldx%lld kind %u tune %u: dropped %d, fitting %d\n",
                                            (long long)a.m, (long long)a.n, k, t, c.dropped, any);
                                if (c.dropped)
                                    continue;
                                if (!fits(p, &a) && bad_fit++ < 3)
                                    fprintf(stderr, "  %lldx%lld kind %u tune %u: the pick does not fit\n",
                                            (long long)a.m, (long long)a.n, k, t);
                                for (int q = 0; q < k_n; q++)
                                    if (fits(&k_tab[q], &a) && fk_sm90_cost(&k_tab[q], &a, NULL) < c.cost &&
                                        bad_min++ < 3)
                                        fprintf(stderr, "  %lldx%lld kind %u tune %u: %d costs less than the pick\n",
                                                (long long)a.m, (long long)a.n, k, t, q);
                                if (!(c.considered >= 1 && c.waves >= 1 && c.cost > 0) && bad_min++ < 3)
                                    fprintf(stderr, "  %lldx%lld: empty choice\n", (long long)a.m, (long long)a.n);
                            }
    CHECK(n > 0 && bad_fit == 0 && bad_min == 0 && bad_drop == 0,
          "grid of %ld asks: %ld picks that do not fit, %ld not the cheapest, %ld wrong drops", n, bad_fit, bad_min,
          bad_drop);
}

#ifdef FP8KIT_HAVE_CUDA
static void test_library_table(void)
{
    fk_sm90_cand t[256];
    const int n = fk_sm90_candidates(t, 256);
    CHECK(n == k_n, "the library has %d variants, the fixture %d", n, k_n);
    for (int i = 0; i < n && i < k_n; i++)
        CHECK(memcmp(&t[i], &k_tab[i], sizeof t[i]) == 0, "variant %d: bn %d bm %d cluster %d promo %d scaling %d ops %d ts %d", i,
              t[i].bn, t[i].bm, t[i].cluster, t[i].promo, t[i].scaling, t[i].ops, t[i].tma_store);
}
#endif

/* The rows of a box cut at a tensor's end: whole 8-row atoms, never more than the box; the dense
 * kernels' tail and the small-M kernel's A rows both read it. */
static void test_box_rows(void)
{
    static const int64_t rest[] = {1, 7, 8, 9, 48, 77, 80, 120, 121, 127, 128, 129, 1000};
    static const int want128[] = {8, 8, 8, 16, 48, 80, 80, 120, 128, 128, 128, 128, 128};
    static const int want32[] = {8, 8, 8, 16, 32, 32, 32, 32, 32, 32, 32, 32, 32};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) {
        CHECK(fk_sm90_box_rows(rest[i], 128) == want128[i], "box_rows(%lld, 128) = %d, want %d", (long long)rest[i],
              fk_sm90_box_rows(rest[i], 128), want128[i]);
        CHECK(fk_sm90_box_rows(rest[i], 32) == want32[i], "box_rows(%lld, 32) = %d, want %d", (long long)rest[i],
              fk_sm90_box_rows(rest[i], 32), want32[i]);
    }
}

int main(void)
{
    test_box_rows();
    test_hand_costed();
    test_tuning_keys();
    test_stream_k();
    test_describe();
    test_grid();
#ifdef FP8KIT_HAVE_CUDA
    test_library_table();
#endif
    return fk_test_summary("test_sm90_choose");
}
