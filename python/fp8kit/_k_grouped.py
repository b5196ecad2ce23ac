"""_k_grouped.py - k_grouped_mm: fp8kit_k_grouped_gemm, the K-grouped GEMM of
a mixture-of-experts weight gradient (DeepGEMM's
k_grouped_fp8_gemm_nt_contiguous; docs/spec.md 3, "K-grouped GEMM"). G groups
share M and N and split K: a is (M, Ktot), b is (N, Ktot) (both K-contiguous,
as the C API and DeepGEMM's "nt" take them: b is NOT transposed the way
grouped_mm / scaled_mm take it), offsets holds the G int32 K ends (multiples of
128, non-decreasing, <= Ktot) and D is (G, M, N):
    D[g] = alpha * deq(a[:, Kg]) deq(b[:, Kg])^T (+ beta * D[g] when beta != 0).
Scales: both operands' 1x128 scales along K ((M, ceil(Ktot/128)) and
(N, ceil(Ktot/128)) float32, what fp8kit.quantize's "1x128" scheme gives;
args->scales_1x128), or a float32 scalar each (tensor), or none. CPU backend:
numpy arrays, torch CPU tensors, offsets on the host (checked before anything
runs). CUDA backend: torch CUDA tensors with offsets an int32 CUDA tensor on the
same device (read by the kernel; the optional `status` receives the verdict),
as grouped_mm. Hot path (_hot.py): plain torch tensors of an earlier call's
signatures and options, without ctx / stream / status.
"""
import ctypes
from typing import Optional

import numpy as np

from . import _hot as _hotpath
from ._arrays import as_view, is_torch_tensor
from ._common import (FP8, HP, cdiv, check_out, context_for, device_of, empty_like_kind, group_offsets, numel,
                      status_pointer, stream_for)
from ._context import Context
from ._lib import DType, GemmDesc, ScaleMode, Scheme, Tensor
from ._names import SCALE_MODES, SCHEMES, dtype_of_name
from ._outputs import check_disjoint, flat_layout, layout as view_layout, region
from ._typing import Array, DTypeLike, Stream
from .errors import InvalidArgumentError, InvalidShapeError, InvalidStrideError, UnsupportedError

FN = "fp8kit.k_grouped_mm"


def _mode_of(name):
    """'none', 'tensor' or '1x128' for a scale_mode= name: a GEMM scale mode's name (the block mode being
    1x128 here) or the 1x128 scheme's; None for anything else."""
    if not isinstance(name, str):
        return None
    mode = SCALE_MODES.get(name)
    if mode is not None:
        return {ScaleMode.NONE: "none", ScaleMode.TENSOR: "tensor", ScaleMode.BLOCK: "1x128"}.get(mode)
    return "1x128" if SCHEMES.get(name) == Scheme.BLOCK1X128 else None


class KGroupedGemmArgs(ctypes.Structure):
    """fp8kit_k_grouped_gemm_args."""
    _fields_ = [
        ("a", Tensor),
        ("b", Tensor),
        ("offsets", ctypes.c_void_p),
        ("scales_1x128", ctypes.c_int32),
        ("scale_a", Tensor),
        ("scale_b", Tensor),
        ("alpha", ctypes.c_float),
        ("beta", ctypes.c_float),
        ("d", Tensor),
        ("status", ctypes.c_void_p),
    ]


def _groups(offsets):
    """G: the length of the 1-D offsets (a torch tensor, numpy array or sequence of ints)."""
    shape = tuple(offsets.shape) if is_torch_tensor(offsets) else np.shape(offsets)
    if len(shape) != 1 or shape[0] < 1:
        raise InvalidShapeError("%s: offsets must be 1-D with G >= 1 K ends (got shape %s)" % (FN, shape))
    return int(shape[0])


def _scale_1x128(v, want, name):
    """A 1x128 scale view: float32, exactly `want` = (rows, ceil(Ktot/128)), row-major contiguous."""
    if v is None:
        raise InvalidShapeError("%s: 1x128 scaling needs both scale_a and scale_b (%s is None)" % (FN, name))
    if v.dtype != DType.F32:
        raise InvalidArgumentError("%s: %s must be float32 (got %s)" % (FN, name, v.dtype.name.lower()))
    if tuple(v.shape) != tuple(want):
        raise InvalidShapeError("%s: 1x128 scaling needs %s as (%s, ceil(Ktot/128)) = %s; got shape %s (a scale "
                                "per row is not supported: tensor scales are one float32 each)"
                                % (FN, name, "M" if name == "scale_a" else "N", tuple(want), tuple(v.shape)))
    if tuple(v.strides) != (want[1], 1):
        raise InvalidStrideError("%s: 1x128 scales need the plain row-major contiguous layout (%s has strides %s)"
                                 % (FN, name, tuple(v.strides)))


