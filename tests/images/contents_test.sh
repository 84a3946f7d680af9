#!/usr/bin/env bash
# What a built image holds (images tests): VARIANT is openmpi, openmpi-slim, openmpi-openssh or mpich. From the image's root
# filesystem (images/build.sh --root), chrooted, as uid 1000 (the image's USER) with no
# capabilities:
# - the MPI's launch programs find every library they need (ldd: no "not found"); the
#   bundle at /opt/trainer-mpi is whole (mpi-bundle verify) and each of our programs runs
#   through it (--help, exit 0);
# - the variant's MPI is the one there: Open MPI's mpirun and orted, or MPICH's
#   mpiexec.hydra and hydra_pmi_proxy, and not the other's; nccl-check's build for it loads it;
# - nothing of the build stage came along: no sources, compiler, CMake, ccache, headers or
#   static archives;
# - the image's user and layout: mpiuser is uid 1000, /etc/trainer-mpi exists; OpenSSH's sshd
#   and nss_wrapper (with sshd's /run/sshd) in openmpi-openssh alone: the others' pods run
#   mpi-sshd, which needs neither;
# - Python, for Kubeflow SDK's `python <file>`: `python` and `python -m pip` run as uid 1000
#   (openmpi, mpich) and openmpi's mpi4py loads its Open MPI; openmpi-slim has no Python at all.
# Then the image's size beside the goal (the bench table's reference: mpi-operator's Open MPI
# image, 184 MB after mpi-operator#390 moved its compiler to a build stage), which
# openmpi-slim, the image without Python, must meet.
set -euo pipefail
variant=${1:?usage: contents_test.sh openmpi|openmpi-slim|openmpi-openssh|mpich}
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $variant image: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || fail "needs root (chroot into the image's root)"
root=$(bash "$here/../../images/build.sh" --root "$variant") || fail "images/build.sh --root $variant failed"
as_user=(setpriv --reuid 1000 --regid 1000 --clear-groups --no-new-privs --bounding-set -all --inh-caps -all)
# in_image CMD...: CMD in the image's root as a container has it, with /proc, /sys and /dev
# (MPI_Init reads them; UCX wants /dev/shm), mounted in a mount namespace of its own so that
# the cached root is never changed.
in_image() {
  unshare --mount --propagation private bash -c '
    root=$1; shift
    mount -t proc proc "$root/proc" && mount --rbind /sys "$root/sys" && mount --rbind /dev "$root/dev" &&
      exec chroot "$root" "$@"' _ "$root" "${as_user[@]}" env -i HOME=/tmp PATH=/opt/trainer-mpi/bin:/usr/bin:/bin "$@"
}

case $variant in
  openmpi | openmpi-slim | openmpi-openssh) mpi_programs=(/usr/bin/mpirun.openmpi /usr/bin/orted) other=/usr/bin/mpiexec.hydra ;;
  mpich) mpi_programs=(/usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy) other=/usr/bin/orted ;;
  *) fail "unknown variant (openmpi, openmpi-slim, openmpi-openssh or mpich)" ;;
esac
for program in "${mpi_programs[@]}"; do [[ -x $root$program ]] || fail "$program is missing"; done
[[ ! -e $root$other ]] || fail "$other is there: the other MPI came along"

checked=0
for file in "${mpi_programs[@]/#/$root}"; do
  [[ $(head -c 4 "$file" | od -An -c | tr -d ' ') == 177ELF ]] || continue
  inside=${file#"$root"}
  out=$(chroot "$root" ldd "$inside" 2>&1) || fail "ldd $inside failed: $out"
  ! grep -q 'not found' <<<"$out" || fail "$inside cannot load: $(grep 'not found' <<<"$out" | xargs)"
  checked=$((checked + 1))
done
((checked >= 2)) || fail "only $checked of the MPI's ELF programs checked"
# Ours: the bundle, whole, and each program run through it (its own loader and libraries).
out=$(in_image mpi-bundle verify /opt/trainer-mpi 2>&1) || fail "the bundle in the image is not whole: $out"
for program in mpi-init mpi-sshd mpi-rendezvous mpi-launcher mpi-rank mpi-ssh mpi-ssh-client mpi-bundle nccl-check; do
  out=$(in_image "$program" --help 2>&1) || fail "$program --help exited $? as uid 1000: $out"
done
# Both nccl-check builds are there; `nccl-check` runs the one for the image's MPI
# (bundle/start.c), and the launcher names it by the job's MPI (launcher/fabric_check.h):
# the other build's MPI library is not in the image.
for program in nccl-check nccl-check.mpich; do
  [[ -x $root/opt/trainer-mpi/libexec/$program && -L $root/opt/trainer-mpi/bin/$program ]] || fail "$program is missing from the bundle"
done
case $variant in
  openmpi | openmpi-slim | openmpi-openssh) build=nccl-check other_lib=libmpich.so ;;
  mpich) build=nccl-check.mpich other_lib=libmpi.so.40 ;;
