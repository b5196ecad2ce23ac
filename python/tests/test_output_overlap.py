"""test_output_overlap.py - issue 21 item 2: an output that shares memory with
an input or another output (the scale output placed inside the codes output,
out= over an operand, out= over c, grouped_mm's out over offs or status) is
refused in Python before any C call, naming both arguments, and nothing is
written - on scaled_mm's keyed and torch hot paths too, where a plan made for
a disjoint out= of the same signature is found. Accepted: the one in-place use
the library allows (out exactly c), and views that interleave in one buffer
without sharing a byte (two column halves of one array); where the byte ranges
meet, the decision is numpy's np.shares_memory for every placement tried."""
import numpy as np
import pytest

import fp8kit

F32 = np.float32
M, N, K = 24, 16, 64


def tag(a, fmt="e4m3"):
    return fp8kit.TaggedArray(a, fmt)


def _gemm_ops(rng, M=M, N=N, K=K):
    qa, sa = fp8kit.quantize(rng.standard_normal((M, K)).astype(F32), scheme="row")
    qw, sw = fp8kit.quantize(rng.standard_normal((N, K)).astype(F32), scheme="row")
    return qa, qw.T, sa, sw.T


def _refused(match, fn, *args, **kw):
    with pytest.raises(fp8kit.InvalidArgumentError, match=match) as ei:
        fn(*args, **kw)
    assert isinstance(ei.value, ValueError) and "shares memory" in str(ei.value)
    return ei.value


def test_quantize_scale_inside_codes(rng):
    """The issue's case: the scale output inside the codes output."""
    x = rng.standard_normal((M, K)).astype(F32)
    buf = np.full(M * K + 64, 0x5A, np.uint8)
    q = tag(buf[:M * K].reshape(M, K))
    s = buf[M * K - 32:M * K + 4 * M - 32].view(F32).reshape(M, 1)
    e = _refused(r"out\[1\] \(scale\).*shares memory with out\[0\] \(q\)", fp8kit.quantize, x, "row", out=(q, s))
    assert e.message.startswith("fp8kit.quantize")
    assert (buf == 0x5A).all(), "something was written"
    # q inside x's bytes, scale inside x's bytes
    xb = x.copy()
    _refused(r"out\[0\] \(q\).*with x", fp8kit.quantize, xb, "row",
             out=(tag(xb.view(np.uint8)[:, :K]), np.empty((M, 1), F32)))
    _refused(r"out\[1\] \(scale\).*with x", fp8kit.quantize, xb, "row",
             out=(tag(np.empty((M, K), np.uint8)), xb[:, :1]))
    assert np.array_equal(xb, x)
    q0, s0 = fp8kit.quantize(x, "row")  # separate arrays: fine
    q1, s1 = fp8kit.quantize(x, "row", out=(tag(np.empty((M, K), np.uint8)), np.empty((M, 1), F32)))
    assert np.array_equal(q0, q1) and np.array_equal(s0, s1)


def test_quantize_interleaved_accepted(rng):
    """x and q as the two column ranges of each row of one buffer: their byte ranges meet, no byte is shared."""
    x = rng.standard_normal((M, K)).astype(F32)
    buf = np.zeros((M, 5 * K), np.uint8)
    xv, q = buf[:, :4 * K].view(F32), tag(buf[:, 4 * K:])
    xv[...] = x
    qs, ss = fp8kit.quantize(xv, "row", out=(q, np.empty((M, 1), F32)))
    q0, s0 = fp8kit.quantize(x, "row")
    assert qs is q and np.array_equal(np.asarray(q), np.asarray(q0)) and np.array_equal(ss, s0)
    assert np.array_equal(xv, x)