def _scale_tensor(v, name):
    if v is None:
        return ScaleMode.NONE
    if v.dtype != DType.F32:
        raise InvalidArgumentError("%s: %s must be float32 (got %s)" % (FN, name, v.dtype.name.lower()))
    if numel(v) != 1:
        raise InvalidShapeError("%s: a tensor scale is one float32 value (%s has shape %s)"
                                % (FN, name, tuple(v.shape)))
    return ScaleMode.TENSOR


def _scale_modes(sav, sbv, M, N, Ktot, scale_mode):
    """(scales_1x128, mode of scale_a, mode of scale_b). Inferred when scale_mode is None: 1x128 when either
    scale holds more than one value (then both must be the 1x128 grids), else a one-value scale is a tensor
    scale and None no scale."""
    if scale_mode is not None:
        mode = _mode_of(scale_mode)
        if mode is None:
            raise InvalidArgumentError("%s: scale_mode must be None, 'none', 'tensor' or '1x128' (got %r)"
                                       % (FN, scale_mode))
    else:
        many = [v for v in (sav, sbv) if v is not None and numel(v) > 1]
        mode = "1x128" if many else "tensor"
    if mode == "none":
        if sav is not None or sbv is not None:
            raise InvalidArgumentError("%s: scale_mode='none' but scales were given" % FN)
        return 0, ScaleMode.NONE, ScaleMode.NONE
    if mode == "1x128":
        kb = cdiv(Ktot, 128)
        _scale_1x128(sav, (M, kb), "scale_a")
        _scale_1x128(sbv, (N, kb), "scale_b")
        return 1, ScaleMode.NONE, ScaleMode.NONE
    return 0, _scale_tensor(sav, "scale_a"), _scale_tensor(sbv, "scale_b")


_hot = _hotpath.Table()


def _hot_call(h, a, b, offsets, scale_a, scale_b, out, alpha, beta):
    """One call through a hot entry; None (nothing done) when the full checks must decide."""
    beta = float(beta)
    if out is None and beta != 0.0:
        return None
    d, args, _ = _hotpath.prepare(h, out, a, b, offsets, scale_a, scale_b)
    if d is None:
        return None
    args.alpha, args.beta = float(alpha), beta
    _hotpath.run(h, args, a.device)
    return d


