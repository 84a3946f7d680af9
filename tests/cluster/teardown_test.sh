#!/usr/bin/env bash
# mpi-launcher when a job does not end by itself, on the job of launcher_test.sh (1 launcher,
# 2 nodes, 2 slots each, real sshd, sidecars and MPI). Each case times how soon the launcher
# names the cause and how soon nothing of the job is left. One case per run:
#   node-partitioned[-ssh]    at the defaults, a node cut off (its link down, processes alive):
#                             named within --lost-after (15 s), torn down within 3 s more
#   node-killed[-ssh]         a node dies mid-run: exit 75 within 10 s, naming the host; with
#                             sidecars, or without (--wait ssh: the rank agents' beats). Its
#                             FINs name it at once, whatever --lost-after (the defaults' rows of
#                             detection by silence are node-partitioned and node-silent)
#   node-silent-{0.5s,6s}[-ssh][-defaults]  a node dies silently (its link down, then its
#                             processes) 0.5 s or 6 s after its rank began: named within
#                             --lost-after, with sidecars or without
#   node-unheard-ssh          a node whose agents cannot reach the launcher (its port dropped):
#                             named, as one never heard from, within --lost-after of the
#                             first report
#   node-deleted[-ssh]        at the defaults, a node pod deleted as the kubelet does it
#                             (SIGTERM, then SIGKILL): named within 2 s (its sidecar says it
#                             is leaving), the teardown within 3 s more; without sidecars
#                             within 4 s (mpirun's exit, then the lost-host probe, whose
#                             handshake waits up to 2 s where the pod's address is gone)
#   mpirun-lingers            an mpirun that outlives its ranks is ended; exit 0
#   timeout                   rank 1 hangs: --timeout stops the job with exit 75, naming it
#   sigterm                   SIGTERM to the launcher mid-run: no process left in any pod
#   stop-waiting              SIGTERM while waiting for hosts ends it at once; a rendezvous
#                             timeout writes report.json too
#   stop-preflight            SIGTERM during the fabric check, and during the --wait ssh poll
#                             (which names the sshd it waits for, every 5 s)
source "$(dirname "$0")/launcher_lib.sh"

