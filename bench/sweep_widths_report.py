#!/usr/bin/env python3
"""sweep_widths_report.py - reads bench/sweep_widths.sh's rows and prints, for every mode and shape,
the planner's own plan (tag "default") against the fastest forced plan, each as ours / cuBLASLt of
its own row (cuBLASLt is timed beside every row, so the ratio cancels drift between processes),
worst first, then how many rows the default leaves more than 5% behind.

Usage: python3 bench/sweep_widths_report.py ROWS.jsonl [--top N]
"""
import argparse
import json
import re
import statistics


def plan_key(plan):
    """tile width and stream-K parts of a plan description ('small' for the small-M family)"""
    if not plan.startswith("sm90 "):
        return plan.split(" ")[0] if plan else "?"
    bn = re.search(r" bn=(\d+)", plan)
    sk = re.search(r" sk_parts=(\d+)", plan)
    return "bn%s sk%s" % (bn.group(1) if bn else "?", sk.group(1) if sk else "0")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rows")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    rows = {}
    with open(args.rows) as f:
        for line in f:
            r = json.loads(line)
            if r.get("ratio", 0) > 0:
                rows.setdefault((r["case"], r["shape"]), []).append(r)
    table = []
    for (mode, shape), rs in rows.items():
        default = [r for r in rs if r.get("tag") == "default"]
        if not default:
            continue
        d = default[0]
        best = max(rs, key=lambda r: r["ratio"])
        table.append((d["ratio"] / best["ratio"], mode, shape, d, best))
    table.sort(key=lambda t: t[0])
    print("%-11s %-18s %-16s %7s   %-36s %7s" % ("mode", "shape", "default", "ratio", "best (tag)", "ratio"))
    for share, mode, shape, d, best in table[: args.top]:
        print("%-11s %-18s %-16s %7.3f   %-36s %7.3f" % (mode, shape, plan_key(d.get("plan", "")), d["ratio"],
                                                       "%s (%s)" % (plan_key(best.get("plan", "")), best.get("tag")),
                                                       best["ratio"]))
    if table:
        shares = [t[0] for t in table]
        behind = sum(s < 0.95 for s in shares)
        print("%d rows: the default reaches %.3f of the best forced plan (median), %.3f at worst; "
              "%d rows more than 5%% behind" % (len(shares), statistics.median(shares), min(shares), behind))


if __name__ == "__main__":
    main()
