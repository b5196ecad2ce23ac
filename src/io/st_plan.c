/* st_plan.c - planning half of the checkpoint converter (docs/spec.md section 5):
 * decides for every input tensor whether it is quantized (2-D F32/F16/BF16
 * "*.weight", not excluded), dequantized (an fp8 weight with the scale tensor
 * of one format whose dtype and shape identify the scheme), dropped (a
 * scale consumed by dequantization) or copied; names and shapes the outputs,
 * lays them out largest element size first, and builds the header with the
 * kept metadata plus a "quantization" entry. What differs between formats
 * (names, dtypes, shapes, quantization_config) comes from their rows
 * (st_format.c). Nothing is written here. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/geometry.h"
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

const char *st_keep_reason_text(st_keep_reason r)
{
    switch (r) {
    case ST_KEEP_EMBEDDING: return "embedding (loaders read embeddings in high precision; --include to force)";
    case ST_KEEP_LM_HEAD: return "output projection (kept by default; --quantize-all to quantize)";
    case ST_KEEP_ROUTER: return "MoE router gate (loaders read routers in high precision; --include to force)";
    case ST_KEEP_EXCLUDED: return "matched --exclude";
    case ST_KEEP_SHAPE:
        return "its shape does not fit the scheme as the loaders read it (mxfp8: K a multiple of 32; "
               "fp8-block: K, and with --format fp8 also N, a multiple of 128)";
    }
    return "?";
}

/* Does glob g match the tensor's name, or its module's (the name without
 * ".weight")? */
static int cv_glob_matches(const char *g, const char *name)
{
    if (!fnmatch(g, name, 0))
        return 1;
    size_t n = strlen(name);
    if (n > 7 && !strcmp(name + n - 7, ".weight")) {
        char mod[512];
        if (n - 7 < sizeof mod) {
            memcpy(mod, name, n - 7);
            mod[n - 7] = '\0';
            return !fnmatch(g, mod, 0);
        }
    }
    return 0;
}

static int cv_excluded(const st_conv_opts *o, const char *name)
{
    for (int i = 0; i < o->nexclude; i++)
        if (cv_glob_matches(o->exclude[i], name))
            return 1;
    return 0;
}

static int cv_included(const st_conv_opts *o, const char *name)
{
    for (int i = 0; i < o->ninclude; i++)
        if (cv_glob_matches(o->include[i], name))
            return 1;
    return 0;
}

/* Does the scheme, in the output format, take an N x K weight the way its
 * loaders read it (tests/consumers/FORMATS.md section 4)? */
static int cv_shape_fits(st_scheme s, const st_format_row *f, int64_t N, int64_t K)
{
    if (s == ST_SCHEME_MXFP8)
        return K % 32 == 0;
    if (s == ST_SCHEME_FP8_BLOCK)
        return K % 128 == 0 && (!f->block_whole_n || N % 128 == 0);
    return 1;
}

int cv_exclude_matches(const char *glob, const char *name) { return cv_glob_matches(glob, name); }

/* The last component of a module path ("model.layers.0.mlp.gate" -> "gate"),
 * given a tensor name ending in ".weight". */
static void cv_leaf(const char *name, char *out, size_t n)
{
    size_t len = strlen(name);
    if (len > 7 && !strcmp(name + len - 7, ".weight"))
        len -= 7;
    size_t b = len;
    while (b > 0 && name[b - 1] != '.')
        b--;
    size_t k = len - b < n - 1 ? len - b : n - 1;
    memcpy(out, name + b, k);
    out[k] = '\0';
}

