"""bench_overhead.py - host time per call of fp8kit.scaled_mm (raw path and
torch.ops.fp8kit custom-op path) next to torch._scaled_mm, same run, on a CUDA
device: e4m3 x e4m3 -> bf16, rowwise scales, 128x128x128 (the issue-6 target:
raw path <= 8 us and <= 1/3 of torch's). Host time = wall time of a batch of
back-to-back calls / batch (the batch is short enough that the launch queue
never fills; synchronized between batches), median over interleaved rounds
(every form sees the same machine load; the order rotates each round). --breakdown also times the pieces of
one raw call (tensor metadata reads, torch.empty, the stream query, the bare
ctypes call with prepared structs) and prints a cProfile of the raw path;
--steps times each step of the hot call alone (bench_overhead_cpu.torch_steps on CUDA).
Run: FP8KIT_LIBRARY=build/libfp8kit.so python3 python/bench_overhead.py [--breakdown] [--steps] [--json FILE]
[--pkg DIR (another binding, e.g. an older checkout's python/)]
(Needs torch with CUDA and a CUDA build of libfp8kit; results: docs/python.md, docs/perf.md.)"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

# --pkg DIR: import fp8kit from DIR (e.g. an older checkout's python/) to compare bindings in one run
_pkg = sys.argv[sys.argv.index("--pkg") + 1] if "--pkg" in sys.argv else os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _pkg)

import torch  # noqa: E402

import fp8kit  # noqa: E402
from fp8kit import _gemm, torch_ops  # noqa: E402


def interleaved_us(forms, batch=200, rounds=41):
    """{name: median host us per call} over rounds of `batch` calls of each form."""
    for _, f in forms:
        for _ in range(batch):
            f()
    torch.cuda.synchronize()
    times = {name: [] for name, _ in forms}
    pc = time.perf_counter
    for r in range(rounds):
        k = r % len(forms)  # rotate the order each round: no form always follows the same one
        for name, f in forms[k:] + forms[:k]:
            t0 = pc()
            for _ in range(batch):
                f()
            times[name].append((pc() - t0) / batch * 1e6)
            torch.cuda.synchronize()
    return {name: sorted(v)[len(v) // 2] for name, v in times.items()}


def commit():
    if os.environ.get("FK_COMMIT"):
        return os.environ["FK_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def breakdown(qa, b, sa, sbt, bias):
    """Host us of the pieces of one raw call, each alone in a loop."""
    d = fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=torch.bfloat16)
    dev = qa.device
    hot = _gemm._tplans[next(k for k in _gemm._tplans)]
    new = not isinstance(hot[0], _gemm._Plan)  # this binding's entry, or an older one's (--pkg)
    plan = hot[3] if new else hot[0]
    guard = hot[1] if new else None
    args = fp8kit.GemmArgs.from_buffer_copy(plan.raw)
    args.a.data, args.b.data = qa.data_ptr(), b.data_ptr()
    args.scale_a.data, args.scale_b.data, args.d.data = sa.data_ptr(), sbt.data_ptr(), d.data_ptr()
    lib = plan.ctx._lib
    fn, h, pd, pa = lib.fp8kit_gemm, plan.handle, ctypes.byref(plan.desc), ctypes.byref(args)
    stream = torch._C._cuda_getCurrentRawStream(dev.index)
    pylib = ctypes.PyDLL(fp8kit.library_path())  # same symbol, GIL kept during the call
    pfn = pylib.fp8kit_gemm
    pfn.restype, pfn.argtypes = fn.restype, fn.argtypes
    noargs = lib.fp8kit_plan_cache_size
    bf16 = torch.bfloat16
    shape = tuple(d.shape)
    M, N = shape
    # the same symbol without argtypes: every argument already a ctypes object
    bare = ctypes.CDLL(fp8kit.library_path()).fp8kit_gemm
    bare.restype = ctypes.c_int
    # fp8kit_gemm_call_run with one prepared call struct {ctx, desc, args, stream}
    call = (ctypes.c_uint64 * 4)(h.value if isinstance(h, ctypes.c_void_p) else h, ctypes.addressof(plan.desc),
                                 ctypes.addressof(args), stream)
    callfn = getattr(ctypes.CDLL(fp8kit.library_path()), "fp8kit_gemm_call_run", None)
    if callfn is not None:
        callfn.restype = ctypes.c_int
    pcall = ctypes.byref(call)
    # fp8kit_gemm_call_ptrs: the same call struct, the 7 words (pointers, stream) packed per call
    ptrsfn = getattr(ctypes.CDLL(fp8kit.library_path()), "fp8kit_gemm_call_ptrs", None)
    if ptrsfn is not None:
        ptrsfn.restype = ctypes.c_int
    import struct
    pack7 = struct.Struct("7P").pack
    dp = torch.Tensor.data_ptr
    qa2, sa2 = fp8kit.quantize(torch.randn(2 * M, qa.shape[1], device=dev), scheme="row")
    hv = h if isinstance(h, ctypes.c_void_p) else ctypes.c_void_p(h)
    side = torch.cuda.Stream()
    side_h = side.cuda_stream
    tmpl = torch.empty((), dtype=bf16, device=dev).expand(shape)  # empty_like template without storage
    one = torch.empty((1,), dtype=bf16, device=dev)
    out = torch.empty(shape, dtype=bf16, device=dev)
    sig = (lambda t: (t.dtype, t.shape, t.stride(), t.device))
    # a dispatcher op registered with the low-level torch.library.Library API (no autograd / custom_op
    # wrappers) around the same raw call: what such a registration would cost
    lowlib = torch.library.Library("fp8kit_bench", "DEF")
    lowlib.define("mm(Tensor a, Tensor b, Tensor sa, Tensor sb) -> Tensor")
    lowlib.impl("mm", lambda a_, b_, sa_, sb_: _gemm.run(a_, b_, sa_, sb_, None, bf16, {}), "CUDA")
    lowop = torch.ops.fp8kit_bench.mm.default
    forms = [
        ("t.dtype", lambda: qa.dtype),
        ("t.shape", lambda: qa.shape),
        ("t.stride()", lambda: qa.stride()),
        ("t.device", lambda: qa.device),
        ("t.get_device()", lambda: qa.get_device()),
        ("t.data_ptr()", lambda: qa.data_ptr()),
        ("signature of 4 operands + dict lookup", lambda: _gemm._tplans.get(
            sig(qa) + sig(b) + sig(sa) + sig(sbt) + (None, bf16))),
        ("flat key of 4 operands (the keyed path's) + dict lookup", lambda: _gemm._tplans.get(
            (qa.dtype, qa.shape, qa.stride(), qa.device, b.dtype, b.shape, b.stride(), b.device,
             sa.dtype, sa.shape, sa.stride(), sa.device, sbt.dtype, sbt.shape, sbt.stride(), sbt.device,
             None, None, bf16))),
        ("TensorGuards check of 4 operands (the hot path's)",
         (lambda: guard(qa, b, sa, sbt)) if guard is not None else (lambda: None)),
        ("torch.empty(shape, dtype, device=torch.device)", lambda: torch.empty(shape, dtype=bf16, device=dev)),
        ("torch.empty(shape, dtype, device='cuda')", lambda: torch.empty(shape, dtype=bf16, device="cuda")),
        ("qa.new_empty(shape, dtype)", lambda: qa.new_empty(shape, dtype=bf16)),
        ("torch.empty(M, N, dtype, device)", lambda: torch.empty(M, N, dtype=bf16, device=dev)),
        ("torch.empty_like(expanded template)", lambda: torch.empty_like(tmpl)),
        ("one.new_empty(shape) (dtype, device from one)", lambda: one.new_empty(shape)),
        ("torch.empty_strided(shape, strides, dtype, device)",
         lambda: torch.empty_strided(shape, (N, 1), dtype=bf16, device=dev)),
        ("torch._C._cuda_getCurrentRawStream(i)", lambda: torch._C._cuda_getCurrentRawStream(dev.index)),
        ("torch.cuda.current_stream().cuda_stream", lambda: torch.cuda.current_stream().cuda_stream),
        ("torch.compiler.is_compiling()", torch.compiler.is_compiling),
        ("ctypes: fp8kit_plan_cache_size(ctx)", lambda: noargs(h)),
        ("ctypes: fp8kit_gemm, prepared structs (C + launch)", lambda: fn(h, pd, pa, stream)),
        ("ctypes PyDLL: fp8kit_gemm, prepared structs", lambda: pfn(h, pd, pa, stream)),
        ("ctypes, no argtypes: fp8kit_gemm, prepared structs", lambda: bare(hv, pd, pa, ctypes.c_void_p(stream))),
        ("ctypes: fp8kit_gemm, prepared structs, on a torch side stream", lambda: fn(h, pd, pa, side_h)),
        ("ctypes, no argtypes: fp8kit_gemm_call_run(byref(call))",
         (lambda: callfn(pcall)) if callfn is not None else (lambda: None)),
        ("ctypes, no argtypes: fp8kit_gemm_call_ptrs(byref(call), pack of 6 data_ptr() + stream) (the hot path's)",
         (lambda: ptrsfn(pcall, pack7(dp(qa), dp(b), dp(sa), dp(sbt), 0, dp(d), stream)))
         if ptrsfn is not None else (lambda: None)),
        ("fp8kit.scaled_mm (raw, out=)", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16, out=out)),
        ("fp8kit.scaled_mm (raw)", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)),
        ("Library-registered op around the raw call", lambda: lowop(qa, b, sa, sbt)),
        ("torch.ops.fp8kit.scaled_mm.default (op, no Python wrapper)",
         lambda: torch.ops.fp8kit.scaled_mm.default(qa, b, sa, sbt, None, "bfloat16", "", 1.0, 0.0, None, False,
                                                    "", "", False)),
        ("fp8kit.scaled_mm (raw, two shapes alternating, per call)",
         lambda: (fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16), fp8kit.scaled_mm(qa2, b, sa2, sbt, out_dtype=bf16))),
        ("fp8kit.scaled_mm (raw, bias)", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, bias=bias, out_dtype=bf16)),
        ("fp8kit.scaled_mm (raw, activation='relu': general path)",
         lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16, activation="relu")),
    ]
    res = interleaved_us(forms, batch=200, rounds=21)
    print("\n| piece (one at a time, in a loop) | host us |\n|---|---|")
    for name, _ in forms:
        print("| %s | %.3f |" % (name, res[name] / (2 if "alternating" in name else 1)))
    import cProfile
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(3000):
        fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)
    pr.disable()
    torch.cuda.synchronize()
    print("\ncProfile of 3000 raw calls (tottime):")
    pstats.Stats(pr).sort_stats("tottime").print_stats(12)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--breakdown", action="store_true")
    ap.add_argument("--steps", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--size", type=int, default=int(os.environ.get("SIZE", "128")))
    ap.add_argument("--pkg", help="import fp8kit from this folder")
    o = ap.parse_args()
    m = n = k = o.size
    a = torch.randn(m, k, device="cuda")
    w = torch.randn(n, k, device="cuda")
    qa, sa = fp8kit.quantize(a, scheme="row")
    qw, sw = fp8kit.quantize(w, scheme="row")
    b, sbt = qw.t(), sw.t()
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    bf16 = torch.bfloat16
    d_ours = torch.empty(m, n, dtype=bf16, device="cuda")
    d_torch = torch.empty(m, n, dtype=bf16, device="cuda")
    forms = [
        ("fp8kit.scaled_mm (raw)", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)),
        ("torch.ops.fp8kit.scaled_mm (torch op)", lambda: torch_ops.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)),
        ("torch._scaled_mm", lambda: torch._scaled_mm(qa, b, sa, sbt, out_dtype=bf16)),
        # both into a given output: no allocation on either side
        ("fp8kit.scaled_mm (raw, out=)", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16, out=d_ours)),
        ("torch._scaled_mm (out=)", lambda: torch._scaled_mm(qa, b, sa, sbt, out_dtype=bf16, out=d_torch)),
    ]
    res = interleaved_us(forms)
    d1 = fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16).float()
    d2 = torch._scaled_mm(qa, b, sa, sbt, out_dtype=bf16).float()
    rel = ((d1 - d2).norm() / d2.norm()).item()
    peer = res["torch._scaled_mm"]
    dev = torch.cuda.get_device_name()
    print("device: %s, torch %s, commit %s, fp8kit from %s" % (dev, torch.__version__, commit(),
                                                               os.path.dirname(fp8kit.__file__)))
    print("| what (%dx%dx%d, rowwise e4m3 -> bf16) | host us per call | vs torch._scaled_mm |" % (m, n, k))
    print("|---|---|---|")
    for name, _ in forms:
        ref = res["torch._scaled_mm (out=)"] if name.endswith("(raw, out=)") else peer
        print("| %s | %.1f | %.2fx |" % (name, res[name], res[name] / ref))
    print("(the out= rows are compared with each other)")
    print("relative difference of the outputs: %.2e" % rel)
    if o.json:
        with open(o.json, "a") as f:
            for name, pname in ((forms[0][0], forms[2][0]), (forms[1][0], forms[2][0]), (forms[3][0], forms[4][0])):
                f.write(json.dumps({"op": "python_overhead", "case": name, "shape": "%dx%dx%d" % (m, n, k),
                                    "ours": round(res[name], 2), "peer": round(res[pname], 2),
                                    "peer_name": pname, "ratio": round(res[name] / res[pname], 3),
                                    "unit": "host us/call", "device": dev, "torch": torch.__version__,
                                    "date": time.strftime("%Y-%m-%d"), "commit": commit()}) + "\n")
    if o.steps:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_overhead_cpu import torch_steps
        torch_steps(n=20000, device="cuda", M=m, N=n, K=k, profile=False)
    if o.breakdown:
        breakdown(qa, b, sa, sbt, bias)


if __name__ == "__main__":
    main()
