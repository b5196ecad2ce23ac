/* ep_kernels.cuh - the expert-parallel layer's kernels, launched by
 * ep_kernels.cu: the dispatch's prep (ids checked, weights and return slots
 * kept) and unpack (each local expert's rows by a deterministic block scan
 * over the received chunks - source rank, then token - then the row copies
 * into the masked layout), and the combine's pack (rows to their return
 * slots) and weighted sum (fp32 in top-k order, __fmul_rn / __fadd_rn, one
 * bf16 rounding). No atomics decide any position; the one atomic sets the
 * status word. Plain CUDA C with no header of the CUDA toolkit, so that
 * tests/emu/ep_kernels_emu.cpp compiles these very kernels as host C++. */
#ifndef FK_EP_KERNELS_CUH
#define FK_EP_KERNELS_CUH

#include <stdint.h>
#include "fp8kit_ep.h"
#include "format/codec.h"

#define FK_EP_THREADS 256

/* A top-k id as the kernels route it: -1 for none or for an id outside
 * [-1, E) (which also sets *bad). */
__device__ static int32_t fk_ep_valid_id(int32_t e, int32_t E, int *bad)
{
    if (e < -1 || e >= E) {
        *bad = 1;
        return -1;
    }
    return e;
}

/* The position d of global expert g among the token's distinct experts on
 * g's rank (ids in [g / el * el, g / el * el + el)), in top-k order of first
 * occurrence; -1 when the token does not list g. Ids outside that range are
 * skipped whatever they are, so d < min(k, el) always holds. */
__device__ static int fk_ep_slot(const int32_t *ids, int k, int32_t g, int32_t el)
{
    const int32_t lo = g / el * el, hi = lo + el;
    int d = 0;
    for (int j = 0; j < k; j++) {
        const int32_t e = ids[j];
        if (e < lo || e >= hi)
            continue;
        if (e == g)
            return d;
        int first = 1;
        for (int i = 0; i < j; i++)
            if (ids[i] == e) {
                first = 0;
                break;
            }
        d += first;
    }
    return -1;
}

/* One thread per token: ids outside [-1, E) become -1 (status set), the
 * weights are kept, and each valid entry gets its return slot
 * p x slots_per_peer + i x kp + d. Thread 0 writes the chunk header. */
__global__ void fk_ep_prep_kernel(int32_t *hdr, int32_t *cids, float *wb, int32_t *ri, int32_t *status,
                                  const int32_t *ids, const float *w, int64_t t, int k, int32_t E, int32_t el,
                                  int32_t slots_per_peer, int32_t kp)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0)
        *hdr = (int32_t)t;
    if (i >= t)
        return;
    int bad = 0;
    for (int j = 0; j < k; j++) {
        const int32_t e = fk_ep_valid_id(ids[i * k + j], E, &bad);
        cids[i * k + j] = e;
        wb[i * k + j] = w[i * k + j];
    }
    for (int j = 0; j < k; j++) {
        const int32_t e = cids[i * k + j];
        ri[i * k + j] = e < 0 ? -1 : e / el * slots_per_peer + (int32_t)i * kp + fk_ep_slot(cids + i * k, k, e, el);
    }
    if (bad)
        atomicExch(status, (int)FP8KIT_ERR_INVALID_ARGUMENT);
}

/* One block per local expert: walks the received chunks in rank order, the
 * tokens of each in blocks of FK_EP_THREADS; a ballot and the warps' sums
 * give each listing token its row (an exclusive scan in thread order). The
 * row's return slot goes to slot[e][row]; the count to counts[e]. A chunk's
 * header is clamped to 0 .. max_tokens. */
