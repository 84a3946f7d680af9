#!/usr/bin/env bash
# Name lookups from the bundle agree with the image's own programs (docs/design.md, "The
# bundle", "Name lookups"): our glibc 2.36 reads the image's nsswitch.conf, hosts and
# resolv.conf, as the image's C library does, as a uid with no passwd entry.
#
# The pods get what a kubelet gives a JobSet's pod with dnsPolicy ClusterFirst, and a DNS
# server stands for kube-dns:
# - resolv.conf: `search <ns>.svc.<domain> svc.<domain> <domain>`, the cluster DNS as the
#   only nameserver, `options ndots:5` (kubernetes/kubernetes pkg/kubelet/network/dns/dns.go:
#   GetPodDNS, generateSearchesForDNSClusterFirst, defaultDNSOptions). No search domain for
#   the pod's subdomain: a JobSet's short host name `<pod>.<subdomain>` resolves only as
#   `<pod>.<subdomain>.<ns>.svc.<domain>`, through the first search domain (ndots:5 tries the
#   search list before the name as given).
# - hosts: the kubelet's managed file, which names the pod itself and no other pod
#   (pkg/kubelet/kubelet_pods.go: managedHostsFileContent, "IP\t<host>.<hostDomain>\t<host>"
#   with hostDomain "<subdomain>.<ns>.svc.<domain>" from GeneratePodHostNameAndDomain), then
#   the hostAliases' entries.
# - DNS: dnsmasq (Debian's dnsmasq-base) in a network namespace of this test's own, on the
#   pods' bridge, with the headless Service's names of the pods (their FQDNs) and nothing
#   else: --no-resolv --no-hosts, and --address=/#/ answers NXDOMAIN for every other name.
#   It logs each query, so that the names each program asked for, in order, are compared too.
# Compared, in the launcher pod, as uid 1000740000 with no passwd entry: the image's own lookup
# (`getent ahosts` in a Debian root; busybox's wget, whose "Connecting to NAME:PORT (IP:PORT)"
# comes from the static glibc's getaddrinfo, in the busybox root) with ours: mpi-ssh-client
# from the bundle connecting by that name to an mpi-sshd (started from the job key as the
# node's main container runs it) that echoes $SSH_CONNECTION, whose third field is the
# address our process resolved and connected to. The names: a peer's `<pod>.<subdomain>`
# (DNS, search and ndots), the pod's own name (hosts), a hostAliases name (hosts alone: DNS
# does not know it), and a pod that does not exist (both fail). Then the search line is
# removed: the peer's short name must fail for both, or the first check proved nothing.
# A root with no /etc/nsswitch.conf (busybox): glibc takes its built-in default for hosts,
# nss_database_default_dns (nss/nss_database.c, nss_database_select_default), which is
# "files dns" in the bundle's glibc 2.36 and in busybox-static's (statically linked 2.36): the
# hosts file first, as here. Debian 11's glibc 2.31 carries the older "dns [!UNAVAIL=return]
# files", under which a name of the hosts file is not found once a DNS server answers NXDOMAIN;
# its root, as trixie's, lists "hosts: files dns", which both C libraries read.
# TMPI_NAMES_DEBUG=1: the DNS server's log of each lookup, on stderr.
# Usage: bundle_names_test.sh IMAGE (debian11, trixie, busybox). Outside a cluster it makes
# the root, then runs itself under `cib run --root ROOT --bundle BUNDLE` (TMPI_BUNDLE: default
# $TMPI_BUILD_DIR/trainer-mpi).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${1:?usage: bundle_names_test.sh IMAGE}
case $image in
  debian11) root_name=bullseye-ompi4 ;;
  trixie) root_name=trixie-ompi5 ;;
  busybox) root_name=busybox ;;
  *) echo "bundle_names_test: unknown image '$image' (debian11, trixie, busybox)" >&2; exit 2 ;;
esac
if [[ -z ${CIB_DIR:-} ]]; then
  : "${TMPI_BUILD_DIR:?set by ctest: the build folder with the project binaries}"
  command -v dnsmasq >/dev/null || { echo "bundle_names_test: needs dnsmasq (Debian package dnsmasq-base; scripts/install-deps.sh)" >&2; exit 2; }
  root=$(bash "$here/image_root.sh" "$root_name")
  exec "$here/cib" run --jobset train --nodes 1 --root "$root" --bundle "${TMPI_BUNDLE:-$TMPI_BUILD_DIR/trainer-mpi}" -- "$0" "$@"
fi

