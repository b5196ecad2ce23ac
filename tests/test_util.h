/* test_util.h - tiny test harness shared by tests/test_*.c: CHECK macros that
 * report the first few failures with their location, a deterministic RNG with
 * normal and heavy-tailed samplers, buffer poisoning, and the summary line.
 * A test's main() ends with `return fk_test_summary("name");`. */
#ifndef FK_TEST_UTIL_H
#define FK_TEST_UTIL_H

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fp8kit.h"

static long fk_t_pass, fk_t_fail;
#define FK_T_MAX_REPORTS 20

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (cond) {                                                                   \
            fk_t_pass++;                                                              \
        } else {                                                                      \
            if (fk_t_fail++ < FK_T_MAX_REPORTS) {                                     \
                fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
                fprintf(stderr, __VA_ARGS__);                                         \
                fputc('\n', stderr);                                                  \
            }                                                                         \
        }                                                                             \
    } while (0)

#define CHECK_STATUS(expr, want)                                                      \
    do {                                                                              \
        fp8kit_status st_ = (expr);                                                   \
        CHECK(st_ == (want), "%s returned %s, want %s", #expr, fp8kit_status_string(st_), \
              fp8kit_status_string(want));                                            \
    } while (0)

/* Prints "N passed, N failed" and returns the process exit code. */
static inline int fk_test_summary(const char *name)
{
    printf("%s: %ld passed, %ld failed\n", name, fk_t_pass, fk_t_fail);
    return fk_t_fail ? 1 : 0;
}

/* Exit code CTest treats as "skipped". */
#define FK_TEST_SKIP 77

/* A test program's on/off options (--name sets *set to 1) and --help, read
 * with getopt_long from one table; usage lists each flag's help. Returns -1
 * to go on, else the exit code (0 after --help, 2 for a bad argument). */
typedef struct fk_test_flag {
    const char *name;
    int *set;
    const char *help;
} fk_test_flag;
static inline int fk_test_flags(const char *prog, int argc, char **argv, const fk_test_flag *flags, int n)
{
    struct option opts[16];
    int k = 0;
    for (; k < n && k < 14; k++)
        opts[k] = (struct option){flags[k].name, no_argument, NULL, 'a' + k};
    opts[k++] = (struct option){"help", no_argument, NULL, 'h'};
    opts[k] = (struct option){NULL, 0, NULL, 0};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o >= 'a' && o < 'a' + n) {
            *flags[o - 'a'].set = 1;
            continue;
        }
        FILE *f = o == 'h' ? stdout : stderr;
        fprintf(f, "usage: %s", prog);
        for (int i = 0; i < n; i++)
            fprintf(f, " [--%s]", flags[i].name);
        fprintf(f, "\n");
        for (int i = 0; i < n; i++)
            fprintf(f, "  --%-8s %s\n", flags[i].name, flags[i].help);
        return o == 'h' ? 0 : 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (--help)\n", prog, argv[optind]);
        return 2;
    }
    return -1;
}

/* FK_TEST_SKIP, with a line saying why, when this build or machine has no
 * usable CUDA device; else -1. */
static inline int fk_test_cuda_skip(const char *prog)
{
#ifndef FP8KIT_HAVE_CUDA
    printf("%s: built without CUDA, skipped\n", prog);
    return FK_TEST_SKIP;
#else
    if (!fp8kit_backend_available(FP8KIT_BACKEND_CUDA)) {
        printf("%s: no usable CUDA device, skipped\n", prog);
        return FK_TEST_SKIP;
    }
    return -1;
#endif
}

