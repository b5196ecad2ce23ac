"""_arrays.py - turning user arrays into fp8kit tensor views, and allocating
outputs: numpy arrays (with the TaggedArray dtype tag or ml_dtypes dtypes),
any object with __dlpack__ (a minimal DLPack consumer), and torch tensors
(delegated to _torch.py, imported only when a torch tensor is seen).

numpy has no fp8 or bf16 dtype. fp8kit hands such arrays back as a
TaggedArray: an ndarray of the raw bits (uint8 for e4m3/e5m2/e8m0, uint16 for
bf16) whose `fk_dtype` attribute says what the bits are. Inputs may be a
TaggedArray, an ml_dtypes array (float8_e4m3fn, float8_e5m2, float8_e8m0fnu,
bfloat16; ml_dtypes is optional), or a plain uint8 array together with the
function's explicit dtype argument.
"""
import ctypes
from typing import Any, Dict

import numpy as np

from ._lib import DType
from ._names import DTYPES, dtype_of_name
from ._view import STORAGE, View, normalize_strides
from .errors import InvalidArgumentError, InvalidStrideError, UnsupportedError

class TaggedArray(np.ndarray):
    """An ndarray of raw bits tagged with the fp8kit dtype they encode
    (attribute `fk_dtype`, a DType). np.asarray(t) gives the plain bits back.
    Views and slices keep the tag; results of another storage dtype drop it."""

    def __new__(cls, bits: Any, fk_dtype: Any) -> "TaggedArray":
        fk_dtype = DType(fk_dtype) if isinstance(fk_dtype, int) else dtype_of_name(fk_dtype, "fk_dtype")
        arr = np.asarray(bits)
        if arr.dtype != STORAGE[fk_dtype]:
            raise InvalidArgumentError("a %s TaggedArray stores %s bits, not %s" % (
                fk_dtype.name.lower(), STORAGE[fk_dtype].name, arr.dtype.name))
        obj = arr.view(cls)
        obj.fk_dtype = fk_dtype
        return obj

    def __array_finalize__(self, obj):
        tag = getattr(obj, "fk_dtype", None)
        self.fk_dtype = tag if tag is not None and self.dtype == STORAGE[tag] else None

    def __reduce__(self):  # pickling keeps the tag
        fn, args, state = super().__reduce__()
        return fn, args, (state, self.fk_dtype)

    def __setstate__(self, state):
        super().__setstate__(state[0])
        self.fk_dtype = state[1]

    def __repr__(self):
        tag = self.fk_dtype.name.lower() if self.fk_dtype is not None else "untagged"
        return "TaggedArray(%s, fk_dtype=%s)" % (np.asarray(self).__repr__(), tag)


# ------------------------------------------------------------------ numpy
def _ml_dtypes_tag(nd):
    # ml_dtypes arrays are recognised by their dtype name; ml_dtypes is never imported here
    return DTYPES.get(nd.name) if nd.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu") else None


_NP_BY_NUM = {np.dtype(np.float32).num: DType.F32, np.dtype(np.float16).num: DType.F16}
_norm_cache: Dict[Any, Any] = {}
_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _numpy_dtype_slow(nd, name, fp8_default):
    if not nd.isnative:
        raise UnsupportedError("%s has numpy dtype %s in non-native byte order; convert it first "
                               "(arr.astype(arr.dtype.newbyteorder('=')))" % (name, nd.str))
    dt = _ml_dtypes_tag(nd)
    if dt is not None:
        if nd.num >= 256:  # a user-defined (ml_dtypes) dtype: remember it by number
            _NP_BY_NUM[nd.num] = dt
        return dt
    if nd == np.uint8 and fp8_default is not None:
        return fp8_default
    if nd == np.uint8:
        raise UnsupportedError("%s is an untagged uint8 array: say which fp8 format it holds "
                               "(fp8kit.TaggedArray(arr, 'e4m3') or the dtype argument)" % name)
    raise UnsupportedError("%s has numpy dtype %s; fp8kit takes float32, float16, bfloat16 "
                           "(ml_dtypes or a TaggedArray) and fp8 codes" % (name, nd.name))


