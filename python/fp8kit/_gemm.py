"""_gemm.py - scaled_mm: the fp8 GEMM of docs/spec.md section 3 with
torch._scaled_mm's argument conventions (a is M x K row-major, b is the K x N
column-major view w.t() of a row-major N x K weight w), on numpy arrays, torch
tensors or DLPack objects, without any custom-op layer (the "raw" path).

Per call it builds the fp8kit_gemm_desc / fp8kit_gemm_args structs from a
small cache keyed on everything but the data pointers, so a repeated call
costs: read the operands' metadata, one dict lookup, copy a template struct,
set the pointers, one ctypes call.
"""
import ctypes
import struct
import sys
import threading
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from ._arrays import TaggedArray, as_view, numpy_pointer_getter, numpy_ptr, torch_module
from ._common import (FP8, HP, check_out, check_out_quant, context_for, device_of, gemm_scale_shape, numel, rup,
                      set_tensor, tensor_layout)
from ._context import Context, on_clear
from ._gemm_scales import check_scale, dense, infer_layout, pick_modes, scale_shape_or_raise
from ._hooks import on_torch
from ._lib import Activation, BiasMode, DType, GemmArgs, GemmCall, GemmDesc, OutQuant, Rounding, ScaleLayout, ScaleMode, Status
from ._names import OUT_QUANTS, ROUNDINGS, activation_of, dtype_of_name, enum_of
from ._outputs import check_disjoint, numpy_writable, raise_overlap, region, shares, torch_writable
from ._outputs import layout as view_layout
from ._typing import Array, DTypeLike, Stream
from ._view import ITEMSIZE, STORAGE
from .errors import InvalidArgumentError, InvalidShapeError, InvalidStrideError, UnsupportedError


FN = "fp8kit.scaled_mm"
OUT_NAME = FN + ": out"  # how a refused out= is named


_plans: Dict[Any, Any] = {}
_tplans: Dict[Any, Any] = {}  # run's flat key of plain torch tensors -> (plan, its hot-path fields)
_plans_lock = threading.Lock()
_WORD = {f: getattr(GemmArgs, f).offset // 8 for f in ("a", "b", "scale_a", "scale_b", "c", "bias", "d", "scale_d",
                                                        "amax_d", "workspace", "workspace_bytes")}
_NWORDS = ctypes.sizeof(GemmArgs) // 8
# the hot path below writes these word indices as constants
if [_WORD[f] for f in ("a", "b", "scale_a", "scale_b", "c", "bias", "d", "scale_d", "amax_d", "workspace",
                       "workspace_bytes")] != [0, 10, 20, 30, 41, 51, 61, 71, 81, 82, 83]:  # pragma: no cover
    raise ImportError("fp8kit: unexpected fp8kit_gemm_args layout %r" % (_WORD,))
_Words = ctypes.c_uint64 * _NWORDS
_OPTION_DEFAULTS = dict(activation=None, alpha=1.0, beta=0.0, c=None, scale_d=None, out_quant=None,
                        out_hp="bfloat16", out_rounding="floor", out_pow2=False, return_amax=False,
                        use_fast_accum=False, fast_accum=None, scale_mode=None, scale_layout=None,
                        bias_per_row=False, a_dtype=None, b_dtype=None, out=None, ctx=None, stream=None)
_ARRAY_OPTIONS = frozenset(("c", "scale_d", "out"))  # operands given as options: keyed by their signature
_get_ident = threading.get_ident
_byref = ctypes.byref


class _NoTorch:
    """Stands for torch.Tensor until _torch.py is loaded (no object has this type)."""


# Bound by _use_torch when torch tensors are first seen: the plain tensor type, and
# the functions the torch hot path of run() calls directly.
_TT: Any = _NoTorch
_is_compiling: Any = None
_data_ptr: Any = None
_empty_strided: Any = None
_empty_like: Any = None
_raw_stream: Any = None
_make_guard: Any = None
_CallWords = ctypes.c_uint64 * 4  # fp8kit_gemm_call as words: ctx, desc, args, stream
if [getattr(GemmCall, f).offset for f in ("ctx", "desc", "args", "stream")] != [0, 8, 16, 24] or \
        ctypes.sizeof(GemmCall) != ctypes.sizeof(_CallWords):  # pragma: no cover
    raise ImportError("fp8kit: unexpected fp8kit_gemm_call layout")
# fp8kit_gemm_call_ptrs's second argument: the pointers of a, b, scale_a, scale_b, bias, d and
# the stream packed into one bytes object (ctypes passes bytes as a char * without converting)
_pack7 = struct.Struct("7P").pack
if struct.calcsize("7P") != 7 * ctypes.sizeof(ctypes.c_void_p):  # pragma: no cover
    raise ImportError("fp8kit: unexpected pointer size")
# Hot entries (see _register_hot) for scaled_mm's guarded calls: the last one a plain-torch
# call used, and the last one per (a.shape, b.shape, bias is None). A call checks its operands
# against _last with one guard call, then against its shapes' entry, before building any key.
_last: Any = None
_by_shape: Dict[Any, Any] = {}


class _Uncacheable(Exception):
    """An operand whose type has no signature (DLPack objects, scalars)."""


def _nosig(x):
    raise _Uncacheable


def _np_sig(x):
    return (np.ndarray, x.dtype, x.shape, x.strides)


def _tagged_sig(x):
    return (TaggedArray, x.fk_dtype, x.dtype, x.shape, x.strides)


# type -> signature: everything the checks of one call read from an operand (its
# type, dtype, shape, strides, device), without the data pointer. Two operands with
# the same signature pass or fail the same checks, so a plan found by signatures was
# validated when it was made. _use_torch adds torch.Tensor / nn.Parameter.
SIGNATURES = {np.ndarray: _np_sig, TaggedArray: _tagged_sig}
# type -> data pointer getter, for the same types
POINTERS = {np.ndarray: numpy_ptr, TaggedArray: numpy_ptr}
_sig_get = SIGNATURES.get