def test_dequantize_and_cast_out_over_inputs(rng):
    x = rng.standard_normal((M, K)).astype(F32)
    q, s = fp8kit.quantize(x, "row")
    qb = np.zeros(M * K * 4, np.uint8)  # q's codes at the start of a float32 out
    qin = tag(qb[:M * K].reshape(M, K))
    qin[...] = np.asarray(q)
    out = qb.view(F32).reshape(M, K)
    _refused(r"out .*with q", fp8kit.dequantize, qin, s, "row", out=out)
    sb = np.zeros((M, K), F32)  # scale in the out's first column
    sb[:, :1] = s
    _refused(r"out .*with scale", fp8kit.dequantize, q, sb[:, :1], "row", out=sb)
    assert np.array_equal(sb[:, :1], s) and (sb[:, 1:] == 0).all()
    xb = x.copy()
    _refused(r"fp8kit.cast: out .*with x", fp8kit.cast, xb, "e4m3", out=tag(xb.view(np.uint8)[:, K:2 * K]))
    assert np.array_equal(xb, x)
    _refused(r"out .*with x", fp8kit.cast, qin, "float32", out=out)


def test_scaled_mm_out_over_operands(rng):
    a, b, sa, sb = _gemm_ops(rng)
    want = fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32")
    # out over a's codes
    big = np.zeros(M * N * 4 + M * K, np.uint8)
    a2 = tag(big[:M * K].reshape(M, K))
    a2[...] = np.asarray(a)
    _refused(r"fp8kit.scaled_mm: out .*with a ", fp8kit.scaled_mm, a2, b, sa, sb, out_dtype="float32",
             out=big[:M * N * 4].view(F32).reshape(M, N))
    # out over scale_a, over bias, over c (also out = c exactly)
    o = np.zeros((M, N), F32)
    so = o.reshape(-1)[:M].reshape(M, 1)  # a packed (M, 1) scale_a in out's first row(s)
    so[...] = sa
    _refused(r"with scale_a", fp8kit.scaled_mm, a, b, so, sb, out_dtype="float32", out=o)
    bias = np.zeros((M, N), F32)
    _refused(r"with bias", fp8kit.scaled_mm, a, b, sa, sb, bias[0], out_dtype="float32", out=bias)
    cbig = np.ones((M + 1, N), F32)
    _refused(r"with c", fp8kit.scaled_mm, a, b, sa, sb, out_dtype="float32", beta=1.0, c=cbig[1:], out=cbig[:M])
    cw = np.ones((M, 2 * N), F32)  # the same data, another layout: not the in-place case
    _refused(r"with c", fp8kit.scaled_mm, a, b, sa, sb, out_dtype="float32", beta=1.0, c=cw[:, :N],
             out=cw.reshape(-1)[:M * N].reshape(M, N))
    assert (cbig == 1.0).all() and (cw == 1.0).all() and (bias == 0).all()
    # c given but not read (beta 0): no conflict
    c = np.ones((M, N), F32)
    got = fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", c=c, out=c)
    assert got is c and np.array_equal(c, want)


def test_scaled_mm_out_may_be_exactly_c(rng):
    """The one in-place use the library allows (include/fp8kit.h): D is exactly C
    (same data, dtype and layout), D = alpha * AB + beta * D; on the keyed plan too."""
    a, b, sa, sb = _gemm_ops(rng)
    c0 = rng.standard_normal((M, N)).astype(F32)
    want = fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", beta=0.5, c=c0)
    for _ in range(3):
        c = c0.copy()
        assert fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", beta=0.5, c=c, out=c) is c
        assert np.array_equal(c, want)
    big = np.zeros((M, 2 * N), F32)  # a strided C: D is the same strided view
    for _ in range(3):
        big[:, :N] = c0
        fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", beta=0.5, c=big[:, :N], out=big[:, :N])
        assert np.array_equal(big[:, :N], want) and (big[:, N:] == 0).all()


