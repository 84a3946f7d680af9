#!/usr/bin/env python3
"""render.py: a TrainJob (examples/, or one a test made) as Trainer v2.3.0 and JobSet v0.12.0 would make it, for
scripts (the cluster in a box) that must start the same pods with the same files.

Design: a thin command line over crd_schema (CRD defaults, and every input validated against
its CRD, CEL rules included, as the apiserver would), trainer_model.render and
jobset_model (webhook, Jobs, pods); it prints one of the rendered things and nothing else,
so a shell script can take the hostfile, the pod names or the whole pods from it:
  --hostfile   the hostfile ConfigMap's content, as Trainer writes it
  --pods       one line per pod: replicated job, pod hostname, FQDN (hostname.subdomain)
  --json       {"jobset", "secret", "configmap" (the hostfile's), "hostfile", "pods", "slots"} as JSON
usage: render.py TRAINJOB.yaml [RUNTIME.yaml] [--overlay DIR] (--hostfile | --pods | --json)
The runtime is the one the TrainJob's runtimeRef names in `kubectl kustomize
manifests/<overlay>` (default trainer-v2.3, README.md's install), unless a file is given.
"""
import argparse
import copy
import json
import os
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobset_model as jm  # noqa: E402
import trainer_model as tm  # noqa: E402
from model_fixtures import DEFAULT_OVERLAY, SCHEMAS, package  # noqa: E402


def load(path, kind):
    with open(path) as stream:
        docs = [d for d in yaml.safe_load_all(stream) if d and d.get("kind") == kind]
    if len(docs) != 1:
        sys.exit(f"render.py: {path} holds {len(docs)} {kind} documents; expected 1")
    return docs[0]


def admitted(doc):
    """doc with its CRD's defaults, after the apiserver's checks (schema and CEL rules):
    what the apiserver refuses never reaches the model."""
    doc = SCHEMAS.apply_defaults(copy.deepcopy(doc))
    errors = SCHEMAS.validate(doc)
    if errors:
        raise tm.Rejected(f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}", "; ".join(errors))
    return doc


def render(trainjob, runtime):
    out = tm.render(admitted(trainjob), admitted(runtime))
    js = jm.admit(SCHEMAS.apply_defaults(out["jobset"]))
    errors = SCHEMAS.validate(js)
    if errors:
        sys.exit("render.py: the rendered JobSet fails its CRD: " + "; ".join(errors))
    for job in jm.jobs(js):
        jm.check_job(job)
    return {**out, "jobset": js, "pods": jm.pods(js), "configmap": out["hostfile"],
            "hostfile": out["hostfile"]["data"]["hostfile"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trainjob")
    parser.add_argument("runtime", nargs="?")
    parser.add_argument("--overlay", default=DEFAULT_OVERLAY, help="a kustomization under manifests/")
    what = parser.add_mutually_exclusive_group(required=True)
    for name in ("--hostfile", "--pods", "--json"):
        what.add_argument(name, action="store_true")
    args = parser.parse_args()
    trainjob = load(args.trainjob, "TrainJob")
    if args.runtime:
        runtime = load(args.runtime, "ClusterTrainingRuntime")
    else:
        name = trainjob["spec"]["runtimeRef"]["name"]
        try:
            docs = package(args.overlay)
        except RuntimeError as error:
            sys.exit(f"render.py: {error}")
        found = [d for d in docs if d["kind"] == "ClusterTrainingRuntime" and d["metadata"]["name"] == name]
        if not found:
            sys.exit(f"render.py: no ClusterTrainingRuntime {name} in manifests/{args.overlay}")
        runtime = found[0]
    try:
        out = render(trainjob, runtime)
    except (tm.Rejected, tm.NotModeled, jm.Rejected) as error:
        sys.exit(f"render.py: {type(error).__name__}: {error}")
    if args.hostfile:
        sys.stdout.write(out["hostfile"])
    elif args.pods:
        for pod in out["pods"]:
            print(pod["replicatedJob"], pod["spec"]["hostname"], jm.fqdn(pod))
    else:
        print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
