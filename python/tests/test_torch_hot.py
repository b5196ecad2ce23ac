"""test_torch_hot.py - scaled_mm's hot path for plain torch tensors on the CPU
backend (torch CPU tensors; skipped without torch): after repeated calls with
one signature, operands that differ in any fact the plan was checked for
(dtype, shape, strides, type, device) still get every check; calls alternating
shapes, bias and out_dtype equal calls through the general path; the guard
that the hot path trusts tells those facts apart; a closed context is
reported, never used, and clear_contexts() lets later calls run again."""
import pytest

import fp8kit
from fp8kit import _gemm

torch = pytest.importorskip("torch")
if not hasattr(torch, "float8_e4m3fn"):
    pytest.skip("this torch has no float8 dtypes", allow_module_level=True)
from fp8kit import _torch  # noqa: E402  (needs torch)

BF16 = torch.bfloat16


def _ops(seed, M=64, N=48, K=128):
    g = torch.Generator().manual_seed(seed)
    qa, sa = fp8kit.quantize(torch.randn(M, K, generator=g), scheme="row")
    qw, sw = fp8kit.quantize(torch.randn(N, K, generator=g), scheme="row")
    return qa, qw.t(), sa, sw.t()


def _general(a, b, sa, sb, bias=None, out_dtype=BF16):
    """The same product through the general (keyed, fully checked) path: any option skips the hot path."""
    return fp8kit.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype, alpha=1.0)


def _same(x, y):
    return x.dtype == y.dtype and x.shape == y.shape and torch.equal(x.view(torch.int16) if x.dtype == BF16 else x,
                                                                       y.view(torch.int16) if y.dtype == BF16 else y)


def test_guard_tells_signatures_apart():
    assert _torch.make_guard is not None, "torch's TensorGuards is unusable here: the hot path keys every call"
    x = torch.zeros(8, 16, dtype=torch.float8_e4m3fn)
    check = _torch.make_guard((x, x.t()))
    assert check(torch.ones(8, 16).to(torch.float8_e4m3fn), torch.zeros(8, 16, dtype=torch.float8_e4m3fn).t())
    for other in (torch.zeros(8, 16, dtype=torch.float8_e5m2), torch.zeros(16, 8, dtype=torch.float8_e4m3fn),
                  torch.zeros(16, 8, dtype=torch.float8_e4m3fn).t(), torch.zeros(8, 32, dtype=torch.float8_e4m3fn)[:, :16],
                  torch.nn.Parameter(x, requires_grad=False), x.to("meta"), None, 1.0):
        assert not check(other, x.t()), other


def test_hot_call_uses_the_guarded_entry():
    a, b, sa, sb = _ops(1)
    want = _general(a, b, sa, sb)
    for _ in range(3):
        d = fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16)
        assert _same(d, want)
    assert _gemm._last is not None and _gemm._last[3].d_shape == (64, 48) and _gemm._last[0] is BF16
    d2 = fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16)
    assert d2.data_ptr() != d.data_ptr() or d2 is not d  # a new output each call
    other = _ops(2)  # same signatures, other data: the pointers are this call's
    assert _same(fp8kit.scaled_mm(*other, out_dtype=BF16), _general(*other))


def test_changed_operands_are_checked_again():
    a, b, sa, sb = _ops(3)
    for _ in range(3):
        fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16)
    with pytest.raises(fp8kit.InvalidShapeError):  # another M than the scale's
        fp8kit.scaled_mm(a[:32], b, sa, sb, out_dtype=BF16)
    with pytest.raises(fp8kit.UnsupportedError):  # bf16 scales
        fp8kit.scaled_mm(a, b, sa.to(BF16), sb, out_dtype=BF16)
    with pytest.raises(fp8kit.UnsupportedError):  # another device
        fp8kit.scaled_mm(a.to("meta"), b, sa, sb, out_dtype=BF16)
    with pytest.raises(fp8kit.InvalidStrideError):  # b row-major instead of the K-major view
        fp8kit.scaled_mm(a, b.contiguous(), sa, sb, out_dtype=BF16)
    with pytest.raises(fp8kit.FP8KitError):  # a column-major
        fp8kit.scaled_mm(a.t().contiguous().t(), b, sa, sb, out_dtype=BF16)
    e5 = a.float().to(torch.float8_e5m2)  # another fp8 format: a plan of its own, right result
    assert _same(fp8kit.scaled_mm(e5, b, sa, sb, out_dtype=BF16), _general(e5, b, sa, sb))
    p = torch.nn.Parameter(a, requires_grad=False)  # a subclass: never the plain tensors' entry
    assert _same(fp8kit.scaled_mm(p, b, sa, sb, out_dtype=BF16), _general(a, b, sa, sb))
    assert _same(fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16), _general(a, b, sa, sb))


def test_alternating_shapes_bias_and_out_dtype():
    cases = []
    for seed, (M, N, K) in enumerate(((64, 48, 128), (32, 48, 128), (64, 96, 256))):
        a, b, sa, sb = _ops(10 + seed, M, N, K)
        bias = torch.randn(N, generator=torch.Generator().manual_seed(seed)).to(BF16)
        for bi in (None, bias):
            for od in (BF16, torch.float32):
                cases.append(((a, b, sa, sb), bi, od, _general(a, b, sa, sb, bi, od)))
    for _ in range(3):
        for ops, bi, od, want in cases:
            assert _same(fp8kit.scaled_mm(*ops, bias=bi, out_dtype=od), want)
            assert _same(fp8kit.scaled_mm(*ops, bias=bi, out_dtype=od), want)  # now through _last


