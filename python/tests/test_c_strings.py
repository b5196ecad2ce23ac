"""test_c_strings.py - every Python string the binding hands to C as a
NUL-terminated string (checkpoint paths and globs, the tuning spec, the
autotune cache path, activation names) is refused with InvalidArgumentError
when it holds a NUL character, instead of reaching C cut short at the NUL
("out\\0evil" writing to "out"); nothing is created or changed."""
import os
import pathlib

import pytest

import fp8kit

NUL = "\0"


@pytest.fixture
def model(tmp_path):
    """test_checkpoint's tiny model directory (skipped as there: without the
    safetensors package, or a library built without safetensors support)."""
    pytest.importorskip("safetensors.numpy")
    import test_checkpoint
    test_checkpoint.skip_without_safetensors(tmp_path)
    return test_checkpoint.make_model(tmp_path / "model")


def _refused(call):
    with pytest.raises(fp8kit.InvalidArgumentError, match="NUL") as ei:
        call()
    assert isinstance(ei.value, ValueError)
    return ei.value


@pytest.mark.parametrize("kind", ["str", "bytes", "pathlike"])
def test_checkpoint_dst_with_nul_is_refused(model, tmp_path, kind):
    out = tmp_path / "out"
    raw = str(out) + NUL + "evil"
    dst = {"str": raw, "bytes": os.fsencode(raw), "pathlike": pathlib.PurePosixPath(raw)}[kind]
    e = _refused(lambda: fp8kit.quantize_checkpoint(model, dst, "tensor"))
    assert "dst" in e.message
    _refused(lambda: fp8kit.dequantize_checkpoint(model, dst))
    assert sorted(os.listdir(tmp_path)) == ["model"]


def test_checkpoint_src_with_nul_is_refused(model, tmp_path):
    out = tmp_path / "out"
    e = _refused(lambda: fp8kit.quantize_checkpoint(str(model) + NUL + "x", out, "tensor"))
    assert "src" in e.message
    _refused(lambda: fp8kit.dequantize_checkpoint(os.fsencode(str(model)) + b"\0x", out))
    assert not out.exists()


@pytest.mark.parametrize("what", ["exclude", "include"])
def test_checkpoint_glob_with_nul_is_refused(model, tmp_path, what):
    out = tmp_path / "out"
    e = _refused(lambda: fp8kit.quantize_checkpoint(model, out, "tensor", **{what: ["lm_head" + NUL + "*"]}))
    assert what in e.message
    if what == "exclude":
        _refused(lambda: fp8kit.dequantize_checkpoint(model, out, exclude="lm_head" + NUL))
    assert not out.exists()


def test_tuning_spec_with_nul_is_refused():
    ctx = fp8kit.Context("cpu")
    try:
        ctx.set_tuning("")
        _refused(lambda: ctx.set_tuning("gemm_bn=128" + NUL + "gemm_bn=nonsense"))
        assert ctx.tuning == ""  # nothing changed
    finally:
        ctx.close()


def test_autotune_cache_path_with_nul_is_refused(tmp_path):
    ctx = fp8kit.Context("cpu")
    try:
        _refused(lambda: ctx.set_autotune(1, str(tmp_path / "cache") + NUL + "x"))
        _refused(lambda: ctx.set_autotune(1, os.fsencode(str(tmp_path / "cache")) + b"\0"))
    finally:
        ctx.close()
    assert os.listdir(tmp_path) == []


def test_activation_with_nul_is_refused(rng):
    import numpy as np
    a = fp8kit.quantize(rng.standard_normal((16, 32)).astype(np.float32), "tensor")
    b = fp8kit.quantize(rng.standard_normal((16, 32)).astype(np.float32), "tensor")
    with pytest.raises(fp8kit.InvalidArgumentError):
        fp8kit.scaled_mm(a[0], b[0].T, a[1], b[1], activation="relu" + NUL + "x")
