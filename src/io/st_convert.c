/* st_convert.c - executing half of the checkpoint converter behind `fp8kit
 * quantize` and `fp8kit dequantize` (the plan comes from st_plan.c, made
 * completely before anything is written): streams the tensors in row slabs
 * through the public fp8kit_quantize / fp8kit_dequantize (host buffers, or
 * device buffers through st_mem_ops) and writes them with pwrite at their
 * planned offsets into a temporary file renamed into place at the end.
 * Sharded checkpoints are written into a temporary directory next to OUT
 * with a new index, then moved into place. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/codec.h"
#include "format/geometry.h"
#include "io/st_config.h"
#include "io/st_conv.h"
#include "io/st_model.h"

#define CV_DEFAULT_SLAB ((size_t)64 << 20)

static double cv_elapsed(const cv *c)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - c->t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - c->t0.tv_nsec);
}

static void cv_progress(cv *c, int final)
{
    c->stats->seconds = cv_elapsed(c);
    if (c->o->progress)
        c->o->progress(c->o->progress_user, c->stats, final);
}

/* ----------------------------------------------------------------- buffers */
static void cv_buf_free(cv *c, cv_buf *b)
{
    if (b->p) {
        if (b->dev)
            c->mem->free(c->mem->user, b->p);
        else
            free(b->p);
    }
    b->p = NULL;
    b->cap = 0;
}

static fp8kit_status cv_buf_need(cv *c, cv_buf *b, size_t n)
{
    if (b->p && b->cap >= n)
        return FP8KIT_OK;
    cv_buf_free(c, b);
    size_t cap = (n ? n : 1) + 4095;
    cap -= cap % 4096;
    b->p = b->dev ? c->mem->alloc(c->mem->user, cap) : aligned_alloc(4096, cap);
    if (!b->p)
        return cv_fail(c, b->dev ? FP8KIT_ERR_DEVICE : FP8KIT_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes%s%s",
                       cap, b->dev ? " of device memory: " : "",
                       b->dev && c->mem->last_error ? c->mem->last_error(c->mem->user) : "");
    b->cap = cap;
    return FP8KIT_OK;
}

static fp8kit_status cv_upload(cv *c, void *dst, const void *src, size_t n, const char *tq)
{
    if (n && c->mem->upload(c->mem->user, dst, src, n))
        return cv_fail(c, FP8KIT_ERR_DEVICE, "tensor '%s': copy to the device failed: %s", tq,
                       c->mem->last_error ? c->mem->last_error(c->mem->user) : "?");
    return FP8KIT_OK;
}

static fp8kit_status cv_download(cv *c, void *dst, const void *src, size_t n, const char *tq)
{
    if (n && c->mem->download(c->mem->user, dst, src, n))
        return cv_fail(c, FP8KIT_ERR_DEVICE, "tensor '%s': copy from the device failed: %s", tq,
                       c->mem->last_error ? c->mem->last_error(c->mem->user) : "?");
    return FP8KIT_OK;
}

/* --------------------------------------------------------------- execution */
/* Rows of one slab: whole scale groups along the rows (format/geometry.h's gh: 128
 * for 128x128, 1 for row, 1x128 and mx; the tensor scheme's one scale serves every
 * slab). */
static int64_t cv_slab_rows(const cv *c, const cv_item *it, size_t row_bytes, int whole)
{
    if (whole || !row_bytes)
        return it->R;
    fk_scale_geom g;
    int64_t gh = 1;
    if (it->desc.scheme != FP8KIT_SCHEME_TENSOR &&
        fk_quant_scale_geom((int)it->desc.scheme, (int)it->desc.scale_layout, it->desc.axis, it->R, it->C, &g) ==
            FK_GEO_OK)
        gh = g.gh;
    int64_t rs = (int64_t)(c->slab / row_bytes);
    rs = rs / gh * gh;
    if (rs < gh)
        rs = gh;
    return rs < it->R ? rs : it->R;
}

static size_t cv_tbytes(const fp8kit_tensor *t)
{
    return (size_t)fp8kit_tensor_numel(t) * fp8kit_dtype_size(t->dtype);
}

