/* st_conv.h - types shared by the two halves of the checkpoint converter:
 * st_plan.c (what each output file holds: items, names, shapes, layout,
 * header) and st_convert.c (streaming the tensors through the library and
 * writing the files). Internal to src/io. */
#ifndef FK_ST_CONV_H
#define FK_ST_CONV_H

#include <jansson.h>
#include <time.h>
#include "io/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this converter assumes a little-endian host"
#endif

typedef struct st_pipe st_pipe;

/* One checkpoint format: everything the converter writes for it and reads
 * back (st_format.c holds the rows; docs/spec.md 5). A new format is a new
 * row (and an st_format / fp8kit_ckpt_format value), not a new branch. */
typedef struct st_format_row {
    const char *name;          /* "fp8": --format, the metadata's "format", messages */
    const char *scale_suffix;  /* the scale tensor of X is X + suffix ("_scale_inv") */
    const char *scale_key;     /* the scale's name for a weight "weight": "weight_scale_inv" (metadata, inspect) */
    unsigned schemes;          /* 1 << st_scheme it writes */
    unsigned default_for;      /* 1 << st_scheme whose default format it is */
    st_dtype fp32_scale;       /* dtype of fp32 scales (tensor, row, block) */
    st_dtype mx_scale;         /* dtype of the e8m0 bytes of mx scales */
    int tensor_rank;           /* per-tensor scale: [] (0), [1] (1) or [1, 1] (2) */
    int expert_tensor_rank;    /* the same for an MoE expert weight ("...experts.<e>....") */
    int block_whole_n;         /* fp8-block: N % 128 == 0 too (the loader infers the block from the grid) */
    int reads_1x128;           /* dequantize: a [N, ceil(K/128)] scale is 1x128 */
    int block_first;           /* dequantize: a scale that fits the 128x128 grid is read as one first */
    unsigned expert_unloadable; /* 1 << st_scheme whose MoE experts transformers cannot load (a warning) */
    int mx_bf16_only;          /* its loader decompresses mx weights to bfloat16 only (a warning) */
    /* config.json's quantization_config for scheme s (new reference; ignore is taken over) */
    json_t *(*quant_config)(st_scheme s, int pow2, json_t *ignore);
} st_format_row;

/* The row of f (not ST_FORMAT_DEFAULT). */
const st_format_row *st_format_row_of(st_format f);

typedef enum cv_action { CV_COPY, CV_QUANT, CV_DEQUANT, CV_DROP } cv_action;

typedef struct cv_item {
    const st_tensor *src;   /* tensor read (copied, quantized, or the fp8 weight) */
    const st_tensor *scale; /* dequantize: the weight's scale tensor */
    const st_file *scale_in; /* dequantize: the file holding it (maybe another shard) */
    cv_action act;
    fp8kit_quant_desc desc;
    int64_t R, C;           /* 2-D view of src */
    int out_main, out_scale; /* positions in the file's output list, -1 = none */
    char *scale_name;       /* quantize: owned name of the scale tensor */
    int kept;               /* quantize: a weight kept in high precision (copied) */
} cv_item;

typedef struct cv_file {
    const st_file *in;
    const char *shard;    /* shard file name (sharded) or NULL */
    char *final_path;
    cv_item *items;       /* input order of offsets */
    size_t nitems;
    st_out_tensor *outs;  /* layout order */
    uint64_t *out_off;    /* data offset of each output tensor */
    size_t nouts;
    st_kv *meta;          /* borrowed pointers (plus the quantization entry) */
    size_t nmeta;
    int has_meta;
    unsigned char *header;
    size_t header_len;
    uint64_t data_size;
} cv_file;

typedef struct cv_buf {
    void *p;
    size_t cap;
    int dev;
} cv_buf;

