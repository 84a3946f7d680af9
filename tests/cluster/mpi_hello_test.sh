#!/usr/bin/env bash
# Proves the harness with plain MPI, before any project binary depends on it: a real
# mpirun (Open MPI) or mpiexec.hydra (MPICH) from the launcher pod runs an allreduce
# across the node pods, and every rank reports the pod it ran in.
# Usage (under cib run): mpi_hello_test.sh openmpi|mpich
source "$(dirname "$0")/lib.sh"
flavour=$1
for pod in $(pods); do "$CIB" sshd "$pod"; done
sub=$(subdomain)
hostfile="$CIB_DIR/hostfile"
: > "$hostfile"
for pod in $(node_pods); do
  if [[ $flavour == openmpi ]]; then echo "$pod.$sub slots=2"; else echo "$pod.$sub:2"; fi
done >> "$hostfile"

case $flavour in
  openmpi) out=$(in_pod "$(launcher_pod)" mpirun.openmpi --hostfile "$hostfile" -np 4 \
                   --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
                   "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi") ;;
  mpich) out=$(in_pod "$(launcher_pod)" mpiexec.hydra -f "$hostfile" -launcher ssh -iface eth0 -np 4 \
                 "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_mpich") ;;
  *) fail "unknown flavour $flavour" ;;
esac
echo "$out"
# Slots fill in hostfile order: ranks 0-1 on the first node, 2-3 on the second.
nodes=($(node_pods))
expect_contains "$out" "rank 0/4 on ${nodes[0]}" "placement"
expect_contains "$out" "rank 1/4 on ${nodes[0]}" "placement"
expect_contains "$out" "rank 2/4 on ${nodes[1]}" "placement"
expect_contains "$out" "rank 3/4 on ${nodes[1]}" "placement"
expect_contains "$out" "allreduce sum 6 over 4 ranks: ok" "allreduce"
if grep -q "on $(launcher_pod)" <<<"$out"; then fail "a rank ran on the launcher"; fi
pass "$flavour: 4 ranks across $(node_pods | wc -l) pods, allreduce correct"
