/* cli_st.c - the safetensors commands of the fp8kit CLI:
 *   fp8kit quantize IN OUT --scheme fp8-tensor|fp8-row|fp8-block|mxfp8 ...
 *     (or the Python names tensor, row, block, mx: the library's fp8kit_ckpt_scheme_*)
 *   fp8kit dequantize IN OUT [--dtype bf16|fp16|fp32] ...
 *   fp8kit inspect FILE|DIR
 * IN is a .safetensors file, or a model directory (model.safetensors, or a
 * sharded model.safetensors.index.json): OUT is then a model directory.
 * quantize and dequantize parse the options and call the public converter,
 * fp8kit_checkpoint_quantize / fp8kit_checkpoint_dequantize (as Python does;
 * a CUDA context stages through device memory the library allocates), draw
 * its progress on a terminal and print the one-line summary. inspect reads
 * the files with src/io's reader (io/safetensors.h) and names the
 * quantization with the rule dequantize applies (st_describe_quant). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "io/safetensors.h"
#include "io/st_model.h"

/* ------------------------------------------------------------------ usage */
static void quantize_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit quantize IN OUT --scheme fp8-tensor|fp8-row|fp8-block|mxfp8\n"
        "                       [--format fp8|compressed-tensors] [--exclude GLOB]...\n"
        "                       [--quantize-all] [--include GLOB]... [--rounding floor|rceil] [--pow2]\n"
        "                       [--backend auto|cpu|cuda] [--threads N] [--force] [--no-fsync]\n"
        "                       [--quiet] [--json]\n"
        "\n"
        "IN is a .safetensors file (OUT is then a file), or a model directory holding\n"
        "model.safetensors or a sharded model.safetensors.index.json: OUT is then a complete\n"
        "model directory (the same weight files, every other file copied byte for byte,\n"
        "config.json given the format's quantization_config, the index rebuilt).\n"
        "Every 2-D F32/F16/BF16 tensor named \"*.weight\" becomes F8_E4M3 with a scale\n"
        "tensor (dequant = decode(q) * scale), named by --format (docs/spec.md section 5):\n"
        "  scheme      --format fp8 (transformers)         --format compressed-tensors\n"
        "  fp8-tensor  X.weight_scale_inv F32 [] (1)       X.weight_scale F32 [1]\n"
        "  fp8-row     -                                   X.weight_scale F32 [N, 1]\n"
        "  fp8-block   X.weight_scale_inv F32 [N/128, K/128]  X.weight_scale F32 [N/128,\n"
        "                                                    K/128] (both rounded up)\n"
        "  mxfp8       X.weight_scale_inv F8_E8M0 [N, K/32]  X.weight_scale U8 [N, K/32]\n"
        "  (1) [1, 1] for MoE experts (X = ...experts.<e>....), as transformers stacks them\n"
        "Default --format: fp8 for fp8-block, compressed-tensors for the others.\n"
        "For vLLM use --format compressed-tensors: vLLM does not load fp8-tensor in the\n"
        "fp8 format (its per-tensor fp8 path reads X.weight_scale; fp8-block loads in\n"
        "either). Loader limits, each warned about when it applies: transformers cannot\n"
        "load MoE experts quantized with fp8-block or mxfp8 in compressed-tensors\n"
        "(--exclude '*.experts.*' or --format fp8), and compressed-tensors' mxfp8 path\n"
        "decompresses to bfloat16 only (a float16 or float32 model fails at its first\n"
        "forward unless loaded as bfloat16 or with dequantize=True).\n"
        "Kept in high precision (and listed as ignored in config.json): embeddings and\n"
        "MoE router gates (no loader reads them quantized) unless --include names them;\n"
        "lm_head unless --quantize-all; --exclude matches; and, with a warning, weights\n"
        "whose shape the scheme cannot take as the loaders read it (mxfp8: K %% 32 != 0;\n"
        "fp8-block: K %% 128 != 0, and with --format fp8 also N %% 128 != 0).\n"
        "Every other tensor is copied unchanged; __metadata__ is kept and gets a\n"
        "\"quantization\" entry. An input that already holds fp8 tensors is refused.\n"
        "\n"
        "  --scheme S     ");
    cli_print_names(f, cli_ckpt_scheme_names(), ~0u, "\n                 ");
    fprintf(f,
        "\n"
        "                 (the names after '=' are the Python binding's and the C API's)\n"
        "  --format F     ");
    cli_print_names(f, cli_ckpt_format_names, ~0u, "\n                 ");
    fprintf(f,
        "\n"
        "  --exclude G    keep tensors whose name (or module name, without \".weight\")\n"
        "                 matches the glob in high precision (repeatable; a glob that\n"
        "                 matches nothing is an error)\n"
        "  --quantize-all quantize lm_head too\n"
        "  --include G    quantize weights matching the glob even where a default\n"
        "                 would keep them (embeddings, router gates; repeatable)\n"
        "  --rounding R   mxfp8 scale rule: rceil (default; what transformers' and\n"
        "                 compressed-tensors' own MX quantizers do) or floor (OCP; the\n"
        "                 library's fp8kit_quantize default)\n"
        "  --pow2         fp32-scale schemes: round each scale up to a power of two\n"
        "  --backend B    auto (default: CUDA when usable), cpu or cuda\n"
        "  --threads N    CPU backend threads (default: OpenMP's)\n"
        "  --force        replace an existing OUT (a directory is swapped in in one step)\n"
        "  --no-fsync     do not flush OUT to disk before renaming it into place\n"
        "  --quiet        no progress bar and no summary; --json: the summary as JSON\n"
        "Options take their value as --opt VALUE or --opt=VALUE, before or after IN OUT.\n"
        "OUT is written under a temporary name next to it and renamed when complete: a\n"
        "failure or Ctrl-C leaves no partial output. OUT may not be IN or lie inside it.\n"
        "Exit status: 0 ok; 1 failed (nothing written, unless the message says where OUT\n"
        "was moved); 2 bad arguments, OUT exists without --force, or a request refused\n"
        "before anything is written (OUT is, contains or lies inside IN; an --exclude or\n"
        "--include glob matches nothing; IN already holds fp8 tensors or a\n"
        "quantization_config): one line on stderr.\n");
}