class _Plan:
    """Everything of one call but the data pointers: the context, descriptor,
    the args struct as bytes (pointers zero), output shapes and allocators,
    workspace size, and per thread a ready args struct whose pointer words
    are the only thing a call writes."""
    __slots__ = ("ctx", "desc", "raw", "d_shape", "d_dtype", "sd_shape", "sd_dtype", "ws", "use_sa", "use_sb",
                 "use_c", "scaled", "getters", "alloc_d", "alloc_sd", "alloc_amax", "alloc_ws", "fn", "handle",
                 "desc_ref", "cuda", "torch_stream", "index", "bufs", "has_out", "return_amax",
                 "simple", "t_out", "call", "out_check", "reads")

    def thread_buf(self):
        """(words, byref(args), args) of this thread's args struct (made on first use)."""
        args = GemmArgs.from_buffer_copy(self.raw)
        ent = (_Words.from_buffer(args), _byref(args), args)
        self.bufs[_get_ident()] = ent
        return ent

    def shared_call(self):
        """byref of this plan's fp8kit_gemm_call {ctx, desc, args with no data
        pointers, -} for fp8kit_gemm_call_ptrs, which reads it and takes the
        pointers per call: one for every thread (made once, under the lock: the
        struct holds the args' address, so the args it points to must never be
        replaced)."""
        ent = self.call
        if ent is None:
            with _plans_lock:
                if self.call is None:
                    args = GemmArgs.from_buffer_copy(self.raw)
                    call = _CallWords(self.ctx.handle or 0, ctypes.addressof(self.desc), ctypes.addressof(args), 0)
                    self.ctx._calls.append(call)
                    self.call = (_byref(call), call, args)
                ent = self.call
        return ent[0]


def _allocator(av, shape, dt):
    """A function () -> (array, pointer) making a new packed output of av's
    kind and device."""
    shape = tuple(shape)
    if av.kind == "numpy" or (av.kind == "dlpack" and av.device == "cpu"):
        storage = STORAGE[dt]
        empty = np.empty
        if dt in (DType.F32, DType.F16):
            def alloc():
                arr = empty(shape, storage)
                return arr, numpy_ptr(arr)
        else:
            def alloc():
                arr = empty(shape, storage).view(TaggedArray)
                arr.fk_dtype = dt
                return arr, numpy_ptr(arr)
        return alloc
    return torch_module().allocator(shape, dt, av.index if av.device == "cuda" else None)


def _key(a, b, scale_a, scale_b, bias, out_dtype, options):
    """The plan-cache key of one call (raises _Uncacheable or TypeError when
    there is none)."""
    ka = _sig_get(type(a), _nosig)(a)
    kb = _sig_get(type(b), _nosig)(b)
    ksa = None if scale_a is None else _sig_get(type(scale_a), _nosig)(scale_a)
    ksb = None if scale_b is None else _sig_get(type(scale_b), _nosig)(scale_b)
    kbias = None if bias is None else _sig_get(type(bias), _nosig)(bias)
    if not options:
        return (ka, kb, ksa, ksb, kbias, out_dtype)
    ko = []
    for k, v in options.items():
        if k in _ARRAY_OPTIONS and v is not None:
            ko.append((k, _sig_get(type(v), _nosig)(v)))
        elif k != "stream":  # the stream is not part of the plan; ctx is keyed by identity (the plan holds it)
            ko.append((k, v))
    return (ka, kb, ksa, ksb, kbias, out_dtype, tuple(ko))


