"""test_checkpoint.py - fp8kit.quantize_checkpoint / dequantize_checkpoint
(the C converter of docs/spec.md section 5 through fp8kit_checkpoint_quantize /
fp8kit_checkpoint_dequantize) on the CPU backend, with numpy and the reference
safetensors package only: a tiny model directory (config.json, tokenizer.json,
a file in a subdirectory, model.safetensors with embed_tokens, q_proj,
down_proj whose K = 80 is no multiple of 32, norm and lm_head) converted with
every scheme x format (row x fp8 must raise): tensor names, dtypes and shapes
of each format, codes and scales bit-equal to the independent numpy
implementation (spec_ref.py), config.json's quantization_config, the other
files byte-equal, the kept list and warnings; dequantize_checkpoint back with
weights bit-equal to decode(q) * scale computed in numpy; bad arguments raise
the package's exceptions without creating dst; the ctypes structs match the C
compiler. Skipped when the library was built without safetensors support."""
import functools
import json
import os
import pathlib
import shutil

import numpy as np
import pytest

import fp8kit
from fp8kit import _lib
import spec_ref
from abi_check import c_values, check_layout

safetensors_numpy = pytest.importorskip("safetensors.numpy")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
F32 = np.float32
V, H, N, KD = 64, 256, 256, 80  # vocab, hidden (K of q_proj), q_proj N, down_proj K
EMBED, Q, DOWN, NORM, HEAD = ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                              "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight")
CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": H, "model_type": "llama",
          "tie_word_embeddings": False, "torch_dtype": "float32", "vocab_size": V}
TOKENIZER = '{"version": "1.0", "added_tokens": [{"content": "<s>"}], "note": "caf\u00e9"}'.encode("utf-8")
SCHEMES = ["tensor", "row", "block", "mx"]
FORMATS = ["fp8", "compressed-tensors", None]
REF_SCHEME = {"tensor": "tensor", "row": "row", "block": "block128x128", "mx": "mx"}


def skip_without_safetensors(d):
    """Skips the calling test when libfp8kit was built without src/io (no
    jansson): its entry points then raise UnsupportedError saying so. d: an
    empty scratch directory."""
    try:
        fp8kit.dequantize_checkpoint(d / "missing", d / "out")
    except fp8kit.UnsupportedError as e:
        if "without safetensors support" in str(e):
            pytest.skip("libfp8kit was built without safetensors support")
        raise
    except fp8kit.IOFailedError:
        pass


@pytest.fixture(scope="module")
def safetensors_support(tmp_path_factory):
    """Skips the tests that convert when libfp8kit was built without src/io."""
    skip_without_safetensors(tmp_path_factory.mktemp("probe"))


# ------------------------------------------------------------------ the model
@functools.lru_cache(maxsize=None)
def weights():
    rng = np.random.default_rng(2020)
    return {
        EMBED: rng.standard_normal((V, H)).astype(F32),
        Q: (rng.standard_t(2, size=(N, H)) * np.linspace(0.5, 4, N)[:, None]).astype(F32),
        DOWN: (rng.standard_normal((N, KD)) * 0.1).astype(np.float16),
        NORM: (1 + 0.01 * np.arange(H)).astype(F32),
        HEAD: (rng.standard_normal((V, H)) * 0.05).astype(F32),
    }


def make_model(d):
    d = pathlib.Path(d)
    d.mkdir(parents=True)
    safetensors_numpy.save_file(weights(), str(d / "model.safetensors"), metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps(CONFIG, indent=2))
    (d / "tokenizer.json").write_bytes(TOKENIZER)
    (d / "extra").mkdir()
    (d / "extra" / "notes.txt").write_bytes(b"not a weight\n")
    return d


@pytest.fixture(scope="module")
def model(tmp_path_factory, safetensors_support):
    return make_model(tmp_path_factory.mktemp("ckpt") / "in")


