"""_grouped.py - grouped_mm: fp8kit_grouped_gemm (mixture-of-experts grouped
GEMM) with torch._scaled_grouped_mm's 2-D x 3-D conventions: a is (T, K)
with its rows grouped by expert, b is the (G, K, N) view of a (G, N, K)
K-contiguous weight stack (w.transpose(-2, -1)), offs holds the G cumulative
row ends as int32. layout="masked" (DeepGEMM's decode layout) takes a as
(G, M, K) slabs instead, offs as the G valid-row counts, and writes (G, M, N).
Scales: tensor / row (counts, as before) or block (a's 1x128 scales and each
expert's 128x128 ones, in the shapes fp8kit.quantize gives; chosen by a 3-D
scale_b). CPU backend: numpy arrays, torch CPU tensors, offs on the
host (checked before anything runs). CUDA backend: torch CUDA tensors with
offs an int32 CUDA tensor on the same device, read by the kernel (no host
sync, graph-capturable); invalid offs leave out unwritten, and the optional
`status` (an int32 CUDA tensor of one element) receives 0 or
FP8KIT_ERR_INVALID_ARGUMENT (2). No hot path yet: each call builds its structs.
"""
import ctypes
from typing import Optional

import numpy as np

from ._arrays import as_view, dtype_of_name, is_torch_tensor
from ._context import Context
from ._gemm import _numel, activation_of
from ._lib import BiasMode, DType, GemmDesc, ScaleMode, Tensor
from ._outputs import check_disjoint, flat_layout, region, torch_writable
from ._quant import FP8, HP, check_out, context_for, device_of, empty_like_kind, stream_for
from ._typing import Array, DTypeLike, Stream
from .errors import InvalidArgumentError, InvalidShapeError, InvalidStrideError, UnsupportedError

FN = "fp8kit.grouped_mm"
LAYOUTS = {"contiguous": 0, "masked": 1}  # fp8kit_grouped_layout


class GroupedGemmArgs(ctypes.Structure):
    """fp8kit_grouped_gemm_args."""
    _fields_ = [
        ("a", Tensor),
        ("b", Tensor),
        ("offsets", ctypes.c_void_p),
        ("scale_a", Tensor),
        ("scale_b", Tensor),
        ("alpha", ctypes.c_float),
        ("bias", Tensor),
        ("d", Tensor),
        ("status", ctypes.c_void_p),
        ("layout", ctypes.c_int),
    ]


def _status_ptr(status, dev, fn=FN):
    """Device pointer of the optional status word (0 when None): a contiguous int32 torch tensor of one
    element on the operands' device, writable. fn names the caller in messages."""
    if status is None:
        return 0
    import torch
    if (not is_torch_tensor(status) or status.dtype != torch.int32 or status.numel() != 1 or
            status.device.type != dev[0] or not status.is_contiguous()):
        raise InvalidArgumentError("%s: status must be a contiguous int32 torch tensor of one element on the "
                                   "operands' device" % fn)
    torch_writable(status, "%s: status" % fn)
    return status.data_ptr()


def _offsets(offs, groups, dev, fn=FN, name="offs"):
    """(pointer, owner) of offs as G contiguous int32 values on the operands' device (dev = (kind, index)):
    host memory for the CPU backend, device memory of the same GPU for the CUDA backend. fn names the
    caller in messages, name the argument."""
    if dev[0] == "cuda":
        import torch
        if not is_torch_tensor(offs) or offs.device.type != "cuda" or offs.device.index != dev[1]:
            raise InvalidArgumentError("%s: with CUDA operands %s must be an int32 torch tensor on cuda:%d (the "
                                       "kernel reads it; no host copy)" % (fn, name, dev[1]))
    if is_torch_tensor(offs):
        import torch
        if offs.dtype != torch.int32:
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


def _scale_mode(v, n_tensor, n_row, name):
    if v is None:
        return ScaleMode.NONE
    if v.dtype != DType.F32:
        raise InvalidArgumentError("%s: %s must be float32 (got %s)" % (FN, name, v.dtype.name.lower()))
    n = _numel(v)
    if n == n_tensor:
        return ScaleMode.TENSOR
    if n == n_row:
        return ScaleMode.ROW
    raise InvalidShapeError("%s: %s holds %d values; expected %d (tensor) or %d (row)" % (FN, name, n, n_tensor, n_row))


