#!/usr/bin/env bash
# Builds trainer-mpi's images from images/Dockerfile with Debian's podman and no registry:
# the Open MPI variant (localhost/trainer-mpi:openmpi), the same without Python
# (:openmpi-slim), with OpenSSH's sshd and nss_wrapper for manifests/openssh
# (:openmpi-openssh), and the MPICH one (:mpich), on the offline Debian 12 base of
# images/base.sh in place of debian:12 and debian:12-slim. Prints each image's size and the
# time it took.
#
#   bash images/build.sh [openmpi] [openmpi-slim] [openmpi-openssh] [mpich]   build these (default: all)
#   bash images/build.sh --root VARIANT      build it (a no-op when nothing changed), then print
#                                            the folder of a verified copy of its root
#                                            filesystem: the cluster in a box runs pods there
#   bash images/build.sh --podman ARGS...    podman with this storage (`--podman images`)
#
# How podman runs here: as root, `--isolation chroot` (a RUN step is a chroot, not a
# container: this kernel's cgroups are hybrid, which crun refuses, and no `podman run` is
# needed), `--network host` for apt, and a storage of its own in the cache, so that nothing
# of the machine's podman (or another cache) decides what is built.
#
# Caches, each keyed by what it is made from and checked before use:
# - the base: images/base.sh (its tar's sha256 is the imported layer's digest, compared
#   before every build; a mismatch imports it again);
# - podman's layers: podman keys each step by its instruction and the checksums of the files
#   it copies, so a changed Dockerfile, script or source builds again from that step on;
# - the build stage's ccache, in a cache mount (TMPDIR below): ccache keys every object by
#   the compiler, its flags and the preprocessed source, and checks what it reads;
# - the exported roots, one per image ID (a digest of the image's layers): the copy holds
#   the sha256 of its own tar stream, compared at each --root; a copy that differs, or that
#   belongs to another image ID, is removed and exported again.
# TMPI_CACHE (default /var/cache/tmpi) holds all of it, under images/; scripts/test.sh's
# TMPI_FRESH=1 starts it empty. A lock serialises callers, --podman ones included.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
cache=${TMPI_CACHE:-/var/cache/tmpi}/images
run_root=/run/tmpi-podman/$(sha256sum <<<"$cache" | cut -c1-12)

say() { echo "images/build: $*" >&2; }
die() { say "$*"; exit 2; }
storage=(--root "$cache/storage" --runroot "$run_root" --storage-driver overlay --cgroup-manager cgroupfs --events-backend file)
pm() { podman "${storage[@]}" "$@"; }

[[ $(id -u) == 0 ]] || die "run it as root: podman's chroot builds and image mounts need it"
command -v podman >/dev/null || die "needs podman (apt-get install podman; scripts/install-deps.sh installs it)"

# --podman runs under the build lock too: a build or a --root call clears, under that lock,
# every container it finds (below), and would take this call's working container from
# under it (CI saw Dockerfile.pytorch's check build lose its container mid-step that way).
# flock -o: the lock is held by flock, not by podman's children, and goes when podman ends.
if [[ ${1:-} == --podman ]]; then
  shift; mkdir -p "$cache" "$run_root"
  exec flock -o "$cache/.build.lock" podman "${storage[@]}" "$@"
fi
root_variant=""
variants=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --root) [[ $# -ge 2 ]] || die "--root wants a variant (openmpi or mpich)"; root_variant=$2; variants=("$2"); shift 2 ;;
    openmpi | openmpi-slim | openmpi-openssh | mpich) variants+=("$1"); shift ;;
    *) die "unknown argument '$1': the variants are openmpi, openmpi-slim, openmpi-openssh and mpich; --root VARIANT prints its root" ;;
  esac
