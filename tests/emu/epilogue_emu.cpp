/* epilogue_emu.cpp - host emulation of the Hopper GEMM epilogue
 * (src/cuda/gemm/sm90/store_general.cuh and the headers it includes compiled as host C++, no GPU needed): for every
 * output tile and consumer warpgroup, 128 std::threads each build their wgmma
 * m64nBN accumulator fragment (rows warp*16 + lane/4 + {0, 8}, columns
 * 8j + 2(lane%4) + {0, 1}) from an exact fp32 product and run fk_epi_prefetch
 * + fk_epilogue, the kernel's own code; barriers and shuffles come from
 * tests/emu/cuda/ptx/ptx.cuh. D and the fused-quantization scales (OUTQ_MX,
 * OUTQ_BLOCK1X128) must be byte-equal to the CPU backend's on inputs where
 * y is exact (small-integer fp8 values, power-of-two scales, short K).
 * Built and run by tests/test_epilogue_emu.sh. */
#include "host_device.h"
#include "cuda/gemm/sm90/store_general.cuh"
#include "format/codec.h"
#include <stdio.h>
#include <stdlib.h>
#include <thread>
#include <vector>

enum { GELU_TANH_ = FP8KIT_ACT_GELU_TANH, SILU_ = FP8KIT_ACT_SILU };


static uint64_t rng_state = 0x5eed0f8c0ffeeull;
static int rand_int(int r) /* uniform in [-r, r] */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng_state >> 33) % (uint64_t)(2 * r + 1)) - r;
}

struct emu_case {
    int m, n, k, bn;
    int oq, dt, hp, rceil, pow2; /* fp8kit_out_quant, fp8kit_dtype D, out_hp, ... */
    int bias, act, beta, rowsc, ldpad;
};

/* One consumer warpgroup's epilogue of the tile at (m0, n0). */
template <int BN>
static void run_warpgroup(const fk_gemm_params &p, const std::vector<float> &acc_all, int m0, int n0)
{
    constexpr int NACC = BN / 2;
    std::vector<float> area(64 * FK_EPI_CH + 64 * FK_EPI_ROW_BYTES(BN) / 4), tab(FK_EPI_TAB(BN));
    std::barrier<> bar(128);
    emu_bar = &bar;
    std::vector<std::thread> th;
    for (int tid = 0; tid < 128; tid++)
        th.emplace_back([&, tid]() {
            emu_tid = tid;
            float acc[NACC];
            emu_fragment<BN>(acc, acc_all.data(), p.n, m0, n0, tid, p.m, 0.0f);
            const fk_epi_pre pre = fk_epi_prefetch<BN>(p, m0, n0, tid);
            fk_epilogue<BN>(p, acc, area.data(), tab.data(), pre, m0, n0, tid, 1);
        });
    for (auto &t : th)
        t.join();
}

