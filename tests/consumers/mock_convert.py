#!/usr/bin/env python3
"""Numpy mock of `fp8kit quantize` (the converter CLI).

    mock_convert.py quantize IN OUT --scheme fp8-tensor|fp8-row|fp8-block|mxfp8
        [--format fp8|compressed-tensors] [--exclude GLOB]... [--quantize-all]
        [--pow2] [--rounding floor|rceil] [--force]

It writes exactly what tests/consumers/FORMATS.md says the C converter must
write (tensor names, dtypes, shapes, config.json quantization_config), so the
consumer suite can be validated before the C side exists (run.sh --converter
mock). It is a test tool, not a second implementation to ship: slow, simple,
and meant to be read next to FORMATS.md.

Exit codes: 0 ok, 2 usage / refused combination, 1 other errors.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fp8ref  # noqa: E402

SCHEMES = ("fp8-tensor", "fp8-row", "fp8-block", "mxfp8")
FORMATS = ("fp8", "compressed-tensors")
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"

# ---------------------------------------------------------------------------
# default exclusions (FORMATS.md "What stays in high precision")
# ---------------------------------------------------------------------------
_EMBED_RE = re.compile(r"(^|\.)(embed_tokens|embed_positions|wte|wpe|word_embeddings|position_embeddings|embeddings|tok_embeddings)(\.|$)")
_HEAD_RE = re.compile(r"(^|\.)(lm_head|output_layer|embed_out)$")
# router / gate modules of MoE blocks (a plain `gate`, not `gate_proj`)
_ROUTER_RE = re.compile(r"(^|\.)(gate|router|shared_expert_gate|gate_network|switch_mlp\.gate)$")


_EXPERT_RE = re.compile(r"\.experts\.\d+\.")


def default_excluded(module: str) -> str | None:
    """Why `module` (tensor name minus '.weight') stays high precision, or None."""
    if _EMBED_RE.search(module):
        return "embedding"
    if _HEAD_RE.search(module):
        return "lm_head"
    if _ROUTER_RE.search(module):
        return "router gate"
    return None


# ---------------------------------------------------------------------------
# quantization_config per scheme x format
# ---------------------------------------------------------------------------
def _ct_args(strategy: str, **extra) -> dict:
    d = {
        "num_bits": 8,
        "type": "float",
        "symmetric": True,
        "group_size": None,
        "strategy": strategy,
        "dynamic": False,
        "actorder": None,
        "block_structure": None,
        "observer": None,
        "observer_kwargs": {},
        "scale_dtype": None,
        "zp_dtype": None,
    }
    d.update(extra)
    return d


def quantization_config(scheme: str, fmt: str, ignore: list[str], pow2: bool) -> dict:
    ignore = sorted(ignore)
    if fmt == "fp8":
        qc = {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "dynamic",
        }
        if scheme == "fp8-tensor":
            qc["weight_block_size"] = None
        elif scheme == "fp8-block":
            qc["weight_block_size"] = [128, 128]
            if pow2:
                qc["scale_fmt"] = "ue8m0"
        elif scheme == "mxfp8":
            qc["weight_block_size"] = [1, 32]
            qc["scale_fmt"] = "ue8m0"
        else:
            raise ValueError(scheme)
        qc["modules_to_not_convert"] = ignore
        qc["ignored_layers"] = ignore  # vLLM's key
        return qc
    # compressed-tensors
    if scheme == "fp8-tensor":
        w = _ct_args("tensor")
        a = _ct_args("token", dynamic=True)
        ct_format = "float-quantized"
    elif scheme == "fp8-row":
        w = _ct_args("channel")
        a = _ct_args("token", dynamic=True)
        ct_format = "float-quantized"
    elif scheme == "fp8-block":
        w = _ct_args("block", block_structure=[128, 128])
        a = _ct_args("group", dynamic=True, group_size=128)
        ct_format = "float-quantized"
    else:  # mxfp8: the MXFP8 preset
        w = _ct_args("group", group_size=32, scale_dtype="torch.uint8", zp_dtype="torch.uint8")
        a = _ct_args("group", dynamic=True, group_size=32, scale_dtype="torch.uint8", zp_dtype="torch.uint8")
        ct_format = "mxfp8-quantized"
    return {
        "quant_method": "compressed-tensors",
        "format": ct_format,
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": w,
                "input_activations": a,
                "output_activations": None,
                "format": ct_format,
            }
        },
        "ignore": ignore,
        "kv_cache_scheme": None,
        "global_compression_ratio": None,
        "sparsity_config": {},
        "transform_config": {},
    }


# ---------------------------------------------------------------------------
# tensors
# ---------------------------------------------------------------------------
def _to_f32(t) -> np.ndarray:
    import torch

    return t.to(torch.float32).numpy()


def quantize_weight(name: str, w, scheme: str, fmt: str, pow2: bool, rounding: str) -> dict:
    """-> {tensor name: torch tensor} for X.weight (+ its scale)."""
    import torch

    x = _to_f32(w)
    base = name[: -len(".weight")]
    if scheme == "fp8-tensor":
        q, s = fp8ref.quantize_tensor(x, pow2)
        if fmt == "fp8":
            # shape [] (FP8Linear's 0-D weight_scale_inv); MoE experts [1, 1]: transformers
            # stacks the per-expert scales into FP8Experts' gate_up_proj_scale_inv [E, 2, 1]
            shp = (1, 1) if _EXPERT_RE.search(name) else ()
            sc = {base + ".weight_scale_inv": torch.tensor(float(s), dtype=torch.float32).reshape(shp)}
        else:
            sc = {base + ".weight_scale": torch.tensor([float(s)], dtype=torch.float32)}  # shape [1]
    elif scheme == "fp8-row":
        q, s = fp8ref.quantize_row(x, pow2)
        sc = {base + ".weight_scale": torch.from_numpy(s.astype(np.float32))}  # [N,1]
    elif scheme == "fp8-block":
        q, s = fp8ref.quantize_block(x, pow2)
        key = ".weight_scale_inv" if fmt == "fp8" else ".weight_scale"
        sc = {base + key: torch.from_numpy(s.astype(np.float32))}
    else:
        q, e = fp8ref.quantize_mx(x, rounding)
        e = torch.from_numpy(e.astype(np.uint8))
        if fmt == "fp8":
            sc = {base + ".weight_scale_inv": e.view(torch.float8_e8m0fnu)}
        else:
            sc = {base + ".weight_scale": e}  # U8 holding e8m0 bytes
    out = {name: torch.from_numpy(q).view(torch.float8_e4m3fn)}
    out.update(sc)
    return out


def _is_candidate(name: str, t) -> bool:
    import torch

    return name.endswith(".weight") and t.ndim == 2 and t.dtype in (torch.float32, torch.float16, torch.bfloat16)


def _nbytes(t) -> int:
    return t.numel() * t.element_size()


def save_file(tensors: dict, path: str, metadata: dict | None = None) -> None:
    """safetensors.torch.save_file with a deterministic header: the Rust
    writer keeps metadata in a hash map, whose order changes from process to
    process; this rewrites the header with sorted keys so two runs give the
    same bytes."""
    from safetensors.torch import save

    b = save(tensors, metadata=metadata)
    n = int.from_bytes(b[:8], "little")
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    ordered = {}
    if meta is not None:
        ordered["__metadata__"] = dict(sorted(meta.items()))
    ordered.update(sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]))
    h = json.dumps(ordered, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        f.write(b[8 + n:])


class Refused(Exception):
    pass


def convert(src: str, dst: str, scheme: str, fmt: str = "fp8", exclude=(), quantize_all=False,
            pow2=False, rounding="floor", force=False, log=sys.stderr) -> dict:
    from safetensors import safe_open

    if scheme not in SCHEMES:
        raise Refused(f"unknown scheme {scheme!r}")
    if fmt not in FORMATS:
        raise Refused(f"unknown format {fmt!r}")
    if fmt == "fp8" and scheme == "fp8-row":
        raise Refused("--scheme fp8-row has no --format fp8 form (the fp8/FineGrainedFP8 family has per-tensor, "
                      "block and ue8m0 block scales only): use --format compressed-tensors")
    if pow2 and scheme == "mxfp8":
        raise Refused("--pow2 is for the fp32-scale schemes")
    if rounding != "floor" and scheme != "mxfp8":
        raise Refused("--rounding is for --scheme mxfp8")
    srcp, dstp = Path(src), Path(dst)
    if dstp.exists() and not force:
        raise Refused(f"{dst} exists (use --force)")

    # inputs
    if srcp.is_dir():
        if (srcp / INDEX).exists():
            index = json.loads((srcp / INDEX).read_text())
            shards = sorted(set(index["weight_map"].values()))
        elif (srcp / SINGLE).exists():
            index, shards = None, [SINGLE]
        else:
            raise Refused(f"{src}: neither {INDEX} nor {SINGLE}")
        out_dir = dstp
    else:
        index, shards, out_dir = None, None, None

    cfg = {}
    if srcp.is_dir() and (srcp / "config.json").exists():
        cfg = json.loads((srcp / "config.json").read_text())
    tied = bool(cfg.get("tie_word_embeddings", False)) or bool(cfg.get("text_config", {}).get("tie_word_embeddings", False))

    # an --exclude glob that matches no tensor is an error (checked before writing)
    if exclude:
        names = []
        files = [srcp / sh for sh in shards] if out_dir is not None else [srcp]
        for fp in files:
            with safe_open(str(fp), framework="pt") as f:
                names.extend(f.keys())
        for g in exclude:
            if not any(fnmatch.fnmatchcase(n, g) for n in names):
                raise Refused(f"--exclude {g!r} matches no tensor")

    if dstp.exists():  # --force
        shutil.rmtree(dstp) if dstp.is_dir() else dstp.unlink()

    ignore: set[str] = set()
    kept: dict[str, str] = {}
    quantized: list[str] = []
    matched_globs: set[str] = set()

    def plan(name, t):
        mod = name[: -len(".weight")]
        for g in exclude:
            if fnmatch.fnmatchcase(name, g):
                matched_globs.add(g)
                return "excluded by " + g
        why = default_excluded(mod)
        # --quantize-all lifts the lm_head exclusion only: embeddings and
        # router gates are not nn.Linear in the loaders (FORMATS.md section 4)
        if why and not (quantize_all and why == "lm_head"):
            return why
        n, k = t.shape
        if scheme == "mxfp8" and k % 32:
            return f"K={k} not a multiple of 32"
        if scheme == "fp8-block" and fmt == "fp8" and (n % 128 or k % 128):
            return f"N={n} or K={k} not a multiple of 128"
        if scheme == "fp8-block" and fmt == "compressed-tensors" and k % 128:
            return f"K={k} not a multiple of 128"
        return None

    def convert_file(fin: Path, fout: Path) -> dict:
        tensors, sizes = {}, {}
        with safe_open(str(fin), framework="pt") as f:
            meta = dict(f.metadata() or {})
            for name in f.keys():
                t = f.get_tensor(name)
                if _is_candidate(name, t):
                    why = plan(name, t)
                    if why is None:
                        tensors.update(quantize_weight(name, t, scheme, fmt, pow2, rounding))
                        quantized.append(name)
                        continue
                    kept[name] = why
                    ignore.add(name[: -len(".weight")])
                tensors[name] = t
        meta["quantization"] = json.dumps({"tool": "fp8kit-mock", "scheme": scheme, "format": fmt})
        fout.parent.mkdir(parents=True, exist_ok=True)
        tmp = fout.with_name(fout.name + ".tmp")
        save_file(tensors, str(tmp), metadata=meta)
        os.replace(tmp, fout)
        return {k: _nbytes(v) for k, v in tensors.items()}

    if out_dir is None:
        convert_file(srcp, dstp)
    else:
        out_dir.mkdir(parents=True)  # mode 0777 & ~umask
        weight_map, total = {}, 0
        for sh in shards:
            sizes = convert_file(srcp / sh, out_dir / sh)
            for k, n in sizes.items():
                weight_map[k] = sh
                total += n
        if tied:
            ignore.add("lm_head")
        if index is not None:
            new_index = dict(index)
            new_index["metadata"] = dict(index.get("metadata", {}))
            new_index["metadata"]["total_size"] = total
            new_index["weight_map"] = dict(sorted(weight_map.items()))
            (out_dir / INDEX).write_text(json.dumps(new_index, indent=2) + "\n")
        # every other file: byte for byte, config.json gets quantization_config
        weight_files = set(shards) | {INDEX}
        for p in sorted(srcp.rglob("*")):
            rel = p.relative_to(srcp)
            if p.is_dir() or str(rel) in weight_files:
                continue
            q = out_dir / rel
            q.parent.mkdir(parents=True, exist_ok=True)
            if str(rel) == "config.json":
                c = json.loads(p.read_text())
                c.pop("quantization_config", None)
                c["quantization_config"] = quantization_config(scheme, fmt, sorted(ignore), pow2)
                q.write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
            else:
                shutil.copyfile(p, q)
    for name, why in sorted(kept.items()):
        if why.startswith(("K=", "N=")):
            print(f"mock_convert: warning: {name} kept in high precision ({why})", file=log)
    return {"quantized": quantized, "kept": kept, "ignore": sorted(ignore)}


def dequantize(src: str, dst: str, dtype: str = "bf16", force: bool = False) -> None:
    """Mock of fp8kit.dequantize_checkpoint: every F8_E4M3 X with X_scale or
    X_scale_inv becomes decode(q) * scale (f32 product, then RNE to dtype);
    scales dropped; config.json loses quantization_config."""
    import torch
    from safetensors import safe_open

    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    srcp, dstp = Path(src), Path(dst)
    if dstp.exists():
        if not force:
            raise Refused(f"{dst} exists (use --force)")
        shutil.rmtree(dstp) if dstp.is_dir() else dstp.unlink()
    if (srcp / INDEX).exists():
        index = json.loads((srcp / INDEX).read_text())
        shards = sorted(set(index["weight_map"].values()))
    else:
        index, shards = None, [SINGLE]
    dstp.mkdir(parents=True)
    weight_map, total = {}, 0
    for sh in shards:
        with safe_open(str(srcp / sh), framework="pt") as f:
            meta = dict(f.metadata() or {})
            raw = {k: f.get_tensor(k) for k in f.keys()}
        out = {}
        for k, t in raw.items():
            if k.endswith(("_scale", "_scale_inv")) and (k.rsplit("_scale", 1)[0] in raw):
                continue
            if t.dtype == torch.float8_e4m3fn and (k + "_scale" in raw or k + "_scale_inv" in raw):
                s = raw.get(k + "_scale", raw.get(k + "_scale_inv"))
                q = fp8ref.decode_e4m3(t.view(torch.uint8).numpy())
                if s.dtype in (torch.uint8, torch.float8_e8m0fnu):
                    sv = fp8ref.decode_e8m0(s.view(torch.uint8).numpy())
                else:
                    sv = s.to(torch.float32).numpy()
                n, kk = q.shape
                if sv.size == 1:
                    full = sv.reshape(())
                elif sv.shape == (n, 1):
                    full = sv
                elif sv.shape == (n, kk // 32):
                    full = np.repeat(sv, 32, axis=1)
                else:
                    full = fp8ref.block_expand(sv, n, kk)
                out[k] = torch.from_numpy((q * full).astype(np.float32)).to(tdt)
            else:
                out[k] = t
        meta.pop("quantization", None)
        save_file(out, str(dstp / sh), metadata=meta)
        for k, t in out.items():
            weight_map[k] = sh
            total += _nbytes(t)
    if index is not None:
        index = dict(index)
        index["metadata"] = dict(index.get("metadata", {}), total_size=total)
        index["weight_map"] = dict(sorted(weight_map.items()))
        (dstp / INDEX).write_text(json.dumps(index, indent=2) + "\n")
    for p in sorted(srcp.rglob("*")):
        rel = p.relative_to(srcp)
        if p.is_dir() or str(rel) in set(shards) | {INDEX}:
            continue
        q = dstp / rel
        q.parent.mkdir(parents=True, exist_ok=True)
        if str(rel) == "config.json":
            c = json.loads(p.read_text())
            c.pop("quantization_config", None)
            q.write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
        else:
            shutil.copyfile(p, q)


# Python-API stand-ins with the signatures planned for fp8kit (tests use these
# in --converter mock mode)
def quantize_checkpoint(src, dst, scheme, format="fp8", exclude=(), quantize_all=False, pow2=False,
                        rounding="floor", force=False):
    return convert(str(src), str(dst), scheme, format, list(exclude), quantize_all, pow2, rounding, force)


def dequantize_checkpoint(src, dst, dtype="bf16", force=False):
    return dequantize(str(src), str(dst), dtype, force)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="mock_convert.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("quantize")
    q.add_argument("src")
    q.add_argument("dst")
    q.add_argument("--scheme", required=True)
    q.add_argument("--format", default="fp8")
    q.add_argument("--exclude", action="append", default=[])
    q.add_argument("--quantize-all", action="store_true")
    q.add_argument("--pow2", action="store_true")
    q.add_argument("--rounding", default="floor", choices=("floor", "rceil"))
    q.add_argument("--force", action="store_true")
    d = sub.add_parser("dequantize")
    d.add_argument("src")
    d.add_argument("dst")
    d.add_argument("--dtype", default="bf16", choices=("bf16", "f16", "f32"))
    d.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "dequantize":
            dequantize(a.src, a.dst, a.dtype, a.force)
        else:
            convert(a.src, a.dst, a.scheme, a.format, a.exclude, a.quantize_all, a.pow2, a.rounding, a.force)
    except Refused as e:
        print(f"mock_convert: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
