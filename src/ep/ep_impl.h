/* ep_impl.h - internals of the expert-parallel layer (include/fp8kit_ep.h)
 * shared by its entry points (ep_api.c), its configuration rules and buffer
 * geometry (ep_geom.c), its argument checks (ep_check.c) and its transport
 * (nccl/ep_nccl.c, or ep_stub.c in builds without NCCL): the object, the
 * byte layout of its one device allocation, and the functions between those
 * files. Nothing here is public API. */
#ifndef FK_EP_IMPL_H
#define FK_EP_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include "fp8kit_ep.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shape of the layer on W ranks and where each buffer lives in the
 * object's device allocation (byte offsets, each a multiple of 256).
 *
 * A dispatch chunk is what one rank sends to every peer (the same bytes to
 * each): a 16-byte header (int32 t: the valid token slots), then the top-k
 * ids of max_tokens slots (int32, ids outside [0, E) already made -1), the
 * codes (max_tokens x H bytes) and the scale bytes (max_tokens x H / 32) of
 * the quantized tokens; token i sits in slot i.
 * A return chunk is what a rank sends back to one peer in a combine:
 * max_tokens x kp rows of H bf16; the row of token i's expert that is the
 * d-th distinct expert of the token on the sending rank (in top-k order of
 * first occurrence) is slot i * kp + d. */
typedef struct fk_ep_geom {
    int64_t world, rank;
    int64_t el;      /* local experts: E / W */
    int64_t m;       /* rows per local expert: W x max_tokens */
    int64_t kp;      /* return slots per token and peer: min(top_k, el) */
    int64_t nb;      /* scale values per token: H / 128 (f32) or H / 32 (e8m0) */
    int64_t sbytes;  /* scale bytes per token: H / 32 in both cases */
    int64_t mp4;     /* 4 ceil(M / 4): a row of the mn_major scales */
    size_t ck_ids, ck_codes, ck_scales, chunk; /* inside a dispatch chunk; its size */
    size_t ret_chunk;                          /* a return chunk: max_tokens x kp x H x 2 */
    size_t off_send;    /* this rank's dispatch chunk */
    size_t off_recv;    /* W received chunks, peer p's at p x chunk (NCCL EP: the plain
                           (el, m, H / 32 bytes) scales it writes when the recv scales
                           are mn_major; else empty) */
    size_t off_x;       /* A codes (el, m, H) */
    size_t off_scale;   /* A scales (recv layout) */
    size_t scale_bytes;
    size_t off_counts;  /* el int32 */
    size_t off_status;  /* one int32 */
    size_t off_slot;    /* el x m int32: each received row's return slot, p x max_tokens x kp + i x kp + d */
    size_t off_w;       /* max_tokens x top_k f32: the last dispatch's weights */
    size_t off_retidx;  /* max_tokens x top_k int32: where each top-k entry's row comes back (-1: none) */
    size_t off_ret_send, off_ret_recv; /* W return chunks each */
    /* high throughput: R rows of x and the int32 row ends; with NCCL EP also
     * its int64 per-expert counts, each slot's weight, y weighted (R, H) bf16 */
    int64_t rows;
    size_t off_ends, off_cnt64, off_slotw, off_yw;
    size_t total;
} fk_ep_geom;

struct fk_ncclep; /* nccl/ncclep.c: the NCCL EP group and handle */

struct fp8kit_ep {
    fp8kit_ctx *ctx;
    fp8kit_ep_config cfg;
    fk_ep_geom g;
    void *comm;            /* the caller's ncclComm_t */
    unsigned char *base;   /* device memory, g.total bytes */
    int64_t last_t;        /* t of the last dispatch; -1 before the first */
    int sm_count;
    struct fk_ncclep *nep; /* transport NCCL_EP; NULL with NCCL */
};

/* ---- ep_geom.c */
/* The config's own rules (everything but those involving the world size);
 * fn names the entry point in the message. */
fp8kit_status fk_ep_check_config(const fp8kit_ctx *ctx, const char *fn, const fp8kit_ep_config *cfg);
/* fk_ep_check_config, then the world's rules (E a multiple of W, row and
 * byte counts in range), and fills *g for rank `rank` of `world`. */
fp8kit_status fk_ep_geometry(const fp8kit_ctx *ctx, const char *fn, const fp8kit_ep_config *cfg, int64_t world,
                             int64_t rank, fk_ep_geom *g);
/* The quantization a dispatch applies to the tokens (fp8kit_quantize's desc:
 * block1x128 or MX along H, the config's element format, rounding, pow2). */
fp8kit_quant_desc fk_ep_quant_desc(const fp8kit_ep_config *cfg);
/* The recv views of an object whose allocation starts at base. */
void fk_ep_views(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base, fp8kit_ep_recv *recv);

/* ---- ep_check.c */
/* A dispatch's arguments (fp8kit_ep_dispatch's rules), against the object's
 * configuration and its allocation [base, base + g->total). */
fp8kit_status fk_ep_check_dispatch(const fp8kit_ctx *ctx, const fp8kit_ep_config *cfg, const fk_ep_geom *g,
                                   const void *base, const fp8kit_tensor *x, const int32_t *topk_idx,
                                   const float *topk_w, int64_t t);
/* A combine's arguments for a last dispatch of last_t tokens (-1: none). */
fp8kit_status fk_ep_check_combine(const fp8kit_ctx *ctx, const fp8kit_ep_config *cfg, const fk_ep_geom *g,
                                  const void *base, int64_t last_t, const fp8kit_tensor *y,
                                  const fp8kit_tensor *out);

/* ---- the transport: nccl/ep_nccl.c (builds with NCCL) or ep_stub.c. The
 * entry points (ep_api.c) have checked the pointers, the context's backend
 * and, for dispatch and combine, every argument. */
fp8kit_status fk_ep_impl_create(fp8kit_ctx *ctx, void *comm, const fp8kit_ep_config *cfg, fp8kit_ep **out);
void fk_ep_impl_destroy(fp8kit_ep *ep);
fp8kit_status fk_ep_impl_dispatch(fp8kit_ep *ep, const fp8kit_tensor *x, const int32_t *topk_idx,
                                  const float *topk_w, int64_t t, void *stream);
fp8kit_status fk_ep_impl_combine(fp8kit_ep *ep, const fp8kit_tensor *y, fp8kit_tensor *out, void *stream);

#ifdef __cplusplus
}
#endif
#endif
