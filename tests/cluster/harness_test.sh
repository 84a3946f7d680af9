#!/usr/bin/env bash
# The cluster in a box itself: each pod has its own hostname, /tmp, address and hosts
# file; ssh between pods works with strict host key checking; a stopped pod's processes
# are gone and its name no longer resolves; a restarted pod comes back.
source "$(dirname "$0")/lib.sh"
sub=$(subdomain)
launcher=$(launcher_pod)
node=$(node_pods | head -n 1)
expect_eq "$(in_pod "$node" hostname)" "$node" "UTS namespace"
in_pod "$node" touch /tmp/only-here
in_pod "$launcher" test ! -e /tmp/only-here || fail "/tmp is shared between pods"
[[ ! -e /tmp/only-here ]] || fail "/tmp of a pod leaked to the host"
expect_eq "$(in_pod "$launcher" getent hosts "$node.$sub" | awk '{print $1}')" "$("$CIB" ip "$node")" "hosts file"
for pod in $(pods); do "$CIB" sshd "$pod"; done
expect_eq "$(in_pod "$launcher" ssh "$node.$sub" hostname)" "$node" "ssh to the node"
# A stopped pod: its sshd dies with it and its name stops resolving.
"$CIB" stop "$node"
[[ -z $(ip netns pids "$("$CIB" ns "$node")" 2>/dev/null) ]] || fail "processes left in the stopped pod"
if in_pod "$launcher" getent hosts "$node.$sub" >/dev/null; then fail "a stopped pod still resolves"; fi
"$CIB" start "$node"
"$CIB" sshd "$node"
expect_eq "$(in_pod "$launcher" ssh "$node" hostname)" "$node" "ssh after restart"
pass "harness: namespaces, hosts, ssh, stop and start"
