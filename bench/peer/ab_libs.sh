#!/usr/bin/env bash
# ab_libs.sh - one GPU-machine call that times prebuilt fp8kit libraries, each
# with optional tuning overrides, beside DeepGEMM: one deepgemm_peer.py
# process per line of SPEC, in order, DeepGEMM and ours in every process.
#
# usage (repository root, on the GPU machine):
#   OUT=dir [ONLY=regex] [PEER_ARGS="--ours-sfa mn_major ..."] [DG_BUILT=1] bash bench/peer/ab_libs.sh SPEC
# (DG_BUILT=1: DeepGEMM was already built into /tmp/dg by bench/peer/deepgemm_build.sh in this call)
# SPEC lines: TAG LIB [TUNING [PYROOT [ARGS...]]]
#   TAG     a name for the column (letters, digits, - and _)
#   LIB     a libfp8kit.so built here and carried along (sm_90a)
#   TUNING  an FP8KIT_TUNING spec for that process, or - for none
#   PYROOT  a folder whose python/ holds the binding that fits LIB (an older
#           library needs its own commit's binding), or - for this repository
#   ARGS    more deepgemm_peer.py arguments for that process (after PEER_ARGS),
#           e.g. --ours-sfa mn_major
# Repeat a line to interleave runs (the device drifts between processes).
# Output in OUT: peer-N-TAG.jsonl / .log per process, 0-rows.jsonl (all of them), and 0-table.txt (ours us
# / DeepGEMM us = ratio per case and column; with --kernel-time in PEER_ARGS a
# second table of the kernel times alone), named to come back first.
set -u
spec=${1:?usage: ab_libs.sh SPEC}
O=${OUT:-/tmp/ab-out}
mkdir -p "$O"
root=$(pwd)
t0=$(date +%s)
if [ -n "${DG_BUILT:-}" ] && [ -f /tmp/dg/env.sh ]; then # built earlier in the same call (e.g. beside tests)
    echo "DeepGEMM built before (DG_BUILT)"
else
    bash bench/peer/deepgemm_build.sh /tmp/dg >"$O/dg-build.log" 2>&1 || { tail -20 "$O/dg-build.log"; exit 1; }
    echo "DeepGEMM built in $(( $(date +%s) - t0 )) s"
fi
# shellcheck disable=SC1091
. /tmp/dg/env.sh
only=${ONLY:-gemm_block|grouped_contiguous|grouped_masked}
n=0
while read -r tag lib tun py args; do
    case "$tag" in ''|'#'*) continue ;; esac
    n=$((n + 1))
    here=$root
    [ "${py:--}" = - ] && py=
    if [ -n "${py:-}" ]; then # the binding of another commit, with this tree's bench/ and include/
        here=/tmp/ab-root-$n
        mkdir -p "$here" && cp -r "$root/bench" "$root/include" "$here/" && ln -sfn "$(cd "$py" && pwd)/python" "$here/python"
    fi
    [ "${tun:--}" = - ] && tun=
    FP8KIT_TUNING="$tun" FP8KIT_LIBRARY=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib") \
        timeout 300 python3 "$here/bench/peer/deepgemm_peer.py" --only "$only" --impls deepgemm,ours ${PEER_ARGS:-} ${args:-} \
        --out "$O/peer-$n-$tag.jsonl" >"$O/peer-$n-$tag.log" 2>&1
    echo "$n $tag: rc $? at $(( $(date +%s) - t0 )) s"
done <"$spec"
python3 - "$O" <<'PY' | tee "$O/0-table.txt"
import collections, glob, json, sys
rows, krows, tags = collections.OrderedDict(), collections.OrderedDict(), []
for f in sorted(glob.glob(sys.argv[1] + "/peer-*.jsonl"), key=lambda f: int(f.split("peer-")[1].split("-")[0])):
    tag = f.split("peer-")[1].rsplit(".", 1)[0]
    tags.append(tag)
    for line in open(f):
        r = json.loads(line)
        rows.setdefault(r["case"], {})[tag] = (r.get("ours_us"), r.get("peer_us"), r.get("ratio"))
        if r.get("kernel_ratio"):  # --kernel-time in PEER_ARGS
            krows.setdefault(r["case"], {})[tag] = (r["ours_kernel_us"], r["peer_kernel_us"], r["kernel_ratio"])
def cell(v):
    if not v or not v[0] or not v[1]:
        return "-"
    return "%.0f/%.0f=%.3f" % v
print("case".ljust(34), *tags)
for case, v in rows.items():
    print(case[:34].ljust(34), *[cell(v.get(t)) for t in tags])
if krows:
    print("kernel time alone (CUDA profiler)")
    for case, v in krows.items():
        print(case[:34].ljust(34), *[cell(v.get(t)) for t in tags])
PY
# every process's JSON lines in one file named to come back early (a device call returns few files)
cat "$O"/peer-*.jsonl > "$O/0-rows.jsonl" 2>/dev/null || true
