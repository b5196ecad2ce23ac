"""test_names.py - the Python binding's names of the library's enums are
exactly the library's (fp8kit_<enum>_name / _alias, asked here through ctypes
directly): each table of fp8kit._names lists the library's canonical names in
value order and its aliases; every spelling, in any case, round-trips to its
value through the functions that take names (enum_of, dtype_of_name,
activation_of, make_quant_desc, scaled_mm's scale_mode / out_quant,
grouped_mm's layout, k_grouped_mm's scale_mode, parse_device, the checkpoint
converter's scheme); a name the library refuses is refused with the
library's message; and no module of the package keeps a table of such names
of its own (a dict literal keyed by them)."""
import ast
import ctypes
import os

import numpy as np
import pytest

import fp8kit
from fp8kit import _k_grouped, _lib, _names
from fp8kit._lib import (Activation, Backend, DType, GroupedLayout, OutQuant, Rounding, ScaleLayout, ScaleMode,
                         Scheme)

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fp8kit")
TABLES = {  # enum -> (the binding's table, IntEnum)
    "dtype": (_names.DTYPES, DType), "backend": (_names.BACKENDS, Backend), "scheme": (_names.SCHEMES, Scheme),
    "ckpt_scheme": (_names.CKPT_SCHEMES, Scheme), "rounding": (_names.ROUNDINGS, Rounding),
    "scale_layout": (_names.SCALE_LAYOUTS, ScaleLayout), "scale_mode": (_names.SCALE_MODES, ScaleMode),
    "activation": (_names.ACTIVATIONS, Activation), "out_quant": (_names.OUT_QUANTS, OutQuant),
    "grouped_layout": (_names.GROUPED_LAYOUTS, GroupedLayout),
}


def library_names(enum):
    """[(value, canonical name, [aliases])] straight from the C library."""
    lib = ctypes.CDLL(_lib.library_path())
    name, alias = getattr(lib, "fp8kit_%s_name" % enum), getattr(lib, "fp8kit_%s_alias" % enum)
    name.restype = alias.restype = ctypes.c_char_p
    name.argtypes, alias.argtypes = [ctypes.c_int], [ctypes.c_int, ctypes.c_int]
    out = []
    for v in range(32):
        n = name(v)
        if n is None or n == b"invalid":
            continue
        aliases, i = [], 0
        while alias(v, i) is not None:
            aliases.append(alias(v, i).decode())
            i += 1
        out.append((v, n.decode(), aliases))
    return out


def spellings(enum):
    """(value, spelling) for every canonical name and alias, as given and in upper case."""
    return [(v, s) for v, n, a in library_names(enum) for x in [n] + a for s in (x, x.upper())]


def test_every_named_enum_has_a_table():
    assert sorted(TABLES) == sorted(_lib.NAMED_ENUMS)


@pytest.mark.parametrize("enum", sorted(TABLES))
def test_tables_are_the_library_names(enum):
    table, enum_type = TABLES[enum]
    lib = library_names(enum)
    assert lib, enum
    assert list(table) == [n for _, n, _ in lib]
    assert [int(m) for m in table.values()] == [v for v, _, _ in lib]
    for v, n, aliases in lib:
        assert table.aliases(enum_type(v)) == aliases
        assert table.name_of(enum_type(v)) == n
    for v, s in spellings(enum):
        assert s in table and int(table[s]) == v, s
        assert int(_names.enum_of(table, s, enum, enum_type)) == v, s
    for bad in ("", "no-such-name", "tensor ", "x\0"):
        assert bad not in table
        with pytest.raises(fp8kit.InvalidArgumentError) as ei:
            _names.enum_of(table, bad, enum, enum_type)
        if "\0" not in bad:  # the library's message, listing every canonical name
            assert "fp8kit_%s_parse" % enum in ei.value.message
            assert all(n in ei.value.message for _, n, _ in lib)


