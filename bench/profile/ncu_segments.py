#!/usr/bin/env python3
"""ncu_segments.py - where a kernel's warps spend their stall samples, from
the SASS source page that bench/profile/ncu_source.sh writes (`ncu -i REP --page
source --csv --print-source sass`, optionally .gz):
- by code region (default): the warp-stall samples summed over runs of
  consecutive instructions with the same execution count (a loop body, an
  unrolled epilogue chunk, a per-tile block), printing each run with at
  least --min percent of the samples, its offset range in the kernel, how
  often it ran, its first instruction and its top stall reasons (the most
  executed run is normally the main loop);
- with --top N: the N instructions with the most samples and their top two
  stall reasons.
Usage: python3 bench/profile/ncu_segments.py SRC.csv[.gz] [--min 0.8] [--top N]"""
import collections
import csv
import gzip
import sys


def load(path):
    """(kernel name, [(address, source, samples, executions, {stall: samples})])"""
    f = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    rows = list(csv.reader(f))
    head = rows[1]  # rows[0] names the kernel
    ai, si = head.index("Address"), head.index("Source")
    ci, ei = head.index("Warp Stall Sampling (All Samples)"), head.index("Instructions Executed")
    stall = [i for i, c in enumerate(head) if c.startswith("stall_") and "Not Issued" not in c]
    num = lambda x: float(x.replace(",", "") or 0)
    out = []
    for r in rows[2:]:
        try:
            a, c, e = int(r[ai], 16), num(r[ci]), num(r[ei])
            why = {head[i][6:]: num(r[i]) for i in stall if num(r[i])}
        except (ValueError, IndexError):
            continue
        out.append((a, r[si].strip(), c, e, why))
    return (rows[0][1] if len(rows[0]) > 1 else path), out


def top(instrs, n):
    total = sum(c for _, _, c, _, _ in instrs) or 1
    print("total samples", total)
    for a, src, c, _, why in sorted(instrs, key=lambda x: -x[2])[:n]:
        reasons = sorted(((v, k) for k, v in why.items()), reverse=True)[:2]
        print("%5.1f%%  0x%x  %-60s %s" % (100 * c / total, a, src[:60], " ".join("%s=%d" % (k, v) for v, k in reasons)))


def segments(name, instrs, lim):
    segs, total, base = [], 0.0, None
    for a, src, c, e, why in instrs:
        base = a if base is None else base
        total += c
        if not segs or segs[-1]["exec"] != e:
            segs.append({"a0": a, "a1": a, "exec": e, "n": 0, "samples": 0.0, "first": src,
                         "why": collections.Counter()})
        s = segs[-1]
        s["a1"], s["n"], s["samples"] = a, s["n"] + 1, s["samples"] + c
        s["why"].update(why)
    print("%s: %d samples" % (name[:100], total))
    for s in segs:
        if total and 100 * s["samples"] / total >= lim:
            print("  %06x-%06x exec %8d  %4d instr  %5.1f%%  %-40s %s" % (
                s["a0"] - base, s["a1"] - base, s["exec"], s["n"], 100 * s["samples"] / total, s["first"][:40],
                ", ".join("%s %.1f%%" % (k, 100 * v / total) for k, v in s["why"].most_common(3))))


def main():
    argv = sys.argv[1:]
    opt = lambda k, d: argv[argv.index(k) + 1] if k in argv else d
    paths = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] not in ("--min", "--top"))]
    if not paths:
        sys.exit(__doc__)
    name, instrs = load(paths[0])
    if "--top" in argv:
        top(instrs, int(opt("--top", "25")))
    else:
        segments(name, instrs, float(opt("--min", "0.8")))


if __name__ == "__main__":
    main()
