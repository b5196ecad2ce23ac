/* internal.h - library-internal types shared by the core and the backends:
 * the context, validated "jobs" (canonical views of the public descriptors),
 * the plan cache and the backend entry points. Nothing here is public API. */
#ifndef FK_INTERNAL_H
#define FK_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include "fp8kit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A batch of E row-major matrices R x C with unit column stride: element
 * (e, r, c) lives at data + (e * se + r * sr + c) * size(dtype). */
typedef struct fk_mat {
    void *data;
    fp8kit_dtype dtype;
    int64_t E, R, C;
    int64_t se, sr;
} fk_mat;

/* A validated quantize / dequantize call. For quantize, x is read and q and
 * scale are written; for dequantize, q and scale are read and x (= y) written.
 * x is the logical (E, R, C) tensor (for the tensor scheme the whole input is
 * one group). q is (E, R, C), or (E, C, R) for mx axis -2. scale is
 * contiguous: E consecutive per-expert buffers of scale_rows x scale_cols
 * elements (f32, or bytes for e8m0) in the stored layout, padding included:
 *   tensor:        1 x 1 (E = 1 for the whole tensor)
 *   row:           R x 1
 *   block1x128:    plain R x ceil(C/128);  mn_major ceil(C/128) x 4*ceil(R/4)
 *   block128x128:  plain ceil(R/128) x ceil(C/128); mn_major ceil(C/128) x 4*ceil(ceil(R/128)/4)
 *   mx axis -1:    plain R x C/32;  blocked 128*ceil(R/128) x 4*ceil(C/32/4)
 *   mx axis -2:    plain C x R/32;  blocked 128*ceil(C/128) x 4*ceil(R/32/4)
 * Padding entries are written as 0. */
typedef struct fk_quant_job {
    fp8kit_quant_desc desc;
    int e5m2; /* desc.elem == FP8KIT_E5M2 */
    fk_mat x;
    fk_mat q;
    void *scale;
    int64_t scale_rows, scale_cols;
} fk_quant_job;

/* A validated element-wise cast: src and dst have the same (E, R, C). */
typedef struct fk_cast_job {
    fk_mat src, dst;
} fk_cast_job;

/* A validated GEMM. Scale pointers follow the descriptor's modes:
 *   TENSOR: one f32;  ROW: f32[M] (A) / f32[N] (B);
 *   BLOCK:  A f32 plain (M x ka, row stride ka) or mn_major (ka x Mp4,
 *           element (m, kb) at kb * scale_a_ld + m); B f32 (ceil(N/128) x ka);
 *           ka = ceil(K/128)
 *   MX:     e8m0 plain (rows x K/32) or blocked (fk_blocked_offset with
 *           Cp = 4*ceil(K/32/4)) for A (rows M) and B (rows N).
 * scale_a_ld is the row stride of A's block scales in their stored layout. */
typedef struct fk_gemm_job {
    fp8kit_gemm_desc desc;
    int64_t m, n, k;
    const void *a; fp8kit_dtype a_type; int64_t lda;
    const void *b; fp8kit_dtype b_type; int64_t ldb;
    const void *scale_a, *scale_b;
    int64_t scale_a_ld;
    float alpha, beta;
    const void *c; fp8kit_dtype c_type; int64_t ldc; /* NULL when beta == 0 */
    const void *bias; fp8kit_dtype bias_type;         /* NULL when desc.bias == NONE */
    void *d; fp8kit_dtype d_type; int64_t ldd;
    const float *scale_d_in;  /* OUTQ_SCALED */
    void *scale_d_out;        /* OUTQ_MX: e8m0 M x N/32; OUTQ_BLOCK1X128: f32 M x ceil(N/128); contiguous */
    float *amax_d;            /* optional, OUTQ_SCALED */
    void *workspace; size_t workspace_bytes;
} fk_gemm_job;

/* Validates a GEMM descriptor: enum ranges and the combinations every
 * backend refuses (gemm_api.c); fn names the entry point in the messages. */
fp8kit_status fk_check_gemm_desc(const fp8kit_ctx *ctx, const char *fn, const fp8kit_gemm_desc *d);

/* Validates a call exactly as fp8kit_gemm does (same statuses and messages)
 * without planning or running it (gemm_api.c; used by fp8kit_grouped_gemm). */
fp8kit_status fk_gemm_check(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args);

/* A resolved GEMM configuration, cached per key. Backends own `config`.
 * memo: a small per-plan cache of what a backend derives from a call's data
 * pointers (CUDA: the last pair of TMA tensor maps), read and written only
 * through fk_plan_memo_get / fk_plan_memo_put (a sequence lock: lock-free
 * readers, one writer at a time, no allocation; memo_seq 0 = empty). */
