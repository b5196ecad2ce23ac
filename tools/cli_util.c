/* cli_util.c - helpers of the fp8kit CLI: option parsing (getopt_long with
 * one-line usage errors, numbers, and the table-driven parser of every kind
 * of name: dtypes, schemes, scale modes, ...), context creation, deterministic
 * normal random data, timing (host clock or CUDA events through cli_cuda.c),
 * the host/device memory layer, and JSON output helpers. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "format/codec.h"
#include "io/safetensors.h" /* st_scheme (the enum only: no jansson needed) */

/* ------------------------------------------------------------ usage errors */
int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cmd)
        fprintf(stderr, "fp8kit %s: %s; try 'fp8kit %s --help'\n", cmd, msg, cmd);
    else
        fprintf(stderr, "fp8kit: %s; try 'fp8kit --help'\n", msg);
    return CLI_EXIT_USAGE;
}

/* ----------------------------------------------------------------- options */
/* Why getopt_long refused argv[optind - 1]: one line through cli_usage_error. */
static void cli_getopt_refusal(const char *cmd, const char *arg, int err, const struct option *lo)
{
    if (!arg || strncmp(arg, "--", 2)) { /* a short option */
        if (err == ':') cli_usage_error(cmd, "option '%s' needs a value", arg ? arg : "?");
        else cli_usage_error(cmd, "unknown option '%s'", arg ? arg : "?");
        return;
    }
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    if (err == ':') {
        cli_usage_error(cmd, "option '--%.*s' needs a value", (int)len, name);
        return;
    }
    int matches = 0;
    char list[256] = "";
    for (const struct option *o = lo; o->name; o++) {
        if (strncmp(o->name, name, len)) continue;
        if (strlen(o->name) == len) { /* exact: a value given to a flag */
            cli_usage_error(cmd, "option '--%s' takes no value (got '%s')", o->name, arg);
            return;
        }
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s--%s", matches ? ", " : "", o->name);
        matches++;
    }
    if (matches > 1)
        cli_usage_error(cmd, "option '--%.*s' is ambiguous (%s)", (int)len, name, list);
    else
        cli_usage_error(cmd, "unknown option '--%.*s'", (int)len, name);
}

int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts, const struct option *lo)
{
    char opts[64];
    snprintf(opts, sizeof opts, ":%s", shortopts); /* ':' = report a missing value apart */
    opterr = 0;
    int c = getopt_long(argc, argv, opts, lo, NULL);
    if (c == '?' || c == ':') {
        const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : NULL;
        char shortbuf[3] = {'-', (char)optopt, 0};
        /* a bad short option inside a cluster (-qx): name the letter */
        if (optopt && (!arg || strncmp(arg, "--", 2))) arg = shortbuf;
        cli_getopt_refusal(cmd, arg, c, lo);
        return '?';
    }
    return c;
}