def scaled_mm(a: Array, b: Array, scale_a: Optional[Array] = None, scale_b: Optional[Array] = None,
              bias: Optional[Array] = None, out_dtype: Optional[DTypeLike] = None, out: Optional[Array] = None, *,
              activation: Optional[str] = None, alpha: float = 1.0, beta: float = 0.0, c: Optional[Array] = None,
              scale_d: Optional[Array] = None, out_quant: Optional[str] = None, out_hp: DTypeLike = "bfloat16",
              out_rounding: str = "floor", out_pow2: bool = False, return_amax: bool = False,
              use_fast_accum: bool = False, fast_accum: Optional[bool] = None,
              scale_mode: Union[None, str, Tuple[str, str]] = None, scale_layout: Optional[str] = None,
              bias_per_row: bool = False, a_dtype: Optional[DTypeLike] = None, b_dtype: Optional[DTypeLike] = None,
              ctx: Optional[Context] = None, stream: Optional[Stream] = None) -> Union[Array, Tuple[Array, ...]]:
    """D = out(act(alpha * deq(A) deq(B)^T + beta * c + bias)) (docs/spec.md section 3).

    Runs on the operands' device with no host synchronization. While
    torch.compile traces, torch tensors go through torch.ops.fp8kit.scaled_mm.
    Returns d; (d, amax) with return_amax; (d, scales) with out_quant 'mx' /
    'block1x128'.

    Arguments:
      a: (M, K) fp8 (e4m3 / e5m2), row-major.
      b: (K, N) fp8 given as the column-major view w.t() of a row-major
        (N, K) w, exactly as torch._scaled_mm takes it.
      scale_a, scale_b: the dequantization multipliers: float32 scalars
        (tensor), (M, 1) / (1, N) (row), (M, ceil(K/128)) /
        (ceil(N/128), ceil(K/128)) (block 1x128 / 128x128), or e8m0
        (M, K/32) / (N, K/32) (mx; plain or blocked layout); None: no scale.
        Whatever fp8kit.quantize returns is accepted as it is. Orientation
        convention (read from the strides, never guessed from the shape):
        scale_b as quantize returns sw, packed row-major, is the (N-side,
        K-side) grid; its transposed view sw.t() (torch._scaled_mm's scale_b,
        as b = w.t()) is accepted too; a transposed copy (sw.t().contiguous())
        is refused, and where the grid is square (N/128 == K/128) it is read
        as sw. Layout convention: a scale array is read as the plain layout
        unless scale_layout says otherwise or its shape can only be the other
        layout's: an (M, ceil(K/128)) scale_a that is not packed is the view
        of an mn_major buffer, a (ceil(K/128), 4*ceil(M/4)) one is that buffer
        (when it is not also (M, ceil(K/128))), and mx scales whose sizes are
        the padded blocked sizes but not the plain ones are blocked. B's block
        scales have no mn_major layout in the GEMM.
      bias: 1-D length N (or M with bias_per_row=True), float32 / float16 /
        bfloat16.
      out_dtype: bfloat16 (default for torch), float32 (default for numpy),
        float16, e4m3 or e5m2 (any name dtype_of_name takes).
      out: write D into this array (a repeated call then skips the
        allocation). It must be writable (numpy flags.writeable, a torch
        tensor torch would take as out=, a DLPack export not flagged
        read-only) and share no byte with anything the call reads, except
        that it may be exactly c (D = alpha * AB + beta * D in place);
        checked on every call, cached plans included.

    Keyword arguments:
      activation: None or an activation name as the C library spells it
        (fp8kit_activation_parse, any case: 'relu', 'gelu_tanh', 'gelu_erf'
        or 'gelu', 'silu' or 'swish', ...; ACTIVATIONS), or an Activation.
      alpha, beta, c: y = alpha * acc + beta * c + bias (c: (M, N) float32 /
        float16 / bfloat16, read when beta != 0).
      scale_d: fp8 outputs: the float32 scalar divisor, D = fp8(y / scale_d)
        (torch's scale_result s is scale_d = 1/s).
      return_amax: with scale_d, also return max|y|.
      out_quant: 'mx' or 'block1x128' quantize each output row (returns
        (d, scales)); 'scaled' (implied by scale_d) or None.
      out_hp, out_rounding, out_pow2: for out_quant 'mx' / 'block1x128': the
        type y is rounded to first, the mx scale rounding ('floor' /
        'rceil'), power-of-two block scales (docs/spec.md 3).
      use_fast_accum (torch._scaled_mm's name), fast_accum (fp8kit_gemm_desc's
        name for the same flag): CUDA only, fewer fp32 promotions; precise
        fp32 output on CUDA runs on fp16 copies of the operands (1e-5;
        tensor / row scales), block / mx with fp32 output need fast_accum
        there (see bench/results/perf-gemm-log-2026-11.md).
      scale_mode: 'tensor', 'row', 'block', 'mx' or an (a, b) pair: forces the
        mode where shapes are ambiguous.
      scale_layout: 'plain', 'blocked' (mx) or 'mn_major' (block, A's
        scales) where sizes are ambiguous.
      bias_per_row: bias has length M (one per row) instead of N.
      a_dtype, b_dtype: the fp8 format of untagged uint8 operands (default
        e4m3).
      ctx: a Context (default: the cached one of the operands' device).
      stream: a cudaStream_t int or torch stream (default: torch's current
        one).

    Cost of a repeated call: one signature per operand (type, dtype, shape,
    strides, device), one dict lookup for the plan made (and validated) by the
    first call with those signatures, the data pointers written into a
    prebuilt per-thread args struct, the output allocation, one C call."""
    # the options given (the keywords that are not their defaults' own objects) as the dict the plan
    # cache keys, empty for the common call (one test each: a loop or comprehension costs ~1.5 us more)
    options: Dict[str, Any] = {}
    if activation is not None:
        options["activation"] = activation
    if alpha is not _D_ALPHA:
        options["alpha"] = alpha
    if beta is not _D_BETA:
        options["beta"] = beta
    if c is not None:
        options["c"] = c
    if scale_d is not None:
        options["scale_d"] = scale_d
    if out_quant is not None:
        options["out_quant"] = out_quant
    if out_hp is not _D_OUT_HP:
        options["out_hp"] = out_hp
    if out_rounding is not _D_OUT_ROUNDING:
        options["out_rounding"] = out_rounding
    if out_pow2 is not False:
        options["out_pow2"] = out_pow2
    if return_amax is not False:
        options["return_amax"] = return_amax
    if use_fast_accum is not False:
        options["use_fast_accum"] = use_fast_accum
    if fast_accum is not None:
        options["fast_accum"] = fast_accum
    if scale_mode is not None:
        options["scale_mode"] = scale_mode
    if scale_layout is not None:
        options["scale_layout"] = scale_layout
    if bias_per_row is not False:
        options["bias_per_row"] = bias_per_row
    if a_dtype is not None:
        options["a_dtype"] = a_dtype
    if b_dtype is not None:
        options["b_dtype"] = b_dtype
    if ctx is not None:
        options["ctx"] = ctx
    if stream is not None:
        options["stream"] = stream
    if out is not None:
        options["out"] = out
    tp = type(a)
    if tp is _TT:  # a plain torch.Tensor (once _torch.py is loaded)
        if _is_compiling():
            return _traced(a, b, scale_a, scale_b, bias, out_dtype, options)
        if out is not None:
            # out= with the dtype, shape, strides and device of the D a hot entry allocates:
            # the same plan, the allocation skipped (the C call checks out's alignment)
            # (one C++ guard call checks the operands and out together)
            h = _last if len(options) == 1 and type(b) is tp and type(out) is tp else None
            if h is not None and out_dtype is h[0] and (
                    h[12](a, b, scale_a, scale_b, out) if bias is None else h[13](a, b, scale_a, scale_b, bias, out)):
                return _hot_call(h, a, b, scale_a, scale_b, bias, out)
            return run(a, b, scale_a, scale_b, bias, out_dtype, options)
        h = _last if not options and type(b) is tp else None
        # operands with the type, dtype, shape, strides and device of a hot entry's (one C++
        # guard call each): the last one used, else the one of these shapes. The body is
        # _hot_call's, inlined (a Python call costs ~0.1 us).
        if h is not None and (out_dtype is not h[0] or not (
                h[1](a, b, scale_a, scale_b) if bias is None else h[2](a, b, scale_a, scale_b, bias))):
            h = _by_shape.get((a.shape, b.shape, bias is None))
            if h is not None:
                if out_dtype is h[0] and (
                        h[1](a, b, scale_a, scale_b) if bias is None else h[2](a, b, scale_a, scale_b, bias)):
                    _set_last(h)
                else:
                    h = None
        if h is not None:
            plan, fn, call, tmpl, d_shape, d_strides, tdtype, tdevice, sidx = h[3:12]
            d = _empty_like(tmpl) if tmpl is not None else \
                _empty_strided(d_shape, d_strides, dtype=tdtype, device=tdevice)
            dp = _data_ptr
            st = fn(call, _pack7(dp(a), dp(b), dp(scale_a), dp(scale_b), 0 if bias is None else dp(bias), dp(d),
                                 0 if sidx is None else _raw_stream(sidx)))
            if st:
                plan.ctx.check(st)
            return d
    elif "torch" in sys.modules and tp.__module__.startswith("torch"):  # the check that traced on the device
        if torch_module().is_compiling():
            return _traced(a, b, scale_a, scale_b, bias, out_dtype, options)
    return run(a, b, scale_a, scale_b, bias, out_dtype, options)


