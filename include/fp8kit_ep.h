/* fp8kit_ep.h - expert parallelism (EP) for mixture-of-experts layers across
 * GPUs: dispatch of tokens to the ranks that own their experts, quantized to
 * fp8 by fp8kit before they travel and received in the masked layout of
 * fp8kit_grouped_gemm, and combine of the experts' outputs back to the
 * tokens' ranks, weighted by the router's top-k weights. docs/ep.md has the
 * layouts, the numerics and the limits.
 *
 * Transports (fp8kit_ep_config.transport): fp8kit's own exchange on NCCL
 * point-to-point (one ncclSend / ncclRecv per peer inside ncclGroupStart /
 * ncclGroupEnd) of fixed sizes (max_tokens token slots per peer, whatever the
 * routing), deterministic and bit-exact against the CPU reference; or NCCL
 * EP's low-latency kernels (libnccl_ep.so, loaded at run time; it needs NCCL
 * 2.30 or newer), which carry the same quantized tokens. With either, no call
 * synchronizes the host and both can be captured in a CUDA graph. NCCL is
 * loaded at run time (dlopen("libnccl.so.2")): libfp8kit has no link
 * dependency on it. The ncclComm_t passed to fp8kit_ep_create must come from
 * that same library (the one the process's dynamic loader resolves for the
 * name libnccl.so.2: the one the caller linked or loaded). Built only with
 * the CUDA backend and NCCL's header at build time; otherwise every function
 * here still exists, fp8kit_ep_create returns FP8KIT_ERR_UNSUPPORTED ("built
 * without NCCL") so no fp8kit_ep can be made, and fp8kit_ep_buffer_size
 * works.
 *
 * Collective calls: fp8kit_ep_create, fp8kit_ep_dispatch and
 * fp8kit_ep_combine must be called by every rank of the communicator, in the
 * same order, with the same configuration (fp8kit_ep_create checks that the
 * configurations agree). An fp8kit_ep is used by one thread at a time.
 * Errors: each function returns a status; fp8kit_last_error(ctx) of the
 * context the object was made with gives the message (fp8kit_last_error(NULL)
 * for a NULL ep). Arguments are checked before anything is enqueued; a call
 * that fails them changes nothing. */
#ifndef FP8KIT_EP_H
#define FP8KIT_EP_H

#include "fp8kit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest top_k. */
#define FP8KIT_EP_MAX_TOP_K 64

typedef struct fp8kit_ep fp8kit_ep;

/* How the tokens travel (docs/ep.md, "Transports"). */
typedef enum fp8kit_ep_transport {
    /* fp8kit's exchange over NCCL point-to-point (the default): received rows
     * in a fixed order, combine bit-exact against the CPU reference */
    FP8KIT_EP_TRANSPORT_NCCL = 0,
    /* NCCL EP (libnccl_ep.so, low-latency mode, expert-major layout), the
     * tokens quantized by fp8kit and forwarded as they are
     * (NCCL_EP_DISP_QUANT_FWD): the same rows and counts, in the order NCCL EP
     * writes them; NCCL EP sums the combine. Needs H a multiple of 512 */
    FP8KIT_EP_TRANSPORT_NCCL_EP = 1
} fp8kit_ep_transport;

/* The received layout (docs/ep.md, "Modes"). */
typedef enum fp8kit_ep_mode {
    /* the masked layout, (E_local, M, H) with M = W x max_tokens: fixed shapes,
     * for decode-sized batches */
    FP8KIT_EP_LOW_LATENCY = 0,
    /* the contiguous layout, (R, H) rows grouped by local expert with R = W x
     * max_tokens x min(top_k, E_local) slots, rows past the last expert's end
     * unused: for large batches (a fraction of the masked layout's memory).
     * Transport NCCL: the same transfers and combine, the rows placed by
     * expert in the same order. NCCL_EP: NCCL EP's high-throughput kernels
     * (E / W and max_tokens multiples of 4), whose combine then takes y
     * weighted row by row (bf16(w x y), one rounding) before NCCL EP sums it */
    FP8KIT_EP_HIGH_THROUGHPUT = 1
} fp8kit_ep_mode;

/* The layer's shape; the same on every rank. Zero-initialise, then set the
 * fields: the zeros of the optional ones (rounding, pow2, scale_layout) are
 * the defaults. With W ranks, rank r owns the E / W experts
 * r * E / W .. (r + 1) * E / W - 1 (its local experts 0 .. E / W - 1). */
