"""bench_overhead.py - host time per call of fp8kit.scaled_mm (raw path and
torch.ops.fp8kit custom-op path) next to torch._scaled_mm, same run, on a CUDA
device: e4m3 x e4m3 -> bf16, rowwise scales, 128x128x128 (the issue-6 target:
raw path <= 8 us and <= 1/3 of torch's). Host time = wall time of N
back-to-back calls / N with the GPU kept busy enough that launches never wait
on it (median of 7 runs), plus a CUDA-event check that results match.
Run: FP8KIT_LIBRARY=build/libfp8kit.so python3 python/bench_overhead.py
(Needs torch with CUDA and a CUDA build of libfp8kit; results: docs/perf.md.)"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import fp8kit  # noqa: E402
from fp8kit import torch_ops  # noqa: E402


def host_us(fn, n=2000, reps=7):
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return sorted(times)[reps // 2]


def main():
    m = n = k = int(os.environ.get("SIZE", "128"))
    a = torch.randn(m, k, device="cuda")
    w = torch.randn(n, k, device="cuda")
    qa, sa = fp8kit.quantize(a, scheme="row")
    qw, sw = fp8kit.quantize(w, scheme="row")
    b, sbt = qw.t(), sw.t()
    raw = host_us(lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=torch.bfloat16))
    op = host_us(lambda: torch_ops.scaled_mm(qa, b, sa, sbt, out_dtype=torch.bfloat16))
    peer = host_us(lambda: torch._scaled_mm(qa, b, sa, sbt, out_dtype=torch.bfloat16))
    d1 = fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=torch.bfloat16).float()
    d2 = torch._scaled_mm(qa, b, sa, sbt, out_dtype=torch.bfloat16).float()
    rel = ((d1 - d2).norm() / d2.norm()).item()
    print("device: %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    print("| what (%dx%dx%d, rowwise e4m3 -> bf16) | host us per call | vs torch._scaled_mm |" % (m, n, k))
    print("|---|---|---|")
    for name, us in (("fp8kit.scaled_mm (raw)", raw), ("torch.ops.fp8kit.scaled_mm (custom op)", op),
                     ("torch._scaled_mm", peer)):
        print("| %s | %.1f | %.2fx |" % (name, us, us / peer))
    print("relative difference of the outputs: %.2e" % rel)


if __name__ == "__main__":
    main()
