/* test_ckpt_api.c - the public checkpoint converter (include/fp8kit.h,
 * "checkpoints") on the CPU backend: a tiny model directory written by hand
 * (config.json, tokenizer.json, model.safetensors holding an embedding, two
 * projections - one with K = 48 - a norm and lm_head) converted through
 * fp8kit_checkpoint_quantize with the row, mx and 128x128 schemes; the
 * report, the on_kept / on_warning callbacks, the tensor names, dtypes and
 * shapes of each format, codes and scales bit-equal to fp8kit_quantize, the
 * copied tensors and files byte-equal; fp8kit_checkpoint_dequantize back
 * (f32 bit-equal to fp8kit_dequantize, and the bf16 default); and bad
 * arguments (NULL pointers, enums out of range, unsupported combinations, an
 * existing OUT) returning their status with a message, creating nothing and
 * leaving the report untouched. Files are parsed by hand (no src/io), so the
 * test also builds without jansson: there the calls must return
 * FP8KIT_ERR_UNSUPPORTED and the test is skipped (77). Run: ctest -R test_ckpt_api. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fp8kit.h"
#include "test_util.h"

static fp8kit_ctx *ctx;
static char root[256];

/* ---------------------------------------------------------- tiny model */
enum { V = 64, H = 32, QN = 128, QK = 128, DN = 64, DK = 48, NT = 5 };
typedef struct tin {
    const char *name;
    int ndim;
    int64_t shape[2];
    float *data;
} tin;
static float w_embed[V * H], w_q[QN * QK], w_down[DN * DK], w_norm[H], w_head[V * H];
static tin model[NT] = {
    {"lm_head.weight", 2, {V, H}, w_head},
    {"model.embed_tokens.weight", 2, {V, H}, w_embed},
    {"model.layers.0.mlp.down_proj.weight", 2, {DN, DK}, w_down},
    {"model.layers.0.self_attn.q_proj.weight", 2, {QN, QK}, w_q},
    {"model.norm.weight", 1, {H, 0}, w_norm},
};
static const char config_json[] = "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 32,\n"
                                  "  \"tie_word_embeddings\": false\n}\n";
static const char tokenizer_json[] = "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\"}}\n";

static int64_t numel(const tin *t) { return t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1]; }

/* a/b in one of 64 rotating buffers (each test makes far fewer than 64
 * paths while it uses one) */
static char *path_join(const char *a, const char *b)
{
    static char buf[64][512];
    static int i;
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/%s", a, b); /* a may be an earlier result */
    char *p = buf[i++ & 63];
    memcpy(p, tmp, sizeof tmp);
    return p;
}

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) || w != n ? -1 : 0;
}

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) {
        p[len] = 0;
        *n = (size_t)len;
    }
    return p;
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* model.safetensors: 8-byte header length, the JSON header (padded with
 * spaces to a multiple of 8), the tensors' bytes in order. */
static int write_model(const char *dir)
{
    char hdr[2048];
    size_t h = 0;
    uint64_t off = 0;
    h += (size_t)snprintf(hdr + h, sizeof hdr - h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < NT; i++) {
        uint64_t bytes = (uint64_t)numel(&model[i]) * 4;
        h += (size_t)snprintf(hdr + h, sizeof hdr - h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld", model[i].name,
                              (long long)model[i].shape[0]);
        if (model[i].ndim == 2)
            h += (size_t)snprintf(hdr + h, sizeof hdr - h, ",%lld", (long long)model[i].shape[1]);
        h += (size_t)snprintf(hdr + h, sizeof hdr - h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                              (unsigned long long)(off + bytes));
        off += bytes;
    }
    hdr[h++] = '}';
    while (h % 8)
        hdr[h++] = ' ';
    size_t total = 8 + h + off;
    unsigned char *buf = malloc(total), *p = buf;
    if (!buf)
        return -1;
    for (int i = 0; i < 8; i++)
        *p++ = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(p, hdr, h);
    p += h;
    for (int i = 0; i < NT; i++) {
        memcpy(p, model[i].data, (size_t)numel(&model[i]) * 4);
        p += numel(&model[i]) * 4;
    }
    int rc = mkdir(dir, 0777) || write_file(path_join(dir, "model.safetensors"), buf, total) ||
             write_file(path_join(dir, "config.json"), config_json, sizeof config_json - 1) ||
             write_file(path_join(dir, "tokenizer.json"), tokenizer_json, sizeof tokenizer_json - 1);
    free(buf);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------ reading it back */
typedef struct st_view {
    unsigned char *file;
    size_t size;
    char *hdr; /* NUL-terminated copy of the JSON header */
    const unsigned char *data;
} st_view;

static int st_load(const char *path, st_view *v)
{
    memset(v, 0, sizeof *v);
    if (!(v->file = read_file(path, &v->size)) || v->size < 8)
        return -1;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)v->file[i] << (8 * i);
    if (8 + n > v->size || !(v->hdr = malloc(n + 1)))
        return -1;
    memcpy(v->hdr, v->file + 8, n);
    v->hdr[n] = 0;
    v->data = v->file + 8 + n;
    return 0;
}

