"""_header.py - the version of fp8kit as its one definition states it: the
FP8KIT_VERSION_MAJOR / _MINOR / _PATCH lines of include/fp8kit.h (no imports
of the package, so that it can be loaded on its own)."""
import re

_DEFINE = re.compile(r"^\s*#\s*define\s+FP8KIT_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)\b", re.M)


def header_version(path):
    """'MAJOR.MINOR.PATCH' from the fp8kit.h at `path` (OSError if it cannot
    be read, ValueError if it lacks one of the three lines)."""
    with open(path, encoding="utf-8") as f:
        found = dict(_DEFINE.findall(f.read()))
    missing = [k for k in ("MAJOR", "MINOR", "PATCH") if k not in found]
    if missing:
        raise ValueError("%s has no #define FP8KIT_VERSION_%s" % (path, missing[0]))
    return "%d.%d.%d" % (int(found["MAJOR"]), int(found["MINOR"]), int(found["PATCH"]))