# the default objects of scaled_mm's keyword options that are not singletons (compared by identity)
_KWDEFAULTS: Dict[str, Any] = scaled_mm.__kwdefaults__ or {}
_D_ALPHA, _D_BETA, _D_OUT_HP, _D_OUT_ROUNDING = (_KWDEFAULTS[k] for k in ("alpha", "beta", "out_hp", "out_rounding"))
if dict(_KWDEFAULTS, out=None) != _OPTION_DEFAULTS:  # pragma: no cover
    raise ImportError("fp8kit: scaled_mm's keyword defaults differ from _OPTION_DEFAULTS")


# torch_ops.scaled_mm (the custom op torch.ops.fp8kit.scaled_mm with scaled_mm's arguments), which
# torch_ops gives trace_with when it registers the ops
_traced_op: Any = None


def trace_with(op):
    """Makes scaled_mm route torch tensors to op(a, b, scale_a, scale_b, bias,
    out_dtype, **options) while torch.compile traces (torch_ops does this
    when it registers torch.ops.fp8kit.*)."""
    global _traced_op
    _traced_op = op


def _traced(a, b, scale_a, scale_b, bias, out_dtype, options):
    """While torch.compile traces: the custom op, whose fake gives the output."""
    if _traced_op is None:
        raise UnsupportedError("%s: torch.compile is tracing but torch.ops.fp8kit is not registered (fp8kit.torch_ops "
                               "could not be imported: it needs torch >= 2.4)" % FN)
    return _traced_op(a, b, scale_a, scale_b, bias,
                      out_dtype if out_dtype is not None else torch_module().torch_dtype(DType.BF16), **options)


def run(a, b, scale_a, scale_b, bias, out_dtype, options):
    """scaled_mm without the torch.compile routing (the custom op's body)."""
    global _last
    tkey = None
    TT = _TT
    h = _last
    if h is not None and not options and type(a) is TT and type(b) is TT and out_dtype is h[0] and (
            h[1](a, b, scale_a, scale_b) if bias is None else h[2](a, b, scale_a, scale_b, bias)):
        return _hot_call(h, a, b, scale_a, scale_b, bias, None)  # the guarded call of scaled_mm (the op's path)
    if type(a) is TT and type(b) is TT and type(scale_a) is TT and type(scale_b) is TT:
        # plain torch tensors, no options but out=: the flat signature key of _tplans
        # (the same facts _torch_sig reads, the types being fixed by the checks here)
        kb = ko = out = None
        if bias is not None:
            kb = (bias.dtype, bias.shape, bias.stride(), bias.device) if type(bias) is TT else False
        if options:
            out = options.get("out")
            if len(options) == 1 and type(out) is TT:
                ko = (out.dtype, out.shape, out.stride(), out.device)
            else:
                kb = False
        if kb is not False:
            tkey = (a.dtype, a.shape, a.stride(), a.device, b.dtype, b.shape, b.stride(), b.device,
                    scale_a.dtype, scale_a.shape, scale_a.stride(), scale_a.device,
                    scale_b.dtype, scale_b.shape, scale_b.stride(), scale_b.device, kb, ko, out_dtype)
            try:
                hot = _tplans.get(tkey)
            except TypeError:  # an unhashable out_dtype: the general path reports it
                hot = tkey = None
            if hot is not None:
                if out is not None:
                    if out.requires_grad or out.is_inference():  # not in the flat key (the guards check it)
                        torch_writable(out, OUT_NAME)
                elif hot[1] is not None and hot is not _last:
                    _last = hot  # the next calls try its guard first
                    if len(_by_shape) > 4096:
                        _by_shape.clear()
                    _by_shape[(a.shape, b.shape, bias is None)] = hot
                return _hot_call(hot, a, b, scale_a, scale_b, bias, out)
    try:
        if options:
            key = _key(a, b, scale_a, scale_b, bias, out_dtype, options)
        else:
            key = (_sig_get(type(a), _nosig)(a), _sig_get(type(b), _nosig)(b),
                   None if scale_a is None else _sig_get(type(scale_a), _nosig)(scale_a),
                   None if scale_b is None else _sig_get(type(scale_b), _nosig)(scale_b),
                   None if bias is None else _sig_get(type(bias), _nosig)(bias), out_dtype)
        plan = _plans.get(key)
    except (_Uncacheable, TypeError):  # no signature for an operand, or an unhashable option
        key = plan = None
    if plan is None:
        return _first_call(key, a, b, scale_a, scale_b, bias, out_dtype, options, tkey)
    if tkey is not None:
        _register_hot(tkey, plan, bool(options), (a, b, scale_a, scale_b, bias), options.get("out"))
    # the hot path: every check passed when the plan was made for these signatures (but out='s
    # writability and overlap, which depend on more than the signature: plan.out_check)
    buf = plan.bufs.get(_get_ident())
    if buf is None:
        buf = plan.thread_buf()
    words = buf[0]
    ga, gb, gsa, gsb, gbias = plan.getters
    words[0] = ga(a)  # word indices: see _WORD
    words[10] = gb(b)
    if gsa is not None:
        words[20] = gsa(scale_a)
    if gsb is not None:
        words[30] = gsb(scale_b)
    if gbias is not None:
        words[51] = gbias(bias)
    if not options:
        d, words[61] = plan.alloc_d()
        if plan.simple:
            st = plan.fn(plan.handle, plan.desc_ref, buf[1],
                         _current_stream(plan.index) if plan.torch_stream else None)
            if st:
                plan.ctx.check(st)
            return d
        return _launch(plan, words, buf[1], d, None)
    opt = options.get
    if plan.use_c:
        c = opt("c")
        words[41] = POINTERS[type(c)](c)
    if plan.scaled:
        sd = opt("scale_d")
        words[71] = POINTERS[type(sd)](sd)
    if plan.has_out:
        d = opt("out")
        pd = POINTERS[type(d)](d)
        plan.out_check(d, pd, words)
        words[61] = pd
    else:
        d, words[61] = plan.alloc_d()
    return _launch(plan, words, buf[1], d, opt("stream"))


