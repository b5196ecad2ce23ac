/* test_threads.c - one CPU context shared by 4 pthreads: each thread runs
 * quantize (row, mx) and row-scaled GEMM calls on its own shapes plus one
 * shape shared by all threads (so plans are looked up and inserted
 * concurrently), and every result must equal, bit for bit, the result of the
 * same calls made single-threaded on a separate context. The plan cache must
 * end with exactly one plan per distinct shape. Last-error text is per
 * thread: a thread's failing call never changes another thread's message,
 * checked after every failure while the other threads fail concurrently with
 * their own messages. Run: ctest -R test_threads (a few seconds). */
#include <pthread.h>
#include "fp8kit.h"
#include "test_util.h"

#define NTHREADS 4
#define ITERS 100
#define NWORK 3 /* per thread: two own shapes and the shared one */

typedef struct shp {
    int64_t m, n, k;
} shp;

static const shp own_shapes[NTHREADS][2] = {
    {{16, 32, 64}, {40, 96, 160}},
    {{24, 64, 96}, {8, 128, 256}},
    {{33, 32, 128}, {64, 64, 64}},
    {{1, 160, 32}, {72, 32, 192}},
};
static const shp shared_shape = {32, 64, 128};

/* One unit of work: quantize A and B per row, quantize A as mx, GEMM A B^T. */
typedef struct work {
    shp s;
    float *xa, *xb;
    uint8_t *qa, *qb, *mxq, *mxs;
    float *sa, *sb;
    uint16_t *d;
} work;

static void work_alloc(work *w, shp s, uint64_t seed)
{
    w->s = s;
    w->xa = (float *)malloc(sizeof(float) * s.m * s.k);
    w->xb = (float *)malloc(sizeof(float) * s.n * s.k);
    w->qa = (uint8_t *)malloc(s.m * s.k);
    w->qb = (uint8_t *)malloc(s.n * s.k);
    w->mxq = (uint8_t *)malloc(s.m * s.k);
    w->mxs = (uint8_t *)malloc(s.m * s.k / 32);
    w->sa = (float *)malloc(sizeof(float) * s.m);
    w->sb = (float *)malloc(sizeof(float) * s.n);
    w->d = (uint16_t *)malloc(sizeof(uint16_t) * s.m * s.n);
    fk_rng r = {seed};
    for (int64_t i = 0; i < s.m * s.k; i++)
        w->xa[i] = (float)fk_rng_normal(&r);
    for (int64_t i = 0; i < s.n * s.k; i++)
        w->xb[i] = (float)fk_rng_heavy(&r);
}

static void work_free(work *w)
{
    free(w->xa), free(w->xb), free(w->qa), free(w->qb), free(w->mxq), free(w->mxs);
    free(w->sa), free(w->sb), free(w->d);
}

static fp8kit_status work_run(fp8kit_ctx *ctx, work *w)
{
    shp s = w->s;
    fp8kit_status st;
    fp8kit_quant_desc row = fp8kit_quant_desc_default(FP8KIT_SCHEME_ROW);
    fp8kit_quant_desc mx = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
    mx.rounding = FP8KIT_ROUND_RCEIL;
    fp8kit_tensor xa = fp8kit_tensor_make(w->xa, FP8KIT_F32, 2, (int64_t[]){s.m, s.k});
    fp8kit_tensor xb = fp8kit_tensor_make(w->xb, FP8KIT_F32, 2, (int64_t[]){s.n, s.k});
    fp8kit_tensor qa = fp8kit_tensor_make(w->qa, FP8KIT_E4M3, 2, (int64_t[]){s.m, s.k});
    fp8kit_tensor qb = fp8kit_tensor_make(w->qb, FP8KIT_E4M3, 2, (int64_t[]){s.n, s.k});
    fp8kit_tensor sa = fp8kit_tensor_make(w->sa, FP8KIT_F32, 2, (int64_t[]){s.m, 1});
    fp8kit_tensor sb = fp8kit_tensor_make(w->sb, FP8KIT_F32, 2, (int64_t[]){s.n, 1});
    fp8kit_tensor mq = fp8kit_tensor_make(w->mxq, FP8KIT_E4M3, 2, (int64_t[]){s.m, s.k});
    fp8kit_tensor ms = fp8kit_tensor_make(w->mxs, FP8KIT_E8M0, 2, (int64_t[]){s.m, s.k / 32});
    if ((st = fp8kit_quantize(ctx, &row, &xa, &qa, &sa, NULL)) || (st = fp8kit_quantize(ctx, &row, &xb, &qb, &sb, NULL)) ||
        (st = fp8kit_quantize(ctx, &mx, &xa, &mq, &ms, NULL)))
        return st;
    fp8kit_gemm_desc gd;
    memset(&gd, 0, sizeof gd);
    gd.scale_a = gd.scale_b = FP8KIT_SCALE_ROW;
    fp8kit_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    ga.a = qa;
    ga.b = qb;
    ga.scale_a = fp8kit_tensor_make(w->sa, FP8KIT_F32, 1, (int64_t[]){s.m});
    ga.scale_b = fp8kit_tensor_make(w->sb, FP8KIT_F32, 1, (int64_t[]){s.n});
    ga.alpha = 1.0f;
    ga.d = fp8kit_tensor_make(w->d, FP8KIT_BF16, 2, (int64_t[]){s.m, s.n});
    return fp8kit_gemm(ctx, &gd, &ga, NULL);
}

