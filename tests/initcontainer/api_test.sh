#!/usr/bin/env bash
# mpi-init --jobset NAME against the fake Kubernetes API (tests/fakes/fake_kube_api.py,
# HTTPS with a CA made here): paging, a pod that comes late, 429 with Retry-After, 403
# with the RBAC rule, a stalled connection, the deadline (exit 75), the Secret created once
# with its owner reference and reused, a 409 from a racing launcher, a Secret of the job's name
# that is not the job's own refused (exit 77), in-cluster config.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
init="$TMPI_BUILD_DIR/bin/mpi-init"
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
token="fake-token-$RANDOM$RANDOM"

# A CA and a server certificate for 127.0.0.1, made for this run only.
bash "$here/../fakes/make_test_ca.sh" "$work"

# The cluster's state: JobSet train (1 launcher, 4 nodes), its pods, and another JobSet's pod.
python3 "$here/make_pods.py" 4 --gpus 8 --other-jobset other > "$work/pods.json"
jq '{jobsets: [{apiVersion: "jobset.x-k8s.io/v1alpha2", kind: "JobSet",
                metadata: {name: "train", namespace: "team-a", uid: "7d3c1f00-1111-2222-3333-444455556666"},
                spec: {replicatedJobs: [{name: "launcher", replicas: 1, template: {spec: {parallelism: 1}}},
                                        {name: "node", replicas: 1, template: {spec: {parallelism: 4}}}]}}],
     pods: .items}' "$work/pods.json" > "$work/state.json"

run=0
start_fake() {  # start_fake [switches...]: a fresh fake; sets port and log
  run=$((run + 1)); log="$work/requests.$run.log"; : > "$log"
  python3 "$here/../fakes/fake_kube_api.py" --cert "${cert_dir:-$work}/server.crt" --key "${cert_dir:-$work}/server.key" --token "$token" \
    --port-file "$work/port.$run" --log "$log" "$@" &
  pids+=($!)
  for _ in $(seq 100); do [[ -s $work/port.$run ]] && break; sleep 0.05; done
  port=$(cat "$work/port.$run")
  cat > "$work/kubeconfig" <<KC
apiVersion: v1
kind: Config
current-context: test
contexts: [{name: test, context: {cluster: fake, user: launcher, namespace: team-a}}]
clusters: [{name: fake, cluster: {server: "https://127.0.0.1:$port", certificate-authority-data: "$(base64 -w0 "$work/ca.crt")"}}]
users: [{name: launcher, user: {token: "$token"}}]
KC
}
mpi_init() { KUBECONFIG="$work/kubeconfig" "$init" --jobset train --out "$work/out.$run" --ssh-dir "$work/ssh.$run" "$@"; }
count() { grep -c "$1" "$log" || true; }
elapsed() { echo "$(date +%s.%N) - $1" | bc; }

# 1. Paging (2 pods a page), the label selector, the Secret made once with its owner.
start_fake --state "$work/state.json"
mpi_init --api-page-size 2 --log-level warn 2> "$work/stderr.1"
[[ $(wc -l < "$work/out.$run/hostfile") == 4 ]] || fail "expected 4 hosts: $(cat "$work/out.$run/hostfile")"
grep -q other "$work/out.$run/hostfile" && fail "another JobSet's pod leaked in"
[[ $(count '"path": "/api/v1/namespaces/team-a/pods?labelSelector=jobset.sigs.k8s.io%2Fjobset-name%3Dtrain&limit=2&continue=') -ge 2 ]] ||
  fail "expected continue pages: $(cat "$log")"
[[ $(count '"method": "POST"') == 1 ]] || fail "expected one Secret create"
created=$(grep '"method": "POST"' "$log" | jq -c .object)
[[ $(jq -r '.type, .immutable, .metadata.name, .metadata.ownerReferences[0].kind, .metadata.ownerReferences[0].uid' <<<"$created" | paste -sd' ') == \
   "kubernetes.io/ssh-auth true train-mpi-ssh JobSet 7d3c1f00-1111-2222-3333-444455556666" ]] || fail "the Secret: $created"
