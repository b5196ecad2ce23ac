"""test_dtype_names.py - one set of dtype names everywhere Python takes one:
fp32 / f32 / float32, bf16 / bfloat16, fp16 / f16 / float16, e4m3 /
float8_e4m3fn, e5m2 / float8_e5m2 (any case, 'torch.' prefix), DType
values, numpy dtypes and torch dtypes, in quantize, quant_shapes,
dequantize, cast, scaled_mm, grouped_mm, TaggedArray, to_float32 and the
torch_ops wrappers; also the C library's own names (fp8kit_dtype_name)."""
import numpy as np
import pytest

import fp8kit
from fp8kit import DType

HP = {
    DType.F32: ["fp32", "f32", "float32", "FP32", "torch.float32", DType.F32, np.float32, np.dtype("float32")],
    DType.BF16: ["bf16", "bfloat16", "BF16", "torch.bfloat16", DType.BF16],
    DType.F16: ["fp16", "f16", "float16", "half", DType.F16, np.float16, np.dtype("float16")],
}
FP8 = {
    DType.E4M3: ["e4m3", "float8_e4m3fn", "E4M3", "torch.float8_e4m3fn", DType.E4M3],
    DType.E5M2: ["e5m2", "float8_e5m2", "torch.float8_e5m2", DType.E5M2],
}
TORCH_NAMES = {DType.F32: "float32", DType.BF16: "bfloat16", DType.F16: "float16", DType.E4M3: "float8_e4m3fn",
               DType.E5M2: "float8_e5m2"}


def _with_torch(table):
    """table's names plus the torch dtype of each, when torch is installed."""
    try:
        import torch
    except ImportError:
        return table
    return {dt: names + [getattr(torch, TORCH_NAMES[dt])] for dt, names in table.items()}


def _dt(arr):
    """The fp8kit DType of a numpy result."""
    tag = getattr(arr, "fk_dtype", None)
    return tag if tag is not None else fp8kit.dtype_of_name(arr.dtype)


def _cases(table):
    return [(dt, n) for dt, names in _with_torch(table).items() for n in names]


def test_c_library_names_are_accepted():
    lib = fp8kit._lib.load()
    for dt in DType:
        assert fp8kit.dtype_of_name(fp8kit._lib.decode(lib.fp8kit_dtype_name(int(dt)))) == dt


@pytest.mark.parametrize("dt, name", _cases(FP8), ids=repr)
def test_fp8_names(dt, name, rng):
    x = rng.standard_normal((16, 64)).astype(np.float32)
    assert fp8kit.dtype_of_name(name) == dt
    q, s = fp8kit.quantize(x, "row", name)
    assert q.fk_dtype == dt
    assert fp8kit.quant_shapes((16, 64), "row", name) == ((16, 64), (16, 1), "f32")
    c = fp8kit.cast(x, name)
    assert c.fk_dtype == dt and np.array_equal(np.asarray(c), np.asarray(fp8kit.cast(x, dt)))
    bits = np.asarray(q)  # untagged uint8: the name says which format
    y = fp8kit.dequantize(bits, s, "row", dtype=name)
    assert np.array_equal(y, fp8kit.dequantize(q, s, "row"))
    assert np.array_equal(fp8kit.cast(bits, "float32", src_dtype=name), fp8kit.cast(q, "float32"))
    assert fp8kit.TaggedArray(bits, name).fk_dtype == dt
    assert np.array_equal(fp8kit.to_float32(bits, name), fp8kit.to_float32(q), equal_nan=True)
    want = fp8kit.scaled_mm(q, q.T, s, s.T)
    assert np.array_equal(fp8kit.scaled_mm(bits, bits.T, s, s.T, a_dtype=name, b_dtype=name), want)
    d = fp8kit.scaled_mm(q, q.T, s, s.T, out_dtype=name, scale_d=np.float32(want.max() / 100))
    assert d.fk_dtype == dt


@pytest.mark.parametrize("dt, name", _cases(HP), ids=repr)
def test_high_precision_names(dt, name, rng):
    x = rng.standard_normal((32, 64)).astype(np.float32)
    assert fp8kit.dtype_of_name(name) == dt
    q, s = fp8kit.quantize(x, "row")
    assert _dt(fp8kit.dequantize(q, s, "row", out_dtype=name)) == dt
    assert _dt(fp8kit.cast(q, name)) == dt
    assert _dt(fp8kit.scaled_mm(q, q.T, s, s.T, out_dtype=name)) == dt
    d, sd = fp8kit.scaled_mm(q, q.T, s, s.T, out_quant="mx", out_hp=name)
    assert d.fk_dtype == DType.E4M3
    w = fp8kit.cast(rng.standard_normal((2, 16, 64)).astype(np.float32), "e4m3")
    g = fp8kit.grouped_mm(q, w.transpose(0, 2, 1), np.array([16, 32], np.int32), out_dtype=name)
    assert _dt(g) == dt and g.shape == (32, 16)
    if dt == DType.F32:
        assert fp8kit.to_float32(x, name).dtype == np.float32


@pytest.mark.parametrize("dt, name", _cases(HP) + _cases(FP8), ids=repr)
def test_torch_ops_names(dt, name):
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    want = getattr(torch, TORCH_NAMES[dt])
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 64, generator=g)
    if dt in FP8:
        q, s = torch_ops.quantize(x, "row", name)
        assert q.dtype == want
        assert fp8kit.quantize(x, "row", name)[0].dtype == want
        return
    q, s = torch_ops.quantize(x, "row")
    assert torch_ops.dequantize(q, s, "row", out_dtype=name).dtype == want
    assert torch_ops.scaled_mm(q, q.t(), s, s.t(), out_dtype=name).dtype == want
    assert fp8kit.scaled_mm(q, q.t(), s, s.t(), out_dtype=name).dtype == want
    w, _ = fp8kit.quantize(torch.randn(2, 16, 64, generator=g), "tensor")
    offs = torch.tensor([16, 32], dtype=torch.int32)
    assert torch_ops.grouped_mm(q, w.transpose(-2, -1), offs, out_dtype=name).dtype == want
