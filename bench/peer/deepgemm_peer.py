#!/usr/bin/env python3
"""deepgemm_peer.py - DeepGEMM as a benchmark peer of fp8kit's block-scaled FP8 GEMMs, timed in
one process on one GPU (Hopper, sm_90a), with fp8kit ("ours") and cuBLASLt's blockwise mode
(torch._scaled_mm) beside it where they apply.

Ops and cases (A 1x128 fp32 scales, B 128x128 fp32 scales, e4m3, bf16 out unless noted):
  gemm_block          fp8_gemm_nt, M x N x K as in DENSE below
  grouped_contiguous  m_grouped_fp8_gemm_nt_contiguous: G experts' rows (0.7-1.3 x the
                      expected count each, DeepGEMM's generator) padded to 128 and stacked,
                      m_indices -1 on the padding
  grouped_masked      m_grouped_fp8_gemm_nt_masked: (G, max_m, K) with masked_m valid rows
  k_grouped           k_grouped_fp8_gemm_nt_contiguous (sm90 name): D[g] (M x N, fp32) +=
                      A_g B_g^T over each group's K slice, A and B both 1x128 (per row, 128 K),
                      in place (c = d)

Inputs come from DeepGEMM's own tests/generators.py (found beside the deep_gemm package,
i.e. BUILD_DIR/DeepGEMM/tests) and are kept in the standard layouts every implementation
starts from: A (M, K) e4m3 with (M, ceil(K/128)) fp32 scales row-major; B (N, K) e4m3 with
(ceil(N/128), ceil(K/128)) fp32 scales (grouped: a leading G). Each implementation is a
"maker" in CALLS[op]: maker(inputs) does its one-time layout work (untimed: DeepGEMM wants
A's scales MN-major and TMA-aligned, cuBLASLt M-major) and returns the timed closure fn() ->
output, or raises NotAvailable(reason) ("n/a" in the table and JSON). Implementations:
  deepgemm            DeepGEMM with A's scales pre-transformed (its documented input layout)
  deepgemm_sf_in_call DeepGEMM given the row-major A scales: the transposition runs in each
                      call (what a caller holding standard layouts pays); JSON peer_sf_in_call_*
  ours                fp8kit (python/ of this repository): scaled_mm (dense, scale_mode
                      "block"), grouped_mm (contiguous; masked with layout="masked"), each
                      given the standard-layout block scales (--ours-sfa mn_major: A's in the
                      MN-major layout DeepGEMM gets, made before the timed calls); k_grouped_mm
                      (A and B and their 1x128 scales concatenated along K once, fp32 D += in
                      place, fast_accum); n/a where the binding refuses them
  cublaslt            torch._scaled_mm with blockwise 1x128 / 128x128 scales (dense only)

Every output is checked against an fp32 torch product of the dequantized operands (TF32
off; grouped: the valid rows only): rel_err = ||out - ref||_F / ||ref||_F, checked when below
--tol. A figure counts only when checked (JSON *_checked). Timing: the first call (the JIT
compiles DeepGEMM's kernel there) and the check, --warmup more calls, then --reps timings
with CUDA events around the call alone and L2 flushed (a 256 MiB memset) before each; the
median is reported. TFLOP/s count the valid rows only. --kernel-time adds, per implementation,
the median device time of the call's own kernels by the CUDA profiler (the host time between the
flush and the launch left out, as DeepGEMM's own benchmarks time) and its host time per call.

Output: a table on stdout and one JSON line per case appended to --out: op, case, shape,
peer_name ("DeepGEMM <version>"), peer_us, peer_tflops, peer_rel_err, peer_checked,
peer_sf_in_call_us (and _tflops, _rel_err, _checked), ours_* / cublaslt_* likewise, ours /
peer (TF/s) and ratio (peer us / ours us, > 1: fp8kit faster) when ours ran, na (reasons),
unit, device, date, commit.

Run on the GPU machine after bench/peer/deepgemm_build.sh (see bench/peer/README.md):
  . /tmp/deepgemm/env.sh && python3 bench/peer/deepgemm_peer.py --out bench/results/x.jsonl
Without LD_PRELOAD naming libstdc++ the script re-executes itself with the system's
(DeepGEMM's JIT may crash in std::regex otherwise). FP8KIT_LIBRARY picks ours' library
(default: the newest build*/libfp8kit.so of this repository)."""
import argparse
import datetime
import json
import math
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _ensure_libstdcxx_preload():
    """Re-exec with the system libstdc++ in LD_PRELOAD unless one is there already."""
    pre = os.environ.get("LD_PRELOAD", "")
    if "libstdc++" in pre or os.environ.get("DG_PEER_NO_REEXEC"):
        return
    cands = ["/usr/lib/x86_64-linux-gnu/libstdc++.so.6"]
    for cc in ("g++", "gcc"):
        try:
            cands.append(subprocess.run([cc, "-print-file-name=libstdc++.so.6"], capture_output=True,
                                        text=True).stdout.strip())
        except OSError:
            pass
    for c in cands:
        if c and os.path.isabs(c) and os.path.exists(c):
            env = dict(os.environ, LD_PRELOAD=os.path.realpath(c) + (":" + pre if pre else ""), DG_PEER_NO_REEXEC="1")
            print("deepgemm_peer: re-executing with LD_PRELOAD=%s" % env["LD_PRELOAD"], flush=True)
            os.execve(sys.executable, [sys.executable] + sys.argv, env)
    print("deepgemm_peer: warning: no system libstdc++.so.6 found for LD_PRELOAD", flush=True)


