#!/usr/bin/env bash
# images/build.sh --podman waits for the build lock (images tests). A build or a --root call
# removes, under that lock, every container it finds in the images' storage, as what a
# killed build left; a --podman call that ran beside it lost its working container mid-step
# (CI: images.pytorch-base's `podman build`, "identifier is not a container"). Here the test
# holds the lock itself for a few seconds and runs `build.sh --podman version`: it must end
# only after the holder let go. No image is built.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: images/build.sh --podman: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || fail "needs root, as images/build.sh does"
cache=${TMPI_CACHE:-/var/cache/tmpi}/images
mkdir -p "$cache"
marks=$(mktemp -d)
holder=""
trap '[[ -z $holder ]] || kill "$holder" 2>/dev/null; rm -rf "$marks"' EXIT
# The holder marks "released" before its subshell ends and the lock goes with it.
( flock 9; touch "$marks/held"; sleep 5; touch "$marks/released" ) 9>"$cache/.build.lock" &
holder=$!
# Another images test may hold the lock first (a build takes minutes): wait for ours.
for _ in $(seq 3000); do [[ -e $marks/held ]] && break; sleep 0.2; done
[[ -e $marks/held ]] || fail "the test could not take the build lock in 600 s"
out=$(bash "$here/../../images/build.sh" --podman version --format '{{.Client.Version}}' 2>&1) ||
  fail "podman version failed: $out"
[[ -e $marks/released ]] || fail "it ran podman ($out) while another call held the build lock"
wait "$holder"
holder=""
echo "ok: build.sh --podman (podman $out) waited for the build lock that the test held"
