/* cli.h - declarations shared by the files of the `fp8kit` command-line tool
 * (the .c files in tools/): exit codes, option parsing helpers, random data, timing, the
 * host/device memory layer (device memory only through tools/cli_cuda.c, the
 * one file that includes <cuda_runtime.h>), JSON helpers, and the runners of
 * the quantize and GEMM measurements shared by `bench` and `gemm`.
 * Build: part of the fp8kit_cli target in CMakeLists.txt (links fp8kit_static, and
 * fp8kit_ref: the fp64 reference GEMM of src/ref/gemm_ref.h that `gemm` checks with). */
#ifndef FK_CLI_H
#define FK_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <getopt.h>
#include <stdio.h>
#include "fp8kit.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1  /* a check failed or the library returned an error */
#define CLI_EXIT_USAGE 2 /* bad arguments, or an existing output without --force */

/* ---------------------------------------------------------------- commands */
int cli_cmd_info(int argc, char **argv);
int cli_cmd_bench(int argc, char **argv);
int cli_cmd_gemm(int argc, char **argv);
/* safetensors checkpoints (tools/cli_st.c) */
int cli_cmd_quantize(int argc, char **argv);
int cli_cmd_dequantize(int argc, char **argv);
int cli_cmd_inspect(int argc, char **argv);

/* ----------------------------------------------------------------- parsing */
/* Every command parses its options with getopt_long (so --opt=value and
 * --opt value both work) through cli_getopt, and reports a bad argument as ONE
 * line on stderr, "fp8kit <cmd>: <what is wrong>; try 'fp8kit <cmd> --help'",
 * with exit status 2; --help prints the full usage on stdout (exit 0). */

/* Prints that line (cmd NULL: the top level) and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* getopt_long with the option letters shortopts ("hq", no leading ':') and
 * long options lo: the option's val, -1 after the last option (the operands
 * are then argv[optind..argc)), or '?' after cli_usage_error (unknown or
 * ambiguous option, missing value, value given to a flag). */
int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts, const struct option *lo);
/* Options of a command that takes only --help and --json: -1 to go on (*json
 * set, optind at the first operand), else the exit status to return (usage
 * printed for --help, a bad option reported). */
int cli_json_only_opts(const char *cmd, int argc, char **argv, void (*usage)(FILE *), int *json);

/* Each returns 0 on success, -1 (after cli_usage_error) when the text is not
 * a valid value. */
int cli_parse_i64(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi,
                  int64_t *out);
int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out);

/* Names: a table per kind, a value's canonical name first, then its aliases
 * (the Python binding's and torch's spellings); names compare
 * case-insensitively. The enums' tables are the library's own
 * (fp8kit_<enum>_name / _alias, src/core/names.c), gathered on first use;
 * only the CLI's own vocabularies (--format, bench --only) are written here. */
typedef struct cli_name {
    const char *name;
    int value;
} cli_name;
const cli_name *cli_dtype_names(void);       /* fp8kit_dtype: f32 (= fp32, float32, float), ... */
const cli_name *cli_ckpt_scheme_names(void); /* fp8kit_scheme by the converter's names: fp8-tensor (= tensor, ...) */
extern const cli_name cli_ckpt_format_names[]; /* st_format: fp8, compressed-tensors */
const cli_name *cli_scale_mode_names(void);  /* fp8kit_scale_mode: none, tensor (= tensorwise), ... */
const cli_name *cli_backend_names(void);     /* fp8kit_backend */
const cli_name *cli_rounding_names(void);    /* fp8kit_rounding */
const cli_name *cli_act_names(void);         /* fp8kit_activation: none, relu, ..., gelu_erf (= gelu), ... */
#define CLI_DTYPE_BIT(t) (1u << (t))
#define CLI_HP_DTYPES (CLI_DTYPE_BIT(FP8KIT_BF16) | CLI_DTYPE_BIT(FP8KIT_F16) | CLI_DTYPE_BIT(FP8KIT_F32))
#define CLI_SCALE_MODES (~(1u << FP8KIT_SCALE_NONE)) /* gemm --scale: every mode that scales */

