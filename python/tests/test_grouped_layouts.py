"""test_grouped_layouts.py - fp8kit.grouped_mm's layout= (masked: a (G, M, K),
offs = the valid-row counts, D (G, M, N)) and block scales (a's 1x128 scales,
each expert's 128x128 ones, in fp8kit.quantize's shapes) on the CPU backend
(numpy and torch CPU) against an fp64 reference of the dequantized operands
within docs/spec.md section 3's bounds; the round trip from fp8kit.quantize;
rows past the counts untouched; how the scale mode is told apart for K <= 128;
bad input; the torch op's layout argument and its fake (meta) kernel; A's block
scales in DeepGEMM's mn_major layout (the padded buffer and its strided view,
padding NaN: the plain call's bytes, the square shape case, bad input, torch
CPU and the op); and the CUDA kernel against the CPU backend (skipped without
an sm_90 GPU)."""
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
    # block scales must be packed row-major (plain) or the mn_major view: every other column of a wider array is
    # neither (np.asfortranarray(flat_sa) is the mn_major view here, G * M being a multiple of 4)
    with pytest.raises(fp8kit.InvalidStrideError):
        fp8kit.grouped_mm(flat_a, b, offs, np.repeat(flat_sa, 2, axis=1)[:, ::2], sw)
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


# ------------------------------------------------------------------ mn_major A block scales (DeepGEMM's layout)
MN_N = 40


