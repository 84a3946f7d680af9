#!/usr/bin/env bash
# image_root.sh NAME...: prints the root filesystem of each named image (one line each, in
# order), making it first where no good one is cached. The images stand for users' own
# images, which this project did not build its programs into (tests/cluster/bundle_test.sh
# runs the bundle from them). Each recipe is a file roots/NAME.sh (see there); what it sets:
#   kind       debootstrap (a Debian minbase root) or busybox (busybox-static alone: no libc)
#   suite      the Debian suite; packages, comma-separated, installed with the root's apt-get
#   inputs     files of this checkout that the recipe reads (they key the root too)
#   finish     a function run on the new root (ROOT as $1), for the steps after the packages
#   extra      the files that finish adds, relative to the root: hashed and verified
# The cache is keyed by what a root is made from, and verified before each use, so that
# nothing outside the checkout decides a result:
# - the key is the sha256 of this script, the recipe and its inputs; the root lives in
#   $TMPI_CACHE/NAME-<key> (TMPI_CACHE: /var/cache/tmpi), and roots of NAME with other keys
#   are removed when a new one is made. Changing one recipe remakes that root alone;
# - a debootstrap root holds its key and a manifest of its packages (name, version,
#   architecture); before each use, dpkg's own database must still list exactly those and
#   `dpkg --verify` must find every file of them intact (conffiles aside: a recipe's
#   Dockerfile steps edit some), and the files of `extra` their sha256. The busybox root:
#   the .deb's sha256 (as apt checked it on download) and every file of the root, hashed.
#   A root that fails is removed and made again: a stale cache is never trusted;
# - the root is never changed after it is made (cib runs pods over an overlay of it).
# Several names are made in parallel (debootstrap waits on the network most of the time);
# a lock per name serialises callers that ask for the same one. Each build's log:
# $TMPI_CACHE/NAME.log; its time goes to stderr ("made NAME in S s").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${TMPI_CACHE:-/var/cache/tmpi}
[[ $# -ge 1 ]] || { echo "usage: image_root.sh NAME... (names: $(cd "$here/roots" && printf '%s\n' *.sh | sed 's/\.sh$//' | xargs))" >&2; exit 2; }
say() { echo "image_root: $*" >&2; }
# shellcheck disable=SC2016  # dpkg-query's own ${...} format
manifest() { chroot "$1" dpkg-query -W -f '${Package} ${Version} ${Architecture}\n' | LC_ALL=C sort; }
remove_tree() { bash "$here/../../scripts/remove_tree.sh" "$@"; }  # also what a killed run left mounted
# tree_sums DIR: every file and link of DIR but ours (.tmpi-*), with its sha256 or target.
tree_sums() {
  (cd "$1" && find . -path ./.tmpi-\* -prune -o \( -type f -printf 'f %p\n' -o -type l -printf 'l %p %l\n' -o -type d -printf 'd %p\n' \) |
     LC_ALL=C sort | while read -r type path rest; do
       if [[ $type == f ]]; then echo "f $(sha256sum < "$path" | cut -c1-64) $path"; else echo "$type $path $rest"; fi
     done)
}

# load NAME: the recipe's variables, and key and root for it.
load() {
  local recipe=$here/roots/$1.sh
  [[ -f $recipe ]] || { say "no recipe roots/$1.sh"; return 2; }
  kind="" suite="" packages="" inputs=() extra=()
  # shellcheck disable=SC2317  # the recipe's may replace it
  finish() { :; }
  # shellcheck source=/dev/null
  source "$recipe"
  local input sums=()
  for input in "${inputs[@]}"; do sums+=("$(sha256sum < "$here/$input")"); done
  key=$(printf '%s\n' "$(sha256sum < "$0")" "$(sha256sum < "$recipe")" "${sums[@]}" | sha256sum | cut -c1-16)
  root=$cache/$1-$key
}

# verified ROOT: the key, and the packages and files as when it was made.
verified() {
  local dir=$1 changed
  [[ -f $dir/.tmpi-key && $(cat "$dir/.tmpi-key") == "$key" ]] || { say "$dir: no key, or another key"; return 1; }
  if [[ $kind == busybox ]]; then
    [[ $(tree_sums "$dir") == "$(cat "$dir/.tmpi-files")" ]] || { say "$dir: its files changed since it was made"; return 1; }
    return 0
  fi
  [[ -f $dir/.tmpi-manifest ]] || { say "$dir: no manifest"; return 1; }
  [[ $(manifest "$dir") == "$(cat "$dir/.tmpi-manifest")" ]] || { say "$dir: its packages changed since it was made"; return 1; }
  changed=$(chroot "$dir" dpkg --verify 2>&1 | grep -v ' c /' || true)  # conffiles may differ
  [[ -z $changed ]] || { say "$dir: files differ from their packages:"$'\n'"$(head -n 5 <<<"$changed")"; return 1; }
  if ((${#extra[@]})); then
    (cd "$dir" && sha256sum --quiet -c .tmpi-extra >&2) || { say "$dir: the recipe's own files changed"; return 1; }
  fi
}

make_debootstrap() {
  local tmp=$1 mirror
  command -v debootstrap >/dev/null || { say "needs debootstrap (apt-get install debootstrap)"; return 2; }
  mirror=$(bash "$here/../../scripts/debian_mirror.sh")
  # In a mount namespace of its own, as the apt run below: the /proc that debootstrap mounts
  # in the root goes with it, even when it is killed.
  unshare --mount --propagation private debootstrap --variant=minbase "$suite" "$tmp" "$mirror"
  # The packages with the root's own apt, as a Dockerfile's `apt install --no-install-recommends`
  # does: debootstrap's --include resolves no alternatives and was seen to fail configuring
  # bullseye's libopenmpi-dev (libltdl-dev). /proc and the host's resolver for its run only.
  local -a names
  IFS=, read -r -a names <<<"$packages"
  # shellcheck disable=SC2016  # expanded by the inner bash
  unshare --mount --propagation private bash -c '
    set -e; root=$1; shift
    mount -t proc proc "$root/proc"
    [[ -e $root/etc/resolv.conf ]] || : > "$root/etc/resolv.conf"
    mount --bind /etc/resolv.conf "$root/etc/resolv.conf"
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get -q update
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get -q -y install --no-install-recommends "$@"
    chroot "$root" apt-get clean
  ' _ "$tmp" "${names[@]}"
  find "$tmp"/var/cache/apt/archives "$tmp"/var/lib/apt/lists -maxdepth 1 -type f -delete  # the downloads, the lists
  finish "$tmp"
  manifest "$tmp" > "$tmp/.tmpi-manifest"
  if ((${#extra[@]})); then (cd "$tmp" && sha256sum "${extra[@]}" > .tmpi-extra); fi
}

make_busybox() {
  local tmp=$1 deb
  mkdir -p "$tmp.deb"
  (cd "$tmp.deb" && apt-get download busybox-static) || { say "apt-get download busybox-static failed"; return 1; }
  deb=$(ls "$tmp.deb"/busybox-static_*.deb)
  dpkg -x "$deb" "$tmp"
  sha256sum < "$deb" | cut -c1-64 > "$tmp/.tmpi-deb-sha256"; basename "$deb" > "$tmp/.tmpi-deb"
  rm -rf "$tmp.deb"
  finish "$tmp"
  tree_sums "$tmp" > "$tmp/.tmpi-files"
}

# make NAME: the root for NAME, verified, made where missing or bad. Prints its path.
make_one() {
  local name=$1 t0=$SECONDS
  load "$name"
  mkdir -p "$cache"
  exec 9>"$cache/.$name.lock"
  flock 9
  if [[ -d $root ]] && ! verified "$root"; then say "removing $root; it is made again"; remove_tree "$root"; fi
  if [[ ! -d $root ]]; then
    local old
    for old in "$cache/$name"-*; do
      [[ -d $old && $old != "$root" ]] && { say "removing $old (another key)"; remove_tree "$old"; }
    done
    say "making $root ($kind${suite:+ $suite}${packages:+: $packages}; log: $cache/$name.log)"
    remove_tree "$root.tmp" "$root.tmp.deb"
    if ! "make_$kind" "$root.tmp" > "$cache/$name.log" 2>&1; then
      say "making $name failed:"; tail -n 20 "$cache/$name.log" >&2; remove_tree "$root.tmp" "$root.tmp.deb"; return 1
    fi
    echo "$key" > "$root.tmp/.tmpi-key"
    mv "$root.tmp" "$root"
    verified "$root" || { say "the root just made for $name does not verify"; return 1; }
    say "made $name in $((SECONDS - t0)) s: $(du -sh "$root" | cut -f1)"
  fi
  echo "$root"
}

if [[ $# == 1 ]]; then make_one "$1"; exit; fi
# Several: each in the background, then their paths in the order asked.
declare -A job=()
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for name in "$@"; do make_one "$name" > "$out/$name" & job[$name]=$!; done
rc=0
for name in "$@"; do wait "${job[$name]}" || { say "$name: failed"; rc=1; }; done
((rc == 0)) || exit 1
for name in "$@"; do cat "$out/$name"; done
