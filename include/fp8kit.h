/* fp8kit.h - the whole public C API of fp8kit (C11; no CUDA header needed).
 *
 * fp8kit quantizes bf16/fp16/fp32 tensors to FP8 (e4m3, e5m2) in every common
 * scaling scheme (per-tensor, per-row, 1x128 and 128x128 blocks, OCP MXFP8) and
 * multiplies FP8 matrices with scales and epilogue fused. Numerics follow
 * docs/spec.md bit for bit.
 *
 * Conventions
 * - Every function returns an fp8kit_status; fp8kit_status_string() names it and
 *   fp8kit_last_error() gives the detailed message of the last failing call on a
 *   context. Nothing is written to any output when a call fails validation.
 * - The caller owns all memory. With the CPU backend pointers are host memory;
 *   with the CUDA backend they are device memory (cudaMalloc) and `stream` is a
 *   cudaStream_t passed as void * (NULL = the default stream). The CPU backend
 *   ignores `stream`.
 * - Shapes and strides are int64_t and counted in elements.
 * - Buffer sizes are the caller's guarantee: the API takes pointers, not
 *   buffer lengths, so it cannot check them. Each buffer must hold the whole
 *   extent its tensor describes - from data to the last element, that is
 *   (1 + sum over dims of (shape[i] - 1) * strides[i]) * element size bytes
 *   (numel * element size when contiguous) - and each other pointer what its
 *   documentation says (amax_d 4 bytes, grouped offsets 4 * G, status 4,
 *   workspace workspace_bytes). fp8kit checks that every size fits int64
 *   and that the tensors agree with each other, but a descriptor larger than
 *   its allocation (e.g. dims above INT32_MAX over a small buffer) is read or
 *   written past the end: undefined behaviour, as with memcpy. A binding that
 *   knows its buffers' lengths should compare them before the call.
 * - Alignment, the same rule on both backends: every tensor's data pointer is
 *   aligned to its element size (f32 4 bytes, f16 / bf16 2; fp8 codes and
 *   e8m0 scales may sit at any address), and amax_d and the grouped GEMM's
 *   offsets and status to 4 bytes. A pointer that is not is
 *   FP8KIT_ERR_MISALIGNED, checked before anything runs (the message names
 *   the argument). The CUDA GEMMs add their own TMA rules (16-byte A / B
 *   bases and leading dims, a 16-byte aligned workspace).
 * - No output may share a byte with another output or with an input of the
 *   same call (FP8KIT_ERR_INVALID_ARGUMENT, the message names both). The
 *   bytes of a tensor are those from data to its last element (shape,
 *   strides, dtype; the same arithmetic on device addresses); rows of two
 *   tensors laid out at the same byte row stride, such as column slices of
 *   one matrix, or strided rows and a contiguous tensor in their gaps, are
 *   compared row by row, other interleavings count as overlapping. The one
 *   in-place use allowed: fp8kit_gemm's D may be exactly its C (same data,
 *   dtype and row stride; C is then read before being overwritten).
 * - Thread safety: a context may be used from several threads at once. The plan
 *   cache is guarded by a lock. The last-error text is kept per context and per
 *   thread: fp8kit_last_error() returns the message of the calling thread's last
 *   failing call on that context.
 */
#ifndef FP8KIT_H
#define FP8KIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FP8KIT_API __declspec(dllexport)
#else
#define FP8KIT_API __attribute__((visibility("default")))
#endif

/* The one definition of fp8kit's version: CMake (project version, pkg-config,
 * CMake package) and the Python package read these three lines. */
#define FP8KIT_VERSION_MAJOR 0
#define FP8KIT_VERSION_MINOR 1
#define FP8KIT_VERSION_PATCH 0

/* ------------------------------------------------------------------ status */
typedef enum fp8kit_status {
    FP8KIT_OK = 0,
    FP8KIT_ERR_NULL_POINTER = 1,      /* a required pointer is NULL */
    FP8KIT_ERR_INVALID_ARGUMENT = 2,  /* an enum or value out of range */
    FP8KIT_ERR_INVALID_SHAPE = 3,     /* shapes disagree or break a scheme's rule */
    FP8KIT_ERR_SIZE_OVERFLOW = 4,     /* negative dims or a byte count overflows */
    FP8KIT_ERR_INVALID_STRIDE = 5,    /* stride smaller than a row, or not row-major */
    FP8KIT_ERR_MISALIGNED = 6,        /* pointer not aligned to its element size, or not as a kernel needs */
    FP8KIT_ERR_UNSUPPORTED = 7,       /* dtype/scheme/option combination not supported */
    FP8KIT_ERR_BACKEND_UNAVAILABLE = 8, /* backend not built in, or no usable device */
    FP8KIT_ERR_ARCH_MISMATCH = 9,     /* device architecture lacks a needed feature */
    FP8KIT_ERR_DEVICE = 10,           /* a CUDA runtime/driver call failed */
    FP8KIT_ERR_OUT_OF_MEMORY = 11,
    FP8KIT_ERR_WORKSPACE_TOO_SMALL = 12,
    FP8KIT_ERR_IO = 13,               /* file could not be read or written */
    FP8KIT_ERR_CORRUPT_FILE = 14,     /* a file's contents break its format */
    FP8KIT_ERR_INTERNAL = 15
} fp8kit_status;

/* Static name of a status, e.g. "FP8KIT_ERR_INVALID_SHAPE: ...". Never NULL. */
FP8KIT_API const char *fp8kit_status_string(fp8kit_status st);

/* "MAJOR.MINOR.PATCH" of the library loaded at run time (compare with the macros above). */
FP8KIT_API const char *fp8kit_version_string(void);
FP8KIT_API int fp8kit_version(void); /* MAJOR*10000 + MINOR*100 + PATCH */

/* ------------------------------------------------------------------ dtypes */
typedef enum fp8kit_dtype {
    FP8KIT_F32 = 0,
    FP8KIT_F16 = 1,
    FP8KIT_BF16 = 2,
    FP8KIT_E4M3 = 3, /* OCP E4M3FN (torch.float8_e4m3fn) */
    FP8KIT_E5M2 = 4, /* OCP E5M2 (torch.float8_e5m2) */
    FP8KIT_E8M0 = 5, /* unsigned exponent scale (torch.float8_e8m0fnu) */
    FP8KIT_DTYPE_COUNT
} fp8kit_dtype;

FP8KIT_API size_t fp8kit_dtype_size(fp8kit_dtype t); /* bytes per element, 0 if invalid */
/* "f32", "bf16", "e4m3", ...; "invalid" outside the enum (other spellings: the names section) */
FP8KIT_API const char *fp8kit_dtype_name(fp8kit_dtype t);

/* --------------------------------------------------------------- backends */
typedef enum fp8kit_backend {
    FP8KIT_BACKEND_AUTO = 0, /* CUDA if a usable device is present, else CPU */
    FP8KIT_BACKEND_CPU = 1,
    FP8KIT_BACKEND_CUDA = 2
} fp8kit_backend;

FP8KIT_API const char *fp8kit_backend_name(fp8kit_backend b); /* "auto", "cpu", "cuda"; "invalid" outside */
/* 1 if the backend is compiled in and usable on this machine (CUDA: a device
 * is present and the driver loads). */
FP8KIT_API int fp8kit_backend_available(fp8kit_backend b);

typedef struct fp8kit_ctx fp8kit_ctx;

/* Creates a context. `device` is the CUDA device ordinal (ignored by the CPU
 * backend). AUTO resolves once, here. */
