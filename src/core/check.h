/* check.h - validation helpers used by the public entry points: tensor
 * checks that record a specific message and status, and conversion of a
 * validated tensor into the canonical fk_mat view. */
#ifndef FK_CHECK_H
#define FK_CHECK_H

#include "core/internal.h"
#include "format/geometry.h"
#include "format/scale.h"

/* format/geometry.h takes the public enums' values */
#define FK_GEO_SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(FK_GEO_SAME(FK_GEO_TENSOR, FP8KIT_SCHEME_TENSOR) && FK_GEO_SAME(FK_GEO_ROW, FP8KIT_SCHEME_ROW) &&
                   FK_GEO_SAME(FK_GEO_1X128, FP8KIT_SCHEME_BLOCK1X128) &&
                   FK_GEO_SAME(FK_GEO_128X128, FP8KIT_SCHEME_BLOCK128X128) && FK_GEO_SAME(FK_GEO_MX, FP8KIT_SCHEME_MX),
               "geometry.h scheme values");
_Static_assert(FK_GEO_SAME(FK_GEO_PLAIN, FP8KIT_LAYOUT_PLAIN) && FK_GEO_SAME(FK_GEO_BLOCKED, FP8KIT_LAYOUT_BLOCKED) &&
                   FK_GEO_SAME(FK_GEO_MN_MAJOR, FP8KIT_LAYOUT_MN_MAJOR),
               "geometry.h layout values");
_Static_assert(FK_GEO_SAME(FK_GEO_MODE_NONE, FP8KIT_SCALE_NONE) && FK_GEO_SAME(FK_GEO_MODE_TENSOR, FP8KIT_SCALE_TENSOR) &&
                   FK_GEO_SAME(FK_GEO_MODE_ROW, FP8KIT_SCALE_ROW) && FK_GEO_SAME(FK_GEO_MODE_BLOCK, FP8KIT_SCALE_BLOCK) &&
                   FK_GEO_SAME(FK_GEO_MODE_MX, FP8KIT_SCALE_MX),
               "geometry.h scale mode values");
_Static_assert(FK_GEO_SAME(FK_GEO_OUTQ_NONE, FP8KIT_OUTQ_NONE) && FK_GEO_SAME(FK_GEO_OUTQ_SCALED, FP8KIT_OUTQ_SCALED) &&
                   FK_GEO_SAME(FK_GEO_OUTQ_MX, FP8KIT_OUTQ_MX) && FK_GEO_SAME(FK_GEO_OUTQ_1X128, FP8KIT_OUTQ_BLOCK1X128),
               "geometry.h out_quant values");

/* Checks dtype, ndim, shape (>= 1, no overflow of elements or bytes) and
 * strides (unit last stride, row-major nesting) of t. `fn` and `name` name
 * the call and the argument in the message. need_data: data must be non-NULL
 * and aligned to the element size (FP8KIT_ERR_MISALIGNED). */
fp8kit_status fk_check_tensor(const fp8kit_ctx *ctx, const char *fn, const char *name,
                              const fp8kit_tensor *t, int need_data);

/* Effective stride of dim i (contiguous strides when all are 0). */
int64_t fk_stride(const fp8kit_tensor *t, int i);

/* 1 when t is contiguous row-major. */
int fk_is_contiguous(const fp8kit_tensor *t);

/* Canonical (E, R, C) view of a checked tensor: leading dims fold into E,
 * which needs them to be collapsible (else INVALID_STRIDE). ndim 0 and 1
 * give R = 1. */
fp8kit_status fk_to_mat(const fp8kit_ctx *ctx, const char *fn, const char *name,
                        const fp8kit_tensor *t, fk_mat *m);

/* A checked contiguous tensor of dtype `dt` holding exactly `n` elements
 * (n < 0: the needed count overflows int64); `what` names its role in the
 * messages. */
fp8kit_status fk_check_count(const fp8kit_ctx *ctx, const char *fn, const char *name, const fp8kit_tensor *t,
                             fp8kit_dtype dt, int64_t n, const char *what);

/* Overflow-checked multiply of non-negative values; returns -1 on overflow. */
int64_t fk_mul_ovf(int64_t a, int64_t b);

/* The bytes a call reads or writes through one argument (overlap.c): the
 * range [p, p + bytes), and when rows > 1 the rows of rbytes bytes, rstride
 * apart, that it consists of (else one run: rows 1, rbytes = bytes). p 0 =
 * not used by the call. */
typedef struct fk_region {
    const char *name;
    uintptr_t p;
    uint64_t bytes;
    uint64_t rows, rstride, rbytes;
    int out; /* written by the call */
} fk_region;
/* The region of a tensor that passed fk_check_tensor, or of raw bytes. */
fk_region fk_region_tensor(const char *name, const fp8kit_tensor *t, int out);
fk_region fk_region_bytes(const char *name, const void *p, uint64_t bytes, int out);
/* 1 when the two regions share a byte. */
int fk_regions_overlap(const fk_region *a, const fk_region *b);
/* FP8KIT_ERR_INVALID_ARGUMENT naming the first pair of r[0..n) that overlaps
 * with at least one of them an output; FP8KIT_OK when none does. */
fp8kit_status fk_check_overlap(const fp8kit_ctx *ctx, const char *fn, const fk_region *r, int n);

/* The grouped GEMMs' int32 words: offsets (G entries, read) non-NULL and both
 * offsets and the optional status word (written) 4-byte aligned. */
fp8kit_status fk_check_group_words(const fp8kit_ctx *ctx, const char *fn, const int32_t *offsets,
                                   const int32_t *status);
/* G host offsets (row or K ends) non-decreasing, >= 0, <= limit and
 * multiples of align; on a bad one *status (when given) is set to
 * FP8KIT_ERR_INVALID_ARGUMENT and the message names it. what: "T" or "Ktot". */
fp8kit_status fk_check_group_ends(const fp8kit_ctx *ctx, const char *fn, const int32_t *offsets, int64_t g,
                                  int64_t limit, int64_t align, const char *what, int32_t *status);

#endif