static void st_unload(st_view *v)
{
    free(v->file);
    free(v->hdr);
    memset(v, 0, sizeof *v);
}

typedef struct tview {
    char dtype[16];
    int ndim;
    int64_t shape[4];
    const unsigned char *data;
    uint64_t bytes;
} tview;

/* The entry of `name` in the header ("name": {...} with no nested braces). */
static int st_find(const st_view *v, const char *name, tview *t)
{
    char key[256];
    snprintf(key, sizeof key, "\"%s\"", name);
    memset(t, 0, sizeof *t);
    for (const char *p = strstr(v->hdr, key); p; p = strstr(p + 1, key)) {
        const char *q = p + strlen(key);
        while (*q == ' ')
            q++;
        if (*q != ':')
            continue;
        q++;
        while (*q == ' ')
            q++;
        if (*q != '{')
            continue;
        const char *end = strchr(q, '}');
        char obj[512];
        size_t len = (size_t)(end - q) < sizeof obj - 1 ? (size_t)(end - q) : sizeof obj - 1;
        memcpy(obj, q, len);
        obj[len] = 0;
        const char *d = strstr(obj, "\"dtype\""), *s = strstr(obj, "\"shape\""), *o = strstr(obj, "\"data_offsets\"");
        if (!d || !s || !o || sscanf(strchr(d + 7, '"') + 1, "%15[^\"]", t->dtype) != 1)
            return -1;
        s = strchr(s, '[') + 1;
        while (*s == ' ')
            s++;
        while (*s != ']' && t->ndim < 4) {
            char *e;
            t->shape[t->ndim++] = strtoll(s, &e, 10);
            s = e;
            while (*s == ' ' || *s == ',')
                s++;
        }
        unsigned long long b, e;
        if (sscanf(strchr(o, '['), "[ %llu , %llu ]", &b, &e) != 2)
            return -1;
        t->data = v->data + b;
        t->bytes = e - b;
        return 0;
    }
    return -1;
}

static int has_key(const st_view *v, const char *name)
{
    tview t;
    return st_find(v, name, &t) == 0;
}

/* -------------------------------------------------------------- callbacks */
typedef struct seen {
    int nkept, nwarn;
    char kept[8][96], why[8][256], warn[8][512];
    int nprogress, nfinal, backwards; /* on_progress calls, final ones, and calls whose counts went down */
    fp8kit_ckpt_progress last;
} seen;

static void on_progress(void *user, const fp8kit_ckpt_progress *p)
{
    seen *s = user;
    if (s->nprogress && (p->in_bytes_done < s->last.in_bytes_done || p->tensors_done < s->last.tensors_done ||
                         p->seconds < s->last.seconds))
        s->backwards++;
    s->nprogress++;
    s->nfinal += p->final != 0;
    s->last = *p;
}

static void on_kept(void *user, const char *tensor, const char *reason)
{
    seen *s = user;
    if (s->nkept < 8) {
        snprintf(s->kept[s->nkept], sizeof s->kept[0], "%s", tensor);
        snprintf(s->why[s->nkept], sizeof s->why[0], "%s", reason);
    }
    s->nkept++;
}

static void on_warning(void *user, const char *message)
{
    seen *s = user;
    if (s->nwarn < 8)
        snprintf(s->warn[s->nwarn], sizeof s->warn[0], "%s", message);
    s->nwarn++;
}

static const char *kept_reason(const seen *s, const char *tensor)
{
    for (int i = 0; i < s->nkept && i < 8; i++)
        if (!strcmp(s->kept[i], tensor))
            return s->why[i];
    return NULL;
}

/* ---------------------------------------------------------------- checks */
static int files_equal(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *pa = read_file(a, &na), *pb = read_file(b, &nb);
    int eq = pa && pb && na == nb && !memcmp(pa, pb, na);
    free(pa);
    free(pb);
    return eq;
}

static const tin *model_tensor(const char *name)
{
    for (int i = 0; i < NT; i++)
        if (!strcmp(model[i].name, name))
            return &model[i];
    return NULL;
}

/* The weight `name` of the checkpoint v: e4m3 codes and scales (named scale,
 * of dtype sdt and shape sr x sc, ndim sn) equal what fp8kit_quantize makes. */
/* name quantized as fp8kit_quantize does it with scheme (and, for MX, the
 * scale rule rnd). */
