/* backend_ops.h - the contract between the core and a backend: the validated
 * jobs a backend receives, the cached plan it fills, its ops table, and the
 * few context services it may use. Backends include this header, never
 * core/internal.h (the context's internals: plan cache, tune table). */
#ifndef FK_BACKEND_OPS_H
#define FK_BACKEND_OPS_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include "fp8kit.h"
#include "core/tuning.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fk_plan fk_plan;

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
    void *scale_d_out;        /* OUTQ_MX: e8m0 M x Nd/32; OUTQ_BLOCK1X128: f32 M x ceil(Nd/128); contiguous
                               * (Nd = fk_job_d_cols: N, or N/2 with swiglu) */
    float *amax_d;            /* optional, OUTQ_SCALED */
    void *workspace; size_t workspace_bytes;
} fk_gemm_job;

/* D's columns: n, or n / 2 with FP8KIT_ACT_SWIGLU (n even: checked by
 * gemm_api.c), the width of D and of its output scales. */
static inline int64_t fk_job_d_cols(const fk_gemm_job *j)
{
    return j->desc.act == FP8KIT_ACT_SWIGLU ? j->n / 2 : j->n;
}

/* A validated grouped GEMM for a backend with its own grouped kernel
 * (grouped.c builds it): gemm is the whole call as one GEMM job - m = T rows
 * of A, scale_a and D (masked: G x M, the experts' slabs one after the
 * other); b, scale_b and bias are expert 0's, and expert g's start at
 * g * b_stride elements of B, g * sb_stride of scale_b and g * N of the bias.
 * offsets (G int32: row ends, or valid-row counts when masked_m > 0) and
 * status live in device memory and are read / written only by the kernel.
 * gemm comes first: the plan's init function receives &job->gemm and casts
 * back. */
typedef struct fk_grouped_job {
    fk_gemm_job gemm;
    int64_t groups;
    int64_t b_stride;  /* elements (bytes) from one expert of B to the next */
    int64_t sb_stride; /* scale_b values per expert (format/geometry.h): 1, N or the 128x128 grid */
    int64_t masked_m;  /* 0: contiguous layout; else the masked layout's rows per expert (M) */
    const int32_t *offsets;
    int32_t *status;
} fk_grouped_job;

/* A validated K-grouped GEMM (k_grouped.c builds it): group g owns K columns
 * [offsets[g-1], offsets[g]) (offsets[-1] = 0) of A (m x ktot, row stride
 * lda) and B (n x ktot, ldb); D[g] (m x n) starts at g * sdg elements of d,
 * rows ldd apart. Scales: scales_1x128 - scale_a (m x kb) and scale_b
 * (n x kb) f32 row-major, kb = ceil(ktot / 128); else each of scale_a /
 * scale_b is one f32 or NULL (1.0). offsets (valid: non-decreasing multiples
 * of 128, <= ktot) and status are host memory when the backend has no mem
 * ops (the core has checked the offsets), else device memory. beta != 0:
 * each D element is read before being overwritten (D += ...). */
typedef struct fk_k_grouped_job {
    int64_t groups, m, n, ktot, kb;
    const void *a; fp8kit_dtype a_type; int64_t lda;
    const void *b; fp8kit_dtype b_type; int64_t ldb;
    const int32_t *offsets;
    int scales_1x128;
    const float *scale_a, *scale_b;
    float alpha, beta;
    void *d; fp8kit_dtype d_type; int64_t ldd, sdg;
    int32_t *status;
    int fast_accum; /* desc->fast_accum (the CUDA backend's f32 output needs it) */
} fk_k_grouped_job;

/* A resolved GEMM configuration, cached per key. Backends own `config`.
 * memo: a small per-plan cache of what a backend derives from a call's data
 * pointers (CUDA: the last set of TMA tensor maps), read and written only
 * through fk_plan_memo_get / fk_plan_memo_put (a sequence lock: lock-free
 * readers, one writer at a time, no allocation; memo_seq 0 = empty). */
#define FK_PLAN_CONFIG_BYTES 64
#define FK_PLAN_MEMO_WORDS 80
struct fk_plan {
    uint64_t key_hash;
    unsigned char key[160];
    unsigned char config[FK_PLAN_CONFIG_BYTES];
    int valid;
    uint64_t memo_seq;
    uint64_t memo[FK_PLAN_MEMO_WORDS];
};

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
#define FK_TUNE_KEY_BYTES 288 /* an autotune text key, its terminating 0 included */
/* The plan key of a GEMM job (the one the plan cache hashes: shape,
 * strides, dtypes, options, alignment bits, backend, tuning overrides) as
 * text for the autotune file, after prefix (backend signature + device);
 * no whitespace (gemm_api.c). */
void fk_gemm_key_text(const fp8kit_ctx *ctx, const fk_gemm_job *j, const char *prefix, char *out, size_t n);
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
/* The memory ops of ctx's backend, or NULL when the library takes host
 * pointers (the CPU backend, or a NULL ctx) (ctx.c). */
const fk_mem_ops *fk_ctx_mem_ops(fp8kit_ctx *ctx);

/* Element-type classes: the high-precision floats and the fp8 formats. */
static inline int fk_is_hp(fp8kit_dtype t) { return t == FP8KIT_F32 || t == FP8KIT_F16 || t == FP8KIT_BF16; }
static inline int fk_is_fp8(fp8kit_dtype t) { return t == FP8KIT_E4M3 || t == FP8KIT_E5M2; }
static inline size_t fk_dtype_bytes(fp8kit_dtype t)
{
    return t == FP8KIT_F32 ? 4 : (t == FP8KIT_F16 || t == FP8KIT_BF16) ? 2 : 1;
}

