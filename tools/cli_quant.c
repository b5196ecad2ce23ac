/* cli_quant.c - one quantize measurement for `fp8kit bench`: times
 * fp8kit_quantize on a bf16 tensor (median after warm-up), counts bytes moved
 * as docs/perf.md counts them (2 B in + 1 B out per element + the scale bytes), and checks
 * the result: dequantize and compare with the input (normwise and max
 * relative error), and on the CUDA backend compare codes and scales byte for
 * byte with the CPU backend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format/codec.h"

typedef struct quant_call {
    fp8kit_ctx *ctx;
    const fp8kit_quant_desc *desc;
    fp8kit_tensor x, q, s;
} quant_call;

static fp8kit_status quant_call_run(void *p)
{
    quant_call *c = (quant_call *)p;
    return fp8kit_quantize(c->ctx, c->desc, &c->x, &c->q, &c->s, NULL);
}

static size_t tbytes(const fp8kit_tensor *t)
{
    int64_t n = fp8kit_tensor_numel(t);
    return n < 0 ? 0 : (size_t)n * fp8kit_dtype_size(t->dtype);
}

/* Byte-exact comparison with the CPU backend on the host copy of x. */
static int64_t compare_with_cpu(fp8kit_ctx *cpu_ctx, const cli_dev *dev, const quant_call *c,
                                const uint16_t *x_host, char *msg, size_t msglen)
{
    size_t qb = tbytes(&c->q), sb = tbytes(&c->s);
    unsigned char *q_dev = malloc(qb), *s_dev = malloc(sb);
    unsigned char *q_cpu = malloc(qb), *s_cpu = malloc(sb);
    int64_t mism = -1;
    if (!q_dev || !s_dev || !q_cpu || !s_cpu) {
        snprintf(msg, msglen, "out of host memory for the CPU comparison");
        goto out;
    }
    if (cli_download(dev, q_dev, c->q.data, qb) || cli_download(dev, s_dev, c->s.data, sb)) {
        snprintf(msg, msglen, "download: %s", cli_cuda_last_error());
        goto out;
    }
    fp8kit_tensor x = c->x, q = c->q, s = c->s;
    x.data = (void *)x_host;
    q.data = q_cpu;
    s.data = s_cpu;
    fp8kit_status st = fp8kit_quantize(cpu_ctx, c->desc, &x, &q, &s, NULL);
    if (st != FP8KIT_OK) {
        snprintf(msg, msglen, "CPU reference quantize: %s: %s", fp8kit_status_string(st),
                 fp8kit_last_error(cpu_ctx));
        goto out;
    }
    mism = 0;
    for (size_t i = 0; i < qb; i++) mism += q_dev[i] != q_cpu[i];
    for (size_t i = 0; i < sb; i++) mism += s_dev[i] != s_cpu[i];
out:
    free(q_dev);
    free(s_dev);
    free(q_cpu);
    free(s_cpu);
    return mism;
}

