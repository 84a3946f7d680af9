#!/usr/bin/env bash
# Row: mpi-init on a generated list of 10,000 realistic pods (full pod objects, ~3.5 KB
# each), median of 5 runs: wall time and peak RSS. Baseline, in the same run: what a
# shell init container does with jq (list the pods' FQDNs into a hostfile).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
python3 "$root/tests/initcontainer/make_pods.py" 10000 > "$work/pods.json"
input_kb=$(( $(stat -c %s "$work/pods.json") / 1024 ))
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
measure() {  # prints "seconds kb" for one run of the command
  /usr/bin/time -f '%e %M' -o "$work/t" "$@" >/dev/null 2>&1
  cat "$work/t"
}
for _ in 1 2 3 4 5; do
  measure "$TMPI_BUILD_DIR/bin/mpi-init" --pods "$work/pods.json" --out "$work/out" \
    --ssh-dir "$work/ssh" --log-level warn >> "$work/ours"
  measure jq -r '.items[] | "\(.spec.hostname).\(.spec.subdomain) slots=\(.spec.containers[0].resources.limits["nvidia.com/gpu"] // 1)"' \
    "$work/pods.json" >> "$work/jq"
done
ours_s=$(awk '{ print $1 }' "$work/ours" | median); ours_kb=$(awk '{ print $2 }' "$work/ours" | median)
jq_s=$(awk '{ print $1 }' "$work/jq" | median); jq_kb=$(awk '{ print $2 }' "$work/jq" | median)
printf '| mpi-init, 10,000 pods (%d MB list): time | %.2f s | %.2f s (jq) | %.2f | <= 0.25 x jq |\n' \
  $((input_kb / 1024)) "$ours_s" "$jq_s" "$(echo "$ours_s / $jq_s" | bc -l)"
printf '| mpi-init, 10,000 pods: peak RSS | %d MB (%.1fx input) | %d MB (jq) | %.2f | < 3x input |\n' \
  $((ours_kb / 1024)) "$(echo "$ours_kb / $input_kb" | bc -l)" $((jq_kb / 1024)) "$(echo "$ours_kb / $jq_kb" | bc -l)"