/* bytes of w's outputs that differ from ref's */
static long work_diff(const work *w, const work *ref)
{
    shp s = w->s;
    long bad = 0;
    bad += memcmp(w->qa, ref->qa, s.m * s.k) != 0;
    bad += memcmp(w->qb, ref->qb, s.n * s.k) != 0;
    bad += memcmp(w->sa, ref->sa, sizeof(float) * s.m) != 0;
    bad += memcmp(w->sb, ref->sb, sizeof(float) * s.n) != 0;
    bad += memcmp(w->mxq, ref->mxq, s.m * s.k) != 0;
    bad += memcmp(w->mxs, ref->mxs, s.m * s.k / 32) != 0;
    bad += memcmp(w->d, ref->d, sizeof(uint16_t) * s.m * s.n) != 0;
    return bad;
}

static fp8kit_ctx *g_ctx;
static pthread_barrier_t g_bar;
static work g_ref[NTHREADS][NWORK];

typedef struct tstate {
    int id;
    work w[NWORK];
    long runs, run_fail, mismatches, err_checks, err_wrong, early_msg;
    fp8kit_status first_st;
    char wrong_msg[256];
} tstate;

/* A failing call whose message carries this thread's id: axis 100 + id. */
static int fail_own(int id)
{
    float x[32] = {0};
    uint8_t q[32], s[1];
    fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
    d.axis = 100 + id;
    fp8kit_tensor tx = fp8kit_tensor_make(x, FP8KIT_F32, 2, (int64_t[]){1, 32});
    fp8kit_tensor tq = fp8kit_tensor_make(q, FP8KIT_E4M3, 2, (int64_t[]){1, 32});
    fp8kit_tensor ts = fp8kit_tensor_make(s, FP8KIT_E8M0, 2, (int64_t[]){1, 1});
    return fp8kit_quantize(g_ctx, &d, &tx, &tq, &ts, NULL) == FP8KIT_ERR_INVALID_ARGUMENT;
}

static int own_message(int id, tstate *t)
{
    char want[32];
    snprintf(want, sizeof want, "axis %d ", 100 + id);
    const char *msg = fp8kit_last_error(g_ctx);
    if (strstr(msg, want))
        return 1;
    snprintf(t->wrong_msg, sizeof t->wrong_msg, "%s", msg);
    return 0;
}

