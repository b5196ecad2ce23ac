#!/usr/bin/env python3
"""bench/ep_peer.py - dispatch + combine of fp8kit's expert-parallel layer
(fp8kit.distributed.ExpertParallel: fp8kit_quantize, then NCCL point-to-point)
beside NCCL EP's low-latency mode (the `nccl.ep` package of the
nccl-extensions wheel), in one process group, one process per GPU:

    torchrun --nproc-per-node 2 bench/ep_peer.py --tokens 128,1024 --jsonl out.jsonl

Each T (tokens per rank) times, on the same tokens and routing, dispatch +
combine of:
  ours nccl     fp8kit's layer, transport 'nccl' (1x128 e4m3, scales in the
                grouped GEMM's mn_major layout, NCCL point-to-point), in
                the low-latency (masked) and high-throughput (contiguous)
                modes
  ours nccl_ep  the same layer with transport 'nccl_ep' (fp8kit quantizes,
                NCCL EP forwards codes and scales: NCCL_EP_DISP_QUANT_FWD),
                low-latency mode (masked) and high-throughput mode
                (contiguous)
  ncclep_ds     NCCL EP alone, expert-major layout,
                NCCL_EP_DISP_QUANT_DS_FP8E3M4 (NCCL EP quantizes: e4m3 + f32
                per 128), then its bf16 combine: NCCL EP's own fp8 recipe,
                the peer
  deepep        DeepEP V2 when it imports (bench/peer/ep_run.sh builds it):
                fp8 dispatch of tokens quantized by fp8kit.quantize, bf16
                combine; with a new routing handle per call and with the
                cached one
The NCCL EP timings include the handle update with the step's top-k ids.
Checked: every variant delivers the same counts and the same rows per expert
bit for bit as the NCCL transport (compared as sets: NCCL EP keeps no
order), and their combines of the same expert outputs agree within 1e-2
(relative, Frobenius; NCCL EP sums in its own order, and the high-throughput
mode weights each row in bf16 first); ncclep_ds's counts equal ours.

NCCL EP needs NCCL 2.30 or newer in the process (preload it: LD_PRELOAD) and
compiles its kernels at run time with nvcc (NCCL_HOME must point at that
NCCL's headers). Rows: ours, the peer (ncclep_ds) and peer / ours, with the
fwd variant alongside.
"""
import os

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_root, "python"))
sys.path.insert(0, os.path.join(_root, "examples"))
import fp8kit  # noqa: E402
import fp8kit.distributed as fd  # noqa: E402
from moe_ep import timed  # noqa: E402  (the layer example's timing: the slowest rank's mean us per call)


# ours: transport / mode; the first is the reference the others are compared with
VARIANTS = ("nccl/low_latency", "nccl/high_throughput", "nccl_ep/low_latency", "nccl_ep/high_throughput")


def deepep_times(deep_ep, x, ids64, w, E, H, k, T, a, dev):
    """DeepEP V2 (ElasticBuffer, fp8 dispatch of tokens the caller quantized: fp8kit.quantize 1x128, then its
    bf16 combine): us per dispatch + combine with a new routing handle each call (its CPU synchronization
    included) and with the cached handle (its decode path)."""
    buf = deep_ep.ElasticBuffer(dist.group.WORLD, num_max_tokens_per_rank=T, hidden=H, num_topk=k,
                                use_fp8_dispatch=True)

    def fresh():
        q, s = fp8kit.quantize(x, scheme="block1x128", dtype="e4m3")
        r = buf.dispatch((q, s), topk_idx=ids64, topk_weights=w, num_experts=E, num_max_tokens_per_rank=T)
        return r

    r = fresh()
    recv = r[0][0] if isinstance(r[0], tuple) else r[0]
    y = torch.zeros(tuple(recv.shape), dtype=torch.bfloat16, device=dev)
    handle = r[3]

    def cached():
        q, s = fp8kit.quantize(x, scheme="block1x128", dtype="e4m3")
        buf.combine(y, handle=buf.dispatch((q, s), handle=handle)[3])
    out = {"deepep_fresh_us": timed(lambda: buf.combine(y, handle=fresh()[3]), a, dev),
           "deepep_cached_us": timed(cached, a, dev)}
    del buf
    return out


