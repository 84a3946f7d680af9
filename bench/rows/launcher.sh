#!/usr/bin/env bash
# Rows, on a cluster in a box of 1 launcher and 8 nodes (2 slots each), 15 rounds. This
# machine is noisy (one run of the same job takes 2.9 to 4.3 s within minutes), so each round
# runs both sides back to back, first one then the other in turn, and a ratio is the median
# of the rounds' ratios; the times are medians too.
#  1. mpi-launcher run against plain mpirun --hostfile of the same allreduce program, without
#     and with the preflight (target: at most 1.05 without it);
#  2. the preflight's ssh fan-out (libssh, parallel) against a serial `ssh host true` loop
#     over the same 8 pods (target: at most 0.5). Here every sshd shares the same 2 cores;
#     on a real cluster each has its own machine and the fan-out costs about one handshake.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ ${1:-} != --in-cluster ]]; then
  export CIB_ROOT=$TMPI_BUILD_DIR/cib CIB_QUIET=1
  exec "$root/tests/cluster/cib" run --jobset bench --nodes 8 -- bash "$0" --in-cluster
fi
source "$root/tests/cluster/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods)); sub=$(subdomain)
init_launcher --slots 2
for node in "${nodes[@]}"; do init_node "$node"; done
hello="$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi"
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# Each run starts after a pause: the previous job's teardown (sshd sessions, daemons) still
# takes CPU for a moment, which the next run in line would otherwise pay.
timed() { sleep 1; local t0; t0=$(date +%s.%N); in_pod "$launcher" "$@" >/dev/null 2>&1; echo "$(date +%s.%N) - $t0" | bc; }
# Both sides get the box's transports the same way (Open MPI reads OMPI_MCA_* from the
# environment), so that the row measures the launcher, not which of openib, ofi, UCX and TCP
# each side's Open MPI probes.
export OMPI_MCA_btl=tcp,self
ratio() { echo "$1 / $2" | bc -l; }
run_plain() {
  timed mpirun.openmpi --hostfile "$ETC_MPI/hostfile" -np 16 --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 --allow-run-as-root "$hello"
}
run_ours() {
  timed "$TMPI_BUILD_DIR/bin/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" --wait none --preflight=false \
    --iface eth0 --report "$CIB_DIR/r.json" -- "$hello"
}
for round in $(seq 15); do
  if (( round % 2 )); then plain=$(run_plain); ours=$(run_ours); else ours=$(run_ours); plain=$(run_plain); fi
  ours_pf=$(timed "$TMPI_BUILD_DIR/bin/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" --wait none \
    --iface eth0 --report "$CIB_DIR/r.json" -- "$hello")
  fanout=$(timed "$TMPI_BUILD_DIR/bench/ssh_fanout" "$CIB_DIR/pods/$launcher/home/.ssh/id_ed25519" 2222 \
    $(for n in "${nodes[@]}"; do echo "$n.$sub"; done))
  loop=$(timed bash -c "for n in ${nodes[*]}; do ssh \$n.$sub true; done")
  for v in plain ours ours_pf fanout loop; do echo "${!v}" >> "$CIB_DIR/$v"; done
  ratio "$ours" "$plain" >> "$CIB_DIR/r_ours"; ratio "$ours_pf" "$plain" >> "$CIB_DIR/r_ours_pf"
  ratio "$fanout" "$loop" >> "$CIB_DIR/r_fanout"
done
plain=$(median < "$CIB_DIR/plain"); ours=$(median < "$CIB_DIR/ours"); ours_pf=$(median < "$CIB_DIR/ours_pf")
fanout=$(median < "$CIB_DIR/fanout"); loop=$(median < "$CIB_DIR/loop")
printf '| mpi-launcher run vs plain mpirun, 16 ranks on 8 pods, no preflight | %.2f s | %.2f s | %.2f | <= 1.05 |\n' \
  "$ours" "$plain" "$(median < "$CIB_DIR/r_ours")"
printf '| mpi-launcher run vs plain mpirun, with the preflight (DNS, ssh; placement by the agents) | %.2f s | %.2f s | %.2f | - |\n' \
  "$ours_pf" "$plain" "$(median < "$CIB_DIR/r_ours_pf")"
printf '| preflight ssh fan-out over 8 pods (libssh, curve25519) vs serial ssh loop | %.2f s | %.2f s | %.2f | <= 0.5 |\n' \
  "$fanout" "$loop" "$(median < "$CIB_DIR/r_fanout")"