__global__ void fk_ep_scan_kernel(const unsigned char *recv, size_t chunk, size_t ck_ids, int32_t *counts,
                                  int32_t *slot, int world, int32_t rank, int k, int32_t el, int32_t mt, int32_t kp,
                                  int32_t m)
{
    __shared__ int32_t wsum[FK_EP_THREADS / 32];
    const int32_t e = (int32_t)blockIdx.x, g = rank * el + e;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    int32_t *out = slot + (int64_t)e * m;
    int32_t row = 0;
    for (int p = 0; p < world; p++) {
        const unsigned char *c = recv + (size_t)p * chunk;
        int32_t n = *(const int32_t *)c;
        n = n < 0 ? 0 : n > mt ? mt : n;
        const int32_t *ids = (const int32_t *)(c + ck_ids);
        for (int32_t j0 = 0; j0 < n; j0 += (int32_t)blockDim.x) {
            const int32_t j = j0 + (int32_t)threadIdx.x;
            const int d = j < n ? fk_ep_slot(ids + (int64_t)j * k, k, g, el) : -1;
            const unsigned mask = __ballot_sync(0xFFFFFFFFu, d >= 0);
            int32_t pos = __popc(mask & ((1u << lane) - 1u));
            if (lane == 0)
                wsum[warp] = __popc(mask);
            __syncthreads();
            int32_t total = 0;
            for (int q = 0; q < nwarps; q++) {
                const int32_t v = wsum[q];
                if (q < warp)
                    pos += v;
                total += v;
            }
            if (d >= 0)
                out[row + pos] = p * mt * kp + j * kp + d;
            row += total;
            __syncthreads(); /* wsum is reused */
        }
    }
    if (threadIdx.x == 0)
        counts[e] = row;
}

/* One thread: the contiguous layout's counts and row ends from per-expert
 * counts of type C (the scan's int32, in place; NCCL EP's int64; a negative
 * count as 0). */
template <class C> __global__ void fk_ep_ends_kernel(const C *cnt, int32_t *counts, int32_t *ends, int32_t el)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    int32_t end = 0;
    for (int32_t e = 0; e < el; e++) {
        const int32_t c = cnt[e] < 0 ? 0 : (int32_t)cnt[e];
        counts[e] = c;
        ends[e] = end += c;
    }
}

/* Where row r of local expert e goes: masked (ends NULL) e x m + r; contiguous
 * the expert's first row (its previous expert's end) + r. */
__device__ static int64_t fk_ep_row(const int32_t *ends, int32_t e, int32_t m, int32_t r)
{
    return ends ? (int64_t)(e ? ends[e - 1] : 0) + r : (int64_t)e * m + r;
}

/* Blocks (expert, y) copy rows y, y + gridDim.y, ... below the expert's
 * count: the codes (16-byte vectors: H is a multiple of 128 and every base
 * 256-aligned) and the H / 32 scale bytes as words, plain or, for f32
 * block scales, mn_major ([e][b][row], rows mp4 apart; contiguous, ends
 * given: [b][row]). */
__global__ void fk_ep_copy_kernel(const unsigned char *recv, size_t chunk, size_t ck_codes, size_t ck_scales,
                                  const int32_t *counts, const int32_t *slot, unsigned char *x, unsigned char *scale,
                                  int64_t H, int32_t m, int32_t mt, int32_t kp, int mn_major, int32_t mp4,
                                  const int32_t *ends)
{
    const int32_t e = (int32_t)blockIdx.x, cnt = counts[e];
    const int64_t nv = H / 16;
    const int32_t nw = (int32_t)(H / 128);
    uint32_t *sd = (uint32_t *)scale;
    for (int32_t r = (int32_t)blockIdx.y; r < cnt; r += (int32_t)gridDim.y) {
        const int32_t sl = slot[(int64_t)e * m + r];
        const int32_t p = sl / (mt * kp), j = sl % (mt * kp) / kp;
        const int64_t row = fk_ep_row(ends, e, m, r);
        const unsigned char *c = recv + (size_t)p * chunk;
        const uint4 *src = (const uint4 *)(c + ck_codes + (size_t)j * (size_t)H);
        uint4 *dst = (uint4 *)(x + (size_t)row * (size_t)H);
        for (int64_t v = threadIdx.x; v < nv; v += blockDim.x)
            dst[v] = src[v];
        const uint32_t *ss = (const uint32_t *)(c + ck_scales + (size_t)j * (size_t)(H / 32));
        for (int32_t b = (int32_t)threadIdx.x; b < nw; b += (int32_t)blockDim.x) {
            const size_t at = !mn_major ? (size_t)row * (size_t)nw + (size_t)b
                              : ends    ? (size_t)b * (size_t)mp4 + (size_t)row
                                        : ((size_t)e * (size_t)nw + (size_t)b) * (size_t)mp4 + (size_t)r;
            sd[at] = ss[b];
        }
    }
}

