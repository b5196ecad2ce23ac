/* cli_st.c - the safetensors commands of the fp8kit CLI:
 *   fp8kit quantize IN OUT --scheme fp8-tensor|fp8-row|fp8-block|mxfp8 ...
 *   fp8kit dequantize IN OUT [--dtype bf16|f16|f32] ...
 *   fp8kit inspect FILE|DIR
 * IN is a .safetensors file or a directory with model.safetensors.index.json
 * (then OUT is a directory). The work is done by src/io (st_convert); this
 * file parses options, creates the context (device buffers through
 * cli_alloc/cli_upload/cli_download for a CUDA context), draws the progress
 * bar on a terminal and prints the one-line summary. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "io/safetensors.h"

/* ------------------------------------------------------------------ usage */
static void quantize_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit quantize IN OUT --scheme fp8-tensor|fp8-row|fp8-block|mxfp8\n"
        "                       [--rounding floor|rceil] [--pow2] [--exclude GLOB]...\n"
        "                       [--backend auto|cpu|cuda] [--threads N] [--force] [--no-fsync]\n"
        "                       [--quiet] [--json]\n"
        "\n"
        "Quantizes every 2-D F32/F16/BF16 tensor whose name ends in \".weight\" (unless a\n"
        "--exclude glob matches its name) to F8_E4M3 with its scales (SPEC.md section 5):\n"
        "  fp8-tensor  X.weight_scale      F32 []                  one scale per tensor\n"
        "  fp8-row     X.weight_scale      F32 [N, 1]              one scale per row\n"
        "  fp8-block   X.weight_scale_inv  F32 [ceil(N/128), ceil(K/128)]  (dequant = q * scale_inv)\n"
        "  mxfp8       X.weight_scale      F8_E8M0 [N, K/32]       (K must be a multiple of 32)\n"
        "Every other tensor is copied unchanged; __metadata__ is kept and gets a\n"
        "\"quantization\" entry. IN may be a directory holding model.safetensors.index.json;\n"
        "OUT is then a directory with the same shards and a new index.\n"
        "\n"
        "  --rounding R   mxfp8 scale rule: floor (OCP, default) or rceil\n"
        "  --pow2         fp32-scale schemes: round each scale up to a power of two\n"
        "  --exclude G    leave tensors whose names match the glob alone (repeatable)\n"
        "  --backend B    auto (default: CUDA when usable), cpu or cuda\n"
        "  --threads N    CPU backend threads (default: OpenMP's)\n"
        "  --force        replace an existing OUT\n"
        "  --no-fsync     do not flush OUT to disk before renaming it into place\n"
        "  --quiet        no progress bar and no summary; --json: the summary as JSON\n"
        "OUT is written under a temporary name next to it and renamed when complete: a\n"
        "failure or Ctrl-C leaves no partial file. Exit status: 0 ok, 1 failed, 2 bad arguments.\n");
}

static void dequantize_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit dequantize IN OUT [--dtype bf16|f16|f32] [--exclude GLOB]...\n"
        "                         [--backend auto|cpu|cuda] [--threads N] [--force] [--no-fsync]\n"
        "                         [--quiet] [--json]\n"
        "\n"
        "Turns every F8_E4M3/F8_E5M2 tensor X that has a scale tensor X_scale or\n"
        "X_scale_inv back into --dtype (default bf16): y = decode(q) * S, rounded to\n"
        "nearest even. The scheme is recognised from the scale's dtype and shape\n"
        "(F32 [] tensor, [N,1] row, [N,ceil(K/128)] 1x128, [ceil(N/128),ceil(K/128)]\n"
        "128x128, F8_E8M0 [N,K/32] mxfp8). The scale tensors are dropped, every other\n"
        "tensor is copied, the \"quantization\" metadata entry is removed.\n"
        "\n"
        "  --exclude G    leave fp8 tensors whose names match the glob alone (repeatable)\n"
        "  --backend B, --threads N, --force, --no-fsync, --quiet, --json: as for quantize\n");
}

