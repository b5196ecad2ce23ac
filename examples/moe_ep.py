#!/usr/bin/env python3
"""examples/moe_ep.py - fp8kit.distributed.MoE, a mixture-of-experts layer
spread over GPUs (expert parallelism: fp8 dispatch, the gate/up grouped GEMM
with the fused SwiGLU writing the down projection's fp8 input, the down
grouped GEMM, combine), checked against fp8kit.distributed.moe_reference
(the same layer on one GPU, no communication) and, with --bench, timed
against a bf16 path (torch all_to_all_single of bf16 tokens + torch._grouped_mm).

    torchrun --nproc-per-node 2 examples/moe_ep.py                  # check, T = 128 per rank
    torchrun --nproc-per-node 2 examples/moe_ep.py --tokens 1,7,128,1024 --uneven
    torchrun --nproc-per-node 2 examples/moe_ep.py --model-shape --bench --tokens 128,1024,4096
    torchrun --nproc-per-node 2 examples/moe_ep.py --graph                          # + CUDA graph replay
    python3 examples/moe_ep.py                                      # one GPU: world size 1, no torchrun

Every rank draws the same data from one seed (all ranks' tokens, routing
and all E experts' weights), keeps its own tokens and experts, and checks:

1. the dispatch, bit for bit: each local expert's received rows are
   fp8kit.quantize's codes and 1x128 scales of exactly the tokens (of every
   rank, in rank order, then token order) that list the expert, and the
   counts match;
2. the output on its own tokens against moe_reference(its tokens, every
   expert) within BOUND (below);
3. (--intermediates, default when they fit in memory) h (the down
   projection's fp8 input and scales), y (the experts' bf16 outputs) and the
   output against moe_reference over every rank's tokens with the layer's
   own M (so each expert's rows are the same rows in the same order and the
   GEMMs have the same M): reported bit for bit; --exact makes any
   difference a failure.

The exit status is 1 when a check fails on any rank. With --bench, rank 0
prints the mean time per call (the slowest rank's, CUDA events over --iters
calls after --warmup) of the whole layer, of dispatch + combine alone, and of
the bf16 path (skipped, on every rank, where torch._grouped_mm is missing or
refuses the shapes), and --jsonl appends one row per T (ours, the bf16
path as peer, the ratio peer / ours, and dispatch + combine alone).
"""
import os

# NVLink multicast stays off on the shared GPU machines (a program that uses it can take the host's GPUs out
# of service): set here, before torch or NCCL make any communicator, whatever the launcher passed.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

try:
    import fp8kit  # noqa: E402
except ImportError:  # a source checkout without `pip install .`: the package next to this folder
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    import fp8kit  # noqa: E402
import fp8kit.distributed as fd  # noqa: E402

