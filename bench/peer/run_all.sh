#!/usr/bin/env bash
# run_all.sh - the block-scaled peer comparison in one GPU-machine run: builds fp8kit
# (gpu_check.sh's build step, build-gpu/) and DeepGEMM (deepgemm_build.sh) side by side,
# then runs deepgemm_peer.py (DeepGEMM, fp8kit, cuBLASLt blockwise) once per fp8kit tuning
# spec, each in its own process with DeepGEMM timed beside it.
#
# Usage, from the repository root (with .peer/ copied along):
#   bash bench/peer/run_all.sh [OUT_DIR]
# Environment:
#   FK_PEER_ARGS   extra deepgemm_peer.py arguments (e.g. --only 'gemm_block' --reps 10)
#   FK_PEER_TUNES  fp8kit tuning specs, one process each, separated by spaces; "default"
#                  is the planner's own choice (default: "default")
# Output: OUT_DIR/fk-build.log, dg-build.log, peer-<spec>.log and peer-<spec>.jsonl.
set -u
OUT=${1:-${OUT:-peer-out}}
mkdir -p "$OUT"
T0=$(date +%s)
stamp() { echo "[+$(($(date +%s) - T0))s] $*"; }

stamp "building DeepGEMM and fp8kit"
(bash bench/peer/deepgemm_build.sh /tmp/dg >"$OUT/dg-build.log" 2>&1) &
dg=$!
FK_STEPS=build FK_KEEP_LOGS=1 bash bench/gpu_check.sh "$OUT/fk" >"$OUT/fk-build.log" 2>&1
fk=$?
wait $dg
dgst=$?
stamp "fp8kit build $fk, DeepGEMM build $dgst"
[ $dgst -eq 0 ] || { tail -30 "$OUT/dg-build.log"; exit 1; }
. /tmp/dg/env.sh
[ $fk -eq 0 ] && export FP8KIT_LIBRARY=$PWD/build-gpu/libfp8kit.so
rc=0
for spec in ${FK_PEER_TUNES:-default}; do
    tag=$(echo "$spec" | tr -c 'A-Za-z0-9_.\n-' '_')
    stamp "peer run, fp8kit tuning: $spec"
    if [ "$spec" = default ]; then
        env -u FP8KIT_TUNING python3 bench/peer/deepgemm_peer.py --out "$OUT/peer-$tag.jsonl" ${FK_PEER_ARGS:-} \
            >"$OUT/peer-$tag.log" 2>&1 || rc=1
    else
        FP8KIT_TUNING=$spec python3 bench/peer/deepgemm_peer.py --out "$OUT/peer-$tag.jsonl" ${FK_PEER_ARGS:-} \
            >"$OUT/peer-$tag.log" 2>&1 || rc=1
    fi
    tail -40 "$OUT/peer-$tag.log"
done
stamp "done ($rc)"
exit $rc
