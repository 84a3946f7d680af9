#!/usr/bin/env bash
# The package's NetworkPolicies (manifests/kubeflow/profile, and manifests/kubeflow/profile-
# egress for a namespace that denies egress too, as `kubectl kustomize` renders them) enforced
# in the cluster in a box, and the MPI hello TrainJob (or the DeepSpeed one, cut down) run under
# them: the policies must admit what the job needs, and the job must fail when one port is
# missing from the ingress policy.
#
# How: each pod's network namespace gets the policies as nftables rules (netpol_nft.py: the
# rules a CNI would enforce for that pod, with the rendered pods' labels and every address of
# the box's pods, IPv4 and IPv6), before any of the pod's containers starts; then
# examples_test.sh runs the TrainJob as the kubelet would. The TrainJob is the example
# with short deadlines in trainer.env (TMPI_RENDEZVOUS_TIMEOUT, TMPI_TIMEOUT), so that a
# blocked port ends the job in a minute, not at the defaults' 5 minutes (the job's own limit
# 40 s with a port dropped, where the hello, 10 s here, and the DeepSpeed smoke, 25 s, can only
# hang; 90 s without). Under cib's
# --ip-family ipv6 or dual the job's traffic is IPv6 (dual: IPv6 first), so the ip6 rules do
# the admitting.
# First, that the rules are really enforced: a connection from the node pod to a port no rule
# admits is dropped (it times out, and a drop counter counts it), where without the rules it
# would be refused at once.
# Usage (under cib run --jobset mpi-hello|deepspeed-llm --nodes 1 [--ip-family F]):
#   netpol_test.sh [hello|deepspeed] [DROP_PORT]
#   hello:     the MPI hello TrainJob (the default);
#   deepspeed: the DeepSpeed TrainJob on the PyTorch runtime, cut down to 2 hosts of 2 CPU
#              ranks (cpu_smoke.py --small-check, as examples_test.sh runs it), whose
#              torch.distributed all-reduce meets at MASTER_PORT, 29500 on the launcher: the
#              one port of the policy that the hello does not use;
#   no DROP_PORT: ingress and egress both denied by default, both policies applied: the job
#              passes, and the rules dropped nothing of it after the probe (the node pod's
#              egress chain drops the probe);
#   DROP_PORT: the ingress policy alone, without that port (a range: its whole entry); the
#              job must fail, and the launcher's or the node's ingress chain counts the drops.
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
kind=hello; [[ ${1:-} == hello || ${1:-} == deepspeed ]] && { kind=$1; shift; }
drop=${1:-}
job_limit=90s; [[ -z $drop ]] || job_limit=40s
policy="$CIB_DIR/netpol.yaml" trainjob="$CIB_DIR/netpol-trainjob.yaml" rendered="$CIB_DIR/netpol-rendered.json"
kubectl kustomize "$here/../../manifests/kubeflow/profile" > "$policy" || fail "kubectl kustomize manifests/kubeflow/profile"
if [[ -z $drop ]]; then
  { echo ---; kubectl kustomize "$here/../../manifests/kubeflow/profile-egress"; } >> "$policy" ||
    fail "kubectl kustomize manifests/kubeflow/profile-egress"
fi
example="$here/../../examples/trainjob-mpi-hello.yaml"
if [[ $kind == deepspeed ]]; then
  example="$CIB_DIR/netpol-smoke.yaml"
  python3 "$here/../examples/cpu_smoke.py" --small-check "$here/../../examples/trainjob-deepspeed.yaml" > "$example" ||
    fail "cpu_smoke.py examples/trainjob-deepspeed.yaml"
fi
python3 -c 'import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
env = job["spec"]["trainer"].setdefault("env", [])
env += [{"name": "TMPI_RENDEZVOUS_TIMEOUT", "value": "30s"}, {"name": "TMPI_TIMEOUT", "value": sys.argv[3]}]
yaml.safe_dump(job, open(sys.argv[2], "w"))' "$example" "$trainjob" "$job_limit" ||
  fail "could not write $trainjob"
