"""test_distributed.py - fp8kit.distributed, the Python layer of the expert-parallel API
(include/fp8kit_ep.h, docs/ep.md; docs/python.md "Expert parallelism"), where it runs without a GPU:

- the package imports; the ctypes mirrors of fp8kit_ep_config / fp8kit_ep_recv against the C compiler;
- ep_config / ep_buffer_size: the library's configuration rules, raised as the package's exceptions with the
  library's messages, the binding's own type checks, and the sizes docs/ep.md quotes;
- fp8kit_ep_create's refusals before any communication (a CPU context, a NULL communicator);
- EPGroup / ExpertParallel / MoE refusing cleanly without torch.distributed or without CUDA; the NCCL unique id
  through a one-rank gloo group (when libnccl.so.2 loads);
- quantize_experts; combine_reference (top-k order, signed zeros);
- moe_reference on the CPU backend against a plain torch computation with the same quantization points: bit for
  bit where the arithmetic is exact (integer operands), within a stated bound elsewhere; its routing rules
  (tokens listing an expert twice, ids -1 and out of range, experts without tokens, T = 0) against docs/ep.md's
  combine loop written again in numpy.

With a GPU, a CUDA build of libfp8kit with NCCL and torch, test_moe_one_rank_* run MoE on a one-rank group
against moe_reference (skipped otherwise). Multi-GPU runs: examples/moe_ep.py under torchrun.
"""
import inspect
import os
import re

import numpy as np
import pytest

import fp8kit
from abi_check import c_values, check_layout
from fp8kit import _ep, _nccl

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import fp8kit.distributed as fd  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HAS_CUDA = torch.cuda.is_available() and fp8kit.backend_available("cuda")


# ------------------------------------------------------------------ imports and ABI
def test_public_names_import():
    for name in fd.__all__:
        assert hasattr(fd, name), name
    assert fd.MAX_TOP_K == 64
    assert "distributed" not in fp8kit.__all__  # opt-in: `import fp8kit` does not import torch for it


def test_public_functions_document_every_parameter():
    """The package's rule (test_signatures.py) for fp8kit.distributed: no **kwargs or *args, a docstring that
    names every parameter (a class's own docstring counts for __init__)."""
    items = []
    for name in fd.__all__:
        obj = getattr(fd, name)
        if inspect.isfunction(obj):
            items.append((name, obj, obj.__doc__ or ""))
        elif inspect.isclass(obj) and obj.__module__.startswith("fp8kit."):
            for mname, member in vars(obj).items():
                fn = member.__func__ if isinstance(member, classmethod) else member
                if not inspect.isfunction(fn) or (mname.startswith("_") and mname != "__init__"):
                    continue
                doc = (fn.__doc__ or "") + (obj.__doc__ or "" if mname == "__init__" else "")
                items.append(("%s.%s" % (name, mname), fn, doc))
    assert len(items) > 15
    for name, fn, doc in items:
        params = [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]
        assert not [p for p in params if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)], name
        assert doc.strip(), "%s has no docstring" % name
        missing = [p.name for p in params if not re.search(r"(?<![\w.])%s(?!\w)" % re.escape(p.name), doc)]
        assert not missing, "%s's docstring does not name %s" % (name, missing)


def test_structs_match_the_header(tmp_path):
    structs = {"fp8kit_ep_config": fd.EpConfig, "fp8kit_ep_recv": fd.EpRecv}
    out = c_values(tmp_path, "fp8kit_ep.h", structs,
                   ['printf("const FP8KIT_EP_MAX_TOP_K %d\\n", FP8KIT_EP_MAX_TOP_K);'])
    for kind, name, value in out:
        if not check_layout(structs, kind, name, value):
            assert fd.MAX_TOP_K == value
    assert len(out) == 2 + len(fd.EpConfig._fields_) + len(fd.EpRecv._fields_) + 1


def test_every_ep_function_is_bound():
    header = open(os.path.join(REPO, "include", "fp8kit_ep.h")).read()
    names = set(re.findall(r"FP8KIT_API[^;]*?\b(fp8kit_\w+)\s*\(", header))
    assert names == {"fp8kit_ep_buffer_size", "fp8kit_ep_create", "fp8kit_ep_destroy", "fp8kit_ep_recv_view",
                     "fp8kit_ep_dispatch", "fp8kit_ep_combine"}
    f = _ep.ep_functions()
    for n in names:
        assert getattr(f, n[len("fp8kit_ep_"):]).argtypes is not None, n


