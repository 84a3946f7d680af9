#!/usr/bin/env bash
# Rows: a restart in place (`mpi-launcher run --restarts 1`, docs/design.md "Restarts in place")
# beside what the job pays without it, a JobSet that makes every pod again. At 8 and 64 node
# pods of the cluster in a box (2 slots each; TMPI_RESTART_SIZES to change), each round runs,
# in turn first one then the other:
#   in place    the sidecars up, then `mpi-launcher run --restarts 1` at its defaults; once
#               every rank of attempt 0 runs, one of them is SIGKILLed from outside (no OOM
#               count explains it: RankKilled, the infrastructure's); the time from that kill
#               until every rank of attempt 1 has started;
#   recreation  the same job without restarts and the same kill; then what the JobSet's
#               failure policy does, played with cib's own commands: the launcher's exit,
#               every pod made again (`cib recreate`: a new address, fresh volumes), mpi-init
#               in each (init_launcher, init_node: the job key, sshd), the sidecars, and
#               `mpi-launcher run` again until every rank runs. Only the box's part of it:
#               no API server, scheduler, image pull or kubelet, and the pods made one after
#               another where a cluster makes them at once, so the real figure is larger.
# A rank says it started by touching DIR/RANK.ATTEMPT (TMPI_RESTART_COUNT): the last file's
# mtime is when every rank ran, on the box's one clock. The in-place run's attempt 0 is the
# third figure, a first launch (the launcher's start to every rank running, the sidecars up),
# which the restart is held to as well: a restart that costs far more than a launch pays for
# something a launch does not do. Figures a size: medians of the times and of the rounds'
# ratios, report.json's attempts[0].resumedAfter, then where each one's time goes, from the
# launcher's log lines. TMPI_RESTART_BEAT sets --beat-interval (default: the launcher's own):
# a sidecar hears of the new epoch on its next beat, so the beat bounds the restart's wait.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ ${1:-} != --in-cluster ]]; then
  # The clusters' folders: beside the build by default; CIB_ROOT for a build folder that is
  # another checkout's, read-only to this one.
  export CIB_ROOT=${CIB_ROOT:-$TMPI_BUILD_DIR/cib} CIB_QUIET=1
  for n in ${TMPI_RESTART_SIZES:-8 64}; do
    "$root/tests/cluster/cib" run --jobset restart --nodes "$n" -- bash "$0" --in-cluster "$n"
  done
  exit 0
