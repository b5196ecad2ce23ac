/* fuzz_st.c - libFuzzer target for the safetensors header parser/reader
 * (src/io/st_read.c), and the body of the corpus replay test.
 * For every input: st_parse must either fail with a message, or succeed with
 * tensors that lie inside the data section and match their shapes; then every
 * tensor byte is read (ASan catches a bad pointer), the header is rebuilt with
 * st_header_build from what was parsed, and the rebuilt file must parse to
 * the same tensors and metadata. A broken invariant aborts (a finding).
 * Build (clang): tests/fuzz/build.sh; replay without libFuzzer: st_fuzz_replay. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

#define FZ_CHECK(c)                                                                  \
    do {                                                                             \
        if (!(c)) {                                                                  \
            fprintf(stderr, "fuzz_st: invariant broken: %s (%s:%d)\n", #c, __FILE__, __LINE__); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static int fz_cmp_begin(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static void fz_roundtrip(const st_file *f)
{
    size_t n = f->ntensors;
    const st_tensor **ord = malloc((n ? n : 1) * sizeof *ord);
    st_out_tensor *outs = calloc(n ? n : 1, sizeof *outs);
    FZ_CHECK(ord && outs);
    for (size_t i = 0; i < n; i++)
        ord[i] = &f->tensors[i];
    qsort(ord, n, sizeof *ord, fz_cmp_begin);
    for (size_t i = 0; i < n; i++) {
        outs[i].name = ord[i]->name;
        outs[i].dtype = ord[i]->dtype;
        outs[i].ndim = ord[i]->ndim;
        memcpy(outs[i].shape, ord[i]->shape, sizeof outs[i].shape);
    }
    unsigned char *hdr = NULL;
    size_t hlen = 0;
    uint64_t dsize = 0;
    char err[512];
    fp8kit_status st = st_header_build(outs, n, f->meta, f->nmeta, f->has_meta, &hdr, &hlen, &dsize, err, sizeof err);
    if (st == FP8KIT_OK) {
        FZ_CHECK(dsize == f->data_size);
        unsigned char *buf = malloc(hlen + dsize + 1);
        FZ_CHECK(buf);
        memcpy(buf, hdr, hlen);
        if (dsize)
            memcpy(buf + hlen, f->data, dsize);
        st_file g;
        st = st_parse(buf, hlen + dsize, "rebuilt", &g, err, sizeof err);
        if (st != FP8KIT_OK)
            fprintf(stderr, "fuzz_st: rebuilt header rejected: %s\n", err);
        FZ_CHECK(st == FP8KIT_OK);
        FZ_CHECK(g.ntensors == n && g.nmeta == f->nmeta && g.has_meta == f->has_meta);
        for (size_t i = 0; i < n; i++) {
            const st_tensor *a = &g.tensors[i], *b = ord[i];
            FZ_CHECK(!strcmp(a->name, b->name) && a->dtype == b->dtype && a->ndim == b->ndim);
            FZ_CHECK(!memcmp(a->shape, b->shape, sizeof a->shape));
            FZ_CHECK(a->begin == b->begin && a->end == b->end);
            FZ_CHECK(!memcmp(a->data, b->data, (size_t)(a->end - a->begin)));
        }
        for (size_t i = 0; i < f->nmeta; i++)
            FZ_CHECK(!strcmp(g.meta[i].key, f->meta[i].key) && !strcmp(g.meta[i].value, f->meta[i].value));
        st_close(&g);
        free(buf);
    } else {
        /* the only reason a parsed file cannot be rebuilt: a header that
         * grows past the limit (re-serialization may escape more) */
        FZ_CHECK(st == FP8KIT_ERR_INVALID_ARGUMENT);
    }
    free(hdr);
    free(outs);
    free(ord);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_file f;
    char err[512];
    err[0] = '\0';
    fp8kit_status st = st_parse(data, size, "fuzz", &f, err, sizeof err);
    if (st != FP8KIT_OK) {
        FZ_CHECK(err[0] != '\0');
        FZ_CHECK(f.ntensors == 0 && f.tensors == NULL);
        return 0;
    }
    FZ_CHECK(f.header_len + 8 + f.data_size == size);
    unsigned sum = 0;
    for (size_t i = 0; i < f.ntensors; i++) {
        const st_tensor *t = &f.tensors[i];
        FZ_CHECK(t->begin <= t->end && t->end <= f.data_size);
        FZ_CHECK((uint64_t)st_numel(t) * st_dtype_size(t->dtype) == t->end - t->begin);
        FZ_CHECK(st_find(&f, t->name) != NULL);
        for (uint64_t k = t->begin; k < t->end; k++)
            sum += f.data[k];
    }
    fz_roundtrip(&f);
    st_close(&f);
    return (int)(sum & 0); /* libFuzzer wants 0 */
}
