#!/usr/bin/env bash
# Prints the path of the offline Debian 12 base that images/build.sh builds both images on
# (in place of Docker Hub's debian:12 and debian:12-slim, which no registry here serves),
# making it first where no good one is cached. The base is a tar of a root filesystem; the
# caller imports it (`podman import`), and its layer's digest is the tar's sha256.
#
# What it is: `debootstrap --variant=minbase bookworm`, trimmed as Debian's own slim images
# are (their debuerreotype recipe): no documentation but the copyright files, no manual
# pages, no translations, no apt lists or downloaded packages, and a dpkg and apt set-up that
# keeps it so for every later `apt-get install` (the Dockerfile's stages run some). Its apt
# sources are this machine's own, so that the image's packages come from the archives
# (bookworm, -updates, -security) the host's come from. resolv.conf and hosts are emptied: the
# host's would leak into the image.
#
# The cache is keyed by what the base is made from, and verified before each use:
# - the key is the sha256 of this script and of the apt sources it copies; the base is
#   $TMPI_CACHE/images/base-<key>.tar (TMPI_CACHE: /var/cache/tmpi), bases of other keys are
#   removed when a new one is made;
# - base-<key>.tar.sha256 holds the tar's sha256 at making time; a tar that no longer
#   matches it is removed and made again. Nothing stale or half-written is trusted (the tar
#   is written under another name and renamed at the end).
# A lock serialises callers. About 40 s and 80 MB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${TMPI_CACHE:-/var/cache/tmpi}/images
suite=bookworm
sources=/etc/apt/sources.list.d/debian.sources
[[ -f $sources ]] || sources=/etc/apt/sources.list

say() { echo "images/base: $*" >&2; }


key=$(cat "$here/base.sh" "$sources" | sha256sum | cut -c1-16)
tar=$cache/base-$key.tar

# trim ROOT: what Debian's slim images leave out, now and for every later dpkg run.
trim() {
  local root=$1
  cat > "$root/etc/dpkg/dpkg.cfg.d/01-trainer-mpi-slim" <<'EOF'
# images/base.sh: as Debian's slim images, no documentation but the copyright files.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  cat > "$root/etc/apt/apt.conf.d/01-trainer-mpi-slim" <<'EOF'
// images/base.sh: keep no downloaded package and no package cache in an image layer.
APT::Install-Recommends "false";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
  find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/{man,info,groff,lintian,linda,locale}/*
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old
  find "$root/var/log" -type f -delete
  rm -f "$root/etc/apt/sources.list"
  cp "$sources" "$root$sources"
  : > "$root/etc/resolv.conf"
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' > "$root/etc/hosts"
  : > "$root/etc/machine-id"
}

make_base() {
  command -v debootstrap >/dev/null || { say "needs debootstrap (apt-get install debootstrap)"; exit 2; }
  local dir=$cache/base-$key.root
  bash "$here/../scripts/remove_tree.sh" "$dir"
  rm -f "$tar.tmp"
  say "making the $suite base with debootstrap (about 40 s)"
  local mirror
  mirror=$(bash "$here/../scripts/debian_mirror.sh")
  # In a mount namespace of its own: the /proc that debootstrap mounts in the root goes with
  # it, even when it is killed (scripts/remove_tree.sh clears what an older run left).
  unshare --mount --propagation private debootstrap --variant=minbase "$suite" "$dir" "$mirror" >&2
  trim "$dir"
  tar -C "$dir" --sort=name --numeric-owner --xattrs -cf "$tar.tmp" .
  bash "$here/../scripts/remove_tree.sh" "$dir"
  sha256sum "$tar.tmp" | cut -d' ' -f1 > "$tar.sha256"
  mv "$tar.tmp" "$tar"
}

mkdir -p "$cache"
exec 9>"$cache/.base.lock"
flock 9
# A root folder lives only while a base is made: under the lock, any there is a killed run's.
for left in "$cache"/base-*.root; do
  [[ -e $left ]] && { say "removing $left, left by a run that was killed"; bash "$here/../scripts/remove_tree.sh" "$left"; }
done
if [[ -f $tar ]] && [[ ! -f $tar.sha256 || $(sha256sum "$tar" | cut -d' ' -f1) != "$(cat "$tar.sha256")" ]]; then
  say "$tar does not match its recorded sha256; it is made again"
  rm -f "$tar" "$tar.sha256"
fi
if [[ ! -f $tar ]]; then
  for old in "$cache"/base-*.tar; do
    [[ -e $old && $old != "$tar" ]] && { say "removing $old (another key)"; rm -f "$old" "$old.sha256"; }
  done
  make_base
fi
echo "$tar"
