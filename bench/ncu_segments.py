#!/usr/bin/env python3
"""ncu_segments.py - where a kernel's warps spend their stall samples, by
code region: reads the SASS source page that bench/ncu_source.sh writes
(`ncu -i REP --page source --csv --print-source sass`, optionally .gz) and
sums the warp-stall samples over runs of consecutive instructions with the
same execution count (a loop body, an unrolled epilogue chunk, a per-tile
block), printing each run with at least --min percent of the samples, its
offset range in the kernel, how often it ran, its first instruction and its
top stall reasons. The most executed run is normally the main loop.
Usage: python3 bench/ncu_segments.py SRC.csv[.gz] [--min 0.8]"""
import collections
import csv
import gzip
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    lim = float(sys.argv[sys.argv.index("--min") + 1]) if "--min" in sys.argv else 0.8
    path = args[0]
    f = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    rows = list(csv.reader(f))
    head = rows[1]  # rows[0] names the kernel
    ai, si = head.index("Address"), head.index("Source")
    ci, ei = head.index("Warp Stall Sampling (All Samples)"), head.index("Instructions Executed")
    stall = [i for i, c in enumerate(head) if c.startswith("stall_") and "Not Issued" not in c]
    num = lambda x: float(x.replace(",", "") or 0)
    segs, total, base = [], 0.0, None
    for r in rows[2:]:
        try:
            a, c, e = int(r[ai], 16), num(r[ci]), num(r[ei])
        except (ValueError, IndexError):
            continue
        base = a if base is None else base
        total += c
        if not segs or segs[-1]["exec"] != e:
            segs.append({"a0": a, "a1": a, "exec": e, "n": 0, "samples": 0.0, "first": r[si].strip(),
                         "why": collections.Counter()})
        s = segs[-1]
        s["a1"], s["n"], s["samples"] = a, s["n"] + 1, s["samples"] + c
        for i in stall:
            v = num(r[i])
            if v:
                s["why"][head[i][6:]] += v
    print("%s: %d samples" % (rows[0][1][:100] if len(rows[0]) > 1 else path, total))
    for s in segs:
        if total and 100 * s["samples"] / total >= lim:
            print("  %06x-%06x exec %8d  %4d instr  %5.1f%%  %-40s %s" % (
                s["a0"] - base, s["a1"] - base, s["exec"], s["n"], 100 * s["samples"] / total, s["first"][:40],
                ", ".join("%s %.1f%%" % (k, 100 * v / total) for k, v in s["why"].most_common(3))))


if __name__ == "__main__":
    main()