static void dequantize_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit dequantize IN OUT [--dtype bf16|fp16|fp32] [--exclude GLOB]...\n"
        "                         [--backend auto|cpu|cuda] [--threads N] [--force] [--no-fsync]\n"
        "                         [--quiet] [--json]\n"
        "\n"
        "Turns every F8_E4M3/F8_E5M2 tensor X back into --dtype (default bf16):\n"
        "y = decode(q) * S, rounded to nearest even, S from its scale tensor X_scale\n"
        "(compressed-tensors) or X_scale_inv (fp8 / DeepSeek). The scheme is\n"
        "recognised from the scale's dtype and shape: [], [1] or [1,1] tensor, [N,1]\n"
        "row, [N,ceil(K/128)] 1x128, [ceil(N/128),ceil(K/128)] 128x128 (F32, BF16 or\n"
        "F16), [N,K/32] F8_E8M0 or U8 mxfp8 (docs/spec.md section 5). An fp8 tensor\n"
        "without a scale tensor, with both X_scale and X_scale_inv, or with a scale\n"
        "that fits no scheme is an error (nothing is written; --exclude leaves it as\n"
        "it is). The scale tensors are dropped, every other tensor is copied. When\n"
        "every fp8 tensor was dequantized, the \"quantization\" metadata entry is\n"
        "removed and, for a model directory (as for quantize), config.json's\n"
        "quantization_config; otherwise both are kept, with a warning. An input with\n"
        "no fp8 tensor is copied unchanged, with a warning.\n"
        "\n"
        "  --dtype D      ");
    cli_print_names(f, cli_dtype_names(), CLI_HP_DTYPES, ", ");
    fprintf(f,
        "\n"
        "  --exclude G    leave fp8 tensors whose names match the glob alone (repeatable)\n"
        "  --backend B, --threads N, --force, --no-fsync, --quiet, --json: as for quantize\n"
        "Options take their value as --opt VALUE or --opt=VALUE, before or after IN OUT.\n"
        "Exit status: 0 ok; 1 failed (nothing written, unless the message says where OUT\n"
        "was moved; an fp8 tensor it cannot read is such a failure); 2 bad arguments,\n"
        "OUT exists without --force, or a request refused before anything is written\n"
        "(OUT is, contains or lies inside IN; an --exclude glob matches nothing): one\n"
        "line on stderr.\n");
}

