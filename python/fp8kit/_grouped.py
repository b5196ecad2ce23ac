"""_grouped.py - grouped_mm: fp8kit_grouped_gemm (mixture-of-experts grouped
GEMM) with torch._scaled_grouped_mm's 2-D x 3-D conventions: a is (T, K)
with its rows grouped by expert, b is the (G, K, N) view of a (G, N, K)
K-contiguous weight stack (w.transpose(-2, -1)), offs holds the G cumulative
row ends as int32. layout="masked" (DeepGEMM's decode layout) takes a as
(G, M, K) slabs instead, offs as the G valid-row counts, and writes (G, M, N).
Scales: tensor / row (counts, as before), block (a's 1x128 scales and each
expert's 128x128 ones, in the shapes fp8kit.quantize gives; chosen by a 3-D
float32 scale_b; a's also in DeepGEMM's mn_major layout: the padded buffer,
(ceil(K/128), 4*ceil(T/4)) or masked (G, ceil(K/128), 4*ceil(M/4)), or its
strided view in the plain shape as get_mn_major_tma_aligned_tensor returns
it; scale_layout= settles the ambiguous shapes) or mx (e8m0 scales, or uint8
as the dense scaled_mm reads them: a's per 32 of K and each expert's
(N, K/32), fp8kit.quantize's "mx" shapes; chosen by the scales' dtype). The
call gets the workspace the library asks for
(fp8kit_grouped_gemm_workspace_size: 0 on the CPU, the normalized MX copies
on the GPU), allocated per call unless `workspace=` gives one.
Output stage (desc.out_quant; the C call's scale_d / amax_d; both backends):
scale_d / return_amax / out_quant / out_hp / out_rounding / out_pow2
as scaled_mm takes them and with its return convention: an e4m3 / e5m2 D with
out_quant 'scaled' (D = fp8(y / scale_d), amax = max |y| over the rows the
groups own), or 'mx' / 'block1x128' returning (d, scales), the scales of every
row of D in D's leading dims ((T, cols), masked (G, M, cols)).
CPU backend: numpy arrays, torch CPU tensors, offs on the
host (checked before anything runs). CUDA backend: torch CUDA tensors with
offs an int32 CUDA tensor on the same device, read by the kernel (no host
sync, graph-capturable); invalid offs leave out unwritten, and the optional
`status` (an int32 CUDA tensor of one element) receives 0 or
FP8KIT_ERR_INVALID_ARGUMENT (2). Hot path (_hot.py): plain torch tensors of an
earlier call's signatures and options (ctx and mx / block1x128 output
quantization included), without stream / status / workspace / scale_d / amax.
"""
import ctypes
import threading
from typing import Any, Dict, Optional, Tuple, Union

from ._arrays import as_view, torch_module
from ._common import (FP8, HP, cdiv, check_out, check_out_quant, context_for, device_of, empty_like_kind,
                      gemm_scale_shape, group_offsets, numel, packed, prod, rup, set_tensor, status_pointer,
                      stream_for, tensor_layout)
from . import _hot as _hotpath
from ._context import Context, on_clear
from ._lib import (Activation, Backend, BiasMode, DType, GemmDesc, GroupedLayout, OutQuant, Rounding, ScaleLayout,
                   ScaleMode, Status, Tensor)
from ._names import GROUPED_LAYOUTS, OUT_QUANTS, ROUNDINGS, SCALE_LAYOUTS, activation_of, dtype_of_name, enum_of
from ._outputs import check_disjoint, check_writable, flat_layout, layout as view_layout, region
from ._typing import Array, DTypeLike, Stream
from ._view import ITEMSIZE
from .errors import InvalidArgumentError, InvalidShapeError, InvalidStrideError, UnsupportedError, raise_status

FN = "fp8kit.grouped_mm"


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
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("scale_d", Tensor),
        ("amax_d", ctypes.c_void_p),
    ]


def _scale_mode(v, n_tensor, n_row, name):
    if v is None:
        return ScaleMode.NONE
    if v.dtype != DType.F32:
        raise InvalidArgumentError("%s: %s must be float32, or e8m0 for mx scaling (got %s)"
                                   % (FN, name, v.dtype.name.lower()))
    n = numel(v)
    if n == n_tensor:
        return ScaleMode.TENSOR
    if n == n_row:
        return ScaleMode.ROW
    raise InvalidShapeError("%s: %s holds %d values; expected %d (tensor) or %d (row)" % (FN, name, n, n_tensor, n_row))


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


def _a_block_layouts(a_shape, K):
    """A's 1x128 scale layouts for an a of a_shape: (the plain shape, the shape of the mn_major buffer, the
    strides of DeepGEMM's view of that buffer in the plain shape). Contiguous (T, K): (T, ka), (ka, Tp),
    (1, Tp); masked (G, M, K): (G, M, ka), (G, ka, Mp), (ka*Mp, 1, Mp); ka = ceil(K/128), Tp and Mp the
    rows rounded up to a multiple of 4."""
    ka, rows = cdiv(K, 128), a_shape[-2]
    rp = rup(rows, 4)
    if len(a_shape) == 3:
        return (a_shape[0], rows, ka), (a_shape[0], ka, rp), (ka * rp, 1, rp)
    return (rows, ka), (ka, rp), (1, rp)


def _has_strides(v, strides):
    """True when v's strides are `strides` on every dim of more than one element."""
    return all(n == 1 or s == w for n, s, w in zip(v.shape, v.strides, strides))