FP8KIT_API fp8kit_status fp8kit_ctx_create(fp8kit_backend backend, int device, fp8kit_ctx **out);
FP8KIT_API fp8kit_status fp8kit_ctx_destroy(fp8kit_ctx *ctx); /* NULL is a no-op returning OK */
/* The backend the context resolved to (never AUTO). */
FP8KIT_API fp8kit_backend fp8kit_ctx_backend(const fp8kit_ctx *ctx);
/* CPU backend threads (OpenMP); 0 = OpenMP's default. At most max(64, 4 x the
 * number of online processors) (sysconf(_SC_NPROCESSORS_ONLN)): a larger count
 * (OpenMP fails or crashes with tens of thousands of threads) or a negative
 * one is FP8KIT_ERR_INVALID_ARGUMENT, whose message names the bound, and
 * leaves the context's setting unchanged. */
FP8KIT_API fp8kit_status fp8kit_ctx_set_threads(fp8kit_ctx *ctx, int nthreads);
/* Opt-in GEMM autotuning. mode 1: the first fp8kit_gemm of each new shape and
 * option set times every candidate kernel configuration of the backend once
 * (into a scratch output; the call then synchronizes the device) and keeps
 * the fastest in the plan. With cache_file (may be NULL = memory only), the
 * choices are read from that text file now and rewritten to it (temporary
 * name + rename) on every new choice, so later processes skip the timing;
 * entries of other devices or library builds are not used. Affects plans
 * made after the call: switch it on before the first GEMM of a shape, and not
 * during CUDA graph capture. mode 0 turns it off. A CPU context accepts it
 * and keeps its single configuration. The environment variables
 * FP8KIT_AUTOTUNE=1 and FP8KIT_AUTOTUNE_CACHE=<file> do the same for every
 * new context. Errors: INVALID_ARGUMENT (mode, path), IO (file unreadable or
 * not writable), CORRUPT_FILE (not an fp8kit autotune cache). */
FP8KIT_API fp8kit_status fp8kit_ctx_set_autotune(fp8kit_ctx *ctx, int mode, const char *cache_file);

/* Tuning overrides: force what the planners would otherwise choose (tile
 * width, promotion interval, cluster size, store path, small-M schedule,
 * CPU microkernel), for experiments and tests; results stay within
 * docs/spec.md's bounds whatever is forced. spec is "key=value" items
 * separated by commas or spaces (keys, ranges and meaning: docs/tuning.md),
 * a value "auto" restores the planner's choice, and NULL or "" all of them.
 * The call replaces the context's overrides; calls planned afterwards use
 * the new ones. Not concurrently with other calls on the context. A new
 * context starts from the environment variable FP8KIT_TUNING when set (a bad
 * value makes fp8kit_ctx_create fail). Errors: INVALID_ARGUMENT (unknown key,
 * value out of range; nothing changes). */
FP8KIT_API fp8kit_status fp8kit_ctx_set_tuning(fp8kit_ctx *ctx, const char *spec);
/* The context's overrides as a spec fp8kit_ctx_set_tuning accepts ("" when
 * none); INVALID_ARGUMENT when n bytes are too few. */
FP8KIT_API fp8kit_status fp8kit_ctx_get_tuning(const fp8kit_ctx *ctx, char *buf, size_t n);
/* Message of the calling thread's last failing call on ctx ("" if none). */
FP8KIT_API const char *fp8kit_last_error(const fp8kit_ctx *ctx);
/* One line describing the backend and device, e.g. "cpu: 2 threads". */
FP8KIT_API const char *fp8kit_ctx_describe(const fp8kit_ctx *ctx);

/* ------------------------------------------------------------------ tensor */
#define FP8KIT_MAX_DIMS 4

/* A strided view. strides are in elements; the last dim must have stride 1
 * (rows are contiguous) and each other stride must be >= the extent of the
 * dim after it (stride[i] >= shape[i+1] * stride[i+1]). All strides 0 means
 * contiguous row-major. ndim 0 is a scalar (one element). Every size is
 * computed with checked arithmetic: an element count, byte count or strided
 * extent, or a dim's shape[i] * strides[i] * element size, that does not fit
 * int64 is FP8KIT_ERR_SIZE_OVERFLOW. */
typedef struct fp8kit_tensor {
    void *data;
    fp8kit_dtype dtype;
    int32_t ndim;
    int64_t shape[FP8KIT_MAX_DIMS];
    int64_t strides[FP8KIT_MAX_DIMS];
} fp8kit_tensor;

/* A contiguous row-major tensor (strides filled in). */
FP8KIT_API fp8kit_tensor fp8kit_tensor_make(void *data, fp8kit_dtype dtype, int32_t ndim,
                                            const int64_t *shape);
/* Shortcut for ndim 2 with a leading dimension (row stride) ld >= cols. */
FP8KIT_API fp8kit_tensor fp8kit_tensor_2d(void *data, fp8kit_dtype dtype, int64_t rows,
                                          int64_t cols, int64_t ld);
/* Number of elements, or -1 when a dim is negative or the count overflows. */
FP8KIT_API int64_t fp8kit_tensor_numel(const fp8kit_tensor *t);

/* ------------------------------------------------------------ quantization */
typedef enum fp8kit_scheme {
    FP8KIT_SCHEME_TENSOR = 0,       /* one fp32 scale */
    FP8KIT_SCHEME_ROW = 1,          /* fp32 scale per row, shape (..., R, 1) */
    FP8KIT_SCHEME_BLOCK1X128 = 2,   /* fp32 per 128 elements of a row, (..., R, ceil(C/128)) */
    FP8KIT_SCHEME_BLOCK128X128 = 3, /* fp32 per 128x128 tile, (..., ceil(R/128), ceil(C/128)) */
    FP8KIT_SCHEME_MX = 4            /* e8m0 per 32 elements along axis */
} fp8kit_scheme;

typedef enum fp8kit_rounding {
    FP8KIT_ROUND_FLOOR = 0, /* OCP MX v1.0 scale rule (default) */
    FP8KIT_ROUND_RCEIL = 1  /* cuBLAS / Transformer Engine rule */
} fp8kit_rounding;

typedef enum fp8kit_scale_layout {
    FP8KIT_LAYOUT_PLAIN = 0,   /* row-major, shapes as in fp8kit_scheme */
    FP8KIT_LAYOUT_BLOCKED = 1, /* mx only: tensor-core 128x4 tiles, per-expert padded */
    FP8KIT_LAYOUT_MN_MAJOR = 2 /* block1x128/block128x128 only: transposed, rows padded to 4 */
} fp8kit_scale_layout;

typedef struct fp8kit_quant_desc {
    fp8kit_scheme scheme;
    fp8kit_dtype elem;       /* FP8KIT_E4M3 or FP8KIT_E5M2 */
    int32_t axis;            /* mx only: -1 (last dim) or -2 (second to last; output transposed) */
    fp8kit_rounding rounding; /* mx only */
    int32_t pow2;            /* fp32 schemes: round each scale up to a power of two */
    fp8kit_scale_layout scale_layout;
} fp8kit_quant_desc;

/* A descriptor with defaults: e4m3, axis -1, floor, no pow2, plain layout. */
FP8KIT_API fp8kit_quant_desc fp8kit_quant_desc_default(fp8kit_scheme scheme);

/* Given the input x (only dtype, ndim and shape are read), fills the dtype,
 * ndim and shape (contiguous strides, data = NULL) that q and scale must have.
 * For the blocked layout the scale shape is (..., Rp, Cp) padded (E experts
 * concatenated); for mn_major it is (..., ceil(C/128), 4*ceil(rows/4)) with
 * rows = R (block1x128) or ceil(R/128) (block128x128). The GEMM's scale
 * tensors: fp8kit_gemm_scale_shape. */
FP8KIT_API fp8kit_status fp8kit_quant_shapes(const fp8kit_quant_desc *desc, const fp8kit_tensor *x,
                                             fp8kit_tensor *q, fp8kit_tensor *scale);