/* docs/spec.md 5's default excludes: which of them a weight is, if any. */
static int cv_default_keep(const char *name, st_keep_reason *why)
{
    char leaf[128];
    cv_leaf(name, leaf, sizeof leaf);
    if (!strcmp(leaf, "lm_head") || !strcmp(name, "output.weight") || !strcmp(leaf, "embed_out"))
        return *why = ST_KEEP_LM_HEAD, 1; /* before embeddings: GPT-NeoX's head is "embed_out" */
    if (strstr(leaf, "embed") || !strcmp(leaf, "wte") || !strcmp(leaf, "wpe") || !strcmp(leaf, "tok_embeddings"))
        return *why = ST_KEEP_EMBEDDING, 1;
    if (!strcmp(leaf, "gate") || !strcmp(leaf, "router") || !strcmp(leaf, "shared_expert_gate") ||
        !strcmp(leaf, "router_gate"))
        return *why = ST_KEEP_ROUTER, 1;
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
static const st_tensor *cv_lookup(json_t *names, const cv_file *files, const char *name, const st_file **file)
{
    json_t *v = json_object_get(names, name);
    if (!v)
        return NULL;
    json_int_t id = json_integer_value(v);
    if (file)
        *file = files[id >> 32].in;
    return &files[id >> 32].in->tensors[id & 0xFFFFFFFF];
}

typedef struct cv_lookup_ctx {
    json_t *names;
    const cv_file *files;
} cv_lookup_ctx;

static const st_tensor *cv_lookup_fn(void *user, const char *name, const st_file **in)
{
    const cv_lookup_ctx *l = user;
    return cv_lookup(l->names, l->files, name, in);
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

/* The scales of an N x K weight under scheme s as a checkpoint stores them: the
 * plain layout's matrix of format/geometry.h (exactly the grid, no padding: tensor
 * 1 x 1, row N x 1, 1x128 N x ceil(K/128), 128x128 ceil(N/128) x ceil(K/128), mx
 * N x K/32). 0 when the geometry does not define it (mx: K not a multiple of 32). */
static int cv_scale_grid(fp8kit_scheme s, int64_t N, int64_t K, int64_t shape[2])
{
    fk_scale_geom g;
    if (fk_quant_scale_geom((int)s, FK_GEO_PLAIN, -1, N, K, &g) != FK_GEO_OK)
        return 0;
    shape[0] = g.rows, shape[1] = g.cols;
    return 1;
}

/* Is sc, 2-D, the scale matrix of the N x K weight under scheme s? */
static int cv_is_grid(const st_tensor *sc, fp8kit_scheme s, int64_t N, int64_t K)
{
    int64_t shape[2];
    return cv_scale_grid(s, N, K, shape) && cv_same_shape(sc, 2, shape);
}

static void cv_shape_text(const st_tensor *t, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < n)
        snprintf(buf + o, n - o, "]");
}

/* Dequantize: which scheme the scale tensor sc of the fp8 weight w encodes in
 * the given format (its row says whether a [N, ceil(K/128)] grid is 1x128 and
 * whether a 128x128 grid comes first); fp32 scales may be stored as F32, BF16 or F16
 * (widened exactly), a per-tensor scale as [], [1] or [1, 1], e8m0 scales as
 * F8_E8M0 or as U8 bytes. */
int st_scale_scheme(const st_tensor *w, const st_tensor *sc, st_format format, fp8kit_scheme *scheme, int64_t *R,
                    int64_t *C)
{
    const st_format_row *f = st_format_row_of(format);
    if (!f)
        return 0;
    int64_t n1 = st_numel(sc);
    int fscale = sc->dtype == ST_F32 || sc->dtype == ST_BF16 || sc->dtype == ST_F16;
    int escale = sc->dtype == ST_F8_E8M0 || sc->dtype == ST_U8;
    int one = fscale && n1 == 1 && sc->ndim <= 2; /* [], [1] or [1, 1] (transformers' per-tensor MoE experts) */
    if (w->ndim == 2) {
        int64_t N = w->shape[0], K = w->shape[1];
        *R = N, *C = K;
        if (fscale && f->block_first && cv_is_grid(sc, FP8KIT_SCHEME_BLOCK128X128, N, K))
            return *scheme = FP8KIT_SCHEME_BLOCK128X128, 1;
        if (one)
            return *scheme = FP8KIT_SCHEME_TENSOR, 1;
        if (fscale && cv_is_grid(sc, FP8KIT_SCHEME_ROW, N, K))
            return *scheme = FP8KIT_SCHEME_ROW, 1;
        if (fscale && f->reads_1x128 && cv_is_grid(sc, FP8KIT_SCHEME_BLOCK1X128, N, K))
            return *scheme = FP8KIT_SCHEME_BLOCK1X128, 1;
        if (fscale && cv_is_grid(sc, FP8KIT_SCHEME_BLOCK128X128, N, K))
            return *scheme = FP8KIT_SCHEME_BLOCK128X128, 1;
        if (escale && cv_is_grid(sc, FP8KIT_SCHEME_MX, N, K))
            return *scheme = FP8KIT_SCHEME_MX, 1;
        return 0;
    }
    if (w->ndim <= 4 && one) { /* any rank: one scale */
        *C = w->ndim ? w->shape[w->ndim - 1] : 1;
        *R = *C ? st_numel(w) / *C : 0;
        return *scheme = FP8KIT_SCHEME_TENSOR, 1;
    }
    return 0;
}

int st_is_fp8_weight(const st_tensor *t) { return t->dtype == ST_F8_E4M3 || t->dtype == ST_F8_E5M2; }

fp8kit_status st_fp8_classify(const st_tensor *w, st_find_fn find, void *user, st_fp8_info *out)
{
    memset(out, 0, sizeof *out);
    int found = 0;
    for (int f = ST_FORMAT_DEFAULT + 1; f < ST_FORMAT_COUNT; f++) {
        char *name = cv_concat(w->name, st_format_row_of((st_format)f)->scale_suffix);
        if (!name)
            return FP8KIT_ERR_OUT_OF_MEMORY;
        const st_file *in = NULL;
        const st_tensor *t = find(user, name, &in);
        free(name);
        if (!t)
            continue;
        if (found++) { /* a second companion */
            out->format2 = (st_format)f;
            continue;
        }
        out->scale = t, out->scale_in = in, out->format = (st_format)f;
    }
    if (found > 1)
        out->state = ST_FP8_AMBIGUOUS;
    else if (!found)
        out->state = ST_FP8_NO_SCALE;
    else
        out->state = st_scale_scheme(w, out->scale, out->format, &out->scheme, &out->R, &out->C) ? ST_FP8_OK
                                                                                                : ST_FP8_BAD_SCALE;
    return FP8KIT_OK;
}

void st_fp8_problem(const st_tensor *w, const st_fp8_info *info, char *out, size_t outlen)
{
    char wq[160], sq[160], ws[96], ss[96];
    st_quote(w->name, wq, sizeof wq);
    cv_shape_text(w, ws, sizeof ws);
    switch (info->state) {
    case ST_FP8_OK: snprintf(out, outlen, "tensor '%s': valid", wq); break;
    case ST_FP8_NO_SCALE: {
        char names[300] = "";
        size_t o = 0;
        for (int f = ST_FORMAT_DEFAULT + 1; f < ST_FORMAT_COUNT && o < sizeof names; f++)
            o += (size_t)snprintf(names + o, sizeof names - o, "%s'%s%s'", o ? " or " : "", wq,
                                  st_format_row_of((st_format)f)->scale_suffix);
        snprintf(out, outlen,
                 "tensor '%s' (%s %s) has no scale tensor (%s): it cannot be dequantized (--exclude it to copy it "
                 "unchanged)",
                 wq, st_dtype_name(w->dtype), ws, names);
        break;
    }
    case ST_FP8_AMBIGUOUS:
        snprintf(out, outlen, "tensor '%s' has both a '%s%s' and a '%s%s' tensor: which one applies is ambiguous", wq,
                 wq, st_format_row_of(info->format)->scale_suffix, wq, st_format_row_of(info->format2)->scale_suffix);
        break;
    case ST_FP8_BAD_SCALE:
        st_quote(info->scale->name, sq, sizeof sq);
        cv_shape_text(info->scale, ss, sizeof ss);
        snprintf(out, outlen, "tensor '%s' (%s %s) does not fit any scale scheme for the weight '%s' (%s %s)", sq,
                 st_dtype_name(info->scale->dtype), ss, wq, st_dtype_name(w->dtype), ws);
        break;
    }
}

/* st_find_fn over an array of files (inspect). */
typedef struct cv_files_view {
    const st_file *const *files;
    size_t n;
} cv_files_view;

static const st_tensor *cv_find_in_files(void *user, const char *name, const st_file **in)
{
    const cv_files_view *v = user;
    for (size_t g = 0; g < v->n; g++) {
        const st_tensor *t = st_find(v->files[g], name);
        if (t) {
            *in = v->files[g];
            return t;
        }
    }
    return NULL;
}

size_t st_describe_quant(const st_file *const *files, size_t nfiles, char *out, size_t outlen, char *first,
                         size_t firstlen)
{
    static const char *names[] = {"tensor", "row", "1x128", "128x128", "mx"};
    static const char *bad_text[] = {"", "without a scale tensor", "with two scale tensors (ambiguous)",
                                     "whose scale fits no scheme"};
    int64_t count[ST_FORMAT_COUNT][5] = {{0}}, fp8 = 0, bad[4] = {0};
    cv_files_view view = {files, nfiles};
    if (first && firstlen)
        first[0] = '\0';
    for (size_t f = 0; f < nfiles; f++)
        for (size_t i = 0; i < files[f]->ntensors; i++) {
            const st_tensor *w = &files[f]->tensors[i];
            if (!st_is_fp8_weight(w))
                continue;
            fp8++;
            st_fp8_info info;
            if (st_fp8_classify(w, cv_find_in_files, &view, &info)) {
                snprintf(out, outlen, "? (out of memory)");
                return 1;
            }
            if (info.state == ST_FP8_OK && (unsigned)info.scheme < 5) {
                count[info.format][info.scheme]++;
                continue;
            }
            if (info.state == ST_FP8_OK) /* a scheme the line has no name for: cannot happen */
                info.state = ST_FP8_BAD_SCALE;
            if (!bad[1] && !bad[2] && !bad[3] && first && firstlen)
                st_fp8_problem(w, &info, first, firstlen);
            bad[info.state]++;
        }
    size_t o = 0;
    out[0] = '\0';
    if (!fp8) {
        snprintf(out, outlen, "not quantized (no fp8 tensors)");
        return 0;
    }
    for (int f = ST_FORMAT_DEFAULT + 1; f < ST_FORMAT_COUNT; f++)
        for (int s = 0; s < 5; s++)
            if (count[f][s] && o < outlen)
                o += (size_t)snprintf(out + o, outlen - o, "%s%s (%s): %lld weights %s", o ? "; " : "",
                                      st_format_row_of((st_format)f)->name,
                                      st_format_row_of((st_format)f)->scale_key, (long long)count[f][s], names[s]);
    for (int k = 1; k < 4; k++)
        if (bad[k] && o < outlen)
            o += (size_t)snprintf(out + o, outlen - o, "%sinvalid: %lld fp8 tensor%s %s", o ? "; " : "",
                                  (long long)bad[k], bad[k] == 1 ? "" : "s", bad_text[k]);
    return (size_t)(bad[1] + bad[2] + bad[3]);
}

static int cv_cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
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
            if (t->dtype == ST_F8_E4M3 || t->dtype == ST_F8_E5M2 || t->dtype == ST_F8_E8M0) {
                st = cv_fail(c, FP8KIT_ERR_INVALID_ARGUMENT,
                             "%s: tensor '%s' is already %s: the input is an fp8 checkpoint (dequantize it "
                             "first with 'fp8kit dequantize')",
                             in->path ? in->path : "input", tq, st_dtype_name(t->dtype));
                break;
            }
            st_keep_reason why;
            int weight = t->ndim == 2 && (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16) &&
                         cv_ends_with(t->name, ".weight");
            int keep = 0;
            if (weight && cv_excluded(o, t->name))
                keep = 1, why = ST_KEEP_EXCLUDED;
            else if (weight && !cv_included(o, t->name) && cv_default_keep(t->name, &why) &&
                     !(o->quantize_all && why == ST_KEEP_LM_HEAD))
                keep = 1;
            else if (weight && !cv_shape_fits(o->scheme, st_format_row_of(c->format), t->shape[0], t->shape[1]))
                keep = 1, why = ST_KEEP_SHAPE;
            if (keep) {
                it->kept = 1;
                c->stats->kept++;
                if (o->note)
                    o->note(o->note_user, t->name, why);
            }
            if (weight && !keep) {
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
                it->scale_name = cv_concat(t->name, st_format_row_of(c->format)->scale_suffix);
                if (!it->scale_name) {
                    st = cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
                    break;
                }
                if (cv_lookup(names, files, it->scale_name, NULL)) {
                    char sq[160];
                    st_quote(it->scale_name, sq, sizeof sq);
                    st = cv_fail(c, FP8KIT_ERR_INVALID_ARGUMENT,
                                 "tensor '%s': the input already has a tensor '%s', the name its scale would get "
                                 "(already quantized? exclude it with --exclude)",
                                 tq, sq);
                    break;
                }
            }
        } else if (st_is_fp8_weight(t)) {
            c->fp8_total++;
            if (cv_excluded(o, t->name))
                continue;
            st_fp8_info info;
            cv_lookup_ctx lc = {names, files};
            if (st_fp8_classify(t, cv_lookup_fn, &lc, &info)) {
                st = cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
                break;
            }
            if (info.state != ST_FP8_OK) {
                char why[700];
                st_fp8_problem(t, &info, why, sizeof why);
                st = cv_fail(c, FP8KIT_ERR_CORRUPT_FILE, "%s: %s", in->path ? in->path : "input", why);
                break;
            }
            fp8kit_quant_desc d = fp8kit_quant_desc_default(info.scheme);
            d.elem = t->dtype == ST_F8_E5M2 ? FP8KIT_E5M2 : FP8KIT_E4M3;
            it->act = CV_DEQUANT;
            it->scale = info.scale;
            it->scale_in = info.scale_in;
            it->desc = d;
            it->R = info.R, it->C = info.C;
            c->seen_conv |= 1u << info.format;
            c->fp8_planned++;
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

/* A per-expert MoE weight ("...experts.<e>...."): transformers' FP8Experts
 * stacks their per-tensor scales, which must then be [1, 1]
 * (tests/consumers/FORMATS.md section 3). */
static int cv_is_expert(const char *name)
{
    const char *p = strstr(name, ".experts.");
    return p && p[9] >= '0' && p[9] <= '9';
}

void cv_loader_warnings(cv *c, const cv_file *files, size_t nfiles)
{
    const st_conv_opts *o = c->o;
    const st_format_row *fr = st_format_row_of(c->format);
    int experts_warn = fr && (fr->expert_unloadable & (1u << o->scheme)),
        wide_warn = fr && fr->mx_bf16_only && o->scheme == ST_SCHEME_MXFP8;
    if (o->dequantize || !o->warn || (!experts_warn && !wide_warn))
        return;
    const char *other = st_format_name(st_format_other(o->scheme, c->format));
    int64_t experts = 0, wide = 0;
    const char *first = NULL, *wide_dt = NULL;
    for (size_t f = 0; f < nfiles; f++)
        for (size_t i = 0; i < files[f].nitems; i++) {
            const cv_item *it = &files[f].items[i];
            if (it->act != CV_QUANT)
                continue;
            if (experts_warn && cv_is_expert(it->src->name) && !experts++)
                first = it->src->name;
            if (wide_warn && it->src->dtype != ST_BF16 && !wide++)
                wide_dt = it->src->dtype == ST_F16 ? "float16" : "float32";
        }
    char msg[1200], q[200];
    if (experts) {
        st_quote(first, q, sizeof q);
        snprintf(msg, sizeof msg,
                 "%lld MoE expert weight%s (e.g. '%s') quantized with %s in the %s format: "
                 "transformers (5.24) cannot load %s (its fused-expert dequantization multiplies each weight by its "
                 "scale elementwise, which only per-tensor and per-channel scales survive); vLLM reads them through "
                 "its own MoE path. For transformers, keep the experts in high precision (--exclude '*.experts.*') "
                 "or use --format %s",
                 (long long)experts, experts == 1 ? "" : "s", q, st_scheme_name(o->scheme), fr->name,
                 experts == 1 ? "it" : "them", other);
        o->warn(o->note_user, msg);
    }
    if (wide) {
        snprintf(msg, sizeof msg,
                 "%lld weight%s quantized with mxfp8 in the %s format %s %s, not bfloat16: "
                 "%s decompresses mxfp8 weights to bfloat16 only, so a %s model fails at its first "
                 "forward in its default load path; load it with dtype=torch.bfloat16 or "
                 "CompressedTensorsConfig(dequantize=True), or use --format %s",
                 (long long)wide, wide == 1 ? "" : "s", fr->name, wide == 1 ? "is" : "are", wide_dt, fr->name, wide_dt,
                 other);
        o->warn(o->note_user, msg);
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
            const st_format_row *fr = st_format_row_of(c->format);
            int64_t ss[2] = {0, 0};
            int snd = 2;
            st_dtype sdt = fr->fp32_scale;
            if (!cv_scale_grid(it->desc.scheme, it->R, it->C, ss)) /* cv_shape_fits kept the others */
                return cv_fail(c, FP8KIT_ERR_INTERNAL, "tensor '%s': no scale geometry for its shape", t->name);
            if (it->desc.scheme == FP8KIT_SCHEME_TENSOR) /* [], [1] or [1, 1]: the row says, experts apart */
                snd = cv_is_expert(t->name) ? fr->expert_tensor_rank : fr->tensor_rank;
            else if (it->desc.scheme == FP8KIT_SCHEME_MX)
                sdt = fr->mx_scale; /* e8m0 bytes */
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
        uint64_t bytes = 0;
        if (st_shape_bytes(sorted[i].dtype, sorted[i].ndim, sorted[i].shape, &bytes) ||
            off > (uint64_t)INT64_MAX - bytes) {
            char q[160];
            st_quote(sorted[i].name, q, sizeof q);
            free(perm), free(rank), free(sorted);
            return cv_fail(c, FP8KIT_ERR_SIZE_OVERFLOW,
                           "%s: output tensor '%s': its byte size (or the file's) overflows int64", f->in->path, q);
        }
        f->out_off[i] = off;
        off += bytes;
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
        if (strcmp(in->meta[i].key, "quantization") || (o->dequantize && !c->deq_complete))
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
    if (st) /* an output the format cannot hold (over 100 MB of header): not a refused argument */
        return cv_fail(c, st == FP8KIT_ERR_INVALID_ARGUMENT ? FP8KIT_ERR_UNSUPPORTED : st, "%s: output header: %s",
                       f->in->path, herr);
    if (f->data_size != off)
        return cv_fail(c, FP8KIT_ERR_INTERNAL, "%s: header and layout disagree", f->in->path);
    return FP8KIT_OK;
}

void cv_quant_json(cv *c)
{
    const st_conv_opts *o = c->o;
    const st_format_row *fr = st_format_row_of(c->format);
    int mx = o->scheme == ST_SCHEME_MXFP8;
    snprintf(c->quant_json, sizeof c->quant_json,
             "{\"tool\":\"fp8kit\",\"version\":\"%s\",\"scheme\":\"%s\",\"format\":\"%s\","
             "\"weight_dtype\":\"F8_E4M3\",\"scale\":\"%s\",\"scale_dtype\":\"%s\",\"%s\":%s%s%s%s}",
             fp8kit_version_string(), st_scheme_name(o->scheme), fr->name, fr->scale_key,
             st_dtype_name(mx ? fr->mx_scale : fr->fp32_scale),
             mx ? "rounding" : "pow2",
             mx ? (o->rounding == FP8KIT_ROUND_RCEIL ? "\"rceil\"" : "\"floor\"") : (o->pow2 ? "true" : "false"),
             o->scheme == ST_SCHEME_FP8_BLOCK ? ",\"block\":[128,128]" : "", mx ? ",\"block\":32" : "",
             o->scheme == ST_SCHEME_FP8_ROW ? ",\"group\":\"row\"" : "");
}

/* ------------------------------------------------------ quantization_config */
static int c_has_tensor(const cv_file *files, size_t nfiles, const char *name)
{
    for (size_t f = 0; f < nfiles; f++)
        if (st_find(files[f].in, name))
            return 1;
    return 0;
}

/* The modules left in high precision, sorted: kept weights' names without
 * ".weight" (and lm_head when the embeddings are tied, as loaders expect). */
static json_t *cv_ignore_list(const cv_file *files, size_t nfiles, int tied_head)
{
    json_t *set = json_object(), *arr = json_array();
    if (tied_head && !c_has_tensor(files, nfiles, "lm_head.weight"))
        json_object_set_new(set, "lm_head", json_true());
    for (size_t f = 0; f < nfiles; f++)
        for (size_t i = 0; i < files[f].nitems; i++) {
            const cv_item *it = &files[f].items[i];
            if (!it->kept)
                continue;
            size_t n = strlen(it->src->name);
            char *mod = strndup(it->src->name, n - 7); /* kept items end in ".weight" */
            if (mod)
                json_object_set_new(set, mod, json_true());
            free(mod);
        }
    const char **keys = calloc(json_object_size(set) + 1, sizeof *keys);
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach(set, key, v) keys[k++] = key;
    qsort(keys, k, sizeof *keys, cv_cmp_str);
    for (size_t i = 0; i < k; i++)
        json_array_append_new(arr, json_string(keys[i]));
    free(keys);
    json_decref(set);
    return arr;
}

json_t *cv_quant_config(cv *c, const cv_file *files, size_t nfiles, int tied_head)
{
    json_t *ignore = cv_ignore_list(files, nfiles, tied_head);
    return ignore ? st_format_row_of(c->format)->quant_config(c->o->scheme, c->o->pow2, ignore) : NULL;
}