def _block_scale_a(v, a_shape, K, layout):
    """Checks A's 1x128 block scales; returns (their layout, the element count of the flat buffer the library
    reads). layout: the caller's scale_layout (None: inferred, as scaled_mm does: the plain shape packed is
    plain, the plain shape strided is the mn_major view, the buffer's shape is the buffer). Where the plain
    shape is also the buffer's (rows == ka, a multiple of 4), a packed array is plain unless layout says
    mn_major, and then it is the buffer itself."""
    plain, buf, view = _a_block_layouts(a_shape, K)
    masked = len(a_shape) == 3
    if v.dtype != DType.F32:
        raise InvalidArgumentError("%s: scale_a must be float32 (got %s)" % (FN, v.dtype.name.lower()))
    shp, dense = tuple(v.shape), packed(v.shape, v.strides)
    rows = "G, M" if masked else "T"
    what = ("the buffer (G, ceil(K/128), 4*ceil(M/4)) = %s, packed, or its (G, M, ceil(K/128)) view with strides "
            "(ceil(K/128)*4*ceil(M/4), 1, 4*ceil(M/4)) = %s" if masked else
            "the buffer (ceil(K/128), 4*ceil(T/4)) = %s, packed, or its (T, ceil(K/128)) view with strides "
            "(1, 4*ceil(T/4)) = %s") % (buf, view)
    if layout is None:
        if shp not in (plain, buf):
            raise InvalidShapeError("%s: block scaling (chosen by a 3-D scale_b) needs scale_a as the 1x128 scales "
                                    "of every row of a, plain (%s, ceil(K/128)) = %s, or in the mn_major layout %s; "
                                    "got shape %s" % (FN, rows, plain, what, shp))
        layout = ScaleLayout.PLAIN if shp == plain and dense else ScaleLayout.MN_MAJOR
    if layout == ScaleLayout.PLAIN:
        _block_scale(v, plain, "scale_a", "the 1x128 scales of every row of a (%s, ceil(K/128)) =" % rows)
        return ScaleLayout.PLAIN, prod(plain)
    if shp == buf and dense:  # the buffer itself
        return ScaleLayout.MN_MAJOR, prod(buf)
    if shp == plain and _has_strides(v, view):  # DeepGEMM's view of the buffer, at its start
        return ScaleLayout.MN_MAJOR, prod(buf)
    if shp in (plain, buf):
        raise InvalidStrideError("%s: scale_a (shape %s, strides %s) is neither the plain layout (packed row-major) "
                                 "nor the mn_major one of 1x128 block scales: %s (not a transposed copy)"
                                 % (FN, shp, tuple(v.strides), what))
    raise InvalidShapeError("%s: mn_major 1x128 block scaling needs scale_a as %s; got shape %s" % (FN, what, shp))


def _mx_blocked_count(op, rows, K):
    """Elements of the blocked (swizzled) mx layout fp8kit.quantize(..., scale_layout="blocked") writes for
    `rows` rows (op 0: a, 1: b), or None."""
    st, _, _, shp = gemm_scale_shape(ScaleMode.MX, ScaleLayout.BLOCKED, op, rows, K)
    return None if st else shp[0] * shp[1]


def _mx_scales(sav, sbv, a_shape, G, N, K):
    """Checks mx (e8m0) scales (the library then reads them as the packed grids). scale_a: a_shape[:-1] +
    (K/32,) packed row-major (T x K/32, masked G x M x K/32); scale_b: (G, N, K/32), fp8kit.quantize(w, "mx")
    of the (G, N, K) stack, packed, or its (G, K/32, N) transposed view (as b is the (G, K, N) view of the
    stack; a transposed copy is refused). The blocked (swizzled) layout is refused (UnsupportedError: the
    grouped GEMM reads the plain one only), told from its padded element count where that is not the plain
    one's (where they are equal the scales are read as plain, as scaled_mm does)."""
    if sav is None or sbv is None or sav.dtype != DType.E8M0 or sbv.dtype != DType.E8M0:
        raise UnsupportedError("%s: mx scaling must be used on both a and b: e8m0 scales for both (got %s and %s)"
                               % (FN, *("none" if v is None else v.dtype.name.lower() for v in (sav, sbv))))
    if K % 32:
        raise InvalidShapeError("%s: mx scaling needs K %% 32 == 0 (K = %d)" % (FN, K))
    kb = K // 32
    masked = len(a_shape) == 3
    want_a, want_b = tuple(a_shape[:-1]) + (kb,), (G, N, kb)
    blocked_a = _mx_blocked_count(0, a_shape[-2], K)
    blocked_b = _mx_blocked_count(1, N, K)
    if blocked_a is not None and masked:
        blocked_a *= G  # quantize's blocked scales of a (G, M, K) stack: each slab's own
    if blocked_b is not None:
        blocked_b *= G
    for v, want, blocked, name in ((sav, want_a, blocked_a, "scale_a"), (sbv, want_b, blocked_b, "scale_b")):
        n = numel(v)
        if tuple(v.shape) != want and n == blocked and n != prod(want):
            raise UnsupportedError("%s: %s (shape %s) holds the blocked (swizzled) mx scale layout; the grouped "
                                   "GEMM reads mx scales in the plain layout only (fp8kit.quantize(..., 'mx') with "
                                   "scale_layout='plain', the default): %s %s" % (FN, name, tuple(v.shape), name,
                                                                                 want))
    what_a = "(%s, K/32)" % ("G, M" if masked else "T")
    if tuple(sav.shape) != want_a:
        raise InvalidShapeError("%s: mx scaling needs scale_a as the e8m0 scales of every row of a per 32 of K, "
                                "%s = %s; got shape %s" % (FN, what_a, want_a, tuple(sav.shape)))
    if not packed(sav.shape, sav.strides):
        raise InvalidStrideError("%s: mx scale_a %s must be packed row-major (strides %s)"
                                 % (FN, want_a, tuple(sav.strides)))
    shp, st = tuple(sbv.shape), tuple(sbv.strides)
    if shp == want_b and packed(shp, st):
        return
    if shp == (G, kb, N) and packed((G, N, kb), (st[0], st[2], st[1])):  # the transposed view of the grid
        return
    if shp in (want_b, (G, kb, N)):
        raise InvalidStrideError("%s: mx scale_b must be each expert's packed (N, K/32) grid, (G, N, K/32) = %s as "
                                 "fp8kit.quantize(w, 'mx') returns it for the (G, N, K) weight stack, or its "
                                 "transposed view (G, K/32, N); not a transposed copy (shape %s, strides %s)"
                                 % (FN, want_b, shp, st))
    raise InvalidShapeError("%s: mx scaling needs scale_b as each expert's e8m0 (N, K/32) scales, (G, N, K/32) = "
                            "%s; got shape %s" % (FN, want_b, shp))


