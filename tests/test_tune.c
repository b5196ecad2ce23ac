/* test_tune.c - fp8kit_ctx_set_autotune and its cache file on a CPU context:
 * bad arguments, missing / corrupt / unreadable / unwritable files (exact
 * status, file unchanged), entries surviving a save + reload, the key text,
 * the FP8KIT_AUTOTUNE environment switch (a corrupt cache file makes
 * fp8kit_ctx_create fail with fp8kit_ctx_set_autotune's message), and a
 * GEMM still right with autotune on. Plus, when a GPU is present, an
 * autotuned CUDA GEMM equal to the heuristic one and its choice reused from
 * the file by a new context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/internal.h"
#include "fp8kit.h"
#include "test_util.h"

static char g_dir[256];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static const char *HDR = "# fp8kit autotune cache v1\n";

static void test_args(fp8kit_ctx *ctx)
{
    CHECK_STATUS(fp8kit_ctx_set_autotune(NULL, 1, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 2, NULL), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(fp8kit_last_error(ctx), "mode 2") != NULL, "msg: %s", fp8kit_last_error(ctx));
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, -1, NULL), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, ""), FP8KIT_ERR_INVALID_ARGUMENT);
    char longp[FK_TUNE_PATH_MAX + 8];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, longp), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK(ctx->tune.mode == 0, "a refused call changed the mode");
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, NULL), FP8KIT_OK);
    CHECK(ctx->tune.mode == 1 && ctx->tune.path[0] == 0, "memory-only mode not set");
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 0, NULL), FP8KIT_OK);
    CHECK(ctx->tune.mode == 0, "mode 0 not set");
}

static void test_files(fp8kit_ctx *ctx)
{
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/tune.txt", g_dir);
    /* a missing file is created with the header */
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, path), FP8KIT_OK);
    char *txt = read_file(path);
    CHECK(txt && strcmp(txt, HDR) == 0, "new cache file: '%s'", txt ? txt : "(none)");

    /* corrupt files: exact status, message names the file, file and state unchanged */
    const char *corrupt[] = {
        "not a cache\n",
        "# fp8kit autotune cache v1\nkey 00 1.0\n",
        "# fp8kit autotune cache v1\nkey zz000000000000000000000000000000000000000000000000000000000000"
        "000000000000000000000000000000000000000000000000000000000000000000 1.0\n",
        "# fp8kit autotune cache v1\nonlykey\n",
        "# fp8kit autotune cache v1\nk 0000000000000000000000000000000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000 -3\n",
        "# fp8kit autotune cache v1\nk 0000000000000000000000000000000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000 1.0 extra\n",
    };
    for (size_t i = 0; i < sizeof corrupt / sizeof *corrupt; i++) {
        snprintf(bad, sizeof bad, "%s/bad%zu.txt", g_dir, i);
        write_file(bad, corrupt[i]);
        CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, bad), FP8KIT_ERR_CORRUPT_FILE);
        CHECK(strstr(fp8kit_last_error(ctx), bad) != NULL, "case %zu msg: %s", i, fp8kit_last_error(ctx));
        txt = read_file(bad);
        CHECK(txt && strcmp(txt, corrupt[i]) == 0, "case %zu: corrupt file was changed", i);
        CHECK(strcmp(ctx->tune.path, path) == 0, "case %zu: a refused file replaced the old one", i);
    }
    /* a line longer than the reader's buffer */
    snprintf(bad, sizeof bad, "%s/long.txt", g_dir);
    {
        FILE *f = fopen(bad, "w");
        fputs(HDR, f);
        for (int i = 0; i < 2000; i++)
            fputc('x', f);
        fputc('\n', f);
        fclose(f);
    }
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, bad), FP8KIT_ERR_CORRUPT_FILE);
    /* a directory is not readable as a file; a missing directory is not writable */
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, g_dir), FP8KIT_ERR_IO);
    snprintf(bad, sizeof bad, "%s/no/such/dir/tune.txt", g_dir);
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, bad), FP8KIT_ERR_IO);
    CHECK(access(bad, F_OK) != 0, "a file appeared at %s", bad);

    /* entries: add (under the lock, as plan init does), reload in a new context */
    unsigned char cfg[FK_PLAN_CONFIG_BYTES], got[FK_PLAN_CONFIG_BYTES];
    for (int i = 0; i < FK_PLAN_CONFIG_BYTES; i++)
        cfg[i] = (unsigned char)(i * 37 + 5);
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, path), FP8KIT_OK);
    pthread_mutex_lock(&ctx->plans.lock);
    CHECK_STATUS(fk_tune_add(ctx, "dev:A|m1", cfg, 12.5), FP8KIT_OK);
    cfg[0] ^= 0xFF;
    CHECK_STATUS(fk_tune_add(ctx, "dev:A|m2", cfg, 3.25), FP8KIT_OK);
    CHECK_STATUS(fk_tune_add(ctx, "bad key", cfg, 1.0), FP8KIT_ERR_INTERNAL);
    pthread_mutex_unlock(&ctx->plans.lock);
    txt = read_file(path);
    CHECK(txt && strncmp(txt, HDR, strlen(HDR)) == 0 && strstr(txt, "dev:A|m1 ") &&
              strstr(txt, "dev:A|m2 ") && !strstr(txt, "bad key"),
          "cache file: %s", txt ? txt : "(none)");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0, "temporary file left behind");

    fp8kit_ctx *c2 = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &c2), FP8KIT_OK);
    CHECK_STATUS(fp8kit_ctx_set_autotune(c2, 1, path), FP8KIT_OK);
    pthread_mutex_lock(&c2->plans.lock);
    CHECK(fk_tune_find(c2, "dev:A|m2", got) && memcmp(got, cfg, sizeof cfg) == 0, "entry m2 lost");
    cfg[0] ^= 0xFF;
    CHECK(fk_tune_find(c2, "dev:A|m1", got) && memcmp(got, cfg, sizeof cfg) == 0, "entry m1 lost");
    CHECK(!fk_tune_find(c2, "dev:A|m3", got), "found an entry never added");
    pthread_mutex_unlock(&c2->plans.lock);
    CHECK(c2->tune.count == 2, "count %lld", (long long)c2->tune.count);
    fp8kit_ctx_destroy(c2);

    /* the environment switch: a good file works, a corrupt one fails creation */
    setenv("FP8KIT_AUTOTUNE", "1", 1);
    setenv("FP8KIT_AUTOTUNE_CACHE", path, 1);
    c2 = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &c2), FP8KIT_OK);
    CHECK(c2 && c2->tune.mode == 1 && c2->tune.count == 2, "env autotune not applied");
    fp8kit_ctx_destroy(c2);
    snprintf(bad, sizeof bad, "%s/bad0.txt", g_dir);
    char inner[512]; /* fp8kit_ctx_set_autotune's message for the file, passed on by ctx_create */
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, bad), FP8KIT_ERR_CORRUPT_FILE);
    snprintf(inner, sizeof inner, "%s", fp8kit_last_error(ctx));
    setenv("FP8KIT_AUTOTUNE_CACHE", bad, 1);
    c2 = (fp8kit_ctx *)0x1;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &c2), FP8KIT_ERR_CORRUPT_FILE);
    CHECK(c2 == (fp8kit_ctx *)0x1, "ctx_create wrote *out on failure");
    CHECK(strstr(fp8kit_last_error(NULL), "FP8KIT_AUTOTUNE") != NULL, "msg: %s", fp8kit_last_error(NULL));
    CHECK(strstr(fp8kit_last_error(NULL), inner) != NULL, "msg '%s' lacks fp8kit_ctx_set_autotune's '%s'",
          fp8kit_last_error(NULL), inner);
    unsetenv("FP8KIT_AUTOTUNE");
    unsetenv("FP8KIT_AUTOTUNE_CACHE");
}