/* Value of name s in table t if its value is in the bit mask allowed (~0u:
 * any); else -1 after a usage error naming opt and the accepted names. */
int cli_parse_name(const char *cmd, const char *opt, const char *s, const cli_name *t, unsigned allowed,
                   int *out);
/* "bf16 (= bfloat16)<sep>fp16 (= f16, float16, half)<sep>...": each canonical
 * name of an allowed value with its aliases, for --help texts. */
void cli_print_names(FILE *f, const cli_name *t, unsigned allowed, const char *sep);
int cli_parse_dtype(const char *cmd, const char *opt, const char *s, unsigned allowed, fp8kit_dtype *out);
int cli_parse_backend(const char *cmd, const char *s, fp8kit_backend *out);
int cli_parse_scale_mode(const char *cmd, const char *s, fp8kit_scale_mode *out);
int cli_parse_act(const char *cmd, const char *s, fp8kit_activation *out);
/* The activation names with their aliases (cli_print_names), for --help texts. */
void cli_print_act_names(FILE *f, const char *sep);
int cli_parse_rounding(const char *cmd, const char *s, fp8kit_rounding *out);
int cli_parse_ckpt_scheme(const char *cmd, const char *s, int *out); /* the st_scheme of a cli_ckpt_scheme_names name */

/* ---------------------------------------------------------------- contexts */
/* fp8kit_ctx_create(backend, device 0) and, when threads > 0, the CPU thread
 * count. On failure prints one line saying why (e.g. "no NVIDIA driver found
 * (libcuda.so.1 not loadable): the CUDA backend is unavailable") and returns
 * the status; *ctx is then NULL. */
fp8kit_status cli_ctx_create(const char *cmd, fp8kit_backend backend, int64_t threads, fp8kit_ctx **ctx);
/* Why the CUDA backend cannot be used here, in the library's words (buf,
 * "" when it can). */
const char *cli_cuda_unavailable_reason(char *buf, size_t n);

/* ------------------------------------------------------------ random data */
/* Deterministic normal samples: element i of the stream depends only on
 * (seed, i), so results do not depend on the OpenMP thread count. */
void cli_fill_normal_f32(float *x, int64_t n, uint64_t seed);
void cli_fill_normal_bf16(uint16_t *x, int64_t n, uint64_t seed);

/* ------------------------------------------------------------------ timing */
double cli_now(void); /* monotonic seconds */
double cli_median(double *v, int n); /* sorts v */

/* ----------------------------------------------------- host / device memory */
/* Where the buffers handed to fp8kit live: host memory for the CPU backend,
 * CUDA device memory for the CUDA backend. */
typedef struct cli_dev {
    int cuda;
} cli_dev;

void *cli_alloc(const cli_dev *d, size_t bytes); /* NULL on failure */
void cli_free(const cli_dev *d, void *p);
int cli_upload(const cli_dev *d, void *dst, const void *src, size_t bytes);   /* 0 = ok */
int cli_download(const cli_dev *d, void *dst, const void *src, size_t bytes); /* 0 = ok */
int cli_sync(const cli_dev *d);

/* Runs fn(arg) `warmup` times, then `reps` timed times (device: CUDA events
 * around each call after an L2 flush; host: clock_gettime) and stores the
 * median seconds. Returns fn's first non-OK status, or FP8KIT_ERR_DEVICE when
 * the timing itself fails. */
typedef fp8kit_status (*cli_op_fn)(void *arg);
fp8kit_status cli_time_op(const cli_dev *d, cli_op_fn fn, void *arg, int warmup, int reps,
                          double *median_s);

/* Median seconds of a buffer copy of `bytes` bytes (device-to-device on CUDA,
 * OpenMP memcpy on the host): the peer for quantize bandwidth. <0 on error. */
double cli_copy_seconds(const cli_dev *d, size_t bytes, int reps);

/* --------------------------------------------- CUDA layer (tools/cli_cuda.c) */
typedef struct cli_cuda_info {
    char name[256];
    int cc_major, cc_minor;
    int sm_count;
    size_t mem_total, mem_free;
    int driver_version, runtime_version;
} cli_cuda_info;

