"""test_grouped.py - fp8kit.grouped_mm (fp8kit_grouped_gemm) on the CPU
backend: against per-group fp8kit.scaled_mm (bit for bit) and an fp64
reference within docs/spec.md section 3's bounds, empty groups and rows past the
last offset, torch CPU tensors when torch is installed, and bad input."""
import numpy as np
import pytest

import fp8kit
from test_gemm import BOUND, act64, as_f64, deq64, rel_err

F32 = np.float32
T, K, N, G = 150, 96, 40, 5


def tag(codes, fmt=fp8kit.DType.E4M3):
    """uint8 fp8 codes as the binding's tagged array."""
    v = np.ascontiguousarray(codes).view(fp8kit.TaggedArray)
    v.fk_dtype = fmt
    return v


def quant_experts(w, scheme):
    """Each expert of a float (G, N, K) stack quantized on its own (row or tensor scheme): tagged codes
    (G, N, K), scales ((G, N) row or (G,) tensor) and the fp64 dequantized experts."""
    codes, scales, deq_w = [], [], []
    for g in range(w.shape[0]):
        q, s = fp8kit.quantize(w[g], scheme=scheme)
        codes.append(np.asarray(q))
        scales.append(np.asarray(s, dtype=F32).reshape(-1))
        deq_w.append(deq64(q, s, scheme))
    sw = np.stack(scales).reshape(w.shape[:2] if scheme == "row" else w.shape[:1])
    return tag(np.stack(codes)), sw, deq_w


def operands(rng, scheme_a="row", scheme_b="row"):
    """A quantized (T, K), B quantized per expert (G, N, K) with (G, N) row or (G,) tensor scales, and the
    fp64 dequantized operands."""
    a = rng.standard_normal((T, K)).astype(F32)
    w = rng.standard_normal((G, N, K)).astype(F32)
    qa, sa = fp8kit.quantize(a, scheme=scheme_a)
    qw, sw, deq_w = quant_experts(w, scheme_b)
    return qa, sa, qw, sw, deq64(qa, sa, scheme_a), deq_w


def groups(offs):
    prev = 0
    for g, end in enumerate(offs):
        yield g, prev, int(end)
        prev = int(end)


@pytest.mark.parametrize("schemes", [("row", "row"), ("tensor", "tensor"), ("row", "tensor"), ("tensor", "row")])
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_against_reference_and_scaled_mm(schemes, out_dtype, rng):
    qa, sa, qw, sw, da, dw = operands(rng, *schemes)
    offs = np.array([20, 20, 75, 140, 150], dtype=np.int32)  # group 1 empty
    bias = rng.standard_normal((G, N)).astype(F32)
    d = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, bias=bias, out_dtype=out_dtype,
                          activation="gelu_tanh", alpha=0.5)
    assert d.shape == (T, N)
    want = np.zeros((T, N))
    for g, r0, r1 in groups(offs):
        want[r0:r1] = act64(0.5 * (da[r0:r1] @ dw[g].T) + bias[g], "gelu_tanh")
        if r1 > r0:
            sb_g = sw[g].reshape(1, N) if sw.ndim == 2 else sw[g]
            one = fp8kit.scaled_mm(qa[r0:r1], tag(qw[g]).T, sa[r0:r1] if np.size(sa) > 1 else sa, sb_g,
                                   bias=bias[g], out_dtype=out_dtype, activation="gelu_tanh", alpha=0.5)
            assert np.array_equal(np.asarray(d[r0:r1]), np.asarray(one)), g
    assert rel_err(d, want) <= BOUND[out_dtype]


def test_rows_past_last_offset_untouched(rng):
    qa, sa, qw, sw, da, dw = operands(rng)
    out = np.full((T, N), 7.0, dtype=F32)
    offs = np.array([0, 30, 30, 100, 120], dtype=np.int32)
    d = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, out=out)
    assert d is out
    assert (out[120:] == 7.0).all()
    want = np.zeros((120, N))
    for g, r0, r1 in groups(offs):
        want[r0:r1] = da[r0:r1] @ dw[g].T
    assert rel_err(out[:120], want) <= 1e-5


def test_offsets_as_list(rng):
    qa, sa, qw, sw, _, _ = operands(rng)
    d1 = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), [30, 60, 90, 120, 150], sa, sw)
    d2 = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), np.array([30, 60, 90, 120, 150], np.int32), sa, sw)
    assert np.array_equal(d1, d2)


