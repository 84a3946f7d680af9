#!/usr/bin/env bash
# Rows: the launch over the nodes' built-in SSH server (mpi-sshd, the runtimes' default)
# against the same launch over OpenSSH's sshd (manifests/openssh), at 8 and 64 node pods of
# the cluster in a box (2 slots each; TMPI_SSH_SERVER_SIZES to change). Each round runs, in
# one sitting and in turn, with every node serving sshd, then mpi-sshd (the order swapped in
# every other round; the servers restarted between, on the same port 2222 and job key):
#   plain over sshd       mpirun --hostfile with a trivial program (`true`), 2 ranks a pod;
#   plain over mpi-sshd   the same mpirun, its daemons started through mpi-sshd;
#   ours over mpi-sshd    mpi-launcher run at its defaults (the preflight, the relay).
# Figures a size: each wall time's median, and the medians of the rounds' ratios against
# plain mpirun over sshd (the goal at 64 pods: plain over mpi-sshd at most 0.85 of it: a
# fork per connection and one for its sandboxed session process, but no re-exec or login
# shell); then the nodes' resident memory under each server. Where perf is installed (TMPI_SSH_SERVER_PROFILE=0 to skip), each round
# also runs one more plain launch per server under `perf record -a`, and a size ends with
# where that launch's CPU went, by program (samples at 1 kHz on every core: milliseconds):
# the server's side (sshd with the login shell it runs each command in, bash here; mpi-sshd
# with /bin/sh) against the rest, and that side over the connections (one a node): the cost
# of one connection to its server, the same programs under both (orted, OpenSSH's client,
# mpirun, the ranks). On a 2-core box a 64-pod launch keeps both cores busy, so the rest
# bounds the ratio that any server can reach. (The harness's own bash, a few ms, counts as
# the server's side under both.)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ ${1:-} != --in-cluster ]]; then
  export CIB_ROOT=$TMPI_BUILD_DIR/cib CIB_QUIET=1
  for n in ${TMPI_SSH_SERVER_SIZES:-8 64}; do
    "$root/tests/cluster/cib" run --jobset sshsrv --nodes "$n" -- bash "$0" --in-cluster "$n"
  done
  exit 0
fi
n=$2
source "$root/tests/cluster/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods))
init_launcher --slots 2
for node in "${nodes[@]}"; do  # both servers' files: the job key, and sshd's config
  in_pod "$node" "$TMPI_BUILD_DIR/bin/mpi-init" --role node --ssh-server openssh --ssh-secret "$SECRET" --log-level warn
