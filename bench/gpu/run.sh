#!/usr/bin/env bash
# bench/gpu/run.sh: nccl-check's NCCL all-reduce beside a reference from the same NCCL, on
# a machine with GPUs. One prepared script, for the device lent to some tasks:
#   1. build the release preset (installs the Debian packages where apt exists);
#   2. run nccl-check --backend nccl with one rank per GPU, 1 MiB to 1 GiB;
#   3. run the reference: NCCL's own all_reduce_perf when it is on PATH (or in
#      $NCCL_TESTS_DIR), else PyTorch's torch.distributed all-reduce (torch_allreduce.py);
#   4. print ours, the reference and the ratio per size. The target is >= 0.95 at 256 MiB
#      and above. On one GPU busbw is 0 by definition (2(n-1)/n), so algbw is compared.
# Usage: bash bench/gpu/run.sh [MAX_BYTES]   (default 1G)
# On a machine without Debian's packages, first `bash bench/gpu/bundle.sh` here, carry
# build/gpu-bundle there, and run with TMPI_GPU_BUNDLE=build/gpu-bundle: no build then.
set -euo pipefail
cd "$(dirname "$0")/../.."
max=${1:-1G}
out=${OUT:-$(mktemp -d)}
if [[ -n ${TMPI_GPU_BUNDLE:-} ]]; then
  # shellcheck disable=SC1091 # written by bundle.sh
  source "$TMPI_GPU_BUNDLE/env.sh"
  nccl_check=$TMPI_GPU_BUNDLE/trainer-mpi/bin/nccl-check
else
  if command -v apt-get >/dev/null && [[ ${TMPI_SKIP_DEPS:-0} != 1 ]]; then bash scripts/install-deps.sh; fi
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target nccl-check >/dev/null
  nccl_check=build/release/bin/nccl-check
fi
gpus=$(nvidia-smi -L | grep -c '^GPU') || { echo "no GPU visible (nvidia-smi -L)"; exit 4; }
echo "GPUs: $gpus; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun.openmpi -np "$gpus" --bind-to none "$nccl_check" --backend nccl \
  --min-bytes 1M --max-bytes "$max" --step-factor 4 --iters 20 --warmup 5 --pair-bytes 64M --json "$out/ours.json" |
  tee "$out/ours.txt"

# The reference, as rows "bytes algbw busbw".
tests_bin=$(command -v all_reduce_perf || true)
[[ -z $tests_bin && -n ${NCCL_TESTS_DIR:-} ]] && tests_bin=$NCCL_TESTS_DIR/build/all_reduce_perf
if [[ -n $tests_bin && -x $tests_bin ]]; then
  reference="nccl-tests all_reduce_perf"
  "$tests_bin" -b 1M -e "$max" -f 4 -g "$gpus" -n 20 -w 5 -c 1 -d float -o sum | tee "$out/reference.txt" |
    awk '$1 ~ /^[0-9]+$/ && NF >= 12 { print $1, $7, $8 }' > "$out/reference.rows"
elif python3 -c 'import torch, torch.distributed' 2>/dev/null; then
  reference="torch.distributed all_reduce (NCCL)"
  python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" bench/gpu/torch_allreduce.py "$max" \
    > "$out/reference.rows"
else
  echo "no reference: neither all_reduce_perf (nccl-tests) nor PyTorch is here; nccl-check's figures are above"
  exit 0
fi

python3 - "$out/ours.json" "$out/reference.rows" "$reference" "$gpus" <<'PY'
import json, sys
ours = {r["bytes"]: r for r in json.load(open(sys.argv[1]))["allreduce"]}
ref = {}
for line in open(sys.argv[2]):
    parts = line.split()
    if len(parts) == 3 and parts[0].isdigit():
        ref[int(parts[0])] = (float(parts[1]), float(parts[2]))
key = "busbw" if int(sys.argv[4]) > 1 else "algbw"
print(f"\n| size | nccl-check {key} GB/s | {sys.argv[3]} {key} GB/s | ratio | target |")
print("|---|---|---|---|---|")
for size in sorted(set(ours) & set(ref)):
    mine = ours[size][key + "_gbps"]
    theirs = ref[size][1 if key == "busbw" else 0]
    ratio = mine / theirs if theirs > 0 else float("nan")
    target = ">= 0.95" if size >= 256 << 20 else ""
    if int(sys.argv[4]) == 1:
        # One rank: NCCL's in-place all-reduce (PyTorch's only kind) copies nothing, while
        # nccl-check's out-of-place one is a device-to-device copy, so no ratio means anything.
        ratio_text, target = "n/a", "n/a (one GPU)"
    else:
        ratio_text = f"{ratio:.3f}"
    print(f"| {size >> 20} MiB | {mine:.1f} | {theirs:.1f} | {ratio_text} | {target} |")
if int(sys.argv[4]) == 1:
    print("\none GPU: no fabric to measure; nccl-check's algbw is a device copy (2 bytes of memory")
    print("traffic a byte), the reference's an in-place all-reduce of one rank, which NCCL skips")
PY
