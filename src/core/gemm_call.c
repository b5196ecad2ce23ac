/* gemm_call.c - fp8kit_gemm_call_run: fp8kit_gemm with its arguments in one struct (one foreign-call argument for bindings). */
#include "core/internal.h"

fp8kit_status fp8kit_gemm_call_run(const fp8kit_gemm_call *call)
{
    if (!call)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_gemm_call_run: call is NULL");
    return fp8kit_gemm(call->ctx, call->desc, call->args, call->stream);
}
