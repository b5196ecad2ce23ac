"""test_k_grouped.py - fp8kit.k_grouped_mm (fp8kit_k_grouped_gemm, the K-grouped
GEMM of an MoE weight gradient; docs/spec.md 3, "K-grouped GEMM") on the CPU
backend: numpy and torch CPU operands against an fp64 reference of the
dequantized operands within section 3's bounds, for 1x128, tensor and no scales,
empty groups, odd M and N, K columns past the last offset never read, and beta
accumulating into out; bad input raising the binding's error classes; the torch
op fp8kit::k_grouped_mm and its fake (meta) kernel (FakeTensorMode, opcheck,
torch.compile); and the CUDA backend against the CPU one (skipped without an
sm_90 GPU and a CUDA build)."""
import numpy as np
import pytest

import fp8kit
import spec_ref as ref
from test_gemm import BOUND, as_f64, deq64, rel_err
from test_grouped import tag

F32 = np.float32
M, N = 37, 53            # odd, not multiples of anything
KTOT = 700               # ceil(700/128) = 6 scale blocks; the last (partial) one past every offset
KB = 6
OFFS = np.array([128, 128, 512, 640], dtype=np.int32)  # group 1 empty; K columns 640.. unread
G = len(OFFS)
SENTINEL = 7.0
E4M3_NAN = 0x7F


def groups(offs):
    prev = 0
    for g, end in enumerate(offs):
        yield g, prev, int(end)
        prev = int(end)


def quant_operands(rng, scales, m=M, n=N, k=KTOT):
    """a (m, k) and b (n, k) quantized for `scales` ('1x128': quantize's "1x128" grids (m, ceil(k/128)) and
    (n, ceil(k/128)); 'tensor': one scale each; 'none': plain e4m3 casts) and their fp64 dequantized values."""
    a = rng.standard_normal((m, k)).astype(F32)
    b = rng.standard_normal((n, k)).astype(F32)
    if scales == "none":
        qa, qb = fp8kit.cast(a * 4, "e4m3"), fp8kit.cast(b * 4, "e4m3")
        return qa, None, qb, None, ref.decode(np.asarray(qa), "e4m3"), ref.decode(np.asarray(qb), "e4m3")
    scheme = "block1x128" if scales == "1x128" else "tensor"
    qa, sa = fp8kit.quantize(a, scheme=scheme)
    qb, sb = fp8kit.quantize(b, scheme=scheme)
    if scales == "1x128":
        assert np.shape(sa) == (m, -(-k // 128)) and np.shape(sb) == (n, -(-k // 128))
    return qa, sa, qb, sb, deq64(qa, sa, scheme), deq64(qb, sb, scheme)


def reference(da, db, offs, alpha=1.0, beta=0.0, d0=None):
    """(G, M, N) fp64: alpha * A_g B_g^T (+ beta * d0[g])."""
    want = np.zeros((len(offs), da.shape[0], db.shape[0]))
    for g, k0, k1 in groups(offs):
        want[g] = alpha * (da[:, k0:k1] @ db[:, k0:k1].T)
        if beta:
            want[g] += beta * d0[g]
    return want


@pytest.mark.parametrize("scales", ["1x128", "tensor", "none"])
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16", "float16"])
def test_against_reference(scales, out_dtype, rng):
    qa, sa, qb, sb, da, db = quant_operands(rng, scales)
    d = fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out_dtype=out_dtype, alpha=0.75)
    assert d.shape == (G, M, N)
    assert rel_err(d, reference(da, db, OFFS, alpha=0.75)) <= BOUND[out_dtype]
    assert (as_f64(d)[1] == 0).all()  # the empty group: zeros with beta = 0
    # each group as the second of two (offsets [k0, k1]) gives the same bits: every group sums from zero
    for g, k0, k1 in groups(OFFS):
        one = fp8kit.k_grouped_mm(qa, qb, [k0, k1], sa, sb, out_dtype=out_dtype, alpha=0.75)
        assert np.array_equal(np.asarray(one)[1], np.asarray(d)[g]), g


def test_default_out_dtype(rng):
    qa, sa, qb, sb, _, _ = quant_operands(rng, "1x128")
    assert fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb).dtype == F32  # numpy: float32
    torch = pytest.importorskip("torch")
    ta, tb = (torch.from_numpy(np.asarray(q)).view(torch.float8_e4m3fn) for q in (qa, qb))
    d = fp8kit.k_grouped_mm(ta, tb, torch.from_numpy(OFFS), torch.from_numpy(sa), torch.from_numpy(sb))
    assert d.dtype == torch.bfloat16 and d.shape == (G, M, N)


