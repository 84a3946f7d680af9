#!/usr/bin/env bash
# The README's main job: an MPI job across a cluster in a box of one launcher and
# TMPI_DEMO_NODES (default 2) node pods, through the project's own path:
#   1. launcher pod: mpi-init writes the topology and makes the job key;
#   2. the key travels to the node pods as the job's Secret would (a read-only folder with
#      ssh-privatekey and ssh-publickey); each node pod runs `mpi-init --role node`, starts
#      mpi-sshd (the job's own SSH server: the job key is its host key and its one login key),
#      and its mpi-rendezvous sidecar;
#   3. `mpi-launcher run`: its coordinator waits until every sidecar has proved that its
#      server accepts the job key (the barrier); the preflight checks DNS, ssh and rank
#      placement, then the fabric (nccl-check's CPU twin, --check mpi); mpirun runs every rank under the rank agent, over ssh with strict host
#      key checking; the report is written and the sidecars told that the job has ended.
# It installs what is missing, builds, and tears every pod down on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if [[ ${1:-} != --in-cluster ]]; then
  bash scripts/install-deps.sh
  echo "== building (release preset)"
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" | tail -n 1
  export TMPI_BUILD_DIR=$root/build/release CIB_ROOT=$root/build/release/cib
  exec tests/cluster/cib run --jobset demo --nodes "${TMPI_DEMO_NODES:-2}" -- "$0" --in-cluster
fi

bin=$TMPI_BUILD_DIR/bin   # the programs, side by side as an image installs them
cib=tests/cluster/cib
pod_dir() { echo "$CIB_DIR/pods/$1"; }
launcher=$($cib pods | awk '/-launcher-/ { print $1 }')
nodes=$($cib pods | awk '/-node-/ { print $1 }')
nodes_n=$(wc -w <<<"$nodes")
etc_mpi="$(pod_dir "$launcher")/etc-mpi"   # the launcher's /etc/mpi volume

echo "== pods"
$cib pods | sed 's/^/   /'

echo "== launcher: mpi-init (static JobSet spec, slots=2)"
$cib exec "$launcher" -- "$bin/mpi-init" --jobset demo \
  --replicated-jobs "launcher=1,node=$nodes_n" --slots 2 --out "$etc_mpi"
sed 's/^/   hostfile: /' "$etc_mpi/hostfile"

echo "== the job Secret reaches the node pods (read-only, as the kubelet mounts it)"
secret="$CIB_DIR/secret"
mkdir -p "$secret"
launcher_ssh="$(pod_dir "$launcher")/home/.ssh"
cp "$launcher_ssh/id_ed25519" "$secret/ssh-privatekey"
cp "$launcher_ssh/id_ed25519.pub" "$secret/ssh-publickey"
chmod 0444 "$secret"/*; chmod 0555 "$secret"

sidecars=()
for node in $nodes; do
  $cib exec "$node" -- "$bin/mpi-init" --role node --ssh-secret "$secret" --log-level warn
  $cib exec "$node" -- "$bin/mpi-sshd" --log-level warn > "$(pod_dir "$node")/mpi-sshd.log" 2>&1 </dev/null &
  $cib exec "$node" -- "$bin/mpi-rendezvous" --coordinator "$launcher.demo:29410" \
    --log-level warn > "$(pod_dir "$node")/sidecar.log" 2>&1 &
  sidecars+=($!)
  echo "   $node: identity installed, mpi-sshd on 2222 (job key = host key), sidecar started"
done

echo "== launcher: mpi-launcher run (rendezvous barrier, preflight, fabric check, mpirun, supervision)"
start=$(date +%s.%N)
$cib exec "$launcher" -- "$bin/mpi-launcher" run --hosts "$etc_mpi/hosts.json" --iface eth0 \
  --report "$etc_mpi/report.json" --beat-interval 1s --check mpi \
  --max-bytes 4M --pair-bytes 1M -- "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi" 2>&1 |
  sed -E 's/^[0-9T:.-]+Z //; s/(launching [0-9]+ ranks \([a-z0-9]+\)): .*/\1/' | sed 's/^/   /'
printf '== done in %.1f s; from report.json:\n' "$(echo "$(date +%s.%N) - $start" | bc)"
jq -r '(.phases[] | "   phase \(.name): \(.seconds * 100 | round / 100) s"),
       (.hosts[] | "   host \(.name): \(.state) at \(.address)"),
       "   fabric check: \(.check.result), all-reduce of 4 MiB at \(.check.allreduce[-1].busbw_gbps * 100 | round / 100) GB/s busbw",
       "   exit \(.exit.code): \(.exit.reason)"' "$etc_mpi/report.json"
for sidecar in "${sidecars[@]}"; do wait "$sidecar"; done
echo "== every sidecar exited 0 (the launcher told them the job ended); tearing the cluster down"
