/* tuning.h - a context's tuning overrides: what the planners would
 * otherwise choose (tile width, promotion interval, cluster size, store
 * path, small-M schedule, CPU microkernel). Set with fp8kit_ctx_set_tuning
 * from a "key=value,..." text (keys and ranges: the table in tuning.c,
 * docs/tuning.md); the environment variable FP8KIT_TUNING gives a new
 * context its first value. FK_AUTO (-1) in a field: the planner chooses. */
#ifndef FK_TUNING_H
#define FK_TUNING_H

#ifdef __cplusplus
extern "C" {
#endif

#define FK_AUTO (-1)

typedef struct fk_tuning {
    /* GEMM family: FK_AUTO, or 0 never the small-M family, 1 the small-M
     * family whenever it can run the job, 2 the small-M family or fail */
    int gemm_small;
    /* sm90 dense and grouped families */
    int gemm_bn;      /* tile width 64 | 128 | 192 | 256 */
    int gemm_bm;      /* tile height 128 | 256 (256: block scales, two 128-row waves per tile); gated: 64 | 128 */
    int gemm_promo;   /* fp32 promotion interval in k32 steps (k16 on the fp16 path): 0 (fast) | 1 | 2 | 4 */
    int gemm_cluster; /* CTAs per cluster: 1 | 2 */
    int gemm_mc;      /* the operand a cluster multicasts: 1 A (CTAs along N) | 2 B (CTAs along M) */
    int gemm_ts;      /* 0 keeps epilogues off the TMA-store variants */
    int gemm_bulk;    /* 0: the general epilogue instead of the bulk-copy one */
    int gemm_lag;     /* stages consumer warpgroup 1 runs behind warpgroup 0 */
    int gemm_sk;      /* stream-K tail: 0 off, s parts */
    int gemm_pdl;     /* 0: launch without programmatic dependent launch */
    int grouped_gm;   /* grouped: tile rows per L2 group */
    /* sm90 small-M family */
    int small_mh, small_r, small_split, small_mc, small_cs, small_pdl, small_stages, small_pf;
    int small_rot, small_bpol, small_pp, small_plain, small_exitrel, small_bpromo;
    /* CPU GEMM microkernel ceiling: 0 generic, 1 avx2, 2 avx512 */
    int cpu_isa;
} fk_tuning;

/* Every field FK_AUTO. */
void fk_tuning_defaults(fk_tuning *t);
/* Parses spec ("key=value" items separated by commas or spaces; NULL or ""
 * = defaults) into *out. On error returns nonzero with a message in err
 * and leaves *out unchanged. */
int fk_tuning_parse(const char *spec, fk_tuning *out, char *err, size_t errlen);
/* The overrides that differ from FK_AUTO, as a spec fk_tuning_parse reads
 * back ("" when none). */
void fk_tuning_format(const fk_tuning *t, char *buf, size_t n);
/* A field's value, or dflt when it is FK_AUTO. */
static inline int fk_tuned(int field, int dflt) { return field == FK_AUTO ? dflt : field; }

#ifdef __cplusplus
}
#endif
#endif
