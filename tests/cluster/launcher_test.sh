#!/usr/bin/env bash
# mpi-launcher end to end on the cluster in a box (1 launcher, 2 nodes, 2 slots each),
# with real sshd, sidecars and MPI. One case per run:
#   run-openmpi | run-mpich   an allreduce, then a probe of the torch variables on every rank;
#                             Open MPI's run also reports to a (fake) Trainer status server
#   placement[-mpich]         a hostfile rewritten after mpi-init, putting ranks elsewhere than
#                             hosts.json: the agents refuse to start them, exit 69 with the table
#   placement-probe           the same with --placement probe: exit 69 before any rank starts
#   rank-fails                rank 1 exits 3: the launcher exits 3 (the rank's own code), names it, stops the others,
#                             posts the failure (only) to the TrainJob status, and records a
#                             Warning Event on the TrainJob
#   gate-holds                node 1's sshd never answers the ssh check that runs beside the
#                             launch; the ranks MPICH started on node 0 wait at the start gate,
#                             then are not started: exit 69
#   gate-holds-openmpi        the same under Open MPI, whose agents ask no gate: its daemon
#                             for node 1 waits in the ssh relay, and Open MPI starts no rank
#                             before every daemon is up; none starts: exit 69
#   ssh-refused               a node's sshd rejects the key: exit 69 before any rank starts (and
#                             the API forbids Events: one line names the missing rule)
#   invalid-utf8              a command line that is not UTF-8: report.json is still written
#   torch-gloo                torch.distributed (Debian's torch, gloo) initialised from the
#                             agents' variables alone (env://), an all-reduce over every rank:
#                             what DeepSpeed and Megatron-LM do first, with no torchrun
#   subcommands               --dry-run, --env-prefix, check, hosts, shell
# A job that does not end by itself (a node lost, a hang, a signal) is teardown_test.sh's;
# MPI's ssh over the ssh check's connections, ssh_relay_test.sh's.
source "$(dirname "$0")/launcher_lib.sh"
# The end of a launch (pid, its log in launcher.log) whose ssh check found node 1's server
# (stopped: sshd_pid) silent: exit 69, the host named, no rank started, report.json's verdict.
expect_check_refused() {
  rc=0; wait "$pid" || rc=$?
  kill -CONT "$sshd_pid"
  out=$(cat "$CIB_DIR/launcher.log")
  [[ $rc == 69 ]] || fail "expected exit 69, got $rc: $out"
  expect_contains "$out" "${nodes[1]}.$sub" "the silent host is named"
  expect_contains "$out" "preflight failed on 1 check(s); no rank was started" "the preflight's verdict"
  ! ls "$CIB_DIR"/rank-started-* 2>/dev/null || fail "a rank started after the ssh check failed: $out"
  [[ $(jq -r '.exit.code' "$report") == 69 && $(jq -r '.preflight | map(.name) | join(",")' "$report") == dns,ssh ]] ||
    fail "report.json: $(jq -c '{exit, preflight}' "$report")"
}
# SIGSTOP to POD's server (sshd_pid: sshd's listener, or mpi-sshd): the kernel still takes
# connections, and nobody answers.
stop_sshd() {
  sshd_pid=$(server_pid "$1")
  kill -STOP "$sshd_pid"
}
# The server's name in a row's words: sshd, or mpi-sshd (TMPI_NODE_SERVER, lib.sh).
server_word=sshd
[[ $NODE_SERVER == openssh ]] || server_word=mpi-sshd
# The TrainJob's trainerStatus metric NAME, as the fake server holds it now.
status_metric() { jq -r --arg n "$1" '.["team-a/train"].trainerStatus.metrics[] | select(.name == $n) | .value' "$CIB_DIR/status/state.json"; }
probe='echo "probe $(hostname) RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE NODE_RANK=$NODE_RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT TMPI_COORDINATOR=$TMPI_COORDINATOR"'
check_probe() {  # the torch variables of every rank, as the hostfile places them
  # ... and the coordinator by the launcher's address, not its name (no DNS in the agents).
  local out=$1 launcher_ip
  launcher_ip=$("$CIB" pods | awk -v pod="$launcher" '$1 == pod { print $2 }')
  for rank in 0 1 2 3; do
    local node=${nodes[$((rank / 2))]}
    expect_contains "$out" "probe $node RANK=$rank LOCAL_RANK=$((rank % 2)) WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 NODE_RANK=$((rank / 2)) MASTER_ADDR=${nodes[0]}.$sub MASTER_PORT=29500 TMPI_COORDINATOR=$launcher_ip:29410" "torch variables of rank $rank"
  done
}

