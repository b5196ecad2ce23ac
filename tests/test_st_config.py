#!/usr/bin/env python3
"""test_st_config.py - config.json through `fp8kit quantize | dequantize`
(docs/spec.md section 5), run by CTest:
    python3 tests/test_st_config.py path/to/fp8kit [path/to/libfp8kit.so]

config.json is read as Python's json reads it and written back as the same
bytes with only the top-level quantization_config member added or removed.
Checked with Python's json as the reference:
  - every document Python's json.loads accepts (NaN, Infinity, -Infinity,
    duplicate keys, \\u0000, unpaired surrogates, integers and reals of any
    size, tabs / CRLF / no whitespace, a byte order mark, deep nesting, keys
    and strings that look like anything) is accepted; quantize writes its
    bytes with one member inserted, nothing else changed, the result parses
    with Python's json and holds the quantization_config; dequantize of that
    gives the input back byte for byte; quantization_config members (all of
    them, under any spelling of the key) are removed by dequantize and make
    quantize refuse;
  - a top-level key "\\u0002bigints" holding numbers (once a crash), and
    strings that look like internal placeholders, come through unchanged
    (also through the Python binding, given the library);
  - values the converter reads (tie_word_embeddings: the last duplicate wins)
    are read from such documents;
  - time linear in the size: 400k reals and a 60 MB config.json;
  - every document Python refuses is refused with "invalid JSON", the line
    and column, nothing written next to OUT; a random mutation campaign
    compares acceptance with Python's json.loads.
Needs only the Python standard library (the binding case: numpy)."""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

CLI = None
LIB = None
FAILS = []
QKEY = "quantization_config"


def check(ok, msg):
    if not ok:
        FAILS.append(msg)
        print("FAIL: " + msg, flush=True)


def weights_file(path):
    """A safetensors file of one BF16 [64, 64] weight and a norm (a model the
    converter quantizes in milliseconds)."""
    rnd = random.Random(1)
    def bf16(n):
        return b"".join(struct.pack("<f", rnd.uniform(-1, 1))[2:] for _ in range(n))
    tensors = [("model.layers.0.mlp.up_proj.weight", [64, 64]), ("model.norm.weight", [64])]
    header, data = {}, b""
    for name, shape in tensors:
        b = bf16(shape[0] * (shape[1] if len(shape) > 1 else 1))
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


WEIGHTS = QWEIGHTS = None  # high-precision weights, and the same quantized


