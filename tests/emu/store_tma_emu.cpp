/* store_tma_emu.cpp - host emulation of the Hopper GEMM's TMA-store epilogue
 * (src/cuda/gemm/sm90/store_tma.cuh and the headers it includes compiled as host C++, no GPU needed):
 * 128 std::threads per consumer warpgroup build their wgmma m64n128 fragments
 * from an exact fp32 product and run the kernel's fk_epi_tma_fetch /
 * fk_epi_prefetch and fk_epilogue_tma; shared memory is an array, the TMA
 * store a clipped copy out of its swizzled buffer (tests/emu/cuda/ptx/ptx.cuh).
 * Dense tiles (the store clips at D's last row) and grouped ones, contiguous
 * and masked, whose rows end at their group's: a warp whose 16 rows run past
 * it stores the rows before it itself. Rows a tile holds past its group's
 * end carry poison, and the tiles run from the last rows to the first, so a
 * store past a group's end would overwrite rows already written. D must be
 * byte-equal to the CPU backend's grouped GEMM (block scales of 1) on exact
 * inputs, with alpha, a per-group column bias (fp32 or bf16) and relu, bf16
 * and f16 D; rows no group owns keep their bytes. Built and run by
 * tests/test_store_tma_emu.sh. */
#include "host_device.h"
static inline float __fmul_rn(float a, float b) { return a * b; } /* (host fp32: round to nearest) */
#include "cuda/gemm/sm90/store_tma.cuh"
#include "format/codec.h"
#include <stdio.h>
#include <stdlib.h>
#include <memory>
#include <thread>
#include <vector>


static uint64_t rng_state = 0x7a57011e5eedull;
static int rand_int(int r) /* uniform in [-r, r] */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng_state >> 33) % (uint64_t)(2 * r + 1)) - r;
}

struct tcase {
    const char *name;
    int grouped, masked; /* dense (one group of all rows), contiguous, or masked slabs of t rows */
    int t, n, g;         /* rows (contiguous: T; masked: rows per slab), N, groups */
    std::vector<int> offs; /* contiguous: group ends; masked: counts */
    int dt, bias, act;   /* D type; bias 0 none, 1 fp32, 2 bf16; activation */
};

/* The epilogue of one consumer warpgroup's 64 rows at (m0, n0), rows ending at m_end, group g. */
template <bool EXT, bool GR>
static void run_warpgroup(const fk_gemm_params &p, const std::vector<float> &acc_all, int m0, int n0, int m_end,
                          int g)
{
    constexpr int BN = 128, NACC = BN / 2;
    std::vector<unsigned char> smem(2 * 4096 + 4 * FK_EPI_WTAB(BN) * 4, 0xA5);
    emu_smem_base = smem.data();
    std::barrier<> bar(128), w0(32), w1(32), w2(32), w3(32);
    emu_bar = &bar;
    emu_warp_bar[0] = &w0;
    emu_warp_bar[1] = &w1;
    emu_warp_bar[2] = &w2;
    emu_warp_bar[3] = &w3;
    float *tab = (float *)(smem.data() + 2 * 4096);
    std::vector<std::thread> th;
    for (int tid = 0; tid < 128; tid++)
        th.emplace_back([&, tid]() {
            emu_tid = tid;
            float acc[NACC]; /* rows past the group's end: what the next group's rows of A gave (poison here) */
            emu_fragment<BN>(acc, acc_all.data(), p.n, m0, n0, tid, m_end, 4096.0f);
            fk_epi_pre pre;
            if (fk_epi_tma_tab<EXT>(p)) { /* (tile_epilogue.cuh's fk_sm90_epi_start) */
                fk_epi_tma_fetch<BN, EXT>(p, tab, m0, n0, tid, g);
                pre = fk_epi_pre{};
                pre.m_end = m_end;
            } else {
                pre = fk_epi_prefetch<BN>(p, m0, n0, tid, m_end, g);
            }
            fk_epilogue_tma<BN, EXT, GR>(p, acc, fk_smem_addr(smem.data()), tab, pre, m0, n0, tid);
        });
    for (auto &t : th)
        t.join();
    emu_smem_base = nullptr;
}

