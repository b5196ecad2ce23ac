"""test_signatures.py - the public API as introspection and type checkers see
it: no public function takes **kwargs, every parameter is named in its
docstring, the main entry points are fully annotated (and the annotations
resolve), scaled_mm's explicit keywords still cover every keyword it took
through **options and each one reaches the plan, and the package ships
py.typed (PEP 561)."""
import inspect
import os
import re
import typing

import numpy as np
import pytest

import fp8kit
from fp8kit import _gemm

PKG = os.path.dirname(fp8kit.__file__)
# every keyword scaled_mm took through **options before they were explicit
SCALED_MM_KEYWORDS = ["activation", "alpha", "beta", "c", "scale_d", "out_quant", "out_hp", "out_rounding",
                      "out_pow2", "return_amax", "use_fast_accum", "fast_accum", "scale_mode", "scale_layout",
                      "bias_per_row", "a_dtype", "b_dtype", "out", "ctx", "stream"]
ANNOTATED = ["quantize", "dequantize", "cast", "scaled_mm", "grouped_mm", "k_grouped_mm", "quant_shapes", "to_float32",
             "version", "library_path", "backend_available", "get_context", "clear_contexts", "parse_device",
             "dtype_of_name", "quantize_checkpoint", "dequantize_checkpoint"]


def _public_functions():
    """(name, function, docstring that documents it) of every public function and method."""
    out = []
    for name in fp8kit.__all__ + ["dtype_of_name"]:
        obj = getattr(fp8kit, name)
        if inspect.isfunction(obj):
            out.append((name, obj, obj.__doc__ or ""))
    for cls in (fp8kit.Context, fp8kit.TaggedArray):
        for name, member in vars(cls).items():
            if inspect.isfunction(member) and (not name.startswith("_") or name in ("__init__", "__new__")):
                doc = member.__doc__ or ""
                if name in ("__init__", "__new__"):
                    doc = (cls.__doc__ or "") + doc
                out.append(("%s.%s" % (cls.__name__, name), member, doc))
    try:
        import torch  # noqa: F401
    except ImportError:
        return out
    from fp8kit import torch_ops
    for name in ("quantize", "dequantize", "scaled_mm", "grouped_mm", "k_grouped_mm"):
        out.append(("torch_ops." + name, getattr(torch_ops, name), getattr(torch_ops, name).__doc__ or ""))
    return out


FUNCTIONS = _public_functions()


@pytest.mark.parametrize("name, fn, doc", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_no_kwargs_and_every_parameter_documented(name, fn, doc):
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]
    assert not [p.name for p in params if p.kind == p.VAR_KEYWORD], "%s takes **kwargs" % name
    assert not [p.name for p in params if p.kind == p.VAR_POSITIONAL], "%s takes *args" % name
    assert doc.strip(), "%s has no docstring" % name
    missing = [p.name for p in params if not re.search(r"(?<![\w.])%s(?!\w)" % re.escape(p.name), doc)]
    assert not missing, "%s's docstring does not name %s" % (name, missing)


@pytest.mark.parametrize("name", ANNOTATED)
def test_public_functions_are_annotated(name):
    fn = getattr(fp8kit, name)
    sig = inspect.signature(fn)
    bare = [p.name for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty]
    assert not bare, "%s: parameters without a type: %s" % (name, bare)
    assert sig.return_annotation is not inspect.Signature.empty, "%s has no return type" % name
    typing.get_type_hints(fn)  # every annotation resolves


def test_context_is_annotated():
    for fn in (fp8kit.Context.__init__, fp8kit.Context.set_threads, fp8kit.Context.set_autotune,
               fp8kit.Context.check, fp8kit.TaggedArray.__new__):
        typing.get_type_hints(fn)
        sig = inspect.signature(fn)
        assert all(p.annotation is not p.empty for p in sig.parameters.values() if p.name not in ("self", "cls"))


def test_scaled_mm_keeps_every_keyword():
    params = inspect.signature(fp8kit.scaled_mm).parameters
    for k in SCALED_MM_KEYWORDS:
        assert k in params, k
        assert params[k].kind in (params[k].KEYWORD_ONLY, params[k].POSITIONAL_OR_KEYWORD), k
    # the defaults are the ones the plans fill in
    for k, p in params.items():
        if p.kind == p.KEYWORD_ONLY:
            assert _gemm._OPTION_DEFAULTS[k] == p.default, k
    assert set(_gemm._OPTION_DEFAULTS) == {k for k, p in params.items() if p.kind == p.KEYWORD_ONLY} | {"out"}


def test_each_keyword_reaches_the_options(monkeypatch):
    """Each keyword given (not its default object) is in the options the
    plans see; none given -> no options (the hot path)."""
    seen = []
    monkeypatch.setattr(_gemm, "run", lambda a, b, sa, sb, bias, out_dtype, options: seen.append(dict(options)))
    a = np.zeros((2, 2), np.float32)
    fp8kit.scaled_mm(a, a)
    assert seen.pop() == {}
    for k in SCALED_MM_KEYWORDS:
        marker = object()
        fp8kit.scaled_mm(a, a, **{k: marker})
        got = seen.pop()
        assert got == {k: marker} and got[k] is marker, k
    # a default spelled out where it is the same object is no option
    fp8kit.scaled_mm(a, a, activation=None, ctx=None, bias_per_row=False, out_hp="bfloat16")
    assert seen.pop() == {}


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="no_such_option"):
        fp8kit.scaled_mm(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32), no_such_option=1)


def test_py_typed_ships():
    assert os.path.isfile(os.path.join(PKG, "py.typed"))
    pyproject = os.path.join(os.path.dirname(PKG), "pyproject.toml")
    if not os.path.isfile(pyproject):
        pytest.skip("not a source tree")
    text = open(pyproject).read()
    data = re.search(r"\[tool\.setuptools\.package-data\]\s*fp8kit\s*=\s*\[([^\]]*)\]", text)
    assert data and '"py.typed"' in data.group(1)