static void test_key(fp8kit_ctx *ctx)
{
    fk_gemm_job j;
    memset(&j, 0, sizeof j);
    j.m = 3; j.n = 5; j.k = 16; j.lda = 16; j.ldb = 16; j.ldd = 5;
    j.a_type = FP8KIT_E4M3; j.b_type = FP8KIT_E5M2; j.d_type = FP8KIT_BF16;
    char k1[288], k2[288];
    fk_gemm_key_text(ctx, &j, "cuda:sig:NVIDIA H100 80GB", k1, sizeof k1);
    CHECK(strchr(k1, ' ') == NULL, "key has a space: %s", k1);
    CHECK(strstr(k1, "m3,n5,k16") != NULL, "key: %s", k1);
    j.n = 6;
    fk_gemm_key_text(ctx, &j, "cuda:sig:NVIDIA H100 80GB", k2, sizeof k2);
    CHECK(strcmp(k1, k2) != 0, "keys of different N agree");
    j.n = 5;
    j.desc.fast_accum = 1;
    fk_gemm_key_text(ctx, &j, "cuda:sig:NVIDIA H100 80GB", k2, sizeof k2);
    CHECK(strcmp(k1, k2) != 0, "keys of different fast_accum agree");
    j.desc.fast_accum = 0;
    /* the plan cache's key: tuning overrides and pointer alignment are in it too */
    CHECK_STATUS(fp8kit_ctx_set_tuning(ctx, "gemm_bn=128"), FP8KIT_OK);
    fk_gemm_key_text(ctx, &j, "cuda:sig:NVIDIA H100 80GB", k2, sizeof k2);
    CHECK(strcmp(k1, k2) != 0, "keys under different tuning overrides agree");
    CHECK_STATUS(fp8kit_ctx_set_tuning(ctx, NULL), FP8KIT_OK);
    fk_gemm_key_text(ctx, &j, "cuda:sig:NVIDIA H100 80GB", k2, sizeof k2);
    CHECK(strcmp(k1, k2) == 0, "the key after the overrides are cleared: %s, was %s", k2, k1);
    j.a = (const void *)(uintptr_t)0x1008; /* 8-byte, not 16-byte, aligned */
    fk_gemm_key_text(ctx, &j, "cuda:sig:NVIDIA H100 80GB", k2, sizeof k2);
    CHECK(strcmp(k1, k2) != 0, "keys of a 16-byte and an 8-byte aligned A agree");
}

