"""fp8kit - Python binding of libfp8kit (FP8 / MXFP8 quantization and scaled
GEMM) through ctypes: no compilation against torch or numpy, one build for
every torch version.

    import fp8kit
    q, s = fp8kit.quantize(x, scheme="row")            # numpy, torch or __dlpack__ input
    y = fp8kit.scaled_mm(qa, qb.t(), sa, sb.t(), out_dtype=torch.bfloat16)

    fp8kit.quantize_checkpoint("model/", "model-fp8/", scheme="block")   # safetensors checkpoints

numpy arrays run on the CPU backend; torch CUDA tensors on the CUDA backend,
on torch's current stream. fp8 results for numpy callers are TaggedArray
(raw uint8 bits with an `fk_dtype` tag); torch callers get torch's float8
dtypes. Errors raise FP8KitError subclasses carrying the C status and the
library's message. See docs/python.md.
"""
import sys as _sys
from typing import Optional as _Optional, Tuple as _Tuple, Union as _Union

import numpy as _np

from . import _lib
from ._lib import (Activation, Backend, BiasMode, DType, GemmArgs, GemmDesc, LibraryNotFoundError,
                   LibraryVersionError, OutQuant, QuantDesc, Rounding, ScaleLayout, ScaleMode, Scheme, Status, Tensor,
                   candidate_paths, library_path)
from ._arrays import TaggedArray, torch_module as _torch_module
from ._hooks import on_torch as _on_torch
from ._names import dtype_of_name
from ._context import Context, clear_contexts, get_context, parse_device
from ._context import DeviceLike as _DeviceLike
from ._quant import cast, dequantize, make_quant_desc, quantize
from ._quant import quant_shapes as _quant_shapes
from ._typing import Array as _Array, DTypeLike as _DTypeLike
from ._gemm import scaled_mm as _gemm_scaled_mm
from ._grouped import grouped_mm, grouped_mm_describe
from ._k_grouped import k_grouped_mm
from ._checkpoint import CheckpointReport, dequantize_checkpoint, quantize_checkpoint
from .errors import (ArchMismatchError, BackendUnavailableError, CorruptFileError, DeviceError, FP8KitError,
                     InternalError, InvalidArgumentError, InvalidShapeError, InvalidStrideError, IOFailedError,
                     MisalignedError, NullPointerError, OutOfMemoryError, SizeOverflowError, UnsupportedError,
                     WorkspaceTooSmallError)

# the one version of fp8kit is include/fp8kit.h's FP8KIT_VERSION_* (the wheel build writes it into
# fp8kit/_version.py; from the source tree it is read from the header); loading a libfp8kit of
# another version raises LibraryVersionError
__version__ = _lib.package_version()

__all__ = [
    "quantize", "dequantize", "cast", "scaled_mm", "grouped_mm", "grouped_mm_describe", "k_grouped_mm", "quant_shapes", "to_float32",
    "TaggedArray",
    "quantize_checkpoint", "dequantize_checkpoint", "CheckpointReport",
    "Context", "get_context", "clear_contexts", "parse_device", "version", "library_path", "backend_available",
    "FP8KitError", "LibraryNotFoundError", "LibraryVersionError", "Status", "DType", "Backend", "Scheme",
    "Rounding", "ScaleLayout", "ScaleMode", "Activation", "BiasMode", "OutQuant",
]


def version() -> str:
    """Version string of the loaded C library ("MAJOR.MINOR.PATCH"; loading
    checks that it is __version__)."""
    return _lib.decode(_lib.load().fp8kit_version_string())


def backend_available(backend: _DeviceLike) -> bool:
    """True when `backend` ('cpu', 'cuda', 'cuda:N', a torch.device or a
    Backend) is built in and usable."""
    backend, _ = parse_device(backend)
    return bool(_lib.load().fp8kit_backend_available(int(backend)))


def quant_shapes(shape: _Tuple[int, ...], scheme: _Union[str, Scheme] = "tensor", dtype: _DTypeLike = "e4m3",
                 axis: _Union[int, str] = -1, scale_layout: _Union[str, ScaleLayout] = "plain"
                 ) -> _Tuple[_Tuple[int, ...], _Tuple[int, ...], str]:
    """(q_shape, scale_shape, scale_dtype name) that quantize produces for an
    input of `shape`, without running anything; scheme, dtype, axis and
    scale_layout as quantize takes them."""
    desc = make_quant_desc(scheme, dtype, axis, "floor", False, scale_layout)
    q, s, sdt = _quant_shapes(shape, desc)
    return q, s, sdt.name.lower()


# the raw path (straight to the C library; routes torch tensors to
# torch.ops.fp8kit.scaled_mm while torch.compile traces)
scaled_mm = _gemm_scaled_mm



def _register_torch_ops(_torch):
    """Registers torch.ops.fp8kit.* (fp8kit.torch_ops) once torch tensors are seen."""
    try:
        from . import torch_ops  # noqa: F401
    except Exception:  # an old torch without torch.library.register_fake: the raw path still works
        pass


_on_torch(_register_torch_ops)
if "torch" in _sys.modules:  # torch already imported: bind it and register torch.ops.fp8kit.* now
    try:
        _torch_module()
    except Exception:  # a torch too old for fp8kit (no float8 dtypes): numpy callers are unaffected
        pass


def to_float32(x: _Array, dtype: _Optional[_DTypeLike] = None) -> _np.ndarray:
    """Decodes a numpy array x of fp8kit codes (TaggedArray, ml_dtypes or
    uint8 with `dtype` naming the codes) to float32: e4m3/e5m2 and bf16
    exactly, e8m0 scale bytes to 2^(s-127) (255 -> NaN). float32/float16
    arrays are converted."""
    arr = _np.asarray(x)
    tag = getattr(x, "fk_dtype", None)
    if dtype is not None:
        tag = dtype_of_name(dtype)
    if tag is None:
        if arr.dtype in (_np.float32, _np.float16):
            return arr.astype(_np.float32)
        tag = dtype_of_name(arr.dtype)
    bits = arr.view(_np.uint16 if tag == DType.BF16 else (_np.uint8 if tag in (DType.E4M3, DType.E5M2, DType.E8M0)
                                                          else arr.dtype))
    if tag == DType.BF16:
        return (bits.astype(_np.uint32) << 16).view(_np.float32)
    if tag == DType.E8M0:
        out = _np.ldexp(_np.float32(1.0), bits.astype(_np.int32) - 127).astype(_np.float32)
        out[bits == 255] = _np.nan
        return out
    if tag in (DType.E4M3, DType.E5M2):
        return cast(TaggedArray(_np.ascontiguousarray(bits), tag), "float32")
    return arr.astype(_np.float32)