grep -q '"auth": false' "$log" && fail "a request went without the bearer token"
grep -q "$token" "$work/stderr.1" && fail "the token reached the log"
first_key=$(cat "$work/ssh.$run/id_ed25519.pub")
echo "ok: paging, selector, Secret created once"
# A restarted launcher (same fake) reuses the Secret: no second create, same key.
mpi_init --log-level warn
[[ $(count '"method": "POST"') == 1 ]] || fail "the Secret was created twice"
[[ $(cat "$work/ssh.$run/id_ed25519.pub") == "$first_key" ]] || fail "a restarted launcher got another key"
echo "ok: a restarted launcher reuses the Secret"

# 2. A pod that comes late, and pods without an IP yet: waited for.
jq '.pods |= map(select(.metadata.name | startswith("train-node-0-3") | not))' "$work/state.json" > "$work/early.json"
jq '[.pods[] | select(.metadata.name | startswith("train-node-0-3"))]' "$work/state.json" > "$work/late.json"
start_fake --state "$work/early.json" --late-pods "$work/late.json" --late-after 2 --no-ip-until 1
mpi_init 2> "$work/stderr.2"
[[ $(wc -l < "$work/out.$run/hostfile") == 4 ]] || fail "the late pod is missing"
grep -q "waiting for pods: 0/5 pods ready" "$work/stderr.2" || fail "no progress line: $(cat "$work/stderr.2")"
grep -q "train-node-0-3.train (no pod)" "$work/stderr.2" || fail "progress does not name the missing pod"
echo "ok: a late pod is waited for"

# 3. 429 with Retry-After: 1, three times: waited out, then success.
start_fake --state "$work/state.json" --throttle 3 --retry-after 1
t0=$(date +%s.%N)
mpi_init --log-level warn
(( $(echo "$(elapsed "$t0") >= 2.5" | bc) )) || fail "Retry-After was not honoured"
[[ $(count '"code": 429') == 3 ]] || fail "expected three 429s"
echo "ok: 429 with Retry-After"

# 4. 403: at once, exit 77 (refused), naming the missing RBAC rule.
start_fake --state "$work/state.json" --forbid pods
rc=0; err=$(mpi_init 2>&1) || rc=$?
[[ $rc == 77 ]] || fail "403 should exit 77, got $rc: $err"
grep -qF 'resources: ["pods"], verbs: ["list"]' <<<"$err" || fail "no RBAC rule in: $err"
[[ $(count '"code": 403') == 1 ]] || fail "a 403 must not be retried"
echo "ok: 403 names the rule: $err"

# 5. A stalled connection: the request times out and is retried.
start_fake --state "$work/state.json" --stall 1 --stall-seconds 20
t0=$(date +%s.%N)
mpi_init --api-request-timeout 1s --log-level warn
(( $(echo "$(elapsed "$t0") < 10" | bc) )) || fail "a stalled request was not cut short"
echo "ok: a stalled connection is retried"

# 6. A pod that never comes: exit 75 at the deadline, naming it.
start_fake --state "$work/early.json"
rc=0; err=$(mpi_init --wait-timeout 3s 2>&1) || rc=$?
[[ $rc == 75 ]] || fail "deadline should exit 75, got $rc: $err"
grep -q "4/5 pods ready; missing: train-node-0-3.train (no pod)" <<<"$err" || fail "missing pod not named: $err"
[[ ! -e $work/out.$run/hostfile ]] || fail "a timed-out run wrote a hostfile"
echo "ok: deadline: $err"

# 7. A racing launcher created the Secret between our GET and POST: 409, and we use theirs.
ssh-keygen -q -t ed25519 -N '' -C other -f "$work/other"
jq -n --arg k "$(base64 -w0 "$work/other")" --arg p "$(base64 -w0 "$work/other.pub")" \
  '{data: {"ssh-privatekey": $k, "ssh-publickey": $p}}' > "$work/race.json"
start_fake --state "$work/state.json" --race-secret "$work/race.json"
mpi_init --log-level warn
[[ $(count '"code": 409') == 1 ]] || fail "expected a 409"
[[ $(cut -d' ' -f2 "$work/ssh.$run/id_ed25519.pub") == $(cut -d' ' -f2 "$work/other.pub") ]] ||
  fail "after a 409 the racing launcher's key must be used"