/* fp8kit_gemm_supported / _describe on a CUDA context, with placeholder
 * pointers (neither reads an operand): the family the planner picks, and
 * the statuses fp8kit_gemm gives for a call no family runs. */
static void test_cuda_supported(void)
{
    fp8kit_ctx *c = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &c), FP8KIT_OK);
    if (!c)
        return;
    float one = 1.0f;
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = d.scale_b = FP8KIT_SCALE_TENSOR;
    d.out_hp = FP8KIT_BF16;
    fp8kit_gemm_args a;
    memset(&a, 0, sizeof a);
    a.a = fp8kit_tensor_2d((void *)(uintptr_t)0x100000, FP8KIT_E4M3, 4096, 4096, 4096);
    a.b = fp8kit_tensor_2d((void *)(uintptr_t)0x2000000, FP8KIT_E4M3, 4096, 4096, 4096);
    a.scale_a = fp8kit_tensor_2d(&one, FP8KIT_F32, 1, 1, 1);
    a.scale_b = fp8kit_tensor_2d(&one, FP8KIT_F32, 1, 1, 1);
    a.alpha = 1.0f;
    a.d = fp8kit_tensor_2d((void *)(uintptr_t)0x4000000, FP8KIT_BF16, 4096, 4096, 4096);
    char buf[256];
    const fp8kit_status st = fp8kit_gemm_describe(c, &d, &a, buf, sizeof buf);
    CHECK(st == FP8KIT_OK || st == FP8KIT_ERR_ARCH_MISMATCH, "describe: %s", fp8kit_last_error(c));
    if (st == FP8KIT_OK) {
        CHECK(strncmp(buf, "sm90 ", 5) == 0, "4096^3 planned as '%s'", buf);
        CHECK_STATUS(fp8kit_gemm_supported(c, &d, &a), FP8KIT_OK);
        /* M = 64: the small-M family takes it */
        a.a.shape[0] = 64;
        a.d.shape[0] = 64;
        CHECK_STATUS(fp8kit_gemm_describe(c, &d, &a, buf, sizeof buf), FP8KIT_OK);
        CHECK(strncmp(buf, "sm90_small ", 11) == 0, "64x4096x4096 planned as '%s'", buf);
        /* K = 4088: TMA needs K % 16 == 0; the same status as fp8kit_gemm */
        a.a.shape[1] = a.b.shape[1] = 4088;
        CHECK_STATUS(fp8kit_gemm_supported(c, &d, &a), FP8KIT_ERR_MISALIGNED);
        CHECK(strstr(fp8kit_last_error(c), "multiple of 16") != NULL, "msg: %s", fp8kit_last_error(c));
        CHECK_STATUS(fp8kit_gemm(c, &d, &a, NULL), FP8KIT_ERR_MISALIGNED);
        /* the small-M family forced on a shape it cannot run */
        a.a.shape[1] = a.b.shape[1] = 4096;
        a.a.shape[0] = a.d.shape[0] = 300;
        CHECK_STATUS(fp8kit_ctx_set_tuning(c, "gemm_small=2"), FP8KIT_OK);
        CHECK_STATUS(fp8kit_gemm_supported(c, &d, &a), FP8KIT_ERR_UNSUPPORTED);
        CHECK(strstr(fp8kit_last_error(c), "small-M") != NULL, "msg: %s", fp8kit_last_error(c));
    }
    fp8kit_ctx_destroy(c);
}

