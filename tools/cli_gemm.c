/* cli_gemm.c - `fp8kit gemm`: one scaled FP8 GEMM on fresh random inputs,
 * quantized with fp8kit_quantize in the matching scheme, timed (median after
 * warm-up) and checked against the fp64 reference of src/ref/gemm_ref.h (the
 * oracle the tests use too: independent of the library, from the dequantized
 * operands, docs/spec.md section 3). Also provides cli_gemm_measure(), which
 * `fp8kit bench` reuses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ref/gemm_ref.h"

/* ------------------------------------------------------ operand preparation */
typedef struct gemm_operand {
    int64_t rows, k;
    fp8kit_quant_desc qd;
    fp8kit_tensor x, q, s;   /* x (f32) / q (e4m3) / s (scales) on the device */
    uint8_t *q_host;          /* downloaded codes */
    void *s_host;             /* downloaded scales */
    size_t q_bytes, s_bytes;
} gemm_operand;

static int64_t tensor_bytes(const fp8kit_tensor *t)
{
    int64_t n = fp8kit_tensor_numel(t);
    return n < 0 ? -1 : n * (int64_t)fp8kit_dtype_size(t->dtype);
}

/* Quantizes a fresh rows x k normal f32 matrix on ctx; downloads q and scale. */
static fp8kit_status operand_make(fp8kit_ctx *ctx, const cli_dev *dev, gemm_operand *op,
                                  fp8kit_scheme scheme, int64_t rows, int64_t k, uint64_t seed,
                                  char *msg, size_t msglen)
{
    fp8kit_status st;
    memset(op, 0, sizeof *op);
    op->rows = rows;
    op->k = k;
    op->qd = fp8kit_quant_desc_default(scheme);
    size_t xbytes = (size_t)rows * (size_t)k * 4;
    float *xh = malloc(xbytes);
    if (!xh) { snprintf(msg, msglen, "out of host memory"); return FP8KIT_ERR_OUT_OF_MEMORY; }
    cli_fill_normal_f32(xh, rows * k, seed);
    int64_t shape[2] = {rows, k};
    op->x = fp8kit_tensor_make(NULL, FP8KIT_F32, 2, shape);
    if ((st = fp8kit_quant_shapes(&op->qd, &op->x, &op->q, &op->s)) != FP8KIT_OK) {
        snprintf(msg, msglen, "fp8kit_quant_shapes: %s", fp8kit_status_string(st));
        free(xh);
        return st;
    }
    op->q_bytes = (size_t)tensor_bytes(&op->q);
    op->s_bytes = (size_t)tensor_bytes(&op->s);
    op->x.data = cli_alloc(dev, xbytes);
    op->q.data = cli_alloc(dev, op->q_bytes);
    op->s.data = cli_alloc(dev, op->s_bytes);
    op->q_host = malloc(op->q_bytes);
    op->s_host = malloc(op->s_bytes);
    if (!op->x.data || !op->q.data || !op->s.data || !op->q_host || !op->s_host) {
        snprintf(msg, msglen, "out of memory for a %lld x %lld operand %s",
                 (long long)rows, (long long)k, dev->cuda ? cli_cuda_last_error() : "");
        free(xh);
        return FP8KIT_ERR_OUT_OF_MEMORY;
    }
    if (cli_upload(dev, op->x.data, xh, xbytes)) {
        snprintf(msg, msglen, "upload: %s", cli_cuda_last_error());
        free(xh);
        return FP8KIT_ERR_DEVICE;
    }
    free(xh);
    st = fp8kit_quantize(ctx, &op->qd, &op->x, &op->q, &op->s, NULL);
    if (st != FP8KIT_OK) {
        snprintf(msg, msglen, "fp8kit_quantize(%s): %s: %s", cli_scheme_name(scheme),
                 fp8kit_status_string(st), fp8kit_last_error(ctx));
        return st;
    }
    if (cli_sync(dev) || cli_download(dev, op->q_host, op->q.data, op->q_bytes) ||
        cli_download(dev, op->s_host, op->s.data, op->s_bytes)) {
        snprintf(msg, msglen, "download: %s", cli_cuda_last_error());
        return FP8KIT_ERR_DEVICE;
    }
    /* The f32 input is no longer needed on the device. */
    cli_free(dev, op->x.data);
    op->x.data = NULL;
    return FP8KIT_OK;
}