static void check_quantized_r(const st_view *v, const char *name, fp8kit_scheme scheme, fp8kit_rounding rnd,
                              const char *scale, const char *sdt, int sn, int64_t sr, int64_t sc)
{
    long f0 = fk_t_fail;
    const tin *w = model_tensor(name);
    char sname[160];
    snprintf(sname, sizeof sname, "%.140s%s", name, scale);
    tview q, s;
    CHECK(st_find(v, name, &q) == 0, "%s missing", name);
    CHECK(st_find(v, sname, &s) == 0, "%s missing", sname);
    if (fk_t_fail != f0)
        return;
    CHECK(!strcmp(q.dtype, "F8_E4M3") && q.ndim == 2 && q.shape[0] == w->shape[0] && q.shape[1] == w->shape[1],
          "%s: %s [%lld, %lld]", name, q.dtype, (long long)q.shape[0], (long long)q.shape[1]);
    CHECK(!strcmp(s.dtype, sdt) && s.ndim == sn && (sn < 1 || s.shape[0] == sr) && (sn < 2 || s.shape[1] == sc),
          "%s: %s ndim %d [%lld, %lld], want %s ndim %d [%lld, %lld]", sname, s.dtype, s.ndim,
          (long long)s.shape[0], (long long)s.shape[1], sdt, sn, (long long)sr, (long long)sc);
    fp8kit_quant_desc d = fp8kit_quant_desc_default(scheme);
    if (scheme == FP8KIT_SCHEME_MX)
        d.rounding = rnd;
    fp8kit_tensor x = fp8kit_tensor_2d(w->data, FP8KIT_F32, w->shape[0], w->shape[1], w->shape[1]);
    fp8kit_tensor tq, ts;
    CHECK_STATUS(fp8kit_quant_shapes(&d, &x, &tq, &ts), FP8KIT_OK);
    size_t nq = (size_t)fp8kit_tensor_numel(&tq), ns = (size_t)fp8kit_tensor_numel(&ts) * fp8kit_dtype_size(ts.dtype);
    unsigned char *rq = malloc(nq), *rs = malloc(ns);
    tq.data = rq, ts.data = rs;
    CHECK_STATUS(fp8kit_quantize(ctx, &d, &x, &tq, &ts, NULL), FP8KIT_OK);
    CHECK(q.bytes == nq && !memcmp(q.data, rq, nq), "%s: codes differ from fp8kit_quantize", name);
    CHECK(s.bytes == ns && !memcmp(s.data, rs, ns), "%s: scales differ from fp8kit_quantize", sname);
    free(rq);
    free(rs);
}

static void check_quantized(const st_view *v, const char *name, fp8kit_scheme scheme, const char *scale,
                            const char *sdt, int sn, int64_t sr, int64_t sc)
{
    check_quantized_r(v, name, scheme, FP8KIT_ROUND_FLOOR, scale, sdt, sn, sr, sc);
}

static void check_copied(const st_view *v, const char *name)
{
    const tin *w = model_tensor(name);
    tview t;
    CHECK(st_find(v, name, &t) == 0, "%s missing", name);
    CHECK(!strcmp(t.dtype, "F32") && t.bytes == (uint64_t)numel(w) * 4 && !memcmp(t.data, w->data, t.bytes),
          "%s is not a byte copy", name);
}

static fp8kit_ckpt_opts opts_for(fp8kit_scheme scheme, seen *s)
{
    fp8kit_ckpt_opts o = fp8kit_ckpt_opts_default(scheme);
    o.no_fsync = 1;
    o.on_kept = on_kept;
    o.on_warning = on_warning;
    o.on_progress = on_progress;
    o.user = s;
    memset(s, 0, sizeof *s);
    return o;
}

static void test_defaults(void)
{
    /* checkpoints round MX scales with rceil by default; the fp32-scale schemes take floor only */
    CHECK(fp8kit_ckpt_opts_default(FP8KIT_SCHEME_ROW).rounding == FP8KIT_ROUND_FLOOR &&
              fp8kit_ckpt_opts_default(FP8KIT_SCHEME_BLOCK128X128).rounding == FP8KIT_ROUND_FLOOR,
          "fp8kit_ckpt_opts_default: floor for the fp32-scale schemes");
    fp8kit_ckpt_opts o = fp8kit_ckpt_opts_default(FP8KIT_SCHEME_MX);
    CHECK(o.scheme == FP8KIT_SCHEME_MX && o.format == FP8KIT_CKPT_FORMAT_DEFAULT && o.rounding == FP8KIT_ROUND_RCEIL &&
              o.out_dtype == FP8KIT_BF16 && !o.pow2 && !o.quantize_all && !o.include && !o.ninclude && !o.exclude &&
              !o.nexclude && !o.force && !o.no_fsync && !o.on_kept && !o.on_warning && !o.user && !o.on_progress,
          "fp8kit_ckpt_opts_default");
}

