"""abi_check.py - the ctypes mirrors of the C headers against the C compiler, for test_abi.py,
test_checkpoint.py and test_distributed.py: a small C program that prints each mirrored struct's size and
field offsets (and whatever other printf lines a test adds) is compiled and run; a test without a C
compiler is skipped."""
import ctypes
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def c_values(tmp_path, header, structs, extra=()):
    """Compiles and runs the program for header (in include/): one line per struct size ("sizeof NAME N")
    and field offset ("offset NAME.FIELD N") of structs ({C name: ctypes.Structure}), then the lines the
    printf statements in extra print. Returns the lines as (kind, name, value) with value an int."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler to check the ABI with")
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "%s"' % header, "int main(void) {"]
    for cname, st in structs.items():
        lines.append('printf("sizeof %s %%zu\\n", sizeof(%s));' % (cname, cname))
        for fname, _ in st._fields_:
            lines.append('printf("offset %s.%s %%zu\\n", offsetof(%s, %s));' % (cname, fname, cname, fname))
    lines += list(extra) + ["return 0; }"]
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "abi"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    return [(kind, name, int(value)) for kind, name, value in (line.split() for line in out)]


def check_layout(structs, kind, name, value):
    """Asserts a "sizeof" or "offset" line against the ctypes mirror; False for any other kind of line."""
    if kind == "sizeof":
        assert ctypes.sizeof(structs[name]) == value, name
    elif kind == "offset":
        sname, fname = name.split(".")
        assert getattr(structs[sname], fname).offset == value, name
    else:
        return False
    return True
