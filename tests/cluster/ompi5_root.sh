#!/usr/bin/env bash
# Prints the Debian 13 root with Open MPI 5 (PRRTE) that the extended tests run pods from
# (ompi5_test.sh, ompi5_loads_test.sh), making it first where no good one is cached. The
# root is image_root.sh's "trixie-ompi5" (roots/trixie-ompi5.sh: trixie minbase with
# openmpi-bin, openssh-server, openssh-client, procps, iproute2): keyed by its recipe,
# verified before each use (dpkg's database and `dpkg --verify`), never changed after it is
# made; image_root.sh says how. This wrapper adds the one check its callers rely on.
set -euo pipefail
root=$(bash "$(dirname "$0")/image_root.sh" trixie-ompi5)
[[ -x $root/usr/bin/prterun ]] || { echo "ompi5_root: $root has no prterun: Open MPI 5 was not installed" >&2; exit 1; }
echo "$root"
