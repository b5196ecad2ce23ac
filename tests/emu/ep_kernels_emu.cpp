/* ep_kernels_emu.cpp - host emulation of the expert-parallel layer's kernels
 * (src/ep/nccl/ep_kernels.cuh compiled as host C++, no GPU needed): W ranks
 * are W host buffers laid out by the library's own geometry (src/ep/ep_geom.c),
 * each kernel runs on one std::thread per CUDA thread (__syncthreads and the
 * warp ballot on a std::barrier), NCCL's exchange is a memcpy of each chunk,
 * and the steps are those of src/ep/nccl/ep_nccl.c: fp8kit_quantize into the
 * chunk, prep, exchange, scan + copy; pack, exchange, combine. Every rank's
 * received codes, scales, counts and status and its combine output must equal
 * the CPU reference's (src/ep/ep_ref.c) bit for bit, over 1 to 3 ranks, every
 * routing pattern of tests/ep_test_util.h, block1x128 (plain, mn_major) and
 * MX, max_tokens above and below the scan's 256-token blocks, twice per case
 * (stale buffers from the first round must not matter), then once in the
 * high-throughput mode's contiguous layout (the same rows in the same order
 * between the row ends, the same combine), with the vector and
 * the scalar paths of the pack and combine kernels; and the NCCL EP
 * transport's prep, scale-transpose, row-ends and weighting kernels against
 * their rules. NCCL and
 * NCCL EP themselves, streams and the launch configuration of ep_kernels.cu
 * are not emulated.
 * Built and run by tests/test_ep_kernels_emu.sh. */
#include <barrier>
#include <stdarg.h>
#include <stdint.h>
#include <thread>
#include <vector>

/* what the kernels use of CUDA, on the host */
struct uint4 {
    unsigned x, y, z, w;
};
struct emu_dim3 {
    unsigned x, y, z;
};
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim, gridDim;
static std::barrier<> *emu_bar;
static int emu_preds[1024];
#define __global__
#define __device__
#define __shared__ static
#define __syncthreads() emu_bar->arrive_and_wait()
/* the whole block calls it at once in these kernels: a block-wide exchange */
static unsigned __ballot_sync(unsigned, int pred)
{
    emu_preds[threadIdx.x] = pred != 0;
    emu_bar->arrive_and_wait();
    unsigned m = 0;
    const unsigned w0 = threadIdx.x / 32 * 32;
    for (unsigned l = 0; l < 32; l++)
        if (w0 + l < blockDim.x && emu_preds[w0 + l])
            m |= 1u << l;
    emu_bar->arrive_and_wait();
    return m;
}
static int __popc(unsigned v) { return __builtin_popcount(v); }
static int atomicExch(int32_t *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static float __fadd_rn(float a, float b) { return a + b; } /* -ffp-contract=off: each rounded to fp32 */
static float __fmul_rn(float a, float b) { return a * b; }
#include "ep/nccl/ep_kernels.cuh"

#include "test_util.h"
#include "ep_test_util.h"
#include "ep/ep_impl.h"

/* ep_geom.c's one need of the library's internals: the message goes to stderr */
extern "C" fp8kit_status fk_fail(const fp8kit_ctx *ctx, fp8kit_status st, const char *fmt, ...)
{
    (void)ctx;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return st;
}

/* A kernel launch: `threads` threads live through the whole grid, one block
 * after the other (the __shared__ statics are the current block's). */
template <class F> static void launch(emu_dim3 grid, unsigned threads, F f)
{
    gridDim = grid;
    blockDim = {threads, 1, 1};
    std::barrier<> bar((std::ptrdiff_t)threads);
    emu_bar = &bar;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; t++)
        ts.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            for (unsigned by = 0; by < grid.y; by++)
                for (unsigned bx = 0; bx < grid.x; bx++) {
                    blockIdx = {bx, by, 0};
                    f();
                    bar.arrive_and_wait();
                }
        });
    for (auto &t : ts)
        t.join();
}

static fk_rng rng;
static fp8kit_ctx *cpu;