@pytest.mark.parametrize("enum", ["dtype", "scheme", "rounding", "scale_layout"])
def test_quantize_takes_every_spelling(enum):
    for v, s in spellings(enum):
        if enum == "dtype":
            assert int(fp8kit.dtype_of_name(s)) == v and int(fp8kit.dtype_of_name("torch." + s)) == v
            if v in (DType.E4M3, DType.E5M2):
                assert fp8kit.make_quant_desc("tensor", s).elem == v
        elif enum == "scheme":
            assert fp8kit.make_quant_desc(s).scheme == v
        elif enum == "rounding":
            assert fp8kit.make_quant_desc("mx", rounding=s).rounding == v
        else:
            scheme = "mx" if v != ScaleLayout.MN_MAJOR else "block1x128"
            assert fp8kit.make_quant_desc(scheme, scale_layout=s).scale_layout == v


def test_operations_take_every_spelling(rng):
    x = rng.standard_normal((64, 128)).astype(np.float32)
    qa, sa = fp8kit.quantize(x, "tensor")
    want = np.asarray(fp8kit.scaled_mm(qa, qa.T, sa, sa))
    for v, s in spellings("scale_mode"):
        if v in (ScaleMode.TENSOR, ScaleMode.NONE):
            got = fp8kit.scaled_mm(qa, qa.T, sa, sa, scale_mode=s)
            assert v == ScaleMode.NONE or np.array_equal(np.asarray(got), want)
    for v, s in spellings("activation"):
        assert _names.activation_of(s) == v
        fp8kit.scaled_mm(qa, qa.T, sa, sa, activation=s)
    for v, s in spellings("out_quant"):
        if v == OutQuant.MX:
            d, sd = fp8kit.scaled_mm(qa, qa.T, sa, sa, out_quant=s)
            assert d.fk_dtype == DType.E4M3 and sd.shape == (64, 2)
    w = fp8kit.cast(rng.standard_normal((2, 16, 128)).astype(np.float32), "e4m3")
    for v, s in spellings("grouped_layout"):
        if v == GroupedLayout.CONTIGUOUS:
            assert fp8kit.grouped_mm(qa, w.transpose(0, 2, 1), [32, 64], layout=s).shape == (64, 16)
        else:
            a3 = fp8kit.cast(rng.standard_normal((2, 8, 128)).astype(np.float32), "e4m3")
            assert fp8kit.grouped_mm(a3, w.transpose(0, 2, 1), [8, 3], layout=s).shape == (2, 8, 16)
    for v, s in spellings("backend"):
        assert fp8kit.parse_device(s) == (v, 0)
    # k_grouped_mm's scale_mode: the scale modes none / tensor / block (= 1x128 here) and the 1x128 scheme
    ok = {"none": "none", "tensor": "tensor", "tensorwise": "tensor", "block": "1x128", "blockwise": "1x128",
          "1x128": "1x128", "block1x128": "1x128"}
    for _, s in spellings("scale_mode") + spellings("scheme"):
        assert _k_grouped._mode_of(s) == ok.get(s.lower()), s


def test_checkpoint_schemes_are_the_library_names():
    lib = library_names("ckpt_scheme")
    assert dict(_names.CKPT_SCHEME_NAMES) == {Scheme(v): n for v, n, _ in lib}
    for v, s in spellings("ckpt_scheme"):
        assert _names.CKPT_SCHEMES[s] == v
    # the activation scheme passes (the converter says why it refuses it); other names do not
    assert _names.CKPT_SCHEMES["block1x128"] == Scheme.BLOCK1X128
    assert "fp8-col" not in _names.CKPT_SCHEMES


def _dict_keys(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            yield node, [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def test_no_module_keeps_its_own_name_table():
    every = {s.lower() for enum in TABLES for _, s in spellings(enum)}
    found = []
    for f in sorted(os.listdir(PKG)):
        if not f.endswith(".py"):
            continue
        with open(os.path.join(PKG, f), encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), f)
        for node, keys in _dict_keys(tree):
            hits = [k for k in keys if k.lower() in every]
            if len(hits) >= 2:
                found.append("%s:%d %s" % (f, node.lineno, hits))
    assert not found, "name tables outside the library: " + "; ".join(found)


def test_the_table_check_sees_a_table():
    every = {s.lower() for _, s in spellings("scheme")}
    tree = ast.parse('SCHEMES = {"tensor": 0, "rowwise": 1}')
    assert [k for _, keys in _dict_keys(tree) for k in keys if k in every] == ["tensor", "rowwise"]
