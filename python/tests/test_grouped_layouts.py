"""test_grouped_layouts.py - fp8kit.grouped_mm's layout= (masked: a (G, M, K),
offs = the valid-row counts, D (G, M, N)) and block scales (a's 1x128 scales,
each expert's 128x128 ones, in fp8kit.quantize's shapes) on the CPU backend
(numpy and torch CPU) against an fp64 reference of the dequantized operands
within docs/spec.md section 3's bounds; the round trip from fp8kit.quantize;
rows past the counts untouched; how the scale mode is told apart for K <= 128;
bad input; the torch op's layout argument and its fake (meta) kernel; and the
CUDA kernel against the CPU backend (skipped without an sm_90 GPU)."""
import numpy as np
import pytest

import fp8kit
from test_gemm import BOUND, act64, as_f64, deq64, rel_err
from test_grouped import quant_experts, tag

F32 = np.float32
G, M, K, N = 4, 24, 200, 136  # K and N not multiples of 128: partial blocks on both
KB, NB = 2, 2  # ceil(K / 128), ceil(N / 128)
COUNTS = np.array([0, M, 7, 13], dtype=np.int32)  # empty, full and partial experts
SENTINEL = 7.0


def codes(q, g=None):
    """numpy fp8 codes of a quantize() result (expert g of a stack) as a tagged 2-D array."""
    arr = np.asarray(q)
    return tag(arr if g is None else arr[g], q.fk_dtype)


def quant_weights(rng, scheme, n=N, k=K):
    """A (G, N, K) weight stack quantized per expert: codes (G, N, K), scales ((G, N) row, (G,) tensor or,
    for block128x128, quantize's own (G, ceil(N/128), ceil(K/128)) of the whole stack) and the fp64
    dequantized experts."""
    w = rng.standard_normal((G, n, k)).astype(F32)
    if scheme == "block128x128":
        qw, sw = fp8kit.quantize(w, scheme="128x128")
        assert np.shape(sw) == (G, -(-n // 128), -(-k // 128))
        return qw, sw, [deq64(codes(qw, g), np.asarray(sw)[g], scheme) for g in range(G)]
    return quant_experts(w, scheme)


def quant_masked_a(rng, scheme, k=K):
    """a (G, M, K) quantized with quantize's shapes ((G, M, 1) row, (G, M, ceil(K/128)) 1x128) and the fp64
    dequantized slabs."""
    a = rng.standard_normal((G, M, k)).astype(F32)
    qa, sa = fp8kit.quantize(a, scheme=scheme)
    return qa, sa, [deq64(codes(qa, g), np.asarray(sa)[g], scheme) for g in range(G)]


SCALES = {"row": ("row", "row"), "block": ("block1x128", "block128x128")}


@pytest.mark.parametrize("scales", ["row", "block"])
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_masked_against_reference(scales, out_dtype, rng):
    sch_a, sch_b = SCALES[scales]
    qa, sa, da = quant_masked_a(rng, sch_a)
    qw, sw, dw = quant_weights(rng, sch_b)
    if scales == "block":
        assert np.shape(sa) == (G, M, KB) and np.shape(sw) == (G, NB, KB)
    bias = rng.standard_normal((G, N)).astype(F32)
    out = np.full((G, M, N), SENTINEL, dtype=F32)
    if out_dtype == "float32":
        d = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), COUNTS, sa, sw, bias=bias, out=out, activation="silu",
                              alpha=0.75, layout="masked")
        assert d is out
    else:
        d = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), COUNTS, sa, sw, bias=bias, out_dtype=out_dtype,
                              activation="silu", alpha=0.75, layout="masked")
    assert d.shape == (G, M, N)
    for g in range(G):
        c = int(COUNTS[g])
        if c:  # only the valid rows are read: the rest of a new output is uninitialized
            want = act64(0.75 * (da[g][:c] @ dw[g].T) + bias[g], "silu")
            assert rel_err(d[g, :c], want) <= BOUND[out_dtype], g
        if out_dtype == "float32":
            assert (out[g, c:] == SENTINEL).all(), g  # rows past the count are not written