# ------------------------------------------------------------------ configuration
def _cfg(**kw):
    base = dict(num_experts=64, hidden=7168, top_k=8, max_tokens=128)
    opts = {k: kw.pop(k) for k in ("dtype", "mx", "rounding", "pow2", "scale_layout", "transport", "mode")
            if k in kw}
    base.update(kw)
    return fd.ep_config(base["num_experts"], base["hidden"], base["top_k"], base["max_tokens"], **opts)


def test_config_fields_and_defaults():
    c = _cfg()
    assert (c.num_experts, c.hidden, c.top_k, c.max_tokens) == (64, 7168, 8, 128)
    assert (c.fp8, c.mx, c.rounding, c.pow2, c.scale_layout) == (int(fp8kit.DType.E4M3), 0, 0, 0, 0)
    c = _cfg(dtype=torch.float8_e5m2, mx=True, rounding="rceil")
    assert (c.fp8, c.mx, c.rounding) == (int(fp8kit.DType.E5M2), 1, 1)
    c = _cfg(pow2=True, scale_layout="mn_major")
    assert (c.pow2, c.scale_layout) == (1, int(fp8kit.ScaleLayout.MN_MAJOR))
    assert "num_experts=64" in repr(c) and "mn_major" in repr(c)


def test_buffer_sizes_docs_quote():
    """docs/ep.md: E 64, H 7168, top-8: 117 MiB on 2 ranks at max_tokens 128, 932 MiB at 1024, 290 MiB on 8
    ranks at 128."""
    mib = 1 << 20
    assert round(fd.ep_buffer_size(_cfg(), 2) / mib) == 117
    assert round(fd.ep_buffer_size(_cfg(max_tokens=1024), 2) / mib) == 932
    assert round(fd.ep_buffer_size(_cfg(), 8) / mib) == 290
    # mn_major pads the scale rows to 4; MX carries H/32 bytes per token as block1x128 does
    assert fd.ep_buffer_size(_cfg(scale_layout="mn_major"), 2) >= fd.ep_buffer_size(_cfg(), 2)


@pytest.mark.parametrize("kw, world, exc, text", [
    (dict(hidden=100), 2, fp8kit.InvalidShapeError, "cfg->hidden = 100; it must be a positive multiple of 128"),
    (dict(hidden=0), 1, fp8kit.InvalidShapeError, "cfg->hidden = 0"),
    (dict(top_k=0), 2, fp8kit.InvalidArgumentError, "cfg->top_k = 0; it must be 1 .. min(num_experts, 64) = 64"),
    (dict(num_experts=128, top_k=65), 2, fp8kit.InvalidArgumentError, "min(num_experts, 64) = 64"),
    (dict(num_experts=4, top_k=5), 1, fp8kit.InvalidArgumentError, "min(num_experts, 64) = 4"),
    (dict(num_experts=0), 1, fp8kit.InvalidArgumentError, "cfg->num_experts = 0"),
    (dict(max_tokens=0), 1, fp8kit.InvalidArgumentError, "cfg->max_tokens = 0"),
    (dict(num_experts=63, top_k=8), 2, fp8kit.InvalidArgumentError,
     "cfg->num_experts = 63 is not a multiple of the world size 2"),
    (dict(), 0, fp8kit.InvalidArgumentError, "the world size 0"),
    (dict(dtype="bf16"), 1, fp8kit.UnsupportedError, "cfg->fp8 is bf16; the tokens travel as e4m3 or e5m2"),
    (dict(rounding="rceil"), 1, fp8kit.InvalidArgumentError, "rceil, an MX rule, but cfg->mx is 0"),
    (dict(mx=True, pow2=True), 1, fp8kit.InvalidArgumentError, "MX scales are powers of two already"),
    (dict(mx=True, scale_layout="mn_major"), 1, fp8kit.UnsupportedError, "mn_major with mx scales"),
    (dict(scale_layout="blocked"), 1, fp8kit.UnsupportedError, "blocked with block1x128 scales"),
    (dict(num_experts=1 << 20, top_k=1, max_tokens=1 << 20), 1, fp8kit.SizeOverflowError, "lower max_tokens"),
    (dict(hidden=640, transport="nccl_ep"), 1, fp8kit.UnsupportedError,
     "cfg->hidden = 640; the NCCL EP transport needs a multiple of 512"),
])
def test_config_rules_are_the_library_s(kw, world, exc, text):
    with pytest.raises(exc) as e:
        fd.ep_buffer_size(_cfg(**kw), world)
    assert text in e.value.message, e.value.message
    assert e.value.message.startswith("fp8kit_ep_buffer_size: ")