/* row, compressed-tensors (its default): both projections quantized. */
static void test_row(const char *in)
{
    long f0 = fk_t_fail;
    const char *out = path_join(root, "row");
    seen s;
    fp8kit_ckpt_opts o = opts_for(FP8KIT_SCHEME_ROW, &s);
    fp8kit_ckpt_report r;
    memset(&r, 0xAB, sizeof r);
    CHECK_STATUS(fp8kit_checkpoint_quantize(ctx, in, out, &o, &r), FP8KIT_OK);
    if (fk_t_fail != f0) {
        fprintf(stderr, "%s\n", fp8kit_last_error(ctx));
        return;
    }
    uint64_t in_bytes = 0;
    for (int i = 0; i < NT; i++)
        in_bytes += (uint64_t)numel(&model[i]) * 4;
    CHECK(r.tensors == NT && r.quantized == 2 && r.dequantized == 0 && r.copied == 3 && r.kept == 2 &&
              r.other_files == 2 && r.in_bytes == in_bytes && r.out_bytes > 0 && r.seconds >= 0 &&
              r.convention[0] == 0,
          "report: tensors %lld quantized %lld dequantized %lld copied %lld kept %lld other_files %lld in %llu "
          "out %llu convention '%s'",
          (long long)r.tensors, (long long)r.quantized, (long long)r.dequantized, (long long)r.copied,
          (long long)r.kept, (long long)r.other_files, (unsigned long long)r.in_bytes,
          (unsigned long long)r.out_bytes, r.convention);
    CHECK(s.nkept == 2 && s.nwarn == 0, "on_kept %d times, on_warning %d times", s.nkept, s.nwarn);
    /* on_progress: counts that only grow, then one final call with everything done */
    CHECK(s.nprogress >= 2 && s.nfinal == 1 && s.last.final && !s.backwards && s.last.tensors_total == NT &&
              s.last.tensors_done == NT && s.last.in_bytes_total == in_bytes && s.last.in_bytes_done == in_bytes,
          "on_progress: %d calls, %d final, %d backwards, last %lld/%lld tensors %llu/%llu bytes", s.nprogress,
          s.nfinal, s.backwards, (long long)s.last.tensors_done, (long long)s.last.tensors_total,
          (unsigned long long)s.last.in_bytes_done, (unsigned long long)s.last.in_bytes_total);
    const char *why = kept_reason(&s, "model.embed_tokens.weight");
    CHECK(why && strstr(why, "embedding"), "embedding reason: %s", why ? why : "(not reported)");
    why = kept_reason(&s, "lm_head.weight");
    CHECK(why && strstr(why, "output projection"), "lm_head reason: %s", why ? why : "(not reported)");

    st_view v;
    CHECK(st_load(path_join(out, "model.safetensors"), &v) == 0, "cannot read %s/model.safetensors", out);
    if (!v.hdr)
        return;
    check_quantized(&v, "model.layers.0.self_attn.q_proj.weight", FP8KIT_SCHEME_ROW, "_scale", "F32", 2, QN, 1);
    check_quantized(&v, "model.layers.0.mlp.down_proj.weight", FP8KIT_SCHEME_ROW, "_scale", "F32", 2, DN, 1);
    check_copied(&v, "lm_head.weight");
    check_copied(&v, "model.embed_tokens.weight");
    check_copied(&v, "model.norm.weight");
    CHECK(!has_key(&v, "lm_head.weight_scale"), "lm_head got a scale");
    st_unload(&v);
    CHECK(files_equal(path_join(in, "tokenizer.json"), path_join(out, "tokenizer.json")), "tokenizer.json differs");
    size_t n;
    char *cfg = (char *)read_file(path_join(out, "config.json"), &n);
    CHECK(cfg && strstr(cfg, "\"quantization_config\"") && strstr(cfg, "compressed-tensors") &&
              strstr(cfg, "\"lm_head\"") && strstr(cfg, "\"model.embed_tokens\""),
          "config.json: %s", cfg ? cfg : "(unreadable)");
    free(cfg);

    /* an existing OUT: refused without force (left as it is), replaced with it */
    size_t before_n;
    unsigned char *before = read_file(path_join(out, "model.safetensors"), &before_n);
    fp8kit_ckpt_report r2 = r;
    o.scheme = FP8KIT_SCHEME_TENSOR;
    CHECK_STATUS(fp8kit_checkpoint_quantize(ctx, in, out, &o, &r2), FP8KIT_ERR_IO);
    CHECK(strstr(fp8kit_last_error(ctx), "exists") && strstr(fp8kit_last_error(ctx), "fp8kit_checkpoint_quantize"),
          "message: %s", fp8kit_last_error(ctx));
    CHECK(!memcmp(&r, &r2, sizeof r), "a failing call changed the report");
    size_t after_n;
    unsigned char *after = read_file(path_join(out, "model.safetensors"), &after_n);
    CHECK(before && after && before_n == after_n && !memcmp(before, after, after_n), "OUT changed");
    free(after);
    o.force = 1;
    CHECK_STATUS(fp8kit_checkpoint_quantize(ctx, in, out, &o, NULL), FP8KIT_OK);
    CHECK(st_load(path_join(out, "model.safetensors"), &v) == 0, "cannot read the replaced OUT");
    if (v.hdr)
        check_quantized(&v, "model.layers.0.self_attn.q_proj.weight", FP8KIT_SCHEME_TENSOR, "_scale", "F32", 1, 1, 0);
    st_unload(&v);
    free(before);
}

