/* test_mx_both.c - fp8kit_quantize_mx_both (MX along both axes from one call):
 * on the CPU its four outputs equal two fp8kit_quantize calls (axis -1 and
 * axis -2) byte for byte; bad input leaves every output untouched; with a GPU
 * the CUDA fused kernel's outputs equal the CPU's (else that part skips).
 * Run: ./test_mx_both (FK_TEST_SEED to replay). */
#include "fp8kit.h"
#include "test_util.h"
#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

typedef struct {
    fp8kit_tensor x, qr, sr, qc, sc; /* host tensors */
    size_t nx, nqr, nsr, nqc, nsc;   /* bytes */
} case_bufs;

static size_t bytes_of(const fp8kit_tensor *t) { return (size_t)fp8kit_tensor_numel(t) * fp8kit_dtype_size(t->dtype); }

/* Allocates host outputs shaped by fp8kit_quant_shapes for axis -1 and -2. */
static void make_case(case_bufs *c, fp8kit_quant_desc d, int ndim, const int64_t *shape, fp8kit_dtype xt, fk_rng *rng)
{
    memset(c, 0, sizeof *c);
    c->x = fp8kit_tensor_make(NULL, xt, ndim, shape);
    c->nx = bytes_of(&c->x);
    c->x.data = malloc(c->nx);
    int64_t n = fp8kit_tensor_numel(&c->x);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(i % 7 == 0 ? fk_rng_heavy(rng) : fk_rng_normal(rng)) * 3.0f;
        if (xt == FP8KIT_F32)
            ((float *)c->x.data)[i] = v;
        else
            ((uint16_t *)c->x.data)[i] = (uint16_t)(fk_t_f2u(v) >> 16); /* bf16 by truncation: any bits do */
    }
    d.axis = -1;
    fp8kit_quant_shapes(&d, &c->x, &c->qr, &c->sr);
    d.axis = -2;
    fp8kit_quant_shapes(&d, &c->x, &c->qc, &c->sc);
    c->nqr = bytes_of(&c->qr), c->nsr = bytes_of(&c->sr), c->nqc = bytes_of(&c->qc), c->nsc = bytes_of(&c->sc);
    c->qr.data = malloc(c->nqr), c->sr.data = malloc(c->nsr), c->qc.data = malloc(c->nqc), c->sc.data = malloc(c->nsc);
}

static void free_case(case_bufs *c)
{
    free(c->x.data), free(c->qr.data), free(c->sr.data), free(c->qc.data), free(c->sc.data);
}

static void poison_case(case_bufs *c)
{
    fk_poison(c->qr.data, c->nqr), fk_poison(c->sr.data, c->nsr), fk_poison(c->qc.data, c->nqc), fk_poison(c->sc.data, c->nsc);
}

static int untouched(case_bufs *c)
{
    return fk_is_poisoned(c->qr.data, c->nqr) && fk_is_poisoned(c->sr.data, c->nsr) && fk_is_poisoned(c->qc.data, c->nqc) &&
           fk_is_poisoned(c->sc.data, c->nsc);
}

#ifdef FP8KIT_HAVE_CUDA
/* Runs the fused call on the GPU and compares its outputs with the host ones in c. */
static void check_gpu(fp8kit_ctx *g, const fp8kit_quant_desc *d, case_bufs *c, const char *what)
{
    fp8kit_tensor x = c->x, qr = c->qr, sr = c->sr, qc = c->qc, sc = c->sc;
    void *p[5] = {0};
    size_t nb[5] = {c->nx, c->nqr, c->nsr, c->nqc, c->nsc};
    for (int i = 0; i < 5; i++)
        if (cudaMalloc(&p[i], nb[i]) != cudaSuccess) { CHECK(0, "%s: cudaMalloc", what); return; }
    cudaMemcpy(p[0], c->x.data, c->nx, cudaMemcpyHostToDevice);
    for (int i = 1; i < 5; i++)
        cudaMemset(p[i], FK_POISON, nb[i]);
    x.data = p[0], qr.data = p[1], sr.data = p[2], qc.data = p[3], sc.data = p[4];
    CHECK_STATUS(fp8kit_quantize_mx_both(g, d, &x, &qr, &sr, &qc, &sc, NULL), FP8KIT_OK);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: sync", what);
    void *host[5] = {c->x.data, c->qr.data, c->sr.data, c->qc.data, c->sc.data};
    for (int i = 1; i < 5; i++) {
        unsigned char *h = (unsigned char *)malloc(nb[i]);
        cudaMemcpy(h, p[i], nb[i], cudaMemcpyDeviceToHost);
        CHECK(memcmp(h, host[i], nb[i]) == 0, "%s: GPU output %d differs from the CPU", what, i);
        free(h);
    }
    for (int i = 0; i < 5; i++)
        cudaFree(p[i]);
}
#endif

int main(void)
{
    fk_rng rng = fk_rng_seeded("test_mx_both");
    fp8kit_ctx *cpu = NULL, *gpu = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cpu), FP8KIT_OK);
