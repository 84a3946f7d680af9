#!/usr/bin/env python3
"""netpol_nft.py: a NetworkPolicy as nftables rules for one pod of the cluster in a box, the
way a CNI enforces it (Calico, Cilium and kube-router do the same in the pod's path).

Design: the semantics are Kubernetes' (K: staging/src/k8s.io/api/networking/v1/types.go,
NetworkPolicySpec): a pod that some policy's podSelector selects is isolated for each
direction in that policy's policyTypes (default: Ingress, and Egress too where the policy
has egress rules); then only connections that one rule of that direction admits pass, an
ingress rule admitting from any of its peers (`from`) and an egress rule to any of its peers
(`to`; none means every address), each to any of its ports (none means every port;
`endPort` makes a range). Replies to admitted connections, and a pod's traffic to itself,
always pass. A podSelector peer (no namespaceSelector: the policy's own namespace, which is
the box's one namespace) is the set of addresses of the pods whose labels it matches, from
the rendered pods (render.py --json) and the box's addresses (every address of each pod, so
IPv4 and IPv6 alike: `ip` and `ip6` rules). Only matchLabels selectors, numbered TCP and UDP
ports and podSelector peers are translated; a policy with anything else is refused, never
half enforced.

usage: netpol_nft.py POLICY.yaml RENDERED.json PODS.txt POD [--drop PORT]
  PODS.txt: "name address[,address...]" lines (`cib ips`); POD: the pod whose rules are printed;
  --drop PORT: the policies without that port (the test that the job then fails).
Prints an nft script (`nft -f -`) for POD's network namespace: a chain per direction that a
policy isolates, each counting what it drops (counter dropped_ingress, dropped_egress); or
nothing if no policy selects POD.
"""
import argparse
import json
import sys

import yaml


def refuse(message):
    sys.exit(f"netpol_nft.py: {message}")


def matches(selector, labels):
    if set(selector) - {"matchLabels"}:
        refuse(f"selector {selector}: only matchLabels is translated")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def port_sets(ports, drop):
    """{protocol: ["port" or "low-high", ...]}; empty when every port was dropped."""
    out = {}
    for port in ports:
        protocol = port.get("protocol", "TCP")
        if protocol not in ("TCP", "UDP") or not isinstance(port.get("port"), int):
            refuse(f"port {port}: only numbered TCP and UDP ports are translated")
        low, high = port["port"], port.get("endPort", port["port"])
        if drop is not None and low <= drop <= high:
            continue  # the policy without this port (a range: the whole entry)
        out.setdefault(protocol.lower(), []).append(str(low) if low == high else f"{low}-{high}")
    return out


def peer_addresses(peers, labels_of, address_of):
    """The addresses of the pods that the peers select; None when there are no peers (any)."""
    if not peers:
        return None
    out = set()
    for peer in peers:
        if set(peer) != {"podSelector"}:
            refuse(f"peer {peer}: only podSelector peers are translated")
        out |= {a for p, labels in labels_of.items() if matches(peer["podSelector"], labels)
                for a in address_of.get(p, [])}
    return out


def rules(policy, direction, labels_of, address_of, drop):
    """The accept lines of one policy's rules of one direction (ingress: saddr; egress: daddr)."""
    peers_key, end = ("from", "saddr") if direction == "ingress" else ("to", "daddr")
    out = []
    for rule in policy["spec"].get(direction) or []:
        addresses = peer_addresses(rule.get(peers_key), labels_of, address_of)
        if addresses is not None and not addresses:
            continue  # peers that match no pod admit nothing
        if addresses is None:
            address_matches = [""]
        else:  # one line per family that has addresses
            v6 = sorted(a for a in addresses if ":" in a)
            v4 = sorted(a for a in addresses if ":" not in a)
            address_matches = [f"{family} {end} {{ {', '.join(group)} }} "
                               for family, group in (("ip", v4), ("ip6", v6)) if group]
        if rule.get("ports"):
            ports = port_sets(rule["ports"], drop)
            port_matches = [f"{proto} dport {{ {', '.join(group)} }} " for proto, group in ports.items()]
            if not port_matches:
                continue
        else:
            port_matches = [""]
        out += [f"    {a}{p}accept" for a in address_matches for p in port_matches]
    return out


# IPv6's own control messages, which a CNI lets pass (a NetworkPolicy speaks of TCP, UDP and
# SCTP): neighbour discovery, without which no IPv6 packet finds its next hop, and what a
# link sends from link-local (or, before its address is sure, unspecified) addresses: MLD
# reports, router solicitations. Every pod's eth0 sends those, in an IPv4 cluster too.
NEIGHBOUR_DISCOVERY = ("    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept\n"
                       "    meta l4proto ipv6-icmp ip6 saddr { ::, fe80::/10 } accept")


def policy_types(policy):
    spec = policy["spec"]
    return spec.get("policyTypes") or (["Ingress", "Egress"] if spec.get("egress") else ["Ingress"])


def main():
    parser = argparse.ArgumentParser()
    for name in ("policy", "rendered", "pods", "pod"):
        parser.add_argument(name)
    parser.add_argument("--drop", type=int)
    args = parser.parse_args()
    with open(args.policy) as stream:
        policies = [d for d in yaml.safe_load_all(stream) if d and d.get("kind") == "NetworkPolicy"]
    with open(args.rendered) as stream:
        labels_of = {p["spec"]["hostname"]: p["metadata"].get("labels") or {} for p in json.load(stream)["pods"]}
    with open(args.pods) as stream:
        address_of = {line.split()[0]: line.split()[1].split(",") for line in stream if line.strip()}
    if not policies:
        refuse(f"{args.policy} holds no NetworkPolicy")
    if args.pod not in labels_of:
        refuse(f"pod {args.pod} is not among the rendered pods")
    chains = []
    for direction, hook in (("ingress", "input"), ("egress", "output")):
        body = []
        for policy in policies:
            if direction.capitalize() in policy_types(policy) and matches(policy["spec"]["podSelector"],
                                                                           labels_of[args.pod]):
                body.append(f"    # {policy['metadata']['name']}")
                body += rules(policy, direction, labels_of, address_of, args.drop)
        if body:
            interface = "iif" if direction == "ingress" else "oif"
            chains.append(f"  chain {direction} {{\n    type filter hook {hook} priority 0; policy drop;\n"
                          f"    ct state established,related accept\n    {interface} lo accept\n{NEIGHBOUR_DISCOVERY}\n" +
                          "\n".join(body) +
                          f"\n    counter name dropped_{direction} drop\n  }}")
    if not chains:
        return
    print("table inet tmpi_netpol {\n  counter dropped_ingress {}\n  counter dropped_egress {}")
    print("\n".join(chains))
    print("}")


if __name__ == "__main__":
    main()
