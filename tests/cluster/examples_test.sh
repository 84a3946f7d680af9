#!/usr/bin/env bash
# examples/runtime-openmpi.yaml with examples/trainjob-mpi-hello.yaml, run on the cluster in
# a box: every container's own command and env from the manifests (tests/examples/
# pod_command.py reads them), each volume a folder of its pod, the programs from this
# build on PATH (as the image has them). What Kubernetes and Trainer's MPI plugin would do
# is done here by hand: the hostfile ConfigMap (node pods, then the launcher: runLauncherAsNode),
# the SSH Secret (an ECDSA P-521 PEM key as id_rsa 0640, id_rsa.pub and authorized_keys 0644,
# root-owned, group fsGroup), each emptyDir root-owned and 2777 with group fsGroup, the
# downward-API JobSet name, init containers first, then the native sidecars (sshd,
# mpi-rendezvous), then the main container.
#
# Usage (under cib run): examples_test.sh [runtime|root|arbitrary-uid]
#   runtime        the pods' securityContext from the YAML (uid 1000, gid 1000, fsGroup 1000; the
#                  image's passwd has mpiuser 1000), every process under setpriv with no new
#                  privileges and no capabilities, as Pod Security "restricted" has them
#   root           uid 0 (a runtime patched to runAsUser 0)
#   arbitrary-uid  OpenShift's restricted SCC: uid 1000870000 that no passwd lists, gid 0,
#                  fsGroup 1000870000
source "$(dirname "$0")/lib.sh"
mode=${1:-runtime}
here=$(cd "$(dirname "$0")" && pwd)
examples="$here/../../examples"
runtime="$examples/runtime-openmpi.yaml" trainjob="$examples/trainjob-mpi-hello.yaml"
launcher=$(launcher_pod); nodes=($(node_pods)); sub=$(subdomain)
jobset=${launcher%-launcher-0-0}
slots=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"]["trainer"]["numProcPerNode"])' "$trainjob")

# The programs, as the image's PATH has them: the build tree's bin/ has the installed layout
# (mpi-launcher finds mpi-rank and nccl-check beside itself).
export PATH="$TMPI_BUILD_DIR/bin:$PATH"

# Who the pods' processes are, and the image's /etc/passwd (mpiuser 1000, as images/Dockerfile).
read -r yaml_uid yaml_gid fs_group < <(python3 -c '
import sys, yaml
rt = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "ClusterTrainingRuntime")
jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
sc = {str(j["name"]): j["template"]["spec"]["template"]["spec"].get("securityContext", {}) for j in jobs}
assert sc["launcher"] == sc["node"], "launcher and node pods must run as one uid (a non-root sshd logs in only its own)"
print(sc["node"].get("runAsUser", 0), sc["node"].get("runAsGroup", 0), sc["node"].get("fsGroup", 0))' "$runtime")
case $mode in
  runtime) uid=$yaml_uid gid=$yaml_gid groups=$fs_group ;;
  root) uid=0 gid=0 groups=$fs_group ;;
  arbitrary-uid) uid=1000870000 gid=0 groups=1000870000 fs_group=1000870000 ;;
  *) fail "unknown mode '$mode' (runtime, root or arbitrary-uid)" ;;
esac
[[ $mode != runtime || $uid != 0 ]] || fail "the runtime runs its pods as root"
as_pod_user=()
if [[ $uid != 0 ]]; then
  as_pod_user=(setpriv --reuid "$uid" --regid "$gid" --groups "$groups" --no-new-privs --bounding-set -all --inh-caps -all)
fi
for pod in $(pods); do
  f="/etc/netns/$("$CIB" ns "$pod")/passwd"
  awk -F: '$3 != 1000 && $1 != "mpiuser"' "$f" > "$f.new"; echo "mpiuser:x:1000:1000::/home/mpiuser:/bin/bash" >> "$f.new"
  cat "$f.new" > "$f"; rm -f "$f.new"   # in place: ip netns exec bound the inode
done
getent passwd "$uid" >/dev/null && [[ $mode == arbitrary-uid ]] && fail "uid $uid has a passwd entry here"

# emptydir DIR: as the kubelet makes an emptyDir, with fsGroup.
emptydir() { mkdir -p "$1"; chown "0:$fs_group" "$1"; chmod 2777 "$1"; }

# Trainer's MPI plugin: the Secret (v2.3 item modes), and the launcher's hostfile ConfigMap.
secret="$CIB_DIR/mpi-ssh-auth"; mkdir -p "$secret"
ssh-keygen -q -t ecdsa -b 521 -m PEM -N '' -C trainer -f "$secret/id_rsa"
cp "$secret/id_rsa.pub" "$secret/authorized_keys"
chown -R "0:$fs_group" "$secret"; chmod 640 "$secret/id_rsa"; chmod 644 "$secret/id_rsa.pub" "$secret/authorized_keys"
chmod 2755 "$secret"
hostfile_dir="$CIB_DIR/pods/$launcher/mpi-hostfile"; mkdir -p "$hostfile_dir"
for host in "${nodes[@]}" "$launcher"; do echo "$host.$sub slots=$slots"; done > "$hostfile_dir/hostfile"
chmod 444 "$hostfile_dir/hostfile"