typedef struct fp8kit_ep_config {
    int64_t num_experts;  /* E >= 1, a multiple of the world size W */
    int64_t hidden;       /* H: a token's length, a multiple of 128 */
    int64_t top_k;        /* experts per token: 1 .. min(E, FP8KIT_EP_MAX_TOP_K) */
    int64_t max_tokens;   /* tokens per rank per dispatch (>= 1): sizes every buffer */
    fp8kit_dtype fp8;     /* the codes: FP8KIT_E4M3 or FP8KIT_E5M2 */
    int32_t mx;           /* 0: block1x128 (an f32 scale per 128 of a token); 1: MX (an e8m0 byte per 32) */
    fp8kit_rounding rounding; /* MX's scale rule (FLOOR, the default, or RCEIL); must be FLOOR when mx = 0 */
    int32_t pow2;         /* block1x128 only: scales rounded up to powers of two (fp8kit_quant_desc.pow2) */
    fp8kit_scale_layout scale_layout; /* the received scales: PLAIN, or MN_MAJOR (block1x128 only: the
                                         grouped GEMM's fastest layout on Hopper) */
    fp8kit_ep_transport transport;    /* NCCL (the default) or NCCL_EP */
    fp8kit_ep_mode mode;              /* LOW_LATENCY (the default, masked) or HIGH_THROUGHPUT (contiguous) */
} fp8kit_ep_config;

/* What a dispatch delivered to this rank: views of buffers the fp8kit_ep
 * owns (device memory; the same addresses for the object's lifetime), ready
 * to be an fp8kit_grouped_gemm's A:
 *   args.a = recv.x; args.scale_a = recv.scale; args.offsets = recv.offsets;
 *   args.layout = recv.layout; desc.scale_a = desc.scale_b =
 *   FP8KIT_SCALE_BLOCK (or FP8KIT_SCALE_MX); desc.scale_layout = config's.
 * Low latency: the rows of local expert e are x[e, 0 .. counts[e]); high
 * throughput: x[offsets[e - 1] .. offsets[e]). They are one per token that
 * lists global expert first_expert + e among its top-k (once, however often
 * it lists it), ordered by source rank, then by the token's index on that
 * rank (transport NCCL; with NCCL_EP the same rows in NCCL EP's order). Rows
 * past them hold stale data; the grouped GEMM does not use them. The contents
 * are valid after the dispatch, in stream order, until the next dispatch. */
typedef struct fp8kit_ep_recv {
    fp8kit_tensor x;        /* (E_local, M, H) fp8 codes; high throughput (R, H) */
    fp8kit_tensor scale;    /* block1x128 plain (E_local, M, H / 128) f32; mn_major (E_local, H / 128, 4 ceil(M / 4))
                               f32, padding 0; mx (E_local, M, H / 32) e8m0. High throughput: (R, H / 128),
                               (H / 128, 4 ceil(R / 4)), (R, H / 32) */
    const int32_t *counts;  /* E_local int32 valid-row counts (device memory) */
    int32_t *status;        /* one int32 (device memory), set by each dispatch: 0, or FP8KIT_ERR_INVALID_ARGUMENT
                               when some top-k id of this rank's tokens was outside [-1, E) (those entries were
                               dropped: treated as -1) */
    int64_t world, rank;    /* W and this rank */
    int64_t local_experts;  /* E_local = E / W */
    int64_t first_expert;   /* rank * E_local: global id of local expert 0 */
    int64_t max_rows;       /* low latency: M = W * max_tokens, rows per local expert (the worst case);
                               high throughput: R = W * max_tokens * min(top_k, E_local), rows of x */
    fp8kit_ep_transport transport; /* the config's */
    fp8kit_grouped_layout layout;  /* MASKED (low latency) or CONTIGUOUS (high throughput) */
    const int32_t *offsets; /* the grouped GEMM's offsets for this layout (device memory): counts (masked),
                               or E_local int32 row ends (contiguous: expert e owns rows offsets[e-1] ..
                               offsets[e] - 1 of x) */
} fp8kit_ep_recv;

/* Device memory fp8kit_ep_create allocates for this configuration on a
 * world of `world` ranks (the same on every rank). Checks cfg as
 * fp8kit_ep_create does. Available in every build. */
FP8KIT_API fp8kit_status fp8kit_ep_buffer_size(const fp8kit_ep_config *cfg, int64_t world, size_t *bytes);

/* Creates the layer on ctx's device for the communicator nccl_comm (an
 * ncclComm_t made by the caller on that device, any number of ranks).
 * Collective: every rank calls it; the ranks compare their configurations
 * (one small all-reduce on an internal stream, waited for). When they
 * differ every rank fails with FP8KIT_ERR_INVALID_ARGUMENT; when one rank's
 * checks or allocation fail, that rank returns its own status and the others
 * FP8KIT_ERR_INVALID_ARGUMENT: either every rank gets an object or none does
 * (except when a rank fails before it can take part: a NULL argument, a CPU
 * context, NCCL not loadable; such a rank returns at once and the others
 * wait in the all-reduce). Statuses: NULL_POINTER (ctx, nccl_comm, cfg, out);
 * UNSUPPORTED (ctx not a CUDA context, a build without NCCL, libnccl.so.2 or
 * one of its functions missing, an fp8 dtype that is not e4m3 / e5m2, mn_major
 * with mx; transport NCCL_EP with libnccl_ep.so not loadable, H not a
 * multiple of 512, or in the high-throughput mode E / W or max_tokens not a
 * multiple of 4); INVALID_ARGUMENT (a field out of range, E not a multiple of the
 * world size, the communicator on another device than ctx, configurations
 * that differ between ranks); INVALID_SHAPE (H not a positive multiple of
 * 128); SIZE_OVERFLOW (rows E_local x M or a buffer beyond 2^31 rows or
 * size_t); OUT_OF_MEMORY; DEVICE (a CUDA or NCCL call failed). *out is
 * written only on success. */
