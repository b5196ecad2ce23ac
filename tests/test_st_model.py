#!/usr/bin/env python3
"""test_st_model.py - end-to-end test of `fp8kit quantize | dequantize | inspect`
on model directories (issue 20, docs/spec.md section 5), run by CTest:
    python3 tests/test_st_model.py path/to/fp8kit

Model directories are written here with numpy and the reference `safetensors`
package, converted by the CLI, and read back the same way:
  - a directory holding model.safetensors and a sharded one (3 shards, given
    as the directory or as the index's path), each with config.json,
    generation_config.json, tokenizer files, a subdirectory (nested, and an
    empty one), a hidden file, a symlinked file, .git and .cache (not copied),
    a stale temporary name of the tool (not copied): every other file copied
    byte for byte as a regular file, nothing else in OUT;
  - config.json: the input's keys and values in the input's order, plus the
    format's quantization_config (checked field by field against
    docs/spec.md 5 / tests/consumers/FORMATS.md, for every scheme x format),
    the ignore list (modules_to_not_convert / ignored_layers / ignore) being
    exactly the weights kept in high precision, recomputed here from the
    rules (embeddings, router gates, lm_head, --exclude, shape limits; a tied
    lm_head; --quantize-all; --include); the text as Python's
    json.dump(indent=2) writes it (reals in shortest form);
  - the weights' codes and scales bit for bit (numpy reference of
    test_st_cli.py); the index's weight_map (scales in their weight's shard)
    and metadata.total_size; --json's format / kept / other_files;
  - a download-cache snapshot (every file a link to a blob);
  - modes under umask 022 and 077 (directories, files, a single-file OUT);
  - --force over an existing directory (old files gone, nothing left beside
    it), refusal without --force; OUT equal to IN, inside IN (also through a
    symlink) or containing IN refused with the input unchanged byte for byte;
  - --exclude / --include matching nothing, fp8 input and an already
    quantized config.json refused; nothing left next to OUT after a failed
    run (dangling link, link loop, FIFO, bad config.json, SIGINT / SIGTERM); a
    link x -> . found before anything is written (ulimit -f 0 shows it);
  - MoE models (Mixtral and Qwen2-MoE names): router gates kept, experts
    quantized;
  - dequantize of checkpoints written here in both conventions:
    compressed-tensors (weight_scale: BF16 [N,1], F32 [1], F16 [], F32 / F16
    block grids, U8 mx; a 3-shard one with a scale in another shard than its
    weight) and fp8 (weight_scale_inv: F32 [], block, F8_E8M0 mx, BF16, row),
    bit for bit, naming the convention; config.json loses quantization_config
    (kept byte for byte when --exclude leaves an fp8 weight, and for a model
    without fp8 tensors, with a warning); an MoE fp8-tensor --format fp8
    output (experts' F32 [1, 1] scales) dequantized back;
  - inspect on model directories: the "quantization" line / JSON field.
Needs numpy and safetensors (scripts/bootstrap.sh installs them); without
them the test is skipped (exit 77)."""
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import safetensors  # noqa: F401
except ImportError as e:  # pragma: no cover
    print("test_st_model: SKIP: needs numpy and safetensors (pip install numpy safetensors): %s" % e)
    sys.exit(77)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_st_cli as R  # noqa: E402  (the numpy reference, the readers and the rules of docs/spec.md 5)
from test_st_cli import (check, run, st_write, st_read, bf16_bits, keep_reason, check_quantized,  # noqa: E402
                         check_dequantized, check_warnings, check_summary, check_json_summary, leftovers,
                         refused_request, scale_bytes, fp8_codes)

FP8KIT = R.FP8KIT
INDEX = "model.safetensors.index.json"
MODEL_META = {"format": "pt"}


