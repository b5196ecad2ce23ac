"""_torch.py - the torch side of the binding: dtype mapping (torch's
float8_e4m3fn / float8_e5m2 / float8_e8m0fnu), views of torch tensors
(data_ptr, strides in elements, device), output allocation on the tensor's
device, and the current CUDA stream. Imported only once a torch tensor is
seen; nothing here compiles against torch, so one build serves every torch
version that has these documented APIs (float8_e8m0fnu needs torch >= 2.7;
older versions get e8m0 scales as uint8).

The CUDA paths are written against torch's documented API and are exercised
only on a machine with a GPU.
"""
import sys
from typing import Any, Dict

import torch

from ._hooks import torch_loaded
from ._lib import DType
from ._view import View, normalize_strides
from .errors import UnsupportedError

_E8M0 = getattr(torch, "float8_e8m0fnu", None)
TO_TORCH = {DType.F32: torch.float32, DType.F16: torch.float16, DType.BF16: torch.bfloat16,
            DType.E4M3: torch.float8_e4m3fn, DType.E5M2: torch.float8_e5m2,
            DType.E8M0: _E8M0 if _E8M0 is not None else torch.uint8}
FROM_TORCH = {v: k for k, v in TO_TORCH.items() if v is not torch.uint8}

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream(index):
    """cudaStream_t (as an int) of torch's current stream on device `index`."""
    if _raw_stream is not None:
        return _raw_stream(index)
    return torch.cuda.current_stream(index).cuda_stream


_norm_cache: Dict[Any, Any] = {}


def torch_view(t, name, fp8_default=None):
    """View of a torch tensor (CPU or CUDA; meta / fake tensors are refused)."""
    dt = FROM_TORCH.get(t.dtype)
    if dt is None:
        if t.dtype == torch.uint8 and fp8_default is not None:
            dt = fp8_default
        else:
            raise UnsupportedError("%s has dtype %s; fp8kit takes float32, float16, bfloat16, float8_e4m3fn, "
                                   "float8_e5m2 and float8_e8m0fnu (uint8 where an fp8 format is named)"
                                   % (name, t.dtype))
    if t.is_cuda:
        device, index = "cuda", t.get_device()
    elif t.device.type == "cpu":
        device, index = "cpu", 0
    else:
        raise UnsupportedError("%s is on device %s; fp8kit runs on cpu and cuda tensors" % (name, t.device))
    shape, bstr = t.shape, t.stride()
    key = (shape, bstr)
    strides = _norm_cache.get(key)
    if strides is None:
        strides = normalize_strides(name, tuple(shape), tuple(bstr))
        if len(_norm_cache) > 4096:
            _norm_cache.clear()
        _norm_cache[key] = strides
    return View(t.data_ptr(), dt, tuple(shape), strides, device, index, t, "torch")


_grad_enabled = torch.is_grad_enabled
_inference_mode = getattr(torch, "is_inference_mode_enabled", lambda: False)


def readonly_reason(t):
    """Why torch itself would refuse t as an out= tensor, or None: a tensor
    that requires grad while grad mode is on ("functions with out=...
    arguments don't support automatic differentiation"), an inference tensor
    outside inference mode ("Inplace update to inference tensor outside
    InferenceMode"). torch keeps no read-only flag: a tensor over read-only
    memory (torch.frombuffer(bytes), torch.from_numpy of a read-only array;
    torch warns when making one) cannot be told apart."""
    if t.requires_grad and _grad_enabled():
        return "it requires grad and grad mode is on: torch refuses it as out= too (use torch.no_grad() or detach())"
    if t.is_inference() and not _inference_mode():
        return "an inference tensor outside torch.inference_mode(): torch refuses in-place updates of it too"
    return None


def byte_layout(t):
    """The layout (extent in bytes, shape, byte strides, item size) of a torch tensor (see _outputs)."""
    isz = t.element_size()
    shape, st = tuple(t.shape), t.stride()
    span = 0
    for n, s in zip(shape, st):
        span += (n - 1) * s
    return (span * isz + isz, shape, tuple(s * isz for s in st), isz)


def empty(shape, dt, cuda_index):
    """A new torch tensor of fp8kit dtype dt on cuda:cuda_index (None = cpu)."""
    device = torch.device("cuda", cuda_index) if cuda_index is not None else torch.device("cpu")
    return torch.empty(tuple(shape), dtype=TO_TORCH[dt], device=device)


def allocator(shape, dt, cuda_index):
    """A function () -> (tensor, data pointer) making a new tensor of `shape` and
    fp8kit dtype dt on cuda:cuda_index (None = cpu): the scaled_mm plans keep
    one, so a call does not rebuild the dtype and device."""
    shape = tuple(shape)
    device = torch.device("cuda", cuda_index) if cuda_index is not None else torch.device("cpu")
    dtype = TO_TORCH[dt]
    _empty = torch.empty

    def alloc():
        t = _empty(shape, dtype=dtype, device=device)
        return t, t.data_ptr()
    return alloc


