# launcher_lib.sh: the job that the mpi-launcher tests share (tests/cluster/launcher_test.sh,
# teardown_test.sh, faults_test.sh, restarts_test.sh, attacks_test.sh, ip_family_test.sh,
# mpirun_line_test.sh, ssh_relay_test.sh, bundle_test.sh, api_token_test.sh,
# explained_test.sh): 1 launcher and the node pods of the cluster, 2 slots each (TMPI_SLOTS),
# mpi-init run in each, sshd in each node; launch() runs mpi-launcher with short beats, so
# that a loss is named in seconds. Sourced after the case's name is in $1.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case_name=$1
launcher=$(launcher_pod); nodes=($(node_pods)); sub=$(subdomain)
L="$TMPI_BIN/mpi-launcher"
report="$CIB_DIR/report.json"
# TMPI_SLOTS: a TrainJob's numProcPerNode (bundle_test.sh); TMPI_LAUNCHER_AS_NODE=1: the
# launcher is a host too, as Trainer's runLauncherAsNode makes it (explained_test.sh).
init_launcher --slots "${TMPI_SLOTS:-2}" ${TMPI_LAUNCHER_AS_NODE:+--launcher-as-node}
for node in "${nodes[@]}"; do init_node "$node"; done
with_sidecars() { for node in "${nodes[@]}"; do start_sidecar "$node" --deadline 60s; done; }
# wait_ranks T0 MS POD...: until each POD runs a rank of the job (the tests' `sleep 60`
# itself, not only its agent), and MS milliseconds have passed since T0 (date +%s%N, taken
# when the launch began). A fault meant for a running job must not come while mpirun still
# starts its daemons, which a loaded machine can stretch past any fixed sleep; on an idle
# one it comes at T0 + MS, as it always did.
wait_ranks() {
  local t0=$1 ms=$2 deadline=$((SECONDS + 30)) pod left; shift 2
  for pod in "$@"; do
    # Not `job_leftovers | grep -q`: grep leaves early, and pipefail counts the writer's SIGPIPE.
    until grep -qE ': sleep 60 ?$' <<<"$(job_leftovers "$pod")"; do
      ((SECONDS < deadline)) || fail "no rank runs on $pod 30 s after the launch"
      sleep 0.2
    done
  done
  left=$((ms - $(ms_since "$t0")))
  ((left <= 0)) || sleep "$(bc <<<"scale=3; $left / 1000")"
}
# check_teardown SECONDS LOG: a lost host's teardown, from the line naming it to the launcher's
# exit. The goal is the lost host's grace (3 s, run.cpp), then the report; under the sanitizers
# the exit takes longer (LeakSanitizer scans the launcher's memory at its exit: 0.8 s was seen).
check_teardown() {
  local slack=0.5; [[ ${TMPI_SANITIZED:-OFF} != ON ]] || slack=1.5
  (( $(bc <<<"$1 <= 3 + $slack") )) ||
    fail "the teardown took $1 s after naming the host (goal: 3 s, and $slack s for the exit): $2"
}
# judge_lost LOG T0 T_EXIT: node 1 named lost (or gone) in the launcher's LOG, node 0 not;
# sets `named` (that line), `detect` (seconds from T0 to it) and `teardown` (from it to T_EXIT).
judge_lost() {
  named=$(grep -m 1 -E "host ${nodes[1]}.$sub (lost|is gone)" <<<"$1") || fail "${nodes[1]} is not named: $1"
  ! grep -qE "host ${nodes[0]}.$sub (lost|is gone)" <<<"$1" || fail "the live host was named lost: $1"
  local t_named; t_named=$(date -d "$(cut -d' ' -f1 <<<"$named")" +%s.%N)
  detect=$(bc <<<"$t_named - $2"); teardown=$(bc <<<"$3 - $t_named")
}
status_env=()  # Trainer's status server variables, once start_status_server has run
# A launch that hangs ends at 240 s (exit 124), before ctest's 300 s: the case then fails
# with the launcher's output, which a test killed by ctest would lose.
launch() {  # launch [launcher options] -- CMD...: mpi-launcher run in the launcher pod
  in_pod "$launcher" timeout -k 5 240 env "${status_env[@]}" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 \
    --report "$report" --beat-interval 1s --lost-after 3s --grace 3s "$@"
}
# The mpi-launcher process itself (in the launcher pod), not the shell that started it.
launcher_pid() {
  local pid cmd
  ip netns pids "$("$CIB" ns "$launcher")" | while read -r pid; do
    cmd=$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline")
    [[ $cmd == *"mpi-launcher run"* && $cmd != timeout* ]] && echo "$pid"
  done | head -n 1
}
# start_status_server [fake options]: Trainer's status server (the faithful fake, tests/fakes) in the launcher pod, on its own
# loopback, with a CA made for this run. Sets status_env: the variables Trainer injects.
start_status_server() {
  local dir="$CIB_DIR/status"; mkdir -p "$dir"
  bash "$(dirname "$0")/../fakes/make_test_ca.sh" "$dir"
  echo "projected-token-$RANDOM$RANDOM" > "$dir/token"
  rm -f "$dir/port"
  in_pod "$launcher" python3 "$(dirname "$0")/../fakes/fake_trainer_status.py" --cert "$dir/server.crt" \
    --key "$dir/server.key" --token-file "$dir/token" --trainjob team-a/train --port-file "$dir/port" \
    --log "$dir/requests.log" --state "$dir/state.json" "$@" &
  status_pid=$!
  for _ in $(seq 100); do [[ -s $dir/port ]] && break; sleep 0.05; done
  [[ -s $dir/port ]] || fail "the fake status server did not start"
  status_env=(KUBEFLOW_TRAINER_SERVER_URL="https://127.0.0.1:$(cat "$dir/port")/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/train/status"
              KUBEFLOW_TRAINER_SERVER_TOKEN="$dir/token" KUBEFLOW_TRAINER_SERVER_CA_CERT="$dir/ca.crt")
}
# The Kubernetes API (the faithful fake, tests/fakes) in the launcher pod, knowing TrainJob
# team-a/train, with the fake's switches; adds KUBECONFIG to status_env (the launcher's env).
start_kube_api() {
  local dir="$CIB_DIR/kube"; mkdir -p "$dir"
  bash "$(dirname "$0")/../fakes/make_test_ca.sh" "$dir"
  local token="sa-token-$RANDOM$RANDOM"
  echo '{"trainjobs": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
         "metadata": {"name": "train", "namespace": "team-a", "uid": "5e1f0000-aaaa-bbbb-cccc-000011112222"}}]}' > "$dir/state.json"
  rm -f "$dir/port"
  in_pod "$launcher" python3 "$(dirname "$0")/../fakes/fake_kube_api.py" --cert "$dir/server.crt" --key "$dir/server.key" \
    --token "$token" --state "$dir/state.json" --port-file "$dir/port" --log "$dir/requests.log" "$@" &
  for _ in $(seq 100); do [[ -s $dir/port ]] && break; sleep 0.05; done
  [[ -s $dir/port ]] || fail "the fake Kubernetes API did not start"
  cat > "$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: test