#ifdef FP8KIT_HAVE_CUDA
    if (fp8kit_backend_available(FP8KIT_BACKEND_CUDA))
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &gpu), FP8KIT_OK);
#endif
    const int64_t shapes[][3] = {{64, 96, 0}, {160, 32, 0}, {3, 96, 64}, {1, 256, 320}};
    const int nd[] = {2, 2, 3, 3};
    for (int si = 0; si < 4; si++)
        for (int e5 = 0; e5 < 2; e5++)
            for (int rc = 0; rc < 2; rc++)
                for (int lay = 0; lay < 2; lay++) {
                    fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
                    d.elem = e5 ? FP8KIT_E5M2 : FP8KIT_E4M3;
                    d.rounding = rc ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
                    d.scale_layout = lay ? FP8KIT_LAYOUT_BLOCKED : FP8KIT_LAYOUT_PLAIN;
                    char what[96];
                    snprintf(what, sizeof what, "shape %d %s %s %s", si, e5 ? "e5m2" : "e4m3", rc ? "rceil" : "floor",
                             lay ? "blocked" : "plain");
                    case_bufs c, r;
                    fk_rng r2 = rng;
                    make_case(&c, d, nd[si], shapes[si], si & 1 ? FP8KIT_F32 : FP8KIT_BF16, &rng);
                    make_case(&r, d, nd[si], shapes[si], si & 1 ? FP8KIT_F32 : FP8KIT_BF16, &r2); /* same x */
                    poison_case(&c), poison_case(&r);
                    CHECK_STATUS(fp8kit_quantize_mx_both(cpu, &d, &c.x, &c.qr, &c.sr, &c.qc, &c.sc, NULL), FP8KIT_OK);
                    fp8kit_quant_desc d1 = d, d2 = d;
                    d1.axis = -1, d2.axis = -2;
                    CHECK_STATUS(fp8kit_quantize(cpu, &d1, &r.x, &r.qr, &r.sr, NULL), FP8KIT_OK);
                    CHECK_STATUS(fp8kit_quantize(cpu, &d2, &r.x, &r.qc, &r.sc, NULL), FP8KIT_OK);
                    CHECK(memcmp(c.qr.data, r.qr.data, c.nqr) == 0 && memcmp(c.sr.data, r.sr.data, c.nsr) == 0,
                          "%s: rowwise outputs differ from fp8kit_quantize axis -1", what);
                    CHECK(memcmp(c.qc.data, r.qc.data, c.nqc) == 0 && memcmp(c.sc.data, r.sc.data, c.nsc) == 0,
                          "%s: columnwise outputs differ from fp8kit_quantize axis -2", what);
#ifdef FP8KIT_HAVE_CUDA
                    if (gpu)
                        check_gpu(gpu, &d, &c, what);
#endif
                    free_case(&c), free_case(&r);
                }

    /* bad input: nothing written */
    {
        fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
        const int64_t shape[2] = {64, 64};
        case_bufs c;
        make_case(&c, d, 2, shape, FP8KIT_BF16, &rng);
        poison_case(&c);
        fp8kit_quant_desc bad = d;
        bad.scheme = FP8KIT_SCHEME_ROW;
        CHECK_STATUS(fp8kit_quantize_mx_both(cpu, &bad, &c.x, &c.qr, &c.sr, &c.qc, &c.sc, NULL), FP8KIT_ERR_UNSUPPORTED);
        CHECK_STATUS(fp8kit_quantize_mx_both(cpu, NULL, &c.x, &c.qr, &c.sr, &c.qc, &c.sc, NULL), FP8KIT_ERR_NULL_POINTER);
        CHECK_STATUS(fp8kit_quantize_mx_both(NULL, &d, &c.x, &c.qr, &c.sr, &c.qc, &c.sc, NULL), FP8KIT_ERR_NULL_POINTER);
        /* the columnwise q given with the rowwise shape (64x64 is square, so use a wrong dtype) */
        fp8kit_tensor qc = c.qc;
        qc.dtype = FP8KIT_E5M2;
        CHECK_STATUS(fp8kit_quantize_mx_both(cpu, &d, &c.x, &c.qr, &c.sr, &qc, &c.sc, NULL), FP8KIT_ERR_INVALID_ARGUMENT);
        CHECK(strstr(fp8kit_last_error(cpu), "fp8kit_quantize_mx_both") != NULL, "message names the call: %s",
              fp8kit_last_error(cpu));
        CHECK(untouched(&c), "outputs written by a failing call");
        free_case(&c);
        /* R not a multiple of 32: the axis -2 blocks do not fit */
        const int64_t shape2[2] = {40, 64};
        fp8kit_tensor x = fp8kit_tensor_make(NULL, FP8KIT_BF16, 2, shape2);
        x.data = calloc(40 * 64, 2);
        unsigned char qr[40 * 64], sr[40 * 2], qc2[64 * 40], sc[64];
        fp8kit_tensor tqr = fp8kit_tensor_2d(qr, FP8KIT_E4M3, 40, 64, 64), tsr = fp8kit_tensor_2d(sr, FP8KIT_E8M0, 40, 2, 2);
        fp8kit_tensor tqc = fp8kit_tensor_2d(qc2, FP8KIT_E4M3, 64, 40, 40), tsc = fp8kit_tensor_2d(sc, FP8KIT_E8M0, 64, 1, 1);
        fk_poison(qr, sizeof qr), fk_poison(sr, sizeof sr), fk_poison(qc2, sizeof qc2), fk_poison(sc, sizeof sc);
        CHECK_STATUS(fp8kit_quantize_mx_both(cpu, &d, &x, &tqr, &tsr, &tqc, &tsc, NULL), FP8KIT_ERR_INVALID_SHAPE);
        CHECK(fk_is_poisoned(qr, sizeof qr) && fk_is_poisoned(sr, sizeof sr) && fk_is_poisoned(qc2, sizeof qc2) &&
                  fk_is_poisoned(sc, sizeof sc),
              "outputs written when R %% 32 != 0");
        free(x.data);
    }
    printf("test_mx_both: GPU part %s\n", gpu ? "ran" : "skipped (no usable CUDA device)");
    fp8kit_ctx_destroy(gpu);
    fp8kit_ctx_destroy(cpu);
    return fk_test_summary("test_mx_both");
}
