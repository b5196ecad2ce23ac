/* test_tuning.c - the tuning overrides on a CPU context (runs everywhere):
 * fp8kit_ctx_set_tuning / fp8kit_ctx_get_tuning round trips, every key
 * accepted at both ends of its range and refused past them
 * (INVALID_ARGUMENT, the message naming the key, the overrides unchanged),
 * unknown keys and malformed items refused the same way, "auto", separators,
 * NULL arguments and short buffers; the environment default FP8KIT_TUNING
 * applied by fp8kit_ctx_create and a bad one making it fail;
 * fp8kit_gemm_describe ("cpu isa=...", isa=generic when forced, truncation)
 * and fp8kit_gemm_supported giving fp8kit_gemm's status on good and bad
 * calls; and a changed tuning planning the same call again (plan cache).
 * Run: ctest -R test_tuning (well under a second). */
#include "fp8kit.h"
#include "test_util.h"

/* The keys and their ranges (the table in src/core/tuning.c). */
static const struct {
    const char *name;
    int lo, hi;
} keys[] = {
    {"gemm_small", 0, 2},      {"gemm_bn", 64, 256},      {"gemm_promo", 0, 4},     {"gemm_cluster", 1, 2},
    {"gemm_ts", 0, 1},         {"gemm_bulk", 0, 1},       {"gemm_lag", 0, 7},       {"gemm_sk", 0, 64},
    {"gemm_pdl", 0, 1},        {"grouped_gm", 1, 64},     {"small_mh", 1, 2},       {"small_r", 0, 128},
    {"small_split", 0, 4},     {"small_mc", 0, 2},        {"small_cs", 0, 1},       {"small_pdl", 0, 1},
    {"small_stages", 1, 64},   {"small_pf", 0, 64},       {"small_rot", 0, 1},      {"small_bpol", 0, 1},
    {"small_pp", 0, 1},        {"small_plain", 0, 1},     {"small_exitrel", 0, 1},  {"small_bpromo", 0, 3},
    {"cpu_isa", 0, 2},
};
#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

/* The context's overrides (the text fp8kit_ctx_get_tuning writes). */
static const char *get(fp8kit_ctx *ctx)
{
    static char buf[1024];
    fp8kit_status st = fp8kit_ctx_get_tuning(ctx, buf, sizeof buf);
    CHECK(st == FP8KIT_OK, "get_tuning: %s (%s)", fp8kit_status_string(st), fp8kit_last_error(ctx));
    return st == FP8KIT_OK ? buf : "(error)";
}

/* spec is accepted and reads back as want. */
static void accepts(fp8kit_ctx *ctx, const char *spec, const char *want)
{
    fp8kit_status st = fp8kit_ctx_set_tuning(ctx, spec);
    CHECK(st == FP8KIT_OK, "'%s' refused: %s (%s)", spec ? spec : "(null)", fp8kit_status_string(st),
          fp8kit_last_error(ctx));
    const char *got = get(ctx);
    CHECK(strcmp(got, want) == 0, "'%s' reads back as '%s', want '%s'", spec ? spec : "(null)", got, want);
}

/* spec is refused with INVALID_ARGUMENT, a message containing what, and the
 * overrides of before left as they were. */
static void refuses(fp8kit_ctx *ctx, const char *spec, const char *what)
{
    char before[1024];
    snprintf(before, sizeof before, "%s", get(ctx));
    CHECK_STATUS(fp8kit_ctx_set_tuning(ctx, spec), FP8KIT_ERR_INVALID_ARGUMENT);
    const char *msg = fp8kit_last_error(ctx);
    CHECK(strstr(msg, what) != NULL, "'%s': message '%s' does not name '%s'", spec, msg, what);
    CHECK(strcmp(get(ctx), before) == 0, "'%s' was refused but changed the overrides from '%s' to '%s'", spec,
          before, get(ctx));
}

