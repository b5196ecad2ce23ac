/* test_safetensors.c - unit tests of src/io: the header parser on valid and
 * corrupt buffers (status, and messages that name the file and tensor), the
 * header writer (round trip, padding, duplicate names), the atomic writer
 * (temporary name, no-clobber rename, abort, removal on SIGINT), sharded
 * index validation, and st_convert: every scheme written through many small
 * row slabs must equal one whole-tensor fp8kit_quantize call byte for byte,
 * an unaligned foreign tensor is handled, dequantize equals
 * fp8kit_dequantize, and failures leave nothing behind.
 * Built and run by CTest (tests/test_*.c). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "format/codec.h"
#include "io/safetensors.h"
#include "io/st_model.h"
#include "test_util.h"

static char tmpdir[256];

/* Fault injection for st_tree_commit (issue 21.1): these definitions of
 * renameat2, rename and rmdir take the place of libc's in this executable
 * (the library is linked statically); armed, they fail as a file system can:
 * no RENAME_EXCHANGE (EINVAL), a busy target, a rename that fails with EIO, a
 * directory that cannot be removed. Disarmed, they are the system calls. */
static int fi_exchange_errno;             /* renameat2(RENAME_EXCHANGE) fails with this */
static unsigned fi_rename_mask, fi_rename_calls; /* bit k: the k-th rename() since arming fails */
static int fi_rename_errno = EIO;
static const char *fi_rmdir_fail;         /* rmdir of a path ending in this fails with EBUSY */

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)
{
    if ((flags & RENAME_EXCHANGE) && fi_exchange_errno) {
        errno = fi_exchange_errno;
        return -1;
    }
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}

int rename(const char *oldpath, const char *newpath)
{
    unsigned k = fi_rename_calls++;
    if (k < 32 && ((fi_rename_mask >> k) & 1)) {
        errno = fi_rename_errno;
        return -1;
    }
    return renameat(AT_FDCWD, oldpath, AT_FDCWD, newpath);
}

int rmdir(const char *path)
{
    size_t a = strlen(path), b = fi_rmdir_fail ? strlen(fi_rmdir_fail) : 0;
    if (fi_rmdir_fail && a >= b && !strcmp(path + a - b, fi_rmdir_fail)) {
        errno = EBUSY;
        return -1;
    }
    return unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
}

static void fi_arm_rename(unsigned mask)
{
    fi_rename_calls = 0;
    fi_rename_mask = mask;
}

#if defined(__SANITIZE_ADDRESS__)
/* ASan's own SIGBUS handler would stand in for the converter's
 * (test_truncated_input checks the converter's message) */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "handle_sigbus=0"; }
#endif

/* ------------------------------------------------------- building buffers */
typedef struct buf {
    unsigned char *p;
    size_t n;
} buf;

/* 8-byte length + header text (unpadded) + data */
static buf mk(const char *hdr, const void *data, size_t dn)
{
    size_t h = strlen(hdr);
    buf b = {malloc(8 + h + dn + 1), 8 + h + dn};
    for (int i = 0; i < 8; i++)
        b.p[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b.p + 8, hdr, h);
    if (dn)
        memcpy(b.p + 8 + h, data, dn);
    return b;
}

static fp8kit_status parse(buf b, st_file *f, char *err, size_t n)
{
    fp8kit_status st = st_parse(b.p, b.n, "t.safetensors", f, err, n);
    return st;
}

/* Expects st_parse to fail with CORRUPT_FILE and a message holding `want`. */
static void expect_bad(const char *what, buf b, const char *want)
{
    st_file f;
    char err[600] = "";
    fp8kit_status st = parse(b, &f, err, sizeof err);
    CHECK(st == FP8KIT_ERR_CORRUPT_FILE, "%s: status %s", what, fp8kit_status_string(st));
    CHECK(strstr(err, "t.safetensors") != NULL, "%s: message names the file: %s", what, err);
    CHECK(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", what, err, want);
    CHECK(f.ntensors == 0 && f.tensors == NULL, "%s: nothing kept", what);
    st_close(&f);
    free(b.p);
}

static void test_parse(void)
{
    unsigned char d[64];
    for (int i = 0; i < 64; i++)
        d[i] = (unsigned char)i;
    /* valid: mixed dtypes, metadata, empty and scalar tensors, padded header */
    const char *ok = "{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},"
                     "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[8,20]},"
                     "\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                     "\"e\":{\"dtype\":\"F8_E4M3\",\"shape\":[0,5],\"data_offsets\":[20,20]},"
                     "\"s\":{\"dtype\":\"F8_E8M0\",\"shape\":[],\"data_offsets\":[20,21]}}   ";
    buf b = mk(ok, d, 21);
    st_file f;
    char err[600];
    CHECK_STATUS(parse(b, &f, err, sizeof err), FP8KIT_OK);
    CHECK(f.ntensors == 4 && f.nmeta == 2 && f.has_meta, "counts %zu %zu", f.ntensors, f.nmeta);
    const st_tensor *t = st_find(&f, "b");
    CHECK(t && t->dtype == ST_BF16 && t->ndim == 2 && t->shape[1] == 3 && t->begin == 8 && t->end == 20 &&
              t->data == b.p + 8 + strlen(ok) + 8,
          "tensor b");
    t = st_find(&f, "s");
    CHECK(t && t->ndim == 0 && st_numel(t) == 1 && t->data[0] == 20, "scalar s");
    t = st_find(&f, "e");
    CHECK(t && st_numel(t) == 0, "empty e");
    CHECK(!strcmp(f.tensors[0].name, "b") && !strcmp(f.tensors[1].name, "a"), "header order kept");
    CHECK(!strcmp(f.meta[0].key, "format") && !strcmp(f.meta[1].value, "v"), "metadata");
    st_close(&f);
    free(b.p);

    /* every dtype name parses, with its size */
    static const char *names[] = {"BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2", "F8_E8M0", "I16", "U16", "F16",
                                  "BF16", "I32", "U32", "F32", "I64", "U64", "F64", "C64"};
    static const size_t sizes[] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8, 8};
    for (int i = 0; i < 17; i++) {
        st_dtype dt;
        CHECK(!st_dtype_parse(names[i], &dt) && st_dtype_size(dt) == sizes[i] && !strcmp(st_dtype_name(dt), names[i]),
              "dtype %s", names[i]);
    }

    /* corrupt inputs, one rule each */
    buf tiny = {malloc(5), 5};
    memset(tiny.p, 0, 5);
    expect_bad("truncated length", tiny, "truncated");
    b = mk("{}", NULL, 0);
    b.p[0] = 200; /* header length past the end */
    expect_bad("header past end", b, "runs past the end");
    b = mk("{}", NULL, 0);
    b.p[0] = 0x01, b.p[1] = 0xE1, b.p[2] = 0xF5, b.p[3] = 0x05; /* 100000001 */
    expect_bad("header too large", b, "100 MB");
    expect_bad("bad utf8", mk("{\"\xc3\x28\":{}}", NULL, 0), "UTF-8");
    expect_bad("overlong utf8", mk("{\"\xc0\xaf\":{}}", NULL, 0), "UTF-8");
    expect_bad("surrogate utf8", mk("{\"\xed\xa0\x80\":{}}", NULL, 0), "UTF-8");
    expect_bad("bad json", mk("{\"a\":", NULL, 0), "JSON");
    expect_bad("empty header", mk("", NULL, 0), "empty");
    expect_bad("not an object", mk("[]", NULL, 0), "not a JSON object");
    expect_bad("unknown dtype", mk("{\"w1\":{\"dtype\":\"F4\",\"shape\":[1],\"data_offsets\":[0,1]}}", d, 1),
               "tensor 'w1': unknown dtype 'F4'");
    expect_bad("shape mismatch", mk("{\"w2\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d, 8),
               "tensor 'w2'");
    expect_bad("overlap",
               mk("{\"p\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"q\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[3,7]}}", d, 7),
               "tensor 'q' (bytes [3, 7)) overlaps tensor 'p'");
    expect_bad("out of range", mk("{\"w3\":{\"dtype\":\"U8\",\"shape\":[9],\"data_offsets\":[0,9]}}", d, 4),
               "tensor 'w3': data_offsets [0, 9] run past");
    expect_bad("reversed", mk("{\"w4\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[3,1]}}", d, 3), "w4");
    expect_bad("hole",
               mk("{\"p\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                  "\"q\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}", d, 5),
               "tensor 'q' starts at byte 3");
    expect_bad("trailing", mk("{\"p\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", d, 3),
               "trailing");
    expect_bad("duplicate",
               mk("{\"dup\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                  "\"dup\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", d, 1),
               "duplicate name \"dup\"");
    expect_bad("negative dim", mk("{\"w5\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", d, 0),
               "tensor 'w5': shape[0]");
    expect_bad("overflow", mk("{\"w6\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],"
                              "\"data_offsets\":[0,0]}}", d, 0), "overflows");
    expect_bad("missing dtype", mk("{\"w7\":{\"shape\":[1],\"data_offsets\":[0,1]}}", d, 1), "\"dtype\"");
    expect_bad("meta not string", mk("{\"__metadata__\":{\"n\":1}}", NULL, 0), "'n' is not a string");
    expect_bad("control char name", mk("{\"a\\u001b[31m\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,1]}}",
                                       d, 1),
               "tensor 'a\\x1b[31m'");
    expect_bad("nine dims", mk("{\"w8\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
                               d, 1), "9 dims");
}