def _launch(plan, words, args_ref, d, stream):
    extra = amax = ws = None
    if plan.alloc_sd is not None:
        extra, words[71] = plan.alloc_sd()
    if plan.return_amax:
        amax, words[81] = plan.alloc_amax()
    if plan.ws:
        ws, words[82] = plan.alloc_ws()  # raw bytes; freed in stream order by torch
    if plan.cuda:
        if stream is not None:
            stream = getattr(stream, "cuda_stream", stream)
        elif plan.torch_stream:
            stream = _current_stream(plan.index)
    else:
        stream = None
    st = plan.fn(plan.handle, plan.desc_ref, args_ref, stream)
    if st:
        plan.ctx.check(st)
    del ws
    if extra is not None:
        return (d, extra, amax) if amax is not None else (d, extra)
    return (d, amax) if amax is not None else d


def _current_stream(index):
    """torch's current stream on cuda:index (replaced by _torch.py's function once torch is seen)."""
    return torch_module().current_stream(index)


def _use_torch(tm):
    """Binds the torch hot path of run() to fp8kit._torch `tm` and lets the
    plan cache key torch tensors (see SIGNATURES): called once, when torch
    tensors are first seen (_hooks.on_torch)."""
    global _current_stream, _raw_stream, _data_ptr, _empty_strided, _empty_like, _is_compiling, _TT, _make_guard
    torch = tm.torch
    _current_stream = tm.current_stream
    _raw_stream = tm.raw_stream
    _data_ptr = torch.Tensor.data_ptr
    _empty_strided = torch.empty_strided  # measured cheaper per call than torch.empty(shape, ...)
    _empty_like = torch.empty_like  # of an expanded template: cheaper still (see _torch.expanded)
    _is_compiling = tm.compiling
    _make_guard = tm.make_guard
    for tp in (torch.Tensor, torch.nn.Parameter):
        SIGNATURES[tp] = tm.signature
        POINTERS[tp] = torch.Tensor.data_ptr
    _TT = torch.Tensor  # last: a plain tensor takes the hot path only once everything above is set


on_torch(_use_torch)


def _first_call(key, a, b, scale_a, scale_b, bias, out_dtype, options, tkey=None):
    """A call without a cached plan: full checks, a new plan (kept when the
    call has a key: `key` in _plans, `tkey` (run's flat key of plain torch
    tensors) in _tplans), then the call itself with the pointers of the views."""
    if options:
        bad = [k for k in options if k not in _OPTION_DEFAULTS]
        if bad:
            raise TypeError("scaled_mm() got unexpected keyword arguments %s" % ", ".join(bad))
        o = dict(_OPTION_DEFAULTS)
        o.update(options)
        ha = dtype_of_name(o["a_dtype"]) if o["a_dtype"] is not None else DType.E4M3
        hb = dtype_of_name(o["b_dtype"]) if o["b_dtype"] is not None else DType.E4M3
    else:
        o = _OPTION_DEFAULTS
        ha = hb = DType.E4M3
    av = as_view(a, "a", ha)
    bv = as_view(b, "b", hb)
    sa = as_view(scale_a, "scale_a", DType.E8M0) if scale_a is not None else None
    sb = as_view(scale_b, "scale_b", DType.E8M0) if scale_b is not None else None
    biasv = as_view(bias, "bias") if bias is not None else None
    cv = as_view(o["c"], "c") if o["c"] is not None else None
    sdv = as_view(o["scale_d"], "scale_d") if o["scale_d"] is not None else None
    plan = _make_plan(av, bv, sa, sb, cv, biasv, sdv, out_dtype, o)
    dv = None
    if o["out"] is not None:
        dv = check_out(o["out"], "out", plan.d_shape, plan.d_dtype,
                       (av.device, av.index if av.device == "cuda" else 0), fn=FN)
        ptrs = {0: av.ptr, 10: bv.ptr, 20: sa and sa.ptr, 30: sb and sb.ptr, 41: cv and cv.ptr,
                51: biasv and biasv.ptr, 71: sdv and sdv.ptr}
        # D may be exactly C (D = ... + beta * D in place: same data, dtype and layout; the library reads
        # C before it writes D, include/fp8kit.h), else nothing it reads
        c_inplace = plan.use_c and cv.dtype == dv.dtype and view_layout(cv) == view_layout(dv)
        check_disjoint(FN, [region("out", dv)], [(name, ptrs[w], lay) for name, w, lay in plan.reads
                                                 if not (c_inplace and w == 41 and cv.ptr == dv.ptr)])
        plan.raw = _with_d(plan.raw, dv)
        plan.has_out = True
        plan.out_check = _out_checker(o["out"], dv, plan.reads, c_inplace)
    views = (av, bv, sa if plan.use_sa else None, sb if plan.use_sb else None, biasv)
    cacheable = key is not None and all(v is None or type(v.owner) in POINTERS for v in
                                        views + (cv if plan.use_c else None, sdv if plan.scaled else None, dv))
    plan.getters = tuple(None if v is None else _getter(v.owner) for v in views)
    if cacheable:
        with _plans_lock:
            if len(_plans) > 4096:
                _plans.clear()
            _plans[key] = plan
        if tkey is not None:
            _register_hot(tkey, plan, bool(options), (a, b, scale_a, scale_b, bias), o["out"])
    # this call: the pointers straight from the views
    args = GemmArgs.from_buffer_copy(plan.raw)
    words = _Words.from_buffer(args)
    for name, v in (("a", av), ("b", bv), ("scale_a", views[2]), ("scale_b", views[3]), ("bias", biasv),
                    ("c", cv if plan.use_c else None), ("scale_d", sdv if plan.scaled else None), ("d", dv)):
        if v is not None:
            words[_WORD[name]] = v.ptr
    if dv is not None:
        d = o["out"]
    else:
        d, words[_WORD["d"]] = plan.alloc_d()
    return _launch(plan, words, _byref(args), d, o["stream"])


def _false(*args):
    return False


def _set_last(h):
    global _last
    _last = h


