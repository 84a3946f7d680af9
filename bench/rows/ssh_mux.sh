#!/usr/bin/env bash
# Row: would mpirun's ssh, multiplexed over connections the ssh check opened, make the check
# free? (The check's handshakes cost the launch its ratio to plain mpirun.) At 8
# and 64 node pods (TMPI_SSH_MUX_SIZES), each round runs in turn:
#   plain  mpirun --hostfile with `true`, 2 ranks a pod, every ssh its own handshake;
#   mux    one OpenSSH ControlMaster a pod, opened in parallel (the check's handshakes, made
#          reusable), then the same mpirun with plm_rsh_args naming their ControlPath, so its
#          ssh opens a channel on a live connection and sshd forks no new session process.
# Figures: both totals (medians), their ratio, and mux's two parts. Not something the
# launcher does: the row measures whether it should (bench/README.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ ${1:-} != --in-cluster ]]; then
  export CIB_ROOT=$TMPI_BUILD_DIR/cib CIB_QUIET=1
  for n in ${TMPI_SSH_MUX_SIZES:-8 64}; do
    "$root/tests/cluster/cib" run --jobset sshmux --nodes "$n" -- bash "$0" --in-cluster
  done
  exit 0
fi
source "$root/tests/cluster/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods))
init_launcher --slots 2
for node in "${nodes[@]}"; do init_node "$node"; done
n=${#nodes[@]} np=$((2 * ${#nodes[@]})) rounds=${TMPI_SSH_MUX_ROUNDS:-5}
export OMPI_MCA_btl=tcp,self
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mpirun_true() {
  in_pod "$launcher" mpirun.openmpi --hostfile "$ETC_MPI/hostfile" -np "$np" --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 --allow-run-as-root "$@" true > /dev/null 2>&1
}
sockets=$CIB_DIR/control  # the pods share this run's folder; their /tmp is each pod's own
mkdir -p "$sockets"
mux_ssh=(-o "ControlPath=$sockets/%C")
for _ in $(seq "$rounds"); do
  sleep 1; t0=$(now); mpirun_true; echo "$(now) - $t0" | bc >> "$CIB_DIR/plain"
  sleep 1; t0=$(now)
  for node in "${nodes[@]}"; do
    in_pod "$launcher" ssh "${mux_ssh[@]}" -o ControlMaster=yes -o ControlPersist=60 -f -N "$node" &
  done
  wait
  t1=$(now)
  mpirun_true --mca plm_rsh_args "${mux_ssh[*]} -o ControlMaster=no"
  t2=$(now)
  echo "$t1 - $t0" | bc >> "$CIB_DIR/masters"; echo "$t2 - $t1" | bc >> "$CIB_DIR/muxed"
  echo "$t2 - $t0" | bc >> "$CIB_DIR/mux"
  for node in "${nodes[@]}"; do in_pod "$launcher" ssh "${mux_ssh[@]}" -O exit "$node" 2> /dev/null & done
  wait
done
paste "$CIB_DIR/mux" "$CIB_DIR/plain" | awk '{ print $1 / $2 }' > "$CIB_DIR/ratio"
printf '| ssh multiplexed, %d pods: ControlMasters opened, then mpirun over them, vs plain mpirun | %.2f s | %.2f s | %.2f | - |\n' \
  "$n" "$(median < "$CIB_DIR/mux")" "$(median < "$CIB_DIR/plain")" "$(median < "$CIB_DIR/ratio")"
printf '| ssh multiplexed, %d pods: opening the %d masters; mpirun over them | %.2f s | %.2f s | - | - |\n' \
  "$n" "$n" "$(median < "$CIB_DIR/masters")" "$(median < "$CIB_DIR/muxed")"