def k_grouped_mm(a: Array, b: Array, offsets: Array, scale_a: Optional[Array] = None,
                 scale_b: Optional[Array] = None, *, out: Optional[Array] = None,
                 out_dtype: Optional[DTypeLike] = None, alpha: float = 1.0, beta: float = 0.0,
                 scale_mode: Optional[str] = None, fast_accum: bool = False, status: Optional[Array] = None,
                 ctx: Optional[Context] = None, stream: Optional[Stream] = None) -> Array:
    """D[g] = alpha * deq(a[:, Kg]) @ deq(b[:, Kg]).T (+ beta * D[g]) for the G K ranges Kg that offsets
    delimits: group g owns K columns offsets[g-1] <= k < offsets[g] (offsets[-1] = 0) of both operands
    (fp8kit_k_grouped_gemm; DeepGEMM's k_grouped_fp8_gemm_nt_contiguous, the MoE weight gradient).
    Returns D, (G, M, N): out when given.

    Arguments:
      a: (M, Ktot) e4m3 / e5m2, K-contiguous (row stride >= Ktot).
      b: (N, Ktot) e4m3 / e5m2, K-contiguous: the library's and DeepGEMM's "nt" layout (not transposed the
        way scaled_mm / grouped_mm take b).
      offsets: the G cumulative K ends, int32, non-decreasing multiples of 128, at most Ktot (else the
        library's InvalidArgumentError). CPU: on the host (numpy, torch CPU tensor or a list; checked before
        anything runs). CUDA: an int32 CUDA tensor on the operands' device (read by the kernel).
        G = len(offsets); an empty group gives D[g] = beta * D[g] (zeros with beta = 0).
      scale_a, scale_b: float32. 1x128 scales along K: scale_a (M, ceil(Ktot/128)), scale_b
        (N, ceil(Ktot/128)), row-major contiguous (what fp8kit.quantize(..., "1x128") gives for the float
        a and b); or a scalar each (tensor scale, ndim 0 or one element); or None (no scale). Told apart by
        count unless scale_mode says: more than one value in either means 1x128 (then both must be).

    Keyword arguments:
      out: a (G, M, N) float32 / bfloat16 / float16 array to write D into (writable, sharing no byte with an
        input or status); required when beta != 0, as D is then accumulated in place.
      out_dtype: D's dtype when out is None: bfloat16 / float16 / float32 (default bfloat16 for torch, float32
        for numpy); with out, out's dtype (out_dtype, if given, must match it).
      alpha: the multiplier of the products.
      beta: D[g] = ... + beta * D[g] (reads out; 0: out is only written).
      scale_mode: None (inferred, above), 'none', 'tensor' or '1x128' ('block1x128' / 'block').
      fast_accum: CUDA: allow fewer fp32 promotions (f32 out on CUDA needs it); the CPU ignores it.
      status: optional int32 array of one element on the operands' device (a numpy array or torch tensor
        with CPU operands, a torch tensor with CUDA ones) that receives 0 or 2 (invalid offsets); writable,
        sharing no byte with out or an input.
      ctx: a Context (default: the cached one of the operands' device).
      stream: a cudaStream_t int or torch stream (default: torch's current one)."""
    hkey = None
    if type(a) is _hotpath.TT and ctx is None and stream is None and status is None:
        try:
            hkey = (a.shape, b.shape, scale_a is None, scale_b is None, out is None, out_dtype, scale_mode,
                    bool(fast_accum))
            h = _hot.get(hkey, [t for t in (a, b, offsets, scale_a, scale_b, out) if t is not None])
        except TypeError:  # an unhashable option or a non-tensor offsets: the full path reports it
            hkey = h = None
        if h is not None:
            d = _hot_call(h, a, b, offsets, scale_a, scale_b, out, alpha, beta)
            if d is not None:
                return d
    av, bv = as_view(a, "a"), as_view(b, "b")
    if av.dtype not in FP8 or bv.dtype not in FP8:
        raise UnsupportedError("%s: a and b must hold e4m3 or e5m2 codes (got %s and %s)"
                               % (FN, av.dtype.name.lower(), bv.dtype.name.lower()))
    if len(av.shape) != 2 or len(bv.shape) != 2:
        raise InvalidShapeError("%s: a must be 2-D (M, Ktot) and b 2-D (N, Ktot) (got %d and %d dims)"
                                % (FN, len(av.shape), len(bv.shape)))
    M, Ktot = av.shape
    N, K2 = bv.shape
    if K2 != Ktot:
        raise InvalidShapeError("%s: a is %d x %d but b is %d x %d (a (M, Ktot), b (N, Ktot): K-contiguous, not "
                                "the transposed view grouped_mm takes)" % (FN, M, Ktot, N, K2))
    G = _groups(offsets)
    sav = as_view(scale_a, "scale_a") if scale_a is not None else None
    sbv = as_view(scale_b, "scale_b") if scale_b is not None else None
    dev = device_of([av, bv, sav, sbv], FN)
    cx = context_for(dev, ctx, FN)
    desc = GemmDesc()
    s1x128, desc.scale_a, desc.scale_b = _scale_modes(sav, sbv, M, N, Ktot, scale_mode)
    desc.fast_accum = 1 if fast_accum else 0
    beta = float(beta)
    if out is None:
        if beta != 0.0:
            raise InvalidArgumentError("%s: beta = %g accumulates into D in place: pass out (G, M, N)" % (FN, beta))
        if out_dtype is None:
            ddt = DType.BF16 if av.kind == "torch" or av.device == "cuda" else DType.F32
        else:
            ddt = dtype_of_name(out_dtype, "out_dtype")
    else:
        ddt = as_view(out, "out").dtype if out_dtype is None else dtype_of_name(out_dtype, "out_dtype")
    if ddt not in HP:
        raise UnsupportedError("%s: D must be float32, float16 or bfloat16 (got %s)" % (FN, ddt.name.lower()))
    optr, owner = group_offsets(offsets, G, dev, FN, "offsets")
    sptr = status_pointer(status, dev, FN)
    if out is None:
        d, dv = empty_like_kind(av, (G, M, N), ddt)
    else:
        dv = check_out(out, "out", (G, M, N), ddt, dev, fn=FN)
        d = out
    if out is not None or sptr:  # what the caller gives to be written shares no byte with the rest
        check_disjoint(FN, [region("out", dv) if out is not None else None,
                            ("status", sptr, flat_layout(4, 4)) if sptr else None],
                       [region("a", av), region("b", bv), region("scale_a", sav), region("scale_b", sbv),
                        ("offsets", optr, flat_layout(4 * G, 4))])
    args = KGroupedGemmArgs()
    av.fill(args.a)
    bv.fill(args.b)
    args.offsets = optr
    args.scales_1x128 = s1x128
    if sav is not None:
        sav.fill(args.scale_a)
    if sbv is not None:
        sbv.fill(args.scale_b)
    args.alpha = float(alpha)
    args.beta = beta
    dv.fill(args.d)
    args.status = sptr or None
    fn = getattr(cx._lib, "fp8kit_k_grouped_gemm", None)
    if fn is None:
        raise UnsupportedError("%s: this libfp8kit has no fp8kit_k_grouped_gemm (rebuild it)" % FN)
    st = fn(cx.handle, ctypes.byref(desc), ctypes.byref(args), stream_for(av, stream))
    cx.check(st)
    if hkey is not None and owner is offsets:  # offsets contiguous as given: no copy per call
        _hot.put(hkey, [t for t in (a, b, offsets, scale_a, scale_b, out) if t is not None], args, desc, fn, cx, dev,
                 (G, M, N) if out is None else None, ddt,
                 (view_layout(av)[0], view_layout(bv)[0], view_layout(sav)[0] if sav is not None else 0,
                  view_layout(sbv)[0] if sbv is not None else 0, 4 * G), view_layout(dv)[0])
    del owner
    return d