def _scale_layout_of(scale_layout):
    """The caller's scale_layout= as a ScaleLayout (None: infer)."""
    if scale_layout is None:
        return None
    return enum_of(SCALE_LAYOUTS, scale_layout, FN + ": scale_layout", ScaleLayout)


def _check_layout_fits(layout, kind):
    """Refuses (UnsupportedError) a scale_layout= that the scaling `kind` ("mx", "block" or "tensor / row")
    has not got in the grouped GEMM: blocked is mx's swizzled layout, which the grouped GEMM does not read;
    mn_major is a layout of block scaling (A's 1x128 scales)."""
    if layout is None or layout == ScaleLayout.PLAIN:
        return
    if layout == ScaleLayout.BLOCKED and kind == "mx":
        raise UnsupportedError("%s: scale_layout='blocked': the grouped GEMM reads mx scales in the plain layout "
                               "only (fp8kit.quantize(..., 'mx') with scale_layout='plain', the default)" % FN)
    if layout == ScaleLayout.BLOCKED:
        raise UnsupportedError("%s: scale_layout='blocked' is only defined for mx scaling; these are %s scales%s"
                               % (FN, kind, " (plain, or A's mn_major)" if kind == "block" else ""))
    if kind != "block":
        raise UnsupportedError("%s: scale_layout='mn_major' is only defined for block scaling (A's 1x128 scales "
                               "with a 3-D float32 scale_b); these are %s scales" % (FN, kind))


def _scale_modes(sav, sbv, a_shape, G, N, K, scale_layout=None):
    """(mode of scale_a, mode of scale_b, scale layout, element count of scale_a's flat buffer when it is
    mn_major, else None). e8m0 scales (either of them) mean mx scaling (see _mx_scales).
    A 3-D float32 scale_b means block scaling (then scale_a must be the 1x128
    scales of a, plain a_shape[:-1] + (ceil(K/128),) or mn_major (see _block_scale_a), and scale_b each
    expert's 128x128 ones, (G, ceil(N/128), ceil(K/128))): decided by ndim, never by counts, since for K <= 128
    a (T, 1) 1x128 scale has a row scale's count. Else tensor / row by count, as before: scale_a 1 or T values
    (T = every row of a), scale_b G or G x N. scale_layout: the caller's scale_layout= (None: inferred)."""
    layout = _scale_layout_of(scale_layout)
    T = 1
    for n in a_shape[:-1]:
        T *= n
    if (sav is not None and sav.dtype == DType.E8M0) or (sbv is not None and sbv.dtype == DType.E8M0):
        _check_layout_fits(layout, "mx")
        _mx_scales(sav, sbv, a_shape, G, N, K)
        return ScaleMode.MX, ScaleMode.MX, ScaleLayout.PLAIN, None
    if sbv is not None and len(sbv.shape) == 3:
        _check_layout_fits(layout, "block")
        kb, nb = cdiv(K, 128), cdiv(N, 128)
        if sav is None:
            raise InvalidShapeError("%s: a 3-D scale_b means block scaling (G, ceil(N/128), ceil(K/128)); it needs "
                                    "scale_a as the 1x128 scales of a, shape %s" % (FN, tuple(a_shape[:-1]) + (kb,)))
        _block_scale(sbv, (G, nb, kb), "scale_b", "each expert's 128x128 scales (G, ceil(N/128), ceil(K/128)) =")
        layout, n = _block_scale_a(sav, a_shape, K, layout)
        return ScaleMode.BLOCK, ScaleMode.BLOCK, layout, n if layout == ScaleLayout.MN_MAJOR else None
    _check_layout_fits(layout, "tensor / row")
    try:
        return _scale_mode(sav, 1, T, "scale_a"), _scale_mode(sbv, G, G * N, "scale_b"), ScaleLayout.PLAIN, None
    except InvalidShapeError as e:
        if sav is not None and len(sav.shape) == len(a_shape) and len(sav.shape) >= 2 and sav.shape[-1] > 1:
            raise InvalidShapeError("%s (block scaling is chosen by a 3-D scale_b, (G, ceil(N/128), ceil(K/128)))"
                                    % e.message) from None
        raise


class _Call:
    """One grouped call's checked views and structs (everything but the output, offsets, status, workspace)."""
    __slots__ = ("av", "bv", "sav", "sbv", "biasv", "dev", "cx", "desc", "args", "rows", "G", "N", "K", "ddt",
                 "lay", "ND", "sdv", "sd_shape", "sd_dtype", "return_amax")


