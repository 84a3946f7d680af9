#!/usr/bin/env bash
# Rows: the descriptor limit's cap (launcher/run.cpp, capped_nofile: a soft nofile above
# 65536 is lowered to it for mpirun and what it starts in the launcher pod), on a cluster in
# a box of 1 launcher and 8 nodes (2 slots each), every pod's soft and hard nofile at
# TMPI_NOFILE_HIGH (default 1048576: a container runtime's LimitNOFILE=1048576, or
# infinity), TMPI_NOFILE_ROUNDS rounds (default 7). Raising the hard limit needs
# CAP_SYS_RESOURCE; where the machine's hard limit is lower and cannot be raised, give
# TMPI_NOFILE_HIGH at most that and TMPI_NOFILE_CAP below it (row 1 then measures how the
# start-up grows with the limit; row 2, the launcher's own cap of 65536, needs HIGH above it). Open MPI's daemons close every descriptor up to the soft limit at
# each fork, so a huge limit slows mpirun's start-up. Each round runs the three sides back
# to back, in turn first, after a pause; the times are medians, a ratio the median of the
# rounds' ratios:
#  1. plain mpirun of the allreduce program with the launcher pod's soft nofile at
#     TMPI_NOFILE_CAP (default 65536, what the cap gives) against the same at HIGH;
#  2. mpi-launcher run at HIGH (it caps itself) against plain mpirun at HIGH.
# The node pods keep HIGH in every side: the cap reaches only what the launcher starts
# (docs/design.md, "The descriptor limit"), the nodes' daemons run under their sshd's limit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ ${1:-} != --in-cluster ]]; then
  # Raised here, before cib makes the pods, so that every pod's processes inherit it
  # (root may raise the hard limit up to fs.nr_open).
  high=${TMPI_NOFILE_HIGH:-1048576}
  if ! ulimit -Hn "$high" 2>/dev/null && (( $(ulimit -Hn) < high )); then  # said as a row: bench/run.sh goes on
    printf '| mpirun at 8 pods, nofile %s vs %s: not measured, the hard nofile is %s here (raising it needs CAP_SYS_RESOURCE; set TMPI_NOFILE_HIGH and TMPI_NOFILE_CAP below it) | - | - | - | - |\n' \
      "${TMPI_NOFILE_CAP:-65536}" "$high" "$(ulimit -Hn)"
    exit 0
  fi
  ulimit -Sn "$high"
  export CIB_ROOT=$TMPI_BUILD_DIR/cib CIB_QUIET=1
  exec "$root/tests/cluster/cib" run --jobset bench --nodes 8 -- bash "$0" --in-cluster
fi
source "$root/tests/cluster/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods))
init_launcher --slots 2
for node in "${nodes[@]}"; do init_node "$node"; done
hello="$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi"
high=${TMPI_NOFILE_HIGH:-1048576} cap=${TMPI_NOFILE_CAP:-65536}
seen=$(in_pod "${nodes[0]}" bash -c 'ulimit -Sn')
[[ $seen == "$high" ]] || { echo "nofile.sh: a node pod's soft nofile is $seen, not $high" >&2; exit 1; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
timed() { sleep 1; local t0; t0=$(date +%s.%N); in_pod "$launcher" "$@" >/dev/null 2>&1; echo "$(date +%s.%N) - $t0" | bc; }
export OMPI_MCA_btl=tcp,self  # both sides the same transports (rows/launcher.sh)
ratio() { echo "$1 / $2" | bc -l; }
# plain SOFT: plain mpirun with the launcher pod's soft nofile at SOFT.
plain() {
  timed bash -c 'ulimit -Sn "$1" && shift && exec "$@"' nofile "$1" mpirun.openmpi --hostfile "$ETC_MPI/hostfile" \
    -np 16 --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --allow-run-as-root "$hello"
}
ours() {
  timed "$TMPI_BUILD_DIR/bin/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" --wait none --preflight=false \
    --iface eth0 --report "$CIB_DIR/r.json" -- "$hello"
}
for round in $(seq "${TMPI_NOFILE_ROUNDS:-7}"); do
  case $((round % 3)) in
    0) huge=$(plain "$high"); capped=$(plain "$cap"); ours_t=$(ours) ;;
    1) capped=$(plain "$cap"); ours_t=$(ours); huge=$(plain "$high") ;;
    *) ours_t=$(ours); huge=$(plain "$high"); capped=$(plain "$cap") ;;
  esac
  for v in huge capped ours_t; do echo "${!v}" >> "$CIB_DIR/$v"; done
  ratio "$capped" "$huge" >> "$CIB_DIR/r_capped"; ratio "$ours_t" "$huge" >> "$CIB_DIR/r_launcher"
done
printf '| mpirun of 16 ranks on 8 pods, launcher pod nofile %s vs %s | %.2f s | %.2f s | %.2f | < 1 |\n' "$cap" "$high" \
  "$(median < "$CIB_DIR/capped")" "$(median < "$CIB_DIR/huge")" "$(median < "$CIB_DIR/r_capped")"
(( high > 65536 )) || exit 0  # the launcher caps only a limit above 65536
printf '| mpi-launcher run (caps itself) vs plain mpirun, both at nofile %s, 8 pods | %.2f s | %.2f s | %.2f | - |\n' "$high" \
  "$(median < "$CIB_DIR/ours_t")" "$(median < "$CIB_DIR/huge")" "$(median < "$CIB_DIR/r_launcher")"