def args_():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", default="128,1024")
    p.add_argument("--experts", type=int, default=64)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--jsonl", default="")
    a = p.parse_args()
    a.tokens = [int(t) for t in a.tokens.split(",") if t.strip()]
    return a


def routing(T, E, k, seed, dev):
    g = torch.Generator(device=dev).manual_seed(seed)
    x = torch.randn((T, 1), generator=g, device=dev)
    scores = torch.randn((T, E), generator=g, device=dev) + torch.linspace(1.0, -1.0, E, device=dev)
    top = scores.topk(k, dim=1)
    return top.indices.to(torch.int32).contiguous(), torch.softmax(top.values, -1).float().contiguous(), x


class NcclEp:
    """NCCL EP alone, low-latency mode, expert-major output, its own fp8 recipe (DS_FP8E3M4: NCCL EP
    quantizes), for one T. (Forwarding our codes and scales is the layer's transport 'nccl_ep'.)"""

    def __init__(self, ep, comm, E, H, k, T, world, dev):
        self.ep, self.E, self.H, self.k, self.T = ep, E, H, k, T
        self.el = E // world
        M = world * T
        cfg = ep.GroupConfig(algorithm=ep.Algorithm.LOW_LATENCY, num_experts=E, max_dispatch_tokens_per_rank=T,
                             max_token_bytes=max(2 * H, H + 4 * (H // 128)))
        self.group = ep.Group.create(comm, cfg)
        self.out_x = torch.empty((self.el, M, H), dtype=torch.float8_e4m3fn, device=dev)
        self.out_s = torch.empty((self.el, M, H // 128), dtype=torch.float32, device=dev)
        self.counts = torch.zeros((self.el,), dtype=torch.int32, device=dev)
        self.y = torch.zeros((self.el, M, H), dtype=torch.bfloat16, device=dev)
        self.out = torch.empty((T, H), dtype=torch.bfloat16, device=dev)
        self.handle = None

    def dispatch(self, x, ids64, w):
        ep, st = self.ep, torch.cuda.current_stream().cuda_stream
        tk = ep.Tensor(ids64)
        if self.handle is None:
            self.handle = self.group.create_handle(ep.Layout.EXPERT_MAJOR, tk, stream=st)
        else:
            self.handle.update(tk, stream=st)
        self._keep = (tk, w)
        ins = ep.DispatchInputs(tokens=ep.Tensor(x))
        cfg = ep.DispatchConfig(quantization_recipe=ep.DispatchQuantizationRecipe.DS_FP8E3M4)
        outs = ep.DispatchOutputs(tokens=ep.Tensor(self.out_x), scales=ep.Tensor(self.out_s))
        info = ep.LayoutInfo(expert_counters=ep.Tensor(self.counts))
        self.handle.dispatch(ins, outs, layout_info=info, config=cfg, stream=st)

    def combine(self, w):
        ep, st = self.ep, torch.cuda.current_stream().cuda_stream
        self.handle.combine(ep.CombineInputs(tokens=ep.Tensor(self.y)),
                            ep.CombineOutputs(tokens=ep.Tensor(self.out), topk_weights=ep.Tensor(w)), stream=st)

    def close(self):
        if self.handle is not None:
            self.handle.destroy()
        self.group.destroy()


def expert_rows(recv, e):
    """(codes, scales) of local expert e's received rows, whatever the layout (scales as (rows, H/128))."""
    c = int(recv.counts[e])
    if recv.layout == "contiguous":
        r0 = int(recv.offsets[e - 1]) if e else 0
        sc = recv.scale[r0:r0 + c] if recv.scale_layout == "plain" else recv.scale[:, r0:r0 + c].t()
        return recv.x[r0:r0 + c], sc
    sc = recv.scale[e, :c] if recv.scale_layout == "plain" else recv.scale[e, :, :c].t()
    return recv.x[e, :c], sc


def row_keys(recv, e):
    x, sc = expert_rows(recv, e)
    if x.shape[0] == 0:  # (an empty view keeps strides that .view(uint8) refuses)
        return []
    rows = torch.cat([x.contiguous().view(torch.uint8), sc.contiguous().view(torch.uint8)], 1)
    return sorted(bytes(r) for r in rows.cpu().numpy())


def same_rows(a, b, el):
    """Per local expert: equal counts and the same rows (codes and scales) as multisets."""
    bad = []
    for e in range(el):
        if int(a.counts[e]) != int(b.counts[e]):
            bad.append("expert %d: count %d vs %d" % (e, int(a.counts[e]), int(b.counts[e])))
        elif row_keys(a, e) != row_keys(b, e):
            bad.append("expert %d: the received rows differ" % e)
    return bad


def main():
    a = args_()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    E, H, k = a.experts, a.hidden, a.topk
    el = E // world
    try:
        import nccl.ep as ep
        from nccl.ep.interop.torch import get_nccl_comm_from_group
        comm = get_nccl_comm_from_group()
        have_ep = True
        ep_version = str(ep.get_lib_version())
    except Exception as exc:  # noqa: BLE001 - report and time ours alone
        if rank == 0:
            print("NCCL EP unavailable: %s: %s" % (type(exc).__name__, exc), flush=True)
        have_ep, ep_version, comm = False, None, None
    try:
        import deep_ep  # DeepEP V2, when built (bench/peer/ep_run.sh, step deepep)
        have_deepep = True
    except Exception:  # noqa: BLE001 - the peer is optional
        deep_ep, have_deepep = None, False
    group = fd.EPGroup(device=dev)
    if rank == 0:
        print("fp8kit %s, torch %s, NCCL %d (fp8kit's comm), NCCL EP %s, %d ranks on %s; E %d, H %d, top-%d" % (
            fp8kit.__version__, torch.__version__, group.nccl_version, ep_version, world,
            torch.cuda.get_device_name(dev), E, H, k), flush=True)
    rows, failed = [], False
    for T in a.tokens:
        ids, w, _ = routing(T, E, k, a.seed + 1000 * rank + T, dev)
        g = torch.Generator(device=dev).manual_seed(a.seed + rank + T)
        x = torch.randn((T, H), generator=g, device=dev).to(torch.bfloat16)
        ids64 = ids.long().contiguous()
        res = {"T": T}
        layers, outs = {}, {}
        for tr in VARIANTS:
            transport, mode = tr.split("/")
            try:
                # (high throughput on NCCL EP: max_tokens a multiple of 4)
                mt = -(-T // 4) * 4 if mode == "high_throughput" and transport == "nccl_ep" else T
                layers[tr] = fd.ExpertParallel(group, E, H, k, mt, scale_layout="mn_major", transport=transport,
                                               mode=mode)
            except Exception as exc:  # noqa: BLE001 - reported; nccl_ep needs NCCL EP
                res["ours_%s_error" % tr] = "%s: %s" % (type(exc).__name__, exc)
                failed |= tr == VARIANTS[0]
        for tr, ep_ in layers.items():
            recv = ep_.dispatch(x, ids, w)
            # y of each received row from the row itself, so that every variant's output is comparable
            y = recv.x.to(torch.bfloat16).contiguous()
            out = ep_.combine(y).clone()
            torch.cuda.synchronize(dev)
            outs[tr] = (recv, out)
            y0 = torch.zeros_like(y)
            res["ours_%s_us" % tr] = timed(lambda: (ep_.dispatch(x, ids, w), ep_.combine(y0)), a, dev)
            ep_.dispatch(x, ids, w)  # recv holds this routing again for the row comparison
            torch.cuda.synchronize(dev)
            del y, y0
        base = VARIANTS[0]
        for tr in VARIANTS[1:]:
            if base in outs and tr in outs:
                (r1, o1), (r2, o2) = outs[base], outs[tr]
                bad = same_rows(r1, r2, el)
                err = float((o1.float() - o2.float()).norm() / max(float(o1.float().norm()), 1e-30)) if T else 0.0
                res["%s_vs_%s" % (tr, base)] = {"rows": bad or "same", "combine_rel": err}
                if bad or err > 1e-2:
                    failed = True
        counts0 = outs[base][0].counts.tolist() if base in outs else None
        for ep_ in layers.values():
            ep_.close()
        outs.clear()
        if have_ep:
            n = None
            try:
                n = NcclEp(ep, comm, E, H, k, T, world, dev)
                n.dispatch(x, ids64, w)
                torch.cuda.synchronize(dev)
                if counts0 is not None:
                    res["ncclep_ds_counts_equal"] = counts0 == n.counts.tolist()
                res["ncclep_ds_us"] = timed(lambda: (n.dispatch(x, ids64, w), n.combine(w)), a, dev)
            except Exception as exc:  # noqa: BLE001
                res["ncclep_ds_error"] = "%s: %s" % (type(exc).__name__, exc)
                failed = True
            if n is not None:
                n.close()
        if have_deepep:
            try:  # (not yet run on a GPU machine: errors are reported, not fatal)
                res.update(deepep_times(deep_ep, x, ids64, w, E, H, k, T, a, dev))
            except Exception as exc:  # noqa: BLE001
                res["deepep_error"] = "%s: %s" % (type(exc).__name__, exc)
        torch.cuda.empty_cache()
        allres = [None] * world
        dist.all_gather_object(allres, res)
        if rank == 0:
            print("T %d per rank: %s" % (T, json.dumps(allres)), flush=True)
            peer = res.get("ncclep_ds_us")
            for tr in VARIANTS:
                us = res.get("ours_%s_us" % tr)
                if us is None:
                    continue
                row = {"bench": "ep_dispatch_combine", "world": world, "tokens_per_rank": T, "experts": E,
                       "hidden": H, "top_k": k, "ours_us": round(us, 2), "ours_transport": tr.split("/")[0],
                       "ours_mode": tr.split("/")[1],
                       "peer_name": "ncclep_ll_ds_fp8e3m4" if peer else None,
                       "peer_us": round(peer, 2) if peer else None,
                       "ratio": round(peer / us, 4) if peer else None,
                       "ncclep": ep_version, "nccl": group.nccl_version, "torch": torch.__version__,
                       "device": torch.cuda.get_device_name(dev), "iters": a.iters,
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
                print(json.dumps(row), flush=True)
                rows.append(row)
            for key, name in (("deepep_fresh_us", "deepep_v2_fp8_fresh_handle"),
                              ("deepep_cached_us", "deepep_v2_fp8_cached_handle")):
                if key in res and "ours_nccl_ep/low_latency_us" in res:
                    us = res["ours_nccl_ep/low_latency_us"]
                    row = {"bench": "ep_dispatch_combine", "world": world, "tokens_per_rank": T, "experts": E,
                           "hidden": H, "top_k": k, "ours_us": round(us, 2), "ours_transport": "nccl_ep",
                           "ours_mode": "low_latency", "peer_name": name, "peer_us": round(res[key], 2),
                           "ratio": round(res[key] / us, 4), "torch": torch.__version__,
                           "device": torch.cuda.get_device_name(dev), "iters": a.iters,
                           "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    if rank == 0 and a.jsonl:
        with open(a.jsonl, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    group.close()
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