def test_scaled_mm_keyed_plan_checks_overlap_per_call(rng):
    """A plan found by signature (made with a disjoint out=) still checks this call's pointers."""
    a, b, sa, sb = _gemm_ops(rng, K=N * 4)  # a's (M, K) codes are exactly an (M, N) float32's bytes
    want = fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32")
    out = np.zeros((M, N), F32)
    for _ in range(3):
        assert fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", out=out) is out
    assert np.array_equal(out, want)
    shared = np.zeros((M, N), F32)
    a2 = tag(shared.view(np.uint8))
    a2[...] = np.asarray(a)
    _refused(r"out .*with a ", fp8kit.scaled_mm, a2, b, sa, sb, out_dtype="float32", out=shared)
    assert np.array_equal(np.asarray(a2), np.asarray(a))
    sab = np.zeros((M, N), F32)
    so = sab.reshape(-1)[:M].reshape(M, 1)
    so[...] = sa
    _refused(r"with scale_a", fp8kit.scaled_mm, a, b, so, sb, out_dtype="float32", out=sab)
    assert np.array_equal(so, sa)


def test_scaled_mm_interleaved_out_and_c_accepted(rng):
    """out and c as the two column halves of one array: byte ranges meet, no byte shared."""
    a, b, sa, sb = _gemm_ops(rng)
    cval = rng.standard_normal((M, N)).astype(F32)
    want = fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", beta=0.5, c=cval)
    for _ in range(3):  # first call, then the keyed plan
        big = np.zeros((M, 2 * N), F32)
        big[:, N:] = cval
        got = fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32", beta=0.5, c=big[:, N:], out=big[:, :N])
        assert np.array_equal(got, want) and np.array_equal(big[:, N:], cval)


def test_grouped_out_over_inputs(rng):
    a, b, sa, sb = _gemm_ops(rng)
    w3 = tag(np.ascontiguousarray(np.stack([np.asarray(b.T)] * 3)))
    sb3 = sb.reshape(1, N) * np.ones((3, 1), F32)
    offs = np.array([8, 16, M], np.int32)
    want = fp8kit.grouped_mm(a, np.swapaxes(w3, 1, 2), offs, sa, sb3, out_dtype="float32")
    out = np.zeros((M, N), F32)
    ob = out.view(np.int32).reshape(-1)
    ob[:3] = offs
    _refused(r"fp8kit.grouped_mm: out .*with offs", fp8kit.grouped_mm, a, np.swapaxes(w3, 1, 2), ob[:3], sa, sb3,
             out_dtype="float32", out=out)
    sbo = np.zeros((M, N), F32)
    sbo.reshape(-1)[:3 * N] = sb3.reshape(-1)
    _refused(r"out .*with scale_b", fp8kit.grouped_mm, a, np.swapaxes(w3, 1, 2), offs, sa,
             sbo.reshape(-1)[:3 * N].reshape(3, N), out_dtype="float32", out=sbo)
    ok = np.zeros((M, N), F32)
    assert fp8kit.grouped_mm(a, np.swapaxes(w3, 1, 2), offs, sa, sb3, out_dtype="float32", out=ok) is ok
    assert np.array_equal(ok, want)


# ------------------------------------------------------------------ torch
def _torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8 dtypes")
    return torch