/* x (..., R, C) in f32/f16/bf16 with 2 <= ndim <= 4 (the tensor scheme also
 * takes ndim 0 and 1). q gets fp8 codes with x's shape, or (..., C, R) for mx
 * axis -2. scale gets the scales described by fp8kit_quant_shapes:
 * dequantization multipliers S (f32) or e8m0 bytes. q must have exactly the
 * expected shape (its row stride may exceed the row length); scale must be
 * contiguous with the expected dtype and element count (any shape holding
 * that count is accepted, e.g. (R) for (R, 1)).
 * Status rules: a dtype that differs from what desc asks for (q vs
 * desc->elem, scale f32 vs e8m0) is FP8KIT_ERR_INVALID_ARGUMENT; a dtype
 * that the operation does not support in that role (fp8 x, f32 elem) is
 * FP8KIT_ERR_UNSUPPORTED. */
FP8KIT_API fp8kit_status fp8kit_quantize(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc,
                                         const fp8kit_tensor *x, fp8kit_tensor *q,
                                         fp8kit_tensor *scale, void *stream);

/* MX quantization of x along both axes at once, as a training step needs
 * (the forward GEMM reads the rowwise copy, the backward GEMM the columnwise
 * one). desc->scheme must be FP8KIT_SCHEME_MX; desc->axis is ignored.
 * q_row / scale_row are exactly what fp8kit_quantize writes with axis -1,
 * q_col / scale_col exactly what it writes with axis -2 (transposed output);
 * desc->scale_layout applies to both. Both R and C must be multiples of 32.
 * The CUDA backend reads x once; the CPU backend runs the two quantizations. */
FP8KIT_API fp8kit_status fp8kit_quantize_mx_both(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc,
                                                 const fp8kit_tensor *x, fp8kit_tensor *q_row,
                                                 fp8kit_tensor *scale_row, fp8kit_tensor *q_col,
                                                 fp8kit_tensor *scale_col, void *stream);

/* Inverse of fp8kit_quantize: y = decode(q) * S, rounded to y's dtype
 * (f32/f16/bf16, RNE). y has the original (un-transposed) shape of x. An
 * infinite fp32 S (which quantization never stores) marks a NaN group, like
 * S = NaN or the mx byte 255: every element of the group becomes NaN
 * (docs/spec.md 4). */
FP8KIT_API fp8kit_status fp8kit_dequantize(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc,
                                           const fp8kit_tensor *q, const fp8kit_tensor *scale,
                                           fp8kit_tensor *y, void *stream);

/* Element-wise cast to fp8 without scaling (satfinite RNE), or back, between
 * any of f32/f16/bf16 and e4m3/e5m2 of the same shape. */
FP8KIT_API fp8kit_status fp8kit_cast(fp8kit_ctx *ctx, const fp8kit_tensor *x, fp8kit_tensor *y,
                                     void *stream);

/* Whether fp8kit_quantize / fp8kit_dequantize / fp8kit_cast would run this
 * call on the context's backend (the counterparts of fp8kit_gemm_supported):
 * the arguments are validated exactly as the call does, then the backend is
 * asked about its kernels' limits, and the status and message are the ones
 * the call would give (e.g. FP8KIT_ERR_UNSUPPORTED for a shape beyond a CUDA
 * kernel's index range or grid, with the limit named). Nothing runs and no
 * tensor data is read, so the tensors may hold placeholder pointers
 * (non-NULL and aligned to their element size, as the real ones must be);
 * the no-overlap rule between outputs and inputs is not checked. The CPU
 * backend runs every call that validates. For fp8kit_quantize_mx_both ask
 * fp8kit_quantize_supported about its two jobs (axis -1 and axis -2). */
FP8KIT_API fp8kit_status fp8kit_quantize_supported(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc,
                                                   const fp8kit_tensor *x, const fp8kit_tensor *q,
                                                   const fp8kit_tensor *scale);
FP8KIT_API fp8kit_status fp8kit_dequantize_supported(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc,
                                                     const fp8kit_tensor *q, const fp8kit_tensor *scale,
                                                     const fp8kit_tensor *y);
FP8KIT_API fp8kit_status fp8kit_cast_supported(fp8kit_ctx *ctx, const fp8kit_tensor *x, const fp8kit_tensor *y);

/* -------------------------------------------------------------------- GEMM */
typedef enum fp8kit_scale_mode {
    FP8KIT_SCALE_NONE = 0,   /* no scale (1.0) */
    FP8KIT_SCALE_TENSOR = 1, /* one f32 */
    FP8KIT_SCALE_ROW = 2,    /* f32 per row: A (M) / B (N) */
    FP8KIT_SCALE_BLOCK = 3,  /* A: f32 1x128 (M, ceil(K/128)); B: f32 128x128 (ceil(N/128), ceil(K/128)) */
    FP8KIT_SCALE_MX = 4      /* e8m0 per 32 of K: A (M, K/32), B (N, K/32); plain or blocked */
} fp8kit_scale_mode;

typedef enum fp8kit_activation {
    FP8KIT_ACT_NONE = 0,
    FP8KIT_ACT_RELU = 1,
    FP8KIT_ACT_GELU_TANH = 2,
    FP8KIT_ACT_GELU_ERF = 3,
    FP8KIT_ACT_SILU = 4,
    /* Gated (not elementwise): y = alpha * deq(A) deq(B)^T + bias is (M, N) as
     * always, N even, and D is (M, N/2) with D[m, j] = silu(y[m, j]) * y[m, j + N/2]
     * ("halves": B's rows are [gate; up], vLLM's SiluAndMul). The output stage
     * (cast, OUTQ_*) applies to D's N/2 columns. fp8kit_gemm and fp8kit_grouped_gemm
     * (each expert's B rows [gate; up], D of N/2 columns; the K-grouped GEMM refuses
     * it with FP8KIT_ERR_UNSUPPORTED). fp8kit_gemm: on the CPU backend and on Hopper
     * as one fused kernel (tensor, row and block scales - block: N/2 a multiple of
     * 128 - not mx: FP8KIT_ERR_UNSUPPORTED); fp8kit_grouped_gemm: on the CPU backend
     * and on Hopper as one fused grouped kernel (the same scale modes and rule);
     * beta != 0 is FP8KIT_ERR_UNSUPPORTED. docs/spec.md 3. */
    FP8KIT_ACT_SWIGLU = 5
} fp8kit_activation;
/* The number of fp8kit_activation values: they run from 0 to FP8KIT_ACT_COUNT - 1
 * (a new activation takes the value FP8KIT_ACT_COUNT and raises it by one). */
#define FP8KIT_ACT_COUNT 6

/* Names: fp8kit_activation_name / _parse / _alias (the names section). */

typedef enum fp8kit_bias_mode {
    FP8KIT_BIAS_NONE = 0,
    FP8KIT_BIAS_COL = 1, /* bias[n], length N (the usual linear-layer bias) */
    FP8KIT_BIAS_ROW = 2  /* bias[m], length M */
} fp8kit_bias_mode;

typedef enum fp8kit_out_quant {
    FP8KIT_OUTQ_NONE = 0,      /* D = cast(y) to D's dtype (bf16/f16/f32/e4m3/e5m2) */
    FP8KIT_OUTQ_SCALED = 1,    /* fp8 D = fp8(y / scale_d[0]); amax_d[0] = max |y| */
    FP8KIT_OUTQ_MX = 2,        /* fp8 D, e8m0 scales per 32 of each row of y (plain layout) */
    FP8KIT_OUTQ_BLOCK1X128 = 3 /* fp8 D, f32 scales per 128 of each row of y */
} fp8kit_out_quant;

/* What the kernel computes; the same descriptor with the same shapes reuses a
 * cached plan. Zero-initialise, then set what you need ({0} is valid:
 * no scales, no epilogue, output dtype taken from args->d). */