def test_offsets_to_ktot_and_e5m2(rng):
    """Ktot a multiple of 128 with the last offset at Ktot; e4m3 x e5m2 operands."""
    k = 512
    a = rng.standard_normal((M, k)).astype(F32)
    b = rng.standard_normal((N, k)).astype(F32)
    qa, sa = fp8kit.quantize(a, scheme="1x128")
    qb, sb = fp8kit.quantize(b, scheme="1x128", dtype="e5m2")
    offs = np.array([256, 384, 512], dtype=np.int32)
    d = fp8kit.k_grouped_mm(qa, qb, offs, sa, sb, out_dtype="float32")
    want = reference(deq64(qa, sa, "block1x128"), deq64(qb, sb, "block1x128"), offs)
    assert rel_err(d, want) <= BOUND["float32"]


def test_columns_past_last_offset_unread(rng):
    """K columns (and their 1x128 scale blocks) past offsets[-1] are never read: NaN codes and NaN scales there
    change nothing."""
    qa, sa, qb, sb, da, db = quant_operands(rng, "1x128")
    want = fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out_dtype="float32")
    pa, pb = np.array(qa), np.array(qb)
    pa[:, OFFS[-1]:] = E4M3_NAN
    pb[:, OFFS[-1]:] = E4M3_NAN
    psa, psb = sa.copy(), sb.copy()
    psa[:, OFFS[-1] // 128:] = np.nan
    psb[:, OFFS[-1] // 128:] = np.nan
    got = fp8kit.k_grouped_mm(tag(pa, qa.fk_dtype), tag(pb, qb.fk_dtype), OFFS, psa, psb, out_dtype="float32")
    assert np.array_equal(got, want)
    assert rel_err(got, reference(da, db, OFFS)) <= BOUND["float32"]


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("scales", ["1x128", "tensor"])
def test_beta_accumulates_into_out(out_dtype, scales, rng):
    qa, sa, qb, sb, da, db = quant_operands(rng, scales)
    d0 = rng.standard_normal((G, M, N)).astype(F32)
    if out_dtype == "bfloat16":
        out = tag(ref.f32_to_bf16_bits(d0), fp8kit.DType.BF16)
    else:
        out = d0.astype(out_dtype)
    for beta in (1.0, -0.5):
        before = as_f64(out).copy()
        d = fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out=out, alpha=0.5, beta=beta)
        assert d is out
        assert rel_err(out, reference(da, db, OFFS, alpha=0.5, beta=beta, d0=before)) <= BOUND[out_dtype]
        if beta == -0.5 and out_dtype == "float32":  # empty group: -0.5 * D, exact in f32
            assert np.array_equal(out[1], (-0.5 * before[1]).astype(F32))
    # beta = 0 overwrites out
    fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out=out, alpha=0.5)
    assert rel_err(out, reference(da, db, OFFS, alpha=0.5)) <= BOUND[out_dtype]
    assert (as_f64(out)[1] == 0).all()


def test_status_and_offsets_forms(rng):
    torch = pytest.importorskip("torch")
    qa, sa, qb, sb, _, _ = quant_operands(rng, "1x128")
    want = fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out_dtype="float32")
    for offs in (OFFS.tolist(), torch.from_numpy(OFFS), OFFS.astype(np.int64).tolist()):
        assert np.array_equal(fp8kit.k_grouped_mm(qa, qb, offs, sa, sb, out_dtype="float32"), want)
    status = torch.full((1,), 9, dtype=torch.int32)
    fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out_dtype="float32", status=status)
    assert int(status) == 0
    out = np.full((G, M, N), SENTINEL, F32)
    with pytest.raises(fp8kit.InvalidArgumentError):
        fp8kit.k_grouped_mm(qa, qb, [128, 100, 512, 640], sa, sb, out=out, status=status)
    assert int(status) == int(fp8kit.Status.ERR_INVALID_ARGUMENT)
    assert (out == SENTINEL).all()


