/* overlap.c - refusing calls whose outputs overlap another output or an input
 * (fp8kit.h conventions, docs/spec.md section 4). A region is the byte range
 * of a validated tensor (pointer, shape, strides, dtype; host or device
 * addresses alike); one whose dims fold into evenly spaced rows with gaps
 * between them also keeps that row structure, so two regions of the same
 * byte row stride (e.g. column slices of one matrix), or such rows and a
 * contiguous run, are intersected exactly; anything else overlaps as soon as
 * the ranges do. */
#include <stdint.h>
#include "core/check.h"

fk_region fk_region_bytes(const char *name, const void *p, uint64_t bytes, int out)
{
    fk_region r;
    memset(&r, 0, sizeof r);
    r.name = name;
    r.p = (uintptr_t)p;
    r.bytes = bytes;
    r.rows = 1;
    r.rbytes = bytes;
    r.out = out;
    return r;
}

fk_region fk_region_tensor(const char *name, const fp8kit_tensor *t, int out)
{
    /* t passed fk_check_tensor: none of these products overflows */
    const uint64_t es = fk_dtype_bytes(t->dtype);
    int64_t span = 0, rows = 1;
    for (int i = 0; i < t->ndim; i++)
        span += (t->shape[i] - 1) * fk_stride(t, i);
    fk_region r = fk_region_bytes(name, t->data, (uint64_t)(span + 1) * es, out);
    if (t->ndim >= 2) {
        const int64_t sr = fk_stride(t, t->ndim - 2), c = t->shape[t->ndim - 1];
        for (int i = 0; i < t->ndim - 1; i++)
            rows *= t->shape[i];
        /* the leading dims nest evenly into rows sr apart exactly when the
         * extent is that of rows - 1 steps of sr (every stride is >= the
         * extent of the dims after it, with equality only when even) */
        if (rows > 1 && sr > c && (rows - 1) * sr + c == span + 1) { /* rows with gaps */
            r.rows = (uint64_t)rows;
            r.rstride = (uint64_t)sr * es;
            r.rbytes = (uint64_t)c * es;
        }
    }
    return r;
}

/* floor(a / b) for b > 0 */
static __int128 fk_floor_div(__int128 a, __int128 b)
{
    __int128 q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

int fk_regions_overlap(const fk_region *a, const fk_region *b)
{
    if (!a->p || !b->p || !a->bytes || !b->bytes)
        return 0;
    const __int128 a0 = (__int128)a->p, b0 = (__int128)b->p;
    if (a0 + (__int128)a->bytes <= b0 || b0 + (__int128)b->bytes <= a0)
        return 0;
    const __int128 sa = a->rows > 1 ? (__int128)a->rstride : 0, sb = b->rows > 1 ? (__int128)b->rstride : 0;
    if (sa && sb && sa != sb)
        return 1; /* interleaved at different strides: counted as overlapping */
    const __int128 s = sa ? sa : sb;
    if (!s)
        return 1; /* two runs of bytes whose ranges meet */
    /* rows i of a start at a0 + i s (rbytes wide), rows j of b at b0 + j s:
     * they meet iff some k = j - i in [-(rows_a - 1), rows_b - 1] has
     * -wb < d + k s < wa, d = b0 - a0. Take the smallest k above the lower
     * bound (d + k s grows with k) and compare it with the upper one. */
    const __int128 d = b0 - a0, wa = (__int128)a->rbytes, wb = (__int128)b->rbytes;
    const __int128 kmin = -((__int128)a->rows - 1), kmax = (__int128)b->rows - 1;
    __int128 k = fk_floor_div(-wb - d, s) + 1;
    if (k < kmin)
        k = kmin;
    return k <= kmax && d + k * s < wa;
}

fp8kit_status fk_check_overlap(const fp8kit_ctx *ctx, const char *fn, const fk_region *r, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (!(r[i].out || r[j].out) || !fk_regions_overlap(&r[i], &r[j]))
                continue;
            const fk_region *o = r[i].out ? &r[i] : &r[j], *x = r[i].out ? &r[j] : &r[i];
            return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                           "%s: output %s overlaps %s %s in memory ([%#llx, +%llu) and [%#llx, +%llu) bytes); an "
                           "output may share no byte with another output or an input",
                           fn, o->name, x->out ? "output" : "input", x->name, (unsigned long long)o->p,
                           (unsigned long long)o->bytes, (unsigned long long)x->p, (unsigned long long)x->bytes);
        }
    return FP8KIT_OK;
}