#define FK_PLAN_CONFIG_BYTES 64
#define FK_PLAN_MEMO_WORDS 64
typedef struct fk_plan {
    uint64_t key_hash;
    unsigned char key[160];
    unsigned char config[FK_PLAN_CONFIG_BYTES];
    int valid;
    uint64_t memo_seq;
    uint64_t memo[FK_PLAN_MEMO_WORDS];
} fk_plan;

/* GEMM autotune table (tune.c): chosen plan configs by text key. */
#define FK_TUNE_PATH_MAX 1024
typedef struct fk_tune_entry {
    char key[288];
    unsigned char config[FK_PLAN_CONFIG_BYTES];
    double us;
} fk_tune_entry;
typedef struct fk_tune {
    int mode;                     /* 0 off, 1 on */
    char path[FK_TUNE_PATH_MAX];  /* cache file, "" = memory only */
    fk_tune_entry *entries;
    int64_t count, cap;
} fk_tune;

typedef struct fk_plan_cache {
    pthread_mutex_t lock;
    fk_plan **slots; /* cap entries, NULL = empty */
    int64_t cap, count;
    uint64_t id; /* unique in the process (never 0): keys each thread's last-plan shortcut */
} fk_plan_cache;

struct fp8kit_ctx {
    fp8kit_backend backend; /* resolved: CPU or CUDA */
    int device;
    int nthreads;
    fk_plan_cache plans;
    fk_tune tune; /* guarded by plans.lock */
    void *cuda; /* CUDA backend state */
    char describe[160];
};

/* Element-type classes: the high-precision floats and the fp8 formats. */
static inline int fk_is_hp(fp8kit_dtype t) { return t == FP8KIT_F32 || t == FP8KIT_F16 || t == FP8KIT_BF16; }
static inline int fk_is_fp8(fp8kit_dtype t) { return t == FP8KIT_E4M3 || t == FP8KIT_E5M2; }

/* Records a formatted message as the calling thread's last error on ctx
 * (ctx may be NULL) and returns st. */
fp8kit_status fk_fail(const fp8kit_ctx *ctx, fp8kit_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Plan cache: finds the plan for key (len <= 160 bytes) or inserts one made by
 * init(ctx, job, config). Returns NULL only when out of memory or init fails
 * (then *st holds the status). */
typedef fp8kit_status (*fk_plan_init_fn)(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config);
const fk_plan *fk_plan_get(fp8kit_ctx *ctx, const void *key, size_t len, const fk_gemm_job *job,
                           fk_plan_init_fn init, fp8kit_status *st);
void fk_plan_cache_init(fk_plan_cache *pc);
/* Plan memo: get copies the value (vbytes, a multiple of 8, into 8-byte
 * aligned val) stored with exactly these nkey key words and returns 1, else
 * returns 0 (nothing stored, another key, or a writer busy). put stores key +
 * value unless another thread is writing (then it does nothing). Any thread,
 * any time after the plan is made. nkey + vbytes / 8 <= FK_PLAN_MEMO_WORDS. */
int fk_plan_memo_get(const fk_plan *p, const uint64_t *key, int nkey, void *val, size_t vbytes);
void fk_plan_memo_put(const fk_plan *p, const uint64_t *key, int nkey, const void *val, size_t vbytes);
/* Autotune table (call with ctx->plans.lock held, as plan init is). */
int fk_tune_find(const fp8kit_ctx *ctx, const char *key, void *config);
fp8kit_status fk_tune_add(fp8kit_ctx *ctx, const char *key, const void *config, double us);
/* The text key of a GEMM job: prefix (backend, device) + shape + options. */
void fk_tune_key(const fk_gemm_job *j, const char *prefix, char *out, size_t n);
void fk_tune_free(fk_tune *t);
void fk_plan_cache_free(fk_plan_cache *pc);

/* Memory of a context's backend for code that stages host data through the
 * library itself (the checkpoint converter, src/io/ckpt_api.c). Each op
 * works on ctx's device (binding the calling thread to it first); a failure
 * returns NULL or a status, with the message recorded on ctx for the calling
 * thread (fk_fail). upload / download are synchronous copies (cudaMemcpy),
 * ordered after earlier work of the legacy default stream. */
typedef struct fk_mem_ops {
    void *(*alloc)(fp8kit_ctx *ctx, size_t bytes); /* bytes 0 allocates 1 */
    void (*free)(fp8kit_ctx *ctx, void *p);        /* NULL is a no-op */
    fp8kit_status (*upload)(fp8kit_ctx *ctx, void *dst, const void *src, size_t bytes);   /* host -> device */
    fp8kit_status (*download)(fp8kit_ctx *ctx, void *dst, const void *src, size_t bytes); /* device -> host */
} fk_mem_ops;
/* The ops of ctx's backend, or NULL when the library takes host pointers
 * (the CPU backend, or a NULL ctx) (ctx.c). */
const fk_mem_ops *fk_ctx_mem_ops(fp8kit_ctx *ctx);

/* fp8kit_ckpt_opts_default (one definition for src/io/ckpt_api.c and the
 * src/core/ckpt_stub.c of builds without src/io). */
static inline fp8kit_ckpt_opts fk_ckpt_opts_defaults(fp8kit_scheme scheme)
{
    fp8kit_ckpt_opts o;
    memset(&o, 0, sizeof o);
    o.scheme = scheme;
    o.format = FP8KIT_CKPT_FORMAT_DEFAULT;
    o.rounding = FP8KIT_ROUND_FLOOR;
    o.out_dtype = FP8KIT_BF16;
    return o;
}

/* CPU backend (src/cpu). Jobs are validated; these only compute. */
fp8kit_status fk_cpu_quantize(fp8kit_ctx *ctx, const fk_quant_job *job);
fp8kit_status fk_cpu_dequantize(fp8kit_ctx *ctx, const fk_quant_job *job);
fp8kit_status fk_cpu_cast(fp8kit_ctx *ctx, const fk_cast_job *job);
fp8kit_status fk_cpu_gemm_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config);
fp8kit_status fk_cpu_gemm(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan);

