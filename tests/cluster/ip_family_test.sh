#!/usr/bin/env bash
# A job on an IPv6 single-stack cluster (`cib --ip-family ipv6`: no IPv4 on any pod's eth0)
# and on a dual-stack one with IPv6 first (`--ip-family dual`: status.podIP and the hosts
# file's first line are IPv6), every program at its default listen address:
#   - each node's /readyz answers on the pod's IPv6 address, as the kubelet probes it (and,
#     dual-stack, on its IPv4 address too);
#   - the sidecars register with the launcher's coordinator, which they reach by name;
#   - mpi-launcher runs MPI hello (Open MPI) once every host is registered, and its agents are
#     given the coordinator at the launcher's IPv6 address, bracketed, and report there;
#   - the health table (`mpi-launcher hosts`) lists each node at its IPv6 address.
# Usage (under cib run --ip-family ipv6|dual): ip_family_test.sh ipv6|dual
source "$(dirname "$0")/launcher_lib.sh"
family=$case_name
[[ $(cat "$CIB_DIR/ip-family") == "$family" ]] || fail "the cluster is $(cat "$CIB_DIR/ip-family"), not $family"

# The cluster is what it says: IPv6 first everywhere, no IPv4 on eth0 in single-stack.
for pod in "$launcher" "${nodes[@]}"; do
  ipv6=$("$CIB" ip "$pod")
  [[ $ipv6 == fd00:* ]] || fail "$pod's primary address is not IPv6: $ipv6"
  first=$(in_pod "$pod" getent ahosts "$pod.$sub" | awk '{ print $1; exit }')
  [[ $(in_pod "$pod" awk -v n="$pod.$sub" '$2 == n { print $1; exit }' /etc/hosts) == "$ipv6" ]] ||
    fail "$pod's hosts file does not give its IPv6 address first"
  v4=$(ip -n "$("$CIB" ns "$pod")" -4 -o addr show dev eth0)
  if [[ $family == ipv6 ]]; then [[ -z $v4 ]] || fail "$pod has IPv4 in an IPv6-only cluster: $v4"
  else [[ -n $v4 ]] || fail "$pod has no IPv4 in a dual-stack cluster"; fi
  [[ -n $first ]] || fail "$pod.$sub does not resolve in $pod"
done

with_sidecars
# The kubelet's probe: from outside the pod, at the pod's own address.
for node in "${nodes[@]}"; do
  for ip in $("$CIB" ips "$node"); do
    url="http://$ip:29411/readyz"; [[ $ip == *:* ]] && url="http://[$ip]:29411/readyz"
    code=000
    for _ in $(seq 50); do
      code=$(in_pod "$launcher" curl -s -o /dev/null -w '%{http_code}' "$url" || true)
      [[ $code == 200 ]] && break
      sleep 0.2
    done
    [[ $code == 200 ]] || fail "$node's /readyz at $url: $code: $(cat "$CIB_DIR/pods/$node/sidecar.log")"
  done
done
pass "$family: every node's /readyz answers at the pod's addresses ($("$CIB" ips "${nodes[0]}" | paste -sd ' '))"

# Rank 3 holds every rank (the allreduce waits for it) past the agents' start report (2 s):
# each agent then reports its rank's start and exit to the coordinator, at the address given.
probe='echo "coordinator=$TMPI_COORDINATOR rank=$RANK"; if [ "$RANK" = 3 ]; then sleep 2.5; fi
       exec '"$TMPI_BUILD_DIR/tests/cluster/mpi_hello_openmpi"
out=$(launch -- sh -c "$probe" 2>&1) || fail "the run failed: $out"
expect_contains "$out" "allreduce sum 6 over 4 ranks: ok" "MPI hello"
expect_contains "$out" "coordinator=[$("$CIB" ip "$launcher")]:29410 rank=3" "the agents' coordinator"
[[ $(jq -c '[.ranks[] | select(.reported and .state == "exited" and .code == 0) | .rank]' "$report") == '[0,1,2,3]' ]] ||
  fail "the agents did not report over $family: $(jq -c .ranks "$report")"
# Every host registered at its IPv6 address: the coordinator's view, in report.json.
for node in "${nodes[@]}"; do
  [[ $(jq -r --arg n "$node.$sub" '.hosts[] | select(.name == $n) | .address' "$report") == \
     $("$CIB" ip "$node") ]] || fail "$node's address in report.json: $(jq -c .hosts "$report")"
done
for node in "${nodes[@]}"; do wait "$(cat "$CIB_DIR/pods/$node/sidecar.pid")" || fail "the sidecar of $node did not exit 0"; done
pass "$family: the sidecars registered, MPI hello ran under mpi-launcher, the agents had [launcher IPv6]:29410"