/* A small GEMM on ctx, D as float; returns 1 when it ran. */
static int run_gemm(fp8kit_ctx *ctx, int on_gpu, int m, int n, int k, float *out);

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/fp8kit_test_tune_%ld", (long)getpid());
    mkdir(g_dir, 0700);
    fp8kit_ctx *ctx = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx), FP8KIT_OK);
    test_args(ctx);
    test_files(ctx);
    test_key(ctx);

    /* CPU: autotune on changes nothing about the result */
    enum { M = 33, N = 40, K = 64 };
    static float d0[M * N], d1[M * N];
    fp8kit_ctx *plain = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &plain), FP8KIT_OK);
    CHECK(run_gemm(plain, 0, M, N, K, d0), "cpu gemm failed: %s", fp8kit_last_error(plain));
    CHECK_STATUS(fp8kit_ctx_set_autotune(ctx, 1, NULL), FP8KIT_OK);
    CHECK(run_gemm(ctx, 0, M, N, K, d1), "cpu gemm with autotune failed: %s", fp8kit_last_error(ctx));
    CHECK(memcmp(d0, d1, sizeof d0) == 0, "autotune changed a CPU result");
    fp8kit_ctx_destroy(plain);
    fp8kit_ctx_destroy(ctx);

    /* GPU: tuned result equals the heuristic one; the choice comes back from the file */
    int gpu = fp8kit_backend_available(FP8KIT_BACKEND_CUDA);
    if (gpu) {
        enum { GM = 512, GN = 1000, GK = 1024 };
        float *g0 = (float *)malloc(sizeof(float) * GM * GN), *g1 = (float *)malloc(sizeof(float) * GM * GN);
        char path[512];
        snprintf(path, sizeof path, "%s/gpu.txt", g_dir);
        fp8kit_ctx *a = NULL, *b = NULL;
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &a), FP8KIT_OK);
        CHECK(run_gemm(a, 1, GM, GN, GK, g0), "cuda gemm: %s", fp8kit_last_error(a));
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &b), FP8KIT_OK);
        CHECK_STATUS(fp8kit_ctx_set_autotune(b, 1, path), FP8KIT_OK);
        CHECK(run_gemm(b, 1, GM, GN, GK, g1), "tuned cuda gemm: %s", fp8kit_last_error(b));
        double num = 0, den = 0;
        for (long i = 0; i < (long)GM * GN; i++) {
            num += ((double)g0[i] - g1[i]) * ((double)g0[i] - g1[i]);
            den += (double)g0[i] * g0[i];
        }
        CHECK(den > 0 && num <= 1e-8 * den, "tuned result differs: rel^2 %g", den > 0 ? num / den : -1.0);
        CHECK(b->tune.count >= 1, "no choice recorded");
        char *txt = read_file(path);
        CHECK(txt && strstr(txt, "cuda:") != NULL, "no cuda entry in the file: %s", txt ? txt : "");
        fp8kit_ctx_destroy(b);
        b = NULL;
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &b), FP8KIT_OK);
        CHECK_STATUS(fp8kit_ctx_set_autotune(b, 1, path), FP8KIT_OK);
        CHECK(b->tune.count >= 1, "file entry not loaded");
        CHECK(run_gemm(b, 1, GM, GN, GK, g1), "cuda gemm from the cache: %s", fp8kit_last_error(b));
        num = 0;
        for (long i = 0; i < (long)GM * GN; i++)
            num += ((double)g0[i] - g1[i]) * ((double)g0[i] - g1[i]);
        CHECK(num <= 1e-8 * den, "result from the cached choice differs");
        fp8kit_ctx_destroy(a);
        fp8kit_ctx_destroy(b);
        free(g0);
        free(g1);
        test_cuda_supported();
    } else {
        printf("test_tune: no CUDA device: GPU part skipped\n");
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return fk_test_summary("test_tune");
}

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* A = B = e4m3 codes from a fixed pattern (finite, mixed signs), tensor scales
 * 0.5 and 2, bf16 C-less output converted to float; on_gpu copies through the
 * device. */