static void operand_free(const cli_dev *dev, gemm_operand *op)
{
    cli_free(dev, op->x.data);
    cli_free(dev, op->q.data);
    cli_free(dev, op->s.data);
    free(op->q_host);
    free(op->s_host);
    memset(op, 0, sizeof *op);
}

/* ------------------------------------------------------------- measurement */
typedef struct gemm_call {
    fp8kit_ctx *ctx;
    fp8kit_gemm_desc desc;
    fp8kit_gemm_args args;
} gemm_call;

static fp8kit_status gemm_call_run(void *p)
{
    gemm_call *c = (gemm_call *)p;
    return fp8kit_gemm(c->ctx, &c->desc, &c->args, NULL);
}

void cli_gemm_measure(fp8kit_ctx *ctx, const cli_dev *dev, const cli_gemm_opts *o,
                      cli_gemm_result *r)
{
    memset(r, 0, sizeof *r);
    r->rel_err = NAN;
    r->bound = fk_ref_bound(o->out, o->k); /* f32 beyond docs/spec.md's K range: grows as sqrt(K) */
    const int64_t M = o->m, N = o->n, K = o->k;
    gemm_operand A, B;
    memset(&A, 0, sizeof A);
    memset(&B, 0, sizeof B);
    void *d_dev = NULL, *d_host = NULL, *bias_dev = NULL, *ws = NULL;
    float *bias_host = NULL;
    double *ref = NULL;
    int64_t *rows = NULL;
    /* D's columns: N/2 with --act swiglu (odd N: the library refuses it) */
    const int64_t ND = o->act == FP8KIT_ACT_SWIGLU ? N / 2 : N;
    size_t d_bytes = (size_t)M * (size_t)ND * fp8kit_dtype_size(o->out);

    fp8kit_scheme sa, sb;
    switch (o->scale) {
    case FP8KIT_SCALE_TENSOR: sa = sb = FP8KIT_SCHEME_TENSOR; break;
    case FP8KIT_SCALE_ROW: sa = sb = FP8KIT_SCHEME_ROW; break;
    case FP8KIT_SCALE_BLOCK: sa = FP8KIT_SCHEME_BLOCK1X128; sb = FP8KIT_SCHEME_BLOCK128X128; break;
    case FP8KIT_SCALE_MX: sa = sb = FP8KIT_SCHEME_MX; break;
    default:
        r->st = FP8KIT_ERR_INVALID_ARGUMENT;
        snprintf(r->msg, sizeof r->msg, "unsupported scale mode");
        return;
    }
    if ((r->st = operand_make(ctx, dev, &A, sa, M, K, o->seed * 3 + 1, r->msg, sizeof r->msg)) ||
        (r->st = operand_make(ctx, dev, &B, sb, N, K, o->seed * 3 + 2, r->msg, sizeof r->msg)))
        goto out;

    gemm_call call;
    memset(&call, 0, sizeof call);
    call.ctx = ctx;
    call.desc.scale_a = o->scale;
    call.desc.scale_b = o->scale;
    call.desc.scale_layout = FP8KIT_LAYOUT_PLAIN;
    call.desc.act = o->act;
    call.desc.bias = o->bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    call.desc.fast_accum = o->fast_accum;
    call.args.a = A.q;
    call.args.b = B.q;
    call.args.scale_a = A.s;
    call.args.scale_b = B.s;
    call.args.alpha = 1.0f;
    call.args.beta = 0.0f;
    d_dev = cli_alloc(dev, d_bytes);
    d_host = malloc(d_bytes);
    if (!d_dev || !d_host) {
        r->st = FP8KIT_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof r->msg, "out of memory for D (%zu bytes)", d_bytes);
        goto out;
    }
    call.args.d = fp8kit_tensor_2d(d_dev, o->out, M, ND, ND);
    if (o->bias) {
        bias_host = malloc((size_t)N * 4);
        bias_dev = cli_alloc(dev, (size_t)N * 4);
        if (!bias_host || !bias_dev) {
            r->st = FP8KIT_ERR_OUT_OF_MEMORY;
            snprintf(r->msg, sizeof r->msg, "out of memory for the bias");
            goto out;
        }
        cli_fill_normal_f32(bias_host, N, o->seed * 3 + 3);
        if (cli_upload(dev, bias_dev, bias_host, (size_t)N * 4)) {
            r->st = FP8KIT_ERR_DEVICE;
            snprintf(r->msg, sizeof r->msg, "upload: %s", cli_cuda_last_error());
            goto out;
        }
        int64_t bshape[1] = {N};
        call.args.bias = fp8kit_tensor_make(bias_dev, FP8KIT_F32, 1, bshape);
    }
    size_t ws_bytes = 0;
    if ((r->st = fp8kit_gemm_workspace_size(ctx, &call.desc, &call.args, &ws_bytes)) != FP8KIT_OK) {
        snprintf(r->msg, sizeof r->msg, "fp8kit_gemm_workspace_size: %s: %s",
                 fp8kit_status_string(r->st), fp8kit_last_error(ctx));
        goto out;
    }
    if (ws_bytes) {
        if (!(ws = cli_alloc(dev, ws_bytes))) {
            r->st = FP8KIT_ERR_OUT_OF_MEMORY;
            snprintf(r->msg, sizeof r->msg, "out of memory for the workspace (%zu bytes)", ws_bytes);
            goto out;
        }
        call.args.workspace = ws;
        call.args.workspace_bytes = ws_bytes;
    }

    /* Poison D so that a kernel that writes nothing cannot pass the check. */
    {
        unsigned char *poison = malloc(d_bytes);
        if (poison) {
            memset(poison, 0xFF, d_bytes); /* NaN in f32, bf16 and f16 */
            (void)cli_upload(dev, d_dev, poison, d_bytes);
            free(poison);
        }
    }
    r->st = cli_time_op(dev, gemm_call_run, &call, o->warmup, o->reps, &r->seconds);
    if (r->st != FP8KIT_OK) {
        snprintf(r->msg, sizeof r->msg, "fp8kit_gemm: %s: %s", fp8kit_status_string(r->st),
                 r->st == FP8KIT_ERR_DEVICE && dev->cuda ? cli_cuda_last_error()
                                                           : fp8kit_last_error(ctx));
        goto out;
    }
    r->gflops = 2.0 * (double)M * (double)N * (double)K / r->seconds * 1e-9;
    if (cli_sync(dev) || cli_download(dev, d_host, d_dev, d_bytes)) {
        r->st = FP8KIT_ERR_DEVICE;
        snprintf(r->msg, sizeof r->msg, "download of D: %s", cli_cuda_last_error());
        goto out;
    }

    /* fp64 reference on all rows, or on ref_rows_max rows spread evenly: the
     * same call with the host copies of the operands, in chunks of rows. */
    int64_t nr = (o->ref_rows_max > 0 && o->ref_rows_max < M) ? o->ref_rows_max : M;
    int64_t chunk = ((int64_t)1 << 22) / N; /* about 32 MiB of reference values at a time */
    if (chunk < 64) chunk = 64;
    if (chunk > nr) chunk = nr;
    rows = malloc((size_t)nr * sizeof *rows);
    ref = malloc((size_t)chunk * (size_t)N * sizeof(double));
    if (!rows || !ref) {
        r->st = FP8KIT_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof r->msg, "out of host memory for the fp64 reference");
        goto out;
    }
    for (int64_t i = 0; i < nr; i++) rows[i] = nr > 1 ? i * (M - 1) / (nr - 1) : 0;
    fp8kit_gemm_args host = call.args;
    host.a.data = A.q_host;
    host.b.data = B.q_host;
    host.scale_a.data = A.s_host;
    host.scale_b.data = B.s_host;
    host.bias.data = bias_host;
    fk_ref_norm norm;
    memset(&norm, 0, sizeof norm);
    for (int64_t i0 = 0; i0 < nr; i0 += chunk) {
        int64_t cnt = nr - i0 < chunk ? nr - i0 : chunk;
        int rst = fk_ref_gemm(&call.desc, &host, rows + i0, cnt, ref);
        if (rst) {
            r->st = rst == FK_REF_ERR_NOMEM ? FP8KIT_ERR_OUT_OF_MEMORY : FP8KIT_ERR_INTERNAL;
            snprintf(r->msg, sizeof r->msg, "the fp64 reference refused the call (%d)", rst);
            goto out;
        }
        for (int64_t i = 0; i < cnt; i++)
            for (int64_t n = 0; n < ND; n++)
                fk_ref_norm_add(&norm, fk_ref_decode(d_host, o->out, rows[i0 + i] * ND + n), ref[i * ND + n]);
    }
    r->ref_rows = nr;
    r->nan_count = norm.nan_extra;
    r->rel_err = fk_ref_norm_rel(&norm);
    r->pass = fk_ref_norm_ok(&norm, r->bound);
