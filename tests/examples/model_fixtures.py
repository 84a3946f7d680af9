"""model_fixtures.py: small synthetic runtimes and TrainJobs for the model's rule tests.

Design: each rule test builds the least input that exercises its rule: `runtime()` is an
MPI ClusterTrainingRuntime with a `launcher` job (the trainer step) and a `node` job, each
with one main container named `node`; keyword arguments change the parts a test is about,
and `job()` finds a replicated job again. Both pass through the CRDs' defaults
(crd_schema), as the apiserver would give them to Trainer, so the tests see the values
Trainer sees (mpiImplementation OpenMPI, replicas 1, ...). `package(overlay)` is what
`kubectl kustomize manifests/<overlay>` prints, as a user would apply it; `examples()` is
examples/ (the TrainJobs) with the runtimes of one overlay of that package.
"""
import copy
import functools
import glob
import os
import subprocess

import yaml

import crd_schema

SCHEMAS = crd_schema.Schemas()
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXAMPLES, MANIFESTS = os.path.join(ROOT, "examples"), os.path.join(ROOT, "manifests")
DEFAULT_OVERLAY = "trainer-v2.3"  # README.md's install: images from a registry
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def container(name="node", **fields):
    return {"name": name, "image": "img", **fields}


def rjob(name, containers=None, init=None, trainer=False, parallelism=None, **pod):
    spec = {"template": {"spec": {"containers": containers or [container()], **pod}}}
    if init:
        spec["template"]["spec"]["initContainers"] = init
    if parallelism is not None:
        spec["parallelism"] = parallelism
    template = {"spec": spec}
    if trainer:
        template["metadata"] = {"labels": {ANCESTOR: "trainer"}}
    return {"name": name, "template": template}


def runtime(jobs=None, num_nodes=None, launcher_as_node=False, slots=None, ssh_path=None, labels=None,
            network=None, **jobset_spec):
    mpi = {"runLauncherAsNode": launcher_as_node}
    if slots is not None:
        mpi["numProcPerNode"] = slots
    if ssh_path:
        mpi["sshAuthMountPath"] = ssh_path
    ml = {"mpi": mpi}
    if num_nodes is not None:
        ml["numNodes"] = num_nodes
    spec = {"replicatedJobs": jobs if jobs is not None else [rjob("launcher", trainer=True), rjob("node")],
            **jobset_spec}
    if network:
        spec["network"] = network
    doc = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
           "metadata": {"name": "rt", "labels": labels or {}}, "spec": {"mlPolicy": ml, "template": {"spec": spec}}}
    return SCHEMAS.apply_defaults(doc)


def trainjob(name="tj", namespace="ns", **trainer):
    doc = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": name, "namespace": namespace}, "spec": {"runtimeRef": {"name": "rt"}}}
    if trainer:
        doc["spec"]["trainer"] = copy.deepcopy(trainer)
    return SCHEMAS.apply_defaults(doc)


def job(jobset, name):
    return next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == name)


def pod_spec(jobset, name):
    return job(jobset, name)["template"]["spec"]["template"]["spec"]


def named(items, name):
    return next(i for i in items if i["name"] == name)


def overlays():
    """Every kustomization of manifests/ (base, the overlays, kubeflow/profile), as paths under it."""
    found = glob.glob(os.path.join(MANIFESTS, "**", "kustomization.yaml"), recursive=True)
    return sorted(os.path.relpath(os.path.dirname(path), MANIFESTS) for path in found)


def runtime_overlays():
    return [o for o in overlays() if any(d["kind"] == "ClusterTrainingRuntime" for d in package(o))]


@functools.lru_cache(maxsize=None)
def _kustomize(directory):
    run = subprocess.run(["kubectl", "kustomize", directory], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {directory} failed: {run.stderr.strip()}")
    return tuple(doc for doc in yaml.safe_load_all(run.stdout) if doc)


def package(overlay=DEFAULT_OVERLAY, root=MANIFESTS):
    """The documents `kubectl kustomize manifests/<overlay>` prints (fresh copies)."""
    return copy.deepcopy(list(_kustomize(os.path.join(root, overlay))))


def examples(overlay=DEFAULT_OVERLAY):
    """[(file, document)]: examples/ in file order, then the runtimes of manifests/<overlay>."""
    out = []
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.yaml"))):
        with open(path) as stream:
            out += [("examples/" + os.path.basename(path), doc) for doc in yaml.safe_load_all(stream) if doc]
    return out + [(f"manifests/{overlay}", doc) for doc in package(overlay)]