def read_st(path):
    """{name: (dtype, shape, raw bytes)} and the metadata of a safetensors file
    (read by hand: numpy has no fp8 dtypes)."""
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {k: (v["dtype"], tuple(v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}, meta


def as_array(entry):
    dtype, shape, raw = entry
    np_dtype = {"F32": F32, "F16": np.float16, "BF16": np.uint16, "F8_E4M3": np.uint8, "F8_E8M0": np.uint8,
                "U8": np.uint8}[dtype]
    return np.frombuffer(raw, dtype=np_dtype).reshape(shape)


@functools.lru_cache(maxsize=None)
def reference(name, scheme):
    """spec_ref's (codes, scales) of weight `name` (float32 view of it)."""
    x = weights()[name].astype(F32)
    if scheme == "tensor":
        return spec_ref.quantize(x, "tensor")
    # mx: rceil, the checkpoint converter's default rounding (the loaders' own rule)
    return spec_ref.quantize_2d(x, REF_SCHEME[scheme], rounding="rceil" if scheme == "mx" else "floor")


def scale_entry(scheme, fmt):
    """(suffix, dtype, shape) of the scale tensor of q_proj (N x H)."""
    suffix = "_scale_inv" if fmt == "fp8" else "_scale"
    return {
        ("tensor", "fp8"): (suffix, "F32", ()), ("tensor", "compressed-tensors"): (suffix, "F32", (1,)),
        ("row", "compressed-tensors"): (suffix, "F32", (N, 1)),
        ("block", "fp8"): (suffix, "F32", (N // 128, H // 128)),
        ("block", "compressed-tensors"): (suffix, "F32", (N // 128, H // 128)),
        ("mx", "fp8"): (suffix, "F8_E8M0", (N, H // 32)), ("mx", "compressed-tensors"): (suffix, "U8", (N, H // 32)),
    }[(scheme, fmt)]


def numpy_dequant(q, s, scheme, shape):
    """decode(q) * S in float32, computed in numpy from the stored codes and scales."""
    mult = spec_ref.dequant_scales_plain(np.asarray(s).reshape(()) if scheme == "tensor" else s,
                                         REF_SCHEME[scheme], shape, "e4m3")
    return spec_ref.decode(q, "e4m3").astype(F32) * mult


# ------------------------------------------------------------- conversions
COMBOS = [(s, f) for s in SCHEMES for f in FORMATS]


@pytest.mark.parametrize("scheme, fmt", COMBOS, ids=["%s-%s" % (s, f or "default") for s, f in COMBOS])
def test_quantize_every_scheme_and_format(model, tmp_path, scheme, fmt):
    out = tmp_path / "out"
    used = fmt or ("fp8" if scheme == "block" else "compressed-tensors")
    if (scheme, used) == ("row", "fp8"):
        with pytest.raises(fp8kit.UnsupportedError, match="row"):
            fp8kit.quantize_checkpoint(model, out, scheme=scheme, format=fmt)
        assert not out.exists()
        return
    rep = fp8kit.quantize_checkpoint(model, out, scheme=scheme, format=fmt)
    shape_kept = scheme in ("block", "mx")  # down_proj: K = 80
    assert isinstance(rep, fp8kit.CheckpointReport)
    assert (rep.scheme, rep.format, rep.dtype) == ({"tensor": "fp8-tensor", "row": "fp8-row", "block": "fp8-block",
                                                    "mx": "mxfp8"}[scheme], used, None)
    assert rep.tensors == 5 and rep.quantized == (1 if shape_kept else 2)
    assert rep.copied == 5 - rep.quantized and rep.dequantized == 0
    assert rep.other_files == 3 and rep.convention == ""  # config.json, tokenizer.json, extra/notes.txt
    assert rep.in_bytes == sum(w.nbytes for w in weights().values()) and rep.out_bytes > 0 and rep.seconds >= 0
    kept = dict(rep.kept)
    assert len(rep.kept) == len(kept) == (3 if shape_kept else 2)
    assert "embedding" in kept[EMBED] and "output projection" in kept[HEAD]
    if shape_kept:
        assert "shape" in kept[DOWN]
        # plus, for mx in compressed-tensors, the float32 model that its bfloat16-only mxfp8 path cannot run
        ct_mx = (scheme, used) == ("mx", "compressed-tensors")
        assert len(rep.warnings) == 1 + ct_mx and DOWN in rep.warnings[0]
        assert not ct_mx or "bfloat16" in rep.warnings[1]
    else:
        assert DOWN not in kept and rep.warnings == []

    tensors, meta = read_st(out / "model.safetensors")
    suffix, sdtype, sshape = scale_entry(scheme, used)
    quantized = [Q] if shape_kept else [Q, DOWN]
    assert set(tensors) == {EMBED, Q, DOWN, NORM, HEAD} | {w + suffix for w in quantized}
    for w in quantized:
        dtype, shape, _ = tensors[w]
        assert (dtype, shape) == ("F8_E4M3", weights()[w].shape)
        q_ref, s_ref = reference(w, scheme)
        assert tensors[w][2] == q_ref.astype(np.uint8).tobytes(), "%s: codes differ from spec_ref" % w
        assert tensors[w + suffix][2] == np.ascontiguousarray(s_ref).tobytes(), "%s: scales differ" % w
    assert tensors[Q + suffix][:2] == (sdtype, sshape)
    for w in (EMBED, NORM, HEAD) + ((DOWN,) if shape_kept else ()):
        assert tensors[w][2] == weights()[w].tobytes(), "%s is not copied byte for byte" % w
    assert meta["format"] == "pt" and json.loads(meta["quantization"])["format"] == used

    # the other files byte-equal, config.json with the format's quantization_config
    assert (out / "tokenizer.json").read_bytes() == TOKENIZER
    assert (out / "extra" / "notes.txt").read_bytes() == b"not a weight\n"
    cfg = json.loads((out / "config.json").read_text())
    qc = cfg.pop("quantization_config")
    assert cfg == CONFIG
    ignore = ["lm_head", "model.embed_tokens"] + (["model.layers.0.mlp.down_proj"] if shape_kept else [])
    if used == "fp8":
        assert qc["quant_method"] == "fp8"
        assert qc["modules_to_not_convert"] == qc["ignored_layers"] == ignore
    else:
        assert qc["quant_method"] == "compressed-tensors" and qc["ignore"] == ignore

    # back to float32: bit-equal to decode(q) * scale computed in numpy from the stored tensors
    back = tmp_path / "back"
    rep2 = fp8kit.dequantize_checkpoint(out, back, "f32")
    assert (rep2.dequantized, rep2.quantized, rep2.kept, rep2.dtype) == (len(quantized), 0, [], "f32")
    assert rep2.convention == used and rep2.scheme is None and rep2.format is None
    assert rep2.tensors == len(tensors) and rep2.copied == 5 - len(quantized)
    ys = safetensors_numpy.load_file(str(back / "model.safetensors"))  # the reference reader takes it
    assert set(ys) == {EMBED, Q, DOWN, NORM, HEAD}
    for w in quantized:
        want = numpy_dequant(as_array(tensors[w]), as_array(tensors[w + suffix]), scheme, weights()[w].shape)
        assert ys[w].dtype == F32 and ys[w].view(np.uint32).tobytes() == want.view(np.uint32).tobytes(), w
        err = np.abs(ys[w] - weights()[w].astype(F32)).max() / np.abs(weights()[w].astype(F32)).max()
        assert err < 0.07, (w, err)
    for w in (EMBED, NORM, HEAD):
        assert ys[w].tobytes() == weights()[w].tobytes()
    assert "quantization_config" not in json.loads((back / "config.json").read_text())
    assert (back / "tokenizer.json").read_bytes() == TOKENIZER


def test_dequantize_default_bf16_and_options(model, tmp_path):
    """bf16 by default (RNE of the f32 result); quantize_all, include, exclude,
    pow2, rceil; str / bytes / PathLike paths; a single file in and out."""
    out = tmp_path / "q"
    rep = fp8kit.quantize_checkpoint(str(model), os.fsencode(str(out)), scheme="fp8-row", format="ct",
                                     quantize_all=True, include=EMBED, exclude=["*down_proj"], pow2=True)
    assert rep.quantized == 3 and rep.format == "compressed-tensors"
    kept = dict(rep.kept)
    assert set(kept) == {DOWN} and "exclude" in kept[DOWN]
    tensors, _ = read_st(out / "model.safetensors")
    for w in (EMBED, Q, HEAD):
        q_ref, s_ref = spec_ref.quantize_2d(weights()[w].astype(F32), "row", pow2=True)
        assert tensors[w][2] == q_ref.tobytes() and tensors[w + "_scale"][2] == s_ref.tobytes()
    back = tmp_path / "bf16"
    rep2 = fp8kit.dequantize_checkpoint(out, back)
    assert rep2.dtype == "bf16" and rep2.dequantized == 3 and rep2.convention == "compressed-tensors"
    ys, _ = read_st(back / "model.safetensors")
    for w in (EMBED, Q, HEAD):
        want = numpy_dequant(as_array(tensors[w]), as_array(tensors[w + "_scale"]), "row", weights()[w].shape)
        assert ys[w][:2] == ("BF16", weights()[w].shape)
        assert ys[w][2] == spec_ref.f32_to_bf16_bits(want).tobytes(), w
    # mx with rceil, a single .safetensors file in and out
    single = tmp_path / "mx.safetensors"
    rep3 = fp8kit.quantize_checkpoint(model / "model.safetensors", single, "mx", rounding="rceil",
                                      exclude=(), include=[])
    assert rep3.other_files == 0 and rep3.quantized == 1
    tensors, _ = read_st(single)
    q_ref, s_ref = spec_ref.quantize_2d(weights()[Q].astype(F32), "mx", rounding="rceil")
    assert tensors[Q][2] == q_ref.tobytes() and tensors[Q + "_scale"][2] == s_ref.tobytes()
    # dequantize's exclude leaves the fp8 tensor (and its scale) as they are
    back = tmp_path / "mx-back.safetensors"
    rep4 = fp8kit.dequantize_checkpoint(single, back, np.float16, exclude=Q)
    assert rep4.dequantized == 0 and rep4.dtype == "f16"
    assert read_st(back)[0][Q][0] == "F8_E4M3"


def test_force_replaces_and_existing_dst_is_refused(model, tmp_path):
    out = tmp_path / "out"
    fp8kit.quantize_checkpoint(model, out, "tensor")
    before = (out / "model.safetensors").read_bytes()
    with pytest.raises(fp8kit.IOFailedError, match="exists"):
        fp8kit.quantize_checkpoint(model, out, "row")
    assert (out / "model.safetensors").read_bytes() == before
    rep = fp8kit.quantize_checkpoint(model, out, "row", force=True)
    assert rep.scheme == "fp8-row"
    tensors, _ = read_st(out / "model.safetensors")
    assert tensors[Q + "_scale"][1] == (N, 1)
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary left behind


BAD = [
    ("unknown scheme", fp8kit.InvalidArgumentError, dict(scheme="fp8-col")),
    ("activation scheme", fp8kit.UnsupportedError, dict(scheme="block1x128")),
    ("unknown format", fp8kit.InvalidArgumentError, dict(scheme="block", format="gguf")),
    ("row as fp8", fp8kit.UnsupportedError, dict(scheme="row", format="fp8")),
    ("rceil with row", fp8kit.InvalidArgumentError, dict(scheme="row", rounding="rceil")),
    ("unknown rounding", fp8kit.InvalidArgumentError, dict(scheme="mx", rounding="up")),
    ("pow2 with mx", fp8kit.InvalidArgumentError, dict(scheme="mx", pow2=True)),
    ("exclude matching nothing", fp8kit.InvalidArgumentError, dict(exclude=["no.such.module*"])),
    ("include matching nothing", fp8kit.InvalidArgumentError, dict(include="nothing")),
    ("exclude not str", fp8kit.InvalidArgumentError, dict(exclude=[1])),
    ("exclude not iterable", fp8kit.InvalidArgumentError, dict(exclude=3)),
    ("bad device", fp8kit.InvalidArgumentError, dict(device="gpu")),
]


@pytest.mark.parametrize("what, exc, kwargs", BAD, ids=[b[0] for b in BAD])
def test_bad_quantize_arguments_create_nothing(model, tmp_path, what, exc, kwargs):
    out = tmp_path / "out"
    with pytest.raises(exc) as ei:
        fp8kit.quantize_checkpoint(model, out, **kwargs)
    assert ei.value.message and not out.exists(), what
    assert os.listdir(tmp_path) == []


def test_bad_inputs_and_dequantize_arguments(model, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(fp8kit.IOFailedError, match="missing"):
        fp8kit.quantize_checkpoint(tmp_path / "missing", out)
    with pytest.raises(fp8kit.InvalidArgumentError, match="src"):
        fp8kit.quantize_checkpoint(123, out)
    with pytest.raises(fp8kit.InvalidArgumentError):
        fp8kit.quantize_checkpoint(model, model / "inside")  # OUT inside IN
    with pytest.raises(fp8kit.UnsupportedError, match="out_dtype"):
        fp8kit.dequantize_checkpoint(model, out, "e4m3")
    with pytest.raises(fp8kit.InvalidArgumentError):
        fp8kit.dequantize_checkpoint(model, out, "float128")
    assert not out.exists() and not (model / "inside").exists()
    q = tmp_path / "q"
    fp8kit.quantize_checkpoint(model, q, "block")
    with pytest.raises(fp8kit.InvalidArgumentError, match="already quantized|fp8"):
        fp8kit.quantize_checkpoint(q, out, "row")
    assert not out.exists()
    # a corrupt input: the header promises more bytes than the file has
    bad = tmp_path / "bad"
    shutil.copytree(model, bad)
    raw = (bad / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(raw[:-16])
    with pytest.raises(fp8kit.CorruptFileError):
        fp8kit.quantize_checkpoint(bad, out)
    assert not out.exists()


# ---------------------------------------------------------------------- ABI
def test_ckpt_structs_match_the_header(tmp_path):
    """CkptOpts / CkptReport / CkptFormat against the C compiler (as test_abi
    does for the other structs), and fp8kit_ckpt_opts_default's values."""
    structs = {"fp8kit_ckpt_opts": _lib.CkptOpts, "fp8kit_ckpt_report": _lib.CkptReport}
    enums = ['printf("enum %s %%d\\n", (int)FP8KIT_CKPT_FORMAT_%s);' % (m.name, m.name) for m in _lib.CkptFormat]
    out = c_values(tmp_path, "fp8kit.h", structs, enums)
    for kind, name, value in out:
        if not check_layout(structs, kind, name, value):
            assert int(_lib.CkptFormat[name]) == value, name
    assert len(out) == 2 + len(_lib.CkptOpts._fields_) + len(_lib.CkptReport._fields_) + 3
    d = _lib.load().fp8kit_ckpt_opts_default(int(fp8kit.Scheme.MX))
    assert (d.scheme, d.format, d.rounding, d.pow2, d.out_dtype, d.force, d.nexclude) == (4, 0, 1, 0, 2, 0, 0)
    assert not d.on_kept and not d.on_warning and not d.exclude