out:
    operand_free(dev, &A);
    operand_free(dev, &B);
    cli_free(dev, d_dev);
    cli_free(dev, bias_dev);
    cli_free(dev, ws);
    free(d_host);
    free(bias_host);
    free(ref);
    free(rows);
}

/* ------------------------------------------------------------------ command */
static void gemm_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit gemm [--m M] [--n N] [--k K] [--scale tensor|row|block|mx]\n"
        "                   [--out bf16|fp16|fp32] [--bias] [--act ACTIVATION]\n"
        "                   [--backend auto|cpu|cuda] [--threads T] [--seed S] [--reps R]\n"
        "                   [--ref-rows N] [--fast-accum] [--json]\n"
        "\n"
        "Runs D = act(deq(A) deq(B)^T + bias) once per repetition on fresh normal random\n"
        "inputs (A: M x K, B: N x K, e4m3), quantized with fp8kit_quantize in the scheme of\n"
        "--scale (tensor/row: per tensor/row; block: A 1x128, B 128x128; mx: both MXFP8 along K).\n"
        "Prints the median time of R runs after one warm-up, GFLOP/s, and rel_err =\n"
        "||D - ref||_F / ||ref||_F against an fp64 reference from the dequantized operands\n"
        "(all rows, or --ref-rows rows spread evenly; default: all rows when M*N*K <= 2^31,\n"
        "else 64).\n"
        "--fast-accum sets fp8kit_gemm_desc.fast_accum (CUDA: fewer fp32 promotions of the\n"
        "tensor-core sums, less accurate; the CPU ignores it); the bound stays the same.\n"
        "\n"
        "Names (the Python binding's spellings are accepted too, in any case):\n"
        "  --scale  ");
    cli_print_names(f, cli_scale_mode_names(), CLI_SCALE_MODES, ", ");
    fprintf(f, "\n  --out    ");
    cli_print_names(f, cli_dtype_names(), CLI_HP_DTYPES, ", ");
    fprintf(f, "\n  --act    ");
    cli_print_act_names(f, ", ");
    fprintf(f,
        "\n"
        "Options take their value as --opt VALUE or --opt=VALUE.\n"
        "Defaults: --m 1024 --n 1024 --k 1024 --scale tensor --out bf16 --backend auto\n"
        "          --seed 1 --reps 5\n"
        "Exit status: 0 if rel_err meets the bound of docs/spec.md section 3 for the output\n"
        "dtype (fp32 1e-5, bf16 4e-3, fp16 1e-3), 1 if not or on a library error (a backend\n"
        "not usable here included), 2 on bad arguments.\n");
}