# BOUND: the layer's output against moe_reference on the rank's own tokens, relative Frobenius error. Both run
# the same fp8kit calls on the same codes; what differs is which rows share a GEMM (the rank's E/W experts with
# M = W x max_tokens rows each, against all E experts with the largest count), which may change the GPU's tile
# choice. A row's arithmetic does not depend on its neighbours, so 0 is expected; the bound is what the
# GEMMs' own contract allows when the h codes agree: each y is within docs/spec.md section 3's bf16 bound
# (rel <= 4e-3) of the exact product of its fp8 inputs, so two y's of the same inputs are within 8e-3 of each
# other, and the combine adds one bf16 rounding (2^-9): 1e-2.
BOUND = 1e-2
INTERMEDIATES_AUTO_BYTES = 6 << 30  # the all-token reference's (E, M, 3H + I) bytes that --intermediates auto allows


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tokens", default="128", help="tokens per rank, a comma-separated list (each runs a layer "
                   "of max_tokens = that T unless --max-tokens)")
    p.add_argument("--max-tokens", type=int, default=0, help="the layer's max_tokens (default: T)")
    p.add_argument("--uneven", action="store_true", help="rank r gets T - r * ceil(T / W) tokens (0 when that "
                   "is negative): uneven counts, and a rank with none when T < W")
    p.add_argument("--experts", type=int, default=0, help="E (default 8 x the world size)")
    p.add_argument("--hidden", type=int, default=2048, help="H (a multiple of 128)")
    p.add_argument("--intermediate", type=int, default=1024, help="I (a multiple of 128)")
    p.add_argument("--topk", type=int, default=4, help="experts per token")
    p.add_argument("--model-shape", action="store_true", help="H 7168, I 2048, E 64, top-8 (a DeepSeek-V3-sized MoE layer)")
    p.add_argument("--routing", choices=["uniform", "skewed", "holes"], default="holes",
                   help="uniform: top-k of random scores; skewed: low experts favoured (uneven counts); holes "
                   "(default): skewed, the last expert never chosen, ~10%% of entries -1, ~5%% repeating the "
                   "token's first expert, token 0 with no expert")
    p.add_argument("--dtype", choices=["e4m3", "e5m2"], default="e4m3")
    p.add_argument("--pow2", action="store_true", help="power-of-two 1x128 and 128x128 scales")
    p.add_argument("--scale-layout", choices=["mn_major", "plain"], default="mn_major",
                   help="the received tokens' scales")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--mode", choices=["low_latency", "high_throughput"], default="low_latency",
                   help="the received layout: masked (low_latency) or contiguous (high_throughput; with "
                   "--transport nccl_ep, NCCL EP's high-throughput kernels)")
    p.add_argument("--transport", choices=["nccl", "nccl_ep"], default="nccl",
                   help="the layer's transport (nccl_ep: NCCL EP; its rows come in its own order, so the "
                   "all-token comparison of h and y is skipped and the output is checked against BOUND only)")
    p.add_argument("--intermediates", choices=["auto", "on", "off"], default="auto",
                   help="compare h, y and the output with the all-token reference (auto: when it needs <= 6 GiB)")
    p.add_argument("--exact", action="store_true", help="fail unless h, y and the output equal the all-token "
                   "reference bit for bit")
    p.add_argument("--no-check", action="store_true", help="skip the checks (timing only)")
    p.add_argument("--bench", action="store_true", help="time the layer, dispatch + combine, and the bf16 path")
    p.add_argument("--graph", action="store_true", help="also capture the whole layer in a CUDA graph (after one "
                   "eager call), replay it on new tokens, routing and weights copied into the captured inputs, "
                   "and require its output to equal an eager call's bit for bit")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--jsonl", default="", help="rank 0 appends the timing rows to this file")
    a = p.parse_args()
    if a.model_shape:
        a.hidden, a.intermediate, a.experts, a.topk = 7168, 2048, 64, 8
    a.tokens = [int(t) for t in a.tokens.split(",") if t.strip()]
    return a


def init():
    """torch.distributed on NCCL, one process per GPU; without torchrun, a world of one."""
    if "RANK" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    return dist.get_rank(), dist.get_world_size(), torch.device("cuda", local)