@pytest.mark.parametrize("kw, text", [
    (dict(num_experts="64"), "num_experts must be an int"),
    (dict(hidden=128.0), "hidden must be an int"),
    (dict(top_k=True), "top_k must be an int"),
    (dict(max_tokens=1 << 64), "does not fit int64"),
    (dict(dtype="e3m4"), "dtype"),
    (dict(rounding="up"), "rounding"),
    (dict(scale_layout="column"), "scale_layout"),
    (dict(mx=2), "mx must be True or False"),
    (dict(pow2="yes"), "pow2 must be True or False"),
    (dict(transport="nvshmem"), "transport must be one of nccl, nccl_ep"),
])
def test_config_types_are_checked_in_python(kw, text):
    with pytest.raises(fp8kit.InvalidArgumentError, match=re.escape(text)):
        _cfg(**kw)


def test_nccl_ep_transport_needs_fewer_buffers():
    """The NCCL EP transport keeps no receive or return chunks of its own (NCCL EP's buffers carry the tokens):
    its fp8kit buffers are the send chunk, the recv layout, the counts and the weights; mn_major adds the plain
    scales NCCL EP writes."""
    for layout in ("plain", "mn_major"):
        a = fd.ep_buffer_size(_cfg(hidden=1024, scale_layout=layout), 4)
        b = fd.ep_buffer_size(_cfg(hidden=1024, scale_layout=layout, transport="nccl_ep"), 4)
        assert 0 < b < a, (layout, a, b)
    assert repr(_cfg(transport="nccl_ep")).endswith("transport=nccl_ep, mode=low_latency)")
    # the high-throughput mode: the contiguous layout of R = W x max_tokens x min(top_k, E_local) rows
    ht = _cfg(hidden=1024, transport="nccl_ep", mode="high_throughput")
    assert fd.ep_buffer_size(ht, 4) > 0


def test_preload_nccl_ep_without_the_package(monkeypatch):
    """Without the nccl-extensions package there is nothing to preload: None, nothing loaded, no error (the
    library then searches the loader's path and fp8kit_ep_create says what it did not find)."""
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nccl" else real(name, *a))
    before = os.environ.get("NCCL_EP_HOME")
    assert _ep.preload_nccl_ep() is None
    assert os.environ.get("NCCL_EP_HOME") == before


def test_high_throughput_rules():
    """Both transports have the contiguous layout; NCCL EP's adds its multiples of 4."""
    assert fd.ep_buffer_size(_cfg(mode="high_throughput", max_tokens=18), 2) > 0
    with pytest.raises(fp8kit.UnsupportedError, match="multiples of 4"):
        fd.ep_buffer_size(_cfg(hidden=1024, mode="high_throughput", transport="nccl_ep", max_tokens=18), 2)
    with pytest.raises(fp8kit.InvalidArgumentError, match="mode must be one of low_latency, high_throughput"):
        _cfg(mode="fast")


def test_buffer_size_wants_a_config():
    with pytest.raises(fp8kit.InvalidArgumentError, match="EpConfig"):
        fd.ep_buffer_size({"num_experts": 8}, 1)


def test_create_refusals_before_any_communication():
    """fp8kit_ep_create refuses a CPU context and a NULL communicator at once (nothing collective happens), with
    its messages, through the same call ExpertParallel makes."""
    cpu = fp8kit.Context("cpu")
    try:
        with pytest.raises(fp8kit.UnsupportedError, match="runs on the CUDA backend; ctx is a cpu context"):
            _ep.create_handle(cpu, 0x1000, _cfg())
        with pytest.raises(fp8kit.NullPointerError, match="fp8kit_ep_create: nccl_comm is NULL"):
            _ep.create_handle(cpu, None, _cfg())
        with pytest.raises(fp8kit.NullPointerError, match="fp8kit_ep_create: cfg is NULL"):
            _ep.create_handle(cpu, 0x1000, None)
    finally:
        cpu.close()