/* ----------------------------------------------------------- header writer */
static void test_header_build(void)
{
    st_out_tensor t[3] = {{"x.weight", ST_F8_E4M3, 2, {3, 5}}, {"x.weight_scale", ST_F32, 0, {0}},
                          {"caf\xc3\xa9", ST_BF16, 1, {2}}};
    st_kv meta[1] = {{"format", "pt"}};
    unsigned char *h = NULL;
    size_t hl = 0;
    uint64_t ds = 0;
    char err[600];
    CHECK_STATUS(st_header_build(t, 3, meta, 1, 1, &h, &hl, &ds, err, sizeof err), FP8KIT_OK);
    CHECK(hl % 8 == 0 && ds == 15 + 4 + 4, "padded header %zu, data %llu", hl, (unsigned long long)ds);
    unsigned char *file = malloc(hl + ds);
    memcpy(file, h, hl);
    for (uint64_t i = 0; i < ds; i++)
        file[hl + i] = (unsigned char)i;
    st_file f;
    CHECK_STATUS(st_parse(file, hl + ds, "rebuilt", &f, err, sizeof err), FP8KIT_OK);
    CHECK(f.ntensors == 3 && f.tensors[1].begin == 15 && f.tensors[2].end == 23 && f.nmeta == 1, "rebuilt layout");
    st_close(&f);
    free(file);
    free(h);
    st_out_tensor dup[2] = {{"a", ST_U8, 1, {1}}, {"a", ST_U8, 1, {1}}};
    CHECK_STATUS(st_header_build(dup, 2, NULL, 0, 0, &h, &hl, &ds, err, sizeof err), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err, "'a'") != NULL, "duplicate named: %s", err);
    st_out_tensor res[1] = {{"__metadata__", ST_U8, 1, {1}}};
    CHECK_STATUS(st_header_build(res, 1, NULL, 0, 0, &h, &hl, &ds, err, sizeof err), FP8KIT_ERR_INVALID_ARGUMENT);
}

/* ---------------------------------------------------------- atomic writer */
static int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ST_TMP_TAG) != NULL;
    if (d)
        closedir(d);
    return n;
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s", path);
    if (f) {
        CHECK(fwrite(p, 1, n, f) == n, "write %s", path);
        fclose(f);
    }
}

static size_t read_file(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    *out = NULL;
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n + 1);
    size_t got = fread(*out, 1, (size_t)n, f);
    fclose(f);
    return got;
}