typedef struct fp8kit_gemm_desc {
    fp8kit_scale_mode scale_a;    /* TENSOR/ROW/NONE mix freely; BLOCK and MX need both sides alike */
    fp8kit_scale_mode scale_b;
    fp8kit_scale_layout scale_layout; /* MX: plain/blocked; BLOCK: plain or mn_major (A's scales) */
    fp8kit_bias_mode bias;
    fp8kit_activation act;
    fp8kit_out_quant out_quant;
    fp8kit_dtype out_hp;          /* OUTQ_MX/BLOCK1X128: y is rounded to this (bf16/f16/f32) first */
    fp8kit_rounding out_rounding; /* OUTQ_MX */
    int32_t out_pow2;             /* OUTQ_BLOCK1X128 */
    int32_t fast_accum;           /* CUDA: allow fewer fp32 promotions (less accurate); CPU ignores */
} fp8kit_gemm_desc;

/* The operands of one call: D = out(act(alpha * deq(A) deq(B)^T + beta * C + bias)).
 * A (M, K) and B (N, K) are e4m3/e5m2, K-contiguous, row stride >= K.
 * C and D are (M, N); with FP8KIT_ACT_SWIGLU D is (M, N/2) (N odd:
 * FP8KIT_ERR_INVALID_SHAPE), its output scales are those of an (M, N/2) D,
 * the bias keeps length N (COL) or M (ROW) and beta must be 0 (else
 * FP8KIT_ERR_UNSUPPORTED). C is read only when beta != 0 (dtype bf16/f16/f32);
 * D may then be the very same matrix as C (D = ... + beta * D in place), but
 * may overlap no other operand (see Conventions).
 * bias is 1-D f32/bf16/f16 (length N or M). scale_a/scale_b as in
 * fp8kit_scale_mode (a scalar may be ndim 0 or shape (1)). scale_d: OUTQ_SCALED
 * -> the f32 scalar input scale; OUTQ_MX/BLOCK1X128 -> the output scales
 * (M, N/32) e8m0 or (M, ceil(N/128)) f32. amax_d: optional f32 scalar output
 * (OUTQ_SCALED). Unused tensors may be left zeroed (data NULL). */
typedef struct fp8kit_gemm_args {
    fp8kit_tensor a, b;
    fp8kit_tensor scale_a, scale_b;
    float alpha, beta;
    fp8kit_tensor c;
    fp8kit_tensor bias;
    fp8kit_tensor d;
    fp8kit_tensor scale_d;
    float *amax_d;
    void *workspace;
    size_t workspace_bytes;
} fp8kit_gemm_args;

/* The scale tensor fp8kit_gemm reads (or writes) for one operand under desc,
 * without running anything (the GEMM's counterpart of fp8kit_quant_shapes):
 * operand 0 = scale_a (rows = M, k = K), 1 = scale_b (rows = N, k = K),
 * 2 = scale_d (rows = M, k = N; desc->out_quant). k is always the GEMM's N
 * (B's rows): with desc->act == FP8KIT_ACT_SWIGLU the scales are those of
 * D's N/2 columns, the function halving N itself (odd N: INVALID_SHAPE). Fills its dtype (f32, or
 * e8m0 for mx) and the rows x cols of the stored matrix, padding included:
 * the tensor passed must be contiguous and hold shape[0] * shape[1] elements
 * (as fp8kit_scale_mode and docs/spec.md 3 describe; BLOCK's A scales with
 * the mn_major layout are (ceil(K/128), 4*ceil(M/4)), MX's with the blocked
 * layout (128*ceil(rows/128), 4*ceil(K/32/4))). A mode without a tensor (NONE,
 * OUTQ_NONE) gives {0, 0}, a scalar {1, 1}. Statuses as fp8kit_gemm's checks:
 * desc out of range INVALID_ARGUMENT, a combination it refuses UNSUPPORTED,
 * K (mx) or D's columns (OUTQ_MX: N, or N/2 with swiglu) not a multiple of 32 or a size of 0 INVALID_SHAPE, a
 * negative size or a count that overflows int64 SIZE_OVERFLOW; operand
 * outside 0..2 INVALID_ARGUMENT, NULL pointers NULL_POINTER. */
FP8KIT_API fp8kit_status fp8kit_gemm_scale_shape(const fp8kit_gemm_desc *desc, int operand, int64_t rows,
                                                 int64_t k, fp8kit_dtype *dtype, int64_t shape[2]);

/* Workspace for the fastest path of this call (0 on the CPU): on the GPU,
 * the stream-K tail of the Hopper GEMM (shapes whose last wave of output
 * tiles would leave SMs idle split those tiles along K) and the fp16 copies
 * of precise fp32 output. A call given less still runs, on whole tiles,
 * unless it is precise fp32 output, which fails with
 * FP8KIT_ERR_WORKSPACE_TOO_SMALL below the size of its fp16 copies. The
 * workspace must be 16-byte aligned; its content need not be cleared before
 * or kept between calls, but concurrent calls need separate workspaces.
 * Makes and caches the call's plan. The query reads no operand, so args may
 * hold placeholder pointers (non-NULL and aligned; the no-overlap rule is not
 * applied). */
FP8KIT_API fp8kit_status fp8kit_gemm_workspace_size(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                                    const fp8kit_gemm_args *args, size_t *bytes);

/* Runs the GEMM. Validates everything before launching; on error nothing is
 * written. alpha = 0 is not special (0 * Inf = NaN as in IEEE). */
FP8KIT_API fp8kit_status fp8kit_gemm(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                     const fp8kit_gemm_args *args, void *stream);

/* fp8kit_gemm with its four arguments in one struct, for bindings whose
 * per-call cost is the foreign call itself (ctypes converts one pointer
 * instead of four; the Python binding keeps one such struct per plan and
 * thread and writes only the data pointers and the stream). Same checks,
 * statuses and messages as fp8kit_gemm(call->ctx, call->desc, call->args,
 * call->stream); a NULL call is FP8KIT_ERR_NULL_POINTER. */
typedef struct fp8kit_gemm_call {
    fp8kit_ctx *ctx;
    const fp8kit_gemm_desc *desc;
    const fp8kit_gemm_args *args;
    void *stream;
} fp8kit_gemm_call;

FP8KIT_API fp8kit_status fp8kit_gemm_call_run(const fp8kit_gemm_call *call);

/* fp8kit_gemm_call_run with the call's data pointers and stream given apart,
 * for bindings that share one prepared call between threads and write
 * nothing into it per call: runs fp8kit_gemm(call->ctx, call->desc, &args,
 * ptrs[6]) where args is a copy of *call->args whose a, b, scale_a, scale_b,
 * bias and d data pointers are ptrs[0] .. ptrs[5] (c, scale_d, amax_d and
 * the workspace stay as in *call->args; call->stream is not read). ptrs
 * need not be aligned (a packed buffer of 7 pointers). Same checks, statuses
 * and messages as fp8kit_gemm; a NULL call, ptrs or call->args is
 * FP8KIT_ERR_NULL_POINTER. */
FP8KIT_API fp8kit_status fp8kit_gemm_call_ptrs(const fp8kit_gemm_call *call, const void *ptrs);

