#!/usr/bin/env bash
# scripts/first_steps.sh, the README's first steps, run whole with the real kubectl against
# the fake API's cluster mode (tests/fakes/fake_cluster.py: discovery, OpenAPI v3 for
# kubectl's server-side validation, the CRDs' schemas, namespaces that must exist, and a
# stand-in for Trainer, JobSet and the kubelet that pulls only what was pushed). The builds
# are tests/fakes/fake_builder.sh's (their Dockerfiles, contexts, tags and BASE checked, the
# pushes recorded as the registry): the real builds are images.build's, label extended.
# Cases: a job that completes (every step, the uninstall leaves nothing); a job that fails
# (the verdict shows: the termination message, the TrainJob's Event, the log's last line);
# images never pushed (the kubelet's ErrImagePull is shown, exit 3); and two broken copies
# of the script, each of which must fail: without the namespace step, without the registry.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
fake_pid=""
cleanup() { [[ -z $fake_pid ]] || kill "$fake_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: first steps: $*" >&2; [[ ! -f $work/out ]] || tail -n 40 "$work/out" >&2; exit 1; }
command -v kubectl >/dev/null || fail "needs kubectl"

bash "$src/tests/fakes/make_test_ca.sh" "$work/ca"
echo '{}' > "$work/state.json"
registry=$work/registry
start_fake() {  # start_fake OUTCOME_JSON: a fresh cluster whose launcher ends so
  [[ -z $fake_pid ]] || { kill "$fake_pid"; wait "$fake_pid" 2>/dev/null || true; }
  echo "$1" > "$work/outcome.json"
  rm -f "$work/port" "$registry" "$registry.built"; : > "$work/api.log"
  python3 "$src/tests/fakes/fake_kube_api.py" --cluster --registry "$registry" --outcome "$work/outcome.json" \
    --cert "$work/ca/server.crt" --key "$work/ca/server.key" --token first-steps-token \
    --state "$work/state.json" --port-file "$work/port" --log "$work/api.log" 2> "$work/fake.err" &
  fake_pid=$!
  for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.1; done
  [[ -s $work/port ]] || fail "the fake API did not start: $(cat "$work/fake.err")"
  cat > "$work/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "https://127.0.0.1:$(cat "$work/port")", certificate-authority: $work/ca/ca.crt}}]
users: [{name: newcomer, user: {token: first-steps-token}}]
contexts: [{name: fake, context: {cluster: fake, user: newcomer}}]
current-context: fake
EOF
}
# run SCRIPT [ARGS...]: the script as a newcomer runs it; its output in $work/out, its exit in $rc.
run() {
  rc=0
  env HOME="$work/home" KUBECONFIG="$work/kubeconfig" FAKE_REGISTRY="$registry" REGISTRY=registry.example.com/team \
    TMPI_BUILDER="$src/tests/fakes/fake_builder.sh" TMPI_POLL=0.2 TMPI_TIMEOUT="${timeout:-20}" \
    bash "$@" > "$work/out" 2>&1 || rc=$?
}
has() { grep -qF -- "$1" "$work/out" || fail "${2:-the output} lacks: $1"; }
requests() { grep -c "\"method\": \"$1\", \"path\": \"$2" "$work/api.log" || true; }
left() {  # what the uninstall left in the fake
  KUBECONFIG="$work/kubeconfig" HOME="$work/home" kubectl get clustertrainingruntimes,namespaces -o name 2>&1
}

image=registry.example.com/team/trainer-mpi
start_fake '{"exitCode": 0, "message": "trainer-mpi: the job succeeded in 3.1 s: every rank exited 0", "log": "all-reduce checked\ntrainer-mpi: the job succeeded in 3.1 s: every rank exited 0\n", "events": []}'
run "$src/scripts/first_steps.sh"
((rc == 0)) || fail "a job that completes: exit $rc, expected 0"
[[ $(sort "$registry") == "$(printf '%s\n' "$image:openmpi" "$image:pytorch")" ]] ||
  fail "pushed: $(tr '\n' ' ' < "$registry"); expected both images under the registry"