def model(d, config_bytes, quantized=False):
    os.makedirs(d)
    shutil.copyfile(QWEIGHTS if quantized else WEIGHTS, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json"), "wb") as f:
        f.write(config_bytes)


def run(*args):
    """The CLI; a run past 120 s is stopped and reads as exit status 124."""
    try:
        return subprocess.run([CLI] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              errors="replace", timeout=120)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", "timed out after 120 s")


def read(p):
    with open(p, "rb") as f:
        return f.read()


def py_loads(b, pairs=False):
    """Python's json on bytes (the reference); numbers kept as their text so
    that NaN and precision compare exactly. Raises on what Python refuses."""
    return json.loads(b, parse_float=lambda s: ("real", s), parse_constant=lambda s: ("const", s),
                      object_pairs_hook=list if pairs else None)


def py_accepts(b):
    try:
        py_loads(b)
        return True
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return False


def common_prefix(a, b):
    n, p, step = min(len(a), len(b)), 0, 1 << 16
    while p + step <= n and a[p:p + step] == b[p:p + step]:
        p += step
    while p < n and a[p] == b[p]:
        p += 1
    return p


def splice(a, b):
    """(start, removed, inserted): b is a with a[start:start+len(removed)]
    replaced by inserted, the common prefix and suffix taken longest."""
    p = common_prefix(a, b)
    s = min(common_prefix(a[::-1], b[::-1]), len(a) - p, len(b) - p)
    return p, a[p:len(a) - s], b[p:len(b) - s]


def member_alone(chunk):
    """chunk (an inserted or removed piece of the top-level object) is one
    quantization_config member with its separator: returns its value."""
    t = chunk.decode("utf-8", "surrogatepass").strip(" \t\r\n")
    t = t[1:] if t.startswith(",") else t[:-1] if t.endswith(",") else t
    try:
        pairs = py_loads(("{" + t + "}").encode("utf-8", "surrogatepass"), pairs=True)
    except ValueError:
        return None
    return pairs[0][1] if len(pairs) == 1 and pairs[0][0] == QKEY else None


def one_member(a, b):
    """b is a with one quantization_config member (and its separator)
    inserted (a short) or removed (a long), no other byte changed: the
    member's value, else None. The piece is found by the common prefix and
    suffix, and tried at every shift those leave open."""
    p, removed, inserted = splice(a, b)
    if removed and inserted:
        return None
    x = b if inserted else a
    piece = inserted or removed
    n = len(piece)
    for k in range(p + 1):
        if k and x[p - k] != x[p - k + n]:
            break
        v = member_alone(x[p - k:p - k + n])
        if v is not None:
            return v
    return None


def nothing_beside(out):
    parent = os.path.dirname(out)
    return [n for n in os.listdir(parent) if ".fp8kit-tmp-" in n]


def roundtrip(tag, tmp, doc, check_layout=None, timing=None, by_value=True):
    """doc (bytes, no quantization_config): quantize inserts one member and
    changes no other byte; dequantize gives doc back. timing: a list that
    gets the seconds of the two runs. by_value: also compare what Python's
    json reads from the input and the output."""
    d, q, back = (os.path.join(tmp, tag + s) for s in ("_in", "_q", "_back"))
    model(d, doc)
    t0 = time.time()
    r = run("quantize", d, q, "--scheme", "fp8-row", "--quiet")
    t1 = time.time()
    check(r.returncode == 0, "%s: quantize accepted (rc %d: %s)" % (tag, r.returncode, r.stderr.strip()[-300:]))
    if r.returncode:
        return None
    out = read(os.path.join(q, "config.json"))
    qv = one_member(doc, out) if len(out) > len(doc) else None
    check(qv is not None, "%s: the output is the input with one quantization_config member inserted (%r)" % (
        tag, splice(doc, out)[1:]))
    try:
        got, want = (py_loads(out, pairs=True), py_loads(doc, pairs=True)) if by_value else ([(QKEY, qv)], [])
        check(got[:-1] == want and got[-1][0] == QKEY and got[-1][1] == qv,
              "%s: the output is the input's members plus quantization_config, last" % tag)
        q_obj = dict(got[-1][1])
        check(q_obj.get("quant_method") == "compressed-tensors" and "config_groups" in q_obj,
              "%s: the quantization_config is compressed-tensors' (%s)" % (tag, sorted(q_obj)))
    except (ValueError, RecursionError) as e:
        check(False, "%s: Python's json reads the output (%s)" % (tag, e))
    if check_layout:
        check_layout(inserted)
    t2 = time.time()
    r = run("dequantize", q, back, "--quiet")
    if timing is not None:
        timing.append(t1 - t0 + time.time() - t2)
    check(r.returncode == 0, "%s: dequantize accepted (rc %d: %s)" % (tag, r.returncode, r.stderr.strip()[-300:]))
    if r.returncode == 0:
        check(read(os.path.join(back, "config.json")) == doc, "%s: dequantize gives the input back byte for byte" % tag)
    for p in (d, q, back):
        shutil.rmtree(p, ignore_errors=True)
    return out


def refused(tag, tmp, doc):
    d, q = os.path.join(tmp, tag + "_bad"), os.path.join(tmp, tag + "_badq")
    model(d, doc)
    r = run("quantize", d, q, "--scheme", "fp8-row", "--quiet")
    ok = r.returncode != 0 and r.returncode > 0 and "config.json" in r.stderr and (
        "invalid JSON (line " in r.stderr or "not a JSON object" in r.stderr)
    check(ok, "%s: refused with 'invalid JSON (line ...)' (rc %d: %s)" % (tag, r.returncode, r.stderr.strip()[-300:]))
    check(not os.path.exists(q) and not nothing_beside(q), "%s: nothing written" % tag)
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(q, ignore_errors=True)
    return r.returncode != 0


# ---------------------------------------------------------------- documents
BASE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0, "torch_dtype": "bfloat16"}

