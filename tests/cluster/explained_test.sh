#!/usr/bin/env bash
# A failed job explains itself where the user looks: one case per failure class, on the job of
# launcher_test.sh (1 launcher, the node pods, 2 slots each, sidecars), run as the runtimes run
# it: the launcher in its own container, its Events through the launcher pod's mpi-rendezvous
# sidecar (the only holder of the API token) to the fake Kubernetes API (events_lib.sh), its
# termination message in a file of its own (the kubelet's terminationMessagePath, which the
# kubelet creates and bind-mounts at /dev/termination-log; --termination-log names it here).
# Each case provokes its fault as the fault matrix does, then assert_explained holds the five
# places a user reads to the same key, exit and names:
#   1. the termination message (`kubectl describe pod`): whose fault, the key, the host or rank;
#   2. the Warning Event on the TrainJob (`kubectl describe trainjob`), through the fake API;
#   3. the log's last lines (`kubectl logs`): report.json's summary, the termination message's lines;
#   4. the exit code (the failure policy's input);
#   5. report.json's exit.troubleshooting, a section of docs/troubleshooting.md.
# One case per run:
#   ssh-refused     node 1's SSH server refuses the job key: exit 69 before any rank, node 1 named
#   fabric-host     the fabric check (--check mpi) finds node 2's link slow (tbf, 20 Mbit/s): exit
#                   69, node 2 named (3 nodes: a slow pair alone cannot say which end is slow)
#   rank-exit       rank 1 exits 3: exit 3, the rank and its host named
#   rank-oom-node   rank 1 outgrows its node pod's memory cgroup (300 MiB): exit 137, named the OOM
#                   killer's with the limit, not retried
#   rank-oom-node-group  the same, where the kernel kills the node's whole container (cgroup v2's
#                   group kill): the agent dies with its rank, nothing of the job's on that node
#                   is left to say why, and the API says it: the kubelet (played below) reports
#                   the container OOMKilled, the launcher asks the sidecar for its pod, and names
#                   the OOM with the container's limit: exit 137, not the lost host's 75
#   lost-host       node 1's pod killed hard mid-run (every process SIGKILLed, its network gone):
#                   exit 75, node 1 named lost
#   rank-oom-launcher  the launcher a host too (runLauncherAsNode), rank 0 in the launcher's own
#                   container outgrows the container's memory cgroup, and the kernel kills that
#                   process alone (cgroup v1; v2 with the kubelet's singleProcessOOMKill): the
#                   launcher survives it, exit 137, named the OOM killer's with the limit
#   rank-oom-launcher-group  the same, where the kernel kills the whole container (cgroup v2's
#                   memory.oom.group, which the kubelet sets from Kubernetes 1.28 on): the
#                   launcher dies with its rank (surviving it needs the ranks in a cgroup of their
#                   own, which a restricted pod cannot make). Exit 137, no termination message of
#                   the launcher's (the kubelet falls back to the log's tail, which has no verdict),
#                   no report; the launcher pod's sidecar, stopped by the kubelet (played), asks
#                   the API for its pod and sends the Warning Event: the OOM, the container, its
#                   limit (rendezvous/launcher_end.h).
# The group kill is the kernel's on cgroup v2, and played on v1 (group_kill_ready, below).
[[ $1 != rank-oom-launcher* ]] || TMPI_LAUNCHER_AS_NODE=1
source "$(dirname "$0")/launcher_lib.sh"
source "$(dirname "$0")/events_lib.sh"
# A failed check shows the launcher's log too: what the user would have read instead.
fail() { [[ -z ${out:-} ]] || { echo "--- the launcher's log (last 40 lines):"; tail -n 40 <<<"$out"; } >&2; echo "FAIL: $*" >&2; exit 1; }
page="$(dirname "$0")/../../docs/troubleshooting.md"
tlog="$CIB_DIR/pods/$launcher/termination-log"
: > "$tlog"  # the kubelet's file: the launcher writes only where it exists

