/* bench_launch.c - host cost per call of the CUDA GEMM's cached-plan path:
 * fp8kit_gemm (validate, plan hash + lookup, memoized TMA tensor maps,
 * launch) against a bare cuLaunchKernelEx with fp8kit's launch attributes
 * (programmatic dependent launch), a bare cuLaunchKernel and a bare
 * cudaLaunchKernel of the very same kernel with the very same parameters
 * (recorded through the internal hook of src/cuda/launch_rec.h), in the
 * same run; also fp8kit_gemm from a plan made with tuning gemm_pdl=0, fp8kit_gemm
 * with A alternating between two buffers (the tensor maps are re-encoded
 * every call, the cost before the memo), two cuTensorMapEncodeTiled calls
 * alone, fp8kit_gemm minus the launch (recorded instead), validation alone,
 * and fp8kit_gemm / a bare launch on the legacy default stream (torch's). 128x128x128 e4m3 x e4m3 -> bf16, rowwise scales. Host time =
 * wall time of a batch of back-to-back calls / batch (short enough that the
 * launch queue never fills; the stream is synchronized between batches),
 * median over interleaved rounds. The target: fp8kit_gemm minus the
 * bare launch it makes <= 0.5 us. Before timing, the bare launch's output is checked
 * to equal fp8kit_gemm's bit for bit.
 * Usage: bench_launch [--size S] [--batch N] [--rounds R] [--json FILE]
 *                     [--date D] [--commit C]   (exit 77 without a device) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fp8kit.h"

#ifdef FP8KIT_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#include "hooks/launch_rec.h"

#include "bench_cuda.h"

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);
typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                              CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                              CUtensorMapFloatOOBfill);

typedef struct bench {
    fp8kit_ctx *ctx;
    fp8kit_ctx *ctx_nopdl; /* plans made with tuning gemm_pdl=0 */
    fp8kit_gemm_desc desc;
    fp8kit_gemm_args args, args2; /* args2: A in the second buffer */
    cudaStream_t stream;
    fk_launch_rec rec;
    CUfunction cufn;
    launch_fn cu_launch;
    launch_ex_fn cu_launch_ex;
    encode_fn encode;
    int64_t n;
    int flip;
} bench;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static void must(bench *b, fp8kit_status st, const char *what)
{
    if (st != FP8KIT_OK) {
        fprintf(stderr, "bench_launch: %s: %s (%s)\n", what, fp8kit_status_string(st), fp8kit_last_error(b->ctx));
        exit(1);
    }
}

/* The timed cases; each enqueues one launch (or encodes maps) per call. */
static void run_fp8kit(bench *b) { must(b, fp8kit_gemm(b->ctx, &b->desc, &b->args, b->stream), "fp8kit_gemm"); }

/* everything fp8kit_gemm does but the launch itself (the recorder takes it;
 * its copy of ~0.4 KB of parameters is counted in) */
static void run_fp8kit_nolaunch(bench *b)
{
    static fk_launch_rec rec;
    fk_launch_rec_arm(&rec);
    must(b, fp8kit_gemm(b->ctx, &b->desc, &b->args, b->stream), "fp8kit_gemm (recorded)");
}

/* validation only (fp8kit_gemm_workspace_size builds the same checked job) */
static void run_validate(bench *b)
{
    size_t ws;
    must(b, fp8kit_gemm_workspace_size(b->ctx, &b->desc, &b->args, &ws), "fp8kit_gemm_workspace_size");
}

static void run_fp8kit_legacy(bench *b) { must(b, fp8kit_gemm(b->ctx, &b->desc, &b->args, NULL), "fp8kit_gemm"); }

static void run_cuda_launch_legacy(bench *b)
{
    const fk_launch_rec *r = &b->rec;
    dim3 g = {r->grid[0], r->grid[1], r->grid[2]}, t = {r->block[0], r->block[1], r->block[2]};
    CK(cudaLaunchKernel(r->fn, g, t, (void **)r->args, r->smem, NULL));
}

static void run_fp8kit_flip(bench *b)
{
    b->flip ^= 1;
    must(b, fp8kit_gemm(b->ctx, &b->desc, b->flip ? &b->args2 : &b->args, b->stream), "fp8kit_gemm");
}