ACCEPTED = {
    # the reproduced cases
    "bigints_key_numbers": b'{"\\u0002bigints": [1, 2, 3], "model_type": "llama", "x": 1.5}',
    "bigints_key_scalar": b'{"model_type": "llama", "\\u0002bigints": 7, "big": 123456789012345678901234567890}',
    "bigints_key_raw": b'{"\x02bigints" : {"0": 1}}'.replace(b"\x02", b"\\u0002"),
    "placeholders": (b'{"a": "\\u00010\\u0001", "b": "\\u00020\\u0002", "c": 0.25, "d": "\\u00011\\u0001",'
                     b' "e": 123456789012345678901234567890, "\\u00010\\u0001": "\\u0001\\u0001"}'),
    "nan_inf": b'{"a": NaN, "b": Infinity, "c": -Infinity, "d": [NaN, -Infinity, 1e400, -1e400]}',
    "dup_keys": b'{"a": 1, "a": 2, "model_type": "x", "model_type": "y"}',
    "nul": b'{"a": "x\\u0000y", "k\\u0000": 1, "\\u0000": "\\u0000"}',
    # more of what Python's json reads
    "surrogates": b'{"a": "\\ud800", "b": "\\udc00x\\ud83d", "c": "\\ud83d\\ude00", "d": "\xed\xa0\x80"}',
    "utf8": '{"name": "jos\u00e9 \u2713 \U0001F600", "\u00e9": "\x7f"}'.encode("utf-8"),
    "escapes": b'{"a": "\\"\\\\\\/\\b\\f\\n\\r\\t\\u00E9\\uABCD", "b": "\\u005c"}',
    "numbers": (b'{"a": -0, "b": 0.0, "c": -0.0e-0, "d": 1E+2, "e": 1e-400, "f": 0.1000000000000000055511151231257827,'
                b' "g": -123456789012345678901234567890123456789, "h": 18446744073709551616, "i": 9223372036854775807,'
                b' "j": -9223372036854775808, "k": 9223372036854775808, "l": 2.5e308, "m": 4.9e-324}'),
    "literals": b'{"t": true, "f": false, "n": null, "arr": [], "obj": {}, "nest": [[{}], {"a": [null]}]}',
    "compact": b'{"a":1,"b":[1,2],"c":{"d":"e"}}',
    "spaced": b'  { "a" : 1 ,\t"b" : 2 }  \n\n',
    "crlf_tabs": b'{\r\n\t"a": 1,\r\n\t"b": {\r\n\t\t"c": 2\r\n\t}\r\n}\r\n',
    "no_indent_newlines": b'{\n"a": 1,\n"b": 2\n}',
    "bom": b'\xef\xbb\xbf{"a": 1}',
    "empty": b"{}",
    "empty_key": b'{"": 1, "a": "", "b": {"": ""}}',
    "empty_ws": b"{ \n }\n",
    "deep": b'{"a": ' + b"[" * 900 + b"]" * 900 + b"}",
    "key_escape_nested_q": b'{"text_config": {"quantization_config": {"quant_method": "fp8"}}, "q": "quantization_config"}',
    "trailing_ws_only": b'{"a": 1}\r\n\t ',
    "python_indent": json.dumps(BASE, indent=2).encode(),
}

REFUSED = {
    "trailing_comma_obj": b'{"a": 1,}',
    "trailing_comma_arr": b'{"a": [1,]}',
    "leading_zero": b'{"a": 01}',
    "dot_end": b'{"a": 1.}',
    "dot_start": b'{"a": .5}',
    "plus": b'{"a": +1}',
    "exp_no_digits": b'{"a": 1e}',
    "exp_sign_no_digits": b'{"a": 1E+}',
    "minus_alone": b'{"a": -}',
    "nan_lower": b'{"a": nan}',
    "minus_nan": b'{"a": -NaN}',
    "infinityy": b'{"a": Infinityy}',
    "inf": b'{"a": Inf}',
    "true_caps": b'{"a": True}',
    "raw_control": b'{"a": "x\x01"}',
    "raw_newline": b'{"a": "x\ny"}',
    "raw_tab": b'{"a": "x\ty"}',
    "bad_escape": b'{"a": "\\x41"}',
    "short_u": b'{"a": "\\u12"}',
    "bad_hex_u": b'{"a": "\\u12G4"}',
    "bad_pair_second": b'{"a": "\\ud800\\uZZZZ"}',
    "single_quotes": b"{'a': 1}",
    "no_colon": b'{"a" 1}',
    "no_comma": b'{"a": 1 "b": 2}',
    "extra": b'{"a": 1} x',
    "two_docs": b'{"a": 1}{"b": 2}',
    "empty_file": b"",
    "ws_only": b" \n",
    "nul_after": b'{"a": 1}\x00',
    "nul_in_string": b'{"a": "x\x00"}',
    "invalid_utf8": b'{"a": "\xff"}',
    "overlong_utf8": b'{"a": "\xc0\xaf"}',
    "truncated_utf8": b'{"a": "\xe2\x9c"}',
    "beyond_unicode": b'{"a": "\xf4\x90\x80\x80"}',
    "unclosed_arr": b'{"a": [1, 2}',
    "unclosed_obj": b'{"a": {"b": 1}',
    "unterminated": b'{"a": "x',
    "unterminated_escape": b'{"a": "x\\',
    "vtab_ws": b'{"a":\x0b1}',
    "nbsp_ws": b'{"a":\xc2\xa01}',
    "bom_middle": b'{"a": 1}\xef\xbb\xbf',
    "key_not_string": b'{1: 2}',
    "comment": b'{"a": 1 /* c */}',
    "too_deep": b'{"a": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    # valid JSON, not an object (Python reads it; there is no member to set)
    "array_top": b"[1, 2]",
    "string_top": b'"x"',
    # UTF-16 (json.loads decodes bytes in UTF-16 and UTF-32 too, but a loader
    # reads config.json as UTF-8 text)
    "utf16": '{"a": 1}'.encode("utf-16-le"),
}
PY_READS = ("array_top", "string_top", "utf16")