static int run_case(const emu_case &c)
{
    const int M = c.m, N = c.n, K = c.k;
    const bool rowq = c.oq == FP8KIT_OUTQ_MX || c.oq == FP8KIT_OUTQ_BLOCK1X128;
    std::vector<uint8_t> A((size_t)M * K), B((size_t)N * K);
    for (auto &a : A)
        a = fk_f32_to_e4m3((float)rand_int(3));
    for (auto &b : B)
        b = fk_f32_to_e4m3((float)rand_int(3));
    std::vector<float> SA(M), SB(N), C((size_t)M * N), BI(M > N ? M : N), ACC((size_t)M * N);
    for (auto &s : SA)
        s = ldexpf(1.0f, -1 - rand_int(1));
    for (auto &s : SB)
        s = ldexpf(1.0f, -1 - rand_int(1));
    for (auto &x : C)
        x = (float)rand_int(4);
    for (auto &x : BI)
        x = (float)rand_int(4);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float s = 0.0f; /* integers: exact in any order */
            for (int k = 0; k < K; k++)
                s += fk_e4m3_to_f32(A[(size_t)m * K + k]) * fk_e4m3_to_f32(B[(size_t)n * K + k]);
            ACC[(size_t)m * N + n] = s;
        }
    const size_t ds = fp8kit_dtype_size((fp8kit_dtype)c.dt);
    const int ldd = N + c.ldpad;
    const int64_t sd_cols = c.oq == FP8KIT_OUTQ_MX ? N / 32 : (N + 127) / 128;
    const size_t sd_bytes = rowq ? (size_t)M * sd_cols * (c.oq == FP8KIT_OUTQ_MX ? 1 : 4) : 0;
    std::vector<uint8_t> D((size_t)M * ldd * ds, 0xFF), Dc(D), SD(sd_bytes + 64, 0x5A), SDc(SD);
    const float alpha = 0.5f, beta = c.beta ? -0.5f : 0.0f;
    const fp8kit_scale_mode sm = c.rowsc ? FP8KIT_SCALE_ROW : FP8KIT_SCALE_TENSOR;

    fk_gemm_params p;
    memset(&p, 0, sizeof p);
    p.m = M;
    p.n = N;
    p.k = K;
    p.sa_mode = p.sb_mode = sm;
    p.sa = SA.data();
    p.sb = SB.data();
    p.alpha = alpha;
    p.beta = beta;
    p.c = beta != 0.0f ? C.data() : nullptr;
    p.ldc = N;
    p.c_type = FP8KIT_F32;
    p.bias = c.bias ? BI.data() : nullptr;
    p.bias_type = FP8KIT_F32;
    p.bias_mode = c.bias;
    p.act = c.act;
    p.d = D.data();
    p.ldd = ldd;
    p.d_type = c.dt;
    p.out_quant = c.oq;
    p.scale_d_out = rowq ? SD.data() : nullptr;
    p.out_hp = c.hp;
    p.out_rceil = c.rceil;
    p.out_pow2 = c.pow2;
    for (int m0 = 0; m0 < M; m0 += 64)
        for (int n0 = 0; n0 < N; n0 += c.bn) {
            if (c.bn == 64)
                run_warpgroup<64>(p, ACC, m0, n0);
            else if (c.bn == 128)
                run_warpgroup<128>(p, ACC, m0, n0);
            else if (c.bn == 192)
                run_warpgroup<192>(p, ACC, m0, n0);
            else
                run_warpgroup<256>(p, ACC, m0, n0);
        }

    /* the CPU backend on the same inputs */
    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) != FP8KIT_OK)
        return 1;
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = d.scale_b = sm;
    d.bias = (fp8kit_bias_mode)c.bias;
    d.act = (fp8kit_activation)c.act;
    d.out_quant = (fp8kit_out_quant)c.oq;
    d.out_hp = (fp8kit_dtype)c.hp;
    d.out_rounding = c.rceil ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
    d.out_pow2 = c.pow2;
    fp8kit_gemm_args a;
    memset(&a, 0, sizeof a);
    int64_t one = 1, nm = M, nn = N, nb = c.bias == FP8KIT_BIAS_ROW ? M : N, sh[2] = {M, sd_cols};
    a.a = fp8kit_tensor_2d(A.data(), FP8KIT_E4M3, M, K, K);
    a.b = fp8kit_tensor_2d(B.data(), FP8KIT_E4M3, N, K, K);
    a.scale_a = fp8kit_tensor_make(SA.data(), FP8KIT_F32, 1, c.rowsc ? &nm : &one);
    a.scale_b = fp8kit_tensor_make(SB.data(), FP8KIT_F32, 1, c.rowsc ? &nn : &one);
    a.alpha = alpha;
    a.beta = beta;
    if (beta != 0.0f)
        a.c = fp8kit_tensor_2d(C.data(), FP8KIT_F32, M, N, N);
    if (c.bias)
        a.bias = fp8kit_tensor_make(BI.data(), FP8KIT_F32, 1, &nb);
    a.d = fp8kit_tensor_2d(Dc.data(), (fp8kit_dtype)c.dt, M, N, ldd);
    if (rowq)
        a.scale_d = fp8kit_tensor_make(SDc.data(), c.oq == FP8KIT_OUTQ_MX ? FP8KIT_E8M0 : FP8KIT_F32, 2, sh);
    const fp8kit_status st = fp8kit_gemm(ctx, &d, &a, NULL);
    if (st != FP8KIT_OK) {
        printf("cpu gemm failed: %s\n", fp8kit_last_error(ctx));
        fp8kit_ctx_destroy(ctx);
        return 1;
    }
    fp8kit_ctx_destroy(ctx);

    /* Fused quantization with gelu_tanh / silu: the epilogue evaluates them
     * as y * sigmoid (expf, rcp estimate + Newton step), the CPU backend as
     * 0.5 y (1 + tanhf) and y / (1 + expf): y may differ in its last bits,
     * and in gelu's negative tail (y < -5, where the CPU's 1 + tanhf is 0)
     * by tiny amounts. There a code may differ from the CPU's by up to 1/8
     * of its value plus 2^-6 (in units of the group scale, whose codes reach
     * 448 or 57344); scales stay byte-equal (the amax is a large y). */
    const bool near_ok = rowq && (c.act == GELU_TANH_ || c.act == SILU_);
    long dd = 0, dsd = 0, nonzero = 0, dnear = 0;
    for (size_t i = 0; i < D.size(); i++) {
        nonzero += D[i] != 0 && D[i] != 0x80 && D[i] != 0xFF;
        if (D[i] == Dc[i])
            continue;
        if (near_ok && (i % ldd) < (size_t)N) {
            const double a = fk_fp8_to_f32(D[i], c.dt == FP8KIT_E5M2), b = fk_fp8_to_f32(Dc[i], c.dt == FP8KIT_E5M2);
            if (fabs(a - b) <= 0.125 * fabs(b) + 0x1p-6) {
                dnear++;
                continue;
            }
        }
        if (dd++ < 3)
            printf("  D byte (%zu, %zu): %02x, cpu %02x\n", i / ds / ldd, i / ds % ldd, D[i], Dc[i]);
    }
    if (dnear)
        printf("  %ld codes differ from the cpu's within the activation tolerance\n", dnear);
    for (size_t i = 0; i < SD.size(); i++)
        if (SD[i] != SDc[i] && dsd++ < 3)
            printf("  scale byte %zu: %02x, cpu %02x\n", i, SD[i], SDc[i]);
    printf("%-6s %4dx%4dx%3d bn %3d D %-4s hp %-4s rceil %d pow2 %d bias %d act %d beta %d row %d pad %d: "
           "D bytes differing %ld, scale bytes %ld (nonzero D bytes %ld)\n",
           c.oq == FP8KIT_OUTQ_MX ? "mx" : c.oq == FP8KIT_OUTQ_BLOCK1X128 ? "1x128" : "none", M, N, K, c.bn,
           fp8kit_dtype_name((fp8kit_dtype)c.dt), rowq ? fp8kit_dtype_name((fp8kit_dtype)c.hp) : "-", c.rceil,
           c.pow2, c.bias, c.act, c.beta, c.rowsc, c.ldpad, dd, dsd, nonzero);
    return dd != 0 || dsd != 0 || nonzero == 0;
}

