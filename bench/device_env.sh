# device_env.sh - sourced by the device scripts (device_all.sh, device_lead.sh,
# device_small.sh): the output folder $OUT, a `stamp` timer, the CUDA and
# cuBLAS library paths (cuBLASLt from the nvidia-cublas wheel when present)
# and the GPU's name, driver and clock in $OUT/env.txt; fk_run_test and
# fk_build (below).
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
T0=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
export PATH=/usr/local/cuda/bin:$PATH
cublas_dir=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${cublas_dir:-/nonexistent}:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/env.txt"

# fk_run_test ENTRY BUILD_DIR SECONDS: runs test NAME of an entry NAME or
# NAME@VAR=VAL:VAR=VAL (with those variables set), its log in $OUT, and adds
# its exit status and summary line to $OUT/summary.txt.
fk_run_test() {
    local t=$1 b=$2 secs=$3 env="" log
    case $t in *@*) env=${t#*@}; env=${env//:/ }; t=${t%%@*} ;; esac
    log="$OUT/$t$(echo "$env" | tr -c 'A-Za-z0-9\n' '_').log"
    [ -x "$b/$t" ] || { echo "$t: not built" | tee -a "$OUT/summary.txt"; return; }
    env $env timeout "$secs" "$b/$t" >"$log" 2>&1
    echo "$t $env exit $? : $(grep -E 'passed, [0-9]+ failed' "$log" | tail -1)" | tee -a "$OUT/summary.txt"
    grep -E "FAIL " "$log" | head -5
}

# fk_build BUILD_DIR TARGET...: configures (Release, sm_90a only) and builds
# those targets with -j16, the log in $OUT/build.log; exits the script with
# the log's tail when the build fails.
fk_build() {
    local b=$1
    shift
    stamp build
    cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON \
        "-DFP8KIT_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" >"$OUT/build.log" 2>&1 &&
        cmake --build "$b" -j16 --target "$@" >>"$OUT/build.log" 2>&1 ||
        { stamp "build failed"; tail -30 "$OUT/build.log"; exit 1; }
}
