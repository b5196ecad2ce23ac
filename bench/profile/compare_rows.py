#!/usr/bin/env python3
"""compare_rows.py - joins the JSON rows of two bench runs (before / after a
change, same machine, same process order) and lists every row where "after"
is slower than "before" by more than a threshold.

usage: compare_rows.py BEFORE.jsonl[,BEFORE2.jsonl] AFTER.jsonl[,AFTER2.jsonl] [--limit 0.02]
       [--stat median|best] [--slow-shapes FILE]   (writes "op shape case" of the slow rows)
Several files per side (comma-separated, one per run): each row's value is
the median of its runs (--stat best: the best run). Rows are keyed by op, case, shape, mode and
tag. Higher is better for throughput units (TFLOP/s, TB/s, GB/s), lower for
times (us, us/call, host us/call)."""
import json
import statistics
import sys


def better_high(unit):
    return unit is not None and "/s" in unit and not unit.startswith("us") and "us/" not in unit


def load(paths, stat="median"):
    runs = {}
    for path in paths.split(","):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if "ours" in r and r.get("unit") is not None:
                    v, unit = float(r["ours"]), r["unit"]
                elif "tflops" in r:  # bench_grouped's rows
                    v, unit = float(r["tflops"]), "TFLOP/s"
                else:
                    continue
                shape = r.get("shape") or "T%s N%s K%s G%s" % (r.get("T"), r.get("N"), r.get("K"), r.get("G"))
                key = (r.get("op"), r.get("case"), shape, r.get("mode", ""), r.get("tag", ""))
                if v > 0:
                    runs.setdefault(key, ([], unit))[0].append(v)
    rows = {}
    for key, (vals, unit) in runs.items():
        hi = better_high(unit)
        if stat == "best":
            v = max(vals) if hi else min(vals)
        else:
            v = statistics.median(vals)
        rows[key] = (v, unit, hi)
    return rows


def main():
    args = sys.argv[1:]
    limit, slow_out, stat = 0.02, None, "median"
    if "--limit" in args:
        i = args.index("--limit")
        limit = float(args[i + 1])
        del args[i:i + 2]
    if "--stat" in args:
        i = args.index("--stat")
        stat = args[i + 1]
        del args[i:i + 2]
    if "--slow-shapes" in args:
        i = args.index("--slow-shapes")
        slow_out = args[i + 1]
        del args[i:i + 2]
    before, after = load(args[0], stat), load(args[1], stat)
    common = sorted(set(before) & set(after), key=str)
    slow = []
    print("%-28s %-34s %-22s %10s %10s %8s" % ("op", "case", "shape", "before", "after", "after/b"))
    for k in common:
        b, unit, hi = before[k]
        a = after[k][0]
        speed = a / b if hi else b / a  # > 1: after is faster
        flag = " SLOWER" if speed < 1.0 - limit else ""
        print("%-28s %-34s %-22s %10.3f %10.3f %8.3f%s" % (k[0], ((k[1] or "") + " " + (k[3] or "")).strip()[:34],
                                                        (k[2] or "")[:22], b, a, speed, flag))
        if flag:
            slow.append(k)
    only_b, only_a = set(before) - set(after), set(after) - set(before)
    print("\n%d rows compared, %d slower by more than %.1f%%; %d rows only before, %d only after"
          % (len(common), len(slow), 100 * limit, len(only_b), len(only_a)))
    if slow_out:
        with open(slow_out, "w") as f:
            for k in slow:
                f.write("%s %s %s\n" % (k[0], k[2], k[1]))
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
