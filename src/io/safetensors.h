/* safetensors.h - internal API of the safetensors reader/writer (src/io) and of
 * the checkpoint converter behind `fp8kit quantize|dequantize|inspect`.
 *
 * Reader (st_read.c): a file is an 8-byte little-endian header length N, N
 * bytes of UTF-8 JSON (tensor name -> {dtype, shape, data_offsets}, plus an
 * optional "__metadata__" map of strings), then the data section. Every rule
 * is checked before anything is used: N <= 100 MB and inside the file, valid
 * UTF-8 and JSON, no duplicate names, known dtypes, byte sizes that match the
 * shapes (st_shape_bytes, the writer's rule too), and offsets that tile the data section exactly (no overlap, no hole,
 * nothing out of range; the rule of the reference implementation). Files are
 * memory-mapped read-only. A sharded checkpoint is a directory holding
 * model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor:
 * shard}}) and the shards it names.
 *
 * Writer (st_write.c): output goes to a temporary name in the target
 * directory, registered for removal on SIGINT/SIGTERM/SIGHUP, and is renamed
 * into place only when complete.
 *
 * Converter (st_plan.c plans, st_convert.c runs, st_pipe.c overlaps the
 * file I/O): docs/spec.md section 5, through the public fp8kit API.
 *
 * Errors: functions return an fp8kit_status (FP8KIT_ERR_IO for the file
 * system, FP8KIT_ERR_CORRUPT_FILE for contents that break the format, others
 * from the library) and fill a message naming the file and the tensor. */
#ifndef FK_SAFETENSORS_H
#define FK_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "fp8kit.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ST_MAX_HEADER 100000000ull /* bytes, as in the reference implementation */
#define ST_MAX_DIMS 8
#define ST_INDEX_NAME "model.safetensors.index.json"

typedef enum st_dtype {
    ST_BOOL, ST_U8, ST_I8, ST_F8_E4M3, ST_F8_E5M2, ST_F8_E8M0,
    ST_I16, ST_U16, ST_F16, ST_BF16,
    ST_I32, ST_U32, ST_F32,
    ST_I64, ST_U64, ST_F64, ST_C64,
    ST_DTYPE_COUNT
} st_dtype;

/* Formats a message into err (when err and errlen are set) and returns st. */
fp8kit_status st_err(char *err, size_t errlen, fp8kit_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* What a file of this st_mode is, for messages: "a FIFO", "a character
 * device", ... Only regular files are read (a FIFO would block the open, a
 * device never ends) and only regular files are replaced. */
const char *st_file_kind(unsigned mode);

const char *st_dtype_name(st_dtype t);          /* "BF16", "F8_E4M3", ... */
int st_dtype_parse(const char *s, st_dtype *t); /* 0 = ok, -1 = unknown */
size_t st_dtype_size(st_dtype t);               /* bytes per element */

typedef struct st_tensor {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;       /* byte offsets inside the data section */
    const unsigned char *data; /* begin's address in the mapped file */
} st_tensor;

typedef struct st_kv {
    char *key, *value;
} st_kv;

typedef struct st_file {
    char *path;                /* as given (used in messages) */
    unsigned char *map;        /* whole file, read-only (NULL for st_parse) */
    size_t map_size;
    int fd;                    /* open while mapped (st_check_size); valid when map is set */
    int map_slot;              /* st_map_register's slot */
    uint64_t header_len;       /* N */
    uint64_t data_size;        /* bytes after the header */
    const unsigned char *data; /* the data section */
    st_tensor *tensors;        /* header order */
    size_t ntensors;
    st_kv *meta;               /* __metadata__, header order */
    size_t nmeta;
    int has_meta;
} st_file;

/* Parses and validates a whole file held in memory (buf is not copied and
 * must outlive f). label names the file in messages. On error f is left
 * empty (st_close is still safe). */
fp8kit_status st_parse(const unsigned char *buf, size_t size, const char *label, st_file *f,
                       char *err, size_t errlen);
/* Maps path read-only and parses it. A FIFO, device or socket is refused
 * without blocking (O_NONBLOCK). */
fp8kit_status st_open(const char *path, st_file *f, char *err, size_t errlen);
/* FP8KIT_ERR_IO, naming the file, when the file behind f's mapping is now
 * shorter than what was mapped (truncated during the run): touching the lost
 * pages would raise SIGBUS. The converter calls it before each slab; a
 * truncation between this check and the read is left to the SIGBUS handler
 * (st_map_register). OK for a buffer parsed with st_parse. */
