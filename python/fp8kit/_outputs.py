"""_outputs.py - the checks on every array the library writes, made in Python
before any C call (so nothing is written when one fails):

- writable: a numpy array with flags.writeable (a read-only np.memmap, a view
  of an immutable bytes object and an array marked writeable=False are
  refused; so are numpy / Python scalars, which are immutable); a torch tensor
  that torch itself would accept as out= (not one that requires grad while
  grad mode is on, not an inference tensor outside inference mode); a DLPack
  export whose DLPack 1.x flags are not READ_ONLY and whose
  __array_interface__ / __cuda_array_interface__, where it has one, does not
  say read-only (the second element of its `data` tuple).
- disjoint: no output shares a byte with an input or another output. Byte
  ranges [ptr, ptr + extent) from pointer, shape, strides and item size settle
  almost every pair; where two ranges meet, numpy's overlap solver on the two
  layouts (pointers and strides only: no memory is read) tells interleaved
  views that share nothing (two column halves of one array) from real overlap.

A layout is (extent in bytes, shape, byte strides, item size).
"""
import numpy as np

from ._arrays import torch_module
from ._view import ITEMSIZE
from .errors import InvalidArgumentError

_TooHard = getattr(getattr(np, "exceptions", np), "TooHardError", None) or np.TooHardError
_MAX_WORK = 1 << 20  # the solver's effort bound; beyond it the pair counts as overlapping


def layout(v):
    """The layout of a View (strides in elements, all >= 0 after normalize_strides)."""
    isz = ITEMSIZE[v.dtype]
    span = 0
    for n, s in zip(v.shape, v.strides):
        span += (n - 1) * s
    return (span * isz + isz, tuple(v.shape), tuple(s * isz for s in v.strides), isz)


def flat_layout(nbytes, isz=1):
    """The layout of nbytes packed bytes in items of isz bytes."""
    return (nbytes, (nbytes // isz,), (isz,), isz)


class _At:
    """An __array_interface__ at a raw address: np.asarray makes an ndarray of
    it without reading or copying anything (only its bounds are used)."""
    __slots__ = ("__array_interface__",)

    def __init__(self, ptr, lay):
        _, shape, bstrides, isz = lay
        self.__array_interface__ = {"version": 3, "data": (ptr, True), "typestr": "|u1",
                                    "shape": tuple(shape) + (isz,), "strides": tuple(bstrides) + (1,)}


def shares(p1, l1, p2, l2):
    """True when the bytes of layout l1 at p1 and l2 at p2 meet."""
    if not (p1 < p2 + l2[0] and p2 < p1 + l1[0]):
        return False
    if not p1 or not p2:
        return True  # NULL + offset: no array can be made of it; the ranges meet
    try:
        return bool(np.shares_memory(np.asarray(_At(p1, l1)), np.asarray(_At(p2, l2)), max_work=_MAX_WORK))
    except _TooHard:
        return True


def raise_overlap(fn, name, p1, l1, other, p2, l2):
    raise InvalidArgumentError(
        "%s: %s (bytes 0x%x..0x%x) shares memory with %s (bytes 0x%x..0x%x); an output must not overlap an "
        "input or another output (the results would be corrupted): pass separate arrays"
        % (fn, name, p1, p1 + l1[0], other, p2, p2 + l2[0]))


def region(name, v):
    """(name, pointer, layout) of a View, or None for None."""
    return None if v is None else (name, v.ptr, layout(v))


def check_disjoint(fn, outputs, inputs):
    """Raises InvalidArgumentError when an output region overlaps an input
    region or another output region. outputs, inputs: (name, pointer, layout)
    tuples (None entries skipped); see region()."""
    outs = [r for r in outputs if r is not None]
    ins = [r for r in inputs if r is not None]
    for i, (name, p, lay) in enumerate(outs):
        for other, q, lq in outs[:i] + ins:
            if shares(p, lay, q, lq):
                raise_overlap(fn, name, p, lay, other, q, lq)


# ------------------------------------------------------------------ writable
def _interface_readonly(x):
    for attr in ("__array_interface__", "__cuda_array_interface__"):
        try:
            d = getattr(x, attr, None)
        except Exception:  # a producer that raises for the other kind of memory
            continue
        if isinstance(d, dict):
            data = d.get("data")
            if isinstance(data, tuple) and len(data) > 1 and data[1]:
                return "its %s says read-only" % attr
    return None


def readonly_reason(x, v):
    """Why the library may not write the array x (whose View is v), or None."""
    kind = v.kind
    if kind == "numpy":
        if not isinstance(x, np.ndarray):
            return "a %s is an immutable scalar, not an array" % type(x).__name__
        if not x.flags.writeable:
            return ("numpy says it is not writeable: a read-only np.memmap, a view of an immutable bytes object, "
                    "or an array marked writeable=False")
        return None
    if kind == "torch":
        return torch_module().readonly_reason(x)
    keep = v.keep
    if keep is not None and getattr(keep, "readonly", False):
        return "its DLPack export is flagged READ_ONLY"
    return _interface_readonly(x)


def check_writable(x, v, name, fn=None):
    """Raises InvalidArgumentError when the library may not write x (fn: the
    function named in the message)."""
    why = readonly_reason(x, v)
    if why is not None:
        raise InvalidArgumentError("%s%s is read-only (%s); fp8kit writes its outputs in place"
                                   % (fn + ": " if fn else "", name, why))


def numpy_writable(x, name):
    """check_writable for a numpy array (the scaled_mm plans' per-call check of out=)."""
    if not x.flags.writeable:
        raise InvalidArgumentError("%s is read-only (numpy says it is not writeable: a read-only np.memmap, a "
                                   "view of an immutable bytes object, or an array marked writeable=False); "
                                   "fp8kit writes its outputs in place" % name)


_torch_reason = None


def torch_writable(x, name):
    """check_writable for a torch tensor (the scaled_mm plans' per-call check of out=)."""
    global _torch_reason
    if _torch_reason is None:
        _torch_reason = torch_module().readonly_reason
    why = _torch_reason(x)
    if why is not None:
        raise InvalidArgumentError("%s is read-only (%s); fp8kit writes its outputs in place" % (name, why))