@pytest.mark.parametrize("scales", ["row", "tensor", "block"])
def test_masked_equals_contiguous(scales, rng):
    """Each expert's valid rows packed into a contiguous (T, K) a with cumulative offs: the same groups, the
    same per-group GEMMs, so the same bits."""
    sch_a, sch_b = SCALES.get(scales, ("tensor", "tensor"))
    qa, sa, _ = quant_masked_a(rng, sch_a if scales != "tensor" else "row")
    if scales == "tensor":
        sa = np.asarray(F32(0.37))
    qw, sw, _ = quant_weights(rng, sch_b)
    b = np.swapaxes(qw, 1, 2)
    out = np.full((G, M, N), SENTINEL, dtype=F32)
    fp8kit.grouped_mm(qa, b, COUNTS, sa, sw, out=out, layout="masked")
    rows = np.concatenate([np.arange(g * M, g * M + int(COUNTS[g])) for g in range(G)])
    ca = tag(np.asarray(qa).reshape(G * M, K)[rows], qa.fk_dtype)
    csa = sa if scales == "tensor" else np.ascontiguousarray(np.asarray(sa).reshape(G * M, -1)[rows])
    cd = fp8kit.grouped_mm(ca, b, np.cumsum(COUNTS).astype(np.int32), csa, sw)
    assert np.array_equal(out.reshape(G * M, N)[rows], cd)
    mask = np.ones(G * M, bool)
    mask[rows] = False
    assert (out.reshape(G * M, N)[mask] == SENTINEL).all()


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_block_contiguous_against_reference(out_dtype, rng):
    T = 130
    a = rng.standard_normal((T, K)).astype(F32)
    qa, sa = fp8kit.quantize(a, scheme="1x128")
    assert np.shape(sa) == (T, KB)
    da = deq64(qa, sa, "block1x128")
    qw, sw, dw = quant_weights(rng, "block128x128")
    offs = np.array([30, 30, 100, 120], dtype=np.int32)  # group 1 empty, rows 120.. past the last offset
    bias = rng.standard_normal((G, N)).astype(F32)
    kw = dict(bias=bias, activation="gelu_tanh", alpha=0.5)
    if out_dtype == "float32":
        out = np.full((T, N), SENTINEL, dtype=F32)
        d = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, out=out, **kw)
        assert (out[120:] == SENTINEL).all()
    else:
        d = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, out_dtype=out_dtype, **kw)
    assert d.shape == (T, N)
    want = np.zeros((120, N))
    prev = 0
    for g, end in enumerate(offs):
        want[prev:end] = act64(0.5 * (da[prev:end] @ dw[g].T) + bias[g], "gelu_tanh")
        prev = int(end)
    assert rel_err(d[:120], want) <= BOUND[out_dtype]
    # per group, the same as fp8kit.scaled_mm with the group's block scales (bit for bit)
    prev = 0
    for g, end in enumerate(offs):
        if end > prev:
            one = fp8kit.scaled_mm(codes(qa)[prev:end], codes(qw, g).T, np.asarray(sa)[prev:end],
                                   np.asarray(sw)[g], out_dtype=out_dtype, **dict(kw, bias=bias[g]))
            assert np.array_equal(np.asarray(d[prev:end]), np.asarray(one)), g
        prev = int(end)