# ------------------------------------------------------------------ EPGroup and the layer without CUDA
@pytest.fixture
def gloo1():
    """A one-rank gloo process group (no network: a HashStore)."""
    if dist.is_initialized():
        pytest.skip("a process group is already initialized")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_epgroup_needs_torch_distributed():
    if dist.is_initialized():
        pytest.skip("a process group is already initialized")
    with pytest.raises(fp8kit.InvalidArgumentError, match="torch.distributed is not initialized"):
        fd.EPGroup()
    with pytest.raises(fp8kit.InvalidArgumentError, match="torch.distributed is not initialized"):
        fd.MoE(None, 8, 256, 128, 2, 16)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_epgroup_refuses_without_cuda(gloo1):
    with pytest.raises(fp8kit.UnsupportedError, match="no CUDA device is visible to torch"):
        fd.EPGroup()


def test_layer_arguments_checked_first():
    with pytest.raises(fp8kit.InvalidArgumentError, match="group must be an fp8kit.distributed.EPGroup"):
        fd.ExpertParallel(object(), 8, 256, 2, 16)
    with pytest.raises(fp8kit.InvalidShapeError, match="intermediate = 100; it must be a positive multiple of 128"):
        fd.MoE(None, 8, 256, 100, 2, 16)
    with pytest.raises(fp8kit.UnsupportedError, match="e4m3 or e5m2"):
        fd.MoE(None, 8, 256, 128, 2, 16, dtype="bf16")


def _nccl_or_skip():
    try:
        return fd.nccl_library()
    except fp8kit.UnsupportedError as e:
        pytest.skip(str(e))


def test_unique_id_travels_through_the_group(gloo1):
    _nccl_or_skip()
    assert fd.nccl_version() >= 2700
    try:
        uid = _nccl.broadcast_unique_id(None, 0, _nccl.new_unique_id)
    except fp8kit.DeviceError as e:  # NCCL's bootstrap found no usable interface here
        pytest.skip(str(e))
    assert isinstance(uid, bytes) and len(uid) == 128 and any(uid)


def test_unique_id_failure_reaches_every_rank(gloo1):
    def fail():
        raise fp8kit.DeviceError("no id today")
    with pytest.raises(fp8kit.DeviceError, match="no id today"):
        _nccl.broadcast_unique_id(None, 0, fail)


def test_from_comm_refuses_null():
    with pytest.raises(fp8kit.InvalidArgumentError, match="non-NULL ncclComm_t"):
        fd.EPGroup.from_comm(0)


# ------------------------------------------------------------------ a plain torch layer (the oracle's oracle)
FMAX = {"e4m3": 448.0, "e5m2": 57344.0}


