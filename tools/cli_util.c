/* cli_util.c - helpers of the fp8kit CLI: option parsing, deterministic
 * normal random data, timing (host clock or CUDA events through cli_cuda.c),
 * the host/device memory layer, and JSON output helpers. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "format/codec.h"

/* ----------------------------------------------------------------- parsing */
int cli_parse_i64(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi,
                  int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "fp8kit %s: %s expects an integer in [%lld, %lld], got '%s'\n", cmd, opt,
                (long long)lo, (long long)hi, s);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    if (s[0] == '-') {
        fprintf(stderr, "fp8kit %s: %s expects a non-negative integer, got '%s'\n", cmd, opt, s);
        return -1;
    }
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end != '\0') {
        fprintf(stderr, "fp8kit %s: %s expects a non-negative integer, got '%s'\n", cmd, opt, s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_backend(const char *cmd, const char *s, fp8kit_backend *out)
{
    if (!strcmp(s, "auto")) *out = FP8KIT_BACKEND_AUTO;
    else if (!strcmp(s, "cpu")) *out = FP8KIT_BACKEND_CPU;
    else if (!strcmp(s, "cuda")) *out = FP8KIT_BACKEND_CUDA;
    else {
        fprintf(stderr, "fp8kit %s: --backend expects auto, cpu or cuda, got '%s'\n", cmd, s);
        return -1;
    }
    return 0;
}

const char *cli_opt_value(const char *cmd, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "fp8kit %s: option %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

/* ------------------------------------------------------------ random data */
static uint64_t cli_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Box-Muller pair j of the stream: element 2j gets the cosine branch, 2j+1
 * the sine branch. */
static void cli_normal_pair(uint64_t seed, int64_t j, double *z0, double *z1)
{
    uint64_t h1 = cli_mix64(seed ^ cli_mix64((uint64_t)j * 2u));
    uint64_t h2 = cli_mix64(seed ^ cli_mix64((uint64_t)j * 2u + 1u));
    double u1 = ((double)(h1 >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    double u2 = (double)(h2 >> 11) * 0x1.0p-53;
    double rad = sqrt(-2.0 * log(u1));
    double a = 6.283185307179586 * u2;
    *z0 = rad * cos(a);
    *z1 = rad * sin(a);
}

void cli_fill_normal_f32(float *x, int64_t n, uint64_t seed)
{
    int64_t pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < pairs; j++) {
        double z0, z1;
        cli_normal_pair(seed, j, &z0, &z1);
        x[2 * j] = (float)z0;
        if (2 * j + 1 < n) x[2 * j + 1] = (float)z1;
    }
}

void cli_fill_normal_bf16(uint16_t *x, int64_t n, uint64_t seed)
{
    int64_t pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < pairs; j++) {
        double z0, z1;
        cli_normal_pair(seed, j, &z0, &z1);
        x[2 * j] = fk_f32_to_bf16((float)z0);
        if (2 * j + 1 < n) x[2 * j + 1] = fk_f32_to_bf16((float)z1);
    }
}

/* ------------------------------------------------------------------ timing */
double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cli_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *v, int n)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cli_cmp_double);
    return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ----------------------------------------------------- host / device memory */
void *cli_alloc(const cli_dev *d, size_t bytes)
{
    if (bytes == 0) bytes = 1;
    if (d->cuda) return cli_cuda_malloc(bytes);
    size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded);
}

void cli_free(const cli_dev *d, void *p)
{
    if (!p) return;
    if (d->cuda) cli_cuda_free(p);
    else free(p);
}

int cli_upload(const cli_dev *d, void *dst, const void *src, size_t bytes)
{
    if (d->cuda) return cli_cuda_h2d(dst, src, bytes);
    if (dst != src) memcpy(dst, src, bytes);
    return 0;
}

int cli_download(const cli_dev *d, void *dst, const void *src, size_t bytes)
{
    if (d->cuda) return cli_cuda_d2h(dst, src, bytes);
    if (dst != src) memcpy(dst, src, bytes);
    return 0;
}

int cli_sync(const cli_dev *d) { return d->cuda ? cli_cuda_sync() : 0; }

