"""_names.py - the names the binding takes for the library's enums, asked of
the C library, which keeps one table per enum (src/core/names.c;
fp8kit_<enum>_name / _parse / _alias): dtypes, quantization schemes and the
checkpoint converter's scheme names, MX roundings, scale layouts, GEMM scale
modes, activations, output quantization and grouped layouts. Nothing here
lists a name. Also the functions that turn an argument (a name in any case,
an IntEnum or its value; for dtypes also a numpy or torch dtype) into the
enum: enum_of, dtype_of_name, activation_of.
"""
import ctypes
import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _lib
from ._cstr import c_text
from ._lib import Activation, Backend, DType, GroupedLayout, OutQuant, Rounding, ScaleLayout, ScaleMode, Scheme
from .errors import InvalidArgumentError, UnsupportedError


_MAX_VALUES = 32  # every named enum has fewer values (the CLI keeps them in 32-bit masks too)


class LibraryNames(Mapping):
    """Names -> members of enum_type, as the C library names `enum` (one of
    _lib.NAMED_ENUMS): iterating gives the canonical names in value order
    (fp8kit_<enum>_name of each value that has one), a
    lookup takes the aliases too, in any ASCII case (fp8kit_<enum>_parse);
    aliases(member) lists a member's other spellings (fp8kit_<enum>_alias).
    A value the IntEnum mirror lacks comes back as the int itself."""

    def __init__(self, enum, enum_type):
        self.enum, self.enum_type = enum, enum_type
        self._canonical = None
        self._parse = functools.lru_cache(maxsize=256)(self._parse_uncached)

    def _fn(self, kind):
        return getattr(_lib.load(), "fp8kit_%s_%s" % (self.enum, kind))

    def _member(self, v):
        try:
            return self.enum_type(v)
        except ValueError:
            return int(v)

    def _names(self):
        if self._canonical is None:
            name_of, names = self._fn("name"), {}
            for v in range(_MAX_VALUES):
                n = name_of(v)
                if n is not None and n != b"invalid":  # dtypes and backends say "invalid" outside the enum
                    names[_lib.decode(n)] = self._member(v)
            self._canonical = names
        return self._canonical

    def _parse_uncached(self, name, what):
        out = _lib._enum_t(-1)
        if self._fn("parse")(c_text(name, what), ctypes.byref(out)) != 0:
            return None, _lib.decode(_lib.load().fp8kit_last_error(None))
        return self._member(out.value), None

    def parse(self, name, what):
        """(member, None) for the str `name`, or (None, the library's message
        listing every name); InvalidArgumentError for a name C cannot take
        (a NUL character). `what` names the argument."""
        return self._parse(name, what)

    def name_of(self, member):
        """The canonical name of member, None where it has none."""
        n = self._fn("name")(int(member))
        return None if n is None or n == b"invalid" else _lib.decode(n)

    def aliases(self, member):
        """The other spellings of member, in the library's order."""
        alias, out, i = self._fn("alias"), [], 0
        while True:
            n = alias(int(member), i)
            if n is None:
                return out
            out.append(_lib.decode(n))
            i += 1

    def __getitem__(self, name):
        if isinstance(name, str) and "\0" not in name:
            member, _ = self._parse(name, "name")
            if member is not None:
                return member
        raise KeyError(name)

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())


class CheckpointSchemes(LibraryNames):
    """The checkpoint converter's scheme names (fp8kit_ckpt_scheme_*): a
    lookup that is no checkpoint scheme name but a quantization scheme name
    (block1x128, 1x128) gives that scheme, so that the converter says why it
    refuses it (checkpoints quantize weights)."""

    def _parse_uncached(self, name, what):
        member, msg = super()._parse_uncached(name, what)
        if member is None:
            other, _ = SCHEMES._parse_uncached(name, what)
            if other is not None:
                return other, None
        return member, msg


class CanonicalNames(Mapping):
    """member -> canonical name of a LibraryNames (members without one left out)."""

    def __init__(self, names):
        self.names = names

    def __getitem__(self, member):
        n = self.names.name_of(member) if isinstance(member, int) else None
        if n is None:
            raise KeyError(member)
        return n

    def __iter__(self):
        return iter(self.names.values())

    def __len__(self):
        return len(self.names)


DTYPES = LibraryNames("dtype", DType)
BACKENDS = LibraryNames("backend", Backend)
SCHEMES = LibraryNames("scheme", Scheme)
CKPT_SCHEMES = CheckpointSchemes("ckpt_scheme", Scheme)
CKPT_SCHEME_NAMES = CanonicalNames(CKPT_SCHEMES)
ROUNDINGS = LibraryNames("rounding", Rounding)
SCALE_LAYOUTS = LibraryNames("scale_layout", ScaleLayout)
SCALE_MODES = LibraryNames("scale_mode", ScaleMode)
ACTIVATIONS = LibraryNames("activation", Activation)
OUT_QUANTS = LibraryNames("out_quant", OutQuant)
GROUPED_LAYOUTS = LibraryNames("grouped_layout", GroupedLayout)


def enum_of(table, value, what, enum_type):
    """The enum_type member `value` names: a member, a name of `table` (a
    LibraryNames: any case, aliases too) or the member's int value; else
    InvalidArgumentError naming `what` with the library's list of names."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        member, msg = table.parse(value, what)
        if member is None:
            raise InvalidArgumentError("%s %r: %s" % (what, value, msg))
        return member
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_type(value)
        except ValueError:
            pass
    raise InvalidArgumentError("%s %r is not one of %s" % (what, value, ", ".join(table)))


def dtype_of_name(x: Any, what: str = "dtype") -> DType:
    """An fp8kit DType from x: a DType, a name the library takes ('e4m3',
    'float8_e4m3fn', 'bf16', ..., any case, a 'torch.' prefix allowed), a
    numpy / ml_dtypes dtype or a torch dtype. `what` names the argument in
    errors."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        key = x[6:] if x[:6].lower() == "torch." else x
        member, msg = DTYPES.parse(key, what)
        if member is None:
            raise InvalidArgumentError("%s %r: %s" % (what, x, msg))
        return member
    if type(x).__module__ == "torch" or type(x).__name__ == "dtype" and hasattr(x, "is_floating_point"):
        return dtype_of_name(str(x), what)
    try:
        nd = np.dtype(x)
    except TypeError:
        raise InvalidArgumentError("%s %r is not a dtype" % (what, x)) from None
    member = DTYPES.get(nd.name)
    if member is None:
        raise UnsupportedError("%s %s has no fp8kit equivalent" % (what, nd.name))
    return member


def activation_of(activation):
    """The desc.act of an activation= argument: None (no activation), an Activation
    or its value, or a name the C library accepts (ACTIVATIONS)."""
    if activation is None:
        return Activation.NONE
    return enum_of(ACTIVATIONS, activation, "activation", Activation)
