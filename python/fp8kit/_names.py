"""_names.py - the names the binding takes for the library's enums, in any
case: dtypes, quantization schemes (and the checkpoint converter's scheme
names), GEMM scale modes, scale layouts, MX roundings, output quantization and
activations; and the functions that turn an argument (a name, an IntEnum or
its value, for dtypes also a numpy or torch dtype) into the enum: enum_of,
dtype_of_name, activation_of. Every module that takes a name reads it here.
"""
import ctypes
import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _lib
from ._lib import Activation, DType, OutQuant, Rounding, ScaleLayout, ScaleMode, Scheme, Status
from .errors import InvalidArgumentError, UnsupportedError

DTYPES = {
    "f32": DType.F32, "float32": DType.F32, "float": DType.F32, "fp32": DType.F32,
    "f16": DType.F16, "float16": DType.F16, "half": DType.F16, "fp16": DType.F16,
    "bf16": DType.BF16, "bfloat16": DType.BF16,
    "e4m3": DType.E4M3, "float8_e4m3fn": DType.E4M3, "e4m3fn": DType.E4M3, "fp8_e4m3": DType.E4M3,
    "e5m2": DType.E5M2, "float8_e5m2": DType.E5M2, "fp8_e5m2": DType.E5M2,
    "e8m0": DType.E8M0, "float8_e8m0fnu": DType.E8M0, "e8m0fnu": DType.E8M0,
}


def dtype_of_name(x: Any, what: str = "dtype") -> DType:
    """An fp8kit DType from x: a DType, a string ('e4m3', 'float8_e4m3fn', 'bf16', ...),
    a numpy/ml_dtypes dtype or a torch dtype. `what` names the argument in errors."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        key = x.lower()
        if key.startswith("torch."):
            key = key[6:]
        if key in DTYPES:
            return DTYPES[key]
        raise InvalidArgumentError("%s %r is not a known dtype name (one of %s)" % (what, x, ", ".join(sorted(DTYPES))))
    if type(x).__module__ == "torch" or type(x).__name__ == "dtype" and hasattr(x, "is_floating_point"):
        return dtype_of_name(str(x), what)
    try:
        nd = np.dtype(x)
    except TypeError:
        raise InvalidArgumentError("%s %r is not a dtype" % (what, x)) from None
    if nd.name in DTYPES:
        return DTYPES[nd.name]
    raise UnsupportedError("%s %s has no fp8kit equivalent" % (what, nd.name))



SCHEMES = {
    "tensor": Scheme.TENSOR, "tensorwise": Scheme.TENSOR, "per_tensor": Scheme.TENSOR,
    "row": Scheme.ROW, "rowwise": Scheme.ROW, "per_row": Scheme.ROW,
    "block1x128": Scheme.BLOCK1X128, "1x128": Scheme.BLOCK1X128,
    "block128x128": Scheme.BLOCK128X128, "128x128": Scheme.BLOCK128X128,
    "mx": Scheme.MX, "mxfp8": Scheme.MX,
}
ROUNDINGS = {"floor": Rounding.FLOOR, "rceil": Rounding.RCEIL}
SCALE_LAYOUTS = {"plain": ScaleLayout.PLAIN, "blocked": ScaleLayout.BLOCKED, "swizzled": ScaleLayout.BLOCKED,
                 "mn_major": ScaleLayout.MN_MAJOR}
# the checkpoint converter's scheme names (docs/spec.md section 5, `fp8kit quantize --scheme`) first, then
# the scheme names of the same scaling
CKPT_SCHEMES = {
    "fp8-tensor": Scheme.TENSOR, "tensor": Scheme.TENSOR, "tensorwise": Scheme.TENSOR, "per_tensor": Scheme.TENSOR,
    "fp8-row": Scheme.ROW, "row": Scheme.ROW, "rowwise": Scheme.ROW, "per_row": Scheme.ROW,
    "fp8-block": Scheme.BLOCK128X128, "block": Scheme.BLOCK128X128, "block128x128": Scheme.BLOCK128X128,
    "128x128": Scheme.BLOCK128X128,
    "mxfp8": Scheme.MX, "mx": Scheme.MX,
    # accepted here so that the C library says why it is refused (an activation scheme)
    "block1x128": Scheme.BLOCK1X128, "1x128": Scheme.BLOCK1X128,
}
CKPT_SCHEME_NAMES = {Scheme.TENSOR: "fp8-tensor", Scheme.ROW: "fp8-row", Scheme.BLOCK128X128: "fp8-block",
                     Scheme.MX: "mxfp8", Scheme.BLOCK1X128: "block1x128"}
SCALE_MODES = {"none": ScaleMode.NONE, "tensor": ScaleMode.TENSOR, "tensorwise": ScaleMode.TENSOR,
               "row": ScaleMode.ROW, "rowwise": ScaleMode.ROW, "block": ScaleMode.BLOCK,
               "blockwise": ScaleMode.BLOCK, "mx": ScaleMode.MX, "mxfp8": ScaleMode.MX}
OUT_QUANTS = {"none": OutQuant.NONE, "scaled": OutQuant.SCALED, "mx": OutQuant.MX,
              "block1x128": OutQuant.BLOCK1X128}


def enum_of(table, value, what, enum_type):
    """The enum_type member `value` names: a member, a name of `table` (any
    case) or the member's int value; else InvalidArgumentError naming `what`."""
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


