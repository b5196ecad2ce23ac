/* st_read.c - safetensors reader: header validation (length, UTF-8, JSON via
 * jansson, dtypes, shapes, offsets that tile the data section), read-only
 * memory mapping of files, and sharded checkpoints (index + shards). Every
 * message names the file and, where there is one, the tensor. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"

/* ------------------------------------------------------------------ dtypes */
static const struct {
    const char *name;
    size_t size;
} st_dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1},       [ST_U8] = {"U8", 1},           [ST_I8] = {"I8", 1},
    [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1}, [ST_F8_E8M0] = {"F8_E8M0", 1},
    [ST_I16] = {"I16", 2},         [ST_U16] = {"U16", 2},         [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2},       [ST_I32] = {"I32", 4},         [ST_U32] = {"U32", 4},
    [ST_F32] = {"F32", 4},         [ST_I64] = {"I64", 8},         [ST_U64] = {"U64", 8},
    [ST_F64] = {"F64", 8},         [ST_C64] = {"C64", 8},
};

const char *st_dtype_name(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? st_dtypes[t].name : "?"; }
size_t st_dtype_size(st_dtype t) { return (unsigned)t < ST_DTYPE_COUNT ? st_dtypes[t].size : 0; }

int st_dtype_parse(const char *s, st_dtype *t)
{
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (!strcmp(s, st_dtypes[i].name)) {
            *t = (st_dtype)i;
            return 0;
        }
    return -1;
}

/* ---------------------------------------------------------------- messages */
fp8kit_status st_err(char *err, size_t errlen, fp8kit_status st, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

void st_json_reason(const char *text, char *out, size_t outlen)
{
    if (!outlen)
        return;
    snprintf(out, outlen, "%s", text);
    char *p = strstr(out, " near ");
    if (p) /* " near '<the input around the error>'" */
        *p = '\0';
    if (!strncmp(out, "invalid Unicode", 15)) /* "invalid Unicode '\uXXXX'" */
        snprintf(out, outlen, "invalid Unicode escape");
    else if ((p = strstr(out, " 0x"))) /* "control character 0x1", "unable to decode byte 0xff" */
        *p = '\0';
}

void st_quote(const char *name, char *out, size_t outlen)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, max = 120; /* long names are cut, the start is what identifies them */
    if (!outlen)
        return;
    for (const unsigned char *p = (const unsigned char *)(name ? name : ""); *p; p++) {
        char buf[5];
        size_t k = 0;
        if (*p < 0x20 || *p == 0x7F) {
            buf[k++] = '\\', buf[k++] = 'x', buf[k++] = hex[*p >> 4], buf[k++] = hex[*p & 15];
        } else if (*p == '\'' || *p == '\\') {
            buf[k++] = '\\', buf[k++] = (char)*p;
        } else {
            buf[k++] = (char)*p;
        }
        if (o + k + 4 > outlen || o >= max) {
            if (o + 4 <= outlen)
                memcpy(out + o, "...", 3), o += 3;
            break;
        }
        memcpy(out + o, buf, k);
        o += k;
    }
    out[o] = '\0';
}

const char *st_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    }
    return "not a regular file";
}

/* ------------------------------------------------------------------ UTF-8 */
/* Offset of the first byte that breaks UTF-8 (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), or -1 when all n bytes are valid. */
static int64_t st_utf8_bad(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if (c == 0xED) len = 3, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) len = 3;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F;
        else return (int64_t)i;
        if (n - i < len)
            return (int64_t)i;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return (int64_t)i;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return (int64_t)i;
        i += len;
    }
    return -1;
}

/* ---------------------------------------------------------------- parsing */
void st_close(st_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->ntensors; i++)
        free(f->tensors[i].name);
    for (size_t i = 0; i < f->nmeta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->tensors);
    free(f->meta);
    free(f->path);
    if (f->map) {
        st_map_forget(f->map_slot);
        munmap(f->map, f->map_size);
        close(f->fd);
    }
    memset(f, 0, sizeof *f);
}

int st_shape_bytes(st_dtype dtype, int ndim, const int64_t *shape, uint64_t *bytes)
{
    const uint64_t es = st_dtype_size(dtype), lim = (uint64_t)INT64_MAX;
    if (!es || ndim < 0 || ndim > ST_MAX_DIMS)
        return -1;
    uint64_t nz = es; /* element size times the non-zero dims */
    int zero = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (!shape[i]) {
            zero = 1;
            continue;
        }
        if (nz > lim / (uint64_t)shape[i])
            return -2;
        nz *= (uint64_t)shape[i];
    }
    if (bytes)
        *bytes = zero ? 0 : nz;
    return 0;
}