def _out_stage(c, av, sdv, out_dtype, out_quant, out_hp, out_rounding, out_pow2, return_amax):
    """The output stage (desc.out_quant and the rest), checked as scaled_mm checks it: D's dtype (default
    e4m3 with output quantization), OUTQ_SCALED with its scale_d (a float32 scalar, implied by scale_d) and
    return_amax, OUTQ_MX / BLOCK1X128 with out_hp, out_rounding, out_pow2 and the shape of the output scales
    (c.sd_shape: D's leading dims, (T,) or masked (G, M), + (Nd/32,) e8m0 or (ceil(Nd/128),) float32, Nd =
    D's columns; None without them). Sets c.desc's output fields, c.ddt and c.args.scale_d (SCALED: scale_d
    itself; MX / BLOCK1X128: the (T, cols) output scales without their pointer, which the call allocates)."""
    desc, rows, ND = c.desc, c.rows, c.ND
    oq = enum_of(OUT_QUANTS, out_quant, FN + ": out_quant", OutQuant) if out_quant is not None else None
    if out_dtype is None:
        ddt = DType.E4M3 if oq in (OutQuant.MX, OutQuant.BLOCK1X128) or sdv is not None else (
            DType.BF16 if av.kind == "torch" or av.device == "cuda" else DType.F32)
    else:
        ddt = dtype_of_name(out_dtype, "out_dtype")
    if oq is None:
        oq = OutQuant.SCALED if sdv is not None else OutQuant.NONE
    if oq == OutQuant.NONE and ddt not in HP:
        raise UnsupportedError("%s: out_dtype must be float32, float16 or bfloat16 (got %s)%s"
                               % (FN, ddt.name.lower(), "; an e4m3 / e5m2 D needs output quantization (out_quant or "
                                  "scale_d)" if ddt in FP8 else ""))
    check_out_quant(FN, oq, ddt, sdv, return_amax)
    desc.out_quant = oq
    c.ddt, c.sdv, c.sd_shape, c.sd_dtype, c.return_amax = ddt, sdv, None, None, bool(return_amax)
    if oq == OutQuant.SCALED:
        set_tensor(c.args.scale_d, sdv.ptr, DType.F32, (1,), (1,))
    elif oq != OutQuant.NONE:  # MX / BLOCK1X128
        hp = dtype_of_name(out_hp, "out_hp")
        if hp not in HP:
            raise UnsupportedError("%s: out_hp must be float32, float16 or bfloat16" % FN)
        desc.out_hp = hp
        desc.out_rounding = enum_of(ROUNDINGS, out_rounding, FN + ": out_rounding", Rounding)
        desc.out_pow2 = 1 if out_pow2 else 0
        st, msg, sd_dtype, shp = gemm_scale_shape(ScaleMode.NONE, ScaleLayout.PLAIN, 2, prod(rows), ND, oq)
        if st == Status.ERR_INVALID_SHAPE:  # mx: D's columns % 32 != 0
            raise InvalidShapeError("%s: out_quant 'mx' needs %s %% 32 == 0 (%s = %d)"
                                    % ((FN,) + (("N", "N", ND) if ND == c.N else ("N/2", "N/2", ND))))
        if st:
            raise_status(st, msg.replace("fp8kit_gemm_scale_shape:", FN + ":", 1))
        c.sd_shape, c.sd_dtype = tuple(rows) + (shp[1],), sd_dtype
        # the library reads them as the (T, cols) matrix over every row of D, masked T = G x M
        set_tensor(c.args.scale_d, None, sd_dtype, (prod(rows), shp[1]), (shp[1], 1))


def _prepare(a, b, scale_a, scale_b, bias, out_dtype, activation, alpha, ctx, layout, scale_layout=None,
             scale_d=None, out_quant=None, out_hp="bfloat16", out_rounding="floor", out_pow2=False,
             return_amax=False):
    """Checks a call's operands and options; returns a _Call whose args hold a, b (as the library's (G, N,
    K)), the scales (mn_major A scales as the flat buffer from its start), the bias, alpha, the layout and the
    output stage (scale_d: the input scalar of OUTQ_SCALED; the output scales' shape without their pointer)
    (no pointers yet for d, the output scales, amax, offsets, status or workspace)."""
    if not isinstance(layout, (str, GroupedLayout)):
        raise InvalidArgumentError("%s: layout must be %s (got %r)"
                                   % (FN, " or ".join(repr(n) for n in GROUPED_LAYOUTS), layout))
    lay = enum_of(GROUPED_LAYOUTS, layout, FN + ": layout", GroupedLayout)
    masked = lay == GroupedLayout.MASKED
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
    # untagged uint8 scales are e8m0 (mx), as scaled_mm reads them
    sav = as_view(scale_a, "scale_a", DType.E8M0) if scale_a is not None else None
    sbv = as_view(scale_b, "scale_b", DType.E8M0) if scale_b is not None else None
    biasv = as_view(bias, "bias") if bias is not None else None
    sdv = as_view(scale_d, "scale_d") if scale_d is not None else None
    dev = device_of([av, bv, sav, sbv, biasv, sdv], FN)
    cx = context_for(dev, ctx, FN)
    desc = GemmDesc()
    desc.scale_a, desc.scale_b, desc.scale_layout, n_mn = _scale_modes(sav, sbv, tuple(av.shape), G, N, K,
                                                                       scale_layout)
    desc.act = activation_of(activation)
    ND = N  # D's columns: N/2 with swiglu (each expert's b columns = [gate; up] along N)
    if desc.act == Activation.SWIGLU:
        if N % 2:
            raise InvalidShapeError("%s: activation 'swiglu' needs an even N (D has N/2 columns; N = %d)" % (FN, N))
        ND = N // 2
    if biasv is not None:
        if biasv.dtype not in HP:
            raise InvalidArgumentError("%s: bias must be float32, float16 or bfloat16" % FN)
        desc.bias = BiasMode.COL
    c = _Call()
    c.desc, c.rows, c.N, c.ND = desc, rows, N, ND
    args = c.args = GroupedGemmArgs()
    _out_stage(c, av, sdv, out_dtype, out_quant, out_hp, out_rounding, out_pow2, return_amax)
    av.fill(args.a)
    # b as the library's (G, N, K): swap the last two dims of the (G, K, N) view
    bv.fill(args.b)
    args.b.shape[1], args.b.shape[2] = N, K
    ldb = bv.strides[2] if N > 1 else K
    args.b.strides[0], args.b.strides[1], args.b.strides[2] = (bv.strides[0] if G > 1 else N * ldb), ldb, 1
    args.layout = lay
    if desc.scale_a == ScaleMode.MX:  # both checked by _mx_scales: the packed (T, K/32) and (G, N, K/32) grids
        kb = K // 32
        set_tensor(args.scale_a, sav.ptr, DType.E8M0, rows + (kb,), (rows[-1] * kb, kb, 1)[-len(rows) - 1:])
        set_tensor(args.scale_b, sbv.ptr, DType.E8M0, (G, N, kb), (N * kb, kb, 1))
    else:  # tensor / row: any shape, the library checks the count and contiguity; block: checked above
        if n_mn is not None:  # mn_major block scales of a: the flat buffer the library reads, from its start
            set_tensor(args.scale_a, sav.ptr, DType.F32, (n_mn,), (1,))
        elif sav is not None:
            sav.fill(args.scale_a)
        if sbv is not None:
            sbv.fill(args.scale_b)
    if biasv is not None:
        biasv.fill(args.bias)
    args.alpha = float(alpha)
    c.av, c.bv, c.sav, c.sbv, c.biasv, c.dev, c.cx = av, bv, sav, sbv, biasv, dev, cx
    c.G, c.K, c.lay = G, K, lay
    return c