def quant_1x128(x, dtype="e4m3"):
    """docs/spec.md 2.1 block1x128 in plain torch (fp32 on the CPU): S = fl32(amax / fmax) (1 for an all-zero
    block, 2^-149 where the quotient underflows), q = fp8(fl32(x / S)). Returns (codes as torch fp8, S)."""
    x = x.float()
    R, C = x.shape
    b = x.view(R, C // 128, 128)
    amax = b.abs().amax(-1)
    S = amax / FMAX[dtype]
    S = torch.where(S == 0, torch.full_like(S, 2.0 ** -149), S)
    S = torch.where(amax == 0, torch.ones_like(S), S)
    tdt = torch.float8_e4m3fn if dtype == "e4m3" else torch.float8_e5m2
    return (b / S[..., None]).to(tdt).view(R, C), S


def deq_1x128(q, S):
    R, C = q.shape
    return (q.float().view(R, C // 128, 128) * S[..., None]).view(R, C)


def deq_128x128(q, S):
    E, N, K = q.shape
    s = S.repeat_interleave(128, 1)[:, :N].repeat_interleave(128, 2)[:, :, :K]
    return q.float() * s


def plain_layer(x, ids, w, q13, s13, q2, s2):
    """The layer in plain torch: x quantized 1x128 (quant_1x128), the gate/up product in float64 from the
    dequantized operands, silu(gate) * up in fp32, rounded to bf16 and quantized 1x128, the down product in
    float64 rounded to bf16, and each token's entries summed in fp32 in top-k order. Returns (out, per-entry
    dict of (h codes, h scales, y) keyed by (token, expert))."""
    T, H = x.shape
    E = q13.shape[0]
    I = q13.shape[1] // 2
    xq, xs = quant_1x128(x)
    xd = deq_1x128(xq, xs).double()
    w13d, w2d = deq_128x128(q13, s13).double(), deq_128x128(q2, s2).double()
    per = {}
    out = torch.zeros((T, H), dtype=torch.float32)
    for i in range(T):
        acc = torch.zeros(H, dtype=torch.float32)
        for kk in range(ids.shape[1]):
            e = int(ids[i, kk])
            if not 0 <= e < E:
                continue
            if (i, e) not in per:
                gu = (xd[i] @ w13d[e].T).float()
                h = (torch.nn.functional.silu(gu[:I]) * gu[I:]).to(torch.bfloat16)
                hq, hs = quant_1x128(h[None])
                y = (deq_1x128(hq, hs).double()[0] @ w2d[e].T).to(torch.bfloat16)
                per[(i, e)] = (hq[0], hs[0], y)
            acc = acc + w[i, kk] * per[(i, e)][2].float()
        out[i] = acc
    return out.to(torch.bfloat16), per


def bf16_rne(a32):
    """float32 numpy array -> bf16 bits (round to nearest even; no NaN here)."""
    b = a32.view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def spec_combine(y, rows, ids, w, E):
    """docs/ep.md's combine loop in numpy float32 scalars (each product and sum rounded, no FMA), from the
    reference's y (E, M, H) and rows (T, E). Returns bf16 bits (T, H)."""
    yb = y.view(torch.int16).numpy().astype(np.uint16).astype(np.uint32) << 16
    yf = yb.view(np.float32)
    T, k = ids.shape
    out = np.zeros((T, y.shape[2]), dtype=np.uint16)
    for i in range(T):
        acc = np.zeros(y.shape[2], dtype=np.float32)
        for kk in range(k):
            e = int(ids[i, kk])
            if not 0 <= e < E:
                continue
            acc = (acc + (np.float32(w[i, kk]) * yf[e, int(rows[i, e])]).astype(np.float32)).astype(np.float32)
        out[i] = bf16_rne(acc)
    return out


def _bits(t):
    return t.contiguous().view(torch.uint8).numpy() if t.element_size() == 1 else \
        t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32).numpy()


def test_quant_helper_is_fp8kit_quantize():
    """The plain torch 1x128 rule above gives fp8kit.quantize's codes and scales bit for bit, so the
    comparisons below test the layer, not two quantizers."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(17, 384, generator=g) * torch.logspace(-3, 3, 384)).to(torch.bfloat16)
    x[2] = 0
    q, s = fp8kit.quantize(x, scheme="block1x128")
    q2, s2 = quant_1x128(x)
    assert np.array_equal(_bits(q), _bits(q2))
    assert np.array_equal(_bits(s), _bits(s2))


def _integer_operands(seed, T, H, I, E, k):
    """Operands whose arithmetic is exact up to the SwiGLU product: integers 1..7 (tokens, gate weights) and
    -7..7 (up and down weights), a 7 in every 128 block, so every scale is 7/448 = 2^-6 and every code exact;
    the gate outputs are >= H >= 256, where silu(g) = g / (1 + exp(-g)) = g in fp32 on both sides."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(1, 8, (T, H), generator=g).float()
    x[:, ::128] = 7
    wg = torch.randint(1, 8, (E, I, H), generator=g).float()
    wu = torch.randint(-7, 8, (E, I, H), generator=g).float()
    w2 = torch.randint(-7, 8, (E, H, I), generator=g).float()
    for wt in (wg, wu, w2):
        wt[:, ::128, ::128] = 7
    w13 = torch.cat([wg, wu], 1)
    ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)]).to(torch.int32)
    w = torch.rand((T, k), generator=g)
    return x.to(torch.bfloat16), ids, w, w13.to(torch.bfloat16), w2.to(torch.bfloat16)