int64_t st_numel(const st_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    for (size_t i = 0; i < f->ntensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

/* A non-negative JSON integer, or -1. */
static int64_t st_json_uint(const json_t *v)
{
    if (!json_is_integer(v))
        return -1;
    json_int_t x = json_integer_value(v);
    return x < 0 ? -1 : (int64_t)x;
}

static fp8kit_status st_parse_entry(const char *label, const char *key, json_t *val, uint64_t data_size,
                                    st_tensor *t, char *err, size_t errlen)
{
    char tq[160];
    const fp8kit_status bad = FP8KIT_ERR_CORRUPT_FILE;
    st_quote(key, tq, sizeof tq);
    if (!json_is_object(val))
        return st_err(err, errlen, bad, "%s: tensor '%s': header entry is not a JSON object", label, tq);
    json_t *dt = json_object_get(val, "dtype"), *sh = json_object_get(val, "shape"),
           *off = json_object_get(val, "data_offsets");
    if (!json_is_string(dt))
        return st_err(err, errlen, bad, "%s: tensor '%s': missing or non-string \"dtype\"", label, tq);
    if (st_dtype_parse(json_string_value(dt), &t->dtype)) {
        char dq[80];
        st_quote(json_string_value(dt), dq, sizeof dq);
        return st_err(err, errlen, bad, "%s: tensor '%s': unknown dtype '%s'", label, tq, dq);
    }
    if (!json_is_array(sh))
        return st_err(err, errlen, bad, "%s: tensor '%s': missing or non-array \"shape\"", label, tq);
    size_t nd = json_array_size(sh);
    if (nd > ST_MAX_DIMS)
        return st_err(err, errlen, bad, "%s: tensor '%s': %zu dims (at most %d are supported)", label, tq, nd,
                      ST_MAX_DIMS);
    t->ndim = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        int64_t d = st_json_uint(json_array_get(sh, i));
        if (d < 0)
            return st_err(err, errlen, bad, "%s: tensor '%s': shape[%zu] is not a non-negative integer", label, tq,
                          i);
        t->shape[i] = d;
    }
    if (!json_is_array(off) || json_array_size(off) != 2)
        return st_err(err, errlen, bad, "%s: tensor '%s': \"data_offsets\" must be an array [begin, end]", label,
                      tq);
    int64_t b = st_json_uint(json_array_get(off, 0)), e = st_json_uint(json_array_get(off, 1));
    if (b < 0 || e < 0)
        return st_err(err, errlen, bad, "%s: tensor '%s': data_offsets are not non-negative integers", label, tq);
    if (b > e)
        return st_err(err, errlen, bad, "%s: tensor '%s': data_offsets [%lld, %lld] end before they begin", label,
                      tq, (long long)b, (long long)e);
    if ((uint64_t)e > data_size)
        return st_err(err, errlen, bad,
                      "%s: tensor '%s': data_offsets [%lld, %lld] run past the data section (%llu bytes; "
                      "truncated file?)",
                      label, tq, (long long)b, (long long)e, (unsigned long long)data_size);
    uint64_t need = 0;
    if (st_shape_bytes(t->dtype, t->ndim, t->shape, &need))
        return st_err(err, errlen, bad,
                      "%s: tensor '%s': the shape's byte size overflows (the product of its non-zero dims "
                      "times the element size must fit in int64, also when another dim is 0)",
                      label, tq);
    if (need != (uint64_t)(e - b))
        return st_err(err, errlen, bad,
                      "%s: tensor '%s': shape and dtype %s need %llu bytes but data_offsets [%lld, %lld] hold %llu",
                      label, tq, st_dtype_name(t->dtype), (unsigned long long)need, (long long)b, (long long)e,
                      (unsigned long long)(e - b));
    t->begin = (uint64_t)b;
    t->end = (uint64_t)e;
    return FP8KIT_OK;
}

static fp8kit_status st_parse_meta(const char *label, json_t *val, st_file *f, char *err, size_t errlen)
{
    if (!json_is_object(val))
        return st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE, "%s: \"__metadata__\" is not a JSON object", label);
    size_t n = json_object_size(val);
    f->meta = calloc(n ? n : 1, sizeof *f->meta);
    if (!f->meta)
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", label);
    f->has_meta = 1;
    const char *k;
    json_t *v;
    json_object_foreach(val, k, v) {
        if (!json_is_string(v)) {
            char kq[160];
            st_quote(k, kq, sizeof kq);
            return st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE,
                          "%s: __metadata__ entry '%s' is not a string (safetensors metadata maps strings to strings)",
                          label, kq);
        }
        st_kv *kv = &f->meta[f->nmeta];
        kv->key = strdup(k);
        kv->value = strdup(json_string_value(v));
        if (!kv->key || !kv->value) {
            free(kv->key), free(kv->value);
            return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", label);
        }
        f->nmeta++;
    }
    return FP8KIT_OK;
}