def test_torch_hot_paths_check_overlap(rng):
    """After plain calls (the guarded hot entry) and out= calls (the flat-key entry), an out=
    of the same signature over a, b or a scale is refused, and nothing is written."""
    torch = _torch()
    bf = torch.bfloat16
    Kt = N * 2  # a's (M, K) fp8 codes are exactly an (M, N) bf16's bytes
    q, s = fp8kit.quantize(torch.from_numpy(rng.standard_normal((M, Kt)).astype(F32)), scheme="row")
    qw, sw = fp8kit.quantize(torch.from_numpy(rng.standard_normal((N, Kt)).astype(F32)), scheme="row")
    want = fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=bf, alpha=1.0)
    for _ in range(3):
        fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=bf)
        out = torch.empty(M, N, dtype=bf)
        assert fp8kit.scaled_mm(q, qw.t(), s, sw.t(), out_dtype=bf, out=out) is out and torch.equal(out, want)
    for _ in range(2):  # both routes: guarded entry first, then (after a miss) the flat key
        shared = torch.empty(M, N, dtype=bf)
        a2 = shared.view(torch.uint8).view(torch.float8_e4m3fn)
        a2.copy_(q)
        _refused(r"out .*with a ", fp8kit.scaled_mm, a2, qw.t(), s, sw.t(), out_dtype=bf, out=shared)
        assert torch.equal(a2.view(torch.uint8), q.view(torch.uint8))
        big = torch.zeros(M + N, N, dtype=bf)  # b's (N, K) codes are an (N, N) bf16's bytes
        wv = big[M - 4:M - 4 + N].view(torch.uint8).view(torch.float8_e4m3fn)  # b overlaps out's last rows
        wv.copy_(qw)
        _refused(r"out .*with b ", fp8kit.scaled_mm, q, wv.t(), s, sw.t(), out_dtype=bf, out=big[:M])
        sbig = torch.zeros(M, N, dtype=torch.float32)
        sa2 = sbig.view(-1)[:M].view(M, 1)  # a packed (M, 1) scale_a in out's first row(s)
        sa2.copy_(s)
        _refused(r"with scale_a", fp8kit.scaled_mm, q, qw.t(), sa2, sw.t(), out_dtype=torch.float32, out=sbig)
    # with bias
    bias = torch.randn(N).to(bf)
    for _ in range(3):
        fp8kit.scaled_mm(q, qw.t(), s, sw.t(), bias, out_dtype=bf)
    bb = torch.zeros(M, N, dtype=bf)
    bb[0].copy_(bias)
    _refused(r"with bias", fp8kit.scaled_mm, q, qw.t(), s, sw.t(), bb[0], out_dtype=bf, out=bb)
    assert torch.equal(bb[0], bias)


def test_torch_interleaved_out_accepted_on_hot_path(rng):
    """A byte range that meets an operand's without sharing a byte takes the exact check, not a refusal:
    out = the left half of each row of one array, bias = the right half of its first row."""
    torch = _torch()
    bf = torch.bfloat16
    q, s = fp8kit.quantize(torch.from_numpy(rng.standard_normal((M, K)).astype(F32)), scheme="row")
    qw, sw = fp8kit.quantize(torch.from_numpy(rng.standard_normal((N, K)).astype(F32)), scheme="row")
    bias = torch.randn(N).to(bf)
    want = fp8kit.scaled_mm(q, qw.t(), s, sw.t(), bias, out_dtype=bf, alpha=1.0)
    for _ in range(4):
        big = torch.zeros(M, 2 * N, dtype=bf)
        big[0, N:] = bias
        got = fp8kit.scaled_mm(q, qw.t(), s, sw.t(), big[0, N:], out_dtype=bf, out=big[:, :N])
        assert torch.equal(got, want) and torch.equal(big[0, N:], bias)


def test_grouped_status_over_out(rng):
    torch = _torch()
    q, s = fp8kit.quantize(torch.from_numpy(rng.standard_normal((M, K)).astype(F32)), scheme="row")
    qw, sw = fp8kit.quantize(torch.from_numpy(rng.standard_normal((N, K)).astype(F32)), scheme="row")
    w3 = torch.stack([qw.view(torch.uint8)] * 3).view(torch.float8_e4m3fn).transpose(1, 2)
    offs = torch.tensor([8, 16, M], dtype=torch.int32)
    out = torch.zeros(M, N, dtype=torch.float32)
    status = out.view(torch.int32)[0, :1]
    _refused(r"status .*with out|out .*with status", fp8kit.grouped_mm, q, w3, offs, s,
             sw.reshape(1, N).repeat(3, 1), out_dtype=torch.float32, out=out, status=status)
    offs2 = torch.zeros(M, N, dtype=torch.int32)
    offs2[0, :3] = offs
    _refused(r"status .*with offs", fp8kit.grouped_mm, q, w3, offs2[0, :3], s, sw.reshape(1, N).repeat(3, 1),
             out_dtype=torch.float32, status=offs2[0, 2:3])