# ------------------------------------------------------------- file trees
def tree(root, follow=False):
    """relpath -> ("d", mode) | ("f", bytes, mode) | ("l", target), the whole
    tree (links not followed unless follow)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=follow):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            st = os.stat(p) if follow else os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", st.st_mode & 0o7777)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    out[rel] = ("f", f.read(), st.st_mode & 0o7777)
            else:
                out[rel] = ("?", st.st_mode)
    return out


def listing(d):
    return sorted(os.listdir(d))


def umask_run(mask, *args):
    return subprocess.run([FP8KIT] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, preexec_fn=lambda: os.umask(mask))


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


def read_model(d):
    """All tensors of a model directory (single file or sharded), name ->
    (dtype, shape, bytes), plus name -> file it is in."""
    if os.path.exists(os.path.join(d, INDEX)):
        with open(os.path.join(d, INDEX)) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors, where = {}, {}
    for fn in files:
        t, _ = st_read(os.path.join(d, fn))
        tensors.update(t)
        where.update({n: fn for n in t})
    return tensors, where


# ---------------------------------------------------------- model fixtures
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 352,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "initializer_range": 0.02,
    "attention_dropout": 0.0,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "rope_scaling": None,
    "bos_token_id": 1,
    "eos_token_id": [2, 3],
    "use_cache": True,
    "vocab_size": 256,
    "transformers_version": "5.24.0",
    "reals": [0.1, 1e-07, 1e+16, 1.5e+300, 123456789.125, -0.0, 2.5e-05, 0.0001, 1e-300, 3.0, 100000.0, 1e15,
              0.30000000000000004, 5e-324, 1.7976931348623157e+308, 1e22, 1.23e-18, 1.5e-323, 9.999999999999999e22],
    "big_int": 9007199254740993,
    "nested": {"list": [1, [2, {"x": []}], {}], "empty": {}, "s": "tab\tquote\"back\\slash/ctl\u0001"},
}


def llama_tensors(rng, tied=False, layers=2):
    """A tiny Llama: H = 128; layer 0 has I = 352 (N % 128 != 0 for gate/up,
    K % 128 != 0 for down), layer 1 I = 344 (K % 32 != 0 for down); k/v 64 x 128."""
    H, V = 128, 256
    t = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H]}
    for i in range(layers):
        inter = 352 if i == 0 else 344
        p = "model.layers.%d." % i
        t.update({p + "self_attn.q_proj.weight": [H, H], p + "self_attn.k_proj.weight": [64, H],
                  p + "self_attn.v_proj.weight": [64, H], p + "self_attn.o_proj.weight": [H, H],
                  p + "mlp.gate_proj.weight": [inter, H], p + "mlp.up_proj.weight": [inter, H],
                  p + "mlp.down_proj.weight": [H, inter],
                  p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H]})
    if not tied:
        t["lm_head.weight"] = [V, H]
    return {n: ("BF16", s, bf16_bits(rng.standard_normal(s) * 0.05).tobytes()) for n, s in t.items()}


def add_other_files(d, rng, blobs=None):
    """The non-weight files of a model directory. Returns the relative paths
    that must be copied (files and directories)."""
    def w(rel, data):
        p = os.path.join(d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    w("generation_config.json", b'{\n  "bos_token_id": 1,\n  "do_sample": true,\n  "temperature": 0.6\n}\n')
    w("tokenizer.json", ('{"version":"1.0","added_tokens":[{"content":"<s>"}],"note":"h\u00e9llo \u2713"}\r\n'
                         ).encode("utf-8"))
    w("tokenizer_config.json", b'{"model_max_length": 1000000000000000019884624838656}')
    w("special_tokens_map.json", b"{}")
    w("chat_template.jinja", b"{% for m in messages %}{{ m.content }}{% endfor %}")
    w("README.md", b"# tiny\n")
    w(".gitattributes", b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    w("sub/extra.bin", rng.integers(0, 256, 3000, dtype=np.uint8).tobytes())
    w("sub/deeper/empty.txt", b"")
    os.makedirs(os.path.join(d, "emptydir"))
    # not copied: version control, download caches, the tool's temporary names
    w(".git/HEAD", b"ref: refs/heads/main\n")
    w(".git/objects/ab/cdef", b"\x00" * 10)
    w(".cache/huggingface/download/model.safetensors.metadata", b"x\n")
    w(".README.md.fp8kit-tmp-file-00000000-1-000000", b"stale")
    # a symlinked file, as in a download-cache snapshot
    blobs = blobs or os.path.join(os.path.dirname(d), "blobs")
    os.makedirs(blobs, exist_ok=True)
    with open(os.path.join(blobs, "tok-model-blob"), "wb") as f:
        f.write(b"\x0a\x0bsentencepiece" + bytes(range(256)))
    os.symlink(os.path.relpath(os.path.join(blobs, "tok-model-blob"), d), os.path.join(d, "tokenizer.model"))
    return ["generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
            "chat_template.jinja", "README.md", ".gitattributes", "sub", "sub/extra.bin", "sub/deeper",
            "sub/deeper/empty.txt", "emptydir", "tokenizer.model"]


def make_model(d, rng, tensors, config=CONFIG, shards=0, others=True):
    """A model directory: model.safetensors (shards = 0) or that many shards
    plus an index; config.json when config is not None."""
    os.makedirs(d)
    copied = add_other_files(d, rng) if others else []
    if config is not None:
        write_json(os.path.join(d, "config.json"), config)
    names = list(tensors)
    if not shards:
        st_write(os.path.join(d, "model.safetensors"), tensors, MODEL_META)
        return copied
    wm = {}
    per = -(-len(names) // shards)
    for s in range(shards):
        fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        st_write(os.path.join(d, fn), part, MODEL_META)
        wm.update({n: fn for n in part})
    write_json(os.path.join(d, INDEX), {"metadata": {"total_size": 12345, "format": "pt"}, "weight_map": wm})
    return copied


# ------------------------------------------------ quantization_config rules
def ignore_list(tensors, scheme, fmt, exclude=(), include=(), quantize_all=False, tied=False):
    mods = {n[:-len(".weight")] for n, (dt, s, _) in tensors.items()
            if keep_reason(n, dt, s, scheme, fmt, exclude, include, quantize_all) not in (None, "copy")}
    if tied and "lm_head.weight" not in tensors:
        mods.add("lm_head")
    return sorted(mods)


ARG_KEYS = {"num_bits", "type", "symmetric", "dynamic", "strategy", "group_size", "block_structure", "actorder",
            "observer", "observer_kwargs", "scale_dtype", "zp_dtype"}


def ct_args_ok(got, want):
    """compressed-tensors QuantizationArgs: every key of want as given; other
    known keys may be present only as null / {} (their defaults)."""
    if not isinstance(got, dict):
        return False
    for k, v in want.items():
        if got.get(k, None) != v:
            return False
    return all(k in ARG_KEYS and (k in want or v in (None, {})) for k, v in got.items())


def check_qcfg(tag, q, scheme, fmt, ignore, pow2=False):
    if fmt == "fp8":
        want = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                "weight_block_size": {"fp8-tensor": None, "fp8-block": [128, 128], "mxfp8": [1, 32]}[scheme]}
        if scheme == "mxfp8" or (scheme == "fp8-block" and pow2):
            want["scale_fmt"] = "ue8m0"
        want["modules_to_not_convert"] = ignore
        want["ignored_layers"] = ignore
        check(q == want, "%s: quantization_config is %s (got %s)" % (tag, want, q))
        return
    mx = scheme == "mxfp8"
    f = "mxfp8-quantized" if mx else "float-quantized"
    top = {"quant_method": "compressed-tensors", "format": f, "quantization_status": "compressed", "ignore": ignore,
           "kv_cache_scheme": None, "global_compression_ratio": None, "sparsity_config": {}, "transform_config": {}}
    q = dict(q or {})
    groups = q.pop("config_groups", None)
    q.pop("version", None)
    check(q == top, "%s: compressed-tensors quantization_config top level %s (got %s)" % (tag, top, q))
    check(isinstance(groups, dict) and len(groups) == 1, "%s: one config group (%s)" % (tag, groups))
    if not isinstance(groups, dict) or len(groups) != 1:
        return
    g = dict(list(groups.values())[0])
    base = {"num_bits": 8, "type": "float", "symmetric": True}
    w = dict(base, dynamic=False, strategy={"fp8-tensor": "tensor", "fp8-row": "channel", "fp8-block": "block",
                                            "mxfp8": "group"}[scheme])
    a = dict(base, dynamic=True, strategy="token")
    if scheme == "fp8-block":
        w["block_structure"] = [128, 128]
        a.update(strategy="group", group_size=128)
    if mx:  # the MXFP8 preset
        w.update(group_size=32, scale_dtype="torch.uint8", zp_dtype="torch.uint8")
        a.update(strategy="group", group_size=32, scale_dtype="torch.uint8", zp_dtype="torch.uint8")
    wg, ag = g.pop("weights", None), g.pop("input_activations", None)
    check(ct_args_ok(wg, w), "%s: config group weights %s (got %s)" % (tag, w, wg))
    check(ct_args_ok(ag, a), "%s: config group input_activations %s (got %s)" % (tag, a, ag))
    check(g == {"targets": ["Linear"], "output_activations": None, "format": f},
          "%s: config group targets Linear, format %s (got %s)" % (tag, f, g))


def check_config(tag, out_dir, src_cfg, qcheck=None):
    """out_dir/config.json: src_cfg's keys in order, less any
    quantization_config, plus the new one (qcheck validates it) when
    quantizing; written as json.dump(indent=2) writes it."""
    p = os.path.join(out_dir, "config.json")
    check(os.path.isfile(p), "%s: config.json written" % tag)
    if not os.path.isfile(p):
        return None
    text = open(p, encoding="utf-8").read()
    try:
        got = json.loads(text)
    except ValueError as e:
        check(False, "%s: config.json is JSON (%s)" % (tag, e))
        return None
    want = {k: v for k, v in src_cfg.items() if k != "quantization_config"}
    q = got.get("quantization_config")
    if qcheck:
        want["quantization_config"] = q
        qcheck(q)
    check(list(got) == list(want) and got == want,
          "%s: config.json = the input's keys and values%s" % (tag, " + quantization_config" if qcheck else
                                                               ", no quantization_config"))
    py = json.dumps(want, indent=2)
    at = next((i for i, (x, y) in enumerate(zip(text, py)) if x != y), min(len(text), len(py)))
    check(text in (py, py + "\n"), "%s: config.json written as json.dump(indent=2) writes it (differs at %d: %r, "
          "want %r)" % (tag, at, text[max(0, at - 20):at + 30], py[max(0, at - 20):at + 30]))
    return got


def check_copied(tag, in_dir, out_dir, copied, weights):
    """Every non-weight file and directory of in_dir (links followed) is in
    out_dir as a regular file / directory with the same bytes; nothing else
    is there besides the weight files and config.json."""
    src = tree(in_dir, follow=True)
    out = tree(out_dir)
    want = set(copied) | set(weights)
    check(set(out) == want, "%s: OUT holds exactly the model's files (extra %s, missing %s)" % (
        tag, sorted(set(out) - want), sorted(want - set(out))))
    for rel in copied:
        if rel not in out:
            continue
        if src[rel][0] == "d":
            check(out[rel][0] == "d", "%s: %s/ copied as a directory" % (tag, rel))
        else:
            check(out[rel][0] == "f" and out[rel][1] == src[rel][1],
                  "%s: %s copied byte for byte as a regular file (%s)" % (tag, rel, out[rel][0]))
    return out


def check_modes(tag, d, mask, single_file=False, src=None):
    """New files 0666 & ~mask, directories 0777 & ~mask; a file copied from
    src (not the weights, index or config.json, which are written anew) also
    without the group / other bits its source lacks (as cp does)."""
    if single_file:
        m = os.stat(d).st_mode & 0o7777
        check(m == 0o666 & ~mask, "%s: file mode %o under umask %03o (got %o)" % (tag, 0o666 & ~mask, mask, m))
        return
    bad = []
    m = os.stat(d).st_mode & 0o7777
    if m != 0o777 & ~mask:
        bad.append((".", oct(m)))
    srct = tree(src, follow=True) if src else {}
    for rel, e in tree(d).items():
        want = (0o777 if e[0] == "d" else 0o666) & ~mask
        copied = e[0] == "f" and srct.get(rel, ("",))[0] == "f" and not rel.endswith(".safetensors") and \
            rel not in (INDEX, "config.json")
        if copied:
            want &= 0o600 | (srct[rel][-1] & 0o066)
        if e[0] not in ("d", "f") or e[-1] != want:
            bad.append((rel, e[0], oct(e[-1]) if e[0] in "df" else e))
    check(not bad, "%s: modes 0%o (dirs) / 0%o (files) under umask %03o (wrong: %s)" % (
        tag, 0o777 & ~mask, 0o666 & ~mask, mask, bad[:5]))


# ---------------------------------------------------------------- tests
SCHEME_FORMATS = [("fp8-tensor", "fp8"), ("fp8-tensor", "compressed-tensors"), ("fp8-row", "compressed-tensors"),
                  ("fp8-block", "fp8"), ("fp8-block", "compressed-tensors"), ("mxfp8", "fp8"),
                  ("mxfp8", "compressed-tensors")]


def test_single_dir(tmp, rng):
    """IN a directory holding model.safetensors: every scheme x format."""
    d = os.path.join(tmp, "llama")
    tensors = llama_tensors(rng)
    copied = make_model(d, rng, tensors)
    before = tree(d)
    nfiles = sum(1 for rel in copied if os.path.isfile(os.path.join(d, rel))) + 1  # + config.json
    for scheme, fmt in SCHEME_FORMATS:
        tag = "dir %s --format %s" % (scheme, fmt)
        out = os.path.join(tmp, "out_%s_%s" % (scheme, fmt))
        r = run("quantize", d, out, "--scheme", scheme, "--format", fmt, "--no-fsync")
        check(r.returncode == 0, "%s: exit 0 (%s)" % (tag, r.stderr.strip()))
        if r.returncode:
            continue
        check(os.path.isdir(out), "%s: OUT is a directory" % tag)
        check_copied(tag, d, out, copied, ["model.safetensors", "config.json"])
        ignore = ignore_list(tensors, scheme, fmt)
        check_config(tag, out, CONFIG, lambda q: check_qcfg(tag, q, scheme, fmt, ignore))
        t, meta = st_read(os.path.join(out, "model.safetensors"))
        reasons = check_quantized(tag, tensors, t, meta, scheme, fmt, src_meta=MODEL_META)
        check("model.embed_tokens" in ignore and "lm_head" in ignore and
              all(reasons[m + ".weight"] is not None for m in ignore), "%s: the ignore list is the kept weights (%s)"
              % (tag, ignore))
        check_warnings(tag, r, reasons)
        check_summary(tag, r, fmt, reasons)
        r = run("quantize", d, out + "_json", "--scheme", scheme, "--format", fmt, "--json", "--no-fsync")
        check_json_summary(tag, r, scheme, fmt, reasons, other_files=None)
        if scheme == "fp8-row":  # once: "other_files" counts the files copied besides the weights (config.json too)
            try:
                got = json.loads(r.stdout).get("other_files")
            except ValueError:
                got = None
            check(got == nfiles, "%s: --json other_files = %d files copied (config.json included; the %d "
                  "directories are no files), got %s" % (tag, nfiles, len(copied) + 1 - nfiles, got))
        if r.returncode == 0:
            check(tree(out + "_json") == tree(out), "%s: --json writes the same directory" % tag)
            shutil.rmtree(out + "_json")
        check(leftovers(tmp) == [], "%s: nothing left beside OUT (%s)" % (tag, leftovers(tmp)))
        # inspect on the directory
        ins = R.check_inspect(tag + " inspect DIR", out, scheme, fmt)
        check(len(ins.get("tensors", [])) == len(t), "%s: inspect --json DIR lists every tensor" % tag)
        # back: dequantize the directory
        back = out + "_bf16"
        r = run("dequantize", out, back, "--json", "--no-fsync")
        check(r.returncode == 0, "%s: dequantize DIR (%s)" % (tag, r.stderr.strip()))
        if r.returncode == 0:
            try:
                conv = json.loads(r.stdout).get("convention")
            except ValueError:
                conv = None
            check(conv == fmt, "%s: dequantize names the convention %s (%r)" % (tag, fmt, conv))
            check_copied(tag + " dequantized", d, back, copied, ["model.safetensors", "config.json"])
            check_config(tag + " dequantized", back, CONFIG)
            bt, bmeta = st_read(os.path.join(back, "model.safetensors"))
            check_dequantized(tag + " dequantized", t, bt, scheme, "bf16")
            check("quantization" not in bmeta, "%s: dequantize drops the quantization metadata" % tag)
            # a dequantized model can be quantized again
            r = run("quantize", back, back + "_again", "--scheme", scheme, "--format", fmt, "--no-fsync")
            check(r.returncode == 0, "%s: a dequantized directory quantizes again (%s)" % (tag, r.stderr.strip()))
            for p in (back, back + "_again"):
                shutil.rmtree(p, ignore_errors=True)
        # quantizing the quantized directory is refused: config.json and fp8 tensors
        r = run("quantize", out, out + "_twice", "--scheme", scheme, "--format", fmt)
        check(refused_request(r) and not os.path.exists(out + "_twice") and leftovers(tmp) == [] and
              ("quantization_config" in r.stderr or "quantized" in r.stderr),
              "%s: quantizing the quantized directory is refused, exit 2 (rc %d: %s)" % (tag, r.returncode,
                                                                                       r.stderr.strip()))
        shutil.rmtree(out)
    check(tree(d) == before, "the input directory is unchanged by all of it")
    return d, tensors, copied


def test_single_dir_options(tmp, rng, d, tensors, copied):
    """--exclude (module names) / --include / --quantize-all, a tied lm_head,
    --pow2 (scale_fmt), and what --json counts."""
    variants = [
        ("--exclude *.o_proj", ["--exclude", "*.o_proj"], dict(exclude=("*.o_proj",))),
        ("--quantize-all", ["--quantize-all"], dict(quantize_all=True)),
        ("--include model.embed_tokens", ["--include", "model.embed_tokens"], dict(include=("model.embed_tokens",))),
    ]
    for what, opts, kw in variants:
        for scheme, fmt in (("fp8-row", "compressed-tensors"), ("mxfp8", "fp8")):
            tag = "dir %s %s --format %s" % (what, scheme, fmt)
            out = os.path.join(tmp, "opt_out")
            r = run("quantize", d, out, "--scheme", scheme, "--format", fmt, "--force", "--no-fsync", *opts)
            check(r.returncode == 0, "%s: exit 0 (%s)" % (tag, r.stderr.strip()))
            if r.returncode:
                continue
            ignore = ignore_list(tensors, scheme, fmt, **kw)
            check_config(tag, out, CONFIG, lambda q: check_qcfg(tag, q, scheme, fmt, ignore))
            t, meta = st_read(os.path.join(out, "model.safetensors"))
            check_quantized(tag, tensors, t, meta, scheme, fmt, src_meta=MODEL_META, **kw)
    # --pow2 with fp8-block --format fp8: scale_fmt ue8m0
    out = os.path.join(tmp, "opt_out")
    r = run("quantize", d, out, "--scheme", "fp8-block", "--pow2", "--force", "--no-fsync")
    check(r.returncode == 0, "dir fp8-block --pow2 (%s)" % r.stderr.strip())
    if r.returncode == 0:
        ignore = ignore_list(tensors, "fp8-block", "fp8")
        check_config("dir fp8-block --pow2", out, CONFIG,
                     lambda q: check_qcfg("dir fp8-block --pow2", q, "fp8-block", "fp8", ignore, pow2=True))
        t, meta = st_read(os.path.join(out, "model.safetensors"))
        check_quantized("dir fp8-block --pow2", tensors, t, meta, "fp8-block", "fp8", pow2=True, src_meta=MODEL_META)
    shutil.rmtree(out, ignore_errors=True)
    # a tied lm_head (no lm_head.weight): listed as ignored all the same
    td = os.path.join(tmp, "tied")
    ttensors = llama_tensors(rng, tied=True, layers=1)
    cfg = dict(CONFIG, tie_word_embeddings=True, num_hidden_layers=1)
    make_model(td, rng, ttensors, cfg, others=False)
    for scheme, fmt in (("fp8-tensor", "compressed-tensors"), ("fp8-block", "fp8")):
        tag = "tied lm_head %s --format %s" % (scheme, fmt)
        out = os.path.join(tmp, "tied_out")
        for extra in ([], ["--quantize-all"]):
            r = run("quantize", td, out, "--scheme", scheme, "--format", fmt, "--force", "--no-fsync", *extra)
            check(r.returncode == 0, "%s %s: exit 0 (%s)" % (tag, extra, r.stderr.strip()))
            if r.returncode:
                continue
            ignore = ignore_list(ttensors, scheme, fmt, tied=True)
            check("lm_head" in ignore, "fixture: tied lm_head in the ignore list")
            check_config(tag + " " + " ".join(extra), out, cfg, lambda q: check_qcfg(tag, q, scheme, fmt, ignore))
    shutil.rmtree(td)
    shutil.rmtree(os.path.join(tmp, "tied_out"), ignore_errors=True)
    # a directory without config.json: no config.json made up
    nd = os.path.join(tmp, "noconfig")
    make_model(nd, rng, llama_tensors(rng, layers=1), config=None, others=False)
    out = os.path.join(tmp, "noconfig_out")
    r = run("quantize", nd, out, "--scheme", "fp8-row", "--json")
    check(r.returncode == 0 and listing(out) == ["model.safetensors"],
          "a model directory without config.json: OUT holds model.safetensors only (%s)" % (
              listing(out) if os.path.isdir(out) else r.stderr.strip()))
    # config.json with non-ASCII text: json.dump (ensure_ascii) escapes it as \u00e9 (surrogate pairs
    # beyond the BMP), and control characters with lower-case hex (\u001b)
    ud = os.path.join(tmp, "unicode")
    ucfg = dict(CONFIG, _name_or_path="/home/jos\u00e9/mod\u00e8le \u2713 \U0001F600", esc="\x1b[0m")
    make_model(ud, rng, llama_tensors(rng, layers=1), ucfg, others=False)
    out = os.path.join(tmp, "unicode_out")
    r = run("quantize", ud, out, "--scheme", "fp8-row")
    check(r.returncode == 0, "non-ASCII config.json (%s)" % r.stderr.strip())
    if r.returncode == 0:
        text = open(os.path.join(out, "config.json"), encoding="utf-8").read()
        got = json.loads(text)
        check(got.get("_name_or_path") == ucfg["_name_or_path"], "non-ASCII config value kept")
        py = json.dumps(got, indent=2)
        check(got.get("esc") == ucfg["esc"], "control character in a config value kept")
        at = text.find("_name_or_path")
        check(text in (py, py + "\n"), "non-ASCII config.json written as json.dump(indent=2) writes it (got %r, want "
              "%r)" % (text[at:text.find("quantization_config")].strip(), py[py.find("_name_or_path"):
                                                                           py.find("quantization_config")].strip()))
    # an integer beyond 64 bits (Python's json reads and writes any integer)
    bd = os.path.join(tmp, "bigint")
    bcfg = dict(CONFIG, model_max_length=1000000000000000019884624838656)
    make_model(bd, rng, llama_tensors(rng, layers=1), bcfg, others=False)
    bout = os.path.join(tmp, "bigint_out")
    r = run("quantize", bd, bout, "--scheme", "fp8-row")
    check(r.returncode == 0, "config.json with an integer beyond 64 bits is a model like any other (rc %d: %s)" % (
        r.returncode, r.stderr.strip()))
    if r.returncode == 0:
        check_config("config.json with a big integer", bout, bcfg,
                     lambda q: check_qcfg("big integer", q, "fp8-row", "compressed-tensors",
                                          ignore_list(llama_tensors(np.random.default_rng(0), layers=1), "fp8-row",
                                                      "compressed-tensors")))
    for p in (nd, ud, bd, bout, os.path.join(tmp, "noconfig_out"), out):
        shutil.rmtree(p, ignore_errors=True)


def test_sharded_dir(tmp, rng):
    """A 3-shard model directory, given as the directory and as the index's path."""
    d = os.path.join(tmp, "sharded")
    tensors = llama_tensors(rng)
    copied = make_model(d, rng, tensors, shards=3)
    shards = sorted(n for n in os.listdir(d) if n.endswith(".safetensors"))
    check(len(shards) == 3, "fixture: 3 shards")
    with open(os.path.join(d, INDEX)) as f:
        src_wm = json.load(f)["weight_map"]
    for scheme, fmt in (("fp8-block", "fp8"), ("mxfp8", "compressed-tensors"), ("fp8-tensor", "fp8")):
        tag = "sharded %s --format %s" % (scheme, fmt)
        out = os.path.join(tmp, "sh_out")
        r = run("quantize", d, out, "--scheme", scheme, "--format", fmt, "--force")
        check(r.returncode == 0, "%s: exit 0 (%s)" % (tag, r.stderr.strip()))
        if r.returncode:
            continue
        check_copied(tag, d, out, copied, shards + [INDEX, "config.json"])
        ignore = ignore_list(tensors, scheme, fmt)
        check_config(tag, out, CONFIG, lambda q: check_qcfg(tag, q, scheme, fmt, ignore))
        with open(os.path.join(out, INDEX)) as f:
            ix = json.load(f)
        t, where = read_model(out)
        wm = ix.get("weight_map", {})
        check(wm == where, "%s: the index's weight_map names every tensor's shard" % tag)
        check(all(where.get(n) == src_wm[n[:n.rindex(".weight") + 7]] for n in where if "_scale" in n),
              "%s: each scale is in its weight's shard" % tag)
        check(all(where.get(n) == f for n, f in src_wm.items()), "%s: every tensor stays in its shard" % tag)
        total = sum(len(v[2]) for v in t.values())
        check(ix.get("metadata", {}).get("total_size") == total and ix["metadata"].get("format") == "pt",
              "%s: metadata.total_size = %d tensor bytes, other metadata kept (%s)" % (tag, total, ix.get("metadata")))
        reasons = {}
        for fn in shards:
            part = {n: v for n, v in tensors.items() if src_wm[n] == fn}
            st, meta = st_read(os.path.join(out, fn))
            reasons.update(check_quantized("%s %s" % (tag, fn), part, st, meta, scheme, fmt, src_meta=MODEL_META))
        check_warnings(tag, r, reasons)
        # the index's path as IN: the same directory
        out2 = os.path.join(tmp, "sh_out_ix")
        r = run("quantize", os.path.join(d, INDEX), out2, "--scheme", scheme, "--format", fmt, "--force")
        check(r.returncode == 0 and tree(out2) == tree(out), "%s: IN given as the index's path writes the same "
              "directory (%s)" % (tag, r.stderr.strip()))
        # dequantize the sharded directory
        back = os.path.join(tmp, "sh_back")
        r = run("dequantize", out, back, "--dtype", "f32", "--force")
        check(r.returncode == 0, "%s: dequantize (%s)" % (tag, r.stderr.strip()))
        if r.returncode == 0:
            bt, bwhere = read_model(back)
            check_dequantized(tag + " dequantized", t, bt, scheme, "f32")
            with open(os.path.join(back, INDEX)) as f:
                bix = json.load(f)
            check(bix["weight_map"] == bwhere and bix["metadata"]["total_size"] == sum(len(v[2]) for v in bt.values()),
                  "%s: dequantized index: weight_map without scales, total_size" % tag)
            check_config(tag + " dequantized", back, CONFIG)
            check_copied(tag + " dequantized", d, back, copied, shards + [INDEX, "config.json"])
    check(leftovers(tmp) == [], "sharded: nothing left beside OUT (%s)" % leftovers(tmp))
    for p in ("sh_out", "sh_out_ix", "sh_back"):
        shutil.rmtree(os.path.join(tmp, p), ignore_errors=True)
    return d


