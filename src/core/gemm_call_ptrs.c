/* gemm_call_ptrs.c - fp8kit_gemm_call_ptrs: a prepared fp8kit_gemm_call run with per-call data pointers and stream (the Python hot path's call). */
#include <string.h>

#include "core/internal.h"

#define FN "fp8kit_gemm_call_ptrs"

fp8kit_status fp8kit_gemm_call_ptrs(const fp8kit_gemm_call *call, const void *ptrs)
{
    if (!call)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, FN ": call is NULL");
    if (!ptrs)
        return fk_fail(call->ctx, FP8KIT_ERR_NULL_POINTER, FN ": ptrs is NULL");
    if (!call->args)
        return fk_fail(call->ctx, FP8KIT_ERR_NULL_POINTER, FN ": call->args is NULL");
    void *p[7];
    memcpy(p, ptrs, sizeof p); /* a binding's packed buffer: no alignment assumed */
    fp8kit_gemm_args args = *call->args;
    args.a.data = p[0];
    args.b.data = p[1];
    args.scale_a.data = p[2];
    args.scale_b.data = p[3];
    args.bias.data = p[4];
    args.d.data = p[5];
    return fp8kit_gemm(call->ctx, call->desc, &args, p[6]);
}
