/* st_plan.c - planning half of the checkpoint converter (docs/spec.md section 5):
 * decides for every input tensor whether it is quantized (2-D F32/F16/BF16
 * "*.weight", not excluded), dequantized (an fp8 weight with a "_scale" or
 * "_scale_inv" tensor whose dtype and shape identify the scheme), dropped (a
 * scale consumed by dequantization) or copied; names and shapes the outputs,
 * lays them out largest element size first, and builds the header with the
 * kept metadata plus a "quantization" entry. Nothing is written here. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/st_conv.h"

fp8kit_status cv_fail(cv *c, fp8kit_status st, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

const char *st_scheme_name(st_scheme s)
{
    switch (s) {
    case ST_SCHEME_FP8_TENSOR: return "fp8-tensor";
    case ST_SCHEME_FP8_ROW: return "fp8-row";
    case ST_SCHEME_FP8_BLOCK: return "fp8-block";
    case ST_SCHEME_MXFP8: return "mxfp8";
    }
    return "?";
}

int cv_fk_dtype(st_dtype t, fp8kit_dtype *out)
{
    switch (t) {
    case ST_F32: *out = FP8KIT_F32; return 1;
    case ST_F16: *out = FP8KIT_F16; return 1;
    case ST_BF16: *out = FP8KIT_BF16; return 1;
    case ST_F8_E4M3: *out = FP8KIT_E4M3; return 1;
    case ST_F8_E5M2: *out = FP8KIT_E5M2; return 1;
    case ST_F8_E8M0: *out = FP8KIT_E8M0; return 1;
    default: return 0;
    }
}

st_dtype cv_st_dtype(fp8kit_dtype t)
{
    switch (t) {
    case FP8KIT_F32: return ST_F32;
    case FP8KIT_F16: return ST_F16;
    case FP8KIT_BF16: return ST_BF16;
    case FP8KIT_E4M3: return ST_F8_E4M3;
    case FP8KIT_E5M2: return ST_F8_E5M2;
    default: return ST_F8_E8M0;
    }
}

/* ---------------------------------------------------------------- planning */
static int cv_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !memcmp(s + a - b, suffix, b);
}

static int cv_excluded(const st_conv_opts *o, const char *name)
{
    for (int i = 0; i < o->nexclude; i++)
        if (!fnmatch(o->exclude[i], name, 0))
            return 1;
    return 0;
}

char *cv_concat(const char *a, const char *b)
{
    size_t x = strlen(a), y = strlen(b);
    char *p = malloc(x + y + 1);
    if (p) {
        memcpy(p, a, x);
        memcpy(p + x, b, y + 1);
    }
    return p;
}

/* Global name -> (file, tensor) map over all input files. */
static const st_tensor *cv_lookup(json_t *names, const cv_file *files, const char *name)
{
    json_t *v = json_object_get(names, name);
    if (!v)
        return NULL;
    json_int_t id = json_integer_value(v);
    return &files[id >> 32].in->tensors[id & 0xFFFFFFFF];
}

static int cv_same_shape(const st_tensor *t, int nd, const int64_t *shape)
{
    if (t->ndim != nd)
        return 0;
    for (int i = 0; i < nd; i++)
        if (t->shape[i] != shape[i])
            return 0;
    return 1;
}

static void cv_shape_text(const st_tensor *t, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < n)
        snprintf(buf + o, n - o, "]");
}