def test_cache_snapshot(tmp, rng):
    """A download-cache snapshot: every file a relative link to a blob."""
    root = os.path.join(tmp, "hub", "models--org--tiny")
    blobs, snap = os.path.join(root, "blobs"), os.path.join(root, "snapshots", "0123abcd")
    os.makedirs(blobs)
    os.makedirs(snap)
    os.makedirs(os.path.join(root, "refs"))
    with open(os.path.join(root, "refs", "main"), "w") as f:
        f.write("0123abcd")
    staging = os.path.join(tmp, "staging")
    tensors = llama_tensors(rng, layers=1)
    make_model(staging, rng, tensors, dict(CONFIG, num_hidden_layers=1), others=False)
    with open(os.path.join(staging, "tokenizer.json"), "wb") as f:
        f.write(b'{"v": 1}')
    for i, n in enumerate(sorted(os.listdir(staging))):
        blob = os.path.join(blobs, "%040x" % (i + 1))
        shutil.move(os.path.join(staging, n), blob)
        os.symlink(os.path.join("..", "..", "blobs", os.path.basename(blob)), os.path.join(snap, n))
    os.rmdir(staging)
    out = os.path.join(tmp, "from_cache")
    r = run("quantize", snap, out, "--scheme", "fp8-block", "--format", "ct")
    check(r.returncode == 0, "cache snapshot: quantize (%s)" % r.stderr.strip())
    if r.returncode == 0:
        check_copied("cache snapshot", snap, out, ["tokenizer.json"], ["model.safetensors", "config.json"])
        ignore = ignore_list(tensors, "fp8-block", "compressed-tensors")
        check_config("cache snapshot", out, dict(CONFIG, num_hidden_layers=1),
                     lambda q: check_qcfg("cache snapshot", q, "fp8-block", "compressed-tensors", ignore))
        t, meta = st_read(os.path.join(out, "model.safetensors"))
        check_quantized("cache snapshot", tensors, t, meta, "fp8-block", "compressed-tensors", src_meta=MODEL_META)
    # OUT containing IN: the cache's model directory
    before = tree(root)
    r = run("quantize", snap, root, "--scheme", "fp8-row", "--force")
    check(refused_request(r) and tree(root) == before, "cache snapshot: OUT = the cache directory holding IN is "
          "refused, exit 2 (rc %d: %s)" % (r.returncode, r.stderr.strip()))
    shutil.rmtree(os.path.join(tmp, "hub"))
    shutil.rmtree(out, ignore_errors=True)