def _hot_call(h, a, b, scale_a, scale_b, bias, out):
    """One call through a hot entry (see _register_hot): the output (new
    unless out), then one C call with the plan's prepared call and the packed
    pointers and stream. scaled_mm inlines the same for its guarded calls."""
    plan, fn, call, tmpl, d_shape, d_strides, tdtype, tdevice, sidx = h[3:12]
    dp = _data_ptr
    if out is not None:
        # out= : no byte of it may be one the call reads (the extents are fixed by the entry's
        # signatures, so a range test per operand; a meeting pair goes to the exact check)
        pa, pb, psa, psb, pd = dp(a), dp(b), dp(scale_a), dp(scale_b), dp(out)
        pbias = 0 if bias is None else dp(bias)
        nd, ea, eb, esa, esb, ebias = h[14]  # [pd, pd - nd) meets [p, p + e) when nd < pd - p < e
        if nd < pd - pa < ea or nd < pd - pb < eb or nd < pd - psa < esa or nd < pd - psb < esb or (
                pbias and nd < pd - pbias < ebias):
            _hot_overlap(h, (pa, pb, psa, psb, pbias), pd)
        st = fn(call, _pack7(pa, pb, psa, psb, pbias, pd, 0 if sidx is None else _raw_stream(sidx)))
        if st:
            plan.ctx.check(st)
        return out
    if tmpl is not None:
        d = _empty_like(tmpl)
    else:
        d = _empty_strided(d_shape, d_strides, dtype=tdtype, device=tdevice)
    # fp8kit_gemm_call_ptrs without argtypes: a byref and a bytes object, nothing to convert
    st = fn(call, _pack7(dp(a), dp(b), dp(scale_a), dp(scale_b), 0 if bias is None else dp(bias), dp(d),
                         0 if sidx is None else _raw_stream(sidx)))
    if st:
        plan.ctx.check(st)
    return d


def _hot_overlap(h, ptrs, pd):
    """The exact overlap check of a hot call's out= whose byte range meets an operand's."""
    lays = h[15]
    for name, p, lay in zip(("a", "b", "scale_a", "scale_b", "bias"), ptrs, lays):
        if p and shares(pd, lays[5], p, lay):
            raise_overlap(FN, "out", pd, lays[5], name, p, lay)


def _register_hot(tkey, plan, has_out, operands, out=None):
    """Keeps plan under run's flat torch key when the hot path can do all of
    its work: no second output, workspace, C or scale_d, both scales, a
    torch output (given as out= when has_out), a library with
    fp8kit_gemm_call_ptrs. The entry: (out_dtype, guard of (a, b, scale_a,
    scale_b) or _false, guard of the five with bias or _false, plan, C
    function, byref of the plan's shared call struct, D's template (an
    expanded one-element tensor whose empty_like is a new packed D; None
    when D has a dimension < 2, where empty_like would keep its 0 strides),
    D's shape, strides, torch dtype and device, CUDA device index or None,
    then the two guards again with a packed D as the last operand, for
    out=), then for out='s overlap check minus the byte extent of D (out's
    when has_out, else packed) and the byte extents of what the call reads of
    a, b, scale_a, scale_b, bias (0 without), and the layouts of those five
    and D (see _outputs). The guards (None without one) check the operands'
    type, dtype, shape, strides and device against these operands', the facts
    tkey holds; their requires_grad and dispatch keys too, so an out= they
    pass is one torch would write (what _outputs.torch_writable checks on the
    flat-key route)."""
    if not (plan.simple and plan.t_out is not None and plan.has_out == has_out and plan.use_sa and plan.use_sb
            and not plan.use_c and not plan.scaled and plan.ctx.unchecked_gemm_ptrs is not None):
        return
    M, N = plan.d_shape
    g4 = g5 = None
    g4o = g5o = _false
    if not has_out and _make_guard is not None:
        bias = operands[4]
        d = torch_module().torch.empty_strided(plan.d_shape, (N, 1), dtype=plan.t_out[0], device=plan.t_out[1])
        if bias is None:
            g4, g5 = _make_guard(operands[:4]), _false
            g4o = _make_guard(list(operands[:4]) + [d])
        else:
            g4, g5 = _false, _make_guard(operands)
            g5o = _make_guard(list(operands) + [d])
        if g4 is None or g5 is None or g4o is None or g5o is None:
            g4 = g5 = None
            g4o = g5o = _false
    tmpl = torch_module().expanded(plan.d_shape, *plan.t_out) if M > 1 and N > 1 and not has_out else None
    reads = dict((w, lay) for _, w, lay in plan.reads)
    lays = tuple(reads.get(w, (0, (), (), 1)) for w in (0, 10, 20, 30, 51))
    if has_out:
        ld = torch_module().byte_layout(out)
    else:
        isz = ITEMSIZE[plan.d_dtype]
        ld = (M * N * isz, (M, N), (N * isz, isz), isz)
    lays += (ld,)
    hot = (tkey[-1], g4, g5, plan, plan.ctx.unchecked_gemm_ptrs, plan.shared_call(), tmpl, plan.d_shape,
           (N, 1)) + plan.t_out + (plan.index if plan.torch_stream else None, g4o, g5o,
                                   (-ld[0],) + tuple(lay[0] for lay in lays[:5]), lays)
    with _plans_lock:
        if len(_tplans) > 4096:
            _tplans.clear()
        _tplans[tkey] = hot


def _getter(owner):
    """Data-pointer function for operands of owner's type and layout (None: uncacheable type)."""
    g = POINTERS.get(type(owner))
    if g is numpy_ptr:
        return numpy_pointer_getter(owner)
    return g


def _with_d(raw, dv):
    """raw args bytes with d described by the caller's output view."""
    args = GemmArgs.from_buffer_copy(raw)
    set_tensor(args.d, None, dv.dtype, dv.shape, dv.strides)
    return bytes(args)