_AMAX_PROBE = 1 << 12  # a made-up, aligned amax_d for the probes (below every operand's placeholder)


def _probe_args(c, addr=None):
    """A copy of c.args for the probes (nothing is read or written): d and the output scales (when any) get
    placeholder pointers, amax_d too when the call asks for it. addr: each operand's placeholder in turn,
    256-byte aligned, each past the last one's bytes (the workspace probe); None: every one at 1 << 20
    (describe)."""
    probe = GroupedGemmArgs.from_buffer_copy(c.args)
    set_tensor(probe.d, 1, c.ddt, c.rows + (c.ND,), (c.rows[-1] * c.ND, c.ND, 1)[-len(c.rows) - 1:])
    if c.sd_shape is not None:
        probe.scale_d.data = 1
    if addr is not None:
        for t in (probe.a, probe.b, probe.scale_a, probe.scale_b, probe.bias, probe.scale_d, probe.d):
            if t.data:  # every operand given (a real pointer would also defeat the cache key)
                t.data = addr
                addr += rup(tensor_layout(t)[0], 256)
        probe.offsets = addr
    else:
        for t in (probe.d, probe.scale_d):
            if t.data:
                t.data = 1 << 20
        probe.offsets = 1 << 20
    probe.amax_d = _AMAX_PROBE if c.return_amax else None
    return probe


_ws_sizes: Dict[Any, int] = {}  # (device, handle, desc bytes, probe args bytes) -> workspace bytes
_ws_lock = threading.Lock()


def _clear_ws_sizes():
    with _ws_lock:
        _ws_sizes.clear()


on_clear(_clear_ws_sizes)  # the sizes are keyed by context handles, which clear_contexts frees


def _workspace_bytes(c):
    """fp8kit_grouped_gemm_workspace_size of the call c describes (cached per context, descriptor, shapes,
    strides and dtypes). The library checks the call as fp8kit_grouped_gemm does but reads nothing: the
    probe's pointers are made-up, non-NULL, 256-byte aligned addresses, each past the last one's bytes
    (disjoint, as the CUDA query checks the call as one fp8kit_gemm view, whose overlap rule applies)."""
    fn = getattr(c.cx._lib, "fp8kit_grouped_gemm_workspace_size", None)
    if fn is None:  # an older library: no workspace, the call runs on the operands as given
        return 0
    probe = _probe_args(c, 1 << 20)
    probe.alpha = 1.0  # not part of the size
    probe.status = None
    probe.workspace = None
    probe.workspace_bytes = 0
    key = (c.dev, c.cx.handle, bytes(c.desc), bytes(probe))
    n = _ws_sizes.get(key)
    if n is None:
        nbytes = ctypes.c_size_t(0)
        c.cx.check(fn(c.cx.handle, ctypes.byref(c.desc), ctypes.byref(probe), ctypes.byref(nbytes)))
        n = int(nbytes.value)
        with _ws_lock:
            if len(_ws_sizes) > 4096:
                _ws_sizes.clear()
            _ws_sizes[key] = n
    return n