def test_links(tmp, rng):
    """Issue 21.8a: the link rule (docs/spec.md 5). Files are opened through
    links, wherever they point (a download cache's snapshot is links into its
    blobs directory; shards are linked from other disks); the index names only
    plain file names in the directory; what is read must be a regular file;
    messages never show a file's contents (a shard linked to /etc/passwd used
    to come back as "header length 3475222254926655346", i.e. "root:x:0");
    a copied file keeps no group / other permission its source lacks."""
    base = os.path.join(tmp, "links")
    os.makedirs(base)
    secret = os.path.join(base, "passwd")
    with open(secret, "w") as f:
        f.write("root:x:0:0:SECRETMARK:/root:/bin/bash\nsvc:x:1:1::/nonexistent:/usr/sbin/nologin\n")
    os.chmod(secret, 0o600)
    leaks = ["root", "SECRETMARK", "nologin", str(struct.unpack("<Q", b"root:x:0")[0]), "x:0:0"]
    # a sharded download-cache snapshot: index and shards are links to blobs
    root = os.path.join(base, "hub", "models--org--sharded")
    blobs, snap = os.path.join(root, "blobs"), os.path.join(root, "snapshots", "c0ffee")
    staging = os.path.join(base, "staging")
    make_model(staging, rng, llama_tensors(rng, layers=1), dict(CONFIG, num_hidden_layers=1), shards=2,
               others=False)
    os.makedirs(blobs)
    os.makedirs(snap)
    for i, n in enumerate(sorted(os.listdir(staging))):
        shutil.move(os.path.join(staging, n), os.path.join(blobs, "%064x" % (i + 1)))
        os.symlink(os.path.join("..", "..", "blobs", "%064x" % (i + 1)), os.path.join(snap, n))
    os.rmdir(staging)
    out = os.path.join(base, "out")
    r = run("quantize", snap, out, "--scheme", "fp8-row")
    check(r.returncode == 0 and all(stat.S_ISREG(os.lstat(os.path.join(out, n)).st_mode) for n in os.listdir(out)) and
          sorted(os.listdir(out)) == sorted(os.listdir(snap)),
          "a sharded cache snapshot (every file a link into blobs): converted, regular files out (%s)" %
          r.stderr.strip()[:300])
    shutil.rmtree(out, ignore_errors=True)
    # a copy of the snapshot with one entry relinked at a time
    shards = sorted(n for n in os.listdir(snap) if n.startswith("model-"))
    elsewhere = os.path.join(base, "elsewhere.safetensors")  # a real shard outside the directory
    shutil.copyfile(os.path.join(snap, shards[1]), elsewhere)

    def variant(name, target):
        """The snapshot's links (made absolute) with name pointing at target."""
        v = os.path.join(base, "v")
        shutil.rmtree(v, ignore_errors=True)
        os.makedirs(v)
        for n in os.listdir(snap):
            os.symlink(target if n == name else os.path.realpath(os.path.join(snap, n)), os.path.join(v, n))
        return v

    v = variant(shards[1], elsewhere)
    r = run("quantize", v, out, "--scheme", "fp8-row")
    check(r.returncode == 0, "a shard linked from outside the directory (another disk): accepted (%s)" %
          r.stderr.strip()[:300])
    shutil.rmtree(out, ignore_errors=True)
    for name, needle in ((shards[0], shards[0]), (INDEX, INDEX), ("config.json", "config.json")):
        v = variant(name, secret)
        for cmd in (["quantize", v, out, "--scheme", "fp8-row"], ["dequantize", v, out], ["inspect", v]):
            if cmd[0] == "inspect" and name == "config.json":
                continue
            r = run(*cmd)
            shown = [w for w in leaks if w in r.stderr]
            check(r.returncode == 1 and needle in r.stderr and not shown and not os.path.exists(out),
                  "%s linked to a private non-checkpoint file (%s): refused naming the link, nothing of the file "
                  "shown (rc %d, shown %s: %s)" % (name, cmd[0], r.returncode, shown, r.stderr.strip()[:300]))
    v = variant(shards[0], "/dev/zero")
    r = run("inspect", v, timeout=30)
    check(r.returncode == 1 and "not a regular file (a character device)" in r.stderr,
          "a shard linked to /dev/zero: refused (%s)" % r.stderr.strip()[:300])
    # the index may not name a path: a subdirectory or a parent
    v = variant(shards[0], os.path.realpath(os.path.join(snap, shards[0])))
    with open(os.path.join(v, INDEX)) as f:
        ix = json.load(f)
    for bad in ("sub/" + shards[0], "../" + shards[0], "/etc/passwd"):
        ix2 = json.loads(json.dumps(ix))
        ix2["weight_map"] = {k: (bad if s == shards[0] else s) for k, s in ix["weight_map"].items()}
        os.unlink(os.path.join(v, INDEX))
        write_json(os.path.join(v, INDEX), ix2)
        r = run("inspect", v)
        check(r.returncode == 1 and "plain file name" in r.stderr, "the index naming %r: refused (%s)" % (
            bad, r.stderr.strip()[:200]))
    # a private file linked in as one of the other files: copied, still private
    v = variant("config.json", os.path.realpath(os.path.join(snap, "config.json")))
    os.symlink(secret, os.path.join(v, "notes.txt"))
    r = run("quantize", v, out, "--scheme", "fp8-row")
    m = os.stat(os.path.join(out, "notes.txt")).st_mode & 0o777 if r.returncode == 0 else None
    check(r.returncode == 0 and m == 0o600 and open(os.path.join(out, "config.json")).read().startswith("{"),
          "a private (0600) file linked in: copied with mode 600, not the umask's 644 (rc %d, mode %s: %s)" % (
              r.returncode, oct(m) if m is not None else "-", r.stderr.strip()[:200]))
    shutil.rmtree(base)