static int st_cmp_offsets(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* The tensors must tile [0, data_size) exactly, as the reference requires. */
static fp8kit_status st_check_tiling(const char *label, st_file *f, char *err, size_t errlen)
{
    char tq[160], pq[160];
    st_tensor **v = malloc((f->ntensors ? f->ntensors : 1) * sizeof *v);
    if (!v)
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", label);
    for (size_t i = 0; i < f->ntensors; i++)
        v[i] = &f->tensors[i];
    qsort(v, f->ntensors, sizeof *v, st_cmp_offsets);
    uint64_t pos = 0;
    const st_tensor *prev = NULL;
    fp8kit_status st = FP8KIT_OK;
    for (size_t i = 0; i < f->ntensors && !st; i++) {
        const st_tensor *t = v[i];
        if (t->begin < pos) {
            st_quote(t->name, tq, sizeof tq);
            st_quote(prev->name, pq, sizeof pq);
            st = st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE,
                        "%s: tensor '%s' (bytes [%llu, %llu)) overlaps tensor '%s' (bytes [%llu, %llu))", label, tq,
                        (unsigned long long)t->begin, (unsigned long long)t->end, pq,
                        (unsigned long long)prev->begin, (unsigned long long)prev->end);
        } else if (t->begin > pos) {
            st_quote(t->name, tq, sizeof tq);
            st = st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE,
                        "%s: tensor '%s' starts at byte %llu, but the previous tensor ends at %llu (the data "
                        "section may not have holes)",
                        label, tq, (unsigned long long)t->begin, (unsigned long long)pos);
        }
        pos = t->end;
        prev = t;
    }
    if (!st && pos != f->data_size)
        st = st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE,
                    "%s: the data section has %llu bytes but the tensors cover only %llu (trailing bytes)", label,
                    (unsigned long long)f->data_size, (unsigned long long)pos);
    free(v);
    return st;
}

fp8kit_status st_parse(const unsigned char *buf, size_t size, const char *label, st_file *f, char *err,
                       size_t errlen)
{
    memset(f, 0, sizeof *f);
    const fp8kit_status bad = FP8KIT_ERR_CORRUPT_FILE;
    if (size < 8)
        return st_err(err, errlen, bad,
                      "%s: truncated: %zu bytes, fewer than the 8-byte header length a safetensors file starts with",
                      label, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | buf[i];
    /* the length's value is not printed: it is the file's first 8 bytes, and
     * messages never show a file's contents (a link to another file) */
    if (n > ST_MAX_HEADER)
        return st_err(err, errlen, bad,
                      "%s: the header length (the first 8 bytes) exceeds the limit of %llu bytes (100 MB): not a "
                      "safetensors file, or a corrupt one",
                      label, (unsigned long long)ST_MAX_HEADER);
    if (n > size - 8)
        return st_err(err, errlen, bad,
                      "%s: the header length (the first 8 bytes) runs past the end of the file (%zu bytes): "
                      "truncated, or not a safetensors file",
                      label, size);
    if (n == 0)
        return st_err(err, errlen, bad, "%s: the JSON header is empty", label);
    const unsigned char *h = buf + 8;
    int64_t badpos = st_utf8_bad(h, (size_t)n);
    if (badpos >= 0)
        return st_err(err, errlen, bad, "%s: the header is not valid UTF-8 (at header offset %lld)", label,
                      (long long)badpos);
    json_error_t je;
    json_t *root = json_loadb((const char *)h, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        const char *near = strstr(je.text, "near '");
        if (strstr(je.text, "duplicate object key") && near) { /* near '"name"' */
            char name[160];
            snprintf(name, sizeof name, "%s", near + 6);
            size_t l = strlen(name);
            if (l && name[l - 1] == '\'')
                name[l - 1] = '\0';
            return st_err(err, errlen, bad, "%s: duplicate name %s in the header (line %d, column %d)", label,
                          name, je.line, je.column);
        }
        char why[160];
        st_json_reason(je.text, why, sizeof why);
        return st_err(err, errlen, bad, "%s: invalid JSON header (line %d, column %d): %s", label, je.line,
                      je.column, why);
    }
    fp8kit_status st = FP8KIT_OK;
    if (!json_is_object(root)) {
        st = st_err(err, errlen, bad, "%s: the header is not a JSON object", label);
        goto out;
    }
    f->header_len = n;
    f->data_size = size - 8 - n;
    f->data = h + n;
    size_t cnt = json_object_size(root);
    f->tensors = calloc(cnt ? cnt : 1, sizeof *f->tensors);
    if (!f->tensors) {
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", label);
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if ((st = st_parse_meta(label, val, f, err, errlen)))
                goto out;
            continue;
        }
        st_tensor *t = &f->tensors[f->ntensors];
        if ((st = st_parse_entry(label, key, val, f->data_size, t, err, errlen)))
            goto out;
        if (!(t->name = strdup(key))) {
            st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", label);
            goto out;
        }
        t->data = f->data + t->begin;
        f->ntensors++;
    }
    st = st_check_tiling(label, f, err, errlen);
out:
    json_decref(root);
    if (st)
        st_close(f);
    return st;
}

