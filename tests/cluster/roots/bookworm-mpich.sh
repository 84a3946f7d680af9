# shellcheck shell=bash disable=SC2034,SC2016  # sourced by image_root.sh, which reads the variables
# Debian 12 (bookworm) minbase with MPICH alone: no Open MPI anywhere (checked). The hello
# is this build's, made with mpicc.mpich on this machine (Debian 12 too: the same MPICH).
# Sourced by image_root.sh (see there for the variables).
kind=debootstrap
suite=bookworm
packages=mpich
finish() {
  local openmpi
  openmpi=$(chroot "$1" dpkg-query -W -f '${Package}\n' | grep -i openmpi || true)
  [[ -z $openmpi ]] || { echo "bookworm-mpich: Open MPI came in with mpich: $openmpi" >&2; return 1; }
  [[ -x $1/usr/bin/mpiexec.hydra ]] || { echo "bookworm-mpich: no mpiexec.hydra" >&2; return 1; }
}