def test_bad_input(rng):
    qa, sa, qb, sb, _, _ = quant_operands(rng, "1x128")
    # offsets: not multiples of 128, decreasing, past Ktot, negative -> the library's INVALID_ARGUMENT, D untouched
    for bad in ([100, 128, 512, 640], [128, 128, 512, 200], [128, 256, 512, 768], [-128, 128, 512, 640]):
        out = np.full((G, M, N), SENTINEL, F32)
        with pytest.raises(fp8kit.InvalidArgumentError) as e:
            fp8kit.k_grouped_mm(qa, qb, np.array(bad, np.int32), sa, sb, out=out)
        assert e.value.status == fp8kit.Status.ERR_INVALID_ARGUMENT
        assert (out == SENTINEL).all(), bad
    with pytest.raises(fp8kit.InvalidArgumentError, match="multiples of 128"):
        fp8kit.k_grouped_mm(qa, qb, np.array([64, 128, 512, 640], np.int32), sa, sb)
    with pytest.raises(fp8kit.InvalidArgumentError):  # float offsets
        fp8kit.k_grouped_mm(qa, qb, OFFS.astype(F32), sa, sb)
    with pytest.raises(fp8kit.InvalidArgumentError):  # would wrap to a valid-looking int32
        fp8kit.k_grouped_mm(qa, qb, [128, 128, 512, 640 + 2 ** 32], sa, sb)
    for bad in (np.zeros(0, np.int32), OFFS.reshape(2, 2)):
        with pytest.raises(fp8kit.InvalidShapeError, match="offsets"):
            fp8kit.k_grouped_mm(qa, qb, bad, sa, sb)
    # scale shapes
    for bad_sa, bad_sb in ((np.ones((M, KB + 1), F32), sb), (np.ones((M, KB - 1), F32), sb),
                           (sa, np.ones((N, KB + 1), F32)), (sa, np.ascontiguousarray(sb.T)),
                           (np.ones((M, 1), F32), sb), (np.ones(M * KB, F32), sb),
                           (sa, None), (None, sb), (sa, np.float32(2.0)), (np.float32(2.0), sb)):
        with pytest.raises(fp8kit.InvalidShapeError, match="1x128"):
            fp8kit.k_grouped_mm(qa, qb, OFFS, bad_sa, bad_sb)
    with pytest.raises(fp8kit.InvalidShapeError, match="tensor"):  # scale_mode='tensor' with 1x128 grids
        fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, scale_mode="tensor")
    with pytest.raises(fp8kit.InvalidArgumentError):  # scale_mode='none' with scales
        fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, scale_mode="none")
    with pytest.raises(fp8kit.InvalidArgumentError, match="scale_mode"):
        fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, scale_mode="row")
    with pytest.raises(fp8kit.InvalidArgumentError):  # scales are float32
        fp8kit.k_grouped_mm(qa, qb, OFFS, sa.astype(np.float16), sb)
    with pytest.raises(fp8kit.InvalidStrideError):  # 1x128 scales are row-major contiguous
        fp8kit.k_grouped_mm(qa, qb, OFFS, np.asfortranarray(sa), sb)
    # operands
    with pytest.raises(fp8kit.InvalidShapeError):  # b given as the transposed (Ktot, N) view
        fp8kit.k_grouped_mm(qa, qb.T, OFFS, sa, sb)
    with pytest.raises(fp8kit.InvalidShapeError):  # Ktot mismatch
        fp8kit.k_grouped_mm(qa[:, :640], qb, OFFS, sa, sb)
    with pytest.raises(fp8kit.UnsupportedError):  # float a
        fp8kit.k_grouped_mm(np.zeros((M, KTOT), F32), qb, OFFS, sa, sb)
    # outputs
    with pytest.raises(fp8kit.InvalidArgumentError, match="out"):  # beta != 0 reads out
        fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, beta=1.0)
    with pytest.raises(fp8kit.InvalidShapeError):
        fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out=np.zeros((G - 1, M, N), F32))
    with pytest.raises(fp8kit.InvalidArgumentError):  # out_dtype disagrees with out
        fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out=np.zeros((G, M, N), F32), out_dtype="float16")
    with pytest.raises(fp8kit.UnsupportedError):
        fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out_dtype="e4m3")
    ro = np.zeros((G, M, N), F32)
    ro.flags.writeable = False
    with pytest.raises(fp8kit.FP8KitError):
        fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out=ro)