static void test_keys(fp8kit_ctx *ctx)
{
    char spec[1024], want[1024];
    accepts(ctx, "", "");
    accepts(ctx, NULL, "");
    /* every key alone at both ends of its range, and refused past them */
    for (int i = 0; i < NKEYS; i++) {
        const int v[2] = {keys[i].lo, keys[i].hi};
        for (int j = 0; j < 2; j++) {
            snprintf(spec, sizeof spec, "%s=%d", keys[i].name, v[j]);
            accepts(ctx, spec, spec);
        }
        accepts(ctx, "gemm_lag=3", "gemm_lag=3"); /* refusals below must leave this in place */
        snprintf(spec, sizeof spec, "%s=%d", keys[i].name, keys[i].lo - 1);
        refuses(ctx, spec, keys[i].name);
        snprintf(spec, sizeof spec, "%s=%d", keys[i].name, keys[i].hi + 1);
        refuses(ctx, spec, keys[i].name);
        snprintf(spec, sizeof spec, "%s=x", keys[i].name);
        refuses(ctx, spec, keys[i].name);
        snprintf(spec, sizeof spec, "%s=", keys[i].name);
        refuses(ctx, spec, keys[i].name);
        snprintf(spec, sizeof spec, "%s=1.5", keys[i].name);
        refuses(ctx, spec, keys[i].name);
        /* a bad item after good ones: nothing of the call is applied */
        snprintf(spec, sizeof spec, "gemm_bn=128,%s=%d", keys[i].name, keys[i].hi + 1);
        refuses(ctx, spec, keys[i].name);
        snprintf(spec, sizeof spec, "%s=auto", keys[i].name);
        accepts(ctx, spec, "");
    }
    /* cpu_isa by name */
    accepts(ctx, "cpu_isa=generic", "cpu_isa=0");
    accepts(ctx, "cpu_isa=avx2", "cpu_isa=1");
    accepts(ctx, "cpu_isa=avx512", "cpu_isa=2");
    refuses(ctx, "cpu_isa=sse2", "cpu_isa");
    refuses(ctx, "cpu_isa=AVX2", "cpu_isa");
    /* every key at once: reads back in the keys' order, and that text is a
     * spec that reads back the same */
    spec[0] = want[0] = 0;
    for (int i = NKEYS - 1; i >= 0; i--) {
        const size_t n = strlen(spec);
        snprintf(spec + n, sizeof spec - n, "%s%s=%d", n ? "," : "", keys[i].name, keys[i].hi);
    }
    for (int i = 0; i < NKEYS; i++) {
        const size_t n = strlen(want);
        snprintf(want + n, sizeof want - n, "%s%s=%d", n ? "," : "", keys[i].name, keys[i].hi);
    }
    accepts(ctx, spec, want);
    char back[1024];
    snprintf(back, sizeof back, "%s", get(ctx));
    accepts(ctx, back, want);
    /* a call replaces the overrides; auto restores a key; a later item wins */
    accepts(ctx, "gemm_bn=128,gemm_promo=2", "gemm_bn=128,gemm_promo=2");
    accepts(ctx, "gemm_cluster=2", "gemm_cluster=2");
    accepts(ctx, "gemm_bn=192,gemm_bn=auto,small_r=40", "small_r=40");
    accepts(ctx, "gemm_bn=64,gemm_bn=256", "gemm_bn=256");
    accepts(ctx, "gemm_bn=auto", "");
    /* separators: commas, spaces, tabs, newlines, empty items */
    accepts(ctx, " gemm_bn=128 gemm_sk=3,\tsmall_mc=2\n", "gemm_bn=128,gemm_sk=3,small_mc=2");
    accepts(ctx, ",,gemm_pdl=0,,", "gemm_pdl=0");
    accepts(ctx, " , ", "");
    /* unknown keys (the old environment names too) and malformed items */
    accepts(ctx, "gemm_lag=3", "gemm_lag=3");
    refuses(ctx, "gemm_bogus=1", "gemm_bogus");
    refuses(ctx, "FK_GEMM_BN=128", "FK_GEMM_BN");
    refuses(ctx, "GEMM_BN=128", "GEMM_BN");
    refuses(ctx, "gemm_bn=128,gemm_verbose=1", "gemm_verbose");
    refuses(ctx, "gemm_bn", "gemm_bn");
    refuses(ctx, "gemm_bn=128,gemm_promo", "gemm_promo");
    refuses(ctx, "=128", "tuning key"); /* an empty key */
    refuses(ctx, "gemm_bn = 128", "gemm_bn");
    refuses(ctx, "gemm_bn=128=128", "gemm_bn");
    refuses(ctx, "gemm_bn=0x80", "gemm_bn");
    refuses(ctx, "gemm_bn=99999999999999999999", "gemm_bn");
    char longi[300];
    memset(longi, 'k', sizeof longi - 1);
    longi[sizeof longi - 1] = 0;
    refuses(ctx, longi, "too long");
    CHECK(strcmp(get(ctx), "gemm_lag=3") == 0, "overrides after the refusals: '%s'", get(ctx));
    /* NULL arguments and short buffers */
    CHECK_STATUS(fp8kit_ctx_set_tuning(NULL, "gemm_bn=128"), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ctx_set_tuning(NULL, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK(strstr(fp8kit_last_error(NULL), "ctx") != NULL, "msg: %s", fp8kit_last_error(NULL));
    char buf[16];
    CHECK_STATUS(fp8kit_ctx_get_tuning(NULL, buf, sizeof buf), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ctx_get_tuning(ctx, NULL, 16), FP8KIT_ERR_NULL_POINTER);
    accepts(ctx, "gemm_bn=128", "gemm_bn=128"); /* 11 characters */
    CHECK_STATUS(fp8kit_ctx_get_tuning(ctx, buf, 12), FP8KIT_OK);
    CHECK(strcmp(buf, "gemm_bn=128") == 0, "get into 12 bytes: '%s'", buf);
    memset(buf, 0x5A, sizeof buf);
    CHECK_STATUS(fp8kit_ctx_get_tuning(ctx, buf, 11), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK((unsigned char)buf[11] == 0x5A, "a refused get wrote past its 11 bytes");
    accepts(ctx, "", "");
    CHECK_STATUS(fp8kit_ctx_get_tuning(ctx, buf, 1), FP8KIT_OK);
    CHECK(buf[0] == 0, "empty overrides into 1 byte: '%s'", buf);
    CHECK_STATUS(fp8kit_ctx_get_tuning(ctx, buf, 0), FP8KIT_ERR_INVALID_ARGUMENT);
    /* contexts do not share overrides */
    fp8kit_ctx *other = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &other), FP8KIT_OK);
    if (other) {
        accepts(ctx, "gemm_bn=64", "gemm_bn=64");
        CHECK(strcmp(get(other), "") == 0, "another context's overrides: '%s'", get(other));
        fp8kit_ctx_destroy(other);
    }
    accepts(ctx, "", "");
}

/* The environment default: FP8KIT_TUNING gives a new context its
 * overrides; a bad one makes fp8kit_ctx_create fail, write nothing, and
 * pass on fp8kit_ctx_set_tuning's message (what ref gets for the text). */
static void test_env(fp8kit_ctx *ref)
{
    fp8kit_ctx *c = NULL;
    setenv("FP8KIT_TUNING", "gemm_bn=128 cpu_isa=generic,small_r=24", 1);
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &c), FP8KIT_OK);
    if (c) {
        CHECK(strcmp(get(c), "gemm_bn=128,small_r=24,cpu_isa=0") == 0, "FP8KIT_TUNING gave '%s'", get(c));
        accepts(c, "gemm_promo=1", "gemm_promo=1"); /* the context's own call replaces it */
        fp8kit_ctx_destroy(c);
    }
    setenv("FP8KIT_TUNING", "", 1);
    c = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &c), FP8KIT_OK);
    if (c) {
        CHECK(strcmp(get(c), "") == 0, "FP8KIT_TUNING='' gave '%s'", get(c));
        fp8kit_ctx_destroy(c);
    }
    static const struct {
        const char *spec, *what;
    } bad[] = {{"gemm_bn=7", "gemm_bn"}, {"gemm_bogus=1", "gemm_bogus"}, {"cpu_isa", "cpu_isa"},
               {"gemm_bn=128,small_mc=9", "small_mc"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char inner[512];
        CHECK_STATUS(fp8kit_ctx_set_tuning(ref, bad[i].spec), FP8KIT_ERR_INVALID_ARGUMENT);
        snprintf(inner, sizeof inner, "%s", fp8kit_last_error(ref));
        setenv("FP8KIT_TUNING", bad[i].spec, 1);
        c = (fp8kit_ctx *)0x1;
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &c), FP8KIT_ERR_INVALID_ARGUMENT);
        CHECK(c == (fp8kit_ctx *)0x1, "FP8KIT_TUNING='%s': ctx_create wrote *out on failure", bad[i].spec);
        const char *msg = fp8kit_last_error(NULL);
        if (i == 0)
            printf("  FP8KIT_TUNING='%s': %s\n", bad[i].spec, msg);
        CHECK(strstr(msg, "FP8KIT_TUNING") != NULL && strstr(msg, bad[i].what) != NULL,
              "FP8KIT_TUNING='%s': message '%s' names neither the variable nor '%s'", bad[i].spec, msg, bad[i].what);
        CHECK(strstr(msg, inner) != NULL, "FP8KIT_TUNING='%s': message '%s' lacks fp8kit_ctx_set_tuning's '%s'",
              bad[i].spec, msg, inner);
    }
    unsetenv("FP8KIT_TUNING");
    c = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &c), FP8KIT_OK);
    if (c) {
        CHECK(strcmp(get(c), "") == 0, "without FP8KIT_TUNING: '%s'", get(c));
        fp8kit_ctx_destroy(c);
    }
}

