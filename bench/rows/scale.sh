#!/usr/bin/env bash
# Rows: the launch path's cost curve, beside plain mpirun's. At 8, 16, 32 and 64 node pods of the cluster
# in a box (2 slots each; TMPI_SCALE_SIZES to change), each round runs, back to back and in
# turn first one then the other:
#   plain  mpirun --hostfile with a trivial program (`true`), 2 ranks a pod;
#   ours   mpi-launcher run at its defaults (the full preflight: DNS, then ssh beside the
#          launch, mpirun's daemons started over the check's own connections by the ssh relay,
#          each once its host passed, and no rank before all are up: Open MPI's own order, so
#          its agents ask no start gate; placement checked by every rank's agent)
#          with the same program and the same mpirun;
#   before the same with --ssh-check before: the ssh step before the launch, as it was.
# Four figures a size: both wall times (medians), the median of the rounds' ratios, and the
# preflight alone (report.json's steps, DNS and ssh, of the `before` run: there nothing runs
# beside the ssh step, which in `ours` shares the cores with mpirun's start); then the ssh
# step before the launch beside plain mpirun. Then, per size, what the box holds in memory; at
# the largest size where the time goes; last, how each wall time grows with N (the slope). Tree spawn: at up to 64 nodes, Open MPI 4's tree of
# radix 64 (routed_radix) has every daemon as a child of mpirun's own, so both ways launch
# alike; the largest size measures both and runs the faster (the row says which).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ ${1:-} != --in-cluster ]]; then
  export CIB_ROOT=$TMPI_BUILD_DIR/cib CIB_QUIET=1
  sizes=(${TMPI_SCALE_SIZES:-8 16 32 64})
  export TMPI_SCALE_CURVE=$TMPI_BUILD_DIR/scale-curve.$$  # "pods ours plain" a size, medians
  trap 'rm -f "$TMPI_SCALE_CURVE"' EXIT
  : > "$TMPI_SCALE_CURVE"
  for n in "${sizes[@]}"; do
    largest=0; [[ $n == "${sizes[-1]}" ]] && largest=1
    "$root/tests/cluster/cib" run --jobset scale --nodes "$n" -- bash "$0" --in-cluster "$n" "$largest"
  done
  # How each grows with N: the least-squares slope of the medians over the sizes, in seconds
  # a pod (two ranks) added.
  if (( ${#sizes[@]} > 1 )); then
    awk '{ n++; x += $1; xx += $1 * $1; o += $2; p += $3; xo += $1 * $2; xp += $1 * $3 }
      END { d = n * xx - x * x; so = (n * xo - x * o) / d; sp = (n * xp - x * p) / d
            printf "| launch cost per added pod (the slope over %s pods): mpi-launcher run vs plain mpirun | %.4f s | %.4f s | %.2f | <= 1.00 (no worse) |\n", sizes, so, sp, so / sp }' \
      sizes="$(IFS=,; echo "${sizes[*]}")" "$TMPI_SCALE_CURVE"
  fi
  exit 0
fi
n=$2 largest=$3
source "$root/tests/cluster/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods)); sub=$(subdomain)
init_launcher --slots 2
for node in "${nodes[@]}"; do init_node "$node"; done
np=$((2 * n)) rounds=${TMPI_SCALE_ROUNDS:-7}
export OMPI_MCA_btl=tcp,self  # both sides alike (bench/rows/launcher.sh says why)
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
now() { date +%s.%N; }
timed() { sleep 1; local t0; t0=$(now); in_pod "$launcher" "$@" >/dev/null 2>&1; echo "$(now) - $t0" | bc; }
run_plain() {
  timed mpirun.openmpi --hostfile "$ETC_MPI/hostfile" -np "$np" --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 --allow-run-as-root true
}
run_ours() {  # run_ours [launcher options]
  timed "$TMPI_BUILD_DIR/bin/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" --wait none --iface eth0 \
    --report "$CIB_DIR/r.json" "$@" -- true
}
spawn="tree spawn"
if (( largest )); then
  for _ in 1 2 3; do
    run_plain >> "$CIB_DIR/tree"
    OMPI_MCA_plm_rsh_no_tree_spawn=1 run_plain >> "$CIB_DIR/flat"
  done
  if (( $(echo "$(median < "$CIB_DIR/flat") < $(median < "$CIB_DIR/tree")" | bc) )); then
    export OMPI_MCA_plm_rsh_no_tree_spawn=1
    spawn="no tree spawn"
  fi
  printf '| %d pods: plain mpirun with tree spawn vs without | %.2f s | %.2f s | %.2f | the faster is used: %s |\n' \
    "$n" "$(median < "$CIB_DIR/tree")" "$(median < "$CIB_DIR/flat")" \
    "$(echo "$(median < "$CIB_DIR/tree") / $(median < "$CIB_DIR/flat")" | bc -l)" "$spawn"
fi
job_ok() { jq -e '.exit.code == 0' "$CIB_DIR/r.json" >/dev/null || { echo "scale: the job failed at $n pods: $(cat "$CIB_DIR/r.json")" >&2; exit 1; }; }
for round in $(seq "$rounds"); do
  preflight() { jq -r '[.preflight[].seconds] | add' "$CIB_DIR/r.json"; }  # the last run's report
  if (( round % 2 )); then
    plain=$(run_plain); ours=$(run_ours); job_ok; before=$(run_ours --ssh-check before); job_ok; alone=$(preflight)
  else
    before=$(run_ours --ssh-check before); job_ok; alone=$(preflight); ours=$(run_ours); job_ok; plain=$(run_plain)
  fi
  echo "$alone" >> "$CIB_DIR/preflight"
  echo "$plain" >> "$CIB_DIR/plain"; echo "$ours" >> "$CIB_DIR/ours"; echo "$before" >> "$CIB_DIR/before"
  echo "$ours / $plain" | bc -l >> "$CIB_DIR/ratio"
  echo "$before / $plain" | bc -l >> "$CIB_DIR/ratio-before"
done
target="-"; (( n == 8 )) && target="<= 1.10"; (( n == 64 )) && target="<= 1.05"
printf '| launch, %d pods (%d ranks, %s): mpi-launcher run vs plain mpirun | %.2f s | %.2f s | %.2f | %s |\n' \
  "$n" "$np" "$spawn" "$(median < "$CIB_DIR/ours")" "$(median < "$CIB_DIR/plain")" "$(median < "$CIB_DIR/ratio")" "$target"
echo "$n $(median < "$CIB_DIR/ours") $(median < "$CIB_DIR/plain")" >> "$TMPI_SCALE_CURVE"
pf_target="-"; (( n == 64 )) && pf_target="< 1 s"
printf '| launch, %d pods: the preflight alone (DNS, ssh; nothing beside it, as with --ssh-check before) | %.2f s | - | - | %s |\n' \
  "$n" "$(median < "$CIB_DIR/preflight")" "$pf_target"
printf '| launch, %d pods: the same with --ssh-check before (no overlap) vs plain mpirun | %.2f s | %.2f s | %.2f | - |\n' \
  "$n" "$(median < "$CIB_DIR/before")" "$(median < "$CIB_DIR/plain")" "$(median < "$CIB_DIR/ratio-before")"
printf '| cluster in a box, %d pods with sshd: resident memory | %d MB | - | - | < 24 GiB |\n' "$n" "$(resident_mb)"
(( largest )) || exit 0
# Where the time goes, at this size: one more run of ours, its ranks printing when they ran.
sleep 1
t0=$(now)
in_pod "$launcher" "$TMPI_BUILD_DIR/bin/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" --wait none --iface eth0 \
  --report "$CIB_DIR/r.json" -- sh -c 'echo "ran $(date +%s.%N)"' > "$CIB_DIR/out" 2>&1
t1=$(now)
launched=$(date -d "$(grep -m1 'launching' "$CIB_DIR/out" | awk '{ print $1 }')" +%s.%N)
grep -q '^ran [0-9]' "$CIB_DIR/out" || { echo "scale: no rank said when it ran: $(cat "$CIB_DIR/out")" >&2; exit 1; }
first=$(grep -oE '^ran [0-9]+[.][0-9]+' "$CIB_DIR/out" | awk '{ print $2 }' | sort -g | head -n 1)
last=$(grep -oE '^ran [0-9]+[.][0-9]+' "$CIB_DIR/out" | awk '{ print $2 }' | sort -g | tail -n 1)
step() { jq -r --arg s "$1" '[.preflight[]? | select(.name == $s) | .seconds] | add // 0' "$CIB_DIR/r.json"; }
dns=$(step dns) ssh=$(step ssh)
breakdown() { printf '| where the time goes, %d pods: %s | %.3f s | - | - | - |\n' "$n" "$1" "$2"; }
breakdown "DNS ($((n + 1)) names)" "$dns"
breakdown "ssh handshakes (libssh, 16 at a time), which the daemons' start then uses (the ssh relay)" "$ssh"
breakdown "launcher start, report and exit (the rest)" \
  "$(echo "($t1 - $t0) - $dns - ($first - $launched) - ($last - $first) - ($t1 - $last)" | bc -l)"
breakdown "daemon start: mpirun's ssh to every pod (over the relay), to the first rank" "$(echo "$first - $launched" | bc -l)"
breakdown "rank start: the first rank to the last" "$(echo "$last - $first" | bc -l)"
breakdown "teardown: the last rank to the launcher's exit" "$(echo "$t1 - $last" | bc -l)"