def exact_e4m3_inputs(rng, shape):
    """Floats that 1x128 / 128x128 quantization with power-of-two scales keeps exactly: 4-bit integers times
    2^-2 .. 2^2 (a block's values span at most 2^8, far inside e4m3's normal range)."""
    return (rng.integers(-15, 16, size=shape) * np.exp2(rng.integers(-2, 3, size=shape))).astype(F32)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_block_round_trip_from_quantize(kind, layout, rng):
    """quantize a float activation ("1x128") and a float (G, N, K) weight stack ("128x128"), feed quantize's
    outputs as they are (b = q_w.transpose(-2, -1)) and compare with the float product within the bf16 bound:
    exactly representable inputs with pow2 scales quantize without loss, so the product is the reference."""
    shape_a = (G, M, K) if layout == "masked" else (G * M, K)
    offs = COUNTS if layout == "masked" else np.array([10, 10, 60, 90], dtype=np.int32)
    x = exact_e4m3_inputs(rng, shape_a)
    w = exact_e4m3_inputs(rng, (G, N, K))
    if kind == "torch":
        torch = pytest.importorskip("torch")
        x, w, offs_in = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(offs)
    else:
        offs_in = offs
    qx, sx = fp8kit.quantize(x, scheme="1x128", pow2=True)
    qw, sw = fp8kit.quantize(w, scheme="128x128", pow2=True)
    assert tuple(sx.shape) == shape_a[:-1] + (KB,) and tuple(sw.shape) == (G, NB, KB)
    d = fp8kit.grouped_mm(qx, qw.transpose(-2, -1) if kind == "torch" else np.swapaxes(qw, -2, -1), offs_in, sx, sw,
                          out_dtype="bfloat16", layout=layout)
    xf, wf = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    for g in range(G):
        if layout == "masked":
            dg, r = d[g, :int(offs[g])], xf[g, :int(offs[g])]
        else:
            r0 = int(offs[g - 1]) if g else 0
            dg, r = d[r0:int(offs[g])], xf[r0:int(offs[g])]
        gw = dg.float().numpy().astype(np.float64) if kind == "torch" else as_f64(dg)
        if len(r):
            want = r @ wf[g].T
            assert np.linalg.norm(gw - want) / np.linalg.norm(want) <= BOUND["bfloat16"], g


def test_block_round_trip_gaussian(rng):
    """The same with Gaussian inputs (rows scaled by 2^-6 .. 2^6) and quantize's default scales: within the bf16
    bound of the dequantized reference, and within e4m3's quantization error of the float product (about 0.04,
    at most 0.074 over 60 seeds)."""
    x = rng.standard_normal((G, M, K)).astype(F32) * np.exp2(rng.integers(-6, 7, size=(G, M, 1))).astype(F32)
    w = rng.standard_normal((G, N, K)).astype(F32) * np.exp2(rng.integers(-6, 7, size=(G, N, 1))).astype(F32)
    qx, sx = fp8kit.quantize(x, scheme="1x128")
    qw, sw = fp8kit.quantize(w, scheme="128x128")
    d = fp8kit.grouped_mm(qx, np.swapaxes(qw, -2, -1), COUNTS, sx, sw, out_dtype="bfloat16", layout="masked")
    for g in range(1, G):
        c = int(COUNTS[g])
        got = as_f64(d[g, :c])
        deq = deq64(codes(qx, g), np.asarray(sx)[g], "block1x128") @ deq64(codes(qw, g), np.asarray(sw)[g],
                                                                              "block128x128").T
        flt = x[g, :c].astype(np.float64) @ w[g].astype(np.float64).T
        assert np.linalg.norm(got - deq[:c]) / np.linalg.norm(deq[:c]) <= BOUND["bfloat16"]
        assert np.linalg.norm(got - flt) / np.linalg.norm(flt) <= 0.1


def test_k_at_most_128_row_vs_block(rng):
    """K <= 128: a row scale (T, 1) and a 1x128 scale (T, 1) have the same shape; the mode follows scale_b's
    ndim (2-D: row, 3-D: block), both against the reference."""
    k, n, T = 96, 40, 60
    a = rng.standard_normal((T, k)).astype(F32)
    offs = np.array([10, 25, 25, 60], dtype=np.int32)
    qa_r, sa_r = fp8kit.quantize(a, scheme="row")
    qa_b, sa_b = fp8kit.quantize(a, scheme="1x128")
    assert np.shape(sa_r) == np.shape(sa_b) == (T, 1)
    for sch_b in ("row", "block128x128"):
        qw, sw, dw = quant_weights(rng, sch_b, n=n, k=k)
        if sch_b == "row":
            qa, sa, da = qa_r, sa_r, deq64(qa_r, sa_r, "row")
        else:
            assert np.shape(sw) == (G, 1, 1)
            qa, sa, da = qa_b, sa_b, deq64(qa_b, sa_b, "block1x128")
        d = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw)
        want = np.zeros((T, n))
        prev = 0
        for g, end in enumerate(offs):
            want[prev:end] = da[prev:end] @ dw[g].T
            prev = int(end)
        assert rel_err(d, want) <= BOUND["float32"], sch_b