[[ $(requests POST /api/v1/namespaces?) == 1 ]] || fail "the namespace was not created once"
[[ $(requests POST /apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes) == 2 ]] || fail "the two runtimes were not applied"
[[ $(requests POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs) == 1 ]] || fail "no TrainJob submitted"
deletes=4  # the TrainJob, two runtimes, the namespace; and the Role and its binding, where there are
if [[ -f $src/examples/rbac-events.yaml ]]; then
  deletes=6
  [[ $(requests POST /apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles) == 1 &&
     $(requests POST /apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings) == 1 ]] ||
    fail "examples/rbac-events.yaml's Role and RoleBinding were not applied"
fi
[[ $(requests DELETE /) == "$deletes" ]] || fail "the uninstall made $(requests DELETE /) deletes, expected $deletes"
! left | grep -qv "^No resources found" || fail "the uninstall left: $(left)"
has "The TrainJob ended: Complete"
# kubectl validated on the server's side: the fake's OpenAPI v3 said fieldValidation is supported.
grep -q 'fieldValidation=Strict' "$work/api.log" || fail "kubectl did not ask for the server's strict validation"
! grep -q '"/openapi/v2' "$work/api.log" || fail "kubectl fell back to validating with OpenAPI v2"
echo "ok: a job that completes: both images pushed, namespace, package, TrainJob, watch, verdict, uninstall"

message="trainer-mpi: the job failed after 4.0 s: the program's (exit 1, not restarted)"
reason="rank 3 on mpi-hello-node-0-0 exited 1 (see docs/troubleshooting.md#rank-exit)"
start_fake "$(printf '{"exitCode": 1, "message": "%s\\n%s", "log": "...\\n%s\\n", "events": [["RankFailed", "%s"]]}' \
  "$message" "$reason" "$reason" "$reason")"
run "$src/scripts/first_steps.sh"
((rc == 1)) || fail "a job that fails: exit $rc, expected 1"
grep -A3 'State: *Terminated' "$work/out" | grep 'Message:' | grep -qF "$message" || fail "describe pod shows no termination message"
grep -A8 '^Events:' "$work/out" | grep -qF "RankFailed" || fail "describe trainjob shows no Event"
has "$reason" "the Event, the message and the log"
has "The TrainJob ended: Failed"
! left | grep -qv "^No resources found" || fail "the uninstall after a failed job left: $(left)"
echo "ok: a job that fails: the termination message, the TrainJob's Event and the log's last lines shown, exit 1"

start_fake '{"exitCode": 0, "message": "", "log": "", "events": []}'
timeout=2 run "$src/scripts/first_steps.sh" --no-build
((rc == 3)) || fail "images never pushed: exit $rc, expected 3 (the job never ends)"
has "ErrImagePull"
has "Failed to pull image \"$image:openmpi\""
echo "ok: images never pushed: the pod's ErrImagePull shown, exit 3"

# Broken copies of the script, in a copy of the tree it reads: each must fail.
mkdir -p "$work/tree/scripts"
cp -r "$src/manifests" "$src/examples" "$src/images" "$work/tree/"
broken() {  # broken WHAT SED_EXPRESSION: the script without that step
  sed "$2" "$src/scripts/first_steps.sh" > "$work/tree/scripts/first_steps.sh"
  ! cmp -s "$src/scripts/first_steps.sh" "$work/tree/scripts/first_steps.sh" || fail "the expression for '$1' changed nothing"
  start_fake '{"exitCode": 0, "message": "ok", "log": "", "events": []}'
  timeout=2 run "$work/tree/scripts/first_steps.sh"
  ((rc != 0)) || fail "a script $1 passed"
}
broken "without the namespace step" '/kubectl create namespace/,+1d'
has 'namespaces "team-a" not found'
broken "that names no registry" '/^sed -i/d;/^kubectl kustomize/,+1d'
has "ErrImagePull"
echo "ok: a script without its namespace step, or without the registry, fails"