def test_reference_bit_exact_on_exact_arithmetic():
    T, H, I, E, k = 9, 256, 128, 5, 3
    x, ids, w, w13, w2 = _integer_operands(5, T, H, I, E, k)
    q13, s13, q2, s2 = fd.quantize_experts(w13, w2)
    assert float(s13.min()) == float(s13.max()) == 2.0 ** -6  # the exact design holds
    out, inter = fd.moe_reference(x, ids, w, q13, s13, q2, s2, return_intermediates=True)
    ref, per = plain_layer(x, ids, w, q13, s13, q2, s2)
    rows, h, hs, y = inter["rows"], inter["h"], inter["h_scale"], inter["y"]
    ulp_flips = 0
    for (i, e), (hq_p, hs_p, y_p) in per.items():
        r = int(rows[i, e])
        # the down projection's fp8 input: bit for bit (exact products, the same bf16 rounding and 1x128 rule)
        assert np.array_equal(_bits(h[e, r]), _bits(hq_p)), (i, e)
        assert np.array_equal(_bits(hs[e, r]), _bits(hs_p)), (i, e)
        # y: fp8kit sums each 128 slice in fp32, the plain layer in float64: at most one bf16 ulp apart
        d = np.abs(_bits(y[e, r]).astype(np.int32) - _bits(y_p).astype(np.int32))
        assert d.max() <= 1, (i, e)
        ulp_flips += int((d > 0).sum())
    assert ulp_flips <= 0.01 * len(per) * H
    # the combine: docs/ep.md's loop on the reference's own y, bit for bit
    assert np.array_equal(_bits(out).astype(np.uint16), spec_combine(y, rows, ids, w, E))
    # the whole layer against the plain one: y's one-ulp differences, weighted, plus out's rounding:
    # |out - ref| <= 2^-7 * sum_kk |w y| + 2^-8 |ref| per element
    wy = torch.zeros((T, H))
    for i in range(T):
        for kk in range(k):
            wy[i] += (w[i, kk] * per[(i, int(ids[i, kk]))][2].float()).abs()
    assert bool(((out.float() - ref.float()).abs() <= 2.0 ** -7 * wy + 2.0 ** -8 * ref.float().abs()).all())


def test_reference_against_plain_torch_random():
    """Normal data: silu and the sums now round differently in the two computations, so an h element may land
    on the other side of a bf16 or e4m3 rounding boundary (one e4m3 step: 2^-4 relative at most, 2^-3 for the
    smallest normals) on a few elements; the output's relative Frobenius error against the plain layer then
    stays far below the fp8 quantization error itself (~2e-2 against an unquantized layer). Bound: 5e-3."""
    g = torch.Generator().manual_seed(11)
    T, H, I, E, k = 12, 384, 256, 6, 2
    x = torch.randn((T, H), generator=g).to(torch.bfloat16)
    w13 = (torch.randn((E, 2 * I, H), generator=g) / H ** 0.5).to(torch.bfloat16)
    w2 = (torch.randn((E, H, I), generator=g) / I ** 0.5).to(torch.bfloat16)
    ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)]).to(torch.int32)
    w = torch.softmax(torch.randn((T, k), generator=g), -1)
    q13, s13, q2, s2 = fd.quantize_experts(w13, w2)
    out = fd.moe_reference(x, ids, w, q13, s13, q2, s2)
    ref, _ = plain_layer(x, ids, w, q13, s13, q2, s2)
    rel = float((out.float() - ref.float()).norm() / ref.float().norm())
    assert rel <= 5e-3, rel
    assert not torch.isnan(out.float()).any()


