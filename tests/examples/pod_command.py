#!/usr/bin/env python3
"""pod_command.py: one pod of a rendered TrainJob, as the cluster in a box runs it.

Reads RENDERED (render.py --json: the pods as Trainer v2.3 and JobSet make them, so a
TrainJob's command, Trainer's own env and its Secret and ConfigMap mounts are in) and prints
JSON for the pod whose hostname is POD:
  volumes  [{name, dir, kind, source, files: [{key, path, mode}]}]: each volume's folder (a
           volume mounted under /root, root's home as the pods run as uid 0, goes to the same
           place under --home, which is root's home in that pod; any other to --volumes/NAME)
           and, for a Secret or ConfigMap, the files the kubelet shows, with their modes
           (jobset_model.volume_files); a PersistentVolumeClaim is one folder that every pod
           shares, CLAIMS/<claimName> (default: the box's folder above the pods', claims/); a
           projected service-account token, kind projected, no files (no API server here)
  argv, env  with CONTAINER: its command and args, its env with downward-API fields taken
           from the pod's own metadata, `$(VAR)` expanded as the kubelet does, and every path
           under one of its volumeMounts moved to that volume's folder. Nothing else is
           changed, so the test runs the rendered pod's own commands.

usage: pod_command.py RENDERED.json POD [CONTAINER] --home DIR --volumes DIR [--claims DIR]
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobset_model as jm  # noqa: E402

FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def field(pod, path):
    """A downward-API fieldRef; the ones these runtimes use (K:core/v1 ObjectFieldSelector)."""
    if path == "metadata.name":
        return pod["metadata"]["name"]
    match = FIELD.search(path)
    if not match or match.group(2) not in pod["metadata"].get(match.group(1), {}):
        sys.exit(f"pod_command.py: fieldRef {path} is not modelled or not on pod {pod['spec']['hostname']}")
    return pod["metadata"][match.group(1)][match.group(2)]


def volumes(pod, home, folder, claims=None):
    spec, out = pod["spec"], []
    mounts = [m for c in spec.get("initContainers", []) + spec["containers"] for m in c.get("volumeMounts", [])]
    for volume in spec.get("volumes", []):
        under_home = [m["mountPath"] for m in mounts if m["name"] == volume["name"]
                      and m["mountPath"].startswith("/root/")]
        entry = {"name": volume["name"], "dir": home + under_home[0][len("/root"):] if under_home
                 else os.path.join(folder, volume["name"])}
        if "emptyDir" in volume:
            entry.update(kind="emptyDir", files=[])
        elif "secret" in volume or "configMap" in volume:
            kind = "secret" if "secret" in volume else "configMap"
            source = volume[kind].get("secretName") or volume[kind].get("name")
            entry.update(kind=kind, source=source, files=[{"path": path, "key": key, "mode": mode} for path, (key, mode)
                                                          in jm.volume_files(spec, volume["name"]).items()])
        elif "persistentVolumeClaim" in volume:  # one volume for every pod that names the claim
            claims = claims or os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(folder)))),
                                            "claims")
            entry.update(kind="persistentVolumeClaim", dir=os.path.join(claims, volume["persistentVolumeClaim"]["claimName"]),
                         files=[])
        elif any("serviceAccountToken" in source for source in volume.get("projected", {}).get("sources", [])):
            # The API token (the launcher's sidecar's): no API server issues one in the box, so the
            # folder is not made and the sidecar finds no token there, as where the kubelet could
            # not get one; tests/cluster/api_token_test.sh plays the token and the API.
            entry.update(kind="projected", files=[])
        else:
            sys.exit(f"pod_command.py: volume {volume['name']}: only emptyDir, secret, configMap, "
                     "persistentVolumeClaim and a projected service-account token are modelled")
        out.append(entry)
    return out


def container(pod, name, dirs):
    spec = pod["spec"]
    found = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == name]
    if not found:
        sys.exit(f"pod_command.py: pod {spec['hostname']} has no container {name}")
    c = found[0]
    mounts = sorted(((m["mountPath"].rstrip("/"), dirs[m["name"]]) for m in c.get("volumeMounts", [])),
                    key=lambda pair: -len(pair[0]))  # the deepest mount wins

    def move(text):
        for mount, folder in mounts:
            if text == mount or text.startswith(mount + "/"):
                return folder + text[len(mount):]
        return text

    env = {}

    def expand(text):
        return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), text)

    for item in c.get("env", []):  # in order: a value may name the variables before it
        if "value" in item:
            env[item["name"]] = move(expand(item["value"]))
        else:
            env[item["name"]] = field(pod, item["valueFrom"]["fieldRef"]["fieldPath"])
    command = (c.get("command") or []) + (c.get("args") or [])
    return {"argv": [move(expand(word)) for word in command], "env": env}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("rendered")
    parser.add_argument("pod")
    parser.add_argument("container", nargs="?")
    parser.add_argument("--home", required=True)
    parser.add_argument("--volumes", required=True)
    parser.add_argument("--claims")
    args = parser.parse_args()
    with open(args.rendered) as stream:
        pods = [p for p in json.load(stream)["pods"] if p["spec"]["hostname"] == args.pod]
    if len(pods) != 1:
        sys.exit(f"pod_command.py: {len(pods)} rendered pods have the hostname {args.pod}")
    out = {"volumes": volumes(pods[0], args.home.rstrip("/"), args.volumes, args.claims)}
    if args.container:
        out.update(container(pods[0], args.container, {v["name"]: v["dir"] for v in out["volumes"]}))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