#define M 24
#define N 40
#define K 64

typedef struct bufs {
    uint8_t a[M * K], b[N * K];
    float sa[M], sb[N], bias[N];
    uint16_t d[M * N];
} bufs;

static void make(bufs *x, fp8kit_gemm_desc *gd, fp8kit_gemm_args *ga)
{
    for (int i = 0; i < M * K; i++)
        x->a[i] = (uint8_t)((i * 2654435761u >> 13) & 0x77); /* finite e4m3 codes of both signs */
    for (int i = 0; i < N * K; i++)
        x->b[i] = (uint8_t)((i * 40503u >> 7) & 0x77);
    for (int i = 0; i < M; i++)
        x->sa[i] = 0.5f + (float)i / M;
    for (int i = 0; i < N; i++)
        x->sb[i] = 0.75f + (float)i / N, x->bias[i] = (float)(i % 7) - 3.0f;
    memset(gd, 0, sizeof *gd);
    gd->scale_a = gd->scale_b = FP8KIT_SCALE_ROW;
    gd->bias = FP8KIT_BIAS_COL;
    gd->act = FP8KIT_ACT_RELU;
    memset(ga, 0, sizeof *ga);
    ga->a = fp8kit_tensor_2d(x->a, FP8KIT_E4M3, M, K, K);
    ga->b = fp8kit_tensor_2d(x->b, FP8KIT_E4M3, N, K, K);
    ga->scale_a = fp8kit_tensor_make(x->sa, FP8KIT_F32, 1, (int64_t[]){M});
    ga->scale_b = fp8kit_tensor_make(x->sb, FP8KIT_F32, 1, (int64_t[]){N});
    ga->bias = fp8kit_tensor_make(x->bias, FP8KIT_F32, 1, (int64_t[]){N});
    ga->alpha = 1.0f;
    ga->d = fp8kit_tensor_2d(x->d, FP8KIT_BF16, M, N, N);
}