/* Prints one GEMM result as a table line or a JSON object. */
void cli_gemm_print(const cli_gemm_opts *o, const cli_gemm_result *r, const char *backend,
                    int json)
{
    if (json) {
        printf("{\"op\":\"gemm\",\"backend\":");
        cli_json_str(stdout, backend);
        printf(",\"shape\":[%lld,%lld,%lld],\"scale\":\"%s\",\"out\":\"%s\",\"bias\":%s,"
               "\"act\":\"%s\",\"fast_accum\":%s,\"seconds\":",
               (long long)o->m, (long long)o->n, (long long)o->k, cli_scale_mode_name(o->scale),
               fp8kit_dtype_name(o->out), o->bias ? "true" : "false", cli_act_name(o->act),
               o->fast_accum ? "true" : "false");
        cli_json_num(stdout, r->st == FP8KIT_OK || r->seconds > 0 ? r->seconds : NAN);
        printf(",\"gflops\":");
        cli_json_num(stdout, r->gflops > 0 ? r->gflops : NAN);
        printf(",\"rel_err\":");
        cli_json_num(stdout, r->rel_err);
        printf(",\"bound\":");
        cli_json_num(stdout, r->bound);
        printf(",\"ref_rows\":%lld,\"rows\":%lld,\"nan\":%lld,\"reps\":%d,\"pass\":%s,\"status\":\"%s\"",
               (long long)r->ref_rows, (long long)o->m, (long long)r->nan_count, o->reps,
               r->st == FP8KIT_OK && r->pass ? "true" : "false", fp8kit_status_string(r->st));
        if (r->st != FP8KIT_OK) {
            printf(",\"error\":");
            cli_json_str(stdout, r->msg);
        }
        printf("}\n");
    } else if (r->st != FP8KIT_OK) {
        printf("gemm %-6s %5lldx%lldx%lld  out %-4s  %s %s\n", cli_scale_mode_name(o->scale),
               (long long)o->m, (long long)o->n, (long long)o->k, fp8kit_dtype_name(o->out),
               r->st == FP8KIT_ERR_UNSUPPORTED ? "NOT SUPPORTED:" : "ERROR", r->msg);
    } else {
        int tera = r->gflops >= 1e4; /* GPU figures read better in TFLOP/s */
        printf("gemm %-6s %5lldx%lldx%lld  out %-4s%s%s%s  %10.3f ms  %9.1f %s  rel_err %.3e"
               " (bound %.0e; fp64 ref on %lld/%lld rows%s)  %s\n",
               cli_scale_mode_name(o->scale), (long long)o->m, (long long)o->n, (long long)o->k,
               fp8kit_dtype_name(o->out), o->bias ? " +bias" : "",
               o->act ? " +" : "", o->act ? cli_act_name(o->act) : "", r->seconds * 1e3,
               tera ? r->gflops * 1e-3 : r->gflops, tera ? "TFLOP/s" : "GFLOP/s", r->rel_err,
               r->bound, (long long)r->ref_rows, (long long)o->m,
               r->ref_rows < o->m ? ", sampled" : "", r->pass ? "PASS" : "FAIL");
        if (r->nan_count)
            printf("     %lld NaN in D where the reference has none\n", (long long)r->nan_count);
    }
    fflush(stdout);
}