typedef struct cv {
    fp8kit_ctx *ctx;
    const st_conv_opts *o;
    const st_mem_ops *mem;  /* NULL: host */
    st_stats *stats;
    char *err;
    size_t errlen;
    size_t slab;
    st_format format;       /* quantize: resolved output convention */
    unsigned seen_conv;     /* dequantize: 1 << st_format of each convention seen */
    int64_t fp8_total;      /* dequantize: F8_E4M3 / F8_E5M2 tensors of the input */
    int64_t fp8_planned;    /* dequantize: those planned for dequantization (the others are excluded) */
    int deq_complete;       /* dequantize: every fp8 tensor is dequantized (and there is one): the
                               "quantization" metadata entry and quantization_config go */
    char quant_json[512];
    st_pipe *pipe;          /* writer thread and output buffers */
    const st_file *in;      /* the input file being converted (st_check_size before each slab) */
    cv_buf hs, hx;          /* host: input scales (dequantize), unaligned input staging */
    cv_buf dx, dq, ds, dy;  /* device */
    struct timespec t0;
} cv;

/* I/O pipeline (st_pipe.c): writer thread + buffer pool, input prefetch. */
st_pipe *st_pipe_create(int prefetch);
void st_pipe_destroy(st_pipe *p);
void st_pipe_set_writer(st_pipe *p, st_writer *w);
/* A free host buffer of >= bytes (blocks while all are being written). */
void *st_pipe_acquire(st_pipe *p, size_t bytes, int *slot, fp8kit_status *st, char *err, size_t errlen);
void st_pipe_release(st_pipe *p, int slot); /* give back an unsubmitted buffer */
/* Queues a write of len bytes at off: from buffer `slot` (freed when
 * written) or, slot -1, from memory that stays valid until drained. */
fp8kit_status st_pipe_submit(st_pipe *p, int slot, const void *ptr, size_t len, uint64_t off, char *err,
                             size_t errlen);
/* The same for bytes of the mapped input file src (a path, for the message
 * when the file was truncated under the mapping). */
fp8kit_status st_pipe_submit_mapped(st_pipe *p, const void *ptr, size_t len, uint64_t off, const char *src, char *err,
                                    size_t errlen);
/* Waits for every queued write; the first write error, if any. */
fp8kit_status st_pipe_drain(st_pipe *p, char *err, size_t errlen);
/* Asks the prefetch thread to map [addr, addr+len) (latest request wins). */
void st_pipe_prefetch(st_pipe *p, const void *addr, size_t len);

fp8kit_status cv_fail(cv *c, fp8kit_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int cv_fk_dtype(st_dtype t, fp8kit_dtype *out);
st_dtype cv_st_dtype(fp8kit_dtype t);
char *cv_concat(const char *a, const char *b);
/* Does an --exclude glob match the tensor name (or its module name)? */
int cv_exclude_matches(const char *glob, const char *name);
/* Items of one file (names: global name -> file << 32 | tensor over files). */
fp8kit_status cv_plan_file(cv *c, cv_file *f, json_t *names, const cv_file *files);
/* Quantize: warnings about what a loader cannot read as planned (MoE
 * experts with block / mx scales in compressed-tensors; compressed-tensors'
 * bfloat16-only mxfp8 decompression for float16 / float32 weights). */
void cv_loader_warnings(cv *c, const cv_file *files, size_t nfiles);
/* Dequantize: marks each scale tensor some weight consumes as dropped. */
void cv_mark_dropped(cv_file *files, size_t nfiles);
/* Output list in layout order, offsets, metadata and header of one file. */
fp8kit_status cv_layout_file(cv *c, cv_file *f);
/* config.json's quantization_config for c->format (new reference); tied_head:
 * the config ties the embeddings to lm_head (then "lm_head" is ignored too). */
json_t *cv_quant_config(cv *c, const cv_file *files, size_t nfiles, int tied_head);
/* The quantization entry written into __metadata__ (c->quant_json). */
void cv_quant_json(cv *c);

#endif
