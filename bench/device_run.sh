#!/usr/bin/env bash
# device_run.sh - one full CUDA quantization check on a GPU machine: build (or
# use prebuilt binaries), run test_cuda_quant (full, with the > 2^31-element
# case), compute-sanitizer memcheck and racecheck on the reduced test
# (FK_TEST_SMALL=1), bench_quant, the torch peer (if torch imports), and a SASS
# instruction summary of the hot kernels. Logs and results go to $OUT (or
# ./device-out). Usage, from the repository root:
#   bash bench/device_run.sh                 # cmake Release build, -j16
#   FK_PREBUILT=dir bash bench/device_run.sh # use dir/{test_cuda_quant,bench_quant}
# Env: FK_COMMIT (recorded in the JSON lines), FK_SKIP_SANITIZE=1, FK_SKIP_TORCH=1,
#      FK_SKIP_SASS=1, FK_BENCH_QUICK=1 (one shape), FK_AB_ENV="VAR=value" (also
#      run the test and the bench with that variable set: an A/B of a variant).
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export FK_COMMIT=${FK_COMMIT:-unknown}
T0=$(date +%s)
stamp() { echo "[device_run +$(( $(date +%s) - T0 ))s] $*"; }

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader 2>&1 | tee "$OUT/env.txt"

if [ -n "${FK_PREBUILT:-}" ]; then
  BIN=$FK_PREBUILT
  stamp "using prebuilt binaries in $BIN"
else
  BIN=build-dev
  stamp "building"
  cmake -S . -B "$BIN" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON >"$OUT/build.log" 2>&1 &&
    cmake --build "$BIN" -j16 --target test_cuda_quant bench_quant >>"$OUT/build.log" 2>&1 ||
    { stamp "build failed"; tail -40 "$OUT/build.log"; exit 1; }
fi

stamp "test_cuda_quant (full)"
timeout 150 "$BIN/test_cuda_quant" >"$OUT/test.log" 2>&1
echo "test_cuda_quant exit $?" >>"$OUT/test.log"
tail -6 "$OUT/test.log"

if [ -z "${FK_SKIP_SANITIZE:-}" ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    for v in "" ${FK_AB_ENV:-}; do
      stamp "compute-sanitizer $tool (FK_TEST_SMALL=1 $v)"
      env FK_TEST_SMALL=1 $v timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 \
        "$BIN/test_cuda_quant" >>"$OUT/sanitize.log" 2>&1
      echo "== $tool $v exit $?" >>"$OUT/sanitize.log"
    done
  done
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|== (memcheck|racecheck).*exit|passed," "$OUT/sanitize.log"
fi

stamp "bench_quant"
rm -f "$OUT/quant.jsonl"
timeout 150 "$BIN/bench_quant" "$OUT/quant.jsonl" >"$OUT/bench.log" 2>&1
echo "bench_quant exit $?" >>"$OUT/bench.log"
grep -v '^JSON' "$OUT/bench.log"

if [ -n "${FK_AB_ENV:-}" ]; then # the same test and bench under a variant switch, e.g. FK_MXT_STAGES=3
  stamp "variant $FK_AB_ENV: test (no large case) and bench"
  env $FK_AB_ENV FK_TEST_LARGE=0 timeout 150 "$BIN/test_cuda_quant" >"$OUT/test_ab.log" 2>&1
  echo "test_cuda_quant ($FK_AB_ENV) exit $?" >>"$OUT/test_ab.log"
  tail -3 "$OUT/test_ab.log"
  rm -f "$OUT/quant_ab.jsonl"
  env $FK_AB_ENV timeout 150 "$BIN/bench_quant" "$OUT/quant_ab.jsonl" >"$OUT/bench_ab.log" 2>&1
  echo "bench_quant ($FK_AB_ENV) exit $?" >>"$OUT/bench_ab.log"
  grep -E "mx_axis-2|fused|exit" "$OUT/bench_ab.log"
fi

if [ -z "${FK_SKIP_TORCH:-}" ] && python3 -c 'import torch' 2>/dev/null; then
  stamp "torch peer"
  PYTHONUNBUFFERED=1 timeout 120 python3 bench/torch_quant_peer.py "$OUT/torch.jsonl" >"$OUT/torch.log" 2>&1
  echo "torch peer exit $?" >>"$OUT/torch.log"
  grep -v '^{' "$OUT/torch.log" | tail -20
fi

if [ -z "${FK_SKIP_SASS:-}" ] && command -v cuobjdump >/dev/null; then
  stamp "SASS summary"
  {
    for k in _Z13fk_seg_kernelILi2ELi0ELi0EEv11fk_seg_args _Z13fk_mxt_kernelILi2ELi0ELb1EEv11fk_mxt_args; do
      echo "== $k: resources and instruction mix"
      timeout 60 cuobjdump -sass -fun "$k" "$BIN/bench_quant" >"$OUT/k.sass" 2>&1
      grep -oE '^\s+/\*[0-9a-f]+\*/\s+[A-Z][A-Z0-9_.]*' "$OUT/k.sass" | awk '{print $2}' | sed 's/\..*//' |
        sort | uniq -c | sort -rn | head -25
    done
    rm -f "$OUT/k.sass"
  } >"$OUT/sass.txt" 2>&1
fi
stamp "done"