case $case_name in
  node-killed|node-killed-ssh|node-partitioned|node-partitioned-ssh)
    # Hard: every process of the pod SIGKILLed, its network gone. With sidecars their beats
    # stop; without (--wait ssh), the running ranks' agents' beats do. With short beats
    # (--lost-after 3s) the launcher ends within 10 s; cut off at the defaults, the host is
    # named within --lost-after (15 s) and the teardown takes at most 3 s more.
    wait_mode=(); if [[ $case_name == *-ssh* ]]; then wait_mode=(--wait ssh); else with_sidecars; fi
    if [[ $case_name == node-partitioned* ]]; then
      settings="defaults" limit=25
      in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 --report "$report" "${wait_mode[@]}" \
        -- sleep 60 > "$CIB_DIR/launcher.log" 2>&1 &
    else
      settings="--lost-after 3s" limit=10
      launch "${wait_mode[@]}" -- sleep 60 > "$CIB_DIR/launcher.log" 2>&1 &
    fi
    pid=$!
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    # Every rank runs, and its agent has had 3 s to report its start (due 2 s after it began;
    # it beats from then on). An agent cut off before the coordinator ever answered it keeps
    # its rank (agent/agent.cpp, orphaned()): the partition must come after that first answer.
    wait_ranks "$(date +%s%N)" 0 "${nodes[@]}"
    sleep 3
    t0=$(date +%s.%N)
    if [[ $case_name == node-partitioned* ]]; then
      # A partition: the pod's link cut at the bridge, its processes alive. No FIN or RST
      # reaches anyone: only the beats can tell.
      ns=$("$CIB" ns "${nodes[1]}")
      ip -n "${ns%-p*}-br" link set "v${ns##*-p}" down
    else
      "$CIB" stop "${nodes[1]}"
    fi
    timeout "$limit" tail -s 0.1 --pid="$pid" -f /dev/null || fail "the launcher still runs $limit s after the node died"
    t_exit=$(date +%s.%N)
    rc=0; wait "$pid" || rc=$?
    [[ $rc == 75 ]] || fail "a lost host: expected exit 75 (a retry may pass), got $rc: $(cat "$CIB_DIR/launcher.log")"
    log=$(cat "$CIB_DIR/launcher.log")
    judge_lost "$log" "$t0" "$t_exit"
    [[ $(jq -r '[.exit.code, .exit.side, .exit.name, .exit.retry] | join(" ")' "$report") == "75 launcher temporary true" ]] ||
      fail "report exit: $(jq .exit "$report")"
    # Without sidecars nothing registers: no line may say the launcher waits for registrations.
    [[ $case_name != *-ssh* || $log != *"rendezvous: "* ]] || fail "a rendezvous progress line without sidecars: $log"
    check_teardown "$teardown" "$log"
    ended=""
    if [[ $case_name == node-partitioned* ]]; then
      (( $(bc <<<"$detect <= 17") )) || fail "named $detect s after the partition (goal: --lost-after, 15 s): $log"
      fault="a node pod cut off by a partition"
      # Nobody can reach the cut-off pod: its agents, which hear no answer for --lost-after
      # and a beat more (20 s after the cut at most), end their ranks and the MPI daemon
      # themselves (mpi-rank, orphaned()): SIGTERM, and SIGKILL 5 s later, so all is gone
      # within about 26 s. The launcher exits 15 s after the cut at the earliest: 20 s more.
      [[ -n $(job_leftovers "${nodes[1]}") ]] || fail "nothing of the job ran in the cut-off pod"
      for _ in $(seq 200); do [[ -z $(job_leftovers "${nodes[1]}") ]] && break; sleep 0.1; done
      left=$(job_leftovers "${nodes[1]}")
      [[ -z $left ]] || fail "the cut-off pod still runs the job 20 s after the launcher's exit: $left"
      ended="; its ranks ended themselves $(printf '%.2f' "$(bc <<<"$(date +%s.%N) - $t0")") s after the cut"
    else
      fault="a node pod killed hard"
    fi
    row "$fault (${wait_mode[*]:-sidecars}; $settings)" "exit 75, the host named" \
      "named in $(printf '%.2f' "$detect") s, torn down $(printf '%.2f' "$teardown") s later$ended"
    pass "a killed node (${wait_mode[*]:-sidecars}; $settings): named after $detect s, torn down $teardown s later" ;;
  node-silent-0.5s|node-silent-0.5s-ssh-defaults|node-silent-6s|node-silent-6s-ssh)
    # A node that dies silently, as one that loses power: its link goes down first, then its
    # processes die, so no FIN or RST tells anyone. 0.5 s after its rank began is before its
    # agents have said a word but the host's first rank's start report (due at once), 6 s is
    # after they all have. Either way the host is named within --lost-after of its last word
    # and the job stopped: before, a death in the first 2 s under --wait ssh was never named
    # (the agents' start reports came 2 s in, and only a host that had reported was watched).
    wait_mode=(); if [[ $case_name == *-ssh* ]]; then wait_mode=(--wait ssh); else with_sidecars; fi
    delay=${case_name#node-silent-}; delay=${delay%%s*}
    if [[ $case_name == *-defaults ]]; then
      settings="defaults" goal=15 limit=25
      in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 --report "$report" "${wait_mode[@]}" \
        -- sleep 60 > "$CIB_DIR/launcher.log" 2>&1 &
    else
      settings="--lost-after 3s" goal=3 limit=10
      launch "${wait_mode[@]}" -- sleep 60 > "$CIB_DIR/launcher.log" 2>&1 &
    fi
    pid=$!
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    # The victim's first rank runs (seen within 50 ms), then the delay.
    deadline=$((SECONDS + 30))
    until grep -qE ': sleep 60 ?$' <<<"$(job_leftovers "${nodes[1]}")"; do
      ((SECONDS < deadline)) || fail "no rank runs on ${nodes[1]} 30 s after the launch"
      sleep 0.05
    done
    sleep "$delay"
    t0=$(date +%s.%N)
    ns=$("$CIB" ns "${nodes[1]}")
    ip -n "${ns%-p*}-br" link set "v${ns##*-p}" down
    "$CIB" stop "${nodes[1]}"
    timeout "$limit" tail -s 0.1 --pid="$pid" -f /dev/null || fail "the launcher still runs $limit s after the node died silently: $(cat "$CIB_DIR/launcher.log")"
    t_exit=$(date +%s.%N)
    rc=0; wait "$pid" || rc=$?
    log=$(cat "$CIB_DIR/launcher.log")
    [[ $rc == 75 ]] || fail "a silently dead host: expected exit 75 (a retry may pass), got $rc: $log"
    judge_lost "$log" "$t0" "$t_exit"
    # Its last word came at most a beat before the cut: named within --lost-after and a second.
    (( $(bc <<<"$detect <= $goal + 1") )) || fail "named $detect s after the silent death (goal: $goal s): $log"
    check_teardown "$teardown" "$log"
    row "a node dying silently ${delay} s after its rank began (${wait_mode[*]:-sidecars}; $settings)" \
      "exit 75, the host named" "named in $(printf '%.2f' "$detect") s, torn down $(printf '%.2f' "$teardown") s later"
    pass "a silent death ${delay} s in (${wait_mode[*]:-sidecars}; $settings): named after $detect s, torn down $teardown s later" ;;
  node-unheard-ssh)
    # A host of the plan whose agents never get a word through: node 1 drops what it sends to
    # the launcher's rendezvous port (a NetworkPolicy's doing; ssh stays open, so MPI runs
    # there). Its ranks run, but unreported: once node 0's first rank has reported, node 1
    # is named within --lost-after, as a host down from the start would be, and the job ends.
    ns=$("$CIB" ns "${nodes[1]}")
    ip netns exec "$ns" nft -f - <<'NFT' || fail "nft"