/* Grouped GEMM for mixture-of-experts layers: G problems sharing K, N, the
 * dtypes and the descriptor, one B per expert. B is (G, N, K) (each expert's
 * N x K, K-contiguous, rows and experts strided). Two layouts of A and D:
 * - FP8KIT_GROUPED_CONTIGUOUS (0; the 2-D x 3-D case of
 *   torch._scaled_grouped_mm): A is (T, K) with its rows grouped by expert:
 *   group g owns rows offsets[g-1] .. offsets[g] - 1 (offsets[-1] = 0);
 *   offsets holds G int32 row ends, valid when non-decreasing, >= 0 and
 *   every entry <= T; D is (T, N); D rows past offsets[G-1] are not written.
 *   No padding rule: a group may start and end at any row.
 * - FP8KIT_GROUPED_MASKED (1; the decode layout, DeepGEMM's "masked"): A is
 *   (G, M, K) and D (G, M, N), expert g's rows being A[g, 0 .. offsets[g]),
 *   so offsets holds G int32 valid-row COUNTS, valid when 0 <= offsets[g]
 *   <= M; D rows g, offsets[g] .. M - 1 are not written. A's and D's rows
 *   must be evenly strided across experts (stride[0] = M * stride[1]), as a
 *   contiguous (G, M, K) tensor is; T below is then G x M.
 * Per group: D_g = out(act(alpha * deq(A_g) deq(B_g)^T + bias_g)) with the
 * rules of fp8kit_gemm. Scales (counts of f32 values, contiguous): scale_a over
 * A's T rows as in fp8kit_gemm (tensor: 1; row: T; block: T x ceil(K/128),
 * the 1x128 scales of each row); scale_b per expert (tensor: G; row: G x N;
 * block: G x ceil(N/128) x ceil(K/128), each expert's 128x128 scales).
 * Block scales may also give A's in the mn_major layout (desc->scale_layout;
 * B's stay plain): contiguous, one (ceil(K/128), 4*ceil(T/4)) buffer as
 * fp8kit_gemm's over T rows; masked, G of them one after another, each
 * (ceil(K/128), 4*ceil(M/4)) for its expert's M rows (DeepGEMM's layouts;
 * on the GPU the fastest ones). MX (FP8KIT_SCALE_MX on both; the
 * MXFP8 case, contiguous and masked): e8m0 bytes in the plain layout, K a
 * multiple of 32; scale_a holds T x K/32 (each row of A, as fp8kit_gemm's),
 * scale_b G x N x K/32 (each expert's N x K/32, experts one after another).
 * bias (desc->bias == FP8KIT_BIAS_COL only): G x N, f32/bf16/f16. Supported:
 * scale modes NONE / TENSOR / ROW (mixed freely), BLOCK and MX (each on
 * both), every activation, no C (else FP8KIT_ERR_UNSUPPORTED), D f32 / f16 /
 * bf16 without output quantization (an fp8 D needs it: else UNSUPPORTED).
 * On both backends (CUDA: fused in the grouped kernel; swiglu there takes
 * tensor, row and block scales - block: N/2 a multiple of 128 - not mx,
 * else FP8KIT_ERR_UNSUPPORTED):
 * - FP8KIT_ACT_SWIGLU: each expert's N rows of B are [gate; up] (N even, else
 *   FP8KIT_ERR_INVALID_SHAPE) and D is (T, N/2), masked (G, M, N/2), each
 *   row as fp8kit_gemm's swiglu; the bias keeps G x N.
 * - output quantization (desc->out_quant, D e4m3 / e5m2, args->scale_d and
 *   amax_d as in fp8kit_gemm over all T rows of D, masked G x M): OUTQ_MX
 *   (e8m0 scales (T, Nd/32), Nd = D's columns a multiple of 32),
 *   OUTQ_BLOCK1X128 (f32 scales (T, ceil(Nd/128))), each row of each group
 *   quantized as fp8kit_gemm does it; OUTQ_SCALED (scale_d one f32; amax_d,
 *   optional, receives the max |y| over every row a group owns, 0 when none
 *   does or, on the GPU, when the offsets are invalid). Scale rows of rows
 *   no group owns are not written, as D's.
 *   fp8kit_gemm_scale_shape(desc, 2, T, N, ...) gives scale_d's shape (it
 *   halves N itself with swiglu).
 * workspace (optional): as fp8kit_gemm's; fp8kit_grouped_gemm_workspace_size
 * gives the size of the fastest path (0 on the CPU; on the GPU the
 * normalized MX copies of A and B, docs/spec.md 3 "the MX accuracy
 * contract"). A call given less still runs, on the operands as given.
 * Where offsets and status live, and who checks the offsets:
 * - CPU backend: host memory. Everything, the offsets included, is checked
 *   before any group runs; invalid offsets return FP8KIT_ERR_INVALID_ARGUMENT
 *   and nothing is written (but *status, when given).
 * - Both: offsets and status 4-byte aligned (else FP8KIT_ERR_MISALIGNED).
 * - CUDA backend: DEVICE memory (like torch's `offs`): the
 *   host never reads them, so the call neither synchronizes nor copies and
 *   can be captured in a CUDA graph (offsets and status read / written when
 *   the kernel runs, stream-ordered). The host checks everything else and
 *   returns its status as usual; the kernel checks the offsets before any
 *   load or store, and with invalid offsets writes nothing to D (the call
 *   has already returned FP8KIT_OK). Pass status to learn it: the kernel
 *   sets *status to 0 (FP8KIT_OK) or FP8KIT_ERR_INVALID_ARGUMENT. Also on the
 *   CUDA backend: an sm_90 device, D bf16 / f16, or f32 with fast_accum (no
 *   precise fp32 path here, unlike fp8kit_gemm), K a multiple of 16, A and B
 *   16-byte aligned with leading dims of multiples of 16 bytes, B's expert
 *   stride a multiple of its row stride, T, N, K and G x N below 2^31, and G
 *   small enough for a table of 8 (G + 1) bytes in shared memory (about
 *   3,500 groups on an H100).
 * status (optional, NULL = none): one int32 in the backend's memory, set to
 * 0 after a call that ran with valid offsets, FP8KIT_ERR_INVALID_ARGUMENT
 * when the offsets were invalid. */
typedef enum fp8kit_grouped_layout {
    FP8KIT_GROUPED_CONTIGUOUS = 0, /* A (T, K), offsets = G row ends, D (T, N) */
    FP8KIT_GROUPED_MASKED = 1      /* A (G, M, K), offsets = G valid-row counts, D (G, M, N) */
} fp8kit_grouped_layout;

typedef struct fp8kit_grouped_gemm_args {
    fp8kit_tensor a, b;       /* (T, K) or (G, M, K); (G, N, K) */
    const int32_t *offsets;   /* G entries (G = b.shape[0]); device memory on the CUDA backend */
    fp8kit_tensor scale_a, scale_b;
    float alpha;
    fp8kit_tensor bias;       /* (G, N) or unused */
    fp8kit_tensor d;          /* (T, N) or (G, M, N); N/2 columns with FP8KIT_ACT_SWIGLU */
    int32_t *status;          /* optional offsets verdict, see above */
    fp8kit_grouped_layout layout; /* FP8KIT_GROUPED_CONTIGUOUS (0) or FP8KIT_GROUPED_MASKED */
    void *workspace;          /* optional, 16-byte aligned (fp8kit_grouped_gemm_workspace_size) */
    size_t workspace_bytes;
    /* Output quantization (desc->out_quant; both backends), as fp8kit_gemm_args' fields
     * of the same names over every row of D: OUTQ_SCALED -> the f32 scalar input scale (amax_d:
     * optional f32 scalar output, max |y| over the rows the groups own); OUTQ_MX / BLOCK1X128 -> the
     * output scales of the (T, Nd) D, Nd = N or N/2 with swiglu: (T, Nd/32) e8m0 or
     * (T, ceil(Nd/128)) f32, contiguous, masked T = G x M. Unused: zeroed (data NULL). Last in the
     * struct: code that zero-initialises the struct and sets the fields above is unchanged. */
    fp8kit_tensor scale_d;
    float *amax_d;
} fp8kit_grouped_gemm_args;

/* Workspace for the fastest path of this grouped call (0 when none helps):
 * checks the call as fp8kit_grouped_gemm does, except that the pointers may
 * be placeholders (non-NULL and aligned; no operand, offset or workspace is
 * read and the no-overlap rule is not applied). */