/* Records a formatted message as the calling thread's last error on ctx
 * (ctx may be NULL) and returns st. */
fp8kit_status fk_fail(const fp8kit_ctx *ctx, fp8kit_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- context services for backends (ctx.c) */
int fk_ctx_device(const fp8kit_ctx *ctx);
/* threads asked for with fp8kit_ctx_set_threads; 0 = the backend's default */
int fk_ctx_threads(const fp8kit_ctx *ctx);
/* the backend's own state (set by its init, freed by its fini) */
void *fk_ctx_state(const fp8kit_ctx *ctx);
void fk_ctx_set_state(fp8kit_ctx *ctx, void *state);
/* the text fp8kit_ctx_describe returns */
void fk_ctx_set_describe(fp8kit_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* whether autotune is on (fp8kit_ctx_set_autotune) */
int fk_ctx_autotune(const fp8kit_ctx *ctx);
/* the context's tuning overrides (core/tuning.h; all "choose" by default) */
const fk_tuning *fk_ctx_tuning(const fp8kit_ctx *ctx);
/* The cached plan of a GEMM job, made now with the backend's gemm_plan when
 * absent (gemm_api.c); NULL with *st set on failure. */
const fk_plan *fk_gemm_plan_of(fp8kit_ctx *ctx, const fk_gemm_job *job, fp8kit_status *st);

/* ---- the ops table */
typedef enum fk_op { FK_OP_QUANTIZE, FK_OP_DEQUANTIZE, FK_OP_CAST, FK_OP_GEMM, FK_OP_GROUPED_GEMM } fk_op;

/* Plan init: fills config (FK_PLAN_CONFIG_BYTES, zeroed) for the job. */
typedef fp8kit_status (*fk_plan_init_fn)(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config);

/* A backend: registered once (the generated backends.c lists them), looked
 * up by id. Jobs are validated by the core; a backend refuses what it
 * cannot run with a status and message (UNSUPPORTED, ARCH_MISMATCH, ...).
 * A NULL entry means: supports - every validated job; quantize_both - two quantize calls; grouped_* - the
 * core runs one GEMM per group; gemm_workspace_* - no workspace; mem - the
 * backend works on host memory; k_grouped - fp8kit_k_grouped_gemm is
 * UNSUPPORTED on this backend. */
typedef struct fk_backend_ops {
    fp8kit_backend id;
    const char *name;
    int (*available)(void);
    const char *(*unavailable_reason)(void); /* why available() is 0 */
    fp8kit_status (*init)(fp8kit_ctx *ctx);  /* sets state and describe */
    void (*fini)(fp8kit_ctx *ctx);
    void (*threads_changed)(fp8kit_ctx *ctx); /* after fp8kit_ctx_set_threads (may be NULL) */
    /* FP8KIT_OK when the op would accept job (an fk_quant_job, fk_cast_job,
     * fk_gemm_job or fk_grouped_job), else the status it would return, with
     * the message recorded; runs nothing */
    fp8kit_status (*supports)(fp8kit_ctx *ctx, fk_op op, const void *job);
    fp8kit_status (*quantize)(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream);
    /* mx along both axes from one read of x: rowwise the axis -1 job,
     * colwise the axis -2 job of the same x */
    fp8kit_status (*quantize_both)(fp8kit_ctx *ctx, const fk_quant_job *rowwise, const fk_quant_job *colwise,
                                   void *stream);
    fp8kit_status (*dequantize)(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream);
    fp8kit_status (*cast)(fp8kit_ctx *ctx, const fk_cast_job *job, void *stream);
    fk_plan_init_fn gemm_plan;
    fp8kit_status (*gemm_run)(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan, void *stream);
    /* the workspace a call must be given (decided from the job alone) */
    fp8kit_status (*gemm_workspace_need)(fp8kit_ctx *ctx, const fk_gemm_job *job, size_t *bytes);
    /* the workspace fp8kit_gemm_workspace_size reports: enough for the
     * fastest path of whatever plan the call will get */
    fp8kit_status (*gemm_workspace_size)(fp8kit_ctx *ctx, const fk_gemm_job *job, size_t *bytes);
    fk_plan_init_fn grouped_plan;
    fp8kit_status (*grouped_run)(fp8kit_ctx *ctx, const fk_grouped_job *job, const fk_plan *plan, void *stream);
    const fk_mem_ops *mem;
    /* a one-line description of a plan this backend made (family, kernel
     * variant, tile, schedule), for fp8kit_gemm_describe */
    void (*plan_describe)(const fk_plan *plan, char *buf, size_t n);
    /* fp8kit_k_grouped_gemm (NULL: the call returns FP8KIT_ERR_UNSUPPORTED,
     * "<name> k-grouped gemm: not implemented yet"). Last, so that tables
     * written positionally (src/cuda/cuda_ops.cu) leave it NULL. */
    fp8kit_status (*k_grouped)(fp8kit_ctx *ctx, const fk_k_grouped_job *job, void *stream);
    /* the workspace fp8kit_grouped_gemm_workspace_size reports for a
     * validated grouped job (NULL: none) */
    fp8kit_status (*grouped_workspace)(fp8kit_ctx *ctx, const fk_grouped_job *job, size_t *bytes);
} fk_backend_ops;

/* The registered backends (backends.c, generated by CMake), NULL-terminated. */
extern const fk_backend_ops *const fk_backends[];
/* The registered backend with this id, or NULL (ctx.c). */
const fk_backend_ops *fk_backend_find(fp8kit_backend id);

#ifdef __cplusplus
}
#endif
#endif