def test_bad_input(rng):
    qa, sa, _ = quant_masked_a(rng, "block1x128")
    qw, sw, _ = quant_weights(rng, "block128x128")
    b = np.swapaxes(qw, 1, 2)
    ok = fp8kit.grouped_mm(qa, b, COUNTS, sa, sw, layout="masked")
    assert ok.shape == (G, M, N)
    flat_a = tag(np.asarray(qa).reshape(G * M, K), qa.fk_dtype)
    flat_sa = np.ascontiguousarray(np.asarray(sa).reshape(G * M, KB))
    offs = np.array([10, 20, 30, G * M], dtype=np.int32)
    for bad in ("ragged", "", "MASKED ", 1, None):
        with pytest.raises(fp8kit.InvalidArgumentError, match="layout"):
            fp8kit.grouped_mm(qa, b, COUNTS, sa, sw, layout=bad)
    with pytest.raises(fp8kit.InvalidShapeError, match="masked"):  # masked with a 2-D a
        fp8kit.grouped_mm(flat_a, b, COUNTS, flat_sa, sw, layout="masked")
    with pytest.raises(fp8kit.InvalidShapeError):  # contiguous with a 3-D a
        fp8kit.grouped_mm(qa, b, offs, sa, sw)
    with pytest.raises(fp8kit.InvalidShapeError):  # masked: a's G is not b's
        fp8kit.grouped_mm(tag(np.asarray(qa)[:3], qa.fk_dtype), b, COUNTS, np.asarray(sa)[:3], sw, layout="masked")
    # block scale_a of the wrong shape: flattened rows, a K block too many, a row scale
    for bad_sa in (flat_sa, np.ones((G, M, KB + 1), F32), np.ones((G, M, 1), F32), np.ones((G, M), F32)):
        with pytest.raises(fp8kit.InvalidShapeError, match="1x128"):
            fp8kit.grouped_mm(qa, b, COUNTS, bad_sa, sw, layout="masked")
    with pytest.raises(fp8kit.InvalidShapeError, match="1x128"):  # contiguous: (T, KB) wanted
        fp8kit.grouped_mm(flat_a, b, offs, np.ones((G * M, KB + 1), F32), sw)
    with pytest.raises(fp8kit.InvalidShapeError, match="scale_a"):  # a 3-D scale_b without scale_a
        fp8kit.grouped_mm(qa, b, COUNTS, None, sw, layout="masked")
    with pytest.raises(fp8kit.InvalidShapeError, match="128x128"):  # scale_b with a wrong block grid
        fp8kit.grouped_mm(qa, b, COUNTS, sa, np.ones((G, NB + 1, KB), F32), layout="masked")
    with pytest.raises(fp8kit.InvalidShapeError, match="3-D scale_b"):  # block scale_a with a row scale_b
        fp8kit.grouped_mm(flat_a, b, offs, flat_sa, np.ones((G, N), F32))
    with pytest.raises(fp8kit.InvalidArgumentError):  # block scales must be float32
        fp8kit.grouped_mm(qa, b, COUNTS, np.asarray(sa).astype(np.float16), sw, layout="masked")
    with pytest.raises(fp8kit.InvalidStrideError):  # block scales must be row-major contiguous
        fp8kit.grouped_mm(flat_a, b, offs, np.asfortranarray(flat_sa), sw)
    for bad_counts in ([0, M + 1, 7, 13], [0, M, -1, 13]):  # counts must be 0 .. M
        out = np.full((G, M, N), SENTINEL, dtype=F32)
        with pytest.raises(fp8kit.InvalidArgumentError):
            fp8kit.grouped_mm(qa, b, np.array(bad_counts, np.int32), sa, sw, out=out, layout="masked")
        assert (out == SENTINEL).all()  # checked before anything runs
    with pytest.raises(fp8kit.InvalidShapeError):  # masked: G counts
        fp8kit.grouped_mm(qa, b, COUNTS[:3], sa, sw, layout="masked")
    with pytest.raises(fp8kit.InvalidShapeError):  # masked out is (G, M, N)
        fp8kit.grouped_mm(qa, b, COUNTS, sa, sw, out=np.zeros((G * M, N), F32), layout="masked")
    # masked slabs must be M rows apart: a view of the first M - 4 rows of each expert is not
    with pytest.raises(fp8kit.InvalidStrideError):
        fp8kit.grouped_mm(qa[:, :M - 4], b, np.minimum(COUNTS, M - 4), np.ascontiguousarray(np.asarray(sa)[:, :M - 4]),
                          sw, layout="masked")