/* CUDA backend (src/cuda), present when FP8KIT_HAVE_CUDA is defined. */
int fk_cuda_available(void);
/* Why no CUDA device is usable, e.g. "no NVIDIA driver found (libcuda.so.1 not
 * loadable): the CUDA backend is unavailable". */
const char *fk_cuda_unavailable_reason(void);
int fk_cuda_device_count(void);
fp8kit_status fk_cuda_ctx_init(fp8kit_ctx *ctx);
void fk_cuda_ctx_free(fp8kit_ctx *ctx);
/* cudaMalloc / cudaFree / cudaMemcpy on the context's device (fk_ctx_mem_ops). */
const fk_mem_ops *fk_cuda_mem_ops(void);
fp8kit_status fk_cuda_quantize(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream);
fp8kit_status fk_cuda_dequantize(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream);
/* mx along both axes from one read of x: rowwise is the axis -1 job, colwise
 * the axis -2 job of the same x (both validated by the core). */
fp8kit_status fk_cuda_quantize_both(fp8kit_ctx *ctx, const fk_quant_job *rowwise, const fk_quant_job *colwise,
                                    void *stream);
fp8kit_status fk_cuda_cast(fp8kit_ctx *ctx, const fk_cast_job *job, void *stream);
fp8kit_status fk_cuda_gemm_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config);
fp8kit_status fk_cuda_gemm(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan, void *stream);
fp8kit_status fk_cuda_gemm_workspace(fp8kit_ctx *ctx, const fk_gemm_job *job, size_t *bytes);
/* the workspace of the plan's fastest path (>= the above; gemm.cu), and a
 * bound on it made without a plan (autotune: planning would time kernels) */
fp8kit_status fk_cuda_gemm_workspace_bound(fp8kit_ctx *ctx, const fk_gemm_job *job, size_t *bytes);
fp8kit_status fk_cuda_gemm_workspace_best(fp8kit_ctx *ctx, const fk_gemm_job *job, const struct fk_plan *plan,
                                          size_t *bytes);
/* A validated grouped GEMM for the CUDA backend (grouped.c builds it): gemm
 * is the whole call as one GEMM job - m = T rows of A, scale_a and D; b,
 * scale_b and bias are expert 0's and expert g's start at g * b_rows rows of
 * B (b_rows = B's expert stride / ldb), g (tensor) or g * N (row scales,
 * bias). offsets (G int32) and status live in device memory and are read /
 * written only by the kernel. gemm comes first: the plan's init function
 * receives &job->gemm and casts back. */
typedef struct fk_grouped_job {
    fk_gemm_job gemm;
    int64_t groups, b_rows;
    const int32_t *offsets;
    int32_t *status;
} fk_grouped_job;
fp8kit_status fk_cuda_grouped_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config);
fp8kit_status fk_cuda_grouped_gemm(fp8kit_ctx *ctx, const fk_grouped_job *job, const fk_plan *plan, void *stream);

/* Element-wise helpers for any fk_mat dtype (host). */
static inline size_t fk_dtype_bytes(fp8kit_dtype t)
{
    return t == FP8KIT_F32 ? 4 : (t == FP8KIT_F16 || t == FP8KIT_BF16) ? 2 : 1;
}

#ifdef __cplusplus
}
#endif
#endif
