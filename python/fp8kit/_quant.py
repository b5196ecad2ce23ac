"""_quant.py - quantize, dequantize and cast for numpy arrays, torch tensors
and DLPack objects, plus quant_shapes (the C library's fp8kit_quant_shapes,
which the torch fake (meta) kernels also use; symbolic sizes go through the
same rules written in Python). Names of options follow docs/spec.md section 2.
"""
import ctypes
import functools
from typing import Optional, Union

from . import _lib
from ._arrays import View, as_view, dtype_of_name, torch_module
from ._lib import Backend, DType, QuantDesc, Rounding, ScaleLayout, Scheme, Tensor
from ._context import Context, get_context
from ._outputs import check_disjoint, check_writable, region
from ._typing import Array, ArrayPair, DTypeLike, Stream
from .errors import InvalidArgumentError, InvalidShapeError, UnsupportedError

SCHEMES = {
    "tensor": Scheme.TENSOR, "tensorwise": Scheme.TENSOR, "per_tensor": Scheme.TENSOR,
    "row": Scheme.ROW, "rowwise": Scheme.ROW, "per_row": Scheme.ROW,
    "block1x128": Scheme.BLOCK1X128, "1x128": Scheme.BLOCK1X128,
    "block128x128": Scheme.BLOCK128X128, "128x128": Scheme.BLOCK128X128,
    "mx": Scheme.MX, "mxfp8": Scheme.MX,
}
ROUNDINGS = {"floor": Rounding.FLOOR, "rceil": Rounding.RCEIL}
LAYOUTS = {"plain": ScaleLayout.PLAIN, "blocked": ScaleLayout.BLOCKED, "swizzled": ScaleLayout.BLOCKED,
           "mn_major": ScaleLayout.MN_MAJOR}
FP8 = (DType.E4M3, DType.E5M2)
HP = (DType.F32, DType.F16, DType.BF16)


def _enum(table, value, what, enum_type):
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str) and value.lower() in table:
        return table[value.lower()]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_type(value)
        except ValueError:
            pass
    raise InvalidArgumentError("%s %r is not one of %s" % (what, value, ", ".join(sorted(table))))


def make_quant_desc(scheme="tensor", dtype="e4m3", axis=-1, rounding="floor", pow2=False, scale_layout="plain"):
    """Validated QuantDesc (the checks of fp8kit_quantize on the descriptor)."""
    d = QuantDesc()
    d.scheme = _enum(SCHEMES, scheme, "scheme", Scheme)
    elem = dtype_of_name(dtype, "dtype")
    if elem not in FP8:
        raise UnsupportedError("quantized elements must be e4m3 or e5m2, not %s" % elem.name.lower())
    d.elem = elem
    if axis in ("dim0", "dim1"):  # torchao's names
        axis = -1 if axis == "dim0" else -2
    if axis not in (-1, -2):
        raise InvalidArgumentError("axis %r must be -1 (last dim) or -2 (second to last)" % (axis,))
    d.axis = axis
    d.rounding = _enum(ROUNDINGS, rounding, "rounding", Rounding)
    d.pow2 = 1 if pow2 else 0
    d.scale_layout = _enum(LAYOUTS, scale_layout, "scale_layout", ScaleLayout)
    if axis == -2 and d.scheme != Scheme.MX:
        raise UnsupportedError("axis -2 is only supported by the mx scheme")
    if d.scale_layout == ScaleLayout.BLOCKED and d.scheme != Scheme.MX:
        raise UnsupportedError("the blocked scale layout is only defined for the mx scheme")
    if d.scale_layout == ScaleLayout.MN_MAJOR and d.scheme not in (Scheme.BLOCK1X128, Scheme.BLOCK128X128):
        raise UnsupportedError("the mn_major scale layout is only defined for the block1x128 and block128x128 schemes")
    return d