def _make_plan(av, bv, sa, sb, cv, biasv, sdv, out_dtype, o):
    """Checks one call's operands and options (everything but the data) and
    builds its plan."""
    activation, alpha, beta, out_quant = o["activation"], o["alpha"], o["beta"], o["out_quant"]
    out_hp, out_rounding, out_pow2, return_amax = o["out_hp"], o["out_rounding"], o["out_pow2"], o["return_amax"]
    use_fast_accum, scale_mode, scale_layout, bias_per_row = (o["use_fast_accum"], o["scale_mode"],
                                                              o["scale_layout"], o["bias_per_row"])
    if o["fast_accum"] is not None:  # fast_accum is fp8kit_gemm_desc's name, use_fast_accum torch._scaled_mm's
        if use_fast_accum and not o["fast_accum"]:
            raise InvalidArgumentError("%s: fast_accum=%r and use_fast_accum=%r disagree"
                                       % (FN, o["fast_accum"], use_fast_accum))
        use_fast_accum = o["fast_accum"]
    if av.dtype not in FP8 or bv.dtype not in FP8:
        raise UnsupportedError("%s: a and b must hold e4m3 or e5m2 codes (got %s and %s)"
                               % (FN, av.dtype.name.lower(), bv.dtype.name.lower()))
    if len(av.shape) != 2 or len(bv.shape) != 2:
        raise InvalidShapeError("%s: a and b must be 2-D (got %d and %d dims)" % (FN, len(av.shape), len(bv.shape)))
    M, K = av.shape
    K2, N = bv.shape
    if K2 != K:
        raise InvalidShapeError("%s: a is %d x %d but b is %d x %d (b is K x N)" % (FN, M, K, K2, N))
    if K > 1 and N > 1 and bv.strides[0] != 1:
        raise InvalidStrideError("%s: b must be column-major (K-major), strides (1, ldb): pass w.t() of a "
                                 "row-major (N, K) weight w, as for torch._scaled_mm (b strides are %s)"
                                 % (FN, tuple(bv.strides)))
    ldb = bv.strides[1] if N > 1 else K
    if beta != 0.0 and cv is None:
        raise InvalidArgumentError("%s: beta = %r needs c" % (FN, beta))
    dev = device_of([av, bv, sa, sb, cv, biasv, sdv], FN)
    cx = context_for(dev, o["ctx"], FN)
    desc = GemmDesc()
    ma, mb = pick_modes(sa, sb, M, N, K, scale_mode)
    if (ma == ScaleMode.BLOCK) != (mb == ScaleMode.BLOCK) or (ma == ScaleMode.MX) != (mb == ScaleMode.MX):
        raise UnsupportedError("%s: block and mx scaling must be used on both a and b (got %s and %s)"
                               % (FN, ma.name.lower(), mb.name.lower()))
    layout = infer_layout(sa, sb, ma, M, N, K, scale_layout)
    if layout == ScaleLayout.BLOCKED and ma != ScaleMode.MX:
        raise UnsupportedError("%s: the blocked scale layout is only defined for mx scaling" % FN)
    if layout == ScaleLayout.MN_MAJOR and ma != ScaleMode.BLOCK:
        raise UnsupportedError("%s: the mn_major scale layout is only defined for block scaling" % FN)
    na = check_scale(sa, ma, layout, M, K, True)
    nb = check_scale(sb, mb, layout, N, K, False)
    desc.scale_a, desc.scale_b, desc.scale_layout = ma, mb, layout
    desc.act = activation_of(activation)
    desc.fast_accum = 1 if use_fast_accum else 0
    ND = N  # D's columns: N/2 with swiglu (gate_up = [gate; up] along N)
    if desc.act == Activation.SWIGLU:
        if N % 2:
            raise InvalidShapeError("%s: activation 'swiglu' needs an even N (D is M x N/2; N = %d)" % (FN, N))
        if beta != 0.0:
            raise UnsupportedError("%s: activation 'swiglu' with beta != 0 is not supported" % FN)
        ND = N // 2

    oq = enum_of(OUT_QUANTS, out_quant, "out_quant", OutQuant) if out_quant is not None else None
    if out_dtype is None:
        ddt = DType.E4M3 if oq in (OutQuant.MX, OutQuant.BLOCK1X128) or sdv is not None else (
            DType.BF16 if av.kind == "torch" or av.device == "cuda" else DType.F32)
    else:
        ddt = dtype_of_name(out_dtype, "out_dtype")
    if ddt not in HP and ddt not in FP8:
        raise UnsupportedError("%s: out_dtype %s is not an output type" % (FN, ddt.name.lower()))
    if oq is None:
        oq = OutQuant.SCALED if sdv is not None else OutQuant.NONE
    check_out_quant(FN, oq, ddt, sdv, return_amax)
    desc.out_quant = oq
    plan = _Plan()
    plan.sd_shape = plan.sd_dtype = None
    if oq in (OutQuant.MX, OutQuant.BLOCK1X128):
        hp = dtype_of_name(out_hp, "out_hp")
        if hp not in HP:
            raise UnsupportedError("%s: out_hp must be float32, float16 or bfloat16" % FN)
        desc.out_hp = hp
        desc.out_rounding = enum_of(ROUNDINGS, out_rounding, "out_rounding", Rounding)
        desc.out_pow2 = 1 if out_pow2 else 0
        st, _, sd_dtype, sd_shape = gemm_scale_shape(ScaleMode.NONE, ScaleLayout.PLAIN, 2, M, ND, oq)
        if st == Status.ERR_INVALID_SHAPE:  # mx: D's columns % 32 != 0
            raise InvalidShapeError("%s: out_quant 'mx' needs %s %% 32 == 0 (%s = %d)"
                                    % ((FN,) + (("N", "N", N) if ND == N else ("N/2", "N/2", ND))))
        if st:
            scale_shape_or_raise(ScaleMode.NONE, ScaleLayout.PLAIN, 2, M, ND, oq)
        plan.sd_shape, plan.sd_dtype = sd_shape, sd_dtype

    args = GemmArgs()
    set_tensor(args.a, None, av.dtype, (M, K), (av.strides[0] if M > 1 else K, 1))
    set_tensor(args.b, None, bv.dtype, (N, K), (ldb, 1))
    for t, v, n in ((args.scale_a, sa, na), (args.scale_b, sb, nb)):
        if n is not None:
            set_tensor(t, None, v.dtype, (n,), (1,))
    args.alpha, args.beta = float(alpha), float(beta)
    if beta != 0.0:
        if cv.dtype not in HP:
            raise UnsupportedError("%s: c must be float32, float16 or bfloat16" % FN)
        if tuple(cv.shape) != (M, N):
            raise InvalidShapeError("%s: c has shape %s; expected (%d, %d)" % (FN, tuple(cv.shape), M, N))
        set_tensor(args.c, None, cv.dtype, (M, N), cv.strides)
    if biasv is not None:
        blen = M if bias_per_row else N
        if biasv.dtype not in HP:
            raise UnsupportedError("%s: bias must be float32, float16 or bfloat16" % FN)
        if numel(biasv) != blen or not dense(biasv) or len(biasv.shape) > 2:
            raise InvalidShapeError("%s: bias must be a packed vector of length %s = %d (shape %s)"
                                    % (FN, "M" if bias_per_row else "N", blen, tuple(biasv.shape)))
        desc.bias = BiasMode.ROW if bias_per_row else BiasMode.COL
        set_tensor(args.bias, None, biasv.dtype, (blen,), (1,))
    if oq == OutQuant.SCALED:
        set_tensor(args.scale_d, None, DType.F32, (1,), (1,))
    elif plan.sd_shape is not None:
        set_tensor(args.scale_d, None, plan.sd_dtype, plan.sd_shape, (plan.sd_shape[1], 1))
    set_tensor(args.d, None, ddt, (M, ND), (ND, 1))
    plan.ctx, plan.desc = cx, desc
    plan.d_shape, plan.d_dtype = (M, ND), ddt
    plan.use_sa, plan.use_sb = ma != ScaleMode.NONE, mb != ScaleMode.NONE
    plan.use_c = beta != 0.0
    plan.scaled = oq == OutQuant.SCALED
    plan.return_amax = bool(return_amax)
    plan.has_out = False
    plan.getters = None
    plan.alloc_d = _allocator(av, (M, ND), ddt)
    # torch outputs: (torch dtype, torch device) of D for run's inlined torch.empty
    plan.t_out = torch_module().out_args(ddt, av.index if av.device == "cuda" else None) \
        if av.kind == "torch" else None
    plan.alloc_sd = _allocator(av, plan.sd_shape, plan.sd_dtype) if plan.sd_shape is not None else None
    plan.alloc_amax = _allocator(av, (), DType.F32) if return_amax else None
    plan.fn, plan.handle = cx._lib.fp8kit_gemm, cx.handle_arg
    plan.desc_ref = ctypes.byref(desc)
    plan.cuda = av.device == "cuda"
    plan.torch_stream = plan.cuda and av.kind == "torch"
    plan.index = av.index
    plan.bufs = {}
    plan.call = None
    plan.ws = 0
    if cx.backend == 2:  # CUDA: ask for the workspace once per plan
        probe = GemmArgs.from_buffer_copy(args)
        # validation needs non-NULL, aligned pointers to operands that do not overlap (the library checks
        # outputs against inputs there too): consecutive made-up addresses, 256-byte aligned, each past the
        # last one's bytes; the probe is never launched, nothing is read or written
        set_tensor(probe.d, None, ddt, (M, ND), (ND, 1))
        addr = 1 << 20
        for t in (probe.a, probe.b, probe.scale_a, probe.scale_b, probe.c, probe.bias, probe.scale_d, probe.d):
            if t.ndim or t.dtype or t.shape[0]:
                t.data = addr
                addr += rup(tensor_layout(t)[0], 256)
        nbytes = ctypes.c_size_t(0)
        cx.check(cx._lib.fp8kit_gemm_workspace_size(cx.handle, ctypes.byref(desc), ctypes.byref(probe),
                                                    ctypes.byref(nbytes)))
        plan.ws = int(nbytes.value)
        args.workspace_bytes = plan.ws  # each call puts a fresh buffer of this size in `workspace`
    plan.alloc_ws = _allocator(av, (plan.ws,), DType.E4M3) if plan.ws else None
    # no second output, no workspace: the hot path calls C itself
    plan.simple = plan.alloc_sd is None and not plan.return_amax and not plan.ws
    plan.raw = bytes(args)
    plan.out_check = None
    # what C reads, as it reads it (a scale's flat count, b as (N, K)): (name, args word, layout)
    plan.reads = tuple((name, _WORD[name], tensor_layout(getattr(args, name))) for name in
                       ("a", "b", "scale_a", "scale_b", "c", "bias", "scale_d")
                       if getattr(args, name).ndim and (name != "scale_d" or plan.scaled))
    return plan


