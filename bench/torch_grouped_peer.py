"""torch_grouped_peer.py - the PyTorch peer of bench_grouped, measured on the
same GPU in the same device run: torch._scaled_grouped_mm (2-D x 3-D, e4m3,
rowwise scales: a (T,) and b (G, N), bf16 out, offs int32 on the device) on
every case bench_grouped wrote to its JSON file, with use_fast_accum matching
the row's mode. Same data ranges (e4m3 codes with |x| < 2), median of 30
CUDA-event timings after warm-up, L2 flushed before each, TFLOP/s over the
grouped rows. Prints ours, the peer and ratio = peer time / our time (> 1:
fp8kit is faster) and appends one JSON line per row to OUT.
Usage: python3 bench/torch_grouped_peer.py OURS.jsonl OUT.jsonl   (env FK_COMMIT, FK_DATE)"""
import json
import sys

import torch

from torch_peer_timing import COMMIT, DATE, DEV, timed  # bench/ is sys.path[0]


def fp8_codes(*shape):
    """Random e4m3 codes with the top exponent bit clear (|x| < 2, never NaN), as bench_grouped."""
    u = torch.randint(0, 256, shape, dtype=torch.uint8, device="cuda") & 0xBF
    return u.view(torch.float8_e4m3fn)


def main():
    ours_path, out_path = sys.argv[1], sys.argv[2]
    rows = [json.loads(line) for line in open(ours_path) if line.strip()]
    if not rows:
        print("torch_grouped_peer: no rows in %s" % ours_path)
        return
    print("torch_grouped_peer: %s, torch %s" % (DEV, torch.__version__))
    print("%-11s %-8s %4s %10s %10s %9s %9s %7s" % ("case", "mode", "G", "ours us", "torch us", "ours TF", "torch TF",
                                                    "ratio"))
    cache = {}
    with open(out_path, "a") as out:
        for r in rows:
            T, N, K, G = r["T"], r["N"], r["K"], r["G"]
            key = (T, N, K, G)
            if key not in cache:
                cache.clear()
                torch.cuda.empty_cache()
                a = fp8_codes(T, K)
                b = fp8_codes(G, N, K).transpose(-2, -1)  # (G, K, N), K contiguous
                sa = torch.rand(T, device="cuda", dtype=torch.float32) + 0.5
                sb = torch.rand(G, N, device="cuda", dtype=torch.float32) + 0.5
                cache[key] = (a, b, sa, sb)
            a, b, sa, sb = cache[key]
            offs = torch.tensor(r["offsets"], dtype=torch.int32, device="cuda")
            fast = r["mode"] == "fast"

            def run():
                return torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16,
                                                use_fast_accum=fast)

            try:
                ms = timed(run)
            except Exception as e:  # a case torch refuses: report it, keep going
                print("%-11s %-8s %4d  torch failed: %s" % (r["case"], r["mode"], G, str(e).splitlines()[0]))
                continue
            used = r["offsets"][-1]
            peer_us = 1000.0 * ms
            peer_tf = 2.0 * used * N * K / (peer_us * 1e-6) / 1e12
            ratio = peer_us / r["us"]
            print("%-11s %-8s %4d %10.1f %10.1f %9.1f %9.1f %7.3f" % (r["case"], r["mode"], G, r["us"], peer_us,
                                                                      r["tflops"], peer_tf, ratio))
            out.write(json.dumps({
                "op": "grouped_gemm", "case": r["case"], "mode": r["mode"], "shape": "T%d N%d K%d G%d" % (T, N, K, G),
                "offsets": r["offsets"], "ours": round(r["tflops"], 1), "peer": round(peer_tf, 1),
                "peer_name": "torch._scaled_grouped_mm (torch %s%s)" % (torch.__version__,
                                                                       ", use_fast_accum" if fast else ""),
                "ours_us": r["us"], "peer_us": round(peer_us, 2), "ratio": round(ratio, 3), "unit": "TFLOP/s",
                "device": DEV, "date": DATE, "commit": COMMIT}) + "\n")


if __name__ == "__main__":
    main()
