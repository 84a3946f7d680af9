#!/usr/bin/env bash
# Every program at its defaults, on 3 node pods x 2 slots (the node's server too: mpi-sshd): no tuning flag anywhere, only the
# flags that say where things are (the pod list, the Secret, the coordinator, the report,
# the slots of the topology) and `--check mpi`, the feature under test. A default that only
# small test sizes ever ran is untested: nccl-check here moves its default sizes (all-reduces
# of 1 to 64 MiB, the MPI backend's default; 64 MiB per pair test) with its default
# threshold, iterations and deadlines, and the rendezvous and the launcher keep their
# default intervals and timeouts.
source "$(dirname "$0")/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods)); sub=$(subdomain)
bin="$TMPI_BUILD_DIR/bin"
report="$CIB_DIR/report.json"

write_pod_list
in_pod "$launcher" "$bin/mpi-init" --pods "$CIB_DIR/pods.json" --out "$ETC_MPI" --slots 2 ||
  fail "mpi-init at its defaults failed"
ssh_dir="$CIB_DIR/pods/$launcher/home/.ssh"
key=$(ls "$ssh_dir" | grep -E '^id_[a-z0-9]+$' | head -n 1)
mkdir -p "$SECRET"
cp "$ssh_dir/$key" "$SECRET/ssh-privatekey"; cp "$ssh_dir/$key.pub" "$SECRET/ssh-publickey"
chmod 444 "$SECRET"/*; chmod 555 "$SECRET"
for node in "${nodes[@]}"; do
  in_pod "$node" "$bin/mpi-init" --role node --ssh-secret "$SECRET" || fail "mpi-init --role node at its defaults failed"
  start_mpi_sshd "$node"
  "$CIB" exec "$node" -- "$bin/mpi-rendezvous" --coordinator "$launcher.$sub:29410" \
    > "$CIB_DIR/pods/$node/sidecar.log" 2>&1 &
  echo $! > "$CIB_DIR/pods/$node/sidecar.pid"
done

t0=$SECONDS
rc=0
out=$(in_pod "$launcher" "$bin/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" --report "$report" --check mpi -- \
        "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi" 2>&1) || rc=$?
echo "$out" | grep -vE '^\s*$' | tail -n 40
[[ $rc == 0 ]] || fail "mpi-launcher run --check mpi at its defaults exited $rc"
echo "the run took $((SECONDS - t0)) s"

# nccl-check ran its default plan, and every rank of the job ran where it should.
expect_contains "$out" "# nccl-check (mpi): 6 rank(s) on 3 host(s)" "the fabric check's table"
expect_contains "$out" "# result: pass" "the fabric check's verdict"
expect_contains "$out" "allreduce sum 15 over 6 ranks: ok" "the job's own all-reduce"
for i in 0 1 2; do
  for slot in 0 1; do expect_contains "$out" "rank $((2 * i + slot))/6 on ${nodes[$i]}" "rank placement"; done
done
jq -e '.exit.code == 0 and (.ranks | length) == 6 and .check.result == "pass"' "$report" >/dev/null ||
  fail "report.json: $(jq -c '{exit, check: .check.result}' "$report")"
sizes=$(jq -c '[.check.allreduce[].bytes]' "$report")
expect_eq "$sizes" "[1048576,4194304,16777216,67108864]" "the MPI backend's default all-reduce sizes (1M to 64M, x4)"
expect_eq "$(jq '.check.pair_bytes' "$report")" "67108864" "the default pair test size (64M)"
jq -e '[.check.allreduce[].wrong, .check.links[].wrong, .check.gpu_links[].wrong] | add == 0' "$report" >/dev/null ||
  fail "wrong data: $(jq -c .check "$report")"

# The sidecars end when the launcher tells them the job has ended, at their defaults too.
for node in "${nodes[@]}"; do
  pid=$(cat "$CIB_DIR/pods/$node/sidecar.pid")
  timeout 30 tail --pid="$pid" -f /dev/null || fail "the sidecar of $node did not end: $(cat "$CIB_DIR/pods/$node/sidecar.log")"
  wait "$pid" || fail "the sidecar of $node exited $?: $(cat "$CIB_DIR/pods/$node/sidecar.log")"
done
pass "mpi-init, mpi-sshd, mpi-rendezvous, mpi-launcher run --check mpi and nccl-check at their defaults: 3 pods x 2 slots"
