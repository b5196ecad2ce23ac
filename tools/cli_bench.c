/* cli_bench.c - `fp8kit bench [--quick]`: quantize bandwidth for every scheme
 * on a bf16 tensor next to a buffer copy measured in the same run (the peer),
 * and scaled-GEMM throughput for tensor/row/block/mx scaling, each with its
 * correctness check (see cli_quant.c and cli_gemm.c). Runs on the best backend
 * available unless --backend says otherwise. Exit status 1 if any check fails
 * or a call fails; a case the backend reports as FP8KIT_ERR_UNSUPPORTED is
 * listed as such and counted apart, without failing the run. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void bench_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit bench [--quick] [--backend auto|cpu|cuda] [--threads T] [--json]\n"
        "                    [--size RxC] [--gemm MxNxK] [--reps R] [--only quant|gemm] [--seed S]\n"
        "\n"
        "Quantize bandwidth (GB/s counting 2 B in + 1 B out per element + scale bytes) of a\n"
        "bf16 tensor for the schemes tensor, row, block1x128, block128x128, mx floor axis -1,\n"
        "mx rceil axis -1 and mx axis -2 with blocked scales, next to a copy of the same\n"
        "tensor measured in the same run; then GEMM GFLOP/s (bf16 out) for tensor, row,\n"
        "block and mx scaling. Every line carries its check: quantize -> dequantize vs the\n"
        "input (rel_err, max_rel; on CUDA also byte equality with the CPU backend), GEMM ->\n"
        "rel_err vs an fp64 reference (sampled rows for big shapes). Times are medians\n"
        "after a warm-up (CUDA: events, L2 flushed between runs).\n"
        "--quick: CPU 4096x4096 and 1024^3, 9 runs; CUDA 16384x8192 and 8192^3, 20 runs.\n"
        "Without --quick the same shapes with 3x the runs.\n"
        "Options take their value as --opt VALUE or --opt=VALUE; --only also takes quantize.\n"
        "Exit status: 0 ok, 1 if a check or call fails (a backend not usable here included;\n"
        "cases the backend reports as not supported are listed and counted apart),\n"
        "2 on bad arguments.\n");
}

static int parse_dims(const char *s, int64_t *d, int n)
{
    const char *p = s;
    for (int i = 0; i < n; i++) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1 || v > ((long long)1 << 24)) return -1;
        d[i] = v;
        if (i + 1 < n) {
            if (*end != 'x' && *end != 'X') return -1;
            p = end + 1;
        } else if (*end) {
            return -1;
        }
    }
    return 0;
}

static const cli_name bench_only_names[] = {{"quant", 1}, {"quantize", 1}, {"gemm", 2}, {NULL, 0}};

int cli_cmd_bench(int argc, char **argv)
{
    static const char *cmd = "bench";
    enum { O_QUICK = 256, O_JSON, O_BACKEND, O_SIZE, O_GEMM, O_REPS, O_THREADS, O_SEED, O_ONLY };
    static const struct option lo[] = {
        {"help", no_argument, NULL, 'h'},
        {"quick", no_argument, NULL, O_QUICK},
        {"json", no_argument, NULL, O_JSON},
        {"backend", required_argument, NULL, O_BACKEND},
        {"size", required_argument, NULL, O_SIZE},
        {"gemm", required_argument, NULL, O_GEMM},
        {"reps", required_argument, NULL, O_REPS},
        {"threads", required_argument, NULL, O_THREADS},
        {"seed", required_argument, NULL, O_SEED},
        {"only", required_argument, NULL, O_ONLY},
        {NULL, 0, NULL, 0}};
    fp8kit_backend backend = FP8KIT_BACKEND_AUTO;
    int json = 0, quick = 0, do_quant = 1, do_gemm = 1, c, bad = 0, only;
    int64_t size[2] = {0, 0}, gshape[3] = {0, 0, 0}, reps = 0, threads = 0;
    uint64_t seed = 1;
    while (!bad && (c = cli_getopt(cmd, argc, argv, "h", lo)) != -1) {
        switch (c) {
        case 'h': bench_usage(stdout); return CLI_EXIT_OK;
        case O_QUICK: quick = 1; break;
        case O_JSON: json = 1; break;
        case O_BACKEND: bad = cli_parse_backend(cmd, optarg, &backend); break;
        case O_SIZE:
            if (parse_dims(optarg, size, 2))
                return cli_usage_error(cmd, "--size expects RxC, got '%s'", optarg);
            break;
        case O_GEMM:
            if (parse_dims(optarg, gshape, 3))
                return cli_usage_error(cmd, "--gemm expects MxNxK, got '%s'", optarg);
            break;
        case O_REPS: bad = cli_parse_i64(cmd, "--reps", optarg, 1, 100000, &reps); break;
        case O_THREADS: bad = cli_parse_i64(cmd, "--threads", optarg, 0, 4096, &threads); break;
        case O_SEED: bad = cli_parse_u64(cmd, "--seed", optarg, &seed); break;
        case O_ONLY:
            if (!(bad = cli_parse_name(cmd, "--only", optarg, bench_only_names, ~0u, &only))) {
                do_quant = only == 1;
                do_gemm = only == 2;
            }
            break;
        default: bad = 1; break; /* cli_getopt said why */
        }
    }
    if (bad) return CLI_EXIT_USAGE;
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (do_quant && (size[0] % 32 || size[1] % 32))
        return cli_usage_error(cmd, "--size needs R and C multiples of 32 (mx schemes), got %lldx%lld",
                               (long long)size[0], (long long)size[1]);
    if (do_gemm && gshape[2] % 32)
        return cli_usage_error(cmd, "--gemm needs K to be a multiple of 32 (mx scaling), got K = %lld",
                               (long long)gshape[2]);

    fp8kit_ctx *ctx = NULL, *cpu_ctx = NULL;
    if (cli_ctx_create(cmd, backend, threads, &ctx) != FP8KIT_OK) return CLI_EXIT_FAIL;
    cli_dev dev = {fp8kit_ctx_backend(ctx) == FP8KIT_BACKEND_CUDA};
    const char *bname = fp8kit_backend_name(fp8kit_ctx_backend(ctx));
    if (dev.cuda) {
        if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cpu_ctx) != FP8KIT_OK) cpu_ctx = NULL;
    }
    if (!size[0]) {
        size[0] = dev.cuda ? 16384 : 4096;
        size[1] = dev.cuda ? 8192 : 4096;
    }
    if (!gshape[0]) gshape[0] = gshape[1] = gshape[2] = dev.cuda ? 8192 : 1024;
    if (!reps) reps = (dev.cuda ? 20 : 9) * (quick ? 1 : 3);

    int total = 0, failed = 0, unsupported = 0;
    if (!json) {
        printf("fp8kit %s bench%s on %s\n", fp8kit_version_string(), quick ? " --quick" : "",
               fp8kit_ctx_describe(ctx));
        printf("times: median of %lld runs after a warm-up (%s)\n", (long long)reps,
               dev.cuda ? "CUDA events, L2 flushed between runs" : "wall clock");
    }

    if (do_quant) {
        int64_t rows = size[0], cols = size[1], numel = rows * cols;
        uint16_t *x_host = malloc((size_t)numel * 2);
        void *x_dev = x_host && dev.cuda ? cli_alloc(&dev, (size_t)numel * 2) : x_host;
        if (!x_host || !x_dev) {
            fprintf(stderr, "fp8kit bench: out of memory for a %lldx%lld bf16 tensor\n",
                    (long long)rows, (long long)cols);
            free(x_host);
            fp8kit_ctx_destroy(ctx);
            fp8kit_ctx_destroy(cpu_ctx);
            return CLI_EXIT_FAIL;
        }
        cli_fill_normal_bf16(x_host, numel, seed);
        if (dev.cuda && cli_upload(&dev, x_dev, x_host, (size_t)numel * 2)) {
            fprintf(stderr, "fp8kit bench: upload failed: %s\n", cli_cuda_last_error());
            failed++;
        }
        /* Peer: a copy of the bf16 tensor (read + write), same run. */
        size_t copy_bytes = (size_t)numel * 2;
        double tcopy = cli_copy_seconds(&dev, copy_bytes, (int)reps);
        double copy_gbps = tcopy > 0 ? 2.0 * (double)copy_bytes / tcopy * 1e-9 : -1.0;
        if (tcopy <= 0) {
            fprintf(stderr, "fp8kit bench: the copy (peer) failed: %s\n",
                    dev.cuda ? cli_cuda_last_error() : "out of memory");
            failed++;
        }
        if (json) {
            printf("{\"op\":\"copy\",\"backend\":");
            cli_json_str(stdout, bname);
            printf(",\"shape\":[%lld,%lld],\"bytes\":%.0f,\"seconds\":", (long long)rows,
                   (long long)cols, 2.0 * (double)copy_bytes);
            cli_json_num(stdout, tcopy > 0 ? tcopy : -1.0);
            printf(",\"gbps\":");
            cli_json_num(stdout, copy_gbps);
            printf(",\"rel_err\":0,\"pass\":%s}\n", tcopy > 0 ? "true" : "false");
        } else {
            printf("\nquantize bf16 %lldx%lld -> e4m3 (%.1f MiB in)\n", (long long)rows,
                   (long long)cols, (double)numel * 2 / 1048576.0);
            const char *label = dev.cuda ? "copy (peer, cudaMemcpy D2D)" : "copy (peer, memcpy)";
            printf("%-34s %9.3f ms  %8.2f GB/s  (read + write)\n", label, tcopy * 1e3, copy_gbps);
        }
        fp8kit_quant_desc descs[7];
        descs[0] = fp8kit_quant_desc_default(FP8KIT_SCHEME_TENSOR);
        descs[1] = fp8kit_quant_desc_default(FP8KIT_SCHEME_ROW);
        descs[2] = fp8kit_quant_desc_default(FP8KIT_SCHEME_BLOCK1X128);
        descs[3] = fp8kit_quant_desc_default(FP8KIT_SCHEME_BLOCK128X128);
        descs[4] = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
        descs[5] = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
        descs[5].rounding = FP8KIT_ROUND_RCEIL;
        descs[6] = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
        descs[6].axis = -2;
        descs[6].scale_layout = FP8KIT_LAYOUT_BLOCKED;
        for (int s = 0; s < 7; s++) {
            cli_quant_result r;
            cli_quant_measure(ctx, cpu_ctx, &dev, &descs[s], x_dev, x_host, rows, cols, (int)reps, &r);
            cli_quant_print(&descs[s], rows, cols, &r, bname, copy_gbps, json);
            total++;
            if (r.st == FP8KIT_ERR_UNSUPPORTED) unsupported++;
            else if (r.st != FP8KIT_OK || !r.pass) failed++;
        }
        if (dev.cuda) cli_free(&dev, x_dev);
        free(x_host);
    }

    if (do_gemm) {
        static const fp8kit_scale_mode modes[4] = {FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_ROW,
                                                   FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_MX};
        if (!json)
            printf("\ngemm e4m3 %lldx%lldx%lld (M x N x K) -> bf16\n", (long long)gshape[0],
                   (long long)gshape[1], (long long)gshape[2]);
        for (int m = 0; m < 4; m++) {
            cli_gemm_opts o;
            memset(&o, 0, sizeof o);
            o.m = gshape[0];
            o.n = gshape[1];
            o.k = gshape[2];
            o.scale = modes[m];
            o.out = FP8KIT_BF16;
            o.seed = seed + 100 + (uint64_t)m;
            o.warmup = 1;
            o.reps = (int)reps;
            o.ref_rows_max = ((double)o.m * (double)o.n * (double)o.k <= 2147483648.0) ? 0 : 64;
            cli_gemm_result r;
            cli_gemm_measure(ctx, &dev, &o, &r);
            cli_gemm_print(&o, &r, bname, json);
            total++;
            if (r.st == FP8KIT_ERR_UNSUPPORTED) unsupported++;
            else if (r.st != FP8KIT_OK || !r.pass) failed++;
        }
    }
    if (!json) {
        printf("\n%d passed, %d not supported by the %s backend, %d FAILED\n",
               total - failed - unsupported, unsupported, bname, failed);
    }
    fp8kit_ctx_destroy(cpu_ctx);
    fp8kit_ctx_destroy(ctx);
    return failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