echo "ok: 409 AlreadyExists uses the racing launcher's key"

# 7b. The Secret's name is predictable: whoever may create Secrets in the namespace can make
# it before the job does, and would hold the job's key. One is adopted only if it is the one
# mpi-init makes: owned by this JobSet (kind and uid), labelled managed-by trainer-mpi, of
# type kubernetes.io/ssh-auth. Else exit 77, naming it, the mark it lacks and the fix, with
# nothing written; whether the first GET finds it or the GET after a 409 does.
uid=$(jq -r '.jobsets[0].metadata.uid' "$work/state.json")
planted() {  # planted KIND UID LABEL TYPE: a Secret of the job's name, made by someone else
  jq -n --arg kind "$1" --arg uid "$2" --arg managed "$3" --arg type "$4" \
    --arg k "$(base64 -w0 "$work/other")" --arg p "$(base64 -w0 "$work/other.pub")" '
    {apiVersion: "v1", kind: "Secret", type: $type, data: {"ssh-privatekey": $k, "ssh-publickey": $p},
     metadata: ({name: "train-mpi-ssh", namespace: "team-a"}
       + if $uid == "" then {} else {ownerReferences: [{apiVersion: "jobset.x-k8s.io/v1alpha2", kind: $kind,
                                                        name: "train", uid: $uid}]} end
       + if $managed == "" then {} else {labels: {"app.kubernetes.io/managed-by": $managed}} end)}'
}
while IFS='|' read -r case kind owner label type needle; do
  planted "$kind" "$owner" "$label" "$type" > "$work/planted.json"
  jq --slurpfile s "$work/planted.json" '.secrets = $s' "$work/state.json" > "$work/planted-state.json"
  for way in get 409; do
    if [[ $way == get ]]; then start_fake --state "$work/planted-state.json"
    else start_fake --state "$work/state.json" --race-secret "$work/planted.json"; fi
    rc=0; err=$(mpi_init 2>&1) || rc=$?
    [[ $rc == 77 ]] || fail "$case ($way): a planted Secret must exit 77, got $rc: $err"
    for said in "Secret team-a/train-mpi-ssh" "$needle" "kubectl delete secret -n team-a train-mpi-ssh"; do
      grep -qF -- "$said" <<<"$err" || fail "$case ($way): '$said' is not in: $err"
    done
    [[ $way == get || $(count '"code": 409') == 1 ]] || fail "$case: expected a 409"
    [[ ! -e $work/ssh.$run && ! -e $work/out.$run ]] || fail "$case ($way): something was written"
    grep -q "PRIVATE KEY" <<<"$err" && fail "$case ($way): a key reached the log"
  done
  echo "ok: $case is refused, by GET and after a 409: ${err##*error: }"
done <<CASES
no owner||$uid|trainer-mpi|kubernetes.io/ssh-auth|metadata.ownerReferences has no JobSet of uid $uid
another JobSet's uid|JobSet|00000000-0000-0000-0000-000000000000|trainer-mpi|kubernetes.io/ssh-auth|metadata.ownerReferences
this uid on another kind|Job|$uid|trainer-mpi|kubernetes.io/ssh-auth|metadata.ownerReferences
no managed-by label|JobSet|$uid||kubernetes.io/ssh-auth|metadata.labels has no app.kubernetes.io/managed-by: trainer-mpi
another type|JobSet|$uid|trainer-mpi|Opaque|type is "Opaque", not kubernetes.io/ssh-auth
CASES
# The job's own, owned, labelled and typed, is adopted as before: its key, no create.
planted JobSet "$uid" trainer-mpi kubernetes.io/ssh-auth > "$work/planted.json"
jq --slurpfile s "$work/planted.json" '.secrets = $s' "$work/state.json" > "$work/planted-state.json"
start_fake --state "$work/planted-state.json"
mpi_init --log-level warn
[[ $(count '"method": "POST"') == 0 ]] || fail "the job's own Secret exists: no create"
[[ $(cut -d' ' -f2 "$work/ssh.$run/id_ed25519.pub") == $(cut -d' ' -f2 "$work/other.pub") ]] ||
  fail "the job's own Secret's key was not used"