python3 "$here/../examples/render.py" "$trainjob" --json > "$rendered" || fail "render.py $trainjob"
for pod in $(pods); do echo "$pod $("$CIB" ips "$pod" | paste -sd,)"; done > "$CIB_DIR/netpol-pods.txt"

launcher=$(launcher_pod) node=$(node_pods | head -n 1)
for pod in $(pods); do
  rules="$CIB_DIR/netpol-$pod.nft"
  python3 "$here/netpol_nft.py" "$policy" "$rendered" "$CIB_DIR/netpol-pods.txt" "$pod" ${drop:+--drop "$drop"} > "$rules" ||
    fail "netpol_nft.py for $pod"
  [[ -s $rules ]] || fail "the NetworkPolicy selects no rule for pod $pod: a default-deny namespace would isolate it"
  # The probe's port (29999, below) counted apart, at the end of each chain: its SYNs go on
  # after the probe gives up, and must not count as the job's.
  sed -i 's/^    counter name dropped_[a-z]* drop$/    tcp dport 29999 counter name dropped_probe drop\n&/
          s/^table inet tmpi_netpol {$/&\n  counter dropped_probe {}/' "$rules"
  ip netns exec "$("$CIB" ns "$pod")" nft -f "$rules" || fail "nft refused the rules for $pod: $(cat "$rules")"
done
# dropped WHAT POD...: the packets that those pods' chains dropped (WHAT: probe, or job: both
# directions, the probe's port aside).
dropped() {
  local what=$1 pod sum=0 n; shift
  for pod in "$@"; do
    for n in $(ip netns exec "$("$CIB" ns "$pod")" nft list counters table inet tmpi_netpol |
               awk -v w="$what" '/counter dropped_/ { c = $2 } /packets/ && (w == "probe") == (c == "dropped_probe") { print $2 }'); do
      sum=$((sum + n))
    done
  done
  echo "$sum"
}

# The rules bite: a port that no rule admits (29999, no listener) times out from the node pod.
launcher_ip=$("$CIB" ip "$launcher")
before=$(dropped probe "$launcher" "$node")
if in_pod "$node" timeout 3 bash -c "exec 3<>/dev/tcp/$launcher_ip/29999" 2>/dev/null; then
  fail "port 29999 of the launcher ($launcher_ip) accepted a connection"
fi
(($(dropped probe "$launcher" "$node") > before)) || fail "a connection to port 29999 of $launcher_ip was not dropped by the rules (refused instead?)"
pass "the rules drop what the policy does not admit (port 29999 of $launcher_ip from $node)"

log="$CIB_DIR/netpol-examples.log" rc=0
base=$(dropped job $(pods))
TMPI_EXAMPLES_TRAINJOB=$trainjob TMPI_EXAMPLES_KEEP_NODES=1 "$here/examples_test.sh" "$kind" runtime > "$log" 2>&1 || rc=$?
drops=$(($(dropped job $(pods)) - base))
if [[ -z $drop ]]; then
  ((rc == 0)) || { tail -n 40 "$log" >&2; fail "the $kind TrainJob failed under the NetworkPolicy (exit $rc)"; }
  ((drops == 0)) || fail "the job passed, but the rules dropped $drops packets of it"
  pass "the $kind TrainJob ran under the package's NetworkPolicies, ingress and egress, over $launcher_ip, nothing of it dropped"
else
  ((rc != 0)) || fail "the $kind TrainJob passed with port $drop missing from the NetworkPolicy"
  ((drops > 0)) || { tail -n 20 "$log" >&2; fail "the job failed with port $drop dropped, but no packet was dropped"; }
  # The launcher must be what failed it (a deadline or a refusal it names), not the harness.
  why=$(grep -m1 -o 'mpi-launcher error: .*' "$log") ||
    { tail -n 20 "$log" >&2; fail "the job failed with port $drop dropped, but mpi-launcher named no error"; }
  pass "without port $drop the job fails ($drops packets dropped): ${why:0:300}"
fi