fp8kit_status st_check_size(const st_file *f, char *err, size_t errlen);
void st_close(st_file *f);
/* The one shape rule of the reader and the writer (docs/spec.md 4): every
 * dim is >= 0 and the product of the non-zero dims times the element size
 * fits in int64, so a tensor with a zero dim is held to the bound it would
 * have if that dim were 1 (no partial product of its dims, in any order,
 * overflows, and neither does a ceil-division or a 2-D view of them). Returns
 * 0 and the tensor's byte size in *bytes (when set); -1 for a negative dim or
 * a rank outside 0..ST_MAX_DIMS; -2 when the size overflows. */
int st_shape_bytes(st_dtype dtype, int ndim, const int64_t *shape, uint64_t *bytes);
/* Number of elements of t (validated by the parser, so no overflow). */
int64_t st_numel(const st_tensor *t);
/* The tensor called name, or NULL. */
const st_tensor *st_find(const st_file *f, const char *name);
/* Writes name into out (at most outlen bytes, NUL-terminated), escaping
 * control characters and quotes, so messages cannot inject terminal codes. */
void st_quote(const char *name, char *out, size_t outlen);

/* jansson's error text without what it quotes from the input (" near '...'",
 * an escape, a byte value): messages never show a file's contents, which
 * matters when a linked file is not what its name says (docs/spec.md 5). */
void st_json_reason(const char *text, char *out, size_t outlen);

/* A sharded checkpoint. */
typedef struct st_index {
    char *dir;            /* directory holding the index and the shards */
    char *index_path;
    void *json;           /* the parsed index (json_t *), kept for writing */
    char **shards;        /* distinct shard file names, in first-seen order */
    size_t nshards;
    st_file *files;       /* one per shard, opened */
} st_index;

/* Opens dir/model.safetensors.index.json and every shard it names; checks
 * that the weight map and the shards agree exactly (each listed tensor is in
 * its shard, each tensor of a shard is listed there, shard names are plain
 * file names inside dir). */
fp8kit_status st_index_open(const char *dir, st_index *ix, char *err, size_t errlen);
void st_index_close(st_index *ix);

/* ------------------------------------------------------------------ writer */
typedef struct st_out_tensor {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
} st_out_tensor;

/* Serializes a header: __metadata__ (when has_meta) then the tensors, whose
 * data offsets follow each other in the order given from 0. The JSON is
 * padded with spaces to a multiple of 8 bytes. *out (malloc'd) gets the 8
 * length bytes followed by the JSON; *out_len their total; *data_size the
 * size of the data section. */
fp8kit_status st_header_build(const st_out_tensor *t, size_t n, const st_kv *meta, size_t nmeta,
                              int has_meta, unsigned char **out, size_t *out_len,
                              uint64_t *data_size, char *err, size_t errlen);

/* Temporary files and directories removed by the signal handler (and by
 * st_tmp_cleanup). Registration installs handlers for SIGINT, SIGTERM and
 * SIGHUP that remove everything registered, then re-raise the signal. */
int st_tmp_register(const char *path, int is_dir); /* slot >= 0, or -1 when full */
void st_tmp_forget(int slot);                      /* path renamed away: keep it */
void st_tmp_remove(int slot);                      /* unlink (rmdir) it now, then forget */
void st_tmp_cleanup(void);                         /* removes all registered paths */
/* st_tree_commit's fallback (no RENAME_EXCHANGE): while armed, the signal
 * handler renames `aside` back to `out` when `out` does not exist, so a
 * signal between "old OUT moved aside" and "new OUT moved in" cannot leave
 * OUT missing. One at a time: arm (0, or -1 for a path over PATH_MAX) holds
 * a lock that disarm releases. */
int st_tmp_restore_arm(const char *aside, const char *out);
void st_tmp_restore_disarm(void);
/* Mapped inputs (st_open / st_close): a SIGBUS inside a registered range (the
 * file truncated while mapped) prints one line naming the file, then the
 * handler removes the temporary paths and the process dies of SIGBUS. */
int st_map_register(const void *addr, size_t len, const char *path); /* slot, or -1 */
void st_map_forget(int slot);
/* While held (counted, for concurrent conversions), SIGXFSZ is ignored when
 * its action was the default, so a write past RLIMIT_FSIZE (ulimit -f) fails
 * with EFBIG and is reported with the file's name, instead of killing the
 * process with no message; the last release restores the default. */
void st_xfsz_hold(void);
void st_xfsz_release(void);

typedef struct st_writer {
    int fd;
    int slot;
    int no_fsync;
    char *tmp_path, *final_path;
} st_writer;

/* Creates a temporary file next to final_path (same directory), mode
 * 0666 & ~umask. no_fsync skips the fsync of st_writer_finish. */
fp8kit_status st_writer_open(st_writer *w, const char *final_path, int no_fsync, char *err, size_t errlen);
/* Gives the file its final size up front (fallocate where supported, so a
 * full disk fails here rather than half way). */
