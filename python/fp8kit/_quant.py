"""_quant.py - quantize, dequantize and cast for numpy arrays, torch tensors
and DLPack objects, plus quant_shapes (the C library's fp8kit_quant_shapes,
which the torch fake (meta) kernels also use; symbolic sizes go through the
same rules written in Python). Names of options follow docs/spec.md section 2.
"""
import ctypes
import functools
from typing import Optional, Union

from . import _lib
from ._arrays import as_view
from ._common import FP8, HP, cdiv, check_out, context_for, device_of, empty_like_kind, rup, stream_for
from ._context import Context
from ._lib import DType, QuantDesc, Rounding, ScaleLayout, Scheme, Tensor
from ._names import ROUNDINGS, SCALE_LAYOUTS, SCHEMES, dtype_of_name, enum_of
from ._outputs import check_disjoint, region
from ._typing import Array, ArrayPair, DTypeLike, Stream
from .errors import InvalidArgumentError, InvalidShapeError, UnsupportedError, raise_status


def make_quant_desc(scheme="tensor", dtype="e4m3", axis=-1, rounding="floor", pow2=False, scale_layout="plain"):
    """Validated QuantDesc (the checks of fp8kit_quantize on the descriptor)."""
    d = QuantDesc()
    d.scheme = enum_of(SCHEMES, scheme, "scheme", Scheme)
    elem = dtype_of_name(dtype, "dtype")
    if elem not in FP8:
        raise UnsupportedError("quantized elements must be e4m3 or e5m2, not %s" % elem.name.lower())
    d.elem = elem
    if axis in ("dim0", "dim1"):  # torchao's names
        axis = -1 if axis == "dim0" else -2
    if axis not in (-1, -2):
        raise InvalidArgumentError("axis %r must be -1 (last dim) or -2 (second to last)" % (axis,))
    d.axis = axis
    d.rounding = enum_of(ROUNDINGS, rounding, "rounding", Rounding)
    d.pow2 = 1 if pow2 else 0
    d.scale_layout = enum_of(SCALE_LAYOUTS, scale_layout, "scale_layout", ScaleLayout)
    if axis == -2 and d.scheme != Scheme.MX:
        raise UnsupportedError("axis -2 is only supported by the mx scheme")
    if d.scale_layout == ScaleLayout.BLOCKED and d.scheme != Scheme.MX:
        raise UnsupportedError("the blocked scale layout is only defined for the mx scheme")
    if d.scale_layout == ScaleLayout.MN_MAJOR and d.scheme not in (Scheme.BLOCK1X128, Scheme.BLOCK128X128):
        raise UnsupportedError("the mn_major scale layout is only defined for the block1x128 and block128x128 schemes")
    return d


def quant_shapes(shape, desc):
    """(q_shape, scale_shape, scale_dtype) for an input of `shape`: the C
    library's answer (fp8kit_quant_shapes, cached per shape and descriptor)
    when every size is an int; symbolic sizes (torch fake kernels under
    dynamic shapes) get quant_shapes_symbolic's."""
    shape = tuple(shape)
    nd = len(shape)
    if nd > 4:
        raise InvalidShapeError("x has %d dims; fp8kit takes at most 4" % nd)
    if all(isinstance(n, int) for n in shape):
        return _c_quant_shapes_cached(shape, int(desc.scheme), int(desc.elem), int(desc.axis),
                                      int(desc.scale_layout))
    return quant_shapes_symbolic(shape, desc)


@functools.lru_cache(maxsize=4096)
def _c_quant_shapes_cached(shape, scheme, elem, axis, layout):
    d = QuantDesc()
    d.scheme, d.elem, d.axis, d.scale_layout = scheme, elem, axis, layout
    return c_quant_shapes(shape, d)


