/* ep_geom.c - the expert-parallel layer's configuration rules
 * (fp8kit_ep_buffer_size, fp8kit_ep_create), the byte layout of the
 * object's one device allocation on W ranks (ep_impl.h's fk_ep_geom) and the
 * recv views over it. Plain C that needs nothing of the library but fk_fail
 * and public functions, so that tests/emu/ep_kernels_emu.cpp builds the
 * kernels' emulation on this very geometry. */
#include <stdio.h>
#include <string.h>
#include "core/backend_ops.h"
#include "ep/ep_impl.h"

fp8kit_status fk_ep_check_config(const fp8kit_ctx *ctx, const char *fn, const fp8kit_ep_config *cfg)
{
    if (!cfg)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: cfg is NULL", fn);
    if (cfg->num_experts < 1 || cfg->num_experts > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->num_experts = %lld; it must be 1 .. 2^31 - 1", fn,
                       (long long)cfg->num_experts);
    if (cfg->hidden < 128 || cfg->hidden % 128 || cfg->hidden > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       "%s: cfg->hidden = %lld; it must be a positive multiple of 128 below 2^31", fn,
                       (long long)cfg->hidden);
    const int64_t kmax = cfg->num_experts < FP8KIT_EP_MAX_TOP_K ? cfg->num_experts : FP8KIT_EP_MAX_TOP_K;
    if (cfg->top_k < 1 || cfg->top_k > kmax)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                       "%s: cfg->top_k = %lld; it must be 1 .. min(num_experts, %d) = %lld", fn,
                       (long long)cfg->top_k, FP8KIT_EP_MAX_TOP_K, (long long)kmax);
    if (cfg->max_tokens < 1 || cfg->max_tokens > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->max_tokens = %lld; it must be 1 .. 2^31 - 1", fn,
                       (long long)cfg->max_tokens);
    if ((unsigned)cfg->fp8 >= FP8KIT_DTYPE_COUNT)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->fp8 = %d is not a fp8kit_dtype", fn, (int)cfg->fp8);
    if (!fk_is_fp8(cfg->fp8))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: cfg->fp8 is %s; the tokens travel as e4m3 or e5m2", fn,
                       fp8kit_dtype_name(cfg->fp8));
    if (cfg->mx != 0 && cfg->mx != 1)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->mx = %d; it must be 0 (block1x128) or 1 (MX)", fn,
                       (int)cfg->mx);
    if ((unsigned)cfg->rounding > FP8KIT_ROUND_RCEIL)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->rounding = %d is not a fp8kit_rounding", fn,
                       (int)cfg->rounding);
    if (cfg->rounding != FP8KIT_ROUND_FLOOR && !cfg->mx)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->rounding is rceil, an MX rule, but cfg->mx is 0",
                       fn);
    if (cfg->pow2 != 0 && cfg->pow2 != 1)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->pow2 = %d; it must be 0 or 1", fn, (int)cfg->pow2);
    if (cfg->pow2 && cfg->mx)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                       "%s: cfg->pow2 applies to block1x128 scales; MX scales are powers of two already", fn);
    if ((unsigned)cfg->scale_layout > FP8KIT_LAYOUT_MN_MAJOR)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->scale_layout = %d is not a fp8kit_scale_layout",
                       fn, (int)cfg->scale_layout);
    if (cfg->scale_layout == FP8KIT_LAYOUT_BLOCKED ||
        (cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR && cfg->mx))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "%s: cfg->scale_layout %s with %s scales; the received scales are plain, or mn_major for "
                       "block1x128 (the grouped GEMM's layouts)",
                       fn, fp8kit_scale_layout_name(cfg->scale_layout), cfg->mx ? "mx" : "block1x128");
    if ((unsigned)cfg->transport > FP8KIT_EP_TRANSPORT_NCCL_EP)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->transport = %d is not a fp8kit_ep_transport", fn,
                       (int)cfg->transport);
    /* NCCL EP forwards rows whose bytes are multiples of 16: the scales' H / 32 */
    if ((unsigned)cfg->mode > FP8KIT_EP_HIGH_THROUGHPUT)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: cfg->mode = %d is not a fp8kit_ep_mode", fn,
                       (int)cfg->mode);
    if (cfg->transport == FP8KIT_EP_TRANSPORT_NCCL_EP && cfg->hidden % 512)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "%s: cfg->hidden = %lld; the NCCL EP transport needs a multiple of 512 (its rows of scales "
                       "are H / 32 bytes, a multiple of 16)",
                       fn, (long long)cfg->hidden);
    return FP8KIT_OK;
}

