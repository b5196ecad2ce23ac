"""torch_ops.py - fp8kit as torch operators (torch.ops.fp8kit.*), with fake
(meta) implementations so torch.compile / torch.export trace through them.
Importing this module registers the ops: defined with the low-level
torch.library.Library API (schema + one Python kernel for the CPU and CUDA
keys) and torch.library.register_fake (torch >= 2.4). That registration adds
only torch's dispatcher to the raw path in eager mode (torch.library.custom_op
wraps the kernel in Python autograd and checking layers that cost ~30 us
more per call on our H100 host; the ops are not differentiable: the inputs
are fp8 codes). Eager code that wants the lowest overhead calls
fp8kit.scaled_mm directly (it routes here by itself while torch.compile is
tracing).

Options that are enums in C are strings here ('' = the default / inferred).
Written against torch's documented torch.library API; checked with
torch.library.opcheck on the device (tests/test_torch_device.py).
"""
from typing import Any, Dict, Optional, Tuple, Union

import torch

from . import _gemm, _grouped, _k_grouped, _quant
from ._lib import Activation, DType, GroupedLayout, OutQuant, Scheme
from ._names import GROUPED_LAYOUTS, OUT_QUANTS, SCHEMES, activation_of, dtype_of_name, enum_of
from ._torch import torch_dtype
from ._typing import DTypeLike
from .errors import InvalidArgumentError, UnsupportedError


# the op schemas' dtype strings: torch's names, whatever spelling the caller used
_CANONICAL = {DType.F32: "float32", DType.F16: "float16", DType.BF16: "bfloat16", DType.E4M3: "float8_e4m3fn",
              DType.E5M2: "float8_e5m2", DType.E8M0: "float8_e8m0fnu"}
# _dtype_str's answers so far; from the start the DTypes, torch's dtypes and their names, so that
# torch.compile traces a plain dict lookup for them (torch 2.15 refuses to trace the library's cached
# name parser under fullgraph=True)
_DTYPE_STR: Dict[Any, str] = {**_CANONICAL, **{v: v for v in _CANONICAL.values()},
                              **{getattr(torch, v): v for v in _CANONICAL.values() if hasattr(torch, v)}}


def _dtype_name_parsed(dt):
    """torch's name of dtype dt by the library's name parser (raises for a
    name it does not take)."""
    return _CANONICAL[dtype_of_name(dt)]


# a constant to torch.compile, evaluated while it traces (the parser is a ctypes call, which dynamo
# cannot trace; a name that _DTYPE_STR does not hold yet, such as 'E4M3', reaches it first there);
# in eager mode the same function
_assume_constant = getattr(getattr(torch, "compiler", None), "assume_constant_result", None)
_dtype_name_traced = _assume_constant(_dtype_name_parsed) if _assume_constant else _dtype_name_parsed


def _dtype_str(dt):
    """'' for None, else torch's name of any dtype fp8kit takes (a name such
    as 'bf16' or 'float8_e4m3fn', a DType, a numpy or torch dtype)."""
    if dt is None:
        return ""
    cacheable = isinstance(dt, (torch.dtype, DType, str))
    s = _DTYPE_STR.get(dt) if cacheable else None
    if s is None:
        s = _dtype_name_traced(dt)
        if cacheable:
            _DTYPE_STR[dt] = s
    return s


def _opt(s):
    return s if s else None


def _modes(s):
    """'' -> inferred, 'row' -> both, 'row,tensor' -> (a, b)."""
    return tuple(s.split(",")) if "," in s else _opt(s)


_LIB = torch.library.Library("fp8kit", "DEF")  # kept alive: the registrations live as long as it
_LIB.define("quantize(Tensor x, str scheme, str dtype, int axis, str rounding, bool pow2, str scale_layout)"
            " -> (Tensor, Tensor)")
_LIB.define("dequantize(Tensor q, Tensor scale, str scheme, int axis, str scale_layout, str out_dtype) -> Tensor")
_LIB.define("scaled_mm(Tensor a, Tensor b, Tensor? scale_a, Tensor? scale_b, Tensor? bias, str out_dtype, "
            "str activation, float alpha, float beta, Tensor? c, bool use_fast_accum, str scale_mode, "
            "str scale_layout, bool bias_per_row) -> Tensor")
_LIB.define("grouped_mm(Tensor a, Tensor b, Tensor offs, Tensor? scale_a, Tensor? scale_b, Tensor? bias, "
            "str out_dtype, str activation, float alpha, str layout=\"contiguous\", str scale_layout=\"\") -> Tensor")