def quant_shapes_symbolic(shape, desc):
    """quant_shapes in pure Python, for sizes the C library cannot take
    (symbolic ones): the rules of fp8kit_quant_shapes (docs/spec.md 2.3,
    src/format/geometry.h) written again, to be kept in step with them."""
    shape = tuple(shape)
    nd = len(shape)
    if nd > 4:
        raise InvalidShapeError("x has %d dims; fp8kit takes at most 4" % nd)
    if desc.scheme != Scheme.TENSOR and nd < 2:
        raise InvalidShapeError("x has %d dims; the row, block and mx schemes need 2..4 dims" % nd)
    sdt = DType.E8M0 if desc.scheme == Scheme.MX else DType.F32
    if desc.scheme == Scheme.TENSOR:
        return shape, (), sdt
    R, C = shape[-2], shape[-1]
    lay = desc.scale_layout
    q = shape
    if desc.scheme == Scheme.ROW:
        rc = (R, 1)
    elif desc.scheme == Scheme.BLOCK1X128:
        rc = (cdiv(C, 128), rup(R, 4)) if lay == ScaleLayout.MN_MAJOR else (R, cdiv(C, 128))
    elif desc.scheme == Scheme.BLOCK128X128:
        rb = cdiv(R, 128)
        rc = (cdiv(C, 128), rup(rb, 4)) if lay == ScaleLayout.MN_MAJOR else (rb, cdiv(C, 128))
    else:
        blen = C if desc.axis == -1 else R
        if blen % 32:
            raise InvalidShapeError("mx blocks run along axis %d, whose length %s is not a multiple of 32"
                                    % (desc.axis, blen))
        qr, qc = (R, C // 32) if desc.axis == -1 else (C, R // 32)
        if desc.axis == -2:
            q = shape[:-2] + (C, R)
        rc = (rup(qr, 128), rup(qc, 4)) if lay == ScaleLayout.BLOCKED else (qr, qc)
    return q, shape[:-2] + rc, sdt


# ---------------------------------------------------------------------- ops
def quantize(x: Array, scheme: Union[str, Scheme] = "tensor", dtype: DTypeLike = "e4m3", axis: Union[int, str] = -1,
             rounding: Union[str, Rounding] = "floor", pow2: bool = False,
             scale_layout: Union[str, ScaleLayout] = "plain", *, out: Optional[ArrayPair] = None,
             ctx: Optional[Context] = None, stream: Optional[Stream] = None) -> ArrayPair:
    """Quantizes x per docs/spec.md section 2.

    Returns (q, scale): q has x's shape ((..., C, R) for mx axis -2) in the fp8
    format `dtype`; scale holds the dequantization multipliers (float32) or e8m0
    bytes (mx) in the shape fp8kit_quant_shapes gives. numpy in -> numpy out
    (fp8 as TaggedArray); torch in -> torch out with torch's fp8 dtypes.

    Arguments:
      x: float32 / float16 / bfloat16, 1..4 dims (numpy, torch or DLPack).
      scheme: 'tensor', 'row', 'block1x128', 'block128x128' or 'mx' (also
        'tensorwise', 'rowwise', '1x128', '128x128', 'mxfp8', a Scheme).
      dtype: the fp8 format of q: 'e4m3' / 'float8_e4m3fn' or 'e5m2' /
        'float8_e5m2' (or a DType, torch dtype).
      axis: mx only: -1 (blocks along the last dim) or -2 (along the second
        to last; q comes out transposed); torchao's 'dim0' / 'dim1' too.
      rounding: mx scale rounding, 'floor' or 'rceil'.
      pow2: fp32-scale schemes: round each scale up to a power of two.
      scale_layout: 'plain', 'blocked' (mx) or 'mn_major' (block schemes).

    Keyword arguments:
      out: (q, scale) arrays to write into instead of new ones: writable (see
        docs/python.md, "Outputs"), sharing no byte with x or each other.
      ctx: a Context (default: the cached one of x's device).
      stream: a cudaStream_t int or torch stream (default: torch's current
        one for torch CUDA tensors)."""
    fn = "fp8kit.quantize"
    desc = make_quant_desc(scheme, dtype, axis, rounding, pow2, scale_layout)
    xv = as_view(x, "x")
    if xv.dtype not in HP:
        raise UnsupportedError("%s: x has dtype %s; expected float32, float16 or bfloat16" % (fn, xv.dtype.name.lower()))
    qshape, sshape, sdt = quant_shapes(xv.shape, desc)
    dev = device_of([xv], fn)
    c = context_for(dev, ctx, fn)
    if out is None:
        q, qv = empty_like_kind(xv, qshape, DType(desc.elem))
        s, sv = empty_like_kind(xv, sshape, sdt)
    else:
        q, s = out
        qv = check_out(q, "out[0] (q)", qshape, DType(desc.elem), dev, DType(desc.elem), fn)
        sv = check_out(s, "out[1] (scale)", sshape, sdt, dev, sdt, fn)
        check_disjoint(fn, [region("out[0] (q)", qv), region("out[1] (scale)", sv)], [region("x", xv)])
    tx, tq, ts = Tensor(), Tensor(), Tensor()
    xv.fill(tx)
    qv.fill(tq)
    sv.fill(ts)
    st = c._lib.fp8kit_quantize(c.handle, ctypes.byref(desc), ctypes.byref(tx), ctypes.byref(tq),
                                ctypes.byref(ts), stream_for(xv, stream))
    c.check(st)
    return q, s


def dequantize(q: Array, scale: Array, scheme: Union[str, Scheme] = "tensor", axis: Union[int, str] = -1,
               scale_layout: Union[str, ScaleLayout] = "plain", out_dtype: DTypeLike = "float32", *,
               dtype: Optional[DTypeLike] = None, out: Optional[Array] = None, ctx: Optional[Context] = None,
               stream: Optional[Stream] = None) -> Array:
    """Inverse of quantize: y = decode(q) * S rounded to out_dtype, in the
    original (un-transposed) shape of x.

    Arguments:
      q, scale: what quantize returned (q: e4m3 / e5m2 codes).
      scheme, axis, scale_layout: as given to quantize.
      out_dtype: float32, float16 or bfloat16 (any name dtype_of_name takes).

    Keyword arguments:
      dtype: the fp8 format of an untagged uint8 q (default e4m3).
      out: an array to write y into instead of a new one (writable, sharing
        no byte with q or scale).
      ctx: a Context (default: the cached one of q's device).
      stream: a cudaStream_t int or torch stream (default: torch's current
        one for torch CUDA tensors)."""
    fn = "fp8kit.dequantize"
    hint = dtype_of_name(dtype, "dtype") if dtype is not None else DType.E4M3
    qv = as_view(q, "q", hint)
    if qv.dtype not in FP8:
        raise UnsupportedError("%s: q has dtype %s; expected e4m3 or e5m2 codes" % (fn, qv.dtype.name.lower()))
    if dtype is not None and qv.dtype != hint:
        raise InvalidArgumentError("%s: q holds %s codes but dtype=%r was given" % (fn, qv.dtype.name.lower(), dtype))
    desc = make_quant_desc(scheme, qv.dtype, axis, "floor", False, scale_layout)
    sv = as_view(scale, "scale", DType.E8M0)
    ydt = dtype_of_name(out_dtype, "out_dtype")
    if ydt not in HP:
        raise UnsupportedError("%s: out_dtype must be float32, float16 or bfloat16" % fn)
    yshape = tuple(qv.shape)
    if desc.scheme == Scheme.MX and desc.axis == -2 and len(yshape) >= 2:
        yshape = yshape[:-2] + (yshape[-1], yshape[-2])
    want_q, want_s, sdt = quant_shapes(yshape, desc)
    if sv.dtype != sdt:
        raise InvalidArgumentError("%s: scale has dtype %s; this scheme stores %s scales"
                                   % (fn, sv.dtype.name.lower(), sdt.name.lower()))
    dev = device_of([qv, sv], fn)
    c = context_for(dev, ctx, fn)
    if out is None:
        y, yv = empty_like_kind(qv, yshape, ydt)
    else:
        y = out
        yv = check_out(y, "out", yshape, ydt, dev, fn=fn)
        check_disjoint(fn, [region("out", yv)], [region("q", qv), region("scale", sv)])
    tq, ts, ty = Tensor(), Tensor(), Tensor()
    qv.fill(tq)
    sv.fill(ts)
    yv.fill(ty)
    st = c._lib.fp8kit_dequantize(c.handle, ctypes.byref(desc), ctypes.byref(tq), ctypes.byref(ts),
                                  ctypes.byref(ty), stream_for(qv, stream))
    c.check(st)
    return y


def cast(x: Array, dtype: DTypeLike, *, src_dtype: Optional[DTypeLike] = None, out: Optional[Array] = None,
         ctx: Optional[Context] = None, stream: Optional[Stream] = None) -> Array:
    """Element-wise cast without scaling (satfinite RNE) between float32 /
    float16 / bfloat16 and e4m3 / e5m2, either way.

    Arguments:
      x: the array to convert.
      dtype: the result's type (any name dtype_of_name takes).

    Keyword arguments:
      src_dtype: the fp8 format of an untagged uint8 x.
      out: an array to write into instead of a new one (writable, sharing
        no byte with x).
      ctx: a Context (default: the cached one of x's device).
      stream: a cudaStream_t int or torch stream (default: torch's current
        one for torch CUDA tensors)."""
    fn = "fp8kit.cast"
    hint = dtype_of_name(src_dtype, "src_dtype") if src_dtype is not None else None
    xv = as_view(x, "x", hint)
    ydt = dtype_of_name(dtype, "dtype")
    if not ((xv.dtype in HP and ydt in FP8) or (xv.dtype in FP8 and ydt in HP)):
        raise UnsupportedError("%s: casts go between float32/float16/bfloat16 and e4m3/e5m2 (got %s -> %s)"
                               % (fn, xv.dtype.name.lower(), ydt.name.lower()))
    dev = device_of([xv], fn)
    c = context_for(dev, ctx, fn)
    if out is None:
        y, yv = empty_like_kind(xv, tuple(xv.shape), ydt)
    else:
        y = out
        yv = check_out(y, "out", tuple(xv.shape), ydt, dev, ydt, fn)
        check_disjoint(fn, [region("out", yv)], [region("x", xv)])
    tx, ty = Tensor(), Tensor()
    xv.fill(tx)
    yv.fill(ty)
    c.check(c._lib.fp8kit_cast(c.handle, ctypes.byref(tx), ctypes.byref(ty), stream_for(xv, stream)))
    return y


def c_quant_shapes(shape, desc, xdtype=DType.F32):
    """fp8kit_quant_shapes from C (for tests): (q_shape, scale_shape, scale_dtype)."""
    lib = _lib.load()
    tx, tq, ts = Tensor(), Tensor(), Tensor()
    tx.dtype, tx.ndim = int(xdtype), len(shape)
    for i, n in enumerate(shape):
        tx.shape[i] = n
    st = lib.fp8kit_quant_shapes(ctypes.byref(desc), ctypes.byref(tx), ctypes.byref(tq), ctypes.byref(ts))
    if st:
        raise_status(st, _lib.decode(lib.fp8kit_last_error(None)))
    return (tuple(tq.shape[i] for i in range(tq.ndim)), tuple(ts.shape[i] for i in range(ts.ndim)), DType(ts.dtype))
