#!/usr/bin/env bash
# mpi-sshd against a stranger on the pod network with no key (tests/cluster/ssh_stranger.py),
# on node 2's pod from addresses of its own, while the job's clients (the launcher pod's
# OpenSSH, with mpi-init's config) use the server. Node 0's server runs at its defaults; node
# 1's lets one address hold every connection not logged in yet (--sshd-per-source-startups 64),
# so that the total bound and its drop of the oldest idle connection are what holds.
# Proves:
# - the listener's soft descriptor limit raised to what its bounds need, and a command's put back;
# - keyless churn (4 loops of connect, read the banner, close, from 4 addresses, 12 s): a
#   session with stdin open and one streaming output both survive it, their bytes whole, and
#   at least 9 logins of 10 made during it succeed; the churn is refused by name, then
#   penalised;
# - 256 idle connections from one address, reopened as they close: 3 logins of 3 (node 0), the
#   address refused by name at its bound;
# - 64 idle connections from each of 4 addresses on node 1: 3 logins of 3, the oldest idle
#   dropped for them, named in the log;
# - gssapi-with-mic and "none" after the first are refused and counted: the 7th request
#   (the first "none" free, then --sshd-auth-tries 6) closes the connection.
# Usage (under cib run): nodessh_stranger_test.sh
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
STRANGER="/usr/bin/python3 $here/ssh_stranger.py"
sub=$(subdomain); launcher=$(launcher_pod); nodes=($(node_pods))
node=${nodes[0]}.$sub; held=${nodes[1]}.$sub; stranger=${nodes[2]}
node_ip=$("$CIB" ip "${nodes[0]}"); held_ip=$("$CIB" ip "${nodes[1]}")
log="$CIB_DIR/pods/${nodes[0]}/mpi-sshd.log"; held_log="$CIB_DIR/pods/${nodes[1]}/mpi-sshd.log"

init_launcher --slots 2
for pod in "${nodes[@]:0:2}"; do
  in_pod "$pod" "$TMPI_BUILD_DIR/bin/mpi-init" --role node --ssh-secret "$SECRET" --log-level warn
  options=() limits=()
  # Node 1's at a container's soft descriptor limit, 1024, with room for 4096 logged in.
  [[ $pod == "${nodes[1]}" ]] && options=(--sshd-per-source-startups 64 --sshd-max-connections 4096) \
    limits=(prlimit --nofile=1024:)
  "$CIB" exec "$pod" -- "${limits[@]}" env HOME="$CIB_DIR/pods/$pod/home" "$TMPI_BUILD_DIR/bin/mpi-sshd" \
    "${options[@]}" >"$CIB_DIR/pods/$pod/mpi-sshd.log" 2>&1 </dev/null &
done
for pod in "${nodes[@]:0:2}"; do wait_mpi_sshd "$pod"; done

# The listener's soft limit covers both bounds (4096 logged in, 64 starting, 64 to spare);
# a command gets back the limit the server was started with.
# The oldest such process: the connection processes (a monitor, its session process) are its
# children, each with the limit put back, and a probe's may not have ended yet.
listener=$(pgrep -f -o "^$TMPI_BUILD_DIR/bin/mpi-sshd --sshd-per-source-startups 64")
read -r soft hard < <(awk '/^Max open files/ { print $4, $5 }' "/proc/$listener/limits")
expect_eq "$soft" "$((hard < 4224 ? hard : 4224))" "the listener's soft descriptor limit (hard: $hard)"
((hard >= 4224)) || expect_contains "$(cat "$held_log")" "the descriptor limit is $hard (hard)" "a short hard limit, named"
expect_eq "$(in_pod "$launcher" ssh "$held" 'ulimit -Sn')" 1024 "a command's soft descriptor limit"
pass "the descriptor limit raised to what the bounds need ($soft), and put back for commands"
# The stranger's own addresses, on its pod: 4 for the churn, 1 for the one-address hold, 4
# for the hold of 64 each.
base=$("$CIB" ip "$launcher" | cut -d. -f1-2)
addresses=()
for i in $(seq 2 10); do
  in_pod "$stranger" ip addr add "$base.78.$i/16" dev eth0
  addresses+=("$base.78.$i")
done
list() { local IFS=,; echo "$*"; }
logins() {  # logins HOST N: how many of N logins from the launcher succeed
  local ok=0
  for _ in $(seq "$2"); do
    in_pod "$launcher" timeout 15 ssh "$1" true 2>>"$CIB_DIR/logins.err" && ok=$((ok + 1))
    sleep 0.3
  done
  echo "$ok"
}

