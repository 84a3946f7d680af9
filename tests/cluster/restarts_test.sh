#!/usr/bin/env bash
# Restarts in place (`mpi-launcher run --restarts N`, launcher/restarts.h) on the job of
# launcher_test.sh (1 launcher, 2 nodes, 2 slots each, sidecars, short beats). Each attempt's
# ranks write their attempt (TMPI_RESTART_COUNT, TORCHELASTIC_RESTART_COUNT) beside their
# rank; attempt 0 meets the case's fault, attempt 1 ends by itself. One case per run:
#   rank-killed     rank 1 SIGKILLed (from outside: no OOM kill counted): restarted in place,
#                   exit 0; every rank of attempt 1 saw 1; the Event-worthy row and the log's
#                   last lines name the attempt, its cause and the time to resume
#   own-exit        rank 1 exits 3: no restart (exit 3), unless --retryable-exit-codes 3; then
#                   its exit report of attempt 0, read off the wire and sent again into
#                   attempt 1, is refused (409: another attempt's epoch)
#   budget          rank 1 SIGKILLed in every attempt, --restarts 1: exit 137 (its own exit,
#                   as the failure policy would have seen it), both attempts listed
#   oom             rank 1 OOM-killed in its pod's memory cgroup: named as the OOM killer's,
#                   not restarted (exit 137)
#   partitioned     node 1's link down 10 s, then back: named lost, waited for, restarted in
#                   place, exit 0
#   recreated       node 1's pod made again (the same name, a new address): restarted in place,
#                   exit 0; node 0's server and sidecar and the launcher keep their pids
#   fabric          the fabric check (--check mpi) finds node 1's link slow (tbf, 20 Mbit/s): exit
#                   69 is a fault a retest may clear; the link healed meanwhile, attempt 1's
#                   check passes and the job runs (exit 0)
#   resume          Megatron-LM's checkpoint loop cut down (tests/examples/resume_train.py), a
#                   rank SIGKILLed mid-run: resumed in place from its last checkpoint, the step
#                   count going on from there, and its final weights those of a run never killed
source "$(dirname "$0")/launcher_lib.sh"
ATTACKER="$(dirname "$0")/attacker.py"
address_of() { "$CIB" pods | awk -v ip="$1" '$2 == ip { print $1 }'; }
seen="$CIB_DIR/attempts"; mkdir -p "$seen"
# A rank's command: note the attempt, then run attempt 0's fault ($1, for rank 1 or all) or end.
rank_cmd() {
  echo "echo \"\$TMPI_RESTART_COUNT \$TORCHELASTIC_RESTART_COUNT\" > $seen/\$RANK.\$TMPI_RESTART_COUNT; $1"
}
# every_rank_saw N: each of the 4 ranks wrote attempt N, as both variables.
every_rank_saw() {
  for rank in 0 1 2 3; do
    [[ $(cat "$seen/$rank.$1" 2>/dev/null) == "$1 $1" ]] || fail "rank $rank did not see attempt $1: $(ls "$seen")"
  done
}
# restarted_row N CAUSE: report.json's row N says the attempt restarted, with its cause and resume time.
restarted_row() {
  jq -e --argjson n "$1" --arg cause "$2" \
    '.attempts[$n] | .attempt == $n and .cause == $cause and .restarted and (.resumedAfter | type) == "number"' \
    "$report" > /dev/null || fail "report.json's attempts: $(jq -c .attempts "$report")"
}
# alive PID...: each live PID with its start time (a pid reused by another process differs).
alive() {
  local pid words=()
  for pid in "$@"; do pid=${pid%@*}; [[ -r /proc/$pid/stat ]] && words+=("$pid@$(cut -d' ' -f22 "/proc/$pid/stat")"); done
  echo "${words[*]}"
}
with_sidecars
case $case_name in
  rank-killed)
    t0=$(date +%s%N); rc=0
    # Attempt 0's other ranks take 0.8 s to end after SIGTERM, and note when they did: no rank
    # of attempt 1 may start before the last of them has ended (the launcher waits for every
    # rank's report of its end, not for MPI's daemons: launcher/job_run.cpp, stop_job).
    out=$(launch --restarts 2 -- sh -c "$(rank_cmd 'if [ "$TMPI_RESTART_COUNT" = 0 ]; then
      trap "sleep 0.8; touch '"$seen"'/\$RANK.0.end; exit 143" TERM
      if [ "$RANK" = 1 ]; then sleep 2; kill -KILL $$; fi; sleep 60 & wait; fi')" 2>&1) || rc=$?
    [[ $rc == 0 ]] || fail "a rank killed from outside, restarted in place: expected exit 0, got $rc: $out"
    every_rank_saw 0; every_rank_saw 1
    last_end=$(find "$seen" -name '*.0.end' -printf '%T@\n' | sort -g | tail -n 1)
    first_start=$(find "$seen" -name '*.1' -printf '%T@\n' | sort -g | head -n 1)
    [[ -n $last_end ]] || fail "no rank of attempt 0 noted its end: $(ls "$seen")"
    (( $(echo "$last_end < $first_start" | bc) )) ||
      fail "a rank of attempt 1 started ($first_start) before attempt 0's last rank ended ($last_end)"
    restarted_row 0 RankKilled
    expect_contains "$out" "attempt 0 failed (RankKilled); restarting in place: restart 1 of 2" "the restart is said"
    expect_contains "$out" "attempt 0 failed after" "the log's last lines list the attempt"
    expect_contains "$out" "restarted in place, running again" "with its time to resume"
    [[ $(jq -r .exit.code "$report") == 0 ]] || fail "report.json's exit: $(jq -c .exit "$report")"
    resume=$(jq -r '.attempts[0].resumedAfter' "$report")
    row "a rank killed by SIGKILL, --restarts 2" "restarted in place; the ranks saw attempt 1; exit 0" "${resume} s from the failure to the next launch"
    pass "a rank killed: restarted in place, exit 0 ($(ms_since "$t0") ms)" ;;
  own-exit)
    rc=0; out=$(launch --restarts 2 -- sh -c "$(rank_cmd 'if [ "$RANK" = 1 ]; then sleep 2; exit 3; fi; sleep 60')" 2>&1) || rc=$?
    [[ $rc == 3 ]] || fail "the program's own exit 3: expected exit 3, no restart; got $rc: $out"
    [[ ! -e $seen/0.1 ]] || fail "the program's own failure was restarted"
    jq -e '.attempts | length == 1 and .[0].cause == null and (.[0].restarted | not)' "$report" > /dev/null ||
      fail "report.json's attempts: $(jq -c .attempts "$report")"
    expect_contains "$out" "not restarted: not the infrastructure's" "the verdict says why"
    # Listed as retryable: restarted; attempt 0's exit report, replayed into attempt 1, refused.
    in_pod "$launcher" python3 "$ATTACKER" sniff --iface eth0 --path /v1/rank --contains '"event":"exit"' \
      --out "$CIB_DIR/exit.req" --seconds 60 &
    sniffer=$!
    sleep 0.5
    launch --restarts 2 --retryable-exit-codes 3 -- sh -c "$(rank_cmd 'if [ "$TMPI_RESTART_COUNT" = 0 ]; then
      if [ "$RANK" = 1 ]; then sleep 2; exit 3; fi; sleep 60; fi; sleep 8')" > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait "$sniffer" || fail "no exit report of attempt 0 was read off the wire"
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    until ls "$seen"/*.1 > /dev/null 2>&1; do sleep 0.2; kill -0 "$pid" 2>/dev/null || break; done
    sleep 1
    replayed=$(in_pod "$(address_of "$(cat "$CIB_DIR/exit.req.from")")" python3 "$ATTACKER" replay \
      --target "$launcher.$sub:29410" --request "$CIB_DIR/exit.req")
    [[ $replayed == "409 "*"another launch's epoch"* ]] || fail "attempt 0's exit report, sent into attempt 1: $replayed"
    rc=0; wait "$pid" || rc=$?
    log=$(cat "$CIB_DIR/launcher.log")
    [[ $rc == 0 ]] || fail "a listed exit code, restarted: expected exit 0, got $rc: $log"
    restarted_row 0 RetryableExit; every_rank_saw 1
    row "a rank exiting 3 (the program's own), --restarts 2" "not restarted (exit 3); with --retryable-exit-codes 3, restarted (exit 0), and attempt 0's exit report replayed into attempt 1 refused" "$(cut -d' ' -f1 <<<"$replayed")"
    pass "the program's own exit: not restarted unless listed; a replay across attempts refused" ;;
  budget)
    start_kube_api  # the Events, through the fake API
    rc=0; out=$(launch --restarts 1 -- sh -c "$(rank_cmd 'if [ "$RANK" = 1 ]; then sleep 2; kill -KILL $$; fi; sleep 60')" 2>&1) || rc=$?
    [[ $rc == 137 ]] || fail "the budget spent: expected rank 1's exit 137, got $rc: $out"
    jq -e '.attempts | length == 2 and .[0].restarted and (.[1].restarted | not) and .[1].cause == "RankKilled"' \
      "$report" > /dev/null || fail "report.json's attempts: $(jq -c .attempts "$report")"
    expect_contains "$out" "attempt 0 failed after" "the first attempt in the verdict"
    expect_contains "$out" "; no restart left" "the last attempt in the verdict"
    every_rank_saw 1
    # Each attempt's verdict is an Event on the TrainJob: the restart's, then the end's.
    reasons=$(jq -r 'select(.method == "POST" and (.path | endswith("/events")) and .code == 201) | .object.reason' \
      "$CIB_DIR/kube/requests.log" | paste -sd ' ')
    [[ $reasons == "RestartingInPlace RankFailed" ]] || fail "the Events: $reasons: $(cat "$CIB_DIR/kube/requests.log")"
    restart_event=$(jq -r 'select(.object.reason == "RestartingInPlace") | .object.message' "$CIB_DIR/kube/requests.log")
    expect_contains "$restart_event" "was killed by signal 9" "the restart's Event names the failure"
    expect_contains "$restart_event" "restarting in place: restart 1 of 1" "and the restart"
    row "a rank killed in every attempt, --restarts 1" "exit 137 after 2 attempts, each listed in the verdict and report.json" "-"
    pass "the budget spent: exit 137, every attempt listed" ;;
  oom)
    memory_limit "${nodes[0]}" "$(server_pid "${nodes[0]}")"
    rc=0; out=$(launch --restarts 2 -- sh -c "$(rank_cmd 'if [ "$RANK" = 1 ]; then sleep 2;
      exec /usr/bin/python3 -c "b = bytearray(2 << 30)"; fi; sleep 60')" 2>&1) || rc=$?
    [[ $rc == 137 ]] || fail "an OOM kill: expected exit 137, no restart; got $rc: $out"
    [[ ! -e $seen/0.1 ]] || fail "an OOM kill was restarted"
    expect_contains "$out" "was killed by the kernel's OOM killer" "the OOM named"
    expect_contains "$out" "at its limit of 300 MiB" "with its cgroup's limit"
    jq -e '.attempts | length == 1 and .[0].cause == null' "$report" > /dev/null ||
      fail "report.json's attempts: $(jq -c .attempts "$report")"
    # The same cgroup, a SIGKILL that is no OOM kill: the count did not rise, so it is named
    # a kill from outside the job, not "out of memory?".
    rc=0; out=$(launch -- sh -c "$(rank_cmd 'if [ "$RANK" = 1 ]; then sleep 2; kill -KILL $$; fi; sleep 60')" 2>&1) || rc=$?
    [[ $rc == 137 ]] || fail "a SIGKILL from outside: expected exit 137, got $rc: $out"
    expect_contains "$out" "killed by signal 9 (SIGKILL) from outside the job" "a kill with no OOM counted named as another's"
    [[ $(jq -r .exit.troubleshooting "$report") == rank-killed ]] || fail "its key: $(jq -c .exit "$report")"
    row "a rank OOM-killed in its pod's memory cgroup, --restarts 2" "not restarted: exit 137, named the OOM killer's by the cgroup's count (a SIGKILL with none counted: named from outside the job)" "-"
    pass "an OOM kill: named, not restarted" ;;
  partitioned|recreated)
    launch --restarts 2 -- sh -c "$(rank_cmd 'if [ "$TMPI_RESTART_COUNT" = 0 ]; then sleep 60; fi; sleep 4')" \
      > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    wait_ranks "$(date +%s%N)" 2000 "${nodes[@]}"
    before=$(alive "$(server_pid "${nodes[0]}")" "$(cat "$CIB_DIR/pods/${nodes[0]}/sidecar.pid")" "$(launcher_pid)")
    t0=$(date +%s%N)
    if [[ $case_name == partitioned ]]; then
      ns=$("$CIB" ns "${nodes[1]}")
      ip -n "${ns%-p*}-br" link set "v${ns##*-p}" down
      sleep 10
      ip -n "${ns%-p*}-br" link set "v${ns##*-p}" up
      fault="node 1's link down for 10 s, then back"
    else
      "$CIB" recreate "${nodes[1]}"
      init_node "${nodes[1]}"
      start_sidecar "${nodes[1]}" --deadline 60s
      fault="node 1's pod made again (the same name, a new address)"
    fi
    # While attempt 1 runs: node 0's server and sidecar, and the launcher, are the processes they were.
    for _ in $(seq 450); do [[ -e $seen/0.1 ]] && break; sleep 0.2; done
    during=$(alive $before)
    # ... and no rank of attempt 0 still runs on node 0 (its GPU would be held): the launcher
    # waits for their agents' exit reports, and each agent ends what its rank left.
    ! grep -qE ': sleep 60 ?$' <<<"$(job_leftovers "${nodes[0]}")" || fail "attempt 0's ranks still ran in attempt 1"
    timeout 90 tail --pid="$pid" -f /dev/null || fail "the launcher still runs 90 s after the fault"
    rc=0; wait "$pid" || rc=$?
    log=$(cat "$CIB_DIR/launcher.log")
    [[ $rc == 0 ]] || fail "$fault: expected a restart in place and exit 0, got $rc: $log"
    grep -qE "host ${nodes[1]}\.$sub (lost|is gone)" <<<"$log" || fail "node 1 was not named: $log"
    restarted_row 0 HostLost; every_rank_saw 1
    [[ $before == "$during" ]] || fail "the other pods' processes were touched: before '$before', in attempt 1 '$during'"
    row "$fault, --restarts 2" "named lost, waited for, restarted in place; the other pods untouched; exit 0" "$(ms_since "$t0") ms to the job's end"
    pass "$fault: restarted in place, exit 0" ;;
  fabric)
    ns=$("$CIB" ns "${nodes[1]}")
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate 20mbit burst 32kb latency 50ms
    launch --restarts 1 --check mpi --max-bytes 4M --pair-bytes 4M --min-busbw 0.05 -- sh -c "$(rank_cmd true)" \
      > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "# result:" "$CIB_DIR/launcher.log" 150  # attempt 0's check has judged
    t0=$(date +%s%N)
    ip netns exec "$ns" tc qdisc del dev eth0 root  # the link heals before the retest
    rc=0; wait "$pid" || rc=$?
    log=$(cat "$CIB_DIR/launcher.log")
    [[ $rc == 0 ]] || fail "a slow link that heals: expected a retest that passes and exit 0, got $rc: $log"
    [[ ! -e $seen/0.0 ]] || fail "a rank ran in the attempt whose fabric check failed"
    restarted_row 0 FabricFault; every_rank_saw 1
    [[ $(grep -c "fabric check: nccl-check --backend mpi" <<<"$log") == 2 ]] || fail "the check did not run again: $log"
    row "the fabric check finds a slow link (20 Mbit/s) that then heals, --restarts 1" "exit 69 restarted in place; the check run again passes; exit 0" "$(ms_since "$t0") ms from the heal to the job's end"
    pass "a fabric fault that a retest clears: restarted, exit 0" ;;
  resume)
    # torch over gloo on eth0: GLOO_ variables reach every rank by the default prefix.
    status_env=(GLOO_SOCKET_IFNAME=eth0)
    train=(/usr/bin/python3 "$(cd "$(dirname "$0")/../examples" && pwd)/resume_train.py" --steps 20 --save-interval 5)
    rc=0; plain=$(launch -- "${train[@]}" --save "$CIB_DIR/ckpt-plain" 2>&1) || rc=$?
    [[ $rc == 0 ]] || fail "the run never killed: exit $rc: $plain"
    want=$(grep -m 1 "^final step 20 weights" <<<"$plain") || fail "no final weights: $plain"
    with_sidecars  # the first job's sidecars heard it end, and left
    launch --restarts 1 -- "${train[@]}" --save "$CIB_DIR/ckpt" > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "step 7 loss" "$CIB_DIR/launcher.log" 120
    victim=""
    for p in $(ip netns pids "$("$CIB" ns "${nodes[1]}")"); do
      # The rank itself (python), not its agent (mpi-rank -- python ...).
      [[ $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null) == "/usr/bin/python3 "*resume_train.py* ]] && { victim=$p; break; }
    done
    [[ -n $victim ]] || fail "no rank of the training found on ${nodes[1]}"
    t0=$(date +%s%N); kill -KILL "$victim"
    rc=0; wait "$pid" || rc=$?
    log=$(cat "$CIB_DIR/launcher.log")
    [[ $rc == 0 ]] || fail "a training rank killed, restarted in place: expected exit 0, got $rc: $log"
    resumed=$(grep -oE "^attempt 1: resumed from step [0-9]+" <<<"$log" | grep -oE "[0-9]+$") ||
      fail "attempt 1 did not resume from a checkpoint: $log"
    ((resumed >= 5 && resumed % 5 == 0)) || fail "resumed from step $resumed, not a checkpoint's: $log"
    after=$(sed -n '/^attempt 1: resumed/,$p' <<<"$log" | grep -m 1 -oE "^step [0-9]+" | grep -oE "[0-9]+$")
    [[ $after == $((resumed + 1)) ]] || fail "attempt 1's first step was $after, not $((resumed + 1)): $log"
    got=$(grep "^final step 20 weights" <<<"$log" | tail -n 1)
    [[ $got == "$want" ]] || fail "the resumed run's weights differ from a run never killed: '$got' vs '$want'"
    restarted_row 0 RankKilled
    row "a training rank SIGKILLed mid-run (Megatron-LM's checkpoint loop cut down), --restarts 1" "resumed in place from its last checkpoint, the step count going on; the final weights those of a run never killed; exit 0" "$(ms_since "$t0") ms from the kill to the job's end (resumed at step $resumed)"
    pass "a training rank killed: resumed from step $resumed in place, the same final weights" ;;
  *) fail "unknown case $case_name" ;;
esac
