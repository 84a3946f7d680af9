#!/usr/bin/env bash
# The degraded-fabric matrix: `mpi-launcher run --wait ssh --check mpi -- true` over 1
# launcher and 3 node pods of 2 slots, at nccl-check's defaults (no size, threshold or
# timeout flag), with one fault on the fabric per row. Each row must name exactly the
# faulty host or link, or say that it cannot ("not localised", with every candidate), and
# never a healthy host alone; the exit code is the fault's (69); the row's time is printed
# with its verdict, for README.md's fault table. One row per run:
#   slow-100x   node 2's eth0 shaped to 20 Mbit/s (tbf), ~100x slower than its peers
#   slow-10x    the same at 200 Mbit/s
#   slow-1000x  the same at 2 Mbit/s
#   two-slow    nodes 1 and 2 at 20 Mbit/s both ways: every link has a slow end, node 0's
#               too, so no pair test can tell which hosts are slow; the row must say so
#               (not localised, the three hosts as candidates), and name no host alone
#   drop        every packet between nodes 1 and 2 dropped (nftables), ssh left alone
source "$(dirname "$0")/lib.sh"
row_name=$1
launcher=$(launcher_pod); nodes=($(node_pods))
L="$TMPI_BUILD_DIR/bin/mpi-launcher"
NC="$TMPI_BUILD_DIR/bin/nccl-check"
init_launcher --slots 2
for node in "${nodes[@]}"; do init_node "$node"; done
ns_of() { "$CIB" ns "$1"; }
shape() {  # shape POD RATE: what leaves POD's eth0 at RATE
  ip netns exec "$(ns_of "$1")" tc qdisc add dev eth0 root tbf rate "$2" burst 32kb latency 50ms
}
# shape_both_ways POD RATE: a slow NIC, slow in both directions: POD's eth0 and the bridge's
# end of its veth (what enters POD). A pair test sends both ways in turn, so a link between
# two hosts shaped one way only is twice as slow as a link with one such end: right at the
# default floor (half the reference), a coin flip between "not localised" and a slow link.
shape_both_ways() {
  local ns; ns=$(ns_of "$1")
  shape "$1" "$2"
  ip -n "${ns%-p*}-br" link show "v${ns##*-p}" >/dev/null || fail "no bridge end v${ns##*-p} for $1"
  ip netns exec "${ns%-p*}-br" tc qdisc add dev "v${ns##*-p}" root tbf rate "$2" burst 32kb latency 50ms
}
# drop_between A B: in A's namespace, every packet to or from B, but ssh (the launch of
# mpirun's daemons may go through either pod), is dropped.
drop_between() {
  local peer; peer=$("$CIB" ip "$2")
  ip netns exec "$(ns_of "$1")" nft -f - <<NFT
table inet fabric_fault {
  chain input { type filter hook input priority 0; ip saddr $peer tcp sport != 22 tcp dport != 22 drop; ip saddr $peer meta l4proto udp drop; }
  chain output { type filter hook output priority 0; ip daddr $peer tcp sport != 22 tcp dport != 22 drop; ip daddr $peer meta l4proto udp drop; }
}
NFT
}
program=$NC; kind=""
case $row_name in
  slow-100x) shape "${nodes[2]}" 20mbit; want=("${nodes[2]}") ;;
  slow-10x) shape "${nodes[2]}" 200mbit; want=("${nodes[2]}") ;;
  slow-1000x) shape "${nodes[2]}" 2mbit; want=("${nodes[2]}") ;;
  two-slow) shape_both_ways "${nodes[1]}" 20mbit; shape_both_ways "${nodes[2]}" 20mbit; want=("${nodes[@]}"); kind="not localised" ;;
  drop) drop_between "${nodes[2]}" "${nodes[1]}"; want=("${nodes[1]} <-> ${nodes[2]}") ;;
  *) fail "unknown row $row_name" ;;
esac
t0=$(date +%s%N)
rc=0
out=$(in_pod "$launcher" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 --wait ssh \
        --check mpi --nccl-check "$program" -- true 2>&1) || rc=$?
ms=$(ms_since "$t0")
echo "$out" | grep -E "^# (link|retest|FAIL|TIMEOUT|result|skipped)|^HOST|mpi (host|link|timeout|world|not)" || true
[[ $rc == 69 ]] || fail "$row_name: expected exit 69, got $rc after $ms ms: $out"
# The preflight table's rows of the fabric check: HOST, then "mpi <kind>".
named=$(awk '/^HOST +CHECK +REASON/ { table = 1; next } table && / mpi [a-z]/ { print } !/ mpi [a-z]/ { table = 0 }' <<<"$out" |
          sed -E 's/ +mpi (host|link|timeout|not localised|world|node|gpu|gpu link) .*//' | sort -u)
expected=$(printf '%s\n' "${want[@]}" | sort -u)
[[ $named == "$expected" ]] || fail "$row_name: named [$named], expected [$expected] after $ms ms: $out"
[[ -z $kind ]] || [[ $(grep -c " mpi $kind " <<<"$out") -ge ${#want[@]} ]] || fail "$row_name: not said to be $kind: $out"
(( ms < 90000 )) || fail "$row_name: the verdict took $ms ms, past the stated bound"
pass "row $row_name: named $(tr '\n' ' ' <<<"$named")in $((ms / 1000)).$((ms % 1000 / 100)) s, exit $rc"