int main(void)
{
    const int E4 = FP8KIT_E4M3, E5 = FP8KIT_E5M2, BF = FP8KIT_BF16, H = FP8KIT_F16, F = FP8KIT_F32;
    const int MX = FP8KIT_OUTQ_MX, B128 = FP8KIT_OUTQ_BLOCK1X128, COL = FP8KIT_BIAS_COL, ROW = FP8KIT_BIAS_ROW;
    const int RELU = FP8KIT_ACT_RELU, GELU = FP8KIT_ACT_GELU_TANH, SILU = FP8KIT_ACT_SILU;
    const emu_case cases[] = {
        /* the general epilogue (staged chunks): checks the emulation itself */
        {77, 96, 64, 64, FP8KIT_OUTQ_NONE, E4, 0, 0, 0, COL, RELU, 1, 1, 0},
        {70, 200, 64, 192, FP8KIT_OUTQ_NONE, BF, 0, 0, 0, ROW, 0, 1, 0, 8},
        /* fused mx: every tile width, floor / rceil, e4m3 / e5m2, out_hp, bias, act, odd M, N = 32 * odd */
        {77, 224, 64, 64, MX, E4, BF, 0, 0, COL, RELU, 0, 0, 0},
        {129, 288, 64, 192, MX, E4, H, 1, 0, ROW, 0, 1, 1, 3},
        {65, 352, 64, 128, MX, E5, F, 0, 0, 0, RELU, 1, 0, 0},
        {131, 544, 64, 256, MX, E5, BF, 1, 0, COL, GELU, 0, 1, 1},
        /* fused 1x128: 128 and 256 wide tiles, partial last groups, pow2 */
        {77, 300, 64, 128, B128, E4, BF, 0, 0, ROW, 0, 0, 0, 0},
        {131, 200, 64, 128, B128, E5, F, 0, 1, COL, RELU, 1, 1, 5},
        {129, 392, 64, 128, B128, E4, H, 0, 0, COL, SILU, 0, 0, 0},
        {65, 520, 64, 256, B128, E4, BF, 0, 1, ROW, RELU, 1, 1, 0},
        {200, 700, 64, 256, B128, E5, H, 0, 0, COL, 0, 1, 0, 2},
        /* 8-byte code stores: N % 8 != 0 with an 8-aligned row stride (partial
         * last segment), gelu / silu (near-equal codes, see run_case), beta */
        {67, 196, 64, 128, B128, E4, H, 0, 0, COL, SILU, 0, 1, 4},
        {97, 160, 64, 64, MX, E4, BF, 0, 0, ROW, GELU, 1, 0, 0},
        {45, 992, 64, 192, MX, E5, F, 1, 0, ROW, SILU, 0, 1, 8},
    };
    int failed = 0;
    for (const emu_case &c : cases)
        failed += run_case(c);
    printf("epilogue_emu: %d of %d cases failed\n", failed, (int)(sizeof cases / sizeof cases[0]));
    return failed != 0;
}