/* mx (compressed-tensors): down_proj (K = 48) is kept for its shape with a
 * warning; exclude and quantize_all. */
static void test_mx(const char *in)
{
    long f0 = fk_t_fail;
    const char *out = path_join(root, "mx");
    seen s;
    fp8kit_ckpt_opts o = opts_for(FP8KIT_SCHEME_MX, &s);
    fp8kit_ckpt_report r;
    CHECK_STATUS(fp8kit_checkpoint_quantize(ctx, in, out, &o, &r), FP8KIT_OK);
    if (fk_t_fail != f0) {
        fprintf(stderr, "%s\n", fp8kit_last_error(ctx));
        return;
    }
    CHECK(r.quantized == 1 && r.kept == 3 && r.copied == 4 && s.nkept == 3, "mx: quantized %lld kept %lld (%d calls)",
          (long long)r.quantized, (long long)r.kept, s.nkept);
    const char *why = kept_reason(&s, "model.layers.0.mlp.down_proj.weight");
    CHECK(why && strstr(why, "shape"), "down_proj reason: %s", why ? why : "(not reported)");
    /* the shape warning, then compressed-tensors' bfloat16-only mxfp8 path (this model is float32) */
    CHECK(s.nwarn == 2 && strstr(s.warn[0], "model.layers.0.mlp.down_proj.weight") && strstr(s.warn[0], "kept") &&
              strstr(s.warn[1], "bfloat16") && strstr(s.warn[1], "float32"),
          "warnings: %d (%s | %s)", s.nwarn, s.nwarn ? s.warn[0] : "", s.nwarn > 1 ? s.warn[1] : "");
    st_view v;
    CHECK(st_load(path_join(out, "model.safetensors"), &v) == 0, "cannot read the mx output");
    if (v.hdr) { /* the default rounding of checkpoints: rceil */
        check_quantized_r(&v, "model.layers.0.self_attn.q_proj.weight", FP8KIT_SCHEME_MX, FP8KIT_ROUND_RCEIL, "_scale",
                          "U8", 2, QN, QK / 32);
        check_copied(&v, "model.layers.0.mlp.down_proj.weight");
    }
    st_unload(&v);
    /* floor stays selectable */
    out = path_join(root, "mx-floor");
    o = opts_for(FP8KIT_SCHEME_MX, &s);
    o.rounding = FP8KIT_ROUND_FLOOR;
    CHECK_STATUS(fp8kit_checkpoint_quantize(ctx, in, out, &o, &r), FP8KIT_OK);
    CHECK(st_load(path_join(out, "model.safetensors"), &v) == 0, "cannot read the mx floor output");
    if (v.hdr)
        check_quantized_r(&v, "model.layers.0.self_attn.q_proj.weight", FP8KIT_SCHEME_MX, FP8KIT_ROUND_FLOOR, "_scale",
                          "U8", 2, QN, QK / 32);
    st_unload(&v);

    /* quantize_all (lm_head too), an exclude glob on the module name, the fp8 format */
    const char *ex[] = {"model.layers.0.self_attn.q_proj"};
    out = path_join(root, "mx-all");
    o = opts_for(FP8KIT_SCHEME_MX, &s);
    o.format = FP8KIT_CKPT_FORMAT_FP8;
    o.quantize_all = 1;
    o.exclude = ex;
    o.nexclude = 1;
    o.rounding = FP8KIT_ROUND_RCEIL;
    CHECK_STATUS(fp8kit_checkpoint_quantize(ctx, in, out, &o, &r), FP8KIT_OK);
    CHECK(r.quantized == 1 && r.kept == 3, "mx-all: quantized %lld kept %lld", (long long)r.quantized,
          (long long)r.kept);
    why = kept_reason(&s, "model.layers.0.self_attn.q_proj.weight");
    CHECK(why && strstr(why, "exclude"), "q_proj reason: %s", why ? why : "(not reported)");
    CHECK(!kept_reason(&s, "lm_head.weight"), "lm_head kept despite quantize_all");
    CHECK(st_load(path_join(out, "model.safetensors"), &v) == 0, "cannot read the mx-all output");
    if (v.hdr) {
        tview q, sc;
        CHECK(st_find(&v, "lm_head.weight", &q) == 0 && !strcmp(q.dtype, "F8_E4M3"), "lm_head not quantized");
        CHECK(st_find(&v, "lm_head.weight_scale_inv", &sc) == 0 && !strcmp(sc.dtype, "F8_E8M0") && sc.ndim == 2 &&
                  sc.shape[0] == V && sc.shape[1] == H / 32,
              "lm_head.weight_scale_inv: %s", sc.dtype);
        check_copied(&v, "model.layers.0.self_attn.q_proj.weight");
    }
    st_unload(&v);
}

