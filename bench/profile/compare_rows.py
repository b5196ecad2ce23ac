#!/usr/bin/env python3
"""compare_rows.py - joins the JSON rows of two bench runs (before / after a
change, same machine, same process order) and lists every row where "after"
is slower than "before" by more than a threshold.

usage: compare_rows.py BEFORE.jsonl[,BEFORE2.jsonl] AFTER.jsonl[,AFTER2.jsonl] [--limit 0.02]
       [--slow-shapes FILE]   writes "op shape case" of the slow rows (for a re-run)
Several files per side (comma-separated): the best value of each row is kept
(highest throughput, lowest time). Rows are keyed by op, case, shape, mode and
tag. Higher is better for throughput units (TFLOP/s, TB/s, GB/s), lower for
times (us, us/call, host us/call)."""
import json
import sys


def better_high(unit):
    return unit is not None and "/s" in unit and not unit.startswith("us") and "us/" not in unit


def load(paths):
    rows = {}
    for path in paths.split(","):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if "ours" not in r or r.get("unit") is None:
                    continue
                key = (r.get("op"), r.get("case"), r.get("shape"), r.get("mode", ""), r.get("tag", ""))
                v = float(r["ours"])
                if v <= 0:
                    continue
                hi = better_high(r["unit"])
                old = rows.get(key)
                if old is None or (v > old[0] if hi else v < old[0]):
                    rows[key] = (v, r["unit"], hi)
    return rows


def main():
    args = sys.argv[1:]
    limit, slow_out = 0.02, None
    if "--limit" in args:
        i = args.index("--limit")
        limit = float(args[i + 1])
        del args[i:i + 2]
    if "--slow-shapes" in args:
        i = args.index("--slow-shapes")
        slow_out = args[i + 1]
        del args[i:i + 2]
    before, after = load(args[0]), load(args[1])
    common = sorted(set(before) & set(after), key=str)
    slow = []
    print("%-28s %-34s %-22s %10s %10s %8s" % ("op", "case", "shape", "before", "after", "after/b"))
    for k in common:
        b, unit, hi = before[k]
        a = after[k][0]
        speed = a / b if hi else b / a  # > 1: after is faster
        flag = " SLOWER" if speed < 1.0 - limit else ""
        print("%-28s %-34s %-22s %10.3f %10.3f %8.3f%s" % (k[0], (k[1] or "")[:34], (k[2] or "")[:22], b, a, speed, flag))
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