/* The dispatch of every rank (fk_ep_impl_dispatch's steps), checked. */
static void dispatch(const char *what, const fp8kit_ep_config *cfg, int W, const ep_t_inputs &c,
                     std::vector<fk_ep_geom> &g, std::vector<unsigned char *> &base, const fk_ep_ref_rank *res)
{
    const int64_t H = cfg->hidden, k = cfg->top_k;
    for (int r = 0; r < W; r++) {
        const fk_ep_geom *G = &g[r];
        unsigned char *b = base[r], *send = b + G->off_send;
        const int64_t t = c.in[r].t;
        if (t > 0) {
            const fp8kit_quant_desc d = fk_ep_quant_desc(cfg);
            fp8kit_tensor x = fp8kit_tensor_2d(c.x[r], FP8KIT_BF16, t, H, H);
            fp8kit_tensor q = fp8kit_tensor_2d(send + G->ck_codes, cfg->fp8, t, H, H);
            fp8kit_tensor sc = cfg->mx ? fp8kit_tensor_2d(send + G->ck_scales, FP8KIT_E8M0, t, H / 32, H / 32)
                                       : fp8kit_tensor_2d(send + G->ck_scales, FP8KIT_F32, t, H / 128, H / 128);
            CHECK_STATUS(fp8kit_quantize(cpu, &d, &x, &q, &sc, NULL), FP8KIT_OK);
        }
        memset(b + G->off_status, 0, 4);
        const unsigned blocks = t > 0 ? (unsigned)((t + FK_EP_THREADS - 1) / FK_EP_THREADS) : 1;
        launch({blocks, 1, 1}, FK_EP_THREADS, [&] {
            fk_ep_prep_kernel((int32_t *)send, (int32_t *)(send + G->ck_ids), (float *)(b + G->off_w),
                              (int32_t *)(b + G->off_retidx), (int32_t *)(b + G->off_status), c.ids[r], c.w[r], t,
                              (int)k, (int32_t)cfg->num_experts, (int32_t)G->el, (int32_t)(cfg->max_tokens * G->kp),
                              (int32_t)G->kp);
        });
    }
    for (int r = 0; r < W; r++) /* the exchange: rank r's chunk to every rank p, at slot r */
        for (int p = 0; p < W; p++)
            memcpy(base[p] + g[p].off_recv + (size_t)r * g[p].chunk, base[r] + g[r].off_send, g[r].chunk);
    for (int p = 0; p < W; p++) {
        const fk_ep_geom *G = &g[p];
        unsigned char *b = base[p];
        launch({(unsigned)G->el, 1, 1}, FK_EP_THREADS, [&] {
            fk_ep_scan_kernel(b + G->off_recv, G->chunk, G->ck_ids, (int32_t *)(b + G->off_counts),
                              (int32_t *)(b + G->off_slot), W, (int32_t)G->rank, (int)k, (int32_t)G->el,
                              (int32_t)cfg->max_tokens, (int32_t)G->kp, (int32_t)G->m);
        });
        /* high throughput: the row ends, then the rows into the contiguous layout */
        int32_t *ends = G->rows ? (int32_t *)(b + G->off_ends) : NULL;
        if (ends)
            launch({1, 1, 1}, 1, [&] {
                fk_ep_ends_kernel((int32_t *)(b + G->off_counts), (int32_t *)(b + G->off_counts), ends, (int32_t)G->el);
            });
        launch({(unsigned)G->el, 3, 1}, 64, [&] {
            fk_ep_copy_kernel(b + G->off_recv, G->chunk, G->ck_codes, G->ck_scales, (int32_t *)(b + G->off_counts),
                              (int32_t *)(b + G->off_slot), b + G->off_x, b + G->off_scale, H, (int32_t)G->m,
                              (int32_t)cfg->max_tokens, (int32_t)G->kp, cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR,
                              (int32_t)G->mp4, ends);
        });
        const fk_ep_ref_rank *R = &res[p];
        const int32_t *cnt = (const int32_t *)(b + G->off_counts);
        const int32_t st = *(const int32_t *)(b + G->off_status);
        CHECK(st == R->status, "%s: rank %d status %d, want %d", what, p, st, R->status);
        const int64_t sb = H / 32, nbf = H / 128, m = G->m;
        for (int64_t e = 0; e < G->el; e++) {
            CHECK(cnt[e] == R->counts[e], "%s: rank %d expert %lld: count %d, want %d", what, p, (long long)e, cnt[e],
                  R->counts[e]);
            if (ends)
                CHECK(ends[e] == (e ? ends[e - 1] : 0) + cnt[e], "%s: rank %d expert %lld: row end %d", what, p,
                      (long long)e, ends[e]);
            for (int64_t row = 0; row < R->counts[e] && row < cnt[e]; row++) {
                const int64_t at = e * m + row; /* the reference's (masked) row */
                const int64_t gr = ends ? (e ? ends[e - 1] : 0) + row : at; /* ours: the same row, in order */
                const int64_t rmp4 = (m + 3) / 4 * 4;
                CHECK(!memcmp(b + G->off_x + gr * H, R->x + at * H, (size_t)H),
                      "%s: rank %d expert %lld row %lld: codes differ", what, p, (long long)e, (long long)row);
                int same = 1;
                if (cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR) {
                    for (int64_t bb = 0; bb < nbf; bb++) {
                        const int64_t o = ends ? (bb * G->mp4 + gr) * 4 : ((e * nbf + bb) * G->mp4 + row) * 4;
                        same &= !memcmp(b + G->off_scale + o,
                                        (const uint8_t *)R->scale + ((e * nbf + bb) * rmp4 + row) * 4, 4);
                    }
                } else {
                    same = !memcmp(b + G->off_scale + gr * sb, (const uint8_t *)R->scale + at * sb, (size_t)sb);
                }
                CHECK(same, "%s: rank %d expert %lld row %lld: scales differ", what, p, (long long)e, (long long)row);
            }
        }
    }
}

