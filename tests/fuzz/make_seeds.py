#!/usr/bin/env python3
"""make_seeds.py - writes the seed inputs of the safetensors fuzz target into
tests/fuzz/corpus/ (seed-*): small valid files of every dtype (written with the
reference `safetensors` package when it is installed, else by hand) and one
file per corrupt-input rule the reader enforces. libFuzzer adds what it finds
interesting next to them; the CTest st_fuzz_corpus replays the whole folder.
Usage: python3 tests/fuzz/make_seeds.py [OUTDIR]"""
import json
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(out, exist_ok=True)


def raw(header, data=b"", pad=True, hlen=None):
    h = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    n = len(h) if hlen is None else hlen
    return struct.pack("<Q", n) + h + data


def ent(dtype, shape, b, e):
    return {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}


seeds = {}
sizes = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
         "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
# valid: one tensor of every dtype, metadata, a scalar and an empty tensor
hdr, off, data = {"__metadata__": {"format": "pt", "note": "seed"}}, 0, b""
for i, (dt, sz) in enumerate(sizes.items()):
    n = 3 * sz
    hdr["t%02d.%s" % (i, dt.lower())] = ent(dt, [3], off, off + n)
    data += bytes((i * 7 + k) & 0xFF for k in range(n))
    off += n
hdr["scalar"] = ent("F32", [], off, off + 4)
data += struct.pack("<f", 1.5)
off += 4
hdr["empty"] = ent("BF16", [0, 4], off, off)
seeds["seed-valid-all-dtypes"] = raw(hdr, data)
seeds["seed-valid-empty-header"] = raw({})
seeds["seed-valid-meta-only"] = raw({"__metadata__": {}})
seeds["seed-valid-2d-weight"] = raw({"a.weight": ent("BF16", [2, 4], 0, 16), "a.weight_scale": ent("F32", [], 16, 20)},
                                    bytes(range(20)))
seeds["seed-valid-unicode-name"] = raw({"caf\u00e9.\u6f22.weight": ent("U8", [2], 0, 2)}, b"\x01\x02")
seeds["seed-valid-unpadded"] = raw({"x": ent("U8", [1], 0, 1)}, b"\x07", pad=False)
# corrupt: one rule each
seeds["seed-bad-truncated-len"] = b"\x10\x00\x00"
seeds["seed-bad-header-past-end"] = raw({"x": ent("U8", [1], 0, 1)}, b"\x00", hlen=1000)
seeds["seed-bad-header-too-large"] = struct.pack("<Q", 100000001) + b"{}"
seeds["seed-bad-utf8"] = raw(b'{"\xff\xfe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x00")
seeds["seed-bad-json"] = raw(b'{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}', b"\x00")
seeds["seed-bad-not-object"] = raw(b"[1,2,3]")
seeds["seed-bad-dtype"] = raw({"x": ent("F7", [1], 0, 1)}, b"\x00")
seeds["seed-bad-shape-mismatch"] = raw({"x": ent("F32", [2], 0, 4)}, b"\x00" * 4)
seeds["seed-bad-overlap"] = raw({"a": ent("U8", [4], 0, 4), "b": ent("U8", [4], 2, 6)}, b"\x00" * 6)
seeds["seed-bad-out-of-range"] = raw({"a": ent("U8", [8], 0, 8)}, b"\x00" * 4)
seeds["seed-bad-hole"] = raw({"a": ent("U8", [2], 0, 2), "b": ent("U8", [2], 4, 6)}, b"\x00" * 6)
seeds["seed-bad-trailing"] = raw({"a": ent("U8", [2], 0, 2)}, b"\x00" * 5)
seeds["seed-bad-duplicate"] = raw(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                  b'"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x00")
seeds["seed-bad-negative-dim"] = raw({"a": ent("U8", [-1], 0, 0)})
seeds["seed-bad-offsets-reversed"] = raw({"a": ent("U8", [0], 4, 2)}, b"\x00" * 4)
seeds["seed-bad-overflow-shape"] = raw({"a": ent("F64", [4294967296, 4294967296], 0, 0)})
seeds["seed-bad-meta-not-string"] = raw({"__metadata__": {"k": 1}})
seeds["seed-bad-nul-in-name"] = raw(b'{"a\\u0000b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x00")
seeds["seed-bad-float-dim"] = raw({"a": {"dtype": "U8", "shape": [1.0], "data_offsets": [0, 1]}}, b"\x00")
seeds["seed-bad-nine-dims"] = raw({"a": ent("U8", [1] * 9, 0, 1)}, b"\x00")
for name, blob in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(blob)
print("wrote %d seeds to %s" % (len(seeds), out))