static void inspect_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit inspect FILE|DIR [--json]\n"
        "\n"
        "Validates a safetensors file (or a sharded checkpoint directory) and lists its\n"
        "metadata and tensors: name, dtype, shape, bytes. Exit status 1 if it is corrupt.\n");
}

/* ---------------------------------------------------------------- helpers */
static void print_plain(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7F)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

static void print_shape(FILE *f, int nd, const int64_t *shape)
{
    fputc('[', f);
    for (int i = 0; i < nd; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)shape[i]);
    fputc(']', f);
}

static void fmt_bytes(char *buf, size_t n, double b)
{
    if (b >= 1e9) snprintf(buf, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(buf, n, "%.1f MB", b / 1e6);
    else if (b >= 1e3) snprintf(buf, n, "%.1f kB", b / 1e3);
    else snprintf(buf, n, "%.0f B", b);
}

/* ----------------------------------------------------------- progress bar */
typedef struct progress {
    int on;
    double last;
} progress;

static void progress_draw(void *user, const st_stats *s, int final)
{
    progress *p = user;
    if (!p->on)
        return;
    if (final) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        return;
    }
    if (s->seconds - p->last < 0.1 && s->in_bytes_done < s->in_bytes_total)
        return;
    p->last = s->seconds;
    double frac = s->in_bytes_total ? (double)s->in_bytes_done / (double)s->in_bytes_total : 1.0;
    char bar[31], done[32], total[32];
    int fill = (int)(frac * 30.0);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fmt_bytes(done, sizeof done, (double)s->in_bytes_done);
    fmt_bytes(total, sizeof total, (double)s->in_bytes_total);
    double rate = s->seconds > 0 ? (double)s->in_bytes_done / s->seconds : 0.0;
    double eta = rate > 0 ? (double)(s->in_bytes_total - s->in_bytes_done) / rate : 0.0;
    fprintf(stderr, "\r[%s] %lld/%lld tensors  %s / %s  %.2f GB/s  ETA %d:%02d\033[K", bar,
            (long long)s->tensors_done, (long long)s->tensors_total, done, total, rate / 1e9,
            (int)(eta / 60), (int)eta % 60);
    fflush(stderr);
}

/* ------------------------------------------------------- device memory ops */
static void *mem_alloc(void *u, size_t n) { return cli_alloc((const cli_dev *)u, n); }
static void mem_free(void *u, void *p) { cli_free((const cli_dev *)u, p); }
static int mem_up(void *u, void *d, const void *s, size_t n) { return cli_upload((const cli_dev *)u, d, s, n); }
static int mem_down(void *u, void *d, const void *s, size_t n) { return cli_download((const cli_dev *)u, d, s, n); }
static const char *mem_err(void *u)
{
    (void)u;
    return cli_cuda_last_error();
}