done
((${#variants[@]})) || variants=(openmpi openmpi-slim openmpi-openssh mpich)
for v in "${variants[@]}"; do
  [[ $v == openmpi || $v == openmpi-slim || $v == openmpi-openssh || $v == mpich ]] ||
    die "unknown variant '$v' (openmpi, openmpi-slim, openmpi-openssh or mpich)"
done

mkdir -p "$cache/tmp" "$run_root"
exec 9>"$cache/.build.lock"
flock 9
# What a build or an export that was killed left behind: buildah's working containers (their
# overlay mounts keep `rm -rf` of the cache from working) and image mounts. Under the lock no
# other call is running, so every one of them is dead.
dead=$(pm ps --all --external --quiet 2>/dev/null || true)
if [[ -n $dead ]]; then
  say "removing $(wc -w <<<"$dead") container(s) that a killed build left"
  # shellcheck disable=SC2086  # one ID a word
  pm rm --force $dead >/dev/null 2>&1 || say "could not remove them all: $(pm ps --all --external --quiet | tr '\n' ' ')"
fi
pm image unmount --all >/dev/null 2>&1 || true

# The base, imported under a tag named after its content, and checked by its layer digest.
base_tar=$(bash "$here/base.sh")
base_sum=$(cat "$base_tar.sha256")
base=localhost/trainer-mpi-base:${base_sum:0:16}
layer() { pm image inspect --format '{{index .RootFS.Layers 0}}' "$1" 2>/dev/null || true; }
if [[ $(layer "$base") != "sha256:$base_sum" ]]; then
  say "importing the base $base_tar as $base"
  pm rmi --force "$base" >/dev/null 2>&1 || true
  pm import --quiet "$base_tar" "$base" >/dev/null
  [[ $(layer "$base") == "sha256:$base_sum" ]] || die "the imported base's layer is not the tar's sha256 ($base_sum)"
fi

niceness=19
[[ -z $root_variant ]] || niceness=0
mb() { echo $(( ($1 + 500000) / 1000000 )); }
# build LOG TAG [podman build options]: images/Dockerfile, with its log in LOG.
# TMPDIR: where buildah keeps the cache mounts (the build stage's ccache).
# nice: a build yields the CPU to whatever else runs (the tests run it beside others); a
# --root call does not, since its caller waits on it (and it is mostly podman finding every
# step in its cache).
build() {
  local log=$1 tag=$2; shift 2
  if ! TMPDIR=$cache/tmp nice -n "$niceness" podman "${storage[@]}" build --isolation chroot --network host --pull=never \
      --layers --ignorefile "$here/Dockerfile.dockerignore" -f "$here/Dockerfile" \
      --build-arg BUILD_BASE="$base" --build-arg RUN_BASE="$base" -t "$tag" "$@" "$src" > "$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "building $tag failed; the whole log: $log"
  fi
}
# The build stage first, under a tag of its own: no final image is its child, so untagged it
# would be "dangling", and the prune below would take podman's cache of it (every later
# build would install the build dependencies and compile again).
t0=$SECONDS
build "$cache/build-stage.log" localhost/trainer-mpi-build:latest --target build
[[ -n $root_variant ]] || echo "build stage (both variants'): built in $((SECONDS - t0)) s"
for v in "${variants[@]}"; do
  t0=$SECONDS
  # openmpi-slim: Open MPI without Python (images/Dockerfile's PYTHON=0); openmpi-openssh:
  # with sshd and nss_wrapper (SSHD=1).
  build "$cache/build-$v.log" "localhost/trainer-mpi:$v" --build-arg MPI="${v%%-*}" \
    --build-arg PYTHON="$([[ $v == *-slim ]] && echo 0 || echo 1)" \
    --build-arg SSHD="$([[ $v == *-openssh ]] && echo 1 || echo 0)"
  size=$(pm image inspect --format '{{.Size}}' "localhost/trainer-mpi:$v")
  [[ -n $root_variant ]] || echo "trainer-mpi:$v $(mb "$size") MB, built in $((SECONDS - t0)) s"
done
# What the builds left untagged (older images of these tags, older build stages), and the
# layers only they used.
pm image prune --force >/dev/null 2>&1 || true

[[ -n $root_variant ]] || exit 0
image=localhost/trainer-mpi:$root_variant
id=$(pm image inspect --format '{{.Id}}' "$image")
dir=$cache/root-$root_variant-${id:0:16}
tree_sum() { tar -C "$1" --sort=name --numeric-owner --exclude=./.tmpi-sum -cf - . | sha256sum | cut -d' ' -f1; }
if [[ -d $dir ]] && [[ ! -f $dir/.tmpi-sum || $(tree_sum "$dir") != "$(cat "$dir/.tmpi-sum")" ]]; then
  say "$dir differs from the image it was exported from; it is exported again"
  bash "$src/scripts/remove_tree.sh" "$dir"
fi
if [[ ! -d $dir ]]; then
  for old in "$cache/root-$root_variant"-*; do
    [[ -e $old && $old != "$dir" ]] && bash "$src/scripts/remove_tree.sh" "$old"
  done
  bash "$src/scripts/remove_tree.sh" "$dir.tmp"
  mnt=$(pm image mount "$image")
  mkdir -p "$dir.tmp"
  tar -C "$mnt" --numeric-owner --xattrs -cf - . | tar -C "$dir.tmp" --numeric-owner --xattrs -xf -
  pm image unmount "$image" >/dev/null
  tree_sum "$dir.tmp" > "$dir.tmp/.tmpi-sum"
  mv "$dir.tmp" "$dir"
fi
echo "$dir"