static int run_case(const tcase &c)
{
    const int G = c.g, N = c.n, K = 128;
    const int T = c.masked ? G * c.t : c.t;
    std::vector<int> start(G), end(G);
    for (int q = 0; q < G; q++) {
        start[q] = c.masked ? q * c.t : q ? c.offs[q - 1] : 0;
        end[q] = c.masked ? q * c.t + c.offs[q] : c.offs[q];
    }
    std::vector<uint8_t> A((size_t)T * K), B((size_t)G * N * K);
    for (auto &a : A)
        a = fk_f32_to_e4m3((float)rand_int(3));
    for (auto &b : B)
        b = fk_f32_to_e4m3((float)rand_int(3));
    std::vector<float> biasf((size_t)G * N), ACC((size_t)T * N, 0.0f);
    std::vector<uint16_t> biash((size_t)G * N);
    for (size_t i = 0; i < biasf.size(); i++) {
        biasf[i] = (float)rand_int(8) * 0.5f;
        biash[i] = fk_f32_to_bf16(biasf[i]);
    }
    for (int q = 0; q < G; q++)
        for (int m = start[q]; m < end[q]; m++)
            for (int n = 0; n < N; n++) {
                float s = 0.0f; /* small integers: exact in any order */
                for (int k = 0; k < K; k++)
                    s += fk_e4m3_to_f32(A[(size_t)m * K + k]) * fk_e4m3_to_f32(B[((size_t)q * N + n) * K + k]);
                ACC[(size_t)m * N + n] = s;
            }
    const size_t ds = 2;
    std::vector<uint8_t> D((size_t)T * N * ds, 0x5A), Dc(D);

    fk_gemm_params p;
    memset(&p, 0, sizeof p);
    p.m = T;
    p.n = N;
    p.k = K;
    p.sa_mode = p.sb_mode = FP8KIT_SCALE_BLOCK; /* (promoted in the main loop: the epilogue applies alpha) */
    p.alpha = 0.5f;
    p.bias = c.bias == 1 ? (const void *)biasf.data() : c.bias == 2 ? (const void *)biash.data() : nullptr;
    p.bias_type = c.bias == 2 ? FP8KIT_BF16 : FP8KIT_F32;
    p.bias_mode = c.bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    p.act = c.act;
    p.d = D.data();
    p.ldd = N;
    p.d_type = c.dt;
    p.d_bulk = 2;
    emu_td = emu_tmap{D.data(), N, T, N};
    const bool ext = c.bias || c.act;
    /* tiles of 128 rows from each group's first, last rows first (see the top) */
    for (int q = G - 1; q >= 0; q--) {
        for (int row0 = start[q] + (end[q] - start[q] - 1) / 128 * 128; row0 >= start[q] && end[q] > start[q]; row0 -= 128)
            for (int wg = 1; wg >= 0; wg--)
                for (int n0 = 0; n0 < N; n0 += 128) {
                    const int m0 = row0 + 64 * wg;
                    if (!c.grouped)
                        ext ? run_warpgroup<true, false>(p, ACC, m0, n0, T, 0) : run_warpgroup<false, false>(p, ACC, m0, n0, T, 0);
                    else
                        ext ? run_warpgroup<true, true>(p, ACC, m0, n0, end[q], q)
                            : run_warpgroup<false, true>(p, ACC, m0, n0, end[q], q);
                }
    }

    /* the CPU backend on the same inputs: block scales of 1 */
    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) != FP8KIT_OK)
        return 1;
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = d.scale_b = FP8KIT_SCALE_BLOCK;
    d.bias = c.bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    d.act = (fp8kit_activation)c.act;
    const int64_t nb = (N + 127) / 128, sa_n = T, sb_n = (int64_t)G * nb;
    std::vector<float> ones((size_t)(T > G * nb ? T : G * nb), 1.0f);
    std::vector<int32_t> offs(c.offs.begin(), c.offs.end());
    fp8kit_status st;
    if (c.grouped) {
        fp8kit_grouped_gemm_args a;
        memset(&a, 0, sizeof a);
        const int64_t as[3] = {G, c.t, K}, dsh[3] = {G, c.t, N}, bs[3] = {G, N, K}, gn[2] = {G, N};
        if (c.masked) {
            a.a = fp8kit_tensor_make(A.data(), FP8KIT_E4M3, 3, as);
            a.d = fp8kit_tensor_make(Dc.data(), (fp8kit_dtype)c.dt, 3, dsh);
            a.layout = FP8KIT_GROUPED_MASKED;
        } else {
            a.a = fp8kit_tensor_2d(A.data(), FP8KIT_E4M3, T, K, K);
            a.d = fp8kit_tensor_2d(Dc.data(), (fp8kit_dtype)c.dt, T, N, N);
        }
        a.b = fp8kit_tensor_make(B.data(), FP8KIT_E4M3, 3, bs);
        a.offsets = offs.data();
        a.scale_a = fp8kit_tensor_make(ones.data(), FP8KIT_F32, 1, &sa_n);
        a.scale_b = fp8kit_tensor_make(ones.data(), FP8KIT_F32, 1, &sb_n);
        if (c.bias)
            a.bias = fp8kit_tensor_make((void *)p.bias, c.bias == 2 ? FP8KIT_BF16 : FP8KIT_F32, 2, gn);
        a.alpha = p.alpha;
        st = fp8kit_grouped_gemm(ctx, &d, &a, NULL);
    } else {
        fp8kit_gemm_args a;
        memset(&a, 0, sizeof a);
        const int64_t nn = N;
        a.a = fp8kit_tensor_2d(A.data(), FP8KIT_E4M3, T, K, K);
        a.b = fp8kit_tensor_2d(B.data(), FP8KIT_E4M3, N, K, K);
        a.scale_a = fp8kit_tensor_make(ones.data(), FP8KIT_F32, 1, &sa_n);
        a.scale_b = fp8kit_tensor_make(ones.data(), FP8KIT_F32, 1, &sb_n);
        if (c.bias)
            a.bias = fp8kit_tensor_make((void *)p.bias, c.bias == 2 ? FP8KIT_BF16 : FP8KIT_F32, 1, &nn);
        a.alpha = p.alpha;
        a.d = fp8kit_tensor_2d(Dc.data(), (fp8kit_dtype)c.dt, T, N, N);
        st = fp8kit_gemm(ctx, &d, &a, NULL);
    }
    if (st != FP8KIT_OK) {
        printf("%s: cpu gemm failed: %s\n", c.name, fp8kit_last_error(ctx));
        fp8kit_ctx_destroy(ctx);
        return 1;
    }
    fp8kit_ctx_destroy(ctx);
    long diff = 0, owned = 0;
    for (size_t i = 0; i < D.size(); i += 2) {
        const size_t row = i / 2 / N;
        for (int q = 0; q < G; q++)
            owned += (int)row >= start[q] && (int)row < end[q];
        if (D[i] == Dc[i] && D[i + 1] == Dc[i + 1])
            continue;
        if (diff++ < 3)
            printf("  D (%zu, %zu): %02x%02x, cpu %02x%02x\n", row, i / 2 % N, D[i + 1], D[i], Dc[i + 1], Dc[i]);
    }
    printf("%-44s T %4d N %4d G %2d D %-4s bias %d act %d: values differing %ld (owned %ld)\n", c.name, T, N, G,
           fp8kit_dtype_name((fp8kit_dtype)c.dt), c.bias, c.act, diff, owned);
    return diff != 0 || owned == 0;
}

