# shellcheck shell=bash disable=SC2034  # sourced by image_root.sh, which reads the variables
# bookworm-ompi4 (Debian 12, openmpi-bin, openssh-client) with hwloc's plugins left out as
# images/Dockerfile leaves them out (an empty package that provides libhwloc-plugins): the
# project's Open MPI image but for its programs, so that bench/rows/bundle.sh measures the
# bundle alone. Debian's libhwloc-plugins makes hwloc load its GL, OpenCL and libxml2 plugins
# (X11 and ICU with them) in mpirun and every orted; bookworm-ompi4 keeps them, as apt gives
# them. Sourced by image_root.sh (see there for the variables).
kind=debootstrap
suite=bookworm
packages=openmpi-bin,openssh-client
finish() {
  local root=$1
  mkdir -p "$root/tmp/hwloc-core/DEBIAN"
  printf '%s\n' 'Package: trainer-mpi-hwloc-core' 'Version: 1' 'Architecture: all' \
    'Maintainer: trainer-mpi' 'Provides: libhwloc-plugins' 'Conflicts: libhwloc-plugins' \
    'Description: hwloc without its plugins (images/Dockerfile says why)' > "$root/tmp/hwloc-core/DEBIAN/control"
  chroot "$root" dpkg-deb --build /tmp/hwloc-core /tmp/hwloc-core.deb >/dev/null
  chroot "$root" dpkg --purge --force-depends libhwloc-plugins
  chroot "$root" dpkg -i /tmp/hwloc-core.deb
  rm -rf "$root/tmp/hwloc-core" "$root/tmp/hwloc-core.deb"
  [[ -z $(find "$root/usr/lib" -path '*hwloc/hwloc_*.so') ]] || { echo "bookworm-ompi4-core: hwloc's plugins are still there" >&2; return 1; }
}