static void inspect_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit inspect FILE|DIR [--json]\n"
        "\n"
        "Validates a safetensors file (or a model directory: model.safetensors or a\n"
        "sharded checkpoint) and lists its metadata and tensors (name, dtype, shape,\n"
        "bytes), then the quantization convention it recognises: fp8 (weight_scale_inv)\n"
        "or compressed-tensors (weight_scale) and the scheme of each group of weights.\n"
        "An fp8 tensor that 'fp8kit dequantize' would refuse (no scale tensor, both\n"
        "X_scale and X_scale_inv, a scale that fits no scheme) makes the checkpoint\n"
        "invalid: it is listed, then named on stderr, and the exit status is 1.\n"
        "Exit status: 0 ok, 1 if it is corrupt, invalid or cannot be read, 2 on bad\n"
        "arguments.\n");
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
    int on, drawn;
    double last;
} progress;

static void progress_draw(progress *p, const fp8kit_ckpt_progress *s)
{
    if (!p->on)
        return;
    if (s->final) {
        if (p->drawn)
            fputs("\r\033[K", stderr);
        p->drawn = 0;
        fflush(stderr);
        return;
    }
    if (s->seconds - p->last < 0.1 && s->in_bytes_done < s->in_bytes_total)
        return;
    p->last = s->seconds;
    p->drawn = 1;
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

/* What the converter reports while it runs (fp8kit_ckpt_opts.on_kept,
 * on_warning, on_progress): the weights kept in high precision, grouped by
 * reason for the summary, the warnings, and the progress bar. */
#define NOTE_REASONS 16
typedef struct notes {
    progress bar;
    char *reason[NOTE_REASONS], *first[NOTE_REASONS];
    int count[NOTE_REASONS], nreasons;
    char **warn;
    int nwarn;
} notes;

static void note_kept(void *user, const char *tensor, const char *reason)
{
    notes *n = user;
    int r = 0;
    while (r < n->nreasons && strcmp(n->reason[r], reason))
        r++;
    if (r == n->nreasons) {
        if (r == NOTE_REASONS || !(n->reason[r] = strdup(reason)))
            return;
        n->first[r] = strdup(tensor);
        n->nreasons++;
    }
    n->count[r]++;
}

static void note_warn(void *user, const char *msg)
{
    notes *n = user;
    char **p = realloc(n->warn, (size_t)(n->nwarn + 1) * sizeof *p);
    if (p) {
        n->warn = p;
        if ((p[n->nwarn] = strdup(msg)))
            n->nwarn++;
    }
}

static void note_progress(void *user, const fp8kit_ckpt_progress *p) { progress_draw(&((notes *)user)->bar, p); }

/* The summary's "kept in high precision" lines (not for the weights kept for
 * their shape: a warning names each of those), then the warnings on stderr. */
static void notes_print(const notes *n, const char *cmd, int quiet)
{
    const char *shape = st_keep_reason_text(ST_KEEP_SHAPE);
    for (int r = 0; r < n->nreasons && !quiet; r++) {
        if (!strcmp(n->reason[r], shape))
            continue;
        printf("%s: kept in high precision: %d weight%s (e.g. ", cmd, n->count[r], n->count[r] == 1 ? "" : "s");
        print_plain(stdout, n->first[r] ? n->first[r] : "?");
        printf("): %s\n", n->reason[r]);
    }
    for (int i = 0; i < n->nwarn; i++) {
        fprintf(stderr, "fp8kit %s: warning: ", cmd);
        print_plain(stderr, n->warn[i]);
        fputc('\n', stderr);
    }
}

static void notes_free(notes *n)
{
    for (int r = 0; r < n->nreasons; r++)
        free(n->reason[r]), free(n->first[r]);
    for (int i = 0; i < n->nwarn; i++)
        free(n->warn[i]);
    free(n->warn);
}

/* The library's scheme for the CLI's --scheme (cli_ckpt_scheme_names holds st_scheme values). */
static fp8kit_scheme ckpt_scheme(st_scheme s)
{
    static const fp8kit_scheme map[] = {[ST_SCHEME_FP8_TENSOR] = FP8KIT_SCHEME_TENSOR,
                                        [ST_SCHEME_FP8_ROW] = FP8KIT_SCHEME_ROW,
                                        [ST_SCHEME_FP8_BLOCK] = FP8KIT_SCHEME_BLOCK128X128,
                                        [ST_SCHEME_MXFP8] = FP8KIT_SCHEME_MX};
    return map[s];
}

/* OUT exists and --force was not given: a refusal of the command line, not
 * an I/O failure. One line, exit status 2 (CLI_EXIT_USAGE). */
static int refuse_existing(const char *cmd, const char *out)
{
    fprintf(stderr, "fp8kit %s: ", cmd);
    print_plain(stderr, out);
    fprintf(stderr, " exists; pass --force to replace it (nothing was written)\n");
    return CLI_EXIT_USAGE;
}

/* ------------------------------------------------------ quantize/dequantize */
static int convert_main(int argc, char **argv, int deq)
{
    const char *cmd = deq ? "dequantize" : "quantize";
    enum { O_SCHEME = 256, O_ROUNDING, O_POW2, O_EXCLUDE, O_DTYPE, O_BACKEND, O_THREADS, O_FORCE, O_NO_FSYNC,
           O_JSON, O_FORMAT, O_ALL, O_INCLUDE };
#define FK_COMMON_OPTS                                                                         \
    {"help", no_argument, NULL, 'h'}, {"exclude", required_argument, NULL, O_EXCLUDE},          \
    {"backend", required_argument, NULL, O_BACKEND}, {"threads", required_argument, NULL, O_THREADS}, \
    {"force", no_argument, NULL, O_FORCE}, {"no-fsync", no_argument, NULL, O_NO_FSYNC},         \
    {"quiet", no_argument, NULL, 'q'}, {"json", no_argument, NULL, O_JSON}
    static const struct option quant_lo[] = {
        FK_COMMON_OPTS,
        {"scheme", required_argument, NULL, O_SCHEME},
        {"rounding", required_argument, NULL, O_ROUNDING},
        {"pow2", no_argument, NULL, O_POW2},
        {"format", required_argument, NULL, O_FORMAT},
        {"quantize-all", no_argument, NULL, O_ALL},
        {"include", required_argument, NULL, O_INCLUDE},
        {NULL, 0, NULL, 0}};
    static const struct option deq_lo[] = {
        FK_COMMON_OPTS,
        {"dtype", required_argument, NULL, O_DTYPE},
        {NULL, 0, NULL, 0}};
#undef FK_COMMON_OPTS
    int have_scheme = 0, quiet = 0, json = 0, set_rounding = 0, c, bad = 0, scheme = 0, format = 0;
    int64_t threads = -1;
    fp8kit_backend backend = FP8KIT_BACKEND_AUTO;
    /* the options of fp8kit_checkpoint_quantize / _dequantize, the converter's one way in */
    fp8kit_ckpt_opts o = fp8kit_ckpt_opts_default(FP8KIT_SCHEME_TENSOR);
    st_scheme sch = ST_SCHEME_FP8_TENSOR;
    const char **ex = calloc((size_t)argc + 1, sizeof *ex), **inc = calloc((size_t)argc + 1, sizeof *inc);
    if (!ex || !inc) {
        free(ex), free(inc);
        return CLI_EXIT_FAIL;
    }
    while (!bad && (c = cli_getopt(cmd, argc, argv, "hq", deq ? deq_lo : quant_lo)) != -1) {
        switch (c) {
        case 'h':
            (deq ? dequantize_usage : quantize_usage)(stdout);
            free(ex), free(inc);
            return CLI_EXIT_OK;
        case O_SCHEME:
            bad = cli_parse_ckpt_scheme(cmd, optarg, &scheme);
            sch = (st_scheme)scheme;
            have_scheme = 1;
            break;
        case O_ROUNDING:
            bad = cli_parse_rounding(cmd, optarg, &o.rounding);
            set_rounding = 1;
            break;
        case O_POW2: o.pow2 = 1; break;
        case O_FORMAT: bad = cli_parse_name(cmd, "--format", optarg, cli_ckpt_format_names, ~0u, &format); break;
        case O_ALL: o.quantize_all = 1; break;
        case O_INCLUDE: inc[o.ninclude++] = optarg; break;
        case O_EXCLUDE: ex[o.nexclude++] = optarg; break;
        case O_DTYPE: bad = cli_parse_dtype(cmd, "--dtype", optarg, CLI_HP_DTYPES, &o.out_dtype); break;
        case O_BACKEND: bad = cli_parse_backend(cmd, optarg, &backend); break;
        case O_THREADS: bad = cli_parse_i64(cmd, "--threads", optarg, 0, 4096, &threads); break;
        case O_FORCE: o.force = 1; break;
        case O_NO_FSYNC: o.no_fsync = 1; break;
        case 'q': quiet = 1; break;
        case O_JSON: json = 1; break;
        default: bad = 1; break; /* cli_getopt said why */
        }
    }
    const char *in = optind < argc ? argv[optind] : NULL, *out = optind + 1 < argc ? argv[optind + 1] : NULL;
    /* st_format's values are fp8kit_ckpt_format's */
    const st_format fmt = (st_format)format, used = fmt ? fmt : st_format_default(sch);
    if (!bad) {
        if (!out)
            bad = cli_usage_error(cmd, "expects IN and OUT, got %s", in ? "only IN" : "neither");
        else if (optind + 2 < argc)
            bad = cli_usage_error(cmd, "unexpected argument '%s' (IN and OUT are '%s' and '%s')", argv[optind + 2],
                                  in, out);
        else if (!deq && !have_scheme)
            bad = cli_usage_error(cmd, "--scheme is required");
        else if (!deq && o.pow2 && sch == ST_SCHEME_MXFP8)
            bad = cli_usage_error(cmd, "--pow2 applies to the fp32-scale schemes (mxfp8 scales are powers of two)");
        else if (!deq && set_rounding && sch != ST_SCHEME_MXFP8)
            bad = cli_usage_error(cmd, "--rounding applies to mxfp8 only");
        else if (!deq && fmt != ST_FORMAT_DEFAULT && !st_format_supports(fmt, sch))
            bad = cli_usage_error(cmd, "--format %s has no %s layout (use --format %s)", st_format_name(fmt),
                                  st_scheme_name(sch), st_format_name(st_format_other(sch, fmt)));
    }
    if (bad) {
        free(ex), free(inc);
        return CLI_EXIT_USAGE;
    }
    o.scheme = ckpt_scheme(sch);
    o.format = (fp8kit_ckpt_format)fmt;
    if (!set_rounding) /* the library's default for checkpoints: rceil for mxfp8 */
        o.rounding = fp8kit_ckpt_opts_default(o.scheme).rounding;
    o.exclude = o.nexclude ? ex : NULL;
    o.include = o.ninclude ? inc : NULL;
    /* An existing OUT is refused before anything is read: not an I/O failure,
     * the command line lacks --force (the library checks again, race-free). */
    struct stat out_sb;
    if (!o.force && lstat(out, &out_sb) == 0) {
        free(ex), free(inc);
        return refuse_existing(cmd, out);
    }

    fp8kit_ctx *ctx = NULL;
    if (cli_ctx_create(cmd, backend, threads, &ctx) != FP8KIT_OK) {
        free(ex), free(inc);
        return CLI_EXIT_FAIL;
    }
    notes nt;
    memset(&nt, 0, sizeof nt);
    nt.bar.on = !quiet && !json && isatty(STDERR_FILENO);
    o.on_kept = note_kept;
    o.on_warning = note_warn;
    o.on_progress = note_progress;
    o.user = &nt;

    fp8kit_ckpt_report s;
    memset(&s, 0, sizeof s);
    const char *fn = deq ? "fp8kit_checkpoint_dequantize" : "fp8kit_checkpoint_quantize";
    fp8kit_status st = deq ? fp8kit_checkpoint_dequantize(ctx, in, out, &o, &s)
                           : fp8kit_checkpoint_quantize(ctx, in, out, &o, &s);
    char err[1200], describe[200];
    const char *msg = fp8kit_last_error(ctx);
    size_t fnlen = strlen(fn);
    if (!strncmp(msg, fn, fnlen) && !strncmp(msg + fnlen, ": ", 2)) /* the CLI names itself */
        msg += fnlen + 2;
    snprintf(err, sizeof err, "%s", st ? msg : "");
    snprintf(describe, sizeof describe, "%s", fp8kit_ctx_describe(ctx));
    fp8kit_ctx_destroy(ctx);
    free(ex), free(inc);
    progress_draw(&nt.bar, &(fp8kit_ckpt_progress){.final = 1}); /* clears the bar, whatever happened */
    if (!st)
        notes_print(&nt, cmd, quiet || json); /* warnings go to stderr, --json or not */
    notes_free(&nt);
    if (st == FP8KIT_ERR_IO && !o.force && (strstr(err, "exists (use --force") || strstr(err, "exists; set force")))
        return refuse_existing(cmd, out); /* OUT appeared while converting */
    if (st == FP8KIT_ERR_INVALID_ARGUMENT) {
        /* a request the command line should not have made (OUT inside IN, a
         * glob matching nothing, an fp8 input to quantize): refused before
         * anything was written (the message says so), one line, like a bad
         * argument */
        fprintf(stderr, "fp8kit %s: ", cmd);
        print_plain(stderr, err);
        fputc('\n', stderr);
        return CLI_EXIT_USAGE;
    }
    if (st) { /* the message says whether anything was written, and where OUT went in the one case it moved */
        fprintf(stderr, "fp8kit %s: ", cmd);
        print_plain(stderr, err);
        fprintf(stderr, "\nfp8kit %s: failed (%s)\n", cmd, fp8kit_status_string(st));
        return CLI_EXIT_FAIL;
    }
    double gbps = s.seconds > 0 ? (double)s.in_bytes / s.seconds / 1e9 : 0.0;
    if (json) {
        printf("{\"op\":\"%s\",\"in\":", cmd);
        cli_json_str(stdout, in);
        printf(",\"out\":");
        cli_json_str(stdout, out);
        if (!deq)
            printf(",\"scheme\":\"%s\",\"format\":\"%s\"", st_scheme_name(sch), st_format_name(used));
        else
            printf(",\"convention\":\"%s\"", s.convention[0] ? s.convention : "none");
        printf(",\"backend\":");
        cli_json_str(stdout, describe);
        printf(",\"tensors\":%lld,\"quantized\":%lld,\"dequantized\":%lld,\"copied\":%lld,\"kept\":%lld,"
               "\"other_files\":%lld,\"in_bytes\":%llu,\"out_bytes\":%llu,\"seconds\":",
               (long long)s.tensors, (long long)s.quantized, (long long)s.dequantized, (long long)s.copied,
               (long long)s.kept, (long long)s.other_files, (unsigned long long)s.in_bytes,
               (unsigned long long)s.out_bytes);
        cli_json_num(stdout, s.seconds);
        printf(",\"gbps\":");
        cli_json_num(stdout, gbps);
        printf("}\n");
    } else if (!quiet) {
        char ib[32], ob[32];
        fmt_bytes(ib, sizeof ib, (double)s.in_bytes);
        fmt_bytes(ob, sizeof ob, (double)s.out_bytes);
        char files[64] = "";
        if (s.other_files)
            snprintf(files, sizeof files, ", %lld other files", (long long)s.other_files);
        if (deq)
            printf("%s: %lld tensors dequantized (%s convention), %lld copied%s; in %s, out %s; %.2f s, %.2f GB/s "
                   "(%s)\n",
                   cmd, (long long)s.dequantized, s.convention[0] ? s.convention : "no", (long long)s.copied, files,
                   ib, ob, s.seconds, gbps, describe);
        else
            printf("%s: %lld tensors quantized (%s, format %s), %lld copied (%lld weights kept in high precision)%s; "
                   "in %s, out %s; %.2f s, %.2f GB/s (%s)\n",
                   cmd, (long long)s.quantized, st_scheme_name(sch), st_format_name(used), (long long)s.copied,
                   (long long)s.kept, files, ib, ob, s.seconds, gbps, describe);
    }
    return CLI_EXIT_OK;
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

/* fp8 tensors that dequantize refuses make the checkpoint invalid for
 * inspect too (the same rule, st_fp8_classify): one line, exit status 1. */
static int inspect_verdict(const char *path, size_t invalid, const char *problem)
{
    if (!invalid)
        return CLI_EXIT_OK;
    fprintf(stderr, "fp8kit inspect: ");
    print_plain(stderr, path);
    fprintf(stderr, ": %zu fp8 tensor%s that dequantize refuses; the first: ", invalid, invalid == 1 ? "" : "s");
    print_plain(stderr, problem);
    fprintf(stderr, "\n");
    return CLI_EXIT_FAIL;
}

int cli_cmd_inspect(int argc, char **argv)
{
    static const char *cmd = "inspect";
    int json, rc0 = cli_json_only_opts(cmd, argc, argv, inspect_usage, &json);
    if (rc0 >= 0)
        return rc0;
    if (optind >= argc)
        return cli_usage_error(cmd, "expects a FILE or DIR");
    if (optind + 1 < argc)
        return cli_usage_error(cmd, "unexpected argument '%s' (one FILE or DIR)", argv[optind + 1]);
    const char *path = argv[optind];
    char err[1024], conv[512], problem[800];
    size_t invalid = 0;
    st_file f;
    st_index ix;
    st_input inp;
    int first = 1;
    memset(&f, 0, sizeof f);
    memset(&ix, 0, sizeof ix);
    fp8kit_status st = st_input_classify(path, &inp, err, sizeof err);
    int sharded = !st && inp.kind == ST_INPUT_SHARDED;
    if (!st)
        st = sharded ? st_index_open(inp.dir, &ix, err, sizeof err) : st_open(inp.file, &f, err, sizeof err);
    if (st) {
        st_input_free(&inp);
        fprintf(stderr, "fp8kit inspect: ");
        print_plain(stderr, err);
        fprintf(stderr, "\n");
        return CLI_EXIT_FAIL;
    }
    if (!sharded) {
        const st_file *one = &f;
        invalid = st_describe_quant(&one, 1, conv, sizeof conv, problem, sizeof problem);
        if (json) {
            printf("{\"op\":\"inspect\",\"file\":");
            cli_json_str(stdout, inp.file);
            printf(",\"header_bytes\":%llu,\"data_bytes\":%llu,\"quantization\":", (unsigned long long)f.header_len,
                   (unsigned long long)f.data_size);
            cli_json_str(stdout, conv);
            printf(",\"quantization_valid\":%s,", invalid ? "false" : "true");
            inspect_meta_json(&f);
            printf(",\"tensors\":[");
            inspect_file(&f, NULL, 1, &first);
            printf("]}\n");
        } else {
            inspect_file(&f, NULL, 0, &first);
            printf("quantization: %s\n", conv);
        }
        st_close(&f);
        int rc = inspect_verdict(inp.file, invalid, problem);
        st_input_free(&inp);
        return rc;
    }
    const st_file **fl = calloc(ix.nshards + 1, sizeof *fl);
    for (size_t i = 0; fl && i < ix.nshards; i++)
        fl[i] = &ix.files[i];
    if (fl)
        invalid = st_describe_quant(fl, ix.nshards, conv, sizeof conv, problem, sizeof problem);
    else
        snprintf(conv, sizeof conv, "?");
    free(fl);
    if (json) {
        printf("{\"op\":\"inspect\",\"dir\":");
        cli_json_str(stdout, inp.dir);
        printf(",\"shards\":%zu,\"quantization\":", ix.nshards);
        cli_json_str(stdout, conv);
        printf(",\"quantization_valid\":%s", invalid ? "false" : "true");
        printf(",\"tensors\":[");
        for (size_t i = 0; i < ix.nshards; i++)
            inspect_file(&ix.files[i], ix.shards[i], 1, &first);
        printf("]}\n");
    } else {
        printf("%s: sharded checkpoint, %zu shards (index %s)\n", inp.dir, ix.nshards, ix.index_path);
        for (size_t i = 0; i < ix.nshards; i++)
            inspect_file(&ix.files[i], ix.shards[i], 0, &first);
        printf("quantization: %s\n", conv);
    }
    int rc = inspect_verdict(inp.dir, invalid, problem);
    st_input_free(&inp);
    st_index_close(&ix);
    return rc;
}