def numpy_ptr(arr):
    """Address of arr's first element (the cheap route for writable packed arrays)."""
    try:
        if arr.flags.c_contiguous:
            return _addressof(_from_buffer(arr))
        if arr.flags.f_contiguous:
            return _addressof(_from_buffer(arr.T))
    except (TypeError, ValueError, BufferError):  # read-only or otherwise not exportable
        pass
    return arr.ctypes.data


def numpy_ptr_c(arr):
    """numpy_ptr for an array known to be C-contiguous (plans pick it once)."""
    try:
        return _addressof(_from_buffer(arr))
    except (TypeError, ValueError, BufferError):
        return arr.ctypes.data


def numpy_ptr_f(arr):
    """numpy_ptr for an array known to be Fortran-contiguous (e.g. w.T)."""
    try:
        return _addressof(_from_buffer(arr.T))
    except (TypeError, ValueError, BufferError):
        return arr.ctypes.data


def numpy_pointer_getter(arr):
    """The cheapest correct data-pointer function for arrays laid out like arr."""
    if arr.flags.c_contiguous:
        return numpy_ptr_c
    if arr.flags.f_contiguous:
        return numpy_ptr_f
    return numpy_ptr


def numpy_view(arr, name, fp8_default=None):
    """View of a numpy array. fp8_default: the DType assumed for an untagged
    uint8 array (None: untagged uint8 is refused)."""
    nd = arr.dtype
    dt = getattr(arr, "fk_dtype", None)
    if dt is None:
        dt = _NP_BY_NUM.get(nd.num)
        if dt is None or not nd.isnative:
            dt = _numpy_dtype_slow(nd, name, fp8_default)
    shape, bstr = arr.shape, arr.strides
    key = (shape, bstr, nd.itemsize)
    strides = _norm_cache.get(key)
    if strides is None:
        isz = nd.itemsize
        for s in bstr:
            if s % isz:
                raise InvalidStrideError("%s has a byte stride %d that is not a multiple of its item size %d"
                                         % (name, s, isz))
        strides = normalize_strides(name, shape, tuple(s // isz for s in bstr))
        if len(_norm_cache) > 4096:
            _norm_cache.clear()
        _norm_cache[key] = strides
    return View(numpy_ptr(arr), dt, shape, strides, "cpu", 0, arr, "numpy")


def numpy_empty(shape, dt):
    a = np.empty(shape, dtype=STORAGE[dt])
    if dt in (DType.F32, DType.F16):
        return a
    return TaggedArray(a, dt)


# ----------------------------------------------------------------- DLPack
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    pass


_DLManaged._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                       ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManaged)))]


class _DLManagedVersioned(ctypes.Structure):
    pass


_DLManagedVersioned._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                                ("manager_ctx", ctypes.c_void_p),
                                ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedVersioned))),
                                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]

_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DTYPES = {(2, 32): DType.F32, (2, 16): DType.F16, (4, 16): DType.BF16,
              (10, 8): DType.E4M3, (12, 8): DType.E5M2, (14, 8): DType.E8M0}

_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]


_DL_FLAG_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY of a DLPack 1.x export


class _DLOwner:
    """Holds a consumed DLPack tensor; calls the producer's deleter when dropped.
    readonly: the export's DLPack 1.x READ_ONLY flag (unversioned exports have none)."""

    def __init__(self, managed, obj, readonly=False):
        self.managed, self.obj, self.readonly = managed, obj, readonly

    def __del__(self):
        m, self.managed = self.managed, None
        if m is not None and m.contents.deleter:
            m.contents.deleter(m)


