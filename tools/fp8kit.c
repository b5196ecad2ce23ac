/* fp8kit.c - entry point of the `fp8kit` command-line tool: dispatches to the
 * commands (info here; bench in cli_bench.c; gemm in cli_gemm.c; quantize,
 * dequantize and inspect of safetensors files in cli_st.c) and prints
 * the top-level usage. `fp8kit <command> --help` (or `fp8kit help <command>`)
 * describes each command. Exit status: 0 ok, 1 a check or library call
 * failed, 2 bad arguments (one line on stderr; see cli_usage_error). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"

static void main_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit <command> [options]\n"
        "\n"
        "commands:\n"
        "  info        version, backends compiled in and available, devices, threads\n"
        "  bench       quantize and GEMM throughput with correctness checks (--quick)\n"
        "  gemm        one scaled FP8 GEMM, timed and checked against an fp64 reference\n"
        "  quantize    a safetensors checkpoint to FP8/MXFP8 (docs/spec.md section 5)\n"
        "  dequantize  an FP8/MXFP8 safetensors checkpoint back to bf16/fp16/fp32\n"
        "  inspect     validate a safetensors file or sharded checkpoint, list its tensors\n"
        "  help [CMD]  this text, or CMD's (= fp8kit CMD --help)\n"
        "\n"
        "Every command takes --help and --json (one JSON object per result line), and\n"
        "options as --opt VALUE or --opt=VALUE. Names are those of the Python binding\n"
        "too (bf16 / bfloat16, fp32 / f32 / float32, tensor / fp8-tensor, mx / mxfp8, ...).\n"
        "A bad argument is reported in one line on stderr.\n"
        "Exit status: 0 ok, 1 a check or library call failed, 2 bad arguments (or, for\n"
        "quantize / dequantize, an existing OUT without --force).\n");
}

static void info_usage(FILE *f)
{
    fprintf(f,
        "usage: fp8kit info [--json]\n"
        "\n"
        "Prints the library version, the backends compiled in and whether each is usable\n"
        "here (and if not, why: e.g. no NVIDIA driver, no GPU), the backend `auto`\n"
        "resolves to, CUDA devices (name, compute capability, SMs, memory) and the OpenMP\n"
        "thread count of the CPU backend.\n"
        "Exit status: 0 ok (also when the CUDA backend is not usable here), 1 if the CPU\n"
        "backend fails, 2 on bad arguments.\n");
}

int cli_cmd_info(int argc, char **argv)
{
    static const char *cmd = "info";
    int json, rc0 = cli_json_only_opts(cmd, argc, argv, info_usage, &json);
    if (rc0 >= 0)
        return rc0;
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    int rc = CLI_EXIT_OK;
    int cpu_avail = fp8kit_backend_available(FP8KIT_BACKEND_CPU);
    int cuda_avail = fp8kit_backend_available(FP8KIT_BACKEND_CUDA);
    int cuda_built = cli_cuda_compiled();
    char cpu_desc[200] = "", cuda_desc[200] = "", auto_name[32] = "none";
    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) == FP8KIT_OK) {
        snprintf(cpu_desc, sizeof cpu_desc, "%s", fp8kit_ctx_describe(ctx));
        fp8kit_ctx_destroy(ctx);
    } else {
        rc = CLI_EXIT_FAIL; /* the CPU backend must always work */
    }
    if (cuda_avail && fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &ctx) == FP8KIT_OK) {
        snprintf(cuda_desc, sizeof cuda_desc, "%s", fp8kit_ctx_describe(ctx));
        fp8kit_ctx_destroy(ctx);
    }
    if (fp8kit_ctx_create(FP8KIT_BACKEND_AUTO, 0, &ctx) == FP8KIT_OK) {
        snprintf(auto_name, sizeof auto_name, "%s", fp8kit_backend_name(fp8kit_ctx_backend(ctx)));
        fp8kit_ctx_destroy(ctx);
    }
    /* Why CUDA is not usable, in the library's words (it tells a missing driver
     * from a missing GPU or an old driver; cudart alone reports a missing
     * driver as "CUDA driver version is insufficient"). */
    char cuda_err[512] = "";
    int ndev = -1;
    if (!cuda_avail) cli_cuda_unavailable_reason(cuda_err, sizeof cuda_err);
    else ndev = cli_cuda_device_count(cuda_err, sizeof cuda_err);
    int omp_threads = 1, nproc = (int)sysconf(_SC_NPROCESSORS_ONLN);
#ifdef _OPENMP
    omp_threads = omp_get_max_threads();
