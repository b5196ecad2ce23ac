/* gemm_mx_emu.cpp - host emulation of the MX arithmetic of the Hopper GEMM
 * (src/cuda/gemm/sm90/mx_math.cuh compiled as host C++, no GPU needed): for every
 * output tile and K block, the two helper warps' lanes load and decode the
 * stage's scale bytes into the scale area (fk_mx_load / fk_mx_decode, with
 * the warp min / max), then for each k32 step every consumer thread builds
 * its m64nBN wgmma fragment (rows warp*16 + lane/4 + {0, 8}, columns
 * 8j + 2(lane%4) + {0, 1}; zero past M, N and K as TMA fills) from the exact
 * fp8 products rounded to fp32 and promotes it with fk_mx_promote, the
 * kernel's own code. The fp32 result must match the CPU backend (rel 1e-6,
 * NaN where it has NaN) and the fp64 reference: plain and blocked layouts
 * with garbage padding, aligned (word) and misaligned (byte) scale arrays,
 * realistic and edge exponents (both promotion paths; scale products past
 * 2^127 and below 2^-149 with finite, nonzero results), NaN scales, K not a
 * multiple of 128, BN 64 and 128, every fp8 type pair; and fk_mx_scale_exact
 * for every pair of scale bytes against the exact form. The wgmma pipeline,
 * barriers and TMA are not emulated. Built and run by tests/test_gemm_mx_emu.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "cuda/gemm/sm90/mx_math.cuh"
#include "fp8kit.h"
#include "format/codec.h"
#include "format/scale.h"

static uint64_t rng_s = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void)
{
    rng_s += 0x9E3779B97F4A7C15ull;
    uint64_t z = rng_s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}
static int rnd(int lo, int hi) { return lo + (int)(rnd32() % (uint32_t)(hi - lo + 1)); }
static double normal(void)
{
    const double u = (rnd32() + 0.5) / 4294967296.0, v = (rnd32() + 0.5) / 4294967296.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

struct ecase {
    const char *name;
    int m, n, k, bn;
    bool blocked;
    int scales; /* 0 realistic, 1 edge, 2 NaN, 3 tiny (subnormal results), 4 huge (products past 2^127),
                 * 5 one scale per 128 of K per row (uniform stages: one promotion each) */
    int off;    /* byte offset of the scale arrays (misaligned: byte loads) */
    bool e5a, e5b;
};

static long fails;