def test_modes(tmp, rng, d):
    for mask in (0o022, 0o077):
        out = os.path.join(tmp, "modes_%03o" % mask)
        r = umask_run(mask, "quantize", d, out, "--scheme", "fp8-row")
        check(r.returncode == 0, "umask %03o: quantize (%s)" % (mask, r.stderr.strip()))
        if r.returncode == 0:
            check_modes("umask %03o: model directory" % mask, out, mask)
        # --force over it under the other umask: the new directory has the new modes
        other = 0o077 if mask == 0o022 else 0o022
        r = umask_run(other, "quantize", d, out, "--scheme", "mxfp8", "--force")
        check(r.returncode == 0, "umask %03o: --force (%s)" % (other, r.stderr.strip()))
        if r.returncode == 0:
            check_modes("umask %03o: replaced model directory" % other, out, other)
        back = out + "_deq"
        r = umask_run(mask, "dequantize", out, back)
        if r.returncode == 0:
            check_modes("umask %03o: dequantized directory" % mask, back, mask, src=out)
        f = os.path.join(tmp, "modes_%03o.safetensors" % mask)
        r = umask_run(mask, "quantize", os.path.join(d, "model.safetensors"), f, "--scheme", "fp8-row")
        check(r.returncode == 0, "umask %03o: quantize to a file (%s)" % (mask, r.stderr.strip()))
        if r.returncode == 0:
            check_modes("umask %03o: single file" % mask, f, mask, single_file=True)
        for p in (out, back):
            shutil.rmtree(p, ignore_errors=True)
        if os.path.exists(f):
            os.unlink(f)


def test_force(tmp, rng, d):
    base = os.path.join(tmp, "force")
    os.makedirs(base)
    out = os.path.join(base, "out")
    os.makedirs(os.path.join(out, "olddir"))
    with open(os.path.join(out, "old.txt"), "w") as f:
        f.write("old")
    with open(os.path.join(out, "olddir", "x"), "w") as f:
        f.write("x")
    with open(os.path.join(base, "neighbour.txt"), "w") as f:
        f.write("n")
    old = tree(out)
    r = run("quantize", d, out, "--scheme", "fp8-row")
    check(R.refused_existing(r, out) and tree(out) == old and listing(base) == ["neighbour.txt", "out"],
          "an existing OUT directory without --force: exit 2, unchanged (rc %d: %r)" % (r.returncode, r.stderr))
    r = run("quantize", d, out, "--scheme", "fp8-row", "--force")
    check(r.returncode == 0, "--force over a directory (%s)" % r.stderr.strip())
    if r.returncode == 0:
        check("old.txt" not in listing(out) and "olddir" not in listing(out) and "model.safetensors" in listing(out)
              and "config.json" in listing(out), "--force: the old directory's files are gone (%s)" % listing(out))
        check(listing(base) == ["neighbour.txt", "out"], "--force: nothing left beside OUT (%s)" % listing(base))
    # --force again, over a model directory (swap), with dequantize
    r = run("dequantize", out, out, "--force")
    check(refused_request(r) and listing(base) == ["neighbour.txt", "out"], "dequantize OUT = IN refused, exit 2 (%s)"
          % r.stderr.strip())
    # --force over a regular file with a model directory IN: not replaced
    fpath = os.path.join(base, "file_out")
    with open(fpath, "w") as f:
        f.write("precious")
    r = run("quantize", d, fpath, "--scheme", "fp8-row", "--force")
    check(r.returncode != 0 and open(fpath).read() == "precious" and
          listing(base) == ["file_out", "neighbour.txt", "out"],
          "a model directory over an existing file is refused, the file kept (rc %d: %s)" % (
              r.returncode, r.stderr.strip()))
    shutil.rmtree(base)


