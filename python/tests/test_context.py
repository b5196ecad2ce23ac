"""test_context.py - the device forms fp8kit.Context, get_context and
backend_available take: Backend values, the strings torch users write
('cpu', 'cuda', 'cuda:N', any case) and torch.device objects; anything else
raises a ValueError naming the accepted forms. clear_contexts() drops the
cached scaled_mm plans with the contexts they hold: the same calls run again
on new contexts."""
import numpy as np
import pytest

import fp8kit
from fp8kit import Backend, parse_device

BAD = ["gpu", "cuda:x", "cuda:-1", "cuda:", "", "auto:0", "tpu:0", "cpu cuda", "cuda:\u00b2", 7, None, 2.5]


@pytest.mark.parametrize("form, want", [
    ("cpu", (Backend.CPU, 0)), ("CPU", (Backend.CPU, 0)), ("cpu:0", (Backend.CPU, 0)),
    ("cuda", (Backend.CUDA, 0)), ("cuda:0", (Backend.CUDA, 0)), ("cuda:3", (Backend.CUDA, 3)),
    (" Cuda:1 ", (Backend.CUDA, 1)), ("auto", (Backend.AUTO, 0)),
    (Backend.CPU, (Backend.CPU, 0)), (1, (Backend.CPU, 0)), (Backend.CUDA, (Backend.CUDA, 0)),
])
def test_parse_device_forms(form, want):
    assert parse_device(form) == want


def test_parse_device_index_argument():
    assert parse_device("cuda", 2) == (Backend.CUDA, 2)
    assert parse_device("cuda:2", 2) == (Backend.CUDA, 2)
    assert parse_device(Backend.CUDA, 1) == (Backend.CUDA, 1)
    with pytest.raises(ValueError, match="disagrees"):
        parse_device("cuda:1", 0)


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_bad_device_names_the_accepted_forms(bad):
    for fn in (parse_device, fp8kit.Context, fp8kit.get_context, fp8kit.backend_available):
        with pytest.raises(ValueError) as ei:
            fn(bad)
        msg = str(ei.value)
        assert "'cpu'" in msg and "'cuda:N'" in msg and "torch.device" in msg, msg
        assert isinstance(ei.value, fp8kit.InvalidArgumentError)


def test_cpu_strings_make_cpu_contexts():
    own = fp8kit.Context("cpu")
    assert own.backend == Backend.CPU and own.requested == Backend.CPU and own.device == 0
    own.close()
    cached = fp8kit.get_context("cpu")
    assert cached is fp8kit.get_context(Backend.CPU, 0) is fp8kit.get_context("cpu:0") is fp8kit.get_context(1)
    assert fp8kit.backend_available("cpu") and fp8kit.backend_available("CPU")


@pytest.mark.parametrize("form", ["cuda", "cuda:0", "CUDA:0"])
def test_cuda_strings_reach_the_library(form):
    """'cuda' and 'cuda:0' name the CUDA backend: a context where a device is
    usable, else the library's BackendUnavailableError (not a parse error)."""
    assert isinstance(fp8kit.backend_available(form), bool)
    if fp8kit.backend_available("cuda"):
        ctx = fp8kit.Context(form)
        assert ctx.backend == Backend.CUDA and ctx.device == 0
        assert fp8kit.get_context(form) is fp8kit.get_context(Backend.CUDA, 0)
        ctx.close()
    else:
        with pytest.raises(fp8kit.BackendUnavailableError):
            fp8kit.Context(form)
        with pytest.raises(fp8kit.BackendUnavailableError):
            fp8kit.get_context(form)


def test_torch_devices():
    torch = pytest.importorskip("torch")
    assert parse_device(torch.device("cpu")) == (Backend.CPU, 0)
    assert parse_device(torch.device("cuda")) == (Backend.CUDA, 0)
    assert parse_device(torch.device("cuda", 1)) == (Backend.CUDA, 1)
    assert parse_device(torch.device("cuda:2")) == (Backend.CUDA, 2)
    assert fp8kit.get_context(torch.device("cpu")) is fp8kit.get_context("cpu")
    own = fp8kit.Context(torch.device("cpu"))
    assert own.backend == Backend.CPU
    own.close()
    with pytest.raises(ValueError, match="torch.device"):
        fp8kit.Context(torch.device("meta"))
    x = torch.zeros(2)
    assert parse_device(x.device) == (Backend.CPU, 0)


def _gemm_case(rng):
    qa, sa = fp8kit.quantize(rng.standard_normal((24, 64)).astype(np.float32), scheme="row")
    qw, sw = fp8kit.quantize(rng.standard_normal((16, 64)).astype(np.float32), scheme="row")
    return qa, qw.T, sa, sw.T


def test_clear_contexts_then_scaled_mm_runs_again(rng):
    """Issue 21 item 8c: cached scaled_mm plans held the context clear_contexts()
    destroyed, so every shape seen before failed with NullPointerError."""
    a, b, sa, sb = _gemm_case(rng)
    want = fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32")
    out = np.empty((24, 16), np.float32)
    for _ in range(2):  # plans made and used: the plain keyed one and the out= one
        fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32")
        fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", out=out)
    old = fp8kit.get_context("cpu")
    fp8kit.clear_contexts()
    assert fp8kit.get_context("cpu") is not old
    assert np.array_equal(fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32"), want)
    out[:] = np.nan
    assert fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", out=out) is out and np.array_equal(out, want)
    fp8kit.clear_contexts()  # twice in a row, and with nothing cached in between
    fp8kit.clear_contexts()
    assert np.array_equal(fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32"), want)


def test_clear_contexts_then_torch_hot_path_runs_again(rng):
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8 dtypes")
    qa, sa = fp8kit.quantize(torch.from_numpy(rng.standard_normal((24, 64)).astype(np.float32)), scheme="row")
    qw, sw = fp8kit.quantize(torch.from_numpy(rng.standard_normal((16, 64)).astype(np.float32)), scheme="row")
    out = torch.empty(24, 16, dtype=torch.bfloat16)
    for _ in range(3):  # the guarded hot entries, without and with out=
        want = fp8kit.scaled_mm(qa, qw.t(), sa, sw.t(), out_dtype=torch.bfloat16)
        fp8kit.scaled_mm(qa, qw.t(), sa, sw.t(), out_dtype=torch.bfloat16, out=out)
    fp8kit.clear_contexts()
    assert torch.equal(fp8kit.scaled_mm(qa, qw.t(), sa, sw.t(), out_dtype=torch.bfloat16), want)
    out.zero_()
    assert fp8kit.scaled_mm(qa, qw.t(), sa, sw.t(), out_dtype=torch.bfloat16, out=out) is out
    assert torch.equal(out, want)
