#!/usr/bin/env bash
# Makes (once) and prints the Debian 13 root with Open MPI 5 (PRRTE) that the extended
# test runs pods from: debootstrap of openmpi-bin and openssh-server (~600 MB, a few
# minutes), cached outside the tree in $TMPI_OMPI5_ROOT (default /var/cache/tmpi/trixie-ompi5).
# Our binaries are built on Debian 12; the libraries they need that Debian 13 has in other
# versions (spdlog, fmt, Boost.Program_options, yaml-cpp: the launcher reads KUBECONFIG for
# its Events) or that this root lacks (libsodium) are
# copied into its /usr/local/lib.
set -euo pipefail
root=${TMPI_OMPI5_ROOT:-/var/cache/tmpi/trixie-ompi5}
if [[ ! -x $root/usr/bin/prterun ]]; then
  command -v debootstrap >/dev/null || { echo "ompi5_root: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
  rm -rf "$root.tmp"; mkdir -p "$(dirname "$root")"
  echo "ompi5_root: making $root with debootstrap (a few minutes, once)" >&2
  debootstrap --variant=minbase --include=openmpi-bin,openssh-server,openssh-client,procps,iproute2 \
    trixie "$root.tmp" http://deb.debian.org/debian >&2
  mv "$root.tmp" "$root"
fi
for lib in libspdlog.so.1.10 libfmt.so.9 libboost_program_options.so.1.74.0 libsodium.so.23 libyaml-cpp.so.0.7; do
  if [[ ! -e $root/usr/local/lib/$lib ]]; then
    cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$root/usr/local/lib/$lib"
    chroot "$root" ldconfig
  fi
done
echo "$root"