echo "ok: the job's own Secret is adopted"

# 8. In a pod: the service account's token, CA and namespace.
start_fake --state "$work/state.json"
mkdir -p "$work/sa"; printf '%s' "$token" > "$work/sa/token"; cp "$work/ca.crt" "$work/sa/ca.crt"; printf team-a > "$work/sa/namespace"
KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$port "$init" --jobset train --service-account-dir "$work/sa" \
  --out "$work/out.sa" --ssh-dir "$work/ssh.sa" --log-level warn
[[ $(wc -l < "$work/out.sa/hostfile") == 4 ]] || fail "in-cluster config"
echo "ok: in-cluster service account"
# 9. A 200 that is not JSON (a proxy's page) for the JobSet, the pods, the Secret: a clear error
# that names what came back, the documented code, and nothing written (before, a 200 that
# was not JSON threw inside the API source).
for resource in jobsets pods secrets; do
  start_fake --state "$work/state.json" --not-json "$resource"
  rc=0; err=$(mpi_init --wait-timeout 3s 2>&1) || rc=$?
  [[ $rc == 65 || $rc == 69 || $rc == 75 ]] || fail "a 200 of HTML for $resource: exit $rc: $err"
  [[ $err == *"Welcome"* || $err == *"not a JSON object"* || $err == *"not valid JSON"* ]] ||
    fail "a 200 of HTML for $resource: the error does not say what came back: $err"
  [[ ! -e $work/out.$run/hostfile ]] || fail "a 200 of HTML for $resource: a hostfile was written"
  echo "ok: a 200 of HTML for $resource: exit $rc, named"
done

# 10. Only the pinned CA is trusted. A server whose certificate another CA signed is refused
# even where that CA is in the system's CA folder (/etc/ssl/certs, which libcurl reads by
# default beside a pinned CA unless told not to), here in a mount namespace of this test.
# Its own CA, of another name than the pinned one (a CA of the same name would be found, and
# refused, in the pinned file first, and the system's folder never asked).
mkdir -p "$work/other-ca"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/other-ca/ca.key" \
  -out "$work/other-ca/ca.crt" -days 1 -subj "/CN=fake-system-ca" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/other-ca/server.key" \
  -out "$work/other-ca/server.csr" -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$work/other-ca/san"
openssl x509 -req -in "$work/other-ca/server.csr" -CA "$work/other-ca/ca.crt" -CAkey "$work/other-ca/ca.key" \
  -CAcreateserial -out "$work/other-ca/server.crt" -days 1 -extfile "$work/other-ca/san" 2>/dev/null
mkdir -p "$work/system-certs"; cp "$work/other-ca/ca.crt" "$work/system-certs/other.pem"
openssl rehash "$work/system-certs" 2>/dev/null || c_rehash "$work/system-certs" >/dev/null
cert_dir="$work/other-ca" start_fake --state "$work/state.json"
# The pinned CA as a file this time (certificate-authority): libcurl then reads its default
# CA folder beside it unless told not to.
sed -i "s|certificate-authority-data: \"[^\"]*\"|certificate-authority: \"$work/ca.crt\"|" "$work/kubeconfig"
grep -q "certificate-authority: " "$work/kubeconfig" || fail "the kubeconfig does not pin a CA file"
rc=0; err=$(unshare --mount sh -c 'mount --bind "$1" /etc/ssl/certs && shift && exec "$@"' _ "$work/system-certs" \
              env KUBECONFIG="$work/kubeconfig" "$init" --jobset train --out "$work/out.$run" --ssh-dir "$work/ssh.$run" \
              --wait-timeout 3s 2>&1) || rc=$?
[[ $rc != 0 && $err == *"SSL"* || $rc != 0 && $err == *"certificate"* ]] ||
  fail "a server that only the system's CA folder trusts was trusted beside the pinned CA: exit $rc: $err"
[[ ! -e $work/out.$run/hostfile ]] || fail "a hostfile was written from an untrusted server"
echo "ok: only the pinned CA is trusted, not the system's CA folder (exit $rc)"
echo "mpi-init api: all passed"