/* The kernel's tiles for one BN: helper warps, then consumer threads. */
template <int BN>
static void emulate(const ecase &c, const std::vector<uint8_t> &A, const std::vector<uint8_t> &B, const uint8_t *sa,
                    const uint8_t *sb, std::vector<float> &D)
{
    typedef fk_mx_area<BN> T;
    constexpr int NACC = BN / 2;
    const int M = c.m, N = c.n, K = c.k, kbs = K / 32, nkb = (K + 127) / 128;
    const bool word = ((uintptr_t)sa % 4 == 0) && ((uintptr_t)sb % 4 == 0) && (c.blocked || kbs % 4 == 0);
    std::vector<float> area(T::BYTES / 4);
    std::vector<float> accf(2 * 128 * NACC);
    for (int tm = 0; tm < (M + 127) / 128; tm++)
        for (int tn = 0; tn < (N + BN - 1) / BN; tn++) {
            std::fill(accf.begin(), accf.end(), 0.0f);
            for (int kb = 0; kb < nkb; kb++) {
                std::fill(area.begin(), area.end(), -12345.0f); /* every entry must be written */
                int *mm = (int *)(area.data() + T::MM);
                for (int op = 0; op < 2; op++) {
                    int emin = 1024, emax = -1024;
                    bool uni = true;
                    for (int lane = 0; lane < 32; lane++) {
                        int lo = 1024, hi = -1024;
                        if (op == 0) {
                            unsigned int w[4];
                            fk_mx_load<4>(sa, c.blocked, nkb, kbs, word, tm * 128, M, kb * 4, lane, w);
                            fk_mx_decode<128>(w, tm * 128, M, kb * 4, kbs, lane, area.data(), lo, hi, uni);
                        } else {
                            unsigned int w[BN / 32];
                            fk_mx_load<BN / 32>(sb, c.blocked, nkb, kbs, word, tn * BN, N, kb * 4, lane, w);
                            fk_mx_decode<BN>(w, tn * BN, N, kb * 4, kbs, lane, area.data() + T::SA_FLOATS, lo, hi, uni);
                        }
                        emin = std::min(emin, lo);
                        emax = std::max(emax, hi);
                    }
                    mm[4 * op] = emin;
                    mm[4 * op + 1] = emax;
                    mm[4 * op + 2] = uni;
                    mm[4 * op + 3] = 0;
                }
                /* a uniform stage: the kernel sums its four k32 steps on the tensor cores and promotes
                 * once with step 0's table */
                const bool one = fk_mx_uniform<BN>(area.data());
                for (int i = 0; i < T::MM; i++)
                    if (area[i] == -12345.0f && fails++ < 5)
                        printf("  %s: scale area entry %d not written\n", c.name, i);
                for (int ks = 0; ks < (one ? 1 : 4); ks++) {
                    const int k0 = kb * 128 + ks * 32, k1 = one ? k0 + 128 : k0 + 32;
                    for (int wg = 0; wg < 2; wg++)
                        for (int tid = 0; tid < 128; tid++) {
                            const int warp = tid >> 5, lane = tid & 31;
                            const int rl = wg * 64 + warp * 16 + (lane >> 2), cq = 2 * (lane & 3);
                            float acc[NACC];
                            for (int j = 0; j < BN / 8; j++)
                                for (int x = 0; x < 4; x++) {
                                    const int row = tm * 128 + rl + 8 * (x >> 1), col = tn * BN + 8 * j + cq + (x & 1);
                                    double s = 0.0;
                                    if (row < M && col < N)
                                        for (int k = k0; k < k1 && k < K; k++)
                                            s += (double)fk_fp8_to_f32(A[(size_t)row * K + k], c.e5a) *
                                                 fk_fp8_to_f32(B[(size_t)col * K + k], c.e5b);
                                    acc[4 * j + x] = (float)s;
                                }
                            float(&af)[NACC] = *(float(*)[NACC])(accf.data() + (wg * 128 + tid) * NACC);
                            fk_mx_promote<BN>(af, acc, area.data(), fk_mx_slow<BN>(area.data()), ks, rl, cq);
                        }
                }
            }
            for (int wg = 0; wg < 2; wg++)
                for (int tid = 0; tid < 128; tid++) {
                    const int warp = tid >> 5, lane = tid & 31;
                    for (int j = 0; j < BN / 8; j++)
                        for (int x = 0; x < 4; x++) {
                            const int row = tm * 128 + wg * 64 + warp * 16 + (lane >> 2) + 8 * (x >> 1);
                            const int col = tn * BN + 8 * j + 2 * (lane & 3) + (x & 1);
                            if (row < M && col < N)
                                D[(size_t)row * N + col] = accf[(wg * 128 + tid) * NACC + 4 * j + x];
                        }
                }
        }
}