static fp8kit_status cv_lib_fail(cv *c, fp8kit_status st, const char *fn, const char *tq)
{
    return cv_fail(c, st, "tensor '%s': %s failed: %s (%s)", tq, fn, fp8kit_last_error(c->ctx),
                   fp8kit_status_string(st));
}

/* Before each slab read from a mapping: the file must still hold what was
 * mapped (a truncated input fails here, cleanly, rather than with SIGBUS). */
static fp8kit_status cv_check_in(cv *c, const st_file *f)
{
    return f ? st_check_size(f, c->err, c->errlen) : FP8KIT_OK;
}

static fp8kit_status cv_copy(cv *c, uint64_t at, const st_tensor *t)
{
    uint64_t n = t->end - t->begin, done = 0;
    while (done < n) { /* written by the pipe's thread straight from the mapping */
        size_t k = n - done < c->slab ? (size_t)(n - done) : c->slab;
        fp8kit_status st = cv_check_in(c, c->in);
        if (!st)
            st = st_pipe_submit_mapped(c->pipe, t->data + done, k, at + done, c->in ? c->in->path : NULL, c->err,
                                       c->errlen);
        if (st)
            return st;
        done += k;
        c->stats->in_bytes_done += k;
        cv_progress(c, 0);
    }
    return FP8KIT_OK;
}

static fp8kit_status cv_quant(cv *c, uint64_t base, const cv_file *f, const cv_item *it)
{
    const st_tensor *t = it->src;
    char tq[160];
    st_quote(t->name, tq, sizeof tq);
    fp8kit_dtype xd;
    cv_fk_dtype(t->dtype, &xd);
    const size_t es = st_dtype_size(t->dtype);
    const int64_t N = it->R, K = it->C;
    const uint64_t qoff = base + f->out_off[it->out_main], soff = base + f->out_off[it->out_scale];
    const st_out_tensor *so = &f->outs[it->out_scale];
    size_t sbytes = st_dtype_size(so->dtype);
    for (int d = 0; d < so->ndim; d++)
        sbytes *= (size_t)so->shape[d];
    fp8kit_status st;
    int sslot = -1, qslot = -1;
    unsigned char *sbuf = st_pipe_acquire(c->pipe, sbytes, &sslot, &st, c->err, c->errlen), *qbuf;
    if (!sbuf)
        return st;
    if (N == 0 || K == 0) { /* empty groups: amax = 0, S = 1 (docs/spec.md 2.1) */
        if (so->dtype == ST_F32)
            for (size_t i = 0; i < sbytes / 4; i++)
                memcpy(sbuf + 4 * i, &(float){1.0f}, 4);
        return st_pipe_submit(c->pipe, sslot, sbuf, sbytes, soff, c->err, c->errlen);
    }
    const int64_t rs = cv_slab_rows(c, it, (size_t)K * es, it->desc.scheme == FP8KIT_SCHEME_TENSOR);
    const int dev = c->mem != NULL;
    size_t sdone = 0;
    for (int64_t r0 = 0; r0 < N; r0 += rs) {
        int64_t nr = N - r0 < rs ? N - r0 : rs, shape[2] = {nr, K};
        size_t xb = (size_t)(nr * K) * es, qb = (size_t)(nr * K);
        const unsigned char *src = t->data + (size_t)r0 * (size_t)K * es;
        if (dev && r0 + rs < N) /* map the next slab while this one is copied */
            st_pipe_prefetch(c->pipe, src + xb, (size_t)((N - r0 - rs < rs ? N - r0 - rs : rs) * K) * es);
        fp8kit_tensor x = fp8kit_tensor_make(NULL, xd, 2, shape), q, s;
        if ((st = cv_check_in(c, c->in)))
            goto fail;
        if ((st = fp8kit_quant_shapes(&it->desc, &x, &q, &s))) {
            st = cv_lib_fail(c, st, "fp8kit_quant_shapes", tq);
            goto fail;
        }
        size_t sb = cv_tbytes(&s);
        if (sdone + sb > sbytes) {
            st = cv_fail(c, FP8KIT_ERR_INTERNAL, "tensor '%s': scale slabs overrun the scale tensor", tq);
            goto fail;
        }
        if (!(qbuf = st_pipe_acquire(c->pipe, qb, &qslot, &st, c->err, c->errlen)))
            goto fail;
        if (dev) {
            if ((st = cv_buf_need(c, &c->dx, xb)) || (st = cv_buf_need(c, &c->dq, qb)) ||
                (st = cv_buf_need(c, &c->ds, sb)) || (st = cv_upload(c, c->dx.p, src, xb, tq)))
                goto fail;
            x.data = c->dx.p, q.data = c->dq.p, s.data = c->ds.p;
        } else {
            if ((uintptr_t)src % es) { /* foreign file with an unaligned tensor */
                if ((st = cv_buf_need(c, &c->hx, xb)))
                    goto fail;
                memcpy(c->hx.p, src, xb);
                src = c->hx.p;
            }
            x.data = (void *)src, q.data = qbuf, s.data = sbuf + sdone;
        }
        if ((st = fp8kit_quantize(c->ctx, &it->desc, &x, &q, &s, NULL))) {
            st = cv_lib_fail(c, st, "fp8kit_quantize", tq);
            goto fail;
        }
        if (dev && ((st = cv_download(c, qbuf, c->dq.p, qb, tq)) ||
                    (st = cv_download(c, sbuf + sdone, c->ds.p, sb, tq))))
            goto fail;
        st = st_pipe_submit(c->pipe, qslot, qbuf, qb, qoff + (uint64_t)r0 * (uint64_t)K, c->err, c->errlen);
        qslot = -1;
        if (st)
            goto fail;
        sdone += sb;
        c->stats->in_bytes_done += xb;
        cv_progress(c, 0);
    }
    if (sdone != sbytes) {
        st = cv_fail(c, FP8KIT_ERR_INTERNAL, "tensor '%s': %zu of %zu scale bytes produced", tq, sdone, sbytes);
        goto fail;
    }
    return st_pipe_submit(c->pipe, sslot, sbuf, sbytes, soff, c->err, c->errlen);
fail:
    if (qslot >= 0)
        st_pipe_release(c->pipe, qslot);
    st_pipe_release(c->pipe, sslot);
    return st;
}

