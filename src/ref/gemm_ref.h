/* gemm_ref.h - an independent fp64 oracle of the scaled GEMM of docs/spec.md section 3 (and of
 * the grouped GEMM, group by group), the one reference the CLI's check (`fp8kit gemm`) and the
 * CPU tests compare fp8kit_gemm / fp8kit_grouped_gemm with. Not part of libfp8kit: built as the
 * static library fp8kit_ref (CMakeLists.txt), it calls no fp8kit_* function. It shares with the
 * library only the two rules that have one source by design: element decoding
 * (src/format/codec.h, exact) and scale geometry (src/format/geometry.h, fk_gemm_scale_geom);
 * the arithmetic is its own: operands dequantized exactly in fp64, the sum over K in fp64,
 * alpha, beta * C, bias and the activation in fp64 (its own formulas, not
 * src/format/epilogue_math.h's fp32 ones).
 *
 * Arguments are the public API's descriptor and arguments with HOST pointers. Functions that
 * return int give 0 on success and FK_REF_ERR_* when the oracle cannot read the call (a
 * descriptor or tensor it does not define, allocation failure); they do not repeat the
 * library's argument checks. */
#ifndef FK_GEMM_REF_H
#define FK_GEMM_REF_H

#include <stdint.h>
#include "fp8kit.h"

enum {
    FK_REF_OK = 0,
    FK_REF_ERR_ARG = 1,   /* a value, shape, dtype or scale combination the oracle does not define */
    FK_REF_ERR_NOMEM = 2  /* host memory for the dequantized operands */
};

/* ------------------------------------------------------------- elements */
/* Element i of data of dtype t (f32, f16, bf16, e4m3, e5m2, e8m0) as a double, exactly. */
double fk_ref_decode(const void *data, fp8kit_dtype t, int64_t i);
/* v as D of dtype t holds it after the output cast of docs/spec.md 3 (out_quant NONE): rounded
 * to fp32 (the y the library computes), then to t (bf16 / f16 RNE, fp8 satfinite RNE). */
double fk_ref_round(double v, fp8kit_dtype t);
/* docs/spec.md 3's activation act of y, in fp64; NaN stays NaN. */
double fk_ref_act(double y, fp8kit_activation act);
/* FP8KIT_ACT_SWIGLU is not elementwise: fk_ref_act (and fk_ref_epilogue) give NaN for it. Its
 * pair silu(gate) * up in fp64, gate = y[m, j] and up = y[m, j + N/2] the pre-activation values. */
double fk_ref_swiglu(double gate, double up);

/* ------------------------------------------------------------------ GEMM */
/* The accumulators of chosen entries of D = deq(A) deq(B)^T:
 *   acc[i * ncols + j]     = sum over k of deq(A)[rows[i], k] * deq(B)[cols[j], k]
 *   acc_abs[i * ncols + j] = sum over k of |deq(A)[rows[i], k] * deq(B)[cols[j], k]|
 * (acc_abs may be NULL; it sizes error bounds). rows (nrows entries) and cols (ncols) index
 * A's and B's rows; NULL means all of them (nrows = M, ncols = N). Reads args->a, b, scale_a,
 * scale_b and desc->scale_a, scale_b, scale_layout. OpenMP-parallel. */
int fk_ref_gemm_acc(const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, const int64_t *rows,
                    int64_t nrows, const int64_t *cols, int64_t ncols, double *acc, double *acc_abs);

/* The parts of one entry's epilogue. */
typedef struct fk_ref_parts {
    double c;    /* beta * C[m, n] (0 when beta == 0: C is then not read) */
    double bias; /* bias[n] (COL), bias[m] (ROW) or 0 */
    double pre;  /* alpha * acc + c + bias: y before the activation */
} fk_ref_parts;

/* y[m, n] = act(alpha * acc + beta * C[m, n] + bias) in fp64 for the entry (m, n) whose
 * accumulator is acc; parts (may be NULL) receives the terms. */
double fk_ref_epilogue(const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, int64_t m, int64_t n,
                       double acc, fk_ref_parts *parts);

/* The fp64 pre-cast value y = act(alpha * sum + beta * C + bias) of every column of the
 * chosen rows of D: out[i * N + n] for row rows[i] (rows NULL: all M rows, nrows = M). With
 * FP8KIT_ACT_SWIGLU (N even, beta 0; else FK_REF_ERR_ARG) D has N/2 columns: out[i * N/2 + j] =
 * fk_ref_swiglu(y[j], y[j + N/2]) of the row's pre-activation y. */
int fk_ref_gemm(const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, const int64_t *rows,
                int64_t nrows, double *out);

/* fp8kit_grouped_gemm's y (docs/spec.md 3, "Grouped GEMM"): each group g is the GEMM of its
 * rows of A - contiguous layout: rows offsets[g-1] .. offsets[g] - 1; masked: rows
 * 0 .. offsets[g] - 1 of slab g - with expert g's B, scale_b and bias, as fk_ref_gemm. out is
 * T x N (masked: G x M rows, slab after slab), T x N/2 with FP8KIT_ACT_SWIGLU (each row's
 * fk_ref_swiglu pairs); rows no group owns are not written. As fk_ref_gemm, the value before the
 * output stage (desc->out_quant is not read). FK_REF_ERR_ARG for invalid offsets, odd N with
 * swiglu. */
int fk_ref_grouped_gemm(const fp8kit_gemm_desc *desc, const fp8kit_grouped_gemm_args *args, double *out);

/* fp8kit_k_grouped_gemm's y (docs/spec.md 3, "K-grouped GEMM") in fp64: for each group g, row m
 * and column n, out[(g * M + m) * N + n] = alpha * sum over k in [offsets[g-1], offsets[g]) of
 * deq(A)[m, k] * deq(B)[n, k] (+ beta * D[g, m, n] when beta != 0), operands dequantized exactly
 * (1x128 scales with args->scales_1x128, else desc->scale_a / scale_b NONE or TENSOR), sums in
 * fp64. D is read when beta != 0: call it before the library overwrites D. out holds G x M x N
 * doubles (G = d.shape[0]). FK_REF_ERR_ARG for invalid offsets or a call it does not define. */
int fk_ref_k_grouped_gemm(const fp8kit_gemm_desc *desc, const fp8kit_k_grouped_gemm_args *args, double *out);

/* ------------------------------------------------------------- tolerance */
/* docs/spec.md 3's bound on rel = ||D - ref||_F / ||ref||_F for output dtype d: f32 1e-5, bf16
 * 4e-3, f16 1e-3 (0 for other types); for f32 beyond K = 16384 (outside the spec's range) it
 * grows as sqrt(K / 16384), the rule `fp8kit gemm` applies. */
double fk_ref_bound(fp8kit_dtype d, int64_t k);

/* The Frobenius comparison of D with the reference, element by element. */
typedef struct fk_ref_norm {
    double err2, ref2;   /* sums of (got - ref)^2 and ref^2 over entries where neither is NaN */
    int64_t count;       /* those entries */
    int64_t nan_extra;   /* NaN in D where the reference has none (always a failure) */
    int64_t nan_missing; /* a number in D where the reference is NaN */
} fk_ref_norm;

void fk_ref_norm_add(fk_ref_norm *s, double got, double ref);
/* sqrt(err2) / sqrt(ref2) (sqrt(err2) when ref2 is 0). */
double fk_ref_norm_rel(const fk_ref_norm *s);
/* 1 when no NaN disagrees and rel <= bound (a NaN rel fails). */
int fk_ref_norm_ok(const fk_ref_norm *s, double bound);

#endif
