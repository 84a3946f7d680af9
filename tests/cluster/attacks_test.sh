#!/usr/bin/env bash
# The fault matrix's attacks: a stranger on the pod network, without the job key, against the
# job of launcher_lib.sh (1 launcher, 2 nodes, 2 slots each, short beats). The stranger is
# tests/cluster/attacker.py, run where such a stranger would be: on its own addresses, on a
# pod's interface, or on a node's path to the launcher. One case per run; each ends with a
# `row` and its checks:
#   flood          1000 idle keep-alive connections from four addresses that are not the
#                  job's, reopened as they close, against a launcher at 1024 descriptors
#                  (containerd 2's default soft limit, here the hard one too), which leaves it
#                  960 connections: the sidecars register at once, the rank agents' beats get
#                  through, no host is named lost, the job runs (exit 0)
#   replay         a rank's signed exit report, read off the wire in one launch, sent again
#                  from its own pod into the next launch (same job key): 409, another
#                  launch's epoch; a start report sent again within its launch: 403; a key
#                  holder on the other node's pod signs a fresh exit for that rank: 403; the
#                  second launch runs (exit 0)
#   forged-answer  node 1's start-gate questions are answered by a stranger on its path (a 403,
#                  then "start" with a proof of its own) while it passes every other request
#                  on: node 1's agents do not start their ranks, they name the gate, their
#                  reports get through, and the launcher stops the job at once as the
#                  infrastructure's (exit 75: the runtimes retry it)
source "$(dirname "$0")/launcher_lib.sh"
ATTACKER="$(dirname "$0")/attacker.py"
address_of() { "$CIB" pods | awk -v ip="$1" '$2 == ip { print $1 }'; }
case $case_name in
  flood)
    with_sidecars
    base=$("$CIB" ip "$launcher" | cut -d. -f1-2)
    sources=()
    for i in 2 3 4 5; do
      in_pod "${nodes[1]}" ip addr add "$base.77.$i/16" dev eth0
      sources+=("$base.77.$i")
    done
    in_pod "${nodes[1]}" python3 "$ATTACKER" flood --target "$launcher.$sub:29410" \
      --sources "$(IFS=,; echo "${sources[*]}")" --per 250 --reopen-rate 1000 --seconds 25 > "$CIB_DIR/flood.out" 2>&1 &
    flooder=$!
    sleep 1
    t0=$(date +%s%N); rc=0
    out=$(in_pod "$launcher" prlimit --nofile=1024:1024 timeout -k 5 120 "$L" run --hosts "$ETC_MPI/hosts.json" \
      --iface eth0 --report "$report" --beat-interval 1s --lost-after 3s --grace 3s -- sleep 12 2>&1) || rc=$?
    job_ms=$(ms_since "$t0")
    wait "$flooder" || fail "the flood itself failed: $(cat "$CIB_DIR/flood.out")"
    [[ $rc == 0 ]] || fail "a keyless flood ended the job: exit $rc: $out"
    ! grep -q "host .* lost (" <<<"$out" || fail "a host was named lost under the flood: $out"
    # The sidecars' registrations are signed, so they take the slots of keyless connections at
    # once: the barrier opens before the first progress line (5 s). A server that let the
    # flood keep them out held the barrier for half a minute, then named a host lost.
    ! grep -q "rendezvous: .* waiting for" <<<"$out" || fail "the flood held the barrier: $out"
    ((job_ms < 30000)) || fail "the flood held the 12 s job for $job_ms ms: $out"
    read -r _ opened _ closed < "$CIB_DIR/flood.out"
    ((closed > 100)) || fail "the flood was not shed (opened $opened, closed $closed): it never reached the cap"
    row "a keyless flood: 1000 idle keep-alive connections from 4 addresses, the launcher at 1024 descriptors" \
      "the job's own requests get through at once; no host named lost, the job runs (exit 0)" \
      "$closed of $opened connections shed in the job's $job_ms ms"
    pass "a keyless flood: the job ran (exit 0), $closed of $opened connections shed" ;;
  replay)
    with_sidecars
    in_pod "$launcher" python3 "$ATTACKER" sniff --iface eth0 --path /v1/rank --contains '"event":"exit"' \
      --out "$CIB_DIR/exit.req" --seconds 60 &
    sniffer=$!
    sleep 0.5
    rc=0; out=$(launch -- sh -c 'if [ "$RANK" = 1 ]; then sleep 3; exit 3; fi; sleep 60' 2>&1) || rc=$?
    [[ $rc == 3 ]] || fail "the first launch: expected rank 1's exit 3, got $rc: $out"
    wait "$sniffer" || fail "no exit report was read off the wire"
    # The next launch, as the JobSet's restart makes it: a new launcher, the same job key.
    in_pod "$launcher" python3 "$ATTACKER" sniff --iface eth0 --path /v1/rank --contains '"event":"start"' \
      --out "$CIB_DIR/start.req" --seconds 60 &
    sniffer=$!
    launch -- sleep 6 > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait "$sniffer" || fail "no start report of the second launch was read off the wire"
    replay_from() {  # replay_from FILE: the captured request, sent from the pod that sent it
      in_pod "$(address_of "$(cat "$1.from")")" python3 "$ATTACKER" replay --target "$launcher.$sub:29410" --request "$1"
    }
    across=$(replay_from "$CIB_DIR/exit.req")
    within=$(replay_from "$CIB_DIR/start.req")
    # A key holder on the other node's pod (rank code can read the key) makes a fresh, signed
    # exit for that rank: refused, its sender is not the rank's host.
    sender=$(address_of "$(cat "$CIB_DIR/start.req.from")")
    other=${nodes[0]}; [[ $sender != "$other" ]] || other=${nodes[1]}
    python3 "$ATTACKER" insider --request "$CIB_DIR/start.req" --key "$SECRET/ssh-privatekey" --out "$CIB_DIR/insider.req"
    wrong_pod=$(in_pod "$other" python3 "$ATTACKER" replay --target "$launcher.$sub:29410" --request "$CIB_DIR/insider.req")
    [[ $across == "409 "*"another launch's epoch"* ]] || fail "the first launch's exit report, sent again: $across"
    [[ $within == "403 "* ]] || fail "a start report sent again within its launch: $within"
    [[ $wrong_pod == "403 "*"address"* ]] || fail "a signed report from the wrong pod: $wrong_pod"
    rc=0; wait "$pid" || rc=$?
    [[ $rc == 0 ]] || fail "the replays ended the second launch: exit $rc: $(cat "$CIB_DIR/launcher.log")"
    [[ $(jq -r '.exit.code' "$report") == 0 ]] || fail "report.json: $(jq -c .exit "$report")"
    row "a replay: a rank's exit report from the last launch, a start report within this one; a signed report from the wrong pod" \
      "refused (409: another launch's epoch; 403: replayed; 403: another host's address); the job runs (exit 0)" \
      "refused in $(cut -d' ' -f2 <<<"$across"), $(cut -d' ' -f2 <<<"$within") and $(cut -d' ' -f2 <<<"$wrong_pod")"
    pass "replays: refused across launches and within one, the job ran" ;;
  forged-answer)
    # On node 1's path to the launcher (a NAT rule in its network namespace, as a compromised
    # hop would be) sits the stranger: it passes the sidecar's and agents' requests on, and
    # answers the start gate's questions itself. MPICH: its agents ask the gate.
    with_sidecars
    in_pod "${nodes[1]}" python3 "$ATTACKER" on-path --port 29499 --to "$launcher.$sub:29410" \
      --forge /v1/may-start --mark 32343 --log "$CIB_DIR/on-path.log" &
    proxy=$!
    in_pod "${nodes[1]}" nft -f - <<EOF