esac
mpi_lib=$(chroot "$root" ldd "/opt/trainer-mpi/libexec/$build" | awk '/libmpi/ { print $1, $3 }' | xargs)
[[ $mpi_lib == *" /"* ]] || fail "$build does not find this image's MPI library: $mpi_lib"
! chroot "$root" /sbin/ldconfig -p | grep -qF "$other_lib" || fail "$other_lib is in the image: the other MPI came along"
echo "ok: the MPI's $checked programs load; the bundle is whole and each of ours runs as uid 1000; nccl-check is $build, on $mpi_lib"

for path in /src /usr/bin/cmake /usr/bin/ninja /usr/bin/gcc /usr/bin/g++ /usr/bin/cc /usr/bin/ccache /root/.cache/ccache; do
  [[ ! -e $root$path ]] || fail "$path is in the image: the build stage leaked into it"
done
headers=$(find "$root/usr/include" -name '*.h' 2>/dev/null | wc -l)
archives=$(find "$root/usr/lib" -name '*.a' 2>/dev/null | wc -l)
[[ $headers == 0 && $archives == 0 ]] || fail "$headers headers and $archives static archives in the image: a -dev package came along"
echo "ok: no sources, compiler, CMake, ccache, headers or static archives"

[[ $(chroot "$root" getent passwd 1000 | cut -d: -f1) == mpiuser ]] || fail "uid 1000 is not mpiuser"
[[ -d $root/etc/trainer-mpi ]] || fail "/etc/trainer-mpi is missing"
openssh=$(for path in /usr/sbin/sshd /run/sshd $(cd "$root" && find usr/lib -name 'libnss_wrapper.so*' | sed 's|^|/|'); do
            if [[ -e $root$path ]]; then echo "$path"; fi; done | xargs)
if [[ $variant == *-openssh ]]; then
  [[ $openssh == "/usr/sbin/sshd /run/sshd /usr/lib/"*libnss_wrapper.so* ]] || fail "sshd, /run/sshd or nss_wrapper is missing: $openssh"
else
  [[ -z $openssh ]] || fail "OpenSSH's server or nss_wrapper is in the image (mpi-sshd needs neither): $openssh"
fi
[[ $(stat -c %u "$root/etc/trainer-mpi") == 1000 ]] || fail "/etc/trainer-mpi is not mpiuser's"
if [[ $variant == openmpi-slim ]]; then
  [[ ! -e $root/usr/bin/python3 && ! -e $root/usr/bin/python ]] || fail "Python is in the image without Python"
else
  out=$(in_image python -c 'import sys; print(sys.version_info[0])' 2>&1) || fail "python does not run as uid 1000: $out"
  [[ $out == 3 ]] || fail "python is not Python 3: $out"
  # The SDK's packages_to_install runs `python -m pip install --user` (images.sdk.* installs).
  out=$(in_image python -m pip --version 2>&1) || fail "python -m pip does not run as uid 1000: $out"
  if [[ $variant == openmpi* ]]; then  # loads Open MPI without MPI_Init
    out=$(in_image python -c 'import mpi4py; mpi4py.rc.initialize = False
from mpi4py import MPI; print(MPI.Get_library_version())' 2>&1) || fail "mpi4py does not load: $out"
    grep -q "Open MPI" <<<"$out" || fail "mpi4py is not built on Open MPI: $out"
  fi
  echo "ok: python is Python 3 as uid 1000, with pip$([[ $variant == openmpi* ]] && echo ", mpi4py on Open MPI")"
fi
size=$(du -sb --exclude=./.tmpi-sum "$root" | cut -f1) mb=$(( (size + 500000) / 1000000 ))
echo "ok: $variant image: mpiuser 1000, /etc/trainer-mpi, OpenSSH's server: ${openssh:-none}; root filesystem $mb MB (goal without Python: 184 MB at most)"
[[ $variant != openmpi-slim ]] || ((mb <= 184)) || fail "$mb MB, over mpi-operator's 184 MB"
