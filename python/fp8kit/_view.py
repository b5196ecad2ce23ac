"""_view.py - what the binding knows of one array, whatever made it: View
(data pointer, fp8kit dtype, shape and strides in elements, device, owner),
the numpy storage dtype and item size of each fp8kit dtype, and the stride
rules every array kind goes through (normalize_strides). Below _arrays.py
(numpy and DLPack arrays) and _torch.py (torch tensors), which both make
Views.
"""
from typing import Any, Dict

import numpy as np

from ._lib import DType, MAX_DIMS
from .errors import InvalidShapeError, InvalidStrideError

# storage dtype of each fp8kit dtype in numpy
STORAGE: Dict[DType, Any] = {DType.F32: np.dtype(np.float32), DType.F16: np.dtype(np.float16),
           DType.BF16: np.dtype(np.uint16), DType.E4M3: np.dtype(np.uint8),
           DType.E5M2: np.dtype(np.uint8), DType.E8M0: np.dtype(np.uint8)}
ITEMSIZE = {d: STORAGE[d].itemsize for d in DType}


class View:
    """What fp8kit needs to know about one array: data pointer, fp8kit dtype,
    shape and strides (elements), device ("cpu" or "cuda", index), and the
    owning object (kept alive while the view is). kind: "numpy", "torch" or
    "dlpack" - which allocator makes outputs for it."""
    __slots__ = ("ptr", "dtype", "shape", "strides", "device", "index", "owner", "kind", "keep")

    def __init__(self, ptr, dtype, shape, strides, device, index, owner, kind, keep=None):
        self.ptr, self.dtype, self.shape, self.strides = ptr, dtype, shape, strides
        self.device, self.index, self.owner, self.kind, self.keep = device, index, owner, kind, keep

    def fill(self, t):
        """Writes this view into an fp8kit Tensor struct t."""
        t.data = self.ptr
        t.dtype = self.dtype
        n = len(self.shape)
        t.ndim = n
        for i in range(n):
            t.shape[i] = self.shape[i]
            t.strides[i] = self.strides[i]
        for i in range(n, MAX_DIMS):
            t.shape[i] = 0
            t.strides[i] = 0


def normalize_strides(name, shape, strides):
    """Validates element strides (no negative, no zero stride on a dim > 1 - a
    broadcast view - and not more than 4 dims) and gives size-1 dims the
    row-major value, so fp8kit's nesting rule sees a plain layout."""
    n = len(shape)
    if n > MAX_DIMS:
        raise InvalidShapeError("%s has %d dims; fp8kit takes at most %d" % (name, n, MAX_DIMS))
    if 0 in shape:
        raise InvalidShapeError("%s has an empty dim (shape %s)" % (name, tuple(shape)))
    out = list(strides)
    extent = 1
    for i in range(n - 1, -1, -1):
        if shape[i] == 1:
            out[i] = extent if i < n - 1 else 1
        elif out[i] <= 0:
            raise InvalidStrideError("%s has stride %d on dim %d (broadcast or reversed views are not accepted; "
                                     "make the array contiguous first)" % (name, out[i], i))
        extent = max(extent, out[i] * (shape[i] - 1) + extent) if shape[i] > 1 else extent
    return tuple(out)
