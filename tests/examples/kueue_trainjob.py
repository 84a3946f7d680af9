#!/usr/bin/env python3
"""kueue_trainjob.py: the MPI hello TrainJob as Kueue leaves it when it admits the job: it
was created suspended, and Kueue's resume sets `suspend: false` and adds a runtimePatch
(manager kueue.x-k8s.io/manager) with the chosen flavor's nodeSelector and tolerations on
every replicated job, in one update (which Trainer's webhook allows because the TrainJob
was suspended before it: runtime_patches.update_refusal).

Design: the one definition of that shape, for runtime_patches_test.py (the model) and for
the cluster in a box (cluster.examples.kueue runs it through examples_test.sh, by
TMPI_EXAMPLES_TRAINJOB). The box has no scheduler, so the flavor selects nothing there;
what runs is the patched pods that Trainer would make.
usage: kueue_trainjob.py [--suspended] > trainjob.yaml
"""
import copy
import os
import sys

import yaml

KUEUE = "kueue.x-k8s.io/manager"
FLAVOR = {"nodeSelector": {"cloud.example.com/gpu-pool": "h100"},
          "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
HELLO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "trainjob-mpi-hello.yaml")


def pod_patch(job, **pod):
    return {"name": job, "template": {"spec": {"template": {"spec": pod}}}}


def kueue_patch(**pod):
    return {"manager": KUEUE, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        pod_patch("launcher", **pod), pod_patch("node", **pod)]}}}}


def hello(**spec):
    with open(HELLO) as stream:
        job = next(d for d in yaml.safe_load_all(stream) if d and d.get("kind") == "TrainJob")
    job["spec"].update(copy.deepcopy(spec))
    return job


def queued():
    return hello(suspend=True)


def admitted():
    return hello(suspend=False, runtimePatches=[kueue_patch(**FLAVOR)])


if __name__ == "__main__":
    yaml.safe_dump(queued() if sys.argv[1:] == ["--suspended"] else admitted(), sys.stdout, sort_keys=False)
