#!/usr/bin/env bash
# MPI's ssh over the ssh check's own connections (ssh/relay.h), on the job of launcher_lib.sh
# (1 launcher, 2 nodes of 2 slots), as cluster.launcher.ssh-relay.
# At the defaults the ssh check runs beside the launch and keeps its connections, and MPI's
# ssh is mpi-ssh, which runs each daemon over the check's connection to its host. An `ssh`
# first on PATH that records its use and fails shows that nothing else connected: Open MPI's
# job and MPICH's both pass, each rank where the hostfile puts it, and the stub never ran.
# (Open MPI asks for a node by its short name, train-node-0-0, which the relay matches to the
# check's train-node-0-0.train.) With the ssh step before the launch (no relay) the same PATH
# fails the launch, and the stub was asked for a node: it is in the way.
# Then the relay alone (ssh_relay_probe.cpp), with what a job's daemons seldom do: an exit
# long after the output's end, stdin and 1.3 MB of output relayed whole, a second command to
# a busy host (to the real ssh), a caller killed by MPI's teardown, a caller that never reads.
set -- "${1:-ssh-relay}"
source "$(dirname "$0")/launcher_lib.sh"
mkdir -p "$CIB_DIR/stub"
printf '#!/bin/sh\necho "$*" >> %q\nexit 255\n' "$CIB_DIR/stub/used" > "$CIB_DIR/stub/ssh"
chmod 755 "$CIB_DIR/stub/ssh"
status_env=(PATH="$CIB_DIR/stub:$PATH")
t0=$(date +%s%N)
for mpi in openmpi mpich; do
  rm -f "$CIB_DIR/stub/used"
  rc=0; out=$(launch --wait none --mpi "$mpi" --log-level debug -- sh -c 'echo "rank $RANK ran on $(hostname), gate $TMPI_START_GATE"' 2>&1) || rc=$?
  [[ $rc == 0 ]] || fail "$mpi over the relay: exit $rc: $out"
  [[ ! -e $CIB_DIR/stub/used ]] || fail "$mpi ran the real ssh: $(cat "$CIB_DIR/stub/used")"
  # The agents ask the start gate under hydra only: Open MPI's own launch order holds its
  # ranks until every daemon, each started over a checked connection, is up (launcher/job.h).
  gate=false; [[ $mpi == mpich ]] && gate=true
  for rank in 0 1 2 3; do
    expect_contains "$out" "rank $rank ran on ${nodes[rank / 2]}, gate $gate" "$mpi: rank $rank on its host, and the gate"
  done
  expect_contains "$out" "ssh relay: 2 command(s) ran over the check's connections, 0 went to ssh, 0 failed" "$mpi: the relay's count"
done
# A routing tree of the user's may have daemons start others over ssh of their own: the
# agents ask the gate then, under Open MPI too.
rc=0; out=$(status_env+=(OMPI_MCA_routed_radix=64) && launch --wait none --mpi openmpi -- sh -c 'echo "rank $RANK: gate $TMPI_START_GATE"' 2>&1) || rc=$?
[[ $rc == 0 ]] || fail "Open MPI with a radix set: exit $rc: $out"
for rank in 0 1 2 3; do expect_contains "$out" "rank $rank: gate true" "a routing tree of the user's: rank $rank's gate"; done
relayed_ms=$(ms_since "$t0")
rm -f "$CIB_DIR/stub/used"
rc=0; out=$(launch --wait none --ssh-check before -- true 2>&1) || rc=$?
[[ $rc != 0 ]] || fail "the stub ssh did not stop a launch that uses ssh: $out"
# (mpirun gives up at the first daemon that fails, so not every node need be asked.)
grep -qE " (${nodes[0]}|${nodes[1]})[. ]" "$CIB_DIR/stub/used" ||
  fail "the stub was not asked for a node: $(cat "$CIB_DIR/stub/used" 2>/dev/null)"
# The relay alone (tests/cluster/ssh_relay_probe.cpp), with what a job's daemons seldom do.
key=$(ls "$CIB_DIR/pods/$launcher/home/.ssh" | grep -E '^id_[a-z0-9]+$' | head -n 1)
coproc PROBE { in_pod "$launcher" "$TMPI_BUILD_DIR/tests/cluster/ssh_relay_probe" \
  "$CIB_DIR/pods/$launcher/home/.ssh/$key" 2222 "${nodes[0]}.$sub" "${nodes[1]}.$sub" 2>&1; }
