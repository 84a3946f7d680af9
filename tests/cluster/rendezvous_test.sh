#!/usr/bin/env bash
# The rendezvous with real sidecars and sshd: a pod that starts 10 s late is waited for,
# and its sshd later still; the barrier opens as soon as that sshd accepts the job key; curl of /v1/hosts and /metrics shows every host
# (inside the launcher's pod only: another pod gets 403); a node killed after
# the barrier is reported lost in time; the other sidecars exit 0 when the job ends.
source "$(dirname "$0")/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods)); late=${nodes[2]}; sub=$(subdomain)
coordinator_log="$CIB_DIR/coordinator.log"
"$CIB" stop "$late"   # not scheduled yet
init_launcher
for node in "${nodes[0]}" "${nodes[1]}"; do init_node "$node"; done
# Under containerd 2's descriptor limits (soft 1024) with room above them: the coordinator's
# connection cap is its soft limit less a reserve, so it raises the soft limit to the hard one.
"$CIB" exec "$launcher" -- prlimit --nofile=1024:8192 "$TMPI_BUILD_DIR/bin/mpi-rendezvous" serve --hosts "$ETC_MPI/hosts.json" \
  --rendezvous-timeout 60s --beat-interval 1s --lost-after 3s > "$coordinator_log" 2>&1 &
coordinator=$!
for node in "${nodes[0]}" "${nodes[1]}"; do start_sidecar "$node" --deadline 60s; done
wait_for "waiting for $late.$sub (no registration)" "$coordinator_log" 15
serving=""
for pid in $(pgrep -f "mpi-rendezvous serve --hosts $ETC_MPI/hosts.json"); do
  [[ $(readlink "/proc/$pid/exe") == */bin/mpi-rendezvous ]] && serving=$pid
done
[[ -n $serving ]] || fail "no mpi-rendezvous serve process found"
soft=$(awk '/^Max open files/ { print $4 }' "/proc/$serving/limits")
[[ $soft == 8192 ]] || fail "mpi-rendezvous serve kept a soft nofile of $soft under a hard 8192 (expected it raised to 8192)"
pass "the coordinator raised its soft nofile from 1024 to the hard 8192"
sleep 10
# The late pod's sidecar starts before its sshd, as a native sidecar does: it asks sshd
# again every 0.5 s (not every 15 s) and says so at once, so the barrier opens within 4 s.
"$CIB" start "$late"
in_pod "$late" "$TMPI_BUILD_DIR/bin/mpi-init" --role node --ssh-server openssh --ssh-secret "$SECRET" --log-level warn
start_sidecar "$late" --deadline 60s
wait_for "waiting for $late.$sub (no sshd" "$coordinator_log" 15
"$CIB" sshd "$late" "$CIB_DIR/pods/$late/home/.ssh/sshd_config"
t0=$SECONDS
wait_for "the barrier is open" "$coordinator_log" 4
pass "the barrier opened after the late pod came, $((SECONDS - t0)) s after its sshd"

hosts=$(in_pod "$launcher" curl -sf "http://127.0.0.1:29410/v1/hosts")
[[ $(jq -r '[.hosts[] | select(.state == "ready")] | length' <<<"$hosts") == 3 ]] || fail "hosts: $hosts"
for node in "${nodes[@]}"; do
  [[ $(jq -r --arg n "$node.$sub" '.hosts[] | select(.name == $n) | .address' <<<"$hosts") == $("$CIB" ip "$node") ]] ||
    fail "$node's address in /v1/hosts"
done
metrics=$(in_pod "$launcher" curl -sf "http://127.0.0.1:29410/metrics")
expect_contains "$metrics" 'tmpi_rendezvous_hosts{state="ready"} 3' "metrics"
expect_contains "$metrics" 'tmpi_rendezvous_barrier_open 1' "metrics"
expect_eq "$(in_pod "${nodes[0]}" curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:29411/readyz)" 200 "sidecar /readyz"
# From another pod, the views are refused (they name every host and address); the probe is not.
for view in /v1/hosts /metrics; do
  expect_eq "$(in_pod "${nodes[0]}" curl -s -o /dev/null -w '%{http_code}' "http://$launcher.$sub:29410$view")" 403 "$view from a node"
done
expect_eq "$(in_pod "${nodes[0]}" curl -s -o /dev/null -w '%{http_code}' "http://$launcher.$sub:29410/readyz")" 200 "/readyz from a node"
pass "curl shows every host ready, inside the launcher's pod only"

killed=${nodes[1]}
t0=$SECONDS
"$CIB" stop "$killed"
wait_for "host $killed.$sub lost" "$coordinator_log" 8
pass "a killed node was reported lost after $((SECONDS - t0)) s (lost-after 3 s)"

in_pod "$launcher" "$TMPI_BUILD_DIR/bin/mpi-rendezvous" end --coordinator 127.0.0.1:29410
for node in "${nodes[0]}" "$late"; do
  pid=$(cat "$CIB_DIR/pods/$node/sidecar.pid"); rc=0
  timeout 10 tail --pid="$pid" -f /dev/null || fail "the sidecar of $node did not exit after the end"
  wait "$pid" || rc=$?
  [[ $rc == 0 ]] || fail "the sidecar of $node exited $rc: $(cat "$CIB_DIR/pods/$node/sidecar.log")"
done
wait "$coordinator" || fail "the coordinator did not exit 0 after the end: $(cat "$coordinator_log")"
pass "the sidecars and the coordinator exit 0 when the job ends"
