"""test_grouped_hot.py - the hot path of grouped_mm and k_grouped_mm for plain torch tensors (torch CPU
tensors on the CPU backend; skipped without torch): a repeated call of one signature skips the full checks and gives the
full path's bytes on new data; operands that differ in any fact the entry was checked for (dtype, shape,
strides, type, device, which scales and bias; a new bias's values), out= that meets an input or cannot be written, a
non-contiguous offs and calls with options outside the hot path all get the full checks; masked,
block-scaled (mn_major A scales), row-quantized outputs (mx, block1x128) and a given context take it too; clear_contexts() drops the entries. k_grouped_mm:
the same for D = and D += (beta accumulating into out), its checks and overlap rule."""
import numpy as np
import pytest

import fp8kit
from fp8kit import _grouped, _k_grouped

torch = pytest.importorskip("torch")
if not hasattr(torch, "float8_e4m3fn"):
    pytest.skip("this torch has no float8 dtypes", allow_module_level=True)

G, T, N, K = 4, 96, 48, 256
F8 = torch.float8_e4m3fn


def _ops(seed, scheme="row"):
    g = torch.Generator().manual_seed(seed)
    qa, sa = fp8kit.quantize(torch.randn(T, K, generator=g), scheme="1x128" if scheme == "block" else "row")
    qw, sw = fp8kit.quantize(torch.randn(G, N, K, generator=g), scheme="128x128" if scheme == "block" else "row")
    if scheme != "block":
        sw = sw.reshape(G, N)
        sa = sa.reshape(T)
    offs = torch.tensor([10, 10, 60, T], dtype=torch.int32)
    return qa, qw.transpose(1, 2), offs, sa, sw


def _full(*args, **kw):
    """The same call through the full path (a status word keeps it off the hot path)."""
    return fp8kit.grouped_mm(*args, status=torch.zeros(1, dtype=torch.int32), **kw)


def _same(x, y):
    return x.dtype == y.dtype and x.shape == y.shape and torch.equal(x.view(torch.int16) if x.dtype ==
                                                                       torch.bfloat16 else x,
                                                                       y.view(torch.int16) if y.dtype ==
                                                                       torch.bfloat16 else y)


@pytest.fixture(autouse=True)
def _fresh():
    fp8kit.clear_contexts()
    yield
    fp8kit.clear_contexts()


def _no_full_path(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the full path ran")
    monkeypatch.setattr(_grouped, "_prepare", refuse)


@pytest.mark.parametrize("scheme", ["row", "block"])
def test_repeated_call_is_hot_and_exact(monkeypatch, scheme):
    a, b, offs, sa, sb = _ops(1, scheme)
    want = _full(a, b, offs, sa, sb, out_dtype=torch.bfloat16)
    assert _same(fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype=torch.bfloat16), want)
    assert len(_grouped._hot.entries) == 1
    a2, b2, offs2, sa2, sb2 = _ops(2, scheme)  # same signatures, other data and pointers
    want2 = _full(a2, b2, offs2, sa2, sb2, out_dtype=torch.bfloat16, alpha=0.5)
    with monkeypatch.context() as m:
        _no_full_path(m)
        d = fp8kit.grouped_mm(a2, b2, offs2, sa2, sb2, out_dtype=torch.bfloat16, alpha=0.5)
        assert _same(d, want2)
        assert d.data_ptr() != fp8kit.grouped_mm(a2, b2, offs2, sa2, sb2, out_dtype=torch.bfloat16).data_ptr()
    out = torch.full((T, N), 7.0, dtype=torch.bfloat16)
    fp8kit.grouped_mm(a2, b2, offs2, sa2, sb2, out_dtype=torch.bfloat16, out=out, alpha=0.5)  # out=: a new entry
    assert _same(out, want2) and len(_grouped._hot.entries) == 2
    with monkeypatch.context() as m:
        _no_full_path(m)
        out.fill_(7.0)
        assert fp8kit.grouped_mm(a2, b2, offs2, sa2, sb2, out_dtype=torch.bfloat16, out=out, alpha=0.5) is out
        assert _same(out, want2)
        rows_past = torch.tensor([10, 10, 60, 80], dtype=torch.int32)  # rows 80.. belong to no group
        out.fill_(7.0)
        fp8kit.grouped_mm(a2, b2, rows_past, sa2, sb2, out_dtype=torch.bfloat16, out=out, alpha=0.5)
        assert bool((out[80:] == 7.0).all()) and _same(out[:80], want2[:80])


