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
check=$TMPI_GPU_BUNDLE/trainer-mpi/bin/nccl-check
gpus=$(nvidia-smi -L | grep -c '^GPU')
passed=0 failed=0 code=0 took=0
# run_case CASE SECONDS CMD...: runs CMD under a timeout into $out/CASE.txt, shows it, and
# leaves its exit status in `code` and its time in `took`.
run_case() {
  local name=$1 limit=$2 start=$EPOCHREALTIME
  shift 2
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  code=$?
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  cat "$out/$name.txt"
}
verdict() {  # verdict CASE OK: counts it, and says it with the exit and the time of run_case
  if [[ $2 == 1 ]]; then
    passed=$((passed + 1)) && echo "device-check $1: pass (exit $code in ${took}s)"
  else
    failed=$((failed + 1)) && echo "device-check $1: FAIL (exit $code in ${took}s)"
  fi
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ldd "$check" | grep -E 'nccl|cudart|mpi|not found'

# defaults: no option but the backend and the report.
run_case defaults 300 mpirun.openmpi -np "$gpus" --bind-to none "$check" --backend nccl --json "$out/defaults.json"
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
verdict defaults "$ok"

# two-per-gpu: one more rank than GPUs, all on this host.
run_case two-per-gpu 120 mpirun.openmpi -np $((gpus + 1)) --oversubscribe --bind-to none "$check" --backend nccl \
  --max-bytes 1M
ok=0
[[ $code == 69 ]] && grep -q "sees only $gpus GPU" "$out/two-per-gpu.txt" && ok=1
verdict two-per-gpu "$ok"

# no-device: the pod's GPUs hidden.
CUDA_VISIBLE_DEVICES="" run_case no-device 120 mpirun.openmpi -x CUDA_VISIBLE_DEVICES -np 1 "$check" --backend nccl \
  --max-bytes 1M
ok=0
[[ $code == 69 ]] && grep -q "no CUDA device is visible" "$out/no-device.txt" && ok=1
verdict no-device "$ok"

# bench: ours beside PyTorch's all-reduce, 1 MiB to 1 GiB.
OUT=$out run_case bench 400 bash bench/gpu/run.sh 1G
ok=0
[[ $code == 0 ]] && grep -q '^| 1024 MiB' "$out/bench.txt" && ok=1
verdict bench "$ok"

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