def grouped_mm_workspace_size(a: Array, b: Array, scale_a: Optional[Array] = None, scale_b: Optional[Array] = None,
                              bias: Optional[Array] = None, out_dtype: Optional[DTypeLike] = None, *,
                              activation: Optional[str] = None, ctx: Optional[Context] = None,
                              layout: str = "contiguous", scale_layout: Optional[str] = None,
                              scale_d: Optional[Array] = None, out_quant: Optional[str] = None,
                              out_hp: DTypeLike = "bfloat16", out_rounding: str = "floor", out_pow2: bool = False,
                              return_amax: bool = False) -> int:
    """The bytes of workspace fp8kit.grouped_mm asks the library for with these operands
    (fp8kit_grouped_gemm_workspace_size: 0 on the CPU and where none helps; on the GPU with mx scales, the
    normalized MX copies of a and b). Allocate it once (a uint8 tensor of this many bytes on the operands'
    device) and pass it as grouped_mm(..., workspace=) to keep the allocation out of a loop. Only shapes,
    strides and dtypes matter: nothing is read.

    Arguments: a, b, scale_a, scale_b, bias, out_dtype and the keywords activation, ctx, layout,
    scale_layout, scale_d, out_quant, out_hp, out_rounding, out_pow2, return_amax as fp8kit.grouped_mm takes
    them (no offs: the size does not depend on them)."""
    c = _prepare(a, b, scale_a, scale_b, bias, out_dtype, activation, 1.0, ctx, layout, scale_layout, scale_d,
                 out_quant, out_hp, out_rounding, out_pow2, return_amax)
    return _workspace_bytes(c)


def grouped_mm_describe(a: Array, b: Array, scale_a: Optional[Array] = None, scale_b: Optional[Array] = None,
                        bias: Optional[Array] = None, out_dtype: Optional[DTypeLike] = None, *,
                        activation: Optional[str] = None, ctx: Optional[Context] = None, layout: str = "contiguous",
                        scale_layout: Optional[str] = None, scale_d: Optional[Array] = None,
                        out_quant: Optional[str] = None, out_hp: DTypeLike = "bfloat16", out_rounding: str = "floor",
                        out_pow2: bool = False, return_amax: bool = False) -> str:
    """The plan fp8kit.grouped_mm gets with these operands, in one line (fp8kit_grouped_gemm_describe): on
    the GPU the kernel family and its choices, e.g. "sm90_grouped variant=16 bn=128 ... scaling=staged ...";
    on the CPU "cpu: one gemm per group". Checks the call as grouped_mm does and plans it (the plan is cached
    for the calls that follow); runs nothing and reads no data. The plan depends on the operands' shapes,
    dtypes and pointer alignment, so pass the tensors the calls will use. For tests, benchmarks and bug
    reports; the text is not a stable format.

    Arguments: a, b, scale_a, scale_b, bias, out_dtype and the keywords activation, ctx, layout,
    scale_layout, scale_d, out_quant, out_hp, out_rounding, out_pow2, return_amax as fp8kit.grouped_mm takes
    them (no offs: the plan does not depend on them)."""
    c = _prepare(a, b, scale_a, scale_b, bias, out_dtype, activation, 1.0, ctx, layout, scale_layout, scale_d,
                 out_quant, out_hp, out_rounding, out_pow2, return_amax)
    fn = getattr(c.cx._lib, "fp8kit_grouped_gemm_describe", None)
    if fn is None:
        raise UnsupportedError("%s: this fp8kit library has no fp8kit_grouped_gemm_describe (older than the "
                               "binding)" % FN)
    probe = _probe_args(c)  # D, the output scales, amax and offsets: placeholders (nothing is read)
    buf = ctypes.create_string_buffer(512)
    c.cx.check(fn(c.cx.handle, ctypes.byref(c.desc), ctypes.byref(probe), buf, len(buf)))
    return buf.value.decode("utf-8", "replace")


def _scale_a_region(c):
    """The bytes of scale_a the library reads: mn_major, its whole flat buffer; else the view's."""
    if c.sav is None or c.desc.scale_layout != ScaleLayout.MN_MAJOR:
        return region("scale_a", c.sav)
    return "scale_a", c.sav.ptr, tensor_layout(c.args.scale_a)


def _workspace(workspace, dev):
    """(pointer, bytes) of a caller-given workspace: a packed array on the operands' device, writable."""
    wv = as_view(workspace, "workspace", DType.E4M3)
    if (wv.device, wv.index if wv.device == "cuda" else 0) != dev:
        raise UnsupportedError("%s: workspace is on %s:%d; the operands are on %s:%d"
                               % (FN, wv.device, wv.index, dev[0], dev[1]))
    if not packed(wv.shape, wv.strides):
        raise InvalidStrideError("%s: workspace must be a packed (contiguous) array" % FN)
    check_writable(workspace, wv, "workspace", FN)
    return wv.ptr, numel(wv) * ITEMSIZE[wv.dtype]


# ------------------------------------------------------------------ hot path (_hot.py)
_hot = _hotpath.Table()


def _hot_key(a, b, offs, scale_a, scale_b, bias, out, out_dtype, activation, layout, scale_layout, ctx, oq):
    return (a.shape, b.shape, scale_a is None, scale_b is None, bias is None, out is None, out_dtype, activation,
            layout, scale_layout, ctx, oq)


def _hot_register(key, c, tensors, owner, offs, wbytes, dv, out):
    """Keeps the entry of a call that passed every check (offs contiguous as given: no copy per call)."""
    if owner is not offs:
        return
    # what the call reads, in _hot.prepare's pointer order: a, b, scale_a, scale_b, offs, bias
    ext = (view_layout(c.av)[0], view_layout(c.bv)[0],
           tensor_layout(c.args.scale_a)[0] if c.sav is not None else 0,
           view_layout(c.sbv)[0] if c.sbv is not None else 0, 4 * c.G,
           view_layout(c.biasv)[0] if c.biasv is not None else 0)
    # output quantization (mx / block1x128): the row scales of D, new with each call
    sd_alloc = _hotpath.allocator(c.sd_shape, c.sd_dtype, c.dev) if c.sd_shape is not None else None
    _hot.put(key, tensors, c.args, c.desc, c.cx._lib.fp8kit_grouped_gemm, c.cx, c.dev,
             c.rows + (c.ND,) if out is None else None, c.ddt, ext, view_layout(dv)[0], wbytes, sd_alloc)