done
np=$((2 * n)) rounds=${TMPI_SSH_SERVER_ROUNDS:-5}
export OMPI_MCA_btl=tcp,self
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
now() { date +%s.%N; }
timed() { sleep 1; local t0; t0=$(now); in_pod "$launcher" "$@" >/dev/null 2>&1 || return 1; echo "$(now) - $t0" | bc; }
run_plain() {
  timed mpirun.openmpi --hostfile "$ETC_MPI/hostfile" -np "$np" --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 --allow-run-as-root true
}
run_ours() {
  timed "$TMPI_BUILD_DIR/bin/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" --wait none --iface eth0 \
    --report "$CIB_DIR/r.json" -- true
}
# perf must work, not only be on PATH (Debian's wrapper fails without a linux-perf for this
# kernel; perf_event_paranoid may forbid -a).
profile=${TMPI_SSH_SERVER_PROFILE:-1}
((profile == 0)) || perf record -a -o /dev/null -- true >/dev/null 2>&1 || profile=0
# cpu_ms SERVER: one more plain launch under perf; appends "SERVER_SIDE_MS REST_MS".
cpu_ms() {
  local data="$CIB_DIR/perf.data" pid
  perf record -a -F 1000 -o "$data" -- sleep 120 >/dev/null 2>&1 & pid=$!
  sleep 0.5
  run_plain >/dev/null || { kill -INT "$pid"; wait "$pid" || true; return 1; }
  kill -INT "$pid"; wait "$pid" || true
  perf report -i "$data" --sort comm -g none -q -n 2>/dev/null | awk '
    $3 ~ /^(sshd|mpi-sshd|sh|bash)$/ { server += $2 }
    $3 ~ /^(orted|ssh|mpirun\.openmpi|true)$/ { rest += $2 }
    END { print server + 0, rest + 0 }' >> "$CIB_DIR/cpu-$1"
}
# serve SERVER: every node's port 2222 served by sshd or mpi-sshd, the other stopped.
serve() {
  local node pid
  for node in "${nodes[@]}"; do  # this box's servers only: by the pods' namespaces
    for pid in $(ip netns pids "$("$CIB" ns "$node")"); do
      [[ $(cat "/proc/$pid/comm" 2>/dev/null) == @(sshd|mpi-sshd) ]] && kill "$pid" 2>/dev/null || true
    done
  done
  for node in "${nodes[@]}"; do
    while ip netns exec "$("$CIB" ns "$node")" bash -c 'exec 3<>/dev/tcp/127.0.0.1/2222' 2>/dev/null; do sleep 0.05; done
    if [[ $1 == sshd ]]; then "$CIB" sshd "$node" "$CIB_DIR/pods/$node/home/.ssh/sshd_config"
    else start_mpi_sshd "$node" --log-level warn; fi
  done
}
for round in $(seq "$rounds"); do
  order=(sshd mpi-sshd); (( round % 2 )) || order=(mpi-sshd sshd)
  for server in "${order[@]}"; do
    serve "$server"
    if [[ $server == sshd ]]; then
      run_plain >> "$CIB_DIR/plain-sshd" || { echo "ssh_server: plain mpirun over sshd failed at $n pods" >&2; exit 1; }
      resident_mb "${nodes[@]}" >> "$CIB_DIR/mb-sshd"
    else
      run_plain >> "$CIB_DIR/plain-builtin" || { echo "ssh_server: plain mpirun over mpi-sshd failed at $n pods" >&2; exit 1; }
      run_ours >> "$CIB_DIR/ours-builtin" || { echo "ssh_server: mpi-launcher over mpi-sshd failed at $n pods: $(cat "$CIB_DIR/r.json")" >&2; exit 1; }
      resident_mb "${nodes[@]}" >> "$CIB_DIR/mb-builtin"
    fi
    ((profile == 0)) || cpu_ms "$server" || { echo "ssh_server: the launch under perf failed over $server" >&2; exit 1; }
  done
  base=$(tail -n 1 "$CIB_DIR/plain-sshd")
  echo "$(tail -n 1 "$CIB_DIR/plain-builtin") / $base" | bc -l >> "$CIB_DIR/ratio-plain"
  echo "$(tail -n 1 "$CIB_DIR/ours-builtin") / $base" | bc -l >> "$CIB_DIR/ratio-ours"
done
target="-"; (( n == 64 )) && target="<= 0.85"
printf '| launch, %d pods (%d ranks): plain mpirun over mpi-sshd vs over sshd | %.2f s | %.2f s | %.2f | %s |\n' \
  "$n" "$np" "$(median < "$CIB_DIR/plain-builtin")" "$(median < "$CIB_DIR/plain-sshd")" "$(median < "$CIB_DIR/ratio-plain")" "$target"
printf '| launch, %d pods (%d ranks): mpi-launcher run over mpi-sshd vs plain mpirun over sshd | %.2f s | %.2f s | %.2f | %s |\n' \
  "$n" "$np" "$(median < "$CIB_DIR/ours-builtin")" "$(median < "$CIB_DIR/plain-sshd")" "$(median < "$CIB_DIR/ratio-ours")" "$target"
printf '| %d node pods, idle after the launches: resident memory with mpi-sshd vs with sshd | %d MB | %d MB | %.2f | - |\n' \
  "$n" "$(median < "$CIB_DIR/mb-builtin")" "$(median < "$CIB_DIR/mb-sshd")" \
  "$(echo "$(median < "$CIB_DIR/mb-builtin") / $(median < "$CIB_DIR/mb-sshd")" | bc -l)"
if ((profile)); then
  cpu_median() { awk -v c="$2" '{ print $c }' "$CIB_DIR/cpu-$1" | median; }
  for part in "1 the server's side (mpi-sshd and sh, vs sshd and bash)" "2 the rest (orted, ssh, mpirun, true)"; do
    c=${part%% *} a=$(cpu_median mpi-sshd "$c") b=$(cpu_median sshd "$c")
    printf '| CPU of one launch, %d pods: %s | %d ms | %d ms | %.2f | - |\n' "$n" "${part#* }" "$a" "$b" "$(echo "$a / $b" | bc -l)"
  done
  # A plain launch makes one connection to each node: the server's side over n is what one
  # connection costs its server (mpi-sshd: its connection process, the fork included).
  a=$(cpu_median mpi-sshd 1) b=$(cpu_median sshd 1)
  printf '| CPU of one connection, %d pods: its server (mpi-sshd: a connection process, the fork included; vs sshd) | %.1f ms | %.1f ms | %.2f | - |\n' \
    "$n" "$(echo "$a / $n" | bc -l)" "$(echo "$b / $n" | bc -l)" "$(echo "$a / $b" | bc -l)"
fi