# container POD ROLE NAME: that container's command in that pod, its volumes mapped, as the pod's user.
container() {
  local pod=$1 role=$2 name=$3 dir="$CIB_DIR/pods/$1"
  python3 "$here/../examples/pod_command.py" "$runtime" "$role" "$name" --trainjob "$trainjob" \
    --volume "home=$dir/vol-home" --volume "trainer-mpi=$dir/trainer-mpi" \
    --volume "mpi-ssh-auth=$secret" --volume "mpi-hostfile=$hostfile_dir" \
    --field "metadata.labels['jobset.sigs.k8s.io/jobset-name']=$jobset" > "$dir/$role-$name.json"
  local -a argv env_pairs
  mapfile -d '' argv < <(jq -j '.argv[] + "\u0000"' "$dir/$role-$name.json")
  mapfile -d '' env_pairs < <(jq -j '.env | to_entries[] | "\(.key)=\(.value)\u0000"' "$dir/$role-$name.json")
  in_pod "$pod" "${as_pod_user[@]}" env PATH="$PATH" ${TMPI_RENDEZVOUS_TIMEOUT:+TMPI_RENDEZVOUS_TIMEOUT=$TMPI_RENDEZVOUS_TIMEOUT} \
    "${env_pairs[@]}" "${argv[@]}"
}

# host POD ROLE: init container, then the native sidecars sshd and mpi-rendezvous, in the background.
host() {
  local pod=$1 role=$2 dir="$CIB_DIR/pods/$1"
  emptydir "$dir/vol-home"; emptydir "$dir/trainer-mpi"
  container "$pod" "$role" mpi-init || fail "$role $pod: mpi-init failed"
  local sshd_container=node; [[ $role == launcher ]] && sshd_container=sshd
  container "$pod" "$role" "$sshd_container" > "$dir/sshd.log" 2>&1 &
  container "$pod" "$role" mpi-rendezvous > "$dir/sidecar.log" 2>&1 &
  echo $! > "$dir/sidecar.pid"
}

for node in "${nodes[@]}"; do host "$node" node; done
host "$launcher" launcher
# One bound of the test's own (TMPI_RENDEZVOUS_TIMEOUT, 300 s by default): a host whose sshd
# refuses the job key fails the run in 60 s, within ctest's limit.
rc=0; out=$(TMPI_RENDEZVOUS_TIMEOUT=60 container "$launcher" launcher node 2>&1) || rc=$?
[[ $rc == 0 ]] || fail "$mode: the TrainJob's command exited $rc: $out"$'\n'"$(tail -n 5 "$CIB_DIR"/pods/*/sshd.log)"
expect_contains "$out" "result: pass" "nccl-check's verdict"
hosts=$(( ${#nodes[@]} + 1 )); ranks=$(( hosts * slots ))
expect_contains "$out" "$ranks rank(s) on $hosts host(s)" "every rank on every host, the launcher's too"
report="$CIB_DIR/pods/$launcher/trainer-mpi/report.json"
[[ $(jq -r .exit.code "$report") == 0 && $(jq '.ranks | length' "$report") == "$ranks" ]] || fail "report: $(cat "$report")"
for pod in "${nodes[@]}" "$launcher"; do
  wait "$(cat "$CIB_DIR/pods/$pod/sidecar.pid")" || fail "the sidecar of $pod did not exit 0: $(cat "$CIB_DIR/pods/$pod/sidecar.log")"
done

# Who ran it: the processes of every pod, and the files mpi-init made, are the pod user's.
home="$CIB_DIR/pods/$launcher/vol-home"
[[ $(stat -c '%u %a' "$home/.ssh") == "$uid 700" ]] || fail "$mode: ~/.ssh is $(stat -c '%u %a' "$home/.ssh")"
users=$(for pod in $(pods); do ip netns pids "$("$CIB" ns "$pod")"; done | xargs ps -o uid=,comm= -p | awk '$2 != "sleep" && $2 != "unshare" { print $1 }' | sort -u)
expect_eq "$(echo $users)" "$uid" "$mode: the uid of the pods' processes"
# HOME is an emptyDir (2777): only there does sshd need StrictModes no, and its reason is written.
expect_contains "$(cat "$home/.ssh/sshd_config")" "StrictModes no" "$mode: sshd_config"
name=$(awk -F: -v u="$uid" '$3 == u { print $1; exit }' "$home/.nss_wrapper/passwd")
[[ $mode != arbitrary-uid || $name == "user$uid" ]] || fail "$mode: nss_wrapper's passwd names uid $uid '$name'"
grep -h "Accepted publickey for $name " "$CIB_DIR"/pods/*/sshd.log >/dev/null || fail "$mode: no sshd logged in $name"
grep -E "mpi-launcher|result" <<<"$out"
pass "$mode (uid $uid, gid $gid, groups $groups): $ranks ranks on $hosts hosts, an all-reduce checked, sidecars done"