fp8kit_status cli_time_op(const cli_dev *d, cli_op_fn fn, void *arg, int warmup, int reps,
                          double *median_s)
{
    fp8kit_status st;
    for (int i = 0; i < warmup; i++)
        if ((st = fn(arg)) != FP8KIT_OK) return st;
    if (cli_sync(d)) return FP8KIT_ERR_DEVICE;
    if (reps < 1) reps = 1;
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) return FP8KIT_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < reps; i++) {
        if (d->cuda) {
            if (cli_cuda_flush_l2() || cli_cuda_timer_begin()) { free(t); return FP8KIT_ERR_DEVICE; }
            st = fn(arg);
            if (st != FP8KIT_OK) { (void)cli_cuda_sync(); free(t); return st; }
            if (cli_cuda_timer_end(&t[i])) { free(t); return FP8KIT_ERR_DEVICE; }
        } else {
            double t0 = cli_now();
            st = fn(arg);
            t[i] = cli_now() - t0;
            if (st != FP8KIT_OK) { free(t); return st; }
        }
    }
    *median_s = cli_median(t, reps);
    free(t);
    return FP8KIT_OK;
}

double cli_copy_seconds(const cli_dev *d, size_t bytes, int reps)
{
    void *a = cli_alloc(d, bytes), *b = cli_alloc(d, bytes);
    double *t = malloc((size_t)(reps > 0 ? reps : 1) * sizeof *t);
    double res = -1.0;
    if (!a || !b || !t || reps < 1) goto out;
    if (d->cuda) {
        if (cli_cuda_d2d(b, a, bytes) || cli_cuda_sync()) goto out; /* warm-up */
        for (int i = 0; i < reps; i++) {
            if (cli_cuda_flush_l2() || cli_cuda_timer_begin() || cli_cuda_d2d(b, a, bytes) ||
                cli_cuda_timer_end(&t[i]))
                goto out;
        }
    } else {
        memset(a, 1, bytes);
        memset(b, 2, bytes);
        for (int i = -1; i < reps; i++) {
            double t0 = cli_now();
#pragma omp parallel
            {
#ifdef _OPENMP
                int nt = omp_get_num_threads(), id = omp_get_thread_num();
#else
                int nt = 1, id = 0;
#endif
                size_t chunk = (bytes + (size_t)nt - 1) / (size_t)nt;
                size_t lo = chunk * (size_t)id, hi = lo + chunk < bytes ? lo + chunk : bytes;
                if (lo < hi) memcpy((char *)b + lo, (char *)a + lo, hi - lo);
            }
            if (i >= 0) t[i] = cli_now() - t0;
        }
    }
    res = cli_median(t, reps);
out:
    cli_free(d, a);
    cli_free(d, b);
    free(t);
    return res;
}

/* -------------------------------------------------------------------- JSON */
void cli_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

void cli_json_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.6g", v);
    else fputs("null", f);
}

/* ------------------------------------------------------------------- names */
const char *cli_scheme_name(fp8kit_scheme s)
{
    switch (s) {
    case FP8KIT_SCHEME_TENSOR: return "tensor";
    case FP8KIT_SCHEME_ROW: return "row";
    case FP8KIT_SCHEME_BLOCK1X128: return "block1x128";
    case FP8KIT_SCHEME_BLOCK128X128: return "block128x128";
    case FP8KIT_SCHEME_MX: return "mx";
    }
    return "?";
}

const char *cli_scale_mode_name(fp8kit_scale_mode m)
{
    switch (m) {
    case FP8KIT_SCALE_NONE: return "none";
    case FP8KIT_SCALE_TENSOR: return "tensor";
    case FP8KIT_SCALE_ROW: return "row";
    case FP8KIT_SCALE_BLOCK: return "block";
    case FP8KIT_SCALE_MX: return "mx";
    }
    return "?";
}

const char *cli_act_name(fp8kit_activation a)
{
    switch (a) {
    case FP8KIT_ACT_NONE: return "none";
    case FP8KIT_ACT_RELU: return "relu";
    case FP8KIT_ACT_GELU_TANH: return "gelu_tanh";
    case FP8KIT_ACT_GELU_ERF: return "gelu_erf";
    case FP8KIT_ACT_SILU: return "silu";
    }
    return "?";
}