/* The combine of every rank (fk_ep_impl_combine's steps), checked; vec
 * picks the pack and combine kernels' 16-byte paths, ld_pad pads out's rows. */
static void combine(const char *what, const fp8kit_ep_config *cfg, int W, const ep_t_inputs &c,
                    std::vector<fk_ep_geom> &g, std::vector<unsigned char *> &base, uint16_t *const *y,
                    const fk_ep_ref_rank *res, int vec, int64_t ld_pad)
{
    const int64_t H = cfg->hidden, k = cfg->top_k;
    for (int p = 0; p < W; p++) {
        const fk_ep_geom *G = &g[p];
        unsigned char *b = base[p];
        /* high throughput: y (R, H) holds the reference's rows in the received (the same) order */
        const int32_t *ends = G->rows ? (const int32_t *)(b + G->off_ends) : NULL;
        std::vector<uint16_t> yc(ends ? (size_t)(G->rows * H) : 0, 0x7FC0);
        for (int64_t e = 0; ends && e < G->el; e++) {
            const int64_t b0 = e ? ends[e - 1] : 0;
            memcpy(yc.data() + b0 * H, y[p] + e * G->m * H, (size_t)((ends[e] - b0) * H) * 2);
        }
        launch({(unsigned)G->el, 2, 1}, 64, [&] {
            fk_ep_ret_pack_kernel(ends ? yc.data() : y[p], G->m * H, H, vec, (const int32_t *)(b + G->off_counts),
                                  (const int32_t *)(b + G->off_slot), b + G->off_ret_send, G->ret_chunk, H,
                                  (int32_t)G->m, (int32_t)cfg->max_tokens, (int32_t)G->kp, ends);
        });
    }
    for (int r = 0; r < W; r++) /* rank p's return chunk for r to r, at slot p */
        for (int p = 0; p < W; p++)
            memcpy(base[r] + g[r].off_ret_recv + (size_t)p * g[r].ret_chunk,
                   base[p] + g[p].off_ret_send + (size_t)r * g[p].ret_chunk, g[p].ret_chunk);
    for (int r = 0; r < W; r++) {
        const int64_t t = c.in[r].t, ld = H + ld_pad;
        if (!t)
            continue;
        const fk_ep_geom *G = &g[r];
        unsigned char *b = base[r];
        std::vector<uint16_t> out((size_t)(t * ld), 0xDEAD);
        launch({(unsigned)t, 1, 1}, 32, [&] {
            fk_ep_combine_kernel(b + G->off_ret_recv, G->ret_chunk, (const int32_t *)(b + G->off_retidx),
                                 (const float *)(b + G->off_w), out.data(), ld, vec, H, (int)k,
                                 (int32_t)(cfg->max_tokens * G->kp));
        });
        long bad = 0;
        for (int64_t i = 0; i < t; i++)
            for (int64_t h = 0; h < H; h++)
                if (out[(size_t)(i * ld + h)] != res[r].out[i * H + h] && bad++ < 3)
                    CHECK(0, "%s: rank %d out[%lld][%lld] = 0x%04x, want 0x%04x", what, r, (long long)i,
                          (long long)h, out[(size_t)(i * ld + h)], res[r].out[i * H + h]);
        CHECK(bad == 0, "%s: rank %d: %ld combined values differ", what, r, bad);
    }
}

