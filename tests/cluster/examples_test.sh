#!/usr/bin/env bash
# examples/runtime-openmpi.yaml with examples/trainjob-mpi-hello.yaml, run on the cluster in
# a box: every container's own command and env from the manifests (tests/examples/
# pod_command.py reads them), each volume a folder of its pod, the programs from this
# build on PATH (as the image has them). What Kubernetes and Trainer's MPI plugin would do
# is done here by hand: the hostfile ConfigMap (`<pod>.<subdomain> slots=N`), the SSH Secret
# (an ECDSA P-521 PEM key as id_rsa, id_rsa.pub and authorized_keys, read-only), the
# downward-API JobSet name, init containers before the rest.
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
examples="$here/../../examples"
runtime="$examples/runtime-openmpi.yaml" trainjob="$examples/trainjob-mpi-hello.yaml"
launcher=$(launcher_pod); nodes=($(node_pods)); sub=$(subdomain)
jobset=${launcher%-launcher-0-0}
slots=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"]["trainer"]["numProcPerNode"])' "$trainjob")

# The programs, as the image's PATH has them: the build tree's bin/ has the installed layout
# (mpi-launcher finds mpi-rank and nccl-check beside itself).
export PATH="$TMPI_BUILD_DIR/bin:$PATH"

# Trainer's MPI plugin: the Secret, and the launcher's hostfile ConfigMap.
secret="$CIB_DIR/mpi-ssh-auth"; mkdir -p "$secret"
ssh-keygen -q -t ecdsa -b 521 -m PEM -N '' -C trainer -f "$secret/id_rsa"
cp "$secret/id_rsa.pub" "$secret/authorized_keys"
chmod 444 "$secret"/*; chmod 555 "$secret"
hostfile_dir="$CIB_DIR/pods/$launcher/mpi-hostfile"; mkdir -p "$hostfile_dir"
for node in "${nodes[@]}"; do echo "$node.$sub slots=$slots"; done > "$hostfile_dir/hostfile"

# run POD ROLE CONTAINER [&]: that container's command in that pod, its volumes mapped.
container() {
  local pod=$1 role=$2 name=$3 dir="$CIB_DIR/pods/$1"
  mkdir -p "$dir/trainer-mpi" "$dir/home/.ssh"
  python3 "$here/../examples/pod_command.py" "$runtime" "$role" "$name" --trainjob "$trainjob" \
    --volume "ssh-home=$dir/home/.ssh" --volume "trainer-mpi=$dir/trainer-mpi" \
    --volume "mpi-ssh-auth=$secret" --volume "mpi-hostfile=$hostfile_dir" \
    --field "metadata.labels['jobset.sigs.k8s.io/jobset-name']=$jobset" > "$dir/$role-$name.json"
  local -a argv env_pairs
  mapfile -d '' argv < <(jq -j '.argv[] + "\u0000"' "$dir/$role-$name.json")
  mapfile -d '' env_pairs < <(jq -j '.env | to_entries[] | "\(.key)=\(.value)\u0000"' "$dir/$role-$name.json")
  in_pod "$pod" env PATH="$PATH" "${env_pairs[@]}" "${argv[@]}"
}

mkdir -p /run/sshd && chmod 755 /run/sshd
for node in "${nodes[@]}"; do
  container "$node" node mpi-init || fail "node $node: mpi-init failed"
  container "$node" node mpi-rendezvous > "$CIB_DIR/pods/$node/sidecar.log" 2>&1 &
  echo $! > "$CIB_DIR/pods/$node/sidecar.pid"
  container "$node" node node > "$CIB_DIR/pods/$node/sshd.log" 2>&1 &
done
container "$launcher" launcher mpi-init || fail "launcher: mpi-init failed"
rc=0; out=$(container "$launcher" launcher node 2>&1) || rc=$?
[[ $rc == 0 ]] || fail "the TrainJob's command exited $rc: $out"
expect_contains "$out" "result: pass" "nccl-check's verdict"
ranks=$(( ${#nodes[@]} * slots ))
expect_contains "$out" "$ranks rank(s) on ${#nodes[@]} host(s)" "every rank on the node pods"
report="$CIB_DIR/pods/$launcher/trainer-mpi/report.json"
[[ $(jq -r .exit.code "$report") == 0 && $(jq '.ranks | length' "$report") == "$ranks" ]] || fail "report: $(cat "$report")"
for node in "${nodes[@]}"; do
  wait "$(cat "$CIB_DIR/pods/$node/sidecar.pid")" || fail "the sidecar of $node did not exit 0: $(cat "$CIB_DIR/pods/$node/sidecar.log")"
done
grep -E "mpi-launcher|result" <<<"$out"
pass "the example runtime's own commands: $ranks ranks on ${#nodes[@]} node pods, an all-reduce checked, sidecars done"
