/* ep_multi_gpu.c - the expert-parallel layer (include/fp8kit_ep.h) on real
 * GPUs against its CPU reference (src/ep/ep_ref.c): one process per rank,
 * forked from this one, each on its own GPU with one NCCL communicator
 * (the unique id passed through a pipe; NCCL loaded with dlopen, as the
 * library loads it). Every process makes every rank's inputs from the same
 * seed, runs the reference for the whole world and checks its own rank:
 * the received codes and scales bit for bit, the counts and the row order
 * (rows past the counts are not compared), the status word, and the
 * combine output bit for bit; for T in {1, 7, 128, max_tokens} per rank
 * (other ranks get other counts, 0 included), every routing pattern of
 * tests/ep_test_util.h (uneven, experts without tokens, fewer than top_k
 * experts, repeated and invalid ids), block1x128 with plain and mn_major
 * scales and MX; then a dispatch + combine captured in a CUDA graph and
 * replayed on new inputs, and on sm_90 the received layout through
 * fp8kit_grouped_gemm (masked) against the CPU backend's.
 * World size 1 runs the whole path too (NCCL sends to itself).
 * Usage: ep_multi_gpu [--world N] [--timeout S] [--transport nccl|nccl_ep] [--high-throughput]
 * (N: default every visible GPU, one rank per GPU; S: seconds before a hung
 * rank is killed, 300; nccl_ep: the NCCL EP transport, whose rows are
 * compared as sets per expert and whose combine is checked within 2^-7
 * relative per token, H a multiple of 512; it needs libnccl_ep.so and NCCL
 * 2.30 in the process, and skips when they cannot be loaded;
 * --high-throughput: the contiguous layout, rows compared per expert between
 * the row ends (in order with transport nccl, whose combine stays bit-exact;
 * as sets with nccl_ep, its combine within 2^-6))
 * FK_TEST_SEED=n replays. Exit 0 pass, 1 fail, 2 bad usage, 77 skipped (no
 * GPU, no CUDA backend, no libnccl.so.2). Built by CMake when the library is
 * built with NCCL (FP8KIT_HAVE_NCCL); also a CTest test. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "fp8kit_ep.h"
#include "test_util.h"
#include "ep_test_util.h"

/* The NCCL calls the test itself makes (the library loads its own set). */
typedef struct t_nccl {
    ncclResult_t (*GetUniqueId)(ncclUniqueId *id);
    ncclResult_t (*CommInitRank)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
    ncclResult_t (*CommDestroy)(ncclComm_t comm);
    const char *(*GetErrorString)(ncclResult_t r);
} t_nccl;

static int t_nccl_load(t_nccl *n)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 0;
    *(void **)&n->GetUniqueId = dlsym(lib, "ncclGetUniqueId");
    *(void **)&n->CommInitRank = dlsym(lib, "ncclCommInitRank");
    *(void **)&n->CommDestroy = dlsym(lib, "ncclCommDestroy");
    *(void **)&n->GetErrorString = dlsym(lib, "ncclGetErrorString");
    return n->GetUniqueId && n->CommInitRank && n->CommDestroy && n->GetErrorString;
}

static int rank_id, world_n;
static fk_rng rng;
static fp8kit_ctx *gctx, *cpu;
static cudaStream_t stream;
static ncclComm_t comm;

#define DIE(...)                                                             \
    do {                                                                     \
        fprintf(stderr, "ep_multi_gpu rank %d: ", rank_id);                  \
        fprintf(stderr, __VA_ARGS__);                                        \
        fputc('\n', stderr);                                                 \
        fflush(stdout);                                                      \
        _exit(1);                                                            \
    } while (0)