# grouped_mm with its fused output stage (out_quant 'scaled' / 'mx' / 'block1x128'; scaled implied by scale_d):
# returns (d, amax) for 'scaled' (amax a float32 scalar, always computed), (d, scales) for 'mx' / 'block1x128'
_LIB.define("grouped_mm_quant(Tensor a, Tensor b, Tensor offs, Tensor? scale_a, Tensor? scale_b, Tensor? bias, "
            "str out_dtype, str activation, float alpha, str layout, str scale_layout, str out_quant, "
            "Tensor? scale_d, str out_hp, str out_rounding, bool out_pow2) -> (Tensor, Tensor)")
# functional: c (G, M, N), read when beta != 0, is copied into the new output (fp8kit.k_grouped_mm's out= and
# in-place accumulation are the raw path's)
_LIB.define("k_grouped_mm(Tensor a, Tensor b, Tensor offsets, Tensor? scale_a, Tensor? scale_b, str out_dtype, "
            "float alpha, float beta, Tensor? c, bool fast_accum, str scale_mode) -> Tensor")


def _quantize_op(x, scheme, dtype, axis, rounding, pow2, scale_layout):
    return _quant.quantize(x, scheme, dtype, axis, rounding, pow2, scale_layout)


def _quantize_fake(x, scheme, dtype, axis, rounding, pow2, scale_layout):
    desc = _quant.make_quant_desc(scheme, dtype, axis, rounding, pow2, scale_layout)
    qshape, sshape, sdt = _quant.quant_shapes(tuple(x.shape), desc)
    return (x.new_empty(qshape, dtype=torch_dtype(dtype_of_name(dtype))),
            x.new_empty(sshape, dtype=torch_dtype(sdt)))


def _dequantize_op(q, scale, scheme, axis, scale_layout, out_dtype):
    return _quant.dequantize(q, scale, scheme, axis, scale_layout, out_dtype)


def _dequantize_fake(q, scale, scheme, axis, scale_layout, out_dtype):
    shape = tuple(q.shape)
    if SCHEMES[scheme.lower()] == Scheme.MX and axis == -2:
        shape = shape[:-2] + (shape[-1], shape[-2])
    return q.new_empty(shape, dtype=torch_dtype(dtype_of_name(out_dtype)))


# the op's out_dtype strings as the raw path's torch dtypes (so both paths share one plan), made on first use
_OUT_DTYPES: Dict[str, Any] = {}


def _out_dtype(s):
    """The torch dtype an op's out_dtype string names (None for '')."""
    if not s:
        return None
    t = _OUT_DTYPES.get(s)
    if t is None:
        t = _OUT_DTYPES[s] = torch_dtype(dtype_of_name(s))
    return t


def _scaled_mm_op(a, b, scale_a, scale_b, bias, out_dtype, activation, alpha, beta, c, use_fast_accum,
                  scale_mode, scale_layout, bias_per_row):
    # _gemm.run: the raw path without the torch.compile routing of _gemm.scaled_mm; only options that
    # differ from their defaults are passed, so the common call takes run's plain-tensor hot path
    opts = {}
    if activation:
        opts["activation"] = activation
    if alpha != 1.0:
        opts["alpha"] = alpha
    if beta != 0.0 or c is not None:
        opts["beta"], opts["c"] = beta, c
    if use_fast_accum:
        opts["use_fast_accum"] = True
    if scale_mode:
        opts["scale_mode"] = _modes(scale_mode)
    if scale_layout:
        opts["scale_layout"] = scale_layout
    if bias_per_row:
        opts["bias_per_row"] = True
    return _gemm.run(a, b, scale_a, scale_b, bias, _out_dtype(out_dtype), opts)


def _scaled_mm_fake(a, b, scale_a, scale_b, bias, out_dtype, activation, alpha, beta, c, use_fast_accum,
                    scale_mode, scale_layout, bias_per_row):
    # swiglu: D has N/2 columns (an odd N is refused by the real kernel)
    dt = dtype_of_name(out_dtype) if out_dtype else dtype_of_name("bfloat16")
    nd = b.shape[1] // 2 if activation and activation_of(activation) == Activation.SWIGLU else b.shape[1]
    return a.new_empty((a.shape[0], nd), dtype=torch_dtype(dt))


def _grouped_mm_op(a, b, offs, scale_a, scale_b, bias, out_dtype, activation, alpha, layout="contiguous",
                   scale_layout=""):
    return _grouped.grouped_mm(a, b, offs, scale_a, scale_b, bias, _out_dtype(out_dtype),
                               activation=activation or None, alpha=alpha, layout=layout,
                               scale_layout=scale_layout or None)