static void *thread_main(void *arg)
{
    tstate *t = (tstate *)arg;
    /* phase 1: only thread 0 fails; the others must still see no message */
    pthread_barrier_wait(&g_bar);
    if (t->id == 0) {
        t->err_checks++;
        if (!fail_own(0) || !own_message(0, t))
            t->err_wrong++;
    }
    pthread_barrier_wait(&g_bar);
    if (t->id != 0 && fp8kit_last_error(g_ctx)[0] != 0) {
        t->early_msg++;
        snprintf(t->wrong_msg, sizeof t->wrong_msg, "%s", fp8kit_last_error(g_ctx));
    }
    pthread_barrier_wait(&g_bar);
    /* phase 2: everything at once */
    for (int it = 0; it < ITERS; it++) {
        for (int i = 0; i < NWORK; i++) {
            work *w = &t->w[(i + it + t->id) % NWORK]; /* threads hit the shared shape at different times */
            memset(w->d, 0xA5, sizeof(uint16_t) * w->s.m * w->s.n);
            fp8kit_status st = work_run(g_ctx, w);
            t->runs++;
            if (st != FP8KIT_OK) {
                if (!t->run_fail++)
                    t->first_st = st;
                continue;
            }
            t->mismatches += work_diff(w, &g_ref[t->id][(i + it + t->id) % NWORK]);
            /* a failure of our own, then our message must be ours (and a
             * successful call in between must not have changed it) */
            t->err_checks++;
            if (!fail_own(t->id) || !own_message(t->id, t))
                t->err_wrong++;
        }
        t->err_checks++;
        if (!own_message(t->id, t))
            t->err_wrong++;
    }
    return NULL;
}

int main(void)
{
    fk_rng rng = fk_rng_seeded("test_threads");
    uint64_t base = fk_rng_u64(&rng);
    fp8kit_ctx *ref_ctx = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ref_ctx), FP8KIT_OK);
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &g_ctx), FP8KIT_OK);
    if (!ref_ctx || !g_ctx)
        return fk_test_summary("test_threads");
    CHECK_STATUS(fp8kit_ctx_set_threads(g_ctx, 2), FP8KIT_OK);

    /* single-threaded reference results, on another context */
    static tstate ts[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        ts[t].id = t;
        for (int i = 0; i < NWORK; i++) {
            shp s = i < 2 ? own_shapes[t][i] : shared_shape;
            uint64_t seed = base + 1000 * (uint64_t)t + (uint64_t)i;
            work_alloc(&g_ref[t][i], s, seed);
            work_alloc(&ts[t].w[i], s, seed);
            CHECK_STATUS(work_run(ref_ctx, &g_ref[t][i]), FP8KIT_OK);
        }
    }
    int64_t distinct = fp8kit_plan_cache_size(ref_ctx);
    CHECK(distinct == 2 * NTHREADS + 1, "reference context holds %lld plans, want %d", (long long)distinct,
          2 * NTHREADS + 1);

    pthread_t th[NTHREADS];
    pthread_barrier_init(&g_bar, NULL, NTHREADS);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, thread_main, &ts[t]);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_barrier_destroy(&g_bar);

    long runs = 0, checks = 0;
    for (int t = 0; t < NTHREADS; t++) {
        tstate *s = &ts[t];
        runs += s->runs;
        checks += s->err_checks;
        CHECK(s->run_fail == 0, "thread %d: %ld calls failed, first %s", t, s->run_fail, fp8kit_status_string(s->first_st));
        CHECK(s->mismatches == 0, "thread %d: %ld outputs differ from the single-threaded run", t, s->mismatches);
        CHECK(s->err_wrong == 0, "thread %d: %ld of %ld last-error checks saw another message: %s", t, s->err_wrong,
              s->err_checks, s->wrong_msg);
        CHECK(s->early_msg == 0, "thread %d saw thread 0's message: %s", t, s->wrong_msg);
    }
    CHECK(fp8kit_plan_cache_size(g_ctx) == distinct, "shared context holds %lld plans, want %lld",
          (long long)fp8kit_plan_cache_size(g_ctx), (long long)distinct);
    /* the main thread never failed on g_ctx */
    CHECK(fp8kit_last_error(g_ctx)[0] == 0, "main thread sees a worker's message: %s", fp8kit_last_error(g_ctx));
    printf("test_threads: %d threads, %ld quantize+GEMM units compared bit for bit, %ld last-error checks, "
           "%lld plans, %.2f s\n",
           NTHREADS, runs, checks, (long long)fp8kit_plan_cache_size(g_ctx),
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));

    for (int t = 0; t < NTHREADS; t++)
        for (int i = 0; i < NWORK; i++) {
            work_free(&g_ref[t][i]);
            work_free(&ts[t].w[i]);
        }
    fp8kit_ctx_destroy(g_ctx);
    fp8kit_ctx_destroy(ref_ctx);
    return fk_test_summary("test_threads");
}