fp8kit_status st_writer_reserve(st_writer *w, uint64_t size, char *err, size_t errlen);
/* Writes n bytes at byte offset off (short writes and EINTR retried). */
fp8kit_status st_writer_pwrite(st_writer *w, const void *buf, size_t n, uint64_t off, char *err,
                               size_t errlen);
/* Flushes to disk (fsync) and closes; the file keeps its temporary name. */
fp8kit_status st_writer_finish(st_writer *w, char *err, size_t errlen);
/* Renames the finished temporary file to final_path. Without force an
 * existing final_path is an error and is left alone (renameat2 NOREPLACE,
 * or link + unlink where that is unsupported); with force only a regular
 * file is replaced (a FIFO, device, socket, directory or link is refused). */
fp8kit_status st_writer_commit(st_writer *w, int force, char *err, size_t errlen);
/* Removes the temporary file (any state) and frees the writer. Safe to call
 * twice and after a commit (then it only frees). */
void st_writer_abort(st_writer *w);

/* Renames a file or directory without replacing an existing target (force:
 * replace a file). 0 or an errno value. */
int st_rename(const char *from, const char *to, int force);

/* --------------------------------------------------------------- converter */
typedef enum st_scheme {
    ST_SCHEME_FP8_TENSOR, ST_SCHEME_FP8_ROW, ST_SCHEME_FP8_BLOCK, ST_SCHEME_MXFP8
} st_scheme;

const char *st_scheme_name(st_scheme s); /* "fp8-tensor", ... */

/* Where the buffers given to the library live (CUDA device memory for a CUDA
 * context). NULL ops = host memory. Each returns 0 on success. */
typedef struct st_mem_ops {
    void *(*alloc)(void *user, size_t bytes);
    void (*free)(void *user, void *p);
    int (*upload)(void *user, void *dst, const void *src, size_t bytes);
    int (*download)(void *user, void *dst, const void *src, size_t bytes);
    const char *(*last_error)(void *user);
    void *user;
} st_mem_ops;

typedef struct st_stats {
    int64_t tensors_total, tensors_done;
    int64_t quantized, dequantized, copied; /* input tensors by action */
    int64_t kept;                           /* quantize: 2-D float weights kept in high precision */
    int64_t other_files;                    /* model directory: other files copied (config.json included) */
    char convention[40];                    /* dequantize: "fp8", "compressed-tensors", "mixed (fp8 and
                                               compressed-tensors)", or "" (as fp8kit_ckpt_report's) */
    uint64_t in_bytes_total, in_bytes_done; /* input tensor bytes */
    uint64_t out_bytes;                     /* bytes of the written files */
    double seconds;
    int out_changed;                        /* a failure left OUT changed (the message says how and where) */
} st_stats;

typedef void (*st_progress_fn)(void *user, const st_stats *s, int final);

/* The tensor naming and config.json convention of a checkpoint (docs/spec.md
 * 5): an index into the table of formats (st_format.c, one row each: names,
 * dtypes, shapes, config member). The values are fp8kit_ckpt_format's. */
typedef enum st_format {
    ST_FORMAT_DEFAULT = 0,            /* the scheme's default (st_format_default) */
    ST_FORMAT_FP8 = 1,                /* transformers FineGrainedFP8 / DeepSeek-V3: weight_scale_inv */
    ST_FORMAT_COMPRESSED_TENSORS = 2, /* compressed-tensors (llm-compressor, vLLM, transformers): weight_scale */
    ST_FORMAT_COUNT
} st_format;

const char *st_format_name(st_format f); /* "fp8", "compressed-tensors" ("default" for DEFAULT) */
st_format st_format_default(st_scheme s);
/* 1 when the scheme can be written in the format (a row of the table). */
int st_format_supports(st_format f, st_scheme s);
/* A format (not DEFAULT) that writes scheme s, other than `not`, or
 * ST_FORMAT_DEFAULT when there is none (for "use --format X" hints). */
st_format st_format_other(st_scheme s, st_format not);

/* Why a 2-D floating "*.weight" stays in high precision (st_conv_opts.note). */
typedef enum st_keep_reason {
    ST_KEEP_EMBEDDING,  /* default exclude: token / position embeddings */
    ST_KEEP_LM_HEAD,    /* default exclude: the output projection */
    ST_KEEP_ROUTER,     /* default exclude: an MoE router gate */
    ST_KEEP_EXCLUDED,   /* matched an --exclude glob */
    ST_KEEP_SHAPE       /* the scheme cannot take its shape: mxfp8 K % 32; fp8-block K % 128 (and N % 128
                           with --format fp8), as the loaders require */
} st_keep_reason;

const char *st_keep_reason_text(st_keep_reason r);