def torch_operands(rng):
    torch = pytest.importorskip("torch")
    qa, sa, _ = quant_masked_a(rng, "block1x128")
    qw, sw, _ = quant_weights(rng, "block128x128")
    ta = torch.from_numpy(np.asarray(qa)).view(torch.float8_e4m3fn)
    tw = torch.from_numpy(np.asarray(qw)).view(torch.float8_e4m3fn).transpose(1, 2)
    return (qa, sa, qw, sw), (ta, tw, torch.from_numpy(COUNTS), torch.from_numpy(np.asarray(sa)),
                              torch.from_numpy(np.asarray(sw)))


def test_torch_cpu_matches_numpy(rng):
    torch = pytest.importorskip("torch")
    (qa, sa, qw, sw), (ta, tw, toffs, tsa, tsb) = torch_operands(rng)
    want = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), COUNTS, sa, sw, out_dtype="float32", layout="masked")
    out = torch.full((G, M, N), SENTINEL)
    got = fp8kit.grouped_mm(ta, tw, toffs, tsa, tsb, out_dtype=torch.float32, out=out, layout="masked")
    for g in range(G):
        c = int(COUNTS[g])
        assert np.array_equal(out[g, :c].numpy(), np.asarray(want)[g, :c])
        assert bool((out[g, c:] == SENTINEL).all())
    assert got is out
    with pytest.raises(fp8kit.InvalidArgumentError):  # offs on the host as an int64 tensor
        fp8kit.grouped_mm(ta, tw, toffs.long(), tsa, tsb, layout="masked")


def test_torch_op_layout_and_fake(rng):
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    from torch._subclasses.fake_tensor import FakeTensorMode
    _, (ta, tw, toffs, tsa, tsb) = torch_operands(rng)
    want = fp8kit.grouped_mm(ta, tw, toffs, tsa, tsb, out_dtype=torch.float32, layout="masked")
    got = torch_ops.grouped_mm(ta, tw, toffs, tsa, tsb, out_dtype=torch.float32, layout="masked")
    assert got.shape == (G, M, N)
    for g in range(G):
        c = int(COUNTS[g])
        assert torch.equal(got[g, :c], want[g, :c])
    raw = torch.ops.fp8kit.grouped_mm(ta, tw, toffs, tsa, tsb, None, "bfloat16", "", 1.0, "masked")
    assert raw.shape == (G, M, N) and raw.dtype == torch.bfloat16
    # the fake kernel: (G, M, N) when masked, (T, N) for the old 9-argument call (layout defaults to contiguous)
    flat = (ta.reshape(G * M, K), tw, torch.tensor([5, 30, 60, G * M], dtype=torch.int32), tsa.reshape(G * M, KB),
            tsb, None, "float32", "", 1.0)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fk = lambda args: tuple(mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in args)  # noqa: E731
        fake = torch.ops.fp8kit.grouped_mm(*fk((ta, tw, toffs, tsa, tsb, None, "bfloat16", "", 1.0, "masked")))
        fake_old = torch.ops.fp8kit.grouped_mm(*fk(flat))
        with pytest.raises(fp8kit.InvalidArgumentError):
            torch.ops.fp8kit.grouped_mm(*fk((ta, tw, toffs, tsa, tsb, None, "bfloat16", "", 1.0, "ragged")))
    assert (fake.shape, fake.dtype, fake.device) == (raw.shape, raw.dtype, raw.device)
    real_old = torch.ops.fp8kit.grouped_mm(*flat)
    assert (fake_old.shape, fake_old.dtype) == (real_old.shape, real_old.dtype) == ((G * M, N), torch.float32)
    # opcheck's fake-tensor test with every row valid (repeated runs then write the same output)
    full = torch.full((G,), M, dtype=torch.int32)
    torch.library.opcheck(torch.ops.fp8kit.grouped_mm, (ta, tw, full, tsa, tsb, None, "float32", "", 1.0, "masked"),
                          test_utils=("test_faketensor",))