#define CU(call)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess)                                                          \
            DIE("%s: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__, __LINE__);   \
    } while (0)
#define FK(call)                                                                                   \
    do {                                                                                           \
        fp8kit_status s_ = (call);                                                                 \
        if (s_ != FP8KIT_OK)                                                                       \
            DIE("%s: %s: %s", #call, fp8kit_status_string(s_), fp8kit_last_error(gctx));           \
    } while (0)

/* Device buffers of one configuration, at their largest. */
typedef struct dev_bufs {
    void *x, *ids, *w, *y, *out;
} dev_bufs;

static void *dmalloc(size_t n)
{
    void *p = NULL;
    CU(cudaMalloc(&p, n ? n : 1));
    return p;
}

static void *hmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        DIE("out of host memory (%zu bytes)", n);
    return p;
}

/* A layer of cfg on the communicator, its recv views and the device inputs
 * of its largest dispatch; with_yo: also y (room for either layout: E_local
 * x W x max_tokens rows, at least R) and out. */
static fp8kit_ep *open_layer(const fp8kit_ep_config *cfg, int with_yo, fp8kit_ep_recv *rv, dev_bufs *d)
{
    fp8kit_ep *ep = NULL;
    FK(fp8kit_ep_create(gctx, comm, cfg, &ep));
    FK(fp8kit_ep_recv_view(ep, rv));
    const int64_t H = cfg->hidden, k = cfg->top_k, mt = cfg->max_tokens;
    const int64_t yrows = rv->local_experts * rv->world * mt;
    *d = (dev_bufs){dmalloc((size_t)(mt * H) * 2), dmalloc((size_t)(mt * k) * 4), dmalloc((size_t)(mt * k) * 4),
                    with_yo ? dmalloc((size_t)(yrows * H) * 2) : NULL, with_yo ? dmalloc((size_t)(mt * H) * 2) : NULL};
    return ep;
}

static void close_layer(fp8kit_ep *ep, dev_bufs *d)
{
    FK(fp8kit_ep_destroy(ep));
    cudaFree(d->x), cudaFree(d->ids), cudaFree(d->w), cudaFree(d->y), cudaFree(d->out);
}

/* The transport under test (--transport): NCCL EP delivers the same rows in
 * its own order and sums the combine itself. */
static fp8kit_ep_transport transport = FP8KIT_EP_TRANSPORT_NCCL;
/* --high-throughput: the contiguous layout (transport NCCL_EP) */
static fp8kit_ep_mode ep_mode = FP8KIT_EP_LOW_LATENCY;

/* Rows compared as multisets: records of rec_len bytes (a row's codes, then
 * its scale bytes), sorted. */
static size_t rec_len;
static int rec_cmp(const void *a, const void *b) { return memcmp(a, b, rec_len); }

/* The n records of got and want (rec_len bytes each) are equal: in order
 * (transport NCCL), or as multisets (NCCL EP keeps its own order); frees both. */
static void check_same_set(const char *what, int64_t e, int64_t n, uint8_t *got, uint8_t *want)
{
    const int sets = transport == FP8KIT_EP_TRANSPORT_NCCL_EP;
    if (sets) {
        qsort(got, (size_t)n, rec_len, rec_cmp);
        qsort(want, (size_t)n, rec_len, rec_cmp);
    }
    CHECK(memcmp(got, want, rec_len * (size_t)n) == 0, "%s: expert %lld: the %lld rows (%s) differ", what,
          (long long)e, (long long)n, sets ? "as a set" : "in order");
    free(got);
    free(want);
}

/* Row r (of R) of a contiguous recv layout as one record (mn_major scale rows rp4 apart). */
static void row_record_ht(uint8_t *dst, const uint8_t *x, const uint8_t *s, int64_t r, int64_t R, int64_t H, int mn)
{
    const int64_t nbf = H / 128, sb = H / 32, rp4 = (R + 3) / 4 * 4;
    memcpy(dst, x + r * H, (size_t)H);
    if (mn)
        for (int64_t b = 0; b < nbf; b++)
            memcpy(dst + H + b * 4, s + (b * rp4 + r) * 4, 4);
    else
        memcpy(dst + H, s + r * sb, (size_t)sb);
}

/* Row `row` of expert e of a recv layout (codes x, scales s) as one record. */
static void row_record(uint8_t *dst, const uint8_t *x, const uint8_t *s, int64_t e, int64_t row, int64_t m,
                       int64_t H, int mn)
{
    const int64_t nbf = H / 128, sb = H / 32, mp4 = (m + 3) / 4 * 4, at = e * m + row;
    memcpy(dst, x + at * H, (size_t)H);
    if (mn)
        for (int64_t b = 0; b < nbf; b++)
            memcpy(dst + H + b * 4, s + ((e * nbf + b) * mp4 + row) * 4, 4);
    else
        memcpy(dst + H, s + at * sb, (size_t)sb);
}

/* This rank's dispatch result against the reference's. */
static void check_recv(const char *what, const fp8kit_ep_config *cfg, const fp8kit_ep_recv *rv,
                       const fk_ep_ref_rank *ref)
{
    const int64_t el = ref->el, m = ref->m, H = cfg->hidden, nbf = H / 128, sb = H / 32, mp4 = (m + 3) / 4 * 4;
    const int mn = cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR;
    uint8_t *x = (uint8_t *)hmalloc((size_t)(el * m * H));
    uint8_t *s = (uint8_t *)hmalloc(ref->scale_bytes);
    int32_t counts[4096], status = -1;
    CU(cudaMemcpy(counts, rv->counts, (size_t)el * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(&status, rv->status, 4, cudaMemcpyDeviceToHost));
    CHECK(status == ref->status, "%s: status %d, want %d", what, status, ref->status);
    if (ep_mode == FP8KIT_EP_HIGH_THROUGHPUT) { /* expert e: rows ends[e-1] .. ends[e] - 1, as a set */
        const int64_t R = rv->max_rows;
        int32_t ends[4096];
        CU(cudaMemcpy(ends, rv->offsets, (size_t)el * 4, cudaMemcpyDeviceToHost));
        uint8_t *xh = (uint8_t *)hmalloc((size_t)(R * H)), *sh = (uint8_t *)hmalloc((size_t)(R * sb) + 64);
        const int64_t sbytes = mn ? (int64_t)nbf * ((R + 3) / 4 * 4) * 4 : R * sb;
        CU(cudaMemcpy(xh, rv->x.data, (size_t)(R * H), cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(sh, rv->scale.data, (size_t)sbytes, cudaMemcpyDeviceToHost));
        rec_len = (size_t)(H + sb);
        for (int64_t e = 0; e < el; e++) {
            const int64_t b0 = e ? ends[e - 1] : 0, n = ends[e] - b0;
            CHECK(counts[e] == ref->counts[e] && n == ref->counts[e], "%s: expert %lld: count %d, rows %lld, want %d",
                  what, (long long)e, counts[e], (long long)n, ref->counts[e]);
            if (n != ref->counts[e] || n < 0)
                continue;
            uint8_t *ga = (uint8_t *)hmalloc(rec_len * (size_t)n), *wa = (uint8_t *)hmalloc(rec_len * (size_t)n);
            for (int64_t row = 0; row < n; row++) {
                row_record_ht(ga + rec_len * (size_t)row, xh, sh, b0 + row, R, H, mn);
                row_record(wa + rec_len * (size_t)row, ref->x, (const uint8_t *)ref->scale, e, row, m, H, mn);
            }
            check_same_set(what, e, n, ga, wa);
        }
        free(xh), free(sh), free(x), free(s);
        return;
    }
    CU(cudaMemcpy(x, rv->x.data, (size_t)(el * m * H), cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(s, rv->scale.data, ref->scale_bytes, cudaMemcpyDeviceToHost));
    for (int64_t e = 0; e < el; e++) {
        CHECK(counts[e] == ref->counts[e], "%s: expert %lld: count %d, want %d", what, (long long)e, counts[e],
              ref->counts[e]);
        const int64_t n = counts[e] < ref->counts[e] ? counts[e] : ref->counts[e];
        if (transport == FP8KIT_EP_TRANSPORT_NCCL_EP) { /* the same rows, in NCCL EP's order */
            rec_len = (size_t)(H + sb);
            uint8_t *ga = (uint8_t *)hmalloc(rec_len * (size_t)n), *wa = (uint8_t *)hmalloc(rec_len * (size_t)n);
            for (int64_t row = 0; row < n; row++) {
                row_record(ga + rec_len * (size_t)row, x, s, e, row, m, H, mn);
                row_record(wa + rec_len * (size_t)row, ref->x, (const uint8_t *)ref->scale, e, row, m, H, mn);
            }
            check_same_set(what, e, n, ga, wa);
            continue;
        }
        for (int64_t row = 0; row < n; row++) {
            const int64_t at = e * m + row;
            const int32_t src = ref->src[at];
            CHECK(memcmp(x + at * H, ref->x + at * H, (size_t)H) == 0,
                  "%s: expert %lld row %lld (rank %d token %d): codes differ", what, (long long)e, (long long)row,
                  src / (int32_t)cfg->max_tokens, src % (int32_t)cfg->max_tokens);
            int same = 1;
            if (mn) {
                for (int64_t b = 0; b < nbf; b++)
                    same &= memcmp(s + ((e * nbf + b) * mp4 + row) * 4,
                                   (const uint8_t *)ref->scale + ((e * nbf + b) * mp4 + row) * 4, 4) == 0;
            } else {
                same = memcmp(s + at * sb, (const uint8_t *)ref->scale + at * sb, (size_t)sb) == 0;
            }
            CHECK(same, "%s: expert %lld row %lld (rank %d token %d): scales differ", what, (long long)e,
                  (long long)row, src / (int32_t)cfg->max_tokens, src % (int32_t)cfg->max_tokens);
        }
    }
    free(x);
    free(s);
}

/* NCCL EP: y in the received order. y_ref holds the reference's rows (its
 * order); each received row is found among the reference's rows of its expert
 * by its bytes (codes and scales: one row per token and expert) and gets that
 * row's y. Uploaded into dy. */
static void upload_y_in_recv_order(const fp8kit_ep_config *cfg, const fp8kit_ep_recv *rv, const fk_ep_ref_rank *ref,
                                   const uint16_t *y_ref, void *dy)
{
    const int64_t el = ref->el, m = ref->m, H = cfg->hidden;
    const int mn = cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR, ht = ep_mode == FP8KIT_EP_HIGH_THROUGHPUT;
    /* the received layout: masked (el, m) rows, or contiguous R rows with the row ends */
    const int64_t R = ht ? rv->max_rows : el * m;
    const size_t sbytes = ht ? (size_t)(mn ? (H / 128) * ((R + 3) / 4 * 4) * 4 : R * (H / 32)) : ref->scale_bytes;
    int32_t ends[4096];
    if (ht)
        CU(cudaMemcpy(ends, rv->offsets, (size_t)el * 4, cudaMemcpyDeviceToHost));
    rec_len = (size_t)(H + H / 32);
    uint8_t *x = (uint8_t *)hmalloc((size_t)(R * H)), *s = (uint8_t *)hmalloc(sbytes);
    uint8_t *a = (uint8_t *)hmalloc(rec_len);
    uint16_t *y = (uint16_t *)hmalloc((size_t)(R * H) * 2);
    memset(y, 0, (size_t)(R * H) * 2);
    CU(cudaMemcpy(x, rv->x.data, (size_t)(R * H), cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(s, rv->scale.data, sbytes, cudaMemcpyDeviceToHost));
    for (int64_t e = 0; e < el; e++) {
        const int64_t n = ref->counts[e];
        /* the reference's rows sorted by their bytes, each followed by its row index */
        const size_t rl = rec_len;
        uint8_t *tab = (uint8_t *)hmalloc((rl + 8) * (size_t)n);
        for (int64_t q = 0; q < n; q++) {
            row_record(tab + (rl + 8) * (size_t)q, ref->x, (const uint8_t *)ref->scale, e, q, m, H, mn);
            memcpy(tab + (rl + 8) * (size_t)q + rl, &q, 8);
        }
        qsort(tab, (size_t)n, rl + 8, rec_cmp); /* compares the first rec_len bytes */
        const int64_t b0 = ht ? (e ? ends[e - 1] : 0) : e * m; /* this expert's first received row */
        for (int64_t r = 0; r < n; r++) {
            if (ht)
                row_record_ht(a, x, s, b0 + r, R, H, mn);
            else
                row_record(a, x, s, e, r, m, H, mn);
            const uint8_t *hit = (const uint8_t *)bsearch(a, tab, (size_t)n, rl + 8, rec_cmp);
            CHECK(hit != NULL, "NCCL EP: expert %lld row %lld is no row of the reference", (long long)e, (long long)r);
            if (hit) {
                int64_t q;
                memcpy(&q, hit + rl, 8);
                memcpy(y + (b0 + r) * H, y_ref + (e * m + q) * H, (size_t)H * 2);
            }
        }
        free(tab);
    }
    CU(cudaMemcpy(dy, y, (size_t)(R * H) * 2, cudaMemcpyHostToDevice));
    /* a copy from pageable memory may still be in flight when cudaMemcpy returns, and the
     * test's stream does not wait for the legacy stream: wait here */
    CU(cudaDeviceSynchronize());
    free(x), free(s), free(a), free(y);
}

static void check_out(const char *what, const fp8kit_ep_config *cfg, const void *dout, int64_t t,
                      const uint16_t *want)
{
    const int64_t H = cfg->hidden;
    uint16_t *o = (uint16_t *)hmalloc((size_t)(t * H) * 2);
    CU(cudaMemcpy(o, dout, (size_t)(t * H) * 2, cudaMemcpyDeviceToHost));
    if (transport == FP8KIT_EP_TRANSPORT_NCCL_EP) {
        /* NCCL EP sums in its own order (and folds a repeated expert's weights):
         * per token, relative error of at most two bf16 roundings, 2^-7 */
        for (int64_t i = 0; i < t; i++) {
            double err = 0, ref = 0;
            for (int64_t j = 0; j < H; j++) {
                const double a = fk_bf16_to_f32(o[i * H + j]), b = fk_bf16_to_f32(want[i * H + j]);
                err += (a - b) * (a - b);
                ref += b * b;
            }
            /* high throughput: each row weighted in bf16 first (one more rounding per term) */
            const double lim = ep_mode == FP8KIT_EP_HIGH_THROUGHPUT ? 1.0 / 64.0 : 1.0 / 128.0;
            CHECK(err <= ref * lim * lim && (ref > 0 || err == 0), "%s: token %lld: rel %g against the reference",
                  what, (long long)i, sqrt(err / (ref + 1e-300)));
        }
        free(o);
        return;
    }
    long bad = 0;
    for (int64_t i = 0; i < t * H; i++)
        if (o[i] != want[i] && bad++ < 3)
            CHECK(0, "%s: out[%lld][%lld] = 0x%04x, want 0x%04x", what, (long long)(i / H), (long long)(i % H), o[i],
                  want[i]);
    CHECK(bad == 0, "%s: %ld combined values differ", what, bad);
    free(o);
}

/* Uploads this rank's inputs and y. */
static void upload(const fp8kit_ep_config *cfg, const ep_t_inputs *c, uint16_t *const *y, const fk_ep_ref_rank *ref,
                   dev_bufs *d)
{
    const int64_t t = c->in[rank_id].t, H = cfg->hidden, k = cfg->top_k;
    CU(cudaMemcpy(d->x, c->x[rank_id], (size_t)(t * H) * 2, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(d->ids, c->ids[rank_id], (size_t)(t * k) * 4, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(d->w, c->w[rank_id], (size_t)(t * k) * 4, cudaMemcpyHostToDevice));
    if (y)
        CU(cudaMemcpy(d->y, y[rank_id], (size_t)(ref->el * ref->m * H) * 2, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize()); /* (pageable copies may still be in flight; the stream does not wait for them) */
}

/* t of each rank for a case whose own count is T: even ranks T, odd ranks
 * others, the last rank none in the sparse routing. */
static void rank_counts(int64_t T, int64_t mt, int route, int64_t *t)
{
    for (int r = 0; r < world_n; r++)
        t[r] = r % 2 == 0 ? T : (T * 5 + 3 * r) % (mt + 1);
    if (route == EP_ROUTE_SPARSE && world_n > 1)
        t[world_n - 1] = 0;
}

static void run_config(const char *name, const fp8kit_ep_config *cfg)
{
    fp8kit_ep_recv rv;
    dev_bufs d;
    fp8kit_ep *ep = open_layer(cfg, 1, &rv, &d);
    const int64_t H = cfg->hidden, mt = cfg->max_tokens, el = rv.local_experts, m = rv.max_rows;
    const int64_t Ts[4] = {1, 7, 128, mt};
    long ncase = 0;
    for (int ti = 0; ti < 4; ti++) {
        if (Ts[ti] > mt || (ti < 3 && Ts[ti] == mt))
            continue;
        for (int route = 0; route < EP_ROUTE_COUNT; route++) {
            int64_t t[64];
            rank_counts(Ts[ti], mt, route, t);
            char what[200];
            snprintf(what, sizeof what, "%s T=%lld %s", name, (long long)Ts[ti], ep_route_names[route]);
            ep_t_inputs c;
            if (ep_t_make(&c, cfg, world_n, t, route, &rng))
                DIE("out of host memory");
            fk_ep_ref_rank res[64];
            FK(fk_ep_ref_dispatch(cpu, cfg, world_n, c.in, res));
            uint16_t **y = ep_t_make_y(&rng, cfg, world_n, res);
            if (!y)
                DIE("out of host memory");
            FK(fk_ep_ref_combine(cpu, cfg, world_n, c.in, (const uint16_t *const *)y, res));
            upload(cfg, &c, y, &res[rank_id], &d);
            const int64_t tr = t[rank_id];
            fp8kit_tensor x = fp8kit_tensor_2d(d.x, FP8KIT_BF16, tr, H, H);
            FK(fp8kit_ep_dispatch(ep, tr ? &x : NULL, tr ? (const int32_t *)d.ids : NULL,
                                  tr ? (const float *)d.w : NULL, tr, &rv, stream));
            CU(cudaStreamSynchronize(stream));
            check_recv(what, cfg, &rv, &res[rank_id]);
            /* y follows the received layout: NCCL EP's row order, or the contiguous layout */
            if (transport == FP8KIT_EP_TRANSPORT_NCCL_EP || ep_mode == FP8KIT_EP_HIGH_THROUGHPUT)
                upload_y_in_recv_order(cfg, &rv, &res[rank_id], y[rank_id], d.y);
            const int64_t ys[3] = {el, m, H}, yh[2] = {rv.max_rows, H};
            fp8kit_tensor yt = ep_mode == FP8KIT_EP_HIGH_THROUGHPUT ? fp8kit_tensor_make(d.y, FP8KIT_BF16, 2, yh)
                                                                    : fp8kit_tensor_make(d.y, FP8KIT_BF16, 3, ys);
            fp8kit_tensor out = fp8kit_tensor_2d(d.out, FP8KIT_BF16, tr ? tr : 1, H, H);
            FK(fp8kit_ep_combine(ep, &yt, tr ? &out : NULL, stream));
            CU(cudaStreamSynchronize(stream));
            if (tr)
                check_out(what, cfg, d.out, tr, res[rank_id].out);
            ep_t_free_y(y, world_n);
            fk_ep_ref_free(res, world_n);
            ep_t_free(&c);
            ncase++;
        }
    }
    printf("ep_multi_gpu rank %d: %s: %ld cases\n", rank_id, name, ncase);
    close_layer(ep, &d);
}

/* Dispatch + combine captured once in a CUDA graph, replayed on new inputs
 * written into the same buffers. */
static void graph_case(const fp8kit_ep_config *cfg)
{
    fp8kit_ep_recv rv;
    dev_bufs d;
    fp8kit_ep *ep = open_layer(cfg, 1, &rv, &d);
    const int64_t H = cfg->hidden, mt = cfg->max_tokens, el = rv.local_experts, m = rv.max_rows;
    int64_t t[64];
    rank_counts(mt, mt, EP_ROUTE_UNIFORM, t);
    const int64_t tr = t[rank_id];
    fp8kit_tensor x = fp8kit_tensor_2d(d.x, FP8KIT_BF16, tr ? tr : 1, H, H);
    const int64_t ys[3] = {el, m, H}, yh[2] = {rv.max_rows, H};
    fp8kit_tensor yt = ep_mode == FP8KIT_EP_HIGH_THROUGHPUT ? fp8kit_tensor_make(d.y, FP8KIT_BF16, 2, yh)
                                                            : fp8kit_tensor_make(d.y, FP8KIT_BF16, 3, ys);
    fp8kit_tensor out = fp8kit_tensor_2d(d.out, FP8KIT_BF16, tr ? tr : 1, H, H);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    FK(fp8kit_ep_dispatch(ep, tr ? &x : NULL, (const int32_t *)d.ids, (const float *)d.w, tr, NULL, stream));
    FK(fp8kit_ep_combine(ep, &yt, tr ? &out : NULL, stream));
    CU(cudaStreamEndCapture(stream, &graph));
    CU(cudaGraphInstantiate(&exec, graph, 0));
    for (int it = 0; it < 2; it++) {
        const int route = it ? EP_ROUTE_DUPS : EP_ROUTE_SKEWED;
        ep_t_inputs c;
        if (ep_t_make(&c, cfg, world_n, t, route, &rng))
            DIE("out of host memory");
        fk_ep_ref_rank res[64];
        FK(fk_ep_ref_dispatch(cpu, cfg, world_n, c.in, res));
        /* y must exist before the graph runs: the counts of this routing are the reference's */
        uint16_t **y = ep_t_make_y(&rng, cfg, world_n, res);
        FK(fk_ep_ref_combine(cpu, cfg, world_n, c.in, (const uint16_t *const *)y, res));
        upload(cfg, &c, y, &res[rank_id], &d);
        CU(cudaGraphLaunch(exec, stream));
        CU(cudaStreamSynchronize(stream));
        char what[64];
        snprintf(what, sizeof what, "graph replay %d", it);
        check_recv(what, cfg, &rv, &res[rank_id]);
        /* (NCCL EP: y, uploaded before the replay, cannot follow the order NCCL EP
         * picks during it; the contiguous layout's rows depend on the replay's
         * counts: their combines are checked by run_config) */
        if (tr && transport == FP8KIT_EP_TRANSPORT_NCCL && ep_mode == FP8KIT_EP_LOW_LATENCY)
            check_out(what, cfg, d.out, tr, res[rank_id].out);
        ep_t_free_y(y, world_n);
        fk_ep_ref_free(res, world_n);
        ep_t_free(&c);
    }
    CU(cudaGraphExecDestroy(exec));
    CU(cudaGraphDestroy(graph));
    close_layer(ep, &d);
    printf("ep_multi_gpu rank %d: graph capture and 2 replays\n", rank_id);
}

/* The received layout as fp8kit_grouped_gemm's masked A on the GPU against
 * the CPU backend's grouped GEMM of the reference's layout (bf16 D, within
 * docs/spec.md 3's bf16 bound over each expert's valid rows). */
static void grouped_case(const fp8kit_ep_config *cfg)
{
    fp8kit_ep_recv rv;
    dev_bufs d;
    fp8kit_ep *ep = open_layer(cfg, 0, &rv, &d);
    const int64_t H = cfg->hidden, mt = cfg->max_tokens, el = rv.local_experts, m = rv.max_rows;
    const int64_t N = 256;
    int64_t t[64];
    rank_counts(mt, mt, EP_ROUTE_SKEWED, t);
    ep_t_inputs c;
    if (ep_t_make(&c, cfg, world_n, t, EP_ROUTE_SKEWED, &rng))
        DIE("out of host memory");
    fk_ep_ref_rank res[64];
    FK(fk_ep_ref_dispatch(cpu, cfg, world_n, c.in, res));
    upload(cfg, &c, NULL, &res[rank_id], &d);
    const int64_t tr = t[rank_id];
    fp8kit_tensor x = fp8kit_tensor_2d(d.x, FP8KIT_BF16, tr ? tr : 1, H, H);
    FK(fp8kit_ep_dispatch(ep, tr ? &x : NULL, (const int32_t *)d.ids, (const float *)d.w, tr, NULL, stream));

    /* experts B (el, N, H), quantized on the CPU, uploaded */
    const int mx = cfg->mx;
    float *bf = (float *)hmalloc(sizeof(float) * (size_t)(el * N * H));
    for (int64_t i = 0; i < el * N * H; i++)
        bf[i] = (float)fk_rng_normal(&rng);
    const int64_t bshape[3] = {el, N, H}, dshape[3] = {el, m, N};
    fp8kit_quant_desc qd = fp8kit_quant_desc_default(mx ? FP8KIT_SCHEME_MX : FP8KIT_SCHEME_BLOCK128X128);
    fp8kit_tensor bx = fp8kit_tensor_make(bf, FP8KIT_F32, 3, bshape), bq, bs;
    FK(fp8kit_quant_shapes(&qd, &bx, &bq, &bs));
    const size_t bsz = (size_t)fp8kit_tensor_numel(&bs) * (mx ? 1 : 4);
    bq.data = hmalloc((size_t)(el * N * H));
    bs.data = hmalloc(bsz);
    FK(fp8kit_quantize(cpu, &qd, &bx, &bq, &bs, NULL));
    fp8kit_gemm_desc gd;
    memset(&gd, 0, sizeof gd);
    gd.scale_a = gd.scale_b = mx ? FP8KIT_SCALE_MX : FP8KIT_SCALE_BLOCK;
    gd.scale_layout = cfg->scale_layout;
    fp8kit_grouped_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    ga.a = fp8kit_tensor_make(res[rank_id].x, cfg->fp8, 3, rv.x.shape);
    ga.scale_a = rv.scale;
    ga.scale_a.data = res[rank_id].scale;
    ga.b = bq;
    ga.scale_b = bs;
    ga.offsets = res[rank_id].counts;
    ga.alpha = 1.0f;
    float *dc = (float *)hmalloc(sizeof(float) * (size_t)(el * m * N));
    ga.d = fp8kit_tensor_make(dc, FP8KIT_F32, 3, dshape);
    ga.layout = FP8KIT_GROUPED_MASKED;
    FK(fp8kit_grouped_gemm(cpu, &gd, &ga, NULL)); /* the reference's layout on the CPU backend */

    void *dbq = dmalloc((size_t)(el * N * H)), *dbs = dmalloc(bsz), *dd = dmalloc((size_t)(el * m * N) * 2);
    int32_t *dstat = (int32_t *)dmalloc(4);
    CU(cudaMemcpy(dbq, bq.data, (size_t)(el * N * H), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dbs, bs.data, bsz, cudaMemcpyHostToDevice));
    fp8kit_grouped_gemm_args gg = ga;
    gg.a = rv.x;
    gg.scale_a = rv.scale;
    gg.offsets = rv.counts;
    gg.b.data = dbq;
    gg.scale_b.data = dbs;
    gg.d = fp8kit_tensor_make(dd, FP8KIT_BF16, 3, dshape);
    gg.status = dstat;
    FK(fp8kit_grouped_gemm(gctx, &gd, &gg, stream));
    uint16_t *dg = (uint16_t *)hmalloc((size_t)(el * m * N) * 2);
    int32_t gst = -1;
    CU(cudaStreamSynchronize(stream));
    CU(cudaMemcpy(dg, dd, (size_t)(el * m * N) * 2, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(&gst, dstat, 4, cudaMemcpyDeviceToHost));
    CHECK(gst == 0, "grouped: the kernel's status %d", gst);
    for (int64_t e = 0; e < el; e++) {
        double err = 0, ref = 0;
        for (int64_t row = 0; row < res[rank_id].counts[e]; row++)
            for (int64_t n = 0; n < N; n++) {
                const double a = fk_bf16_to_f32(dg[(e * m + row) * N + n]), b = dc[(e * m + row) * N + n];
                err += (a - b) * (a - b);
                ref += b * b;
            }
        CHECK(err <= 4e-3 * 4e-3 * ref, "grouped %s: expert %lld: rel %g over %d rows",
              mx ? "mx" : cfg->scale_layout ? "1x128 mn_major" : "1x128", (long long)e, sqrt(err / (ref + 1e-300)),
              res[rank_id].counts[e]);
    }
    printf("ep_multi_gpu rank %d: grouped GEMM on the received layout (%s)\n", rank_id,
           mx ? "mx" : cfg->scale_layout ? "1x128 mn_major" : "1x128");
    free(bf), free(bq.data), free(bs.data), free(dc), free(dg);
    cudaFree(dbq), cudaFree(dbs), cudaFree(dd), cudaFree(dstat);
    fk_ep_ref_free(res, world_n);
    ep_t_free(&c);
    close_layer(ep, &d);
}

static fp8kit_ep_config cfg_make(int64_t E, int64_t H, int64_t k, int64_t mt, fp8kit_dtype fp8, int mx, int layout)
{
    fp8kit_ep_config c;
    memset(&c, 0, sizeof c);
    c.num_experts = E;
    c.hidden = H;
    c.top_k = k < E ? k : E;
    c.max_tokens = mt;
    c.fp8 = fp8;
    c.mx = mx;
    c.scale_layout = (fp8kit_scale_layout)layout;
    c.transport = transport;
    c.mode = ep_mode;
    return c;
}

static int rank_main(const t_nccl *nc, int idfd_r, int idfd_w, int sm90, uint64_t seed)
{
    CU(cudaSetDevice(rank_id));
    ncclUniqueId id;
    if (rank_id == 0) {
        ncclResult_t r = nc->GetUniqueId(&id);
        if (r != ncclSuccess)
            DIE("ncclGetUniqueId: %s", nc->GetErrorString(r));
        for (int i = 1; i < world_n; i++)
            if (write(idfd_w, &id, sizeof id) != (ssize_t)sizeof id)
                DIE("writing the unique id: %s", strerror(errno));
    } else {
        size_t got = 0;
        while (got < sizeof id) {
            ssize_t n = read(idfd_r, (char *)&id + got, sizeof id - got);
            if (n <= 0)
                DIE("reading the unique id: %s", n ? strerror(errno) : "end of file");
            got += (size_t)n;
        }
    }
    close(idfd_r);
    close(idfd_w);
    ncclResult_t r = nc->CommInitRank(&comm, world_n, id, rank_id);
    if (r != ncclSuccess)
        DIE("ncclCommInitRank: %s", nc->GetErrorString(r));
    FK(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, rank_id, &gctx));
    FK(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cpu));
    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    rng.s = seed;

    const int W = world_n, nep = transport == FP8KIT_EP_TRANSPORT_NCCL_EP;
    /* (NCCL EP: H a multiple of 512) */
    /* (high throughput on NCCL EP: E / W and max_tokens multiples of 4) */
    const int ht = ep_mode == FP8KIT_EP_HIGH_THROUGHPUT, ht4 = ht && nep;
    const fp8kit_ep_config a = cfg_make(4 * W, 512, 4, 256, FP8KIT_E4M3, 0, FP8KIT_LAYOUT_PLAIN);
    fp8kit_ep_config b = cfg_make((ht4 ? 4 : 2) * W, nep ? 1024 : 256, 6, ht4 ? 132 : 131, FP8KIT_E5M2, 0,
                                  FP8KIT_LAYOUT_MN_MAJOR);
    b.pow2 = 1;
    fp8kit_ep_config c = cfg_make(8 * W, nep ? 1536 : 384, 8, ht4 ? 132 : 130, FP8KIT_E4M3, 1, FP8KIT_LAYOUT_PLAIN);
    c.rounding = FP8KIT_ROUND_RCEIL;
    char nb_[80], nc_[80];
    snprintf(nb_, sizeof nb_, "1x128 mn_major e5m2 pow2 E=%lldW k=6 H=%lld mt=%lld", (long long)(b.num_experts / W),
             (long long)b.hidden, (long long)b.max_tokens);
    snprintf(nc_, sizeof nc_, "mx rceil E=8W k=8 H=%lld mt=%lld", (long long)c.hidden, (long long)c.max_tokens);
    run_config("1x128 plain e4m3 E=4W k=4 H=512 mt=256", &a);
    run_config(nb_, &b);
    run_config(nc_, &c);
    graph_case(&a);
    if (nep || ht) { /* another row order or layout than the reference's: the grouped GEMM is checked by
                        moe_ep.py */
        printf("ep_multi_gpu rank %d: %s: the grouped GEMM check skipped\n", rank_id,
               nep ? "transport nccl_ep" : "high throughput");
    } else if (sm90) {
        grouped_case(&a);
        fp8kit_ep_config bm = b;
        bm.fp8 = FP8KIT_E4M3;
        grouped_case(&bm);
        grouped_case(&c);
    } else {
        printf("ep_multi_gpu rank %d: not sm_90: the grouped GEMM check skipped\n", rank_id);
    }
    char name[48];
    snprintf(name, sizeof name, "ep_multi_gpu rank %d of %d", rank_id, world_n);
    int rc = fk_test_summary(name);
    cudaStreamDestroy(stream);
    fp8kit_ctx_destroy(gctx);
    fp8kit_ctx_destroy(cpu);
    nc->CommDestroy(comm);
    fflush(stdout);
    return rc;
}

/* What a child process finds without touching CUDA in this one (forked
 * processes must not inherit an initialized CUDA): GPU count, whether the
 * first is sm_90, whether fp8kit's CUDA backend and libnccl.so.2 work. */
static int probe(int *ndev, int *sm90, int *nccl_ok, int *fk_ok)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int v[4] = {0, 0, 0, 0};
        t_nccl nc;
        v[2] = t_nccl_load(&nc);
        if (v[2] && transport == FP8KIT_EP_TRANSPORT_NCCL_EP) /* NCCL EP, and through it an NCCL new enough */
            v[2] = dlopen("libnccl_ep.so.0", RTLD_NOW | RTLD_LOCAL) || dlopen("libnccl_ep.so", RTLD_NOW | RTLD_LOCAL);
        v[3] = fp8kit_backend_available(FP8KIT_BACKEND_CUDA);
        if (cudaGetDeviceCount(&v[0]) != cudaSuccess)
            v[0] = 0;
        int major = 0;
        if (v[0] > 0 && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess)
            v[1] = major == 9;
        _exit(write(fd[1], v, sizeof v) == (ssize_t)sizeof v ? 0 : 1);
    }
    close(fd[1]);
    int v[4] = {0, 0, 0, 0}, status = 0;
    ssize_t n = read(fd[0], v, sizeof v);
    close(fd[0]);
    waitpid(pid, &status, 0);
    if (n != (ssize_t)sizeof v)
        return -1;
    *ndev = v[0], *sm90 = v[1], *nccl_ok = v[2], *fk_ok = v[3];
    return 0;
}

int main(int argc, char **argv)
{
    int world = 0, timeout = 300;
    static const struct option opts[] = {{"world", required_argument, NULL, 'w'},
                                         {"timeout", required_argument, NULL, 't'},
                                         {"transport", required_argument, NULL, 'p'},
                                         {"high-throughput", no_argument, NULL, 'H'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *usage =
        "usage: ep_multi_gpu [--world N] [--timeout SECONDS] [--transport nccl|nccl_ep] [--high-throughput]\n";
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        char *end = NULL;
        const long v = o == 'w' || o == 't' ? strtol(optarg, &end, 10) : 0;
        if ((o == 'w' || o == 't') && end && !*end && v >= 1 && v <= 100000)
            *(o == 'w' ? &world : &timeout) = (int)v;
        else if (o == 'p' && !strcmp(optarg, "nccl"))
            transport = FP8KIT_EP_TRANSPORT_NCCL;
        else if (o == 'p' && !strcmp(optarg, "nccl_ep"))
            transport = FP8KIT_EP_TRANSPORT_NCCL_EP;
        else if (o == 'H')
            ep_mode = FP8KIT_EP_HIGH_THROUGHPUT;
        else {
            fputs(usage, o == 'h' ? stdout : stderr);
            return o == 'h' ? 0 : 2;
        }
    }
    if (optind < argc) {
        fputs(usage, stderr);
        return 2;
    }
    int ndev = 0, sm90 = 0, nccl_ok = 0, fk_ok = 0;
    if (probe(&ndev, &sm90, &nccl_ok, &fk_ok)) {
        fprintf(stderr, "ep_multi_gpu: the probe process failed\n");
        return 1;
    }
    if (!fk_ok || ndev < 1) {
        printf("ep_multi_gpu: no usable CUDA device, skipped\n");
        return FK_TEST_SKIP;
    }
    if (!nccl_ok) {
        printf("ep_multi_gpu: %s not loadable, skipped\n",
               transport == FP8KIT_EP_TRANSPORT_NCCL_EP ? "libnccl.so.2 or libnccl_ep.so" : "libnccl.so.2");
        return FK_TEST_SKIP;
    }
    if (world == 0)
        world = ndev > 64 ? 64 : ndev;
    if (world < 1 || world > ndev || world > 64) {
        fprintf(stderr, "ep_multi_gpu: --world %d: 1 .. %d (one rank per visible GPU)\n", world, ndev);
        return 2;
    }
    const char *se = getenv("FK_TEST_SEED");
    const uint64_t seed = se ? strtoull(se, NULL, 0) : (uint64_t)time(NULL);
    printf("ep_multi_gpu: %d rank%s, seed %llu (FK_TEST_SEED to replay)\n", world, world == 1 ? "" : "s",
           (unsigned long long)seed);
    fflush(stdout);
    int fd[2];
    if (pipe(fd)) {
        perror("pipe");
        return 1;
    }
    pid_t pids[64];
    world_n = world;
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            for (int q = 0; q < r; q++)
                kill(pids[q], SIGTERM);
            return 1;
        }
        if (pids[r] == 0) {
            alarm((unsigned)timeout); /* a rank stuck in NCCL after another failed dies */
            rank_id = r;
            t_nccl nc;
            if (!t_nccl_load(&nc))
                DIE("libnccl.so.2 not loadable");
            _exit(rank_main(&nc, fd[0], fd[1], sm90, seed));
        }
    }
    close(fd[0]);
    close(fd[1]);
    int failed = 0, skipped = 0, left = world;
    while (left > 0) {
        int status = 0;
        pid_t p = wait(&status);
        if (p < 0)
            break;
        int r = 0;
        while (r < world && pids[r] != p)
            r++;
        if (r == world)
            continue;
        pids[r] = 0;
        left--;
        const int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == FK_TEST_SKIP)
            skipped++;
        else if (!ok) {
            if (WIFSIGNALED(status))
                fprintf(stderr, "ep_multi_gpu: rank %d died of signal %d%s\n", r, WTERMSIG(status),
                        WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
            else
                fprintf(stderr, "ep_multi_gpu: rank %d exited with %d\n", r, WEXITSTATUS(status));
            if (!failed) /* the others would wait for it in NCCL */
                for (int q = 0; q < world; q++)
                    if (pids[q] > 0)
                        kill(pids[q], SIGTERM);
            failed = 1;
        }
    }
    if (failed)
        return 1;
    if (skipped == world)
        return FK_TEST_SKIP;
    printf("ep_multi_gpu: all %d rank%s passed\n", world, world == 1 ? "" : "s");
    return 0;
}