# assert_explained KEY EXIT REASON NAMED...: the job just ended (its exit in $rc, its log in
# $out) says the same thing in the five places: exit EXIT, troubleshooting KEY, a Warning Event
# REASON, each NAMED (a host, a rank, a limit) in the termination message and the Event.
assert_explained() {
  local key=$1 code=$2 reason=$3 note verdict lines event name; shift 3
  note="(see docs/troubleshooting.md#$key)"
  # 4. The exit code.
  [[ $rc == "$code" ]] || fail "expected exit $code, got $rc: $out"
  # 1. The termination message: the verdict's first line (the exit, whose fault), its reason
  # with the key, the names; within the kubelet's 4096 bytes.
  verdict=$(cat "$tlog")
  [[ -n $verdict ]] || fail "no termination message in $tlog"
  (($(wc -c < "$tlog") <= 4096)) || fail "the termination message is past the kubelet's 4096 bytes"
  [[ $(head -n 1 <<<"$verdict") =~ ^"trainer-mpi: the job failed after "[0-9.]+" s: exit $code (" ]] ||
    fail "the termination message's first line: $verdict"
  expect_contains "$verdict" "$note" "the termination message's key"
  for name in "$@"; do expect_contains "$verdict" "$name" "the termination message names it"; done
  # 2. The Event on the TrainJob, as `kubectl describe trainjob` lists it: the launcher's last.
  [[ -s $CIB_DIR/kube/requests.log ]] || fail "no request reached the fake API: no Event on the TrainJob"
  event=$(jq -c 'select(.method == "POST" and (.path | endswith("/events")) and .code == 201) | .object' \
    "$CIB_DIR/kube/requests.log" | tail -n 1)
  [[ -n $event ]] || fail "no Event was created on the TrainJob: $(cat "$CIB_DIR/kube/requests.log")"
  expect_eq "$(jq -r '[.type, .reason, .involvedObject.kind, .involvedObject.name, .involvedObject.uid] | join(" ")' <<<"$event")" \
    "Warning $reason TrainJob train $trainjob_uid" "the Event"
  expect_contains "$(jq -r .message <<<"$event")" "$note" "the Event's key"
  for name in "$@"; do expect_contains "$(jq -r .message <<<"$event")" "$name" "the Event names it"; done
  # 3. The log's last lines: the same lines as the termination message, report.json's summary.
  lines=$(wc -l <<<"$verdict")
  expect_eq "$(tail -n "$lines" <<<"$out" | sed 's/^.* mpi-launcher info: //')" "$verdict" "the log's last lines"
  # 5. report.json's key, the exit's, and a section of the troubleshooting page for it.
  expect_eq "$(jq -r '[.exit.code, .exit.troubleshooting] | join(" ")' "$report")" "$code $key" "report.json's exit"
  grep -qx "## $key" "$page" || fail "docs/troubleshooting.md has no section '## $key'"
  no_token_in <<<"$out"; no_token_in "$report" "$tlog"
  echo "--- kubectl describe trainjob: Warning $reason: $(jq -r .message <<<"$event")"
  echo "--- kubectl describe pod (Message):"; cat "$tlog"
}

# first_named WORDS...: the termination message's ranks line names this rank first, before the
# ranks that MPI's teardown stopped for it (SIGTERM).
first_named() {
  [[ $(grep '^ranks: ' "$tlog") == "ranks: "*" failed ($*"[\;\)]* ]] ||
    fail "the ranks line does not name '$*' first: $(grep '^ranks: ' "$tlog")"
}

# The kernel's kill of a whole container at its memory limit (cgroup v2's memory.oom.group, which
# the kubelet sets from Kubernetes 1.28 on) in $mem: group_kill_ready before the job, then
# group_kill_at_limit while it runs. On cgroup v1, which has none, it is played:
# oom_kill_disable holds the cgroup at its limit, then every process in it is SIGKILLed at once.
group_kill_ready() {
  if [[ -e $mem/memory.oom.group ]]; then echo 1 > "$mem/memory.oom.group"; else echo 1 > "$mem/memory.oom_control"; fi
}
group_kill_at_limit() {
  [[ ! -e $mem/memory.oom.group ]] || return 0  # the kernel's own
  for _ in $(seq 600); do grep -q '^under_oom 1' "$mem/memory.oom_control" && break; sleep 0.05; done
  grep -q '^under_oom 1' "$mem/memory.oom_control" || fail "the container never reached its memory limit"
  oom_notified=1  # what containerd's v1 watcher hears: the eventfd of memory.oom_control
  for _ in 1 2 3; do xargs -r kill -KILL < "$mem/cgroup.procs" 2>/dev/null || true; sleep 0.1; done
}