static void run(const ecase &c)
{
    const int M = c.m, N = c.n, K = c.k, kbs = K / 32;
    std::vector<uint8_t> A((size_t)M * K), B((size_t)N * K);
    const float small = c.scales == 4 ? 1.0f / 2048 : 1.0f; /* huge scales need small sums */
    for (auto &v : A)
        v = fk_f32_to_fp8((float)normal() * (c.e5a ? 64.0f : 32.0f) * small, c.e5a);
    for (auto &v : B)
        v = fk_f32_to_fp8((float)normal() * (c.e5b ? 64.0f : 32.0f) * small, c.e5b);
    /* exponents as tests/test_cuda_gemm_mx.c draws them */
    std::vector<uint8_t> ea((size_t)M * kbs), eb((size_t)N * kbs);
    for (int kb = 0; kb < kbs; kb++) {
        const int kind = c.scales == 1 ? (kbs == 1 ? 2 : kb % 4) : 0;
        for (int m = 0; m < M; m++)
            ea[(size_t)m * kbs + kb] = (uint8_t)(kind == 1 ? 254 : kind >= 2 ? rnd(0, 1) : c.scales == 1 ? rnd(127, 131) : rnd(116, 126));
        for (int n = 0; n < N; n++)
            eb[(size_t)n * kbs + kb] = (uint8_t)(kind == 1 ? rnd(0, 8) : kind == 2 ? rnd(250, 254) : kind == 3 ? rnd(1, 2)
                                                 : c.scales == 1 ? rnd(127, 131) : rnd(116, 126));
    }
    if (c.scales == 3 || c.scales == 4) /* every product 2^-156 .. 2^-152 (tiny) or 2^128 .. 2^131 (huge) */
        for (int kb = 0; kb < kbs; kb++) {
            for (int m = 0; m < M; m++)
                ea[(size_t)m * kbs + kb] = (uint8_t)(c.scales == 3 ? rnd(0, 1) : rnd(253, 254));
            for (int n = 0; n < N; n++)
                eb[(size_t)n * kbs + kb] = (uint8_t)(c.scales == 3 ? rnd(99, 101) : rnd(129, 131));
        }
    if (c.scales == 5) /* one scale per 128 of K in every row (after fk_mx_norm): uniform stages */
        for (int kb = 0; kb < kbs; kb++) {
            for (int m = 0; m < M; m++)
                ea[(size_t)m * kbs + kb] = ea[(size_t)m * kbs + kb / 4 * 4];
            for (int n = 0; n < N; n++)
                eb[(size_t)n * kbs + kb] = eb[(size_t)n * kbs + kb / 4 * 4];
        }
    if (c.scales == 5 && M > 3) /* but not every stage: one row of A breaks its chunk 1 */
        if (kbs > 5)
            ea[(size_t)3 * kbs + 5] = (uint8_t)(ea[(size_t)3 * kbs + 5] + 1);
    if (c.scales == 2) {
        ea[(size_t)(M / 2) * kbs + kbs - 1] = 255;
        eb[(size_t)(N / 3) * kbs] = 255;
    }
    auto lay = [&](const std::vector<uint8_t> &e, int rows, std::vector<uint8_t> &s) {
        const int64_t cp = fk_blocked_cols(kbs);
        const int64_t n = c.blocked ? fk_blocked_rows(rows) * cp : (int64_t)rows * kbs;
        s.resize((size_t)(n + c.off + 8));
        for (auto &v : s)
            v = (uint8_t)rnd32(); /* garbage, NaN codes included */
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < kbs; k++)
                s[(size_t)(c.off + (c.blocked ? fk_blocked_offset(r, k, cp) : (int64_t)r * kbs + k))] = e[(size_t)r * kbs + k];
        return n;
    };
    std::vector<uint8_t> SA, SB;
    int64_t nsa = lay(ea, M, SA), nsb = lay(eb, N, SB);
    /* 16-byte aligned copies so that `off` alone decides the alignment */
    uint8_t *sa_buf = (uint8_t *)aligned_alloc(16, (SA.size() + 15) / 16 * 16);
    uint8_t *sb_buf = (uint8_t *)aligned_alloc(16, (SB.size() + 15) / 16 * 16);
    memcpy(sa_buf, SA.data(), SA.size());
    memcpy(sb_buf, SB.data(), SB.size());

    std::vector<float> D((size_t)M * N, -1.0f), Dc((size_t)M * N, -1.0f);
    if (c.bn == 64)
        emulate<64>(c, A, B, sa_buf + c.off, sb_buf + c.off, D);
    else
        emulate<128>(c, A, B, sa_buf + c.off, sb_buf + c.off, D);

    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) != FP8KIT_OK) {
        printf("cpu context failed\n");
        exit(1);
    }
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = d.scale_b = FP8KIT_SCALE_MX;
    d.scale_layout = c.blocked ? FP8KIT_LAYOUT_BLOCKED : FP8KIT_LAYOUT_PLAIN;
    fp8kit_gemm_args a;
    memset(&a, 0, sizeof a);
    a.alpha = 1.0f;
    a.a = fp8kit_tensor_2d(A.data(), c.e5a ? FP8KIT_E5M2 : FP8KIT_E4M3, M, K, K);
    a.b = fp8kit_tensor_2d(B.data(), c.e5b ? FP8KIT_E5M2 : FP8KIT_E4M3, N, K, K);
    a.scale_a = fp8kit_tensor_make(sa_buf + c.off, FP8KIT_E8M0, 1, &nsa);
    a.scale_b = fp8kit_tensor_make(sb_buf + c.off, FP8KIT_E8M0, 1, &nsb);
    a.d = fp8kit_tensor_2d(Dc.data(), FP8KIT_F32, M, N, N);
    if (fp8kit_gemm(ctx, &d, &a, NULL) != FP8KIT_OK) {
        printf("cpu gemm failed: %s\n", fp8kit_last_error(ctx));
        exit(1);
    }
    fp8kit_ctx_destroy(ctx);

    /* fp64 reference */
    double num = 0, den = 0, numr = 0;
    long nan_bad = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double r = 0.0;
            for (int k = 0; k < K; k++) {
                const int xa = ea[(size_t)m * kbs + k / 32], xb = eb[(size_t)n * kbs + k / 32];
                const double va = xa == 255 ? NAN : ldexp((double)fk_fp8_to_f32(A[(size_t)m * K + k], c.e5a), xa - 127);
                const double vb = xb == 255 ? NAN : ldexp((double)fk_fp8_to_f32(B[(size_t)n * K + k], c.e5b), xb - 127);
                r += va * vb;
            }
            const double v = D[(size_t)m * N + n], vc = Dc[(size_t)m * N + n];
            if (isnan(vc) || isnan(r)) {
                if (!isnan(v) && nan_bad++ < 3)
                    printf("  %s: (%d, %d) = %g, cpu %g, ref %g\n", c.name, m, n, v, vc, r);
                continue;
            }
            if (isnan(v)) {
                if (nan_bad++ < 3)
                    printf("  %s: NaN at (%d, %d), cpu %g\n", c.name, m, n, vc);
                continue;
            }
            num += (v - vc) * (v - vc);
            numr += (v - r) * (v - r);
            den += vc * vc;
        }
    const double rel = den > 0 ? sqrt(num / den) : 0.0, relr = den > 0 ? sqrt(numr / den) : 0.0;
    /* subnormal results keep few bits (both backends round each block's
     * x * 2^e once, to the same value): looser against fp64 only */
    const bool ok = rel <= 1e-6 && relr <= (c.scales == 3 ? 5e-3 : 1e-6) && nan_bad == 0 && den > 0;
    printf("  %-30s %4dx%4dx%5d bn %3d  vs cpu %.2e  vs fp64 %.2e  %s\n", c.name, M, N, K, c.bn, rel, relr,
           ok ? "ok" : "FAIL");
    if (!ok)
        fails++;
    free(sa_buf);
    free(sb_buf);
}

