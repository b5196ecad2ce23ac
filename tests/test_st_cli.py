#!/usr/bin/env python3
"""test_st_cli.py - end-to-end test of `fp8kit quantize | dequantize | inspect`
on single safetensors files (issues 3, 19 and 20, docs/spec.md section 5), run
by CTest:
    python3 tests/test_st_cli.py path/to/fp8kit
(model directories: tests/test_st_model.py).

Checkpoints are written and read back with the reference `safetensors`
package; every number is checked against an INDEPENDENT numpy implementation
of docs/spec.md sections 1-2 (e4m3 by nearest search in a 256-entry table built from
the bit fields, scales from the docs/spec.md formulas), bit for bit:
  - every scheme in both formats (--format fp8 | compressed-tensors: fp8-tensor,
    fp8-block and mxfp8 in each, fp8-row in compressed-tensors and refused in
    fp8), with --pow2, mxfp8 floor/rceil, on tensors holding zeros, NaN, Inf,
    subnormals, max values, docs/spec.md 2.2's edge blocks, an empty weight;
  - names, dtypes and shapes of the written tensors (docs/spec.md 5 table:
    weight_scale_inv F32 [] / weight_scale F32 [1], [N,1], the block grid,
    F8_E8M0 / U8 [N,K/32]); the default format per scheme and the aliases;
  - weights a scheme cannot take as the loaders read it (mxfp8 K % 32,
    fp8-block K % 128 and, with --format fp8, N % 128) kept byte for byte with
    a warning on stderr naming each; excluded (by tensor or module name) and
    non-weight tensors copied byte for byte; metadata kept plus the
    "quantization" entry; an --exclude / --include glob matching nothing is an
    error; an input holding any F8_* tensor is refused;
  - the summary line and --json (format, kept, other_files, convention);
  - dequantize (bf16 and f32) = decode(q) * S rounded, bit for bit, naming the
    convention it recognised; inspect's "quantization" line; per-tensor scales
    [], [1] and [1, 1] in F32 / BF16 / F16 under both names; inspect and
    dequantize agree on what is invalid (no scale tensor, both _scale and
    _scale_inv, a scale that fits no scheme: exit 1, nothing written); the
    "quantization" metadata entry kept unless every fp8 tensor was
    dequantized; a warning for a file without fp8 tensors;
  - sharded input and output with a new index;
  - every corrupt-input case fails with a message naming the file (and the
    tensor), exit status != 0 and nothing written; --force; Ctrl-C;
  - the progress bar appears on a terminal only;
  - issue 19: the Python / C names of schemes and dtypes give the same files,
    --opt=value works, a bad argument is one line with exit status 2, an
    existing OUT without --force is refused with exit status 2 (not an I/O
    error);
  - when a CUDA device is usable: the CUDA backend writes identical files.
Needs numpy and safetensors (scripts/bootstrap.sh installs them); without
them the test is skipped (exit 77)."""
import fnmatch
import json
import os
import pty
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
    import safetensors
except ImportError as e:  # pragma: no cover
    print("test_st_cli: SKIP: needs numpy and safetensors (pip install numpy safetensors): %s" % e)
    sys.exit(77)

FP8KIT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "fp8kit"
FAILS = []
PASSES = [0]
NOTES = {}


def check(cond, what):
    if cond:
        PASSES[0] += 1
    else:
        FAILS.append(what)
        if len(FAILS) <= 30:
            print("FAIL:", what, flush=True)


def run(*args, **kw):
    return subprocess.run([FP8KIT] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, **kw)


# ----------------------------------------------------------- safetensors I/O
ST_NAMES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64", "I64": "int64",
            "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
            "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu"}


def st_write(path, tensors, metadata=None):
    """tensors: name -> (dtype code, shape, bytes); written by the reference package."""
    if hasattr(safetensors, "TensorSpec"):
        keep, specs = [], {}
        for name, (dt, shape, data) in tensors.items():
            buf = np.frombuffer(bytearray(data) if data else bytearray(1), np.uint8)
            keep.append(buf)
            specs[name] = safetensors.TensorSpec(dtype=ST_NAMES[dt], shape=list(shape), data_ptr=buf.ctypes.data,
                                                 data_len=len(data))
        blob = safetensors.serialize(specs, metadata=metadata)
    else:
        blob = safetensors.serialize({n: {"dtype": d, "shape": list(s), "data": b}
                                      for n, (d, s, b) in tensors.items()}, metadata=metadata)
    with open(path, "wb") as f:
        f.write(bytes(blob))


def st_read(path):
    """name -> (dtype code, shape, bytes), and the metadata, via the reference package."""
    with open(path, "rb") as f:
        blob = f.read()
    out = {name: (v["dtype"], list(v["shape"]), bytes(v["data"])) for name, v in safetensors.deserialize(blob)}
    meta = safetensors.safe_open(path, framework="numpy").metadata()
    return out, meta


# ------------------------------------------------- independent numpy reference
def e4m3_value(c):
    s, e, m = c >> 7, (c >> 3) & 15, c & 7
    if e == 15 and m == 7:
        return float("nan")
    v = (m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)
    return -v if s else v


def e5m2_value(c):
    s, e, m = c >> 7, (c >> 2) & 31, c & 3
    if e == 31:
        v = float("inf") if m == 0 else float("nan")
    else:
        v = (m / 4.0) * 2.0 ** -14 if e == 0 else (1 + m / 4.0) * 2.0 ** (e - 15)
    return -v if s else v


E4M3 = np.array([e4m3_value(c) for c in range(256)], np.float32)  # decode table
E5M2 = np.array([e5m2_value(c) for c in range(256)], np.float32)
E4M3_POS = E4M3[:0x7F].astype(np.float64)  # codes 0x00..0x7E, ascending


def to_e4m3(v):
    """fp32 -> e4m3, satfinite, nearest with ties to the even code, by search
    in the value table (independent of the library's bit arithmetic)."""
    v = np.asarray(v, np.float32)
    sign = ((v.view(np.uint32) >> 31).astype(np.int64)) << 7
    nan = np.isnan(v)
    a = np.where(nan, 0.0, np.abs(v.astype(np.float64)))
    hi = np.clip(np.searchsorted(E4M3_POS, a, side="left"), 0, 126)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - E4M3_POS[lo], E4M3_POS[hi] - a  # exact in float64 (Sterbenz)
    code = np.where((dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0)), hi, lo)
    code = np.where(a >= 448.0, 0x7E, code) | sign
    return np.where(nan, 0x7F, code).astype(np.uint8)