/* 128x128 blocks: the fp8 format by default (weight_scale_inv). */
static void test_block(const char *in)
{
    const char *out = path_join(root, "block");
    seen s;
    fp8kit_ckpt_opts o = opts_for(FP8KIT_SCHEME_BLOCK128X128, &s);
    fp8kit_ckpt_report r;
    CHECK_STATUS(fp8kit_checkpoint_quantize(ctx, in, out, &o, &r), FP8KIT_OK);
    CHECK(r.quantized == 1 && r.kept == 3, "block: quantized %lld kept %lld", (long long)r.quantized,
          (long long)r.kept);
    st_view v;
    CHECK(st_load(path_join(out, "model.safetensors"), &v) == 0, "cannot read the block output");
    if (v.hdr)
        check_quantized(&v, "model.layers.0.self_attn.q_proj.weight", FP8KIT_SCHEME_BLOCK128X128, "_scale_inv",
                        "F32", 2, 1, 1);
    st_unload(&v);
    size_t n;
    char *cfg = (char *)read_file(path_join(out, "config.json"), &n);
    CHECK(cfg && strstr(cfg, "\"quant_method\": \"fp8\"") && strstr(cfg, "\"weight_block_size\""),
          "config.json: %s", cfg ? cfg : "(unreadable)");
    free(cfg);
}

/* dequantize the row (compressed-tensors) and block (fp8) outputs back */
static void test_dequantize(void)
{
    long f0 = fk_t_fail;
    const char *in = path_join(root, "row"), *out = path_join(root, "row-f32");
    seen s;
    fp8kit_ckpt_opts o = opts_for(FP8KIT_SCHEME_TENSOR, &s);
    o.out_dtype = FP8KIT_F32;
    fp8kit_ckpt_report r;
    CHECK_STATUS(fp8kit_checkpoint_dequantize(ctx, in, out, &o, &r), FP8KIT_OK);
    if (fk_t_fail != f0) {
        fprintf(stderr, "%s\n", fp8kit_last_error(ctx));
        return;
    }
    /* the row output was replaced by the tensor scheme (test_row's force) */
    CHECK(r.tensors == NT + 2 && r.dequantized == 2 && r.copied == 3 && r.kept == 0 && r.quantized == 0 &&
              !strcmp(r.convention, "compressed-tensors") && s.nkept == 0,
          "dequantize report: tensors %lld dequantized %lld copied %lld convention '%s'", (long long)r.tensors,
          (long long)r.dequantized, (long long)r.copied, r.convention);
    st_view qv, yv;
    CHECK(st_load(path_join(in, "model.safetensors"), &qv) == 0 && st_load(path_join(out, "model.safetensors"), &yv) == 0,
          "cannot read the dequantize input / output");
    if (qv.hdr && yv.hdr) {
        const char *w = "model.layers.0.self_attn.q_proj.weight";
        tview q, sc, y;
        CHECK(st_find(&qv, w, &q) == 0 && st_find(&qv, "model.layers.0.self_attn.q_proj.weight_scale", &sc) == 0 &&
                  st_find(&yv, w, &y) == 0,
              "tensors missing");
        CHECK(!strcmp(y.dtype, "F32") && y.ndim == 2 && y.shape[0] == QN && y.shape[1] == QK, "%s: %s", w, y.dtype);
        CHECK(!has_key(&yv, "model.layers.0.self_attn.q_proj.weight_scale"), "the scale tensor was kept");
        if (fk_t_fail == f0) {
            static float ref[QN * QK];
            fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_TENSOR);
            fp8kit_tensor tq = fp8kit_tensor_2d((void *)q.data, FP8KIT_E4M3, QN, QK, QK);
            fp8kit_tensor ts = fp8kit_tensor_make((void *)sc.data, FP8KIT_F32, 0, NULL);
            fp8kit_tensor ty = fp8kit_tensor_2d(ref, FP8KIT_F32, QN, QK, QK);
            CHECK_STATUS(fp8kit_dequantize(ctx, &d, &tq, &ts, &ty, NULL), FP8KIT_OK);
            CHECK(y.bytes == sizeof ref && !memcmp(y.data, ref, sizeof ref), "dequantized weight != fp8kit_dequantize");
        }
        check_copied(&yv, "lm_head.weight");
    }
    st_unload(&qv);
    st_unload(&yv);
    size_t n;
    char *cfg = (char *)read_file(path_join(out, "config.json"), &n);
    CHECK(cfg && !strstr(cfg, "quantization_config"), "config.json kept its quantization_config");
    free(cfg);

    /* opts NULL: bf16; the fp8 convention */
    in = path_join(root, "block");
    out = path_join(root, "block-bf16");
    CHECK_STATUS(fp8kit_checkpoint_dequantize(ctx, in, out, NULL, &r), FP8KIT_OK);
    CHECK(r.dequantized == 1 && !strcmp(r.convention, "fp8"), "block: dequantized %lld convention '%s'",
          (long long)r.dequantized, r.convention);
    CHECK(st_load(path_join(out, "model.safetensors"), &yv) == 0, "cannot read block-bf16");
    if (yv.hdr) {
        tview y;
        CHECK(st_find(&yv, "model.layers.0.self_attn.q_proj.weight", &y) == 0 && !strcmp(y.dtype, "BF16"),
              "q_proj: %s", y.dtype);
        CHECK(!has_key(&yv, "model.layers.0.self_attn.q_proj.weight_scale_inv"), "weight_scale_inv kept");
    }
    st_unload(&yv);
}