/* xoshiro-style deterministic RNG (splitmix64). */
typedef struct { uint64_t s; } fk_rng;
static inline uint64_t fk_rng_u64(fk_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint32_t fk_rng_u32(fk_rng *r) { return (uint32_t)(fk_rng_u64(r) >> 32); }
/* uniform in [0, 1) */
static inline double fk_rng_unif(fk_rng *r) { return (double)(fk_rng_u64(r) >> 11) * 0x1.0p-53; }
static inline double fk_rng_normal(fk_rng *r)
{
    double u1 = fk_rng_unif(r), u2 = fk_rng_unif(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
/* Heavy-tailed: Student-t with 2 degrees of freedom (infinite variance). */
static inline double fk_rng_heavy(fk_rng *r)
{
    double z = fk_rng_normal(r), a = fk_rng_normal(r), b = fk_rng_normal(r);
    return z / sqrt((a * a + b * b) / 2.0 + 1e-300);
}
/* Seed from FK_TEST_SEED or the time, printed so failures can be replayed. */
static inline fk_rng fk_rng_seeded(const char *name)
{
    const char *e = getenv("FK_TEST_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL);
    printf("%s: seed %llu (FK_TEST_SEED to replay)\n", name, (unsigned long long)seed);
    fk_rng r = {seed};
    return r;
}

/* Fill with a recognizable byte pattern / check it is untouched. */
#define FK_POISON 0xA5
static inline void fk_poison(void *p, size_t n) { memset(p, FK_POISON, n); }
static inline int fk_is_poisoned(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != FK_POISON) return 0;
    return 1;
}

/* An f16 output cast rounds |y| >= 65520 to infinity (RNE). Near that edge a
 * backend whose y differs from the fp64 reference by rel el may land on
 * either side, so a GEMM check treats |y| >= 65520 (1 - el) apart:
 * fk_t_f16_edge says whether y is there, fk_t_f16_edge_ok whether v is an
 * answer a correct backend can give (the infinity of y's sign, or, within
 * el of the edge, a finite value within el of y). */
static inline int fk_t_f16_edge(double y, double el) { return fabs(y) >= 65520.0 * (1.0 - el); }
static inline int fk_t_f16_edge_ok(double y, double v, double el)
{
    if (isinf(v))
        return (v > 0) == (y > 0);
    return fabs(y) <= 65520.0 * (1.0 + el) && fabs(v - y) <= el * fabs(y);
}

/* Below the normal range an output cast keeps an absolute quantum, not a
 * relative one: a y that rounds to an f16 subnormal is off by up to half of
 * 2^-24, which can be any fraction of y (the spec's relative bound holds for
 * normal outputs). A GEMM check of a small D whose entries are all that tiny
 * (one entry of -1.1e-7 in f16, say) divides its error by at least
 * sqrt(count) times dtype t's smallest normal: the same bound in the normal
 * range, about one subnormal spacing per entry below it. f32 outputs are
 * compared as computed. err2 / ref2: the sums of squares of fk_ref_norm. */
static inline double fk_t_rel_floor(double err2, double ref2, int64_t count, fp8kit_dtype t)
{
    const double min_normal = t == FP8KIT_F16 ? 6.103515625e-05 /* 2^-14 */
                            : t == FP8KIT_BF16 ? 1.1754943508222875e-38 /* 2^-126 */ : 0.0;
    const double den = fmax(sqrt(ref2), min_normal * sqrt((double)count));
    return den > 0.0 ? sqrt(err2) / den : sqrt(err2);
}

/* A's 1x128 scales sa (T x kb, plain row-major) in the grouped GEMM's
 * mn_major layout: one (kb, 4 ceil(R/4)) buffer per slab of R = T / slabs
 * rows (contiguous: one slab; masked: G of M rows), padding NaN (never
 * read). Returns a malloc'd buffer (one float more than *count). */
static inline float *fk_t_mn_major(const float *sa, int64_t T, int64_t kb, int64_t slabs, int64_t *count)
{
    const int64_t R = T / slabs, ld = (R + 3) / 4 * 4;
    *count = slabs * kb * ld;
    float *o = (float *)malloc(sizeof(float) * (size_t)(*count + 1));
    for (int64_t i = 0; i <= *count; i++)
        o[i] = NAN;
    for (int64_t g = 0; g < slabs; g++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < kb; j++)
                o[g * kb * ld + j * ld + r] = sa[(g * R + r) * kb + j];
    return o;
}

static inline uint32_t fk_t_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float fk_t_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Special and boundary fp32 inputs of the quantizers, by kind: 0, the smallest
 * normal, e4m3's max and the values around it, FLT_MAX, NaN, +-Inf, the
 * smallest subnormal, e5m2's max and beyond, -0, else a random subnormal. */
static inline float fk_t_edge_value(fk_rng *r, int kind)
{
    switch (kind) {
    case 0: return 0.0f;
    case 1: return fk_t_u2f(0x00800000u); /* 2^-126 */
    case 2: return 448.0f;
    case 3: return 480.0f;
    case 4: return -480.0f;
    case 5: return fk_t_u2f(0x7F7FFFFFu); /* FLT_MAX */
    case 6: return fk_t_u2f(0x7FC00000u); /* NaN */
    case 7: return fk_t_u2f(0x7F800000u); /* Inf */
    case 8: return fk_t_u2f(0xFF800000u); /* -Inf */
    case 9: return fk_t_u2f(1u);          /* 2^-149 */
    case 10: return 464.0f;
    case 11: return 57344.0f;
    case 12: return 61440.0f;
    case 13: return -0.0f;
    default: return fk_t_u2f(fk_rng_u32(r) & 0x007FFFFFu); /* subnormal */
    }
}

#endif