def test_bias_and_activation_are_hot(monkeypatch):
    a, b, offs, sa, sb = _ops(12)
    fp8kit.grouped_mm(a, b, offs, sa, sb, torch.zeros(G, N), out_dtype=torch.float32, activation="gelu_tanh")
    g = torch.Generator().manual_seed(13)
    bias = torch.randn(G, N, generator=g)
    want = _full(a, b, offs, sa, sb, bias, out_dtype=torch.float32, activation="gelu_tanh")
    with monkeypatch.context() as m:
        _no_full_path(m)
        got = fp8kit.grouped_mm(a, b, offs, sa, sb, bias, out_dtype=torch.float32, activation="gelu_tanh")
    assert _same(got, want)


@pytest.mark.parametrize("oq", ["block1x128", "mx"])
def test_quantized_output_and_ctx_are_hot(monkeypatch, oq):
    """The MoE layer's gate/up call: swiglu, D quantized per row (new scales each call), its own context."""
    g = torch.Generator().manual_seed(14)
    qa, sa = fp8kit.quantize(torch.randn(T, K, generator=g), scheme="1x128")
    qw, sw = fp8kit.quantize(torch.randn(G, 2 * 256, K, generator=g), scheme="128x128")
    offs = torch.tensor([10, 10, 60, T], dtype=torch.int32)
    ctx = fp8kit.get_context("cpu")
    kw = dict(activation="swiglu", out_quant=oq, out_dtype="e4m3", ctx=ctx)
    d0, s0 = fp8kit.grouped_mm(qa, qw.transpose(1, 2), offs, sa, sw, **kw)
    qa2, sa2 = fp8kit.quantize(torch.randn(T, K, generator=g), scheme="1x128")
    want, wsc = _full(qa2, qw.transpose(1, 2), offs, sa2, sw, **kw)
    with monkeypatch.context() as m:
        _no_full_path(m)
        d, sc = fp8kit.grouped_mm(qa2, qw.transpose(1, 2), offs, sa2, sw, **kw)
        d2, sc2 = fp8kit.grouped_mm(qa2, qw.transpose(1, 2), offs, sa2, sw, **kw)
    assert torch.equal(d.view(torch.uint8), want.view(torch.uint8)) and torch.equal(sc.view(torch.uint8),
                                                                                     wsc.view(torch.uint8))
    assert sc2.data_ptr() != sc.data_ptr() and d2.data_ptr() != d.data_ptr()  # new outputs each call
    assert not torch.equal(d.view(torch.uint8), d0.view(torch.uint8))
    other = fp8kit.Context("cpu")  # another context: its own entry, the full path first
    try:
        with monkeypatch.context() as m:
            _no_full_path(m)
            with pytest.raises(AssertionError, match="full path"):
                fp8kit.grouped_mm(qa2, qw.transpose(1, 2), offs, sa2, sw, **dict(kw, ctx=other))
    finally:
        other.close()


