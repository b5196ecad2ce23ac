#!/usr/bin/env bash
# test_cli_names.sh - the CLI's names of the library's enums are exactly the
# library's (fp8kit_<enum>_name / _alias, read with ctypes from the
# libfp8kit.so next to the CLI): --help lists each value's canonical name and
# every alias, and nothing else (gemm --scale / --out / --act, quantize
# --scheme, dequantize --dtype); every spelling the library gives, in any
# case, is accepted (those and --rounding, --backend); a bad name is refused
# with the library's canonical names. Skipped (77) without python3 or a
# shared library beside the CLI.
# Usage: tests/test_cli_names.sh path/to/fp8kit
set -u
cli="${1:?usage: $0 path/to/fp8kit}"
lib="$(dirname "$cli")/libfp8kit.so"
command -v python3 >/dev/null 2>&1 || { echo "skip: no python3"; exit 77; }
[ -e "$lib" ] || { echo "skip: no $lib"; exit 77; }
exec python3 - "$cli" "$lib" <<'EOF'
import ctypes
import re
import subprocess
import sys

cli, libpath = sys.argv[1], sys.argv[2]
lib = ctypes.CDLL(libpath)
fails = 0


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL:", what)


def names(enum, allowed=None):
    """[(value, canonical, [aliases])] of the library's enum, values in allowed (None: all)."""
    name = getattr(lib, "fp8kit_%s_name" % enum)
    alias = getattr(lib, "fp8kit_%s_alias" % enum)
    name.restype = alias.restype = ctypes.c_char_p
    name.argtypes, alias.argtypes = [ctypes.c_int], [ctypes.c_int, ctypes.c_int]
    out = []
    for v in range(32):
        n = name(v)
        if n is None or n == b"invalid" or (allowed is not None and v not in allowed):
            continue
        a, i = [], 0
        while alias(v, i) is not None:
            a.append(alias(v, i).decode())
            i += 1
        out.append((v, n.decode(), a))
    return out


def run(*args):
    return subprocess.run([cli] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def listed(text):
    """[(canonical, [aliases])] of a --help listing 'a (= b, c), d' (one or several lines)."""
    return [(m.group(1), m.group(2).split(", ") if m.group(2) else [])
            for m in re.finditer(r"([\w.-]+)(?: \(= ([^)]*)\))?", text)]


def help_block(cmd, opt):
    """The --help text after `opt` up to the next option line."""
    h = run(cmd, "--help").stdout
    m = re.search(r"^  %s +(.*?)(?=^  --|^\S|\Z)" % re.escape(opt), h, re.M | re.S)
    return m.group(1) if m else ""


HP = (0, 1, 2)  # f32, f16, bf16: what gemm --out and dequantize --dtype write
cases = [  # (command, option, enum, allowed values, what --help lists for it)
    ("gemm", "--scale", "scale_mode", (1, 2, 3, 4), help_block("gemm", "--scale")),
    ("gemm", "--out", "dtype", HP, help_block("gemm", "--out")),
    ("gemm", "--act", "activation", None, help_block("gemm", "--act")),
    ("quantize", "--scheme", "ckpt_scheme", None, help_block("quantize", "--scheme S")),
    ("dequantize", "--dtype", "dtype", HP, help_block("dequantize", "--dtype D")),
]
for cmd, opt, enum, allowed, text in cases:
    want = [(n, a) for _, n, a in names(enum, allowed)]
    got = listed(text.split("(the names")[0])
    check(got == want, "%s --help lists %s as %s; the library's names are %s" % (cmd, opt, got, want))

# every spelling is accepted, in any case; a bad one is refused with the canonical names
gemm = ["gemm", "--m", "32", "--n", "32", "--k", "64", "--reps", "1", "--backend", "cpu"]
accepts = {  # option -> (enum, allowed, command line taking the value last)
    "--scale": ("scale_mode", (1, 2, 3, 4), gemm + ["--scale"]),
    "--out": ("dtype", HP, gemm + ["--out"]),
    "--act": ("activation", None, gemm + ["--act"]),
    "--backend": ("backend", None, gemm + ["--backend"]),
    "--scheme": ("ckpt_scheme", None, ["quantize", "no-such-input", "no-such-output", "--scheme"]),
    "--rounding": ("rounding", None, ["quantize", "no-such-input", "no-such-output", "--scheme", "mxfp8",
                                      "--rounding"]),
}
for opt, (enum, allowed, argv) in accepts.items():
    all_names = names(enum, allowed)
    for _, n, a in all_names:
        for s in [n] + a + [n.upper()] + [x.upper() for x in a]:
            r = run(*(argv + [s]))
            check("%s expects" % opt not in r.stderr and "not accepted here" not in r.stderr,
                  "%s %s refused: %s" % (opt, s, r.stderr.strip()))
    r = run(*(argv + ["no-such-name"]))
    canon = [n for _, n, _ in all_names]
    want = ", ".join(canon[:-1]) + " or " + canon[-1] if len(canon) > 1 else canon[0]
    check(r.returncode == 2 and ("%s expects %s" % (opt, want)) in r.stderr,
          "%s no-such-name: rc %d, %r (want '%s expects %s')" % (opt, r.returncode, r.stderr.strip(), opt, want))

print("test_cli_names: %d failed" % fails)
sys.exit(1 if fails else 0)
EOF