void cli_quant_measure(fp8kit_ctx *ctx, fp8kit_ctx *cpu_ctx, const cli_dev *dev,
                       const fp8kit_quant_desc *desc, const void *x_dev, const uint16_t *x_host,
                       int64_t rows, int64_t cols, int reps, cli_quant_result *r)
{
    memset(r, 0, sizeof *r);
    r->rel_err = r->max_rel = NAN;
    r->cpu_mismatch = -1;
    int64_t numel = rows * cols;
    int64_t shape[2] = {rows, cols};
    quant_call c;
    memset(&c, 0, sizeof c);
    c.ctx = ctx;
    c.desc = desc;
    c.x = fp8kit_tensor_make((void *)x_dev, FP8KIT_BF16, 2, shape);
    float *y_host = NULL;
    void *y_dev = NULL;
    if ((r->st = fp8kit_quant_shapes(desc, &c.x, &c.q, &c.s)) != FP8KIT_OK) {
        snprintf(r->msg, sizeof r->msg, "fp8kit_quant_shapes: %s", fp8kit_status_string(r->st));
        return;
    }
    size_t qb = tbytes(&c.q), sb = tbytes(&c.s), yb = (size_t)numel * 4;
    c.q.data = cli_alloc(dev, qb);
    c.s.data = cli_alloc(dev, sb);
    y_dev = cli_alloc(dev, yb);
    y_host = malloc(yb);
    if (!c.q.data || !c.s.data || !y_dev || !y_host) {
        r->st = FP8KIT_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof r->msg, "out of memory");
        goto out;
    }
    {   /* poison the outputs: a kernel that writes nothing must fail the check */
        void *poison = malloc(qb > sb ? qb : sb);
        if (poison) {
            memset(poison, 0x7F, qb > sb ? qb : sb);
            (void)cli_upload(dev, c.q.data, poison, qb);
            (void)cli_upload(dev, c.s.data, poison, sb);
            free(poison);
        }
    }
    r->st = cli_time_op(dev, quant_call_run, &c, 1, reps, &r->seconds);
    if (r->st != FP8KIT_OK) {
        snprintf(r->msg, sizeof r->msg, "fp8kit_quantize: %s: %s", fp8kit_status_string(r->st),
                 r->st == FP8KIT_ERR_DEVICE && dev->cuda ? cli_cuda_last_error()
                                                           : fp8kit_last_error(ctx));
        goto out;
    }
    r->bytes = 3.0 * (double)numel + (double)sb;
    r->gbps = r->bytes / r->seconds * 1e-9;

    /* Check 1: dequantize (same backend) and compare with the input. */
    fp8kit_tensor y = fp8kit_tensor_make(y_dev, FP8KIT_F32, 2, shape);
    fp8kit_status st = fp8kit_dequantize(ctx, desc, &c.q, &c.s, &y, NULL);
    if (st != FP8KIT_OK) {
        r->st = st;
        snprintf(r->msg, sizeof r->msg, "fp8kit_dequantize: %s: %s", fp8kit_status_string(st),
                 fp8kit_last_error(ctx));
        goto out;
    }
    if (cli_sync(dev) || cli_download(dev, y_host, y_dev, yb)) {
        r->st = FP8KIT_ERR_DEVICE;
        snprintf(r->msg, sizeof r->msg, "download: %s", cli_cuda_last_error());
        goto out;
    }
    double sx2 = 0.0;
#pragma omp parallel for reduction(+ : sx2) schedule(static)
    for (int64_t i = 0; i < numel; i++) {
        double x = fk_bf16_to_f32(x_host[i]);
        sx2 += x * x;
    }
    double thr = sqrt(sx2 / (double)numel) / 4.0, se2 = 0.0, mrel = 0.0;
    int64_t nans = 0;
#pragma omp parallel for reduction(+ : se2, nans) reduction(max : mrel) schedule(static)
    for (int64_t i = 0; i < numel; i++) {
        double x = fk_bf16_to_f32(x_host[i]), yy = y_host[i];
        if (isnan(yy)) { nans++; continue; }
        double e = fabs(yy - x);
        se2 += e * e;
        if (fabs(x) >= thr && e / fabs(x) > mrel) mrel = e / fabs(x);
    }
    r->nan_count = nans;
    r->rel_err = sx2 > 0.0 ? sqrt(se2 / sx2) : sqrt(se2);
    r->max_rel = mrel;

    /* Check 2 (CUDA): codes and scales equal the CPU backend's, bit for bit. */
    if (cpu_ctx && dev->cuda) {
        r->cpu_mismatch = compare_with_cpu(cpu_ctx, dev, &c, x_host, r->msg, sizeof r->msg);
        if (r->cpu_mismatch < 0) { r->st = FP8KIT_ERR_INTERNAL; goto out; }
    }
    /* e4m3 keeps 3 mantissa bits: every element in the normal range is within
     * 2^-4 relative; mx FLOOR may saturate a block's largest values by up to
     * 1/8, which the normwise figure absorbs. */
    r->pass = nans == 0 && isfinite(r->rel_err) && r->rel_err <= 0.0625 && r->cpu_mismatch <= 0;