/* Dequantize: which scheme the scale tensor sc of the fp8 weight w encodes. */
static fp8kit_status cv_detect(cv *c, const st_tensor *w, const st_tensor *sc, int inv, cv_item *it)
{
    char wq[160], sq[160], ws[96], ss[96];
    st_quote(w->name, wq, sizeof wq);
    st_quote(sc->name, sq, sizeof sq);
    cv_shape_text(w, ws, sizeof ws);
    cv_shape_text(sc, ss, sizeof ss);
    fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_TENSOR);
    d.elem = w->dtype == ST_F8_E5M2 ? FP8KIT_E5M2 : FP8KIT_E4M3;
    int64_t n1 = st_numel(sc);
    int ok = 0;
    if (w->ndim == 2) {
        int64_t N = w->shape[0], K = w->shape[1];
        int64_t row[2] = {N, 1}, b1[2] = {N, (K + 127) / 128}, b2[2] = {(N + 127) / 128, (K + 127) / 128},
                mx[2] = {N, K / 32};
        it->R = N, it->C = K;
        if (sc->dtype == ST_F32 && inv && cv_same_shape(sc, 2, b2))
            d.scheme = FP8KIT_SCHEME_BLOCK128X128, ok = 1;
        else if (sc->dtype == ST_F32 && !inv && n1 == 1 && sc->ndim <= 1)
            d.scheme = FP8KIT_SCHEME_TENSOR, ok = 1;
        else if (sc->dtype == ST_F32 && !inv && cv_same_shape(sc, 2, row))
            d.scheme = FP8KIT_SCHEME_ROW, ok = 1;
        else if (sc->dtype == ST_F32 && !inv && cv_same_shape(sc, 2, b1))
            d.scheme = FP8KIT_SCHEME_BLOCK1X128, ok = 1;
        else if (sc->dtype == ST_F32 && !inv && cv_same_shape(sc, 2, b2))
            d.scheme = FP8KIT_SCHEME_BLOCK128X128, ok = 1;
        else if (sc->dtype == ST_F8_E8M0 && !inv && K % 32 == 0 && cv_same_shape(sc, 2, mx))
            d.scheme = FP8KIT_SCHEME_MX, ok = 1;
    } else if (w->ndim <= 4 && sc->dtype == ST_F32 && !inv && n1 == 1 && sc->ndim <= 1) {
        d.scheme = FP8KIT_SCHEME_TENSOR, ok = 1; /* any rank: one scale */
        it->C = w->ndim ? w->shape[w->ndim - 1] : 1;
        it->R = it->C ? st_numel(w) / it->C : 0;
    }
    if (!ok)
        return cv_fail(c, FP8KIT_ERR_CORRUPT_FILE,
                       "tensor '%s' (%s %s) does not fit any scale scheme for the weight '%s' (%s %s)", sq,
                       st_dtype_name(sc->dtype), ss, wq, st_dtype_name(w->dtype), ws);
    it->desc = d;
    return FP8KIT_OK;
}

