#!/usr/bin/env bash
# inplace_test.sh CASE: JobSet's in-place restart (manifests/inplace-restart) in the box. The
# Kubernetes API is the fake (tests/fakes/fake_kube_api.py) on the launcher pod's address, with
# JobSet's in-place controller in it (fake_jobset_controller.py: jobset_inplace_model's rules);
# each pod runs `mpi-rendezvous in-place-agent` with the agent's token alone (the fake's
# --agent-token: patch pods, get jobsets; anything else 403), restarted on its exit as the
# kubelet restarts a native sidecar. Cases:
#   in-place   node 1's pod made again alone (the Job controller's part played through the API:
#              the old pod deleted, a new one of its name created); its agent joins one past the
#              JobSet's attempt, the controller outdates attempt 0, the other pods' agents exit
#              with the restart code once and rejoin, the barrier lifts at attempt 1, and only
#              then node 1's sidecar starts (the startup probe's gate); the MPI job restarts in
#              place (--restarts) and completes; node 0's server and sidecar and the launcher
#              keep their pids
source "$(dirname "$0")/launcher_lib.sh"
seen="$CIB_DIR/attempts"; mkdir -p "$seen"
api="$CIB_DIR/inplace"; mkdir -p "$api/agent"
ip_of() { "$CIB" pods | awk -v p="$1" '$1 == p { print $2 }'; }
launcher_ip=$(ip_of "$launcher")
# The fake API on the launcher pod's address, its certificate for that address.
bash "$(dirname "$0")/../fakes/make_test_ca.sh" "$api"
printf 'subjectAltName=IP:%s\n' "$launcher_ip" > "$api/san"
openssl x509 -req -in "$api/server.csr" -CA "$api/ca.crt" -CAkey "$api/ca.key" -CAcreateserial \
  -out "$api/server.crt" -days 1 -extfile "$api/san" 2>/dev/null
admin="admin-$RANDOM$RANDOM"; echo "agent-$RANDOM$RANDOM" > "$api/agent/token"
cp "$api/ca.crt" "$api/agent/ca.crt"; echo team-a > "$api/agent/namespace"
pod_json() {  # pod_json NAME: a running pod of JobSet train
  jq -nc --arg n "$1" '{apiVersion: "v1", kind: "Pod", metadata: {name: $n, namespace: "team-a",
    labels: {"jobset.sigs.k8s.io/jobset-name": "train"}}, status: {phase: "Running"}}'
}
rjob() { jq -nc --arg n "$1" --argjson p "$2" '{name: $n, replicas: 1, template: {spec: {completions: $p, parallelism: $p}}}'; }
jq -n --argjson pods "[$(pod_json "$launcher"),$(pod_json "${nodes[0]}"),$(pod_json "${nodes[1]}")]" \
  --argjson jobs "[$(rjob launcher 1),$(rjob node 2)]" \
  '{jobsets: [{apiVersion: "jobset.x-k8s.io/v1alpha2", kind: "JobSet", metadata: {name: "train", namespace: "team-a",
     uid: "0e1f0000-aaaa-bbbb-cccc-000011112222"}, spec: {replicatedJobs: $jobs,
     failurePolicy: {maxRestarts: 3, restartStrategy: "InPlaceRestart"}}}], pods: $pods}' > "$api/state.json"
in_pod "$launcher" python3 "$(dirname "$0")/../fakes/fake_kube_api.py" --cert "$api/server.crt" --key "$api/server.key" \
  --token "$admin" --agent-token "$(cat "$api/agent/token")" --address "$launcher_ip" --state "$api/state.json" \
  --port-file "$api/port" --log "$api/requests.log" &