static int run_gemm(fp8kit_ctx *ctx, int on_gpu, int m, int n, int k, float *out)
{
    size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
    unsigned char *a = (unsigned char *)malloc(na), *b = (unsigned char *)malloc(nb);
    uint16_t *d = (uint16_t *)malloc(nd * 2);
    float sa = 0.5f, sb = 2.0f;
    for (size_t i = 0; i < na; i++) a[i] = (unsigned char)((i * 2654435761u >> 13) & 0xF7); /* no NaN codes */
    for (size_t i = 0; i < nb; i++) b[i] = (unsigned char)((i * 40503u >> 7) & 0xB7);
    void *pa = a, *pb = b, *pd = d, *psa = &sa, *psb = &sb;
    int ok = 1;
#ifdef FP8KIT_HAVE_CUDA
    if (on_gpu) {
        ok = cudaMalloc(&pa, na) == cudaSuccess && cudaMalloc(&pb, nb) == cudaSuccess &&
             cudaMalloc(&pd, nd * 2) == cudaSuccess && cudaMalloc(&psa, 4) == cudaSuccess &&
             cudaMalloc(&psb, 4) == cudaSuccess && cudaMemcpy(pa, a, na, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(pb, b, nb, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(psa, &sa, 4, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(psb, &sb, 4, cudaMemcpyHostToDevice) == cudaSuccess;
    }
#else
    if (on_gpu)
        ok = 0;
#endif
    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = FP8KIT_SCALE_TENSOR;
    desc.scale_b = FP8KIT_SCALE_TENSOR;
    fp8kit_gemm_args args;
    memset(&args, 0, sizeof args);
    args.a = fp8kit_tensor_2d(pa, FP8KIT_E4M3, m, k, k);
    args.b = fp8kit_tensor_2d(pb, FP8KIT_E4M3, n, k, k);
    args.scale_a = fp8kit_tensor_make(psa, FP8KIT_F32, 0, NULL);
    args.scale_b = fp8kit_tensor_make(psb, FP8KIT_F32, 0, NULL);
    args.alpha = 1.0f;
    args.d = fp8kit_tensor_2d(pd, FP8KIT_BF16, m, n, n);
    ok = ok && fp8kit_gemm(ctx, &desc, &args, NULL) == FP8KIT_OK;
#ifdef FP8KIT_HAVE_CUDA
    if (on_gpu) {
        ok = ok && cudaMemcpy(d, pd, nd * 2, cudaMemcpyDeviceToHost) == cudaSuccess;
        cudaFree(pa); cudaFree(pb); cudaFree(pd); cudaFree(psa); cudaFree(psb);
    }
#endif
    for (size_t i = 0; ok && i < nd; i++) {
        uint32_t u = (uint32_t)d[i] << 16;
        memcpy(&out[i], &u, 4);
    }
    free(a); free(b); free(d);
    return ok;
}
