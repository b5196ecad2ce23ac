"""test_torch_device.py - the torch CUDA path on a machine with a GPU, torch
and a CUDA build of libfp8kit (skipped otherwise): quantize on CUDA tensors
bit-exact to the CPU backend and the numpy SPEC reference, scaled_mm against
torch._scaled_mm within SPEC section 3's bounds, the current-stream rule, CUDA
graph capture, torch.library.opcheck of the custom ops and torch.compile
tracing through them."""
import numpy as np
import pytest

import fp8kit
import spec_ref as ref

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)
if not fp8kit.backend_available("cuda"):
    pytest.skip("libfp8kit was built without a usable CUDA backend", allow_module_level=True)

DEV = "cuda"
F32 = np.float32


def _codes(t):
    return t.view(torch.uint8).cpu().numpy()


@pytest.mark.parametrize("scheme,axis,rounding,layout", [
    ("tensor", -1, "floor", "plain"), ("row", -1, "floor", "plain"), ("block1x128", -1, "floor", "plain"),
    ("block128x128", -1, "floor", "plain"), ("block1x128", -1, "floor", "mn_major"),
    ("mx", -1, "floor", "plain"), ("mx", -1, "rceil", "blocked"), ("mx", -2, "floor", "plain")])
def test_quantize_cuda_bit_exact(scheme, axis, rounding, layout):
    g = torch.Generator(device="cpu").manual_seed(11)
    x = (torch.randn(2, 256, 384, generator=g) * 5).to(torch.bfloat16)
    xc = x.to(DEV)
    q, s = fp8kit.quantize(xc, scheme=scheme, axis=axis, rounding=rounding, scale_layout=layout)
    assert q.device.type == "cuda" and q.dtype == torch.float8_e4m3fn
    qn, sn = fp8kit.quantize(x.float().numpy(), scheme=scheme, axis=axis, rounding=rounding, scale_layout=layout)
    assert np.array_equal(_codes(q), np.asarray(qn))
    s_cpu = s.view(torch.uint8) if s.dtype != torch.float32 else s
    assert np.array_equal(s_cpu.cpu().numpy().view(np.uint8), np.asarray(sn).view(np.uint8))
    rq, _ = ref.quantize(x.float().numpy(), scheme, "e4m3", axis, False, rounding, layout)
    assert np.array_equal(_codes(q), rq)


def _rel(d, want):
    d = d.double()
    assert not torch.isnan(d).any()
    return ((d - want).norm() / want.norm()).item()


@pytest.mark.parametrize("mode", ["tensor", "row"])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_scaled_mm_vs_torch(mode, out_dtype):
    g = torch.Generator(device="cpu").manual_seed(5)
    M, N, K = 256, 512, 1024
    a = torch.randn(M, K, generator=g).to(DEV)
    w = torch.randn(N, K, generator=g).to(DEV)
    qa, sa = fp8kit.quantize(a, scheme=mode)
    qw, sw = fp8kit.quantize(w, scheme=mode)
    sbt = sw.t() if mode == "row" else sw
    want = (qa.double() * sa.double()) @ (qw.double() * sw.double()).t()
    d = fp8kit.scaled_mm(qa, qw.t(), sa, sbt, out_dtype=out_dtype)
    ours = _rel(d, want)
    bound = 1e-5 if out_dtype == torch.float32 else 4e-3
    assert ours <= bound
    sa_t = sa if mode == "row" else sa.reshape(())
    sb_t = sbt if mode == "row" else sw.reshape(())
    theirs = _rel(torch._scaled_mm(qa, qw.t(), sa_t, sb_t, out_dtype=out_dtype), want)
    if out_dtype == torch.float32:
        assert ours <= max(1.5 * theirs, bound)


def test_current_stream_and_graph_capture():
    g = torch.Generator(device="cpu").manual_seed(7)
    a = torch.randn(128, 256, generator=g).to(DEV)
    w = torch.randn(192, 256, generator=g).to(DEV)
    qa, sa = fp8kit.quantize(a, scheme="row")
    qw, sw = fp8kit.quantize(w, scheme="row")
    ref_out = fp8kit.scaled_mm(qa, qw.t(), sa, sw.t())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        on_side = fp8kit.scaled_mm(qa, qw.t(), sa, sw.t())
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(on_side, ref_out)
    # capture after a warm-up call (plans and contexts exist), then replay
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        fp8kit.scaled_mm(qa, qw.t(), sa, sw.t())
        torch.cuda.current_stream().synchronize()
        with torch.cuda.graph(graph, stream=side):
            captured = fp8kit.scaled_mm(qa, qw.t(), sa, sw.t())
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, ref_out)


def test_opcheck_custom_ops():
    from fp8kit import torch_ops  # noqa: F401 (registers torch.ops.fp8kit.*)
    g = torch.Generator(device="cpu").manual_seed(3)
    x = torch.randn(64, 256, generator=g).to(DEV).to(torch.bfloat16)
    torch.library.opcheck(torch.ops.fp8kit.quantize.default, (x, "mx", "float8_e4m3fn", -1, "floor", False, "plain"))
    q, s = torch.ops.fp8kit.quantize(x, "row", "float8_e4m3fn", -1, "floor", False, "plain")
    torch.library.opcheck(torch.ops.fp8kit.dequantize.default, (q, s, "row", -1, "plain", "float32"))
    w = torch.randn(96, 256, generator=g).to(DEV)
    qw, sw = fp8kit.quantize(w, scheme="row")
    torch.library.opcheck(torch.ops.fp8kit.scaled_mm.default,
                          (q, qw.t(), s, sw.t(), None, "bfloat16", "", 1.0, 0.0, None, False, "", "", False))


def test_torch_compile_traces_through():
    from fp8kit import torch_ops
    g = torch.Generator(device="cpu").manual_seed(9)
    a = torch.randn(128, 256, generator=g).to(DEV)
    w = torch.randn(64, 256, generator=g).to(DEV)
    qw, sw = fp8kit.quantize(w, scheme="row")

    def layer(x):
        qx, sx = torch_ops.quantize(x, "row")
        return fp8kit.scaled_mm(qx, qw.t(), sx, sw.t(), out_dtype=torch.bfloat16, activation="relu")

    eager = layer(a)
    compiled = torch.compile(layer, fullgraph=True)(a)
    assert torch.equal(eager, compiled)