def _placements(total, na, nd, rng, n=24):
    """(offset of a, offset of out) pairs in a buffer of `total` bytes: a before, across the start of,
    inside, across the end of and after out, and random ones (out's offset a multiple of 4)."""
    od = 4 * ((total - nd) // 8)
    pairs = [(od - na, od), (od - na + 1, od), (od - 1, od), (od, od), (od + nd - na, od), (od + nd - 1, od),
             (od + nd, od), (od + nd // 2, od)]
    for _ in range(n):
        pairs.append((int(rng.integers(0, total - na)), 4 * int(rng.integers(0, (total - nd) // 4))))
    return pairs


def test_overlap_decision_matches_numpy_on_keyed_path(rng):
    """Every placement of a's codes relative to out: refused exactly when numpy says they share memory,
    else the right result (the range test in both orders, on the keyed path's per-call check)."""
    a, b, sa, sb = _gemm_ops(rng, K=40)
    want = fp8kit.scaled_mm(a, b, sa, sb, out_dtype="float32")
    na, nd = M * 40, M * N * 4
    total = 3 * nd + na
    for oa, od in _placements(total, na, nd, rng):
        buf = np.zeros(total, np.uint8)
        a2 = tag(buf[oa:oa + na].reshape(M, 40))
        a2[...] = np.asarray(a)
        out = buf[od:od + nd].view(F32).reshape(M, N)
        if np.shares_memory(a2, out):
            _refused("with a ", fp8kit.scaled_mm, a2, b, sa, sb, out_dtype="float32", out=out)
            assert np.array_equal(np.asarray(a2), np.asarray(a)), (oa, od)
        else:
            assert np.array_equal(fp8kit.scaled_mm(a2, b, sa, sb, out_dtype="float32", out=out), want), (oa, od)


def test_overlap_decision_matches_numpy_on_torch_hot_path(rng):
    torch = _torch()
    a, b, sa, sb = _gemm_ops(rng, K=40)
    ta, tsa = torch.from_numpy(np.asarray(a)).view(torch.float8_e4m3fn), torch.from_numpy(np.asarray(sa))
    tw = torch.from_numpy(np.ascontiguousarray(np.asarray(b.T))).view(torch.float8_e4m3fn)
    tsb = torch.from_numpy(np.ascontiguousarray(np.asarray(sb.T)))
    want = fp8kit.scaled_mm(ta, tw.t(), tsa, tsb.t(), out_dtype=torch.bfloat16, alpha=1.0)
    for _ in range(3):
        fp8kit.scaled_mm(ta, tw.t(), tsa, tsb.t(), out_dtype=torch.bfloat16)  # the guarded entry
    na, nd = M * 40, M * N * 2
    total = 3 * nd + na
    for oa, od in _placements(total, na, nd, rng):
        buf = torch.zeros(total, dtype=torch.uint8)
        a2 = buf[oa:oa + na].view(M, 40).view(torch.float8_e4m3fn)
        a2.copy_(ta)
        out = buf[od:od + nd].view(torch.bfloat16).view(M, N)
        if np.shares_memory(buf[oa:oa + na].numpy(), buf[od:od + nd].numpy()):
            _refused("with a ", fp8kit.scaled_mm, a2, tw.t(), tsa, tsb.t(), out_dtype=torch.bfloat16, out=out)
            assert torch.equal(a2.view(torch.uint8), ta.view(torch.uint8)), (oa, od)
        else:
            got = fp8kit.scaled_mm(a2, tw.t(), tsa, tsb.t(), out_dtype=torch.bfloat16, out=out)
            assert torch.equal(got, want), (oa, od)