def _cdiv(a, b):
    return -(-a // b)


def _block_scale(v, want, name, what):
    """Checks a block scale view: float32, exactly the shape `want`, plain row-major contiguous."""
    if v.dtype != DType.F32:
        raise InvalidArgumentError("%s: %s must be float32 (got %s)" % (FN, name, v.dtype.name.lower()))
    if tuple(v.shape) != tuple(want):
        raise InvalidShapeError("%s: block scaling (chosen by a 3-D scale_b) needs %s as %s %s; got shape %s"
                                % (FN, name, what, tuple(want), tuple(v.shape)))
    stride, expect = 1, []
    for n in reversed(want):
        expect.append(stride)
        stride *= n
    if tuple(v.strides) != tuple(reversed(expect)):
        raise InvalidStrideError("%s: block scales need the plain row-major contiguous layout (%s has strides %s)"
                                 % (FN, name, tuple(v.strides)))


def _scale_modes(sav, sbv, a_shape, G, N, K):
    """(mode of scale_a, mode of scale_b). A 3-D scale_b means block scaling (then scale_a must be the 1x128
    scales of a, a_shape[:-1] + (ceil(K/128),), and scale_b each expert's 128x128 ones, (G, ceil(N/128),
    ceil(K/128))): decided by ndim, never by counts, since for K <= 128 a (T, 1) 1x128 scale has a row scale's
    count. Else tensor / row by count, as before: scale_a 1 or T values (T = every row of a), scale_b G or G x N."""
    T = 1
    for n in a_shape[:-1]:
        T *= n
    if sbv is not None and len(sbv.shape) == 3:
        kb, nb = _cdiv(K, 128), _cdiv(N, 128)
        if sav is None:
            raise InvalidShapeError("%s: a 3-D scale_b means block scaling (G, ceil(N/128), ceil(K/128)); it needs "
                                    "scale_a as the 1x128 scales of a, shape %s" % (FN, tuple(a_shape[:-1]) + (kb,)))
        _block_scale(sbv, (G, nb, kb), "scale_b", "each expert's 128x128 scales (G, ceil(N/128), ceil(K/128)) =")
        _block_scale(sav, tuple(a_shape[:-1]) + (kb,), "scale_a",
                     "the 1x128 scales of every row of a (%s, ceil(K/128)) =" % ("G, M" if len(a_shape) == 3 else "T"))
        return ScaleMode.BLOCK, ScaleMode.BLOCK
    try:
        return _scale_mode(sav, 1, T, "scale_a"), _scale_mode(sbv, G, G * N, "scale_b")
    except InvalidShapeError as e:
        if sav is not None and len(sav.shape) == len(a_shape) and len(sav.shape) >= 2 and sav.shape[-1] > 1:
            raise InvalidShapeError("%s (block scaling is chosen by a 3-D scale_b, (G, ceil(N/128), ceil(K/128)))"
                                    % e.message) from None
        raise


def grouped_mm(a: Array, b: Array, offs: Array, scale_a: Optional[Array] = None, scale_b: Optional[Array] = None,
               bias: Optional[Array] = None, out_dtype: Optional[DTypeLike] = None, *,
               activation: Optional[str] = None, alpha: float = 1.0, out: Optional[Array] = None,
               ctx: Optional[Context] = None, stream: Optional[Stream] = None, status: Optional[Array] = None,
               layout: str = "contiguous") -> Array:
    """D[rows of group g] = act(alpha * deq(a[rows]) @ deq(b[g]) + bias[g]) for the G groups of rows that
    offs delimits.

    layout="contiguous" (default; torch._scaled_grouped_mm's 2-D x 3-D case): a is (T, K), group g owns rows
    offs[g-1] <= row < offs[g] (offs[-1] = 0), D is (T, N), rows past offs[G-1] are not written.
    layout="masked" (the decode layout, DeepGEMM's "masked"): a is (G, M, K), expert g's rows are
    a[g, :offs[g]] (offs = the G valid-row counts, 0 <= offs[g] <= M), D is (G, M, N), D[g, offs[g]:] is not
    written. Below, T is the number of rows of a: T, or G x M when masked.

    Arguments:
      a: (T, K), or (G, M, K) when masked (its expert stride M times its row stride), e4m3 / e5m2.
      b: (G, K, N) with K contiguous (the transposed view of a (G, N, K) weight stack, as
        torch._scaled_grouped_mm takes it).
      offs: the G cumulative row ends (masked: the G valid-row counts), int32 (CPU: on the host, checked
        before anything runs; CUDA: an int32 CUDA tensor on the operands' device, checked by the kernel:
        invalid offs write nothing).
      scale_a, scale_b: float32; the scale mode follows from their shapes:
        - block (scale_b 3-D): scale_a the 1x128 scales of every row of a, a.shape[:-1] + (ceil(K/128),)
          ((T, ceil(K/128)) or (G, M, ceil(K/128))), scale_b each expert's 128x128 scales
          (G, ceil(N/128), ceil(K/128)) - the shapes fp8kit.quantize gives for scheme "1x128" on a and
          "128x128" on the (G, N, K) weight stack; plain row-major contiguous layout only.
        - else by count: scale_a a scalar (tensor) or T values ((T,) / (T, 1); masked (G, M) / (G, M, 1)),
          scale_b (G,) per expert or (G, N) per expert and column.
      bias: (G, N).
      out_dtype: bfloat16 / float16 / float32 (default bfloat16 for torch, float32 for numpy).

    Keyword arguments:
      activation: None, an Activation or a name the C library accepts, as scaled_mm's.
      alpha: the multiplier of the accumulator.
      out: a (T, N) array ((G, M, N) when masked) to write D into instead of a new one (writable, sharing
        no byte with an input or status).
      ctx: a Context (default: the cached one of the operands' device).
      stream: a cudaStream_t int or torch stream (default: torch's current one).
      status: optional int32 tensor of one element on the operands' device that receives 0 or 2
        (invalid offs); writable, sharing no byte with out or an input.
      layout: "contiguous" or "masked" (see above)."""
    lay = LAYOUTS.get(layout.lower()) if isinstance(layout, str) else None
    if lay is None:
        raise InvalidArgumentError("%s: layout must be 'contiguous' or 'masked' (got %r)" % (FN, layout))
    masked = lay == LAYOUTS["masked"]
    av, bv = as_view(a, "a"), as_view(b, "b")
    if av.dtype not in FP8 or bv.dtype not in FP8:
        raise UnsupportedError("%s: a and b must hold e4m3 or e5m2 codes (got %s and %s)"
                               % (FN, av.dtype.name.lower(), bv.dtype.name.lower()))
    if masked:
        if len(av.shape) != 3 or len(bv.shape) != 3:
            raise InvalidShapeError("%s: layout='masked' needs a 3-D (G, M, K) and b 3-D (G, K, N) (got %d and %d "
                                    "dims)" % (FN, len(av.shape), len(bv.shape)))
        G, M, K = av.shape
        rows = (G, M)
    else:
        if len(av.shape) != 2 or len(bv.shape) != 3:
            raise InvalidShapeError("%s: a must be 2-D (T, K) and b 3-D (G, K, N) (got %d and %d dims)"
                                    % (FN, len(av.shape), len(bv.shape)))
        T, K = av.shape
        rows = (T,)
    G, K2, N = bv.shape
    if K2 != K or (masked and av.shape[0] != G):
        raise InvalidShapeError("%s: a is %s but b is %d x %d x %d (b is G x K x N, a %s)"
                                % (FN, " x ".join(str(n) for n in av.shape), G, K2, N,
                                   "G x M x K" if masked else "T x K"))
    if K > 1 and N > 1 and bv.strides[1] != 1:
        raise InvalidStrideError("%s: b must be K-contiguous, the (G, K, N) view w.transpose(-2, -1) of a "
                                 "(G, N, K) weight stack (b strides are %s)" % (FN, tuple(bv.strides)))
    sav = as_view(scale_a, "scale_a") if scale_a is not None else None
    sbv = as_view(scale_b, "scale_b") if scale_b is not None else None
    biasv = as_view(bias, "bias") if bias is not None else None
    dev = device_of([av, bv, sav, sbv, biasv], FN)
    cx = context_for(dev, ctx, FN)
    desc = GemmDesc()
    desc.scale_a, desc.scale_b = _scale_modes(sav, sbv, tuple(av.shape), G, N, K)  # block: plain layout (0)
    desc.act = activation_of(activation)
    if biasv is not None:
        if biasv.dtype not in HP:
            raise InvalidArgumentError("%s: bias must be float32, float16 or bfloat16" % FN)
        desc.bias = BiasMode.COL
    if out_dtype is None:
        ddt = DType.BF16 if av.kind == "torch" or av.device == "cuda" else DType.F32
    else:
        ddt = dtype_of_name(out_dtype, "out_dtype")
    if ddt not in HP:
        raise UnsupportedError("%s: out_dtype must be float32, float16 or bfloat16 (got %s)" % (FN, ddt.name.lower()))
    optr, owner = _offsets(offs, G, dev)
    sptr = _status_ptr(status, dev)
    if out is None:
        d, dv = empty_like_kind(av, rows + (N,), ddt)
    else:
        dv = check_out(out, "out", rows + (N,), ddt, dev, fn=FN)
        d = out
    if out is not None or sptr:  # what the caller gives to be written shares no byte with the rest
        check_disjoint(FN, [region("out", dv) if out is not None else None,
                            ("status", sptr, flat_layout(4, 4)) if sptr else None],
                       [region("a", av), region("b", bv), region("scale_a", sav), region("scale_b", sbv),
                        region("bias", biasv), ("offs", optr, flat_layout(4 * G, 4))])
    args = GroupedGemmArgs()
    av.fill(args.a)
    # b as the library's (G, N, K): swap the last two dims of the (G, K, N) view
    bv.fill(args.b)
    args.b.shape[1], args.b.shape[2] = N, K
    ldb = bv.strides[2] if N > 1 else K
    args.b.strides[0], args.b.strides[1], args.b.strides[2] = (bv.strides[0] if G > 1 else N * ldb), ldb, 1
    args.offsets = optr
    args.layout = lay
    args.status = sptr or None
    if sav is not None:  # tensor / row: any shape, the library checks the count and contiguity; block: checked above
        sav.fill(args.scale_a)
    if sbv is not None:
        sbv.fill(args.scale_b)
    if biasv is not None:
        biasv.fill(args.bias)
    args.alpha = float(alpha)
    dv.fill(args.d)
    fn = getattr(cx._lib, "fp8kit_grouped_gemm", None)
    if fn is None:
        raise UnsupportedError("%s: this libfp8kit has no fp8kit_grouped_gemm (rebuild it)" % FN)
    st = fn(cx.handle, ctypes.byref(desc), ctypes.byref(args), stream_for(av, stream))
    cx.check(st)
    del owner
    return d
