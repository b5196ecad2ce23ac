#!/bin/bash
# clocks.sh - GEMM timings with the GPU's clocks and power beside them:
# builds bench_gemm on the device, samples nvidia-smi (SM clock, power,
# temperature, throttle reasons) every 50 ms while bench_gemm runs once per
# mode in $FK_CLK_MODES (one process each, repeated $FK_CLK_ROUNDS times,
# --reps $FK_CLK_REPS so each run lasts long enough for the power limiter),
# then prints each run's time next to the clock / power percentiles of its
# window. With FK_NCU=1 also times each mode under ncu (clocks locked by
# ncu), which separates the kernel's own cost from clock changes.
# Usage (repo root, on the device): bash bench/profile/clocks.sh [COMMIT]
# Env: FK_CLK_SHAPE (default 8192x8192x8192), FK_CLK_MODES (tensor bias_gelu),
# FK_CLK_ROUNDS (2), FK_CLK_REPS (300), FK_CLK_ENV (VAR=VAL words for bench_gemm),
# FK_BUILD (a folder with a built bench_gemm to use instead of building one).
set -u
commit=${1:-unknown}
. "$(dirname "$0")/../gpu_check.sh" --lib
B=${FK_BUILD:-build-dev}
[ -x "$B/bench_gemm" ] || fk_build "$B" bench_gemm || exit 1
shape=${FK_CLK_SHAPE:-8192x8192x8192}
nvidia-smi --query-gpu=power.limit,clocks.max.sm,clocks.applications.graphics --format=csv
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader,nounits -lms 50 >"$OUT/smi.csv" 2>&1 &
smi=$!
sleep 1
: >"$OUT/windows.txt"
for round in $(seq 1 "${FK_CLK_ROUNDS:-2}"); do
    for mode in ${FK_CLK_MODES:-tensor bias_gelu}; do
        t0=$(date +%s.%N)
        env ${FK_CLK_ENV:-} timeout 120 "$B/bench_gemm" --shapes "$shape" --modes "$mode" --reps "${FK_CLK_REPS:-300}" \
            --commit "$commit" --json "$OUT/gemm.jsonl" --tag "clocks-$mode" >"$OUT/bench-$mode-$round.log" 2>&1
        t1=$(date +%s.%N)
        line=$(grep -E "^$mode " "$OUT/bench-$mode-$round.log" | tail -1)
        echo "$round $mode $t0 $t1 $line" >>"$OUT/windows.txt"
        sleep 1
    done
done
kill $smi
python3 - "$OUT/smi.csv" "$OUT/windows.txt" <<'PY'
import sys, datetime, statistics as st
samples = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        samples.append((t, float(f[1]), float(f[2]), float(f[3]), f[4]))
    except (ValueError, IndexError):
        pass
print("round mode: bench line | SM MHz p10/p50/p90 | W p50/p90 | C | throttle reasons seen")
for w in open(sys.argv[2]):
    p = w.split(None, 4)
    t0, t1 = float(p[2]), float(p[3])
    s = [x for x in samples if t0 + 0.3 <= x[0] <= t1 - 0.1 and x[2] > 250]  # busy samples only
    if not s:
        print(p[0], p[1], "no busy samples;", p[4].strip() if len(p) > 4 else "")
        continue
    c = sorted(x[1] for x in s); pw = sorted(x[2] for x in s)
    q = lambda v, f: v[min(len(v) - 1, int(f * len(v)))]
    print("%s %-10s %s | %d/%d/%d | %.0f/%.0f | %.0f | %s" % (p[0], p[1], (p[4].strip() if len(p) > 4 else "")[:70],
          q(c, .1), q(c, .5), q(c, .9), q(pw, .5), q(pw, .9), st.median(x[3] for x in s),
          ",".join(sorted(set(x[4] for x in s)))))
PY
if [ -n "${FK_NCU:-}" ] && command -v ncu >/dev/null; then
    for mode in ${FK_CLK_MODES:-tensor bias_gelu}; do
        stamp "ncu $mode (clocks locked by ncu)"
        timeout 150 ncu --kernel-name regex:fk_gemm_sm90 --launch-skip 3 --launch-count 1 \
            --section SpeedOfLight --section WarpStateStats --section InstructionStats \
            "$B/bench_gemm" --reps 20 --shapes "$shape" --modes "$mode" >"$OUT/ncu-$mode.txt" 2>&1
        grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Executed Instructions |Issue Slots Busy|Warp Cycles Per Issued" \
            "$OUT/ncu-$mode.txt" | head -12
        stamp "ncu $mode: cuBLASLt's kernel (clocks locked by ncu)"
        timeout 150 ncu --kernel-name regex:"${FK_NCU_PEER:-nvjet|xmma|cutlass|sm90_}" \
            --launch-skip 3 --launch-count 1 --section SpeedOfLight --section InstructionStats \
            "$B/bench_gemm" --reps 20 --shapes "$shape" --modes "$mode" >"$OUT/ncu-peer-$mode.txt" 2>&1
        grep -E "^  [a-zA-Z_].*[(]|Duration|SM Frequency|Compute \(SM\) Throughput|Executed Instructions " \
            "$OUT/ncu-peer-$mode.txt" | head -8
    done
fi
stamp done