def _activation_value(v):
    """The Activation of C value v (the int itself for a value the IntEnum mirror lacks)."""
    try:
        return Activation(v)
    except ValueError:
        return int(v)


@functools.lru_cache(maxsize=64)
def _parse_activation(name):
    """fp8kit_activation_parse(name): (Activation, None), or (None, the library's message)."""
    lib = _lib.load()
    parse = getattr(lib, "fp8kit_activation_parse", None)
    if parse is None:  # a library older than the function: the IntEnum's spellings
        m = Activation.__members__.get(name.upper())
        return (m, None) if m is not None else (None, "not one of " + ", ".join(sorted(ACTIVATIONS)))
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        raw = None
    if raw is None or b"\0" in raw:
        return None, "not an activation name"
    out = _lib._enum_t(-1)
    if parse(raw, ctypes.byref(out)) != Status.OK:
        return None, _lib.decode(lib.fp8kit_last_error(None))
    return _activation_value(out.value), None


class _LibraryActivations(Mapping):
    """ACTIVATIONS: activation names -> Activation, as the C library names them
    (one table, src/core/names.c), asked on first use: iterating gives the
    canonical names (fp8kit_activation_name of each value), a lookup takes
    the aliases too ('gelu', 'swish'), in any case (fp8kit_activation_parse)."""

    _canonical = None

    def _names(self):
        if self._canonical is None:
            lib = _lib.load()
            name_of = getattr(lib, "fp8kit_activation_name", None)
            if name_of is None:  # a library older than the function
                names = {m.name.lower(): m for m in Activation}
            else:
                names, v = {}, 0
                while v < 1024:
                    n = name_of(v)
                    if n is None:
                        break
                    names[_lib.decode(n)] = _activation_value(v)
                    v += 1
            self._canonical = names
        return self._canonical

    def __getitem__(self, name):
        if isinstance(name, str):
            act, _ = _parse_activation(name.lower())
            if act is not None:
                return act
        raise KeyError(name)

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())


ACTIVATIONS = _LibraryActivations()


def activation_of(activation):
    """The desc.act of an activation= argument: None (no activation), an Activation
    or its value, or a name the C library accepts (ACTIVATIONS)."""
    if activation is None:
        return Activation.NONE
    if isinstance(activation, str):
        act, msg = _parse_activation(activation.lower())
        if act is None:
            raise InvalidArgumentError("activation %r: %s" % (activation, msg))
        return act
    return enum_of(ACTIVATIONS, activation, "activation", Activation)


