/* tensor.c - tensor constructors and the shared tensor validation used by
 * every entry point (shape, overflow and stride rules of docs/spec.md section 4). */
#include <string.h>
#include "core/check.h"

int64_t fk_mul_ovf(int64_t a, int64_t b)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
        return -1;
    return r;
}

fp8kit_tensor fp8kit_tensor_make(void *data, fp8kit_dtype dtype, int32_t ndim, const int64_t *shape)
{
    fp8kit_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = ndim;
    if (ndim < 0 || ndim > FP8KIT_MAX_DIMS || (ndim > 0 && !shape))
        return t; /* rejected later by validation: ndim kept as given */
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t.shape[i] = shape[i];
        t.strides[i] = s;
        int64_t n = fk_mul_ovf(s, shape[i] > 0 ? shape[i] : 1);
        s = n < 0 ? 0 : n;
    }
    return t;
}

fp8kit_tensor fp8kit_tensor_2d(void *data, fp8kit_dtype dtype, int64_t rows, int64_t cols, int64_t ld)
{
    fp8kit_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.strides[0] = ld;
    t.strides[1] = 1;
    return t;
}

int64_t fp8kit_tensor_numel(const fp8kit_tensor *t)
{
    if (!t || t->ndim < 0 || t->ndim > FP8KIT_MAX_DIMS)
        return -1;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        n = fk_mul_ovf(n, t->shape[i]);
        if (n < 0)
            return -1;
    }
    return n;
}

static int fk_all_strides_zero(const fp8kit_tensor *t)
{
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i])
            return 0;
    return 1;
}

int64_t fk_stride(const fp8kit_tensor *t, int i)
{
    if (!fk_all_strides_zero(t))
        return t->strides[i];
    int64_t s = 1;
    for (int j = t->ndim - 1; j > i; j--)
        s *= t->shape[j];
    return s;
}

int fk_is_contiguous(const fp8kit_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (fk_stride(t, i) != s && t->shape[i] != 1)
            return 0;
        s *= t->shape[i];
    }
    return 1;
}

/* Everything but the alignment of data (fk_check_tensor). */
static fp8kit_status fk_check_meta(const fp8kit_ctx *ctx, const char *fn, const char *name,
                                   const fp8kit_tensor *t, int need_data)
{
    if (!t)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: %s is NULL", fn, name);
    if (need_data && !t->data)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: %s->data is NULL", fn, name);
    if ((unsigned)t->dtype >= FP8KIT_DTYPE_COUNT)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: %s->dtype %d is not a fp8kit_dtype", fn, name,
                       (int)t->dtype);
    if (t->ndim < 0 || t->ndim > FP8KIT_MAX_DIMS)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, "%s: %s->ndim %d is outside 0..%d", fn, name, t->ndim,
                       FP8KIT_MAX_DIMS);
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, "%s: %s->shape[%d] = %lld is negative", fn, name, i,
                           (long long)t->shape[i]);
        if (t->shape[i] == 0)
            return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, "%s: %s->shape[%d] is 0 (empty tensors are not accepted)",
                           fn, name, i);
    }
    /* Sizes with checked arithmetic, once: the element and byte counts, and
     * for each dim shape x stride x element size (the bytes its steps span,
     * one past the last included), which bounds every offset a backend forms
     * from this tensor (row count x row stride, expert x expert stride, ...). */
    const int64_t es = (int64_t)fk_dtype_bytes(t->dtype);
    int64_t numel = 1, bytes;
    for (int i = 0; i < t->ndim; i++)
        if (__builtin_mul_overflow(numel, t->shape[i], &numel))
            return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, "%s: %s: the element count overflows int64", fn, name);
    if (__builtin_mul_overflow(numel, es, &bytes))
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, "%s: %s: element count times element size overflows int64",
                       fn, name);
    if (fk_all_strides_zero(t))
        return FP8KIT_OK; /* contiguous: every shape x stride divides the element count */
    if (t->ndim > 0 && t->strides[t->ndim - 1] != 1)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_STRIDE, "%s: %s->strides[%d] = %lld, the last dim must be contiguous (1)",
                       fn, name, t->ndim - 1, (long long)t->strides[t->ndim - 1]);
    int64_t extent = 1; /* elements spanned by dims i+1.. */
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (i < t->ndim - 1 && t->strides[i] < extent)
            return fk_fail(ctx, FP8KIT_ERR_INVALID_STRIDE,
                           "%s: %s->strides[%d] = %lld is smaller than the %lld elements of the dims after it", fn,
                           name, i, (long long)t->strides[i], (long long)extent);
        int64_t full, span;
        if (__builtin_mul_overflow(t->strides[i], t->shape[i], &full) || __builtin_mul_overflow(full, es, &full))
            return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW,
                           "%s: %s: shape[%d] x strides[%d] x element size (%lld x %lld x %lld bytes) overflows int64",
                           fn, name, i, i, (long long)t->shape[i], (long long)t->strides[i], (long long)es);
        /* stride >= extent (or i is the last dim, stride 1): extent + span <= full */
        if (__builtin_mul_overflow(t->strides[i], t->shape[i] - 1, &span) ||
            __builtin_add_overflow(span, extent, &extent))
            return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, "%s: %s: strided extent overflows int64", fn, name);
    }
    if (__builtin_mul_overflow(extent, es, &bytes))
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, "%s: %s: strided extent in bytes overflows int64", fn, name);
    return FP8KIT_OK;
}

