#!/usr/bin/env python3
"""pod_command.py: one container of an examples/ runtime, as the cluster in a box runs it.

Prints JSON {"argv": [...], "env": {...}} for the container CONTAINER of the replicated job
ROLE: its command (a TrainJob's trainer.command replaces the launcher's "node" container's,
as Trainer does), its env with downward-API fields resolved from --field, `$(VAR)` expanded
as the kubelet does, and every path under one of its volumeMounts moved to the folder that
--volume gives for that volume. Nothing else is changed, so the test runs the manifest's
own commands.

usage: pod_command.py RUNTIME.yaml ROLE CONTAINER [--trainjob T.yaml] [--volume NAME=DIR]...
                      [--field PATH=VALUE]...
"""
import argparse
import json
import re
import sys

import yaml


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("runtime")
    parser.add_argument("role")
    parser.add_argument("container")
    parser.add_argument("--trainjob", default="")
    parser.add_argument("--volume", action="append", default=[])
    parser.add_argument("--field", action="append", default=[])
    args = parser.parse_args()
    runtime = next(d for d in yaml.safe_load_all(open(args.runtime)) if d and d["kind"] == "ClusterTrainingRuntime")
    job = next(j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == args.role)
    pod = job["template"]["spec"]["template"]["spec"]
    container = next(c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == args.container)
    command = container.get("command", []) + container.get("args", [])
    if args.trainjob and args.container == "node" and args.role == "launcher":
        trainjob = yaml.safe_load(open(args.trainjob))
        command = trainjob["spec"]["trainer"].get("command", command)

    volumes = dict(v.split("=", 1) for v in args.volume)
    mounts = sorted(((m["mountPath"].rstrip("/"), volumes[m["name"]]) for m in container.get("volumeMounts", [])),
                    key=lambda pair: -len(pair[0]))  # the deepest mount wins

    def move(text):
        for mount, folder in mounts:
            if text == mount or text.startswith(mount + "/"):
                return folder + text[len(mount):]
        return text

    fields = dict(f.split("=", 1) for f in args.field)
    env = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = move(item["value"])
        else:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            if path not in fields:
                sys.exit(f"pod_command.py: {item['name']} needs --field {path}=VALUE")
            env[item["name"]] = fields[path]

    def expand(text):
        return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), text)

    print(json.dumps({"argv": [move(expand(word)) for word in command], "env": env}))


if __name__ == "__main__":
    main()