/* The NCCL EP transport's own kernels on rank r's inputs: the prep (ids NCCL
 * EP routes by: invalid and repeated experts -1, status; combine weights: an
 * expert's weights summed in top-k order at its first entry) and, for
 * mn_major, the transpose of the plain scales NCCL EP writes. */
static void nep_checks(const char *what, const fp8kit_ep_config *cfg, int W, const ep_t_inputs &c)
{
    const int64_t k = cfg->top_k, E = cfg->num_experts;
    for (int r = 0; r < W; r++) {
        const int64_t t = c.in[r].t;
        std::vector<int32_t> cids((size_t)(t * k + 1), 77);
        std::vector<float> wb((size_t)(t * k + 1), 77.0f);
        int32_t status = 0;
        const unsigned blocks = t > 0 ? (unsigned)((t + FK_EP_THREADS - 1) / FK_EP_THREADS) : 1;
        launch({blocks, 1, 1}, FK_EP_THREADS, [&] {
            fk_ep_nep_prep_kernel(cids.data(), wb.data(), &status, c.ids[r], c.w[r], t, (int)k, (int32_t)E);
        });
        int bad_id = 0;
        for (int64_t i = 0; i < t; i++)
            for (int64_t j = 0; j < k; j++) {
                const int32_t e = c.ids[r][i * k + j];
                const int valid = e >= 0 && e < E;
                bad_id |= e < -1 || e >= E;
                int first = valid;
                for (int64_t q = 0; q < j && first; q++)
                    first = c.ids[r][i * k + q] != e;
                float sum = 0.0f;
                for (int64_t q = j; q < k && first; q++)
                    if (c.ids[r][i * k + q] == e)
                        sum += c.w[r][i * k + q];
                CHECK(cids[(size_t)(i * k + j)] == (first ? e : -1), "%s: nep prep rank %d token %lld entry %lld: id %d",
                      what, r, (long long)i, (long long)j, cids[(size_t)(i * k + j)]);
                CHECK(!memcmp(&wb[(size_t)(i * k + j)], &sum, 4), "%s: nep prep rank %d token %lld entry %lld: w %g, "
                      "want %g", what, r, (long long)i, (long long)j, wb[(size_t)(i * k + j)], sum);
            }
        CHECK(status == (bad_id ? (int32_t)FP8KIT_ERR_INVALID_ARGUMENT : 0), "%s: nep prep rank %d: status %d", what,
              r, status);
        CHECK(cids[(size_t)(t * k)] == 77, "%s: nep prep rank %d wrote past t x k", what, r);
    }
    /* high throughput: NCCL EP's int64 counts into counts and row ends (a negative count as 0), and y weighted
     * row by row in bf16 below the last row end */
    {
        const int32_t hel = 5;
        const int64_t cnt64[5] = {3, 0, 7, -2, 4};
        int32_t counts[5] = {0}, ends[5] = {0};
        launch({1, 1, 1}, 1, [&] { fk_ep_ends_kernel(cnt64, counts, ends, hel); });
        const int32_t wc[5] = {3, 0, 7, 0, 4}, we[5] = {3, 3, 10, 10, 14};
        for (int e = 0; e < hel; e++)
            CHECK(counts[e] == wc[e] && ends[e] == we[e], "%s: nep ends e %d: %d / %d, want %d / %d", what, e,
                  counts[e], ends[e], wc[e], we[e]);
        const int64_t H = 24, R = 20;
        std::vector<uint16_t> y((size_t)(R * H)), yw((size_t)(R * H), 0xBEEF);
        std::vector<float> w((size_t)R);
        for (int64_t i = 0; i < R * H; i++)
            y[(size_t)i] = fk_f32_to_bf16((float)fk_rng_normal(&rng));
        for (int64_t r = 0; r < R; r++)
            w[(size_t)r] = (float)fk_rng_unif(&rng);
        launch({2, 1, 1}, 32, [&] { fk_ep_nep_weight_kernel(y.data(), w.data(), yw.data(), &ends[hel - 1], H); });
        for (int64_t r = 0; r < R; r++)
            for (int64_t h = 0; h < H; h++) {
                const uint16_t want = r < ends[hel - 1] ? fk_f32_to_bf16(w[(size_t)r] * fk_bf16_to_f32(y[(size_t)(r * H + h)]))
                                                        : (uint16_t)0xBEEF;
                CHECK(yw[(size_t)(r * H + h)] == want, "%s: nep weight row %lld col %lld", what, (long long)r,
                      (long long)h);
            }
    }
    if (cfg->scale_layout != FP8KIT_LAYOUT_MN_MAJOR)
        return;
    const int32_t el = 3, m = 37, nb = (int32_t)(cfg->hidden / 128), mp4 = (m + 3) / 4 * 4;
    const int32_t counts[3] = {0, 37, 5};
    std::vector<float> plain((size_t)(el * m * nb)), mn((size_t)(el * nb * mp4), -1.0f);
    for (size_t i = 0; i < plain.size(); i++)
        plain[i] = (float)i;
    launch({(unsigned)el, 2, 1}, 64, [&] { fk_ep_nep_scales_kernel(plain.data(), mn.data(), counts, m, nb, mp4); });
    for (int32_t e = 0; e < el; e++)
        for (int32_t b = 0; b < nb; b++)
            for (int32_t row = 0; row < mp4; row++) {
                const float want = row < counts[e] ? plain[(size_t)((e * m + row) * nb + b)] : -1.0f;
                CHECK(mn[(size_t)((e * nb + b) * mp4 + row)] == want, "%s: nep scales e %d b %d row %d", what, e, b,
                      row);
            }
}