static void test_describe(fp8kit_ctx *ctx)
{
    static bufs x;
    fp8kit_gemm_desc gd;
    fp8kit_gemm_args ga;
    make(&x, &gd, &ga);
    char d0[256], d1[256];
    accepts(ctx, "", "");
    const int64_t p0 = fp8kit_plan_cache_size(ctx);
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, d0, sizeof d0), FP8KIT_OK);
    printf("  default: %s\n", d0);
    CHECK(strncmp(d0, "cpu isa=", 8) == 0, "describe on a CPU context: '%s'", d0);
    CHECK(strchr(d0, '\n') == NULL, "describe wrote more than one line: '%s'", d0);
    CHECK(fp8kit_plan_cache_size(ctx) == p0 + 1, "describe made no plan (cache %lld, was %lld)",
          (long long)fp8kit_plan_cache_size(ctx), (long long)p0);
    /* the same call again: the same plan, described the same */
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, d1, sizeof d1), FP8KIT_OK);
    CHECK(strcmp(d0, d1) == 0, "two descriptions of one call: '%s', '%s'", d0, d1);
    CHECK_STATUS(fp8kit_gemm_supported(ctx, &gd, &ga), FP8KIT_OK);
    memset(x.d, 0xFF, sizeof x.d);
    CHECK_STATUS(fp8kit_gemm(ctx, &gd, &ga, NULL), FP8KIT_OK);
    CHECK(fp8kit_plan_cache_size(ctx) == p0 + 1, "fp8kit_gemm after describe planned again (cache %lld)",
          (long long)fp8kit_plan_cache_size(ctx));
    /* forced generic microkernel: described, and a new plan of the same call */
    accepts(ctx, "cpu_isa=generic", "cpu_isa=0");
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, d1, sizeof d1), FP8KIT_OK);
    printf("  cpu_isa=generic: %s\n", d1);
    CHECK(strncmp(d1, "cpu isa=generic ", 16) == 0, "describe with cpu_isa=generic: '%s'", d1);
    CHECK(fp8kit_plan_cache_size(ctx) == p0 + 2, "a changed tuning did not plan again (cache %lld, want %lld)",
          (long long)fp8kit_plan_cache_size(ctx), (long long)(p0 + 2));
    static uint16_t dg[M * N];
    memcpy(dg, x.d, sizeof dg);
    memset(x.d, 0xFF, sizeof x.d);
    CHECK_STATUS(fp8kit_gemm(ctx, &gd, &ga, NULL), FP8KIT_OK);
    CHECK(fp8kit_plan_cache_size(ctx) == p0 + 2, "fp8kit_gemm under cpu_isa=generic planned again");
    long far = 0; /* the microkernels may round differently: within a few bf16 steps */
    for (int i = 0; i < M * N; i++) {
        const float a = fk_t_u2f((uint32_t)dg[i] << 16), b = fk_t_u2f((uint32_t)x.d[i] << 16);
        far += !(fabsf(a - b) <= 0x1p-6f * fabsf(a) + 1e-3f);
    }
    CHECK(far == 0, "cpu_isa=generic: %ld outputs far from the default microkernel's", far);
    /* back to the defaults: the planner's choice again, the plan made before
     * any override found again (plans are keyed by the overrides' content) */
    accepts(ctx, NULL, "");
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, d1, sizeof d1), FP8KIT_OK);
    CHECK(strcmp(d0, d1) == 0, "defaults restored: '%s', was '%s'", d1, d0);
    CHECK(fp8kit_plan_cache_size(ctx) == p0 + 2, "restoring the defaults planned again (cache %lld)",
          (long long)fp8kit_plan_cache_size(ctx));
    /* the same overrides set again find their plan again */
    accepts(ctx, "cpu_isa=generic", "cpu_isa=0");
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, d1, sizeof d1), FP8KIT_OK);
    CHECK(fp8kit_plan_cache_size(ctx) == p0 + 2, "the same overrides set again planned again (cache %lld)",
          (long long)fp8kit_plan_cache_size(ctx));
    accepts(ctx, NULL, "");
    /* keys another backend reads plan the CPU call the same way */
    accepts(ctx, "gemm_bn=64,gemm_cluster=2,small_r=8", "gemm_bn=64,gemm_cluster=2,small_r=8");
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, d1, sizeof d1), FP8KIT_OK);
    CHECK(strcmp(d0, d1) == 0, "CUDA keys changed the CPU plan: '%s', was '%s'", d1, d0);
    accepts(ctx, "", "");
    /* a short buffer: truncated, still terminated */
    char small[9];
    memset(small, 0x5A, sizeof small);
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, small, 8), FP8KIT_OK);
    CHECK(strcmp(small, "cpu isa") == 0 && (unsigned char)small[8] == 0x5A, "describe into 8 bytes: '%.8s'", small);
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, NULL, 64), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, small, 0), FP8KIT_ERR_NULL_POINTER);

    /* supported and describe give fp8kit_gemm's status (and message) on bad
     * calls, and write nothing to D */
    static const struct {
        const char *what;
        fp8kit_status want;
    } bad[] = {{"a NULL", FP8KIT_ERR_NULL_POINTER},      {"scale_b NULL", FP8KIT_ERR_NULL_POINTER},
               {"d NULL", FP8KIT_ERR_NULL_POINTER},      {"amax_d set", FP8KIT_ERR_UNSUPPORTED},
               {"beta 1, c NULL", FP8KIT_ERR_NULL_POINTER}, {"K stride 2", FP8KIT_ERR_INVALID_STRIDE},
               {"b dtype f32", FP8KIT_ERR_UNSUPPORTED},  {"d rows M+1", FP8KIT_ERR_INVALID_SHAPE},
               {"desc act 99", FP8KIT_ERR_INVALID_ARGUMENT}, {"b columns K-16", FP8KIT_ERR_INVALID_SHAPE},
               {"desc NULL", FP8KIT_ERR_NULL_POINTER},   {"args NULL", FP8KIT_ERR_NULL_POINTER},
               {"ctx NULL", FP8KIT_ERR_NULL_POINTER}};
    float amax = 0;
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        make(&x, &gd, &ga);
        fp8kit_ctx *cc = ctx;
        const fp8kit_gemm_desc *pd = &gd;
        const fp8kit_gemm_args *pa = &ga;
        switch (c) {
        case 0: ga.a.data = NULL; break;
        case 1: ga.scale_b.data = NULL; break;
        case 2: ga.d.data = NULL; break;
        case 3: ga.amax_d = &amax; break;
        case 4: ga.beta = 1.0f; break;
        case 5: ga.a.strides[1] = 2; break;
        case 6: ga.b.dtype = FP8KIT_F32; break;
        case 7: ga.d.shape[0] = M + 1; break;
        case 8: gd.act = (fp8kit_activation)99; break;
        case 9: ga.b.shape[1] = K - 16; break;
        case 10: pd = NULL; break;
        case 11: pa = NULL; break;
        case 12: cc = NULL; break;
        }
        fp8kit_status s1 = fp8kit_gemm_supported(cc, pd, pa);
        char m1[512];
        snprintf(m1, sizeof m1, "%s", fp8kit_last_error(cc));
        memset(d1, 0x5A, sizeof d1);
        fp8kit_status s2 = fp8kit_gemm_describe(cc, pd, pa, d1, sizeof d1);
        char m2[512];
        snprintf(m2, sizeof m2, "%s", fp8kit_last_error(cc));
        memset(x.d, 0xFF, sizeof x.d);
        fp8kit_status s3 = fp8kit_gemm(cc, pd, pa, NULL);
        const char *m3 = fp8kit_last_error(cc);
        CHECK(s3 == bad[c].want, "%s: fp8kit_gemm gave %s, want %s", bad[c].what, fp8kit_status_string(s3),
              fp8kit_status_string(bad[c].want));
        CHECK(s1 == s3 && s2 == s3, "%s: supported %s, describe %s, fp8kit_gemm %s", bad[c].what,
              fp8kit_status_string(s1), fp8kit_status_string(s2), fp8kit_status_string(s3));
        CHECK(strcmp(m1, m3) == 0 && strcmp(m2, m3) == 0, "%s: messages '%s', '%s', fp8kit_gemm's '%s'", bad[c].what,
              m1, m2, m3);
        CHECK(d1[0] == 0, "%s: describe left text after a failure: '%.40s'", bad[c].what, d1);
        for (int i = 0; i < M * N; i++)
            if (x.d[i] != 0xFFFF) {
                CHECK(0, "%s: d was written", bad[c].what);
                break;
            }
    }
    /* good calls of other kinds are supported like fp8kit_gemm runs them */
    make(&x, &gd, &ga);
    gd.scale_a = gd.scale_b = FP8KIT_SCALE_TENSOR;
    gd.bias = FP8KIT_BIAS_NONE;
    memset(&ga.bias, 0, sizeof ga.bias);
    ga.scale_a = fp8kit_tensor_make(x.sa, FP8KIT_F32, 0, NULL);
    ga.scale_b = fp8kit_tensor_make(x.sb, FP8KIT_F32, 0, NULL);
    ga.b = fp8kit_tensor_2d(x.b, FP8KIT_E5M2, N, K, K);
    ga.d = fp8kit_tensor_2d(x.d, FP8KIT_F32, M / 2, N / 2, N / 2);
    ga.a.shape[0] = M / 2;
    ga.b.shape[0] = N / 2;
    CHECK_STATUS(fp8kit_gemm_supported(ctx, &gd, &ga), FP8KIT_OK);
    CHECK_STATUS(fp8kit_gemm_describe(ctx, &gd, &ga, d1, sizeof d1), FP8KIT_OK);
    CHECK(strncmp(d1, "cpu isa=", 8) == 0, "describe of an f32 call: '%s'", d1);
    CHECK_STATUS(fp8kit_gemm(ctx, &gd, &ga, NULL), FP8KIT_OK);
}

int main(void)
{
    unsetenv("FP8KIT_TUNING"); /* this test sets it itself */
    fp8kit_ctx *ctx = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx), FP8KIT_OK);
    if (!ctx)
        return fk_test_summary("test_tuning");
    test_keys(ctx);
    test_env(ctx);
    test_describe(ctx);
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_tuning");
}