/* Each bad call: its status, a message naming the function, no output, the
 * report untouched. */
static void bad(const char *what, fp8kit_status want, int deq, fp8kit_ctx *c, const char *in, const char *out,
                const fp8kit_ckpt_opts *o, const char *msg_part)
{
    fp8kit_ckpt_report r, r0;
    memset(&r, 0x5A, sizeof r);
    memcpy(&r0, &r, sizeof r);
    fp8kit_status st = deq ? fp8kit_checkpoint_dequantize(c, in, out, o, &r) : fp8kit_checkpoint_quantize(c, in, out, o, &r);
    const char *msg = fp8kit_last_error(c);
    CHECK(st == want, "%s: %s, want %s (%s)", what, fp8kit_status_string(st), fp8kit_status_string(want), msg);
    CHECK(strstr(msg, deq ? "fp8kit_checkpoint_dequantize" : "fp8kit_checkpoint_quantize") &&
              (!msg_part || strstr(msg, msg_part)),
          "%s: message '%s' (want '%s')", what, msg, msg_part ? msg_part : "");
    CHECK(!memcmp(&r, &r0, sizeof r), "%s: the report changed", what);
    CHECK(!out || !exists(out), "%s: %s was created", what, out);
}

static void test_errors(const char *in)
{
    const char *out = path_join(root, "bad");
    seen s;
    fp8kit_ckpt_opts o = opts_for(FP8KIT_SCHEME_ROW, &s), b;
    bad("ctx NULL", FP8KIT_ERR_NULL_POINTER, 0, NULL, in, out, &o, "ctx");
    bad("ctx NULL (dequantize)", FP8KIT_ERR_NULL_POINTER, 1, NULL, in, out, &o, "ctx");
    bad("in NULL", FP8KIT_ERR_NULL_POINTER, 0, ctx, NULL, out, &o, "in is NULL");
    bad("out NULL", FP8KIT_ERR_NULL_POINTER, 0, ctx, in, NULL, &o, "out is NULL");
    bad("out NULL (dequantize)", FP8KIT_ERR_NULL_POINTER, 1, ctx, in, NULL, &o, "out is NULL");
    bad("opts NULL", FP8KIT_ERR_NULL_POINTER, 0, ctx, in, out, NULL, "opts");
    bad("empty out", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, "", &o, "empty");
    b = o, b.scheme = (fp8kit_scheme)99;
    bad("scheme 99", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, out, &b, "scheme");
    b = o, b.scheme = (fp8kit_scheme)-1;
    bad("scheme -1", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, out, &b, "scheme");
    b = o, b.scheme = FP8KIT_SCHEME_BLOCK1X128;
    bad("block1x128", FP8KIT_ERR_UNSUPPORTED, 0, ctx, in, out, &b, "BLOCK1X128");
    b = o, b.format = (fp8kit_ckpt_format)3;
    bad("format 3", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, out, &b, "format");
    b = o, b.format = FP8KIT_CKPT_FORMAT_FP8;
    bad("row as fp8", FP8KIT_ERR_UNSUPPORTED, 0, ctx, in, out, &b, "fp8-row");
    b = o, b.rounding = FP8KIT_ROUND_RCEIL;
    bad("rceil with row", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, out, &b, "rounding");
    b = o, b.rounding = (fp8kit_rounding)5;
    bad("rounding 5", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, out, &b, "rounding");
    b = o, b.scheme = FP8KIT_SCHEME_MX, b.pow2 = 1;
    bad("pow2 with mx", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, out, &b, "pow2");
    b = o, b.nexclude = 1;
    bad("exclude NULL", FP8KIT_ERR_NULL_POINTER, 0, ctx, in, out, &b, "exclude");
    b = o, b.nexclude = -1;
    bad("nexclude -1", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, out, &b, "nexclude");
    const char *nullglob[] = {NULL}, *nomatch[] = {"no.such.module*"};
    b = o, b.include = nullglob, b.ninclude = 1;
    bad("include[0] NULL", FP8KIT_ERR_NULL_POINTER, 0, ctx, in, out, &b, "include[0]");
    b = o, b.exclude = nomatch, b.nexclude = 1;
    bad("exclude matching nothing", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, out, &b, "no.such.module*");
    b = o, b.out_dtype = FP8KIT_E4M3;
    bad("dequantize to e4m3", FP8KIT_ERR_UNSUPPORTED, 1, ctx, path_join(root, "row"), out, &b, "out_dtype");
    b = o, b.out_dtype = (fp8kit_dtype)77;
    bad("out_dtype 77", FP8KIT_ERR_INVALID_ARGUMENT, 1, ctx, path_join(root, "row"), out, &b, "out_dtype");
    bad("no such input", FP8KIT_ERR_IO, 0, ctx, path_join(root, "missing"), out, &o, "missing");
    bad("already quantized", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, path_join(root, "row"), out, &o, NULL);
    bad("out inside in", FP8KIT_ERR_INVALID_ARGUMENT, 0, ctx, in, path_join(in, "sub"), &o, NULL);
    /* a failed conversion says that nothing was written (the CLI prints the message as it is) */
    memset(&s, 0, sizeof s);
    b = o, b.exclude = nomatch, b.nexclude = 1;
    CHECK_STATUS(fp8kit_checkpoint_quantize(ctx, in, out, &b, NULL), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(fp8kit_last_error(ctx), "(nothing was written)") && s.nfinal == 0,
          "failure message: %s (%d final progress calls)", fp8kit_last_error(ctx), s.nfinal);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    fk_rng rng = {20};
    for (int i = 0; i < V * H; i++)
        w_embed[i] = (float)fk_rng_normal(&rng), w_head[i] = (float)fk_rng_normal(&rng) * 0.05f;
    for (int i = 0; i < QN * QK; i++)
        w_q[i] = (float)fk_rng_normal(&rng) * (1.0f + (float)(i / QK) / 16.0f);
    for (int i = 0; i < DN * DK; i++)
        w_down[i] = (float)fk_rng_normal(&rng) * 0.1f;
    for (int i = 0; i < H; i++)
        w_norm[i] = 1.0f + 0.01f * (float)i;
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/fk_ckpt_api_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char in[300];
    snprintf(in, sizeof in, "%s/in", root);
    if (write_model(in)) {
        perror("writing the model");
        return 1;
    }
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) != FP8KIT_OK) {
        fprintf(stderr, "no CPU context: %s\n", fp8kit_last_error(NULL));
        return 1;
    }
    test_defaults();
    seen s;
    fp8kit_ckpt_opts o = opts_for(FP8KIT_SCHEME_ROW, &s);
    fp8kit_status st = fp8kit_checkpoint_quantize(ctx, in, path_join(root, "probe"), &o, NULL);
    int skip = 0;
    if (st == FP8KIT_ERR_UNSUPPORTED && strstr(fp8kit_last_error(ctx), "without safetensors support")) {
        /* a build without jansson: the entry points exist and say so */
        CHECK(!exists(path_join(root, "probe")), "probe output created");
        CHECK_STATUS(fp8kit_checkpoint_dequantize(ctx, in, path_join(root, "probe"), NULL, NULL), FP8KIT_ERR_UNSUPPORTED);
        CHECK_STATUS(fp8kit_checkpoint_quantize(NULL, in, "x", &o, NULL), FP8KIT_ERR_NULL_POINTER);
        CHECK_STATUS(fp8kit_checkpoint_dequantize(ctx, NULL, "x", &o, NULL), FP8KIT_ERR_NULL_POINTER);
        skip = 1;
    } else {
        CHECK(st == FP8KIT_OK, "probe: %s: %s", fp8kit_status_string(st), fp8kit_last_error(ctx));
        test_row(in);
        test_mx(in);
        test_block(in);
        test_dequantize();
        test_errors(in);
    }
    fp8kit_ctx_destroy(ctx);
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (skip && !fk_t_fail) {
        printf("test_ckpt_api: skipped (this libfp8kit has no safetensors support)\n");
        return FK_TEST_SKIP;
    }
    return fk_test_summary("test_ckpt_api");
}