contexts: [{name: test, context: {cluster: fake, user: launcher, namespace: team-a}}]
clusters: [{name: fake, cluster: {server: "https://127.0.0.1:$(cat "$dir/port")", certificate-authority-data: "$(base64 -w0 "$dir/ca.crt")"}}]
users: [{name: launcher, user: {token: "$token"}}]
KC
  status_env+=(KUBECONFIG="$dir/kubeconfig")
}
# memory_limit POD [PID]: a memory cgroup of 300 MiB, no swap, as the kubelet gives a container
# one, that PID (POD's server) moves into, or a process that writes 0 to its cgroup.procs:
# every process it forks (the MPI daemon, the agents, the ranks) is born there. The pod sees the hierarchy where a container
# does, at /sys/fs/cgroup; sets `mem` (the cgroup's folder), removed at the script's exit.
memory_limit() {
  local pod=$1 pid=${2:-}
  mem=""
  if [[ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ]]; then
    mem="/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)/tmpi-oom-$$"
    mkdir "$mem" && echo 300M > "$mem/memory.limit_in_bytes"
    # No swap to spill into (where the kernel accounts it), or the rank would swap, not die.
    [[ ! -e $mem/memory.memsw.limit_in_bytes ]] || echo 300M > "$mem/memory.memsw.limit_in_bytes"
  elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    mem="/sys/fs/cgroup$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)/tmpi-oom-$$"
    mkdir "$mem" && echo 300M > "$mem/memory.max" && echo 0 > "$mem/memory.swap.max"
  fi
  [[ -n $mem ]] || fail "no memory cgroup controller on this machine (v1 or v2) to play an OOM kill in"
  # `ip netns exec` gave the pod a fresh sysfs, without the hierarchy: mounted in its own mount namespace.
  if [[ $mem == /sys/fs/cgroup/memory/* ]]; then
    in_pod "$pod" sh -c 'mount -t tmpfs cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/memory &&
      mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory' || fail "cannot mount the memory cgroup in the pod"
  else
    in_pod "$pod" mount -t cgroup2 cgroup2 /sys/fs/cgroup || fail "cannot mount cgroup2 in the pod"
  fi
  trap 'for p in $(cat "$mem/cgroup.procs" 2>/dev/null); do kill -9 "$p"; done; sleep 0.5; rmdir "$mem" 2>/dev/null' EXIT
  [[ -z $pid ]] || echo "$pid" > "$mem/cgroup.procs"
}