/* ------------------------------------------------------ quantize/dequantize */
static int convert_main(int argc, char **argv, int deq)
{
    const char *cmd = deq ? "dequantize" : "quantize";
    const char *pos[2] = {NULL, NULL};
    int npos = 0, have_scheme = 0, quiet = 0, json = 0, set_rounding = 0;
    int64_t threads = -1;
    fp8kit_backend backend = FP8KIT_BACKEND_AUTO;
    st_conv_opts o;
    memset(&o, 0, sizeof o);
    o.out_dtype = FP8KIT_BF16;
    o.rounding = FP8KIT_ROUND_FLOOR;
    const char **ex = calloc((size_t)argc + 1, sizeof *ex);
    if (!ex)
        return CLI_EXIT_FAIL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            (deq ? dequantize_usage : quantize_usage)(stdout);
            free(ex);
            return CLI_EXIT_OK;
        } else if (!deq && !strcmp(a, "--scheme")) {
            if (!(v = cli_opt_value(cmd, argc, argv, &i))) goto usage;
            if (!strcmp(v, "fp8-tensor")) o.scheme = ST_SCHEME_FP8_TENSOR;
            else if (!strcmp(v, "fp8-row")) o.scheme = ST_SCHEME_FP8_ROW;
            else if (!strcmp(v, "fp8-block")) o.scheme = ST_SCHEME_FP8_BLOCK;
            else if (!strcmp(v, "mxfp8")) o.scheme = ST_SCHEME_MXFP8;
            else {
                fprintf(stderr, "fp8kit %s: --scheme expects fp8-tensor, fp8-row, fp8-block or mxfp8, got '%s'\n",
                        cmd, v);
                goto usage;
            }
            have_scheme = 1;
        } else if (!deq && !strcmp(a, "--rounding")) {
            if (!(v = cli_opt_value(cmd, argc, argv, &i))) goto usage;
            if (!strcmp(v, "floor")) o.rounding = FP8KIT_ROUND_FLOOR;
            else if (!strcmp(v, "rceil")) o.rounding = FP8KIT_ROUND_RCEIL;
            else {
                fprintf(stderr, "fp8kit %s: --rounding expects floor or rceil, got '%s'\n", cmd, v);
                goto usage;
            }
            set_rounding = 1;
        } else if (!deq && !strcmp(a, "--pow2")) {
            o.pow2 = 1;
        } else if (!strcmp(a, "--exclude")) {
            if (!(v = cli_opt_value(cmd, argc, argv, &i))) goto usage;
            ex[o.nexclude++] = v;
        } else if (deq && !strcmp(a, "--dtype")) {
            if (!(v = cli_opt_value(cmd, argc, argv, &i))) goto usage;
            if (!strcmp(v, "bf16")) o.out_dtype = FP8KIT_BF16;
            else if (!strcmp(v, "f16")) o.out_dtype = FP8KIT_F16;
            else if (!strcmp(v, "f32")) o.out_dtype = FP8KIT_F32;
            else {
                fprintf(stderr, "fp8kit %s: --dtype expects bf16, f16 or f32, got '%s'\n", cmd, v);
                goto usage;
            }
        } else if (!strcmp(a, "--backend")) {
            if (!(v = cli_opt_value(cmd, argc, argv, &i)) || cli_parse_backend(cmd, v, &backend)) goto usage;
        } else if (!strcmp(a, "--threads")) {
            if (!(v = cli_opt_value(cmd, argc, argv, &i)) || cli_parse_i64(cmd, "--threads", v, 0, 4096, &threads))
                goto usage;
        } else if (!strcmp(a, "--force")) {
            o.force = 1;
        } else if (!strcmp(a, "--no-fsync")) {
            o.no_fsync = 1;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "fp8kit %s: unknown option '%s'\n", cmd, a);
            goto usage;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "fp8kit %s: unexpected argument '%s'\n", cmd, a);
            goto usage;
        }
    }
    if (npos != 2) {
        fprintf(stderr, "fp8kit %s: expects IN and OUT\n", cmd);
        goto usage;
    }
    if (!deq && !have_scheme) {
        fprintf(stderr, "fp8kit %s: --scheme is required\n", cmd);
        goto usage;
    }
    if (!deq && o.pow2 && o.scheme == ST_SCHEME_MXFP8) {
        fprintf(stderr, "fp8kit %s: --pow2 applies to the fp32-scale schemes (mxfp8 scales are powers of two)\n",
                cmd);
        goto usage;
    }
    if (!deq && set_rounding && o.scheme != ST_SCHEME_MXFP8) {
        fprintf(stderr, "fp8kit %s: --rounding applies to mxfp8 only\n", cmd);
        goto usage;
    }
    o.dequantize = deq;
    o.exclude = ex;

    fp8kit_ctx *ctx = NULL;
    fp8kit_status st = fp8kit_ctx_create(backend, 0, &ctx);
    if (st) {
        fprintf(stderr, "fp8kit %s: cannot create the %s backend: %s\n", cmd, fp8kit_backend_name(backend),
                fp8kit_status_string(st));
        free(ex);
        return CLI_EXIT_FAIL;
    }
    if (threads > 0)
        fp8kit_ctx_set_threads(ctx, (int)threads);
    cli_dev dev = {fp8kit_ctx_backend(ctx) == FP8KIT_BACKEND_CUDA};
    st_mem_ops mem = {mem_alloc, mem_free, mem_up, mem_down, mem_err, &dev};
    o.mem = dev.cuda ? &mem : NULL;
    progress pg = {!quiet && !json && isatty(STDERR_FILENO), 0.0};
    o.progress = progress_draw;
    o.progress_user = &pg;

    st_stats s;
    char err[1024];
    st = st_convert(ctx, pos[0], pos[1], &o, &s, err, sizeof err);
    if (pg.on)
        progress_draw(&pg, &s, 1);
    char describe[200];
    snprintf(describe, sizeof describe, "%s", fp8kit_ctx_describe(ctx));
    fp8kit_ctx_destroy(ctx);
    free(ex);
    if (st) {
        fprintf(stderr, "fp8kit %s: ", cmd);
        print_plain(stderr, err);
        fprintf(stderr, "\nfp8kit %s: failed (%s); nothing was written\n", cmd, fp8kit_status_string(st));
        return CLI_EXIT_FAIL;
    }
    double gbps = s.seconds > 0 ? (double)s.in_bytes_total / s.seconds / 1e9 : 0.0;
    if (json) {
        printf("{\"op\":\"%s\",\"in\":", cmd);
        cli_json_str(stdout, pos[0]);
        printf(",\"out\":");
        cli_json_str(stdout, pos[1]);
        if (!deq)
            printf(",\"scheme\":\"%s\"", st_scheme_name(o.scheme));
        printf(",\"backend\":");
        cli_json_str(stdout, describe);
        printf(",\"tensors\":%lld,\"quantized\":%lld,\"dequantized\":%lld,\"copied\":%lld,"
               "\"in_bytes\":%llu,\"out_bytes\":%llu,\"seconds\":",
               (long long)s.tensors_total, (long long)s.quantized, (long long)s.dequantized, (long long)s.copied,
               (unsigned long long)s.in_bytes_total, (unsigned long long)s.out_bytes);
        cli_json_num(stdout, s.seconds);
        printf(",\"gbps\":");
        cli_json_num(stdout, gbps);
        printf("}\n");
    } else if (!quiet) {
        char ib[32], ob[32];
        fmt_bytes(ib, sizeof ib, (double)s.in_bytes_total);
        fmt_bytes(ob, sizeof ob, (double)s.out_bytes);
        if (deq)
            printf("%s: %lld tensors dequantized, %lld copied; in %s, out %s; %.2f s, %.2f GB/s (%s)\n", cmd,
                   (long long)s.dequantized, (long long)s.copied, ib, ob, s.seconds, gbps, describe);
        else
            printf("%s: %lld tensors quantized (%s), %lld copied; in %s, out %s; %.2f s, %.2f GB/s (%s)\n", cmd,
                   (long long)s.quantized, st_scheme_name(o.scheme), (long long)s.copied, ib, ob, s.seconds, gbps,
                   describe);
    }
    return CLI_EXIT_OK;