# The kubelet's part, played, for the container whose cgroup is $mem: once its every process has
# ended, the runtime's reason (OOMKilled where the cgroup recorded an OOM kill: v2's memory.events
# oom_kill or oom_group_kill, v1's notification; else Error) and the exit of its first process
# (137: SIGKILL), PATCHed into the pod's status as the kubelet's status manager does it (the
# fake's --kubelet-token; the node pods' restartPolicy Never makes the pod Failed).
kubelet_reports_end() {
  local pod=$1 container=$2 reason=Error
  for _ in $(seq 200); do [[ -s $mem/cgroup.procs ]] || break; sleep 0.05; done
  [[ ! -s $mem/cgroup.procs ]] || fail "the container's processes did not end: $(cat "$mem/cgroup.procs")"
  if [[ -e $mem/memory.events ]]; then
    awk '$1 ~ /^oom_(group_)?kill$/ && $2 > 0 { n++ } END { exit !n }' "$mem/memory.events" && reason=OOMKilled
  elif [[ ${oom_notified:-0} == 1 ]]; then
    reason=OOMKilled
  fi
  jq -n -c --arg c "$container" --arg r "$reason" \
    '{status: {phase: "Failed", containerStatuses: [{name: $c, state: {terminated: {reason: $r, exitCode: 137}}}]}}' |
    in_pod "$launcher" curl -sS --fail -o /dev/null --cacert "$CIB_DIR/kube/ca.crt" -X PATCH --data-binary @- \
      -H "Authorization: Bearer $kubelet_token" -H "Content-Type: application/strategic-merge-patch+json" \
      "https://127.0.0.1:$api_port/api/v1/namespaces/team-a/pods/$pod/status" || fail "the kubelet's status patch failed"
}

kubelet_token=$(new_token)
if [[ $case_name == *-group ]]; then
  # The JobSet's pods as the API holds them, Running; the app container's memory limit as the
  # TrainJob sets it (the cgroup's 300 MiB below): the launcher's container, the nodes'.
  api_pods=$(for pod in "$launcher" "${nodes[@]}"; do
    container=node; [[ $pod != "$launcher" ]] || container=launcher
    jq -n --arg pod "$pod" --arg sub "$sub" --arg c "$container" \
      '{metadata: {name: ($pod + "-x7k2p"), namespace: "team-a", labels: {"jobset.sigs.k8s.io/jobset-name": "train"}},
        spec: {hostname: $pod, subdomain: $sub, containers: [{name: $c, resources: {limits: {memory: "300Mi"}}}]},
        status: {phase: "Running", conditions: [{type: "PodScheduled", status: "True"}]}}'
  done | jq -s -c .)