static fp8kit_status cv_dequant(cv *c, uint64_t base, const cv_file *f, const cv_item *it)
{
    const st_tensor *t = it->src, *sc = it->scale;
    char tq[160];
    st_quote(t->name, tq, sizeof tq);
    fp8kit_dtype qd, yd = c->o->out_dtype;
    cv_fk_dtype(t->dtype, &qd);
    const size_t yes = fp8kit_dtype_size(yd);
    const int64_t N = it->R, K = it->C;
    const uint64_t yoff = base + f->out_off[it->out_main];
    const size_t sin = (size_t)(sc->end - sc->begin);
    const int wide = sc->dtype == ST_BF16 || sc->dtype == ST_F16; /* widened to f32 (exact) */
    const size_t sbytes = wide ? sin * 2 : sin;
    c->stats->in_bytes_done += sin;
    if (N == 0 || K == 0)
        return FP8KIT_OK;
    const int dev = c->mem != NULL;
    /* the scales, aligned (a foreign file may leave f32 scales unaligned) */
    fp8kit_status st = cv_buf_need(c, &c->hs, sbytes);
    if (!st)
        st = cv_check_in(c, it->scale_in);
    if (st)
        return st;
    if (wide) {
        float *hs = c->hs.p;
        for (size_t i = 0; i < sin / 2; i++) {
            uint16_t h;
            memcpy(&h, sc->data + 2 * i, 2);
            hs[i] = sc->dtype == ST_BF16 ? fk_bf16_to_f32(h) : fk_f16_to_f32(h);
        }
    } else {
        memcpy(c->hs.p, sc->data, sin);
    }
    if (dev && ((st = cv_buf_need(c, &c->ds, sbytes)) || (st = cv_upload(c, c->ds.p, c->hs.p, sbytes, tq))))
        return st;
    const int64_t rs = cv_slab_rows(c, it, (size_t)K * yes, 0);
    size_t sdone = 0;
    for (int64_t r0 = 0; r0 < N; r0 += rs) {
        int64_t nr = N - r0 < rs ? N - r0 : rs, shape[2] = {nr, K};
        size_t qb = (size_t)(nr * K), yb = qb * yes;
        const unsigned char *src = t->data + (size_t)r0 * (size_t)K;
        if (dev && r0 + rs < N)
            st_pipe_prefetch(c->pipe, src + qb, (size_t)((N - r0 - rs < rs ? N - r0 - rs : rs) * K));
        fp8kit_tensor y = fp8kit_tensor_make(NULL, yd, 2, shape), q, s;
        if ((st = cv_check_in(c, c->in)))
            return st;
        if ((st = fp8kit_quant_shapes(&it->desc, &y, &q, &s)))
            return cv_lib_fail(c, st, "fp8kit_quant_shapes", tq);
        size_t sb = cv_tbytes(&s);
        if (it->desc.scheme == FP8KIT_SCHEME_TENSOR)
            sdone = 0; /* one scale for every slab */
        if (sdone + sb > sbytes)
            return cv_fail(c, FP8KIT_ERR_INTERNAL, "tensor '%s': scale slabs overrun the scale tensor", tq);
        int yslot;
        unsigned char *ybuf = st_pipe_acquire(c->pipe, yb, &yslot, &st, c->err, c->errlen);
        if (!ybuf)
            return st;
        if (dev) {
            if ((st = cv_buf_need(c, &c->dq, qb)) || (st = cv_buf_need(c, &c->dy, yb)) ||
                (st = cv_upload(c, c->dq.p, src, qb, tq))) {
                st_pipe_release(c->pipe, yslot);
                return st;
            }
            q.data = c->dq.p, y.data = c->dy.p, s.data = (char *)c->ds.p + sdone;
        } else {
            q.data = (void *)src, y.data = ybuf, s.data = (char *)c->hs.p + sdone;
        }
        q.dtype = qd;
        if ((st = fp8kit_dequantize(c->ctx, &it->desc, &q, &s, &y, NULL))) {
            st_pipe_release(c->pipe, yslot);
            return cv_lib_fail(c, st, "fp8kit_dequantize", tq);
        }
        if (dev && (st = cv_download(c, ybuf, c->dy.p, yb, tq))) {
            st_pipe_release(c->pipe, yslot);
            return st;
        }
        if ((st = st_pipe_submit(c->pipe, yslot, ybuf, yb, yoff + (uint64_t)r0 * (uint64_t)K * yes, c->err,
                                 c->errlen)))
            return st;
        sdone += sb;
        c->stats->in_bytes_done += qb;
        cv_progress(c, 0);
    }
    return FP8KIT_OK;
}