def test_documents(tmp):
    for tag, doc in ACCEPTED.items():
        check(py_accepts(doc), "test data: Python's json reads %s" % tag)
        out = roundtrip(tag, tmp, doc)
        if out is not None and tag == "python_indent":
            want = dict(BASE, quantization_config=json.loads(out)[QKEY])
            check(out == json.dumps(want, indent=2).encode(),
                  "python_indent: an input written by json.dump(indent=2) stays what json.dump(indent=2) writes")
        if out is not None and tag == "crlf_tabs":
            ins = splice(doc, out)[2]
            lines = ins.split(b"\r\n")
            check(b"\n" not in ins.replace(b"\r\n", b"") and len(lines) > 3 and lines[0] == b","
                  and lines[1].startswith(b'\t"quantization_config": {') and lines[2].startswith(b"\t\t\"")
                  and lines[-1] == b"\t}",
                  "crlf_tabs: the member is written with CRLF and tab indentation (%r)" % ins[:80])
        if out is not None and tag == "compact":
            check(splice(doc, out)[2].startswith(b',"quantization_config":{"') and b" " not in splice(doc, out)[2],
                  "compact: the member is written compact (%r)" % splice(doc, out)[2][:60])
    for tag, doc in REFUSED.items():
        if tag not in PY_READS:
            check(not py_accepts(doc), "test data: Python's json refuses %s" % tag)
        refused(tag, tmp, doc)


def test_existing_member(tmp):
    """quantization_config present: dequantize removes every such member
    (duplicates, an escaped key) and nothing else; quantize refuses."""
    q1 = b'{"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}'
    cases = {
        "first": b'{\n  "quantization_config": ' + q1 + b',\n  "a": NaN,\n  "b": 2\n}\n',
        "middle": b'{"a": 1, "quantization_config": ' + q1 + b', "b": [Infinity]}',
        "last": b'{"a": 1, "b": 2, "quantization_config": ' + q1 + b'}',
        "only": b'{\n  "quantization_config": ' + q1 + b'\n}',
        "dups": b'{"quantization_config": 1, "quantization_config": 2, "a": 1, "quantization_config": ' + q1 + b'}',
        "escaped_key": b'{"a": 1, "quantization\\u005fconfig": ' + q1 + b', "b": 2}',
        "all_dups": b'{"quantization_config": 1, "quantization_config": ' + q1 + b'}',
    }
    for tag, doc in cases.items():
        tag = "existing_" + tag
        check(py_accepts(doc), "test data: Python's json reads %s" % tag)
        d, q, back = (os.path.join(tmp, tag + s) for s in ("_in", "_q", "_back"))
        model(d, doc, quantized=True)
        r = run("quantize", d, q, "--scheme", "fp8-row", "--quiet")
        check(r.returncode != 0 and "already quantized" in r.stderr and not os.path.exists(q),
              "%s: quantize refuses a config.json with a quantization_config (rc %d: %s)" % (
                  tag, r.returncode, r.stderr.strip()[-200:]))
        r = run("dequantize", d, back, "--quiet")
        if r.returncode == 0:
            out = read(os.path.join(back, "config.json"))
            try:
                got, want = py_loads(out, pairs=True), py_loads(doc, pairs=True)
                check(got == [kv for kv in want if kv[0] != QKEY],
                      "%s: dequantize: the other members, in order (%r)" % (tag, out[:200]))
            except ValueError as e:
                check(False, "%s: dequantize output read by Python's json (%s: %r)" % (tag, e, out[:200]))
            if tag in ("existing_first", "existing_middle", "existing_last", "existing_only", "existing_escaped_key"):
                check(len(out) < len(doc) and one_member(doc, out) is not None,
                      "%s: only the member and one separator removed (%r)" % (tag, splice(doc, out)[1:]))
            if tag == "existing_only":
                check(out == b"{\n}", "existing_only: '{\\n}' left (%r)" % out)
        else:
            check(False, "%s: dequantize accepted (rc %d: %s)" % (tag, r.returncode, r.stderr.strip()[-200:]))
        for p in (d, q, back):
            shutil.rmtree(p, ignore_errors=True)


