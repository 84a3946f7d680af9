#!/usr/bin/env bash
# The README's first steps as one script, for a cluster with Kubeflow Trainer v2.3: build and
# push both images (the openmpi runtime's and the pytorch runtime's), name the registry in a
# copy of the package (the checkout's manifests stay as they are), create the example's
# namespace, apply the package and the namespace's RBAC, submit the MPI hello TrainJob, wait
# for its end, show the verdict where kubectl shows it, and uninstall what this script made.
#
#   REGISTRY=registry.example.com/team bash scripts/first_steps.sh [--no-build] [--keep]
#
#   REGISTRY     where the images go and the nodes pull from, host/path (required)
#   --no-build   the images are already pushed: skip building and pushing
#   --keep       leave the TrainJob, the package and the namespace installed
#   TMPI_BUILDER docker (default, where it is on PATH) or podman
#   TMPI_OVERLAY the package's overlay under manifests/ (default trainer-v2.3)
#   TMPI_TIMEOUT seconds to wait for the job's end (default 900); TMPI_POLL between looks (5)
#
# Exit: 0 the job completed; 1 it failed (its verdict is printed above); 2 a step failed (the
# step is named); 3 the job did not end in TMPI_TIMEOUT. The current kubectl context is used.
# tests/examples/first_steps_test.sh runs this against a fake API (tests/fakes/fake_cluster.py).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
namespace=team-a   # examples/trainjob-mpi-hello.yaml's
job=mpi-hello
overlay=${TMPI_OVERLAY:-trainer-v2.3}
timeout=${TMPI_TIMEOUT:-900}
poll=${TMPI_POLL:-5}
build=1 keep=0
for arg in "$@"; do
  case $arg in
    --no-build) build=0 ;;
    --keep) keep=1 ;;
    *) echo "first_steps: unknown argument '$arg' (--no-build, --keep)" >&2; exit 2 ;;
  esac
done

step() { printf '\n== %s\n' "$*"; }
die() { echo "first_steps: $*" >&2; exit 2; }
[[ -n ${REGISTRY:-} && $REGISTRY == */* ]] ||
  die "set REGISTRY to your registry, fully qualified (host/path, e.g. registry.example.com/team): the nodes pull from it"
command -v kubectl >/dev/null || die "needs kubectl (1.31 or later)"
[[ -d $src/manifests/$overlay ]] || die "no overlay manifests/$overlay (TMPI_OVERLAY)"
image=${REGISTRY%/}/trainer-mpi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ((build)); then
  builder=${TMPI_BUILDER:-$(command -v docker >/dev/null && echo docker || echo podman)}
  step "1. build and push both images: $image:openmpi, $image:pytorch (with $builder)"
  "$builder" build -f "$src/images/Dockerfile" -t "$image:openmpi" "$src" || die "building $image:openmpi failed"
  # Dockerfile.pytorch builds on the openmpi image: its BASE names the one just built.
  "$builder" build -f "$src/images/Dockerfile.pytorch" --build-arg "BASE=$image:openmpi" -t "$image:pytorch" "$src" ||
    die "building $image:pytorch failed"
  for tag in openmpi pytorch; do
    "$builder" push "$image:$tag" || die "pushing $image:$tag failed: log in to ${REGISTRY%%/*} first"
  done
fi

step "2. name the registry in a copy of the package"
cp -rL "$src/manifests" "$work/manifests"
# The one line that names it: the overlay's images: newName (what `kustomize edit set image
# localhost/trainer-mpi=$image` writes there, for a kustomization of your own).
sed -i "s|^\(    newName: \).*|\1$image|" "$work/manifests/trainer-v2.3/kustomization.yaml"
kubectl kustomize "$work/manifests/$overlay" | grep -q "image: $image:openmpi" ||
  die "the copy of manifests/$overlay does not name $image:openmpi"

step "3. the namespace $namespace"
made_namespace=0
if ! kubectl get namespace "$namespace" >/dev/null 2>&1; then
  kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f - ||
    die "creating the namespace $namespace failed"
  made_namespace=1
fi

step "4. install the package (manifests/$overlay): the runtimes trainer-mpi-openmpi-v0-1, trainer-mpi-pytorch-v0-1"
kubectl apply -k "$work/manifests/$overlay" || die "applying manifests/$overlay failed"
# The namespace's RBAC: the Role that lets the launcher pod's sidecar post the job's Events on
# the TrainJob (examples/rbac-events.yaml; without it the job runs, with no Events).
rbac=$src/examples/rbac-events.yaml
kubectl apply -f "$rbac" || die "applying examples/rbac-events.yaml failed"

uninstall() {
  ((keep)) && { step "kept: the TrainJob, the package and the namespace (--keep)"; return; }
  step "7. uninstall"
  kubectl delete -f "$src/examples/trainjob-mpi-hello.yaml" --ignore-not-found || true
  kubectl delete -k "$work/manifests/$overlay" --ignore-not-found || true
  kubectl delete -f "$rbac" --ignore-not-found || true
  if ((made_namespace)); then kubectl delete namespace "$namespace" --ignore-not-found || true; fi
}

step "5. submit the TrainJob $namespace/$job (examples/trainjob-mpi-hello.yaml)"
kubectl apply -f "$src/examples/trainjob-mpi-hello.yaml" || { uninstall; die "submitting the TrainJob failed"; }

step "6. watch: the TrainJob's conditions, every ${poll} s for up to ${timeout} s"
selector=jobset.sigs.k8s.io/jobset-name=$job,jobset.sigs.k8s.io/replicatedjob-name=launcher
ended="" seen="" start=$SECONDS
while [[ -z $ended ]]; do
  ended=$(kubectl get trainjob -n "$namespace" "$job" \
    -o 'jsonpath={.status.conditions[?(@.status=="True")].type}' | grep -oE 'Complete|Failed' || true)
  [[ -n $ended ]] && break
  pods=$(kubectl get pods -n "$namespace" -l "$selector" --no-headers 2>/dev/null || true)
  [[ $pods == "$seen" ]] || { echo "$pods"; seen=$pods; }
  if ((SECONDS - start >= timeout)); then
    echo "first_steps: the TrainJob did not end in ${timeout} s; what its launcher pod says:" >&2
    kubectl describe pod -n "$namespace" -l "$selector" || true
    uninstall
    exit 3
  fi
  sleep "$poll"
done
kubectl get trainjob -n "$namespace" "$job"

step "the verdict: the TrainJob's Events, the launcher's termination message, its log's last lines"
kubectl describe trainjob -n "$namespace" "$job"
kubectl describe pod -n "$namespace" -l "$selector"
kubectl logs -n "$namespace" -c node -l "$selector" --tail 20 || true
echo "The TrainJob ended: $ended. A failure's reason names its key: mpi-launcher help KEY, docs/troubleshooting.md"
uninstall
[[ $ended == Complete ]]  || exit 1