table ip onpath {
  chain out {
    type nat hook output priority -100;
    meta mark != 32343 ip daddr $("$CIB" ip "$launcher") tcp dport 29410 redirect to :29499
  }
}
EOF
    t0=$(date +%s%N); rc=0
    out=$(launch --mpi mpich -- sh -c "touch $CIB_DIR/rank-started-\$RANK; sleep 60" 2>&1) || rc=$?
    detect=$(ms_since "$t0")
    kill "$proxy" 2>/dev/null || true; wait "$proxy" 2>/dev/null || true
    [[ $rc == 75 ]] || fail "forged answers: expected exit 75 (the infrastructure's), got $rc: $out"
    grep -q "/v1/may-start forged 200" "$CIB_DIR/on-path.log" || fail "the stranger forged no start: $(cat "$CIB_DIR/on-path.log")"
    grep -q "/v1/register forwarded" "$CIB_DIR/on-path.log" || fail "node 1's sidecar did not pass the stranger: $(cat "$CIB_DIR/on-path.log")"
    expect_contains "$out" "gave no answer that verifies" "node 1's agents name the gate"
    # Their exit reports pass the stranger, so the launcher stops the job at once, rather than
    # wait on ranks that MPI will never see join (here the others' 60 s; a real job's collective
    # would wait until --timeout).
    grep -qE "rank [23] on ${nodes[1]} exited with code 75" <<<"$out" || fail "no rank of ${nodes[1]} named: $out"
    ((detect < 20000)) || fail "the launcher ended the job $detect ms after its launch: it was not told: $out"
    [[ $(jq -r '.exit.code' "$report") == 75 ]] || fail "report.json: $(jq -c .exit "$report")"
    for rank in 2 3; do
      [[ ! -e $CIB_DIR/rank-started-$rank ]] || fail "rank $rank on ${nodes[1]} started on a forged answer"
    done
    row "a forged answer: a stranger on a node's path answers its start gate" \
      "that node's ranks are not started, the gate named; exit 75 (retried)" "$detect ms to the launcher's exit"
    pass "forged answers: no rank started on them, exit 75" ;;
  *) fail "unknown case $case_name" ;;
esac
