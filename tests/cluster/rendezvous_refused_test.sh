#!/usr/bin/env bash
# A pod whose sshd rejects the job key is named, with that reason, when the rendezvous
# deadline passes; the coordinator exits 75; that pod's /readyz stays 503.
source "$(dirname "$0")/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods)); bad=${nodes[1]}; sub=$(subdomain)
init_launcher
for node in "${nodes[@]}"; do init_node "$node"; done
: > "$CIB_DIR/pods/$bad/home/.ssh/authorized_keys"   # this sshd now refuses the job key
rc=0
for node in "${nodes[@]}"; do start_sidecar "$node" --deadline 30s; done
out=$(in_pod "$launcher" "$TMPI_BUILD_DIR/bin/mpi-rendezvous" serve --hosts "$ETC_MPI/hosts.json" \
      --rendezvous-timeout 6s --beat-interval 1s 2>&1) || rc=$?
echo "$out" | tail -n 3
[[ $rc == 75 ]] || fail "expected exit 75 at the deadline, got $rc"
expect_contains "$out" "rendezvous timed out after 6 s: 1/2 hosts ready; waiting for $bad.$sub (sshd refused the job key" "deadline"
expect_contains "$out" "raise TMPI_RENDEZVOUS_TIMEOUT" "hint"
expect_eq "$(in_pod "$bad" curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:29411/readyz)" 503 "readyz of the refusing pod"
pass "a pod whose sshd refuses the key is named at the deadline"
for node in "${nodes[@]}"; do kill "$(cat "$CIB_DIR/pods/$node/sidecar.pid")" 2>/dev/null || true; done
