#!/usr/bin/env bash
# The image's mpirun hand-off (launcher/mpirun_handoff.sh), with stand-ins for the real
# mpirun and for mpi-launcher that print how they were called: the SDK's form goes to
# mpi-launcher with hosts.json beside the hostfile and the real mpirun named; every other
# call goes to the real mpirun untouched (mpi-launcher's own calls, a hostfile that mpi-init
# did not write, --version, an option it does not hand on, the opt-out). The whole job
# through it runs in cluster.examples.sdk.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/image-bin" "$dir/mpi-bin" "$dir/etc-mpi" "$dir/other"
install -m 755 "$src/launcher/mpirun_handoff.sh" "$dir/image-bin/mpirun"
printf '#!/bin/sh\nprintf "launcher:"; printf " [%%s]" "$@"; echo " mpirun=$TMPI_MPIRUN"\n' > "$dir/image-bin/mpi-launcher"
printf '#!/bin/sh\nprintf "real:"; printf " [%%s]" "$@"; echo\n' > "$dir/mpi-bin/mpirun"
chmod 755 "$dir/image-bin/mpi-launcher" "$dir/mpi-bin/mpirun"
echo "host-0 slots=1" > "$dir/etc-mpi/hostfile"; echo '{}' > "$dir/etc-mpi/hosts.json"
echo "host-0 slots=1" > "$dir/other/hostfile"
# Trainer's hostfile: the same hosts and slots in another order, with a comment.
mkdir -p "$dir/trainer" "$dir/job"; printf 'b slots=2\n# Trainer\na slots=2\n' > "$dir/trainer/hostfile"
printf 'a slots=2\nb slots=2\n' > "$dir/job/hostfile"; echo '{}' > "$dir/job/hosts.json"
printf 'a slots=2\nc slots=2\n' > "$dir/trainer/other-hosts"
export PATH="$dir/image-bin:$dir/mpi-bin:$PATH"
unset TMPI_LAUNCHER_PID TMPI_MPIRUN_HANDOFF
# The SDK's command (docs/trainer-rules.md §6), its script shortened.
sdk_script=$'\nread -r -d \'\' SCRIPT << EOM\n\nprint("hi")\nEOM\nprintf "%s" "$SCRIPT" > "/tmp/f.py"\npython "/tmp/f.py"'
out=$(mpirun --hostfile "$dir/etc-mpi/hostfile" bash -c "$sdk_script" 2>&1)
[[ $out == "launcher: [run] [--hosts] [$dir/etc-mpi/hosts.json] [--] [bash] [-c] [$sdk_script] mpirun=$dir/mpi-bin/mpirun" ]] ||
  fail "the SDK's form was not handed to mpi-launcher as it is: $out"
out=$(mpirun -np 4 -x FOO --hostfile="$dir/etc-mpi/hostfile" -- python3 train.py --lr 1 2>&1)
[[ $out == "launcher: [run] [--hosts] [$dir/etc-mpi/hosts.json] [--np] [4] [--env] [FOO] [--] [python3] [train.py] [--lr] [1] mpirun=$dir/mpi-bin/mpirun" ]] ||
  fail "-np, -x and --hostfile= were not handed on: $out"
# The runtime's TMPI_HOSTS names the job's hosts.json, away from Trainer's hostfile.
out=$(TMPI_HOSTS="$dir/job/hosts.json" mpirun --hostfile "$dir/trainer/hostfile" bash -c 'echo hi' 2>&1)
[[ $out == "launcher: [run] [--hosts] [$dir/job/hosts.json] [--] [bash] [-c] [echo hi] mpirun=$dir/mpi-bin/mpirun" ]] ||
  fail "Trainer's hostfile with TMPI_HOSTS: $out"
out=$(TMPI_HOSTS="$dir/job/hosts.json" mpirun --hostfile "$dir/trainer/other-hosts" hostname 2>&1)
[[ $out == *"does not list the job's hosts and slots"* && $out == *"real: [--hostfile] [$dir/trainer/other-hosts] [hostname]" ]] ||
  fail "a hostfile of other hosts than the job's: expected one line saying so, then the real mpirun: $out"
expect_real() {  # expect_real WHAT ARGS...: the real mpirun got ARGS, untouched, and nothing was said
  local what=$1; shift
  local out want="real:"; out=$(mpirun "$@" 2>&1)
  for arg in "$@"; do want+=" [$arg]"; done
  [[ $out == "$want" ]] || fail "$what: expected the real mpirun with the same arguments, got: $out"
}
expect_real "--version" --version
expect_real "a hostfile with no hosts.json beside it" --hostfile "$dir/other/hostfile" hostname
expect_real "no hostfile" -np 2 hostname
TMPI_LAUNCHER_PID=$$ expect_real "mpi-launcher's own call" --hostfile "$dir/etc-mpi/hostfile" -np 4 --bind-to none mpi-rank -- true
TMPI_MPIRUN_HANDOFF=0 expect_real "the opt-out" --hostfile "$dir/etc-mpi/hostfile" hostname
out=$(mpirun --hostfile "$dir/etc-mpi/hostfile" --map-by ppr:1:node hostname 2>&1)
[[ $out == *"option '--map-by' is not one it hands on"*"without mpi-launcher's preflight"* &&
   $out == *"real: [--hostfile] [$dir/etc-mpi/hostfile] [--map-by] [ppr:1:node] [hostname]" ]] ||
  fail "an option it does not hand on: expected one line saying so, then the real mpirun: $out"
# A hostile -np or -x value is not handed on as a flag of mpi-launcher's.
out=$(mpirun --hostfile "$dir/etc-mpi/hostfile" -np '4; rm -rf /' hostname 2>&1)
[[ $out == *"option '-np' is not one it hands on"* && $out == *"real:"* ]] || fail "a hostile -np: $out"
# No MPI after the hand-off's own folder: a clear error, not a loop into itself.
rc=0; out=$(PATH="$dir/image-bin" /bin/bash "$dir/image-bin/mpirun" --version 2>&1) || rc=$?
[[ $rc == 127 && $out == *"no MPI's mpirun on PATH after"* ]] || fail "no real mpirun: expected 127 and why, got $rc: $out"
echo "ok: the SDK's mpirun form goes to mpi-launcher (hosts.json, -np, -x); every other call to the real mpirun"
