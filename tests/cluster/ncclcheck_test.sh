#!/usr/bin/env bash
# nccl-check's MPI backend (the CPU twin) on the cluster in a box: 1 launcher and 3 nodes
# with 2 slots each, run by `mpi-launcher check|run --check`. One case per run:
#   pass        every link fine: exit 0, the table, the report in report.json (Open MPI)
#   mpich       the same through MPICH hydra and nccl-check.mpich
#   slow-link   node 2's veth limited by tc tbf: it is named as the slow host, exit 69
#   stopped     node 2's ranks stopped (SIGSTOP) mid-check: a timeout report naming it, exit 75
#   no-gpu      --check nccl where no GPU exists: exit 69 and the documented message
#   no-nccl     --check nccl with no NCCL found: exit 78 (not restarted) and the one line
source "$(dirname "$0")/lib.sh"
case_name=$1
launcher=$(launcher_pod); nodes=($(node_pods)); sub=$(subdomain)
L="$TMPI_BUILD_DIR/bin/mpi-launcher"
NC="$TMPI_BUILD_DIR/bin/nccl-check"
report="$CIB_DIR/report.json"
init_launcher --slots 2
for node in "${nodes[@]}"; do init_node "$node"; done
# Small sizes: the CPU twin moves data through veths on the same 2 cores, where samples of
# the same link were seen to vary 15-fold from run to run; a floor of 0.05 of the median
# keeps that noise from being a culprit. Real clusters, with cores of their own, want 0.5
# or more (the default).
sizes=(--min-bytes 64K --max-bytes 1M --pair-bytes 1M --min-fraction 0.05)
# The cases where every link is healthy check the plumbing (the table, report.json, MPICH),
# not the judgement (slow-link and the fabric matrix do). Here the 6 ranks take turns on 2
# cores, and the ranks waiting for their round spin in MPI's progress loop: a healthy link
# between two pods was seen at 1/43 of the best one, both looks, so these cases allow 1/100.
healthy_sizes=(--min-bytes 64K --max-bytes 1M --pair-bytes 1M --min-fraction 0.01)
check() {  # check [launcher options]: mpi-launcher check in the launcher pod
  in_pod "$launcher" "$L" check --hosts "$ETC_MPI/hosts.json" --iface eth0 --nccl-check "$NC" "${sizes[@]}" "$@"
}
# The nccl-check ranks of one pod: the ranks themselves, not their mpi-rank agents (whose
# command line names nccl-check too), which a real frozen node would stop as well but which
# this test leaves running, so that what it stops is exactly the two ranks.
check_pids() {
  ip netns pids "$("$CIB" ns "$1")" | while read -r pid; do
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == nccl-check ]]; then echo "$pid"; fi
  done
}

