#!/usr/bin/env bash
# bench/gpu/device_checks.sh: nccl-check's NCCL backend on a real GPU, each case with what
# it must do, then the bandwidth bench (run.sh). Run there with the bundle (bundle.sh):
#   TMPI_GPU_BUNDLE=build/gpu-bundle bash bench/gpu/device_checks.sh
# Cases, each bounded by `timeout` so that a hang is a named failure, not a lost lease:
#   defaults     one rank a GPU at nccl-check's defaults: exit 0, the device and NCCL named
#                in the JSON report, every all-reduce's data correct;
#   two-per-gpu  two ranks on one GPU: exit 69, the rank and the GPU count named;
#   no-device    no GPU visible (CUDA_VISIBLE_DEVICES empty): exit 69, named, no hang;
#   bench        run.sh: 1 MiB to 1 GiB beside PyTorch's all-reduce on the same NCCL.
# The lines "device-check CASE: pass|FAIL ..." and "N passed, N failed" sum it up.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${TMPI_GPU_BUNDLE:?name the bundle made by bench/gpu/bundle.sh}"
# shellcheck disable=SC1091 # written by bundle.sh
source "$TMPI_GPU_BUNDLE/env.sh"
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
check=$TMPI_GPU_BUNDLE/bin/nccl-check
gpus=$(nvidia-smi -L | grep -c '^GPU')
passed=0 failed=0
verdict() {  # verdict CASE OK DETAIL
  if [[ $2 == 1 ]]; then
    passed=$((passed + 1)) && echo "device-check $1: pass ($3)"
  else
    failed=$((failed + 1)) && echo "device-check $1: FAIL ($3)"
  fi
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ldd "$check" | grep -E 'nccl|cudart|mpi|not found'

# defaults: no option but the backend and the report.
start=$EPOCHREALTIME
timeout 300 mpirun.openmpi -np "$gpus" --bind-to none "$check" --backend nccl --json "$out/defaults.json" \
  >"$out/defaults.txt" 2>&1
code=$?
took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
cat "$out/defaults.txt"
ok=0
if [[ $code == 0 ]] && python3 - "$out/defaults.json" <<'PY'; then ok=1; fi
import json, sys
report = json.load(open(sys.argv[1]))
text = json.dumps(report)
assert "H200" in text or "NVIDIA" in text, "no NVIDIA device named in the report"
assert "NCCL" in text, "no NCCL library named in the report"
rows = report["allreduce"]
assert rows, "no all-reduce row"
assert all(row.get("wrong", 0) == 0 for row in rows), "an all-reduce's data was wrong"
print("rows:", [(row["bytes"], round(row.get("algbw_gbps", 0), 1)) for row in rows])
PY
verdict defaults "$ok" "exit $code in ${took}s"

# two-per-gpu: one more rank than GPUs, all on this host.
start=$EPOCHREALTIME
timeout 120 mpirun.openmpi -np $((gpus + 1)) --oversubscribe --bind-to none "$check" --backend nccl \
  --max-bytes 1M >"$out/two-per-gpu.txt" 2>&1
code=$?
took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
cat "$out/two-per-gpu.txt"
ok=0
[[ $code == 69 ]] && grep -q "sees only $gpus GPU" "$out/two-per-gpu.txt" && ok=1
verdict two-per-gpu "$ok" "exit $code in ${took}s"

# no-device: the pod's GPUs hidden.
start=$EPOCHREALTIME
CUDA_VISIBLE_DEVICES="" timeout 120 mpirun.openmpi -x CUDA_VISIBLE_DEVICES -np 1 "$check" --backend nccl \
  --max-bytes 1M >"$out/no-device.txt" 2>&1
code=$?
took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
cat "$out/no-device.txt"
ok=0
[[ $code == 69 ]] && grep -q "no CUDA device is visible" "$out/no-device.txt" && ok=1
verdict no-device "$ok" "exit $code in ${took}s"

# bench: ours beside PyTorch's all-reduce, 1 MiB to 1 GiB.
start=$EPOCHREALTIME
OUT=$out timeout 400 bash bench/gpu/run.sh 1G >"$out/bench.txt" 2>&1
code=$?
took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
cat "$out/bench.txt"
ok=0
[[ $code == 0 ]] && grep -q '^| 1024 MiB' "$out/bench.txt" && ok=1
verdict bench "$ok" "exit $code in ${took}s"

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
