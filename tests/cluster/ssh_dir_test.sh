#!/usr/bin/env bash
# A whole job whose SSH identity lives outside ~/.ssh, as a Secret mounted elsewhere is. Every pod keeps it
# in /tmp/job-ssh (each pod's /tmp is its own, so the path is the same everywhere, as one
# image and one runtime would make it): mpi-init, sshd, the sidecars and `mpi-launcher run`
# are all told --ssh-dir, and nothing is in ~/.ssh. The launcher forwards the folder to the
# rank agents (TMPI_SSH_DIR), so a rank that exits 3 is named with its host, in the output
# and report.json. Before, the agents looked in ~/.ssh, found no key and dropped their
# reports: the job ended as "mpirun exited with status 3", no rank or host named.
source "$(dirname "$0")/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods)); sub=$(subdomain)
L="$TMPI_BUILD_DIR/bin/mpi-launcher"
report="$CIB_DIR/report.json"
keys=/tmp/job-ssh
write_pod_list
in_pod "$launcher" "$TMPI_BUILD_DIR/bin/mpi-init" --pods "$CIB_DIR/pods.json" --out "$ETC_MPI" --slots 2 \
  --ssh-dir "$keys" --log-level warn
key=$(in_pod "$launcher" ls "$keys" | grep -E '^id_[a-z0-9]+$' | head -n 1)
[[ -n $key ]] || fail "mpi-init wrote no key in $keys: $(in_pod "$launcher" ls -la "$keys")"
mkdir -p "$SECRET"
in_pod "$launcher" cat "$keys/$key" > "$SECRET/ssh-privatekey"
in_pod "$launcher" cat "$keys/$key.pub" > "$SECRET/ssh-publickey"
chmod 444 "$SECRET"/*; chmod 555 "$SECRET"
for node in "${nodes[@]}"; do
  in_pod "$node" "$TMPI_BUILD_DIR/bin/mpi-init" --role node --ssh-server openssh --ssh-secret "$SECRET" --ssh-dir "$keys" --log-level warn
  "$CIB" sshd "$node" "$keys/sshd_config"
  start_sidecar "$node" --ssh-dir "$keys" --deadline 60s
done
for pod in $(pods); do
  ! ls "$CIB_DIR/pods/$pod/home/.ssh" 2>/dev/null | grep -q '^id_' || fail "a key in $pod's ~/.ssh: the test would prove nothing"
done
rc=0
out=$(in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --ssh-dir "$keys" --iface eth0 --report "$report" \
        --beat-interval 1s --lost-after 3s --grace 3s -- \
        sh -c 'if [ "$RANK" = 1 ]; then sleep 1; echo "bad input on rank 1" >&2; exit 3; fi; sleep 60' 2>&1) || rc=$?
[[ $rc == 3 ]] || fail "expected exit 3 (the rank's own), got $rc: $out"
expect_contains "$out" "rank 1 on ${nodes[0]} exited with code 3" "the failed rank and its host are named"
expect_contains "$out" "bad input on rank 1" "the rank's stderr tail"
! grep -q "cannot report to the launcher" <<<"$out" || fail "an agent did not find the key in $keys: $out"
jq -e --arg host "${nodes[0]}" '.ranks[] | select(.rank == 1) | .code == 3 and .host == $host and .reported == true' \
  "$report" >/dev/null || fail "report.json does not name rank 1: $(jq -c .ranks "$report")"
[[ $(jq -r '[.exit.code, .exit.side] | join(" ")' "$report") == "3 job" ]] || fail "report exit: $(jq -c .exit "$report")"
pass "the job key in $keys on every pod: rank 1's exit 3 is named with its host, in the output and report.json"
