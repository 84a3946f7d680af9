#!/usr/bin/env bash
# A root that a killed run left half made, with the host's /proc still mounted in it (as a
# debootstrap killed by a session's end or a CI time-out leaves it), must not fail the next
# run: image_root.sh removes it, mounts and all, and makes the root it was asked for.
#
#   killed_root_test.sh      as root; makes and removes a cache of its own
#
# The planted root has another key (image_root.sh removes every root of that name but the
# one it wants) and two mounts, as debootstrap and image_root.sh's apt run make them: /proc,
# and the host's resolv.conf bound on a file. busybox is the root made: one package, seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
remove_tree() { bash "$here/../../scripts/remove_tree.sh" "$@"; }
fail() { echo "killed_root_test: FAIL: $*" >&2; exit 1; }
mounts_under() { awk -v d="$1/" 'index($2 "/", d) == 1 { print $2 }' /proc/self/mounts; }

cache=$(mktemp -d /tmp/tmpi-killed-root.XXXXXX)
trap 'remove_tree "$cache"' EXIT
left=$cache/busybox-0000000000000000
mkdir -p "$left/proc" "$left/etc"
: > "$left/etc/resolv.conf"
mount -t proc proc "$left/proc"
mount --bind /etc/resolv.conf "$left/etc/resolv.conf"
[[ $(mounts_under "$cache" | wc -l) == 2 ]] || fail "the planted mounts are not there: $(mounts_under "$cache")"
# What the scripts did before: rm walks into the host's /proc and fails.
if rm -rf "$left" 2>/dev/null; then fail "rm -rf removed a root with /proc mounted in it; the test plants nothing"; fi

root=$(TMPI_CACHE=$cache bash "$here/image_root.sh" busybox) || fail "image_root.sh busybox failed over the root a killed run left"
[[ -x $root/bin/busybox ]] || fail "image_root.sh printed $root, which holds no busybox"
[[ ! -e $left ]] || fail "the killed run's root $left is still there"
[[ -z $(mounts_under "$cache") ]] || fail "mounts left under the cache: $(mounts_under "$cache" | tr '\n' ' ')"

# The helper alone: a mount on the folder itself, and a name it is given twice.
mkdir -p "$cache/bare"
mount -t tmpfs tmpfs "$cache/bare"
remove_tree "$cache/bare" "$cache/bare" || fail "remove_tree failed on a folder that is itself a mount"
[[ ! -e $cache/bare && -z $(mounts_under "$cache/bare") ]] || fail "remove_tree left $cache/bare or its mount"
echo "killed_root_test: a killed run's root, /proc and a bound file in it, was removed and busybox made"