case $case_name in
  run-openmpi)
    with_sidecars
    start_status_server
    out=$(launch -- "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi" 2>&1) || fail "the run failed: $out"
    expect_contains "$out" "allreduce sum 6 over 4 ranks: ok" "allreduce"
    # The TrainJob's status: the final state, progress 100, every request with the token.
    [[ $(status_metric mpi_phase) == Succeeded && $(status_metric mpi_ranks) == 4 && $(status_metric mpi_exit_code) == 0 &&
       $(jq -r '.["team-a/train"].trainerStatus.progressPercentage' "$CIB_DIR/status/state.json") == 100 ]] ||
      fail "TrainJob status: $(cat "$CIB_DIR/status/state.json")"
    [[ $(jq -s '[.[] | select(.auth != true or .code != 200)] | length' "$CIB_DIR/status/requests.log") == 0 ]] ||
      fail "status requests: $(cat "$CIB_DIR/status/requests.log")"
    [[ $(jq -rs '.[0].body.trainerStatus.metrics[0].value' "$CIB_DIR/status/requests.log") == WaitingForHosts ]] ||
      fail "the first status update: $(head -n 1 "$CIB_DIR/status/requests.log")"
    ! grep -q "projected-token" <<<"$out" || fail "the token reached the launcher's log"
    # What mpirun leaves behind after a clean job is routine: not said at the default level.
    ! grep -q "left behind" <<<"$out" || fail "a clean run reads as a fault: $(grep "left behind" <<<"$out")"
    expect_contains "$out" "rank 3/4 on ${nodes[1]}" "placement"
    # Every rank's clean exit is in the report: these short ranks sent none but each host's first
    # (ranks 0 and 2, whose start the launcher expects), so the others' from mpirun's status.
    [[ $(jq -r .exit.code "$report") == 0 &&
       $(jq -c '[.ranks[] | select(.state == "exited" and .code == 0) | .reported]' "$report") == '[true,false,true,false]' &&
       $(jq -r '.ranks[3].host' "$report") == "${nodes[1]}" ]] || fail "report: $(cat "$report")"
    [[ $(jq -r '[.phases[].name] | join(",")' "$report") == "wait,preflight,job" ]] || fail "phases: $(cat "$report")"
    # The preflight's own steps, timed; no placement probe at the default --placement agents.
    [[ $(jq -r '[.preflight[] | select(.seconds >= 0) | .name] | join(",")' "$report") == "dns,ssh" ]] ||
      fail "preflight steps: $(cat "$report")"
    for node in "${nodes[@]}"; do wait "$(cat "$CIB_DIR/pods/$node/sidecar.pid")" || fail "sidecar of $node did not exit 0"; done
    with_sidecars
    out=$(launch --preflight=false -- sh -c "$probe" 2>&1) || fail "the probe failed: $out"
    check_probe "$out"
    # A rank that runs past its start report (2 s) reports its clean exit itself.
    with_sidecars
    out=$(launch --preflight=false -- sh -c 'if [ "$RANK" = 3 ]; then sleep 2.5; fi' 2>&1) || fail "the run failed: $out"
    [[ $(jq -c '[.ranks[] | [.rank, .reported, .code, (.seconds // 0) >= 2.5]]' "$report") == \
       '[[0,true,0,false],[1,false,0,false],[2,true,0,false],[3,true,0,true]]' ]] || fail "report: $(cat "$report")"
    pass "Open MPI: allreduce, report, sidecars done, torch variables on every rank" ;;
  run-mpich)
    # No sidecars: --wait ssh polls every sshd itself (clusters with Trainer's plugin only).
    # hydra's ssh wrapper goes in a private folder under TMPDIR, and goes with the run.
    scratch=$CIB_DIR/scratch; mkdir -p "$scratch"
    status_env=(TMPDIR="$scratch")  # launch's `env` words: this case has no status server
    out=$(launch --wait ssh --mpi mpich -- "$TMPI_BUILD_DIR/tests/cluster/mpi_hello_mpich" 2>&1) || fail "the run failed: $out"
    expect_contains "$out" "allreduce sum 6 over 4 ranks: ok" "allreduce"
    expect_contains "$out" "mpiexec.hydra -f $ETC_MPI/hostfile.hydra -np 4 -launcher ssh -launcher-exec $scratch/tmpi-ssh-" "hydra command"
    [[ -z $(ls -A "$scratch") ]] || fail "the ssh wrapper was left behind: $(ls -lR "$scratch")"
    out=$(launch --wait ssh --mpi mpich --preflight=false -- sh -c "$probe" 2>&1) || fail "the probe failed: $out"
    check_probe "$out"
    pass "MPICH hydra: allreduce and torch variables on every rank" ;;
  placement | placement-mpich)
    # The hostfile rewritten after mpi-init wrote it (and so after any preflight could have
    # read it): every rank on the first node. The agents of ranks 2 and 3 find themselves
    # there, not on the second node, and do not start; ranks 0 and 1 are in place.
    with_sidecars
    mpi=(); [[ $case_name == placement-mpich ]] && mpi=(--wait ssh --mpi mpich)
    if [[ $case_name == placement-mpich ]]; then
      printf '%s:4\n' "${nodes[0]}.$sub" > "$ETC_MPI/hostfile.hydra"
    else
      printf '%s slots=4\n' "${nodes[0]}.$sub" > "$ETC_MPI/hostfile"
    fi
    t0=$(date +%s%N); rc=0
    out=$(launch "${mpi[@]}" -- sh -c "touch $CIB_DIR/started-\$RANK; sleep 30" 2>&1) || rc=$?
    [[ $rc == 69 ]] || fail "expected exit 69, got $rc: $out"
    # The first misplaced report stops the job at once, so the other misplaced agent may not
    # have reported yet (under ASan it often has not started): one row at least, and neither
    # misplaced rank ever started.
    grep -qE "rank [23] ran on ${nodes[0]}, the hostfile puts it here" <<<"$out" || fail "placement table: $out"
    for rank in 2 3; do
      [[ ! -e $CIB_DIR/started-$rank ]] || fail "misplaced rank $rank was started: $out"
    done
    grep -qE "placement: [12] rank\(s\) ran elsewhere than the hostfile says" <<<"$out" || fail "the reason: $out"
    ! grep -q "placement probe" <<<"$out" || fail "the probe job ran at --placement agents: $out"
    [[ $(jq -r '.exit.code' "$report") == 69 && $(jq -r '.exit.name' "$report") == unavailable ]] ||
      fail "report: $(cat "$report")"
    row "a rank placed on another host than the hostfile's${mpi:+ (MPICH)}" "exit 69, the misplaced ranks never started, each named with both hosts" "$(ms_since "$t0") ms to the launcher's exit"
    pass "a wrong placement is caught by the agents: exit 69" ;;
  placement-probe)
    # --placement probe: the extra MPI job in the preflight, before any rank starts.
    with_sidecars
    printf '%s slots=4\n' "${nodes[0]}.$sub" > "$ETC_MPI/hostfile"
    rc=0; out=$(launch --placement probe -- touch "$CIB_DIR/rank-started" 2>&1) || rc=$?
    [[ $rc == 69 ]] || fail "expected exit 69, got $rc: $out"
    expect_contains "$out" "rank 2 ran on ${nodes[0]}" "placement table"
    expect_contains "$out" "preflight failed on 2 check(s); no rank was started" "the preflight's verdict"
    [[ ! -e $CIB_DIR/rank-started ]] || fail "a rank started after a failed preflight"
    pass "--placement probe: a wrong placement stops the job before any rank" ;;
  rank-fails)
    with_sidecars
    start_status_server
    start_kube_api
    t0=$SECONDS; rc=0
    : > "$CIB_DIR/termination-log"  # the kubelet's file: the launcher writes only where it exists
    out=$(launch --status failures --termination-log "$CIB_DIR/termination-log" -- \
      sh -c 'if [ "$RANK" = 1 ]; then sleep 1; echo "bad input on rank 1" >&2; exit 3; fi; sleep 60' 2>&1) || rc=$?
    [[ $rc == 3 ]] || fail "expected exit 3, got $rc: $out"
    # The verdict, where kubectl shows it: the termination message (describe pod), and the
    # log's last lines (logs), the same four.
    verdict=$(cat "$CIB_DIR/termination-log")
    [[ $(sed -n 1p <<<"$verdict") =~ ^"trainer-mpi: the job failed after "[0-9]+\.[0-9]" s: exit 3 (job), the job's own: it is not retried"$ ]] ||
      fail "the termination message's verdict: $verdict"
    expect_contains "$(sed -n 2p <<<"$verdict")" "reason: rank 1 on ${nodes[0]} exited with code 3" "the termination message's reason"
    expect_contains "$(sed -n 3p <<<"$verdict")" "rank 1 on ${nodes[0]}: exit 3" "the termination message's ranks"
    expect_eq "$(tail -n 4 <<<"$out" | sed 's/^.* mpi-launcher info: //')" "$verdict" "the log's last lines"
    expect_contains "$out" "rank 1 on ${nodes[0]} exited with code 3" "the failed rank is named"
    expect_contains "$out" "stopping 3 other ranks" "the others are stopped"
    expect_contains "$out" "bad input on rank 1" "the rank's stderr tail"
    (( SECONDS - t0 < 20 )) || fail "the teardown took $((SECONDS - t0)) s"
    # mpirun, stopped, exits before its daemons have ended their ranks; the launcher waits for
    # them (ssh/relay.h, wait_idle): without that they ran on up to 2 s after its exit.
    sleep 0.5; left=$(job_leftovers); [[ -z $left ]] || fail "processes left behind 0.5 s after the launcher's exit: $left"
    # The rank's own code, passed through, and report.json says it is the job's.
    [[ $(jq -r '[.exit.code, .exit.side, .exit.name, .exit.retry] | join(" ")' "$report") == "3 job job false" ]] ||
      fail "report exit: $(jq .exit "$report")"
    # --status failures: one update, the failure, on the TrainJob.
    [[ $(wc -l < "$CIB_DIR/status/requests.log") == 1 && $(status_metric mpi_phase) == Failed &&
       $(status_metric mpi_exit_code) == 3 && $(status_metric mpi_first_failure) == "rank 1 on ${nodes[0]} exited with code 3"* ]] ||
      fail "TrainJob status: $(cat "$CIB_DIR/status/requests.log")"
    # A Warning Event on the TrainJob (its uid, for kubectl describe), naming the rank.
    event=$(jq -c 'select(.method == "POST" and (.path | endswith("/events")) and .code == 201) | .object' "$CIB_DIR/kube/requests.log")
    [[ $(jq -r '[.type, .reason, .involvedObject.kind, .involvedObject.name, .involvedObject.uid] | join(" ")' <<<"$event") == \
       "Warning RankFailed TrainJob train 5e1f0000-aaaa-bbbb-cccc-000011112222" &&
       $(jq -r .message <<<"$event") == "rank 1 on ${nodes[0]} exited with code 3"* ]] || fail "the Event: $(cat "$CIB_DIR/kube/requests.log")"
    row "a rank exits non-zero (3)" "exit 3 (the rank's own), the rank and its stderr named, the others stopped" "$((SECONDS - t0 - 1)) s"
    pass "rank 1 exits 3: the launcher exits 3 in $((SECONDS - t0)) s and stops the others" ;;
  gate-holds)
    # The ssh step runs beside the launch (--ssh-check beside, the default), and the ranks wait
    # at the start gate for its verdict. --np 2 puts both ranks on node 0, and MPICH's hydra
    # starts a proxy only where ranks go (Open MPI starts a daemon on every host, and would
    # wait for node 1 itself); the ssh check asks every host, and node 1's sshd is stopped
    # (SIGSTOP: the kernel takes the connection, nobody answers), so the check waits out its
    # 10 s handshake deadline while hydra has started both ranks' agents. They must hold their
    # ranks all that time, then not start them: exit 69, node 1 named.
    stop_sshd "${nodes[1]}"
    t0=$(date +%s%N)
    launch --wait none --np 2 --mpi mpich -- sh -c "touch $CIB_DIR/rank-started-\$RANK" > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    agents() { job_leftovers "${nodes[0]}" | grep -c "mpi-rank -- sh -c touch" || true; }
    for _ in $(seq 50); do
      ! ls "$CIB_DIR"/rank-started-* 2>/dev/null || fail "a rank started before the ssh check passed"
      [[ $(agents) == 2 ]] && break
      sleep 0.1
    done
    [[ $(agents) == 2 ]] || fail "hydra did not start both agents on ${nodes[0]} in 5 s: $(job_leftovers)"
    held_at=$(ms_since "$t0")
    sleep 2  # the agents ask every 250 ms at most: a gate that let them go would have by now
    [[ $(agents) == 2 ]] || fail "the agents did not stay at the gate: $(job_leftovers)"
    ! ls "$CIB_DIR"/rank-started-* 2>/dev/null || fail "a rank started before the ssh check passed"
    expect_check_refused
    row "an $server_word that never answers the ssh check, which runs beside the launch" "exit 69, the host named; the ranks' agents waited at the start gate and never started them" "$(ms_since "$t0") ms to the launcher's exit (10 s: the handshake's deadline); agents held from $held_at ms"
    pass "the ranks wait at the start gate for the ssh check beside the launch, and do not start when it fails" ;;
  gate-holds-openmpi)
    # As gate-holds, under Open MPI, where the agents are told not to ask (TMPI_START_GATE=false,
    # launcher/job.h): ranks are held by Open MPI's own launch order. --np 2 maps both ranks to
    # node 0, yet mpirun starts a daemon on every host of the hostfile and no rank before all of
    # them have reported; node 1's start waits in the ssh relay for the check's verdict, which
    # is a refusal after the 10 s handshake deadline. Node 0's daemon runs all that time, and
    # no agent, let alone a rank, may appear there.
    stop_sshd "${nodes[1]}"
    t0=$(date +%s%N)
    launch --wait none --np 2 --mpi openmpi -- sh -c "touch $CIB_DIR/rank-started-\$RANK" > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    daemon() { job_leftovers "${nodes[0]}" | grep -c "orted" || true; }
    for _ in $(seq 50); do [[ $(daemon) -gt 0 ]] && break; sleep 0.1; done
    [[ $(daemon) -gt 0 ]] || fail "Open MPI did not start its daemon on ${nodes[0]} in 5 s: $(job_leftovers)"
    held_at=$(ms_since "$t0")
    for _ in $(seq 30); do  # 3 s: well past the time a rank takes to start once its daemon runs
      ! job_leftovers "${nodes[0]}" | grep -q "mpi-rank" || fail "an agent started before the ssh check passed: $(job_leftovers)"
      ! ls "$CIB_DIR"/rank-started-* 2>/dev/null || fail "a rank started before the ssh check passed"
      sleep 0.1
    done
    expect_check_refused
    row "the same under Open MPI (its agents ask no gate)" "exit 69, the host named; node 0's daemon ran, and no agent or rank started (Open MPI waits for every daemon)" "$(ms_since "$t0") ms to the launcher's exit; node 0's daemon up from $held_at ms"
    pass "under Open MPI no rank starts before every daemon, each over the checked ssh, is up: exit 69" ;;
  ssh-refused)
    refuse_job_key "${nodes[1]}"
    start_kube_api --forbid events  # no RBAC for Events: one line says so, the job's verdict stands
    t0=$(date +%s%N); rc=0; out=$(launch --wait none -- touch "$CIB_DIR/rank-started" 2>&1) || rc=$?
    [[ $rc == 69 ]] || fail "expected exit 69, got $rc: $out"
    expect_contains "$out" 'PreflightFailed was not recorded on TrainJob train' "the refused Event"
    expect_contains "$out" 'resources: ["events"], verbs: ["create"]' "the missing RBAC rule"
    expect_contains "$out" "${nodes[1]}.$sub" "the host is named"
    if [[ $NODE_SERVER == openssh ]]; then
      expect_contains "$out" "sshd refused the job key" "the reason"
      fault="the job key rejected by a node's sshd"
    else  # mpi-sshd's host key is derived from its login key: another key is a host that is not the job's
      expect_contains "$out" "presents another host key, not the one derived from the job key" "the reason"
      fault="a node's mpi-sshd on another key than the job's"
    fi
    [[ ! -e $CIB_DIR/rank-started ]] || fail "a rank started"
    row "$fault" "exit 69 before any rank, the host and the reason named" "$(ms_since "$t0") ms to the launcher's exit"
    pass "an sshd that refuses the key: exit 69 before any rank starts" ;;
  torch-gloo)
    # RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from mpi-rank; GLOO_SOCKET_IFNAME
    # reaches the ranks by the default GLOO_ prefix. The script is the one that stands in for
    # DeepSpeed's and Megatron-LM's in cluster.examples (tests/examples/cpu_smoke.py).
    # /usr/bin/python3: Debian's, with torch. Its argument: where each rank saves its shard (each
    # pod's own /tmp here; the examples' shared volume in cluster.examples).
    with_sidecars
    smoke=$(PYTHONPATH="$(dirname "$0")/../examples" python3 -c 'import cpu_smoke; print(cpu_smoke.SMOKE)')
    rc=0; out=$(in_pod "$launcher" env GLOO_SOCKET_IFNAME=eth0 "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 \
      --report "$report" -- /usr/bin/python3 -c "$smoke" /tmp/torch-gloo-checkpoint 2>&1) || rc=$?
    [[ $rc == 0 ]] || fail "torch.distributed under mpi-launcher exited $rc: $out"
    for r in 0 1 2 3; do
      expect_contains "$out" "torch gloo: rank $r of 4, local rank $((r % 2)), sum 10" "rank $r's all-reduce"
    done
    pass "torch.distributed (gloo) from the agents' variables: 4 ranks on 2 hosts, all-reduced" ;;
  invalid-utf8)
    # A command line that is not UTF-8 (a Latin-1 file name, say): the job succeeds, so the
    # report must be written, with the bad bytes replaced, and the exit must be the job's.
    with_sidecars
    t0=$(date +%s%N); rc=0; out=$(launch -- /bin/echo $'caf\xe9 \xff\xfe' 2>&1) || rc=$?
    [[ $rc == 0 ]] || fail "a job whose command holds invalid UTF-8 exited $rc: $out"
    jq -e '.exit.code == 0' "$report" >/dev/null || fail "no report.json, or not a success: $(cat "$report" 2>&1)"
    grep -qF $'\xef\xbf\xbd' "$report" || fail "the invalid bytes were not replaced by U+FFFD: $(cat "$report")"
    row "invalid UTF-8 in the command line" "exit 0; report.json written, U+FFFD in place" "$(ms_since "$t0") ms for the whole job"
    pass "invalid UTF-8 in the command: exit 0, report.json written with U+FFFD" ;;
  subcommands)
    out=$(in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --mpi mpich --dry-run -- python train.py) ||
      fail "--dry-run failed"
    expect_contains "$out" "mpiexec.hydra -f $ETC_MPI/hostfile.hydra -np 4 -launcher ssh -launcher-exec /tmp/tmpi-ssh-" "dry run"
    expect_contains "$out" "rank -- python train.py" "dry run wraps the rank"
    [[ ! -e $report ]] || fail "a dry run must not run anything"
    # Trainer #3427: variables reach the ranks only when asked for.
    with_sidecars
    out=$(in_pod "$launcher" env MY_FLAG=on OTHER_FLAG=on "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 \
            --report "$report" --beat-interval 1s --env-prefix MY_ --preflight=false -- \
            sh -c 'echo "flags my=$MY_FLAG other=$OTHER_FLAG"' 2>&1) || fail "run: $out"
    [[ $(grep -c "flags my=on other=$" <<<"$out") == 4 ]] || fail "--env-prefix: $out"
    out=$(in_pod "$launcher" "$L" check --hosts "$ETC_MPI/hosts.json" --iface eth0) || fail "check: $out"
    expect_contains "$out" "preflight passed: 2 hosts" "check"
    with_sidecars
    in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 --report "$report" --beat-interval 1s \
      --preflight=false -- sleep 4 > "$CIB_DIR/launcher.log" 2>&1 &
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    out=$(in_pod "$launcher" "$L" hosts) || fail "hosts: $out"
    expect_contains "$out" "barrier open: 2/2 hosts ready" "hosts"
    expect_contains "$out" "${nodes[1]}.$sub" "hosts"
    wait
    out=$(in_pod "$launcher" "$L" hosts --hosts "$ETC_MPI/hosts.json" 2>&1) || fail "hosts without a coordinator: $out"
    expect_contains "$out" "no coordinator" "hosts falls back to hosts.json"
    out=$(echo 'echo "command: $TMPI_MPI_COMMAND"; echo "start gate: $TMPI_START_GATE"; exit 0' |
          in_pod "$launcher" env SHELL=/bin/bash "$L" shell --hosts "$ETC_MPI/hosts.json" 2>&1) || fail "shell: $out"
    expect_contains "$out" "trainer-mpi shell: 2 hosts, 4 slots" "shell banner"
    expect_contains "$out" "command: mpirun --hostfile $ETC_MPI/hostfile -np 4" "the shell's environment"
    # No launcher holds a start gate for a command typed in that shell (agent/gate.h).
    expect_contains "$out" "start gate: false" "the shell's agents do not wait for a gate"
    pass "--dry-run, --env-prefix, check, hosts and shell" ;;
  *) fail "unknown case $case_name" ;;
esac