def test_values_read(tmp):
    """tie_word_embeddings read from documents only Python's json reads: the
    last duplicate wins, NaN elsewhere; lm_head is then in the ignore list."""
    for tied, doc in ((True, b'{"x": NaN, "tie_word_embeddings": false, "big": 1' + b"0" * 30 +
                       b', "tie_word_embeddings": true, "s": "\\ud800\\u0000"}'),
                      (False, b'{"tie_word_embeddings": true, "y": -Infinity, "tie_word_embeddings": false}'),
                      (True, b'{"text_config": {"tie_word_embeddings": true, "r": 1e999}}')):
        out = roundtrip("tied_%s_%d" % (tied, len(doc)), tmp, doc)
        if out is not None:
            ignore = dict(py_loads(out, pairs=True))[QKEY]
            ignore = dict(ignore).get("ignore", [])
            check(("lm_head" in ignore) == tied, "tie_word_embeddings %s read from %r (ignore %s)" % (tied, doc, ignore))


def test_time(tmp):
    """Linear time: 400k reals, and a 60 MB config.json (the two runs timed)."""
    rnd = random.Random(3)
    reals = ", ".join(repr(rnd.uniform(-1, 1)) for _ in range(400000))
    doc = ('{"model_type": "llama", "table": [' + reals + '], "x": "\\u00010\\u0001"}').encode()
    dt = []
    out = roundtrip("reals400k", tmp, doc, timing=dt)
    check(out is not None and dt and dt[0] < 10, "400k reals: quantize + dequantize in %s s (at most 10 s)" % dt)
    row = ", ".join(repr(rnd.uniform(-1e6, 1e6)) for _ in range(1000))
    parts, size = [], 0
    while size < 60 * 1000 * 1000:
        s = '"k%d": [%s, 123456789012345678901234567890, "s\\u00e9"]' % (len(parts), row)
        parts.append(s)
        size += len(s) + 2
    doc = ("{" + ", ".join(parts) + "}").encode()
    dt = []
    out = roundtrip("config60mb", tmp, doc, timing=dt, by_value=False)
    check(out is not None and dt and dt[0] < 60, "60 MB config.json: quantize + dequantize in %s s (at most 60 s)" % dt)
    print("test_st_config: 60 MB config.json: quantize + dequantize in %.1f s" % dt[0] if dt else "")


def mutate(rnd, doc):
    b = bytearray(doc)
    pieces = [b",", b":", b"[", b"]", b"{", b"}", b'"', b"\\", b"\\u", b"0", b"-", b".", b"e", b"NaN", b"Infinity",
              b" ", b"\n", b"\t", b"\x00", b"\x01", b"\xff", b"\xc3", b"\xa9", b"\xed\xa0\x80", b"1", b"true", b"u"]
    for _ in range(rnd.randint(1, 3)):
        k = rnd.randrange(len(b) + 1)
        op = rnd.randrange(3)
        if op == 0 and len(b) > 2:
            del b[k:k + rnd.randint(1, 3)]
        elif op == 1:
            b[k:k] = rnd.choice(pieces)
        elif len(b):
            b[min(k, len(b) - 1)] = rnd.randrange(256) if rnd.random() < 0.3 else rnd.choice(pieces)[0]
    return bytes(b)