# Two sessions of the job that outlive every stranger: one streams output, one keeps stdin open.
(exec "$CIB" exec "$launcher" -- ssh "$node" 'while :; do echo tick; sleep 0.05; done') >"$CIB_DIR/stream.out" 2>&1 &
streamer=$!
mkfifo "$CIB_DIR/feed"
trap '' PIPE  # a session that ended under the stranger is a failure to name, not the test's end
(exec "$CIB" exec "$launcher" -- ssh "$node" 'cat > "$HOME/fed"') <"$CIB_DIR/feed" >"$CIB_DIR/fed.err" 2>&1 &
feeder=$!
exec 9>"$CIB_DIR/feed"
echo first >&9
sleep 1

in_pod "$stranger" $STRANGER churn --target "$node_ip:2222" --sources "$(list "${addresses[@]:0:4}")" \
  --loops 1 --seconds 12 >"$CIB_DIR/churn.out" 2>&1 &
churner=$!
sleep 1
echo second >&9 || fail "the session with stdin open ended under the churn"
ok=$(logins "$node" 10)
wait "$churner" || fail "the churn itself failed: $(cat "$CIB_DIR/churn.out")"
((ok >= 9)) || fail "$ok logins of 10 under the churn ($(cat "$CIB_DIR/churn.out")): $(tail -5 "$CIB_DIR/logins.err")"
kill -0 "$streamer" 2>/dev/null || fail "the streaming session ended under the churn: $(tail -3 "$CIB_DIR/stream.out")"
before=$(wc -l <"$CIB_DIR/stream.out"); sleep 1; after=$(wc -l <"$CIB_DIR/stream.out")
((after > before)) || fail "the streaming session stalled after the churn ($before lines, then $after)"
echo third >&9 || fail "the session with stdin open ended under the churn"
exec 9>&-
wait "$feeder" || fail "the session with stdin open ended with an error: $(cat "$CIB_DIR/fed.err")"
expect_eq "$(cat "$CIB_DIR/pods/${nodes[0]}/home/fed")" $'first\nsecond\nthird' "the bytes fed through the churn"
kill "$streamer"; wait "$streamer" 2>/dev/null || true
expect_contains "$(cat "$log")" "a penalty for connections closed without trying to log in" "the churn's penalty"
pass "keyless churn ($(cat "$CIB_DIR/churn.out")): $ok logins of 10, a streaming and a stdin session whole"

in_pod "$stranger" $STRANGER hold --target "$node_ip:2222" --sources "${addresses[4]}" --per 256 --seconds 8 \
  >"$CIB_DIR/hold1.out" 2>&1 &
holder=$!
sleep 2
ok=$(logins "$node" 3)
wait "$holder" || fail "the hold itself failed: $(cat "$CIB_DIR/hold1.out")"
expect_eq "$ok" 3 "logins while one address holds 256 idle connections ($(cat "$CIB_DIR/hold1.out"))"
expect_contains "$(cat "$log")" "${addresses[4]}: connection refused: 8 of its connections are not logged in yet" \
  "the one address's refusal"
pass "256 idle connections from one address ($(cat "$CIB_DIR/hold1.out")): 3 logins of 3"

in_pod "$stranger" $STRANGER hold --target "$held_ip:2222" --sources "$(list "${addresses[@]:5:4}")" --per 64 \
  --seconds 8 >"$CIB_DIR/hold4.out" 2>&1 &
holder=$!
sleep 2
ok=$(logins "$held" 3)
wait "$holder" || fail "the hold itself failed: $(cat "$CIB_DIR/hold4.out")"
expect_eq "$ok" 3 "logins while 4 addresses hold 64 idle connections each ($(cat "$CIB_DIR/hold4.out"))"
expect_contains "$(cat "$held_log")" "dropped for a newer connection" "the oldest idle connection dropped"
pass "64 idle connections from each of 4 addresses ($(cat "$CIB_DIR/hold4.out")): 3 logins of 3"

for method in none gssapi; do
  out=$(in_pod "$stranger" $STRANGER methods --target "$node_ip:2222" --method "$method" --tries 10 2>&1)
  expect_eq "$out" "closed after 7" "$method requests (the first none free, then 6 tries)"
done
expect_contains "$(cat "$log")" 'gssapi-with-mic for "stranger" refused' "the gssapi refusal in the log"
expect_contains "$(cat "$log")" "6 authentication attempts refused" "the closing in the log"
pass "gssapi-with-mic and a second none refused and counted: closed at the 7th request"
