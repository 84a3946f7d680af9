#!/usr/bin/env python3
"""netpol_nft.py: a NetworkPolicy as nftables rules for one pod of the cluster in a box, the
way a CNI enforces it (Calico, Cilium and kube-router do the same in the pod's path).

Design: the semantics are Kubernetes' (K: staging/src/k8s.io/api/networking/v1/types.go):
a pod that some policy's podSelector selects, with Ingress in its policyTypes, is isolated
for ingress; then only connections that one ingress rule admits get in, a rule admitting
from any of its peers (`from`; none means every source) to any of its ports (none means
every port; `endPort` makes a range). Replies to admitted connections, and a pod's traffic
to itself, always pass. A podSelector peer (no namespaceSelector: the policy's own
namespace, which is the box's one namespace) is the set of addresses of the pods whose
labels it matches, from the rendered pods (render.py --json) and the box's addresses
(`cib pods`). Only matchLabels selectors, TCP ports and podSelector peers are translated; a
policy with anything else is refused, never half enforced.

usage: netpol_nft.py POLICY.yaml RENDERED.json PODS.txt POD [--drop PORT]
  PODS.txt: `cib pods` ("name ip state" lines); POD: the pod whose rules are printed;
  --drop PORT: the policy without that port (the test that the job then fails).
Prints an nft script (`nft -f -`) for POD's network namespace, or nothing if no policy
selects POD.
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


def port_set(ports, drop):
    out = []
    for port in ports:
        if port.get("protocol", "TCP") != "TCP" or not isinstance(port.get("port"), int):
            refuse(f"port {port}: only numbered TCP ports are translated")
        low, high = port["port"], port.get("endPort", port["port"])
        if drop is not None and low <= drop <= high:
            continue  # the policy without this port (a range: the whole entry)
        out.append(str(low) if low == high else f"{low}-{high}")
    return out


def rules(policy, labels_of, address_of, drop):
    spec = policy["spec"]
    out = []
    for rule in spec.get("ingress") or []:
        sources = None
        for peer in rule.get("from") or []:
            if set(peer) != {"podSelector"}:
                refuse(f"peer {peer}: only podSelector peers are translated")
            sources = (sources or set()) | {address_of[p] for p, labels in labels_of.items()
                                            if matches(peer["podSelector"], labels) and p in address_of}
        match = ""
        if sources is not None:
            if not sources:
                continue  # peers that match no pod admit nothing
            match += "ip saddr { " + ", ".join(sorted(sources)) + " } "
        if rule.get("ports"):
            ports = port_set(rule["ports"], drop)
            if not ports:
                continue
            match += "tcp dport { " + ", ".join(ports) + " } "
        out.append(f"    {match}accept")
    return out


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
        address_of = {line.split()[0]: line.split()[1] for line in stream if line.strip()}
    if not policies:
        refuse(f"{args.policy} holds no NetworkPolicy")
    if args.pod not in labels_of:
        refuse(f"pod {args.pod} is not among the rendered pods")
    body = []
    for policy in policies:
        if "Ingress" not in policy["spec"].get("policyTypes", ["Ingress"]):
            continue
        if matches(policy["spec"]["podSelector"], labels_of[args.pod]):
            body.append(f"    # {policy['metadata']['name']}")
            body += rules(policy, labels_of, address_of, args.drop)
    if not body:
        return
    print("table inet tmpi_netpol {\n  chain ingress {\n    type filter hook input priority 0; policy drop;\n"
          "    ct state established,related accept\n    iif lo accept")
    print("\n".join(body))
    print("  }\n}")


if __name__ == "__main__":
    main()