def test_bad_input(rng):
    qa, sa, qw, sw, _, _ = operands(rng)
    b = np.swapaxes(qw, 1, 2)
    good = np.array([20, 20, 75, 140, 150], dtype=np.int32)
    with pytest.raises(fp8kit.InvalidArgumentError):
        fp8kit.grouped_mm(qa, b, np.array([20, 10, 75, 140, 150], np.int32), sa, sw)
    with pytest.raises(fp8kit.InvalidArgumentError):
        fp8kit.grouped_mm(qa, b, np.array([20, 20, 75, 140, 151], np.int32), sa, sw)
    with pytest.raises(fp8kit.InvalidArgumentError):
        fp8kit.grouped_mm(qa, b, good.astype(np.float32), sa, sw)
    with pytest.raises(fp8kit.InvalidArgumentError):  # would wrap to a valid-looking int32
        fp8kit.grouped_mm(qa, b, [20, 20, 75, 140, 150 + 2 ** 32], sa, sw)
    with pytest.raises(fp8kit.InvalidShapeError):
        fp8kit.grouped_mm(qa, b, good[:4], sa, sw)
    with pytest.raises(fp8kit.InvalidStrideError):
        fp8kit.grouped_mm(qa, tag(np.ascontiguousarray(b)), good, sa, sw)
    with pytest.raises(fp8kit.InvalidShapeError):
        fp8kit.grouped_mm(qa, b, good, sa, sw[:, :5])
    with pytest.raises(fp8kit.InvalidShapeError):
        fp8kit.grouped_mm(qa[:, :64], b, good, sa, sw)
    with pytest.raises(fp8kit.UnsupportedError):
        fp8kit.grouped_mm(qa, b, good, sa, sw, out_dtype="e4m3")


def test_torch_cpu_matches_numpy(rng):
    torch = pytest.importorskip("torch")
    qa, sa, qw, sw, _, _ = operands(rng)
    offs = np.array([20, 20, 75, 140, 150], dtype=np.int32)
    want = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, out_dtype="float32")
    ta = torch.from_numpy(np.asarray(qa)).view(torch.float8_e4m3fn)
    tw = torch.from_numpy(np.asarray(qw)).view(torch.float8_e4m3fn)
    got = fp8kit.grouped_mm(ta, tw.transpose(1, 2), torch.from_numpy(offs), torch.from_numpy(np.asarray(sa)),
                            torch.from_numpy(sw), out_dtype=torch.float32)
    assert np.array_equal(got.numpy(), np.asarray(want))


def test_cuda_matches_cpu(rng):
    """The CUDA kernel (device offs) against the CPU backend: bf16 within docs/spec.md 3, rows past the last offset
    unwritten; host offs are refused; invalid device offs write nothing and set status."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 CUDA device")
    qa, sa, qw, sw, _, _ = operands(rng)
    offs = np.array([20, 20, 75, 140, 144], dtype=np.int32)
    want = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, out_dtype="float32")
    ta = torch.from_numpy(np.asarray(qa)).view(torch.float8_e4m3fn).cuda()
    tw = torch.from_numpy(np.ascontiguousarray(qw)).view(torch.float8_e4m3fn).cuda().transpose(1, 2)
    tsa, tsb = torch.from_numpy(np.asarray(sa)).cuda(), torch.from_numpy(sw).cuda()
    toffs = torch.from_numpy(offs).cuda()
    status = torch.full((1,), 7, dtype=torch.int32, device="cuda")
    out = torch.full((T, N), 3.0, dtype=torch.bfloat16, device="cuda")
    got = fp8kit.grouped_mm(ta, tw, toffs, tsa, tsb, out=out, status=status)
    torch.cuda.synchronize()
    assert int(status.item()) == 0
    w = np.asarray(want)[:144].astype(np.float64)
    g = got[:144].float().cpu().numpy().astype(np.float64)
    assert np.sqrt(((g - w) ** 2).sum() / (w ** 2).sum()) <= 4e-3
    assert bool((got[144:] == 3.0).all())
    with pytest.raises(fp8kit.InvalidArgumentError):  # host offs with CUDA operands
        fp8kit.grouped_mm(ta, tw, offs, tsa, tsb)
    out.fill_(3.0)
    fp8kit.grouped_mm(ta, tw, torch.tensor([20, 10, 75, 140, 150], dtype=torch.int32, device="cuda"), tsa, tsb,
                      out=out, status=status)
    torch.cuda.synchronize()
    assert int(status.item()) == 2
    assert bool((out == 3.0).all())


def test_torch_op_and_opcheck(rng):
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    qa, sa, qw, sw, _, _ = operands(rng)
    ta = torch.from_numpy(np.asarray(qa)).view(torch.float8_e4m3fn)
    tw = torch.from_numpy(np.asarray(qw)).view(torch.float8_e4m3fn).transpose(1, 2)
    offs = torch.tensor([20, 20, 75, 140, 150], dtype=torch.int32)
    tsa, tsb = torch.from_numpy(np.asarray(sa)), torch.from_numpy(sw)
    want = fp8kit.grouped_mm(ta, tw, offs, tsa, tsb, out_dtype=torch.float32)
    got = torch_ops.grouped_mm(ta, tw, offs, tsa, tsb, out_dtype=torch.float32)
    assert torch.equal(got[:150], want[:150])
    # opcheck compares outputs of repeated runs: give it an output fully covered by the groups
    torch.library.opcheck(torch.ops.fp8kit.grouped_mm, (ta, tw, offs, tsa, tsb, None, "float32", "", 1.0),
                          test_utils=("test_faketensor",))  # test_schema compares fp8 CPU tensors: torch has no CPU mul for them