def test_closed_context_is_reported_not_used():
    a, b, sa, sb = _ops(5)
    want = _general(a, b, sa, sb)
    for _ in range(3):
        fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16)
    try:
        fp8kit.get_context("cpu").close()  # the hot entry's context closed under it
        with pytest.raises(fp8kit.FP8KitError) as ei:
            fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16)
        assert "ctx" in ei.value.message
    finally:
        fp8kit.clear_contexts()  # drops the closed context and the plans holding it (issue 21 item 8c)
    assert _same(fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16), want)


def test_torch_op_takes_the_same_entries():
    from fp8kit import torch_ops
    a, b, sa, sb = _ops(6)
    want = _general(a, b, sa, sb)
    for _ in range(3):
        assert _same(torch_ops.scaled_mm(a, b, sa, sb, out_dtype=BF16), want)
        assert _same(fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16), want)
    with pytest.raises(fp8kit.InvalidShapeError):  # through the op: still checked
        torch_ops.scaled_mm(a[:32], b, sa, sb, out_dtype=BF16)
    e5 = a.float().to(torch.float8_e5m2)
    assert _same(torch_ops.scaled_mm(e5, b, sa, sb, out_dtype=BF16), _general(e5, b, sa, sb))


@pytest.mark.parametrize("M,N", [(64, 48), (1, 48), (64, 1), (1, 1)])
def test_hot_outputs_are_new_packed_tensors(M, N):
    """D comes from torch.empty_like of a template (every dim > 1: a packed view
    of a shared buffer, or an expanded one-element tensor for large D) or
    torch.empty_strided: either way a new packed tensor of its own storage."""
    a, b, sa, sb = _ops(20 + M + N, M, N, 128)
    want = _general(a, b, sa, sb)
    outs = [fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16) for _ in range(4)]
    assert _gemm._last is not None and _gemm._last[3].d_shape == (M, N)
    ptrs = set()
    for d in outs:
        assert _same(d, want)
        assert d.stride() == (N, 1) and d.is_contiguous() and d.device == a.device and not d.requires_grad
        assert d.untyped_storage().nbytes() == M * N * 2 and d.storage_offset() == 0
        ptrs.add(d.data_ptr())
    assert len(ptrs) == len(outs)  # every output its own memory (all alive here)


def test_threads_share_the_hot_entry():
    """One plan's call struct serves every thread: each call's pointers travel with the call."""
    import threading
    sets = [_ops(40 + i) for i in range(8)]
    wants = [_general(*s) for s in sets]
    for s in sets:
        fp8kit.scaled_mm(*s, out_dtype=BF16)
    errors = []

    def work(t):
        try:
            for r in range(50):
                i = (t + r) % len(sets)
                if not _same(fp8kit.scaled_mm(*sets[i], out_dtype=BF16), wants[i]):
                    errors.append((t, r))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


def test_torch_op_swiglu_and_its_fake_kernel():
    """torch.ops.fp8kit.scaled_mm with activation swiglu: D of N/2 columns, equal to fp8kit.scaled_mm's, and the
    fake kernel (torch.compile's view of the op) gives the same shape and dtype."""
    from fp8kit import torch_ops  # noqa: F401 (registers torch.ops.fp8kit.*)
    from torch._subclasses.fake_tensor import FakeTensorMode
    a, b, sa, sb = _ops(11)
    args = (a, b, sa, sb, None, "bfloat16", "swiglu", 1.0, 0.0, None, False, "", "", False)
    real = torch.ops.fp8kit.scaled_mm(*args)
    assert real.shape == (a.shape[0], b.shape[1] // 2)
    assert _same(real, fp8kit.scaled_mm(a, b, sa, sb, out_dtype=BF16, activation="swiglu"))
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = torch.ops.fp8kit.scaled_mm(*(mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in args))
    assert (fake.shape, fake.dtype) == (real.shape, real.dtype)


def test_torch_compile_dtype_names_met_while_tracing(monkeypatch):
    """torch.compile(fullgraph=True) traces calls whose dtype names it meets first while tracing, in any
    spelling: the library's name parser (a ctypes call) is a constant to dynamo, evaluated at trace time
    (torch 2.15 refused to trace the parser's lru_cache under fullgraph). The names' cache starts from
    what the module fills at import, so 'E4m3' and 'Bf16' are parsed inside the trace."""
    from fp8kit import torch_ops
    monkeypatch.setattr(torch_ops, "_DTYPE_STR", dict(torch_ops._DTYPE_STR))
    for name in ("E4m3", "Bf16"):
        torch_ops._DTYPE_STR.pop(name, None)
    g = torch.Generator(device="cpu").manual_seed(9)
    a = torch.randn(64, 256, generator=g)
    w = torch.randn(48, 256, generator=g)
    qw, sw = fp8kit.quantize(w, scheme="row")

    def layer(x):
        qx, sx = torch_ops.quantize(x, "row", dtype="E4m3")
        return fp8kit.scaled_mm(qx, qw.t(), sx, sw.t(), out_dtype="Bf16", activation="relu")

    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)(a)
    eager = layer(a)
    assert compiled.dtype == torch.bfloat16
    assert torch.equal(eager, compiled)
