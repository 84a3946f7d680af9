#!/usr/bin/env bash
# The job's one API token (docs/design.md, "Trust"): only the launcher pod's mpi-rendezvous
# sidecar holds it, and the launcher's Events reach the TrainJob through it (the API relay,
# rendezvous/api_relay.h), on the job of launcher_test.sh (1 launcher, 2 nodes, sidecars).
# The launcher pod's containers, the token's sidecar and the fake API: events_lib.sh.
# One case per run:
#   unreachable     a rank in the launcher pod (a process of its `node` container, uid 1000)
#                   reads neither the token's path, nor the sidecar's /proc/PID/root, environ,
#                   fd or cmdline (it sees no process of the sidecar at all); the same probe with
#                   the pod's namespaces shared (as the box runs pods without CIB_CONTAINER, and
#                   as shareProcessNamespace would) finds the token: the probe can see a leak
#   events          at the runtimes' defaults (--events auto, the relay's port, no token in the
#                   launcher's container), a rank's failure is a Warning Event RankFailed on the
#                   TrainJob, through the relay and the fake API with the sidecar's token; the
#                   launcher's log and report.json hold no token; the exit is the rank's
#   refused         the API refuses the token (no Role): the sidecar's log names the Role to
#                   apply, in one line; the launcher's says the Event was not recorded; the job
#                   ends as it would have (the rank's exit)
#   per-attempt     two attempts of the job, as a JobSet restart makes them (a new launcher and a
#                   new sidecar, a new token, the TrainJob's Events kept by the API): each
#                   failed attempt leaves its own Warning Event, with its verdict
# A host that never comes, told apart from the API (launcher/missing_hosts.h): the fake API
# holds the JobSet's pods, as the kubelet and the scheduler would report them, and the launcher
# asks the sidecar for them at its rendezvous deadline (4 s here). Each case asserts the five
# places: the log's last lines, the termination message, the Event on the TrainJob through the
# fake API, the exit code and the troubleshooting key (report.json's and the message's):
#   never-scheduled node 1's pod is Pending, PodScheduled=False reason Unschedulable (the
#                   scheduler's fit error), and never starts its sidecar: exit 78 (not retried),
#                   key host-not-scheduled, the pod, the reason and the scheduler's message named
#   never-registers node 1's pod is Running in the API and its sidecar runs, but the launcher's
#                   port 29410 drops its packets (nftables in the launcher pod, as a NetworkPolicy
#                   would): exit 75, key host-never-registered, the port named
#   pods-refused    as never-scheduled, but the API refuses the token `list pods` (a Role of
#                   before): one line names the Role, and the coordinator's words of before
#                   (exit 75, host-never-registered, "(no registration)")
source "$(dirname "$0")/launcher_lib.sh"
source "$(dirname "$0")/events_lib.sh"
fail_rank_1='if [ "$RANK" = 1 ]; then sleep 1; echo "bad input on rank 1" >&2; exit 3; fi; sleep 60'
# A rank's every way to the token, from a process of the launcher pod: prints what it read.
probe='
  echo "path: $(cat "$1/token" 2>&1)"
  for p in /proc/[0-9]*; do
    echo "pid ${p#/proc/}: $(tr "\0" " " < "$p/cmdline" 2>/dev/null)"
    echo "root: $(cat "$p/root$1/token" 2>/dev/null)"
    echo "environ: $(tr "\0" " " < "$p/environ" 2>/dev/null)"
    for fd in "$p"/fd/*; do  # the files behind them (a pipe or socket would block the read)
      if [ -f "$fd" ]; then echo "fd $fd: $(head -c 4096 "$fd" 2>/dev/null | tr -d "\0")"; fi
    done
  done'

case $case_name in
  unreachable)
    start_api
    start_token_sidecar
    # The sidecar can use it: an Event through it reaches the API.
    out=$(launch --wait none --preflight=false -- sh -c 'exit 5' 2>&1) || true
    [[ $(events_logged | wc -l) == 1 ]] || fail "the sidecar sent no Event with its token: $out"
    seen=$(CIB_CONTAINER=1 "$CIB" exec "$launcher" -- "${as_pod_user[@]}" bash -c "$probe" _ "$sa" 2>&1)
    no_token_in <<<"$seen"
    ! grep -q "mpi-rendezvous relay" <<<"$seen" || fail "a rank's container sees the sidecar's process: $seen"
    [[ $(grep -c '^pid ' <<<"$seen") -le 3 ]] || fail "a rank's container sees processes beyond its own: $seen"
    # The control: the pod's namespaces shared (the box without CIB_CONTAINER; a pod with
    # shareProcessNamespace): the same probe finds it, through the sidecar's /proc/PID.
    shared=$("$CIB" exec "$launcher" -- "${as_pod_user[@]}" bash -c "$probe" _ "$sa" 2>&1)
    grep -q "^root: $token" <<<"$shared" || fail "the control's probe did not find the token through /proc/PID/root"
    grep -q "^fd .*: $token" <<<"$shared" || fail "the control's probe did not find the token through /proc/PID/fd"
    stop_token_sidecar; stop_api
    row "a rank in the launcher pod reads for the API token" "not by its path, nor the sidecar's /proc/PID/root, environ, fd, cmdline; found by the same probe where the pod's namespaces are shared" "-"
    pass "a rank cannot read the token: it is in the sidecar's mount namespace, behind its PID namespace" ;;
  events|refused)
    [[ $case_name == events ]] && start_api || start_api --forbid events
    start_token_sidecar
    with_sidecars
    rc=0; out=$(launch_in_container -- sh -c "$fail_rank_1" 2>&1) || rc=$?
    [[ $rc == 3 ]] || fail "expected the rank's exit 3, got $rc: $out"
    no_token_in <<<"$out"; no_token_in "$report" "$CIB_DIR/pods/$launcher/mpi-rendezvous.log"
    if [[ $case_name == events ]]; then
      events=$(events_logged)
      [[ $(wc -l <<<"$events") == 1 ]] || fail "expected one Event, got: $events"
      [[ $events == "RankFailed|train|5e1f0000-aaaa-bbbb-cccc-000011112222|rank 1 on ${nodes[0]} exited with code 3"* ]] ||
        fail "the Event on the TrainJob: $events"
      expect_contains "$events" "(see docs/troubleshooting.md#rank-failed)" "the Event's troubleshooting key"
      ! grep -q 'events:' <<<"$out" || fail "the launcher said something of its Events: $out"
      row "a rank exits 3, the runtimes' defaults (Events through the sidecar)" "Warning RankFailed on TrainJob team-a/train, with its uid; no token in the launcher's log, report.json or container" "-"
      pass "a rank's failure is an Event on the TrainJob, sent by the sidecar that alone holds the token"
    else
      [[ -z $(events_logged) ]] || fail "an Event was created though the API refuses: $(events_logged)"
      relay_log=$(cat "$CIB_DIR/pods/$launcher/mpi-rendezvous.log")
      [[ $(grep -c 'apply examples/rbac-events.yaml' <<<"$relay_log") == 1 ]] ||
        fail "the sidecar's log does not name the Role once: $relay_log"
      expect_contains "$relay_log" "Role trainer-mpi-events" "the Role's name"
      expect_contains "$out" "events: RankFailed was not recorded on the TrainJob" "the launcher's line"
      expect_contains "$out" "rank 1 on ${nodes[0]} exited with code 3" "the verdict stands"
      row "a rank exits 3, no Role for the token" "exit 3 as before; one line in the sidecar's log naming examples/rbac-events.yaml" "-"
      pass "a refused token: one line naming the Role, the job's end unchanged"
    fi
    stop_token_sidecar; stop_api ;;
  per-attempt)
    start_api  # the API keeps the TrainJob's Events across the JobSet's restart
    with_sidecars
    for attempt in 0 1; do
      start_token_sidecar  # each attempt's launcher pod is new, and so is its sidecar
      rc=0; out=$(launch_in_container -- sh -c "$fail_rank_1" 2>&1) || rc=$?
      [[ $rc == 3 ]] || fail "attempt $attempt: expected exit 3, got $rc: $out"
      stop_token_sidecar
      [[ $(events_logged | grep -c '^RankFailed|train|') == $((attempt + 1)) ]] ||
        fail "after attempt $attempt: expected $((attempt + 1)) RankFailed Events: $(events_logged)"
    done
    stop_api
    expect_contains "$(events_logged | tail -n 1)" "rank 1 on ${nodes[0]} exited with code 3" "the second attempt's verdict"
    row "two attempts (a JobSet restart), each failing" "a Warning Event per attempt on the TrainJob, each with its verdict" "-"
    pass "each failed attempt leaves its Event on the TrainJob" ;;
  never-scheduled|never-registers|pods-refused)
    # The JobSet's pods as the API holds them: the launcher and node 0 Running; node 1 as the case says.
    unschedulable='{"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
      "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."}]}'
    running='{"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}'
    node1_status=$unschedulable; [[ $case_name != never-registers ]] || node1_status=$running
    api_pods=$(for pod in "$launcher" "${nodes[@]}"; do
      status=$running; [[ $pod != "${nodes[1]}" ]] || status=$node1_status
      jq -n --arg pod "$pod" --arg sub "$sub" --argjson status "$status" \
        '{metadata: {name: ($pod + "-x7k2p"), namespace: "team-a", labels: {"jobset.sigs.k8s.io/jobset-name": "train"}},
          spec: {hostname: $pod, subdomain: $sub}, status: $status}'
    done | jq -s -c .)
    [[ $case_name == pods-refused ]] && start_api --forbid pods || start_api
    start_token_sidecar
    start_sidecar "${nodes[0]}" --deadline 60s
    if [[ $case_name == never-registers ]]; then
      # As a NetworkPolicy that admits node 0 only: node 1's packets to 29410 dropped, and counted.
      in_pod "$launcher" nft -f - <<NFT || fail "nft"
table inet hostsplit {
  chain in {
    type filter hook input priority 0;
    ip saddr $("$CIB" ip "${nodes[1]}") tcp dport 29410 counter drop
  }
}
NFT
      start_sidecar "${nodes[1]}" --deadline 60s
    fi
    : > "$CIB_DIR/termination-log"
    rc=0; out=$(launch_in_container --rendezvous-timeout 4s --termination-log "$CIB_DIR/termination-log" -- true 2>&1) || rc=$?
    if [[ $case_name == never-registers ]]; then  # the drop was the cause: its counter counted node 1's tries
      dropped=$(in_pod "$launcher" nft list table inet hostsplit | grep -oE 'packets [0-9]+' | cut -d' ' -f2)
      in_pod "$launcher" nft delete table inet hostsplit
      (( ${dropped:-0} > 0 )) || fail "the rule dropped nothing of node 1's: $out"
    fi
    no_token_in <<<"$out"
    pod1="${nodes[1]}-x7k2p" host1="${nodes[1]}.$sub"
    case $case_name in
      never-scheduled) want_rc=78 key=host-not-scheduled
        want="rendezvous timed out after 4 s (1/2 hosts ready); a restart would not mend it: $host1: its pod $pod1 was never scheduled (Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.); no node has what it asks: free GPUs or lower the request" ;;
      never-registers) want_rc=75 key=host-never-registered
        want="rendezvous timed out after 4 s (1/2 hosts ready): $host1: its pod $pod1 runs, but its mpi-rendezvous sidecar never registered with the launcher on port 29410: a NetworkPolicy or firewall drops the port" ;;
      pods-refused) want_rc=75 key=host-never-registered
        want="rendezvous timed out after 4 s: 1/2 hosts ready; waiting for $host1 (no registration); raise TMPI_RENDEZVOUS_TIMEOUT"
        [[ $(grep -c 'the API did not list the job.s pods' <<<"$out") == 1 ]] || fail "the refusal is not one line: $out"
        expect_contains "$out" "apply examples/rbac-events.yaml again: its Role trainer-mpi-events now also grants list on pods" "the Role named" ;;
    esac
    [[ $rc == "$want_rc" ]] || fail "expected exit $want_rc, got $rc: $out"
    # The termination message (describe pod) and the log's last lines: the same verdict.
    verdict=$(cat "$CIB_DIR/termination-log")
    expect_contains "$(sed -n 1p <<<"$verdict")" "exit $want_rc" "the termination message's exit"
    expect_contains "$(sed -n 2p <<<"$verdict")" "reason: $want" "the termination message's reason"
    expect_contains "$verdict" "(see docs/troubleshooting.md#$key)" "the termination message's key"
    # The log ends with the verdict's lines; the launcher's error line, the same reason, before them.
    n=$(wc -l <<<"$verdict")
    expect_eq "$(tail -n "$n" <<<"$out" | sed 's/^.* mpi-launcher info: //')" "$verdict" "the log's last lines"
    expect_contains "$(head -n -"$n" <<<"$out")" "mpi-launcher error: $want" "the launcher's error line"
    [[ $(jq -r '[.exit.code, .exit.troubleshooting] | join(" ")' "$report") == "$want_rc $key" ]] ||
      fail "report.json's exit: $(jq -c .exit "$report")"
    # The Event on the TrainJob, through the relay and the fake API.
    events=$(events_logged)
    [[ $(wc -l <<<"$events") == 1 && $events == "RendezvousTimeout|train|5e1f0000-aaaa-bbbb-cccc-000011112222|$want"* ]] ||
      fail "the Event on the TrainJob: $events"
    expect_contains "$events" "(see docs/troubleshooting.md#$key)" "the Event's key"
    listed=$(jq -r 'select(.method == "GET" and (.path | startswith("/api/v1/namespaces/team-a/pods?labelSelector=jobset.sigs.k8s.io%2Fjobset-name%3Dtrain"))) | .code' "$CIB_DIR/kube/requests.log")
    [[ $listed == "$([[ $case_name == pods-refused ]] && echo 403 || echo 200)" ]] || fail "the sidecar's pod list: $listed"
    stop_token_sidecar; stop_api
    row "a host that never comes: $case_name" "exit $want_rc, $key; the Event, the termination message and the log's last lines name it" "-"
    pass "$case_name: exit $want_rc, $key, in the five places" ;;
  *) fail "unknown case '$case_name'" ;;
esac
