"""_common.py - what the operation modules (_quant, _gemm, _grouped,
_k_grouped) share, so that none of them imports another: integer helpers,
the fp8kit Tensor struct's fields and byte layout, the GEMM's scale shapes as
the library gives them, the device, context and stream of a call, its outputs
(new ones of the operands' kind, or caller-given ones checked), and the
offsets and status words of the grouped GEMMs.
"""
import ctypes
import functools

import numpy as np

from . import _lib
from ._arrays import as_view, is_torch_tensor, numpy_empty, numpy_view, torch_module
from ._context import get_context
from ._lib import Backend, DType, GemmDesc, OutQuant
from ._outputs import check_writable, numpy_writable, torch_writable
from ._view import ITEMSIZE, View
from .errors import InvalidArgumentError, InvalidShapeError, UnsupportedError

FP8 = (DType.E4M3, DType.E5M2)  # the element types of quantized operands
HP = (DType.F32, DType.F16, DType.BF16)  # the high-precision types


def cdiv(a, b):
    """ceil(a / b) for ints."""
    return -(-a // b)


def rup(a, b):
    """a rounded up to a multiple of b."""
    return cdiv(a, b) * b


def prod(shape):
    """The product of the sizes of shape (1 for ())."""
    n = 1
    for d in shape:
        n *= d
    return n


def numel(v):
    """The element count of a View."""
    return prod(v.shape)


def packed(shape, strides):
    """True when (shape, strides) are packed row-major (size-1 dims ignored)."""
    s = 1
    for n, st in zip(reversed(tuple(shape)), reversed(tuple(strides))):
        if n != 1 and st != s:
            return False
        s *= n
    return True


def check_out_quant(fn, oq, ddt, sdv, return_amax):
    """The output-stage keywords of scaled_mm and grouped_mm (an OutQuant oq, D's dtype ddt, the
    scale_d view sdv or None, return_amax): output quantization needs an fp8 D; OUTQ_SCALED a
    float32 scalar scale_d, which no other stage takes; return_amax OUTQ_SCALED."""
    if oq != OutQuant.NONE and ddt not in FP8:
        raise UnsupportedError("%s: output quantization (%s) needs an e4m3/e5m2 out_dtype" % (fn, oq.name.lower()))
    if oq == OutQuant.SCALED:
        if sdv is None:
            raise InvalidArgumentError("%s: out_quant 'scaled' needs scale_d" % fn)
        if sdv.dtype != DType.F32 or numel(sdv) != 1:
            raise InvalidArgumentError("%s: scale_d must be a float32 scalar" % fn)
    elif sdv is not None:
        raise InvalidArgumentError("%s: scale_d is an input only with out_quant 'scaled'" % fn)
    if return_amax and oq != OutQuant.SCALED:
        raise UnsupportedError("%s: return_amax needs an fp8 output with scale_d" % fn)


def set_tensor(t, ptr, dtype, shape, strides):
    """Writes an fp8kit Tensor struct t (strides in elements)."""
    t.data = ptr
    t.dtype = dtype
    t.ndim = len(shape)
    for i, (n, s) in enumerate(zip(shape, strides)):
        t.shape[i] = n
        t.strides[i] = s


def tensor_layout(t):
    """The layout (see _outputs) of an fp8kit Tensor struct."""
    isz = ITEMSIZE[DType(t.dtype)]
    n = t.ndim
    span = 0
    for i in range(n):
        span += (t.shape[i] - 1) * t.strides[i]
    return (span * isz + isz, tuple(t.shape[i] for i in range(n)), tuple(t.strides[i] * isz for i in range(n)), isz)


@functools.lru_cache(maxsize=4096)
def _gemm_scale_shape_c(mode, layout, operand, rows, k, out_quant):
    """fp8kit_gemm_scale_shape (ints in, cached): (status, message, dtype, (rows, cols))."""
    lib = _lib.load()
    d = GemmDesc()
    d.scale_a = d.scale_b = mode
    d.scale_layout = layout
    d.out_quant = out_quant
    d.out_hp = DType.F32
    dt = _lib._enum_t(0)
    shape = (ctypes.c_int64 * 2)()
    st = lib.fp8kit_gemm_scale_shape(ctypes.byref(d), operand, rows, k, ctypes.byref(dt), shape)
    if st:
        return st, _lib.decode(lib.fp8kit_last_error(None)), None, None
    return 0, "", DType(dt.value), (shape[0], shape[1])


def gemm_scale_shape(mode, layout, operand, rows, k, out_quant=OutQuant.NONE):
    """The scale tensor fp8kit_gemm reads for operand 0 (a: rows M), 1 (b: rows N) or writes for 2 (the
    fused output's scale_d: rows M, k N), as the C library gives it (fp8kit_gemm_scale_shape):
    (status, message, dtype, (rows, cols) of the stored matrix); status 0 when it accepts the case."""
    return _gemm_scale_shape_c(int(mode), int(layout), operand, int(rows), int(k), int(out_quant))


# ------------------------------------------------------------ devices, outputs
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


# ------------------------------------------------------ the grouped GEMMs' words
def status_pointer(status, dev, fn):
    """Pointer of the optional status word (0 when None): one int32 element in the backend's memory, packed
    and writable - a numpy array with CPU operands, a torch tensor on the operands' device (CPU or CUDA).
    fn names the caller in messages."""
    if status is None:
        return 0
    what = "%s: status" % fn
    want = ("%s must be an int32 array of one element on the operands' device (a numpy array or a torch "
            "tensor with CPU operands, a torch tensor on cuda:%d with CUDA ones)" % (what, dev[1]))
    if isinstance(status, np.ndarray):
        if dev[0] != "cpu":
            raise InvalidArgumentError("%s; got a numpy array (host memory, which the kernel does not read)"
                                       % want)
        if status.dtype != np.int32 or status.size != 1 or not status.flags.aligned:
            raise InvalidArgumentError("%s; got %s %s" % (want, status.dtype, status.shape))
        numpy_writable(status, what)
        return status.ctypes.data
    if is_torch_tensor(status):
        torch = torch_module().torch
        if (status.dtype != torch.int32 or status.numel() != 1 or status.device.type != dev[0] or
                (dev[0] == "cuda" and status.device.index != dev[1])):
            raise InvalidArgumentError("%s; got %s %s on %s" % (want, status.dtype, tuple(status.shape),
                                                                status.device))
        torch_writable(status, what)
        return status.data_ptr()
    raise InvalidArgumentError("%s; got a %s" % (want, type(status).__name__))


def group_offsets(offs, groups, dev, fn, name):
    """(pointer, owner) of offs as G contiguous int32 values on the operands' device (dev = (kind, index)):
    host memory for the CPU backend, device memory of the same GPU for the CUDA backend. fn names the
    caller in messages, name the argument."""
    if dev[0] == "cuda":
        if not is_torch_tensor(offs) or offs.device.type != "cuda" or offs.device.index != dev[1]:
            raise InvalidArgumentError("%s: with CUDA operands %s must be an int32 torch tensor on cuda:%d (the "
                                       "kernel reads it; no host copy)" % (fn, name, dev[1]))
    if is_torch_tensor(offs):
        if offs.dtype != torch_module().torch.int32:
            raise InvalidArgumentError("%s: %s must be int32 (got %s)" % (fn, name, offs.dtype))
        if offs.device.type != dev[0]:
            raise UnsupportedError("%s: %s is on %s but the operands are on %s" % (fn, name, offs.device.type, dev[0]))
        offs = offs.contiguous()
        if offs.dim() != 1 or offs.numel() != groups:
            raise InvalidShapeError("%s: %s must hold G = %d values (got shape %s)"
                                    % (fn, name, groups, tuple(offs.shape)))
        return offs.data_ptr(), offs
    arr = np.asarray(offs)
    # an int32 array, or a sequence of Python ints that fit int32
    is_list = not isinstance(offs, np.ndarray)
    if arr.dtype != np.int32 and not (is_list and arr.dtype.kind in "iu"):
        raise InvalidArgumentError("%s: %s must be int32 (got %s)" % (fn, name, arr.dtype))
    if arr.dtype != np.int32 and arr.size and (arr.min() < -2 ** 31 or arr.max() >= 2 ** 31):
        raise InvalidArgumentError("%s: %s holds values outside int32" % (fn, name))
    arr = np.ascontiguousarray(arr, dtype=np.int32)
    if arr.ndim != 1 or arr.size != groups:
        raise InvalidShapeError("%s: %s must hold G = %d values (got shape %s)" % (fn, name, groups, arr.shape))
    return arr.ctypes.data, arr
