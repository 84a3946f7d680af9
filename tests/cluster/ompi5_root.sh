#!/usr/bin/env bash
# Prints the Debian 13 root with Open MPI 5 (PRRTE) that the extended tests run pods from,
# making it first where no good one is cached.
#
# The cache is keyed by what the root is made from, and verified before each use, so that
# nothing outside the checkout decides a result:
# - the key is the sha256 of this script (the suite, the packages, the debootstrap call);
#   the root lives in $TMPI_CACHE/trixie-ompi5-<key> (TMPI_CACHE: /var/cache/tmpi), and
#   roots of other keys are removed when a new one is made;
# - the root holds its key and a manifest of its packages (name, version, architecture);
#   before each use, dpkg's own database must still list exactly those packages and
#   `dpkg --verify` must find every file of them intact. A root that fails either is
#   removed and made again: a stale cache is never trusted;
# - the root is never changed after it is made: the libraries that our binaries need and
#   it lacks come from root_libs.sh, into the build tree, not into the root.
# A lock serialises the tests that ask at once. ~600 MB, a few minutes to make.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${TMPI_CACHE:-/var/cache/tmpi}
suite=trixie
packages=openmpi-bin,openssh-server,openssh-client,procps,iproute2
key=$(sha256sum "$here/ompi5_root.sh" | cut -c1-16)
root=$cache/$suite-ompi5-$key

say() { echo "ompi5_root: $*" >&2; }


manifest() { chroot "$1" dpkg-query -W -f '${Package} ${Version} ${Architecture}\n' | LC_ALL=C sort; }

# verified ROOT: the key, the package set and every packaged file are as when it was made.
verified() {
  local dir=$1
  [[ -f $dir/.tmpi-key && $(cat "$dir/.tmpi-key") == "$key" ]] || { say "$dir: no key, or another key"; return 1; }
  [[ -f $dir/.tmpi-manifest ]] || { say "$dir: no manifest"; return 1; }
  [[ $(manifest "$dir") == "$(cat "$dir/.tmpi-manifest")" ]] || { say "$dir: its packages changed since it was made"; return 1; }
  local changed
  changed=$(chroot "$dir" dpkg --verify 2>&1 | grep -v ' c /' || true)  # conffiles may differ (a pod's sshd keys, hosts)
  [[ -z $changed ]] || { say "$dir: files differ from their packages:"$'\n'"$(head -n 5 <<<"$changed")"; return 1; }
}

make_root() {
  command -v debootstrap >/dev/null || { say "needs debootstrap (apt-get install debootstrap)"; exit 2; }
  local tmp=$root.tmp
  rm -rf "$tmp"
  say "making $root with debootstrap ($suite: $packages; a few minutes)"
  local mirror
  mirror=$(bash "$here/../../scripts/debian_mirror.sh")
  debootstrap --variant=minbase --include="$packages" "$suite" "$tmp" "$mirror" >&2
  find "$tmp"/var/cache/apt/archives "$tmp"/var/lib/apt/lists -maxdepth 1 -type f -delete  # debootstrap's downloads
  echo "$key" > "$tmp/.tmpi-key"
  manifest "$tmp" > "$tmp/.tmpi-manifest"
  mv "$tmp" "$root"
}

mkdir -p "$cache"
exec 9>"$cache/.ompi5-root.lock"
flock 9
if [[ -d $root ]] && ! verified "$root"; then
  say "removing $root; it is made again"
  rm -rf "$root"
fi
if [[ ! -d $root ]]; then
  for old in "$cache/$suite-ompi5" "$cache/$suite-ompi5"-*; do
    [[ -e $old && $old != "$root" ]] && { say "removing $old (another key)"; rm -rf "$old"; }
  done
  make_root
  verified "$root" || { say "the root just made does not verify"; exit 1; }
fi
[[ -x $root/usr/bin/prterun ]] || { say "$root has no prterun: Open MPI 5 was not installed"; exit 1; }
echo "$root"