FP8KIT_API fp8kit_status fp8kit_grouped_gemm_workspace_size(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                                            const fp8kit_grouped_gemm_args *args, size_t *bytes);

FP8KIT_API fp8kit_status fp8kit_grouped_gemm(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                             const fp8kit_grouped_gemm_args *args, void *stream);

/* As fp8kit_gemm_describe for a grouped call: checks it as
 * fp8kit_grouped_gemm_workspace_size does (placeholder pointers allowed,
 * nothing read), plans it (the plan is cached for the call) and writes a
 * one-line description of the plan into buf (n bytes, truncated), e.g.
 * "sm90_grouped variant=16 bn=128 ... scaling=staged ...", or on the CPU
 * "cpu: one gemm per group". For tests, benchmarks and bug reports; the
 * text is not a stable format. */
FP8KIT_API fp8kit_status fp8kit_grouped_gemm_describe(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                                      const fp8kit_grouped_gemm_args *args, char *buf, size_t n);

/* K-grouped GEMM: the weight gradient of a mixture-of-experts layer
 * (DeepGEMM's k_grouped_fp8_gemm_nt_contiguous). G groups share M and N;
 * group g owns the K range [offsets[g-1], offsets[g]) (offsets[-1] = 0) of
 * A (M, Ktot) and B (N, Ktot), both e4m3 / e5m2 (any pair), K-contiguous,
 * row strides >= Ktot. D is (G, M, N) in f32, bf16 or f16 (rows and groups
 * strided; its dtype is args->d's) and
 *   D[g] = alpha * deq(A[:, Kg]) deq(B[:, Kg])^T  (+ beta * D[g] when beta != 0)
 * i.e. with beta != 0 the call accumulates into D in place (C is D itself;
 * D is not read when beta == 0). An empty group (offsets[g] == offsets[g-1])
 * is the same formula with an empty sum: D[g] = beta * D[g], zeros when
 * beta == 0 (for finite alpha and scales). G is d.shape[0] (>= 1).
 * offsets: G int32 K ends, valid when non-decreasing, every entry a multiple
 * of 128 (so every group's K size is: no 128-wide scale block straddles two
 * groups; the same rule in every scale mode) and <= Ktot; K columns past
 * offsets[G-1] are not read.
 * Scales (f32, contiguous), chosen by args->scales_1x128:
 * - 1 (the training layout): both operands carry 1x128 scales along K, per
 *   row: scale_a (M, ceil(Ktot/128)) and scale_b (N, ceil(Ktot/128)), row-
 *   major, scale_x[r][kb] applying to K columns kb*128 .. kb*128 + 127 of row
 *   r (what fp8kit_quantize's block1x128 scheme writes for A and for B).
 *   desc->scale_a and desc->scale_b must then be FP8KIT_SCALE_NONE (else
 *   FP8KIT_ERR_INVALID_ARGUMENT). Note that this is not FP8KIT_SCALE_BLOCK,
 *   whose B scales are 128x128 tiles.
 * - 0: desc->scale_a / desc->scale_b, each FP8KIT_SCALE_NONE or
 *   FP8KIT_SCALE_TENSOR (one f32 for the whole operand, all groups); ROW,
 *   BLOCK and MX are FP8KIT_ERR_UNSUPPORTED.
 * - any other value: FP8KIT_ERR_INVALID_ARGUMENT.
 * The descriptor: enum ranges checked as by fp8kit_gemm (out of range:
 * FP8KIT_ERR_INVALID_ARGUMENT); scale_a / scale_b as above; bias, act and
 * out_quant must be NONE and scale_layout plain (else
 * FP8KIT_ERR_UNSUPPORTED); out_hp, out_rounding and out_pow2 are not read;
 * fast_accum: ignored by the CPU (it sums every 128 of K in fp32, as in
 * fp8kit_gemm); the CUDA backend needs it for f32 D (see below).
 * Numerics (docs/spec.md 3, "K-grouped GEMM"; the bounds of section 3):
 * each 128-wide block of a group's K is summed in fp32 in k order and added
 * to an fp32 accumulator times its scales, acc = fmaf(s, sa * sb, acc); then
 * y = acc * alpha (* tensor scales) + beta * D[g] in double, rounded once to
 * fp32, then to D's dtype (RNE).
 * Where offsets and status live: as for fp8kit_grouped_gemm - host memory
 * on the CPU backend (offsets checked before anything runs; invalid ones
 * return FP8KIT_ERR_INVALID_ARGUMENT, write nothing to D and set *status
 * when given), device memory on the CUDA backend, where the host will not
 * read them. Both: 4-byte aligned (else FP8KIT_ERR_MISALIGNED). No output
 * (D, status) may overlap an input (offsets and scales included).
 * status (optional, NULL = none): one int32, 0 after a call that ran,
 * FP8KIT_ERR_INVALID_ARGUMENT after invalid offsets.
 * CUDA backend (sm_90): one kernel launch, no host sync, no allocation
 * (capturable in a CUDA graph); the kernel checks the offsets and, when
 * they are invalid, writes nothing to D and sets *status. Its fp8 tensor
 * cores sum each 128 of K before the fp32 promotion, so f32 D needs
 * desc->fast_accum = 1 (rel ~1e-4; else FP8KIT_ERR_UNSUPPORTED), as the
 * block-scaled fp8kit_gemm. A and B need 16-byte aligned bases and row
 * strides that are multiples of 16 bytes (else FP8KIT_ERR_MISALIGNED); D's
 * group stride must be a multiple of its row stride, at least M rows (else
 * FP8KIT_ERR_UNSUPPORTED); M, N, Ktot < 2^31. */
typedef struct fp8kit_k_grouped_gemm_args {
    fp8kit_tensor a, b;       /* (M, Ktot), (N, Ktot): e4m3 / e5m2 */
    const int32_t *offsets;   /* G K ends (G = d.shape[0]), multiples of 128; device memory on the CUDA backend */
    int32_t scales_1x128;     /* 1: 1x128 scales on both operands; 0: desc->scale_a / scale_b (NONE / TENSOR) */
    fp8kit_tensor scale_a;    /* (M, ceil(Ktot/128)), a scalar (TENSOR) or unused */
    fp8kit_tensor scale_b;    /* (N, ceil(Ktot/128)), a scalar (TENSOR) or unused */
    float alpha, beta;        /* beta != 0: D[g] += ... in place */
    fp8kit_tensor d;          /* (G, M, N): f32 / bf16 / f16 */
    int32_t *status;          /* optional offsets verdict, see above */
} fp8kit_k_grouped_gemm_args;

FP8KIT_API fp8kit_status fp8kit_k_grouped_gemm(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                               const fp8kit_k_grouped_gemm_args *args, void *stream);

/* Whether fp8kit_gemm would run this call on the context's backend: the
 * call is validated and planned exactly as fp8kit_gemm does (the plan is
 * cached), and the status and message are the ones fp8kit_gemm would give
 * (UNSUPPORTED, ARCH_MISMATCH, MISALIGNED, ...); nothing runs and no operand
 * is read, so args may hold placeholder pointers (non-NULL and with the
 * alignment the real ones will have). The workspace is not checked
 * (fp8kit_gemm_workspace_size). */
FP8KIT_API fp8kit_status fp8kit_gemm_supported(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                               const fp8kit_gemm_args *args);
/* As fp8kit_gemm_supported, and writes a one-line description of the plan
 * the call gets into buf (n bytes, truncated): the backend's kernel family
 * and its choices, e.g. "sm90 variant=12 bn=192 promo=0 ... pdl=1" or
 * "sm90_small ..." or "cpu isa=avx2 ...". For tests, benchmarks and bug
 * reports; the text is not a stable format. */