def _out_checker(out, dv, reads, c_inplace=False):
    """f(d, pd, words): a keyed call's checks of its out= d at pd, made per call
    because they depend on more than the plan's signatures: d writable, and no
    byte of d shared with what the call reads (the layouts fixed by the plan,
    the pointers from this call's args words, written before it runs), but
    that d may be exactly c when c_inplace (c read, of d's dtype and layout)."""
    ld = view_layout(dv)
    nd = -ld[0]  # [pd, pd + ed) meets [p, p + e) when -ed < pd - p < e
    spans = tuple((w, lay[0]) for _, w, lay in reads)

    def overlap(pd, words):
        for name, w, lay in reads:
            p = words[w]
            if c_inplace and w == 41 and p == pd:
                continue
            if nd < pd - p < lay[0] and shares(pd, ld, p, lay):  # byte ranges meet: the exact check
                raise_overlap(FN, "out", pd, ld, name, p, lay)

    if isinstance(out, np.ndarray):
        def check(d, pd, words):
            if not d.flags.writeable:
                numpy_writable(d, OUT_NAME)
            for w, e in spans:
                if nd < pd - words[w] < e:
                    overlap(pd, words)
    else:
        def check(d, pd, words):
            if d.requires_grad or d.is_inference():
                torch_writable(d, OUT_NAME)
            for w, e in spans:
                if nd < pd - words[w] < e:
                    overlap(pd, words)
    return check


def clear_plans():
    """Drops every cached plan and hot entry (they hold contexts: see on_clear below)."""
    global _last
    with _plans_lock:
        _plans.clear()
        _tplans.clear()
        _by_shape.clear()
        _last = None


# fp8kit.clear_contexts() destroys the cached contexts that plans hold: drop the plans with them,
# so the next call makes a plan on the new context instead of passing a dead handle
on_clear(clear_plans)
