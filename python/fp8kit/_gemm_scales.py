"""_gemm_scales.py - scaled_mm's scale modes and layouts: which modes an operand's scales can mean
(by dtype, count and shape), the pair for a call (scale_mode= or inferred), the check of each scale
array against its mode and layout, and A's block-scale layout (plain or mn_major) when not given."""
from ._common import gemm_scale_shape, numel, packed
from ._lib import DType, OutQuant, ScaleLayout, ScaleMode
from ._names import SCALE_LAYOUTS, SCALE_MODES, enum_of
from .errors import InvalidArgumentError, InvalidShapeError, InvalidStrideError, UnsupportedError, raise_status

FN = "fp8kit.scaled_mm"


def scale_shape_or_raise(mode, layout, operand, rows, k, out_quant=OutQuant.NONE):
    """(dtype, (rows, cols)) of gemm_scale_shape, or the library's error, named as this function's."""
    st, msg, dt, shp = gemm_scale_shape(mode, layout, operand, rows, k, out_quant)
    if st:
        raise_status(st, msg.replace("fp8kit_gemm_scale_shape:", FN + ":", 1))
    return dt, shp


def dense(v):
    """True when v's elements are packed row-major (size-1 dims ignored)."""
    return packed(v.shape, v.strides)


def dense_t(v):
    """True when v is 2-D and its transpose is packed row-major."""
    return len(v.shape) == 2 and (v.shape[0] == 1 or v.strides[0] == 1) and \
        (v.shape[1] == 1 or v.strides[1] == v.shape[0])


def grid_of(v, rows, cols):
    """True when v holds the packed row-major (rows, cols) grid fp8kit reads,
    by this convention (not by guessing from the shape): a v of shape
    (rows, cols) is that grid itself and must be packed row-major (what
    quantize returns, also when rows == cols); a v of shape (cols, rows) is
    its transposed view (torch._scaled_mm's scale_b = sw.t()) and must have
    the transposed strides; any other shape must be packed. A transposed copy
    (sw.t().contiguous()) is another byte order and is refused, except where
    rows == cols, where it cannot be told from sw and is read as sw."""
    shp = tuple(v.shape)
    if shp == (rows, cols) and dense(v):
        return True
    if shp == (cols, rows) and dense_t(v):
        return True
    return shp not in ((rows, cols), (cols, rows)) and dense(v)


def mode_candidates(v, rows, K, is_a):
    """Scale modes a scale tensor's dtype and shape allow (inference order)."""
    if v is None:
        return [ScaleMode.NONE]
    if v.dtype == DType.E8M0:
        return [ScaleMode.MX]
    if v.dtype != DType.F32:
        raise UnsupportedError("%s: scale_%s has dtype %s; scales are float32 (or e8m0 for mx)"
                               % (FN, "a" if is_a else "b", v.dtype.name.lower()))
    shp, n = tuple(v.shape), numel(v)
    out = []
    if n == 1:
        out.append(ScaleMode.TENSOR)
    if n == rows and shp in ((rows,), (rows, 1), (1, rows)):
        out.append(ScaleMode.ROW)
    _, grid = scale_shape_or_raise(ScaleMode.BLOCK, ScaleLayout.PLAIN, 0 if is_a else 1, rows, K)
    if is_a:  # (M, ceil(K/128)), or as many elements as the mn_major buffer holds
        _, mn = scale_shape_or_raise(ScaleMode.BLOCK, ScaleLayout.MN_MAJOR, 0, rows, K)
        if shp == grid or (len(shp) <= 2 and n == mn[0] * mn[1]):
            out.append(ScaleMode.BLOCK)
    elif shp in (grid, grid[::-1]):  # (ceil(N/128), ceil(K/128)) or its transposed view
        out.append(ScaleMode.BLOCK)
    return out


def pick_modes(va, vb, M, N, K, scale_mode):
    if scale_mode is not None:
        if isinstance(scale_mode, (tuple, list)):
            ma, mb = (enum_of(SCALE_MODES, m, "scale_mode", ScaleMode) for m in scale_mode)
        else:
            ma = mb = enum_of(SCALE_MODES, scale_mode, "scale_mode", ScaleMode)
        if va is None:
            ma = ScaleMode.NONE
        if vb is None:
            mb = ScaleMode.NONE
        return ma, mb
    ca, cb = mode_candidates(va, M, K, True), mode_candidates(vb, N, K, False)
    simple = (ScaleMode.NONE, ScaleMode.TENSOR, ScaleMode.ROW)
    sa, sb = [m for m in ca if m in simple], [m for m in cb if m in simple]
    if sa and sb:
        return sa[0], sb[0]
    for paired in (ScaleMode.BLOCK, ScaleMode.MX):
        if paired in ca and paired in cb:
            return paired, paired
    raise InvalidShapeError(
        "%s: cannot tell the scaling from scale_a %s and scale_b %s for M=%d, N=%d, K=%d; expected float32 "
        "scalars (tensor), (M, 1) and (1, N) (row), (M, ceil(K/128)) and (ceil(N/128), ceil(K/128)) (block), "
        "or e8m0 (M, K/32) and (N, K/32) (mx); pass scale_mode= to say" % (
            FN, None if va is None else tuple(va.shape), None if vb is None else tuple(vb.shape), M, N, K))