FP8KIT_API fp8kit_status fp8kit_gemm_describe(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                              const fp8kit_gemm_args *args, char *buf, size_t n);

/* Number of distinct plans cached in the context (for tests and tools). */
FP8KIT_API int64_t fp8kit_plan_cache_size(const fp8kit_ctx *ctx);

/* ------------------------------------------------------------------- names */
/* One name table per enum (docs/spec.md, "Names and spellings"), which the
 * CLI and the Python binding read instead of keeping their own. For each enum
 * E (its values run from 0 and stay below 32):
 *   fp8kit_E_name(v)     the canonical name of v, NULL outside the enum and
 *                        for a value without a name (but fp8kit_dtype_name /
 *                        fp8kit_backend_name, declared with their enums, give
 *                        "invalid" there);
 *   fp8kit_E_alias(v, i) the i-th other spelling of v (i from 0), NULL past
 *                        the last one or outside the enum;
 *   fp8kit_E_parse(s, &v) the value a canonical name or an alias means,
 *                        compared ignoring ASCII case: writes *out and returns
 *                        FP8KIT_OK; a name that is neither returns
 *                        FP8KIT_ERR_INVALID_ARGUMENT and fp8kit_last_error(NULL)
 *                        then lists every name ("...; aliases gelu (= gelu_erf),
 *                        ..."); NULL s or out is FP8KIT_ERR_NULL_POINTER; *out
 *                        is written only on success.
 * Names are static storage, never to be freed.
 *   dtype:          f32, f16, bf16, e4m3, e5m2, e8m0 (fp32, float32, bfloat16,
 *                   float8_e4m3fn, ...: torch's and numpy's names)
 *   backend:        auto, cpu, cuda
 *   scheme:         tensor, row, block1x128, block128x128, mx (tensorwise, 1x128, mxfp8, ...)
 *   ckpt_scheme:    fp8kit_scheme values by the checkpoint converter's names,
 *                   fp8-tensor, fp8-row, fp8-block, mxfp8 (the scheme names
 *                   of the same scaling and "block" as aliases); block1x128
 *                   has none (NULL): checkpoints quantize weights
 *   rounding:       floor, rceil
 *   scale_layout:   plain, blocked, mn_major (swizzled)
 *   scale_mode:     none, tensor, row, block, mx (tensorwise, rowwise, ...)
 *   activation:     none, relu, gelu_tanh, gelu_erf, silu, swiglu (gelu, swish)
 *   out_quant:      none, scaled, mx, block1x128
 *   grouped_layout: contiguous, masked */
FP8KIT_API fp8kit_status fp8kit_dtype_parse(const char *name, fp8kit_dtype *out);
FP8KIT_API const char *fp8kit_dtype_alias(fp8kit_dtype t, int i);
FP8KIT_API fp8kit_status fp8kit_backend_parse(const char *name, fp8kit_backend *out);
FP8KIT_API const char *fp8kit_backend_alias(fp8kit_backend b, int i);
FP8KIT_API const char *fp8kit_scheme_name(fp8kit_scheme s);
FP8KIT_API fp8kit_status fp8kit_scheme_parse(const char *name, fp8kit_scheme *out);
FP8KIT_API const char *fp8kit_scheme_alias(fp8kit_scheme s, int i);
FP8KIT_API const char *fp8kit_ckpt_scheme_name(fp8kit_scheme s);
FP8KIT_API fp8kit_status fp8kit_ckpt_scheme_parse(const char *name, fp8kit_scheme *out);
FP8KIT_API const char *fp8kit_ckpt_scheme_alias(fp8kit_scheme s, int i);
FP8KIT_API const char *fp8kit_rounding_name(fp8kit_rounding r);
FP8KIT_API fp8kit_status fp8kit_rounding_parse(const char *name, fp8kit_rounding *out);
FP8KIT_API const char *fp8kit_rounding_alias(fp8kit_rounding r, int i);
FP8KIT_API const char *fp8kit_scale_layout_name(fp8kit_scale_layout l);
FP8KIT_API fp8kit_status fp8kit_scale_layout_parse(const char *name, fp8kit_scale_layout *out);
FP8KIT_API const char *fp8kit_scale_layout_alias(fp8kit_scale_layout l, int i);
FP8KIT_API const char *fp8kit_scale_mode_name(fp8kit_scale_mode m);
FP8KIT_API fp8kit_status fp8kit_scale_mode_parse(const char *name, fp8kit_scale_mode *out);
FP8KIT_API const char *fp8kit_scale_mode_alias(fp8kit_scale_mode m, int i);
FP8KIT_API const char *fp8kit_activation_name(fp8kit_activation a);
FP8KIT_API fp8kit_status fp8kit_activation_parse(const char *name, fp8kit_activation *out);
FP8KIT_API const char *fp8kit_activation_alias(fp8kit_activation a, int i);
FP8KIT_API const char *fp8kit_out_quant_name(fp8kit_out_quant q);
FP8KIT_API fp8kit_status fp8kit_out_quant_parse(const char *name, fp8kit_out_quant *out);
FP8KIT_API const char *fp8kit_out_quant_alias(fp8kit_out_quant q, int i);
FP8KIT_API const char *fp8kit_grouped_layout_name(fp8kit_grouped_layout l);
FP8KIT_API fp8kit_status fp8kit_grouped_layout_parse(const char *name, fp8kit_grouped_layout *out);
FP8KIT_API const char *fp8kit_grouped_layout_alias(fp8kit_grouped_layout l, int i);

/* ------------------------------------------------------------- checkpoints */
/* safetensors checkpoint conversion (docs/spec.md section 5): the converter
 * behind `fp8kit quantize` and `fp8kit dequantize`, one call each. IN is a
 * .safetensors file (OUT is then one file) or a model directory holding
 * model.safetensors or a sharded model.safetensors.index.json (OUT is then a
 * complete model directory: the same weight files, every other file copied
 * byte for byte, config.json given or stripped of its quantization_config).
 * Everything is validated before the first byte is written; OUT is built
 * under a temporary name next to it and renamed into place when complete, so
 * a failing call creates or changes no output path. The tensors go through
 * fp8kit_quantize / fp8kit_dequantize on ctx's backend (a CUDA context gets
 * device buffers the library allocates on its device; the call then
 * synchronizes). While OUT is being written, SIGINT, SIGTERM, SIGHUP and
 * SIGBUS handlers remove the temporary output and re-raise the signal; they
 * are installed only for signals whose action is the default (a program's
 * own handlers and an inherited "ignore" are kept). Both functions exist in
 * every build; a library built without the safetensors reader (no jansson)
 * returns FP8KIT_ERR_UNSUPPORTED. */

/* The tensor naming and config.json convention of quantize's output. */
typedef enum fp8kit_ckpt_format {
    FP8KIT_CKPT_FORMAT_DEFAULT = 0,           /* the scheme's default: FP8 for BLOCK128X128, else COMPRESSED_TENSORS */
    FP8KIT_CKPT_FORMAT_FP8 = 1,               /* transformers FineGrainedFP8 / DeepSeek-V3: X.weight_scale_inv (no ROW
                                                 layout; vLLM's fp8 loader takes BLOCK128X128 only: its per-tensor
                                                 path reads X.weight_scale) */
    FP8KIT_CKPT_FORMAT_COMPRESSED_TENSORS = 2 /* compressed-tensors (llm-compressor, vLLM, transformers): X.weight_scale;
                                                 the format for vLLM */
} fp8kit_ckpt_format;

/* How far a conversion is (fp8kit_ckpt_opts.on_progress). */
typedef struct fp8kit_ckpt_progress {
    int64_t tensors_total, tensors_done; /* input tensors */
    uint64_t in_bytes_total, in_bytes_done; /* input tensor bytes (a dropped scale counts with its weight) */
    double seconds;                      /* since the call began */
    int32_t final;                       /* 1 in the last call, made once OUT is in place */
} fp8kit_ckpt_progress;

