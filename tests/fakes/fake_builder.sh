#!/usr/bin/env bash
# fake_builder.sh: docker's and podman's `build` and `push`, as far as scripts/first_steps.sh
# uses them, without building anything, for tests/examples/first_steps_test.sh (the real
# builds are images.build's, label extended). What it checks is what would make the real
# ones fail or push the wrong thing:
#   build -f FILE [--build-arg K=V]... -t TAG CONTEXT: FILE and CONTEXT exist, FILE is under
#     CONTEXT, TAG is fully qualified (host/path:tag), and a FROM ${BASE} (Dockerfile.pytorch)
#     has a BASE that names an image built before; the tag is recorded as built;
#   push TAG: TAG was built; it is appended to $FAKE_REGISTRY, the references the fake
#     cluster's kubelet can pull (tests/fakes/fake_cluster.py).
set -euo pipefail
die() { echo "fake_builder: $*" >&2; exit 1; }
built=${FAKE_REGISTRY:?}.built
touch "$built" "$FAKE_REGISTRY"
case ${1:-} in
  build)
    shift; file="" tag="" base="" context=""
    while (($#)); do
      case $1 in
        -f) file=$2; shift 2 ;;
        -t) tag=$2; shift 2 ;;
        --build-arg) [[ $2 == BASE=* ]] && base=${2#BASE=}; shift 2 ;;
        -*) die "build: an option this fake does not know: $1" ;;
        *) context=$1; shift ;;
      esac
    done
    [[ -f $file ]] || die "build: no Dockerfile $file"
    [[ -d $context && $(realpath "$file") == "$(realpath "$context")"/* ]] || die "build: $file is not under the context $context"
    [[ $tag =~ ^[a-z0-9.-]+(:[0-9]+)?/.+:[A-Za-z0-9_.-]+$ ]] || die "build: tag '$tag' is not host/path:tag"
    # shellcheck disable=SC2016  # the Dockerfile's own words, not this shell's
    if grep -q '^FROM \${BASE}' "$file"; then
      grep -qxF "$base" "$built" || die "build: $file's BASE '${base:-its default}' names no image built here"
    fi
    echo "$tag" >> "$built"; echo "built $tag from $file" ;;
  push)
    grep -qxF "$2" "$built" || die "push: no image $2 built"
    echo "$2" >> "$FAKE_REGISTRY"; echo "pushed $2" ;;
  *) die "unknown command '${1:-}' (build, push)" ;;
esac