/* Writes one planned file to w (opened on its final path). */
static fp8kit_status cv_run_file(cv *c, const cv_file *f, st_writer *w)
{
    const uint64_t base = f->header_len, total = f->header_len + f->data_size;
    fp8kit_status st;
    if ((st = st_writer_reserve(w, total, c->err, c->errlen)) ||
        (st = st_writer_pwrite(w, f->header, f->header_len, 0, c->err, c->errlen)))
        return st;
    if (f->in->map)
        (void)madvise(f->in->map, f->in->map_size, MADV_SEQUENTIAL);
    c->in = f->in;
    st_pipe_set_writer(c->pipe, w);
    for (size_t i = 0; i < f->nitems && !st; i++) {
        const cv_item *it = &f->items[i];
        switch (it->act) {
        case CV_COPY:
            st = cv_copy(c, base + f->out_off[it->out_main], it->src);
            c->stats->copied++;
            break;
        case CV_QUANT:
            st = cv_quant(c, base, f, it);
            c->stats->quantized++;
            break;
        case CV_DEQUANT:
            st = cv_dequant(c, base, f, it);
            c->stats->dequantized++;
            break;
        case CV_DROP:
            break; /* its bytes are counted with the weight that consumed it */
        }
        c->stats->tensors_done++;
    }
    /* every queued write has landed (or failed) before w is closed */
    char derr[600];
    fp8kit_status dst = st_pipe_drain(c->pipe, derr, sizeof derr);
    if (!st && dst) {
        st = dst;
        snprintf(c->err, c->errlen, "%s", derr);
    }
    st_pipe_set_writer(c->pipe, NULL);
    c->in = NULL;
    if (!st)
        c->stats->out_bytes += total;
    return st;
}

/* ------------------------------------------------------------------ driver */
/* A .safetensors file of the model directory that is not part of the model
 * (e.g. consolidated.safetensors next to the shards) is copied unconverted:
 * say so. */