def mn_offsets(layout, rows, g):
    """Contiguous: G row ends with an empty group and, past a few rows, rows after the last end; masked: the G
    valid-row counts (an empty expert, a full one, partial ones)."""
    last = rows - (rows > 4)
    if layout == "masked":
        return np.array([last] if g == 1 else ([0, rows, rows // 2, (rows + 1) // 3] * g)[:g], dtype=np.int32)
    ends = ([rows // 3, rows // 3] + [(2 * rows) // 3] * max(g - 3, 0))[:g - 1] + [last]
    return np.array(ends, dtype=np.int32)


def mn_major_of(plain_sa):
    """The mn_major buffer of plain 1x128 scales, padding NaN (a read of it would show in the output), and
    DeepGEMM's view of it (get_mn_major_tma_aligned_tensor's strides, made with as_strided): (T, ka) ->
    buffer (ka, Tp), view strides (1, Tp); (G, M, ka) -> buffer (G, ka, Mp), view strides (ka*Mp, 1, Mp)."""
    from numpy.lib.stride_tricks import as_strided
    sa = np.asarray(plain_sa)
    rows, ka = sa.shape[-2:]
    rp = -(-rows // 4) * 4
    buf = np.full(sa.shape[:-2] + (ka, rp), np.nan, dtype=F32)
    buf[..., :rows] = np.swapaxes(sa, -1, -2)
    strides = (ka * rp * 4, 4, rp * 4) if sa.ndim == 3 else (4, rp * 4)
    return buf, as_strided(buf, sa.shape, strides)


def mn_operands(rng, layout, rows, ka, g):
    """a ((T, K) or masked (G, M, K)) quantized 1x128 with K = 128 * (ka - 1) + 64 (a partial last block), the
    (G, N, K) stack quantized 128x128 with b its (G, K, N) view, the offsets."""
    k = 128 * (ka - 1) + 64
    x = rng.standard_normal((g, rows, k) if layout == "masked" else (rows, k)).astype(F32)
    qa, sa = fp8kit.quantize(x, scheme="1x128")
    qw, sw = fp8kit.quantize(rng.standard_normal((g, MN_N, k)).astype(F32), scheme="128x128")
    assert np.shape(sa) == x.shape[:-1] + (ka,)
    return qa, sa, np.swapaxes(qw, 1, 2), sw, mn_offsets(layout, rows, g)


def mn_run(qa, b, offs, sa, sw, layout, **kw):
    """The output bytes of grouped_mm into a sentinel-filled float32 out (unwritten rows compare too)."""
    out = np.full(np.shape(qa)[:-1] + (MN_N,), SENTINEL, dtype=F32)
    fp8kit.grouped_mm(qa, b, offs, sa, sw, out=out, layout=layout, **kw)
    return out.tobytes()


def mn_covered(layout, offs, rows):
    """(group, first row, end row) over a's rows flattened (masked: expert g's valid rows)."""
    if layout == "masked":
        return [(g, g * rows, g * rows + int(c)) for g, c in enumerate(offs)]
    ends = [int(e) for e in offs]
    return [(g, ends[g - 1] if g else 0, e) for g, e in enumerate(ends)]


@pytest.mark.parametrize("g", [1, 4])
@pytest.mark.parametrize("ka", [1, 3, 5])
@pytest.mark.parametrize("rows", [1, 5, 130, 257])
@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_mn_major_equals_plain(layout, rows, ka, g, rng):
    """A's 1x128 scales as DeepGEMM's mn_major view (inferred or scale_layout="mn_major") and as the raw
    buffer (inferred from its shape or said) give exactly the plain call's output bytes; the padding (NaN) is
    never read; the library is told the mn_major layout with the whole flat buffer."""
    from fp8kit import _grouped
    qa, sa, b, sw, offs = mn_operands(rng, layout, rows, ka, g)
    want = mn_run(qa, b, offs, sa, sw, layout)
    assert mn_run(qa, b, offs, sa, sw, layout, scale_layout="plain") == want
    buf, view = mn_major_of(sa)
    for s, kw in ((view, {}), (view, dict(scale_layout="mn_major")), (buf, {}), (buf, dict(scale_layout="mn_major"))):
        assert mn_run(qa, b, offs, s, sw, layout, **kw) == want, (s.shape, kw)
    c = _grouped._prepare(qa, b, buf, sw, None, None, None, 1.0, None, layout)
    assert c.desc.scale_layout == fp8kit.ScaleLayout.MN_MAJOR
    assert (c.args.scale_a.ndim, c.args.scale_a.shape[0], c.args.scale_a.data) == (1, buf.size, buf.ctypes.data)
    c = _grouped._prepare(qa, b, view, sw, None, None, None, 1.0, None, layout)
    if view.flags.c_contiguous:  # (ka == 1 with one row slab): the view is packed row-major, plain scales too
        assert c.desc.scale_layout == fp8kit.ScaleLayout.PLAIN
    else:
        assert c.desc.scale_layout == fp8kit.ScaleLayout.MN_MAJOR and c.args.scale_a.shape[0] == buf.size
    assert c.args.scale_a.data == buf.ctypes.data
    assert _grouped.grouped_mm_workspace_size(qa, b, view, sw, layout=layout) == 0  # the CPU needs none


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_mn_major_square_case(layout, rng):
    """rows == ceil(K/128) == 4: the plain shape is also the buffer's. A packed array is plain unless
    scale_layout="mn_major" says it is the buffer; the strided view is mn_major either way (as scaled_mm)."""
    from fp8kit import _grouped
    qa, sa, b, sw, offs = mn_operands(rng, layout, 4, 4, 2 if layout == "masked" else 1)
    want = mn_run(qa, b, offs, sa, sw, layout)
    buf, view = mn_major_of(sa)
    assert buf.shape == np.shape(sa) and not np.isnan(buf).any()
    assert mn_run(qa, b, offs, buf, sw, layout, scale_layout="mn_major") == want
    assert mn_run(qa, b, offs, view, sw, layout) == want
    assert mn_run(qa, b, offs, view, sw, layout, scale_layout="mn_major") == want
    c = _grouped._prepare(qa, b, buf, sw, None, None, None, 1.0, None, layout)
    assert c.desc.scale_layout == fp8kit.ScaleLayout.PLAIN  # the packed buffer, unsaid, is read as plain scales
    with pytest.raises(fp8kit.InvalidStrideError):
        mn_run(qa, b, offs, view, sw, layout, scale_layout="plain")


def test_mn_major_bad_input(rng):
    """Wrong shapes, wrong strides, a transposed copy without the padding, scale_layout values the scaling
    has not got: each raises its specific error before anything runs."""
    from numpy.lib.stride_tricks import as_strided
    T, ka = 5, 3
    qa, sa, b, sw, offs = mn_operands(rng, "contiguous", T, ka, 4)
    buf, view = mn_major_of(sa)
    s = np.asarray(sa)
    for bad in (np.ascontiguousarray(s.T), np.ones((ka + 1, 8), F32), np.ones((ka, 12), F32), buf.reshape(-1),
                buf[None]):
        with pytest.raises(fp8kit.InvalidShapeError, match="mn_major"):
            mn_run(qa, b, offs, bad, sw, "contiguous")
        with pytest.raises(fp8kit.InvalidShapeError, match="mn_major"):
            mn_run(qa, b, offs, bad, sw, "contiguous", scale_layout="mn_major")
    wide = np.full((ka, 12), np.nan, F32)
    wide[:, :T] = s.T
    for bad in (as_strided(wide, (T, ka), (4, 48)),  # the view of a buffer padded too far
                np.asfortranarray(s),  # a transposed copy (sa.t().contiguous().t()): no padding to 4 rows
                np.repeat(s, 2, axis=1)[:, ::2],  # strided, neither layout
                wide[:, :8]):  # the buffer's shape, not packed
        with pytest.raises(fp8kit.InvalidStrideError, match="mn_major"):
            mn_run(qa, b, offs, bad, sw, "contiguous")
        with pytest.raises(fp8kit.InvalidStrideError, match="mn_major"):
            mn_run(qa, b, offs, bad, sw, "contiguous", scale_layout="mn_major")
    # scale_layout="plain": the buffer is the wrong shape, the view the wrong strides
    with pytest.raises(fp8kit.InvalidShapeError, match="1x128"):
        mn_run(qa, b, offs, buf, sw, "contiguous", scale_layout="plain")
    with pytest.raises(fp8kit.InvalidStrideError, match="plain"):
        mn_run(qa, b, offs, view, sw, "contiguous", scale_layout="plain")
    with pytest.raises(fp8kit.InvalidArgumentError, match="float32"):
        mn_run(qa, b, offs, buf.astype(np.float16), sw, "contiguous")
    # masked: the experts' buffers must be one after another, each (ka, Mp); not the contiguous layout's one
    qm, sm, bm, swm, counts = mn_operands(rng, "masked", T, ka, 4)
    mbuf, mview = mn_major_of(sm)
    with pytest.raises(fp8kit.InvalidShapeError, match="mn_major"):
        mn_run(qm, bm, counts, mbuf[:3], swm, "masked")
    with pytest.raises(fp8kit.InvalidShapeError, match="mn_major"):
        mn_run(qm, bm, counts, mn_major_of(np.asarray(sm).reshape(4 * T, ka))[0], swm, "masked")
    spaced = np.full((4, ka * 8 + 4), np.nan, F32)
    spaced[:, :ka * 8] = mbuf.reshape(4, -1)
    with pytest.raises(fp8kit.InvalidStrideError, match="mn_major"):  # experts ka*Mp + 4 apart
        mn_run(qm, bm, counts, as_strided(spaced, (4, T, ka), ((ka * 8 + 4) * 4, 4, 32)), swm, "masked")
    # scale_layout values the scaling has not got
    with pytest.raises(fp8kit.UnsupportedError, match="blocked"):
        mn_run(qa, b, offs, view, sw, "contiguous", scale_layout="blocked")
    with pytest.raises(fp8kit.UnsupportedError, match="mn_major"):  # row scales
        mn_run(qa, b, offs, np.ones(T, F32), np.ones((4, MN_N), F32), "contiguous", scale_layout="mn_major")
    with pytest.raises(fp8kit.UnsupportedError, match="mn_major"):  # tensor scales
        mn_run(qa, b, offs, np.ones((), F32), np.ones(4, F32), "contiguous", scale_layout="mn_major")
    with pytest.raises(fp8kit.UnsupportedError, match="blocked"):
        mn_run(qa, b, offs, np.ones(T, F32), np.ones((4, MN_N), F32), "contiguous", scale_layout="blocked")
    qx, sx = fp8kit.quantize(rng.standard_normal((T, 160)).astype(F32), scheme="mx")
    qwx, swx = fp8kit.quantize(rng.standard_normal((4, MN_N, 160)).astype(F32), scheme="mx")
    for sl in ("mn_major", "blocked"):
        with pytest.raises(fp8kit.UnsupportedError, match=sl):
            mn_run(qx, np.swapaxes(qwx, 1, 2), offs, sx, swx, "contiguous", scale_layout=sl)
    for sl in ("nonsense", "", 7):
        with pytest.raises(fp8kit.InvalidArgumentError, match="scale_layout"):
            mn_run(qa, b, offs, view, sw, "contiguous", scale_layout=sl)
    from fp8kit import _grouped
    with pytest.raises(fp8kit.UnsupportedError, match="blocked"):
        _grouped.grouped_mm_workspace_size(qa, b, view, sw, scale_layout="blocked")


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_mn_major_torch_cpu(layout, rng):
    """torch CPU tensors: DeepGEMM's view (torch.as_strided of a NaN-padded buffer) and the raw buffer give the
    plain call's output bit for bit (float32 and bfloat16 out), through fp8kit.grouped_mm and the torch op;
    a transposed copy without padding is refused."""
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    rows, ka, g = 130, 3, 4
    qa, sa, b, sw, offs = mn_operands(rng, layout, rows, ka, g)
    ta = torch.from_numpy(np.asarray(qa)).view(torch.float8_e4m3fn)
    tb = torch.from_numpy(np.ascontiguousarray(np.swapaxes(b, 1, 2))).view(torch.float8_e4m3fn).transpose(1, 2)
    tsa, tsw, toffs = torch.from_numpy(np.asarray(sa)), torch.from_numpy(np.asarray(sw)), torch.from_numpy(offs)
    rp = -(-rows // 4) * 4
    buf = torch.full(tuple(tsa.shape[:-2]) + (ka, rp), float("nan"))
    buf[..., :rows] = tsa.transpose(-1, -2)
    view = torch.as_strided(buf, tuple(tsa.shape), (ka * rp, 1, rp) if layout == "masked" else (1, rp))

    def bits(s, dt, **kw):  # the output's bits, in a sentinel-filled out (unwritten rows compare too)
        out = torch.full(tuple(ta.shape[:-1]) + (MN_N,), SENTINEL, dtype=dt)
        fp8kit.grouped_mm(ta, tb, toffs, s, tsw, out=out, out_dtype=dt, layout=layout, **kw)
        return out.view(torch.int16 if dt == torch.bfloat16 else torch.int32)

    for dt in (torch.float32, torch.bfloat16):
        want = bits(tsa, dt)
        for s, kw in ((view, {}), (buf, {}), (buf, dict(scale_layout="mn_major"))):
            assert torch.equal(bits(s, dt, **kw), want), (dt, kw)
    # the op: the rows the groups cover (a new output's others are uninitialized)
    want = fp8kit.grouped_mm(ta, tb, toffs, tsa, tsw, out_dtype=torch.float32, layout=layout)
    got = torch_ops.grouped_mm(ta, tb, toffs, view, tsw, out_dtype=torch.float32, layout=layout)
    got_buf = torch_ops.grouped_mm(ta, tb, toffs, buf, tsw, out_dtype=torch.float32, layout=layout,
                                   scale_layout="mn_major")
    for grp, r0, r1 in mn_covered(layout, offs, rows):
        assert torch.equal(got.reshape(-1, MN_N)[r0:r1], want.reshape(-1, MN_N)[r0:r1]), grp
        assert torch.equal(got_buf.reshape(-1, MN_N)[r0:r1], want.reshape(-1, MN_N)[r0:r1]), grp
    with pytest.raises(fp8kit.UnsupportedError, match="blocked"):
        torch_ops.grouped_mm(ta, tb, toffs, view, tsw, layout=layout, scale_layout="blocked")
    with pytest.raises(fp8kit.InvalidStrideError, match="mn_major"):  # no padding to 4 rows (130 % 4 != 0)
        fp8kit.grouped_mm(ta, tb, toffs, tsa.transpose(-1, -2).contiguous().transpose(-1, -2), tsw, layout=layout)
    full = torch.full((g,), rows, dtype=torch.int32) if layout == "masked" else \
        torch.tensor([30, 60, 100, rows], dtype=torch.int32)
    torch.library.opcheck(torch.ops.fp8kit.grouped_mm,
                          (ta, tb, full, view, tsw, None, "float32", "", 1.0, layout, "mn_major"),
                          test_utils=("test_faketensor",))


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_mn_major_cuda_matches_cpu(layout, rng):
    """CUDA tensors with A's scales mn_major (DeepGEMM's view of a NaN-padded buffer, and the buffer with
    scale_layout="mn_major") against the CPU backend's plain call: bf16 within docs/spec.md 3, rows outside the
    groups unwritten, status 0 (skipped without an sm_90 GPU)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 CUDA device")
    if not fp8kit.backend_available("cuda"):
        pytest.skip("libfp8kit was built without a usable CUDA backend")
    rows, ka, g = 130 if layout == "contiguous" else 30, 3, 4  # rows % 4 != 0; K = 320
    qa, sa, b, sw, offs = mn_operands(rng, layout, rows, ka, g)
    want = np.asarray(fp8kit.grouped_mm(qa, b, offs, sa, sw, out_dtype="float32", layout=layout)).reshape(-1, MN_N)
    ta = torch.from_numpy(np.asarray(qa)).view(torch.float8_e4m3fn).cuda()
    tb = torch.from_numpy(np.ascontiguousarray(np.swapaxes(b, 1, 2))).view(torch.float8_e4m3fn).cuda().transpose(1, 2)
    tsa, tsw, toffs = (torch.from_numpy(np.asarray(x)).cuda() for x in (sa, sw, offs))
    rp = -(-rows // 4) * 4
    buf = torch.full(tuple(tsa.shape[:-2]) + (ka, rp), float("nan"), device="cuda")
    buf[..., :rows] = tsa.transpose(-1, -2)
    view = torch.as_strided(buf, tuple(tsa.shape), (ka * rp, 1, rp) if layout == "masked" else (1, rp))
    valid = np.zeros(len(want), bool)
    for _, r0, r1 in mn_covered(layout, offs, rows):
        valid[r0:r1] = True
    for s, kw in ((tsa, {}), (view, {}), (buf, dict(scale_layout="mn_major"))):
        out = torch.full(tuple(ta.shape[:-1]) + (MN_N,), 3.0, dtype=torch.bfloat16, device="cuda")
        status = torch.full((1,), 7, dtype=torch.int32, device="cuda")
        fp8kit.grouped_mm(ta, tb, toffs, s, tsw, out=out, status=status, layout=layout, **kw)
        torch.cuda.synchronize()
        assert int(status.item()) == 0
        got = out.float().cpu().numpy().astype(np.float64).reshape(-1, MN_N)
        w = want[valid].astype(np.float64)
        assert np.sqrt(((got[valid] - w) ** 2).sum() / (w ** 2).sum()) <= BOUND["bfloat16"], kw
        assert (got[~valid] == 3.0).all(), kw


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_grouped_mm_describe(layout, rng):
    """grouped_mm_describe names the plan without running anything: on the CPU one gemm per group; bad
    operands raise as grouped_mm does; on the GPU the sm90 grouped family, staged scales for mn_major A
    scales (256 rows, K 512) and global loads for plain ones."""
    qa, sa, b, sw, _ = mn_operands(rng, layout, 257, 4, 2)
    buf, view = mn_major_of(sa)
    assert fp8kit.grouped_mm_describe(qa, b, view, sw, layout=layout) == "cpu: one gemm per group"
    assert fp8kit.grouped_mm_describe(qa, b, sa, sw, layout=layout, scale_layout="plain").startswith("cpu")
    with pytest.raises(fp8kit.UnsupportedError):
        fp8kit.grouped_mm_describe(qa, b, sa, sw, layout=layout, scale_layout="blocked")
    with pytest.raises(fp8kit.InvalidShapeError):
        fp8kit.grouped_mm_describe(qa, b, sa[..., :2], sw, layout=layout)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("no sm_90 GPU")
    k = 512
    x = torch.randn((2, 256, k) if layout == "masked" else (512, k), device="cuda")
    w = torch.randn((2, 256, k), device="cuda")
    qa, sa = fp8kit.quantize(x, scheme="1x128")
    qm, sm = fp8kit.quantize(x, scheme="1x128", scale_layout="mn_major")
    qw, sw = fp8kit.quantize(w, scheme="128x128")
    bt = qw.transpose(1, 2)
    plan = fp8kit.grouped_mm_describe(qm, bt, sm, sw, layout=layout, scale_layout="mn_major")
    assert plan.startswith("sm90_grouped") and "scaling=staged" in plan, plan
    assert "scaling=block" in fp8kit.grouped_mm_describe(qa, bt, sa, sw, layout=layout), plan
