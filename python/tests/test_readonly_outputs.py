"""test_readonly_outputs.py - issue 21 item 2: every array the library writes
is checked for being writable before any C call, by every public function that
writes (quantize's q and scale outputs, dequantize, cast, scaled_mm's out= on
its first, keyed and torch hot paths, grouped_mm's out and status): numpy
arrays marked writeable=False, views of immutable bytes (which must come out
unchanged), read-only np.memmap (in a subprocess: it used to crash the
interpreter with SIGSEGV), numpy scalars, torch tensors torch itself refuses
as out= (requires grad under grad mode, inference tensors outside inference
mode), and DLPack exports flagged read-only (DLPack 1.x flag, or the
producer's __array_interface__ / __cuda_array_interface__)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fp8kit

F32 = np.float32
M, N, K = 24, 16, 64


def tag(a, fmt="e4m3"):
    return fp8kit.TaggedArray(a, fmt)


def frozen(shape, dtype, fill=0):
    a = np.full(shape, fill, dtype)
    a.flags.writeable = False
    return a


def of_bytes(shape, dtype):
    """A view of an immutable bytes object (and the object, to check it is unchanged)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = bytes(range(256)) * (n // 256) + bytes(range(n % 256))
    return np.frombuffer(raw, dtype=dtype).reshape(shape), raw


def _gemm_ops(rng):
    qa, sa = fp8kit.quantize(rng.standard_normal((M, K)).astype(F32), scheme="row")
    qw, sw = fp8kit.quantize(rng.standard_normal((N, K)).astype(F32), scheme="row")
    return qa, qw.T, sa, sw.T


def _writers(rng):
    """(name, fn(make) -> call writing the array make(shape, dtype) gives) for each output of each function."""
    x = rng.standard_normal((M, K)).astype(F32)
    q, s = fp8kit.quantize(x, scheme="row")
    a, b, sa, sb = _gemm_ops(rng)
    qw = tag(np.ascontiguousarray(np.stack([np.asarray(b.T)] * 3)))
    offs = np.array([8, 16, M], np.int32)
    return [
        ("quantize out[0] (q)", lambda mk: fp8kit.quantize(x, scheme="row", out=(tag(mk((M, K), np.uint8)),
                                                                                 np.empty((M, 1), F32)))),
        ("quantize out[1] (scale)", lambda mk: fp8kit.quantize(x, scheme="row", out=(
            tag(np.empty((M, K), np.uint8)), mk((M, 1), F32)))),
        ("dequantize out", lambda mk: fp8kit.dequantize(q, s, scheme="row", out=mk((M, K), F32))),
        ("cast out", lambda mk: fp8kit.cast(x, "e4m3", out=tag(mk((M, K), np.uint8)))),
        ("cast out (to f32)", lambda mk: fp8kit.cast(q, "float32", out=mk((M, K), F32))),
        ("scaled_mm out", lambda mk: fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", out=mk((M, N), F32))),
        ("grouped_mm out", lambda mk: fp8kit.grouped_mm(a, np.swapaxes(qw, 1, 2), offs, sa, sb.reshape(1, N) *
                                                        np.ones((3, 1), F32), out_dtype="float32",
                                                        out=mk((M, N), F32))),
    ]


def _names(rng):
    return [n for n, _ in _writers(rng)]


@pytest.mark.parametrize("which", range(7))
def test_numpy_readonly_outputs_refused(which, rng):
    name, call = _writers(rng)[which]
    with pytest.raises(fp8kit.InvalidArgumentError, match="read-only") as ei:
        call(lambda shape, dt: frozen(shape, dt, 0x55 if dt == np.uint8 else 3))
    assert isinstance(ei.value, ValueError) and "writeable" in str(ei.value), name
    kept = []
    with pytest.raises(fp8kit.InvalidArgumentError, match="read-only"):
        call(lambda shape, dt: kept.append(of_bytes(shape, dt)) or kept[-1][0])
    arr, raw = kept[-1]
    assert arr.tobytes() == raw, "%s: the bytes object was modified" % name
    call(lambda shape, dt: np.zeros(shape, dt))  # a writable one of the same kind runs


def test_scalar_output_refused():
    x = np.ones((4, 32), F32)
    with pytest.raises(fp8kit.InvalidArgumentError, match="immutable scalar"):
        fp8kit.quantize(x, out=(tag(np.empty((4, 32), np.uint8)), np.float32(0)))
    with pytest.raises(fp8kit.InvalidArgumentError, match="immutable scalar"):
        fp8kit.quantize(x, out=(tag(np.empty((4, 32), np.uint8)), 0.0))


def test_scaled_mm_keyed_plan_still_checks_out(rng):
    """The plan made by a call with a writable out= is found by signature for a
    read-only out of the same dtype, shape and strides: out is checked per call."""
    a, b, sa, sb = _gemm_ops(rng)
    good = np.zeros((M, N), F32)
    for _ in range(3):
        fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", out=good)
    ro = frozen((M, N), F32, 5.0)
    with pytest.raises(fp8kit.InvalidArgumentError, match="fp8kit.scaled_mm: out is read-only"):
        fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", out=ro)
    arr, raw = of_bytes((M, N), F32)
    with pytest.raises(fp8kit.InvalidArgumentError, match="read-only"):
        fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", out=arr)
    assert (ro == 5.0).all() and arr.tobytes() == raw
    assert fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", out=good) is good


_MEMMAP_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    import fp8kit
    import test_readonly_outputs as t
    path = sys.argv[3]
    rng = np.random.default_rng(0)

    def mapped(shape, dt):
        n = int(np.prod(shape)) * np.dtype(dt).itemsize
        with open(path, "wb") as f:
            f.write(bytes(n))
        return np.memmap(path, dtype=dt, mode="r", shape=shape)

    for name, call in t._writers(rng):
        for rep in range(3):  # again once plans exist
            try:
                call(mapped)
                print("WROTE", name)
            except fp8kit.InvalidArgumentError as e:
                if rep == 0:
                    print("REFUSED", name, "|", e)
            sys.stdout.flush()
            call(lambda shape, dt: np.zeros(shape, dt))
    """)


def test_readonly_memmap_refused_in_subprocess(rng, tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    script = tmp_path / "memmap_out.py"
    script.write_text(_MEMMAP_SCRIPT)
    r = subprocess.run([sys.executable, str(script), os.path.dirname(here), here, str(tmp_path / "mm.bin")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300,
                       env=dict(os.environ))
    assert r.returncode == 0, "the process died (rc %d):\n%s\n%s" % (r.returncode, r.stdout, r.stderr[-3000:])
    refused = [line for line in r.stdout.splitlines() if line.startswith("REFUSED")]
    assert "WROTE" not in r.stdout, r.stdout
    assert len(refused) == len(_names(rng)), r.stdout
    assert all("read-only" in line for line in refused), r.stdout


# ------------------------------------------------------------------ DLPack producers
class _Versioned:
    """A DLPack producer handing out a numpy array's DLPack 1.x export (READ_ONLY flag set for read-only arrays)."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, stream=None, max_version=None, **kw):
        return self.arr.__dlpack__(max_version=max_version) if max_version else self.arr.__dlpack__()

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


class _Legacy:
    """A pre-1.0 DLPack producer (no max_version, no flags) over a writable array that says
    read-only in its __array_interface__ or __cuda_array_interface__."""

    def __init__(self, arr, attr):
        self.arr, self.attr = arr, attr

    def __dlpack__(self, stream=None):
        return self.arr.__dlpack__()

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()

    def __getattr__(self, name):
        if name == self.attr:
            d = dict(self.arr.__array_interface__)
            d["data"] = (d["data"][0], True)
            return d
        raise AttributeError(name)


def test_dlpack_readonly_outputs_refused(rng):
    x = rng.standard_normal((M, K)).astype(F32)
    q, s = fp8kit.quantize(x, scheme="row")
    arr, raw = of_bytes((M, K), F32)
    with pytest.raises(fp8kit.InvalidArgumentError, match="DLPack export is flagged READ_ONLY"):
        fp8kit.dequantize(q, s, scheme="row", out=_Versioned(arr))
    with pytest.raises(fp8kit.InvalidArgumentError, match="READ_ONLY"):
        fp8kit.cast(q, "float32", out=_Versioned(frozen((M, K), F32)))
    assert arr.tobytes() == raw
    for attr in ("__array_interface__", "__cuda_array_interface__"):
        buf = np.full((M, K), 9.0, F32)
        with pytest.raises(fp8kit.InvalidArgumentError, match=attr):
            fp8kit.dequantize(q, s, scheme="row", out=_Legacy(buf, attr))
        assert (buf == 9.0).all()
    ok = np.zeros((M, K), F32)
    fp8kit.dequantize(q, s, scheme="row", out=_Versioned(ok))  # writable exports are written
    assert np.array_equal(ok, fp8kit.dequantize(q, s, scheme="row"))


# ------------------------------------------------------------------ torch
def _torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8 dtypes")
    return torch


def _torch_writers(torch, rng):
    x = torch.from_numpy(rng.standard_normal((M, K)).astype(F32))
    q, s = fp8kit.quantize(x, scheme="row")
    qw, sw = fp8kit.quantize(torch.from_numpy(rng.standard_normal((N, K)).astype(F32)), scheme="row")
    w3 = torch.stack([qw.view(torch.uint8)] * 3).view(torch.float8_e4m3fn)
    offs = torch.tensor([8, 16, M], dtype=torch.int32)
    return [
        ("quantize out[1] (scale)", lambda mk: fp8kit.quantize(x, scheme="row", out=(
            torch.empty(M, K, dtype=torch.float8_e4m3fn), mk((M, 1), torch.float32)))),
        ("dequantize out", lambda mk: fp8kit.dequantize(q, s, scheme="row", out=mk((M, K), torch.float32))),
        ("cast out", lambda mk: fp8kit.cast(q, "float32", out=mk((M, K), torch.float32))),
        ("scaled_mm out", lambda mk: fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=torch.float32,
                                                      out=mk((M, N), torch.float32))),
        ("grouped_mm out", lambda mk: fp8kit.grouped_mm(q, w3.transpose(1, 2), offs, s, sw.reshape(1, N).repeat(3, 1),
                                                        out_dtype=torch.float32, out=mk((M, N), torch.float32))),
    ]


@pytest.mark.parametrize("which", range(5))
def test_torch_outputs_torch_would_refuse(which, rng):
    """An out= that torch itself refuses (torch.add(..., out=t) raises) is refused
    before anything is written; where torch accepts it, so does fp8kit."""
    torch = _torch()
    name, call = _torch_writers(torch, rng)[which]
    leaf = {}

    def grad_leaf(shape, dt):
        leaf["t"] = torch.full(shape, 7.0, dtype=dt, requires_grad=True)
        return leaf["t"]
    with pytest.raises(RuntimeError):  # torch's own rule
        torch.add(torch.ones(2), 1, out=torch.zeros(2, requires_grad=True))
    with pytest.raises(fp8kit.InvalidArgumentError, match="requires grad") as ei:
        call(grad_leaf)
    assert isinstance(ei.value, ValueError)
    assert bool((leaf["t"] == 7.0).all()), name
    with torch.no_grad():  # torch writes such a tensor under no_grad: so does fp8kit
        call(grad_leaf)
        assert not bool((leaf["t"] == 7.0).all()), name
    with torch.inference_mode():
        inf = torch.full((M, K) if "quantize" not in name else (M, 1), 7.0)
    with pytest.raises(RuntimeError):  # torch's own rule
        inf.add_(1)
    with pytest.raises(fp8kit.InvalidArgumentError, match="inference tensor"):
        call(lambda shape, dt: _inference(torch, shape, dt, leaf))
    assert bool((leaf["inf"] == 7.0).all()), name
    with torch.inference_mode():  # inside inference mode torch writes it, and so does fp8kit
        call(lambda shape, dt: _inference(torch, shape, dt, leaf))


def _inference(torch, shape, dt, keep):
    with torch.inference_mode():
        keep["inf"] = torch.full(shape, 7.0, dtype=dt)
    return keep["inf"]


def test_torch_hot_paths_check_out(rng):
    """scaled_mm's torch hot routes for out= (the guarded entry of plain calls,
    and the flat key of out= calls) refuse what torch refuses."""
    torch = _torch()
    q, s = fp8kit.quantize(torch.from_numpy(rng.standard_normal((M, K)).astype(F32)), scheme="row")
    qw, sw = fp8kit.quantize(torch.from_numpy(rng.standard_normal((N, K)).astype(F32)), scheme="row")
    bf = torch.bfloat16
    want = fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=bf, alpha=1.0)
    for _ in range(3):  # plain calls: the guarded entry; then out= calls through it and the flat key
        fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=bf)
        out = torch.empty(M, N, dtype=bf)
        assert fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=bf, out=out) is out and torch.equal(out, want)
    for _ in range(2):
        bad = torch.full((M, N), 7.0, dtype=bf, requires_grad=True)
        with pytest.raises(fp8kit.InvalidArgumentError, match="requires grad"):
            fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=bf, out=bad)
        with pytest.raises(fp8kit.InvalidArgumentError, match="inference tensor"):
            fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=bf, out=_inference(torch, (M, N), bf, {}))
        assert bool((bad == 7.0).all())
    with torch.no_grad():
        fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=bf, out=bad)
    assert torch.equal(bad.detach(), want)


def test_grouped_status_checked(rng):
    torch = _torch()
    q, s = fp8kit.quantize(torch.from_numpy(rng.standard_normal((M, K)).astype(F32)), scheme="row")
    qw, sw = fp8kit.quantize(torch.from_numpy(rng.standard_normal((N, K)).astype(F32)), scheme="row")
    w3 = torch.stack([qw.view(torch.uint8)] * 3).view(torch.float8_e4m3fn).transpose(1, 2)
    offs = torch.tensor([8, 16, M], dtype=torch.int32)
    status = _inference(torch, (1,), torch.int32, {})
    with pytest.raises(fp8kit.InvalidArgumentError, match="status is read-only"):
        fp8kit.grouped_mm(q, w3, offs, s, sw.reshape(1, N).repeat(3, 1), out_dtype=torch.float32, status=status)
    assert int(status[0]) == 7
    status = torch.full((1,), 7, dtype=torch.int32)
    fp8kit.grouped_mm(q, w3, offs, s, sw.reshape(1, N).repeat(3, 1), out_dtype=torch.float32, status=status)