static void run_case(const fp8kit_ep_config *cfg, int W, int route, const int64_t *t, const char *what)
{
    std::vector<fk_ep_geom> g((size_t)W);
    std::vector<unsigned char *> base((size_t)W);
    for (int r = 0; r < W; r++) {
        CHECK_STATUS(fk_ep_geometry(NULL, "ep_kernels_emu", cfg, W, r, &g[r]), FP8KIT_OK);
        base[r] = (unsigned char *)calloc(g[r].total, 1); /* fp8kit_ep_create zeroes its buffers */
    }
    ep_t_inputs c;
    if (ep_t_make(&c, cfg, W, t, route, &rng)) {
        CHECK(0, "out of memory");
        return;
    }
    std::vector<fk_ep_ref_rank> res((size_t)W);
    CHECK_STATUS(fk_ep_ref_dispatch(cpu, cfg, W, c.in, res.data()), FP8KIT_OK);
    uint16_t **y = ep_t_make_y(&rng, cfg, W, res.data());
    CHECK_STATUS(fk_ep_ref_combine(cpu, cfg, W, c.in, (const uint16_t *const *)y, res.data()), FP8KIT_OK);
    for (int round = 0; round < 2; round++) {
        dispatch(what, cfg, W, c, g, base, res.data());
        combine(what, cfg, W, c, g, base, y, res.data(), round == 0, round ? 8 : 0);
    }
    /* the high-throughput mode on the same transport: the same rows and order in the contiguous layout,
     * the same combine */
    fp8kit_ep_config ht = *cfg;
    ht.mode = FP8KIT_EP_HIGH_THROUGHPUT;
    std::vector<fk_ep_geom> gh((size_t)W);
    std::vector<unsigned char *> bh((size_t)W);
    char whatht[200];
    snprintf(whatht, sizeof whatht, "%s high throughput", what);
    for (int r = 0; r < W; r++) {
        CHECK_STATUS(fk_ep_geometry(NULL, "ep_kernels_emu", &ht, W, r, &gh[r]), FP8KIT_OK);
        CHECK(gh[r].rows == gh[r].m * gh[r].kp, "%s: R %lld", whatht, (long long)gh[r].rows);
        bh[r] = (unsigned char *)calloc(gh[r].total, 1);
    }
    dispatch(whatht, &ht, W, c, gh, bh, res.data());
    combine(whatht, &ht, W, c, gh, bh, y, res.data(), 1, 0);
    for (int r = 0; r < W; r++)
        free(bh[r]);
    nep_checks(what, cfg, W, c);
    ep_t_free_y(y, W);
    fk_ep_ref_free(res.data(), W);
    ep_t_free(&c);
    for (int r = 0; r < W; r++)
        free(base[r]);
}