/* Blocks (expert, y): each received row of y below the count into its
 * return slot: peer p's return chunk, row rem (16-byte vectors when vec).
 * y masked (ends NULL: expert and row strides se, sr) or contiguous (rows
 * sr apart, the expert's rows from its previous expert's end). */
__global__ void fk_ep_ret_pack_kernel(const uint16_t *y, int64_t se, int64_t sr, int vec, const int32_t *counts,
                                      const int32_t *slot, unsigned char *ret_send, size_t ret_chunk, int64_t H,
                                      int32_t m, int32_t mt, int32_t kp, const int32_t *ends)
{
    const int32_t e = (int32_t)blockIdx.x, cnt = counts[e];
    for (int32_t r = (int32_t)blockIdx.y; r < cnt; r += (int32_t)gridDim.y) {
        const int32_t sl = slot[(int64_t)e * m + r];
        const int32_t p = sl / (mt * kp), rem = sl % (mt * kp);
        uint16_t *dst = (uint16_t *)(ret_send + (size_t)p * ret_chunk) + (size_t)rem * (size_t)H;
        const uint16_t *src = ends ? y + fk_ep_row(ends, e, m, r) * sr : y + e * se + r * sr;
        if (vec) {
            for (int64_t v = threadIdx.x; v < H / 8; v += blockDim.x)
                ((uint4 *)dst)[v] = ((const uint4 *)src)[v];
        } else {
            for (int64_t h = threadIdx.x; h < H; h += blockDim.x)
                dst[h] = src[h];
        }
    }
}

/* One block per token, each thread 8 columns at a time: out = bf16 of the
 * fp32 sum, from +0, of w x y over the token's valid entries in top-k order
 * (products and sums rounded to fp32 each: no FMA). */
__global__ void fk_ep_combine_kernel(const unsigned char *ret_recv, size_t ret_chunk, const int32_t *ri,
                                     const float *wb, uint16_t *out, int64_t ld, int vec, int64_t H, int k,
                                     int32_t slots_per_peer)
{
    __shared__ int32_t sidx[FP8KIT_EP_MAX_TOP_K];
    __shared__ float sw[FP8KIT_EP_MAX_TOP_K];
    const int64_t i = blockIdx.x;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        sidx[j] = ri[i * k + j];
        sw[j] = wb[i * k + j];
    }
    __syncthreads();
    uint16_t *o = out + i * ld;
    for (int64_t c = (int64_t)threadIdx.x * 8; c < H; c += (int64_t)blockDim.x * 8) {
        float acc[8];
        for (int q = 0; q < 8; q++)
            acc[q] = 0.0f;
        for (int j = 0; j < k; j++) {
            const int32_t idx = sidx[j];
            if (idx < 0)
                continue;
            const float wv = sw[j];
            const uint16_t *row = (const uint16_t *)(ret_recv + (size_t)(idx / slots_per_peer) * ret_chunk) +
                                  (size_t)(idx % slots_per_peer) * (size_t)H + c;
            const uint4 v = *(const uint4 *)row;
            const uint32_t wd[4] = {v.x, v.y, v.z, v.w};
            for (int q = 0; q < 8; q++) {
                const uint16_t b = (uint16_t)(q & 1 ? wd[q >> 1] >> 16 : wd[q >> 1] & 0xFFFFu);
                acc[q] = __fadd_rn(acc[q], __fmul_rn(wv, fk_bf16_to_f32(b)));
            }
        }
        uint16_t r[8];
        for (int q = 0; q < 8; q++)
            r[q] = fk_f32_to_bf16(acc[q]);
        if (vec) {
            uint4 v;
            v.x = (uint32_t)r[0] | (uint32_t)r[1] << 16;
            v.y = (uint32_t)r[2] | (uint32_t)r[3] << 16;
            v.z = (uint32_t)r[4] | (uint32_t)r[5] << 16;
            v.w = (uint32_t)r[6] | (uint32_t)r[7] << 16;
            *(uint4 *)(o + c) = v;
        } else {
            for (int q = 0; q < 8; q++)
                o[c + q] = r[q];
        }
    }
}

