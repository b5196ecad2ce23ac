"""test_errors.py - bad input raises the FP8KitError subclass of the matching
status, with a message, before anything is written: checks done in Python
(dtype, device, layout, strides) and statuses coming back from C (the
library's own fp8kit_last_error text), including from several threads."""
import ctypes
import threading

import numpy as np
import pytest

import fp8kit
from fp8kit import _lib

F32 = np.float32


def test_status_exception_mapping():
    for st in fp8kit.Status:
        if st == fp8kit.Status.OK:
            continue
        cls = fp8kit.errors.error_class(st)
        e = cls("detail")
        assert e.status == st and e.status_name == "FP8KIT_" + st.name
        assert str(e) == "FP8KIT_%s: detail" % st.name
        assert isinstance(e, fp8kit.FP8KitError)
    assert issubclass(fp8kit.InvalidShapeError, ValueError)
    assert issubclass(fp8kit.UnsupportedError, TypeError)
    assert issubclass(fp8kit.OutOfMemoryError, MemoryError)


def test_python_side_checks():
    x = np.ones((4, 64), F32)
    with pytest.raises(fp8kit.UnsupportedError, match="float64"):
        fp8kit.quantize(x.astype(np.float64))
    with pytest.raises(fp8kit.InvalidStrideError, match="broadcast"):
        fp8kit.quantize(np.broadcast_to(np.ones(64, F32), (4, 64)), scheme="row")
    with pytest.raises(fp8kit.InvalidStrideError):
        fp8kit.quantize(x[:, ::-1], scheme="row")
    with pytest.raises(fp8kit.InvalidShapeError, match="at most 4"):
        fp8kit.quantize(np.ones((1, 1, 1, 2, 32), F32))
    with pytest.raises(fp8kit.InvalidShapeError, match="multiple of 32") as ei:
        fp8kit.quantize(np.ones((4, 48), F32), scheme="mx")
    assert ei.value.status == fp8kit.Status.ERR_INVALID_SHAPE
    with pytest.raises(fp8kit.InvalidArgumentError, match="scheme"):
        fp8kit.quantize(x, scheme="rows")
    with pytest.raises(fp8kit.UnsupportedError, match="e4m3 or e5m2"):
        fp8kit.quantize(x, dtype="bf16")
    with pytest.raises(fp8kit.UnsupportedError, match="axis -2"):
        fp8kit.quantize(x, scheme="row", axis=-2)
    with pytest.raises(fp8kit.UnsupportedError, match="not an array"):
        fp8kit.quantize([1.0, 2.0])
    with pytest.raises(fp8kit.InvalidShapeError, match="empty"):
        fp8kit.quantize(np.ones((0, 32), F32))


def _gemm_operands():
    rng = np.random.default_rng(1)
    qa, sa = fp8kit.quantize(rng.standard_normal((16, 64)).astype(F32), scheme="row")
    qw, sw = fp8kit.quantize(rng.standard_normal((8, 64)).astype(F32), scheme="row")
    return qa, sa, qw, sw


def test_gemm_python_side_checks():
    qa, sa, qw, sw = _gemm_operands()
    with pytest.raises(fp8kit.InvalidStrideError, match="column-major"):
        fp8kit.scaled_mm(qa, np.ascontiguousarray(qw.T), sa, sw.T)  # b row-major (K, N)
    with pytest.raises(fp8kit.InvalidShapeError, match="b is K x N"):
        fp8kit.scaled_mm(qa, qw[:, :32].T, sa, sw.T)
    with pytest.raises(fp8kit.UnsupportedError, match="e4m3 or e5m2"):
        fp8kit.scaled_mm(np.ones((16, 64), F32), qw.T, sa, sw.T)
    with pytest.raises(fp8kit.InvalidShapeError, match="cannot tell the scaling"):
        fp8kit.scaled_mm(qa, qw.T, np.ones((3, 2), F32), sw.T)
    with pytest.raises(fp8kit.UnsupportedError, match="both a and b"):
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, scale_mode=("block", "row"))
    with pytest.raises(fp8kit.InvalidArgumentError, match="activation"):
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, activation="tanh")
    with pytest.raises(fp8kit.InvalidArgumentError, match="needs c"):
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, beta=1.0)
    with pytest.raises(fp8kit.InvalidShapeError, match="bias"):
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, np.ones(5, F32))
    with pytest.raises(fp8kit.InvalidShapeError, match="out has shape"):
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, out_dtype="float32", out=np.empty((8, 16), F32))
    with pytest.raises(fp8kit.InvalidStrideError, match="not packed"):
        fp8kit.scaled_mm(qa, qw.T, np.ones((16, 2), F32)[:, :1], sw.T)