table inet unheard {
  chain output { type filter hook output priority 0; tcp dport 29410 drop; }
}
NFT
    t0=$(date +%s.%N)
    rc=0; out=$(launch --wait ssh -- sleep 60 2>&1) || rc=$?
    took=$(bc <<<"$(date +%s.%N) - $t0")
    [[ $rc == 75 ]] || fail "a host never heard from: expected exit 75, got $rc: $out"
    named=$(grep -m 1 -E "host ${nodes[1]}.$sub lost" <<<"$out") || fail "the silent host is not named: $out"
    expect_contains "$named" "none of its ranks has reported" "the reason"
    ! grep -qE "host ${nodes[0]}.$sub lost" <<<"$out" || fail "the heard host was named lost: $out"
    (( $(bc <<<"$took <= 30") )) || fail "the job took $took s to end (goal: --lost-after after the first report): $out"
    row "a node whose rank agents cannot reach the launcher (its port dropped; --wait ssh; --lost-after 3s)" \
      "exit 75, the host named: none of its ranks reported" "the job ended in $(printf '%.2f' "$took") s"
    pass "a host never heard from (--wait ssh): named, exit 75, $took s" ;;
  node-deleted|node-deleted-ssh)
    # Every parameter at its default (beat 5 s, lost-after 15 s, grace 10 s): before the
    # sidecar said it was leaving, this took ~20 s to name and 10 s more to tear down.
    # Without sidecars (--wait ssh), the pod's own processes get the SIGTERM: the ranks'.
    wait_mode=()
    if [[ $case_name == *-ssh ]]; then wait_mode=(--wait ssh); else for node in "${nodes[@]}"; do start_sidecar "$node"; done; fi
    in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 --report "$report" "${wait_mode[@]}" -- sleep 60 \
      > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 60
    wait_ranks "$(date +%s%N)" 2000 "${nodes[@]}"
    t0=$(date +%s.%N)
    "$CIB" delete "${nodes[1]}" 30 &
    deleting=$!
    timeout 15 tail -s 0.1 --pid="$pid" -f /dev/null || fail "the launcher still runs 15 s after the node pod was deleted"
    t_exit=$(date +%s.%N)
    rc=0; wait "$pid" || rc=$?
    wait "$deleting" || true
    [[ $rc == 75 ]] || fail "a deleted node: expected exit 75, got $rc: $(cat "$CIB_DIR/launcher.log")"
    log=$(cat "$CIB_DIR/launcher.log")
    judge_lost "$log" "$t0" "$t_exit"
    # Without a sidecar to say it is leaving, the host is named once mpirun has ended, by the
    # lost-host probe (launcher/preflight.h, find_lost_host): where the pod's network is
    # already gone its handshake waits out its 2 s deadline, so the goal is 2 s more.
    goal=2; [[ $case_name == *-ssh ]] && goal=4
    (( $(bc <<<"$detect <= $goal") )) || fail "named $detect s after the deletion (goal: $goal s): $log"
    check_teardown "$teardown" "$log"
    [[ $case_name == *-ssh ]] || expect_contains "$named" "its pod is being deleted" "the reason the sidecar gave"
    row "a node pod deleted gracefully (${wait_mode[*]:-sidecars}; defaults)" "exit 75, the host named" \
      "named in $(printf '%.2f' "$detect") s, torn down $(printf '%.2f' "$teardown") s later"
    pass "a deleted node at the defaults (${wait_mode[*]:-sidecars}): named after ${detect} s, torn down ${teardown} s later, exit $rc" ;;
  timeout)
    # Rank 1 hangs (a deadlock, a stuck collective); the others end. --timeout stops the job
    # with 75 and names the rank still running, and nothing is left behind.
    with_sidecars
    t0=$SECONDS; rc=0
    out=$(launch --timeout 6s -- sh -c 'if [ "$RANK" = 1 ]; then sleep 60; else sleep 3; fi' 2>&1) || rc=$?
    [[ $rc == 75 ]] || fail "a job past --timeout: expected exit 75, got $rc: $out"
    expect_contains "$out" "the job ran past --timeout (6 s); still running: rank 1 on ${nodes[0]}" "the hung rank"
    [[ $out != *"rank 0 on"*"still running"* && $(grep -cE "still running: rank 1 on ${nodes[0]}( \(see docs/troubleshooting\.md#job-timeout\))?\$" <<<"$out") -ge 1 ]] ||
      fail "only rank 1 is still running: $out"
    (( SECONDS - t0 < 15 )) || fail "the timeout took $((SECONDS - t0)) s"
    sleep 1; left=$(job_leftovers); [[ -z $left ]] || fail "processes left behind: $left"
    [[ $(jq -r '[.exit.code, .exit.name, .exit.retry] | join(" ")' "$report") == "75 temporary true" ]] ||
      fail "report exit: $(jq .exit "$report")"
    row "a rank hangs (--timeout 6s)" "exit 75, the ranks still running named" "$((SECONDS - t0)) s to the launcher's exit"
    pass "a hung rank: stopped by --timeout after $((SECONDS - t0)) s, exit 75, rank 1 named" ;;
  mpirun-lingers)
    # An mpirun that does not exit after its ranks (prterun 5.0.7 was seen so under load):
    # the placement probe (--placement probe) is ended 5 s after every rank said where it
    # ran, the job 10 s after every rank reported its exit 0; the job is what its ranks said
    # (exit 0), nothing left.
    printf '#!/bin/sh\n[ "$1" = --version ] && exec mpirun --version\nmpirun "$@"\nsleep 60\n' > "$CIB_DIR/lingering-mpirun"
    chmod 755 "$CIB_DIR/lingering-mpirun"
    with_sidecars
    t0=$SECONDS; rc=0
    out=$(launch --placement probe --mpi openmpi --mpirun "$CIB_DIR/lingering-mpirun" -- sleep 3 2>&1) || rc=$?
    [[ $rc == 0 ]] || fail "a lingering mpirun: expected exit 0, got $rc: $out"
    expect_contains "$out" "did not exit 5 s after every rank had reported; ended it" "the probe ended"
    expect_contains "$out" "every rank exited 0, but" "the job ended"
    (( SECONDS - t0 < 40 )) || fail "a lingering mpirun held the launcher $((SECONDS - t0)) s"
    sleep 1; left=$(job_leftovers); [[ -z $left ]] || fail "processes left behind: $left"
    row "mpirun does not exit after its ranks" "the probe ended 5 s, the job 10 s after every rank reported; exit 0" "$((SECONDS - t0)) s for the whole job"
    pass "a lingering mpirun: ended, exit 0 in $((SECONDS - t0)) s" ;;
  sigterm)
    with_sidecars
    launch -- sleep 60 > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    sleep 2
    [[ -n $(job_leftovers) ]] || fail "no rank is running before the SIGTERM"
    t0=$(date +%s%N)
    kill -TERM "$(launcher_pid)"
    timeout 10 tail --pid="$pid" -f /dev/null || fail "the launcher ignored SIGTERM"
    stopped_ms=$(ms_since "$t0")
    sleep 1; left=$(job_leftovers); [[ -z $left ]] || fail "processes left behind: $left"
    row "the launcher stopped by SIGTERM mid-run" "exit 143 (128+15); nothing left in any pod" "$stopped_ms ms to the launcher's exit"
    pass "SIGTERM: the job stopped, nothing left in any pod" ;;
  stop-waiting)
    # No sidecar ever comes. SIGTERM while the launcher waits for its hosts ends it at once
    # (not at the rendezvous deadline), and a rendezvous that times out is in report.json too.
    launch --rendezvous-timeout 600s -- true > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "rendezvous" "$CIB_DIR/launcher.log" 30
    t0=$SECONDS
    kill -TERM "$(launcher_pid)"
    timeout 5 tail --pid="$pid" -f /dev/null || fail "SIGTERM while waiting for the hosts was ignored"
    rc=0; wait "$pid" || rc=$?
    [[ $rc == 143 ]] || fail "a launcher stopped by SIGTERM: expected exit 143 (128+15), got $rc"
    jq -e '.exit.reason | test("stopped by signal 15 while waiting for the hosts")' "$report" >/dev/null ||
      fail "report.json does not say why: $(cat "$report" 2>&1)"
    rm -f "$report"
    rc=0; out=$(launch --rendezvous-timeout 2s -- true 2>&1) || rc=$?
    [[ $rc == 75 ]] || fail "a rendezvous timeout: expected exit 75, got $rc: $out"
    jq -e '.exit.code == 75 and .exit.side == "launcher" and .exit.retry and (.exit.reason | test("rendezvous timed out"))' "$report" >/dev/null ||
      fail "a rendezvous timeout left no report.json: $(cat "$report" 2>&1)"
    pass "SIGTERM while waiting: stopped in $((SECONDS - t0)) s with report.json; a rendezvous timeout: exit 75, report.json" ;;
  stop-preflight)
    # SIGTERM in the other phases before any rank: the fabric check (nccl-check running on
    # every host) and the --wait ssh poll (a node's sshd refuses the key, so the wait goes on).
    # Each ends at once with 143 and report.json saying where, and no nccl-check is left.
    with_sidecars
    launch --check mpi --nccl-check "$TMPI_BUILD_DIR/bin/nccl-check" --min-bytes 16M --max-bytes 64M --iters 50 \
      -- true > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    running=0
    for _ in $(seq 300); do
      if ip netns pids "$("$CIB" ns "${nodes[1]}")" | xargs -r -I{} cat /proc/{}/cmdline 2>/dev/null | tr '\0' ' ' |
         grep -q "nccl-check --backend"; then running=1; break; fi
      sleep 0.1
    done
    ((running)) || fail "nccl-check never ran on ${nodes[1]}: $(cat "$CIB_DIR/launcher.log")"
    sleep 1
    t0=$SECONDS
    kill -TERM "$(launcher_pid)"
    timeout 10 tail --pid="$pid" -f /dev/null || fail "SIGTERM during the fabric check was ignored: $(cat "$CIB_DIR/launcher.log")"
    rc=0; wait "$pid" || rc=$?
    [[ $rc == 143 ]] || fail "SIGTERM during the fabric check: expected exit 143, got $rc: $(cat "$CIB_DIR/launcher.log")"
    jq -e '.exit.code == 143 and (.exit.reason | test("stopped by signal 15 during the fabric check"))' "$report" >/dev/null ||
      fail "report.json after a stop in the fabric check: $(jq -c .exit "$report" 2>&1)"
    sleep 1
    for pod in $(pods); do
      ! ip netns pids "$("$CIB" ns "$pod")" | xargs -r -I{} cat /proc/{}/cmdline 2>/dev/null | tr '\0' ' ' | grep -q "nccl-check --backend" ||
        fail "nccl-check left running in $pod after the stop"
    done
    took=$((SECONDS - t0))
    rm -f "$report"
    : > "$CIB_DIR/pods/${nodes[1]}/home/.ssh/authorized_keys"
    launch --wait ssh --rendezvous-timeout 600s -- true > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    # Without sidecars the wait says what it waits for: the sshd that refuses, not registrations.
    wait_for "ssh wait: 1/2 hosts ready; waiting for ${nodes[1]}.$sub (sshd refused the job key" "$CIB_DIR/launcher.log" 15
    ! grep -q "rendezvous: " "$CIB_DIR/launcher.log" || fail "the ssh wait speaks of a rendezvous: $(cat "$CIB_DIR/launcher.log")"
    kill -TERM "$(launcher_pid)"
    timeout 10 tail --pid="$pid" -f /dev/null || fail "SIGTERM during the ssh wait was ignored"
    rc=0; wait "$pid" || rc=$?
    [[ $rc == 143 ]] || fail "SIGTERM during the ssh wait: expected exit 143, got $rc: $(cat "$CIB_DIR/launcher.log")"
    jq -e '.exit.reason | test("stopped by signal 15 while waiting for the hosts")' "$report" >/dev/null ||
      fail "report.json after a stop in the ssh wait: $(jq -c .exit "$report" 2>&1)"
    pass "SIGTERM during the fabric check (ended in $took s, nothing left) and during the ssh wait: exit 143, report.json" ;;
  *) fail "unknown case $case_name" ;;
esac