static int cv_cmp_begin(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static fp8kit_status cv_add_out(cv *c, cv_file *f, const char *name, st_dtype dt, int nd, const int64_t *shape,
                                int *pos)
{
    (void)c;
    st_out_tensor *o = &f->outs[f->nouts];
    o->name = name;
    o->dtype = dt;
    o->ndim = nd;
    for (int i = 0; i < nd; i++)
        o->shape[i] = shape[i];
    *pos = (int)f->nouts++;
    return FP8KIT_OK;
}

fp8kit_status cv_plan_file(cv *c, cv_file *f, json_t *names, const cv_file *files)
{
    const st_conv_opts *o = c->o;
    const st_file *in = f->in;
    char tq[160];
    size_t n = in->ntensors;
    const st_tensor **ord = malloc((n ? n : 1) * sizeof *ord);
    f->items = calloc(n ? n : 1, sizeof *f->items);
    f->outs = calloc(2 * n + 1, sizeof *f->outs);
    f->out_off = calloc(2 * n + 1, sizeof *f->out_off);
    if (!ord || !f->items || !f->outs || !f->out_off) {
        free(ord);
        return cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        ord[i] = &in->tensors[i];
    qsort(ord, n, sizeof *ord, cv_cmp_begin);
    fp8kit_status st = FP8KIT_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const st_tensor *t = ord[i];
        cv_item *it = &f->items[f->nitems++];
        it->src = t;
        it->act = CV_COPY;
        it->out_main = it->out_scale = -1;
        st_quote(t->name, tq, sizeof tq);
        if (!o->dequantize) {
            if (t->ndim == 2 && (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16) &&
                cv_ends_with(t->name, ".weight") && !cv_excluded(o, t->name)) {
                it->act = CV_QUANT;
                it->R = t->shape[0];
                it->C = t->shape[1];
                static const fp8kit_scheme map[] = {FP8KIT_SCHEME_TENSOR, FP8KIT_SCHEME_ROW,
                                                    FP8KIT_SCHEME_BLOCK128X128, FP8KIT_SCHEME_MX};
                it->desc = fp8kit_quant_desc_default(map[o->scheme]);
                if (o->scheme == ST_SCHEME_MXFP8)
                    it->desc.rounding = o->rounding;
                else
                    it->desc.pow2 = o->pow2 ? 1 : 0;
                if (o->scheme == ST_SCHEME_MXFP8 && it->C % 32) {
                    st = cv_fail(c, FP8KIT_ERR_INVALID_SHAPE,
                                 "%s: tensor '%s': mxfp8 needs the last dim to be a multiple of 32, it is %lld "
                                 "(exclude it with --exclude)",
                                 in->path ? in->path : "input", tq, (long long)it->C);
                    break;
                }
                it->scale_name = cv_concat(t->name, o->scheme == ST_SCHEME_FP8_BLOCK ? "_scale_inv" : "_scale");
                if (!it->scale_name) {
                    st = cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
                    break;
                }
                if (cv_lookup(names, files, it->scale_name)) {
                    char sq[160];
                    st_quote(it->scale_name, sq, sizeof sq);
                    st = cv_fail(c, FP8KIT_ERR_INVALID_ARGUMENT,
                                 "tensor '%s': the input already has a tensor '%s', the name its scale would get "
                                 "(already quantized? exclude it with --exclude)",
                                 tq, sq);
                    break;
                }
            }
        } else if ((t->dtype == ST_F8_E4M3 || t->dtype == ST_F8_E5M2) && !cv_excluded(o, t->name)) {
            char *sn = cv_concat(t->name, "_scale"), *si = cv_concat(t->name, "_scale_inv");
            const st_tensor *s1 = sn ? cv_lookup(names, files, sn) : NULL;
            const st_tensor *s2 = si ? cv_lookup(names, files, si) : NULL;
            free(sn);
            free(si);
            if (s1 && s2) {
                st = cv_fail(c, FP8KIT_ERR_CORRUPT_FILE,
                             "tensor '%s': has both a _scale and a _scale_inv tensor; which one applies is ambiguous",
                             tq);
                break;
            }
            if (s1 || s2) {
                it->act = CV_DEQUANT;
                it->scale = s1 ? s1 : s2;
                if ((st = cv_detect(c, t, it->scale, s2 != NULL, it)))
                    break;
            }
        }
    }
    free(ord);
    return st;
}

void cv_mark_dropped(cv_file *files, size_t nfiles)
{
    for (size_t a = 0; a < nfiles; a++)
        for (size_t i = 0; i < files[a].nitems; i++) {
            const cv_item *it = &files[a].items[i];
            if (it->act != CV_DEQUANT)
                continue;
            for (size_t b = 0; b < nfiles; b++) {
                if (files[b].in->tensors > it->scale ||
                    it->scale >= files[b].in->tensors + files[b].in->ntensors)
                    continue;
                for (size_t k = 0; k < files[b].nitems; k++)
                    if (files[b].items[k].src == it->scale)
                        files[b].items[k].act = CV_DROP;
            }
        }
}

static int cv_align_of(const st_out_tensor *t) { return (int)st_dtype_size(t->dtype); }

fp8kit_status cv_layout_file(cv *c, cv_file *f)
{
    const st_conv_opts *o = c->o;
    f->nouts = 0;
    for (size_t i = 0; i < f->nitems; i++) {
        cv_item *it = &f->items[i];
        const st_tensor *t = it->src;
        if (it->act == CV_COPY)
            cv_add_out(c, f, t->name, t->dtype, t->ndim, t->shape, &it->out_main);
        else if (it->act == CV_DEQUANT)
            cv_add_out(c, f, t->name, cv_st_dtype(o->out_dtype), t->ndim, t->shape, &it->out_main);
        else if (it->act == CV_QUANT) {
            /* docs/spec.md section 5's table (st_convert.c checks each slab against
             * fp8kit_quant_shapes) */
            int64_t N = it->R, K = it->C, ss[2] = {0, 0};
            int snd = 2;
            st_dtype sdt = ST_F32;
            switch (it->desc.scheme) {
            case FP8KIT_SCHEME_TENSOR: snd = 0; break;
            case FP8KIT_SCHEME_ROW: ss[0] = N, ss[1] = 1; break;
            case FP8KIT_SCHEME_BLOCK128X128: ss[0] = (N + 127) / 128, ss[1] = (K + 127) / 128; break;
            default: ss[0] = N, ss[1] = K / 32, sdt = ST_F8_E8M0; break;
            }
            cv_add_out(c, f, t->name, ST_F8_E4M3, 2, t->shape, &it->out_main);
            cv_add_out(c, f, it->scale_name, sdt, snd, ss, &it->out_scale);
        }
    }
    /* stable sort by element size, largest first: every tensor aligned */
    size_t n = f->nouts;
    int *perm = malloc((n ? n : 1) * sizeof *perm), *rank = malloc((n ? n : 1) * sizeof *rank);
    st_out_tensor *sorted = calloc(n ? n : 1, sizeof *sorted);
    if (!perm || !rank || !sorted) {
        free(perm), free(rank), free(sorted);
        return cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    size_t k = 0;
    for (int a = 8; a >= 1; a /= 2)
        for (size_t i = 0; i < n; i++)
            if (cv_align_of(&f->outs[i]) == a)
                perm[k++] = (int)i;
    for (size_t i = 0; i < n; i++) {
        sorted[i] = f->outs[perm[i]];
        rank[perm[i]] = (int)i;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t numel = 1;
        for (int d = 0; d < sorted[i].ndim; d++)
            numel *= (uint64_t)sorted[i].shape[d];
        f->out_off[i] = off;
        off += numel * st_dtype_size(sorted[i].dtype);
    }
    memcpy(f->outs, sorted, n * sizeof *sorted);
    for (size_t i = 0; i < f->nitems; i++) {
        cv_item *it = &f->items[i];
        if (it->out_main >= 0)
            it->out_main = rank[it->out_main];
        if (it->out_scale >= 0)
            it->out_scale = rank[it->out_scale];
    }
    free(perm), free(rank), free(sorted);
    /* metadata: kept, minus any old "quantization" entry, plus ours */
    const st_file *in = f->in;
    f->meta = calloc(in->nmeta + 1, sizeof *f->meta);
    if (!f->meta)
        return cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < in->nmeta; i++)
        if (strcmp(in->meta[i].key, "quantization"))
            f->meta[f->nmeta++] = in->meta[i];
    f->has_meta = in->has_meta;
    if (!o->dequantize) {
        f->meta[f->nmeta].key = (char *)"quantization";
        f->meta[f->nmeta++].value = c->quant_json;
        f->has_meta = 1;
    }
    char herr[400];
    fp8kit_status st = st_header_build(f->outs, f->nouts, f->meta, f->nmeta, f->has_meta, &f->header,
                                       &f->header_len, &f->data_size, herr, sizeof herr);
    if (st)
        return cv_fail(c, st, "%s: output header: %s", f->in->path, herr);
    if (f->data_size != off)
        return cv_fail(c, FP8KIT_ERR_INTERNAL, "%s: header and layout disagree", f->in->path);
    return FP8KIT_OK;
}

void cv_quant_json(cv *c)
{
    const st_conv_opts *o = c->o;
    int mx = o->scheme == ST_SCHEME_MXFP8;
    snprintf(c->quant_json, sizeof c->quant_json,
             "{\"tool\":\"fp8kit\",\"version\":\"%s\",\"scheme\":\"%s\",\"format\":\"F8_E4M3\","
             "\"scale\":\"%s\",\"scale_dtype\":\"%s\",\"%s\":%s%s%s%s}",
             fp8kit_version_string(), st_scheme_name(o->scheme),
             o->scheme == ST_SCHEME_FP8_BLOCK ? "weight_scale_inv" : "weight_scale", mx ? "F8_E8M0" : "F32",
             mx ? "rounding" : "pow2",
             mx ? (o->rounding == FP8KIT_ROUND_RCEIL ? "\"rceil\"" : "\"floor\"") : (o->pow2 ? "true" : "false"),
             o->scheme == ST_SCHEME_FP8_BLOCK ? ",\"block\":[128,128]" : "", mx ? ",\"block\":32" : "",
             o->scheme == ST_SCHEME_FP8_ROW ? ",\"group\":\"row\"" : "");
}

