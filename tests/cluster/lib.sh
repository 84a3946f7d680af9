# lib.sh: helpers for cluster-in-a-box tests. Sourced by each test script, which runs
# under `cib run`, so CIB_DIR names a live cluster. A failed check ends the test non-zero.
set -euo pipefail
CIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cib"
: "${TMPI_BUILD_DIR:?set by ctest: the build folder with the project binaries}"
# Where the pods find our programs: this build's bin/ by default; bundle_test.sh sets
# /opt/trainer-mpi/bin, the bundle that `cib run --bundle` mounts in each pod's own root.
TMPI_BIN=${TMPI_BIN:-$TMPI_BUILD_DIR/bin}

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
in_pod() { local pod=$1; shift; "$CIB" exec "$pod" -- "$@"; }
pods() { "$CIB" pods | awk '{ print $1 }'; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }  # ms_since T0 (T0 from date +%s%N)
# job_leftovers [POD...]: processes of the job still alive in these pods (default: every pod
# still up): ranks (the tests' `sleep 60`), agents, MPI daemons and launchers, nccl-check.
# sshd, the sidecars and the tests' own servers are the pods' and are not counted.
job_leftovers() {
  local pod ns pid cmd list=("$@")
  ((${#list[@]})) || list=($(pods))
  for pod in "${list[@]}"; do
    ns=$("$CIB" ns "$pod" 2>/dev/null) || continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      cmd=$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline") || continue
      case $cmd in
        *"sleep 60"*|*mpi-rank*|*"mpi-launcher rank"*|*"mpi-launcher run"*|*orted*|*prted*|*prterun*|*mpirun*|\
        *hydra_pmi_proxy*|*mpiexec*|*nccl-check*) echo "$pod: ${cmd:0:120}" ;;
      esac
    done
  done
}
# row FAULT OUTCOME DETECTED: one row of the fault matrix (tests/faults/run.sh collects them),
# once nothing of the job is left in any pod: it is checked here, before cib tears the pods
# down, since the teardown would hide a rank left running. Its 5th field is what was left
# (empty: nothing), and a leftover fails the case.
row() {
  local left="" _
  for _ in $(seq 50); do left=$(job_leftovers); [[ -z $left ]] && break; sleep 0.1; done
  printf 'fault-row\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(paste -sd ';' <<<"$left")"
  [[ -z $left ]] || fail "$1: left in the pods 5 s after the case: $left"
}
node_pods() { pods | grep -- '-node-'; }
# resident_mb [POD...]: the resident memory of every process in these pods (default: every
# pod), in MB; shared pages are counted in each, so an upper bound (the bench rows').
resident_mb() {
  local kb=0 pod pid rss list=("$@")
  ((${#list[@]})) || list=($(pods))
  for pod in "${list[@]}"; do
    for pid in $(ip netns pids "$("$CIB" ns "$pod")"); do
      rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || true
      kb=$((kb + ${rss:-0}))
    done
  done
  echo $((kb / 1024))
}
launcher_pod() { pods | grep -- '-launcher-' | head -n 1; }
subdomain() { cat "$CIB_DIR/subdomain"; }

# expect_contains TEXT NEEDLE WHAT
expect_contains() { grep -qF -- "$2" <<<"$1" || fail "$3: expected '$2' in:"$'\n'"$1"; }
expect_eq() { [[ "$1" == "$2" ]] || fail "$3: expected '$2', got '$1'"; }

# Open MPI refuses root unless told; the Trainer images set the same two variables.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# --- The project's own path, shared by the tests that build on mpi-init ---
ETC_MPI="${CIB_DIR:-}/etc-mpi"   # the launcher's /etc/mpi volume
SECRET="${CIB_DIR:-}/secret"     # the job's SSH Secret, as the kubelet mounts it

# write_pod_list: the pod list the API would give for this cluster (JobSet names, cib IPs).
write_pod_list() {
  local nodes; nodes=$(node_pods | wc -l)
  python3 "$(dirname "${BASH_SOURCE[0]}")/../initcontainer/make_pods.py" "$nodes" --jobset "$(subdomain)" --gpus 0 |
    jq --argjson ips "$("$CIB" pods | awk '{ print $2 }' | jq -R . | jq -s .)" \
       '.items |= [to_entries[] | .value.status.podIP = $ips[.key] | .value]' > "$CIB_DIR/pods.json"
}

# init_launcher [mpi-init args]: mpi-init in the launcher pod, then the job Secret from its key.
init_launcher() {
  write_pod_list
  in_pod "$(launcher_pod)" "$TMPI_BIN/mpi-init" --pods "$CIB_DIR/pods.json" --out "$ETC_MPI" \
    --log-level warn "$@"
  local ssh_dir="$CIB_DIR/pods/$(launcher_pod)/home/.ssh" key
  key=$(ls "$ssh_dir" | grep -E '^id_[a-z0-9]+$' | head -n 1)
  mkdir -p "$SECRET"
  cp "$ssh_dir/$key" "$SECRET/ssh-privatekey"; cp "$ssh_dir/$key.pub" "$SECRET/ssh-publickey"
  chmod 444 "$SECRET"/*; chmod 555 "$SECRET"
}

# The nodes' SSH server in the tests built on init_node (the launcher's, the faults', the
# fabric check's): TMPI_NODE_SERVER=mpi-sshd (the runtimes' default) or openssh (sshd, as
# manifests/openssh runs it: the default here, where the matrix's rows were first measured;
# tests/faults/run.sh sets it: every row on mpi-sshd, the rows the server takes part in on
# openssh).
NODE_SERVER=${TMPI_NODE_SERVER:-openssh}
[[ $NODE_SERVER == openssh || $NODE_SERVER == mpi-sshd ]] || fail "TMPI_NODE_SERVER=$NODE_SERVER: mpi-sshd or openssh"
# init_node POD: `mpi-init --role node` from the Secret, then the server on what it wrote.
init_node() {
  in_pod "$1" "$TMPI_BIN/mpi-init" --role node --ssh-server "$NODE_SERVER" --ssh-secret "$SECRET" --log-level warn
  if [[ $NODE_SERVER == mpi-sshd ]]; then start_mpi_sshd "$1"
  else "$CIB" sshd "$1" "$CIB_DIR/pods/$1/home/.ssh/sshd_config"; fi
}
# server_pid POD: the pid of POD's listening server (sshd's "[listener]", or mpi-sshd).
server_pid() {
  local pid cmd
  for pid in $(ip netns pids "$("$CIB" ns "$1")"); do
    cmd=$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline") || continue
    if [[ $cmd == *"sshd: "*"[listener]"* || $cmd == */mpi-sshd* ]]; then echo "$pid"; return 0; fi
  done
  fail "no SSH server found in $1"
}
# refuse_job_key POD: POD's server no longer takes the job key. sshd: its authorized_keys
# emptied. mpi-sshd takes only the job key, and derives its host key from it: restarted on another key,
# which the launcher's pinned known_hosts refuses before any login.
refuse_job_key() {
  if [[ $NODE_SERVER == openssh ]]; then : > "$CIB_DIR/pods/$1/home/.ssh/authorized_keys"; return; fi
  local other="$CIB_DIR/pods/$1/other-key" pid
  pid=$(server_pid "$1"); kill "$pid"
  timeout 5 tail --pid="$pid" -f /dev/null || fail "mpi-sshd in $1 did not stop"
  mkdir -p "$other" && chmod 700 "$other"
  ssh-keygen -q -t ed25519 -N '' -C other -f "$other/id_ed25519"
  start_mpi_sshd "$1" --ssh-dir "$other"
}

# start_mpi_sshd POD [args]: the built-in server (the runtimes' default) in the background,
# as the pod's main container runs it; waits until it listens on 2222.
start_mpi_sshd() {
  local pod=$1; shift
  "$CIB" exec "$pod" -- "$TMPI_BIN/mpi-sshd" "$@" > "$CIB_DIR/pods/$pod/mpi-sshd.log" 2>&1 </dev/null &
  wait_mpi_sshd "$pod"
}
# wait_mpi_sshd POD: until POD's mpi-sshd (its log in the pod's mpi-sshd.log) listens on 2222.
wait_mpi_sshd() {
  for _ in $(seq 100); do
    ip netns exec "$("$CIB" ns "$1")" bash -c 'exec 3<>/dev/tcp/127.0.0.1/2222' 2>/dev/null && return 0
    sleep 0.05
  done
  fail "mpi-sshd in $1 did not listen on 2222: $(cat "$CIB_DIR/pods/$1/mpi-sshd.log")"
}

# start_sidecar POD [args]: the node sidecar in the background; its pid in $CIB_DIR/pods/POD/sidecar.pid.
start_sidecar() {
  local pod=$1; shift
  "$CIB" exec "$pod" -- "$TMPI_BIN/mpi-rendezvous" \
    --coordinator "$(launcher_pod).$(subdomain):29410" "$@" > "$CIB_DIR/pods/$pod/sidecar.log" 2>&1 &
  echo $! > "$CIB_DIR/pods/$pod/sidecar.pid"
}

# wait_for TEXT FILE SECONDS: until FILE contains TEXT.
wait_for() {
  local deadline=$((SECONDS + $3))
  until grep -qF -- "$1" "$2" 2>/dev/null; do
    (( SECONDS < deadline )) || fail "no '$1' in $2 after $3 s:"$'\n'"$(cat "$2" 2>/dev/null)"
    sleep 0.2
  done
}