usage:
    free(ex);
    (deq ? dequantize_usage : quantize_usage)(stderr);
    return CLI_EXIT_USAGE;
}

int cli_cmd_quantize(int argc, char **argv) { return convert_main(argc, argv, 0); }
int cli_cmd_dequantize(int argc, char **argv) { return convert_main(argc, argv, 1); }

/* ----------------------------------------------------------------- inspect */
static void inspect_file(const st_file *f, const char *shard, int json, int *first)
{
    if (json) {
        for (size_t i = 0; i < f->ntensors; i++) {
            const st_tensor *t = &f->tensors[i];
            printf("%s{\"name\":", *first ? "" : ",");
            *first = 0;
            cli_json_str(stdout, t->name);
            printf(",\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
            for (int d = 0; d < t->ndim; d++)
                printf("%s%lld", d ? "," : "", (long long)t->shape[d]);
            printf("],\"bytes\":%llu,\"data_offsets\":[%llu,%llu]", (unsigned long long)(t->end - t->begin),
                   (unsigned long long)t->begin, (unsigned long long)t->end);
            if (shard) {
                printf(",\"shard\":");
                cli_json_str(stdout, shard);
            }
            printf("}");
        }
        return;
    }
    printf("%s: %zu tensors, header %llu bytes, data %llu bytes\n", f->path, f->ntensors,
           (unsigned long long)f->header_len, (unsigned long long)f->data_size);
    if (f->has_meta) {
        printf("metadata (%zu):\n", f->nmeta);
        for (size_t i = 0; i < f->nmeta; i++) {
            printf("  ");
            print_plain(stdout, f->meta[i].key);
            printf(": ");
            print_plain(stdout, f->meta[i].value);
            printf("\n");
        }
    }
    size_t w = 4;
    for (size_t i = 0; i < f->ntensors; i++)
        if (strlen(f->tensors[i].name) > w)
            w = strlen(f->tensors[i].name);
    if (w > 60)
        w = 60;
    printf("  %-*s  %-8s %-24s %s\n", (int)w, "name", "dtype", "shape", "bytes");
    for (size_t i = 0; i < f->ntensors; i++) {
        const st_tensor *t = &f->tensors[i];
        printf("  ");
        print_plain(stdout, t->name);
        size_t l = strlen(t->name);
        printf("%*s  %-8s ", (int)(l < w ? w - l : 0), "", st_dtype_name(t->dtype));
        char sh[128];
        FILE *m = fmemopen(sh, sizeof sh, "w");
        if (m) {
            print_shape(m, t->ndim, t->shape);
            fclose(m);
        } else {
            sh[0] = '\0';
        }
        printf("%-24s %llu\n", sh, (unsigned long long)(t->end - t->begin));
    }
}

static void inspect_meta_json(const st_file *f)
{
    printf("\"metadata\":");
    if (!f->has_meta) {
        printf("null");
        return;
    }
    printf("{");
    for (size_t i = 0; i < f->nmeta; i++) {
        printf("%s", i ? "," : "");
        cli_json_str(stdout, f->meta[i].key);
        printf(":");
        cli_json_str(stdout, f->meta[i].value);
    }
    printf("}");
}

int cli_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            inspect_usage(stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "fp8kit inspect: unknown option '%s'\n", argv[i]);
            inspect_usage(stderr);
            return CLI_EXIT_USAGE;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "fp8kit inspect: one FILE or DIR, please\n");
            return CLI_EXIT_USAGE;
        }
    }
    if (!path) {
        inspect_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    char err[1024];
    st_file f;
    st_index ix;
    int first = 1;
    struct stat sb;
    int is_dir = !stat(path, &sb) && S_ISDIR(sb.st_mode);
    fp8kit_status st = is_dir ? st_index_open(path, &ix, err, sizeof err) : st_open(path, &f, err, sizeof err);
    if (st) {
        fprintf(stderr, "fp8kit inspect: ");
        print_plain(stderr, err);
        fprintf(stderr, "\n");
        return CLI_EXIT_FAIL;
    }
    if (!is_dir) {
        if (json) {
            printf("{\"op\":\"inspect\",\"file\":");
            cli_json_str(stdout, path);
            printf(",\"header_bytes\":%llu,\"data_bytes\":%llu,", (unsigned long long)f.header_len,
                   (unsigned long long)f.data_size);
            inspect_meta_json(&f);
            printf(",\"tensors\":[");
            inspect_file(&f, NULL, 1, &first);
            printf("]}\n");
        } else {
            inspect_file(&f, NULL, 0, &first);
        }
        st_close(&f);
        return CLI_EXIT_OK;
    }
    if (json) {
        printf("{\"op\":\"inspect\",\"dir\":");
        cli_json_str(stdout, path);
        printf(",\"shards\":%zu,\"tensors\":[", ix.nshards);
        for (size_t i = 0; i < ix.nshards; i++)
            inspect_file(&ix.files[i], ix.shards[i], 1, &first);
        printf("]}\n");
    } else {
        printf("%s: sharded checkpoint, %zu shards (index %s)\n", path, ix.nshards, ix.index_path);
        for (size_t i = 0; i < ix.nshards; i++)
            inspect_file(&ix.files[i], ix.shards[i], 0, &first);
    }
    st_index_close(&ix);
    return CLI_EXIT_OK;
}
