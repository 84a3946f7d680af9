#!/usr/bin/env bash
# mpi-rank, the lean rank agent, as MPI runs it: it loads no shared library but libc (so it
# starts fast and runs inside other images), sets the torch variables, passes on the
# rank's exit code, and runs without a coordinator or a job key.
set -euo pipefail
A="$TMPI_BUILD_DIR/launcher/mpi-rank"
fail() { echo "FAIL: $*" >&2; exit 1; }
if [[ ${TMPI_SANITIZED:-OFF} != ON ]]; then  # sanitizer builds link their runtimes
  libs=$(ldd "$A" | awk '{ print $1 }' | grep -vE '^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|/lib64/ld-linux-x86-64\.so\.2)$' || true)
  [[ -z $libs ]] || fail "mpi-rank loads more than libc: $libs"
fi
home=$(mktemp -d); trap 'rm -rf "$home"' EXIT
export HOME=$home OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_LOCAL_RANK=1 \
  OMPI_COMM_WORLD_LOCAL_SIZE=2 TMPI_SLOT_LAYOUT=2x4 TMPI_MASTER_ADDR=job-node-0-0.job
out=$("$A" -- sh -c 'echo "RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE NODE_RANK=$NODE_RANK MASTER_ADDR=$MASTER_ADDR"')
[[ $out == "RANK=5 LOCAL_RANK=1 WORLD_SIZE=8 NODE_RANK=2 MASTER_ADDR=job-node-0-0.job" ]] || fail "torch variables: $out"
rc=0; "$A" -- sh -c 'echo oops >&2; exit 7' 2>/dev/null || rc=$?
[[ $rc == 7 ]] || fail "expected the rank's exit code 7, got $rc"
rc=0; out=$(env -u OMPI_COMM_WORLD_RANK "$A" -- true 2>&1) || rc=$?
[[ $rc == 2 && $out == *"no MPI rank in the environment"* ]] || fail "outside MPI: rc $rc: $out"
echo "ok: mpi-rank loads only libc, sets the torch variables, passes on exit 7, refuses to run outside MPI"