if __name__ == "__main__":
    _ensure_libstdcxx_preload()

import torch  # noqa: E402


class NotAvailable(Exception):
    """An implementation that does not apply to a case (reported as n/a)."""


# --- the cases ----------------------------------------------------------------------------------

DENSE = [(4096, 7168, 2048), (4096, 24576, 1536), (4096, 18432, 7168), (4096, 28672, 8192), (2048, 14336, 4096),
         (8192, 8192, 8192), (4096, 4096, 7168), (128, 7168, 16384), (512, 7168, 2048)]
CONTIGUOUS = [(8, 2048, 4096, 7168), (8, 2048, 7168, 2048), (32, 256, 4096, 7168)]   # G, expected rows, N, K
MASKED = [(32, 256, 192, 4096, 7168), (32, 256, 192, 7168, 2048), (6, 1024, 1024, 4096, 7168)]  # G, max_m, ~rows, N, K
K_GROUPED = [(4, 4096, 7168, (8704, 7936, 9088, 8576))]  # G, M, N, K per group (sum 34304, multiples of 128)
# --more: model shapes beyond the default set (Qwen3-MoE gate/up and down, hidden 4096, expert 1536;
# Mixtral-style 4096 / 14336; decode-sized masked slabs and larger ones; down projections whose K is not
# a multiple of 512: Qwen3-30B-A3B's expert 768, DeepSeek-V2-Lite's 1408)
MORE_CONTIGUOUS = [(16, 1024, 3072, 4096), (16, 1024, 4096, 1536), (8, 4096, 28672, 4096), (16, 1024, 2048, 768),
                   (16, 1024, 2048, 1408)]
MORE_MASKED = [(16, 256, 128, 3072, 4096), (16, 256, 128, 4096, 1536), (32, 512, 384, 4096, 7168),
               (64, 256, 32, 4096, 7168), (8, 1024, 768, 7168, 2048), (32, 256, 192, 2048, 768)]


def all_cases(more=False, dense=None):
    """(op, case name, builder) for every case, in run order (more: with the --more shapes; dense: the
    dense shapes to run instead of DENSE)."""
    out = []
    for m, n, k in DENSE if dense is None else dense:
        out.append(("gemm_block", "%dx%dx%d" % (m, n, k), lambda m=m, n=n, k=k: build_dense(m, n, k)))
    for g, e, n, k in CONTIGUOUS + (MORE_CONTIGUOUS if more else []):
        out.append(("grouped_contiguous", "g%dx%d_n%d_k%d" % (g, e, n, k),
                    lambda g=g, e=e, n=n, k=k: build_contiguous(g, e, n, k)))
    for g, mm, e, n, k in MASKED + (MORE_MASKED if more else []):
        out.append(("grouped_masked", "g%d_max%d_m%d_n%d_k%d" % (g, mm, e, n, k),
                    lambda g=g, mm=mm, e=e, n=n, k=k: build_masked(g, mm, e, n, k)))
    for g, m, n, ks in K_GROUPED:
        out.append(("k_grouped", "g%d_m%d_n%d_k%d" % (g, m, n, sum(ks)),
                    lambda g=g, m=m, n=n, ks=ks: build_k_grouped(g, m, n, list(ks))))
    return out


# --- DeepGEMM and its generators ------------------------------------------------------------------

dg = None       # the deep_gemm module
gen = None      # DeepGEMM's tests/generators.py
DG_VERSION, DG_COMMIT = "unknown", None


def load_deepgemm():
    global dg, gen, DG_VERSION, DG_COMMIT
    import deep_gemm
    dg = deep_gemm
    DG_VERSION = getattr(deep_gemm, "__version__", "unknown")
    root = Path(deep_gemm.__file__).resolve().parents[1]
    info = root / "BUNDLE-INFO.txt"
    if info.exists():
        m = re.search(r"deepseek-ai/DeepGEMM ([0-9a-f]{40})", info.read_text())
        DG_COMMIT = m.group(1) if m else None
    tests = root / "tests"
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))
    import generators
    gen = generators
    if dg.get_mk_alignment_for_contiguous_layout() != 128:
        dg.set_mk_alignment_for_contiguous_layout(128)