int cli_cuda_compiled(void);                        /* 1 when built with FP8KIT_HAVE_CUDA */
int cli_cuda_device_count(char *err, size_t errlen); /* <0 with err filled on failure */
int cli_cuda_device_info(int device, cli_cuda_info *out, char *err, size_t errlen);
void *cli_cuda_malloc(size_t bytes);
void cli_cuda_free(void *p);
int cli_cuda_h2d(void *dst, const void *src, size_t bytes);
int cli_cuda_d2h(void *dst, const void *src, size_t bytes);
int cli_cuda_d2d(void *dst, const void *src, size_t bytes);
int cli_cuda_sync(void);
int cli_cuda_flush_l2(void);               /* overwrites a buffer larger than L2 */
int cli_cuda_timer_begin(void);            /* records the start event on stream 0 */
int cli_cuda_timer_end(double *seconds);   /* records the stop event, waits, elapsed */
const char *cli_cuda_last_error(void);     /* text of the last failed CUDA call */

/* -------------------------------------------------------------------- JSON */
/* Prints s as a JSON string literal (quotes and escapes included). */
void cli_json_str(FILE *f, const char *s);
/* Prints a double as a JSON number (null for NaN/Inf). */
void cli_json_num(FILE *f, double v);

/* ------------------------------------------------------- shared measurements */
/* The library's names (fp8kit_<enum>_name), "?" for a value without one. */
const char *cli_or_q(const char *name);
const char *cli_scheme_name(fp8kit_scheme s);
const char *cli_scale_mode_name(fp8kit_scale_mode m);
const char *cli_act_name(fp8kit_activation a);

/* One quantize measurement on a bf16 tensor of rows x cols already in device
 * memory (x_dev) with a host copy (x_host). When cpu_ctx is not NULL and ctx
 * is not the CPU backend, the codes and scales are compared byte for byte
 * with the CPU backend's. */
typedef struct cli_quant_result {
    fp8kit_status st;
    char msg[320];
    double seconds, gbps;
    double bytes;        /* bytes moved: 2 in + 1 out per element + scale bytes */
    double rel_err;      /* ||deq(q) - x||_F / ||x||_F */
    double max_rel;      /* max |deq(q)_i - x_i| / |x_i| over |x_i| >= rms(x)/4 */
    int64_t nan_count;   /* NaN in deq(q) (the input has none) */
    int64_t cpu_mismatch; /* bytes differing from the CPU backend, -1 if not compared */
    int pass;
} cli_quant_result;

void cli_quant_measure(fp8kit_ctx *ctx, fp8kit_ctx *cpu_ctx, const cli_dev *dev,
                       const fp8kit_quant_desc *desc, const void *x_dev, const uint16_t *x_host,
                       int64_t rows, int64_t cols, int reps, cli_quant_result *r);

typedef struct cli_gemm_opts {
    int64_t m, n, k;
    fp8kit_scale_mode scale;
    fp8kit_dtype out;
    int bias;
    fp8kit_activation act;
    uint64_t seed;
    int warmup, reps;
    int64_t ref_rows_max; /* the fp64 reference covers at most this many rows (0 = all) */
    int fast_accum;       /* fp8kit_gemm_desc.fast_accum (CUDA: fewer fp32 promotions) */
} cli_gemm_opts;

typedef struct cli_gemm_result {
    fp8kit_status st;
    char msg[320];
    double seconds, gflops;
    double rel_err, bound;
    int64_t ref_rows;  /* rows of D checked against the fp64 reference */
    int64_t nan_count; /* NaN in the checked part of D (the reference has none) */
    int pass;
} cli_gemm_result;

void cli_gemm_measure(fp8kit_ctx *ctx, const cli_dev *dev, const cli_gemm_opts *o,
                      cli_gemm_result *r);
/* One GEMM result as a table line or one JSON object on stdout. */
void cli_gemm_print(const cli_gemm_opts *o, const cli_gemm_result *r, const char *backend,
                    int json);
/* One quantize result as a table line or one JSON object on stdout. */
void cli_quant_print(const fp8kit_quant_desc *desc, int64_t rows, int64_t cols,
                     const cli_quant_result *r, const char *backend, double copy_gbps, int json);

#endif