fp8kit_status fk_check_tensor(const fp8kit_ctx *ctx, const char *fn, const char *name,
                              const fp8kit_tensor *t, int need_data)
{
    fp8kit_status st = fk_check_meta(ctx, fn, name, t, need_data);
    if (st || !need_data)
        return st;
    /* strides count elements, so an aligned base aligns every element: the
     * backends then load f32 / f16 / bf16 elements (and f32 scales) directly,
     * which is undefined behaviour (and a fault on some hardware) otherwise */
    const size_t es = fk_dtype_bytes(t->dtype);
    if ((uintptr_t)t->data % es)
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, "%s: %s->data (%p) is not aligned to its %zu-byte %s elements", fn,
                       name, t->data, es, fp8kit_dtype_name(t->dtype));
    return FP8KIT_OK;
}

fp8kit_status fk_to_mat(const fp8kit_ctx *ctx, const char *fn, const char *name, const fp8kit_tensor *t, fk_mat *m)
{
    memset(m, 0, sizeof *m);
    m->data = t->data;
    m->dtype = t->dtype;
    int n = t->ndim;
    if (n == 0) {
        m->E = m->R = m->C = 1;
        m->sr = m->se = 1;
        return FP8KIT_OK;
    }
    m->C = t->shape[n - 1];
    if (n == 1) {
        m->E = m->R = 1;
        m->sr = m->se = m->C;
        return FP8KIT_OK;
    }
    m->R = t->shape[n - 2];
    m->sr = fk_stride(t, n - 2);
    m->E = 1;
    m->se = m->R * m->sr;
    if (n >= 3) {
        m->E = t->shape[n - 3];
        m->se = fk_stride(t, n - 3);
    }
    if (n == 4) {
        if (t->shape[0] > 1 && t->shape[1] > 1 && fk_stride(t, 0) != t->shape[1] * fk_stride(t, 1))
            return fk_fail(ctx, FP8KIT_ERR_INVALID_STRIDE,
                           "%s: %s: the two leading dims must be collapsible (strides[0] == shape[1] * strides[1])",
                           fn, name);
        if (t->shape[1] == 1)
            m->se = fk_stride(t, 0);
        m->E = t->shape[0] * t->shape[1];
    }
    return FP8KIT_OK;
}

fp8kit_status fk_check_count(const fp8kit_ctx *ctx, const char *fn, const char *name, const fp8kit_tensor *t,
                             fp8kit_dtype dt, int64_t n, const char *what)
{
    fp8kit_status st = fk_check_tensor(ctx, fn, name, t, 1);
    if (st)
        return st;
    if (n < 0)
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, "%s: the element count of %s for %s overflows int64", fn, name,
                       what);
    if (t->dtype != dt)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: %s->dtype is %s; %s needs %s", fn, name,
                       fp8kit_dtype_name(t->dtype), what, fp8kit_dtype_name(dt));
    if (fp8kit_tensor_numel(t) != n)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, "%s: %s holds %lld elements; %s needs %lld", fn, name,
                       (long long)fp8kit_tensor_numel(t), what, (long long)n);
    if (!fk_is_contiguous(t))
        return fk_fail(ctx, FP8KIT_ERR_INVALID_STRIDE, "%s: %s must be contiguous", fn, name);
    return FP8KIT_OK;
}