def check_scale(v, mode, layout, rows, K, is_a):
    """Validates one operand's scale buffer for (mode, layout); returns
    the element count of the flat buffer fp8kit reads (None: no scale)."""
    name = "scale_a" if is_a else "scale_b"
    if mode == ScaleMode.NONE:
        return None
    if v is None:
        raise InvalidArgumentError("%s: %s is required for %s scaling" % (FN, name, mode.name.lower()))
    n = numel(v)
    # what the library reads (mx: K % 32 == 0, else its error)
    sdt, shp = scale_shape_or_raise(mode, layout, 0 if is_a else 1, rows, K)
    want = shp[0] * shp[1]
    if mode == ScaleMode.TENSOR:
        ok = True
    elif mode == ScaleMode.ROW:
        ok = dense(v)
    elif mode == ScaleMode.BLOCK:
        if not is_a:  # B's 128x128 scales have one layout: the (ceil(N/128), ceil(K/128)) grid
            ok = grid_of(v, *shp)
        elif layout == ScaleLayout.MN_MAJOR:
            ka, ld = shp  # the (ceil(K/128), 4*ceil(M/4)) buffer
            # the (M, ka) view of that buffer (when (M, ka) is also the buffer's own shape, the
            # packed row-major array is the buffer itself)
            if tuple(v.shape) == (rows, ka) and len(v.shape) == 2 and not (tuple(v.shape) == (ka, ld) and dense(v)):
                n = want
                ok = (v.strides[0] == 1 or rows == 1) and (ka == 1 or v.strides[1] == ld)
            else:
                ok = dense(v)
        else:
            ok = dense(v)
    elif layout == ScaleLayout.BLOCKED:
        ok = dense(v)
    else:  # B's plain (N, K/32) scales may also come as their transposed view sw.t()
        ok = dense(v) if is_a else grid_of(v, *shp)
    if v.dtype != sdt:
        raise InvalidArgumentError("%s: %s has dtype %s; %s scaling needs %s" % (
            FN, name, v.dtype.name.lower(), mode.name.lower(), "e8m0" if sdt == DType.E8M0 else "float32"))
    if n != want:
        raise InvalidShapeError("%s: %s has shape %s (%d elements); %s scaling%s needs %d" % (
            FN, name, tuple(v.shape), n, mode.name.lower(),
            "" if layout == ScaleLayout.PLAIN else " (%s layout)" % layout.name.lower(), want))
    if not ok:
        grid = ""
        if not is_a and (mode == ScaleMode.BLOCK or (mode == ScaleMode.MX and layout == ScaleLayout.PLAIN)):
            grid = ("; scale_b is the %s grid quantize returns, packed row-major, or its transposed view "
                    "sw.t() (torch._scaled_mm's convention), not a transposed copy" % (shp,))
        raise InvalidStrideError("%s: %s (shape %s, strides %s) is not packed in the layout %s scaling reads%s"
                                 % (FN, name, tuple(v.shape), tuple(v.strides), mode.name.lower(), grid))
    return n


def infer_layout(va, vb, ma, M, N, K, scale_layout):
    if scale_layout is not None:
        return enum_of(SCALE_LAYOUTS, scale_layout, "scale_layout", ScaleLayout)
    if ma == ScaleMode.BLOCK:
        # A's (M, ka) scales in their own index order: packed -> plain, else the (M, ka) view of an
        # mn_major buffer; a (ka, 4*ceil(M/4)) array that is not also (M, ka) -> that buffer itself
        _, plain = scale_shape_or_raise(ScaleMode.BLOCK, ScaleLayout.PLAIN, 0, M, K)
        _, mn = scale_shape_or_raise(ScaleMode.BLOCK, ScaleLayout.MN_MAJOR, 0, M, K)
        shp = tuple(va.shape)
        if shp == plain:
            return ScaleLayout.PLAIN if dense(va) else ScaleLayout.MN_MAJOR
        if shp == mn:
            return ScaleLayout.MN_MAJOR
        return ScaleLayout.PLAIN
    if ma == ScaleMode.MX:
        shapes = [gemm_scale_shape(ScaleMode.MX, lay, op, rows, K)
                  for lay in (ScaleLayout.PLAIN, ScaleLayout.BLOCKED) for op, rows in ((0, M), (1, N))]
        if any(st for st, _, _, _ in shapes):
            return ScaleLayout.PLAIN  # K % 32 != 0: check_scale names it
        (_, _, _, pa), (_, _, _, pb), (_, _, _, ba), (_, _, _, bb) = shapes
        plain_n, blocked_n = pa[0] * pa[1], ba[0] * ba[1]
        plain_nb, blocked_nb = pb[0] * pb[1], bb[0] * bb[1]
        if tuple(va.shape) == pa and tuple(vb.shape) in (pb, pb[::-1]):
            return ScaleLayout.PLAIN
        na, nb = numel(va), numel(vb)
        if na == blocked_n and nb == blocked_nb and (na != plain_n or nb != plain_nb):
            return ScaleLayout.BLOCKED
        if na == plain_n and nb == plain_nb:
            return ScaleLayout.PLAIN
        return ScaleLayout.PLAIN  # the size check then names what was expected
    return ScaleLayout.PLAIN