uid=1000740000
export TMPI_BIN=/opt/trainer-mpi/bin TMPI_NODE_SERVER=mpi-sshd CIB_EXEC_USER="$uid:0:0,$uid"
source "$here/lib.sh"
mode="$image as uid $uid"
namespace=default domain=cluster.local sub=$(subdomain)
self=$(launcher_pod) peer=$(node_pods | head -n 1)
self_ip=$("$CIB" ip "$self") peer_ip=$("$CIB" ip "$peer")
dns_ip=198.18.99.53  # on the pods' /16, outside the addresses cib gives (x.0-99.y: generation 0)
alias_name=shared-storage  # a hostAliases entry, with the peer's address
missing=$sub-node-0-9.$sub  # a pod of the JobSet that does not exist
work=$CIB_DIR/names
mkdir -p "$work"

# --- The DNS server: its own network namespace on the pods' bridge, this run's prefix ---
prefix=$(cat "$CIB_DIR/prefix")
dns_ns=$prefix-dns dns_pid=""
cleanup() {
  if [[ -n $dns_pid ]]; then kill "$dns_pid" 2>/dev/null || true; wait "$dns_pid" 2>/dev/null || true; fi
  ip netns del "$dns_ns" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$dns_ns"
ip -n "$dns_ns" link add eth0 type veth peer name vdns netns "$prefix-br"
ip -n "$dns_ns" addr add "$dns_ip/16" dev eth0
ip -n "$dns_ns" link set lo up
ip -n "$dns_ns" link set eth0 up
ip -n "$prefix-br" link set vdns master br0 up
records=()
for pod in "$self" "$peer"; do records+=(--host-record="$pod.$sub.$namespace.svc.$domain,$("$CIB" ip "$pod")"); done
dns_log=$work/dnsmasq.log
ip netns exec "$dns_ns" dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --user=root \
  --listen-address="$dns_ip" --bind-interfaces --address=/#/ "${records[@]}" \
  --log-queries --log-facility="$dns_log" --pid-file= >"$work/dnsmasq.out" 2>&1 &
dns_pid=$!
for _ in $(seq 100); do grep -q "started" "$dns_log" 2>/dev/null && break; sleep 0.05; done
grep -q "started" "$dns_log" 2>/dev/null || fail "dnsmasq did not start: $(cat "$work/dnsmasq.out" "$dns_log" 2>/dev/null)"

# --- The pods' hosts and resolv.conf, as the kubelet writes them (in place: bound inodes) ---
# write_resolv [SEARCH]: every pod's resolv.conf, with SEARCH (default: ClusterFirst's) or none.
write_resolv() {
  local search=${1-"$namespace.svc.$domain svc.$domain $domain"} pod
  for pod in "$self" "$peer"; do
    { [[ -z $search ]] || echo "search $search"; echo "nameserver $dns_ip"; echo "options ndots:5"; } \
      > "/etc/netns/$("$CIB" ns "$pod")/resolv.conf"
  done
}
write_resolv
for pod in "$self" "$peer"; do
  printf '# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n%s\t%s.%s.%s.svc.%s\t%s\n\n# Entries added by HostAliases.\n%s\t%s\n' \
    "$("$CIB" ip "$pod")" "$pod" "$sub" "$namespace" "$domain" "$pod" "$peer_ip" "$alias_name" \
    > "/etc/netns/$("$CIB" ns "$pod")/hosts"
done
[[ -z $(in_pod "$self" sh -c "grep ':$uid:' /etc/passwd" || true) ]] || fail "$mode: uid $uid has a passwd entry"
[[ -z $(in_pod "$self" sh -c "grep -w '$peer' /etc/hosts" || true) ]] || fail "$mode: the peer is in the hosts file"
if [[ $image == busybox ]]; then
  [[ ! -e $CIB_DIR/pods/$self/image/root/etc/nsswitch.conf ]] || fail "the busybox root has an nsswitch.conf"
else
  expect_eq "$(in_pod "$self" sh -c "grep '^hosts:' /etc/nsswitch.conf | tr -s ' \t' ' '")" "hosts: files dns" "$mode: the image's nsswitch.conf"
fi

# --- mpi-sshd from the job key on both pods (the pod's own name is reached on its own) ---
for pod in "$self" "$peer"; do chown -R "$uid:0" "$CIB_DIR/pods/$pod/home"; done
mkdir -p "$SECRET"
ssh-keygen -q -t ed25519 -N '' -C job -f "$work/job-key"
cp "$work/job-key" "$SECRET/ssh-privatekey"; cut -d' ' -f1,2 "$work/job-key.pub" > "$SECRET/ssh-publickey"
chmod 444 "$SECRET"/*; chmod 555 "$SECRET"
for pod in "$self" "$peer"; do init_node "$pod"; done
known=$work/known_hosts
host_key=$(cut -d' ' -f1,2 "$CIB_DIR/pods/$self/home/.ssh/ssh_host_ed25519_key.pub")  # derived from the job key
for name in "$peer.$sub" "$self" "$alias_name" "$missing"; do echo "[$name]:2222 $host_key"; done > "$known"
chown "$uid:0" "$work/job-key" "$known"

# --- The lookups: each prints the address, or "fails: WHY" ---
# image_lookup NAME: the image's own program, in the pod.
image_lookup() {
  local out rc=0
  if [[ $image == busybox ]]; then
    # wget resolves (getaddrinfo), says "Connecting to NAME:PORT (IP:PORT)", then finds port 9
    # closed. Not its -T: busybox 1.35.0 (Debian 12) wget -T segfaults on a lookup through DNS.
    out=$(in_pod "$self" timeout 10 wget -O /dev/null "http://$1:9/" 2>&1) || rc=$?
    if [[ $out =~ "Connecting to $1:9 ("([^\)]*):9")" ]]; then echo "${BASH_REMATCH[1]}"; else echo "fails: exit $rc: $(head -n 1 <<<"$out")"; fi
  else
    out=$(in_pod "$self" getent ahosts "$1" 2>&1) || rc=$?
    if ((rc == 0)); then awk '{ print $1 }' <<<"$out" | sort -u | paste -sd ' '; else echo "fails: getent exit $rc"; fi
  fi
}
# ours_lookup NAME: the bundle's mpi-ssh-client to the mpi-sshd at NAME; the server's address.
ours_lookup() {
  local out rc=0
  # shellcheck disable=SC2016  # expanded by the server's sh
  out=$(in_pod "$self" timeout 20 mpi-ssh-client -F /dev/null -p 2222 -i "$work/job-key" -l "u$uid" \
    -o UserKnownHostsFile="$known" -o StrictHostKeyChecking=yes "$1" 'echo "$SSH_CONNECTION"' 2>&1) || rc=$?
  if ((rc == 0)); then awk '{ print $3 }' <<<"$out"; else echo "fails: $(head -n 1 <<<"$out")"; fi
}
# asked: the names queried of the DNS server since the last call, each once, in the order first
# asked (a C library may go through the list twice: Debian 11's getent does, for a missing name).
log_seen=0
asked() {
  local lines=-1 now
  while now=$(wc -l < "$dns_log") && [[ $now != "$lines" ]]; do lines=$now; sleep 0.3; done  # logged after the answer
  [[ -z ${TMPI_NAMES_DEBUG:-} ]] || sed -n "$((log_seen + 1)),${lines}p" "$dns_log" >&2
  sed -n "$((log_seen + 1)),${lines}p" "$dns_log" | sed -n 's/.* query\[[A-Z]*\] \([^ ]*\) from .*/\1/p' | awk '!seen[$0]++' | paste -sd ' '
  log_seen=$lines
}
# compare NAME EXPECTED: both lookups, and the DNS queries each made. EXPECTED: an address, or "fails".
compare() {
  local name=$1 want=$2 theirs ours theirs_asked ours_asked
  asked >/dev/null
  theirs=$(image_lookup "$name"); theirs_asked=$(asked)
  ours=$(ours_lookup "$name"); ours_asked=$(asked)
  printf '%-38s image: %-16s ours: %-16s asked: %s\n' "$name" "${theirs%%:*}" "${ours%%:*}" "${ours_asked:-(none)}"
  if [[ $want == fails ]]; then
    [[ $theirs == fails* ]] || fail "$mode: $name: the image's lookup found $theirs"
    [[ $ours == fails* ]] || fail "$mode: $name: ours found $ours"
  else
    expect_eq "$theirs" "$want" "$mode: $name, the image's lookup"
    expect_eq "$ours" "$want" "$mode: $name, ours (mpi-ssh-client's connection)"
  fi
  expect_eq "$ours_asked" "$theirs_asked" "$mode: $name, the names ours asked the DNS server for (the image's first)"
  last_asked=$ours_asked
}

# 1. A peer's short name: through the first search domain, ndots:5 trying the list first.
compare "$peer.$sub" "$peer_ip"
expect_eq "$last_asked" "$peer.$sub.$namespace.svc.$domain" "$mode: the DNS queries for $peer.$sub"
# 2. The pod's own name, and 3. a hostAliases name: the hosts file, and no DNS query at all.
compare "$self" "$self_ip"
expect_eq "$last_asked" "" "$mode: the DNS queries for $self"
compare "$alias_name" "$peer_ip"
expect_eq "$last_asked" "" "$mode: the DNS queries for $alias_name"
# 4. A pod that does not exist: both fail, after the same queries (the three search domains,
# then the name as given).
compare "$missing" fails
expect_eq "$last_asked" "$missing.$namespace.svc.$domain $missing.svc.$domain $missing.$domain $missing" "$mode: the DNS queries for $missing"
pass "$mode: the image's lookup and the bundle's agree: a peer's short name through the search domains, the pod's own name and a hostAliases name from /etc/hosts, a missing pod fails"

# Without the search line, the peer's short name is only the name as given: both fail.
write_resolv ""
compare "$peer.$sub" fails
pass "$mode: without the pod's search domains, the peer's short name fails for both"
