#!/usr/bin/env bash
# Removes folders that a killed debootstrap, chroot or podman build may have left mounts in.
#
#   bash scripts/remove_tree.sh DIR...
#
# Why: debootstrap mounts /proc inside the root it makes and unmounts it when it ends; killed
# (a session's end, a CI time-out), it leaves the host's /proc mounted there. A plain
# `rm -rf` of that root then walks into the host's /proc and fails on every file, and the
# next run, the test command's own, fails with it.
#
# How: every mount at or under each folder is detached, deepest first (umount --lazy: a
# process still inside keeps its view, the tree is freed at once), then the folder goes with
# `rm --one-file-system`, which never crosses into a mount that is still there; a folder that
# is still not gone is an error that names it. /proc/self/mounts writes a space, a tab, a
# newline and a backslash in a path as octal escapes; printf %b turns them back.
set -euo pipefail

mounts_under() {
  local dir=$1 path
  while read -r _ path _; do
    path=$(printf '%b' "$path")
    [[ $path == "$dir" || $path == "$dir"/* ]] && echo "$path"
  done < /proc/self/mounts | LC_ALL=C sort -r
}

status=0
for arg in "$@"; do
  [[ -e $arg || -L $arg ]] || continue
  dir=$(realpath -s "$arg")
  while read -r mount_point; do
    [[ -n $mount_point ]] || continue
    echo "remove_tree: detaching $mount_point, left mounted by a run that was killed" >&2
    umount --lazy "$mount_point" || true
  done < <(mounts_under "$dir")
  rm -rf --one-file-system "$dir" || true
  if [[ -e $dir ]]; then
    echo "remove_tree: could not remove $dir (mounted: $(mounts_under "$dir" | tr '\n' ' '))" >&2
    status=1
  fi
done
exit "$status"
