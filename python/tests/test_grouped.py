"""test_grouped.py - fp8kit.grouped_mm (fp8kit_grouped_gemm) on the CPU
backend: against per-group fp8kit.scaled_mm (bit for bit) and an fp64
reference within docs/spec.md section 3's bounds, empty groups and rows past the
last offset, torch CPU tensors when torch is installed, and bad input; MX
scales (e8m0, both layouts: bit for bit against per-group MX scaled_mm, the
plain layout only, K % 32, scale shapes), the workspace (its size query and
workspace=), the torch op with MX scales, and on an sm_90 GPU the CUDA kernels
against the CPU backend (skipped without one)."""
import numpy as np
import pytest

import fp8kit
from conftest import heavy
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


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_swiglu_equals_per_group_scaled_mm(layout, rng):
    """activation='swiglu': D has N/2 columns, each group's rows equal (bit for bit) scaled_mm's swiglu on
    them (and the fp64 silu(gate) * up within f32's bound); rows no group owns stay; odd N is
    InvalidShapeError."""
    qa, sa, qw, sw, da, dw = operands(rng)
    bias = rng.standard_normal((G, N)).astype(F32)
    b, h = np.swapaxes(qw, 1, 2), N // 2
    if layout == "masked":  # the T rows as G slabs of M = T / G, counts incl. 0 and M
        M = T // G
        counts = np.array([0, M, 7, 13, 1], dtype=np.int32)
        a3, sa3 = tag(np.asarray(qa).reshape(G, M, K)), np.asarray(sa).reshape(G, M, 1)
        out = np.full((G, M, h), 7.0, dtype=F32)
        d = fp8kit.grouped_mm(a3, b, counts, sa3, sw, bias=bias, out_dtype="float32", activation="swiglu",
                              alpha=0.5, layout="masked", out=out)
        assert d.shape == (G, M, h)
        d = np.asarray(d).reshape(T, h)
        spans = [(g, g * M, g * M + int(c)) for g, c in enumerate(counts)]
    else:
        offs = np.array([20, 20, 75, 140, 150], dtype=np.int32)
        d = fp8kit.grouped_mm(qa, b, offs, sa, sw, bias=bias, out_dtype="float32", activation="swiglu", alpha=0.5)
        assert d.shape == (T, h)
        spans = list(groups(offs))
    got, want = [], []
    for g, r0, r1 in spans:
        if r1 == r0:
            continue
        one = fp8kit.scaled_mm(qa[r0:r1], tag(qw[g]).T, sa[r0:r1], sw[g].reshape(1, N), bias=bias[g],
                               out_dtype="float32", activation="swiglu", alpha=0.5)
        assert np.array_equal(np.asarray(d[r0:r1]), np.asarray(one)), g
        y = 0.5 * (da[r0:r1] @ dw[g].T) + bias[g]
        want.append(y[:, :h] / (1.0 + np.exp(-y[:, :h])) * y[:, h:])
        got.append(np.asarray(d[r0:r1]))
    assert rel_err(np.concatenate(got), np.concatenate(want)) <= BOUND["float32"]
    if layout == "masked":
        for g, r0, r1 in spans:
            assert (out.reshape(T, h)[r1:(g + 1) * (T // G)] == 7.0).all(), g
    with pytest.raises(fp8kit.InvalidShapeError):
        fp8kit.grouped_mm(qa, np.swapaxes(tag(np.asarray(qw)[:, :N - 1]), 1, 2), [150] * G, sa,
                          np.ascontiguousarray(sw[:, :N - 1]), activation="swiglu")


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


# ------------------------------------------------------------------ mx (MXFP8: e8m0 scales per 32 of K)
MX_T, MX_K, MX_N, MX_M = 150, 160, 40, 24  # K / 32 = 5 scale columns; N and M not multiples of 32
MX_OFFS = np.array([20, 20, 75, 140, 150], dtype=np.int32)  # group 1 empty
MX_COUNTS = np.array([0, MX_M, 7, 13, 1], dtype=np.int32)  # masked: empty, full and partial experts


def mx_operands(rng, masked=False):
    """a quantized "mx" ((T, K), or (G, M, K) when masked) and the (G, N, K) weight stack quantized "mx" in
    one call (scales (G, N, K/32)): codes, e8m0 scales, and the fp64 dequantized rows of a (T x K, masked
    G*M x K) and experts."""
    a = heavy(rng, (G, MX_M, MX_K) if masked else (MX_T, MX_K))
    w = rng.standard_normal((G, MX_N, MX_K)).astype(F32)
    qa, sa = fp8kit.quantize(a, scheme="mx")
    qw, sw = fp8kit.quantize(w, scheme="mx")
    assert np.shape(sa) == a.shape[:-1] + (MX_K // 32,) and np.shape(sw) == (G, MX_N, MX_K // 32)
    da = deq64(tag(np.asarray(qa).reshape(-1, MX_K), qa.fk_dtype),
               tag(np.asarray(sa).reshape(-1, MX_K // 32), fp8kit.DType.E8M0), "mx")
    dw = [deq64(tag(np.asarray(qw)[g], qw.fk_dtype), tag(np.asarray(sw)[g], fp8kit.DType.E8M0), "mx")
          for g in range(G)]
    return qa, sa, qw, sw, da, dw


def mx_rows(masked):
    """(group, first row, end row) of every group over a's rows (masked: slab g's valid rows)."""
    if masked:
        return [(g, g * MX_M, g * MX_M + int(c)) for g, c in enumerate(MX_COUNTS)]
    return list(groups(MX_OFFS))


def e8m0(x):
    return tag(x, fp8kit.DType.E8M0)


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_mx_against_scaled_mm_and_reference(layout, out_dtype, rng):
    """MX grouped = per-group fp8kit.scaled_mm with the same MX scales, bit for bit, and within docs/spec.md 3
    of the fp64 reference; rows outside the groups untouched."""
    masked = layout == "masked"
    qa, sa, qw, sw, da, dw = mx_operands(rng, masked)
    bias = rng.standard_normal((G, MX_N)).astype(F32)
    offs = MX_COUNTS if masked else MX_OFFS
    rows = (G, MX_M) if masked else (MX_T,)
    out = np.full(rows + (MX_N,), 7.0, dtype=F32) if out_dtype == "float32" else None
    d = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, bias=bias, out_dtype=out_dtype,
                          activation="gelu_tanh", alpha=0.5, layout=layout, out=out)
    assert d.shape == rows + (MX_N,)
    flat = np.asarray(d).reshape(-1, MX_N)
    a2, s2 = np.asarray(qa).reshape(-1, MX_K), np.asarray(sa).reshape(-1, MX_K // 32)
    want, covered = np.zeros((flat.shape[0], MX_N)), np.zeros(flat.shape[0], bool)
    for g, r0, r1 in mx_rows(masked):
        if r1 == r0:
            continue
        covered[r0:r1] = True
        want[r0:r1] = act64(0.5 * (da[r0:r1] @ dw[g].T) + bias[g], "gelu_tanh")
        one = fp8kit.scaled_mm(tag(a2[r0:r1], qa.fk_dtype), tag(np.asarray(qw)[g], qw.fk_dtype).T,
                               e8m0(s2[r0:r1]), e8m0(np.asarray(sw)[g]), bias=bias[g], out_dtype=out_dtype,
                               activation="gelu_tanh", alpha=0.5)
        assert np.array_equal(flat[r0:r1], np.asarray(one)), g
    got = d.reshape(-1, MX_N)[covered] if isinstance(d, fp8kit.TaggedArray) else flat[covered]
    assert rel_err(got, want[covered]) <= BOUND[out_dtype]
    if out is not None:
        assert d is out and (flat[~covered] == 7.0).all()


def test_mx_untagged_uint8_scales_and_transposed_scale_b_view(rng):
    """Untagged uint8 scales are e8m0 (as scaled_mm reads them); scale_b may come as the (G, K/32, N)
    transposed view of the (G, N, K/32) grid (b is the transposed view of the stack); a transposed copy is
    refused."""
    qa, sa, qw, sw, _, _ = mx_operands(rng)
    b = np.swapaxes(qw, 1, 2)
    want = fp8kit.grouped_mm(qa, b, MX_OFFS, sa, sw)
    assert np.array_equal(fp8kit.grouped_mm(qa, b, MX_OFFS, np.asarray(sa), np.asarray(sw)), want)
    assert np.array_equal(fp8kit.grouped_mm(qa, b, MX_OFFS, sa, np.swapaxes(np.asarray(sw), 1, 2)), want)
    with pytest.raises(fp8kit.InvalidStrideError):
        fp8kit.grouped_mm(qa, b, MX_OFFS, sa, np.ascontiguousarray(np.swapaxes(np.asarray(sw), 1, 2)))


def test_mx_bad_input(rng):
    qa, sa, qw, sw, _, _ = mx_operands(rng)
    b = np.swapaxes(qw, 1, 2)
    s_a, s_w = np.asarray(sa), np.asarray(sw)
    # the blocked (swizzled) layout: the grouped GEMM reads plain mx scales only
    x = rng.standard_normal((MX_T, MX_K)).astype(F32)
    _, sab = fp8kit.quantize(x, scheme="mx", scale_layout="blocked")
    _, swb = fp8kit.quantize(rng.standard_normal((G, MX_N, MX_K)).astype(F32), scheme="mx", scale_layout="blocked")
    assert np.shape(sab) != np.shape(sa) and np.shape(swb) != np.shape(sw)
    for bad_a, bad_b in ((sab, swb), (sab, sw), (sa, swb)):
        with pytest.raises(fp8kit.UnsupportedError, match="blocked"):
            fp8kit.grouped_mm(qa, b, MX_OFFS, bad_a, bad_b)
    # K % 32 != 0: codes of K = 80 + 16 (the scales' shapes are not the question)
    qk = tag(np.zeros((MX_T, 96), np.uint8))
    wk = tag(np.zeros((G, MX_N, 96), np.uint8))
    with pytest.raises(fp8kit.InvalidShapeError, match="32"):
        fp8kit.grouped_mm(qk[:, :80], np.swapaxes(wk[:, :, :80], 1, 2), MX_OFFS, e8m0(np.zeros((MX_T, 2), np.uint8)),
                          e8m0(np.zeros((G, MX_N, 2), np.uint8)))
    # wrong scale shapes
    for bad_a, bad_b in ((s_a[:, :4], sw), (sa, s_w[:, :, :4]), (sa, s_w[:4]), (sa, s_w.reshape(G, -1)),
                         (s_a.reshape(-1), sw), (s_a[:, None], sw), (sa, s_w[:, :32])):
        with pytest.raises(fp8kit.InvalidShapeError):
            fp8kit.grouped_mm(qa, b, MX_OFFS, bad_a, bad_b)
    # masked: a's scales are (G, M, K/32), not (G*M, K/32)
    qm, sm, _, _, _, _ = mx_operands(rng, masked=True)
    with pytest.raises(fp8kit.InvalidShapeError):
        fp8kit.grouped_mm(qm, b, MX_COUNTS, np.asarray(sm).reshape(G * MX_M, -1), sw, layout="masked")
    # not packed
    wide = np.zeros((MX_T, 2 * (MX_K // 32)), np.uint8)
    with pytest.raises(fp8kit.InvalidStrideError):
        fp8kit.grouped_mm(qa, b, MX_OFFS, wide[:, ::2], sw)
    # mx on one operand only, or without the other's scales
    with pytest.raises(fp8kit.UnsupportedError):
        fp8kit.grouped_mm(qa, b, MX_OFFS, sa, np.ones((G, MX_N), F32))
    with pytest.raises(fp8kit.UnsupportedError):
        fp8kit.grouped_mm(qa, b, MX_OFFS, np.ones(MX_T, F32), sw)
    with pytest.raises(fp8kit.UnsupportedError):
        fp8kit.grouped_mm(qa, b, MX_OFFS, sa, None)


def test_mx_blocked_layout_refused_by_the_library(rng):
    """The C check behind the Python one: fp8kit_grouped_gemm with desc->scale_layout = blocked is
    FP8KIT_ERR_UNSUPPORTED (and so is its workspace-size query)."""
    import ctypes
    from fp8kit import _grouped
    qa, sa, qw, sw, _, _ = mx_operands(rng)
    c = _grouped._prepare(qa, np.swapaxes(qw, 1, 2), sa, sw, None, "float32", None, 1.0, None, "contiguous")
    assert c.desc.scale_a == c.desc.scale_b == fp8kit.ScaleMode.MX
    c.desc.scale_layout = fp8kit.ScaleLayout.BLOCKED
    d = np.zeros((MX_T, MX_N), F32)
    c.args.d.data, c.args.d.dtype, c.args.d.ndim = d.ctypes.data, int(fp8kit.DType.F32), 2
    c.args.d.shape[0], c.args.d.shape[1], c.args.d.strides[0], c.args.d.strides[1] = MX_T, MX_N, MX_N, 1
    c.args.offsets = MX_OFFS.ctypes.data
    lib = c.cx._lib
    assert lib.fp8kit_grouped_gemm(c.cx.handle, ctypes.byref(c.desc), ctypes.byref(c.args), None) == \
        fp8kit.Status.ERR_UNSUPPORTED
    assert (d == 0).all()
    n = ctypes.c_size_t(7)
    assert lib.fp8kit_grouped_gemm_workspace_size(c.cx.handle, ctypes.byref(c.desc), ctypes.byref(c.args),
                                                  ctypes.byref(n)) == fp8kit.Status.ERR_UNSUPPORTED
    c.desc.scale_layout = fp8kit.ScaleLayout.PLAIN
    assert lib.fp8kit_grouped_gemm_workspace_size(c.cx.handle, ctypes.byref(c.desc), ctypes.byref(c.args),
                                                  ctypes.byref(n)) == 0 and n.value == 0


def test_workspace_on_cpu(rng):
    """CPU: the library asks for no workspace; one given is accepted (same result), checked for being
    writable, on the operands' device, 16-byte aligned and apart from the other arguments."""
    from fp8kit import _grouped
    qa, sa, qw, sw, _, _ = mx_operands(rng)
    b = np.swapaxes(qw, 1, 2)
    assert _grouped.grouped_mm_workspace_size(qa, b, sa, sw) == 0
    assert _grouped.grouped_mm_workspace_size(qa, b, np.ones(MX_T, F32), np.ones(G, F32)) == 0
    want = fp8kit.grouped_mm(qa, b, MX_OFFS, sa, sw)
    buf = np.zeros(4096 + 16, np.uint8)
    base = (-buf.ctypes.data) % 16
    ws = buf[base:base + 4096]
    assert np.array_equal(fp8kit.grouped_mm(qa, b, MX_OFFS, sa, sw, workspace=ws), want)
    with pytest.raises(fp8kit.MisalignedError):
        fp8kit.grouped_mm(qa, b, MX_OFFS, sa, sw, workspace=buf[base + 1:base + 1025])
    ro = ws.copy()
    ro.flags.writeable = False
    with pytest.raises(fp8kit.InvalidArgumentError, match="read-only"):
        fp8kit.grouped_mm(qa, b, MX_OFFS, sa, sw, workspace=ro)
    out = np.zeros((MX_T, MX_N), F32)
    with pytest.raises(fp8kit.InvalidArgumentError, match="shares memory"):
        fp8kit.grouped_mm(qa, b, MX_OFFS, sa, sw, out=out, workspace=out.reshape(-1).view(np.uint8))
    with pytest.raises(fp8kit.InvalidStrideError):
        fp8kit.grouped_mm(qa, b, MX_OFFS, sa, sw, workspace=buf[base::2])


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_mx_torch_cpu_and_op(layout, rng):
    """torch CPU tensors (float8_e8m0fnu or uint8 scales) = numpy, bit for bit; the op and its fake kernel."""
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    masked = layout == "masked"
    qa, sa, qw, sw, _, _ = mx_operands(rng, masked)
    offs = MX_COUNTS if masked else MX_OFFS
    want = fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, out_dtype="float32", layout=layout)
    ta = torch.from_numpy(np.asarray(qa)).view(torch.float8_e4m3fn)
    tw = torch.from_numpy(np.asarray(qw)).view(torch.float8_e4m3fn).transpose(1, 2)
    tsa, tsb = torch.from_numpy(np.asarray(sa)), torch.from_numpy(np.asarray(sw))  # uint8
    toffs = torch.from_numpy(offs)
    cases = [(tsa, tsb)]
    if hasattr(torch, "float8_e8m0fnu"):
        cases.append((tsa.view(torch.float8_e8m0fnu), tsb.view(torch.float8_e8m0fnu)))
    for xa, xb in cases:
        got = fp8kit.grouped_mm(ta, tw, toffs, xa, xb, out_dtype=torch.float32, layout=layout)
        assert got.shape == np.shape(want)
        rows = got.reshape(-1, MX_N)
        for _, r0, r1 in mx_rows(masked):
            assert np.array_equal(rows[r0:r1].numpy(), np.asarray(want).reshape(-1, MX_N)[r0:r1])
        op = torch_ops.grouped_mm(ta, tw, toffs, xa, xb, out_dtype=torch.float32, layout=layout)
        for _, r0, r1 in mx_rows(masked):
            assert torch.equal(op.reshape(-1, MX_N)[r0:r1], rows[r0:r1])
    xa, xb = cases[-1]
    torch.library.opcheck(torch.ops.fp8kit.grouped_mm, (ta, tw, toffs, xa, xb, None, "float32", "", 1.0, layout),
                          test_utils=("test_faketensor",))
    with pytest.raises(fp8kit.UnsupportedError):  # blocked scales through the op too
        _, swb = fp8kit.quantize(torch.randn(G, MX_N, MX_K), "mx", scale_layout="blocked")
        torch_ops.grouped_mm(ta, tw, toffs, xa, swb, out_dtype=torch.float32, layout=layout)


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_mx_cuda_matches_cpu(layout, rng):
    """The CUDA kernel with MX scales against the CPU backend (bf16 within docs/spec.md 3): with the workspace
    the call allocates itself (the library asks for one: the normalized MX copies), with one given (from
    grouped_mm_workspace_size) and with one too small (the call then runs on the operands as given)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 CUDA device")
    from fp8kit import _grouped
    masked = layout == "masked"
    qa, sa, qw, sw, _, _ = mx_operands(rng, masked)
    offs = MX_COUNTS if masked else MX_OFFS
    want = np.asarray(fp8kit.grouped_mm(qa, np.swapaxes(qw, 1, 2), offs, sa, sw, out_dtype="float32",
                                        layout=layout)).reshape(-1, MX_N)
    ta = torch.from_numpy(np.asarray(qa)).view(torch.float8_e4m3fn).cuda()
    tw = torch.from_numpy(np.ascontiguousarray(qw)).view(torch.float8_e4m3fn).cuda().transpose(1, 2)
    tsa, tsb = torch.from_numpy(np.asarray(sa)).cuda(), torch.from_numpy(np.asarray(sw)).cuda()
    toffs = torch.from_numpy(offs).cuda()
    nws = _grouped.grouped_mm_workspace_size(ta, tw, tsa, tsb, out_dtype=torch.bfloat16, layout=layout)
    assert nws > 0  # the normalized MX copies of a and b
    wss = [None, torch.empty(nws, dtype=torch.uint8, device="cuda"), torch.empty(16, dtype=torch.uint8,
                                                                                     device="cuda")]
    for ws in wss:
        out = torch.full((G, MX_M, MX_N) if masked else (MX_T, MX_N), 3.0, dtype=torch.bfloat16, device="cuda")
        status = torch.full((1,), 7, dtype=torch.int32, device="cuda")
        fp8kit.grouped_mm(ta, tw, toffs, tsa, tsb, out=out, status=status, layout=layout, workspace=ws)
        torch.cuda.synchronize()
        assert int(status.item()) == 0
        rows = out.reshape(-1, MX_N).float().cpu().numpy().astype(np.float64)
        covered = np.zeros(rows.shape[0], bool)
        for _, r0, r1 in mx_rows(masked):
            covered[r0:r1] = True
        w = want[covered].astype(np.float64)
        g = rows[covered]
        assert np.sqrt(((g - w) ** 2).sum() / (w ** 2).sum()) <= 4e-3, ws is None
        assert (rows[~covered] == 3.0).all()
