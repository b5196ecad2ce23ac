# device_env.sh - sourced by the device scripts (device_all.sh, device_lead.sh,
# device_small.sh): the output folder $OUT, a `stamp` timer, the CUDA and
# cuBLAS library paths (cuBLASLt from the nvidia-cublas wheel when present)
# and the GPU's name, driver and clock in $OUT/env.txt.
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
T0=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
export PATH=/usr/local/cuda/bin:$PATH
cublas_dir=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${cublas_dir:-/nonexistent}:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/env.txt"