def _hot_call(h, a, b, offs, scale_a, scale_b, bias, out, alpha):
    """One call through a hot entry; None (nothing done) when the full checks must decide about out=."""
    d, args, ptrs = _hotpath.prepare(h, out, a, b, offs, scale_a, scale_b, bias)
    if d is None:
        return None
    if bias is not None:
        args.bias.data = ptrs[5]
    args.alpha = float(alpha)
    sd = None
    if h.extra is not None:
        sd, args.scale_d.data = h.extra()
    _hotpath.run(h, args, a.device)
    return d if sd is None else (d, sd)


def grouped_mm(a: Array, b: Array, offs: Array, scale_a: Optional[Array] = None, scale_b: Optional[Array] = None,
               bias: Optional[Array] = None, out_dtype: Optional[DTypeLike] = None, *,
               activation: Optional[str] = None, alpha: float = 1.0, out: Optional[Array] = None,
               ctx: Optional[Context] = None, stream: Optional[Stream] = None, status: Optional[Array] = None,
               layout: str = "contiguous", workspace: Optional[Array] = None,
               scale_layout: Optional[str] = None, scale_d: Optional[Array] = None, out_quant: Optional[str] = None,
               out_hp: DTypeLike = "bfloat16", out_rounding: str = "floor", out_pow2: bool = False,
               return_amax: bool = False) -> Union[Array, Tuple[Array, Array]]:
    """D[rows of group g] = out(act(alpha * deq(a[rows]) @ deq(b[g]) + bias[g])) for the G groups of rows that
    offs delimits.

    Returns d; (d, amax) with return_amax; (d, scales) with out_quant 'mx' / 'block1x128' (as scaled_mm).

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
      scale_a, scale_b: the scale mode follows from their dtypes and shapes:
        - mx (e8m0 scales: torch.float8_e8m0fnu, a tagged e8m0 array, or uint8 as scaled_mm reads them; both
          or neither): K a multiple of 32; scale_a the e8m0 scales of every row of a per 32 of K,
          a.shape[:-1] + (K/32,) ((T, K/32) or (G, M, K/32)), scale_b each expert's (N, K/32) scales,
          (G, N, K/32) (or its transposed view (G, K/32, N)) - what fp8kit.quantize(..., "mx") gives for a
          and for the (G, N, K) weight stack; the plain scale layout only (blocked scales are refused).
        - block (float32, scale_b 3-D): scale_a the 1x128 scales of every row of a, a.shape[:-1] +
          (ceil(K/128),) ((T, ceil(K/128)) or (G, M, ceil(K/128))), scale_b each expert's 128x128 scales
          (G, ceil(N/128), ceil(K/128)) - the shapes fp8kit.quantize gives for scheme "1x128" on a and
          "128x128" on the (G, N, K) weight stack; scale_b plain row-major contiguous. scale_a packed
          row-major is the plain layout; it may also come in the mn_major layout (DeepGEMM's; on the GPU
          the fastest), with ka = ceil(K/128) and Tp / Mp the rows rounded up to a multiple of 4:
          contiguous, the buffer (ka, Tp) (packed; what fp8kit.quantize(a, "1x128",
          scale_layout="mn_major") gives) or its (T, ka) view with strides (1, Tp)
          (deep_gemm.get_mn_major_tma_aligned_tensor of the plain scales); masked, the G experts' buffers
          (G, ka, Mp) (packed; quantize's mn_major output for the (G, M, K) a) or their (G, M, ka) view
          with strides (ka*Mp, 1, Mp). A view must start at its buffer's start (the library reads the
          whole padded buffer from there: ka*Tp, masked G*ka*Mp values). The layout is inferred: the
          plain shape packed is plain, strided the view, the buffer's shape the buffer; where the two
          shapes are one (T == ka, a multiple of 4; masked M == ka) a packed array is read as plain unless
          scale_layout="mn_major" says it is the buffer.
        - else by count (float32): scale_a a scalar (tensor) or T values ((T,) / (T, 1); masked (G, M) /
          (G, M, 1)), scale_b (G,) per expert or (G, N) per expert and column.
      bias: (G, N).
      out_dtype: bfloat16 / float16 / float32 (default bfloat16 for torch, float32 for numpy); e4m3 / e5m2
        with output quantization only (out_quant or scale_d; then the default is e4m3).

    Keyword arguments:
      activation: None, an Activation or a name the C library accepts, as scaled_mm's. 'swiglu' (both
        backends; CUDA: not with mx scales): each expert's N columns of b are [gate; up] (N even) and D has N/2 columns,
        silu(y[:, :N/2]) * y[:, N/2:] of the group's y (out is then (T, N/2), masked (G, M, N/2)).
      alpha: the multiplier of the accumulator.
      out: a (T, N) array ((G, M, N) when masked) to write D into instead of a new one (writable, sharing
        no byte with an input or status).
      ctx: a Context (default: the cached one of the operands' device).
      stream: a cudaStream_t int or torch stream (default: torch's current one).
      status: optional int32 array of one element on the operands' device (a numpy array or torch tensor
        with CPU operands, a torch tensor with CUDA ones) that receives 0 or 2 (invalid offs); writable,
        sharing no byte with out or an input.
      layout: "contiguous" or "masked" (see above).
      scale_layout: None (inferred from the scales' shapes and strides, see block above), "plain" or
        "mn_major" (block scaling, a's scales), as scaled_mm's keyword. "mn_major" with tensor / row / mx
        scales and "blocked" are UnsupportedError (the grouped GEMM reads mx scales plain only).
      scale_d: fp8 outputs: the float32 scalar divisor, D = fp8(y / scale_d) (out_quant 'scaled', which it
        implies; torch's scale_result s is scale_d = 1/s), as scaled_mm's.
      return_amax: with scale_d, also return max|y| over every row a group owns (a float32 scalar; 0 when
        no group owns a row).
      out_quant: 'mx' or 'block1x128' quantize each row of D as fp8kit.quantize does (axis -1) and return
        (d, scales): scales of D's leading dims, (T, cols) or masked (G, M, cols), cols = Nd/32 e8m0 (mx,
        Nd = D's columns, N or N/2 with swiglu, a multiple of 32) or ceil(Nd/128) float32 (block1x128);
        the scale rows of rows no group owns are not written (as D's). 'scaled' (implied by scale_d) or
        None. Output quantization runs on both backends (CUDA: fused in the grouped kernel).
      out_hp, out_rounding, out_pow2: for out_quant 'mx' / 'block1x128': the type y is rounded to first,
        the mx scale rounding ('floor' / 'rceil'), power-of-two block scales (docs/spec.md 3), as
        scaled_mm's.
      workspace: optional scratch memory for the library (a packed, writable array on the operands'
        device, 16-byte aligned, e.g. torch.empty(n, dtype=torch.uint8, device="cuda") with n from
        fp8kit._grouped.grouped_mm_workspace_size), sharing no byte with another argument. None: the call
        asks the library for the size its fastest path needs (0 on the CPU; on the GPU with mx scales the
        normalized MX copies of a and b) and allocates it, as scaled_mm does. One smaller than that size
        still works: the call then runs on the operands as given."""
    hkey = None
    if (type(a) is _hotpath.TT and stream is None and status is None and workspace is None and scale_d is None and
            not return_amax):
        try:
            hkey = _hot_key(a, b, offs, scale_a, scale_b, bias, out, out_dtype, activation, layout, scale_layout, ctx,
                            None if out_quant is None else (out_quant, out_hp, out_rounding, bool(out_pow2)))
            h = _hot.get(hkey, [t for t in (a, b, offs, scale_a, scale_b, bias, out) if t is not None])
        except TypeError:  # an unhashable option: the full path reports it
            hkey = h = None
        if h is not None:
            d = _hot_call(h, a, b, offs, scale_a, scale_b, bias, out, alpha)
            if d is not None:
                return d
    c = _prepare(a, b, scale_a, scale_b, bias, out_dtype, activation, alpha, ctx, layout, scale_layout, scale_d,
                 out_quant, out_hp, out_rounding, out_pow2, return_amax)
    av, bv, sbv, biasv, dev, G, ND = c.av, c.bv, c.sbv, c.biasv, c.dev, c.G, c.ND
    optr, owner = group_offsets(offs, G, dev, FN, "offs")
    sptr = status_pointer(status, dev, FN)
    if out is None:
        d, dv = empty_like_kind(av, c.rows + (ND,), c.ddt)
    else:
        dv = check_out(out, "out", c.rows + (ND,), c.ddt, dev, fn=FN)
        d = out
    wptr = wbytes = 0
    ws = None
    if workspace is not None:
        wptr, wbytes = _workspace(workspace, dev)
    elif c.cx.backend == Backend.CUDA:  # the CPU needs none (size 0): no query there
        wbytes = _workspace_bytes(c)
        if wbytes:
            # a uint8 tensor on the device (raw bytes; freed in stream order by torch's allocator)
            ws = torch_module().torch.empty((wbytes,), dtype=torch_module().torch.uint8,
                                            device="cuda:%d" % dev[1])
            wptr = ws.data_ptr()
    if out is not None or sptr or workspace is not None:  # what the caller gives to be written shares no byte
        check_disjoint(FN, [region("out", dv) if out is not None else None,
                            ("status", sptr, flat_layout(4, 4)) if sptr else None,
                            ("workspace", wptr, flat_layout(wbytes)) if workspace is not None and wbytes else None],
                       [region("a", av), region("b", bv), _scale_a_region(c), region("scale_b", sbv),
                        region("bias", biasv), region("scale_d", c.sdv), ("offs", optr, flat_layout(4 * G, 4))])
    args = c.args
    args.offsets = optr
    args.status = sptr or None
    args.workspace = wptr or None
    args.workspace_bytes = wbytes if wptr else 0
    dv.fill(args.d)
    sd = amax = None
    if c.sd_shape is not None:  # new: the output scales (D's leading dims + (cols,)) and amax
        sd, sdo = empty_like_kind(av, c.sd_shape, c.sd_dtype)
        args.scale_d.data = sdo.ptr
    if c.return_amax:
        amax, amv = empty_like_kind(av, (), DType.F32)
        args.amax_d = amv.ptr
    fn = getattr(c.cx._lib, "fp8kit_grouped_gemm", None)
    if fn is None:
        raise UnsupportedError("%s: this libfp8kit has no fp8kit_grouped_gemm (rebuild it)" % FN)
    st = fn(c.cx.handle, ctypes.byref(c.desc), ctypes.byref(args), stream_for(av, stream))
    c.cx.check(st)
    if hkey is not None and amax is None:
        _hot_register(hkey, c, tuple(t for t in (a, b, offs, scale_a, scale_b, bias, out) if t is not None), owner,
                      offs, wbytes, dv, out)
    del owner, ws
    if sd is not None:
        return d, sd
    return (d, amax) if amax is not None else d
