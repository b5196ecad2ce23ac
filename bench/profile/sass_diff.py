#!/usr/bin/env python3
"""sass_diff.py - whether two builds compiled the same GPU code: the SASS of every kernel in two
binaries (a libfp8kit.so, an object file), compared per kernel with addresses, encodings and
immediate constants masked, so that a refactor can be shown to change nothing. Prints the counts
(same, differ, only in one) and the kernels that differ with their instruction counts.
Needs cuobjdump and nvdisasm on PATH (bench/profile/sass_tools.sh).
Usage: python3 bench/profile/sass_diff.py OLD NEW"""
import re
import signal
import subprocess
import sys


def kernels(path):
    out = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True, check=True).stdout
    d, cur, body = {}, None, []
    for line in out.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if cur:
                d.setdefault(cur, []).append(body)
            cur, body = m.group(1), []
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m and cur:
            body.append(re.sub(r"0x[0-9a-f]+", "X", m.group(1)))
    if cur:
        d.setdefault(cur, []).append(body)
    return d


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = kernels(sys.argv[1]), kernels(sys.argv[2])
    both = sorted(set(a) & set(b))
    differ = [k for k in both if a[k] != b[k]]
    print("same %d, differ %d, only in OLD %d, only in NEW %d" %
          (len(both) - len(differ), len(differ), len(set(a) - set(b)), len(set(b) - set(a))))
    for k in differ:
        print("  %s: %d -> %d instructions" % (k, sum(map(len, a[k])), sum(map(len, b[k]))))
    for k in sorted(set(a) ^ set(b)):
        print("  only in %s: %s" % ("OLD" if k in a else "NEW", k))
    return 1 if differ or set(a) ^ set(b) else 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # (piped into head: stop quietly)
    sys.exit(main())