# Its output read through a copy of the coproc's descriptor: bash closes a coproc's own once it
# has reaped it, which, once its stdin is closed below, may come before its last line is read.
exec {probe_out}<&"${PROBE[0]}"
read -r -t 30 relay_socket <&"$probe_out" || fail "the relay probe did not start"
rs() { in_pod "$launcher" env TMPI_SSH_RELAY="$relay_socket" PATH="$CIB_DIR/stub:$PATH" \
  "$TMPI_BUILD_DIR/bin/mpi-ssh" -p 2222 "$@"; }
rm -f "$CIB_DIR/stub/used"
# Output closed long before the exit: EOF, then the exit status in a later packet (the
# relay once waited for a close that libssh no longer read after the EOF: MPICH hung).
t1=$(date +%s%N); rc=0; rs "${nodes[0]}.$sub" 'exec >&- 2>&-; sleep 0.5; exit 7' || rc=$?
[[ $rc == 7 ]] || fail "a command that closed its output then exited 7: mpi-ssh exited $rc"
(( $(ms_since "$t1") < 3000 )) || fail "the exit after an early EOF took $(ms_since "$t1") ms"
# stdin relayed in, 1.3 MB relayed out whole, stderr apart.
seq 1 200000 > "$CIB_DIR/in"
rs "${nodes[1]}" 'cat; echo "to stderr" >&2' < "$CIB_DIR/in" > "$CIB_DIR/out" 2> "$CIB_DIR/err" || fail "cat over the relay failed: $(cat "$CIB_DIR/err")"
cmp -s "$CIB_DIR/in" "$CIB_DIR/out" || fail "stdin through cat and back differs: $(wc -c < "$CIB_DIR/out") bytes of $(wc -c < "$CIB_DIR/in")"
[[ $(cat "$CIB_DIR/err") == "to stderr" ]] || fail "stderr: $(cat "$CIB_DIR/err")"
# A second command to a host whose connection is busy goes to the real ssh (the stub).
rs "${nodes[0]}.$sub" 'sleep 30' & busy=$!
sleep 0.5
rc=0; rs "${nodes[0]}.$sub" true 2>/dev/null || rc=$?
[[ $rc == 255 && $(cat "$CIB_DIR/stub/used") == *"${nodes[0]}.$sub true" ]] || fail "a busy host: rc $rc, stub: $(cat "$CIB_DIR/stub/used" 2>/dev/null)"
# MPI's teardown kills its ssh: the relay closes that channel, and the host serves again.
pkill -f "mpi-ssh -p 2222 ${nodes[0]}.$sub sleep 30" || fail "no mpi-ssh to kill"
wait "$busy" || true
sleep 0.3
rm -f "$CIB_DIR/stub/used"
rs "${nodes[0]}.$sub" true || fail "the host did not serve again after its caller was killed"
[[ ! -e $CIB_DIR/stub/used ]] || fail "the host went to ssh after its caller was killed: $(cat "$CIB_DIR/stub/used")"
# A caller whose output nobody reads (a FIFO held open and never read): the relay keeps
# at most its bounded buffer, the channel's window holds the command back, and nothing
# blocks, so the relay's end is prompt and the command is ended (a blocking write once
# held the launcher's exit, and report.json, for good).
mkfifo "$CIB_DIR/stalled"
exec {held}<>"$CIB_DIR/stalled"
rs "${nodes[1]}" 'head -c 50000000 /dev/zero; echo done' > "$CIB_DIR/stalled" 2>/dev/null & stalled=$!
sleep 1
# (pods share the host's pid namespace; the pattern matches the remote head alone, not
# mpi-ssh's command line that carries it, nor itself)
pgrep -f '^head -c 5000000[0]' >/dev/null || fail "the stalled command is not running"
exec {PROBE[1]}>&-
t1=$(date +%s%N)
read -r -t 10 counts <&"$probe_out" || fail "the relay probe did not end (a caller's undrained output held it)"
(( $(ms_since "$t1") < 2000 )) || fail "the relay took $(ms_since "$t1") ms to end beside an undrained caller"
rc=0; wait "$stalled" || rc=$?
[[ $rc == 255 ]] || fail "the stalled caller: mpi-ssh exited $rc, expected 255 (the launcher stopped)"
exec {held}>&-
for _ in $(seq 1 20); do pgrep -f '^head -c 5000000[0]' >/dev/null || break; sleep 0.25; done
! pgrep -f '^head -c 5000000[0]' >/dev/null || fail "the stalled command outlived its channel"
[[ $counts == "relayed 4, fell back 1, failed 0" ]] || fail "the probe's counts: $counts"
row "MPI's ssh, at the defaults (the ssh check beside the launch)" "every daemon over the check's connections, no ssh client run (Open MPI, MPICH)" "both jobs in $relayed_ms ms"
pass "Open MPI's and MPICH's daemons ran over the ssh check's connections; the real ssh never ran"