/* Options of both calls. Start from fp8kit_ckpt_opts_default(scheme) and set
 * what you need. A zeroed struct is valid too, but then means scheme TENSOR,
 * rounding FLOOR and out_dtype FP8KIT_F32 (the enums' 0), not the defaults
 * below. Fields
 * marked "quantize" are ignored by fp8kit_checkpoint_dequantize and
 * "dequantize" ones by fp8kit_checkpoint_quantize. The strings are read
 * during the call only. */
typedef struct fp8kit_ckpt_opts {
    fp8kit_scheme scheme;        /* quantize: TENSOR, ROW, BLOCK128X128 or MX (BLOCK1X128 is UNSUPPORTED: weights
                                    use 128x128 blocks); every weight is e4m3 with plain-layout scales */
    fp8kit_ckpt_format format;   /* quantize: output convention (FP8 with ROW is UNSUPPORTED) */
    fp8kit_rounding rounding;    /* quantize, MX only: the scale rule, RCEIL by default for MX (what transformers'
                                    and compressed-tensors' own MX quantizers do; FLOOR, the OCP rule and
                                    fp8kit_quant_desc_default's, stays selectable); RCEIL with another scheme is
                                    INVALID_ARGUMENT */
    int32_t pow2;                /* quantize, fp32-scale schemes: round each scale up to a power of two (with MX:
                                    INVALID_ARGUMENT) */
    int32_t quantize_all;        /* quantize: lm_head too (embeddings and router gates stay unless include names them) */
    const char *const *include;  /* quantize: ninclude globs (fnmatch; a tensor or module name) of weights quantized
                                    even where a default would keep them (embeddings, router gates); NULL when 0 */
    int32_t ninclude;
    const char *const *exclude;  /* nexclude globs of tensors left alone (quantize: kept in high precision;
                                    dequantize: fp8 tensors copied as they are); NULL when 0. A glob that
                                    matches no tensor is INVALID_ARGUMENT. */
    int32_t nexclude;
    fp8kit_dtype out_dtype;      /* dequantize: FP8KIT_BF16 (the default), FP8KIT_F16 or FP8KIT_F32 */
    int32_t force;               /* replace an existing OUT (a directory is exchanged in one step); without it an
                                    existing OUT is FP8KIT_ERR_IO and is left alone */
    int32_t no_fsync;            /* do not flush OUT to disk before renaming it into place (tests, scratch output) */
    /* quantize: called once per 2-D floating "*.weight" kept in high precision (copied unchanged and listed as
     * ignored in config.json), with the tensor's name and why, e.g. "output projection (kept by default;
     * --quantize-all to quantize)". Called while planning, before anything is written: a call that fails
     * later may have made some. May be NULL. */
    void (*on_kept)(void *user, const char *tensor, const char *reason);
    /* a problem that did not stop the call (a weight kept for its shape, which `fp8kit quantize` prints as a
     * warning: "kept in high precision: NAME: REASON"; leftovers of an earlier killed run removed; the old
     * OUT that force replaced could not be deleted; dequantize: no fp8 tensor in IN, or fp8 tensors left by
     * exclude). May be NULL. */
    void (*on_warning)(void *user, const char *message);
    void *user;                  /* passed to on_kept, on_warning and on_progress */
    /* called from the calling thread while tensors are converted (after each slab of at most 64 MiB, so often
     * on fast storage: throttle any drawing), then once with final set on success (`fp8kit quantize` draws its
     * progress bar with it). May be NULL. */
    void (*on_progress)(void *user, const fp8kit_ckpt_progress *progress);
} fp8kit_ckpt_opts;

/* The defaults: the given scheme, FP8KIT_CKPT_FORMAT_DEFAULT, rounding
 * FP8KIT_ROUND_RCEIL for FP8KIT_SCHEME_MX (FP8KIT_ROUND_FLOOR for the others,
 * which take no other), out_dtype FP8KIT_BF16, everything else 0 / NULL. */
FP8KIT_API fp8kit_ckpt_opts fp8kit_ckpt_opts_default(fp8kit_scheme scheme);

/* What a successful call did (left unchanged by a failing one). */
typedef struct fp8kit_ckpt_report {
    int64_t tensors;     /* input tensors */
    int64_t quantized;   /* quantize: weights written as fp8 + scale */
    int64_t dequantized; /* dequantize: fp8 tensors written as out_dtype (their scale tensors are dropped) */
    int64_t copied;      /* input tensors copied unchanged (kept weights included) */
    int64_t kept;        /* quantize: 2-D floating weights kept in high precision (on_kept calls) */
    int64_t other_files; /* model directory: other files copied (config.json included; directories not counted) */
    uint64_t in_bytes;   /* input tensor bytes */
    uint64_t out_bytes;  /* bytes of the written files */
    double seconds;      /* wall time of the call */
    char convention[40]; /* dequantize: the convention recognised: "fp8" (X_scale_inv), "compressed-tensors"
                            (X_scale), "mixed (fp8 and compressed-tensors)", or "" (no fp8 tensor; quantize) */
} fp8kit_ckpt_report;

/* Quantizes every candidate weight of IN (2-D F32/F16/BF16 "*.weight", less
 * the defaults and globs of opts) to e4m3 plus a scale tensor named by
 * opts->format, copies every other tensor, and writes OUT. opts is required
 * (NULL: FP8KIT_ERR_NULL_POINTER); report may be NULL. Statuses: NULL_POINTER
 * (ctx, in, out, opts or a glob), INVALID_ARGUMENT (an enum out of range, an
 * option the scheme does not take, a glob matching nothing, IN already
 * quantized: fp8 tensors or a quantization_config, OUT equal to, inside or
 * containing IN), UNSUPPORTED (BLOCK1X128, FP8 format with ROW, a library
 * without safetensors support), IO (IN unreadable, OUT exists without force,
 * a write failed), CORRUPT_FILE (IN breaks the safetensors format), and the
 * library's own (OUT_OF_MEMORY, DEVICE, ...). fp8kit_last_error(ctx) names
 * the file and tensor. */
FP8KIT_API fp8kit_status fp8kit_checkpoint_quantize(fp8kit_ctx *ctx, const char *in, const char *out,
                                                    const fp8kit_ckpt_opts *opts, fp8kit_ckpt_report *report);

/* Turns every F8_E4M3 / F8_E5M2 tensor X of IN (not excluded) into
 * opts->out_dtype as decode(q) * S (bit for bit as fp8kit_dequantize), S from
 * its scale tensor X_scale (compressed-tensors) or X_scale_inv (fp8), drops
 * the consumed scale tensors, copies everything else and writes OUT. When
 * every fp8 tensor was dequantized, the "quantization" metadata entry and
 * config.json's quantization_config are removed; when exclude left some, both
 * are kept and on_warning says so; an IN without fp8 tensors is copied
 * unchanged with a warning. opts may be NULL (the defaults of
 * fp8kit_ckpt_opts_default: bf16 output); report may be NULL. Statuses as for
 * fp8kit_checkpoint_quantize; out_dtype not f32/f16/bf16 is UNSUPPORTED (out
 * of the enum's range: INVALID_ARGUMENT); an fp8 tensor without a scale
 * tensor, with both X_scale and X_scale_inv, or whose scale fits no scheme
 * is CORRUPT_FILE (docs/spec.md section 5, the rule `fp8kit inspect` applies
 * too). */
FP8KIT_API fp8kit_status fp8kit_checkpoint_dequantize(fp8kit_ctx *ctx, const char *in, const char *out,
                                                      const fp8kit_ckpt_opts *opts, fp8kit_ckpt_report *report);

#ifdef __cplusplus
}
#endif
#endif /* FP8KIT_H */