int main(void)
{
    const int BF = FP8KIT_BF16, H = FP8KIT_F16, RELU = FP8KIT_ACT_RELU;
    const tcase cases[] = {
        {"dense, last tile clipped by the store", 0, 0, 200, 264, 1, {200}, BF, 0, 0},
        {"dense, bias relu f16", 0, 0, 77, 136, 1, {77}, H, 1, RELU},
        {"contiguous, group ends inside warps", 1, 0, 300, 256, 5, {9, 25, 151, 151, 300}, BF, 0, 0},
        {"contiguous, rows past the last group", 1, 0, 333, 136, 3, {40, 170, 250}, BF, 1, RELU},
        {"contiguous, bf16 bias per group, f16", 1, 0, 290, 200, 4, {17, 130, 147, 290}, H, 2, 0},
        {"contiguous, one group of all rows", 1, 0, 130, 128, 1, {130}, BF, 0, RELU},
        {"masked, counts 0 / 1 / 15 / 16 / 17 / full", 1, 1, 160, 128, 6, {0, 1, 15, 16, 17, 160}, BF, 1, 0},
        {"masked, slabs of 70, relu, bf16 bias", 1, 1, 70, 264, 3, {70, 33, 64}, H, 2, RELU},
    };
    int failed = 0;
    for (const tcase &c : cases)
        failed += run_case(c);
    printf("store_tma_emu: %d of %d cases failed\n", failed, (int)(sizeof cases / sizeof cases[0]));
    return failed != 0;
}