def torch_dtype(dt):
    return TO_TORCH[dt]


def out_args(dt, cuda_index):
    """(torch dtype, torch.device) of a new output of fp8kit dtype dt on
    cuda:cuda_index (None = cpu), as the scaled_mm hot path passes them to
    torch.empty_strided."""
    return TO_TORCH[dt], torch.device("cuda", cuda_index) if cuda_index is not None else torch.device("cpu")


_TEMPLATE_ELEMS = 1 << 20  # outputs up to this size get a dense template (see expanded)
_template_bufs: Dict[Any, Any] = {}  # (dtype, device) -> the storage dense templates view


def expanded(shape, dtype, device):
    """A template whose torch.empty_like is a new packed tensor of `shape`,
    dtype and device, found cheaper per call than torch.empty_strided: for
    outputs up to _TEMPLATE_ELEMS elements a packed view of one buffer shared
    per dtype and device (empty_like copies a dense tensor's strides: ~0.3 us
    less per call than the expanded form, H100 host, 2026-11-25), else a
    tensor whose every element is one stored element (strides 0; empty_like
    keeps only non-overlapping dense strides). Needs every dim > 1 (a shape
    of ones is dense, and empty_like would keep the 0 strides)."""
    if min(shape) < 2:
        raise ValueError("expanded: shape %r has a dimension < 2" % (shape,))
    n = shape[0] * shape[1]
    if n <= _TEMPLATE_ELEMS:
        key = (dtype, device)
        buf = _template_bufs.get(key)
        if buf is None or buf.numel() < n:
            # at least doubling: older plans keep views of at most a few smaller buffers
            size = max(n, 1 << 14, 2 * buf.numel() if buf is not None else 0)
            buf = _template_bufs[key] = torch.empty(min(size, _TEMPLATE_ELEMS), dtype=dtype, device=device)
        return buf[:n].view(shape)
    return torch.empty((), dtype=dtype, device=device).expand(shape)


try:  # torch.compile's C++ tensor guard (private; checked below before it is used)
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards
except Exception:  # pragma: no cover - older or newer torch without it
    _TensorGuards = None  # type: ignore[assignment,misc]


def make_guard(tensors):
    """A function check(*others) -> True only when each of `others` has the
    Python type, dtype, device, sizes and strides (also dispatch keys and
    requires_grad) of the tensor in its place: torch.compile's TensorGuards,
    one C++ call for all of them. None where torch has no usable one."""
    if _TensorGuards is None:
        return None
    try:
        return _TensorGuards(*tensors, dynamic_dims_sizes=[list(t.shape) for t in tensors],
                             dynamic_dims_strides=[list(t.stride()) for t in tensors]).check
    except Exception:  # pragma: no cover - an API change: the binding keys plans without it
        return None


def _guard_works():
    """The guard tells apart everything scaled_mm's plan signature does (type,
    dtype, shape, strides, device type): else it is not used."""
    x = torch.zeros(4, 8)
    check = make_guard((x, x[:, :4]))
    if check is None:
        return False
    others = [torch.zeros(8, 4), torch.zeros(4, 8, dtype=torch.float64), torch.zeros(8, 4).t(),
              torch.nn.Parameter(torch.zeros(4, 8)), torch.zeros(4, 8, device="meta"), None]
    try:
        return check(torch.ones(4, 8), torch.ones(4, 8)[:, 2:6]) is True and \
            not any(check(o, x[:, :4]) for o in others) and not check(x, x[:, 4:8].t())
    except Exception:  # pragma: no cover
        return False


if not _guard_works():  # pragma: no cover
    make_guard = None  # type: ignore[assignment]  # noqa: F811

_compiler_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)


def is_compiling():
    return bool(_compiler_is_compiling()) if _compiler_is_compiling is not None else False


# ------------------------------------------------ what scaled_mm's hot path binds
def signature(t):
    """The facts of a torch tensor that scaled_mm's plan cache keys (see
    _gemm.SIGNATURES); its type included: subclasses (Parameter, FakeTensor,
    ...) never share a plan with plain tensors."""
    return (type(t), t.dtype, t.shape, t.stride(), t.device)


# the functions the hot path calls directly (no attribute lookups per call)
compiling = _compiler_is_compiling if _compiler_is_compiling is not None else (lambda: False)
raw_stream = _raw_stream if _raw_stream is not None else current_stream


torch_loaded(sys.modules[__name__])  # last: the hooks see this module complete