static void run_cuda_launch(bench *b)
{
    const fk_launch_rec *r = &b->rec;
    dim3 g = {r->grid[0], r->grid[1], r->grid[2]}, t = {r->block[0], r->block[1], r->block[2]};
    CK(cudaLaunchKernel(r->fn, g, t, (void **)r->args, r->smem, b->stream));
}

static void run_cu_launch(bench *b)
{
    const fk_launch_rec *r = &b->rec;
    CUresult e = b->cu_launch(b->cufn, r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2],
                              (unsigned)r->smem, (CUstream)b->stream, (void **)r->args, NULL);
    if (e != CUDA_SUCCESS) {
        fprintf(stderr, "bench_launch: cuLaunchKernel failed (%d)\n", (int)e);
        exit(1);
    }
}

/* the launch exactly as fp8kit makes it: cuLaunchKernelEx with the
 * recorded attributes (programmatic stream serialization when rec.pdl) */
static void run_cu_launch_ex(bench *b)
{
    const fk_launch_rec *r = &b->rec;
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig c;
    memset(&c, 0, sizeof c);
    c.gridDimX = r->grid[0], c.gridDimY = r->grid[1], c.gridDimZ = r->grid[2];
    c.blockDimX = r->block[0], c.blockDimY = r->block[1], c.blockDimZ = r->block[2];
    c.sharedMemBytes = (unsigned)r->smem;
    c.hStream = (CUstream)b->stream;
    c.attrs = &attr;
    c.numAttrs = r->pdl ? 1 : 0;
    CUresult e = b->cu_launch_ex(&c, b->cufn, (void **)r->args, NULL);
    if (e != CUDA_SUCCESS) {
        fprintf(stderr, "bench_launch: cuLaunchKernelEx failed (%d)\n", (int)e);
        exit(1);
    }
}

static void run_fp8kit_nopdl(bench *b)
{
    must(b, fp8kit_gemm(b->ctx_nopdl, &b->desc, &b->args, b->stream), "fp8kit_gemm (tuning gemm_pdl=0)");
}

static void run_encode(bench *b)
{
    CUtensorMap m[2];
    cuuint64_t dims[2] = {(cuuint64_t)b->n, (cuuint64_t)b->n}, strides[1] = {(cuuint64_t)b->n};
    cuuint32_t box_a[2] = {128, 128}, box_b[2] = {128, 64}, estr[2] = {1, 1};
    CUresult e = b->encode(&m[0], CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, b->args.a.data, dims, strides, box_a, estr,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (e == CUDA_SUCCESS)
        e = b->encode(&m[1], CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, b->args.b.data, dims, strides, box_b, estr,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (e != CUDA_SUCCESS) {
        fprintf(stderr, "bench_launch: cuTensorMapEncodeTiled failed (%d)\n", (int)e);
        exit(1);
    }
}

enum { C_FP8KIT, C_BARE_RT, C_BARE_DRV, C_BARE_EX, C_NOPDL, C_FLIP, C_ENCODE, C_NOLAUNCH, C_VALIDATE, C_LEGACY,
       C_BARE_LEGACY, C_COUNT };
static const char *case_name[C_COUNT] = {"fp8kit_gemm (cached plan)", "bare cudaLaunchKernel",
                                         "bare cuLaunchKernel",
                                         "bare cuLaunchKernelEx (fp8kit's launch attributes)",
                                         "fp8kit_gemm, plan without PDL (tuning gemm_pdl=0)",
                                         "fp8kit_gemm (A alternating: maps re-encoded)",
                                         "2x cuTensorMapEncodeTiled alone",
                                         "fp8kit_gemm without the launch (recorded)",
                                         "fp8kit_gemm_workspace_size (validation only)",
                                         "fp8kit_gemm on the legacy default stream",
                                         "bare cudaLaunchKernel on the legacy default stream"};
static void (*const case_fn[C_COUNT])(bench *) = {run_fp8kit, run_cuda_launch, run_cu_launch, run_cu_launch_ex,
                                                   run_fp8kit_nopdl, run_fp8kit_flip,
                                                   run_encode, run_fp8kit_nolaunch, run_validate,
                                                   run_fp8kit_legacy, run_cuda_launch_legacy};

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static void *dev_fill(size_t bytes, int byte)
{
    void *p;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, byte, bytes));
    return p;
}