def token_counts(T, world, uneven):
    if not uneven:
        return [T] * world
    step = -(-T // world)
    return [max(0, T - r * step) for r in range(world)]


def make_weights(E, H, I, seed, dev):
    """Every expert's bf16 weights, the same on every rank: w13 (E, 2I, H) [gate; up], w2 (E, H, I)."""
    g = torch.Generator(device=dev).manual_seed(seed)
    w13 = torch.empty((E, 2 * I, H), dtype=torch.bfloat16, device=dev)
    w2 = torch.empty((E, H, I), dtype=torch.bfloat16, device=dev)
    for e in range(E):  # one expert at a time: no fp32 copy of the whole stack
        w13[e] = torch.randn((2 * I, H), generator=g, device=dev) * H ** -0.5
        w2[e] = torch.randn((H, I), generator=g, device=dev) * I ** -0.5
    return w13, w2


def make_tokens(N, E, H, k, routing, seed, dev):
    """Every rank's tokens (N of them, rank-major), their top-k ids (int32, -1 = none) and weights (f32)."""
    g = torch.Generator(device=dev).manual_seed(seed)
    x = torch.randn((N, H), generator=g, device=dev).to(torch.bfloat16)
    scores = torch.randn((N, E), generator=g, device=dev)
    if routing != "uniform":
        scores += torch.linspace(2.0, -2.0, E, device=dev)  # low experts favoured: uneven counts
    if routing == "holes" and E > k:
        scores[:, E - 1] = float("-inf")  # an expert that no token lists
    top = scores.topk(k, dim=1)
    ids, w = top.indices.to(torch.int32), torch.softmax(top.values, -1).float()
    if routing == "holes" and N:
        r = torch.rand((N, k), generator=g, device=dev)
        ids = torch.where(r < 0.10, torch.full_like(ids, -1), ids)
        dup = (r > 0.95) & (torch.arange(k, device=dev) > 0)
        ids = torch.where(dup, ids[:, :1].expand(-1, k), ids)
        ids[0] = -1
    return x, ids.contiguous(), w.contiguous()


def bits(t):
    return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def check_dispatch(recv, x_all, ids_all, E, args):
    """The received layout against fp8kit.quantize of every rank's tokens, bit for bit: a list of failures."""
    q, s = fp8kit.quantize(x_all, scheme="block1x128", dtype=args.dtype, pow2=args.pow2)
    q, s = bits(q), bits(s)  # indexed as integers (torch indexes few ops in fp8)
    valid = (ids_all >= 0) & (ids_all < E)
    lists = torch.zeros((x_all.shape[0], E), dtype=torch.int32, device=x_all.device)
    lists.scatter_add_(1, torch.where(valid, ids_all, 0).long(), valid.to(torch.int32))
    lists = lists > 0  # token i lists expert e (once, however often)
    counts = recv.counts.tolist()
    bad = []
    for e in range(recv.local_experts):
        ge = recv.first_expert + e
        toks = lists[:, ge].nonzero().squeeze(1)
        c = counts[e]
        if c != toks.numel():
            bad.append("expert %d: count %d, expected %d" % (ge, c, toks.numel()))
            continue
        if not c:
            continue
        if recv.layout == "contiguous":  # expert e's rows between its row ends
            r0 = int(recv.offsets[e - 1]) if e else 0
            rs = recv.scale[r0:r0 + c] if recv.scale_layout == "plain" else recv.scale[:, r0:r0 + c].t()
            got_x, got_s = bits(recv.x[r0:r0 + c]), bits(rs)
        else:
            rs = recv.scale[e, :c] if recv.scale_layout == "plain" else recv.scale[e, :, :c].t()
            got_x, got_s = bits(recv.x[e, :c]), bits(rs)
        if recv.transport == "nccl_ep":  # the same rows in NCCL EP's order: compared as sets
            got = torch.cat([got_x.view(torch.uint8), got_s.contiguous().view(torch.uint8)], 1)
            want = torch.cat([q[toks].view(torch.uint8), s[toks].contiguous().view(torch.uint8)], 1)
            if sorted(bytes(r) for r in got.cpu().numpy()) != sorted(bytes(r) for r in want.cpu().numpy()):
                bad.append("expert %d: rows differ from quantize's (compared as sets)" % ge)
            continue
        if not torch.equal(got_x, q[toks]):
            bad.append("expert %d: codes differ from quantize's" % ge)
        if not torch.equal(got_s, s[toks]):
            bad.append("expert %d: scales differ from quantize's" % ge)
    st = int(recv.status.item())
    if st:
        bad.append("recv.status = %d" % st)
    return bad


def rel_err(a, b):
    a, b = a.float(), b.float()
    n = float(b.norm())
    return float((a - b).norm()) / n if n else float((a - b).norm())


def compare_bits(a, b):
    """(elements that differ, elements)."""
    return int((bits(a) != bits(b)).sum()), a.numel()


def bf16_layer(x, ids, w, w13, w2, el, world):
    """The bf16 path: each (token, expert) pair's bf16 row to the expert's rank (torch all_to_all_single with
    host-side split sizes), torch._grouped_mm gate/up, silu(gate) * up in bf16, torch._grouped_mm down, the
    rows back, the weighted sum in fp32."""
    T, H = x.shape
    k = ids.shape[1]
    I = w2.shape[2]
    dev = x.device
    flat = ids.reshape(-1).long()
    valid = flat >= 0
    order = torch.argsort(torch.where(valid, flat, el * world), stable=True)  # by expert: by rank, then expert
    n = int(valid.sum())
    sel = order[:n]
    send_counts = torch.bincount(flat[sel] // el, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    sc, rc = send_counts.tolist(), recv_counts.tolist()
    R = sum(rc)
    recv_x = torch.empty((R, H), dtype=x.dtype, device=dev)
    dist.all_to_all_single(recv_x, x[sel // k], rc, sc)
    recv_e = torch.empty((R,), dtype=torch.int32, device=dev)
    dist.all_to_all_single(recv_e, (flat[sel] % el).to(torch.int32), rc, sc)
    yb = torch.empty((R, H), dtype=x.dtype, device=dev)
    if R:
        perm = torch.argsort(recv_e, stable=True)
        offs = torch.cumsum(torch.bincount(recv_e, minlength=el), 0).to(torch.int32)
        gu = torch._grouped_mm(recv_x[perm], w13.transpose(-2, -1), offs=offs)
        h = torch.nn.functional.silu(gu[:, :I]) * gu[:, I:]
        yb[perm] = torch._grouped_mm(h, w2.transpose(-2, -1), offs=offs)
    ret = torch.empty((n, H), dtype=x.dtype, device=dev)
    dist.all_to_all_single(ret, yb, sc, rc)
    pairs = torch.zeros((T * k, H), dtype=torch.float32, device=dev)
    pairs[sel] = ret.float()
    return (pairs.view(T, k, H) * (w * (ids >= 0)).unsqueeze(-1)).sum(1).to(torch.bfloat16)


def graph_check(moe, x, ids, w, E, H, k, routing, seed, dev):
    """The layer captured in a CUDA graph (collective: every rank captures and replays together), replayed on
    other inputs copied into the captured ones; its output against an eager call on those inputs, bit for bit."""
    xg, idsg, wg = x.clone(), ids.clone(), w.clone()
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        moe(xg, idsg, wg)  # warm: plans made, buffers allocated outside the capture
    torch.cuda.current_stream(dev).wait_stream(side)
    torch.cuda.synchronize(dev)
    dist.barrier()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out_g = moe(xg, idsg, wg)
    x2, ids2, w2 = make_tokens(x.shape[0], E, H, k, routing, seed, dev)
    xg.copy_(x2)
    idsg.copy_(ids2)
    wg.copy_(w2)
    g.replay()
    torch.cuda.synchronize(dev)
    got = out_g.clone()
    want = moe(x2, ids2, w2)
    torch.cuda.synchronize(dev)
    d, n = compare_bits(got, want)
    del g
    return [] if d == 0 else ["CUDA graph replay: %d of %d output values differ from an eager call" % (d, n)]


def grouped_mm_works(dev):
    """Whether torch._grouped_mm runs here (agreed by every rank: the bf16 path is collective)."""
    ok = 1
    try:
        a = torch.zeros((32, 256), dtype=torch.bfloat16, device=dev)
        b = torch.zeros((2, 128, 256), dtype=torch.bfloat16, device=dev)
        torch._grouped_mm(a, b.transpose(-2, -1), offs=torch.tensor([16, 32], dtype=torch.int32, device=dev))
        torch.cuda.synchronize(dev)
    except Exception as e:  # noqa: BLE001 - missing (old torch) or refused (arch)
        print("rank %d: torch._grouped_mm unusable: %s" % (dist.get_rank(), e), flush=True)
        ok = 0
    t = torch.tensor([ok], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def timed(fn, args, dev):
    """Mean us per call of fn on this rank, the slowest rank's (CUDA events)."""
    for _ in range(args.warmup):
        fn()
    torch.cuda.synchronize(dev)
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.iters):
        fn()
    end.record()
    torch.cuda.synchronize(dev)
    t = torch.tensor([start.elapsed_time(end) * 1000.0 / args.iters], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def main():
    args = parse_args()
    rank, world, dev = init()
    E = args.experts or 8 * world
    H, I, k = args.hidden, args.intermediate, args.topk
    group = fd.EPGroup(device=dev)
    el, first = E // world, rank * (E // world)
    if rank == 0:
        print("fp8kit %s (%s), torch %s, NCCL %d, %d rank(s) on %s; E %d (%d per rank), H %d, I %d, top-%d, %s, "
              "routing %s, scales %s%s" % (fp8kit.__version__, fp8kit.library_path(), torch.__version__,
                                            group.nccl_version, world, torch.cuda.get_device_name(dev), E, el, H, I,
                                            k, args.dtype, args.routing, args.scale_layout,
                                            ", pow2" if args.pow2 else ""), flush=True)
    w13, w2 = make_weights(E, H, I, args.seed, dev)
    q13, s13, q2, s2 = fd.quantize_experts(w13, w2, dtype=args.dtype, pow2=args.pow2)
    grouped_ok = grouped_mm_works(dev) if args.bench else False
    failed = False
    rows = []
    for T in args.tokens:
        counts = token_counts(T, world, args.uneven)
        t, off = counts[rank], sum(counts[:rank])
        mt = args.max_tokens or T
        x_all, ids_all, w_all = make_tokens(sum(counts), E, H, k, args.routing, args.seed + T, dev)
        x, ids, w = x_all[off:off + t], ids_all[off:off + t].contiguous(), w_all[off:off + t].contiguous()
        moe = fd.MoE(group, E, H, I, k, mt, dtype=args.dtype, pow2=args.pow2, scale_layout=args.scale_layout,
                     transport=args.transport, mode=args.mode)
        moe.load_weights(q13[first:first + el], s13[first:first + el], q2[first:first + el], s2[first:first + el])
        report = {"rank": rank, "t": t, "bad": []}
        if not args.no_check:
            out, got = moe(x, ids, w, return_intermediates=True)
            torch.cuda.synchronize(dev)
            report["bad"] += check_dispatch(got["recv"], x_all, ids_all, E, args)
            ref = fd.moe_reference(x, ids, w, q13, s13, q2, s2, dtype=args.dtype, pow2=args.pow2)
            report["rel"] = rel_err(out, ref) if t else 0.0
            report["out_diff"] = compare_bits(out, ref) if t else (0, 0)
            if torch.isnan(out.float()).any() and not torch.isnan(ref.float()).any():
                report["bad"].append("NaN in the output")
            if report["rel"] > BOUND:
                report["bad"].append("output: rel %.3g > %.3g against moe_reference" % (report["rel"], BOUND))
            M = moe.ep.recv.max_rows
            need = E * M * (3 * H + I)
            if args.transport == "nccl" and args.mode == "low_latency" and (
                    args.intermediates == "on" or (args.intermediates == "auto" and need <= INTERMEDIATES_AUTO_BYTES)):
                ref_all, want = fd.moe_reference(x_all, ids_all, w_all, q13, s13, q2, s2, dtype=args.dtype,
                                                 pow2=args.pow2, max_rows=M, return_intermediates=True)
                diff = {"h": [0, 0], "h_scale": [0, 0], "y": [0, 0]}
                rc = got["recv"].counts.tolist()
                if want:  # empty when no rank has a token
                    for e in range(el):
                        c = rc[e]
                        for key in diff:
                            d, n = compare_bits(got[key][e, :c], want[key][first + e, :c])
                            diff[key][0] += d
                            diff[key][1] += n
                diff["out"] = list(compare_bits(out, ref_all[off:off + t])) if t else [0, 0]
                report["exact"] = diff
                if args.exact and any(v[0] for v in diff.values()):
                    report["bad"].append("not bit-exact against the all-token reference: %s" % diff)
        if args.graph:
            report["bad"] += graph_check(moe, x, ids, w, E, H, k, args.routing, args.seed + 7 * T, dev)
        if args.bench:
            ysh = (moe.ep.recv.max_rows, H) if moe.ep.recv.layout == "contiguous" else (el, moe.ep.recv.max_rows, H)
            y0 = torch.zeros(ysh, dtype=torch.bfloat16, device=dev)
            report["us_layer"] = timed(lambda: moe(x, ids, w), args, dev)
            report["us_ep"] = timed(lambda: (moe.ep.dispatch(x, ids, w), moe.ep.combine(y0)), args, dev)
            del y0
            if grouped_ok:
                wl13, wl2 = w13[first:first + el], w2[first:first + el]
                report["us_bf16"] = timed(lambda: bf16_layer(x, ids, w, wl13, wl2, el, world), args, dev)
                ob = bf16_layer(x, ids, w, wl13, wl2, el, world)
                of = moe(x, ids, w)
                report["rel_bf16"] = rel_err(of, ob) if t else 0.0
        moe.close()
        del x_all, ids_all, w_all
        torch.cuda.empty_cache()
        reports = [None] * world
        dist.all_gather_object(reports, report)
        failed |= any(r["bad"] for r in reports)
        if rank == 0:
            print("T %s per rank (max_tokens %d):" % (",".join(str(c) for c in counts), mt), flush=True)
            for r in reports:
                line = "  rank %d, t %d:" % (r["rank"], r["t"])
                if "rel" in r:
                    line += " out rel %.3g vs moe_reference (%d of %d bits differ)" % ((r["rel"],) + tuple(
                        r["out_diff"]))
                if "exact" in r:
                    line += "; vs all-token reference: " + ", ".join(
                        "%s %s" % (kk, "exact" if v[0] == 0 else "%d of %d differ" % tuple(v))
                        for kk, v in r["exact"].items())
                line += "; " + ("; ".join(r["bad"]) if r["bad"] else "OK" if "rel" in r else "")
                print(line, flush=True)
            if args.bench:
                r0 = reports[0]
                line = "  layer %.1f us, dispatch+combine %.1f us" % (r0["us_layer"], r0["us_ep"])
                if "us_bf16" in r0:
                    line += ", bf16 path %.1f us: %.2fx (fp8 vs bf16 output rel %.3g on rank 0)" % (
                        r0["us_bf16"], r0["us_bf16"] / r0["us_layer"], r0["rel_bf16"])
                else:
                    line += ", bf16 path skipped (torch._grouped_mm unusable)"
                print(line, flush=True)
                # one row per T: ours (the whole fp8 layer) beside the peer (the bf16 path) and the ratio
                # peer / ours (> 1: ours is faster); dispatch + combine alone rides along as ep_us
                common = {"peer_transport": "torch all_to_all_single",
                          "world": world, "tokens_per_rank": counts, "max_tokens": mt, "experts": E, "hidden": H,
                          "intermediate": I, "top_k": k, "dtype": args.dtype, "pow2": args.pow2,
                          "scale_layout": args.scale_layout, "routing": args.routing, "iters": args.iters,
                          "torch": torch.__version__, "nccl": group.nccl_version, "fp8kit": fp8kit.__version__,
                          "device": torch.cuda.get_device_name(dev),
                          "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
                row = {"bench": "moe_ep", "op": "moe_layer", "ours_transport": args.transport, "ours_mode": args.mode,
                       "ours_us": round(r0["us_layer"], 2),
                       "ep_us": round(r0["us_ep"], 2)}
                if "us_bf16" in r0:
                    row.update({"peer_name": "bf16_a2a_torch_grouped_mm", "peer_us": round(r0["us_bf16"], 2),
                                "ratio": round(r0["us_bf16"] / r0["us_layer"], 4)})
                else:
                    row.update({"peer_name": None, "peer_us": None, "ratio": None})
                row.update(common)
                rows.append(row)
    if rank == 0 and args.jsonl and rows:
        with open(args.jsonl, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    if rank == 0:
        print("FAILED" if failed else "OK", flush=True)
    group.close()
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