def widen(dt, data, shape):
    if dt == "F32":
        return np.frombuffer(data, np.float32).reshape(shape)
    if dt == "F16":
        return np.frombuffer(data, np.float16).astype(np.float32).reshape(shape)
    if dt == "BF16":
        return (np.frombuffer(data, np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
    raise ValueError(dt)


def group_amax(x):
    """max |x| over the last axis, NaN if any NaN (np.max propagates NaN)."""
    return np.max(np.abs(x), axis=-1) if x.shape[-1] else np.zeros(x.shape[:-1], np.float32)


def scale_f32(amax, pow2):
    amax = np.asarray(amax, np.float32)
    s = amax / np.float32(448.0)
    s = np.where(s == 0, np.float32(2.0 ** -149), s).astype(np.float32)
    if pow2:
        m, e = np.frexp(s.astype(np.float64))
        s = np.where(m == 0.5, s, np.ldexp(1.0, e)).astype(np.float32)
    s = np.where(amax == 0, np.float32(1.0), s)
    return np.where(np.isfinite(amax), s, np.float32("nan")).astype(np.float32)


def ref_quant(scheme, x, pow2=False, rceil=False):
    """codes (uint8, x's shape) and scales (float32 array or uint8 e8m0)."""
    N, K = x.shape
    if scheme == "fp8-tensor":
        amax = group_amax(x.reshape(1, -1))[0] if x.size else np.float32(0)
        S = scale_f32(amax, pow2)
        return to_e4m3(x / S), np.array(S, np.float32).reshape(())
    if scheme == "fp8-row":
        S = scale_f32(group_amax(x), pow2).reshape(N, 1)
        return to_e4m3(x / S), S
    if scheme == "fp8-block":
        nb, kb = -(-N // 128), -(-K // 128)
        S = np.zeros((nb, kb), np.float32)
        q = np.zeros((N, K), np.uint8)
        for i in range(nb):
            for j in range(kb):
                t = x[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
                S[i, j] = scale_f32(group_amax(t.reshape(1, -1))[0], pow2)
                q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = to_e4m3(t / S[i, j])
        return q, S
    assert scheme == "mxfp8"
    xb = x.reshape(N, K // 32, 32)
    amax = group_amax(xb).astype(np.float32)
    bits = amax.view(np.uint32)
    if not rceil:
        e = ((bits >> 23) & 0xFF).astype(np.int64)
        s = np.clip(e - 127 - 8, -127, 128) + 127
        s = np.where(np.isfinite(amax), s, 255)
    else:
        d = (amax * (np.float32(1.0) / np.float32(448.0))).astype(np.float32)
        db = d.view(np.uint32)
        E, M = ((db >> 23) & 0xFF).astype(np.int64), (db & 0x7FFFFF).astype(np.int64)
        s = np.where(E == 255, 255, np.where(E == 0, (M > 0x400000).astype(np.int64), E + (M != 0)))
        s = np.where(np.isnan(amax), 255, s)
    s = s.astype(np.int64)
    rbits = np.where(s <= 253, (254 - s) << 23, np.where(s == 254, 0x00400000, 0x7FC00000)).astype(np.uint32)
    r = rbits.view(np.float32)[..., None]
    q = to_e4m3((xb * r).astype(np.float32)).reshape(N, K)
    return q, s.astype(np.uint8)


def e8m0_to_f32(s):
    s = np.asarray(s, np.int64)
    bits = np.where(s == 255, 0x7FC00000, np.where(s == 0, 0x00400000, s << 23)).astype(np.uint32)
    return bits.view(np.float32)


def ref_dequant(q, qdt, scale, sshape, sdt, scheme, N, K, out):
    """decode(q) * S in fp32, then rounded to out ("bf16" -> uint16 bits, "f32")."""
    table = E4M3 if qdt == "F8_E4M3" else E5M2
    v = table[q.reshape(N, K)]
    if sdt in ("F8_E8M0", "U8"):  # e8m0 bytes, either dtype (docs/spec.md 5)
        S = np.repeat(e8m0_to_f32(scale.reshape(N, K // 32)), 32, axis=1)
    else:
        f = scale.astype(np.float32).reshape(sshape)
        if scheme == "fp8-tensor":
            S = f.reshape(())
        elif scheme == "fp8-row":
            S = f.reshape(N, 1)
        else:
            S = np.repeat(np.repeat(f, 128, axis=0), 128, axis=1)[:N, :K]
    y = (v * S).astype(np.float32)
    if out == "f32":
        return y
    u = y.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # RNE (NaN compared apart)




# --------------------------------------------------- docs/spec.md 5, restated
FORMATS = ("fp8", "compressed-tensors")
SCHEMES = ("fp8-tensor", "fp8-row", "fp8-block", "mxfp8")
FLOAT_DTYPES = ("F32", "F16", "BF16")


def default_format(scheme):
    return "fp8" if scheme == "fp8-block" else "compressed-tensors"


def scale_spec(scheme, fmt, N, K):
    """(suffix, dtype, shape) of the scale tensor written for an N x K weight."""
    inv = "_scale_inv" if fmt == "fp8" else "_scale"
    if scheme == "fp8-tensor":
        return (inv, "F32", []) if fmt == "fp8" else (inv, "F32", [1])
    if scheme == "fp8-row":
        assert fmt == "compressed-tensors"
        return inv, "F32", [N, 1]
    if scheme == "fp8-block":
        return inv, "F32", [-(-N // 128), -(-K // 128)]
    return (inv, "F8_E8M0", [N, K // 32]) if fmt == "fp8" else (inv, "U8", [N, K // 32])


def shape_fits(scheme, fmt, N, K):
    """Can the scheme, in the format, take an N x K weight as the loaders read it?"""
    if scheme == "mxfp8":
        return K % 32 == 0
    if scheme == "fp8-block":
        return K % 128 == 0 and (fmt != "fp8" or N % 128 == 0)
    return True


def is_candidate(dt, shape, name):
    return len(shape) == 2 and dt in FLOAT_DTYPES and name.endswith(".weight")


def glob_hits(globs, name):
    """A glob matches the tensor name or its module name (fnmatch, '*' crosses dots)."""
    mod = name[:-len(".weight")] if name.endswith(".weight") else None
    return any(fnmatch.fnmatchcase(name, g) or (mod is not None and fnmatch.fnmatchcase(mod, g)) for g in globs)


def keep_reason(name, dt, shape, scheme, fmt, exclude=(), include=(), quantize_all=False):
    """None (quantized), or why a candidate weight stays in high precision
    ("exclude", "embedding", "router", "lm_head", "shape"); "copy" for a
    tensor that is no candidate at all."""
    if not is_candidate(dt, shape, name):
        return "copy"
    if glob_hits(exclude, name):
        return "exclude"
    module = name[:-len(".weight")]
    leaf = module.split(".")[-1]
    if not glob_hits(include, name):
        if leaf == "lm_head" or name == "output.weight" or leaf == "embed_out":
            if not quantize_all:
                return "lm_head"
        elif "embed" in leaf or leaf in ("wte", "wpe", "tok_embeddings"):
            return "embedding"
        elif leaf in ("gate", "router", "shared_expert_gate", "router_gate"):
            return "router"
    if not shape_fits(scheme, fmt, shape[0], shape[1]):
        return "shape"
    return None


# --------------------------------------------------------- test checkpoint
def bf16_bits(f32):
    u = np.asarray(f32, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def edge_matrix(rng, N, K):
    """Random normal rows plus rows of docs/spec.md edge cases (K >= 64, multiple of 32)."""
    x = rng.standard_normal((N, K)).astype(np.float32)
    tiny = np.float32(2.0 ** -149)
    x[0] = 0.0
    x[1, 5] = np.nan
    x[2, 7] = np.inf
    x[3, 9] = -np.inf
    x[4] = (rng.standard_normal(K) * 1e-40).astype(np.float32)  # fp32 subnormals
    x[5] = np.float32(3.4028235e38)  # FLT_MAX
    x[6] = 448.0
    x[7, :32] = 480.0
    x[7, 32:64] = -480.0
    x[8] = np.float32(2.0 ** -126)
    x[9, :31] = 1.0
    x[9, 31] = tiny
    x[10] = np.float32(464.0)
    x[11, :] = -0.0
    x[12] = (rng.standard_normal(K) / np.maximum(np.abs(rng.standard_normal(K)), 1e-3)).astype(np.float32)
    x[13] = np.float32(1e-30) * rng.standard_normal(K).astype(np.float32)
    x[14, ::2] = 0.0
    x[15] = np.float32(57344.0)
    return x



def other_tensors(rng):
    """Tensors that are never quantized: 1-D, not *.weight, 3-D, integers."""
    return {
        "norm.weight": ("F32", [96], rng.standard_normal(96).astype(np.float32).tobytes()),
        "proj.bias": ("F32", [3, 64], rng.standard_normal((3, 64)).astype(np.float32).tobytes()),
        "conv.weight": ("F32", [4, 3, 32], rng.standard_normal((4, 3, 32)).astype(np.float32).tobytes()),
        "ids": ("I64", [5], np.arange(5, dtype=np.int64).tobytes()),
        "mask": ("BOOL", [7], bytes([1, 0, 1, 1, 0, 0, 1])),
        "u8": ("U8", [3], b"\x01\x02\x03"),
        "i8": ("I8", [2], b"\xff\x01"),
        "i32": ("I32", [2, 2], np.arange(4, dtype=np.int32).tobytes()),
        "scalar": ("F32", [], struct.pack("<f", 2.5)),
    }


META = {"format": "pt", "note": "caf\u00e9 \u2713"}


def fp8_codes(rng, shape):
    """Random e4m3 / e5m2 code bytes."""
    return rng.integers(0, 256, shape, dtype=np.uint8).tobytes()


def scale_bytes(dtype, vals):
    """fp32 scale values stored as F32, BF16 or F16."""
    vals = np.asarray(vals, np.float32)
    if dtype == "F32":
        return vals.tobytes()
    if dtype == "BF16":
        return bf16_bits(vals).tobytes()
    return vals.astype(np.float16).tobytes()


def make_checkpoint(path, rng, extra=None):
    """The general fixture (no fp8 tensor): every weight fits fp8-tensor,
    fp8-row and mxfp8 (K % 32 == 0); most do not fit fp8-block (K % 128)."""
    edge = edge_matrix(rng, 70, 160)                   # 70 x 160: not multiples of 128
    bf = (rng.standard_t(2, (300, 96)) * 0.05).astype(np.float32)
    bf[17] = np.nan
    big = rng.standard_normal((256, 256)).astype(np.float32)
    half = rng.standard_normal((33, 64)).astype(np.float16)
    half[3, 3] = np.inf
    t = {
        "edge.weight": ("F32", [70, 160], edge.tobytes()),
        "bf.weight": ("BF16", [300, 96], bf16_bits(bf).tobytes()),
        "big.weight": ("BF16", [256, 256], bf16_bits(big).tobytes()),
        "half.weight": ("F16", [33, 64], half.tobytes()),
        "zero.weight": ("F32", [128, 32], np.zeros((128, 32), np.float32).tobytes()),
        "emp.weight": ("BF16", [0, 64], b""),
        "excl.weight": ("BF16", [4, 64], bf16_bits(rng.standard_normal((4, 64))).tobytes()),
    }
    t.update(other_tensors(rng))
    if extra:
        t.update(extra)
    st_write(path, t, META)
    return t


def make_block_checkpoint(path, rng):
    """The fp8-block fixture: K % 128 == 0 and N % 128 == 0 for the weights
    both formats quantize (edge rows, NaN / Inf / zero / subnormal blocks, an
    empty weight), plus tail.weight (N = 200: quantized with partial row
    blocks by compressed-tensors, kept by --format fp8) and oddk.weight
    (K = 160: kept by both)."""
    edge = edge_matrix(rng, 256, 256)
    edge[128:, :128] = 0.0                                      # an all-zero block
    edge[128:, 128:] *= np.float32(1e-40)                       # a block of fp32 subnormals
    edge[200, 130] = np.float32(2.0 ** -149)
    bf = (rng.standard_t(2, (384, 128)) * 0.05).astype(np.float32)
    bf[300] = np.nan                                            # one NaN row in the last row block
    half = rng.standard_normal((128, 128)).astype(np.float16)
    half[3, 3] = -np.inf
    tail = rng.standard_normal((200, 256)).astype(np.float32)
    tail[150:, 128:] = 0.0
    tail[199, 255] = 1000.0
    t = {
        "edge.weight": ("F32", [256, 256], edge.tobytes()),
        "bf.weight": ("BF16", [384, 128], bf16_bits(bf).tobytes()),
        "big.weight": ("BF16", [256, 256], bf16_bits(rng.standard_normal((256, 256))).tobytes()),
        "half.weight": ("F16", [128, 128], half.tobytes()),
        "zero.weight": ("F32", [128, 128], np.zeros((128, 128), np.float32).tobytes()),
        "emp.weight": ("BF16", [0, 128], b""),
        "tail.weight": ("F32", [200, 256], tail.tobytes()),
        "oddk.weight": ("BF16", [128, 160], bf16_bits(rng.standard_normal((128, 160))).tobytes()),
        "excl.weight": ("BF16", [128, 128], bf16_bits(rng.standard_normal((128, 128))).tobytes()),
    }
    t.update(other_tensors(rng))
    st_write(path, t, META)
    return t
def same_bits(a, b):
    """Equal as bits, except that NaN only needs NaN at the same place."""
    if a.shape != b.shape:
        return False
    if a.dtype == np.float32:
        na, nb = np.isnan(a), np.isnan(b)
        return bool(np.array_equal(na, nb) and np.array_equal(a.view(np.uint32)[~na], b.view(np.uint32)[~nb]))
    if a.dtype == np.uint16:  # bf16 bits
        na, nb = ((a & 0x7FFF) > 0x7F80), ((b & 0x7FFF) > 0x7F80)
        return bool(np.array_equal(na, nb) and np.array_equal(a[~na], b[~nb]))
    return bool(np.array_equal(a, b))




def check_with_torch(tag, path, out):
    """Where torch is installed: the file also loads through safetensors.torch,
    with torch's float8 dtypes, and torch decodes the codes as our table does."""
    try:
        import torch
        import safetensors.torch as stt
    except ImportError:
        return
    t = stt.load_file(path)
    for name, (dt, shape, data) in out.items():
        if dt not in ("F8_E4M3", "F8_E8M0") or name not in t:
            continue
        want = {"F8_E4M3": "float8_e4m3fn", "F8_E8M0": "float8_e8m0fnu"}[dt]
        check(str(t[name].dtype) == "torch." + want, "%s: torch loads %s as %s (%s)" % (tag, name, want,
                                                                                      t[name].dtype))
        if dt == "F8_E4M3" and t[name].numel():
            mine = E4M3[np.frombuffer(data, np.uint8)].reshape(shape)
            check(same_bits(t[name].float().numpy(), mine), "%s: torch decodes %s like the table" % (tag, name))




def check_same_values(tag, a, b):
    """Files a and b hold the same tensors; float tensors equal as bits except
    for NaN payloads (NaN in the same places)."""
    check(sorted(a) == sorted(b), "%s: same tensor names" % tag)
    for name in a:
        if name not in b:
            continue
        (da, sa, xa), (db, sb, xb) = a[name], b[name]
        if xa == xb and (da, sa) == (db, sb):
            PASSES[0] += 1
            continue
        ok = (da, sa) == (db, sb) and da in ("F32", "BF16")
        if ok:
            t = np.float32 if da == "F32" else np.uint16
            ok = same_bits(np.frombuffer(xa, t), np.frombuffer(xb, t))
        check(ok, "%s: %s equal (NaN payloads aside)" % (tag, name))
        if ok and not NOTES.get("nan"):
            NOTES["nan"] = True
            print("note: %s: %s differs only in NaN payloads" % (tag, name))




# ------------------------------------------------------------------ checks
def scale_of(tensors, name):
    """(scale tensor name, its entry) of an fp8 weight, either convention."""
    for suffix in ("_scale_inv", "_scale"):
        if name + suffix in tensors:
            return name + suffix, tensors[name + suffix]
    return None, None


def check_quantized(tag, src, out, meta, scheme, fmt, pow2=False, rceil=None, exclude=(), include=(),
                    quantize_all=False, src_meta=META):
    """out (the written file) against src: every quantized weight's codes and
    scale bit for bit, names / dtypes / shapes per docs/spec.md 5, everything
    else byte for byte. rceil None: the converter's default (rceil for
    mxfp8). Returns name -> keep reason (None: quantized)."""
    if rceil is None:
        rceil = scheme == "mxfp8"
    reasons = {n: keep_reason(n, dt, shape, scheme, fmt, exclude, include, quantize_all)
               for n, (dt, shape, _) in src.items()}
    want_names = set(src)
    for name, (dt, shape, data) in src.items():
        if reasons[name] is not None:
            check(out.get(name) == (dt, shape, data), "%s: %s copied byte for byte (%s)" % (tag, name, reasons[name]))
            check(name + "_scale" not in out and name + "_scale_inv" not in out, "%s: no scale for %s" % (tag, name))
            continue
        N, K = shape
        suffix, want_sdt, want_ss = scale_spec(scheme, fmt, N, K)
        sn, other = name + suffix, name + ("_scale" if suffix == "_scale_inv" else "_scale_inv")
        want_names.add(sn)
        check(name in out and sn in out and other not in out, "%s: %s and %s written (not %s)" % (tag, name, sn, other))
        if name not in out or sn not in out:
            continue
        qdt, qshape, qdata = out[name]
        sdt, sshape, sdata = out[sn]
        check(qdt == "F8_E4M3" and qshape == [N, K], "%s: %s is F8_E4M3 %s (got %s %s)" % (tag, name, [N, K], qdt,
                                                                                              qshape))
        check(sdt == want_sdt and sshape == want_ss,
              "%s: %s is %s %s (got %s %s)" % (tag, sn, want_sdt, want_ss, sdt, sshape))
        if qshape != [N, K] or sshape != want_ss:
            continue
        x = widen(dt, data, shape)
        with np.errstate(all="ignore"):
            rq, rs = ref_quant(scheme, x, pow2, rceil)
        q = np.frombuffer(qdata, np.uint8).reshape(N, K)
        bad = np.argwhere(q != rq)
        check(bad.size == 0, "%s: %s codes match the numpy reference (%d differ, first %s: got 0x%02x want 0x%02x)"
              % (tag, name, len(bad), bad[0].tolist() if len(bad) else None,
                 q[tuple(bad[0])] if len(bad) else 0, rq[tuple(bad[0])] if len(bad) else 0))
        if scheme == "mxfp8":
            s = np.frombuffer(sdata, np.uint8).reshape(want_ss)
            check(np.array_equal(s, rs), "%s: %s e8m0 scales match the numpy reference" % (tag, sn))
        else:
            s = np.frombuffer(sdata, np.float32).reshape(want_ss)
            check(same_bits(s, np.asarray(rs, np.float32).reshape(want_ss)),
                  "%s: %s scales match the numpy reference" % (tag, sn))
    check(set(out) == want_names, "%s: exactly the expected tensors (extra %s, missing %s)" % (
        tag, sorted(set(out) - want_names)[:5], sorted(want_names - set(out))[:5]))
    check(all(meta.get(k) == v for k, v in src_meta.items()), "%s: metadata kept" % tag)
    qm = json.loads(meta.get("quantization", "{}"))
    want_scale = "weight_scale_inv" if fmt == "fp8" else "weight_scale"
    want_sdt = scale_spec(scheme, fmt, 32, 32)[1]
    check(qm.get("tool") == "fp8kit" and qm.get("scheme") == scheme and qm.get("format") == fmt and
          qm.get("scale") == want_scale and qm.get("scale_dtype") == want_sdt and qm.get("weight_dtype") == "F8_E4M3",
          "%s: quantization metadata entry names scheme, format and scale (%s)" % (tag, qm))
    if scheme == "mxfp8":
        check(qm.get("rounding") == ("rceil" if rceil else "floor"), "%s: the metadata names the rounding %s (%s)" % (
            tag, "rceil" if rceil else "floor", qm))
    return reasons


def check_dequantized(tag, q, out, scheme, outdt):
    """out = dequantize(q): every fp8 tensor with a scale companion becomes
    decode(q) * S rounded to outdt bit for bit, the scales are dropped,
    everything else is copied."""
    consumed = set()
    for name, (qdt, shape, qdata) in q.items():
        if qdt not in ("F8_E4M3", "F8_E5M2"):
            continue
        sn, sc = scale_of(q, name)
        if sn is None:
            check(out.get(name) == q[name], "%s: %s without a scale copied" % (tag, name))
            continue
        consumed.add(sn)
        N, K = shape
        sdt, sshape, sdata = sc
        check(name in out and sn not in out, "%s: %s dequantized, %s dropped" % (tag, name, sn))
        if name not in out:
            continue
        ydt, yshape, ydata = out[name]
        check(ydt == {"bf16": "BF16", "f32": "F32", "f16": "F16"}[outdt] and yshape == [N, K],
              "%s: %s has dtype %s shape %s" % (tag, name, ydt, yshape))
        if sdt in ("F8_E8M0", "U8"):
            scale = np.frombuffer(sdata, np.uint8)
        else:
            scale = widen(sdt, sdata, sshape)
        with np.errstate(all="ignore"):
            want = ref_dequant(np.frombuffer(qdata, np.uint8), qdt, scale, sshape, sdt, scheme, N, K, outdt)
        got = np.frombuffer(ydata, np.float32 if outdt == "f32" else np.uint16).reshape(N, K)
        check(same_bits(got, want), "%s: %s = decode(q) * S bit for bit" % (tag, name))
    for name, v in q.items():
        if name in consumed or (v[0] in ("F8_E4M3", "F8_E5M2") and scale_of(q, name)[0]):
            continue
        check(out.get(name) == v, "%s: %s copied through dequantize" % (tag, name))
    check(not (set(out) & consumed), "%s: no scale tensor left" % tag)


def warned_names(stderr, names):
    """The names that a warning line on stderr names."""
    lines = [ln for ln in stderr.splitlines() if "warning" in ln]
    return {n for n in names
            if any(re.search(r"(^|[\s'\"])%s($|[\s'\":,])" % re.escape(n), ln) for ln in lines)}


def check_warnings(tag, r, reasons):
    want = {n for n, why in reasons.items() if why == "shape"}
    got = warned_names(r.stderr, reasons)
    check(got == want, "%s: a warning on stderr names each weight kept for its shape (want %s, got %s)" % (
        tag, sorted(want), sorted(got)))
    check(all("warning" in ln for ln in r.stderr.splitlines()),
          "%s: nothing but warnings on stderr when it is not a terminal (%r)" % (tag, r.stderr[:200]))


def summary_kept(stdout):
    m = re.search(r"(\d+) weights? kept", stdout)
    return int(m.group(1)) if m else None


def check_summary(tag, r, fmt, reasons):
    kept = sum(1 for why in reasons.values() if why not in (None, "copy"))
    check(("format %s" % fmt) in r.stdout and summary_kept(r.stdout) == kept and "quantized" in r.stdout and
          "GB/s" in r.stdout, "%s: summary names format %s and %d weights kept (%r)" % (tag, fmt, kept, r.stdout))


def check_json_summary(tag, r, scheme, fmt, reasons, other_files=0):
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    kept = sum(1 for why in reasons.values() if why not in (None, "copy"))
    quantized = sum(1 for why in reasons.values() if why is None)
    check(r.returncode == 0 and j.get("op") == "quantize" and j.get("scheme") == scheme and j.get("format") == fmt and
          j.get("kept") == kept and j.get("quantized") == quantized and
          (other_files is None or j.get("other_files") == other_files),
          "%s: --json has format %s, kept %d, quantized %d, other_files %s (%s)" % (tag, fmt, kept, quantized,
                                                                                 other_files, r.stdout.strip()))


INSPECT_WORD = {"fp8-tensor": "tensor", "fp8-row": "row", "fp8-block": "128x128", "mxfp8": "mx"}


def check_inspect(tag, path, scheme, fmt):
    """inspect's "quantization: ..." line (and --json's "quantization") names
    the convention and the scheme."""
    conv = "fp8 (weight_scale_inv)" if fmt == "fp8" else "compressed-tensors (weight_scale)"
    r = run("inspect", path)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("quantization: ")]
    line = lines[-1][len("quantization: "):] if lines else ""
    check(r.returncode == 0 and conv in line and re.search(r"\b%s\b" % re.escape(INSPECT_WORD[scheme]), line),
          "%s: inspect prints 'quantization: %s ... %s' (%r)" % (tag, conv, INSPECT_WORD[scheme], line))
    if fmt == "fp8":
        check("compressed-tensors" not in line, "%s: inspect names one convention (%r)" % (tag, line))
    else:
        check("weight_scale_inv" not in line, "%s: inspect names one convention (%r)" % (tag, line))
    r = run("inspect", path, "--json")
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    check(j.get("quantization") == line, "%s: inspect --json's quantization is the same text (%r)" % (
        tag, j.get("quantization")))
    return j


def leftovers(d):
    """Temporary names (files or directories) the tool left in d."""
    return [n for n in os.listdir(d) if "tmp" in n.lower()]


# ------------------------------------------------------------------- tests
def scheme_configs():
    """(scheme, format, pow2, rceil) for every scheme in both formats
    (fp8-row x fp8 is refused: test_names_and_args)."""
    out = []
    for fmt in FORMATS:
        for pow2 in (False, True):
            out.append(("fp8-tensor", fmt, pow2, False))
    for pow2 in (False, True):
        out.append(("fp8-row", "compressed-tensors", pow2, False))
    for fmt in FORMATS:
        for pow2 in (False, True):
            out.append(("fp8-block", fmt, pow2, False))
    for fmt in FORMATS:
        for rceil in (False, True):  # --rounding floor, and the default (rceil)
            out.append(("mxfp8", fmt, False, rceil))
    return out


def test_schemes(tmp, rng, cuda):
    src_path = os.path.join(tmp, "model.safetensors")
    src = make_checkpoint(src_path, rng)
    blk_path = os.path.join(tmp, "block.safetensors")
    blk = make_block_checkpoint(blk_path, rng)
    for scheme, fmt, pow2, rceil in scheme_configs():
        tag = "%s --format %s%s%s" % (scheme, fmt, " --pow2" if pow2 else "", " rceil" if rceil else "")
        inp, isrc = (blk_path, blk) if scheme == "fp8-block" else (src_path, src)
        q_path = os.path.join(tmp, "q.safetensors")
        opts = ["--scheme", scheme, "--format", fmt, "--exclude", "excl*", "--force"] + \
            (["--pow2"] if pow2 else []) + (["--rounding", "floor"] if scheme == "mxfp8" and not rceil else [])
        r = run("quantize", inp, q_path, "--backend", "cpu", *opts)
        check(r.returncode == 0, "%s: quantize exit 0 (%s)" % (tag, r.stderr.strip()))
        if r.returncode:
            continue
        out, meta = st_read(q_path)
        reasons = check_quantized(tag, isrc, out, meta, scheme, fmt, pow2, rceil, exclude=("excl*",))
        check_warnings(tag, r, reasons)
        check_summary(tag, r, fmt, reasons)
        check_with_torch(tag, q_path, out)
        # --json: the same file, and the summary as JSON
        j_path = os.path.join(tmp, "qj.safetensors")
        r = run("quantize", inp, j_path, "--backend", "cpu", "--json", *opts)
        check_json_summary(tag, r, scheme, fmt, reasons)
        check(r.returncode == 0 and open(j_path, "rb").read() == open(q_path, "rb").read(),
              "%s: --json writes the same file" % tag)
        if scheme == "fp8-block":  # the loaders' limits: kept, and named
            check(reasons["oddk.weight"] == "shape" and reasons["tail.weight"] == ("shape" if fmt == "fp8" else None),
                  "%s: fixture: oddk kept in both formats, tail kept by --format fp8 only" % tag)
        check_inspect(tag, q_path, scheme, fmt)
        if cuda:
            c_path = os.path.join(tmp, "q_cuda.safetensors")
            r = run("quantize", inp, c_path, "--backend", "cuda", *opts)
            check(r.returncode == 0, "%s: quantize --backend cuda (%s)" % (tag, r.stderr.strip()))
            check(r.returncode == 0 and open(c_path, "rb").read() == open(q_path, "rb").read(),
                  "%s: the CUDA backend writes the same file as the CPU backend" % tag)
        for outdt in ("bf16", "f32"):
            d_path = os.path.join(tmp, "d.safetensors")
            r = run("dequantize", q_path, d_path, "--dtype", outdt, "--backend", "cpu", "--force",
                    *(["--json"] if outdt == "f32" else []))
            check(r.returncode == 0, "%s: dequantize --dtype %s (%s)" % (tag, outdt, r.stderr.strip()))
            if r.returncode:
                continue
            if outdt == "f32":
                try:
                    conv = json.loads(r.stdout).get("convention")
                except ValueError:
                    conv = None
                check(conv == fmt, "%s: dequantize --json names the convention %s (%r)" % (tag, fmt, r.stdout))
            else:
                check(fmt in r.stdout and "dequantized" in r.stdout,
                      "%s: dequantize's summary names the convention (%r)" % (tag, r.stdout))
            dout, dmeta = st_read(d_path)
            check_dequantized("%s deq %s" % (tag, outdt), out, dout, scheme, outdt)
            check("quantization" not in dmeta and dmeta.get("format") == "pt", "%s: dequantize metadata" % tag)
            if cuda:  # equal up to NaN payloads, which docs/spec.md leaves open for dequantized values
                c_path = os.path.join(tmp, "d_cuda.safetensors")
                r = run("dequantize", q_path, c_path, "--dtype", outdt, "--backend", "cuda", "--force")
                check(r.returncode == 0, "%s: CUDA dequantize --dtype %s (%s)" % (tag, outdt, r.stderr.strip()))
                if r.returncode == 0:
                    check_same_values("%s: CUDA dequantize --dtype %s" % (tag, outdt), dout, st_read(c_path)[0])
    # mxfp8 rounds with rceil unless --rounding floor says otherwise (the
    # library's own quantize default stays floor): the default and an explicit
    # --rounding rceil write the same file, floor another
    got = {}
    for what, extra in (("default", []), ("rceil", ["--rounding", "rceil"]), ("floor", ["--rounding=floor"])):
        p = os.path.join(tmp, "mx_%s.safetensors" % what)
        r = run("quantize", src_path, p, "--scheme", "mxfp8", "--exclude", "excl*", "-q", *extra)
        got[what] = open(p, "rb").read() if r.returncode == 0 else None
    check(got["default"] is not None and got["default"] == got["rceil"] and got["floor"] not in (None, got["default"]),
          "mxfp8: the default rounding is rceil, floor still selectable")
    # compressed-tensors decompresses mxfp8 to bfloat16 only: a float16 (or
    # float32) weight gets a warning there, not in the fp8 format, and a
    # bfloat16 model none
    bfp = os.path.join(tmp, "bf16only.safetensors")
    st_write(bfp, {"a.weight": src["bf.weight"], "b.weight": src["big.weight"]}, META)
    for inp, fmt, want in ((src_path, "compressed-tensors", True), (src_path, "fp8", False),
                           (bfp, "compressed-tensors", False)):
        p = os.path.join(tmp, "mx_warn.safetensors")
        r = run("quantize", inp, p, "--scheme", "mxfp8", "--format", fmt, "--force",
                *(["--exclude", "excl*"] if inp == src_path else []))
        warned = [ln for ln in r.stderr.splitlines() if "warning" in ln and "bfloat16" in ln]
        check(r.returncode == 0 and bool(warned) == want and
              (not want or ("float16" in warned[0] and "dequantize=True" in warned[0] and "--format fp8" in warned[0])),
              "mxfp8 --format %s on %s: %s warning about compressed-tensors' bfloat16-only mxfp8 path (%s)" % (
                  fmt, "float16/float32 weights" if inp == src_path else "a bfloat16 model", "a" if want else "no",
                  r.stderr.strip()))
    # mxfp8's two formats hold the same bytes under two names and dtypes
    a, b = os.path.join(tmp, "mx_fp8.safetensors"), os.path.join(tmp, "mx_ct.safetensors")
    ra = run("quantize", src_path, a, "--scheme", "mxfp8", "--format", "fp8", "--exclude", "excl*")
    rb = run("quantize", src_path, b, "--scheme", "mxfp8", "--format", "ct", "--exclude", "excl*")
    if ra.returncode == 0 and rb.returncode == 0:
        ta, tb = st_read(a)[0], st_read(b)[0]
        same = all(ta[n][2] == tb[n][2] and ta[n + "_scale_inv"][2] == tb[n + "_scale"][2]
                   for n in src if ta.get(n, ("",))[0] == "F8_E4M3")
        check(same, "mxfp8: --format fp8 (F8_E8M0) and compressed-tensors (U8) store the same codes and scale bytes")
    else:
        check(False, "mxfp8 in both formats (%s %s)" % (ra.stderr.strip(), rb.stderr.strip()))
    return src_path, blk_path


def test_keep(tmp, rng, src_path):
    """Weights kept in high precision: the loaders' shape limits (with a
    warning), --exclude by tensor or module name, the default exclusions
    (embeddings, router gates, lm_head) with --include / --quantize-all, and
    globs that match nothing."""
    # mxfp8 with K = 33 (and 100): kept with a warning naming it, the rest quantized
    k33 = os.path.join(tmp, "k33.safetensors")
    src = make_checkpoint(k33, rng, {"odd.weight": ("BF16", [4, 33], bf16_bits(rng.standard_normal((4, 33))).tobytes()),
                                     "odd2.weight": ("F32", [64, 100],
                                                     rng.standard_normal((64, 100)).astype(np.float32).tobytes())})
    o = os.path.join(tmp, "k33_out.safetensors")
    for fmt in FORMATS:
        tag = "mxfp8 K=33 --format %s" % fmt
        r = run("quantize", k33, o, "--scheme", "mxfp8", "--format", fmt, "--force")
        check(r.returncode == 0, "%s: exit 0, the weight kept (rc %d: %s)" % (tag, r.returncode, r.stderr.strip()))
        if r.returncode == 0:
            out, meta = st_read(o)
            reasons = check_quantized(tag, src, out, meta, "mxfp8", fmt)
            check(reasons["odd.weight"] == reasons["odd2.weight"] == "shape", "%s: fixture" % tag)
            check_warnings(tag, r, reasons)
            check_summary(tag, r, fmt, reasons)
    # the warning is not a summary: --json and --quiet still print it on stderr
    for flag in ("--json", "--quiet"):
        r = run("quantize", k33, o, "--scheme", "mxfp8", "--force", flag)
        check(r.returncode == 0 and warned_names(r.stderr, src) == {"odd.weight", "odd2.weight"},
              "mxfp8 K=33 %s: the warning naming odd.weight and odd2.weight is still on stderr (%r)" % (flag, r.stderr))
    # --exclude by module name (no ".weight"): kept without a warning
    r = run("quantize", k33, o, "--scheme", "mxfp8", "--force", "--exclude", "odd", "--exclude", "odd2")
    check(r.returncode == 0, "--exclude MODULE (%s)" % r.stderr.strip())
    if r.returncode == 0:
        out, meta = st_read(o)
        reasons = check_quantized("mxfp8 --exclude odd", src, out, meta, "mxfp8", "compressed-tensors",
                                  exclude=("odd", "odd2"))
        check(reasons["odd.weight"] == "exclude", "fixture: --exclude odd names odd.weight's module")
        check(warned_names(r.stderr, src) == set(), "excluded weights are not warned about (%r)" % r.stderr)
    # fp8-block on the general fixture: most weights cannot be blocks of 128
    for fmt in FORMATS:
        tag = "fp8-block on K %% 128 != 0 --format %s" % fmt
        r = run("quantize", k33, o, "--scheme", "fp8-block", "--format", fmt, "--force")
        check(r.returncode == 0, "%s: exit 0 (%s)" % (tag, r.stderr.strip()))
        if r.returncode == 0:
            out, meta = st_read(o)
            reasons = check_quantized(tag, src, out, meta, "fp8-block", fmt)
            check(reasons["big.weight"] is None and reasons["edge.weight"] == "shape", "%s: fixture" % tag)
            check_warnings(tag, r, reasons)
    # default exclusions, by the module's last name
    names = {
        "model.embed_tokens.weight": [64, 128], "transformer.wte.weight": [64, 128],
        "transformer.wpe.weight": [64, 128], "tok_embeddings.weight": [64, 128],
        "model.embed_positions.weight": [64, 128], "bert.embeddings.word_embeddings.weight": [64, 128],
        "model.layers.0.block_sparse_moe.gate.weight": [8, 128], "model.layers.0.mlp.gate.weight": [8, 128],
        "model.layers.0.feed_forward.router.weight": [8, 128],
        "model.layers.0.mlp.shared_expert_gate.weight": [1, 128], "model.layers.0.mlp.router_gate.weight": [8, 128],
        "model.layers.0.mlp.gate_proj.weight": [64, 128], "model.layers.0.mlp.gate_up_proj.weight": [64, 128],
        "model.layers.0.self_attn.q_proj.weight": [64, 128], "model.layers.0.mlp.gate.bias": [8],
        "lm_head.weight": [64, 128], "output.weight": [64, 128], "gpt_neox.embed_out.weight": [64, 128],
    }
    dsrc = {n: ("BF16", s, bf16_bits(rng.standard_normal(s)).tobytes()) for n, s in names.items()}
    dpath = os.path.join(tmp, "defaults.safetensors")
    st_write(dpath, dsrc, META)
    variants = [("defaults", [], (), False), ("--quantize-all", ["--quantize-all"], (), True),
                ("--include", ["--include", "*wte", "--include", "model.layers.0.mlp.gate",
                               "--include", "*.embed_tokens.weight"],
                 ("*wte", "model.layers.0.mlp.gate", "*.embed_tokens.weight"), False)]
    for what, extra, include, qall in variants:
        for scheme, fmt in (("fp8-row", "compressed-tensors"), ("fp8-tensor", "fp8")):
            tag = "default exclusions, %s, %s --format %s" % (what, scheme, fmt)
            r = run("quantize", dpath, o, "--scheme", scheme, "--format", fmt, "--force", *extra)
            check(r.returncode == 0, "%s: exit 0 (%s)" % (tag, r.stderr.strip()))
            if r.returncode:
                continue
            out, meta = st_read(o)
            reasons = check_quantized(tag, dsrc, out, meta, scheme, fmt, include=include, quantize_all=qall)
            check_summary(tag, r, fmt, reasons)
            check(warned_names(r.stderr, dsrc) == set(), "%s: default exclusions are not warnings" % tag)
    # an --exclude or --include glob that matches no tensor: an error, nothing written
    o2 = os.path.join(tmp, "nomatch.safetensors")
    for opt in ("--exclude", "--include"):
        r = run("quantize", dpath, o2, "--scheme", "fp8-row", opt, "*nothing_like_this*")
        check(refused_request(r) and "nothing_like_this" in r.stderr and not os.path.exists(o2) and
              leftovers(tmp) == [], "%s matching no tensor: refused, exit 2, one line (rc %d: %s)" % (
                  opt, r.returncode, r.stderr.strip()))
    r = run("quantize", dpath, o2, "--scheme", "fp8-row", "--exclude", "*gate.bias")
    check(r.returncode == 0, "an --exclude matching a tensor that is no weight is accepted (%s)" % r.stderr.strip())


def test_refusals(tmp, rng):
    """An input holding any F8_* tensor is refused for quantize (even when the
    tensor is excluded); a weight whose scale name is taken is refused."""
    o = os.path.join(tmp, "refused.safetensors")
    fp8_inputs = {
        "F8_E5M2 weight": {"e5.weight": ("F8_E5M2", [3, 5], bytes(range(15)))},
        "F8_E4M3 weight + scale": {"w8.weight": ("F8_E4M3", [4, 32], bytes(range(128))),
                                   "w8.weight_scale": ("F32", [1], struct.pack("<f", 0.5))},
        "F8_E8M0 tensor": {"s.e8m0": ("F8_E8M0", [4], b"\x7f\x80\x81\x7e")},
    }
    for what, extra in fp8_inputs.items():
        p = os.path.join(tmp, "fp8in.safetensors")
        make_checkpoint(p, rng, extra)
        bad = list(extra)[0]
        for scheme, opts in (("fp8-row", []), ("mxfp8", ["--format", "fp8"]),
                             ("fp8-block", ["--exclude", bad])):
            r = run("quantize", p, o, "--scheme", scheme, *opts)
            check(refused_request(r) and bad in r.stderr and "fp8" in r.stderr and not os.path.exists(o) and
                  leftovers(tmp) == [], "%s: quantize --scheme %s %s refused naming %s, exit 2 (rc %d: %s)" % (
                      what, scheme, " ".join(opts), bad, r.returncode, r.stderr.strip()))
        # dequantize: an fp8 tensor without a scale tensor is refused (nothing
        # written) unless --exclude leaves it as it is; a file without any
        # F8_E4M3 / F8_E5M2 tensor is copied with a warning
        r = run("dequantize", p, o)
        if what == "F8_E5M2 weight":
            check(r.returncode == 1 and "e5.weight" in r.stderr and "no scale tensor" in r.stderr and
                  not os.path.exists(o) and leftovers(tmp) == [],
                  "%s: dequantize refuses an fp8 tensor without a scale, nothing written (rc %d: %s)" % (
                      what, r.returncode, r.stderr.strip()))
            r = run("dequantize", p, o, "--exclude", "e5.weight", "--force")
            check(r.returncode == 0 and st_read(o)[0].get("e5.weight") == extra["e5.weight"] and
                  "warning" in r.stderr and "left as it is" in r.stderr,
                  "%s: dequantize --exclude copies it, with a warning that the output stays quantized (rc %d: %s)"
                  % (what, r.returncode, r.stderr.strip()))
        elif what == "F8_E8M0 tensor":
            check(r.returncode == 0 and "warning" in r.stderr and "nothing to dequantize" in r.stderr and
                  st_read(o)[0] == st_read(p)[0],
                  "%s: no fp8 weight tensor: copied, with a warning (rc %d: %s)" % (what, r.returncode,
                                                                                   r.stderr.strip()))
        else:
            check(r.returncode == 0 and "warning" not in r.stderr,
                  "%s: dequantize accepts it (%s)" % (what, r.stderr.strip()))
        if os.path.exists(o):
            os.unlink(o)
    p = os.path.join(tmp, "taken.safetensors")
    make_checkpoint(p, rng, {"big.weight_scale": ("F32", [1], struct.pack("<f", 2.0))})
    r = run("quantize", p, o, "--scheme", "fp8-tensor", "--format", "compressed-tensors")
    check(refused_request(r) and "big.weight_scale" in r.stderr and not os.path.exists(o) and leftovers(tmp) == [],
          "a weight whose scale name is taken is refused, exit 2 (rc %d: %s)" % (r.returncode, r.stderr.strip()))


def inspect_quant(path):
    """(exit status, "quantization: ..." text, --json's quantization and
    quantization_valid, stderr) of `fp8kit inspect PATH`."""
    r = run("inspect", path)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("quantization: ")]
    rj = run("inspect", path, "--json")
    try:
        j = json.loads(rj.stdout)
    except ValueError:
        j = {}
    return (r.returncode, lines[-1][len("quantization: "):] if lines else "", j.get("quantization"),
            j.get("quantization_valid"), r.stderr, rj.returncode)


def test_dequantize_rules(tmp, rng):
    """dequantize reads every scale convention inspect names (per-tensor
    scales [], [1] and [1, 1] in F32 / BF16 / F16, both names), and the two
    agree on what is invalid: a weight with both _scale and _scale_inv, an
    fp8 tensor without a scale, a scale that fits no scheme (dequantize:
    exit 1, nothing written; inspect: the tensors listed, exit 1). The
    "quantization" metadata entry goes only when every fp8 tensor was
    dequantized."""
    o = os.path.join(tmp, "rules_out.safetensors")
    meta = {"format": "pt", "quantization": '{"tool":"someone"}'}
    for conv in ("_scale_inv", "_scale"):
        t, schemes = {}, {}
        for i, (sdt, sshape) in enumerate((("F32", [1, 1]), ("BF16", [1, 1]), ("F16", [1, 1]), ("F32", []),
                                            ("BF16", [1]))):
            name = "moe.experts.%d.w1.weight" % i
            t[name] = ("F8_E4M3", [256, 160], fp8_codes(rng, (256, 160)))
            t[name + conv] = (sdt, sshape, scale_bytes(sdt, [0.37 * (i + 1)]))
            schemes[name] = "fp8-tensor"
        t["norm.weight"] = ("F32", [8], rng.standard_normal(8).astype(np.float32).tobytes())
        p = os.path.join(tmp, "pertensor.safetensors")
        st_write(p, t, meta)
        tag = "per-tensor scales %s ([1, 1], [], [1]; F32, BF16, F16)" % conv
        rc, line, jline, valid, err, jrc = inspect_quant(p)
        check(rc == 0 and jrc == 0 and valid is True and "5 weights tensor" in line and "invalid" not in line,
              "%s: inspect names them all as per-tensor (rc %d: %r %s)" % (tag, rc, line, err.strip()))
        for outdt in ("f32", "bf16"):
            r = run("dequantize", p, o, "--dtype", outdt, "--force")
            check(r.returncode == 0, "%s: dequantize --dtype %s reads them (%s)" % (tag, outdt, r.stderr.strip()))
            if r.returncode == 0:
                out, ometa = st_read(o)
                check_dequantized("%s %s" % (tag, outdt), t, out, "fp8-tensor", outdt)
                check("quantization" not in ometa and ometa.get("format") == "pt",
                      "%s: every fp8 tensor dequantized: the quantization metadata entry removed" % tag)
    if os.path.exists(o):
        os.unlink(o)
    # the invalid cases: the same verdict from inspect and dequantize
    w = ("F8_E4M3", [128, 128], fp8_codes(rng, (128, 128)))
    good = {"ok.weight": w, "ok.weight_scale": ("F32", [1], scale_bytes("F32", [0.5]))}
    cases = [
        ("both _scale and _scale_inv", {"b.weight": w, "b.weight_scale": ("F32", [1], scale_bytes("F32", [0.5])),
                                        "b.weight_scale_inv": ("F32", [], scale_bytes("F32", [0.5]))},
         "b.weight", "ambiguous"),
        ("no scale tensor", {"n.weight": w}, "n.weight", "no scale tensor"),
        ("a scale that fits no scheme", {"s.weight": w, "s.weight_scale": ("F32", [3, 5], bytes(60))},
         "s.weight_scale", "does not fit any scale scheme"),
    ]
    for what, extra, needle, why in cases:
        p = os.path.join(tmp, "invalid.safetensors")
        st_write(p, dict(good, **extra), meta)
        rc, line, jline, valid, err, jrc = inspect_quant(p)
        check(rc == 1 and jrc == 1 and valid is False and "invalid" in line and needle in err and why in err,
              "%s: inspect lists it and exits 1 naming %s (%s) (rc %d/%d: %r %s)" % (what, needle, why, rc, jrc, line,
                                                                                  err.strip()))
        check(jline == line, "%s: inspect --json has the same quantization text" % what)
        r = run("dequantize", p, o, "--force")
        check(r.returncode == 1 and needle in r.stderr and why in r.stderr and not os.path.exists(o) and
              leftovers(tmp) == [], "%s: dequantize refuses it naming %s, nothing written (rc %d: %s)" % (
                  what, needle, r.returncode, r.stderr.strip()))
        # excluded, it is left as it is: the output stays quantized (metadata kept)
        r = run("dequantize", p, o, "--exclude", needle.replace("_scale", ""), "--force")
        ok = r.returncode == 0 and "left as it is" in r.stderr
        if ok:
            out, ometa = st_read(o)
            ok = ometa.get("quantization") == meta["quantization"] and out["ok.weight"][0] == "BF16"
        check(ok, "%s: --exclude leaves it, dequantizes the rest, keeps the metadata entry, warns (rc %d: %s)" % (
            what, r.returncode, r.stderr.strip()))
        if os.path.exists(o):
            os.unlink(o)
    # no fp8 tensor at all: a warning, everything copied, the metadata entry kept
    p = os.path.join(tmp, "plain.safetensors")
    st_write(p, {"norm.weight": ("F32", [8], bytes(32))}, meta)
    r = run("dequantize", p, o, "--force")
    check(r.returncode == 0 and "warning" in r.stderr and "nothing to dequantize" in r.stderr and
          st_read(o) == st_read(p), "no fp8 tensor: copied as it is, with a warning (rc %d: %s)" % (
              r.returncode, r.stderr.strip()))
    os.unlink(p)


def refused_request(r):
    """A request refused before anything is written (OUT inside IN, a glob
    matching nothing, an fp8 input to quantize): exit status 2 and one line
    on stderr saying nothing was written, like a bad argument."""
    return (r.returncode == 2 and r.stderr.count("\n") == 1 and "nothing was written" in r.stderr and
            "out of range" not in r.stderr)


def one_line_usage_error(r, cmd):
    """Issue 19.3: exit status 2, nothing on stdout, one line on stderr that
    points to the command's --help."""
    return (r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1 and
            ("try 'fp8kit %s --help'" % cmd) in r.stderr and "usage:" not in r.stderr)


def test_names_and_args(tmp, src_path, blk_path):
    """Issue 19: the Python / C scheme and dtype names are accepted next to the
    CLI's (same files), --opt=value and options after IN OUT work, and a bad
    argument is one line on stderr with exit status 2. Issue 20: the --format
    names and aliases, the default format of each scheme."""
    schemes = {"fp8-tensor": ["tensor", "tensorwise", "per_tensor", "TENSOR"],
               "fp8-row": ["row", "rowwise", "per_row"],
               "fp8-block": ["block", "block128x128", "128x128"],
               "mxfp8": ["mx", "MX", "MXFP8"]}
    for canon, aliases in schemes.items():
        inp = blk_path if canon == "fp8-block" else src_path
        ref = os.path.join(tmp, "names_ref.safetensors")
        r = run("quantize", inp, ref, "--scheme", canon, "--exclude", "excl*", "--backend", "cpu", "--force")
        check(r.returncode == 0, "quantize --scheme %s (%s)" % (canon, r.stderr.strip()))
        want = open(ref, "rb").read() if r.returncode == 0 else None
        for i, alias in enumerate(aliases):
            o = os.path.join(tmp, "names_%d.safetensors" % i)
            # alternate the spellings of the options: --opt=value, options after and before IN OUT, -q
            if i % 2:
                r = run("quantize", "--scheme=" + alias, "--exclude=excl*", "--backend=cpu", "--threads=1", inp,
                        o, "-q")
            else:
                r = run("quantize", inp, o, "--scheme", alias, "--exclude", "excl*", "--backend", "cpu", "--quiet")
            check(r.returncode == 0 and r.stdout == "" and os.path.exists(o) and open(o, "rb").read() == want,
                  "quantize --scheme %s writes what --scheme %s writes (rc %d: %s)" % (alias, canon, r.returncode,
                                                                                     r.stderr.strip()))
            if os.path.exists(o):
                os.unlink(o)
        # the default format, and every spelling of both formats
        for fmt, spellings in (("fp8", ["fp8", "finegrained-fp8", "deepseek"]),
                               ("compressed-tensors", ["compressed-tensors", "compressed_tensors", "ct"])):
            if canon == "fp8-row" and fmt == "fp8":
                continue
            got = []
            for i, sp in enumerate(spellings):
                o = os.path.join(tmp, "fmt_%d.safetensors" % i)
                r = run("quantize", inp, o, "--scheme", canon, "--exclude", "excl*", "--backend", "cpu", "-q",
                        *(["--format=" + sp] if i % 2 else ["--format", sp]))
                check(r.returncode == 0, "quantize --scheme %s --format %s (%s)" % (canon, sp, r.stderr.strip()))
                got.append(open(o, "rb").read() if r.returncode == 0 else None)
                if os.path.exists(o):
                    os.unlink(o)
            check(got[0] is not None and all(g == got[0] for g in got),
                  "--scheme %s: --format %s writes the same file" % (canon, " / ".join(spellings)))
            if fmt == default_format(canon):
                check(got[0] == want, "--scheme %s: the default format is %s" % (canon, fmt))
            else:
                check(got[0] != want, "--scheme %s: --format %s differs from the default" % (canon, fmt))
    q = os.path.join(tmp, "names_q.safetensors")
    run("quantize", src_path, q, "--scheme", "fp8-row", "--exclude", "excl*", "--backend", "cpu", "--force")
    dtypes = {"bf16": ["bfloat16", "BF16"], "f32": ["fp32", "float32", "float"], "f16": ["fp16", "float16", "half"]}
    for canon, aliases in dtypes.items():
        ref = os.path.join(tmp, "names_dref.safetensors")
        r = run("dequantize", q, ref, "--dtype", canon, "--backend", "cpu", "--force")
        check(r.returncode == 0, "dequantize --dtype %s (%s)" % (canon, r.stderr.strip()))
        want = open(ref, "rb").read() if r.returncode == 0 else None
        for i, alias in enumerate(aliases):
            o = os.path.join(tmp, "names_d%d.safetensors" % i)
            r = run("dequantize", q, o, "--dtype=" + alias, "--backend=cpu", "-q") if i % 2 else \
                run("dequantize", "--dtype", alias, q, o, "--quiet")
            check(r.returncode == 0 and os.path.exists(o) and open(o, "rb").read() == want,
                  "dequantize --dtype %s writes what --dtype %s writes (rc %d: %s)" % (alias, canon, r.returncode,
                                                                                     r.stderr.strip()))
            if os.path.exists(o):
                os.unlink(o)
    # --help shows the names side by side, points to docs/spec.md, never to SPEC.md
    h = run("quantize", "--help")
    check(h.returncode == 0 and h.stderr == "" and "fp8-tensor (= tensor" in h.stdout and
          "fp8-block (= block, block128x128" in h.stdout and "mxfp8 (= mx" in h.stdout, "quantize --help lists aliases")
    check("fp8 (= finegrained-fp8, deepseek" in h.stdout and "compressed-tensors (= compressed_tensors, ct" in h.stdout,
          "quantize --help lists the --format aliases")
    for opt in ("--format", "--include", "--quantize-all", "--exclude"):
        check(opt in h.stdout, "quantize --help documents %s" % opt)
    d = run("dequantize", "--help")
    check(d.returncode == 0 and "f32 (= fp32, float32" in d.stdout and "bf16 (= bfloat16" in d.stdout,
          "dequantize --help lists dtype aliases")
    for r in (h, d, run("inspect", "--help")):
        check("SPEC" not in r.stdout and "PERF" not in r.stdout and "shared/" not in r.stdout,
              "--help does not point to SPEC.md / PERF.md")
    check("docs/spec.md section 5" in h.stdout, "quantize --help points to docs/spec.md section 5")
    # the table of names: fp8-block's compressed-tensors scale is X.weight_scale (not weight_scale_inv); the fp8
    # format is not what vLLM loads for fp8-tensor; rceil is the mxfp8 default
    rows = [ln for ln in h.stdout.splitlines() if ln.startswith("  fp8-block ")]
    check(len(rows) == 1 and rows[0].count("X.weight_scale_inv F32") == 1 and "X.weight_scale F32" in rows[0],
          "quantize --help: fp8-block's row names X.weight_scale_inv (fp8) and X.weight_scale (compressed-tensors) "
          "(%r)" % rows)
    flat = " ".join(h.stdout.split())
    check("vLLM does not load fp8-tensor in the fp8 format" in flat and "For vLLM use --format compressed-tensors"
          in flat, "quantize --help: vLLM and the fp8 format")
    check("rceil (default" in flat, "quantize --help: rceil is the default rounding")
    # bad arguments: one line, exit 2, nothing written
    o = os.path.join(tmp, "never.safetensors")
    cases = [(["quantize", src_path], "expects IN and OUT"),
             (["quantize", src_path, o, "extra", "--scheme", "row"], "unexpected argument 'extra'"),
             (["quantize", src_path, o], "--scheme is required"),
             (["quantize", src_path, o, "--scheme", "block1x128"], "--scheme expects fp8-tensor"),
             (["quantize", src_path, o, "--scheme"], "'--scheme' needs a value"),
             (["quantize", src_path, o, "--scheme=mx", "--pow2"], "--pow2"),
             (["quantize", src_path, o, "--scheme", "row", "--rounding", "rceil"], "--rounding applies to mxfp8"),
             (["quantize", src_path, o, "--scheme", "row", "--rounding=up"], "--rounding expects floor or rceil"),
             (["quantize", src_path, o, "--scheme", "row", "--dtype", "f32"], "unknown option '--dtype'"),
             (["quantize", src_path, o, "--scheme", "row", "--force=yes"], "'--force' takes no value"),
             (["quantize", src_path, o, "--scheme", "row", "--format", "fp8"], "fp8-row"),
             (["quantize", src_path, o, "--scheme=per_row", "--format=deepseek"], "fp8-row"),
             (["quantize", src_path, o, "--scheme", "tensor", "--format", "bogus"], "--format expects fp8 or "
                                                                                   "compressed-tensors"),
             (["quantize", src_path, o, "--scheme", "tensor", "--format"], "'--format' needs a value"),
             (["quantize", src_path, o, "--scheme", "tensor", "--include"], "'--include' needs a value"),
             (["quantize", src_path, o, "--scheme", "tensor", "--quantize-all=1"], "'--quantize-all' takes no value"),
             (["dequantize", src_path, o, "--format", "fp8"], "unknown option '--format'"),
             (["dequantize", src_path, o, "--quantize-all"], "unknown option '--quantize-all'"),
             (["dequantize", src_path, o, "--dtype", "e4m3"], "not accepted here"),
             (["dequantize", src_path, o, "--dtype", "f64"], "--dtype expects f32, f16 or bf16"),
             (["dequantize", src_path, o, "--scheme", "row"], "unknown option '--scheme'"),
             (["dequantize", src_path, o, "--threads=x"], "--threads expects an integer"),
             (["inspect"], "expects a FILE or DIR"),
             (["inspect", src_path, src_path], "unexpected argument"),
             (["inspect", src_path, "--bogus"], "unknown option '--bogus'")]
    for args, needle in cases:
        r = run(*args)
        check(one_line_usage_error(r, args[0]) and needle in r.stderr and not os.path.exists(o),
              "fp8kit %s: one-line usage error with %r (rc %d: %r)" % (" ".join(args[:1] + args[2:]), needle,
                                                                     r.returncode, r.stderr))


def test_sharded(tmp, rng):
    d = os.path.join(tmp, "sharded")
    os.makedirs(d)
    a = {"l0.weight": ("BF16", [256, 128], bf16_bits(rng.standard_normal((256, 128))).tobytes()),
         "l0.norm": ("F32", [64], rng.standard_normal(64).astype(np.float32).tobytes()),
         "l2.weight": ("BF16", [130, 64], bf16_bits(rng.standard_normal((130, 64))).tobytes())}
    b = {"l1.weight": ("F32", [128, 256], rng.standard_normal((128, 256)).astype(np.float32).tobytes()),
         "emb": ("BF16", [10, 64], bf16_bits(rng.standard_normal((10, 64))).tobytes())}
    st_write(os.path.join(d, "model-00001-of-00002.safetensors"), a, {"format": "pt"})
    st_write(os.path.join(d, "model-00002-of-00002.safetensors"), b, {"format": "pt"})
    wm = {k: "model-00001-of-00002.safetensors" for k in a}
    wm.update({k: "model-00002-of-00002.safetensors" for k in b})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0, "extra": "kept"}, "weight_map": wm}, f)
    out = os.path.join(tmp, "sharded_fp8")
    r = run("quantize", d, out, "--scheme", "fp8-block")
    check(r.returncode == 0, "sharded quantize (%s)" % r.stderr.strip())
    if r.returncode:
        return
    allsrc = dict(a)
    allsrc.update(b)
    reasons = {n: keep_reason(n, dt, s, "fp8-block", "fp8") for n, (dt, s, _) in allsrc.items()}
    check_warnings("sharded fp8-block", r, reasons)
    check_summary("sharded fp8-block", r, "fp8", reasons)
    r = run("quantize", d, os.path.join(tmp, "sharded_json"), "--scheme", "fp8-block", "--json")
    check_json_summary("sharded fp8-block", r, "fp8-block", "fp8", reasons, other_files=0)
    shutil.rmtree(os.path.join(tmp, "sharded_json"), ignore_errors=True)
    check(sorted(os.listdir(out)) == sorted(os.listdir(d)), "sharded output: the shards and the index, no config.json "
          "made up (%s)" % sorted(os.listdir(out)))
    with open(os.path.join(out, "model.safetensors.index.json")) as f:
        ix = json.load(f)
    wm2 = ix["weight_map"]
    check(wm2.get("l0.weight_scale_inv") == "model-00001-of-00002.safetensors" and
          wm2.get("l1.weight_scale_inv") == "model-00002-of-00002.safetensors" and len(wm2) == 7,
          "new index maps the scales to their weight's shard (%s)" % wm2)
    check(ix["metadata"].get("extra") == "kept", "index metadata kept")
    total = 0
    for shard, src in (("model-00001-of-00002.safetensors", a), ("model-00002-of-00002.safetensors", b)):
        t, meta = st_read(os.path.join(out, shard))
        check(all(wm2.get(n) == shard for n in t), "index weight_map lists every tensor of %s" % shard)
        total += sum(len(v[2]) for v in t.values())
        check_quantized("sharded %s" % shard, src, t, meta, "fp8-block", "fp8", src_meta={"format": "pt"})
    check(ix["metadata"]["total_size"] == total, "index total_size = tensor bytes")
    check(leftovers(tmp) == [], "no temporary directory left (%s)" % leftovers(tmp))
    r = run("quantize", d, out, "--scheme", "fp8-block")
    check(refused_existing(r, out), "sharded output not overwritten without --force (rc %d: %r)" % (r.returncode,
                                                                                               r.stderr))
    r = run("dequantize", out, os.path.join(tmp, "sharded_bf16"), "--json")
    check(r.returncode == 0, "sharded dequantize (%s)" % r.stderr.strip())
    if r.returncode == 0:
        check(json.loads(r.stdout).get("convention") == "fp8", "sharded dequantize: convention fp8 (%s)" % r.stdout)
        qt = {}
        for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
            qt.update(st_read(os.path.join(out, shard))[0])
        dt = {}
        for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
            dt.update(st_read(os.path.join(tmp, "sharded_bf16", shard))[0])
        check_dequantized("sharded dequantize", qt, dt, "fp8-block", "bf16")
        with open(os.path.join(tmp, "sharded_bf16", "model.safetensors.index.json")) as f:
            ix2 = json.load(f)
        check(len(ix2["weight_map"]) == 5 and ix2["metadata"]["total_size"] == sum(len(v[2]) for v in dt.values()),
              "dequantized index lists 5 tensors and their total size")
    # corrupt sharded inputs
    cases = {
        "missing shard": lambda ix: ix["weight_map"].update({"ghost": "model-00009.safetensors"}),
        "path escape": lambda ix: ix["weight_map"].update({"l0.norm": "../x.safetensors"}),
        "unlisted tensor": lambda ix: ix["weight_map"].pop("l0.norm"),
        "wrong shard": lambda ix: ix["weight_map"].update({"l0.norm": "model-00002-of-00002.safetensors"}),
    }
    for what, edit in cases.items():
        e = os.path.join(tmp, "badshard")
        shutil.rmtree(e, ignore_errors=True)
        shutil.copytree(d, e)
        with open(os.path.join(e, "model.safetensors.index.json")) as f:
            ix = json.load(f)
        edit(ix)
        with open(os.path.join(e, "model.safetensors.index.json"), "w") as f:
            json.dump(ix, f)
        o = os.path.join(tmp, "badshard_out")
        r = run("quantize", e, o, "--scheme", "fp8-row")
        check(r.returncode == 1 and not os.path.exists(o) and leftovers(tmp) == [] and "badshard" in r.stderr,
              "sharded %s fails cleanly (%s)" % (what, r.stderr.strip()))


def corrupt_cases(good):
    n = struct.unpack("<Q", good[:8])[0]
    hdr = json.loads(good[8:8 + n])
    data = good[8 + n:]

    def build(h, d=data, hlen=None):
        hb = h if isinstance(h, bytes) else json.dumps(h).encode()
        return struct.pack("<Q", len(hb) if hlen is None else hlen) + hb + d

    def edit(fn):
        h = json.loads(json.dumps(hdr))
        fn(h)
        return build(h)

    first = sorted((k for k in hdr if k != "__metadata__"), key=lambda k: hdr[k]["data_offsets"][0])
    t0, t1 = first[0], first[1]
    return {
        "truncated": (good[:len(good) - 100], "past"),
        "tiny": (good[:5], "truncated"),
        "header beyond file": (struct.pack("<Q", len(good)) + good[8:], "runs past"),
        "header over 100 MB": (struct.pack("<Q", 100_000_008) + good[8:], "100 MB"),
        "invalid UTF-8": (build(good[8:8 + n].replace(b'"ids"', b'"\xffds"')), "UTF-8"),
        "invalid JSON": (build(good[8:8 + n - 3] + b",,}"), "JSON"),
        "unknown dtype": (edit(lambda h: h["ids"].update(dtype="Q7")), "ids"),
        "shape mismatch": (edit(lambda h: h["ids"].update(shape=[6])), "ids"),
        "overlap": (edit(lambda h: h[t1].update(data_offsets=[h[t1]["data_offsets"][0] - 1,
                                                               h[t1]["data_offsets"][1] - 1])), "overlap"),
        "out of range": (edit(lambda h: h[t0].update(data_offsets=[len(data), len(data) +
                                                                   h[t0]["data_offsets"][1]])), t0),
        "duplicate name": (build(good[8:8 + n].rstrip()[:-1] +
                                 b',"ids":{"dtype":"I64","shape":[5],"data_offsets":[0,40]}}'), "ids"),
    }


def test_corrupt(tmp, src_path):
    good = open(src_path, "rb").read()
    for what, (blob, needle) in corrupt_cases(good).items():
        p = os.path.join(tmp, "bad.safetensors")
        with open(p, "wb") as f:
            f.write(blob)
        o = os.path.join(tmp, "bad_out.safetensors")
        for cmd in (["quantize", p, o, "--scheme", "fp8-row"], ["dequantize", p, o], ["inspect", p]):
            r = run(*cmd)
            check(r.returncode == 1 and "bad.safetensors" in r.stderr and needle in r.stderr,
                  "%s: %s fails naming the file and %r (rc %d: %s)" % (what, cmd[0], needle, r.returncode,
                                                                    r.stderr.strip()[:300]))
            check(not os.path.exists(o) and leftovers(tmp) == [], "%s: %s wrote nothing" % (what, cmd[0]))
        # the reference package agrees that the file is bad
        try:
            safetensors.deserialize(blob)
            ok = False
        except Exception:
            ok = True
        if what != "duplicate name":  # the reference keeps the last of two equal keys
            check(ok, "%s: the reference package rejects it too" % what)


def test_zero_numel(tmp):
    """Issue 21.5c: the reader and the writer share one shape rule. A tensor
    with a zero dim whose other dims times the element size overflow int64
    (F32 [2^62, 0]) used to pass inspect and fail quantize; now every command
    refuses it the same way. Shapes within the rule pass both ways."""
    def blob(hdr):
        h = json.dumps(hdr).encode()
        return struct.pack("<Q", len(h)) + h

    bad = blob({"w.weight": {"dtype": "F32", "shape": [2 ** 62, 0], "data_offsets": [0, 0]}})
    ok = blob({"w.weight": {"dtype": "F32", "shape": [2 ** 61 - 1, 0], "data_offsets": [0, 0]},
               "e": {"dtype": "U8", "shape": [0, 2 ** 63 - 1], "data_offsets": [0, 0]}})
    p = os.path.join(tmp, "zero_numel.safetensors")
    o = os.path.join(tmp, "zero_numel_out.safetensors")
    with open(p, "wb") as f:
        f.write(bad)
    for cmd in (["inspect", p], ["quantize", p, o, "--scheme", "fp8-tensor"], ["dequantize", p, o]):
        r = run(*cmd, timeout=60)
        check(r.returncode == 1 and "zero_numel.safetensors" in r.stderr and "'w.weight'" in r.stderr and
              "overflows" in r.stderr and (cmd[0] == "inspect" or "FP8KIT_ERR_CORRUPT_FILE" in r.stderr),
              "F32 [2^62, 0]: %s refuses it as the others do (rc %d: %s)" % (cmd[0], r.returncode, r.stderr.strip()))
        check(not os.path.exists(o) and leftovers(tmp) == [], "F32 [2^62, 0]: %s wrote nothing" % cmd[0])
    with open(p, "wb") as f:
        f.write(ok)
    r = run("inspect", p, timeout=60)
    check(r.returncode == 0, "F32 [2^61 - 1, 0]: inspect accepts it (%s)" % r.stderr.strip())
    r = run("quantize", p, o, "--scheme", "fp8-block", "--format", "ct", timeout=60)
    check(r.returncode == 0, "F32 [2^61 - 1, 0]: quantize writes what inspect accepted (%s)" % r.stderr.strip())
    if r.returncode == 0:
        t, _ = st_read(o)
        check(t["w.weight"][:2] == ("F8_E4M3", [2 ** 61 - 1, 0]) and
              t["w.weight_scale"][:2] == ("F32", [2 ** 54, 0]) and t["e"] == ("U8", [0, 2 ** 63 - 1], b""),
              "empty weight quantized, its scale grid [ceil(N/128), 0] (%s)" % {k: v[:2] for k, v in t.items()})
        os.unlink(o)
    os.unlink(p)


def run_limited(*args, timeout=30, **kw):
    """run() that turns a hang into a result (returncode None) instead of an exception."""
    try:
        return run(*args, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(e.cmd, None, e.stdout or "", "TIMEOUT after %d s" % timeout)


def small_sharded(d, rng):
    """A 2-shard checkpoint with config.json in d (for the special-file cases)."""
    os.makedirs(d)
    a = {"l0.weight": ("BF16", [32, 64], bf16_bits(rng.standard_normal((32, 64))).tobytes())}
    b = {"l1.weight": ("F32", [32, 64], rng.standard_normal((32, 64)).astype(np.float32).tobytes())}
    st_write(os.path.join(d, "s-1.safetensors"), a, {"format": "pt"})
    st_write(os.path.join(d, "s-2.safetensors"), b, {"format": "pt"})
    wm = dict({k: "s-1.safetensors" for k in a}, **{k: "s-2.safetensors" for k in b})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "llama"}, f)


def test_special_files(tmp, rng, src_path):
    """Issue 21.6: a FIFO, device or socket is never read and never replaced.
    open() used to run before the regular-file check, so a FIFO named by the
    index blocked forever; --force must not replace a non-regular OUT
    (a link to /dev/null as root: /dev/null survives)."""
    base = os.path.join(tmp, "special")
    os.makedirs(base)
    fifo = os.path.join(base, "pipe.safetensors")
    os.mkfifo(fifo)
    o = os.path.join(base, "out.safetensors")

    def refused(what, r, needle, out=o):
        check(r.returncode == 1 and needle in r.stderr and "not a regular file" in r.stderr,
              "%s: refused at once, naming %r (rc %s: %s)" % (what, needle, r.returncode, r.stderr.strip()[:300]))
        check(not os.path.lexists(out), "%s: no output" % what)
        check(leftovers(base) == [], "%s: nothing left (%s)" % (what, leftovers(base)))

    for cmd in (["quantize", fifo, o, "--scheme", "fp8-row"], ["dequantize", fifo, o], ["inspect", fifo]):
        refused("IN a FIFO (%s)" % cmd[0], run_limited(*cmd), "pipe.safetensors")
    # a model directory whose weights, shard, index or config.json is a FIFO
    d = os.path.join(base, "sharded")
    small_sharded(d, rng)
    for name in ("s-2.safetensors", "model.safetensors.index.json", "config.json"):
        e = os.path.join(base, "m_" + name.split(".")[0])
        shutil.copytree(d, e)
        os.unlink(os.path.join(e, name))
        os.mkfifo(os.path.join(e, name))
        oo = os.path.join(base, "m_out")
        for cmd in (["quantize", e, oo, "--scheme", "fp8-row"], ["dequantize", e, oo], ["inspect", e]):
            if cmd[0] == "inspect" and name == "config.json":
                continue  # inspect reads the weights only
            r = run_limited(*cmd)
            refused("%s a FIFO (%s)" % (name, cmd[0]), r, name, oo)
            check(not os.path.exists(oo), "%s a FIFO (%s): no OUT" % (name, cmd[0]))
        if name == "model.safetensors.index.json":  # the index's path given as IN
            refused("the index given as IN, a FIFO", run_limited("inspect", os.path.join(e, name)), name)
        shutil.rmtree(e)
    e = os.path.join(base, "m_single")
    os.makedirs(e)
    os.mkfifo(os.path.join(e, "model.safetensors"))
    refused("model.safetensors a FIFO", run_limited("quantize", e, os.path.join(base, "m_out"), "--scheme", "fp8-row"),
            "model.safetensors", os.path.join(base, "m_out"))
    shutil.rmtree(e)
    # OUT: --force never replaces a FIFO, a device node, a socket or a link (to /dev/null)
    outs = []
    p = os.path.join(base, "out_fifo")
    os.mkfifo(p)
    outs.append(("a FIFO", p, stat.S_ISFIFO))
    p = os.path.join(base, "out_null")
    os.symlink("/dev/null", p)
    outs.append(("a link to /dev/null", p, stat.S_ISLNK))
    p = os.path.join(base, "out_dev")
    try:
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # another /dev/null (root only)
        outs.append(("a character device", p, stat.S_ISCHR))
    except OSError:
        pass
    import socket
    p = os.path.join(base, "out_sock")
    sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sk.bind(p)
    outs.append(("a socket", p, stat.S_ISSOCK))
    null_before = os.stat("/dev/null")
    for what, p, kind in outs:
        for cmd in (["quantize", src_path, p, "--scheme", "fp8-row", "--force"], ["dequantize", src_path, p, "--force"],
                    ["quantize", d, p, "--scheme", "fp8-row", "--force"]):
            r = run_limited(*cmd)
            check(r.returncode == 1 and "not replaced" in r.stderr and os.path.basename(p) in r.stderr,
                  "OUT %s with --force (%s %s): refused (rc %s: %s)" % (what, cmd[0], "dir" if cmd[1] == d else "file",
                                                                       r.returncode, r.stderr.strip()[:300]))
            check(kind(os.lstat(p).st_mode) and leftovers(base) == [],
                  "OUT %s with --force: still %s, nothing left beside it (%s)" % (what, what, leftovers(base)))
    sk.close()
    # OUT a hard link of IN: the same file under another name (compared by
    # device and inode, as a bind mount would be): refused, IN unchanged
    hard = os.path.join(base, "hard.safetensors")
    os.link(src_path, hard)
    before = open(src_path, "rb").read()
    r = run_limited("quantize", src_path, hard, "--scheme", "fp8-row", "--force")
    check(refused_request(r) and "the output is the input" in r.stderr and open(src_path, "rb").read() == before and
          os.stat(hard).st_ino == os.stat(src_path).st_ino and leftovers(base) == [],
          "OUT a hard link of IN with --force: refused, IN unchanged (rc %s: %s)" % (r.returncode, r.stderr.strip()))
    nb = os.stat("/dev/null")
    check(stat.S_ISCHR(nb.st_mode) and nb.st_rdev == null_before.st_rdev and nb.st_ino == null_before.st_ino,
          "/dev/null is still the null device")
    shutil.rmtree(base)


def limited_fsize(limit):
    """preexec_fn: RLIMIT_FSIZE (ulimit -f) of limit bytes for the child."""
    import resource

    def f():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return f


def test_file_size_limit(tmp, src_path):
    """Issue 21.7: past `ulimit -f` the CLI used to die of SIGXFSZ with no
    message, leaving a temporary file. Now the write fails with EFBIG: exit 1,
    an I/O error naming the file, nothing left behind."""
    full = os.path.join(tmp, "fsize_full.safetensors")
    r = run("quantize", src_path, full, "--scheme", "fp8-row")
    size = os.path.getsize(full) if r.returncode == 0 else 1 << 20
    o = os.path.join(tmp, "fsize.safetensors")
    for limit in (0, 1000, size // 2, size - 1):
        for cmd in (["quantize", src_path, o, "--scheme", "fp8-row"], ["dequantize", full, o, "--dtype", "f32"]):
            r = run(*cmd, preexec_fn=limited_fsize(limit), timeout=60)
            check(r.returncode == 1 and "fsize" in r.stderr and "File too large" in r.stderr and
                  "FP8KIT_ERR_IO" in r.stderr,
                  "ulimit -f %d bytes (%s): an I/O error naming the file, exit 1 (rc %d: %s)" % (
                      limit, cmd[0], r.returncode, r.stderr.strip()[:300]))
            check(not os.path.exists(o) and leftovers(tmp) == [],
                  "ulimit -f %d bytes (%s): nothing left (%s)" % (limit, cmd[0], leftovers(tmp)))
    r = run("quantize", src_path, o, "--scheme", "fp8-row", preexec_fn=limited_fsize(size))
    check(r.returncode == 0 and open(o, "rb").read() == open(full, "rb").read(),
          "ulimit -f of exactly the output size: written (%s)" % r.stderr.strip())
    for p in (o, full):
        if os.path.exists(p):
            os.unlink(p)


def refused_existing(r, out):
    """Exit status 2, one line on stderr naming OUT and --force, no I/O status."""
    return (r.returncode == 2 and r.stderr.count("\n") == 1 and out in r.stderr and "exists" in r.stderr and
            "--force" in r.stderr and "FP8KIT_ERR" not in r.stderr and "could not be read" not in r.stderr)


def test_safety(tmp, src_path):
    o = os.path.join(tmp, "exists.safetensors")
    with open(o, "wb") as f:
        f.write(b"precious")
    # issue 19.5b: an existing OUT without --force is a refusal of the command
    # line (exit status 2, one line naming OUT and --force), not an I/O failure
    for cmd in (["quantize", src_path, o, "--scheme", "fp8-row"], ["dequantize", src_path, o]):
        r = run(*cmd)
        check(refused_existing(r, o) and open(o, "rb").read() == b"precious",
              "%s: existing output kept without --force (rc %d: %r)" % (cmd[0], r.returncode, r.stderr))
    h = run("quantize", "--help").stdout
    flat = " ".join(h.split())
    check("2 bad arguments, OUT exists without --force, or a request refused" in flat and
          "OUT is, contains or lies inside IN" in flat,
          "quantize --help documents exit status 2: an existing OUT, a refused request")
    r = run("quantize", src_path, o, "--scheme", "fp8-row", "--force")
    check(r.returncode == 0 and open(o, "rb").read(8) != b"precious", "--force replaces it")
    r = run("quantize", src_path, os.path.join(tmp, "nodir", "x.safetensors"), "--scheme", "fp8-row")
    check(r.returncode == 1 and "nodir" in r.stderr, "missing output directory reported")
    r = run("quantize", src_path, o, "--scheme", "fp8-bogus")
    check(r.returncode == 2, "bad --scheme is a usage error")
    r = run("quantize", src_path, o, "--scheme", "mxfp8", "--pow2")
    check(r.returncode == 2, "--pow2 with mxfp8 is a usage error")
    # Ctrl-C in the middle: no output, no temporary file
    big = os.path.join(tmp, "big.safetensors")
    rows = 16384
    blk = bf16_bits(np.random.default_rng(1).standard_normal((64, 8192))).tobytes()
    with open(big, "wb") as f:
        hdr = json.dumps({"w%d.weight" % i: {"dtype": "BF16", "shape": [rows, 8192],
                                             "data_offsets": [i * rows * 8192 * 2, (i + 1) * rows * 8192 * 2]}
                          for i in range(2)}).encode()
        hdr += b" " * (-len(hdr) % 8)
        f.write(struct.pack("<Q", len(hdr)) + hdr)
        for _ in range(2 * rows // 64):
            f.write(blk)
    o = os.path.join(tmp, "interrupted.safetensors")
    p = subprocess.Popen([FP8KIT, "quantize", big, o, "--scheme", "fp8-row", "--threads", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0, seen = time.time(), False
    while time.time() - t0 < 20 and p.poll() is None:
        if leftovers(tmp):
            seen = True
            time.sleep(0.05)
            p.send_signal(signal.SIGINT)
            break
        time.sleep(0.002)
    p.wait()
    check(seen, "the temporary file appeared while converting")
    check(p.returncode == -signal.SIGINT, "SIGINT ends the run (rc %s)" % p.returncode)
    check(not os.path.exists(o) and leftovers(tmp) == [], "Ctrl-C leaves no partial file (%s)" % leftovers(tmp))
    # progress bar only on a terminal
    master, slave = pty.openpty()
    p = subprocess.Popen([FP8KIT, "quantize", big, o, "--scheme", "fp8-row", "--force"],
                         stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            c = os.read(master, 4096)
        except OSError:
            break
        if not c:
            break
        chunks.append(c)
    p.wait()
    os.close(master)
    tty = b"".join(chunks).decode(errors="replace")
    check(p.returncode == 0 and "tensors" in tty and "GB/s" in tty and "ETA" in tty and "\r" in tty,
          "progress bar on a terminal (%r)" % tty[:120])
    os.unlink(o)
    # issue 21.7: SIGKILL leaves the temporary file (nothing can remove it);
    # the next run next to the same OUT removes it (its writer is gone) and
    # says so; a temporary name of a live writer is left alone
    o = os.path.join(tmp, "killed.safetensors")
    p = subprocess.Popen([FP8KIT, "quantize", big, o, "--scheme", "fp8-row", "--threads", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0, seen = time.time(), []
    while time.time() - t0 < 20 and p.poll() is None and not seen:
        seen = leftovers(tmp)
        time.sleep(0.002)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    check(seen and leftovers(tmp) == seen, "SIGKILL: the temporary file stays (%s)" % leftovers(tmp))
    live = os.path.join(tmp, os.path.basename(seen[0]).rsplit("-", 2)[0] + "-%d-abcdef" % os.getpid()) \
        if seen else None
    if live:
        open(live, "wb").close()
    r = run("quantize", src_path, o, "--scheme", "fp8-row")
    check(r.returncode == 0 and "removed 1 temporary file(s) left next to" in r.stderr and
          leftovers(tmp) == ([os.path.basename(live)] if live else []),
          "the next run removes the killed run's temporary file, not a live writer's (%s; %s)" % (
              r.stderr.strip(), leftovers(tmp)))
    if live:
        os.unlink(live)
    os.unlink(o)
    # issue 21.7: the input truncated during the run (inputs are mapped): an
    # I/O error naming the file, from the size check before each slab (exit 1),
    # or in the remaining window from the SIGBUS handler (the process dies of
    # SIGBUS after the same message); nothing left either way
    o = os.path.join(tmp, "truncated.safetensors")
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":handle_sigbus=0")
    p = subprocess.Popen([FP8KIT, "quantize", big, o, "--scheme", "fp8-row", "--threads", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    t0, seen = time.time(), False
    while time.time() - t0 < 20 and p.poll() is None:
        if leftovers(tmp):
            seen = True
            os.truncate(big, 1 << 20)
            break
        time.sleep(0.002)
    _, err = p.communicate(timeout=60)
    check(seen and p.returncode in (1, -signal.SIGBUS) and "big.safetensors" in err and "shrank" in err and
          "I/O error" in err.replace("FP8KIT_ERR_IO", "I/O error"),
          "input truncated during the run: an I/O error naming it (rc %s: %s)" % (p.returncode, err.strip()[:300]))
    check(not os.path.exists(o) and leftovers(tmp) == [], "input truncated: nothing left (%s)" % leftovers(tmp))
    print("test_st_cli: input truncated during the run: caught by the %s" % (
        "size check before a slab (exit 1)" if p.returncode == 1 else "SIGBUS handler"))
    os.unlink(big)




def main():
    if not os.path.exists(FP8KIT):
        print("test_st_cli: no fp8kit binary at %s" % FP8KIT)
        return 1
    seed = int(os.environ.get("FK_TEST_SEED", "12345"))
    rng = np.random.default_rng(seed)
    print("test_st_cli: %s, safetensors %s, numpy %s, seed %d" % (FP8KIT, getattr(safetensors, "__version__", "?"),
                                                                 np.__version__, seed))
    info = run("info", "--json")
    try:
        cuda = json.loads(info.stdout)["backends"]["cuda"]["available"]
    except Exception:
        cuda = False
    print("test_st_cli: CUDA backend %s" % ("available: comparing it with the CPU" if cuda else "not available"))
    try:
        import torch
        print("test_st_cli: torch %s: outputs also loaded with safetensors.torch" % torch.__version__)
    except ImportError:
        pass
    tmp = tempfile.mkdtemp(prefix="fp8kit-st-")
    try:
        t0 = time.time()
        src_path, blk_path = test_schemes(tmp, rng, cuda)
        test_keep(tmp, rng, src_path)
        test_refusals(tmp, rng)
        test_dequantize_rules(tmp, rng)
        test_names_and_args(tmp, src_path, blk_path)
        test_sharded(tmp, rng)
        test_corrupt(tmp, src_path)
        test_zero_numel(tmp)
        test_special_files(tmp, rng, src_path)
        test_file_size_limit(tmp, src_path)
        test_safety(tmp, src_path)
        print("test_st_cli: %.1f s" % (time.time() - t0))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_st_cli: %d passed, %d failed" % (PASSES[0], len(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