int main(int argc, char **argv)
{
    int64_t n = 128;
    int batch = 100, rounds = 301;
    const char *json = NULL, *date = fk_bench_today(), *commit = getenv("FK_COMMIT");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--date") && i + 1 < argc) date = argv[++i];
        else if (!strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
        else {
            fprintf(stderr, "usage: bench_launch [--size S] [--batch N] [--rounds R] [--json FILE] [--date D] "
                            "[--commit C]\n");
            return 2;
        }
    }
    if (!commit) commit = "unknown";
    if (n < 16 || n % 16 || batch < 1 || rounds < 1) {
        fprintf(stderr, "bench_launch: size must be a positive multiple of 16, batch and rounds positive\n");
        return 2;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("bench_launch: no CUDA device, skipped\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9 || prop.minor != 0) {
        printf("bench_launch: the GEMM kernel needs sm_90 (device is sm_%d%d), skipped\n", prop.major, prop.minor);
        return 77;
    }
    bench b;
    memset(&b, 0, sizeof b);
    b.n = n;
    must(&b, fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &b.ctx), "fp8kit_ctx_create");
    must(&b, fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &b.ctx_nopdl), "fp8kit_ctx_create");
    must(&b, fp8kit_ctx_set_tuning(b.ctx_nopdl, "gemm_pdl=0"), "fp8kit_ctx_set_tuning");
    CK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
    const size_t nn = (size_t)(n * n);
    void *a = dev_fill(nn, 0x38), *a2 = dev_fill(nn, 0x30), *w = dev_fill(nn, 0x34); /* e4m3 1.0, 0.5, 0.75 */
    float *sa, *sb;
    CK(cudaMalloc((void **)&sa, (size_t)n * 4));
    CK(cudaMalloc((void **)&sb, (size_t)n * 4));
    float *ones = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        ones[i] = 1.0f / (float)(1 + i % 7);
    CK(cudaMemcpy(sa, ones, (size_t)n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(sb, ones, (size_t)n * 4, cudaMemcpyHostToDevice));
    void *d = dev_fill(nn * 2, 0);
    b.desc.scale_a = FP8KIT_SCALE_ROW;
    b.desc.scale_b = FP8KIT_SCALE_ROW;
    b.args.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, n, n, n);
    b.args.b = fp8kit_tensor_2d(w, FP8KIT_E4M3, n, n, n);
    b.args.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &n);
    b.args.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &n);
    b.args.alpha = 1.0f;
    b.args.d = fp8kit_tensor_2d(d, FP8KIT_BF16, n, n, n);
    b.args2 = b.args;
    b.args2.a.data = a2;

    /* record the launch fp8kit_gemm makes, then check a bare launch of it
     * writes exactly what fp8kit_gemm writes */
    run_fp8kit(&b); /* makes the plan */
    run_fp8kit_nopdl(&b);
    fk_launch_rec_arm(&b.rec);
    run_fp8kit(&b);
    if (fk_launch_rec_armed() || !b.rec.fn) {
        fprintf(stderr, "bench_launch: fp8kit_gemm did not reach the recorded launch\n");
        return 1;
    }
    uint16_t *h1 = malloc(nn * 2), *h2 = malloc(nn * 2);
    CK(cudaMemsetAsync(d, 0, nn * 2, b.stream));
    run_fp8kit(&b);
    CK(cudaMemcpyAsync(h1, d, nn * 2, cudaMemcpyDeviceToHost, b.stream));
    CK(cudaMemsetAsync(d, 0, nn * 2, b.stream));
    run_cuda_launch(&b);
    CK(cudaMemcpyAsync(h2, d, nn * 2, cudaMemcpyDeviceToHost, b.stream));
    CK(cudaStreamSynchronize(b.stream));
    int nz = 0;
    for (size_t i = 0; i < nn; i++)
        nz += h1[i] != 0;
    if (memcmp(h1, h2, nn * 2) || nz == 0) {
        fprintf(stderr, "bench_launch: the bare launch's output differs from fp8kit_gemm's (or is zero)\n");
        return 1;
    }
    CK(cudaGetFuncBySymbol((cudaFunction_t *)&b.cufn, b.rec.fn));
    enum cudaDriverEntryPointQueryResult q;
    void *p = NULL;
    CK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &p, 12000, cudaEnableDefault, &q));
    b.cu_launch = (launch_fn)p;
    CK(cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &p, 12000, cudaEnableDefault, &q));
    b.cu_launch_ex = (launch_ex_fn)p;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    b.encode = (encode_fn)p;
    if (!b.cu_launch || !b.cu_launch_ex || !b.encode) {
        fprintf(stderr, "bench_launch: driver entry points not found\n");
        return 1;
    }

    /* interleaved rounds: every case sees the same machine load */
    double *t = malloc(sizeof(double) * (size_t)rounds * C_COUNT);
    for (int c = 0; c < C_COUNT; c++)
        for (int i = 0; i < batch; i++)
            case_fn[c](&b);
    CK(cudaDeviceSynchronize());
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < C_COUNT; c++) {
            double t0 = now_us();
            for (int i = 0; i < batch; i++)
                case_fn[c](&b);
            t[c * rounds + r] = (now_us() - t0) / batch;
            CK(cudaDeviceSynchronize());
        }
    double med[C_COUNT], lo[C_COUNT];
    for (int c = 0; c < C_COUNT; c++) {
        qsort(t + c * rounds, (size_t)rounds, sizeof(double), cmp_double);
        med[c] = t[c * rounds + rounds / 2];
        lo[c] = t[c * rounds + rounds / 10];
    }
    printf("bench_launch on %s, %lldx%lldx%lld e4m3 -> bf16 rowwise, kernel grid %u x %u threads, %zu B smem; "
           "%d rounds x %d calls, date %s, commit %s\n",
           prop.name, (long long)n, (long long)n, (long long)n, b.rec.grid[0], b.rec.block[0], b.rec.smem, rounds,
           batch, date, commit);
    printf("| what | host us per call (median) | p10 |\n|---|---|---|\n");
    for (int c = 0; c < C_COUNT; c++)
        printf("| %s | %.3f | %.3f |\n", case_name[c], med[c], lo[c]);
    const double over_ex = med[C_FP8KIT] - med[C_BARE_EX], over_drv = med[C_FP8KIT] - med[C_BARE_DRV];
    const double over_rt = med[C_FP8KIT] - med[C_BARE_RT];
    printf("cached-plan overhead over the bare launch it makes (cuLaunchKernelEx, pdl %d): %.3f us (target <= "
           "0.5: %s); over a bare cuLaunchKernel: %.3f us; over a bare cudaLaunchKernel: %.3f us; the plan "
           "without PDL: %+.3f us\n",
           b.rec.pdl, over_ex, over_ex <= 0.5 ? "met" : "NOT met", over_drv, over_rt,
           med[C_NOPDL] - med[C_FP8KIT]);
    if (json) {
        FILE *jf = fopen(json, "a");
        if (!jf) {
            fprintf(stderr, "bench_launch: cannot open %s\n", json);
            return 1;
        }
        int peer_of[C_COUNT];
        for (int c = 0; c < C_COUNT; c++)
            peer_of[c] = C_BARE_EX;
        peer_of[C_LEGACY] = C_BARE_LEGACY;
        for (int c = 0; c < C_COUNT; c++) {
            if (c == C_BARE_EX)
                continue;
            const int pc = peer_of[c];
            fprintf(jf,
                    "{\"op\": \"launch_overhead\", \"case\": \"%s\", \"shape\": \"%lldx%lldx%lld\", \"ours\": %.3f, "
                    "\"peer\": %.3f, \"peer_name\": \"%s\", \"ratio\": %.3f, \"diff\": %.3f, \"unit\": \"us/call\", "
                    "\"device\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}\n",
                    case_name[c], (long long)n, (long long)n, (long long)n, med[c], med[pc], case_name[pc],
                    med[c] / med[pc], med[c] - med[pc], prop.name, date, commit);
        }
        fclose(jf);
    }
    fp8kit_ctx_destroy(b.ctx);
    return 0;
}

#else
int main(void)
{
    printf("bench_launch: built without CUDA, skipped\n");
    return 77;
}
#endif