static void cv_warn_other_weights(cv *c, const char *dir, const char *const *skip, size_t nskip)
{
    DIR *d = c->o->warn ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        int skipped = 0;
        for (size_t i = 0; i < nskip; i++)
            skipped |= !strcmp(e->d_name, skip[i]);
        if (skipped || n < 12 || strcmp(e->d_name + n - 12, ".safetensors") || e->d_name[0] == '.')
            continue;
        char msg[600], q[300];
        st_quote(e->d_name, q, sizeof q);
        snprintf(msg, sizeof msg, "%s/%s: not part of the model's weights (not in the index): copied unconverted",
                 dir, q);
        c->o->warn(c->o->note_user, msg);
    }
    if (d)
        closedir(d);
}

static char *cv_join(const char *dir, const char *name)
{
    char *a = cv_concat(dir, "/");
    char *p = a ? cv_concat(a, name) : NULL;
    free(a);
    return p;
}

static void cv_file_free(cv_file *f)
{
    for (size_t i = 0; i < f->nitems; i++)
        free(f->items[i].scale_name);
    free(f->items);
    free(f->outs);
    free(f->out_off);
    free(f->meta);
    free(f->header);
    free(f->final_path);
}

/* New index: the input's top-level keys, weight_map rebuilt from the
 * outputs, metadata.total_size updated. */
static fp8kit_status cv_write_index(cv *c, const st_index *ix, const cv_file *files, const char *path)
{
    json_t *root = json_deep_copy((json_t *)ix->json), *wm = json_object(), *md;
    uint64_t total = 0;
    if (!root || !wm) {
        json_decref(root), json_decref(wm);
        return cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < ix->nshards; i++) {
        for (size_t k = 0; k < files[i].nouts; k++)
            json_object_set_new(wm, files[i].outs[k].name, json_string(ix->shards[i]));
        total += files[i].data_size;
    }
    json_object_set_new(root, "weight_map", wm);
    md = json_object_get(root, "metadata");
    if (!md) {
        md = json_object();
        json_object_set_new(root, "metadata", md);
    }
    json_object_set_new(md, "total_size", json_integer((json_int_t)total));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(root);
    if (!text)
        return cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory (index)");
    st_writer w;
    fp8kit_status st = st_writer_open(&w, path, c->o->no_fsync, c->err, c->errlen);
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps leaves room for the NUL we overwrite */
    if (!st)
        st = st_writer_pwrite(&w, text, len + 1, 0, c->err, c->errlen);
    if (!st)
        st = st_writer_finish(&w, c->err, c->errlen);
    if (!st)
        st = st_writer_commit(&w, 0, c->err, c->errlen);
    st_writer_abort(&w);
    free(text);
    c->stats->out_bytes += len + 1;
    return st;
}

/* path without trailing slashes ("/" stays). */
static char *cv_strip(const char *path)
{
    char *p = strdup(path);
    size_t n = p ? strlen(p) : 0;
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    return p;
}

static fp8kit_status st_convert_paths(fp8kit_ctx *ctx, const char *in, const char *out, const st_conv_opts *o,
                                      st_stats *stats, char *err, size_t errlen);

fp8kit_status st_convert(fp8kit_ctx *ctx, const char *in, const char *out, const st_conv_opts *o, st_stats *stats,
                         char *err, size_t errlen)
{
    char *a = cv_strip(in), *b = cv_strip(out);
    fp8kit_status st = FP8KIT_ERR_OUT_OF_MEMORY;
    memset(stats, 0, sizeof *stats);
    if (!a || !b)
        snprintf(err, errlen, "out of memory");
    else
        st = st_convert_paths(ctx, a, b, o, stats, err, errlen);
    free(a);
    free(b);
    return st;
}

/* Dequantize: the conventions seen, named in out: "fp8", "compressed-tensors",
 * "mixed (fp8 and compressed-tensors)", or "" for none. */
static void cv_convention(const cv *c, char *out, size_t outlen)
{
    size_t o = 0, n = 0;
    for (int f = ST_FORMAT_DEFAULT + 1; f < ST_FORMAT_COUNT; f++)
        n += (c->seen_conv >> f) & 1;
    out[0] = '\0';
    if (n > 1)
        o = (size_t)snprintf(out, outlen, "mixed (");
    for (int f = ST_FORMAT_DEFAULT + 1, k = 0; f < ST_FORMAT_COUNT && o < outlen; f++)
        if ((c->seen_conv >> f) & 1)
            o += (size_t)snprintf(out + o, outlen - o, "%s%s", k++ ? " and " : "", st_format_name((st_format)f));
    if (n > 1 && o < outlen)
        snprintf(out + o, outlen - o, ")");
}