def _grouped_mm_fake(a, b, offs, scale_a, scale_b, bias, out_dtype, activation, alpha, layout="contiguous",
                     scale_layout=""):
    # the output depends on a, b, out_dtype, activation and layout only (tensor / row / block / mx scales alike;
    # the mx workspace is the eager kernel's own allocation, not an output); swiglu: N/2 columns
    dt = dtype_of_name(out_dtype) if out_dtype else dtype_of_name("bfloat16")
    nd = b.shape[2] // 2 if activation and activation_of(activation) == Activation.SWIGLU else b.shape[2]
    if enum_of(GROUPED_LAYOUTS, layout, "fp8kit::grouped_mm: layout", GroupedLayout) == GroupedLayout.MASKED:
        # a (G, M, K) -> (G, M, N)
        return a.new_empty((a.shape[0], a.shape[1], nd), dtype=torch_dtype(dt))
    return a.new_empty((a.shape[0], nd), dtype=torch_dtype(dt))


def _grouped_quant_of(out_quant, scale_d):
    """The OutQuant of a grouped_mm_quant call: out_quant's, else 'scaled' when scale_d is given. None of them
    (that call is fp8kit::grouped_mm's), or scale_d with another one, is InvalidArgumentError (the fake
    kernel refuses what the real one does)."""
    what = "fp8kit::grouped_mm_quant"
    oq = enum_of(OUT_QUANTS, out_quant, what + ": out_quant", OutQuant) if out_quant else (
        OutQuant.SCALED if scale_d is not None else OutQuant.NONE)
    if scale_d is not None and oq != OutQuant.SCALED:
        raise InvalidArgumentError("%s: scale_d is an input only with out_quant 'scaled'" % what)
    if oq == OutQuant.NONE:
        raise InvalidArgumentError("%s: needs output quantization (out_quant 'scaled', 'mx' or 'block1x128', or "
                                   "scale_d); without it call fp8kit::grouped_mm" % what)
    return oq


def _grouped_mm_quant_op(a, b, offs, scale_a, scale_b, bias, out_dtype, activation, alpha, layout, scale_layout,
                         out_quant, scale_d, out_hp, out_rounding, out_pow2):
    oq = _grouped_quant_of(out_quant, scale_d)
    return _grouped.grouped_mm(a, b, offs, scale_a, scale_b, bias, _out_dtype(out_dtype),
                               activation=activation or None, alpha=alpha, layout=layout,
                               scale_layout=scale_layout or None, scale_d=scale_d, out_quant=out_quant or None,
                               out_hp=out_hp or "bfloat16", out_rounding=out_rounding or "floor",
                               out_pow2=out_pow2, return_amax=oq == OutQuant.SCALED)