def test_c_status_and_message_pass_through():
    # the 4-D rule (leading dims collapsible) is checked by the C library only
    base = np.ones((2, 5, 4, 32), F32)
    x = base[:, :3]
    qbuf = fp8kit.TaggedArray(np.full((2, 3, 4, 32), 0xAB, np.uint8), "e4m3")
    sbuf = np.full((2, 3, 4, 1), -7.0, F32)
    with pytest.raises(fp8kit.InvalidStrideError) as ei:
        fp8kit.quantize(x, scheme="row", out=(qbuf, sbuf))
    assert "collapsible" in ei.value.message and ei.value.message.startswith("fp8kit_quantize")
    assert (np.asarray(qbuf) == 0xAB).all() and (sbuf == -7.0).all()  # nothing written
    # a raw call with a NULL output comes back as NullPointerError with the C text
    ctx = fp8kit.get_context(fp8kit.Backend.CPU)
    desc, args = fp8kit.GemmDesc(), fp8kit.GemmArgs()
    qa, sa, qw, sw = _gemm_operands()
    args.a = ctx._lib.fp8kit_tensor_2d(qa.ctypes.data, int(fp8kit.DType.E4M3), 16, 64, 64)
    args.b = ctx._lib.fp8kit_tensor_2d(qw.ctypes.data, int(fp8kit.DType.E4M3), 8, 64, 64)
    args.alpha = 1.0
    with pytest.raises(fp8kit.NullPointerError, match=r"d->data is NULL"):
        ctx.check(ctx._lib.fp8kit_gemm(ctx.handle, ctypes.byref(desc), ctypes.byref(args), None))
    assert "d->data is NULL" in ctx.last_error()


def test_cuda_context_without_cuda():
    if fp8kit.backend_available("cuda"):
        pytest.skip("a CUDA device is present")
    with pytest.raises(fp8kit.BackendUnavailableError) as ei:
        fp8kit.Context(fp8kit.Backend.CUDA, 0)
    assert "CUDA" in ei.value.message
    with pytest.raises(fp8kit.InvalidArgumentError, match="negative"):
        fp8kit.Context(fp8kit.Backend.CPU, -1)


def test_context_must_match_the_device():
    class FakeCtx:
        backend, device = fp8kit.Backend.CUDA, 0
    with pytest.raises(fp8kit.UnsupportedError, match="context runs on cuda"):
        fp8kit.quantize(np.ones((4, 64), F32), ctx=FakeCtx())


def test_error_messages_are_per_thread():
    """Each thread's exception carries the message of its own failing call."""
    errors, barrier = {}, threading.Barrier(4)
    shapes = {0: (2, 5, 4, 32), 1: (2, 7, 4, 32), 2: (2, 9, 4, 32), 3: (2, 11, 4, 32)}

    def worker(i):
        base = np.ones(shapes[i], F32)
        barrier.wait()
        for _ in range(50):
            try:
                fp8kit.quantize(base[:, :3], scheme="row")
            except fp8kit.FP8KitError as e:
                errors.setdefault(i, set()).add(e.message)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        msgs = errors[i]
        assert len(msgs) == 1
        assert "collapsible" in next(iter(msgs))


def test_library_discovery_env(monkeypatch, tmp_path):
    monkeypatch.setenv("FP8KIT_LIBRARY", str(tmp_path / "nope.so"))
    assert _lib.candidate_paths() == [str(tmp_path / "nope.so")]  # an explicit choice is the only one
    with pytest.raises(fp8kit.LibraryNotFoundError, match="nope.so"):
        _lib.load(str(tmp_path / "nope.so"))
    real = _lib.library_path()
    monkeypatch.setenv("FP8KIT_LIBRARY", str(__import__("os").path.dirname(real)))
    assert any(p.startswith(__import__("os").path.dirname(real)) for p in _lib.candidate_paths()[:3])


def test_sanitizer_builds_are_not_candidates(tmp_path):
    from fp8kit._builds import loadable_build
    (tmp_path / "asan").mkdir()
    (tmp_path / "asan" / "CMakeCache.txt").write_text("FP8KIT_CUDA:STRING=OFF\nFP8KIT_SANITIZE:BOOL=ON\n")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "CMakeCache.txt").write_text("FP8KIT_SANITIZE:BOOL=OFF\n")
    assert not loadable_build(str(tmp_path / "asan"))
    assert loadable_build(str(tmp_path / "plain"))
    assert loadable_build(str(tmp_path / "none"))  # no cache file: nothing says it is sanitized