def dlpack_view(obj, name, fp8_default=None, stream=None):
    """View of any object with __dlpack__ (CPU, CUDA, CUDA host/managed memory)."""
    kwargs = {}
    dev = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else None
    if dev is not None and int(dev[0]) == _DL_CUDA and stream is not None:
        kwargs["stream"] = stream
    try:
        cap = obj.__dlpack__(max_version=(1, 0), **kwargs)
    except TypeError:
        cap = obj.__dlpack__(**kwargs)
    if _capsule_is_valid(cap, b"dltensor_versioned"):
        ptr = _capsule_get(cap, b"dltensor_versioned")
        managed = ctypes.cast(ptr, ctypes.POINTER(_DLManagedVersioned))
        _capsule_set_name(cap, b"used_dltensor_versioned")
    elif _capsule_is_valid(cap, b"dltensor"):
        ptr = _capsule_get(cap, b"dltensor")
        managed = ctypes.cast(ptr, ctypes.POINTER(_DLManaged))
        _capsule_set_name(cap, b"used_dltensor")
    else:
        raise UnsupportedError("%s: __dlpack__ did not return a DLPack capsule" % name)
    readonly = isinstance(managed.contents, _DLManagedVersioned) and bool(managed.contents.flags & _DL_FLAG_READ_ONLY)
    owner = _DLOwner(managed, obj, readonly)
    t = managed.contents.dl_tensor
    dtype = t.dtype
    if dtype.lanes != 1:
        raise UnsupportedError("%s: vector DLPack dtypes (lanes %d) are not supported" % (name, dtype.lanes))
    dt = _DL_DTYPES.get((dtype.code, dtype.bits))
    if dt is None and (dtype.code, dtype.bits) == (1, 8) and fp8_default is not None:
        dt = fp8_default
    if dt is None:
        raise UnsupportedError("%s: DLPack dtype code %d, %d bits has no fp8kit equivalent"
                               % (name, dtype.code, dtype.bits))
    dtype_dev = t.device.device_type
    if dtype_dev in (_DL_CPU, _DL_CUDA_HOST):
        device = "cpu"
    elif dtype_dev in (_DL_CUDA, _DL_CUDA_MANAGED):
        device = "cuda"
    else:
        raise UnsupportedError("%s: DLPack device type %d is neither CPU nor CUDA" % (name, dtype_dev))
    n = t.ndim
    shape = tuple(t.shape[i] for i in range(n))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(n))
    else:
        strides, s = [0] * n, 1
        for i in range(n - 1, -1, -1):
            strides[i] = s
            s *= shape[i]
        strides = tuple(strides)
    strides = normalize_strides(name, shape, strides)
    ptr = (t.data or 0) + t.byte_offset
    return View(ptr, dt, shape, strides, device, int(t.device.device_id), obj, "dlpack", keep=owner)


# ------------------------------------------------------------------ dispatch
_torch_mod = None


def torch_module():
    """fp8kit._torch, imported on first use (it imports torch; see _hooks)."""
    global _torch_mod
    if _torch_mod is None:
        from . import _torch
        _torch_mod = _torch
    return _torch_mod


def is_torch_tensor(x):
    t = type(x)
    return t.__module__.startswith("torch") and hasattr(x, "data_ptr") and hasattr(x, "stride")


def as_view(x, name, fp8_default=None, stream=None):
    """A View of x: numpy array, torch tensor or any __dlpack__ object."""
    if isinstance(x, np.ndarray):
        return numpy_view(x, name, fp8_default)
    if is_torch_tensor(x):
        return torch_module().torch_view(x, name, fp8_default)
    if hasattr(x, "__dlpack__"):
        return dlpack_view(x, name, fp8_default, stream)
    if isinstance(x, np.generic):
        return numpy_view(np.asarray(x), name, fp8_default)
    if isinstance(x, (float, int)) and not isinstance(x, bool):
        return numpy_view(np.asarray(x, dtype=np.float32), name, fp8_default)
    raise UnsupportedError("%s: a %s is not an array (numpy array, torch tensor or an object with __dlpack__)"
                           % (name, type(x).__name__))