def test_reference_routing_rules():
    """Tokens listing an expert twice (received once, its row read twice), -1 and out-of-range ids (no
    contribution), an expert no token lists, a token with no expert (+0), the masked layout's rows in token
    order, and max_rows."""
    g = torch.Generator().manual_seed(7)
    T, H, I, E, k = 8, 256, 128, 5, 3
    x = torch.randn((T, H), generator=g).to(torch.bfloat16)
    w13 = (torch.randn((E, 2 * I, H), generator=g) / 16).to(torch.bfloat16)
    w2 = (torch.randn((E, H, I), generator=g) / 11).to(torch.bfloat16)
    q13, s13, q2, s2 = fd.quantize_experts(w13, w2)
    ids = torch.tensor([[0, 1, 2], [1, 1, 0], [-1, 2, -1], [3, 0, 1], [-1, -1, -1], [5, 0, -7], [2, 3, 0],
                        [0, 0, 0]], dtype=torch.int32)  # expert 4: no token; 5 and -7: out of range
    w = torch.rand((T, k), generator=g) - 0.25
    out, inter = fd.moe_reference(x, ids, w, q13, s13, q2, s2, return_intermediates=True)
    counts = inter["counts"].tolist()
    assert counts == [6, 3, 3, 2, 0]
    q = _bits(inter["q"])
    for e in range(E):
        toks = [i for i in range(T) if e in ids[i].tolist()]
        assert [int(r) for r in inter["rows"][toks, e]] == list(range(len(toks)))
        assert np.array_equal(_bits(inter["a"][e, :len(toks)]), q[toks])
    assert np.array_equal(_bits(out).astype(np.uint16), spec_combine(inter["y"], inter["rows"], ids, w, E))
    assert not _bits(out)[4].any()  # no expert: +0, not -0
    out2 = fd.moe_reference(x, ids, w, q13, s13, q2, s2, max_rows=T)
    assert np.array_equal(_bits(out), _bits(out2))
    with pytest.raises(fp8kit.InvalidArgumentError, match="max_rows = 5 but an expert has 6 rows"):
        fd.moe_reference(x, ids, w, q13, s13, q2, s2, max_rows=5)
    empty = fd.moe_reference(x[:0], ids[:0], w[:0], q13, s13, q2, s2)
    assert tuple(empty.shape) == (0, H) and empty.dtype == torch.bfloat16


def test_reference_shape_checks():
    x = torch.zeros((2, 256), dtype=torch.bfloat16)
    ids = torch.zeros((2, 1), dtype=torch.int32)
    w = torch.ones((2, 1))
    q13, s13, q2, s2 = fd.quantize_experts(torch.ones((2, 256, 256)), torch.ones((2, 256, 128)))
    with pytest.raises(fp8kit.InvalidShapeError, match="w13 must be"):
        fd.moe_reference(torch.zeros((2, 384)), ids, w, q13, s13, q2, s2)
    with pytest.raises(fp8kit.InvalidShapeError, match="topk_ids, topk_weights"):
        fd.moe_reference(x, ids, torch.ones((2, 2)), q13, s13, q2, s2)
    with pytest.raises(fp8kit.InvalidShapeError, match="w2 must be"):
        fd.quantize_experts(torch.ones((2, 256, 256)), torch.ones((2, 256, 256)))


def test_combine_reference_order_and_zeros():
    ones = torch.ones((1, 3, 4), dtype=torch.bfloat16)
    valid = torch.ones((1, 3), dtype=torch.bool)
    # top-k order: 1 + 2^-25 rounds back to 1 in fp32, then - 1: +0; in another order the 2^-25 would survive
    out = fd.combine_reference(ones, torch.tensor([[1.0, 2.0 ** -25, -1.0]]), valid)
    assert not _bits(out).any()
    out = fd.combine_reference(ones, torch.tensor([[1.0, -1.0, 2.0 ** -25]]), valid)
    assert (out.float() == 2.0 ** -25).all()
    # -0 products on +0 stay +0; an entry that is not valid adds nothing (a NaN row there is never read)
    nan = ones.clone()
    nan[0, 1] = float("nan")
    out = fd.combine_reference(nan * 0 + torch.tensor(0.0).bfloat16(), torch.tensor([[-1.0, 1.0, -1.0]]),
                               torch.tensor([[True, False, True]]))
    assert not _bits(out).any()
    with pytest.raises(fp8kit.InvalidShapeError):
        fd.combine_reference(ones[0], torch.ones((1, 3)), valid)