def test_explicit_scale_modes(rng):
    """scale_mode= says what inference would: '1x128' for the grids, 'tensor' for scalars; for M = N = 1 and
    Ktot <= 128 a (1, 1) grid is a tensor scale unless scale_mode='1x128' (the same product either way)."""
    qa, sa, qb, sb, _, _ = quant_operands(rng, "1x128")
    assert np.array_equal(fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out_dtype="float32"),
                          fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out_dtype="float32", scale_mode="1x128"))
    qa, sa, qb, sb, da, db = quant_operands(rng, "1x128", m=1, n=1, k=128)
    assert np.shape(sa) == np.shape(sb) == (1, 1)
    offs = np.array([0, 128], np.int32)
    want = reference(da, db, offs)
    for mode in (None, "tensor", "1x128"):
        d = fp8kit.k_grouped_mm(qa, qb, offs, sa, sb, out_dtype="float32", scale_mode=mode)
        assert rel_err(d, want) <= BOUND["float32"], mode


def torch_operands(rng, scales="1x128"):
    torch = pytest.importorskip("torch")
    qa, sa, qb, sb, da, db = quant_operands(rng, scales)
    ta, tb = (torch.from_numpy(np.asarray(q)).view(torch.float8_e4m3fn) for q in (qa, qb))
    tsa = torch.from_numpy(np.asarray(sa, F32)) if sa is not None else None
    tsb = torch.from_numpy(np.asarray(sb, F32)) if sb is not None else None
    return (qa, sa, qb, sb, da, db), (ta, tb, torch.from_numpy(OFFS), tsa, tsb)


@pytest.mark.parametrize("scales", ["1x128", "tensor"])
def test_torch_cpu_matches_numpy(scales, rng):
    torch = pytest.importorskip("torch")
    (qa, sa, qb, sb, _, _), (ta, tb, toffs, tsa, tsb) = torch_operands(rng, scales)
    want = fp8kit.k_grouped_mm(qa, qb, OFFS, sa, sb, out_dtype="float32", alpha=2.0)
    got = fp8kit.k_grouped_mm(ta, tb, toffs, tsa, tsb, out_dtype=torch.float32, alpha=2.0)
    assert np.array_equal(got.numpy(), want)
    # bf16 out accumulated in place
    c0 = torch.randn(G, M, N).to(torch.bfloat16)
    out = c0.clone()
    r = fp8kit.k_grouped_mm(ta, tb, toffs, tsa, tsb, out=out, beta=1.0, alpha=2.0)
    assert r is out
    w = want.astype(np.float64) + c0.double().numpy()
    assert np.linalg.norm(out.double().numpy() - w) / np.linalg.norm(w) <= BOUND["bfloat16"]
    with pytest.raises(fp8kit.InvalidArgumentError):  # int64 offsets tensor
        fp8kit.k_grouped_mm(ta, tb, toffs.long(), tsa, tsb)


def test_torch_op_and_fake(rng):
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    from torch._subclasses.fake_tensor import FakeTensorMode
    _, (ta, tb, toffs, tsa, tsb) = torch_operands(rng)
    want = fp8kit.k_grouped_mm(ta, tb, toffs, tsa, tsb, out_dtype=torch.float32)
    got = torch_ops.k_grouped_mm(ta, tb, toffs, tsa, tsb, torch.float32)
    assert torch.equal(got, want)
    assert torch_ops.k_grouped_mm(ta, tb, toffs, tsa, tsb).dtype == torch.bfloat16
    # functional accumulation: c is copied, never written
    c = torch.randn(G, M, N)
    c_before = c.clone()
    acc = torch_ops.k_grouped_mm(ta, tb, toffs, tsa, tsb, c=c, beta=1.0)
    assert torch.equal(c, c_before) and acc.dtype == torch.float32
    ref_out = c.clone()
    fp8kit.k_grouped_mm(ta, tb, toffs, tsa, tsb, out=ref_out, beta=1.0)
    assert torch.equal(acc, ref_out)
    with pytest.raises(fp8kit.InvalidArgumentError):  # beta != 0 without c
        torch_ops.k_grouped_mm(ta, tb, toffs, tsa, tsb, beta=1.0)
    # the fake kernel: (G, M, N) with G from the offsets, dtype out_dtype, else c's, else bf16
    args = (ta, tb, toffs, tsa, tsb, "float16", 1.0, 0.0, None, False, "")
    real = torch.ops.fp8kit.k_grouped_mm(*args)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fk = lambda xs: tuple(mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in xs)  # noqa: E731
        fake = torch.ops.fp8kit.k_grouped_mm(*fk(args))
        fake_c = torch.ops.fp8kit.k_grouped_mm(*fk((ta, tb, toffs, tsa, tsb, "", 1.0, 1.0, c, False, "")))
        fake_g2 = torch.ops.fp8kit.k_grouped_mm(*fk((ta, tb, toffs[:2], tsa, tsb, "", 1.0, 0.0, None, False, "")))
    assert (fake.shape, fake.dtype, fake.device) == (real.shape, real.dtype, real.device) == \
        ((G, M, N), torch.float16, torch.device("cpu"))
    assert (fake_c.shape, fake_c.dtype) == ((G, M, N), torch.float32)
    assert (fake_g2.shape, fake_g2.dtype) == ((2, M, N), torch.bfloat16)
    torch.library.opcheck(torch.ops.fp8kit.k_grouped_mm, (ta, tb, toffs, tsa, tsb, "float32", 1.0, 1.0, c, False, ""),
                          test_utils=("test_faketensor",))  # test_schema: torch has no CPU mul for fp8