/* Sections of the allocation, each at a multiple of 256 bytes; bad is set
 * when a size or the total does not fit. */
typedef struct fk_ep_pack {
    uint64_t off;
    int bad;
} fk_ep_pack;

static uint64_t fk_ep_mul(fk_ep_pack *a, uint64_t x, uint64_t y)
{
    uint64_t r;
    if (__builtin_mul_overflow(x, y, &r)) {
        a->bad = 1;
        return 0;
    }
    return r;
}

static uint64_t fk_ep_take(fk_ep_pack *a, uint64_t bytes)
{
    uint64_t start = (a->off + 255) / 256 * 256;
    if (start < a->off || __builtin_add_overflow(start, bytes, &a->off) || a->off > SIZE_MAX - 256)
        a->bad = 1;
    return start;
}

fp8kit_status fk_ep_geometry(const fp8kit_ctx *ctx, const char *fn, const fp8kit_ep_config *cfg, int64_t world,
                             int64_t rank, fk_ep_geom *g)
{
    fp8kit_status st = fk_ep_check_config(ctx, fn, cfg);
    if (st)
        return st;
    if (world < 1 || world > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: the world size %lld is not 1 .. 2^31 - 1", fn,
                       (long long)world);
    if (rank < 0 || rank >= world)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: rank %lld is outside 0 .. %lld", fn, (long long)rank,
                       (long long)world - 1);
    if (cfg->num_experts % world)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                       "%s: cfg->num_experts = %lld is not a multiple of the world size %lld", fn,
                       (long long)cfg->num_experts, (long long)world);
    /* NCCL EP's high-throughput kernels copy per-expert and per-token tables in
     * 16-byte steps: they abort (an assertion, no error code) unless both
     * counts are multiples of 4 */
    if (cfg->mode == FP8KIT_EP_HIGH_THROUGHPUT && cfg->transport == FP8KIT_EP_TRANSPORT_NCCL_EP &&
        ((cfg->num_experts / world) % 4 || cfg->max_tokens % 4))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "%s: the high-throughput mode on NCCL EP needs E / W = %lld and max_tokens = %lld to be "
                       "multiples of 4 (NCCL EP's high-throughput kernels)",
                       fn, (long long)(cfg->num_experts / world), (long long)cfg->max_tokens);
    fk_ep_geom r;
    memset(&r, 0, sizeof r);
    const int64_t H = cfg->hidden, mt = cfg->max_tokens, k = cfg->top_k;
    r.world = world;
    r.rank = rank;
    r.el = cfg->num_experts / world;
    r.kp = k < r.el ? k : r.el;
    r.nb = cfg->mx ? H / 32 : H / 128;
    r.sbytes = H / 32;
    /* rows: every local expert may get every token of every rank; the grouped
     * GEMM on the GPU takes fewer than 2^31 rows (E_local x M) and the return
     * slots are int32 */
    int64_t rows = 0, slots = 0;
    if (__builtin_mul_overflow(world, mt, &r.m) || __builtin_mul_overflow(r.el, r.m, &rows) || rows > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW,
                       "%s: E_local x M = %lld x (%lld ranks x %lld max_tokens) rows is 2^31 or more; lower max_tokens",
                       fn, (long long)r.el, (long long)world, (long long)mt);
    if (__builtin_mul_overflow(r.m, r.kp, &slots) || slots > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW,
                       "%s: %lld ranks x %lld max_tokens x %lld return slots is 2^31 or more; lower max_tokens", fn,
                       (long long)world, (long long)mt, (long long)r.kp);
    const int ht = cfg->mode == FP8KIT_EP_HIGH_THROUGHPUT;
    if (ht && (__builtin_mul_overflow(r.m, r.kp, &r.rows) || r.rows > INT32_MAX))
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW,
                       "%s: R = %lld ranks x %lld max_tokens x %lld experts per token and rank is 2^31 rows or more; "
                       "lower max_tokens", fn, (long long)world, (long long)mt, (long long)r.kp);
    /* the rows of x (and of the mn_major scale rows) */
    const int64_t xr = ht ? r.rows : r.el * r.m;
    r.mp4 = ((ht ? r.rows : r.m) + 3) / 4 * 4;

    fk_ep_pack a = {0, 0};
    /* the dispatch chunk: header, ids, codes, scales */
    r.ck_ids = 16;
    fk_ep_pack c = {16 + fk_ep_mul(&a, (uint64_t)mt * (uint64_t)k, 4), 0};
    r.ck_codes = (size_t)fk_ep_take(&c, fk_ep_mul(&a, (uint64_t)mt, (uint64_t)H));
    r.ck_scales = (size_t)fk_ep_take(&c, fk_ep_mul(&a, (uint64_t)mt, (uint64_t)r.sbytes));
    fk_ep_take(&c, 0);
    r.chunk = (size_t)c.off;
    r.ret_chunk = (size_t)fk_ep_mul(&a, fk_ep_mul(&a, (uint64_t)mt, (uint64_t)r.kp), (uint64_t)H * 2u);
    a.bad |= c.bad;

    const uint64_t W = (uint64_t)world, el = (uint64_t)r.el, m = (uint64_t)r.m;
    /* NCCL EP: its own buffers carry the tokens; ours are the send chunk, the
     * plain scales NCCL EP writes when the recv scales are mn_major (at
     * off_recv), the recv layout, counts, status and the folded weights */
    const int nep = cfg->transport == FP8KIT_EP_TRANSPORT_NCCL_EP;
    if (nep)
        r.ret_chunk = 0;
    r.off_send = (size_t)fk_ep_take(&a, r.chunk);
    if (!nep)
        r.off_recv = (size_t)fk_ep_take(&a, fk_ep_mul(&a, W, r.chunk));
    else
        r.off_recv = (size_t)fk_ep_take(&a, cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR
                                                ? fk_ep_mul(&a, (uint64_t)xr, (uint64_t)r.sbytes)
                                                : 0);
    r.off_x = (size_t)fk_ep_take(&a, fk_ep_mul(&a, (uint64_t)xr, (uint64_t)H));
    if (cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR)
        r.scale_bytes = (size_t)fk_ep_mul(&a, fk_ep_mul(&a, (ht ? 1 : el) * (uint64_t)r.nb, (uint64_t)r.mp4), 4);
    else
        r.scale_bytes = (size_t)fk_ep_mul(&a, (uint64_t)xr, (uint64_t)r.sbytes);
    r.off_scale = (size_t)fk_ep_take(&a, r.scale_bytes);
    r.off_counts = (size_t)fk_ep_take(&a, el * 4u);
    r.off_status = (size_t)fk_ep_take(&a, 4);
    r.off_slot = (size_t)fk_ep_take(&a, nep ? 0 : el * m * 4u);
    r.off_w = (size_t)fk_ep_take(&a, (uint64_t)mt * (uint64_t)k * 4u);
    r.off_retidx = (size_t)fk_ep_take(&a, nep ? 0 : (uint64_t)mt * (uint64_t)k * 4u);
    r.off_ret_send = (size_t)fk_ep_take(&a, fk_ep_mul(&a, W, r.ret_chunk));
    r.off_ret_recv = (size_t)fk_ep_take(&a, fk_ep_mul(&a, W, r.ret_chunk));
    r.off_ends = (size_t)fk_ep_take(&a, ht ? el * 4u : 0);
    r.off_cnt64 = (size_t)fk_ep_take(&a, ht && nep ? el * 8u : 0);
    r.off_slotw = (size_t)fk_ep_take(&a, ht && nep ? (uint64_t)r.rows * 4u : 0);
    r.off_yw = (size_t)fk_ep_take(&a, ht && nep ? fk_ep_mul(&a, (uint64_t)r.rows, (uint64_t)H * 2u) : 0);
    fk_ep_take(&a, 0);
    r.total = (size_t)a.off;
    if (a.bad)
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, "%s: the layer's buffers (%lld ranks, H %lld, max_tokens %lld) "
                       "overflow the address space", fn, (long long)world, (long long)H, (long long)mt);
    *g = r;
    return FP8KIT_OK;
}