def test_mn_major_block_scales_are_hot(monkeypatch):
    a, b, offs, sa, sb = _ops(3, "block")
    sam = torch.zeros(K // 128, T).t()  # (T, K/128) view of the (K/128, T) buffer, DeepGEMM's layout
    sam.copy_(sa)
    want = _full(a, b, offs, sa, sb, out_dtype=torch.float32)
    assert _same(fp8kit.grouped_mm(a, b, offs, sam, sb, out_dtype=torch.float32, scale_layout="mn_major"), want)
    with monkeypatch.context() as m:
        _no_full_path(m)
        assert _same(fp8kit.grouped_mm(a, b, offs, sam, sb, out_dtype=torch.float32, scale_layout="mn_major"), want)


def test_masked_layout_is_hot(monkeypatch):
    g = torch.Generator().manual_seed(4)
    M = 32
    qa, sa = fp8kit.quantize(torch.randn(G, M, K, generator=g), scheme="row")
    qw, sw = fp8kit.quantize(torch.randn(G, N, K, generator=g), scheme="row")
    counts = torch.tensor([0, 5, 32, 17], dtype=torch.int32)
    args = (qa, qw.transpose(1, 2), counts, sa.reshape(G, M), sw.reshape(G, N))
    want = _full(*args, layout="masked", out_dtype=torch.float32)
    fp8kit.grouped_mm(*args, layout="masked", out_dtype=torch.float32)
    with monkeypatch.context() as m:
        _no_full_path(m)
        got = fp8kit.grouped_mm(*args, layout="masked", out_dtype=torch.float32)
    for e, n in enumerate(counts.tolist()):
        assert torch.equal(got[e, :n], want[e, :n])


def test_changed_operands_get_every_check():
    a, b, offs, sa, sb = _ops(5)
    for _ in range(2):
        fp8kit.grouped_mm(a, b, offs, sa, sb)
    with pytest.raises(fp8kit.InvalidShapeError):  # scale_a of another length
        fp8kit.grouped_mm(a, b, offs, sa[:T - 1], sb)
    with pytest.raises(fp8kit.InvalidArgumentError):  # bf16 scales
        fp8kit.grouped_mm(a, b, offs, sa.to(torch.bfloat16), sb)
    with pytest.raises(fp8kit.InvalidStrideError):  # b N-contiguous instead of the K-contiguous view
        fp8kit.grouped_mm(a, b.contiguous(), offs, sa, sb)
    with pytest.raises(fp8kit.InvalidArgumentError):  # int64 offs
        fp8kit.grouped_mm(a, b, offs.long(), sa, sb)
    with pytest.raises(fp8kit.UnsupportedError):  # another device
        fp8kit.grouped_mm(a.to("meta"), b, offs, sa, sb)
    with pytest.raises(fp8kit.InvalidShapeError):  # G + 1 offsets
        fp8kit.grouped_mm(a, b, torch.tensor([1, 2, 3, 4, T], dtype=torch.int32), sa, sb)
    e5 = a.float().to(torch.float8_e5m2)  # another fp8 format: its own entry, the full path's bytes
    assert _same(fp8kit.grouped_mm(e5, b, offs, sa, sb), _full(e5, b, offs, sa, sb))
    p = torch.nn.Parameter(a, requires_grad=False)  # a subclass: never a plain tensor's entry
    assert _same(fp8kit.grouped_mm(p, b, offs, sa, sb), _full(a, b, offs, sa, sb))
    assert _same(fp8kit.grouped_mm(a, b, offs, None, None), _full(a, b, offs, None, None))  # no scales


def test_out_meeting_an_input_or_read_only_is_refused():
    a, b, offs, sa, sb = _ops(6)
    buf = torch.zeros(T * N + 2 * T, dtype=torch.float32)
    out = buf[:T * N].view(T, N)
    for _ in range(2):
        fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype=torch.float32, out=out)
    assert len(_grouped._hot.entries) == 1
    sa_in_out = buf[T * N - 8:T * N - 8 + T]  # scale_a shares bytes with out: same signatures
    with pytest.raises(fp8kit.InvalidArgumentError, match="shares memory"):
        fp8kit.grouped_mm(a, b, offs, sa_in_out, sb, out_dtype=torch.float32, out=out)
    beside = torch.zeros(T, dtype=torch.float32)  # same signatures, its own bytes: runs
    beside.copy_(sa)
    fp8kit.grouped_mm(a, b, offs, beside, sb, out_dtype=torch.float32, out=out)
    ro = torch.zeros(T, N, dtype=torch.float32, requires_grad=True)
    with pytest.raises(fp8kit.InvalidArgumentError, match="read-only"):
        fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype=torch.float32, out=ro)
    out2 = torch.zeros(T, N, dtype=torch.float32)
    fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype=torch.float32, out=out2)
    with torch.inference_mode():
        inf = torch.zeros(T, N, dtype=torch.float32)
    with pytest.raises(fp8kit.InvalidArgumentError, match="read-only"):  # the guard passes; the write check not
        fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype=torch.float32, out=inf)


def test_strided_offs_and_other_options_stay_off_the_hot_path():
    a, b, offs, sa, sb = _ops(7)
    wide = torch.zeros(2 * G, dtype=torch.int32)
    wide[::2] = offs
    for _ in range(2):
        d = fp8kit.grouped_mm(a, b, wide[::2], sa, sb)
    assert len(_grouped._hot.entries) == 0  # offs copied to be contiguous: never an entry
    assert _same(d, _full(a, b, offs, sa, sb))
    status = torch.zeros(1, dtype=torch.int32)
    for _ in range(2):
        fp8kit.grouped_mm(a, b, offs, sa, sb, status=status)
    assert len(_grouped._hot.entries) == 0
    fp8kit.grouped_mm(a, b, offs, sa, sb)
    assert len(_grouped._hot.entries) == 1
    fp8kit.clear_contexts()
    assert len(_grouped._hot.entries) == 0
    assert _same(fp8kit.grouped_mm(a, b, offs, sa, sb), _full(a, b, offs, sa, sb))


