#!/usr/bin/env python3
"""ncu_summary.py - one compact block per kernel from an Nsight Compute raw
CSV (`ncu -i REPORT --page raw --csv`): time, SM clock, active cycles, issue
slots, tensor pipe (wgmma), MUFU (xu) and FMA pipes, L2 / DRAM throughput
and the top warp stall reasons. Values are converted from the units row.
The last launch of each kernel name is shown. Used by bench/profile/ncu_targets.sh.
Usage: python3 bench/profile/ncu_summary.py RAW.csv..."""
import csv
import sys

SCALE = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6,  # -> us
         "hz": 1e-6, "khz": 1e-3, "mhz": 1.0, "ghz": 1e3,  # -> MHz
         "byte/s": 1e-9, "kbyte/s": 1e-6, "mbyte/s": 1e-3, "gbyte/s": 1.0, "tbyte/s": 1e3}  # -> GB/s


def summary(path):
    rows = list(csv.reader(open(path)))
    if len(rows) < 3:
        print("%s: no kernels profiled" % path)
        return
    head, units = rows[0], rows[1]
    col = {n: i for i, n in enumerate(head)}
    last = {}
    for r in rows[2:]:
        last[r[col["Kernel Name"]]] = r

    def val(r, name):
        i = col.get(name)
        if i is None:
            return float("nan")
        try:
            v = float(r[i].replace(",", ""))
        except ValueError:
            return float("nan")
        return v * SCALE.get(units[i].strip().lower(), 1.0)

    for name, r in last.items():
        g = lambda n: val(r, n)
        print("== %s  grid %s block %s" % (name.split("(")[0][:100], r[col["Grid Size"]], r[col["Block Size"]]))
        print("   %.1f us at %.0f MHz SM clock, %.0f SM active cycles; issue slots busy %.1f%%"
              % (g("gpu__time_duration.sum"), g("gpc__cycles_elapsed.avg.per_second"), g("sm__cycles_active.avg"),
                 g("smsp__issue_active.avg.pct_of_peak_sustained_active")))
        print("   pipes (of active cycles): tensor %.1f%%, xu (MUFU) %.1f%%, fma %.1f%%, alu %.1f%%, shared %.1f%%"
              % (g("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
                 g("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
                 g("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
                 g("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"),
                 g("sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active")))
        print("   memory: L2 %.1f%% of peak (hit rate %.1f%%), DRAM %.0f GB/s (%.1f%% of cycles active)"
              % (g("lts__throughput.avg.pct_of_peak_sustained_elapsed"), g("lts__t_sector_hit_rate.pct"),
                 g("dram__bytes.sum.per_second"), g("dram__cycles_active.avg.pct_of_peak_sustained_elapsed")))
        pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
        st = sorted(((val(r, n), n[len(pre):-len(post)]) for n in col if n.startswith(pre) and n.endswith(post)),
                    reverse=True)
        print("   stalls (warps per issued instruction): "
              + ", ".join("%s %.2f" % (n, v) for v, n in st[:6] if v == v and v > 0))


if __name__ == "__main__":
    for p in sys.argv[1:]:
        summary(p)