fi
n=$2
source "$root/tests/cluster/lib.sh"
launcher=$(launcher_pod); nodes=($(node_pods))
init_launcher --slots 2
for node in "${nodes[@]}"; do init_node "$node"; done
np=$((2 * n)) rounds=${TMPI_RESTART_ROUNDS:-5}
export OMPI_MCA_btl=tcp,self  # as the other rows (bench/rows/launcher.sh says why)
beat=(); [[ -z ${TMPI_RESTART_BEAT:-} ]] || beat=(--beat-interval "$TMPI_RESTART_BEAT")
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
now() { date +%s.%N; }
log_time() { date -d "$(cut -d' ' -f1 <<<"$1")" +%s.%N; }  # a launcher log line's own time
run_id=0
# A run's folder. Its ranks note their start, then hold (exec: the rank's own process, so that
# a kill from outside is a signal to the rank, not an exit code of a shell around it) until
# the folder holds `go`; a job started with `go` there ends as soon as every rank has noted.
new_dir() { run_id=$((run_id + 1)); dir="$CIB_DIR/runs/$run_id"; mkdir -p "$dir"; }
rank_cmd() { echo "touch $1/\$RANK.\$TMPI_RESTART_COUNT; [ -e $1/go ] || exec sleep 60"; }
# launch DIR LOG [options]: mpi-launcher run in the launcher pod, in the background ($launch_pid).
launch() {
  local d=$1 out=$2; shift 2
  in_pod "$launcher" timeout -k 5 300 "$TMPI_BIN/mpi-launcher" run --hosts "$ETC_MPI/hosts.json" --iface eth0 \
    --report "$CIB_DIR/r.json" "${beat[@]}" "$@" -- sh -c "$(rank_cmd "$d")" > "$out" 2>&1 &
  launch_pid=$!
}
# Disowned: a pod made again kills its sidecar, which bash would otherwise report as a job killed.
sidecars() { for node in "${nodes[@]}"; do rm -f "$CIB_DIR/pods/$node/sidecar.log"; start_sidecar "$node"; done; disown -a; }
# Until every sidecar runs (its first line logged). 64 `cib exec`s started at once take
# seconds of the box's 2 cores to reach the program; a first launch timed from a fixed pause
# after them timed the box's own start, not the launcher's (23-27 s at 64 pods, seen).
sidecars_up() { for node in "${nodes[@]}"; do wait_for "sidecar for" "$CIB_DIR/pods/$node/sidecar.log" 120; done; }
# Sidecars that did not hear the end (a failed job's launcher exits at once) are ended here.
end_sidecars() {
  local node
  for node in "${nodes[@]}"; do kill "$(cat "$CIB_DIR/pods/$node/sidecar.pid")" 2>/dev/null || true; done
}
# all_ran DIR ATTEMPT: waits until every rank of ATTEMPT noted its start; prints the last mtime.
all_ran() {
  local deadline=$((SECONDS + 120))
  until (( $(find "$1" -name "*.$2" | wc -l) == np )); do
    (( SECONDS < deadline )) || fail "restart: $(find "$1" -name "*.$2" | wc -l) of $np ranks of attempt $2 ran in 120 s: $(tail -n 5 "$1.log")"
    kill -0 "$launch_pid" 2>/dev/null || (( $(find "$1" -name "*.$2" | wc -l) == np )) ||
      fail "restart: the launcher exited before every rank of attempt $2 ran: $(tail -n 5 "$1.log")"
    sleep 0.05
  done
  find "$1" -name "*.$2" -printf '%T@\n' | sort -g | tail -n 1
}
# kill_rank: SIGKILL to one rank of the job (the first node's first), from outside; prints when.
kill_rank() {
  local pid cmd
  for pid in $(ip netns pids "$("$CIB" ns "${nodes[0]}")"); do
    cmd=$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline") || continue
    if [[ $cmd == "sleep 60 " ]]; then now; kill -KILL "$pid"; return 0; fi
  done
  fail "restart: no rank found in ${nodes[0]} to kill"
}
finished() {  # finished RC: waits for the launcher, whose exit must be RC
  local rc=0; wait "$launch_pid" || rc=$?
  [[ $rc == "$1" ]] || fail "restart: the launcher exited $rc, expected $1: $(tail -n 20 "$dir.log")"
}
# cib's addresses have room for two generations a pod (the third octet): a pod at its second
# goes back to the first's before it is made again, so each round still moves it.
recreate_all() {
  local pod gen
  for pod in $(pods); do
    gen="$CIB_DIR/pods/$pod/generation"
    (( $(cat "$gen" 2>/dev/null || echo 0) < 2 )) || echo 0 > "$gen"
    "$CIB" recreate "$pod"
  done
}
in_place() {
  new_dir; sidecars; sidecars_up  # the sidecars retrying, as when a pod's containers start
  local t0 first t_fault last; t0=$(now)
  launch "$dir" "$dir.log" --restarts 1
  first=$(all_ran "$dir" 0)
  touch "$dir/go"; sleep 1
  t_fault=$(kill_rank)
  last=$(all_ran "$dir" 1)
  finished 0
  jq -e '.attempts[0].cause == "RankKilled" and .attempts[0].restarted' "$CIB_DIR/r.json" > /dev/null ||
    fail "restart: report.json's attempts: $(jq -c .attempts "$CIB_DIR/r.json")"
  end_sidecars
  local said launched1
  said=$(log_time "$(grep -m1 'restarting in place' "$dir.log")")
  launched1=$(log_time "$(grep 'launching' "$dir.log" | sed -n 2p)")
  echo "$first - $t0" | bc > "$CIB_DIR/last.first"
  echo "$last - $t_fault" | bc > "$CIB_DIR/last.inplace"
  jq -r '.attempts[0].resumedAfter' "$CIB_DIR/r.json" >> "$CIB_DIR/resumed"
  echo "$(cat "$CIB_DIR/last.first")" >> "$CIB_DIR/first"
  echo "$(cat "$CIB_DIR/last.inplace")" >> "$CIB_DIR/inplace"
  echo "$said - $t_fault" | bc >> "$CIB_DIR/ip.said"
  echo "$launched1 - $said" | bc >> "$CIB_DIR/ip.wait"
  echo "$last - $launched1" | bc >> "$CIB_DIR/ip.launch"
}
recreation() {
  new_dir; sidecars; sidecars_up
  launch "$dir" "$dir.log"
  all_ran "$dir" 0 > /dev/null
  touch "$dir/go"; sleep 1
  local t_fault t_exit t_pods t_init last
  t_fault=$(kill_rank)
  finished 137
  t_exit=$(now)
  recreate_all; t_pods=$(now)
  init_launcher --slots 2
  for node in "${nodes[@]}"; do init_node "$node"; done
  t_init=$(now)
  new_dir; touch "$dir/go"; sidecars
  launch "$dir" "$dir.log"
  last=$(all_ran "$dir" 0)
  finished 0
  end_sidecars
  echo "$last - $t_fault" | bc >> "$CIB_DIR/recreation"
  echo "$t_exit - $t_fault" | bc >> "$CIB_DIR/rc.exit"
  echo "$t_pods - $t_exit" | bc >> "$CIB_DIR/rc.pods"
  echo "$t_init - $t_pods" | bc >> "$CIB_DIR/rc.init"
  echo "$last - $t_init" | bc >> "$CIB_DIR/rc.launch"
}
for round in $(seq "$rounds"); do
  if (( round % 2 )); then in_place; recreation; else recreation; in_place; fi
  echo "$(cat "$CIB_DIR/last.inplace") / $(tail -n 1 "$CIB_DIR/recreation")" | bc -l >> "$CIB_DIR/r.recreation"
  echo "$(cat "$CIB_DIR/last.inplace") / $(cat "$CIB_DIR/last.first")" | bc -l >> "$CIB_DIR/r.first"