fi
# The launcher a host too: its pod's sidecar registers it and relays, one process, as in the runtimes.
[[ $case_name != rank-oom-launcher* ]] || token_sidecar_args=(--coordinator "$launcher.$sub:29410" --deadline 60s)
start_api --kubelet-token "$kubelet_token"
start_token_sidecar
t0=$(date +%s%N)
case $case_name in
  ssh-refused)
    refuse_job_key "${nodes[1]}"
    rc=0; out=$(launch_in_container --termination-log "$tlog" --wait none -- touch "$CIB_DIR/rank-started" 2>&1) || rc=$?
    [[ ! -e $CIB_DIR/rank-started ]] || fail "a rank started"
    assert_explained ssh-refused 69 PreflightFailed "${nodes[1]}.$sub" ;;
  fabric-host)
    # tbf shapes what leaves node 2, so every ping-pong with it crawls (ncclcheck_test.sh slow-link's
    # settings, at a quarter of its sizes: 0.005 GB/s beside healthy links of 0.1 or more).
    ip netns exec "$("$CIB" ns "${nodes[2]}")" tc qdisc add dev eth0 root tbf rate 20mbit burst 32kb latency 50ms
    with_sidecars
    rc=0; out=$(launch_in_container --termination-log "$tlog" --check mpi --min-bytes 64K --max-bytes 256K \
      --pair-bytes 256K --min-fraction 0.05 --min-busbw 0.012 -- touch "$CIB_DIR/rank-started" 2>&1) || rc=$?
    [[ ! -e $CIB_DIR/rank-started ]] || fail "a rank started"
    # The culprit host (its row: "mpi host"), not the world's all-reduce that names no one.
    assert_explained fabric-check-failed 69 PreflightFailed "no rank was started: ${nodes[2]} mpi host: " ;;
  rank-exit)
    with_sidecars
    rc=0; out=$(launch_in_container --termination-log "$tlog" -- \
      sh -c 'if [ "$RANK" = 1 ]; then sleep 1; echo "bad input on rank 1" >&2; exit 3; fi; sleep 60' 2>&1) || rc=$?
    assert_explained rank-failed 3 RankFailed "rank 1 on ${nodes[0]}" "exited with code 3"
    first_named rank 1 on "${nodes[0]}: exit 3" ;;
  rank-oom-node|rank-oom-node-group)
    memory_limit "${nodes[0]}" "$(server_pid "${nodes[0]}")"
    [[ $case_name != *-group ]] || group_kill_ready
    with_sidecars
    launch_in_container --termination-log "$tlog" -- sh -c 'if [ "$RANK" = 1 ]; then sleep 1;
      exec /usr/bin/python3 -c "b = bytearray(2 << 30)"; fi; sleep 60' > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    if [[ $case_name == *-group ]]; then group_kill_at_limit; kubelet_reports_end "${nodes[0]}-x7k2p" node; fi
    rc=0; wait "$pid" || rc=$?
    out=$(cat "$CIB_DIR/launcher.log")
    if [[ $case_name == rank-oom-node ]]; then
      assert_explained rank-out-of-memory 137 RankFailed "rank 1 on ${nodes[0]}" "OOM killer" "300 MiB"
      first_named rank 1 on "${nodes[0]}: signal 9"
    else
      # The agent died with its rank and said nothing: the API's word names the OOM, the
      # container and its limit, and the job is not restarted (137, the program's).
      assert_explained rank-out-of-memory 137 RankFailed "host ${nodes[0]}.$sub lost" "OOM killer" \
        "${nodes[0]}-x7k2p's container node" "300Mi"
      row "a node's container OOM-killed whole with its rank (cgroup v2's group kill; the kubelet's OOMKilled played)" \
        "exit 137, not retried: named the OOM killer's, with the container's limit, from the API's word on the lost host's pod" \
        "$(ms_since "$t0") ms for the whole job"
    fi ;;
  lost-host)
    with_sidecars
    launch_in_container --termination-log "$tlog" -- sleep 60 > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    wait_ranks "$(date +%s%N)" 0 "${nodes[@]}"
    "$CIB" stop "${nodes[1]}"
    rc=0; wait "$pid" || rc=$?
    out=$(cat "$CIB_DIR/launcher.log")
    assert_explained host-lost 75 HostLost "${nodes[1]}.$sub" ;;
  rank-oom-launcher|rank-oom-launcher-group)
    start_mpi_sshd "$launcher"  # the launcher pod's SSH server: a sidecar of its own, out of the cgroup
    memory_limit "$launcher"
    # The launcher's container: mpi-launcher moves itself into the cgroup as it starts, and
    # every process it forks (mpirun, the agents, the launcher host's ranks) is born there.
    L="$CIB_DIR/in-container-cgroup.sh"
    printf '#!/bin/sh\necho 0 > %q/cgroup.procs && exec %q "$@"\n' "$mem" "$TMPI_BIN/mpi-launcher" > "$L"
    chmod +x "$L"
    [[ $case_name != *-group ]] || group_kill_ready
    with_sidecars  # the launcher host registers through its token sidecar (token_sidecar_args)
    # The rank makes itself the kernel's first choice (any process may raise its own score), as
    # the one that grows is on a cluster: under the sanitizers mpi-launcher is large too.
    launch_in_container --termination-log "$tlog" -- sh -c 'if [ "$RANK" = 0 ]; then sleep 1;
      echo 1000 > /proc/self/oom_score_adj
      exec /usr/bin/python3 -c "b = bytearray(2 << 30)"; fi; sleep 60' > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "launching 6 ranks" "$CIB_DIR/launcher.log" 30
    grep -qx "$(launcher_pid)" "$mem/cgroup.procs" || fail "mpi-launcher is not in its container's memory cgroup"
    [[ $case_name != *-group ]] || group_kill_at_limit
    t_killed=$(date +%s%N)
    rc=0; wait "$pid" || rc=$?
    out=$(cat "$CIB_DIR/launcher.log")
    if [[ $case_name == rank-oom-launcher ]]; then
      assert_explained rank-out-of-memory 137 RankFailed "rank 0 on $launcher" "OOM killer" "300 MiB"
      row "a rank OOM-killed alone in the launcher's own container (runLauncherAsNode)" \
        "the launcher survives it: exit 137, named the OOM killer's with its cgroup's limit" "$(ms_since "$t0") ms for the whole job"
    else
      # mpi-launcher died with its rank: the container's exit, 137, and no verdict of its own.
      [[ $rc == 137 ]] || fail "the launcher's container killed whole: expected 137, got $rc"
      [[ ! -s $tlog ]] || fail "a termination message was written: $(cat "$tlog")"
      ! grep -q "trainer-mpi: the job" <<<"$out" || fail "the log has a verdict"
      ! events_logged | grep -q . || fail "an Event reached the API before the sidecar's: $(events_logged)"
      # The kubelet: the container's end in the pod's status, then SIGTERM to the pod's sidecars.
      kubelet_reports_end "$launcher-x7k2p" launcher
      stop_token_sidecar
      event=$(events_logged | tail -n 1)
      expect_contains "$event" "RankFailed|" "the sidecar's Event's reason"
      for name in "OOM killer" "$launcher-x7k2p's container launcher" "300Mi" "the ranks in it" \
        "(see docs/troubleshooting.md#rank-out-of-memory)"; do
        expect_contains "$event" "$name" "the sidecar's Event names it"
      done
      no_token_in <<<"$event"
      echo "--- kubectl describe trainjob: Warning ${event/|/: }"
      echo "--- kubectl describe pod: Reason OOMKilled, Exit Code 137, Message (FallbackToLogsOnError: the log's tail):"
      tail -n 5 <<<"$out"
      stop_api
      # mpirun died with the launcher: the nodes' ranks end by their own means (their daemons'
      # connections gone, or their agents' --lost-after), waited for here and timed. Not held
      # to a bound: on cgroup v1 the group kill is played in rounds of SIGKILL, and a process
      # forked between two rounds (mpirun's ssh to a node) was once seen to escape it and hold
      # its node's daemon and ranks, which the kernel's own kill would not let happen.
      for _ in $(seq 150); do [[ -n $(job_leftovers "${nodes[@]}") ]] || break; sleep 0.1; done
      left=$(job_leftovers "${nodes[@]}")
      if [[ -n $left ]]; then echo "note: the nodes' ranks still ran 15 s after the kill: $left"; else
        echo "note: the nodes' ranks ended $(ms_since "$t_killed") ms after the kill"; fi
      pass "$case_name: the launcher killed with its rank: exit 137, no verdict of its own, and its sidecar's Event names the OOM"
      exit 0
    fi ;;
  *) fail "unknown case '$case_name'" ;;
esac
stop_token_sidecar; stop_api
pass "$case_name: the termination message, the Event, the log's last lines, the exit and report.json agree ($(ms_since "$t0") ms)"
