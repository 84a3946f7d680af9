#!/usr/bin/env bash
# The fault matrix: every fault the project promises to handle, run on the cluster in a box,
# one after another, as one table. Each row is a case of tests/cluster/launcher_test.sh,
# teardown_test.sh, faults_test.sh, restarts_test.sh, explained_test.sh, attacks_test.sh or
# tests/launcher/mpi_rank_test.sh (each check there fails the run); the
# case prints its own row (fault, outcome, time to detect, and what of the job was still
# running in any pod before the pods were torn down: tests/cluster/lib.sh, row), and this
# script adds what outlived the cluster: any namespace, process or file of the run. Both
# must be none.
#
#   tests/faults/run.sh [BUILD_DIR]                 run every row, print the table (markdown)
#   tests/faults/run.sh --check-readme [BUILD_DIR]  also fail unless README.md lists the same
#                                                   faults and outcomes (times vary by machine)
#   --server mpi-sshd|openssh (first)               the nodes' SSH server (tests/cluster/lib.sh,
#                                                   TMPI_NODE_SERVER; default mpi-sshd, the
#                                                   runtimes'): README's "Fault matrix", every
#                                                   row; or "Fault matrix on OpenSSH's sshd",
#                                                   the rows in which the server takes part
#
# ctest runs it as `faults.matrix` and `faults.matrix.openssh` (label faults). A row that never
# touches the server (the rendezvous, a rank's own end, the status server, the disk, attacks
# on the coordinator) would only run the same path twice, so it runs on the default alone.
# Needs root, as every cluster test.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd); src=$(cd "$here/../.." && pwd)
server=mpi-sshd; [[ ${1:-} == --server ]] && { server=${2:-}; shift 2; }
[[ $server == openssh || $server == mpi-sshd ]] || { echo "faults: --server $server: mpi-sshd or openssh" >&2; exit 2; }
export TMPI_NODE_SERVER=$server
section="## Fault matrix"; [[ $server == openssh ]] && section="## Fault matrix on OpenSSH's sshd"
check_readme=0; [[ ${1:-} == --check-readme ]] && { check_readme=1; shift; }
build=$(cd "${1:-$src/build/dev}" && pwd)
export TMPI_BUILD_DIR=$build CIB_ROOT=$build/cib
cib=$src/tests/cluster/cib
# name | nodes | script | case | servers: both, or the default (mpi-sshd) alone, for a row in
# which the nodes' SSH server takes no part (README.md, "Fault matrix on OpenSSH's sshd")
cases=(
  "launcher|2|$src/tests/cluster/faults_test.sh|pod-never-comes|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|late-pod|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|recreated-before|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|recreated-after|default"
  "launcher|2|$src/tests/cluster/launcher_test.sh|ssh-refused|both"
  "launcher|2|$src/tests/cluster/faults_test.sh|ssh-no-command|both"
  "launcher|2|$src/tests/cluster/launcher_test.sh|gate-holds|both"
  "launcher|2|$src/tests/cluster/launcher_test.sh|gate-holds-openmpi|both"
  "launcher|2|$src/tests/cluster/faults_test.sh|unresolvable|default"
  "launcher|2|$src/tests/cluster/launcher_test.sh|placement|default"
  "launcher|2|$src/tests/cluster/launcher_test.sh|rank-fails|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|rank-killed|both"
  "launcher|2|$src/tests/cluster/teardown_test.sh|timeout|default"
  "launcher|2|$src/tests/cluster/teardown_test.sh|mpirun-lingers|default"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-killed|default"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-killed-ssh|both"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-partitioned|default"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-partitioned-ssh|both"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-silent-0.5s|default"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-silent-0.5s-ssh-defaults|both"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-silent-6s|default"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-silent-6s-ssh|both"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-unheard-ssh|both"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-deleted|default"
  "launcher|2|$src/tests/cluster/teardown_test.sh|node-deleted-ssh|both"
  "launcher|2|$src/tests/cluster/teardown_test.sh|sigterm|both"
  "launcher|2|$src/tests/cluster/faults_test.sh|launcher-killed|both"
  "launcher|2|$src/tests/cluster/faults_test.sh|launcher-restarted|default"
  "launcher|2|$src/tests/cluster/restarts_test.sh|rank-killed|both"
  "launcher|2|$src/tests/cluster/restarts_test.sh|own-exit|default"
  "launcher|2|$src/tests/cluster/restarts_test.sh|budget|default"
  "launcher|2|$src/tests/cluster/restarts_test.sh|oom|default"
  "launcher|2|$src/tests/cluster/explained_test.sh|rank-oom-node-group|default"
  "launcher|2|$src/tests/cluster/explained_test.sh|rank-oom-launcher|default"
  "launcher|2|$src/tests/cluster/restarts_test.sh|partitioned|default"
  "launcher|2|$src/tests/cluster/restarts_test.sh|recreated|both"
  "launcher|2|$src/tests/cluster/restarts_test.sh|fabric|default"
  "launcher|2|$src/tests/cluster/restarts_test.sh|resume|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|status-down|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|status-slow|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|disk-full|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|impostor|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|descriptors|default"
  "launcher|2|$src/tests/cluster/attacks_test.sh|flood|default"
  "launcher|2|$src/tests/cluster/attacks_test.sh|replay|default"
  "launcher|2|$src/tests/cluster/attacks_test.sh|forged-answer|default"
  "launcher|2|$src/tests/cluster/faults_test.sh|hostile-names|default"
  "launcher|2|$src/tests/cluster/launcher_test.sh|invalid-utf8|default"
  "agent|0|$src/tests/launcher/mpi_rank_test.sh||default"
)