done
m() { median < "$CIB_DIR/$1"; }
beat_said=${TMPI_RESTART_BEAT:-the default beat}
printf '| restart in place, %d pods (%d ranks, %s): a rank SIGKILLed to every rank running again, vs a JobSet recreation played in the box | %.2f s | %.2f s | %.2f | <= 0.25 |\n' \
  "$n" "$np" "$beat_said" "$(m inplace)" "$(m recreation)" "$(m r.recreation)"
printf '| restart in place, %d pods: the same vs a first launch (mpi-launcher run'"'"'s start to every rank running, the sidecars up) | %.2f s | %.2f s | %.2f | <= 1.5 |\n' \
  "$n" "$(m inplace)" "$(m first)" "$(m r.first)"
printf '| restart in place, %d pods: report.json'"'"'s attempts[0].resumedAfter | %.2f s | - | - | - |\n' "$n" "$(m resumed)"
part() { printf '| where the time goes, %d pods, %s: %s | %.3f s | - | - | - |\n' "$n" "$1" "$2" "$(m "$3")"; }
part "in place" "the kill to the restart said (the agent's report, the other ranks ended)" ip.said
# The slowest round too: a restart that fell back to waiting for MPI's daemons (their 1 s) shows here.
printf '| where the time goes, %d pods, in place: the kill to the restart said, its slowest round of %d | %.3f s | - | - | - |\n' \
  "$n" "$rounds" "$(sort -g "$CIB_DIR/ip.said" | tail -n 1)"
part "in place" "the restart said to attempt 1's launch (the sidecars registered in the new epoch, DNS, ssh)" ip.wait
part "in place" "attempt 1's launch to its last rank running (mpirun's daemons, the agents)" ip.launch
part "recreation" "the kill to the launcher's exit" rc.exit
part "recreation" "every pod made again (cib recreate, one after another)" rc.pods
part "recreation" "mpi-init and the SSH server in every pod" rc.init
part "recreation" "the sidecars and mpi-launcher run to every rank running" rc.launch
