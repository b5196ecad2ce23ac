"""Each loader's OWN quantization of a model, written as a checkpoint directory.

These are the yardsticks of the logits-error check: a converted checkpoint
must be no worse than 1.5x what the loader's own quantizer gives.

- compressed-tensors (`ct_reference`): compressed-tensors' own code does it
  all: `apply_quantization_config` with the preset scheme, scales from its
  `calculate_qparams` on the weight's min/max per group (what llm-compressor's
  min-max observer feeds it for a data-free weight scheme), then
  `ModelCompressor.compress_model` + `save_pretrained` + `update_config`.
  This is llm-compressor's save path minus llm-compressor itself (not needed
  on a CPU, and not installable next to transformers 5.24, see FORMATS.md).
- transformers FineGrainedFP8 (`fp8_reference`): transformers' quantize-on-load
  (FineGrainedFP8Config on an unquantized checkpoint) refuses to run without a
  GPU, so its quantization op `Fp8Quantize` is called directly on each weight,
  with a stub quantizer holding the FineGrainedFP8Config, and the result is
  saved with the config transformers would write. It only quantizes weights
  whose shape divides by the block (it returns the others unchanged).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch

HP_DEFAULT = ("lm_head",)


def _modules(model, ignore):
    for name, mod in model.named_modules():
        if type(mod) is torch.nn.Linear and name not in ignore:
            yield name, mod


# ---------------------------------------------------------------------------
# compressed-tensors
# ---------------------------------------------------------------------------
CT_PRESET = {"fp8-tensor": "FP8_DYNAMIC", "fp8-row": "FP8_DYNAMIC", "fp8-block": "FP8_BLOCK", "mxfp8": "MXFP8"}


def ct_scheme(scheme: str):
    from compressed_tensors.quantization import QuantizationScheme
    from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES

    preset = {k: (v.model_copy() if v is not None else None) for k, v in PRESET_SCHEMES[CT_PRESET[scheme]].items()}
    if scheme == "fp8-tensor":  # FP8_DYNAMIC with a per-tensor weight scale
        preset["weights"] = preset["weights"].model_copy(update={"strategy": "tensor"})
    return QuantizationScheme(targets=["Linear"], **preset)


def _minmax(w: torch.Tensor, args):
    s = args.strategy.value if hasattr(args.strategy, "value") else args.strategy
    if s == "tensor":
        return w.amin().reshape(1), w.amax().reshape(1)
    if s == "channel":
        return w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)
    if s == "block":
        bn, bk = args.block_structure
        n, k = w.shape
        gn, gk = math.ceil(n / bn), math.ceil(k / bk)
        p = torch.zeros(gn * bn, gk * bk, dtype=w.dtype)
        p[:n, :k] = w
        p = p.reshape(gn, bn, gk, bk)
        return p.amin(dim=(1, 3)), p.amax(dim=(1, 3))
    if s == "group":
        g = args.group_size
        n, k = w.shape
        p = w.reshape(n, k // g, g)
        return p.amin(dim=2), p.amax(dim=2)
    raise ValueError(s)


def ct_reference(src: str, dst: str, scheme: str, ignore: list[str]) -> None:
    """compressed-tensors quantizes + compresses + saves `src` into `dst`."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
    from compressed_tensors.quantization.utils import calculate_qparams
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16)
    sch = ct_scheme(scheme)
    qc = QuantizationConfig(config_groups={"group_0": sch}, ignore=list(ignore))
    apply_quantization_config(model, qc)
    for name, mod in model.named_modules():
        if getattr(mod, "quantization_scheme", None) is None or not hasattr(mod, "weight_scale"):
            continue
        args = mod.quantization_scheme.weights
        mn, mx = _minmax(mod.weight.data.float(), args)
        scale, _zp = calculate_qparams(mn, mx, args)
        with torch.no_grad():
            mod.weight_scale.data = scale.to(mod.weight_scale.dtype).reshape(mod.weight_scale.shape)
    comp = ModelCompressor.from_pretrained_model(model)
    comp.compress_model(model)
    if Path(dst).exists():
        shutil.rmtree(dst)
    model.save_pretrained(dst)
    comp.update_config(dst)


# ---------------------------------------------------------------------------
# transformers FineGrainedFP8
# ---------------------------------------------------------------------------
FP8_BLOCK = {"fp8-tensor": None, "fp8-block": [128, 128], "mxfp8": [1, 32]}


def fp8_reference(src: str, dst: str, scheme: str, ignore: list[str], pow2: bool = False) -> None:
    from transformers import FineGrainedFP8Config
    from transformers.integrations.finegrained_fp8 import Fp8Quantize

    block = FP8_BLOCK[scheme]
    scale_fmt = "ue8m0" if (scheme == "mxfp8" or pow2) else "float"
    cfg = FineGrainedFP8Config(weight_block_size=block, modules_to_not_convert=sorted(ignore), scale_fmt=scale_fmt)

    class _Stub:  # what Fp8Quantize reads from its hf_quantizer
        quantization_config = cfg

    op = Fp8Quantize(_Stub())
    from safetensors import safe_open

    out = {}
    for f in sorted(Path(src).glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as fh:
            for k in fh.keys():
                v = fh.get_tensor(k)
                mod = k[: -len(".weight")] if k.endswith(".weight") else None
                if mod is not None and v.ndim == 2 and mod not in ignore:
                    for rk, rv in op._quantize_one(k, v).items():
                        if rk.endswith("_scale_inv") and block is None:
                            rv = rv.reshape(())  # per-tensor: FP8Linear's weight_scale_inv is 0-D
                        out[rk] = rv.contiguous()
                else:
                    out[k] = v
    from safetensors.torch import save_file

    d = Path(dst)
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("*.safetensors", "*.index.json"))
    save_file(out, str(d / "model.safetensors"), metadata={"format": "pt"})
    c = json.loads((d / "config.json").read_text())
    qd = cfg.to_dict()
    c["quantization_config"] = qd
    (d / "config.json").write_text(json.dumps(c, indent=2))
