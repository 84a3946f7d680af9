#!/usr/bin/env bash
# Faults of the fault matrix (tests/faults/run.sh) that launcher_test.sh and teardown_test.sh
# do not cover, on the same job (1 launcher, 2 nodes, 2 slots each, short beats). One case per run;
# each ends with a `row` (fault, outcome, time to detect) and its checks:
#   pod-never-comes    node 1's sidecar never starts: exit 75 at --rendezvous-timeout, naming it
#   late-pod           node 1's sidecar starts 6 s late: the job waits for it, then runs (exit 0)
#   unresolvable       node 1's name no longer resolves (--wait none): exit 69 before any rank
#   ssh-no-command     node 1's account runs no command (nologin's shell): under Open MPI at
#                      the defaults its daemon's start over the relay is the ssh check's proof,
#                      and the host is named with what the daemon printed; with --ssh-check
#                      before, `exec true` is: exit 69 before any rank both ways
#   rank-killed        rank 1 is killed by SIGKILL: exit 137 (128+9), the rank named, the job's side
#   launcher-killed    every process of the launcher pod SIGKILLed: the ranks and MPI daemons
#                      on the nodes end by themselves
#   launcher-restarted the launcher's container dies and starts again: the sidecars register
#                      with the new coordinator and the job runs (exit 0)
#   status-down        Trainer's status server is gone: the job's verdict stands (exit 0), the
#                      status is dropped with a warning
#   recreated-before   node 1's pod recreated (new IP) before the barrier: it takes the place
#   recreated-after    ... after the barrier: exit 75, named at the new pod's registration or by its address
#   hostile-names      a hostfile's hostile names: exit 65 each, nothing written or run
#   status-slow        every status answer 30 s late: exit 0, the job not held
#   descriptors        the launcher at 64 descriptors, 100 idle connections: the job still runs
#   impostor           requests without the job key: refused, one log line each, the job runs
#   disk-full          report.json's folder is full: the job's exit stands, the report is not
#                      written (said in the log) and no partial file is left; mpi-init's
#                      output folder full: exit 74, nothing half-written
source "$(dirname "$0")/launcher_lib.sh"
case $case_name in
  pod-never-comes)
    start_sidecar "${nodes[0]}" --deadline 60s
    t0=$(date +%s%N); rc=0
    out=$(launch --rendezvous-timeout 3s -- true 2>&1) || rc=$?
    [[ $rc == 75 ]] || fail "expected exit 75, got $rc: $out"
    expect_contains "$out" "rendezvous timed out" "the timeout"
    expect_contains "$out" "${nodes[1]}.$sub (no registration)" "the missing pod is named"
    row "a pod that never comes" "exit 75, the pod named (no registration)" "$(ms_since "$t0") ms (--rendezvous-timeout 3s)"
    pass "a pod that never comes: exit 75, named" ;;
  late-pod)
    start_sidecar "${nodes[0]}" --deadline 60s
    launch -- true > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    sleep 6  # past the first progress line (every 5 s)
    t0=$(date +%s%N)
    start_sidecar "${nodes[1]}" --deadline 60s
    rc=0; wait "$pid" || rc=$?
    log=$(cat "$CIB_DIR/launcher.log")
    [[ $rc == 0 ]] || fail "a late pod: expected exit 0, got $rc: $log"
    expect_contains "$log" "waiting for ${nodes[1]}.$sub (no registration)" "the wait names the late pod"
    row "a late pod (6 s)" "exit 0: the job waited for it, then ran" "$(ms_since "$t0") ms from its coming to the job's end"
    pass "a late pod: waited for, then the job ran" ;;
  unresolvable)
    "$CIB" stop "${nodes[1]}"  # its pod and its name gone
    t0=$(date +%s%N); rc=0
    out=$(launch --wait none -- touch "$CIB_DIR/rank-started" 2>&1) || rc=$?
    [[ $rc == 69 ]] || fail "expected exit 69, got $rc: $out"
    expect_contains "$out" "${nodes[1]}.$sub" "the host is named"
    expect_contains "$out" "does not resolve" "the reason"
    [[ ! -e $CIB_DIR/rank-started ]] || fail "a rank started"
    row "a name that does not resolve" "exit 69 before any rank, the host named" "$(ms_since "$t0") ms"
    pass "an unresolvable host: exit 69, named" ;;
  ssh-no-command)
    # The account sshd logs node 1's callers in as, with nologin for its shell, as uid
    # 65534's is in most images: the job key is taken, and every command prints "This account
    # is currently not available." and exits 1.
    ns=$("$CIB" ns "${nodes[1]}")
    # Written in place: the pod's /etc/passwd is a bind mount of this file (sed -i would
    # put a new file beside it, which the pod never sees).
    passwd=$(sed -E 's#^(root:[^:]*:[^:]*:[^:]*:[^:]*:[^:]*):.*$#\1:/usr/sbin/nologin#' "/etc/netns/$ns/passwd")
    printf '%s\n' "$passwd" > "/etc/netns/$ns/passwd"
    grep -q '^root:.*:/usr/sbin/nologin$' "/etc/netns/$ns/passwd" || fail "node 1's shell not set: $(cat "/etc/netns/$ns/passwd")"
    if [[ $NODE_SERVER == mpi-sshd ]]; then
      # mpi-sshd reads no account: every command runs through /bin/sh, so the job runs.
      t0=$(date +%s%N); rc=0; out=$(launch --wait none -- sh -c "touch $CIB_DIR/rank-started-\$RANK" 2>&1) || rc=$?
      [[ $rc == 0 ]] || fail "mpi-sshd: expected the job to run (exit 0), got $rc: $out"
      for r in 0 1 2 3; do [[ -e $CIB_DIR/rank-started-$r ]] || fail "mpi-sshd: rank $r did not run: $out"; done
      row "an account whose shell runs no command (nologin)" "the job runs: mpi-sshd runs every command through /bin/sh, whatever the account's shell" "$(ms_since "$t0") ms, the whole job"
      pass "a node whose account runs no command: mpi-sshd runs the job all the same"
      exit 0
    fi
    took=()
    for mode in beside before; do
      flags=(); [[ $mode == before ]] && flags=(--ssh-check before)
      t0=$(date +%s%N); rc=0; out=$(launch --wait none "${flags[@]}" -- touch "$CIB_DIR/rank-started" 2>&1) || rc=$?
      [[ $rc == 69 ]] || fail "$mode: expected exit 69, got $rc: $out"
      expect_contains "$out" "${nodes[1]}.$sub" "$mode: the host is named"
      expect_contains "$out" "preflight failed on 1 check(s); no rank was started" "$mode: the preflight's verdict"
      if [[ $mode == beside ]]; then
        expect_contains "$out" "but MPI's daemon exited 1 there as user root before any rank started: \"This account is currently not available.\"" "the daemon's own words"
      else
        expect_contains "$out" "runs no command as user root: \`exec true\` exited 1 (This account is currently not available.)" "exec true's verdict"
      fi
      [[ $(grep -c "^${nodes[0]}" <<<"$out") == 0 ]] || fail "$mode: node 0, whose account runs commands, was named: $out"
      [[ ! -e $CIB_DIR/rank-started ]] || fail "$mode: a rank started"
      [[ $(jq -r '.exit.code' "$report") == 69 ]] || fail "$mode: report.json: $(jq -c .exit "$report")"
      took+=("$(ms_since "$t0") ms ($mode)")
    done
    # One row a case (tests/faults/run.sh reads the first): both ways in it.
    row "an account whose shell runs no command (nologin)" "exit 69 before any rank, the host and its shell's words named: by the daemon's start at the defaults, by exec true with --ssh-check before" "${took[0]}, ${took[1]} to the launcher's exit"
    pass "a node whose account runs no command: exit 69 before any rank, named by the daemon's start (Open MPI) or by exec true (--ssh-check before)" ;;
  rank-killed)
    with_sidecars
    t0=$SECONDS; rc=0
    out=$(launch -- sh -c 'if [ "$RANK" = 1 ]; then sleep 3; kill -KILL $$; fi; sleep 60' 2>&1) || rc=$?
    [[ $rc == 137 ]] || fail "expected exit 137 (128+9), got $rc: $out"
    expect_contains "$out" "rank 1 on ${nodes[0]} was killed by signal 9" "the killed rank is named"
    [[ $(jq -r '[.exit.code, .exit.side] | join(" ")' "$report") == "137 job" ]] || fail "report exit: $(jq .exit "$report")"
    sleep 1; left=$(job_leftovers); [[ -z $left ]] || fail "processes left behind: $left"
    row "a rank killed by a signal" "exit 137 (128+9), the rank named, the job's side" "$((SECONDS - t0 - 3)) s"
    pass "a rank killed by SIGKILL: exit 137, named" ;;
  launcher-killed)
    with_sidecars
    launch -- sleep 60 > "$CIB_DIR/launcher.log" 2>&1 &
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    sleep 3
    [[ -n $(job_leftovers "${nodes[@]}") ]] || fail "no rank runs on the nodes before the kill"
    t0=$(date +%s%N)
    "$CIB" stop "$launcher"  # an OOM kill or a crash of the whole pod: SIGKILL, no goodbye
    for _ in $(seq 100); do [[ -z $(job_leftovers "${nodes[@]}") ]] && break; sleep 0.1; done
    left=$(job_leftovers "${nodes[@]}"); [[ -z $left ]] || fail "10 s after the launcher died, still running: $left"
    ended_ms=$(ms_since "$t0")
    # The node pods hold sshd and the sidecar, which would serve forever: JobSet ends them.
    # The launcher's container exited 137, which the runtime's podFailurePolicy does not match
    # (69, 75 or a disrupted pod restart the JobSet), so its Job fails (backoffLimit 0), the
    # ProgramFailed rule fails the JobSet, and the finished JobSet deletes its still-active
    # Jobs (jobset pkg/controllers/jobset_controller.go, reconcile: jobSetFinished, then
    # deleteJobs; docs/trainer-rules.md). A restart deletes them too. Their pods then get the
    # kubelet's graceful delete: SIGTERM, SIGKILL after terminationGracePeriodSeconds (30).
    # Every node pod must end on the SIGTERM, well within the grace.
    t1=$(date +%s%N)
    for node in "${nodes[@]}"; do "$CIB" delete "$node" 30 & done
    wait
    deleted_ms=$(ms_since "$t1")
    ((deleted_ms < 10000)) || fail "the node pods took $deleted_ms ms to end on SIGTERM (the grace is 30 s)"
    for node in "${nodes[@]}"; do
      grep -q "leaving" "$CIB_DIR/pods/$node/sidecar.log" || fail "the sidecar of $node did not end on SIGTERM: $(cat "$CIB_DIR/pods/$node/sidecar.log")"
    done
    row "the launcher killed" "the ranks and MPI daemons on the nodes end; the node pods end at once when the failed JobSet deletes them" \
      "ranks ended in $ended_ms ms; pods gone $deleted_ms ms after the delete"
    pass "a killed launcher: nothing of the job left on the nodes after $ended_ms ms, the pods gone $deleted_ms ms after their delete" ;;
  launcher-restarted)
    with_sidecars
    launch -- sleep 60 > "$CIB_DIR/launcher.log" 2>&1 &
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    # The container dies (every process of the pod but its pause process); the pod stays.
    pause=$(cat "$CIB_DIR/pods/$launcher/pid")
    for pid in $(ip netns pids "$("$CIB" ns "$launcher")"); do [[ $pid == "$pause" ]] || kill -KILL "$pid" 2>/dev/null || true; done
    for _ in $(seq 100); do [[ -z $(job_leftovers "${nodes[@]}") ]] && break; sleep 0.1; done
    t0=$(date +%s%N); rc=0
    out=$(launch -- true 2>&1) || rc=$?
    [[ $rc == 0 ]] || fail "the restarted launcher: expected exit 0, got $rc: $out"
    for node in "${nodes[@]}"; do
      [[ $(grep -c "registered with" "$CIB_DIR/pods/$node/sidecar.log") -ge 2 ]] ||
        fail "the sidecar of $node did not register again: $(cat "$CIB_DIR/pods/$node/sidecar.log")"
    done
    row "the launcher restarted" "the sidecars register again; the job runs (exit 0)" "$(ms_since "$t0") ms to the end of the new job"
    pass "a restarted launcher: the sidecars came back, exit 0" ;;
  status-down)
    with_sidecars
    start_status_server
    kill "$status_pid"; wait "$status_pid" 2>/dev/null || true
    t0=$SECONDS; rc=0
    out=$(launch -- true 2>&1) || rc=$?
    [[ $rc == 0 ]] || fail "the status server down: expected the job's own exit 0, got $rc: $out"
    expect_contains "$out" "status" "a warning about the status"
    (( SECONDS - t0 < 20 )) || fail "the job took $((SECONDS - t0)) s with its status server down"
    row "the status server down" "exit 0 (the job's verdict stands); the status is dropped with a warning" "$((SECONDS - t0)) s for the whole job"
    pass "the status server down: exit 0 in $((SECONDS - t0)) s" ;;
  disk-full)
    # A full tmpfs in the launcher pod's own mount namespace (it goes with the pod).
    full="$CIB_DIR/full"; mkdir -p "$full"
    in_pod "$launcher" sh -c "mount -t tmpfs -o size=16k tmpfs '$full' && { dd if=/dev/zero of='$full/fill' bs=4k count=8 2>/dev/null || true; }"
    with_sidecars
    t0=$(date +%s%N); rc=0
    out=$(in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 --report "$full/report.json" \
      --beat-interval 1s -- true 2>&1) || rc=$?
    [[ $rc == 0 ]] || fail "a full disk under report.json: the job's exit 0 must stand, got $rc: $out"
    expect_contains "$out" "report not written" "the log says the report was not written"
    [[ $(in_pod "$launcher" ls -A "$full") == fill ]] || fail "a partial file was left: $(in_pod "$launcher" ls -A "$full")"
    job_ms=$(ms_since "$t0"); t0=$(date +%s%N); rc=0; out=$(in_pod "$launcher" "$TMPI_BUILD_DIR/bin/mpi-init" --pods "$CIB_DIR/pods.json" --out "$full/out" \
      --ssh-dir "$full/ssh" 2>&1) || rc=$?
    [[ $rc == 74 ]] || fail "mpi-init on a full disk: expected exit 74, got $rc: $out"
    left=$(in_pod "$launcher" find "$full" -mindepth 1 -type f -not -name fill)
    [[ -z $left ]] || fail "mpi-init left files: $left"
    row "the disk full (report.json, mpi-init's output)" "the job's exit stands, the report said unwritten; mpi-init exit 74; no partial file" "the job $job_ms ms, mpi-init's refusal $(ms_since "$t0") ms"
    pass "a full disk: no partial file, the codes as documented" ;;
  impostor)
    # From a node pod, without the job key: a registration that claims another host (its name
    # carrying a forged log line), a rank report, an end of the job. Each is refused (403,
    # or 404 for a host that is not of this job), the log line stays one line, and the job
    # runs on to its own end.
    with_sidecars
    launch -- sleep 4 > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    url="http://$launcher.$sub:29410"
    post() { in_pod "${nodes[1]}" curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary "$2" "$url$1"; }
    t0=$(date +%s%N)
    codes="$(post /v1/register "{\"host\":\"${nodes[0]}.$sub\",\"slots\":2,\"gpus\":0,\"sshReady\":true,\"nonce\":\"n1\",\"proof\":\"00\"}")"
    codes+=" $(post /v1/register '{"host":"x\nFORGED mpi-launcher error: all is lost","slots":2,"gpus":0,"sshReady":true,"nonce":"n2","proof":"00"}')"
    codes+=" $(post /v1/rank '{"rank":0,"host":"x","event":"exit","code":1,"nonce":"n3","proof":"00"}')"
    codes+=" $(post /v1/end '{"nonce":"n4","proof":"00"}')"
    detect=$(ms_since "$t0")
    [[ $codes == "403 404 403 403" ]] || fail "the impostor's requests: expected 403 404 403 403, got $codes"
    rc=0; wait "$pid" || rc=$?
    log=$(cat "$CIB_DIR/launcher.log")
    [[ $rc == 0 ]] || fail "the job did not survive the impostor: exit $rc: $log"
    ! grep -q "^FORGED" <<<"$log" || fail "a host name forged a log line: $log"
    row "an impostor (no job key): register, rank report, end" "refused (403; 404 for a stranger's name), logged on one line; the job runs (exit 0)" "$detect ms for 4 refusals"
    pass "an impostor: every request refused, the job ran" ;;
  recreated-before)
    # Node 1's pod registers, dies, and a new pod of that name (a new IP, fresh volumes)
    # comes before the barrier: it takes the old one's place, and the job runs.
    launch -- sleep 3 > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    start_sidecar "${nodes[1]}" --deadline 60s
    wait_for "registered with" "$CIB_DIR/pods/${nodes[1]}/sidecar.log" 30
    old_ip=$("$CIB" ip "${nodes[1]}"); t0=$(date +%s%N)
    "$CIB" recreate "${nodes[1]}"
    [[ $("$CIB" ip "${nodes[1]}") != "$old_ip" ]] || fail "the recreated pod kept its address $old_ip"
    init_node "${nodes[1]}"
    rm -f "$CIB_DIR/pods/${nodes[1]}/sidecar.log"  # the old pod's "registered" must not count
    start_sidecar "${nodes[1]}" --deadline 60s
    wait_for "registered with" "$CIB_DIR/pods/${nodes[1]}/sidecar.log" 30
    start_sidecar "${nodes[0]}" --deadline 60s
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    metrics=$(in_pod "$launcher" curl -s "http://127.0.0.1:29410/metrics")
    rc=0; wait "$pid" || rc=$?
    [[ $rc == 0 ]] || fail "a pod recreated before the barrier: expected exit 0, got $rc: $(cat "$CIB_DIR/launcher.log")"
    grep -q '^tmpi_rendezvous_reregistrations_total 1$' <<<"$metrics" || fail "no reregistration counted: $metrics"
    row "a pod recreated with a new IP, before the barrier" "the new pod takes its place; the job runs (exit 0)" "$(ms_since "$t0") ms to the job's end"
    pass "a pod recreated before the barrier: it took its place, exit 0" ;;
  recreated-after)
    # After the barrier the job's ranks went with the old pod: the new pod's registration
    # names the host lost at once (not after --lost-after, set long here).
    with_sidecars
    in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 --report "$report" \
      --beat-interval 1s --lost-after 60s --grace 3s -- sleep 60 > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    wait_for "launching 4 ranks" "$CIB_DIR/launcher.log" 30
    wait_ranks "$(date +%s%N)" 2000 "${nodes[@]}"
    old_ip=$("$CIB" ip "${nodes[1]}"); t0=$(date +%s%N)
    "$CIB" recreate "${nodes[1]}"
    init_node "${nodes[1]}"
    start_sidecar "${nodes[1]}" --deadline 60s
    timeout 15 tail --pid="$pid" -f /dev/null || fail "the launcher still runs 15 s after the pod was recreated"
    rc=0; wait "$pid" || rc=$?
    log=$(cat "$CIB_DIR/launcher.log")
    [[ $rc == 75 ]] || fail "a pod recreated after the barrier: expected exit 75, got $rc: $log"
    # Named whichever comes first: the new pod's registration, or mpirun's exit (then the
    # name resolves to the new address, or to nothing in the moment between the two pods).
    named=$(grep -oE "host ${nodes[1]}\.$sub (lost \(recreated at [0-9.]+ \(was $old_ip\)|is gone \(does not resolve)" <<<"$log" | head -n 1 || true)
    [[ -n $named ]] || fail "a pod recreated after the barrier: the host not named lost: $log"
    jq -e --arg host "${nodes[1]}.$sub" '.exit.code == 75 and (.exit.reason | contains("host " + $host + " "))' "$report" >/dev/null ||
      fail "report.json's exit: $(jq -c .exit "$report")"
    echo "faults: recreated-after: $named"
    row "a pod recreated with a new IP, after the barrier" "exit 75, the host named lost: at its new pod's registration, or by its new address once mpirun stops" "$(ms_since "$t0") ms to the launcher's exit"
    pass "a pod recreated after the barrier: exit 75, named" ;;
  hostile-names)
    # Names that would run a command, match every host, split a line or break UTF-8, as a
    # hostfile brings them: each refused with the line named, nothing written, nothing run.
    rm -f /tmp/tmpi-hostile-ran
    i=0 t0=$(date +%s%N)
    for line in '$(touch /tmp/tmpi-hostile-ran) slots=1' 'a;touch${IFS}/tmp/tmpi-hostile-ran slots=1' '* slots=1' \
                "$(printf 'bad\xff\xfename slots=1')" "$(head -c 300 /dev/zero | tr '\0' a) slots=1" '-oProxyCommand=id slots=1'; do
      i=$((i + 1)); printf '%s\n' "$line" > "$CIB_DIR/hostile$i"
      rc=0; out=$(in_pod "$launcher" "$TMPI_BUILD_DIR/bin/mpi-init" --hostfile "$CIB_DIR/hostile$i" \
        --out "$CIB_DIR/hostile-out$i" --ssh-dir "$CIB_DIR/hostile-ssh$i" 2>&1) || rc=$?
      [[ $rc == 65 ]] || fail "hostile line $i: expected exit 65, got $rc: $out"
      [[ $(wc -l <<<"$out") == 1 ]] || fail "hostile line $i: the error is not one line: $out"
      [[ ! -e $CIB_DIR/hostile-out$i && ! -e $CIB_DIR/hostile-ssh$i ]] || fail "hostile line $i left files"
    done
    [[ ! -e /tmp/tmpi-hostile-ran ]] || fail "a hostile name ran a command"
    row "hostile names in a hostfile (\$(...), ;, *, invalid UTF-8, 300 bytes, an ssh option)" "exit 65 on one line naming the line; nothing written, nothing run" "$(( $(ms_since "$t0") / 6 )) ms a name"
    pass "hostile names: refused, nothing written or run" ;;
  status-slow)
    # Every answer of Trainer's status server comes 30 s late: the job's own end is not held.
    with_sidecars
    start_status_server --stall 1000 --stall-seconds 30
    t0=$SECONDS; rc=0
    out=$(launch -- true 2>&1) || rc=$?
    [[ $rc == 0 ]] || fail "a slow status server: expected the job's own exit 0, got $rc: $out"
    (( SECONDS - t0 < 25 )) || fail "a slow status server held the job for $((SECONDS - t0)) s"
    row "the status server slow (every answer 30 s late)" "exit 0 (the job's verdict stands); the updates are bounded, not waited for" "$((SECONDS - t0)) s for the whole job"
    pass "a slow status server: exit 0 in $((SECONDS - t0)) s" ;;
  descriptors)
    # The launcher may hold 64 descriptors, and a client holds 100 idle connections to the
    # coordinator: its connection cap (the descriptor limit less a reserve) closes the ones
    # over it at once, the idle ones go at the header deadline (10 s), descriptors are left
    # for the preflight and mpirun, the sidecars get through, and the job runs.
    t0=$(date +%s%N)
    in_pod "$launcher" prlimit --nofile=64:64 "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 --report "$report" \
      --beat-interval 1s -- true > "$CIB_DIR/launcher.log" 2>&1 &
    pid=$!
    sleep 1
    in_pod "${nodes[1]}" bash -c 'for i in $(seq 100); do exec {fd}<>"/dev/tcp/$1/29410" || break; done; sleep 25' \
      _ "$launcher.$sub" > /dev/null 2>&1 &
    hog=$!
    sleep 1
    with_sidecars
    timeout 60 tail --pid="$pid" -f /dev/null || fail "the launcher still runs 60 s after its descriptors ran out"
    rc=0; wait "$pid" || rc=$?
    log=$(cat "$CIB_DIR/launcher.log")
    [[ $rc == 0 ]] || fail "descriptors exhausted: expected the job to run (exit 0), got $rc: $log"
    (( $(grep -c "cannot accept connections" <<<"$log") < 20 )) || fail "the accept loop spun: $log"
    kill "$hog" 2>/dev/null || true; wait "$hog" 2>/dev/null || true
    row "descriptors exhausted (the launcher at 64, a client holding 100 idle connections)" "connections over the cap closed at once, idle ones at the header deadline; the job runs (exit 0)" "$(ms_since "$t0") ms for the whole job"
    pass "descriptors exhausted: the job ran after $(ms_since "$t0") ms" ;;
  *) fail "unknown case $case_name" ;;
esac