def _grouped_mm_quant_fake(a, b, offs, scale_a, scale_b, bias, out_dtype, activation, alpha, layout, scale_layout,
                           out_quant, scale_d, out_hp, out_rounding, out_pow2):
    # D as grouped_mm's fake gives it (fp8: e4m3 by default), then 'scaled': amax, a float32 scalar; 'mx' /
    # 'block1x128': the output scales of every row of D, D's leading dims + (Nd/32,) e8m0 or (ceil(Nd/128),)
    # float32 (Nd = D's columns; Nd % 32 for mx is the real kernel's check, as every other one)
    oq = _grouped_quant_of(out_quant, scale_d)
    dt = dtype_of_name(out_dtype) if out_dtype else DType.E4M3
    nd = b.shape[2] // 2 if activation and activation_of(activation) == Activation.SWIGLU else b.shape[2]
    masked = enum_of(GROUPED_LAYOUTS, layout, "fp8kit::grouped_mm_quant: layout",
                     GroupedLayout) == GroupedLayout.MASKED
    rows = (a.shape[0], a.shape[1]) if masked else (a.shape[0],)
    d = a.new_empty(rows + (nd,), dtype=torch_dtype(dt))
    if oq == OutQuant.SCALED:
        return d, a.new_empty((), dtype=torch.float32)
    if oq == OutQuant.MX:
        return d, a.new_empty(rows + (nd // 32,), dtype=torch_dtype(DType.E8M0))
    return d, a.new_empty(rows + ((nd + 127) // 128,), dtype=torch.float32)


def _k_grouped_dtype(out_dtype, c):
    """D's torch dtype: out_dtype, else c's, else bfloat16."""
    if out_dtype:
        return torch_dtype(dtype_of_name(out_dtype))
    return c.dtype if c is not None else torch.bfloat16


def _k_grouped_mm_op(a, b, offsets, scale_a, scale_b, out_dtype, alpha, beta, c, fast_accum, scale_mode):
    dt = _k_grouped_dtype(out_dtype, c)
    out = None
    if c is not None:
        out = c.to(dtype=dt, memory_format=torch.contiguous_format, copy=True)
    elif beta != 0.0:
        raise InvalidArgumentError("fp8kit::k_grouped_mm: beta = %g reads c: pass c (G, M, N)" % beta)
    return _k_grouped.k_grouped_mm(a, b, offsets, scale_a, scale_b, out=out, out_dtype=dt, alpha=alpha, beta=beta,
                                   scale_mode=scale_mode or None, fast_accum=fast_accum)


def _k_grouped_mm_fake(a, b, offsets, scale_a, scale_b, out_dtype, alpha, beta, c, fast_accum, scale_mode):
    # G from the offsets, M from a (M, Ktot), N from b (N, Ktot)
    return a.new_empty((offsets.shape[0], a.shape[0], b.shape[0]), dtype=_k_grouped_dtype(out_dtype, c))


for _name, _kernel, _fake in (("quantize", _quantize_op, _quantize_fake),
                              ("dequantize", _dequantize_op, _dequantize_fake),
                              ("scaled_mm", _scaled_mm_op, _scaled_mm_fake),
                              ("grouped_mm", _grouped_mm_op, _grouped_mm_fake),
                              ("grouped_mm_quant", _grouped_mm_quant_op, _grouped_mm_quant_fake),
                              ("k_grouped_mm", _k_grouped_mm_op, _k_grouped_mm_fake)):
    for _key in ("CPU", "CUDA"):
        _LIB.impl(_name, _kernel, _key)
    torch.library.register_fake("fp8kit::" + _name, _fake, lib=_LIB)


def quantize(x: torch.Tensor, scheme: str = "tensor", dtype: DTypeLike = "e4m3", axis: int = -1,
             rounding: str = "floor", pow2: bool = False, scale_layout: str = "plain"
             ) -> Tuple[torch.Tensor, torch.Tensor]:
    """torch.ops.fp8kit.quantize with fp8kit.quantize's arguments: x, scheme,
    dtype, axis, rounding, pow2, scale_layout (see fp8kit.quantize)."""
    return torch.ops.fp8kit.quantize(x, scheme, _dtype_str(dtype), int(axis), rounding, bool(pow2), scale_layout)


def dequantize(q: torch.Tensor, scale: torch.Tensor, scheme: str = "tensor", axis: int = -1,
               scale_layout: str = "plain", out_dtype: DTypeLike = torch.float32) -> torch.Tensor:
    """torch.ops.fp8kit.dequantize with fp8kit.dequantize's arguments: q,
    scale, scheme, axis, scale_layout, out_dtype (see fp8kit.dequantize)."""
    return torch.ops.fp8kit.dequantize(q, scale, scheme, int(axis), scale_layout, _dtype_str(out_dtype))


def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: Optional[torch.Tensor] = None,
              scale_b: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
              out_dtype: DTypeLike = torch.bfloat16, *, activation: Optional[str] = None, alpha: float = 1.0,
              beta: float = 0.0, c: Optional[torch.Tensor] = None, use_fast_accum: bool = False,
              scale_mode: Union[None, str, Tuple[str, str]] = None, scale_layout: Optional[str] = None,
              bias_per_row: bool = False, fast_accum: Optional[bool] = None) -> torch.Tensor:
    """torch.ops.fp8kit.scaled_mm with a subset of fp8kit.scaled_mm's
    arguments (no fused output quantization, out, ctx or stream through this
    layer yet): a, b, scale_a, scale_b, bias, out_dtype and the keywords
    activation, alpha, beta, c, use_fast_accum, scale_mode, scale_layout,
    bias_per_row, as fp8kit.scaled_mm takes them; fast_accum is another name
    of use_fast_accum."""
    if fast_accum is not None:
        if use_fast_accum and not fast_accum:
            raise InvalidArgumentError("fp8kit.torch_ops.scaled_mm: fast_accum=%r and use_fast_accum=%r disagree"
                                       % (fast_accum, use_fast_accum))
        use_fast_accum = fast_accum
    return torch.ops.fp8kit.scaled_mm(a, b, scale_a, scale_b, bias, _dtype_str(out_dtype), activation or "",
                                      float(alpha), float(beta), c, bool(use_fast_accum),
                                      ",".join(scale_mode) if isinstance(scale_mode, (tuple, list))
                                      else scale_mode or "", scale_layout or "", bool(bias_per_row))


def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, scale_a: Optional[torch.Tensor] = None,
               scale_b: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               out_dtype: Optional[DTypeLike] = None, *, activation: Optional[str] = None,
               alpha: float = 1.0, layout: str = "contiguous", scale_layout: Optional[str] = None,
               scale_d: Optional[torch.Tensor] = None, out_quant: Optional[str] = None, out_hp: DTypeLike = "bfloat16",
               out_rounding: str = "floor", out_pow2: bool = False,
               return_amax: bool = False) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """torch.ops.fp8kit.grouped_mm with fp8kit.grouped_mm's arguments: a, b,
    offs (an int32 tensor), scale_a, scale_b, bias, out_dtype (None:
    bfloat16, e4m3 with output quantization) and the keywords activation,
    alpha, layout ('contiguous': a (T, K) -> (T, N); 'masked': a (G, M, K),
    offs the valid-row counts -> (G, M, N)), scale_layout (None / ''
    inferred, 'plain' or 'mn_major': block scale_a as DeepGEMM's mn_major
    buffer or its strided view); see fp8kit.grouped_mm. The scales may be
    float32 (tensor / row / block) or e8m0 (torch.float8_e8m0fnu or uint8:
    mx, a's (T, K/32) or (G, M, K/32) and each expert's (G, N, K/32), as
    fp8kit.quantize(..., "mx") gives them); the op asks the library for its
    workspace and allocates it on each call (no workspace argument: the op
    is functional). The fused output stage, as fp8kit.grouped_mm's keywords
    and return convention: scale_d (implies out_quant 'scaled'), out_quant
    ('scaled', 'mx', 'block1x128': returns (d, scales)), out_hp,
    out_rounding, out_pow2, return_amax (with scale_d: returns (d, amax));
    these calls go through torch.ops.fp8kit.grouped_mm_quant, whose fake
    kernel gives the scales' (or amax's) shape too."""
    # (nothing here parses a name: torch.compile traces this function, and the names are the C library's; the
    # op's kernel and fake parse them. scale_d means 'scaled': the op refuses it with any other out_quant)
    if isinstance(out_quant, OutQuant):
        out_quant = out_quant.name.lower()
    if scale_d is None and (out_quant is None or (isinstance(out_quant, str) and out_quant.lower() == "none")):
        if return_amax:
            raise UnsupportedError("fp8kit.torch_ops.grouped_mm: return_amax needs an fp8 output with scale_d")
        return torch.ops.fp8kit.grouped_mm(a, b, offs, scale_a, scale_b, bias, _dtype_str(out_dtype),
                                           activation or "", float(alpha), layout, scale_layout or "")
    if return_amax and scale_d is None:
        raise UnsupportedError("fp8kit.torch_ops.grouped_mm: return_amax needs an fp8 output with scale_d")
    d, extra = torch.ops.fp8kit.grouped_mm_quant(a, b, offs, scale_a, scale_b, bias, _dtype_str(out_dtype),
                                                 activation or "", float(alpha), layout, scale_layout or "",
                                                 out_quant or "", scale_d,
                                                 out_hp if isinstance(out_hp, str) else _dtype_str(out_hp),
                                                 out_rounding or "", bool(out_pow2))
    return (d, extra) if scale_d is None or return_amax else d


def k_grouped_mm(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor, scale_a: Optional[torch.Tensor] = None,
                 scale_b: Optional[torch.Tensor] = None, out_dtype: Optional[DTypeLike] = None, *,
                 alpha: float = 1.0, beta: float = 0.0, c: Optional[torch.Tensor] = None, fast_accum: bool = False,
                 scale_mode: Optional[str] = None) -> torch.Tensor:
    """torch.ops.fp8kit.k_grouped_mm with fp8kit.k_grouped_mm's arguments: a (M, Ktot), b (N, Ktot),
    offsets (the G int32 K ends), scale_a, scale_b, out_dtype (default: c's dtype, else bfloat16) and the
    keywords alpha, beta, fast_accum, scale_mode; returns a new (G, M, N) tensor. Functional: instead of
    out= it takes c (G, M, N), copied into the result, which beta != 0 then accumulates into
    (D = alpha * A_g B_g^T + beta * c); see fp8kit.k_grouped_mm."""
    return torch.ops.fp8kit.k_grouped_mm(a, b, offsets, scale_a, scale_b, _dtype_str(out_dtype), float(alpha),
                                         float(beta), c, bool(fast_accum), scale_mode or "")


# fp8kit.scaled_mm routes torch tensors here while torch.compile traces
_gemm.trace_with(scaled_mm)