# What a row can leave: its cluster (cib's run prefix names its namespaces, its entry in
# /run/tmpi-cib and its folder), and live processes started from this build (a zombie that
# its parent has yet to reap is not counted) that belong to the row. Other tests may run
# beside the matrix (ctest -j), so a process is the row's by its environment, which every
# process of a row inherits or is given: TMPI_FAULT_ROW, set for the row here, or the row's
# cluster folder (CIB_DIR, and HOME under it, which even the pods' `env -i` and sshd's
# sessions keep). Taken after the row; what is there was left behind.
leftovers() {  # leftovers ROW_MARKER [PREFIX]
  local marker=$1 prefix=${2:-} pid args environ
  if [[ -n $prefix ]]; then
    ip netns list 2>/dev/null | awk -v p="$prefix" 'index($1, p) == 1 { print "netns " $1 }'
    [[ -e /run/tmpi-cib/$prefix ]] && echo "cib-run $prefix"
    [[ -e $CIB_ROOT/$prefix ]] && echo "folder $CIB_ROOT/$prefix"
  fi
  while read -r pid args; do
    environ=$(tr '\0' '\n' 2>/dev/null </proc/"$pid"/environ) || continue
    if grep -qxF "TMPI_FAULT_ROW=$marker" <<<"$environ" ||
       { [[ -n $prefix ]] && grep -qF "/$prefix" <<<"$environ"; }; then
      echo "process $args"
    fi
  done < <(ps -e -o pid=,stat=,args= | awk -v b="$build/" '$2 !~ /^Z/ && index($0, b) { $2 = ""; print }')
}

rows=() failed=0
for entry in "${cases[@]}"; do
  IFS='|' read -r kind nodes script case_name servers <<<"$entry"
  [[ $server == mpi-sshd || $servers == both ]] || continue
  marker="$$-${#rows[@]}"
  if [[ $kind == agent ]]; then
    out=$(TMPI_FAULT_ROW=$marker "$script" 2>&1); rc=$?
  else
    out=$(TMPI_FAULT_ROW=$marker "$cib" run --jobset train --nodes "$nodes" -- "$script" "$case_name" 2>&1); rc=$?
  fi
  prefix=$(sed -nE 's|^cib: up: .*CIB_DIR=.*/([^/]+)$|\1|p' <<<"$out" | head -n 1)
  sleep 1
  left=$(leftovers "$marker" "$prefix" | sort -u | cut -c1-200 | paste -sd ';' -)
  row=$(grep -m 1 $'^fault-row\t' <<<"$out")
  if [[ $rc != 0 || -z $row ]]; then
    echo "faults: ${case_name:-$script} FAILED (exit $rc):" >&2; tail -n 20 <<<"$out" >&2; failed=1
    row=$'fault-row\t'"${case_name:-$script}"$'\tFAILED\t-'
  fi
  [[ -z $left ]] || { echo "faults: ${case_name:-$script} left behind: $left" >&2; failed=1; }
  IFS=$'\t' read -r _ fault outcome detect in_pods <<<"$row"
  if [[ -n ${in_pods:-} ]]; then
    echo "faults: ${case_name:-$script} left in its pods: $in_pods" >&2; failed=1
    left="in the pods: ${in_pods:0:200}${left:+; $left}"
  fi
  rows+=("| $fault | $outcome | $detect | ${left:-nothing} |")
  echo "faults: done: ${case_name:-$script}" >&2
done

table="| fault | outcome | detected in | left behind |"$'\n'"|---|---|---|---|"
for r in "${rows[@]}"; do table+=$'\n'"$r"; done
echo "$table"

if ((check_readme)); then
  # README's table shows one sitting's times; faults and outcomes must be the same rows.
  strip() { awk -F'|' 'NF > 4 && $2 !~ /^(-|---| fault )/ { print $2 "|" $3 }' | sed 's/([^)]*peak [0-9]* KB)//'; }
  readme=$(awk -v s="$section" '$0 == s { on = 1; next } on && /^## / { exit } on && /^\|/' "$src/README.md")
  if ! diff <(strip <<<"$readme") <(strip <<<"$table") >&2; then
    echo "faults: README.md's \"${section#\#\# }\" differs in its faults or outcomes (above: < README, > this run); paste the table above into it" >&2
    failed=1
  fi
fi
exit $failed