def test_quantize_experts_is_quantize_per_expert():
    g = torch.Generator().manual_seed(2)
    w13 = torch.randn((3, 512, 384), generator=g).to(torch.bfloat16)
    w2 = torch.randn((3, 384, 256), generator=g).to(torch.bfloat16)
    q13, s13, q2, s2 = fd.quantize_experts(w13, w2, pow2=True)
    assert q13.dtype == torch.float8_e4m3fn and tuple(s13.shape) == (3, 4, 3) and tuple(s2.shape) == (3, 3, 2)
    for e in range(3):
        qe, se = fp8kit.quantize(w13[e], scheme="block128x128", pow2=True)
        assert np.array_equal(_bits(q13[e]), _bits(qe)) and np.array_equal(_bits(s13[e]), _bits(se))
    q, _, _, _ = fd.quantize_experts(w13, w2, dtype="e5m2")
    assert q.dtype == torch.float8_e5m2


# ------------------------------------------------------------------ on a GPU (skipped without one)
def _gpu_group_or_skip():
    if not HAS_CUDA:
        pytest.skip("no CUDA device, or libfp8kit without the CUDA backend")
    _nccl_or_skip()
    return fd.EPGroup(device=0)


@pytest.mark.parametrize("scale_layout", ["plain", "mn_major"])
def test_moe_one_rank_matches_reference(gloo1, scale_layout):
    """World size 1 (NCCL sending to itself): the dispatched codes and scales are quantize's, and with plain
    scales every stage is the reference's call on the same rows, bit for bit; with mn_major scales the first
    GEMM reads the same values in another layout (bit for bit expected, bounded here: rel <= 1e-2)."""
    group = _gpu_group_or_skip()
    dev = torch.device("cuda", 0)
    g = torch.Generator(device="cpu").manual_seed(21)
    E, H, I, k, T = 8, 512, 256, 3, 40
    w13 = (torch.randn((E, 2 * I, H), generator=g) / H ** 0.5).to(torch.bfloat16).to(dev)
    w2 = (torch.randn((E, H, I), generator=g) / I ** 0.5).to(torch.bfloat16).to(dev)
    try:
        moe = fd.MoE.from_bf16(group, w13, w2, k, T, scale_layout=scale_layout)
    except fp8kit.UnsupportedError as e:
        if "without NCCL" in str(e):
            group.close()
            pytest.skip(str(e))
        raise
    try:
        for t in (T, 7, 0, 1):
            x = torch.randn((t, H), generator=g).to(torch.bfloat16).to(dev)
            ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(t)]).to(torch.int32) if t else \
                torch.zeros((0, k), dtype=torch.int32)
            if t > 2:
                ids[0, 1] = ids[0, 0]
                ids[1, 2] = -1
            ids = ids.to(dev)
            w = torch.rand((t, k), generator=g).to(dev)
            out, got = moe(x, ids, w, return_intermediates=True)
            ref, want = fd.moe_reference(x, ids, w, moe.w13, moe.w13_scale, moe.w2, moe.w2_scale,
                                         max_rows=moe.ep.recv.max_rows, return_intermediates=True)
            torch.cuda.synchronize()
            assert out.shape == (t, H) and int(got["recv"].status.item()) == 0
            if t == 0:
                continue
            counts = got["recv"].counts.cpu()
            assert counts.tolist() == want["counts"].cpu().tolist()
            rx = got["recv"].x.view(torch.uint8).cpu()
            rs = got["recv"].scale.cpu()
            if scale_layout == "mn_major":
                rs = rs.transpose(1, 2)
            for e in range(E):
                c = int(counts[e])
                assert torch.equal(rx[e, :c], want["a"][e, :c].view(torch.uint8).cpu())
                assert torch.equal(rs[e, :c], want["a_scale"][e, :c].cpu())
                if scale_layout == "plain":
                    assert torch.equal(got["h"][e, :c].view(torch.uint8).cpu(),
                                       want["h"][e, :c].view(torch.uint8).cpu())
                    assert torch.equal(got["y"][e, :c].cpu(), want["y"][e, :c].cpu())
            if scale_layout == "plain":
                assert torch.equal(out.view(torch.int16), ref.view(torch.int16))
            else:
                rel = float((out.float() - ref.float()).norm() / ref.float().norm().clamp(min=1e-30))
                assert rel <= 1e-2, rel
    finally:
        moe.close()
        group.close()