static void test_writer(void)
{
    char path[512], err[600];
    snprintf(path, sizeof path, "%s/w.bin", tmpdir);
    st_writer w;
    CHECK_STATUS(st_writer_open(&w, path, 1, err, sizeof err), FP8KIT_OK);
    CHECK(count_tmp(tmpdir) == 1 && access(path, F_OK) != 0, "only a temporary file while writing");
    CHECK_STATUS(st_writer_reserve(&w, 10, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_pwrite(&w, "world", 5, 5, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_pwrite(&w, "hello", 5, 0, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_finish(&w, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_commit(&w, 0, err, sizeof err), FP8KIT_OK);
    st_writer_abort(&w);
    unsigned char *p;
    CHECK(read_file(path, &p) == 10 && !memcmp(p, "helloworld", 10), "committed content");
    free(p);
    CHECK(count_tmp(tmpdir) == 0, "no temporary left after commit");
    /* no clobber without force */
    CHECK_STATUS(st_writer_open(&w, path, 1, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_pwrite(&w, "other", 5, 0, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_finish(&w, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_commit(&w, 0, err, sizeof err), FP8KIT_ERR_IO);
    CHECK(strstr(err, "exists") != NULL, "no-clobber message: %s", err);
    st_writer_abort(&w);
    CHECK(read_file(path, &p) == 10 && !memcmp(p, "helloworld", 10), "existing file untouched");
    free(p);
    CHECK(count_tmp(tmpdir) == 0, "abort removed the temporary");
    /* force replaces */
    CHECK_STATUS(st_writer_open(&w, path, 1, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_pwrite(&w, "x", 1, 0, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_finish(&w, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_writer_commit(&w, 1, err, sizeof err), FP8KIT_OK);
    st_writer_abort(&w);
    CHECK(read_file(path, &p) == 1, "forced replace");
    free(p);
    unlink(path);
    /* a signal removes registered temporaries: in a child, so we survive */
    pid_t pid = fork();
    if (pid == 0) {
        st_writer cw;
        char e2[200];
        if (st_writer_open(&cw, path, 1, e2, sizeof e2))
            _exit(3);
        if (st_writer_pwrite(&cw, "partial", 7, 0, e2, sizeof e2))
            _exit(4);
        raise(SIGINT);
        _exit(5); /* not reached */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT, "child died of SIGINT (status %d)", status);
    CHECK(count_tmp(tmpdir) == 0 && access(path, F_OK) != 0, "SIGINT left no file behind");
    /* writer into a missing directory fails cleanly */
    snprintf(path, sizeof path, "%s/missing/x.bin", tmpdir);
    CHECK_STATUS(st_writer_open(&w, path, 1, err, sizeof err), FP8KIT_ERR_IO);
    CHECK(strstr(err, "missing/x.bin") != NULL, "message names the path: %s", err);
}

/* -------------------------------------------------------------- converter */
typedef struct src_tensor {
    const char *name;
    st_dtype dt;
    int64_t r, c;
} src_tensor;

/* Writes a checkpoint of the given tensors with deterministic contents; the
 * data section starts at `misalign` bytes past 8-alignment (a foreign file)
 * when a 1-byte tensor of that size comes first. */
static void make_src(const char *path, const src_tensor *ts, int n, int misalign, uint64_t seed)
{
    st_out_tensor o[8];
    int k = 0;
    if (misalign)
        o[k++] = (st_out_tensor){"pad", ST_U8, 1, {misalign}};
    for (int i = 0; i < n; i++)
        o[k++] = (st_out_tensor){ts[i].name, ts[i].dt, 2, {ts[i].r, ts[i].c}};
    unsigned char *h;
    size_t hl;
    uint64_t ds;
    char err[600];
    if (st_header_build(o, (size_t)k, NULL, 0, 0, &h, &hl, &ds, err, sizeof err))
        return;
    unsigned char *data = calloc(1, ds + 1);
    fk_rng rng = {seed};
    size_t off = (size_t)misalign;
    for (int i = 0; i < n; i++) {
        size_t ne = (size_t)(ts[i].r * ts[i].c);
        for (size_t e = 0; e < ne; e++) {
            float v = (float)(fk_rng_heavy(&rng) * 0.5);
            if (e % 977 == 5)
                v = 0.0f;
            if (ts[i].dt == ST_F32)
                memcpy(data + off + 4 * e, &v, 4);
            else {
                uint16_t b = ts[i].dt == ST_BF16 ? fk_f32_to_bf16(v) : fk_f32_to_f16(v);
                memcpy(data + off + 2 * e, &b, 2);
            }
        }
        off += ne * st_dtype_size(ts[i].dt);
    }
    FILE *f = fopen(path, "wb");
    fwrite(h, 1, hl, f);
    fwrite(data, 1, ds, f);
    fclose(f);
    free(h);
    free(data);
}

/* The library's own answer for one tensor, in one call. */
static void direct_quant(fp8kit_ctx *ctx, const st_tensor *t, const fp8kit_quant_desc *d, unsigned char **q,
                         unsigned char **s, size_t *sbytes)
{
    fp8kit_dtype xd = t->dtype == ST_F32 ? FP8KIT_F32 : t->dtype == ST_BF16 ? FP8KIT_BF16 : FP8KIT_F16;
    size_t xb = (size_t)(t->end - t->begin);
    void *x = aligned_alloc(64, (xb + 63) / 64 * 64);
    memcpy(x, t->data, xb);
    fp8kit_tensor xt = fp8kit_tensor_make(x, xd, 2, t->shape), qt, sc;
    fp8kit_quant_shapes(d, &xt, &qt, &sc);
    *sbytes = (size_t)fp8kit_tensor_numel(&sc) * fp8kit_dtype_size(sc.dtype);
    *q = malloc((size_t)st_numel(t));
    *s = malloc(*sbytes);
    qt.data = *q;
    sc.data = *s;
    CHECK_STATUS(fp8kit_quantize(ctx, d, &xt, &qt, &sc, NULL), FP8KIT_OK);
    free(x);
}

/* st_conv_opts.note: the last weight kept in high precision and why */
typedef struct kept_note {
    int n, why;
    char name[64];
} kept_note;

static void note_kept(void *user, const char *tensor, st_keep_reason why)
{
    kept_note *k = user;
    k->n++;
    k->why = (int)why;
    snprintf(k->name, sizeof k->name, "%s", tensor);
}

static void test_convert(fp8kit_ctx *ctx)
{
    /* rows not a multiple of 128 (partial 128x128 blocks); K a multiple of 128,
     * as the loaders need (FORMATS.md section 4) */
    const src_tensor ts[] = {{"a.weight", ST_BF16, 300, 128},
                             {"b.weight", ST_F32, 257, 256},
                             {"c.weight", ST_F16, 129, 128},
                             {"d.bias", ST_F32, 3, 32}};       /* copied: not .weight */
    char src[512], out[512], out2[512], deq[512], err[600];
    static const st_scheme schemes[] = {ST_SCHEME_FP8_TENSOR, ST_SCHEME_FP8_ROW, ST_SCHEME_FP8_BLOCK,
                                        ST_SCHEME_MXFP8};
    static const fp8kit_scheme lib[] = {FP8KIT_SCHEME_TENSOR, FP8KIT_SCHEME_ROW, FP8KIT_SCHEME_BLOCK128X128,
                                        FP8KIT_SCHEME_MX};
    for (int misalign = 0; misalign <= 3; misalign += 3) {
        snprintf(src, sizeof src, "%s/src%d.safetensors", tmpdir, misalign);
        make_src(src, ts, 4, misalign, 77 + (uint64_t)misalign);
        st_file in;
        CHECK_STATUS(st_open(src, &in, err, sizeof err), FP8KIT_OK);
        for (int si = 0; si < 4; si++) {
            for (int variant = 0; variant < 2; variant++) {
                st_conv_opts o;
                memset(&o, 0, sizeof o);
                o.scheme = schemes[si];
                o.format = ST_FORMAT_COMPRESSED_TENSORS; /* takes partial blocks along N */
                o.no_fsync = 1;
                o.force = 1;
                o.pow2 = variant && si < 3;
                o.rounding = variant && si == 3 ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
                st_stats stats;
                snprintf(out, sizeof out, "%s/q.safetensors", tmpdir);
                snprintf(out2, sizeof out2, "%s/q_slabs.safetensors", tmpdir);
                CHECK_STATUS(st_convert(ctx, src, out, &o, &stats, err, sizeof err), FP8KIT_OK);
                CHECK(stats.quantized == 3 && stats.copied == 1 + (misalign > 0), "counts %lld %lld",
                      (long long)stats.quantized, (long long)stats.copied);
                o.slab_bytes = 1000; /* many slabs; block128x128 rounds up to 128 rows */
                CHECK_STATUS(st_convert(ctx, src, out2, &o, &stats, err, sizeof err), FP8KIT_OK);
                unsigned char *p1, *p2;
                size_t n1 = read_file(out, &p1), n2 = read_file(out2, &p2);
                CHECK(n1 == n2 && n1 > 0 && !memcmp(p1, p2, n1), "scheme %d: slabs change nothing", si);
                free(p2);
                st_file q;
                CHECK_STATUS(st_parse(p1, n1, "q", &q, err, sizeof err), FP8KIT_OK);
                fp8kit_quant_desc d = fp8kit_quant_desc_default(lib[si]);
                d.pow2 = o.pow2;
                d.rounding = o.rounding;
                for (int k = 0; k < 3; k++) {
                    const st_tensor *t = st_find(&in, ts[k].name);
                    char sn[64];
                    snprintf(sn, sizeof sn, "%s%s", ts[k].name, "_scale");
                    const st_tensor *qt = st_find(&q, ts[k].name), *st = st_find(&q, sn);
                    CHECK(qt && st && qt->dtype == ST_F8_E4M3, "scheme %d: %s written", si, ts[k].name);
                    if (!qt || !st)
                        continue;
                    CHECK((uintptr_t)st->data % st_dtype_size(st->dtype) == 0, "scale aligned");
                    unsigned char *dq, *ds;
                    size_t sb;
                    direct_quant(ctx, t, &d, &dq, &ds, &sb);
                    CHECK(!memcmp(qt->data, dq, (size_t)st_numel(t)), "scheme %d %s: codes = fp8kit_quantize",
                          si, ts[k].name);
                    CHECK(st->end - st->begin == sb && !memcmp(st->data, ds, sb),
                          "scheme %d %s: scales = fp8kit_quantize", si, ts[k].name);
                    free(dq);
                    free(ds);
                }
                const st_tensor *cp = st_find(&q, "d.bias"), *ci = st_find(&in, "d.bias");
                CHECK(cp && cp->dtype == ST_F32 && !memcmp(cp->data, ci->data, 3 * 32 * 4), "d.bias copied");
                /* dequantize = fp8kit_dequantize on the written codes */
                snprintf(deq, sizeof deq, "%s/d.safetensors", tmpdir);
                st_conv_opts od;
                memset(&od, 0, sizeof od);
                od.dequantize = 1;
                od.out_dtype = FP8KIT_F32;
                od.no_fsync = 1;
                od.force = 1;
                od.slab_bytes = 3000;
                CHECK_STATUS(st_convert(ctx, out, deq, &od, &stats, err, sizeof err), FP8KIT_OK);
                st_file y;
                CHECK_STATUS(st_open(deq, &y, err, sizeof err), FP8KIT_OK);
                CHECK(y.ntensors == 4 + (misalign > 0), "dequantized tensors %zu", y.ntensors);
                for (int k = 0; k < 3; k++) {
                    const st_tensor *qt = st_find(&q, ts[k].name), *yt = st_find(&y, ts[k].name);
                    char sn[64];
                    snprintf(sn, sizeof sn, "%s%s", ts[k].name, "_scale");
                    const st_tensor *sc = st_find(&q, sn);
                    if (!qt || !yt || !sc)
                        continue;
                    size_t ne = (size_t)st_numel(qt), sbb = (size_t)(sc->end - sc->begin);
                    float *ref = malloc(ne * 4);
                    void *sbuf = malloc(sbb);
                    memcpy(sbuf, sc->data, sbb);
                    fp8kit_tensor qq = fp8kit_tensor_make((void *)qt->data, FP8KIT_E4M3, 2, qt->shape);
                    fp8kit_tensor ss = fp8kit_tensor_make(sbuf, sc->dtype == ST_F8_E8M0 || sc->dtype == ST_U8 ? FP8KIT_E8M0 : FP8KIT_F32,
                                                          sc->ndim, sc->shape);
                    fp8kit_tensor yy = fp8kit_tensor_make(ref, FP8KIT_F32, 2, qt->shape);
                    CHECK_STATUS(fp8kit_dequantize(ctx, &d, &qq, &ss, &yy, NULL), FP8KIT_OK);
                    CHECK(yt->dtype == ST_F32 && !memcmp(yt->data, ref, ne * 4), "scheme %d %s: dequantized", si,
                          ts[k].name);
                    free(ref);
                    free(sbuf);
                }
                st_close(&y);
                st_close(&q);
                free(p1);
            }
        }
        st_close(&in);
    }
    CHECK(count_tmp(tmpdir) == 0, "no temporary files after conversions");

    /* failures: nothing written */
    snprintf(out, sizeof out, "%s/never.safetensors", tmpdir);
    st_conv_opts o;
    memset(&o, 0, sizeof o);
    o.scheme = ST_SCHEME_MXFP8;
    o.no_fsync = 1;
    st_stats stats;
    const src_tensor odd[] = {{"odd.weight", ST_BF16, 4, 33}};
    snprintf(src, sizeof src, "%s/odd.safetensors", tmpdir);
    make_src(src, odd, 1, 0, 5);
    /* mxfp8 cannot take K = 33: the weight is kept in high precision and named */
    kept_note kn = {0, -1, ""};
    o.note = note_kept, o.note_user = &kn;
    CHECK_STATUS(st_convert(ctx, src, out, &o, &stats, err, sizeof err), FP8KIT_OK);
    CHECK(kn.n == 1 && kn.why == ST_KEEP_SHAPE && !strcmp(kn.name, "odd.weight"), "K = 33 kept: %d %d %s", kn.n,
          kn.why, kn.name);
    CHECK(stats.quantized == 0 && stats.copied == 1 && stats.kept == 1, "kept tensor copied");
    unlink(out);
    const char *globs[] = {"odd.*"};
    o.exclude = globs;
    o.nexclude = 1;
    kn.n = 0;
    CHECK_STATUS(st_convert(ctx, src, out, &o, &stats, err, sizeof err), FP8KIT_OK);
    CHECK(stats.quantized == 0 && stats.copied == 1, "excluded tensor copied");
    CHECK(kn.n == 1 && kn.why == ST_KEEP_EXCLUDED, "excluded: reason %d", kn.why);
    const char *none[] = {"nothing.*"};
    o.exclude = none;
    unlink(out);
    CHECK_STATUS(st_convert(ctx, src, out, &o, &stats, err, sizeof err), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err, "nothing.*") && strstr(err, "matches no tensor"), "an --exclude matching nothing: %s", err);
    CHECK(access(out, F_OK) != 0 && count_tmp(tmpdir) == 0, "nothing written");
    o.exclude = globs;
    CHECK_STATUS(st_convert(ctx, src, out, &o, &stats, err, sizeof err), FP8KIT_OK);
    CHECK_STATUS(st_convert(ctx, src, out, &o, &stats, err, sizeof err), FP8KIT_ERR_IO);
    CHECK(strstr(err, "exists") != NULL, "no overwrite without force: %s", err);
    unlink(out);
    unsigned char garbage[40] = {32, 0, 0, 0, 0, 0, 0, 0, '{', '"', 'x'};
    snprintf(src, sizeof src, "%s/garbage.safetensors", tmpdir);
    write_file(src, garbage, sizeof garbage);
    CHECK_STATUS(st_convert(ctx, src, out, &o, &stats, err, sizeof err), FP8KIT_ERR_CORRUPT_FILE);
    CHECK(strstr(err, "garbage.safetensors") != NULL, "corrupt input named: %s", err);
    CHECK(access(out, F_OK) != 0 && count_tmp(tmpdir) == 0, "nothing written for corrupt input");
}

/* ------------------------------------------------ issue 21.5: one shape rule */
/* The reader (st_parse) and the writer (st_header_build) judge shapes by the
 * same rule (st_shape_bytes): what one accepts the other does, whichever dim
 * is zero. The reader used to accept zero-element shapes whose other dims
 * overflow once multiplied by the element size (F32 [2^62, 0]), which the
 * writer refused: inspect passed a file quantize failed on, and fuzz_st's
 * round-trip invariant aborted (tests/fuzz/corpus/regress-zero-numel-*). */
static void test_shape_rule(fp8kit_ctx *ctx)
{
    static const struct {
        const char *dtype;
        st_dtype dt;
        int nd;
        int64_t shape[3];
        int ok;
    } cases[] = {
        {"F32", ST_F32, 2, {INT64_C(4611686018427387904), 0}, 0},      /* 2^62 * 4 bytes */
        {"F32", ST_F32, 2, {0, INT64_C(4611686018427387904)}, 0},      /* the same, zero first */
        {"I64", ST_I64, 3, {INT64_C(1152921504606846976), 7, 0}, 0},   /* 7 * 2^60 * 8 */
        {"BF16", ST_BF16, 3, {INT64_C(4611686018427387904), 0, 5}, 0}, /* zero in the middle */
        {"F32", ST_F32, 2, {INT64_C(2305843009213693951), 0}, 1},      /* (2^61 - 1) * 4 fits */
        {"U8", ST_U8, 2, {0, INT64_MAX}, 1},
        {"F8_E4M3", ST_F8_E4M3, 2, {INT64_MAX, 0}, 1},
        {"U8", ST_U8, 3, {INT64_C(4294967296), INT64_C(4294967296), 0}, 0}, /* 2^64 */
    };
    char hdr[256], err[600];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dims[96] = "";
        for (int d = 0; d < cases[i].nd; d++)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? "," : "",
                     (long long)cases[i].shape[d]);
        snprintf(hdr, sizeof hdr, "{\"z\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[0,0]}}",
                 cases[i].dtype, dims);
        buf b = mk(hdr, "", 0);
        st_file f;
        fp8kit_status rst = parse(b, &f, err, sizeof err);
        CHECK(rst == (cases[i].ok ? FP8KIT_OK : FP8KIT_ERR_CORRUPT_FILE), "shape rule case %zu: reader %s (%s)", i,
              fp8kit_status_string(rst), err);
        if (!cases[i].ok)
            CHECK(strstr(err, "tensor 'z'") && strstr(err, "overflows"), "case %zu: message %s", i, err);
        st_close(&f);
        free(b.p);
        st_out_tensor t = {"z", cases[i].dt, cases[i].nd, {0}};
        memcpy(t.shape, cases[i].shape, sizeof cases[i].shape);
        unsigned char *h = NULL;
        size_t hl = 0;
        uint64_t ds = 1;
        fp8kit_status wst = st_header_build(&t, 1, NULL, 0, 0, &h, &hl, &ds, err, sizeof err);
        CHECK(wst == (cases[i].ok ? FP8KIT_OK : FP8KIT_ERR_SIZE_OVERFLOW), "shape rule case %zu: writer %s (%s)", i,
              fp8kit_status_string(wst), err);
        CHECK(!cases[i].ok || ds == 0, "case %zu: empty data section", i);
        free(h);
        uint64_t bytes = 7;
        CHECK((st_shape_bytes(cases[i].dt, cases[i].nd, cases[i].shape, &bytes) == 0) == cases[i].ok &&
                  (!cases[i].ok || bytes == 0),
              "case %zu: st_shape_bytes", i);
    }
    uint64_t bytes = 0;
    const int64_t neg[2] = {2, -1}, big[2] = {INT64_C(1) << 31, INT64_C(1) << 29}, one[1] = {3};
    CHECK(st_shape_bytes(ST_F32, 2, neg, &bytes) == -1, "negative dim");
    CHECK(st_shape_bytes(ST_F32, 2, big, &bytes) == 0 && bytes == (UINT64_C(1) << 62), "2^60 F32 = 2^62 bytes");
    CHECK(st_shape_bytes(ST_F64, 2, big, &bytes) == -2, "2^60 F64 overflows");
    CHECK(st_shape_bytes(ST_F32, 0, one, &bytes) == 0 && bytes == 4, "a scalar is one element");
    CHECK(st_shape_bytes(ST_F32, ST_MAX_DIMS + 1, one, &bytes) == -1, "rank over the limit");

    /* issue 21.5a: an empty fp8 weight with K = 2^63 - 1 (valid: 0 bytes) and
     * its block scale grid [0, ceil(K / 128)] = [0, 2^56]: the scheme is
     * recognised without computing K + 127 (signed overflow, UBSan aborts),
     * and dequantizing it (BF16 [0, 2^63 - 1] would overflow) is refused with
     * SIZE_OVERFLOW before anything is written */
    const char *fp8 = "{\"w.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[0,9223372036854775807],"
                      "\"data_offsets\":[0,0]},\"w.weight_scale_inv\":{\"dtype\":\"F32\","
                      "\"shape\":[0,72057594037927936],\"data_offsets\":[0,0]}}";
    buf b = mk(fp8, "", 0);
    st_file f;
    CHECK_STATUS(parse(b, &f, err, sizeof err), FP8KIT_OK);
    char conv[256];
    const st_file *one_file = &f;
    CHECK(st_describe_quant(&one_file, 1, conv, sizeof conv, NULL, 0) == 0, "huge empty weight: valid");
    CHECK(strstr(conv, "1 weights 128x128") != NULL, "huge empty weight: block scheme recognised (%s)", conv);
    st_close(&f);
    char src[512], out[512];
    snprintf(src, sizeof src, "%s/huge_empty.safetensors", tmpdir);
    snprintf(out, sizeof out, "%s/huge_empty_out.safetensors", tmpdir);
    write_file(src, b.p, b.n);
    free(b.p);
    st_conv_opts o;
    memset(&o, 0, sizeof o);
    o.dequantize = 1;
    o.out_dtype = FP8KIT_BF16;
    o.no_fsync = 1;
    st_stats stats;
    CHECK_STATUS(st_convert(ctx, src, out, &o, &stats, err, sizeof err), FP8KIT_ERR_SIZE_OVERFLOW);
    CHECK(strstr(err, "w.weight") != NULL, "overflowing output named: %s", err);
    CHECK(access(out, F_OK) != 0 && count_tmp(tmpdir) == 0, "nothing written for an overflowing output");
    unlink(src);
}

/* ------------------------------------------- issue 21.8a: no file contents */
/* Messages never show a file's bytes: a shard or index may be a link to any
 * file (download caches are links), and the first bytes of /etc/passwd used
 * to come back as the "header length", JSON errors quoted the input around
 * the error, a UTF-8 error the byte. */
static void expect_no_echo(const char *what, const unsigned char *blob, size_t n, const char *const *secrets)
{
    st_file f;
    char err[600] = "";
    fp8kit_status st = st_parse(blob, n, "linked.safetensors", &f, err, sizeof err);
    CHECK(st == FP8KIT_ERR_CORRUPT_FILE && strstr(err, "linked.safetensors"), "%s: refused, named: %s", what, err);
    for (const char *const *p = secrets; *p; p++)
        CHECK(strstr(err, *p) == NULL, "%s: the message shows '%s': %s", what, *p, err);
    st_close(&f);
}

static void test_no_echo(void)
{
    static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n";
    uint64_t first8 = 0;
    memcpy(&first8, passwd, 8);
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)first8);
    const char *s1[] = {"root", "daemon", num, NULL};
    expect_no_echo("passwd", (const unsigned char *)passwd, sizeof passwd - 1, s1);
    /* a small first 8 bytes: "runs past the end", without the value */
    unsigned char small[64] = {0x39, 0x30, 0x00};
    memcpy(small + 8, "SECRET-PAYLOAD", 14);
    const char *s2[] = {"12345", "SECRET", NULL};
    expect_no_echo("small length", small, sizeof small, s2);
    /* JSON errors: jansson quotes the input near the error */
    static const char *json_bad[] = {"{\"a\": SECRETTOKEN}", "{\"a\":1} SECRETTOKEN", "{\"a\":\"\\u12SECRETTOKEN\"}",
                                     "{\"SECRETTOKEN\x01\":1}", "[\"SECRETTOKEN\""};
    const char *s3[] = {"SECRETTOKEN", "SECRET", "0x1", "\\u12", NULL};
    for (size_t i = 0; i < sizeof json_bad / sizeof json_bad[0]; i++) {
        buf b = mk(json_bad[i], "", 0);
        char what[32];
        snprintf(what, sizeof what, "bad JSON %zu", i);
        expect_no_echo(what, b.p, b.n, s3);
        free(b.p);
    }
    /* invalid UTF-8: the offset, not the byte */
    buf b = mk("{\"ab\xfe\":1}", "", 0);
    const char *s4[] = {"0xfe", "fe)", NULL};
    expect_no_echo("bad UTF-8", b.p, b.n, s4);
    free(b.p);
    char why[160];
    st_json_reason("'[' or '{' expected near 'root'", why, sizeof why);
    CHECK(!strcmp(why, "'[' or '{' expected"), "st_json_reason: %s", why);
}

/* ------------------------------------ issue 21.7: truncated inputs, SIGBUS */
typedef struct trunc_ctl {
    const char *path;
    off_t to;
    int calls, done;
} trunc_ctl;

/* st_conv_opts.progress: after the first slab, cut the input file short */
static void truncate_after_first(void *user, const st_stats *s, int final)
{
    trunc_ctl *t = user;
    (void)s;
    if (!final && ++t->calls == 1 && !t->done) {
        t->done = !truncate(t->path, t->to);
        CHECK(t->done, "truncate %s", t->path);
    }
}

static void test_truncated_input(fp8kit_ctx *ctx)
{
    /* an input truncated during the run: the size check before each slab
     * fails with IO naming the file, nothing is written (quantize: the
     * library's reads; copy: the writer thread's; dequantize: scales + codes) */
    const src_tensor ts[] = {{"big.weight", ST_BF16, 512, 256}, {"big.bias", ST_F32, 256, 256}};
    char src[512], out[512], err[600];
    snprintf(src, sizeof src, "%s/trunc.safetensors", tmpdir);
    snprintf(out, sizeof out, "%s/trunc_out.safetensors", tmpdir);
    static const char *all[] = {"big.*"};
    for (int mode = 0; mode < 3; mode++) {
        make_src(src, ts, 2, 0, 9);
        st_conv_opts o;
        memset(&o, 0, sizeof o);
        o.scheme = ST_SCHEME_FP8_ROW;
        o.no_fsync = 1;
        o.slab_bytes = 8192;
        if (mode == 1) { /* copy only */
            o.exclude = all;
            o.nexclude = 1;
        }
        if (mode == 2) { /* dequantize an fp8 file made here */
            char q[512];
            snprintf(q, sizeof q, "%s/trunc_q.safetensors", tmpdir);
            st_stats qs;
            CHECK_STATUS(st_convert(ctx, src, q, &o, &qs, err, sizeof err), FP8KIT_OK);
            CHECK(rename(q, src) == 0, "rename %s", q);
            o.dequantize = 1;
            o.out_dtype = FP8KIT_F32;
        }
        struct stat sb;
        stat(src, &sb);
        trunc_ctl tc = {src, sb.st_size / 3, 0, 0};
        o.progress = truncate_after_first;
        o.progress_user = &tc;
        st_stats stats;
        fp8kit_status st = st_convert(ctx, src, out, &o, &stats, err, sizeof err);
        CHECK(st == FP8KIT_ERR_IO && strstr(err, "trunc.safetensors") && strstr(err, "shrank"),
              "mode %d: truncated input: %s: %s", mode, fp8kit_status_string(st), err);
        CHECK(access(out, F_OK) != 0 && count_tmp(tmpdir) == 0, "mode %d: nothing written", mode);
    }
    unlink(src);

    /* the residual race (truncated between the check and the read): the
     * SIGBUS handler names the file, removes the temporaries, and the process
     * dies of SIGBUS. In a child, with its stderr in a file. */
    make_src(src, ts, 2, 0, 9);
    char log[512], tmpout[512];
    snprintf(log, sizeof log, "%s/sigbus.log", tmpdir);
    snprintf(tmpout, sizeof tmpout, "%s/sigbus_out.bin", tmpdir);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
            _exit(3);
        st_file f;
        st_writer w;
        char e2[300];
        if (st_open(src, &f, e2, sizeof e2) || st_writer_open(&w, tmpout, 1, e2, sizeof e2))
            _exit(4);
        if (truncate(src, 0))
            _exit(5);
        volatile unsigned char sink = f.map[f.map_size - 1]; /* SIGBUS */
        (void)sink;
        _exit(6);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS, "child died of SIGBUS (status %d)", status);
    unsigned char *msg = NULL;
    size_t n = read_file(log, &msg);
    if (msg)
        msg[n] = '\0';
    CHECK(msg && strstr((char *)msg, "trunc.safetensors: I/O error: the file shrank while being read"),
          "the SIGBUS message names the file: %s", msg ? (char *)msg : "(none)");
    free(msg);
    CHECK(count_tmp(tmpdir) == 0 && access(tmpout, F_OK) != 0, "SIGBUS left no temporary file");
    unlink(log);
    unlink(src);
}

/* ------------------------------------------------- issue 21.7: stale names */
/* A temporary name of this tool whose writer is gone (SIGKILL) is removed by
 * the next run next to the same target; one whose writer is alive, or that
 * another host made (process ids mean nothing across hosts), is kept. */
static void test_stale(void)
{
    char dir[512], target[600], err[600];
    snprintf(dir, sizeof dir, "%s/stale", tmpdir);
    mkdir(dir, 0755);
    snprintf(target, sizeof target, "%s/model.safetensors", dir);
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    unsigned host = st_tmp_host_tag();
    static const struct {
        const char *kind;
        int dead, other_host, removed;
    } cases[] = {{"file", 1, 0, 1}, {"dir", 1, 0, 1}, {"file", 0, 0, 0}, {"file", 1, 1, 0}, {"dir", 0, 1, 0},
                 {"old", 1, 0, 0}}; /* an old OUT moved aside whose target is missing: the only copy */
    char names[6][700];
    for (int i = 0; i < 6; i++) {
        snprintf(names[i], sizeof names[i], "%s/.model.safetensors" ST_TMP_TAG "%s-%08x-%ld-%06x", dir,
                 cases[i].kind, cases[i].other_host ? host ^ 0x5a5a5a5au : host,
                 cases[i].dead ? (long)dead : (long)getppid(), 0xabc000 + i);
        if (strcmp(cases[i].kind, "file")) {
            mkdir(names[i], 0755);
            char inner[720];
            snprintf(inner, sizeof inner, "%.700s/x", names[i]);
            write_file(inner, "x", 1);
        } else {
            write_file(names[i], "partial", 7);
        }
    }
    char other[700]; /* another target's stale name in the same directory: also the tool's, also removed */
    snprintf(other, sizeof other, "%s/.other.bin" ST_TMP_TAG "file-%08x-%ld-000001", dir, host, (long)dead);
    write_file(other, "o", 1);
    char foreign[700]; /* not a name this tool makes: never touched */
    snprintf(foreign, sizeof foreign, "%s/.model.safetensors.fp8kit-tmp-notes.txt", dir);
    write_file(foreign, "keep", 4);
    CHECK(st_tmp_clean_stale(target) == 3, "three stale names removed");
    for (int i = 0; i < 6; i++)
        CHECK((access(names[i], F_OK) != 0) == cases[i].removed, "stale case %d (%s, %s, %s): %s", i, cases[i].kind,
              cases[i].dead ? "dead writer" : "live writer", cases[i].other_host ? "other host" : "this host",
              cases[i].removed ? "removed" : "kept");
    CHECK(access(other, F_OK) != 0 && access(foreign, F_OK) == 0, "another target's stale name removed, a foreign "
          "name kept");
    /* once the target exists again, the old OUT left aside is garbage */
    write_file(target, "t", 1);
    CHECK(st_tmp_clean_stale(target) == 1 && access(names[5], F_OK) != 0, "an old OUT whose target exists: removed");
    (void)err;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

/* --------------------------------------- issue 21.1: replacing a directory */
/* "name=content" entries of a directory, sorted, one level of subdirectories
 * as "sub/"; for comparing trees */
static void listing(const char *dir, char *out, size_t n)
{
    struct dirent **list = NULL;
    int k = scandir(dir, &list, NULL, alphasort);
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < k; i++) {
        const char *nm = list[i]->d_name;
        if (strcmp(nm, ".") && strcmp(nm, "..") && o < n) {
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", dir, nm);
            struct stat sb;
            unsigned char *c = NULL;
            if (!lstat(p, &sb) && S_ISDIR(sb.st_mode))
                o += (size_t)snprintf(out + o, n - o, "%s/;", nm);
            else {
                size_t l = read_file(p, &c);
                o += (size_t)snprintf(out + o, n - o, "%s=%.*s;", nm, (int)l, c ? (char *)c : "");
            }
            free(c);
        }
        free(list[i]);
    }
    free(list);
}

/* A new tree beside out holding model.safetensors = "new" and sub/a = "a",
 * every path registered, as st_convert builds it. */
static void new_tree(st_tmp_tree *t, const char *out)
{
    char err[300], p[1024];
    CHECK_STATUS(st_tree_create(t, out, err, sizeof err), FP8KIT_OK);
    snprintf(p, sizeof p, "%s/model.safetensors", t->root);
    CHECK_STATUS(st_tree_add(t, p, 0, err, sizeof err), FP8KIT_OK);
    write_file(p, "new", 3);
    snprintf(p, sizeof p, "%s/sub", t->root);
    CHECK_STATUS(st_tree_add(t, p, 1, err, sizeof err), FP8KIT_OK);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/sub/a", t->root);
    CHECK_STATUS(st_tree_add(t, p, 0, err, sizeof err), FP8KIT_OK);
    write_file(p, "a", 1);
}

/* An existing OUT whose shard name is taken by a directory, plus other files */
static void old_tree(const char *out)
{
    char p[1024];
    mkdir(out, 0755);
    snprintf(p, sizeof p, "%s/model.safetensors", out);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/model.safetensors/inner", out);
    write_file(p, "i", 1);
    snprintf(p, sizeof p, "%s/old.txt", out);
    write_file(p, "old", 3);
    snprintf(p, sizeof p, "%s/keep", out);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/keep/k", out);
    write_file(p, "k", 1);
}

static void test_tree_commit(void)
{
    char base[512], out[600], err[600], warn[600], before[2048], after[2048], sub[700];
    snprintf(base, sizeof base, "%s/commit", tmpdir);
    mkdir(base, 0755);
    snprintf(out, sizeof out, "%s/out", base);
    char want_new[256] = "model.safetensors=new;sub/;";
    st_tmp_tree t;
    int changed;
    /* each way: 0 exchange, 1 no exchange (fallback: aside, in) */
    for (int way = 0; way < 2; way++) {
        old_tree(out);
        new_tree(&t, out);
        fi_exchange_errno = way ? EINVAL : 0;
        changed = 0;
        warn[0] = '\0';
        CHECK_STATUS(st_tree_commit(&t, out, 1, 1, &changed, warn, sizeof warn, err, sizeof err), FP8KIT_OK);
        st_tree_discard(&t);
        listing(out, after, sizeof after);
        snprintf(sub, sizeof sub, "%s/sub", out);
        listing(sub, before, sizeof before);
        CHECK(!strcmp(after, want_new) && !strcmp(before, "a=a;") && !warn[0] && !changed,
              "way %d: OUT is the whole new directory, the old one gone (%s | %s | %s)", way, after, before, warn);
        CHECK(count_tmp(base) == 0, "way %d: nothing left beside OUT", way);
        CHECK(st_remove_tree(out) == 0, "remove OUT");
    }
    /* the fallback's second rename fails: the old directory is put back */
    old_tree(out);
    listing(out, before, sizeof before);
    new_tree(&t, out);
    fi_exchange_errno = EINVAL;
    fi_arm_rename(2u); /* call 0: OUT aside; call 1: new in (fails); call 2: old back */
    changed = 0;
    fp8kit_status st = st_tree_commit(&t, out, 1, 1, &changed, warn, sizeof warn, err, sizeof err);
    fi_arm_rename(0);
    st_tree_discard(&t);
    listing(out, after, sizeof after);
    CHECK(st == FP8KIT_ERR_IO && strstr(err, "cannot move the new directory into place") && strstr(err, "back") &&
              !changed,
          "failed second rename: IO, the old one back (%s)", err);
    CHECK(!strcmp(before, after) && count_tmp(base) == 0, "failed second rename: OUT unchanged (%s), nothing left",
          after);
    /* ... and the way back fails too: the message says where the old one is,
     * the caller learns OUT changed, and no cleanup ever removes it */
    new_tree(&t, out);
    fi_arm_rename(6u); /* calls 1 and 2 fail */
    changed = 0;
    st = st_tree_commit(&t, out, 1, 1, &changed, warn, sizeof warn, err, sizeof err);
    fi_arm_rename(0);
    st_tree_discard(&t);
    const char *at = strstr(err, "it is now ");
    char aside[700] = "";
    if (at)
        sscanf(at + 10, "%699s", aside);
    CHECK(st == FP8KIT_ERR_IO && changed && at && access(out, F_OK) != 0, "OUT moved aside and stuck: IO, "
          "changed = %d: %s", changed, err);
    listing(aside, after, sizeof after);
    CHECK(aside[0] && !strcmp(before, after), "the old directory is whole at the path named (%s: %s)", aside, after);
    CHECK(st_tmp_clean_stale(out) == 0 && access(aside, F_OK) == 0, "stale cleanup keeps an old OUT whose target is "
          "missing");
    CHECK(rename(aside, out) == 0, "moved back by hand");
    /* exchange refused (e.g. OUT is a mount point: EBUSY): nothing changes */
    new_tree(&t, out);
    fi_exchange_errno = EBUSY;
    st = st_tree_commit(&t, out, 1, 1, &changed, warn, sizeof warn, err, sizeof err);
    st_tree_discard(&t);
    listing(out, after, sizeof after);
    CHECK(st == FP8KIT_ERR_IO && strstr(err, "cannot replace it") && !strcmp(before, after) &&
              count_tmp(base) == 0,
          "exchange refused: IO, OUT unchanged, nothing left (%s)", err);
    fi_exchange_errno = 0;
    /* the old directory cannot be removed completely (an immutable file, a
     * mount point inside it): OUT is the new one, a warning names what is
     * left, and everything else of the old one is gone */
    new_tree(&t, out);
    fi_rmdir_fail = "/keep";
    warn[0] = '\0';
    CHECK_STATUS(st_tree_commit(&t, out, 1, 1, &changed, warn, sizeof warn, err, sizeof err), FP8KIT_OK);
    fi_rmdir_fail = NULL;
    st_tree_discard(&t);
    listing(out, after, sizeof after);
    at = strstr(warn, "is in ");
    aside[0] = '\0';
    if (at)
        sscanf(at + 6, "%699s", aside);
    listing(aside, before, sizeof before);
    CHECK(!strcmp(after, want_new) && strstr(warn, "could not be removed completely") && !strcmp(before, "keep/;"),
          "old directory partly removable: OUT new (%s), warning (%s), only keep/ left (%s)", after, warn, before);
    CHECK(aside[0] && st_remove_tree(aside) == 0, "leftover removable afterwards");
    /* the same through st_convert: stats.out_changed tells the CLI not to
     * claim that nothing was written */
    {
        char in[700], f[760];
        snprintf(in, sizeof in, "%s/model_in", base);
        mkdir(in, 0755);
        snprintf(f, sizeof f, "%s/model.safetensors", in);
        const src_tensor one[] = {{"l.weight", ST_BF16, 4, 32}};
        make_src(f, one, 1, 0, 3);
        fp8kit_ctx *cctx = NULL;
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cctx), FP8KIT_OK);
        st_conv_opts o;
        memset(&o, 0, sizeof o);
        o.scheme = ST_SCHEME_FP8_ROW;
        o.no_fsync = 1;
        o.force = 1;
        st_stats stats;
        fi_exchange_errno = EINVAL;
        fi_arm_rename(6u);
        st = st_convert(cctx, in, out, &o, &stats, err, sizeof err);
        fi_arm_rename(0);
        fi_exchange_errno = 0;
        at = strstr(err, "it is now ");
        aside[0] = '\0';
        if (at)
            sscanf(at + 10, "%699s", aside);
        CHECK(st == FP8KIT_ERR_IO && stats.out_changed == 1 && aside[0] && access(out, F_OK) != 0,
              "st_convert: OUT moved aside and stuck: out_changed %d: %s", stats.out_changed, err);
        CHECK(aside[0] && rename(aside, out) == 0, "moved back by hand");
        CHECK_STATUS(st_convert(cctx, in, out, &o, &stats, err, sizeof err), FP8KIT_OK);
        CHECK(stats.out_changed == 0 && count_tmp(base) == 0, "a good run: out_changed 0, nothing left");
        fp8kit_ctx_destroy(cctx);
    }
    /* OUT is a link to a directory: not replaced */
    char target[700];
    snprintf(target, sizeof target, "%s/real", base);
    mkdir(target, 0755);
    CHECK(st_remove_tree(out) == 0 && symlink("real", out) == 0, "link OUT");
    new_tree(&t, out);
    st = st_tree_commit(&t, out, 1, 1, &changed, warn, sizeof warn, err, sizeof err);
    st_tree_discard(&t);
    struct stat sb;
    CHECK(st == FP8KIT_ERR_IO && strstr(err, "a symbolic link") && !lstat(out, &sb) && S_ISLNK(sb.st_mode) &&
              count_tmp(base) == 0,
          "a link at OUT is not replaced (%s)", err);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    CHECK(system(cmd) == 0, "cleanup");
}

/* ------------------------------------------------------------------ index */
static void test_index(void)
{
    char dir[512], path[600], err[600];
    snprintf(dir, sizeof dir, "%s/shards", tmpdir);
    mkdir(dir, 0755);
    unsigned char d[4] = {1, 2, 3, 4};
    buf a = mk("{\"t1\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", d, 2);
    buf b = mk("{\"t2\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", d, 4);
    snprintf(path, sizeof path, "%s/s1.safetensors", dir);
    write_file(path, a.p, a.n);
    snprintf(path, sizeof path, "%s/s2.safetensors", dir);
    write_file(path, b.p, b.n);
    free(a.p);
    free(b.p);
    static const struct {
        const char *json;
        fp8kit_status st;
        const char *want;
    } cases[] = {
        {"{\"metadata\":{\"total_size\":6},\"weight_map\":{\"t1\":\"s1.safetensors\",\"t2\":\"s2.safetensors\"}}",
         FP8KIT_OK, ""},
        {"{\"weight_map\":{\"t1\":\"s1.safetensors\"}}", FP8KIT_OK, ""}, /* s2 unused: fine */
        {"{\"weight_map\":{\"t1\":\"s1.safetensors\",\"t2\":\"s1.safetensors\"}}", FP8KIT_ERR_CORRUPT_FILE, "t2"},
        {"{\"weight_map\":{\"t1\":\"../s1.safetensors\"}}", FP8KIT_ERR_CORRUPT_FILE, "plain file name"},
        {"{\"weight_map\":{\"t1\":\"s1.safetensors\",\"t9\":\"s3.safetensors\"}}", FP8KIT_ERR_IO, "s3"},
        {"{\"weight_map\":[]}", FP8KIT_ERR_CORRUPT_FILE, "weight_map"},
        {"{\"weight_map\":{\"t1\":\"s1.safetensors\",\"t1\":\"s1.safetensors\"}}", FP8KIT_ERR_CORRUPT_FILE,
         "duplicate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/" ST_INDEX_NAME, dir);
        write_file(path, cases[i].json, strlen(cases[i].json));
        st_index ix;
        fp8kit_status st = st_index_open(dir, &ix, err, sizeof err);
        CHECK(st == cases[i].st, "index case %zu: %s (%s)", i, fp8kit_status_string(st), err);
        if (st)
            CHECK(strstr(err, cases[i].want) != NULL, "index case %zu message: %s", i, err);
        if (i == 0)
            CHECK(ix.nshards == 2 && ix.files[1].ntensors == 1, "index opened");
        if (i == 1)
            CHECK(ix.nshards == 1, "one shard listed");
        st_index_close(&ix);
    }
}

/* Output names of 244-255 bytes (issue 21 item 8): the temporary name next to
 * OUT must stay below NAME_MAX whatever OUT's length, for a file and for a
 * model directory. */
static void test_long_names(fp8kit_ctx *ctx)
{
    char src[600], out[900], err[600], base[256];
    const src_tensor ts[] = {{"w.weight", ST_BF16, 8, 64}};
    snprintf(src, sizeof src, "%s/long_src.safetensors", tmpdir);
    make_src(src, ts, 1, 0, 11);
    st_conv_opts o;
    memset(&o, 0, sizeof o);
    o.scheme = ST_SCHEME_FP8_ROW;
    o.no_fsync = 1;
    st_stats stats;
    for (int len = 244; len <= 255; len += 11) {
        memset(base, 'n', (size_t)len);
        memcpy(base + len - 12, ".safetensors", 12);
        base[len] = '\0';
        snprintf(out, sizeof out, "%s/%s", tmpdir, base);
        CHECK_STATUS(st_convert(ctx, src, out, &o, &stats, err, sizeof err), FP8KIT_OK);
        CHECK(access(out, F_OK) == 0 && count_tmp(tmpdir) == 0, "a %d-byte output name: written, nothing left", len);
        unlink(out);
    }
    /* a model directory OUT of 255 bytes */
    char mdir[600], mfile[1000];
    snprintf(mdir, sizeof mdir, "%s/long_model", tmpdir);
    mkdir(mdir, 0755);
    snprintf(mfile, sizeof mfile, "%s/model.safetensors", mdir);
    make_src(mfile, ts, 1, 0, 12);
    memset(base, 'd', 255);
    base[255] = '\0';
    snprintf(out, sizeof out, "%s/%s", tmpdir, base);
    CHECK_STATUS(st_convert(ctx, mdir, out, &o, &stats, err, sizeof err), FP8KIT_OK);
    snprintf(mfile, sizeof mfile, "%s/model.safetensors", out);
    CHECK(access(mfile, F_OK) == 0 && count_tmp(tmpdir) == 0, "a 255-byte model directory name: written, nothing left");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fp8kit-test-st-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx)) {
        fprintf(stderr, "no CPU context\n");
        return 1;
    }
    test_parse();
    test_header_build();
    test_writer();
    test_convert(ctx);
    test_shape_rule(ctx);
    test_long_names(ctx);
    test_no_echo();
    test_truncated_input(ctx);
    test_stale();
    test_tree_commit();
    test_index();
    fp8kit_ctx_destroy(ctx);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd))
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return fk_test_summary("test_safetensors");
}