fp8kit_status st_open(const char *path, st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    /* O_NONBLOCK: opening a FIFO (named like a shard, or swapped in after a
     * check) must not wait for a writer; only a regular file is read */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb)) {
        int e = errno;
        close(fd);
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file (%s)", path, st_file_kind(sb.st_mode));
    }
    size_t size = (size_t)sb.st_size;
    unsigned char *map = NULL;
    if (size) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
    }
    /* registered before the header is read: a SIGBUS from here on names the file */
    int slot = map ? st_map_register(map, size, path) : -1;
    static const unsigned char none[1];
    fp8kit_status st = st_parse(map ? map : none, size, path, f, err, errlen);
    if (st) {
        st_map_forget(slot);
        if (map)
            munmap(map, size);
        close(fd);
        return st;
    }
    f->map = map; /* parsed, so size >= 8 and map is set */
    f->map_size = size;
    f->fd = fd; /* kept open for st_check_size */
    f->map_slot = slot;
    if (!(f->path = strdup(path))) {
        st_close(f);
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    return FP8KIT_OK;
}

fp8kit_status st_check_size(const st_file *f, char *err, size_t errlen)
{
    struct stat sb;
    if (!f->map)
        return FP8KIT_OK;
    if (fstat(f->fd, &sb))
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot stat: %s", f->path, strerror(errno));
    if ((uint64_t)sb.st_size < (uint64_t)f->map_size)
        return st_err(err, errlen, FP8KIT_ERR_IO,
                      "%s: the file shrank from %llu to %llu bytes while being read (truncated or rewritten during "
                      "the run)",
                      f->path, (unsigned long long)f->map_size, (unsigned long long)sb.st_size);
    return FP8KIT_OK;
}

/* ------------------------------------------------------------------ index */
void st_index_close(st_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->nshards; i++) {
        if (ix->files)
            st_close(&ix->files[i]);
        free(ix->shards[i]);
    }
    free(ix->files);
    free(ix->shards);
    free(ix->dir);
    free(ix->index_path);
    if (ix->json)
        json_decref((json_t *)ix->json);
    memset(ix, 0, sizeof *ix);
}

static char *st_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* Reads a whole small file (at most max bytes). */
static fp8kit_status st_slurp(const char *path, size_t max, char **out, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block: refused below */
    if (fd < 0)
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        int e = errno;
        close(fd);
        return st_err(err, errlen, FP8KIT_ERR_IO, "%s: not a regular file (%s)", path,
                      S_ISREG(sb.st_mode) ? strerror(e) : st_file_kind(sb.st_mode));
    }
    if ((uint64_t)sb.st_size > max) {
        close(fd);
        return st_err(err, errlen, FP8KIT_ERR_CORRUPT_FILE, "%s: %lld bytes, more than the %zu allowed", path,
                      (long long)sb.st_size, max);
    }
    size_t n = (size_t)sb.st_size, got = 0;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = errno;
            free(buf);
            close(fd);
            return st_err(err, errlen, FP8KIT_ERR_IO, "%s: read failed: %s", path, r ? strerror(e) : "short read");
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return FP8KIT_OK;
}

static int st_plain_name(const char *s)
{
    return s[0] && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') && strcmp(s, ST_INDEX_NAME);
}

