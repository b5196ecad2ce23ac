"""torch_peer_timing.py - what the PyTorch peer scripts (torch_quant_peer.py,
torch_grouped_peer.py) share: the run's device name, date and commit (env
FK_DATE, default today in UTC; FK_COMMIT) and timed(fn), the median of REPS CUDA-event timings of
fn after 3 warm-up calls, with L2 flushed (a 256 MiB fill) before each (median_ms: the same with
other counts; bench/peer/deepgemm_peer.py uses it too)."""
import datetime
import os

import torch

REPS = 30
DATE = os.environ.get("FK_DATE") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
COMMIT = os.environ.get("FK_COMMIT", "unknown")
DEV = torch.cuda.get_device_name(0)
_flush = None


def median_ms(fn, reps=REPS, warmup=3):
    """Median of reps CUDA-event timings (ms) of fn after warmup calls, L2 flushed (a 256 MiB fill)
    before each."""
    global _flush
    if _flush is None:
        _flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        _flush.fill_(i & 0xFF)
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def timed(fn):
    return median_ms(fn)