static fp8kit_status st_convert_paths(fp8kit_ctx *ctx, const char *in, const char *out, const st_conv_opts *o,
                                      st_stats *stats, char *err, size_t errlen)
{
    cv cc, *c = &cc;
    memset(c, 0, sizeof *c);
    memset(stats, 0, sizeof *stats);
    c->ctx = ctx, c->o = o, c->mem = o->mem, c->stats = stats, c->err = err, c->errlen = errlen;
    c->slab = o->slab_bytes ? o->slab_bytes : CV_DEFAULT_SLAB;
    c->dx.dev = c->dq.dev = c->ds.dev = c->dy.dev = 1;
    clock_gettime(CLOCK_MONOTONIC, &c->t0);
    if (err && errlen)
        err[0] = '\0';
    if (!o->dequantize) {
        c->format = o->format == ST_FORMAT_DEFAULT ? st_format_default(o->scheme) : o->format;
        if (!st_format_supports(c->format, o->scheme))
            return cv_fail(c, FP8KIT_ERR_UNSUPPORTED, "--format %s has no %s layout (use --format %s)",
                           st_format_name(c->format), st_scheme_name(o->scheme),
                           st_format_name(st_format_other(o->scheme, c->format)));
        cv_quant_json(c);
    }

    /* inputs */
    st_input inp;
    st_file single;
    st_index ix;
    memset(&single, 0, sizeof single);
    memset(&ix, 0, sizeof ix);
    fp8kit_status st = st_input_classify(in, &inp, err, errlen);
    if (st)
        return st;
    const int sharded = inp.kind == ST_INPUT_SHARDED, model_dir = inp.kind != ST_INPUT_FILE;
    st = sharded ? st_index_open(inp.dir, &ix, err, errlen) : st_open(inp.file, &single, err, errlen);
    size_t nfiles = sharded ? ix.nshards : 1;
    cv_file *files = NULL;
    json_t *names = NULL, *config = NULL, *qcfg = NULL; /* config: cfg.values, for reading */
    st_config cfg;
    memset(&cfg, 0, sizeof cfg);
    st_tmp_tree tree;
    memset(&tree, 0, sizeof tree);
    const char **skip = NULL;
    char *ipath = NULL;
    int xfsz = 0;
    if (st)
        goto done;
    files = calloc(nfiles ? nfiles : 1, sizeof *files);
    names = json_object();
    if (!files || !names) {
        st = cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nfiles; i++) {
        files[i].in = sharded ? &ix.files[i] : &single;
        files[i].shard = sharded ? ix.shards[i] : NULL;
        for (size_t k = 0; k < files[i].in->ntensors; k++) {
            json_object_set_new(names, files[i].in->tensors[k].name,
                                json_integer((json_int_t)((uint64_t)i << 32 | k)));
            stats->in_bytes_total += files[i].in->tensors[k].end - files[i].in->tensors[k].begin;
            stats->tensors_total++;
        }
    }
    if (json_object_size(names) != (size_t)stats->tensors_total) {
        st = cv_fail(c, FP8KIT_ERR_CORRUPT_FILE, "%s: a tensor name occurs in more than one shard", in);
        goto done;
    }

    /* output location: checked before anything is created */
    if ((st = st_check_out_vs_in(model_dir ? inp.dir : inp.file, out, model_dir, err, errlen)))
        goto done;
    struct stat ob;
    if (!lstat(out, &ob)) {
        if (!o->force) {
            st = cv_fail(c, FP8KIT_ERR_IO, "%s: exists (use --force to overwrite)", out);
            goto done;
        }
        /* --force replaces only what this tool writes: a directory for a model
         * directory, a regular file for a file. A link (even to a directory),
         * FIFO, device or socket is never replaced (/dev/null stays) */
        if (model_dir && !S_ISDIR(ob.st_mode)) {
            st = cv_fail(c, FP8KIT_ERR_IO, "%s: exists and is %s, not a directory (not replaced; a model directory "
                                           "is written as a directory)", out, st_file_kind(ob.st_mode));
            goto done;
        }
        if (!model_dir && !S_ISREG(ob.st_mode)) {
            if (S_ISDIR(ob.st_mode))
                st = cv_fail(c, FP8KIT_ERR_IO, "%s: is a directory (give the output file's name)", out);
            else
                st = cv_fail(c, FP8KIT_ERR_IO, "%s: exists and is %s, not a regular file (not replaced)", out,
                             st_file_kind(ob.st_mode));
            goto done;
        }
    }
    /* config.json: read (and, quantizing, refused when already quantized) */
    if (model_dir && (st = st_config_load(inp.dir, &cfg, err, errlen)))
        goto done;
    config = cfg.values;
    if (config && !o->dequantize && json_object_get(config, "quantization_config")) {
        json_t *qm = json_object_get(json_object_get(config, "quantization_config"), "quant_method");
        st = cv_fail(c, FP8KIT_ERR_INVALID_ARGUMENT,
                     "%s/config.json: the model is already quantized (quantization_config, quant_method '%s'); "
                     "dequantize it first",
                     inp.dir, json_is_string(qm) ? json_string_value(qm) : "?");
        goto done;
    }
    /* plan everything */
    for (size_t i = 0; i < nfiles && !st; i++)
        st = cv_plan_file(c, &files[i], names, files);
    if (!st && o->dequantize) {
        cv_mark_dropped(files, nfiles);
        c->deq_complete = c->fp8_total > 0 && c->fp8_planned == c->fp8_total;
    }
    for (int g = 0; g < o->nexclude + o->ninclude && !st; g++) {
        const char *glob = g < o->nexclude ? o->exclude[g] : o->include[g - o->nexclude];
        int hit = 0;
        const char *key;
        json_t *v;
        json_object_foreach(names, key, v) if (cv_exclude_matches(glob, key)) hit = 1;
        if (!hit)
            st = cv_fail(c, FP8KIT_ERR_INVALID_ARGUMENT, "--%s '%s' matches no tensor of %s",
                         g < o->nexclude ? "exclude" : "include", glob, in);
    }
    for (size_t i = 0; i < nfiles && !st; i++)
        st = cv_layout_file(c, &files[i]);
    json_t *text_cfg = config ? json_object_get(config, "text_config") : NULL;
    int tied = config && (json_is_true(json_object_get(config, "tie_word_embeddings")) ||
                          json_is_true(json_object_get(text_cfg, "tie_word_embeddings")));
    if (!st && config && !o->dequantize && !(qcfg = cv_quant_config(c, files, nfiles, tied)))
        st = cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory (quantization_config)");
    if (st)
        goto done;
    /* dequantize: the checkpoint stays quantized unless every fp8 tensor is
     * dequantized; then config.json is copied as it is */
    const int write_config = config && (!o->dequantize || c->deq_complete);
    cv_loader_warnings(c, files, nfiles);
    if (o->dequantize && o->warn) {
        char msg[600];
        if (!c->fp8_total)
            snprintf(msg, sizeof msg, "%s: no F8_E4M3 or F8_E5M2 tensor, nothing to dequantize: every tensor is copied "
                     "unchanged (and config.json and the metadata as they are)", in);
        else if (c->fp8_planned < c->fp8_total)
            snprintf(msg, sizeof msg, "%lld fp8 tensor%s left as %s (--exclude): the output stays quantized, so "
                     "config.json's quantization_config and the \"quantization\" metadata entry are kept",
                     (long long)(c->fp8_total - c->fp8_planned), c->fp8_total - c->fp8_planned == 1 ? "" : "s",
                     c->fp8_total - c->fp8_planned == 1 ? "it is" : "they are");
        if (!c->deq_complete)
            o->warn(o->note_user, msg);
    }
    /* the model's other files: the names skipped (written here instead), and
     * what would be copied checked now (a link loop, a dangling link, a FIFO)
     * rather than half way through */
    size_t nskip = 0;
    if (model_dir) {
        if (!(skip = calloc(nfiles + 3, sizeof *skip))) {
            st = cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < nfiles; i++)
            skip[nskip++] = sharded ? files[i].shard : ST_SINGLE_NAME;
        skip[nskip++] = ST_INDEX_NAME;
        if (write_config)
            skip[nskip++] = ST_CONFIG_NAME;
        if ((st = st_check_model_files(inp.dir, skip, nskip, err, errlen)))
            goto done;
    }
    if (c->mem) {
        if (!c->mem->alloc || !c->mem->free || !c->mem->upload || !c->mem->download) {
            st = cv_fail(c, FP8KIT_ERR_INVALID_ARGUMENT, "incomplete device memory operations");
            goto done;
        }
    }

    /* write: a model directory is built in a temporary directory next to OUT
     * (after removing what a killed earlier run left there). SIGXFSZ is
     * ignored meanwhile: past `ulimit -f` a write fails with EFBIG, named
     * and cleaned up like any other I/O error */
    st_xfsz_hold();
    xfsz = 1;
    int stale = st_tmp_clean_stale(out);
    if (stale && o->warn) {
        char msg[600];
        snprintf(msg, sizeof msg, "removed %d temporary file(s) left next to %s by an earlier run that was killed",
                 stale, out);
        o->warn(o->note_user, msg);
    }
    if (!(c->pipe = st_pipe_create(c->mem != NULL))) {
        st = cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "cannot start the writer thread");
        goto done;
    }
    if (model_dir && (st = st_tree_create(&tree, out, err, errlen)))
        goto done;
    for (size_t i = 0; i < nfiles; i++) {
        const char *name = sharded ? files[i].shard : ST_SINGLE_NAME;
        if (!(files[i].final_path = model_dir ? cv_join(tree.root, name) : strdup(out))) {
            st = cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        if (model_dir && (st = st_tree_add(&tree, files[i].final_path, 0, err, errlen)))
            goto done;
    }
    for (size_t i = 0; i < nfiles && !st; i++) {
        st_writer w;
        if ((st = st_writer_open(&w, files[i].final_path, o->no_fsync, err, errlen)))
            break;
        st = cv_run_file(c, &files[i], &w);
        if (!st)
            st = st_writer_finish(&w, err, errlen);
        if (!st)
            st = st_writer_commit(&w, model_dir ? 0 : o->force, err, errlen);
        st_writer_abort(&w);
    }
    if (st)
        goto done;
    if (sharded) {
        if (!(ipath = cv_join(tree.root, ST_INDEX_NAME))) {
            st = cv_fail(c, FP8KIT_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        if ((st = st_tree_add(&tree, ipath, 0, err, errlen)) || (st = cv_write_index(c, &ix, files, ipath)))
            goto done;
    }
    if (model_dir) { /* the model's other files, then config.json */
        if ((st = st_copy_model_files(&tree, inp.dir, skip, nskip, o->no_fsync, &stats->out_bytes,
                                      &stats->other_files, err, errlen)))
            goto done;
        if (write_config && (st = st_config_write(&tree, &cfg, o->dequantize ? NULL : qcfg, o->no_fsync,
                                                  &stats->out_bytes, err, errlen)))
            goto done;
        stats->other_files += write_config;
        cv_warn_other_weights(c, inp.dir, skip, nskip);
        char warn[600] = "";
        if ((st = st_tree_commit(&tree, out, o->force, o->no_fsync, &stats->out_changed, warn, sizeof warn, err,
                                 errlen)))
            goto done;
        if (warn[0] && o->warn)
            o->warn(o->note_user, warn);
    }
    if (o->dequantize)
        cv_convention(c, stats->convention, sizeof stats->convention);
    cv_progress(c, 1);
done:
    st_tree_discard(&tree);
    if (xfsz)
        st_xfsz_release();
    free(skip);
    free(ipath);
    st_pipe_destroy(c->pipe);
    cv_buf *bufs[] = {&c->hs, &c->hx, &c->dx, &c->dq, &c->ds, &c->dy};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cv_buf_free(c, bufs[i]);
    for (size_t i = 0; files && i < nfiles; i++)
        cv_file_free(&files[i]);
    free(files);
    json_decref(names);
    st_config_free(&cfg);
    json_decref(qcfg);
    st_close(&single);
    st_index_close(&ix);
    st_input_free(&inp);
    stats->seconds = cv_elapsed(c);
    return st;
}