def test_mutations(tmp):
    """Random mutations of valid documents: accepted exactly when Python's
    json.loads reads them as an object."""
    rnd = random.Random(7)
    seeds = [v for k, v in ACCEPTED.items() if len(v) < 2000] + [
        b'{"a": [1, -2.5e3, "x\\u00e9\\n", {"b": null}], "c": NaN, "d": "\\ud83d\\ude00"}']
    n_acc = n_ref = 0
    for i in range(250):
        doc = mutate(rnd, rnd.choice(seeds))
        try:
            want = isinstance(py_loads(doc), dict)
        except (ValueError, RecursionError):
            want = False
        d, q, back = (os.path.join(tmp, "mut%d%s" % (i, s)) for s in ("_in", "_q", "_back"))
        model(d, doc)
        r = run("quantize", d, q, "--scheme", "fp8-row", "--quiet")
        has_q = want and any(k == QKEY for k, _ in py_loads(doc, pairs=True))
        got = r.returncode == 0 or (has_q and "already quantized" in r.stderr)
        check(r.returncode >= 0 and got == want, "mutation %d: %s by Python's json, %s here (rc %d: %s) %r" % (
            i, "read" if want else "refused", "accepted" if got else "refused", r.returncode,
            r.stderr.strip()[-160:], doc))
        if r.returncode == 0:
            n_acc += 1
            out = read(os.path.join(q, "config.json"))
            check(len(out) > len(doc) and one_member(doc, out) is not None,
                  "mutation %d: one member inserted, nothing else changed" % i)
            r = run("dequantize", q, back, "--quiet")
            check(r.returncode == 0 and read(os.path.join(back, "config.json")) == doc,
                  "mutation %d: dequantize gives the input back" % i)
        else:
            n_ref += 1
            check(not os.path.exists(q) and not nothing_beside(q), "mutation %d: nothing written" % i)
        for p in (d, q, back):
            shutil.rmtree(p, ignore_errors=True)
    check(n_acc >= 15 and n_ref >= 15, "mutations: both outcomes seen (%d accepted, %d refused)" % (n_acc, n_ref))


def test_python_binding(tmp):
    """quantize_checkpoint / dequantize_checkpoint on a "\\u0002bigints" key
    (it once killed the interpreter), run in a child interpreter."""
    if not LIB:
        print("test_st_config: the Python binding case needs the library path (argument 2); not run")
        return
    doc = ACCEPTED["bigints_key_numbers"]
    d, q, back = (os.path.join(tmp, "py" + s) for s in ("_in", "_q", "_back"))
    model(d, doc)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys, fp8kit\n"
            "fp8kit.quantize_checkpoint(sys.argv[1], sys.argv[2], 'fp8-row')\n"
            "fp8kit.dequantize_checkpoint(sys.argv[2], sys.argv[3])\n")
    env = dict(os.environ, FP8KIT_LIBRARY=LIB, PYTHONPATH=os.path.join(root, "python"))
    r = subprocess.run([sys.executable, "-c", code, d, q, back], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode and "No module named 'numpy'" in r.stderr:
        print("test_st_config: the Python binding case needs numpy; not run")
        return
    check(r.returncode == 0, "Python binding: quantize_checkpoint and dequantize_checkpoint of a '\\u0002bigints' "
          "key (rc %d: %s)" % (r.returncode, r.stderr.strip()[-300:]))
    if r.returncode == 0:
        out = read(os.path.join(q, "config.json"))
        check(len(out) > len(doc) and one_member(doc, out) is not None,
              "Python binding: one member inserted")
        check(read(os.path.join(back, "config.json")) == doc, "Python binding: dequantized config.json = the input")


def main():
    global CLI, LIB, WEIGHTS, QWEIGHTS
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    CLI = os.path.abspath(sys.argv[1])
    LIB = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None
    tmp = tempfile.mkdtemp(prefix="fp8kit-st-config-")
    try:
        WEIGHTS, QWEIGHTS = os.path.join(tmp, "weights.safetensors"), os.path.join(tmp, "fp8.safetensors")
        weights_file(WEIGHTS)
        r = run("quantize", WEIGHTS, QWEIGHTS, "--scheme", "fp8-row", "--quiet")
        if r.returncode:
            print("test_st_config: cannot quantize a weights file: %s" % r.stderr.strip())
            return 1
        for t in (test_documents, test_existing_member, test_values_read, test_python_binding, test_mutations,
                  test_time):
            t0 = time.time()
            t(tmp)
            print("test_st_config: %s done in %.1f s" % (t.__name__, time.time() - t0), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("test_st_config: %d failure(s)" % len(FAILS))
        return 1
    print("test_st_config: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
