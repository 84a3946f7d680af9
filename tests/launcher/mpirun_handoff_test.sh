#!/usr/bin/env bash
# The image's mpirun hand-off (launcher/mpirun_handoff.sh), with stand-ins for the real
# mpirun and for mpi-launcher that print how they were called: a user's whole mpirun line
# (the SDK's, Horovod's) goes to `mpi-launcher run --mpirun-line` word for word, with the
# job's hosts.json and the real mpirun named; mpi-launcher's own calls, mpirun's questions, a
# line outside a job and the opt-out go to the real mpirun untouched; two copies of the
# hand-off on PATH do not hand the line to each other. mpi-launcher's reading of the line:
# launcher.mpirun_corpus and unit_tests (MpirunLine.*); the whole job: cluster.examples.sdk.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/image-bin" "$dir/copy-bin" "$dir/mpi-bin" "$dir/etc-mpi" "$dir/other" "$dir/job"
install -m 755 "$src/launcher/mpirun_handoff.sh" "$dir/image-bin/mpirun"
install -m 755 "$src/launcher/mpirun_handoff.sh" "$dir/copy-bin/mpirun"  # a copy, not a link
printf '#!/bin/sh\nprintf "launcher:"; printf " [%%s]" "$@"; echo " mpirun=$TMPI_MPIRUN"\n' > "$dir/image-bin/mpi-launcher"
cp "$dir/image-bin/mpi-launcher" "$dir/copy-bin/mpi-launcher"
printf '#!/bin/sh\nprintf "real:"; printf " [%%s]" "$@"; echo\n' > "$dir/mpi-bin/mpirun"
chmod 755 "$dir/image-bin/mpi-launcher" "$dir/copy-bin/mpi-launcher" "$dir/mpi-bin/mpirun"
echo "host-0 slots=1" > "$dir/etc-mpi/hostfile"; echo '{}' > "$dir/etc-mpi/hosts.json"
echo "host-0 slots=1" > "$dir/other/hostfile"; echo '{}' > "$dir/job/hosts.json"
[[ ! -e /etc/trainer-mpi/hosts.json ]] || fail "this machine has /etc/trainer-mpi/hosts.json: the test needs none (the hand-off's last resort)"
export PATH="$dir/image-bin:$dir/mpi-bin:$PATH"
unset TMPI_LAUNCHER_PID TMPI_MPIRUN_HANDOFF TMPI_HOSTS
expect_launcher() {  # expect_launcher WHAT HOSTS ARGS...: mpi-launcher got the whole line
  local what=$1 hosts=$2; shift 2
  local out want="launcher: [run] [--hosts] [$hosts] [--mpirun-line] [--]"
  out=$(mpirun "$@" 2>&1)
  for arg in "$@"; do want+=" [$arg]"; done
  want+=" mpirun=$dir/mpi-bin/mpirun"
  [[ $out == "$want" ]] || fail "$what: expected mpi-launcher with the whole line, got: $out"
}
expect_real() {  # expect_real WHAT ARGS...: the real mpirun got ARGS, untouched, and nothing was said
  local what=$1; shift
  local out want="real:"; out=$(timeout 10 mpirun "$@" 2>&1) || out+=" (exit $?)"
  for arg in "$@"; do want+=" [$arg]"; done
  (($#)) || want+=" []"  # the stand-in's printf with no arguments
  [[ $out == "$want" ]] || fail "$what: expected the real mpirun with the same arguments, got: $out"
}
# The SDK's command (docs/trainer-rules.md §6), its script shortened.
sdk_script=$'\nread -r -d \'\' SCRIPT << EOM\n\nprint("hi")\nEOM\nprintf "%s" "$SCRIPT" > "/tmp/f.py"\npython "/tmp/f.py"'
expect_launcher "the SDK's form" "$dir/etc-mpi/hosts.json" --hostfile "$dir/etc-mpi/hostfile" bash -c "$sdk_script"
# Horovod's line (docs/mpi.rst), with options the old hand-off passed to the real mpirun.
expect_launcher "Horovod's line" "$dir/etc-mpi/hosts.json" --hostfile="$dir/etc-mpi/hostfile" -np 4 -bind-to none \
  -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -mca pml ob1 -mca btl '^openib' python train.py --lr 1
# hydra's -f; TMPI_HOSTS (the runtime's) before the hostfile's folder.
expect_launcher "hydra's -f" "$dir/etc-mpi/hosts.json" -f "$dir/etc-mpi/hostfile" -n 2 ./pi
TMPI_HOSTS="$dir/job/hosts.json" expect_launcher "TMPI_HOSTS" "$dir/job/hosts.json" \
  --hostfile "$dir/etc-mpi/hostfile" --map-by ppr:1:node hostname
# Hostile words stay single words: nothing is evaluated on the way.
expect_launcher "hostile words" "$dir/etc-mpi/hosts.json" --hostfile "$dir/etc-mpi/hostfile" -np '4; rm -rf /' \
  -x 'A=$(id)' hostname
expect_real "--version" --version
expect_real "no line at all"
expect_real "a hostfile with no hosts.json beside it, and none in /etc/trainer-mpi" --hostfile "$dir/other/hostfile" hostname
expect_real "no hostfile and no job" -np 2 hostname
TMPI_LAUNCHER_PID=$$ expect_real "mpi-launcher's own call" --hostfile "$dir/etc-mpi/hostfile" -np 4 --bind-to none mpi-rank -- true
TMPI_MPIRUN_HANDOFF=0 expect_real "the opt-out" --hostfile "$dir/etc-mpi/hostfile" hostname
# Two copies on PATH, either first: each passes over the other to the real mpirun.
PATH="$dir/image-bin:$dir/copy-bin:$dir/mpi-bin:/usr/bin:/bin" expect_real "two copies" --version
PATH="$dir/copy-bin:$dir/image-bin:$dir/mpi-bin:/usr/bin:/bin" TMPI_LAUNCHER_PID=$$ \
  expect_real "two copies, the other first" -np 2 hostname
# No MPI after the hand-off's own folder (copies only): a clear error, not a loop.
to=$(command -v timeout)
rc=0; out=$(PATH="$dir/image-bin:$dir/copy-bin" "$to" 10 /bin/bash "$dir/image-bin/mpirun" --version 2>&1) || rc=$?
[[ $rc == 127 && $out == *"no MPI's mpirun on PATH after"* ]] || fail "no real mpirun: expected 127 and why, got $rc: $out"
echo "ok: a whole mpirun line goes to mpi-launcher word for word; its own calls and the rest to the real mpirun; copies do not loop"
