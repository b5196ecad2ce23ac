"""`fp8kit dequantize` and `fp8kit inspect` on checkpoints that the loaders'
own quantizers wrote (issue 20 item 4): compressed-tensors' compressor (its
FP8_DYNAMIC / FP8_BLOCK / MXFP8 presets, BF16 scales, U8 e8m0 bytes) and
transformers' FineGrainedFP8 quantizer (weight_scale_inv, 0-D / block / e8m0).
The dequantized directory must load in plain transformers (no quantization
config left, no missing or unexpected keys) with every weight equal, in f32,
to decode(q) * scale computed here from the foreign file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import COMBOS, expected_dequant, is_mock, load, loading_problems, read_checkpoint, run_converter


@pytest.mark.parametrize("scheme,fmt", COMBOS)
def test_dequantize_foreign(scheme, fmt, models, convert, reference, workdir):
    if is_mock():
        pytest.skip("the mock converter's dequantize is not under test")
    ref = reference("llama", scheme, fmt, convert("llama", scheme, fmt))
    ck = read_checkpoint(ref)
    weights = [n for n, (dt, _, _) in ck.items() if dt == "F8_E4M3"]
    assert weights, "the loader's own quantizer wrote no fp8 weight"

    ins = run_converter(["inspect", str(ref), "--json"])
    conv = json.loads(ins.stdout)["quantization"]
    want = "fp8 (weight_scale_inv)" if fmt == "fp8" else "compressed-tensors (weight_scale)"
    assert want in conv and "without a recognised scale" not in conv, conv

    out = workdir / "foreign-deq" / f"{scheme}-{fmt}"
    out.parent.mkdir(exist_ok=True)
    p = run_converter(["dequantize", str(ref), str(out), "--dtype", "f32", "--force", "--json"])
    assert json.loads(p.stdout.strip().splitlines()[-1])["convention"] == fmt
    dq = read_checkpoint(out)
    for n in weights:
        dt, _, t = dq[n]
        assert dt == "F32", (n, dt)
        np.testing.assert_array_equal(t.numpy(), expected_dequant(ck, n), err_msg=n)
    assert not [n for n in dq if n.endswith(("_scale", "_scale_inv"))], "scale tensors left behind"
    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in cfg

    import torch

    model, info, _ = load(out, "plain", torch.float32)
    assert not loading_problems(info), loading_problems(info)
    sd = model.state_dict()
    for n in weights:
        if n in sd:  # fused MoE experts are merged by the loader: compared above
            np.testing.assert_array_equal(sd[n].numpy(), dq[n][2].numpy(), err_msg=n)