FP8KIT_API fp8kit_status fp8kit_ep_create(fp8kit_ctx *ctx, void *nccl_comm, const fp8kit_ep_config *cfg,
                                          fp8kit_ep **out);

/* Waits for the device (cudaDeviceSynchronize), then frees the buffers and
 * the object; a CUDA graph that captured its calls must not run afterwards.
 * The communicator is the caller's and stays open. NULL is a no-op (OK). */
FP8KIT_API fp8kit_status fp8kit_ep_destroy(fp8kit_ep *ep);

/* The views a dispatch fills (fp8kit_ep_recv), without dispatching: for
 * setting up the grouped GEMM's arguments once. Counts are 0 before the
 * first dispatch. */
FP8KIT_API fp8kit_status fp8kit_ep_recv_view(const fp8kit_ep *ep, fp8kit_ep_recv *recv);

/* Dispatch (collective). x: this rank's t tokens, (t, H) f32 / f16 / bf16 in
 * device memory (rows strided, K-contiguous); topk_idx (t, top_k) int32 and
 * topk_w (t, top_k) f32, contiguous, device memory, 4-byte aligned: the
 * global expert ids of each token (-1 = none) and their weights. 0 <= t <=
 * max_tokens; t may differ between ranks; with t = 0, x, topk_idx and topk_w
 * are not read (may be NULL). On stream: x is quantized by fp8kit_quantize
 * (block1x128 or MX along H, the config's element format, rounding, pow2),
 * each token travels once to each rank (fixed-size buffers: max_tokens
 * slots per peer), and each rank unpacks what it received into the masked
 * layout of recv (may be NULL; fp8kit_ep_recv_view gives the same views).
 * Top-k ids outside [-1, E) cannot be checked on the host (device memory):
 * they are dropped on the device and reported in *recv->status. The routing
 * (ids and weights) is kept for the next fp8kit_ep_combine. Statuses:
 * NULL_POINTER, INVALID_ARGUMENT (t out of range, an input overlapping the
 * object's buffers), INVALID_SHAPE (x not (t, H)), UNSUPPORTED (x's dtype),
 * MISALIGNED, INVALID_STRIDE, and those of fp8kit_quantize and of NCCL
 * (DEVICE). */
FP8KIT_API fp8kit_status fp8kit_ep_dispatch(fp8kit_ep *ep, const fp8kit_tensor *x, const int32_t *topk_idx,
                                            const float *topk_w, int64_t t, fp8kit_ep_recv *recv, void *stream);

/* Combine (collective), for the last dispatch. y: the experts' outputs in
 * the layout of that dispatch, (E_local, M, H) bf16 in device memory (high
 * throughput: (R, H)) (rows strided, K-contiguous; NCCL_EP: contiguous; rows
 * past the counts are not read). Each row
 * goes back to its token's rank, where out (t, H) bf16 (t of the last
 * dispatch; row stride >= H; with t = 0 out is not written and may be NULL)
 * gets
 *   out[i] = bf16( sum over kk = 0 .. top_k - 1 with topk_idx[i][kk] valid of
 *                  topk_w[i][kk] * y_row(i, topk_idx[i][kk]) )
 * summed in fp32 in top-k order from +0 (each product and each sum rounded
 * to fp32, no FMA), rounded once to bf16 (RNE); a token without a valid
 * expert gets +0. A token listing an expert twice reads its one row twice.
 * That is transport NCCL. With NCCL_EP, NCCL EP computes the weighted sum
 * (its order and rounding; a token listing an expert twice gets that row once
 * with the sum of the two weights), and y and out must be contiguous (row
 * stride H, expert stride M x H).
 * Statuses: NULL_POINTER, INVALID_ARGUMENT (no dispatch yet, overlapping
 * tensors), INVALID_SHAPE, UNSUPPORTED (a dtype other than bf16; strided y or
 * out with NCCL_EP), INVALID_STRIDE, MISALIGNED, DEVICE. */
FP8KIT_API fp8kit_status fp8kit_ep_combine(fp8kit_ep *ep, const fp8kit_tensor *y, fp8kit_tensor *out,
                                           void *stream);

#ifdef __cplusplus
}
#endif
#endif /* FP8KIT_EP_H */