/* fk_mx_scale_exact against the CPU backend's exact form, (float)(x * (double)
 * (sa * sb)), for every pair of finite scale bytes and random x: sums of fp8
 * products (multiples of 2^-32 with up to 24 significant bits). */
static void check_scale_exact(void)
{
    long bad = 0, n = 0;
    for (int A = 0; A < 255; A++)
        for (int B = 0; B < 255; B++) {
            const float a = fk_mx_e8m0((unsigned)A), b = fk_mx_e8m0((unsigned)B);
            const int ea = fk_mx_exp(a), eb = fk_mx_exp(b);
            for (int t = 0; t < 40; t++) {
                const double m = ldexp((double)(rnd32() >> 8), -24) + 0.5; /* [0.5, 1.5) */
                double xd = ldexp(m, rnd(-32, 24));
                xd = ldexp(nearbyint(ldexp(xd, 32)), -32);
                const float x = (float)((rnd32() & 1) ? -xd : xd);
                if (x == 0.0f)
                    continue;
                const float want = (float)((double)x * ((double)a * (double)b));
                const float got = fk_mx_scale_exact(x, a, ea, b, eb);
                n++;
                if (!(want == got || (want != want && got != got)) && bad++ < 3)
                    printf("  scale_exact: bytes %d, %d, x %a: %a, want %a\n", A, B, x, got, want);
            }
        }
    printf("  fk_mx_scale_exact: %ld of %ld differ from the exact form\n", bad, n);
    if (bad)
        fails++;
}

int main(void)
{
    check_scale_exact();
    const ecase cases[] = {
        {"plain tile-multiple", 256, 256, 512, 128, false, 0, 0, false, false},
        {"blocked tile-multiple", 256, 256, 512, 128, true, 0, 0, false, false},
        {"plain K=96 odd (bytes)", 133, 97, 96, 128, false, 0, 0, false, false},
        {"blocked K=96 odd", 201, 129, 96, 64, true, 0, 0, false, false},
        {"plain K=32 bn64", 130, 70, 32, 64, false, 0, 0, false, false},
        {"plain K=160 (bytes)", 150, 136, 160, 128, false, 0, 0, false, false},
        {"blocked misaligned (bytes)", 190, 200, 512, 128, true, 0, 1, false, false},
        {"plain misaligned", 129, 65, 256, 64, false, 0, 3, false, false},
        {"edge plain", 200, 150, 512, 128, false, 1, 0, false, false},
        {"edge blocked bn64", 130, 130, 1024, 64, true, 1, 0, false, false},
        {"edge K=32 (fast, subnormal)", 64, 96, 32, 128, false, 1, 0, false, false},
        {"tiny products (subnormal D)", 130, 100, 256, 128, false, 3, 0, false, false},
        {"huge products blocked", 130, 100, 160, 64, true, 4, 0, false, false},
        {"NaN scales plain", 100, 90, 256, 128, false, 2, 0, false, false},
        {"NaN scales blocked", 140, 70, 96, 64, true, 2, 0, false, false},
        {"e4m3 x e5m2 blocked", 192, 136, 288, 128, true, 0, 0, false, true},
        {"e5m2 x e4m3 plain", 192, 136, 320, 128, false, 0, 0, true, false},
        {"e5m2 x e5m2 edge", 130, 130, 640, 128, false, 1, 0, true, true},
        {"uniform chunks plain", 200, 136, 544, 128, false, 5, 0, false, false},
        {"uniform chunks blocked bn64", 130, 96, 288, 64, true, 5, 0, true, false},
    };
    for (const ecase &c : cases)
        run(c);
    printf("gemm_mx_emu: %s\n", fails ? "FAILED" : "all passed");
    return fails ? 1 : 0;
}
