#!/usr/bin/env bash
# images/Dockerfile.pytorch, as far as it can be built here (images tests). Its pip step needs
# PyPI, which this machine cannot reach, so the rest of the file is checked statically by
# tests/examples/pytorch_image_test.py. What can run here runs: a Dockerfile made of its own
# first lines, its FROM (the ARG BASE default: the Open MPI image that images/build.sh
# makes), USER root, and its apt-get install list, resolved against the built image's dpkg
# records (`apt-get install --simulate`, after apt-get update). It fails if the base tag does
# not resolve to the built image, or if apt finds a package missing or a dependency broken
# there: the image's hwloc-core stand-in for libhwloc-plugins (images/Dockerfile) must leave
# an image that still installs packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
file=$here/../../images/Dockerfile.pytorch
fail() { echo "FAIL: Dockerfile.pytorch: $*" >&2; exit 1; }
base=$(sed -nE 's/^ARG BASE=(.+)$/\1/p' "$file")
[[ $base == trainer-mpi:openmpi ]] || fail "its base is '$base', not the trainer-mpi:openmpi that images/build.sh makes"
packages=$(sed -n '/apt-get install/,/rm -rf \/var\/lib\/apt\/lists/p' "$file" | tr ' \\&' '\n\n\n' |
  grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vxE 'apt-get|install|rm' | xargs)
[[ -n $packages ]] || fail "no apt-get install list found"
grep -qx 'USER root' "$file" || fail "no USER root before its apt-get install"
context=$(mktemp -d)
tag=localhost/trainer-mpi-pytorch-check:$$
trap 'bash "$here/../../images/build.sh" --podman rmi --force "$tag" >/dev/null 2>&1 || true; rm -rf "$context"' EXIT
printf 'FROM %s\nUSER root\nRUN apt-get update -qq && apt-get install -y --simulate --no-install-recommends %s > /apt.log && grep -c "^Inst " /apt.log\n' \
  "$base" "$packages" > "$context/Dockerfile"
out=$(bash "$here/../../images/build.sh" --podman build --isolation chroot --network host --pull=never \
        -t "$tag" "$context" 2>&1) || fail "building its apt step on $base failed: $(tail -n 15 <<<"$out")"
echo "$out" | grep -E '^[0-9]+$' | tail -n 1 | grep -qE '^[1-9]' || fail "apt planned no install: $(tail -n 15 <<<"$out")"
echo "ok: Dockerfile.pytorch's base $base resolves to the built image, and its packages ($packages) resolve there: $(echo "$out" | grep -E '^[0-9]+$' | tail -n 1) to install"