int cli_cmd_gemm(int argc, char **argv)
{
    static const char *cmd = "gemm";
    enum { O_M = 256, O_N, O_K, O_SCALE, O_OUT, O_BIAS, O_ACT, O_BACKEND, O_THREADS, O_SEED, O_REPS,
           O_REF_ROWS, O_FAST_ACCUM, O_JSON };
    static const struct option lo[] = {
        {"help", no_argument, NULL, 'h'},
        {"m", required_argument, NULL, O_M},
        {"n", required_argument, NULL, O_N},
        {"k", required_argument, NULL, O_K},
        {"scale", required_argument, NULL, O_SCALE},
        {"out", required_argument, NULL, O_OUT},
        {"bias", no_argument, NULL, O_BIAS},
        {"act", required_argument, NULL, O_ACT},
        {"backend", required_argument, NULL, O_BACKEND},
        {"threads", required_argument, NULL, O_THREADS},
        {"seed", required_argument, NULL, O_SEED},
        {"reps", required_argument, NULL, O_REPS},
        {"ref-rows", required_argument, NULL, O_REF_ROWS},
        {"fast-accum", no_argument, NULL, O_FAST_ACCUM},
        {"json", no_argument, NULL, O_JSON},
        {NULL, 0, NULL, 0}};
    cli_gemm_opts o;
    memset(&o, 0, sizeof o);
    o.m = o.n = o.k = 1024;
    o.scale = FP8KIT_SCALE_TENSOR;
    o.out = FP8KIT_BF16;
    o.seed = 1;
    o.warmup = 1;
    o.reps = 5;
    int64_t ref_rows = -1, threads = 0, v = 0;
    int json = 0, c, bad = 0;
    fp8kit_backend backend = FP8KIT_BACKEND_AUTO;
    while (!bad && (c = cli_getopt(cmd, argc, argv, "h", lo)) != -1) {
        switch (c) {
        case 'h': gemm_usage(stdout); return CLI_EXIT_OK;
        case O_JSON: json = 1; break;
        case O_BIAS: o.bias = 1; break;
        case O_FAST_ACCUM: o.fast_accum = 1; break;
        case O_M: bad = cli_parse_i64(cmd, "--m", optarg, 1, (int64_t)1 << 20, &o.m); break;
        case O_N: bad = cli_parse_i64(cmd, "--n", optarg, 1, (int64_t)1 << 20, &o.n); break;
        case O_K: bad = cli_parse_i64(cmd, "--k", optarg, 1, (int64_t)1 << 20, &o.k); break;
        case O_SCALE: bad = cli_parse_scale_mode(cmd, optarg, &o.scale); break;
        case O_OUT: bad = cli_parse_dtype(cmd, "--out", optarg, CLI_HP_DTYPES, &o.out); break;
        case O_ACT: bad = cli_parse_act(cmd, optarg, &o.act); break;
        case O_BACKEND: bad = cli_parse_backend(cmd, optarg, &backend); break;
        case O_SEED: bad = cli_parse_u64(cmd, "--seed", optarg, &o.seed); break;
        case O_REPS:
            bad = cli_parse_i64(cmd, "--reps", optarg, 1, 100000, &v);
            o.reps = (int)v;
            break;
        case O_REF_ROWS: bad = cli_parse_i64(cmd, "--ref-rows", optarg, 1, INT64_MAX, &ref_rows); break;
        case O_THREADS: bad = cli_parse_i64(cmd, "--threads", optarg, 0, 4096, &threads); break;
        default: bad = 1; break; /* cli_getopt said why */
        }
    }
    if (bad) return CLI_EXIT_USAGE;
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (o.scale == FP8KIT_SCALE_MX && o.k % 32)
        return cli_usage_error(cmd, "--scale mx needs K to be a multiple of 32 (K = %lld)", (long long)o.k);
    if (ref_rows > 0) o.ref_rows_max = ref_rows;
    else o.ref_rows_max = ((double)o.m * (double)o.n * (double)o.k <= 2147483648.0) ? 0 : 64;

    fp8kit_ctx *ctx = NULL;
    if (cli_ctx_create(cmd, backend, threads, &ctx) != FP8KIT_OK) return CLI_EXIT_FAIL;
    cli_dev dev = {fp8kit_ctx_backend(ctx) == FP8KIT_BACKEND_CUDA};
    cli_gemm_result r;
    cli_gemm_measure(ctx, &dev, &o, &r);
    cli_gemm_print(&o, &r, fp8kit_backend_name(fp8kit_ctx_backend(ctx)), json);
    if (r.st != FP8KIT_OK) fprintf(stderr, "fp8kit gemm: %s\n", r.msg);
    fp8kit_ctx_destroy(ctx);
    return (r.st == FP8KIT_OK && r.pass) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