for _ in $(seq 100); do [[ -s $api/port ]] && break; sleep 0.05; done
[[ -s $api/port ]] || fail "the fake Kubernetes API did not start"
kube() {  # kube METHOD PATH [BODY]: the API as the Job controller and the test, with the admin token
  in_pod "$launcher" curl -sS --cacert "$api/ca.crt" -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
    -X "$1" "https://$launcher_ip:$(cat "$api/port")$2" ${3:+--data "$3"}
}
jobset_status() { kube GET /apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets/train | jq -c '.status // {}'; }
# start_agent POD: the agent in POD, made again on each exit (a native sidecar's restart), its exits noted.
start_agent() {
  in_pod "$1" sh -c "while :; do KUBERNETES_SERVICE_HOST=$launcher_ip KUBERNETES_SERVICE_PORT=$(cat "$api/port") \
    $TMPI_BIN/mpi-rendezvous in-place-agent --in-place-jobset train --in-place-pod $1 \
    --in-place-token-dir $api/agent --in-place-poll 200ms --log-level info >> $api/$1.agent.log 2>&1;
    echo \$? >> $api/$1.exits; done" &
}
barrier_down() { in_pod "$1" curl -sf "http://127.0.0.1:29413/barrier-is-down" > /dev/null; }
wait_barriers() {  # wait_barriers POD...: until each pod's barrier is down (30 s at most)
  local pod
  for pod in "$@"; do
    for _ in $(seq 150); do barrier_down "$pod" && continue 2; sleep 0.2; done
    fail "$pod's barrier is still up: JobSet $(jobset_status); $(tail -n 3 "$api/$pod.agent.log")"
  done
}
case $case_name in
  in-place)
    for pod in "$launcher" "${nodes[@]}"; do start_agent "$pod"; done
    wait_barriers "$launcher" "${nodes[@]}"
    [[ $(jobset_status) == '{"currentInPlaceRestartAttempt":0}' ]] || fail "after the first start: $(jobset_status)"
    # The agents' token refused for a while (a RoleBinding applied again, a webhook's moment):
    # after its first reading an agent logs it and polls on; an exit would restart its container
    # and start an attempt for every pod.
    cp "$api/agent/token" "$api/agent/token.kept"
    echo "a-token-the-api-refuses" > "$api/agent/token"
    sleep 1.5
    mv "$api/agent/token.kept" "$api/agent/token"
    for pod in "$launcher" "${nodes[@]}"; do
      [[ ! -s $api/$pod.exits ]] || fail "$pod's agent exited on a refused token: $(cat "$api/$pod.exits")"
      grep -q "Unauthorized" "$api/$pod.agent.log" || fail "$pod's agent did not log the refusal: $(tail -n 3 "$api/$pod.agent.log")"
    done
    [[ $(jobset_status) == '{"currentInPlaceRestartAttempt":0}' ]] || fail "after a refused token: $(jobset_status)"
    with_sidecars
    launch --restarts 2 -- sh -c "echo \"\$TMPI_RESTART_COUNT\" > $seen/\$RANK.\$TMPI_RESTART_COUNT;
      if [ \"\$TMPI_RESTART_COUNT\" = 0 ]; then sleep 60; fi; sleep 2" > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    wait_ranks "$(date +%s%N)" 1000 "${nodes[@]}"
    # (one echo: launcher_pid's `head` may leave its writer a SIGPIPE, which an assignment's status would carry)
    before=$(echo "$(cat "$CIB_DIR/pods/${nodes[0]}/sidecar.pid") $(server_pid "${nodes[0]}") $(launcher_pid)")
    t0=$(date +%s%N)
    "$CIB" recreate "${nodes[1]}"  # its agent dies with it
    kube DELETE "/api/v1/namespaces/team-a/pods/${nodes[1]}" > /dev/null
    kube POST /api/v1/namespaces/team-a/pods "$(pod_json "${nodes[1]}")" > /dev/null
    start_agent "${nodes[1]}"
    wait_barriers "${nodes[1]}" "$launcher" "${nodes[0]}"  # the replacement's containers wait for it
    barrier_ms=$(ms_since "$t0")
    init_node "${nodes[1]}"
    start_sidecar "${nodes[1]}" --deadline 60s
    # While attempt 1 runs: node 0's server and sidecar, and the launcher, are the processes they were.
    for _ in $(seq 450); do [[ -e $seen/0.1 ]] && break; sleep 0.2; done
    during=$(echo "$(cat "$CIB_DIR/pods/${nodes[0]}/sidecar.pid") $(server_pid "${nodes[0]}") $(launcher_pid)")
    timeout 90 tail --pid="$pid" -f /dev/null || fail "the launcher still runs 90 s after the fault"
    rc=0; wait "$pid" || rc=$?
    [[ $rc == 0 ]] || fail "expected a restart in place and exit 0, got $rc: $(cat "$CIB_DIR/launcher.log")"
    for rank in 0 1 2 3; do [[ -e $seen/$rank.1 ]] || fail "rank $rank did not run attempt 1: $(ls "$seen")"; done
    status=$(jobset_status)
    [[ $status == '{"currentInPlaceRestartAttempt":1,"previousInPlaceRestartAttempt":0}' ]] || fail "JobSet status $status"
    # The other pods' agents exited once with the restart code (1) and rejoined; the new pod's never.
    for pod in "$launcher" "${nodes[0]}"; do
      [[ $(cat "$api/$pod.exits" 2>/dev/null) == 1 ]] || fail "$pod's agent exits: $(cat "$api/$pod.exits" 2>/dev/null)"
    done
    [[ ! -s $api/${nodes[1]}.exits ]] || fail "the new pod's agent exited: $(cat "$api/${nodes[1]}.exits")"
    annotations=$(kube GET "/api/v1/namespaces/team-a/pods" | jq -c '[.items[].metadata.annotations["jobset.sigs.k8s.io/in-place-restart-attempt"]]')
    [[ $annotations == '["1","1","1"]' ]] || fail "the pods' attempts: $annotations"
    [[ $during == "$before" ]] || fail "the other pods' processes were made again: $before -> $during"
    # The agents' token did all they needed (the Role's two verbs) and was never refused.
    ! grep -q '"code": 403' "$api/requests.log" || fail "an agent was refused: $(grep '"code": 403' "$api/requests.log")"
    row "node 1's pod made again alone (InPlaceRestart, --restarts 2)" \
      "the agents' barrier at attempt 1 in ${barrier_ms} ms; the others' agents restarted once; exit 0" \
      "$(ms_since "$t0") ms to the job's end"
    pass "a node pod made again alone: JobSet's barrier through the fake API, the MPI job restarted in place" ;;
  *) fail "unknown case $case_name" ;;
esac