case $case_name in
  pass)
    for node in "${nodes[@]}"; do start_sidecar "$node" --deadline 60s; done
    out=$(in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 --report "$report" --beat-interval 1s \
            --check mpi --nccl-check "$NC" "${healthy_sizes[@]}" -- true 2>&1) || fail "the run failed: $out"
    expect_contains "$out" "# nccl-check (mpi): 6 rank(s) on 3 host(s); Open MPI" "the table's title"
    expect_contains "$out" "size     time(us)      algbw      busbw   #wrong" "the table"
    expect_contains "$out" "# link ${nodes[0]} <-> ${nodes[2]}:" "a link line"
    expect_contains "$out" "# gpu link ${nodes[1]} rank 0 <-> ${nodes[1]} rank 1:" "a link within a host"
    expect_contains "$out" "# result: pass" "the result"
    [[ $(jq -r .check.result "$report") == pass ]] || fail "report: $(jq .check "$report")"
    [[ $(jq '.check.allreduce | length' "$report") == 3 ]] || fail "three sizes: $(jq .check.allreduce "$report")"
    [[ $(jq '[.check.allreduce[].wrong] | add' "$report") == 0 ]] || fail "wrong data: $(jq .check.allreduce "$report")"
    [[ $(jq '.check.links | length' "$report") == 3 && $(jq '.check.intra_node | length' "$report") == 3 &&
       $(jq '.check.gpu_links | length' "$report") == 3 ]] ||
      fail "3 links and 3 hosts: $(jq .check "$report")"
    jq -e '[.check.allreduce[].busbw_gbps, .check.links[].gbps] | all(. > 0)' "$report" >/dev/null ||
      fail "a bandwidth of zero: $(jq .check "$report")"
    # Every pod of the box runs on this one machine: its 6 ranks take turns on this machine's
    # CPUs, so a host's own bandwidth is judged only when there are 6 CPUs or more.
    judged=$( (( 6 > $(nproc) )) && echo false || echo true)
    [[ $(jq -c '[.check.hosts[] | [.machine_hosts, .machine_ranks, .bandwidth_judged]] | unique' "$report") == \
       "[[3,6,$judged]]" ]] || fail "3 pods on one machine, judged=$judged: $(jq -c .check.hosts "$report")"
    if [[ $judged == false ]]; then
      expect_contains "$out" "# host ${nodes[1]}: 6 ranks share $(nproc) CPU(s) (its machine's, with 2 other host(s))" \
        "the hosts on one machine"
    fi
    pass "--check mpi over 3 pods: every size, link and host measured, data right, in report.json" ;;
  mpich)
    out=$(in_pod "$launcher" "$L" check --hosts "$ETC_MPI/hosts.json" --mpi mpich --check mpi \
            --nccl-check "$NC.mpich" "${healthy_sizes[@]}" 2>&1) || fail "the check failed: $out"
    expect_contains "$out" "# nccl-check (mpi): 6 rank(s) on 3 host(s); MPICH Version: 4" "MPICH's table"
    expect_contains "$out" "the mpi fabric check passed" "the verdict"
    pass "--check mpi through MPICH hydra" ;;
  slow-link)
    # tbf shapes what leaves node 2 (its eth0), so every ping-pong with it crawls: ~0.005
    # GB/s measured (the ping goes out at full speed, the pong at 20 Mbit/s). Under the
    # sanitizers, with other tests running, healthy links were seen as low as 0.136 GB/s and
    # all-reduces within a host at 0.05 GB/s: the median alone leaves too thin a margin, so
    # an absolute floor of 0.012 GB/s sits between (2.5x, 4x). 512 KiB per pair test: each
    # one with node 2 takes 0.2 s.
    ip netns exec "$("$CIB" ns "${nodes[2]}")" tc qdisc add dev eth0 root tbf rate 20mbit burst 32kb latency 50ms
    sizes=(--min-bytes 64K --max-bytes 1M --pair-bytes 512K --min-fraction 0.05 --min-busbw 0.012)
    rc=0; out=$(check --check mpi 2>&1) || rc=$?
    [[ $rc == 69 ]] || fail "expected exit 69, got $rc: $out"
    expect_contains "$out" "SLOW" "the slow links are marked"
    grep -qE "^${nodes[2]} +mpi host +.*beside the good peer" <<<"$out" || fail "node 2 is not named as the slow host: $out"
    for node in "${nodes[0]}" "${nodes[1]}"; do
      ! grep -qE "^$node +mpi" <<<"$out" || fail "$node is blamed too: $out"
    done
    grep -E "^# (link|retest|FAIL)|^HOST|mpi host" <<<"$out"
    pass "a link limited to 20 Mbit/s: ${nodes[2]} named after its retest, exit 69" ;;
  stopped)
    t0=$SECONDS
    # Sizes up to 16 MiB; the stop usually comes after its init, inside a measured step.
    # Under sanitizers it may land in init, before the ranks have exchanged host names: the
    # launcher then names the host by the placement
    # that its preflight has just confirmed. Or before MPI_Init has returned (CI's asan run
    # hung here so), where only the watchdog ends the other ranks (ncclcheck/watchdog.h),
    # after its 10 s floor; the hosts of the ranks that never say they gave up are the
    # silent ones. The row is the same every way.
    sizes=(--min-bytes 1M --max-bytes 16M --pair-bytes 1M --min-fraction 0.05)
    # The stop must land while the check runs, which here lasts about a second: the sweep's
    # budget (a quarter of --step-timeout) and the pair rounds' keep it short. Node 2's ranks
    # are looked for every 50 ms (up to 60 s: on a loaded machine they took over 10 s to
    # start), stopped half a second after they were seen, by the pids seen; where the check
    # ended first (it passed: nothing was stopped), it is run again, three times at most.
    stopped=""
    for attempt in 1 2 3; do
      check --check mpi --step-timeout 5s > "$CIB_DIR/check.log" 2>&1 &
      pid=$!
      victims=""
      for _ in $(seq 1200); do
        victims=$(check_pids "${nodes[2]}")
        [[ $(grep -c . <<<"$victims") == 2 ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
      done
      sleep "${TMPI_STOP_AFTER:-0.5}"  # TMPI_STOP_AFTER=0: a stop before MPI_Init, by hand
      if [[ $(grep -c . <<<"$victims") == 2 ]] && kill -STOP $victims 2>/dev/null; then
        stopped=yes
        break
      fi
      kill -CONT $victims 2>/dev/null  # one of the two had ended: none stays stopped
      wait "$pid"
      echo "attempt $attempt: the check ended before node 2's ranks were stopped; again"
    done
    [[ -n $stopped ]] || fail "node 2's ranks were not stopped mid-check in 3 attempts: $(cat "$CIB_DIR/check.log")"
    timeout 40 tail --pid="$pid" -f /dev/null || fail "the check hangs 40 s after ${nodes[2]} stopped: $(cat "$CIB_DIR/check.log")"
    rc=0; wait "$pid" || rc=$?
    out=$(cat "$CIB_DIR/check.log")
    [[ $rc == 75 ]] || fail "expected exit 75, got $rc: $out"
    expect_contains "$out" "TIMEOUT in " "the timeout report"
    grep -qE "^${nodes[2]} +mpi timeout +.*this host does not answer" <<<"$out" || fail "the stopped host is not named: $out"
    grep -E "TIMEOUT|HOST|timeout" <<<"$out"
    pass "ranks stopped by SIGSTOP: a timeout report naming ${nodes[2]} after $((SECONDS - t0)) s, exit 75" ;;
  no-gpu)
    rc=0; out=$(check --check nccl 2>&1) || rc=$?
    [[ $rc == 69 ]] || fail "expected exit 69, got $rc: $out"
    expect_contains "$out" "for rank 0 on ${nodes[0]}" "the message"
    expect_contains "$out" "or use --check mpi (NCCL 2." "the hint, and the NCCL found"
    pass "--check nccl with NCCL and without a GPU: exit 69, a clear message" ;;
  no-nccl)
    rc=0; out=$(check --check nccl --nccl-library /nonexistent/libnccl.so.2 2>&1) || rc=$?
    [[ $rc == 78 ]] || fail "expected exit 78 (the image lacks NCCL), got $rc: $out"
    expect_contains "$out" "no NCCL in this image for --check nccl: libnccl.so.2 not found" "the message"
    expect_contains "$out" "or use --check mpi" "the fix"
    pass "--check nccl without NCCL: exit 78, one line naming what was looked for and the fix" ;;
  *) fail "unknown case $case_name" ;;
esac