def test_torch_compile(rng):
    """torch.compile traces the op through its fake kernel (aot_eager: no C++ compiler needed)."""
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    _, (ta, tb, toffs, tsa, tsb) = torch_operands(rng)
    c = torch.randn(G, M, N)

    def grad(x, sx, acc):
        return torch_ops.k_grouped_mm(x, tb, toffs, sx, tsb, c=acc, beta=1.0, fast_accum=True).sum(dim=0)

    eager = grad(ta, tsa, c)
    compiled = torch.compile(grad, backend="aot_eager", fullgraph=True)(ta, tsa, c)
    assert compiled.shape == (M, N)
    assert torch.equal(eager, compiled)


def test_cuda_matches_cpu(rng):
    """The CUDA backend (device offsets) against the CPU one: bf16 out, and f32 out with fast_accum, accumulated
    in place with beta = 1 as DeepGEMM's weight-gradient call, within docs/spec.md 3's bf16 bound; host
    offsets are refused; invalid device offsets write nothing and set status."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 CUDA device")
    if not fp8kit.backend_available("cuda"):
        pytest.skip("libfp8kit was built without a usable CUDA backend")
    m, n, k = 136, 200, 1536
    offs = np.array([256, 256, 640, 1408], dtype=np.int32)  # an empty group; columns 1408.. unread
    qa, sa, qb, sb, da, db = quant_operands(rng, "1x128", m=m, n=n, k=k)
    c0 = rng.standard_normal((len(offs), m, n)).astype(F32)
    want = reference(da, db, offs, beta=1.0, d0=c0)
    ta, tb = (torch.from_numpy(np.asarray(q)).view(torch.float8_e4m3fn).cuda() for q in (qa, qb))
    tsa, tsb = torch.from_numpy(sa).cuda(), torch.from_numpy(sb).cuda()
    toffs = torch.from_numpy(offs).cuda()
    status = torch.full((1,), 7, dtype=torch.int32, device="cuda")
    d = fp8kit.k_grouped_mm(ta, tb, toffs, tsa, tsb, out_dtype=torch.bfloat16, status=status)
    torch.cuda.synchronize()
    assert int(status.item()) == 0
    cpu = fp8kit.k_grouped_mm(qa, qb, offs, sa, sb, out_dtype="float32")
    got = d.double().cpu().numpy()
    assert np.linalg.norm(got - cpu) / np.linalg.norm(cpu) <= BOUND["bfloat16"]
    assert (got[1] == 0).all()
    for dt in (torch.bfloat16, torch.float32):
        out = torch.from_numpy(c0).to(dt).cuda()
        start = out.double().cpu().numpy()
        fp8kit.k_grouped_mm(ta, tb, toffs, tsa, tsb, out=out, beta=1.0, fast_accum=True, status=status)
        torch.cuda.synchronize()
        assert int(status.item()) == 0
        w = want - c0 + start  # c0 as out's dtype holds it
        g = out.double().cpu().numpy()
        assert np.linalg.norm(g - w) / np.linalg.norm(w) <= BOUND["bfloat16"], dt
    with pytest.raises(fp8kit.InvalidArgumentError):  # host offsets with CUDA operands
        fp8kit.k_grouped_mm(ta, tb, offs, tsa, tsb)
    out = torch.full((len(offs), m, n), 3.0, dtype=torch.bfloat16, device="cuda")
    fp8kit.k_grouped_mm(ta, tb, torch.tensor([256, 200, 640, 1408], dtype=torch.int32, device="cuda"), tsa, tsb,
                        out=out, status=status)
    torch.cuda.synchronize()
    assert int(status.item()) == int(fp8kit.Status.ERR_INVALID_ARGUMENT)
    assert bool((out == 3.0).all())