def test_torch_compile_masked(rng):
    """torch.compile traces the op through its fake kernel (aot_eager: no C++ compiler needed)."""
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    _, (ta, tw, _, tsa, tsb) = torch_operands(rng)
    full = torch.full((G,), M, dtype=torch.int32)

    def layer(x, s):
        return torch_ops.grouped_mm(x, tw, full, s, tsb, out_dtype=torch.float32, layout="masked").relu()

    eager = layer(ta, tsa)
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)(ta, tsa)
    assert compiled.shape == (G, M, N)
    assert torch.equal(eager, compiled)


@pytest.mark.parametrize("layout", ["masked", "contiguous"])
def test_cuda_block_matches_cpu(layout, rng):
    """masked / contiguous + block scales on CUDA tensors (device offs) against the CPU backend: bf16 within
    docs/spec.md 3, rows past the counts unwritten, status 0; counts > M write nothing and set status 2."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 CUDA device")
    if not fp8kit.backend_available("cuda"):
        pytest.skip("libfp8kit was built without a usable CUDA backend")
    k = 336  # the CUDA kernel needs K % 16 == 0; still not a multiple of 128
    kb = 3
    qa, sa, _ = quant_masked_a(rng, "block1x128", k=k)
    qw, sw, _ = quant_weights(rng, "block128x128", k=k)
    if layout == "masked":
        offs, shape_d = COUNTS, (G, M, N)
    else:
        qa = tag(np.asarray(qa).reshape(G * M, k), qa.fk_dtype)
        sa = np.ascontiguousarray(np.asarray(sa).reshape(G * M, kb))
        offs, shape_d = np.array([10, 10, 60, 90], dtype=np.int32), (G * M, N)
    want = np.asarray(fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, out_dtype="float32", layout=layout))
    ta = torch.from_numpy(np.asarray(qa)).view(torch.float8_e4m3fn).cuda()
    tw = torch.from_numpy(np.ascontiguousarray(qw)).view(torch.float8_e4m3fn).cuda().transpose(1, 2)
    tsa, tsb = torch.from_numpy(np.asarray(sa)).cuda(), torch.from_numpy(np.asarray(sw)).cuda()
    status = torch.full((1,), 7, dtype=torch.int32, device="cuda")
    out = torch.full(shape_d, 3.0, dtype=torch.bfloat16, device="cuda")
    fp8kit.grouped_mm(ta, tw, torch.from_numpy(offs).cuda(), tsa, tsb, out=out, status=status, layout=layout)
    torch.cuda.synchronize()
    assert int(status.item()) == 0
    got = out.float().cpu().numpy().astype(np.float64).reshape(-1, N)
    w = want.astype(np.float64).reshape(-1, N)
    valid = np.zeros(len(w), bool)
    for g in range(G):
        if layout == "masked":
            valid[g * M:g * M + int(offs[g])] = True
        else:
            valid[(int(offs[g - 1]) if g else 0):int(offs[g])] = True
    assert np.sqrt(((got[valid] - w[valid]) ** 2).sum() / (w[valid] ** 2).sum()) <= BOUND["bfloat16"]
    assert (got[~valid] == 3.0).all()
    if layout == "masked":
        out.fill_(3.0)
        fp8kit.grouped_mm(ta, tw, torch.tensor([0, M + 1, 7, 13], dtype=torch.int32, device="cuda"), tsa, tsb,
                          out=out, status=status, layout=layout)
        torch.cuda.synchronize()
        assert int(status.item()) == 2
        assert bool((out == 3.0).all())