def sh(*cmd):
    """Runs a system command quietly; True when it succeeded."""
    try:
        return subprocess.run(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return False


def umount_under(d):
    """Unmounts whatever is mounted at or below d (deepest first)."""
    try:
        with open("/proc/mounts") as f:
            points = [ln.split()[1].replace("\\040", " ") for ln in f]
    except OSError:
        return
    for m in sorted((m for m in points if m == d or m.startswith(d + "/")), key=len, reverse=True):
        sh("umount", m)


def test_force_sharded(tmp, rng, sd):
    """Issue 21.1: --force over an existing directory replaces all of it or
    nothing. The converter used to move the new shards in one rename at a
    time: a shard name taken by a directory, or an unremovable file, stopped
    it half way with the CLI saying nothing was written. Now the whole new
    directory is built beside OUT and exchanged with it in one step."""
    base = os.path.join(tmp, "forcesh")
    os.makedirs(base)
    ref = os.path.join(base, "ref")
    r = run("quantize", sd, ref, "--scheme", "fp8-block")
    check(r.returncode == 0, "sharded --force: reference output (%s)" % r.stderr.strip())
    want = tree(ref)
    shards = sorted(n for n in os.listdir(sd) if n.endswith(".safetensors"))
    out = os.path.join(base, "out")

    def occupy():
        """An existing OUT: a shard's name taken by a directory, another by a file, the index, other files."""
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(os.path.join(out, shards[0], "inner"))
        for rel, data in (((shards[0], "inner", "x"), b"x"), ((shards[1],), b"old shard"), ((INDEX,), b"{}"),
                          (("notes.txt",), b"mine")):
            with open(os.path.join(out, *rel), "wb") as f:
                f.write(data)

    def replaced(tag, r):
        check(r.returncode == 0 and tree(out) == want and listing(base) == ["out", "ref"],
              "%s: OUT is exactly the new directory, nothing left beside it (rc %d: %s; %s)" % (
                  tag, r.returncode, r.stderr.strip()[:300], listing(base)))

    def unchanged(tag, r, before):
        check(r.returncode == 1 and "nothing was written" in r.stderr and tree(out) == before and
              listing(base) == ["out", "ref"],
              "%s: refused, OUT unchanged, nothing left, and the CLI says nothing was written (rc %d: %s; %s)" % (
                  tag, r.returncode, r.stderr.strip()[:300], listing(base)))

    occupy()
    replaced("a shard name taken by a directory", run("quantize", sd, out, "--scheme", "fp8-block", "--force"))
    # an unremovable file, as root: the immutable attribute (chattr +i)
    occupy()
    locked = os.path.join(out, "sub", "locked")
    os.makedirs(os.path.dirname(locked))
    with open(locked, "w") as f:
        f.write("locked")
    if sh("chattr", "+i", locked):
        try:
            r = run("quantize", sd, out, "--scheme", "fp8-block", "--force")
            m = re.search(r"what is left of it is in (\S+)", r.stderr)
            left = m.group(1) if m else ""
            check(r.returncode == 0 and tree(out) == want and "could not be removed completely" in r.stderr and
                  "warning" in r.stderr and left and tree(left) == {"sub": tree(left)["sub"],
                                                                    "sub/locked": tree(left)["sub/locked"]},
                  "an unremovable file in the old OUT: the new directory is in place, the rest of the old one is "
                  "gone, a warning names what is left (rc %d: %s)" % (r.returncode, r.stderr.strip()[:400]))
        finally:
            for dp, _, ns in os.walk(base):
                for n in ns:
                    sh("chattr", "-i", os.path.join(dp, n))
        for n in listing(base):
            if n not in ("out", "ref"):
                shutil.rmtree(os.path.join(base, n))
        # OUT itself immutable: it cannot be exchanged (EPERM); nothing changes
        occupy()
        before = tree(out)
        if sh("chattr", "+i", out):
            try:
                unchanged("an immutable OUT", run("quantize", sd, out, "--scheme", "fp8-block", "--force"), before)
            finally:
                sh("chattr", "-i", out)
    else:
        print("test_st_model: chattr +i not permitted here: the unremovable-file cases are skipped")
    # a file system mounted inside OUT: its files are not removed with the old
    # directory (the removal stays on OUT's file system); OUT as a mount point
    # cannot be exchanged (EBUSY): nothing changes
    occupy()
    mnt = os.path.join(out, "mnt")
    os.makedirs(mnt)
    if sh("mount", "-t", "tmpfs", "-o", "size=1m", "fp8kit-test", mnt):
        left = ""
        try:
            with open(os.path.join(mnt, "precious"), "w") as f:
                f.write("precious")
            r = run("quantize", sd, out, "--scheme", "fp8-block", "--force")
            m = re.search(r"what is left of it is in (\S+)", r.stderr)
            left = m.group(1) if m else ""
            check(r.returncode == 0 and tree(out) == want and left and
                  open(os.path.join(left, "mnt", "precious")).read() == "precious",
                  "a mount inside the old OUT: replaced, the mounted files untouched (rc %d: %s)" % (
                      r.returncode, r.stderr.strip()[:300]))
        finally:
            umount_under(base)
        if left:
            shutil.rmtree(left)
        occupy()
        before = tree(out)
        if sh("mount", "--bind", out, out):
            try:
                unchanged("OUT a mount point", run("quantize", sd, out, "--scheme", "fp8-block", "--force"), before)
            finally:
                umount_under(base)
    else:
        print("test_st_model: mount not permitted here: the mount-point cases are skipped")
    # OUT = IN (every spelling), also through a bind mount: refused, the
    # input unchanged byte for byte
    snap = tree(sd)
    view = os.path.join(base, "view")
    os.makedirs(view)
    cases = [("OUT = IN", sd), ("OUT = IN/", sd + "/"), ("OUT = IN/.", os.path.join(sd, "."))]
    bound = sh("mount", "--bind", os.path.dirname(sd), view)
    if bound:
        cases += [("OUT = IN through a bind mount", os.path.join(view, os.path.basename(sd))),
                  ("OUT containing IN through a bind mount", view),
                  ("OUT inside IN through a bind mount", os.path.join(view, os.path.basename(sd), "q"))]
    try:
        for what, o in cases:
            for cmd in (["quantize", sd, o, "--scheme", "fp8-row", "--force"], ["dequantize", sd, o, "--force"]):
                r = run(*cmd)
                check(refused_request(r) and tree(sd) == snap and "input" in r.stderr,
                      "sharded %s (%s --force): refused (exit 2), the input unchanged byte for byte (rc %d: %s)" % (
                          what, cmd[0], r.returncode, r.stderr.strip()[:300]))
    finally:
        umount_under(base)
    check(leftovers(os.path.dirname(sd)) == [] and tree(sd) == snap, "sharded OUT = IN: nothing left beside IN")
    umount_under(base)
    for dp, _, ns in os.walk(base):
        for n in ns:
            sh("chattr", "-i", os.path.join(dp, n))
    shutil.rmtree(base)


def test_out_vs_in(tmp, rng, d):
    """OUT equal to IN, inside IN, or containing IN: refused, nothing changed."""
    outer = os.path.join(tmp, "outer")
    inner = os.path.join(outer, "model")
    os.makedirs(outer)
    shutil.copytree(d, inner, symlinks=True)
    os.symlink(os.path.join(inner, "sub"), os.path.join(tmp, "link_to_sub"))
    os.symlink(inner, os.path.join(tmp, "link_to_model"))
    snap_outer, snap_tmp = tree(outer), listing(tmp)
    cases = [
        ("OUT = IN", inner, ["--force"]),
        ("OUT = IN/", inner + "/", ["--force"]),
        ("OUT = IN/.", os.path.join(inner, "."), ["--force"]),
        ("OUT = a link to IN", os.path.join(tmp, "link_to_model"), ["--force"]),
        ("OUT inside IN (new)", os.path.join(inner, "q"), []),
        ("OUT inside IN (new, deeper)", os.path.join(inner, "sub", "q"), []),
        ("OUT inside IN (existing subdirectory)", os.path.join(inner, "sub"), ["--force"]),
        ("OUT inside IN through a link", os.path.join(tmp, "link_to_sub", "q"), []),
        ("OUT containing IN", outer, ["--force"]),
    ]
    for what, out, opts in cases:
        for cmd in (["quantize", inner, out, "--scheme", "fp8-row"], ["dequantize", inner, out]):
            r = run(*(cmd + opts))
            check(refused_request(r) and tree(outer) == snap_outer and listing(tmp) == snap_tmp,
                  "%s (%s %s): refused with exit 2 and one line, nothing changed (rc %d: %s)" % (
                      what, cmd[0], " ".join(opts), r.returncode, r.stderr.strip()))
    # without --force, OUT = IN exists: refused (exit 2 for an existing OUT, or 1), nothing changed
    r = run("quantize", inner, inner, "--scheme", "fp8-row")
    check(r.returncode == 2 and tree(outer) == snap_outer, "OUT = IN without --force refused (rc %d)" %
          r.returncode)
    # the input as a file inside OUT: a single-file IN and OUT = its directory
    r = run("quantize", os.path.join(inner, "model.safetensors"), inner, "--scheme", "fp8-row", "--force")
    check(refused_request(r) and tree(outer) == snap_outer, "file IN, OUT = the directory holding it: refused, exit 2 "
          "(rc %d: %s)" % (r.returncode, r.stderr.strip()))
    for n in ("link_to_sub", "link_to_model"):
        os.unlink(os.path.join(tmp, n))
    shutil.rmtree(outer)


def test_failures(tmp, rng, d):
    """Runs that fail leave nothing next to OUT, and an existing OUT as it was."""
    base = os.path.join(tmp, "fail")
    os.makedirs(base)
    existing = os.path.join(base, "existing")
    os.makedirs(existing)
    with open(os.path.join(existing, "keep.txt"), "w") as f:
        f.write("keep")
    snap_existing = tree(existing)

    def attempt(what, inp, opts=(), needle=None, refusal=False):
        """refusal: a request refused before anything is written (exit 2, one
        line); otherwise a failure (exit 1)."""
        for out, force in ((os.path.join(base, "new"), []), (existing, ["--force"])):
            r = run("quantize", inp, out, "--scheme", "fp8-row", *opts, *force)
            ok = (refused_request(r) if refusal else r.returncode == 1) and (needle is None or needle in r.stderr)
            ok = ok and listing(base) == ["existing"] and tree(existing) == snap_existing
            check(ok, "%s%s: fails (exit %d%s), nothing left beside OUT, OUT unchanged (rc %d, %s: %s)" % (
                what, " --force over a directory" if force else "", 2 if refusal else 1,
                ", naming %r" % needle if needle else "",
                r.returncode, listing(base), r.stderr.strip()[:300]))

    def variant(name, edit):
        p = os.path.join(tmp, name)
        shutil.copytree(d, p, symlinks=True)
        edit(p)
        return p

    p = variant("dangling", lambda p: os.symlink("no-such-blob", os.path.join(p, "sub", "dangling.json")))
    attempt("a dangling link in IN", p, needle="dangling.json")
    p2 = variant("loop", lambda p: os.symlink("..", os.path.join(p, "sub", "loop")))
    attempt("a directory link loop in IN", p2, needle="link loop")
    # a link to the model directory itself among its files: found before
    # anything is written (it used to copy the weights 16 times over before
    # giving up): with writes limited to 0 bytes (ulimit -f 0) the loop is
    # what is reported, not the failed write of the weights
    p2b = variant("loop_top", lambda p: os.symlink(".", os.path.join(p, "x")))
    attempt("a link x -> . in IN", p2b, needle="link loop")
    for cmd in (["quantize", "--scheme", "fp8-row"], ["dequantize"]):
        r = run(cmd[0], p2b, os.path.join(base, "new"), *cmd[1:], preexec_fn=R.limited_fsize(0), timeout=120)
        check(r.returncode == 1 and "link loop" in r.stderr and "/x" in r.stderr and "File too large" not in r.stderr
              and listing(base) == ["existing"],
              "%s: x -> . is refused before anything is written (rc %d: %s)" % (cmd[0], r.returncode,
                                                                                r.stderr.strip()[:300]))
    p3 = variant("fifo", lambda p: os.mkfifo(os.path.join(p, "sub", "pipe")))
    attempt("a FIFO in IN", p3, needle="pipe")

    def badcfg(p):
        os.unlink(os.path.join(p, "config.json"))
        with open(os.path.join(p, "config.json"), "w") as f:
            f.write('{"a": 1,,}')
    p4 = variant("badcfg", badcfg)
    attempt("a config.json that is not JSON", p4, needle="config.json")
    attempt("--exclude matching nothing", d, ["--exclude", "*no_such_module*"], needle="no_such_module", refusal=True)
    attempt("--include matching nothing", d, ["--include", "*no_such_module*"], needle="no_such_module", refusal=True)
    # fp8 input and an already-quantized config.json, each alone
    def fp8_tensor(p):
        t, _ = st_read(os.path.join(p, "model.safetensors"))
        t["model.layers.0.mlp.extra.weight"] = ("F8_E4M3", [4, 32], bytes(128))
        st_write(os.path.join(p, "model.safetensors"), t, MODEL_META)
    p5 = variant("fp8in", fp8_tensor)
    attempt("an F8_E4M3 tensor in IN", p5, needle="model.layers.0.mlp.extra.weight", refusal=True)

    def qcfg(p):
        write_json(os.path.join(p, "config.json"), dict(CONFIG, quantization_config={"quant_method": "fp8"}))
    p6 = variant("qcfg", qcfg)
    attempt("config.json with a quantization_config", p6, needle="quantization_config", refusal=True)
    for p in (p, p2, p2b, p3, p4, p5, p6):
        shutil.rmtree(p)
    # issue 21.7: past `ulimit -f` (a weights file, or an other file copied
    # with copy_file_range) the write fails with EFBIG: exit 1, the file named,
    # nothing left beside OUT, an existing OUT unchanged (it used to be SIGXFSZ)
    sizes = os.path.join(tmp, "fsize_probe")
    r = run("quantize", d, sizes, "--scheme", "fp8-row")
    biggest = max(os.path.getsize(os.path.join(dp, n)) for dp, _, ns in os.walk(sizes) for n in ns)
    shutil.rmtree(sizes)
    p7 = variant("bigother", lambda p: open(os.path.join(p, "tokenizer.model"), "wb").write(b"t" * (biggest + 4096)))
    for inp, limit, needle in ((d, 0, "model.safetensors"), (d, 3000, "model.safetensors"),
                               (p7, biggest + 1, "tokenizer.model")):
        for out, force in ((os.path.join(base, "new"), []), (existing, ["--force"])):
            r = run("quantize", inp, out, "--scheme", "fp8-row", *force, preexec_fn=R.limited_fsize(limit), timeout=120)
            check(r.returncode == 1 and "File too large" in r.stderr and needle in r.stderr and
                  listing(base) == ["existing"] and tree(existing) == snap_existing,
                  "ulimit -f %d%s: an I/O error naming %s, nothing left beside OUT, OUT unchanged (rc %d, %s: %s)" % (
                      limit, " --force over a directory" if force else "", needle, r.returncode, listing(base),
                      r.stderr.strip()[:300]))
    shutil.rmtree(p7)
    # interrupted: SIGINT / SIGTERM while the directory is being built
    big = os.path.join(tmp, "bigmodel")
    os.makedirs(os.path.join(big, "sub"))
    write_json(os.path.join(big, "config.json"), CONFIG)
    with open(os.path.join(big, "sub", "f.txt"), "w") as f:
        f.write("f")
    rows = 8192
    with open(os.path.join(big, "model.safetensors"), "wb") as f:
        hdr = json.dumps({"w%d.weight" % i: {"dtype": "BF16", "shape": [rows, 8192],
                                             "data_offsets": [i * rows * 8192 * 2, (i + 1) * rows * 8192 * 2]}
                          for i in range(2)}).encode()
        hdr += b" " * (-len(hdr) % 8)
        f.write(struct.pack("<Q", len(hdr)) + hdr)
        blk = bf16_bits(rng.standard_normal((64, 8192))).tobytes()
        for _ in range(2 * rows // 64):
            f.write(blk)
    for sig in (signal.SIGINT, signal.SIGTERM):
        for out, force in ((os.path.join(base, "new"), []), (existing, ["--force"])):
            p = subprocess.Popen([FP8KIT, "quantize", big, out, "--scheme", "fp8-row", "--threads", "1"] + force,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            t0, seen = time.time(), False
            while time.time() - t0 < 20 and p.poll() is None:
                if leftovers(base):
                    seen = True
                    time.sleep(0.01)
                    p.send_signal(sig)
                    break
                time.sleep(0.001)
            p.communicate()
            tag = "%s%s" % (signal.Signals(sig).name, " --force over a directory" if force else "")
            check(seen, "%s: the temporary directory appeared next to OUT while converting" % tag)
            if seen:
                check(p.returncode == -sig, "%s ends the run (rc %s)" % (tag, p.returncode))
                check(listing(base) == ["existing"] and tree(existing) == snap_existing,
                      "%s: nothing left beside OUT, OUT unchanged (%s)" % (tag, listing(base)))
    shutil.rmtree(big)
    shutil.rmtree(base)


def test_moe(tmp, rng):
    """Mixtral and Qwen2-MoE names: router gates (and the shared expert gate)
    stay, experts and the rest are quantized."""
    H, E = 128, 4
    mixtral = {"model.embed_tokens.weight": [256, H], "model.norm.weight": [H], "lm_head.weight": [256, H]}
    qwen = dict(mixtral)
    p = "model.layers.0."
    for t in (mixtral, qwen):
        t.update({p + "self_attn.q_proj.weight": [H, H], p + "self_attn.k_proj.weight": [H, H],
                  p + "self_attn.v_proj.weight": [H, H], p + "self_attn.o_proj.weight": [H, H],
                  p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H]})
    mixtral[p + "block_sparse_moe.gate.weight"] = [E, H]
    for e in range(E):
        mixtral.update({p + "block_sparse_moe.experts.%d.w1.weight" % e: [256, H],
                        p + "block_sparse_moe.experts.%d.w3.weight" % e: [256, H],
                        p + "block_sparse_moe.experts.%d.w2.weight" % e: [H, 256]})
        qwen.update({p + "mlp.experts.%d.gate_proj.weight" % e: [128, H],
                     p + "mlp.experts.%d.up_proj.weight" % e: [128, H],
                     p + "mlp.experts.%d.down_proj.weight" % e: [H, 128]})
    qwen.update({p + "mlp.gate.weight": [E, H], p + "mlp.shared_expert_gate.weight": [1, H],
                 p + "mlp.shared_expert.gate_proj.weight": [256, H], p + "mlp.shared_expert.up_proj.weight": [256, H],
                 p + "mlp.shared_expert.down_proj.weight": [H, 256]})
    for arch, shapes, cfg in (("mixtral", mixtral, dict(CONFIG, architectures=["MixtralForCausalLM"],
                                                             model_type="mixtral", num_local_experts=E,
                                                             num_experts_per_tok=2, router_aux_loss_coef=0.02)),
                              ("qwen2_moe", qwen, dict(CONFIG, architectures=["Qwen2MoeForCausalLM"],
                                                       model_type="qwen2_moe", num_experts=E))):
        tensors = {n: ("BF16", s, bf16_bits(rng.standard_normal(s) * 0.05).tobytes()) for n, s in shapes.items()}
        d = os.path.join(tmp, arch)
        make_model(d, rng, tensors, cfg, shards=3 if arch == "mixtral" else 0, others=False)
        gates = sorted(n[:-7] for n in shapes if n.endswith("gate.weight") and "gate_proj" not in n)
        for scheme, fmt, opts, kw in (("fp8-block", "fp8", [], {}), ("mxfp8", "compressed-tensors", [], {}),
                                      ("fp8-block", "compressed-tensors", [], {}), ("mxfp8", "fp8", [], {}),
                                      ("fp8-row", "compressed-tensors", [], {}),
                                      ("fp8-row", "compressed-tensors", ["--include", "*.gate"],
                                       {"include": ("*.gate",)}),
                                      ("fp8-block", "compressed-tensors", ["--exclude", "*.experts.*"],
                                       {"exclude": ("*.experts.*",)})):
            tag = "%s %s --format %s %s" % (arch, scheme, fmt, " ".join(opts))
            out = os.path.join(tmp, arch + "_out")
            r = run("quantize", d, out, "--scheme", scheme, "--format", fmt, "--force", "--no-fsync", *opts)
            check(r.returncode == 0, "%s: exit 0 (%s)" % (tag, r.stderr.strip()))
            if r.returncode:
                continue
            # transformers cannot load block / mx expert scales in compressed-tensors: a warning names the
            # limit and both ways around it (and nothing else warns here: the model is bfloat16)
            want = fmt == "compressed-tensors" and scheme in ("fp8-block", "mxfp8") and "exclude" not in kw
            warned = [ln for ln in r.stderr.splitlines() if "warning" in ln]
            check(len(warned) == int(want) and (not want or ("MoE expert" in warned[0] and "transformers" in
                                                            warned[0] and "--exclude '*.experts.*'" in warned[0] and
                                                            "--format fp8" in warned[0] and ".experts." in warned[0])),
                  "%s: %s warning about the MoE experts (%s)" % (tag, "a" if want else "no", r.stderr.strip()))
            ignore = ignore_list(tensors, scheme, fmt, **kw)
            q = check_config(tag, out, cfg, lambda q: check_qcfg(tag, q, scheme, fmt, ignore))
            got_ignore = (q or {}).get("quantization_config", {})
            got_ignore = got_ignore.get("ignore", got_ignore.get("modules_to_not_convert"))
            if "include" in kw:
                check(not [g for g in gates if g.endswith(".gate")] or
                      not {g for g in gates if g.endswith(".gate")} & set(got_ignore or []),
                      "%s: --include quantizes the router gates it names" % tag)
                check({g for g in gates if not g.endswith(".gate")} <= set(got_ignore or []),
                      "%s: the gates --include does not name stay (%s)" % (tag, got_ignore))
            else:
                check(set(gates) <= set(got_ignore or []), "%s: router gates %s are ignored (%s)" % (tag, gates,
                                                                                                   got_ignore))
            check(not any(".experts." in m for m in got_ignore or []) or "exclude" in kw,
                  "%s: the experts are quantized" % tag)
            if arch == "mixtral":
                with open(os.path.join(d, INDEX)) as f:
                    wm = json.load(f)["weight_map"]
                for fn in sorted(set(wm.values())):
                    part = {n: v for n, v in tensors.items() if wm[n] == fn}
                    st, meta = st_read(os.path.join(out, fn))
                    check_quantized("%s %s" % (tag, fn), part, st, meta, scheme, fmt, src_meta=MODEL_META, **kw)
            else:
                st, meta = st_read(os.path.join(out, "model.safetensors"))
                check_quantized(tag, tensors, st, meta, scheme, fmt, src_meta=MODEL_META, **kw)
        moe_pertensor_round_trip(tmp, arch, d)
        shutil.rmtree(d)
        shutil.rmtree(os.path.join(tmp, arch + "_out"), ignore_errors=True)


def moe_pertensor_round_trip(tmp, arch, d):
    """fp8-tensor --format fp8 writes the experts' per-tensor scales as F32
    [1, 1] (what transformers' FP8Experts stacks); dequantize reads its own
    output back (bit for bit) and inspect names every weight per-tensor."""
    tag = "%s fp8-tensor --format fp8 round trip" % arch
    out, back = os.path.join(tmp, arch + "_pt"), os.path.join(tmp, arch + "_pt_back")
    r = run("quantize", d, out, "--scheme", "fp8-tensor", "--format", "fp8", "--no-fsync")
    check(r.returncode == 0, "%s: quantize (%s)" % (tag, r.stderr.strip()))
    if r.returncode:
        return
    q, _ = read_model(out)
    experts = [n for n in q if ".experts." in n and n.endswith(".weight") and q[n][0] == "F8_E4M3"]
    check(experts and all(q[n + "_scale_inv"][:2] == ("F32", [1, 1]) for n in experts) and
          any(q[n][1][0] > 128 for n in experts) == (arch == "mixtral"),
          "%s: expert scales are F32 [1, 1] (%d experts)" % (tag, len(experts)))
    ri = run("inspect", out)
    line = ([ln for ln in ri.stdout.splitlines() if ln.startswith("quantization: ")] or [""])[-1]
    nq = sum(1 for v in q.values() if v[0] == "F8_E4M3")
    # (a weight of at most 128 x 128 with a one-element scale_inv is named as
    # one 128x128 block: the same numbers)
    counts = sum(int(m) for m in re.findall(r"(\d+) weights (?:tensor|128x128)", line))
    check(ri.returncode == 0 and counts == nq and "invalid" not in line,
          "%s: inspect: all %d weights read (rc %d: %r)" % (tag, nq, ri.returncode, line))
    r = run("dequantize", out, back, "--dtype", "f32", "--no-fsync")
    check(r.returncode == 0 and "warning" not in r.stderr, "%s: dequantize reads the [1, 1] scales (rc %d: %s)" % (
        tag, r.returncode, r.stderr.strip()))
    if r.returncode == 0:
        b, _ = read_model(back)
        for n in experts + [n for n in q if n not in experts and q[n][0] == "F8_E4M3"]:
            check_dequantized("%s %s" % (tag, n), {k: v for k, v in q.items() if k == n or k.startswith(n + "_scale")},
                              {n: b.get(n)}, "fp8-tensor", "f32")
        with open(os.path.join(back, "config.json")) as f:
            check("quantization_config" not in json.load(f), "%s: config.json loses quantization_config" % tag)
    shutil.rmtree(out)
    shutil.rmtree(back, ignore_errors=True)


# ------------------------------------------------- dequantize, both conventions
def e8m0_codes(rng, shape):
    s = rng.integers(110, 140, shape).astype(np.uint8)
    s.flat[:4] = [0, 127, 254, 255][:s.size]
    return s


def foreign_checkpoint(rng, conv):
    """A checkpoint quantized by someone else: (tensors, scheme per weight)."""
    t, schemes = {}, {}

    def add(name, N, K, sdt, sshape, scheme, elem="F8_E4M3"):
        t[name] = (elem, [N, K], fp8_codes(rng, (N, K)))
        sname = name + ("_scale" if conv == "compressed-tensors" else "_scale_inv")
        if sdt in ("U8", "F8_E8M0"):
            data = e8m0_codes(rng, sshape).tobytes()
        else:
            n = int(np.prod(sshape)) if sshape else 1
            vals = np.exp2(rng.uniform(-12, 4, n)).astype(np.float32) * rng.uniform(0.5, 1.0, n).astype(np.float32)
            if n > 2:
                vals[1] = 0.0
            data = scale_bytes(sdt, vals)
        t[sname] = (sdt, list(sshape), data)
        schemes[name] = scheme
    if conv == "compressed-tensors":
        add("model.layers.0.mlp.up_proj.weight", 256, 128, "BF16", [256, 1], "fp8-row")
        add("model.layers.0.mlp.down_proj.weight", 128, 256, "F32", [1], "fp8-tensor")
        add("model.layers.0.self_attn.q_proj.weight", 256, 384, "F32", [2, 3], "fp8-block")
        add("model.layers.0.self_attn.k_proj.weight", 200, 256, "F16", [2, 2], "fp8-block")
        add("model.layers.0.self_attn.v_proj.weight", 64, 128, "U8", [64, 4], "mxfp8")
        add("model.layers.0.self_attn.o_proj.weight", 96, 64, "F16", [], "fp8-tensor", elem="F8_E5M2")
        add("model.layers.0.mlp.gate_proj.weight", 256, 128, "BF16", [2, 1], "fp8-block")
    else:
        add("model.layers.0.mlp.up_proj.weight", 256, 128, "F32", [], "fp8-tensor")
        add("model.layers.0.self_attn.q_proj.weight", 256, 384, "F32", [2, 3], "fp8-block")
        add("model.layers.0.self_attn.v_proj.weight", 64, 128, "F8_E8M0", [64, 4], "mxfp8")
        add("model.layers.0.self_attn.k_proj.weight", 128, 128, "BF16", [1, 1], "fp8-block")
        add("model.layers.0.mlp.down_proj.weight", 256, 128, "F32", [256, 1], "fp8-row")
        add("model.layers.0.self_attn.o_proj.weight", 128, 256, "F32", [1], "fp8-tensor", elem="F8_E5M2")
    t["model.embed_tokens.weight"] = ("BF16", [64, 128], bf16_bits(rng.standard_normal((64, 128))).tobytes())
    t["model.norm.weight"] = ("F32", [128], rng.standard_normal(128).astype(np.float32).tobytes())
    t["lm_head.weight"] = ("BF16", [64, 128], bf16_bits(rng.standard_normal((64, 128))).tobytes())
    return t, schemes


def check_foreign_dequant(tag, q, out, schemes, outdt):
    for name, scheme in schemes.items():
        check_dequantized("%s %s" % (tag, name), {k: v for k, v in q.items()
                                                 if k == name or k.startswith(name + "_scale")},
                          {k: v for k, v in out.items() if k == name}, scheme, outdt)
    rest = {k: v for k, v in q.items() if k not in schemes and not any(k.startswith(n + "_scale") for n in schemes)}
    check(all(out.get(k) == v for k, v in rest.items()) and set(out) == set(rest) | set(schemes),
          "%s: the other tensors copied, the scales dropped" % tag)


def test_dequantize_foreign(tmp, rng):
    ct_cfg = dict(CONFIG, quantization_config={
        "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                                         "strategy": "channel"}}},
        "ignore": ["lm_head"]})
    fp8_cfg = dict(CONFIG, quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic",
                                                "weight_block_size": [128, 128]})
    for conv, cfg in (("compressed-tensors", ct_cfg), ("fp8", fp8_cfg)):
        for shards in (0, 3):
            tag = "foreign %s%s" % (conv, " (3 shards)" if shards else "")
            tensors, schemes = foreign_checkpoint(rng, conv)
            if shards:  # a scale in another shard than its weight
                names = list(tensors)
                first = names[0]
                sc = [n for n in names if n.startswith(first + "_scale")][0]
                names.remove(sc)
                names.append(sc)
                tensors = {n: tensors[n] for n in names}
            d = os.path.join(tmp, "foreign")
            make_model(d, rng, tensors, cfg, shards=shards, others=False)
            for outdt in ("bf16", "f32"):
                out = os.path.join(tmp, "foreign_out")
                r = run("dequantize", d, out, "--dtype", outdt, "--json", "--force")
                check(r.returncode == 0, "%s: dequantize --dtype %s (%s)" % (tag, outdt, r.stderr.strip()))
                if r.returncode:
                    continue
                try:
                    j = json.loads(r.stdout)
                except ValueError:
                    j = {}
                check(j.get("convention") == conv and j.get("dequantized") == len(schemes),
                      "%s: --json names the convention %s, %d dequantized (%s)" % (tag, conv, len(schemes), r.stdout))
                out_t, where = read_model(out)
                check_foreign_dequant("%s %s" % (tag, outdt), tensors, out_t, schemes, outdt)
                check_config(tag, out, cfg)
                if shards:
                    with open(os.path.join(out, INDEX)) as f:
                        ix = json.load(f)
                    check(ix["weight_map"] == where and
                          ix["metadata"]["total_size"] == sum(len(v[2]) for v in out_t.values()),
                          "%s: the index lists the dequantized tensors and their total size" % tag)
            r = run("dequantize", d, out, "--force")
            check(r.returncode == 0 and conv in r.stdout, "%s: the summary names the convention (%r)" % (tag, r.stdout))
            # inspect names the convention and each scheme
            r = run("inspect", d)
            line = ([ln for ln in r.stdout.splitlines() if ln.startswith("quantization: ")] or [""])[-1]
            words = {R.INSPECT_WORD[s] for s in schemes.values()}
            want_conv = "fp8 (weight_scale_inv)" if conv == "fp8" else "compressed-tensors (weight_scale)"
            check(r.returncode == 0 and want_conv in line and all(w in line for w in words),
                  "%s: inspect DIR: %r names %s and %s" % (tag, line, want_conv, sorted(words)))
            rj = run("inspect", d, "--json")
            try:
                jq = json.loads(rj.stdout).get("quantization")
            except ValueError:
                jq = None
            check(jq == line[len("quantization: "):], "%s: inspect --json DIR has the same quantization" % tag)
            shutil.rmtree(d)
            shutil.rmtree(out, ignore_errors=True)
    # quantization_config is removed only when every fp8 tensor was
    # dequantized: with one left by --exclude, config.json is copied byte for
    # byte (and a warning says the output stays quantized)
    tensors, schemes = foreign_checkpoint(rng, "fp8")
    d, out = os.path.join(tmp, "partial"), os.path.join(tmp, "partial_out")
    make_model(d, rng, tensors, fp8_cfg, others=False)
    left = sorted(schemes)[0]
    r = run("dequantize", d, out, "--exclude", left)
    with open(os.path.join(d, "config.json"), "rb") as f:
        cfg_bytes = f.read()
    ok = r.returncode == 0 and "warning" in r.stderr and "left as it is" in r.stderr
    if ok:
        with open(os.path.join(out, "config.json"), "rb") as f:
            ok = f.read() == cfg_bytes
        t, _ = read_model(out)
        ok = ok and t.get(left) == tensors[left] and t.get(left + "_scale_inv") == tensors[left + "_scale_inv"]
    check(ok, "dequantize --exclude leaving an fp8 weight: config.json kept byte for byte, the weight and its scale "
          "copied, a warning (rc %d: %s)" % (r.returncode, r.stderr.strip()))
    shutil.rmtree(d)
    shutil.rmtree(out, ignore_errors=True)
    # inspect on a model directory that is not quantized; dequantize copies it
    # with a warning and leaves its config.json alone (here one that names
    # another quantization method, whose tensors are not fp8)
    d = os.path.join(tmp, "plain")
    make_model(d, rng, llama_tensors(rng, layers=1), dict(CONFIG, quantization_config={"quant_method": "gptq",
                                                                                        "bits": 4}), others=False)
    r = run("inspect", d)
    check(r.returncode == 0 and "quantization: not quantized" in r.stdout, "inspect on a plain model directory (%s)" %
          r.stdout[-100:])
    out = os.path.join(tmp, "plain_out")
    r = run("dequantize", d, out)
    ok = r.returncode == 0 and "warning" in r.stderr and "nothing to dequantize" in r.stderr
    if ok:
        a, b = tree(out), tree(d)
        ok = a.pop("model.safetensors")[0] == "f" and b.pop("model.safetensors") and a == b
        ok = ok and read_model(out)[0] == read_model(d)[0] and st_read(os.path.join(out, "model.safetensors"))[1] == \
            st_read(os.path.join(d, "model.safetensors"))[1]
    check(ok, "dequantize of a model without fp8 tensors: a warning, every file as it was, config.json included "
          "(rc %d: %s)" % (r.returncode, r.stderr.strip()))
    shutil.rmtree(d)
    shutil.rmtree(out, ignore_errors=True)


def main():
    if not os.path.exists(FP8KIT):
        print("test_st_model: no fp8kit binary at %s" % FP8KIT)
        return 1
    seed = int(os.environ.get("FK_TEST_SEED", "2020"))
    rng = np.random.default_rng(seed)
    print("test_st_model: %s, safetensors %s, numpy %s, seed %d" % (
        FP8KIT, getattr(safetensors, "__version__", "?"), np.__version__, seed))
    tmp = tempfile.mkdtemp(prefix="fp8kit-model-")
    old_umask = os.umask(0o022)
    try:
        t0 = time.time()
        d, tensors, copied = test_single_dir(tmp, rng)
        test_single_dir_options(tmp, rng, d, tensors, copied)
        sd = test_sharded_dir(tmp, rng)
        test_force_sharded(tmp, rng, sd)
        test_cache_snapshot(tmp, rng)
        test_links(tmp, rng)
        test_modes(tmp, rng, d)
        test_force(tmp, rng, d)
        test_out_vs_in(tmp, rng, d)
        test_failures(tmp, rng, d)
        test_moe(tmp, rng)
        test_dequantize_foreign(tmp, rng)
        print("test_st_model: %.1f s" % (time.time() - t0))
    finally:
        os.umask(old_umask)
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_st_model: %d passed, %d failed" % (R.PASSES[0], len(R.FAILS)))
    return 1 if R.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