fp8kit_quant_desc fk_ep_quant_desc(const fp8kit_ep_config *cfg)
{
    fp8kit_quant_desc d = fp8kit_quant_desc_default(cfg->mx ? FP8KIT_SCHEME_MX : FP8KIT_SCHEME_BLOCK1X128);
    d.elem = cfg->fp8;
    if (cfg->mx)
        d.rounding = cfg->rounding;
    else
        d.pow2 = cfg->pow2;
    return d;
}

/* The fields of the recv views both layouts share. */
static void fk_ep_views_common(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                               fp8kit_ep_recv *recv)
{
    recv->counts = (const int32_t *)(base + g->off_counts);
    recv->status = (int32_t *)(base + g->off_status);
    recv->world = g->world;
    recv->rank = g->rank;
    recv->local_experts = g->el;
    recv->first_expert = g->rank * g->el;
    recv->transport = cfg->transport;
}

void fk_ep_views(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base, fp8kit_ep_recv *recv)
{
    memset(recv, 0, sizeof *recv);
    if (cfg->mode == FP8KIT_EP_HIGH_THROUGHPUT) {
        const int64_t R = g->rows, xs[2] = {R, cfg->hidden};
        recv->x = fp8kit_tensor_make(base + g->off_x, cfg->fp8, 2, xs);
        const int64_t ss[2] = {R, g->nb}, sm[2] = {g->nb, g->mp4};
        recv->scale = fp8kit_tensor_make(base + g->off_scale, cfg->mx ? FP8KIT_E8M0 : FP8KIT_F32, 2,
                                         cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR ? sm : ss);
        fk_ep_views_common(cfg, g, base, recv);
        recv->max_rows = R;
        recv->layout = FP8KIT_GROUPED_CONTIGUOUS;
        recv->offsets = (const int32_t *)(base + g->off_ends);
        return;
    }
    const int64_t xs[3] = {g->el, g->m, cfg->hidden};
    recv->x = fp8kit_tensor_make(base + g->off_x, cfg->fp8, 3, xs);
    if (cfg->mx) {
        const int64_t ss[3] = {g->el, g->m, g->nb};
        recv->scale = fp8kit_tensor_make(base + g->off_scale, FP8KIT_E8M0, 3, ss);
    } else if (cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR) {
        const int64_t ss[3] = {g->el, g->nb, g->mp4};
        recv->scale = fp8kit_tensor_make(base + g->off_scale, FP8KIT_F32, 3, ss);
    } else {
        const int64_t ss[3] = {g->el, g->m, g->nb};
        recv->scale = fp8kit_tensor_make(base + g->off_scale, FP8KIT_F32, 3, ss);
    }
    fk_ep_views_common(cfg, g, base, recv);
    recv->max_rows = g->m;
    recv->layout = FP8KIT_GROUPED_MASKED;
    recv->offsets = recv->counts;
}