/* ----------------------------------------------------------------- numbers */
int cli_parse_i64(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi,
                  int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        cli_usage_error(cmd, "%s expects an integer in [%lld, %lld], got '%s'", opt, (long long)lo,
                        (long long)hi, s);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = s[0] == '-' ? 0 : strtoull(s, &end, 0);
    if (s[0] == '-' || errno || end == s || *end != '\0') {
        cli_usage_error(cmd, "%s expects a non-negative integer, got '%s'", opt, s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* ------------------------------------------------------------------- names */
/* The names of the library's enums come from the library (fp8kit_<enum>_name
 * / _alias, one table per enum in src/core/names.c), gathered on first use
 * into a table of the form cli_parse_name and cli_print_names read: each
 * value's canonical name, then its aliases. */
#define CLI_LIB_NAMES_MAX 64
static const cli_name *cli_lib_names(cli_name *t, const char *(*name)(int), const char *(*alias)(int, int))
{
    if (t[0].name) return t;
    int k = 0;
    for (int v = 0; v < 32; v++) { /* every fp8kit enum has fewer values */
        const char *n = name(v);
        if (!n || !strcmp(n, "invalid")) continue; /* dtypes and backends say "invalid" outside the enum */
        for (int i = -1; n && k < CLI_LIB_NAMES_MAX - 1; n = alias(v, ++i))
            t[k++] = (cli_name){n, v};
    }
    t[k] = (cli_name){NULL, 0};
    return t;
}

#define CLI_LIB_NAMES(fn, e, type)                                                                      \
    static const char *fn##_name(int v) { return fp8kit_##e##_name((type)v); }                         \
    static const char *fn##_alias(int v, int i) { return fp8kit_##e##_alias((type)v, i); }             \
    const cli_name *fn(void)                                                                            \
    {                                                                                                   \
        static cli_name t[CLI_LIB_NAMES_MAX];                                                           \
        return cli_lib_names(t, fn##_name, fn##_alias);                                                 \
    }
CLI_LIB_NAMES(cli_dtype_names, dtype, fp8kit_dtype)
CLI_LIB_NAMES(cli_ckpt_scheme_names, ckpt_scheme, fp8kit_scheme)
CLI_LIB_NAMES(cli_scale_mode_names, scale_mode, fp8kit_scale_mode)
CLI_LIB_NAMES(cli_backend_names, backend, fp8kit_backend)
CLI_LIB_NAMES(cli_rounding_names, rounding, fp8kit_rounding)
CLI_LIB_NAMES(cli_act_names, activation, fp8kit_activation)

/* Checkpoint conventions (quantize --format), as fp8kit.quantize_checkpoint's format= */
const cli_name cli_ckpt_format_names[] = {
    {"fp8", ST_FORMAT_FP8}, {"finegrained-fp8", ST_FORMAT_FP8}, {"deepseek", ST_FORMAT_FP8},
    {"compressed-tensors", ST_FORMAT_COMPRESSED_TENSORS}, {"compressed_tensors", ST_FORMAT_COMPRESSED_TENSORS},
    {"ct", ST_FORMAT_COMPRESSED_TENSORS},
    {NULL, 0}};

static int cli_name_allowed(unsigned allowed, int value)
{
    return value >= 0 && value < 32 && (allowed >> value & 1u);
}

/* "a, b or c": the canonical names of the allowed values */
static void cli_canonical_list(char *buf, size_t n, const cli_name *t, unsigned allowed)
{
    const char *names[32];
    int k = 0;
    for (int i = 0; t[i].name; i++) {
        int first = 1;
        for (int j = 0; j < i; j++) first &= t[j].value != t[i].value;
        if (first && cli_name_allowed(allowed, t[i].value) && k < 32) names[k++] = t[i].name;
    }
    buf[0] = '\0';
    for (int i = 0; i < k; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s", i == 0 ? "" : i == k - 1 ? " or " : ", ", names[i]);
    }
}

int cli_parse_name(const char *cmd, const char *opt, const char *s, const cli_name *t, unsigned allowed,
                   int *out)
{
    for (int i = 0; t[i].name; i++) {
        if (strcasecmp(s, t[i].name)) continue;
        if (cli_name_allowed(allowed, t[i].value)) {
            *out = t[i].value;
            return 0;
        }
        char list[256];
        cli_canonical_list(list, sizeof list, t, allowed);
        cli_usage_error(cmd, "%s %s is not accepted here; %s expects %s", opt, s, opt, list);
        return -1;
    }
    char list[256];
    cli_canonical_list(list, sizeof list, t, allowed);
    int aliases = 0; /* does --help list other spellings? */
    for (int i = 0; t[i].name; i++)
        for (int j = 0; j < i; j++) aliases |= t[j].value == t[i].value && cli_name_allowed(allowed, t[i].value);
    cli_usage_error(cmd, "%s expects %s%s, got '%s'", opt, list, aliases ? " (or an alias listed by --help)" : "", s);
    return -1;
}

void cli_print_names(FILE *f, const cli_name *t, unsigned allowed, const char *sep)
{
    int groups = 0;
    for (int i = 0; t[i].name; i++) {
        int first = 1;
        for (int j = 0; j < i; j++) first &= t[j].value != t[i].value;
        if (!first || !cli_name_allowed(allowed, t[i].value)) continue;
        fprintf(f, "%s%s", groups++ ? sep : "", t[i].name);
        int aliases = 0;
        for (int j = i + 1; t[j].name; j++)
            if (t[j].value == t[i].value) fprintf(f, "%s%s", aliases++ ? ", " : " (= ", t[j].name);
        if (aliases) fputc(')', f);
    }
}

int cli_parse_dtype(const char *cmd, const char *opt, const char *s, unsigned allowed, fp8kit_dtype *out)
{
    int v;
    if (cli_parse_name(cmd, opt, s, cli_dtype_names(), allowed, &v)) return -1;
    *out = (fp8kit_dtype)v;
    return 0;
}

int cli_parse_backend(const char *cmd, const char *s, fp8kit_backend *out)
{
    int v;
    if (cli_parse_name(cmd, "--backend", s, cli_backend_names(), ~0u, &v)) return -1;
    *out = (fp8kit_backend)v;
    return 0;
}

int cli_parse_scale_mode(const char *cmd, const char *s, fp8kit_scale_mode *out)
{
    int v;
    if (cli_parse_name(cmd, "--scale", s, cli_scale_mode_names(), CLI_SCALE_MODES, &v)) return -1;
    *out = (fp8kit_scale_mode)v;
    return 0;
}

int cli_parse_act(const char *cmd, const char *s, fp8kit_activation *out)
{
    int v;
    if (cli_parse_name(cmd, "--act", s, cli_act_names(), ~0u, &v)) return -1;
    *out = (fp8kit_activation)v;
    return 0;
}

void cli_print_act_names(FILE *f, const char *sep)
{
    cli_print_names(f, cli_act_names(), ~0u, sep);
}

int cli_parse_rounding(const char *cmd, const char *s, fp8kit_rounding *out)
{
    int v;
    if (cli_parse_name(cmd, "--rounding", s, cli_rounding_names(), ~0u, &v)) return -1;
    *out = (fp8kit_rounding)v;
    return 0;
}

int cli_parse_ckpt_scheme(const char *cmd, const char *s, int *out)
{
    int v;
    if (cli_parse_name(cmd, "--scheme", s, cli_ckpt_scheme_names(), ~0u, &v)) return -1;
    switch ((fp8kit_scheme)v) { /* the converter's own enum of the same schemes */
    case FP8KIT_SCHEME_TENSOR: *out = ST_SCHEME_FP8_TENSOR; return 0;
    case FP8KIT_SCHEME_ROW: *out = ST_SCHEME_FP8_ROW; return 0;
    case FP8KIT_SCHEME_BLOCK128X128: *out = ST_SCHEME_FP8_BLOCK; return 0;
    case FP8KIT_SCHEME_MX: *out = ST_SCHEME_MXFP8; return 0;
    default: cli_usage_error(cmd, "--scheme %s is not a checkpoint scheme", s); return -1;
    }
}

int cli_json_only_opts(const char *cmd, int argc, char **argv, void (*usage)(FILE *), int *json)
{
    enum { O_JSON = 256 };
    static const struct option lo[] = {
        {"help", no_argument, NULL, 'h'}, {"json", no_argument, NULL, O_JSON}, {NULL, 0, NULL, 0}};
    int c;
    *json = 0;
    while ((c = cli_getopt(cmd, argc, argv, "h", lo)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (c != O_JSON)
            return CLI_EXIT_USAGE; /* cli_getopt said why */
        *json = 1;
    }
    return -1;
}

/* ---------------------------------------------------------------- contexts */
fp8kit_status cli_ctx_create(const char *cmd, fp8kit_backend backend, int64_t threads, fp8kit_ctx **ctx)
{
    fp8kit_status st = fp8kit_ctx_create(backend, 0, ctx);
    if (st != FP8KIT_OK) {
        const char *why = fp8kit_last_error(NULL), *pre = "fp8kit_ctx_create: ";
        if (!strncmp(why, pre, strlen(pre))) why += strlen(pre);
        fprintf(stderr, "fp8kit %s: --backend %s: %s%s\n", cmd, fp8kit_backend_name(backend),
                why[0] ? why : fp8kit_status_string(st),
                st == FP8KIT_ERR_BACKEND_UNAVAILABLE ? " (--backend cpu, or auto, runs on the CPU)" : "");
        *ctx = NULL;
        return st;
    }
    if (threads > 0) (void)fp8kit_ctx_set_threads(*ctx, (int)threads);
    return FP8KIT_OK;
}

const char *cli_cuda_unavailable_reason(char *buf, size_t n)
{
    buf[0] = '\0';
    if (!cli_cuda_compiled()) {
        snprintf(buf, n, "built without the CUDA backend (FP8KIT_CUDA=OFF or no nvcc)");
        return buf;
    }
    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &ctx) == FP8KIT_OK) {
        fp8kit_ctx_destroy(ctx);
        return buf;
    }
    const char *why = fp8kit_last_error(NULL), *pre = "fp8kit_ctx_create: ";
    if (!strncmp(why, pre, strlen(pre))) why += strlen(pre);
    snprintf(buf, n, "%s", why);
    return buf;
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
const char *cli_or_q(const char *name) { return name ? name : "?"; }
const char *cli_scheme_name(fp8kit_scheme s) { return cli_or_q(fp8kit_scheme_name(s)); }
const char *cli_scale_mode_name(fp8kit_scale_mode m) { return cli_or_q(fp8kit_scale_mode_name(m)); }
const char *cli_act_name(fp8kit_activation a) { return cli_or_q(fp8kit_activation_name(a)); }