def _cdiv(a, b):
    return -(-a // b)


def _rup(a, b):
    return _cdiv(a, b) * b


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
        rc = (_cdiv(C, 128), _rup(R, 4)) if lay == ScaleLayout.MN_MAJOR else (R, _cdiv(C, 128))
    elif desc.scheme == Scheme.BLOCK128X128:
        rb = _cdiv(R, 128)
        rc = (_cdiv(C, 128), _rup(rb, 4)) if lay == ScaleLayout.MN_MAJOR else (rb, _cdiv(C, 128))
    else:
        blen = C if desc.axis == -1 else R
        if blen % 32:
            raise InvalidShapeError("mx blocks run along axis %d, whose length %s is not a multiple of 32"
                                    % (desc.axis, blen))
        qr, qc = (R, C // 32) if desc.axis == -1 else (C, R // 32)
        if desc.axis == -2:
            q = shape[:-2] + (C, R)
        rc = (_rup(qr, 128), _rup(qc, 4)) if lay == ScaleLayout.BLOCKED else (qr, qc)
    return q, shape[:-2] + rc, sdt


# ------------------------------------------------------------- dispatch helpers
def device_of(views, fn):
    """(device, index) shared by all views; mixing devices is an error."""
    dev = None
    for v in views:
        if v is None:
            continue
        d = (v.device, v.index if v.device == "cuda" else 0)
        if dev is None:
            dev = d
        elif d != dev:
            raise UnsupportedError("%s: operands live on different devices (%s:%d and %s:%d)"
                                   % (fn, dev[0], dev[1], d[0], d[1]))
    return dev


def context_for(dev, ctx, fn):
    """The context that runs on `dev` (ctx if given and matching)."""
    want = Backend.CUDA if dev[0] == "cuda" else Backend.CPU
    if ctx is None:
        return get_context(want, dev[1])
    if ctx.backend != want or (want == Backend.CUDA and ctx.device != dev[1]):
        raise UnsupportedError("%s: the context runs on %s device %d but the operands are on %s:%d"
                               % (fn, ctx.backend.name.lower(), ctx.device, dev[0], dev[1]))
    return ctx


def stream_for(view, stream):
    """The stream a call on `view`'s device uses: `stream` if given (an int
    cudaStream_t, or an object with .cuda_stream), else torch's current stream
    for torch CUDA tensors, else the default stream (None)."""
    if view.device != "cuda":
        return None
    if stream is not None:
        return getattr(stream, "cuda_stream", stream)
    if view.kind == "torch":
        return torch_module().current_stream(view.index)
    return None


def _contiguous_strides(shape):
    out, s = [], 1
    for n in reversed(tuple(shape)):
        out.append(s)
        s *= n
    return tuple(reversed(out))


def empty_like_kind(view, shape, dt):
    """An output array of `shape` and fp8kit dtype `dt` of the same kind and
    device as `view`; returns (array, View)."""
    if view.kind == "torch" or view.device == "cuda":
        tm = torch_module()
        arr = tm.empty(shape, dt, view.index if view.device == "cuda" else None)
        return arr, View(arr.data_ptr(), dt, tuple(shape), _contiguous_strides(shape), view.device,
                         view.index, arr, "torch")
    from ._arrays import numpy_empty, numpy_view
    arr = numpy_empty(shape, dt)
    return arr, numpy_view(arr, "out")


def check_out(out, name, shape, dt, dev, fp8_default=None, fn=None):
    """View of a caller-given output, checked for being writable (see
    _outputs), shape, dtype and device. Overlap with the call's other arrays
    is the caller's check (check_disjoint), once it has all their views."""
    v = as_view(out, name, fp8_default)
    check_writable(out, v, name, fn)
    if tuple(v.shape) != tuple(shape):
        raise InvalidShapeError("%s has shape %s; expected %s" % (name, tuple(v.shape), tuple(shape)))
    if v.dtype != dt:
        raise InvalidArgumentError("%s has dtype %s; expected %s" % (name, v.dtype.name.lower(), dt.name.lower()))
    if (v.device, v.index if v.device == "cuda" else 0) != dev:
        raise UnsupportedError("%s is on %s:%d; the inputs are on %s:%d" % (name, v.device, v.index, dev[0], dev[1]))
    return v


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
        from .errors import raise_status
        raise_status(st, _lib.decode(lib.fp8kit_last_error(None)))
    return (tuple(tq.shape[i] for i in range(tq.ndim)), tuple(ts.shape[i] for i in range(ts.ndim)), DType(ts.dtype))