typedef struct st_conv_opts {
    int dequantize;            /* 0: quantize, 1: dequantize */
    st_scheme scheme;          /* quantize */
    st_format format;          /* quantize: output convention */
    int quantize_all;          /* quantize: lm_head too (embeddings and router gates stay: no loader reads
                                  them quantized; name them in include to force it) */
    const char *const *include; /* globs of weights quantized even if a default exclude names them */
    int ninclude;
    fp8kit_rounding rounding;  /* mxfp8 */
    int pow2;                  /* fp32-scale schemes */
    const char *const *exclude; /* globs (fnmatch) of tensor names left alone */
    int nexclude;
    fp8kit_dtype out_dtype;    /* dequantize: FP8KIT_BF16, FP8KIT_F16 or FP8KIT_F32 */
    int force;                 /* overwrite an existing output */
    int no_fsync;              /* skip fsync before the rename (tests, benchmarks) */
    size_t slab_bytes;         /* input bytes per library call (0 = 64 MiB) */
    const st_mem_ops *mem;     /* NULL: host buffers */
    st_progress_fn progress;
    void *progress_user;
    /* quantize: called once per 2-D floating weight kept in high precision,
     * during planning (before anything is written) */
    void (*note)(void *user, const char *tensor, st_keep_reason why);
    void (*warn)(void *user, const char *message); /* a problem that did not stop the run */
    void *note_user;                               /* passed to note and warn */
} st_conv_opts;

/* Which scheme the scale tensor sc of the fp8 weight w stores in the given
 * format (the one its name's suffix says): 1 and *scheme, *R x *C (the 2-D
 * view of w) set, or 0. Every format of docs/spec.md 5 is read (F32/BF16/F16
 * fp32 scales; one per-tensor scale as [], [1] or [1, 1]; F8_E8M0 or U8 mx
 * scales). */
int st_scale_scheme(const st_tensor *w, const st_tensor *sc, st_format format, fp8kit_scheme *scheme, int64_t *R,
                    int64_t *C);

/* The one rule of dequantize and inspect for an F8_E4M3 / F8_E5M2 tensor W:
 * it is valid when exactly one scale tensor of the formats' (W_scale_inv,
 * W_scale) exists (in any file of the checkpoint) and st_scale_scheme reads
 * it. */
typedef enum st_fp8_state {
    ST_FP8_OK,        /* scale, inv, scheme, R, C set */
    ST_FP8_NO_SCALE,  /* no scale tensor of any format */
    ST_FP8_AMBIGUOUS, /* two (format, format2): which one applies is ambiguous */
    ST_FP8_BAD_SCALE  /* the scale tensor (scale, format set) fits no scheme */
} st_fp8_state;

typedef struct st_fp8_info {
    st_fp8_state state;
    const st_tensor *scale;  /* the companion (OK, BAD_SCALE) */
    const st_file *scale_in; /* the file holding it */
    st_format format;        /* the format whose scale name it has */
    st_format format2;       /* AMBIGUOUS: the format of the second one */
    fp8kit_scheme scheme;
    int64_t R, C;            /* 2-D view of W */
} st_fp8_info;

/* Finds a tensor by name over a checkpoint's files (NULL when absent); *in
 * gets the file holding it. */
typedef const st_tensor *(*st_find_fn)(void *user, const char *name, const st_file **in);

/* 1 for the fp8 element dtypes that hold weights (F8_E4M3, F8_E5M2). */
int st_is_fp8_weight(const st_tensor *t);
/* Classifies the fp8 tensor w; FP8KIT_ERR_OUT_OF_MEMORY or FP8KIT_OK. */
fp8kit_status st_fp8_classify(const st_tensor *w, st_find_fn find, void *user, st_fp8_info *out);
/* Why a tensor classified as not OK cannot be dequantized, one sentence
 * naming it (and its scale tensors). */
void st_fp8_problem(const st_tensor *w, const st_fp8_info *info, char *out, size_t outlen);

/* One line naming the quantization convention of a checkpoint, e.g. "fp8
 * (weight_scale_inv): 7 weights 128x128" or "not quantized (no fp8 tensors)",
 * followed by the fp8 tensors that st_fp8_classify finds invalid. Returns
 * how many are invalid (0: dequantize takes every fp8 tensor); *first (when
 * set) gets st_fp8_problem's sentence for the first of them. */
size_t st_describe_quant(const st_file *const *files, size_t nfiles, char *out, size_t outlen, char *first,
                         size_t firstlen);

/* Converts IN (a .safetensors file, or a directory holding
 * model.safetensors.index.json) to OUT (a file, or a directory of the same
 * shards plus a new index). Everything is validated before the first byte is
 * written; on any failure no output path is created or changed. */
fp8kit_status st_convert(fp8kit_ctx *ctx, const char *in, const char *out, const st_conv_opts *o,
                         st_stats *stats, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