#endif
    cli_cuda_info dinfo[16];
    int dok[16] = {0};
    int nshow = ndev > 16 ? 16 : ndev;
    for (int d = 0; d < nshow; d++)
        dok[d] = cli_cuda_device_info(d, &dinfo[d], NULL, 0) == 0;

    if (json) {
        printf("{\"op\":\"info\",\"version\":\"%s\",\"backend\":\"%s\",\"backends\":{",
               fp8kit_version_string(), auto_name);
        printf("\"cpu\":{\"compiled\":true,\"available\":%s,\"describe\":",
               cpu_avail ? "true" : "false");
        cli_json_str(stdout, cpu_desc);
        printf("},\"cuda\":{\"compiled\":%s,\"available\":%s,\"describe\":",
               cuda_built ? "true" : "false", cuda_avail ? "true" : "false");
        cli_json_str(stdout, cuda_desc);
        if (!cuda_avail) {
            printf(",\"reason\":");
            cli_json_str(stdout, cuda_err);
        }
        printf("}},\"openmp_threads\":%d,\"processors\":%d,\"devices\":[", omp_threads, nproc);
        int first = 1;
        for (int d = 0; d < nshow; d++) {
            if (!dok[d]) continue;
            printf("%s{\"index\":%d,\"name\":", first ? "" : ",", d);
            cli_json_str(stdout, dinfo[d].name);
            printf(",\"cc\":\"%d.%d\",\"sms\":%d,\"mem_total\":%zu,\"mem_free\":%zu,"
                   "\"driver\":%d,\"runtime\":%d}",
                   dinfo[d].cc_major, dinfo[d].cc_minor, dinfo[d].sm_count, dinfo[d].mem_total,
                   dinfo[d].mem_free, dinfo[d].driver_version, dinfo[d].runtime_version);
            first = 0;
        }
        printf("]}\n");
        return rc;
    }
    printf("fp8kit %s\n", fp8kit_version_string());
    printf("backends:\n");
    printf("  cpu   compiled in, %s%s%s%s\n", cpu_avail ? "available" : "NOT available",
           cpu_desc[0] ? " (" : "", cpu_desc, cpu_desc[0] ? ")" : "");
    if (!cuda_built)
        printf("  cuda  not compiled in (%s)\n", cuda_err);
    else if (cuda_avail)
        printf("  cuda  compiled in, available (%s)\n", cuda_desc);
    else
        printf("  cuda  compiled in, not available here: %s; the CPU backend is used\n", cuda_err);
    printf("auto resolves to: %s\n", auto_name);
    printf("OpenMP: %d threads, %d processors online\n", omp_threads, nproc);
    if (ndev <= 0) {
        printf("devices: none (no usable GPU here%s)\n", cuda_built ? ", see above" : "");
    } else {
        printf("devices:\n");
        for (int d = 0; d < nshow; d++) {
            if (!dok[d]) { printf("  cuda:%d  (properties unavailable)\n", d); continue; }
            printf("  cuda:%d  %s  sm_%d%d  %d SMs  %.1f GiB (%.1f GiB free)  driver %d.%d  runtime %d.%d\n",
                   d, dinfo[d].name, dinfo[d].cc_major, dinfo[d].cc_minor, dinfo[d].sm_count,
                   (double)dinfo[d].mem_total / 1073741824.0, (double)dinfo[d].mem_free / 1073741824.0,
                   dinfo[d].driver_version / 1000, dinfo[d].driver_version % 1000 / 10,
                   dinfo[d].runtime_version / 1000, dinfo[d].runtime_version % 1000 / 10);
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) return cli_usage_error(NULL, "no command given");
    const char *cmd = argv[1];
    char *help_argv[4];
    if (!strcmp(cmd, "help") && argc >= 3) { /* fp8kit help CMD = fp8kit CMD --help */
        if (argc > 3) return cli_usage_error(NULL, "help takes one command, got '%s' and '%s'", argv[2], argv[3]);
        help_argv[0] = argv[0];
        help_argv[1] = argv[2];
        help_argv[2] = (char *)"--help";
        help_argv[3] = NULL;
        argv = help_argv;
        argc = 3;
        cmd = argv[1];
    }
    if (!strcmp(cmd, "info")) return cli_cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cli_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "gemm")) return cli_cmd_gemm(argc - 1, argv + 1);
#ifdef FP8KIT_HAVE_SAFETENSORS
    if (!strcmp(cmd, "quantize")) return cli_cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "dequantize")) return cli_cmd_dequantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "inspect")) return cli_cmd_inspect(argc - 1, argv + 1);
#else
    if (!strcmp(cmd, "quantize") || !strcmp(cmd, "dequantize") || !strcmp(cmd, "inspect")) {
        fprintf(stderr, "fp8kit %s: this build has no safetensors support (jansson / libjansson-dev was not found "
                        "when it was configured; run scripts/bootstrap.sh and rebuild)\n", cmd);
        return CLI_EXIT_FAIL;
    }
#endif
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc > 2 && strcmp(argv[2], "--help") && strcmp(argv[2], "-h"))
            return cli_usage_error(NULL, "unexpected argument '%s'", argv[2]);
        main_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("fp8kit %s\n", fp8kit_version_string());
        return CLI_EXIT_OK;
    }
    if (cmd[0] == '-') return cli_usage_error(NULL, "unknown option '%s' (a command comes first)", cmd);
    return cli_usage_error(NULL, "unknown command '%s'", cmd);
}