/* NCCL_EP transport, one thread per token: the ids NCCL EP routes by (ids
 * outside [-1, E) made -1, status set; an expert listed again made -1, so
 * each token reaches each expert once, as with the NCCL transport) and the
 * combine weights (at an expert's first entry the fp32 sum, in top-k order,
 * of the weights of all its entries; 0 at the entries made -1). */
__global__ void fk_ep_nep_prep_kernel(int32_t *cids, float *wb, int32_t *status, const int32_t *ids, const float *w,
                                      int64_t t, int k, int32_t E)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= t)
        return;
    int bad = 0;
    for (int j = 0; j < k; j++) {
        int32_t e = fk_ep_valid_id(ids[i * k + j], E, &bad);
        for (int q = 0; q < j && e >= 0; q++)
            if (ids[i * k + q] == e)
                e = -1; /* listed before: its weight joins the first entry's */
        cids[i * k + j] = e;
        float sum = 0.0f;
        if (e >= 0)
            for (int q = j; q < k; q++)
                if (ids[i * k + q] == e)
                    sum = __fadd_rn(sum, w[i * k + q]);
        wb[i * k + j] = sum;
    }
    if (bad)
        atomicExch(status, (int)FP8KIT_ERR_INVALID_ARGUMENT);
}

/* NCCL_EP transport, mn_major scales: blocks (expert, y) copy the plain f32
 * scales NCCL EP wrote ([e][row][b]) of the rows below the count to
 * [e][b][row] (rows mp4 apart). */
__global__ void fk_ep_nep_scales_kernel(const float *plain, float *mn, const int32_t *counts, int32_t m, int32_t nb,
                                        int32_t mp4)
{
    const int32_t e = (int32_t)blockIdx.x, cnt = counts[e];
    const int64_t n = (int64_t)cnt * nb;
    for (int64_t v = (int64_t)blockIdx.y * blockDim.x + threadIdx.x; v < n; v += (int64_t)gridDim.y * blockDim.x) {
        const int32_t r = (int32_t)(v / nb), b = (int32_t)(v % nb);
        mn[((int64_t)e * nb + b) * mp4 + r] = plain[((int64_t)e * m + r) * nb + b];
    }
}

/* NCCL_EP transport, high throughput: NCCL EP's combine sums rows already
 * weighted: yw[r] = bf16(w[r] x y[r]) (fp32 product, RNE), rows below
 * *total (the last row end), grid-stride over the row's elements. */
__global__ void fk_ep_nep_weight_kernel(const uint16_t *y, const float *w, uint16_t *yw, const int32_t *total,
                                        int64_t H)
{
    const int64_t n = (int64_t)*total * H;
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += (int64_t)gridDim.x * blockDim.x)
        yw[v] = fk_f32_to_bf16(__fmul_rn(w[v / H], fk_bf16_to_f32(y[v])));
}

#endif