out:
    cli_free(dev, c.q.data);
    cli_free(dev, c.s.data);
    cli_free(dev, y_dev);
    free(y_host);
}

void cli_quant_print(const fp8kit_quant_desc *desc, int64_t rows, int64_t cols,
                     const cli_quant_result *r, const char *backend, double copy_gbps, int json)
{
    char name[64];
    if (desc->scheme == FP8KIT_SCHEME_MX)
        snprintf(name, sizeof name, "mx %s axis %d%s", cli_or_q(fp8kit_rounding_name(desc->rounding)), desc->axis,
                 desc->scale_layout == FP8KIT_LAYOUT_BLOCKED ? " blocked" : "");
    else
        snprintf(name, sizeof name, "%s%s", cli_scheme_name(desc->scheme), desc->pow2 ? " pow2" : "");
    int ok = r->st == FP8KIT_OK && r->pass;
    if (json) {
        printf("{\"op\":\"quantize\",\"backend\":");
        cli_json_str(stdout, backend);
        printf(",\"shape\":[%lld,%lld],\"dtype\":\"bf16\",\"elem\":\"%s\",\"scheme\":\"%s\","
               "\"rounding\":\"%s\",\"axis\":%d,\"layout\":\"%s\",\"seconds\":",
               (long long)rows, (long long)cols, fp8kit_dtype_name(desc->elem),
               cli_scheme_name(desc->scheme), cli_or_q(fp8kit_rounding_name(desc->rounding)), desc->axis,
               cli_or_q(fp8kit_scale_layout_name(desc->scale_layout)));
        cli_json_num(stdout, r->seconds > 0 ? r->seconds : NAN);
        printf(",\"bytes\":");
        cli_json_num(stdout, r->bytes);
        printf(",\"gbps\":");
        cli_json_num(stdout, r->gbps > 0 ? r->gbps : NAN);
        printf(",\"copy_gbps\":");
        cli_json_num(stdout, copy_gbps > 0 ? copy_gbps : NAN);
        printf(",\"rel_err\":");
        cli_json_num(stdout, r->rel_err);
        printf(",\"max_rel\":");
        cli_json_num(stdout, r->max_rel);
        printf(",\"nan\":%lld,\"cpu_mismatch\":%lld,\"pass\":%s,\"status\":\"%s\"",
               (long long)r->nan_count, (long long)r->cpu_mismatch, ok ? "true" : "false",
               fp8kit_status_string(r->st));
        if (r->st != FP8KIT_OK) {
            printf(",\"error\":");
            cli_json_str(stdout, r->msg);
        }
        printf("}\n");
    } else if (r->st != FP8KIT_OK) {
        printf("quantize %-25s %s %s\n", name,
               r->st == FP8KIT_ERR_UNSUPPORTED ? "NOT SUPPORTED:" : "ERROR", r->msg);
    } else {
        char cmp[48] = "";
        if (r->cpu_mismatch >= 0)
            snprintf(cmp, sizeof cmp, "  vs cpu: %lld bytes differ", (long long)r->cpu_mismatch);
        printf("quantize %-25s %9.3f ms  %8.2f GB/s  %5.1f%% of copy  rel_err %.3e  max_rel %.3e%s  %s\n",
               name, r->seconds * 1e3, r->gbps, copy_gbps > 0 ? 100.0 * r->gbps / copy_gbps : NAN,
               r->rel_err, r->max_rel, cmp, ok ? "PASS" : "FAIL");
        if (r->nan_count) printf("     %lld NaN after dequantize\n", (long long)r->nan_count);
    }
    fflush(stdout);
}