int main()
{
    rng = fk_rng_seeded("ep_kernels_emu");
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cpu) != FP8KIT_OK)
        return 1;
    int n = 0;
    for (int W = 1; W <= 3; W++)
        for (int mode = 0; mode < 3; mode++) /* block1x128 plain e4m3, mn_major e5m2 pow2, mx rceil */
            for (int route = 0; route < EP_ROUTE_COUNT; route++) {
                if ((route + mode + W) % 2) /* half of the combinations */
                    continue;
                fp8kit_ep_config cfg;
                memset(&cfg, 0, sizeof cfg);
                cfg.num_experts = (1 + route % 3) * W + (W == 1 ? 2 : 0);
                cfg.hidden = mode == 2 ? 384 : 256;
                cfg.top_k = cfg.num_experts < 5 ? cfg.num_experts : 5;
                cfg.max_tokens = route % 2 ? 37 : 300; /* 300: two blocks of the scan */
                cfg.fp8 = mode == 1 ? FP8KIT_E5M2 : FP8KIT_E4M3;
                cfg.mx = mode == 2;
                cfg.rounding = mode == 2 ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
                cfg.pow2 = mode == 1;
                cfg.scale_layout = mode == 1 ? FP8KIT_LAYOUT_MN_MAJOR : FP8KIT_LAYOUT_PLAIN;
                int64_t t[3];
                for (int r = 0; r < W; r++)
                    t[r] = r == 0 ? cfg.max_tokens
                                  : route == EP_ROUTE_SPARSE && r == W - 1
                                        ? 0
                                        : (int64_t)(fk_rng_u32(&rng) % (uint32_t)(cfg.max_tokens + 1));
                char what[160];
                snprintf(what, sizeof what, "W=%d %s %s E=%lld k=%lld mt=%lld", W,
                         mode == 2 ? "mx" : mode ? "1x128 mn_major" : "1x128", ep_route_names[route],
                         (long long)cfg.num_experts, (long long)cfg.top_k, (long long)cfg.max_tokens);
                run_case(&cfg, W, route, t, what);
                n++;
            }
    printf("ep_kernels_emu: %d cases, each dispatched and combined twice\n", n);
    fp8kit_ctx_destroy(cpu);
    return fk_test_summary("ep_kernels_emu");
}