def test_hot_path_validates_offsets_as_the_library_does():
    a, b, offs, sa, sb = _ops(8)
    fp8kit.grouped_mm(a, b, offs, sa, sb)
    with pytest.raises(fp8kit.FP8KitError):  # decreasing ends: the library refuses them on the host
        fp8kit.grouped_mm(a, b, torch.tensor([10, 5, 60, T], dtype=torch.int32), sa, sb)
    with pytest.raises(fp8kit.FP8KitError):  # past T
        fp8kit.grouped_mm(a, b, torch.tensor([10, 10, 60, T + 1], dtype=torch.int32), sa, sb)


def _kg_ops(seed, scheme="1x128"):
    g = torch.Generator().manual_seed(seed)
    qa, sa = fp8kit.quantize(torch.randn(40, 640, generator=g), scheme=scheme)
    qb, sb = fp8kit.quantize(torch.randn(56, 640, generator=g), scheme=scheme)
    return qa, qb, torch.tensor([128, 128, 512, 640], dtype=torch.int32), sa, sb


def _kg_full(*args, **kw):
    return fp8kit.k_grouped_mm(*args, status=torch.zeros(1, dtype=torch.int32), **kw)


@pytest.mark.parametrize("scheme", ["1x128", "tensor"])
def test_k_grouped_repeated_call_is_hot_and_exact(monkeypatch, scheme):
    ops = _kg_ops(9, scheme)
    want = _kg_full(*ops, out_dtype=torch.float32, alpha=2.0)
    assert torch.equal(fp8kit.k_grouped_mm(*ops, out_dtype=torch.float32, alpha=2.0), want)
    out, acc = torch.full(want.shape, 3.0), torch.full(want.shape, 3.0)
    fp8kit.k_grouped_mm(*ops, out=out, beta=1.0, alpha=2.0)
    _kg_full(*ops, out=acc, beta=1.0, alpha=2.0)
    assert torch.equal(out, acc) and len(_k_grouped._hot.entries) == 2
    ops2 = _kg_ops(10, scheme)
    want2 = _kg_full(*ops2, out_dtype=torch.float32, alpha=0.5)
    acc.fill_(1.0)
    _kg_full(*ops2, out=acc, beta=2.0, alpha=0.5)
    with monkeypatch.context() as m:
        m.setattr(_k_grouped, "_scale_modes", lambda *a, **k: (_ for _ in ()).throw(AssertionError("full path")))
        assert torch.equal(fp8kit.k_grouped_mm(*ops2, out_dtype=torch.float32, alpha=0.5), want2)
        out.fill_(1.0)
        assert fp8kit.k_grouped_mm(*ops2, out=out, beta=2.0, alpha=0.5) is out
        assert torch.equal(out, acc)
        out.fill_(1.0)
        fp8kit.k_grouped_mm(*ops2, out=out, alpha=0.5)  # beta 0: D = only
        assert torch.equal(out, want2)
    with pytest.raises(fp8kit.InvalidArgumentError, match="beta"):  # beta without out: the full path refuses
        fp8kit.k_grouped_mm(*ops2, out_dtype=torch.float32, beta=1.0)


def test_k_grouped_changed_operands_and_overlap_get_every_check():
    a, b, offs, sa, sb = _kg_ops(11)
    for _ in range(2):
        fp8kit.k_grouped_mm(a, b, offs, sa, sb)
    with pytest.raises(fp8kit.InvalidShapeError):  # scale_b of another K
        fp8kit.k_grouped_mm(a, b, offs, sa, sb[:, :4])
    with pytest.raises(fp8kit.InvalidShapeError):  # b transposed the way grouped_mm takes it
        fp8kit.k_grouped_mm(a, b.t(), offs, sa, sb)
    with pytest.raises(fp8kit.FP8KitError):  # offsets not multiples of 128: the library refuses them
        fp8kit.k_grouped_mm(a, b, torch.tensor([128, 100, 512, 640], dtype=torch.int32), sa, sb)
    buf = torch.zeros(4 * 40 * 56 + 64)
    out = buf[:4 * 40 * 56].view(4, 40, 56)
    for _ in range(2):
        fp8kit.k_grouped_mm(a, b, offs, sa, sb, out=out)
    sa_in_out = buf[100:100 + sa.numel()].view(sa.shape)
    sa_in_out.copy_(sa)
    with pytest.raises(fp8kit.InvalidArgumentError, match="shares memory"):
        fp8kit.k_grouped_mm(a, b, offs, sa_in_out, sb, out=out)
    ro = torch.zeros(4, 40, 56, requires_grad=True)
    with pytest.raises(fp8kit.InvalidArgumentError, match="read-only"):
        fp8kit.k_grouped_mm(a, b, offs, sa, sb, out=ro)