def _seed(s):
    random.seed(s)
    torch.manual_seed(s)
    torch.cuda.manual_seed(s)


# --- input builders: standard layouts ---------------------------------------------------------------
# Each returns a dict: the operands, "flops" (valid rows), "shape", "extra" (JSON fields), "out_rows"
# (grouped: which output rows are valid), "ref_parts" (a generator of (out_view, ref) pairs for the
# check), "reset" (k_grouped: restores the accumulator before the checked call; a maker whose fn
# accumulates into its own output gives fn.reset instead, which run_impl calls in its place).

def deq_1x128(q, s):
    """Dequantize (..., R, K) e4m3 with (..., R, ceil(K/128)) scales."""
    k = q.shape[-1]
    return q.float() * s.repeat_interleave(128, dim=-1)[..., :k]


def deq_128x128(q, s):
    """Dequantize (..., N, K) e4m3 with (..., ceil(N/128), ceil(K/128)) scales."""
    n, k = q.shape[-2:]
    return q.float() * s.repeat_interleave(128, dim=-2)[..., :n, :].repeat_interleave(128, dim=-1)[..., :k]


def build_dense(m, n, k):
    _seed(0)
    a, b, _, _, _ = gen.generate_normal(m, n, k, gen.MajorTypeAB.KMajor, gen.MajorTypeAB.KMajor, False, torch.bfloat16,
                                        gen.KernelType.Kernel1D2D, use_ue8m0=False)
    inp = dict(a=a[0], sa=a[1].contiguous(), b=b[0], sb=b[1].contiguous(), M=m, N=n, K=k,
               flops=2.0 * m * n * k, shape="%dx%dx%d" % (m, n, k), extra={})
    assert inp["sa"].shape == (m, (k + 127) // 128) and inp["sb"].shape == ((n + 127) // 128, (k + 127) // 128)

    def ref_parts(out):
        yield out, deq_1x128(inp["a"], inp["sa"]) @ deq_128x128(inp["b"], inp["sb"]).t()
    inp["ref_parts"] = ref_parts
    return inp


def build_contiguous(g, expected, n, k):
    _seed(0)
    t, a, b, m_indices, _, _ = gen.generate_m_grouped_contiguous(g, expected, n, k, gen.MajorTypeAB.KMajor,
                                                                 gen.MajorTypeAB.KMajor, use_ue8m0=False)
    idx = m_indices.cpu()
    starts, rows = [], []
    for i in range(g):
        pos = (idx == i).nonzero().flatten()
        starts.append(int(pos[0]) if len(pos) else (starts[-1] + rows[-1] if starts else 0))
        rows.append(len(pos))
    ends = starts[1:] + [t]  # the aligned (padded) ends
    inp = dict(a=a[0], sa=a[1].contiguous(), b=b[0], sb=b[1].contiguous(), m_indices=m_indices,
               offs=torch.tensor(ends, dtype=torch.int32, device="cuda"), G=g, T=t, N=n, K=k,
               flops=2.0 * sum(rows) * n * k, shape="G%d T%d N%d K%d" % (g, t, n, k),
               extra=dict(groups=g, rows=rows, rows_padded=t, N=n, K=k))

    def ref_parts(out):
        for i in range(g):
            s, r = starts[i], rows[i]
            ref = deq_1x128(inp["a"][s:s + r], inp["sa"][s:s + r]) @ deq_128x128(inp["b"][i], inp["sb"][i]).t()
            yield out[s:s + r], ref
    inp["ref_parts"] = ref_parts
    return inp


def build_masked(g, max_m, expected, n, k):
    _seed(0)
    x = torch.randn((g, max_m, k), device="cuda", dtype=torch.bfloat16)
    w = torch.randn((g, n, k), device="cuda", dtype=torch.bfloat16)
    rows = [min(max_m, int(expected * random.uniform(0.7, 1.3))) for _ in range(g)]
    a = gen.grouped_cast_fp8_fp4_with_major(x, gen.MajorTypeAB.KMajor, 128, False, False)
    b = gen.grouped_cast_fp8_fp4_with_major(w, gen.MajorTypeAB.KMajor, 128, False, False, use_block_cast_for_fp8=True)
    del x, w
    for i in range(g):  # as DeepGEMM's generator: A's scales past masked_m zeroed
        a[1][i, rows[i]:] = 0
    inp = dict(a=a[0], sa=a[1].contiguous(), b=b[0], sb=b[1].contiguous(),
               masked_m=torch.tensor(rows, dtype=torch.int32, device="cuda"),
               expected_m=min(max_m, int(expected * 1.2)),  # DeepGEMM's test passes 1.2 x the expected rows
               G=g, max_m=max_m, N=n, K=k, flops=2.0 * sum(rows) * n * k,
               shape="G%d max_m%d N%d K%d" % (g, max_m, n, k),
               extra=dict(groups=g, rows=rows, max_m=max_m, N=n, K=k))

    def ref_parts(out):
        for i in range(g):
            r = rows[i]
            ref = deq_1x128(inp["a"][i, :r], inp["sa"][i, :r]) @ deq_128x128(inp["b"][i], inp["sb"][i]).t()
            yield out[i, :r], ref
    inp["ref_parts"] = ref_parts
    return inp


def build_k_grouped(g, m, n, ks):
    _seed(0)
    total_k, a, b, c, d, _, ks_tensor, ks = gen.generate_k_grouped_contiguous(
        g, m, n, gen.MajorTypeAB.KMajor, gen.MajorTypeAB.KMajor, ks, use_ue8m0=False, gran_k=128)
    # a[0]: the groups' (m, K_g) K-major blocks, flattened one after the other; a[1]: (m, sum K / 128)
    # 1x128 scales (an MN-major view): kept row-major here, the standard layout
    inp = dict(a=a[0], sa=a[1].contiguous(), b=b[0], sb=b[1].contiguous(), ks=ks, ks_tensor=ks_tensor,
               c0=c.clone(), d=d, G=g, M=m, N=n, K=total_k, flops=2.0 * m * n * total_k,
               shape="G%d M%d N%d K%d" % (g, m, n, total_k), extra=dict(groups=g, ks=ks, M=m, N=n, K=total_k))
    inp["reset"] = lambda: inp["d"].copy_(inp["c0"])

    def group_views(i):
        k0 = sum(ks[:i])
        ag = inp["a"][k0 * m:(k0 + ks[i]) * m].view(m, ks[i])
        bg = inp["b"][k0 * n:(k0 + ks[i]) * n].view(n, ks[i])
        return ag, inp["sa"][:, k0 // 128:(k0 + ks[i]) // 128], bg, inp["sb"][:, k0 // 128:(k0 + ks[i]) // 128]
    inp["group_views"] = group_views

    def ref_parts(out):
        for i in range(g):
            ag, sag, bg, sbg = group_views(i)
            yield out[i], inp["c0"][i] + deq_1x128(ag, sag) @ deq_1x128(bg, sbg).t()
    inp["ref_parts"] = ref_parts
    return inp


# --- implementations: maker(inputs) -> fn() -> output -------------------------------------------------

def _bf16(*shape):
    return torch.empty(shape, device="cuda", dtype=torch.bfloat16)


def dg_dense(inp, sf_in_call=False):
    sa = inp["sa"] if sf_in_call else dg.get_mn_major_tma_aligned_tensor(inp["sa"])
    a, b, sb, d = inp["a"], inp["b"], inp["sb"], _bf16(inp["M"], inp["N"])

    def fn():
        dg.fp8_gemm_nt((a, sa), (b, sb), d, disable_ue8m0_cast=True)
        return d
    return fn


def dg_contiguous(inp, sf_in_call=False):
    sa = inp["sa"] if sf_in_call else dg.get_mn_major_tma_aligned_tensor(inp["sa"])
    a, b, sb, mi, d = inp["a"], inp["b"], inp["sb"], inp["m_indices"], _bf16(inp["T"], inp["N"])

    def fn():
        dg.m_grouped_fp8_gemm_nt_contiguous((a, sa), (b, sb), d, mi, disable_ue8m0_cast=True)
        return d
    return fn


def dg_masked(inp, sf_in_call=False):
    sa = inp["sa"] if sf_in_call else dg.get_mn_major_tma_aligned_tensor(inp["sa"])
    a, b, sb, mm, e = inp["a"], inp["b"], inp["sb"], inp["masked_m"], inp["expected_m"]
    d = _bf16(inp["G"], inp["max_m"], inp["N"])

    def fn():
        dg.m_grouped_fp8_gemm_nt_masked((a, sa), (b, sb), d, mm, e, disable_ue8m0_cast=True)
        return d
    return fn


def dg_k_grouped(inp, sf_in_call=False):
    f = getattr(dg, "k_grouped_fp8_gemm_nt_contiguous", None)
    if f is None:
        raise NotAvailable("this DeepGEMM has no k_grouped_fp8_gemm_nt_contiguous")
    sa, sb = inp["sa"], inp["sb"]
    if not sf_in_call:
        sa, sb = dg.get_mn_major_tma_aligned_tensor(sa), dg.get_mn_major_tma_aligned_tensor(sb)
    a, b, d, ks, kt = inp["a"], inp["b"], inp["d"], inp["ks"], inp["ks_tensor"]

    def fn():
        f((a, sa), (b, sb), d, ks, kt, c=d)  # D += A B^T in place (c is d, as DeepGEMM's test)
        return d
    return fn


_ours = {"mod": None, "why": None}


def fp8kit_module():
    if _ours["mod"] is None and _ours["why"] is None:
        try:
            sys.path.insert(0, str(REPO / "python"))
            import fp8kit
            if not fp8kit.backend_available("cuda"):
                raise RuntimeError("libfp8kit has no usable CUDA backend (%s)" % fp8kit.library_path())
            _ours["mod"] = fp8kit
        except Exception as e:  # noqa: BLE001 - any failure means: no ours column
            _ours["why"] = "fp8kit not usable: %s" % str(e).splitlines()[0][:200]
    if _ours["mod"] is None:
        raise NotAvailable(_ours["why"])
    return _ours["mod"]


OURS_SFA = "plain"  # --ours-sfa: the layout of A's 1x128 scales ours gets (DeepGEMM always gets MN-major)


def ours_dense(inp):
    fk = fp8kit_module()
    a, bt, sa, sb, d = inp["a"], inp["b"].t(), inp["sa"], inp["sb"], _bf16(inp["M"], inp["N"])
    kw = {}
    if OURS_SFA == "mn_major":  # the (ceil(K/128), 4 ceil(M/4)) buffer, made outside the timed calls as DeepGEMM's
        m, kb = sa.shape
        buf = torch.zeros(kb, 4 * ((m + 3) // 4), dtype=torch.float32, device=sa.device)
        buf[:, :m] = sa.t()
        sa, kw = buf, dict(scale_layout="mn_major")

    def fn():
        fk.scaled_mm(a, bt, sa, sb, out_dtype=torch.bfloat16, out=d, scale_mode="block", **kw)
        return d
    return fn


def ours_grouped_sfa(sa):
    """A's 1x128 scales as ours' grouped_mm gets them: the standard layout, or with --ours-sfa mn_major
    DeepGEMM's own MN-major TMA-aligned tensor (the (T, K/128) view with strides (1, 4 ceil(T/4)); masked,
    (G, M, K/128) with strides (K/128 * 4 ceil(M/4), 1, 4 ceil(M/4))), which grouped_mm takes as it is;
    made here, outside the timed calls, as DeepGEMM's. -> (scales, grouped_mm keywords)."""
    if OURS_SFA != "mn_major":
        return sa, {}
    return dg.get_mn_major_tma_aligned_tensor(sa), dict(scale_layout="mn_major")


def ours_plan(inp, *args, **kw):
    """Our grouped plan for the row (fp8kit.grouped_mm_describe, JSON field ours_plan), when the binding has it."""
    try:
        inp["extra"]["ours_plan"] = fp8kit_module().grouped_mm_describe(*args, **kw)
    except Exception:  # noqa: BLE001 - an older binding or library: no plan in the row
        pass


def ours_contiguous(inp):
    fk = fp8kit_module()
    # padding rows (zero A) belong to their group: offs are the padded ends
    a, bt, offs, sb = inp["a"], inp["b"].transpose(-2, -1), inp["offs"], inp["sb"]
    sa, kw = ours_grouped_sfa(inp["sa"])
    d = _bf16(inp["T"], inp["N"])

    def fn():
        fk.grouped_mm(a, bt, offs, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, out=d, **kw)
        return d
    try:
        fn()  # the binding refuses scales it does not take before anything runs
    except Exception as e:  # noqa: BLE001
        raise NotAvailable("fp8kit.grouped_mm: %s" % str(e).splitlines()[0][:200])
    ours_plan(inp, a, bt, sa, sb, torch.bfloat16, **kw)
    return fn


def ours_masked(inp):
    fk = fp8kit_module()
    a, bt, mm, sb = inp["a"], inp["b"].transpose(-2, -1), inp["masked_m"], inp["sb"]
    sa, kw = ours_grouped_sfa(inp["sa"])
    d = _bf16(inp["G"], inp["max_m"], inp["N"])

    def fn():  # offs = the valid-row counts with layout="masked"
        fk.grouped_mm(a, bt, mm, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, out=d, layout="masked", **kw)
        return d
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - e.g. a binding without layout= (TypeError)
        raise NotAvailable("fp8kit.grouped_mm(layout='masked'): %s" % str(e).splitlines()[0][:200])
    ours_plan(inp, a, bt, sa, sb, torch.bfloat16, layout="masked", **kw)
    return fn


def ours_k_grouped(inp):
    fk = fp8kit_module()
    # the standard layouts, concatenated along K once (untimed): A (M, Ktot) and B (N, Ktot) K-contiguous, their
    # 1x128 scales (M, Ktot/128) / (N, Ktot/128) f32 row-major, the G cumulative K ends as an int32 device tensor
    views = [inp["group_views"](i) for i in range(inp["G"])]
    a = torch.cat([v[0] for v in views], dim=1).contiguous()
    sa = torch.cat([v[1] for v in views], dim=1).float().contiguous()
    b = torch.cat([v[2] for v in views], dim=1).contiguous()
    sb = torch.cat([v[3] for v in views], dim=1).float().contiguous()
    ends, k = [], 0
    for v in views:
        k += v[0].shape[1]
        ends.append(k)
    offs = torch.tensor(ends, dtype=torch.int32, device=a.device)
    c0 = inp["c0"]
    d = c0.clone()  # our own fp32 accumulator: D += A_g B_g^T in place (beta = 1), as DeepGEMM's c = d

    def fn():
        fk.k_grouped_mm(a, b, offs, sa, sb, out=d, beta=1.0, fast_accum=True)
        return d
    fn.reset = lambda: d.copy_(c0)  # run_impl restores d before the checked call (fn accumulates)
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - e.g. a backend without the k-grouped GEMM (UNSUPPORTED)
        raise NotAvailable("fp8kit.k_grouped_mm: %s" % str(e).splitlines()[0][:200])
    return fn


def ours_missing(name):
    def maker(inp):
        fk = fp8kit_module()
        if not hasattr(fk, name):
            raise NotAvailable("fp8kit has no %s" % name)
        raise NotAvailable("fp8kit.%s exists but this script does not call it yet" % name)
    return maker


def cublaslt_dense(inp):
    a, b = inp["a"], inp["b"]
    sa = inp["sa"].t().contiguous().t()  # (M, K/128), M-major: torch's blockwise 1x128 layout
    sb = inp["sb"].t()                   # (K/128, N/128) view of the (N/128, K/128) grid
    errs = []
    for fast in (False, True):
        def fn(fast=fast):
            return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
        try:
            fn()
            torch.cuda.synchronize()
            fn.label = "torch._scaled_mm blockwise 1x128/128x128 (torch %s, cuBLASLt%s)" % (
                torch.__version__, ", use_fast_accum" if fast else "")
            return fn
        except Exception as e:  # noqa: BLE001
            errs.append("use_fast_accum=%s: %s" % (fast, str(e).splitlines()[0][:160]))
    raise NotAvailable("torch._scaled_mm refused blockwise scales: " + "; ".join(errs))


def not_applicable(why):
    def maker(inp):
        raise NotAvailable(why)
    return maker


CALLS = {
    "gemm_block": {
        "deepgemm": dg_dense,
        "deepgemm_sf_in_call": lambda inp: dg_dense(inp, True),
        "ours": ours_dense,
        "cublaslt": cublaslt_dense,
    },
    "grouped_contiguous": {
        "deepgemm": dg_contiguous,
        "deepgemm_sf_in_call": lambda inp: dg_contiguous(inp, True),
        "ours": ours_contiguous,
        "cublaslt": not_applicable("no grouped blockwise cuBLASLt path in torch"),
    },
    "grouped_masked": {
        "deepgemm": dg_masked,
        "deepgemm_sf_in_call": lambda inp: dg_masked(inp, True),
        "ours": ours_masked,
        "cublaslt": not_applicable("no masked grouped cuBLASLt path in torch"),
    },
    "k_grouped": {
        "deepgemm": dg_k_grouped,
        "deepgemm_sf_in_call": lambda inp: dg_k_grouped(inp, True),
        "ours": ours_k_grouped,
        "cublaslt": not_applicable("no k-grouped cuBLASLt path in torch"),
    },
}
IMPLS = ("deepgemm", "deepgemm_sf_in_call", "ours", "cublaslt")
JSON_PREFIX = {"deepgemm": "peer", "deepgemm_sf_in_call": "peer_sf_in_call", "ours": "ours", "cublaslt": "cublaslt"}


# --- checking and timing --------------------------------------------------------------------------------

def rel_err(inp, out):
    num = den = 0.0
    for o, r in inp["ref_parts"](out):
        num += float((o.float() - r).double().pow(2).sum())
        den += float(r.double().pow(2).sum())
        del r
    return math.sqrt(num / den) if den > 0 else float("nan")


def timed(fn, reps, warmup):
    """Median of `reps` CUDA-event timings (ms) of fn, L2 flushed before each, after `warmup` calls
    (bench/torch_peer_timing.py's median_ms, imported when a GPU is there)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from torch_peer_timing import median_ms
    return median_ms(fn, reps, warmup)


def host_us(fn, reps):
    """Median host time (us) of one call of fn: what the caller's thread spends enqueueing it, measured
    with the GPU kept busy by the calls before it (no synchronization inside the loop)."""
    ts = []
    torch.cuda.synchronize()
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    ts.sort()
    return 1e6 * ts[len(ts) // 2]


_trace_n = [0]


def _device_spans(prof_fn):
    """Runs prof_fn under the CUDA profiler; -> its device activities (kernels, memsets, copies) as
    (name, start us, end us), in start order."""
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        prof_fn()
        torch.cuda.synchronize()
    _trace_n[0] += 1
    path = os.path.join(tempfile.gettempdir(), "dg-peer-trace-%d-%d.json" % (os.getpid(), _trace_n[0]))
    prof.export_chrome_trace(path)
    with open(path) as f:
        ev = json.load(f)
    os.unlink(path)
    ev = ev.get("traceEvents", ev) if isinstance(ev, dict) else ev
    out = [(e.get("name", ""), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
           for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    out.sort(key=lambda x: x[1])
    return out


_kflush = []


def kernel_us(fn, reps):
    """Median over reps of the device time of fn's own work: the span from the start of its first
    kernel (or memset, copy) to the end of its last, by the CUDA profiler, L2 flushed (a 256 MiB fill)
    before each call. Unlike the event timing it leaves out any host time between the flush and the
    launch; DeepGEMM's own benchmarks time kernels this way."""
    if not _kflush:  # the flush buffer and its fill kernel's names, once per process
        buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        _kflush.extend((buf, {n for n, _, _ in _device_spans(lambda: buf.fill_(1))}))
    flush, fill_names = _kflush

    def body():
        for i in range(reps):
            flush.fill_(i & 0xFF)
            fn()
    spans, cur = [], None
    for name, t0, t1 in _device_spans(body):
        if name in fill_names:
            if cur:
                spans.append(cur[1] - cur[0])
            cur = None
            continue
        cur = [t0, t1] if cur is None else [cur[0], max(cur[1], t1)]
    if cur:
        spans.append(cur[1] - cur[0])
    if len(spans) != reps:
        raise RuntimeError("kernel timing: %d spans for %d calls" % (len(spans), reps))
    spans.sort()
    return spans[len(spans) // 2]


def run_impl(name, maker, inp, args):
    """-> dict(us, tflops, rel_err, checked, first_s, label) or dict(na=reason)."""
    try:
        fn = maker(inp)
        reset = getattr(fn, "reset", None) or inp.get("reset")  # a maker with its own accumulator resets it
        if reset:
            reset()
        torch.cuda.synchronize()
        t0 = time.time()
        out = fn()  # DeepGEMM: the JIT compiles here on a shape's first call
        torch.cuda.synchronize()
        first_s = time.time() - t0
        err = rel_err(inp, out)
        ms = timed(fn, args.reps, args.warmup)
        k_us = h_us = None
        if args.kernel_time:
            k_us = kernel_us(fn, args.reps)
            h_us = host_us(fn, args.reps)
    except NotAvailable as e:
        return dict(na=str(e))
    except Exception as e:  # noqa: BLE001 - one failing implementation must not end the run
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a sticky CUDA error: the next calls will say so too
            pass
        return dict(na="failed: %s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:300] if str(e).strip() else ""))
    us = 1000.0 * ms
    return dict(us=round(us, 2), tflops=round(inp["flops"] / (us * 1e-6) / 1e12, 1), rel_err=float("%.3g" % err),
                checked=bool(err < args.tol), first_s=round(first_s, 2), label=getattr(fn, "label", None),
                kernel_us=None if k_us is None else round(k_us, 2), host_us=None if h_us is None else round(h_us, 1))


def git_commit():
    c = os.environ.get("FK_COMMIT")
    if c:
        return c
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip() or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="append one JSON line per case to this file")
    ap.add_argument("--only", help="regex: run the cases whose 'op/case' matches")
    ap.add_argument("--impls", default=",".join(IMPLS), help="comma list out of %s" % ",".join(IMPLS))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-2, help="largest relative error that counts as checked")
    ap.add_argument("--ours-sfa", choices=("plain", "mn_major"), default="plain",
                    help="dense and grouped (contiguous, masked) rows: the layout of A's 1x128 scales ours gets "
                         "(plain (M, K/128) as vLLM and torchao store them, or mn_major as DeepGEMM requires); "
                         "ours_sfa in the JSON lines")
    ap.add_argument("--kernel-time", action="store_true",
                    help="also time each call's device work alone by the CUDA profiler (*_kernel_us, the "
                         "ratio of those as kernel_ratio) and its host time per call (*_host_us)")
    ap.add_argument("--date", default=os.environ.get("FK_DATE") or
                    datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"))
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--more", action="store_true", help="also the MORE_CONTIGUOUS / MORE_MASKED model shapes")
    ap.add_argument("--dense", help="comma list of MxNxK: the dense cases to run instead of the default list "
                                    "(e.g. a K sweep at one M x N)")
    args = ap.parse_args()
    dense = None
    if args.dense:
        try:
            dense = [tuple(int(v) for v in s.split("x")) for s in args.dense.split(",") if s]
        except ValueError:
            ap.error("--dense: MxNxK,MxNxK,...")
        if any(len(t) != 3 or min(t) < 1 for t in dense):
            ap.error("--dense: MxNxK with positive sizes")
    global OURS_SFA
    OURS_SFA = args.ours_sfa
    impls = [i for i in args.impls.split(",") if i]
    bad = [i for i in impls if i not in IMPLS]
    if bad:
        ap.error("unknown implementation(s) %s" % bad)
    cases = [c for c in all_cases(args.more, dense) if not args.only or re.search(args.only, "%s/%s" % (c[0], c[1]))]
    if args.list:
        for op, name, _ in cases:
            print("%s/%s" % (op, name))
        return 0
    if not torch.cuda.is_available():
        print("deepgemm_peer: no CUDA device")
        return 2
    load_deepgemm()
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 references
    torch.backends.cudnn.allow_tf32 = False
    dev, commit = torch.cuda.get_device_name(), git_commit()
    peer_name = "DeepGEMM %s" % DG_VERSION
    print("deepgemm_peer: %s (sm_%d%d), torch %s (CUDA %s), %s%s, LD_PRELOAD=%s, DG_JIT_CACHE_DIR=%s" % (
        dev, *torch.cuda.get_device_capability(), torch.__version__, torch.version.cuda, peer_name,
        " " + DG_COMMIT[:12] if DG_COMMIT else "", os.environ.get("LD_PRELOAD", ""),
        os.environ.get("DG_JIT_CACHE_DIR", "(default ~/.deep_gemm)")), flush=True)
    print("timing: median of %d, %d warm-up calls, L2 flushed (256 MiB) before each; checked: rel_err < %g" % (
        args.reps, args.warmup, args.tol), flush=True)
    hdr = "%-19s %-24s" % ("op", "case") + "".join(" | %-30s" % i for i in impls)
    print(hdr + "\n" + "-" * len(hdr), flush=True)
    failed = 0
    for op, name, builder in cases:
        try:
            inp = builder()
        except Exception as e:  # noqa: BLE001
            print("%-19s %-24s input builder failed: %s: %s" % (op, name, type(e).__name__, e), flush=True)
            failed += 1
            continue
        res = {i: run_impl(i, CALLS[op][i], inp, args) for i in impls}
        cells = []
        for i in impls:
            r = res[i]
            cells.append("n/a" if "na" in r else "%8.1f us %6.1f TF %s%.1e%s" % (
                r["us"], r["tflops"], "" if r["checked"] else "BAD ", r["rel_err"],
                "" if r.get("kernel_us") is None else " (kernels %.1f us, host %.1f us)" % (r["kernel_us"], r["host_us"])))
        print("%-19s %-24s" % (op, name) + "".join(" | %-30s" % c for c in cells), flush=True)
        for i in impls:
            r = res[i]
            if "na" in r:
                print("    %s n/a: %s" % (i, r["na"]), flush=True)
            elif not r["checked"]:
                print("    %s: relative error %.3g > %g: NOT CHECKED" % (i, r["rel_err"], args.tol), flush=True)
            elif i == "deepgemm" and r["first_s"] > 1:
                print("    deepgemm: first call %.1f s (JIT)" % r["first_s"], flush=True)
        if "na" in res.get("deepgemm", {}) or not res.get("deepgemm", {}).get("checked", True):
            failed += 1
        row = dict(op=op, case=name, shape=inp["shape"], **inp["extra"], peer_name=peer_name)
        if DG_COMMIT:
            row["peer_commit"] = DG_COMMIT
        na = {}
        for i in impls:
            r, p = res[i], JSON_PREFIX[i]
            if "na" in r:
                na[i] = r["na"]
                row[p + "_us"] = None
                continue
            row[p + "_us"] = r["us"]
            row[p + "_tflops"] = r["tflops"]
            row[p + "_rel_err"] = r["rel_err"]
            row[p + "_checked"] = r["checked"]
            if r.get("kernel_us") is not None:
                row[p + "_kernel_us"] = r["kernel_us"]
                row[p + "_host_us"] = r["host_us"]
            if i == "deepgemm":
                row["peer_first_call_s"] = r["first_s"]
            if i == "ours":
                row["ours_name"] = "fp8kit %s" % getattr(_ours["mod"], "__version__", "?")
            if i == "cublaslt" and r["label"]:
                row["cublaslt_name"] = r["label"]
        pr, orr = res.get("deepgemm", {}), res.get("ours", {})
        if "us" in pr and "us" in orr:
            row.update(ours=orr["tflops"], peer=pr["tflops"], ratio=round(pr["us"] / orr["us"], 3))
            if pr.get("kernel_us") and orr.get("kernel_us"):
                row["kernel_ratio"] = round(pr["kernel_us"] / orr["kernel_us"], 3)
        if na:
            row["na"] = na
        if op in ("gemm_block", "grouped_contiguous", "grouped_masked"):
            row["ours_sfa"] = args.ours_sfa
        row.update(unit="TFLOP/s", reps=args.reps, warmup=args.warmup, torch=torch.__version__, device=dev,
                   date=args.date, commit=commit)
        line = json.dumps(row)
        print("JSON " + line, flush=True)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            with open(args.out, "a") as f:
                f.write(line + "\n")
        del inp, res
        torch.cuda.empty_cache()
    print("deepgemm_peer: done, %d case(s) without a checked DeepGEMM figure" % failed, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