fp8kit_status st_index_open(const char *dir, st_index *ix, char *err, size_t errlen)
{
    memset(ix, 0, sizeof *ix);
    const fp8kit_status bad = FP8KIT_ERR_CORRUPT_FILE;
    char tq[160] = "?", sq[160], uq[160];
    fp8kit_status st;
    char *text = NULL;
    size_t len = 0;
    ix->dir = strdup(dir);
    ix->index_path = st_join(dir, ST_INDEX_NAME);
    if (!ix->dir || !ix->index_path) {
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
        goto fail;
    }
    const char *ip = ix->index_path;
    if ((st = st_slurp(ip, ST_MAX_HEADER, &text, &len, err, errlen)))
        goto fail;
    int64_t badpos = st_utf8_bad((const unsigned char *)text, len);
    if (badpos >= 0) {
        st = st_err(err, errlen, bad, "%s: not valid UTF-8 (byte offset %lld)", ip, (long long)badpos);
        goto fail;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    text = NULL;
    if (!root) {
        char why[160];
        st_json_reason(je.text, why, sizeof why);
        st = st_err(err, errlen, bad, "%s: invalid JSON (line %d, column %d): %s", ip, je.line, je.column, why);
        goto fail;
    }
    ix->json = root;
    json_t *wm = json_object_get(root, "weight_map"), *md = json_object_get(root, "metadata");
    if (!json_is_object(root) || !json_is_object(wm)) {
        st = st_err(err, errlen, bad, "%s: expected a JSON object with a \"weight_map\" object", ip);
        goto fail;
    }
    if (md && !json_is_object(md)) {
        st = st_err(err, errlen, bad, "%s: \"metadata\" is not a JSON object", ip);
        goto fail;
    }
    size_t nmap = json_object_size(wm);
    ix->shards = calloc(nmap ? nmap : 1, sizeof *ix->shards);
    size_t *counts = calloc(nmap ? nmap : 1, sizeof *counts);
    json_t *shard_ids = json_object(); /* shard name -> index */
    if (!ix->shards || !counts || !shard_ids) {
        free(counts);
        json_decref(shard_ids);
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", ip);
        goto fail;
    }
    const char *key;
    json_t *val;
    st = FP8KIT_OK;
    json_object_foreach(wm, key, val) {
        st_quote(key, tq, sizeof tq);
        if (!json_is_string(val) || !st_plain_name(json_string_value(val))) {
            st = st_err(err, errlen, bad, "%s: tensor '%s': the shard must be a plain file name in the directory",
                        ip, tq);
            break;
        }
        const char *s = json_string_value(val);
        json_t *id = json_object_get(shard_ids, s);
        if (!id) {
            if (!(ix->shards[ix->nshards] = strdup(s)) ||
                json_object_set_new(shard_ids, s, json_integer((json_int_t)ix->nshards))) {
                st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", ip);
                break;
            }
            counts[ix->nshards++] = 1;
        } else {
            counts[json_integer_value(id)]++;
        }
    }
    if (!st && !(ix->files = calloc(ix->nshards ? ix->nshards : 1, sizeof *ix->files)))
        st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", ip);
    for (size_t i = 0; !st && i < ix->nshards; i++) {
        char *p = st_join(dir, ix->shards[i]);
        if (!p) {
            st = st_err(err, errlen, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of memory", ip);
            break;
        }
        st = st_open(p, &ix->files[i], err, errlen);
        free(p);
        if (st)
            break;
        const st_file *f = &ix->files[i];
        st_quote(ix->shards[i], sq, sizeof sq);
        for (size_t k = 0; !st && k < f->ntensors; k++) {
            json_t *m = json_object_get(wm, f->tensors[k].name);
            st_quote(f->tensors[k].name, tq, sizeof tq);
            if (!m) {
                st = st_err(err, errlen, bad, "%s: tensor '%s': in shard '%s' but not in the index's weight_map",
                            f->path, tq, sq);
            } else if (strcmp(json_string_value(m), ix->shards[i])) {
                st_quote(json_string_value(m), uq, sizeof uq);
                st = st_err(err, errlen, bad, "%s: tensor '%s': in shard '%s' but the index maps it to '%s'",
                            f->path, tq, sq, uq);
            }
        }
        if (!st && counts[i] != f->ntensors) {
            /* every tensor of the shard is listed for it, so some listed ones are missing */
            json_object_foreach(wm, key, val) {
                if (!strcmp(json_string_value(val), ix->shards[i]) && !st_find(f, key)) {
                    st_quote(key, tq, sizeof tq);
                    break;
                }
            }
            st = st_err(err, errlen, bad, "%s: tensor '%s': the index maps it to shard '%s', which does not hold it",
                        ip, tq, sq);
        }
    }
    free(counts);
    json_decref(shard_ids);
    if (st)
        goto fail;
    return FP8KIT_OK;
fail:
    free(text);
    st_index_close(ix);
    return st;
}
