"""runtime_patches.py: a TrainJob's spec.runtimePatches as Kubeflow Trainer v2.3.0 applies them.

Design: three steps, each from its upstream code (`T:` is kubeflow/trainer at v2.3.0, paths
under pkg/):
  validate   the TrainJob webhook's checks of the patches, run by the JobSet plugin
             (T:runtime/framework/plugins/jobset/jobset.go Validate): a domain-prefixed
             manager; replicated jobs, containers and init containers that the runtime has;
             no env on the node (or initializer) containers, since Trainer owns theirs;
  update     checkRuntimePatchesImmutability (same file): patches change only while the
             TrainJob is suspended before or after the update (Kueue's resume sets them and
             suspend: false in one request), and never while a Job of the JobSet is active;
  apply      newRuntimeInfo and mergeRuntimePatches (T:runtime/core/trainingruntime.go):
             each patch's template.metadata labels and annotations join the runtime's (for
             the JobSet), and each template.spec is a strategic merge patch of the runtime's
             JobSetSpec, in order, after which the replicated jobs get the runtime's order
             back. This runs before the plugins, so resourcesPerNode, the MPI plugin and the
             TrainJob's own trainer fields all see the patched spec.
The strategic merge (k8s.io/apimachinery strategicpatch) keys the lists that the API types
tag with a patchMergeKey (MERGE_KEYS below: the JobSet's replicatedJobs by name, a pod's
containers, volumes and the like, a container's env, mounts and ports), replaces every other
list whole (tolerations have no merge key: a patch's tolerations replace the runtime's),
merges maps key by key, and deletes a key whose patch value is null. A `$patch` or other
directive is NotModeled, not guessed.
"""
import copy
import re

from trainer_model import ANCESTOR_CONTAINER, NotModeled, Rejected

PATH = "spec.runtimePatches"
# patchMergeKey of the list fields on the way from JobSetSpec to a container
# (K: core/v1/types.go, jobset api/jobset/v1alpha2/jobset_types.go).
MERGE_KEYS = {"replicatedJobs": "name", "containers": "name", "initContainers": "name",
              "ephemeralContainers": "name", "volumes": "name", "imagePullSecrets": "name",
              "env": "name", "volumeMounts": "mountPath", "ports": "containerPort",
              "volumeDevices": "devicePath", "hostAliases": "ip", "topologySpreadConstraints": "topologyKey"}
# validation.IsDomainPrefixedPath: a DNS-1123 subdomain, then a path.
DOMAIN_PATH = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/\S+")
# Containers whose env a patch may not set (T:…/jobset/jobset.go: initializers and node).
NO_ENV = set(ANCESTOR_CONTAINER.values())


def merge(base, patch, key=None):
    """Strategic merge of patch into base (both plain JSON values); returns a new value."""
    if isinstance(patch, dict):
        if any(k.startswith("$") for k in patch):
            raise NotModeled(f"{PATH}: the strategic merge directive {sorted(k for k in patch if k.startswith('$'))}")
        out = copy.deepcopy(base) if isinstance(base, dict) else {}
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge(out.get(k), v, k)
        return out
    if isinstance(patch, list) and key in MERGE_KEYS and all(isinstance(i, dict) for i in patch):
        field, out = MERGE_KEYS[key], copy.deepcopy(base) if isinstance(base, list) else []
        for item in patch:
            same = [i for i, old in enumerate(out) if old.get(field) == item.get(field)]
            if same:
                out[same[0]] = merge(out[same[0]], item)
            else:
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(patch)


def _pod(rjob):
    return (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")


def validate(trainjob, runtime):
    """The webhook's refusals of trainjob's patches against runtime (Rejected)."""
    names = {}
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = _pod(rjob) or {}
        names[rjob["name"]] = {c["name"] for c in pod.get("containers", []) + pod.get("initContainers", [])}
    for i, patch in enumerate(trainjob["spec"].get("runtimePatches") or []):
        if not DOMAIN_PATH.fullmatch(patch.get("manager", "")):
            raise Rejected(f"{PATH}[{i}].manager", "must be a domain-prefixed path (such as \"acme.io/foo\")")
        for rjob in (((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get(
                "replicatedJobs", []):
            if rjob.get("name") not in names:
                raise Rejected(PATH, "must not have replicated job that doesn't exist in the runtime job template")
            pod = _pod(rjob) or {}
            for kind in ("initContainers", "containers"):
                for c in pod.get(kind, []):
                    if c.get("name") not in names[rjob["name"]]:
                        raise Rejected(PATH, f"must not have {kind[:-1]} that doesn't exist in the runtime job {rjob['name']}")
                    if kind == "containers" and c.get("env") and c["name"] in NO_ENV:
                        raise Rejected(PATH, "must not have envs for the dataset-initializer, model-initializer, node containers")


def update_refusal(old, new, active_jobs=()):
    """Why the apiserver would refuse updating old to new (None: allowed)."""
    if (old["spec"].get("runtimePatches") or []) == (new["spec"].get("runtimePatches") or []):
        return None
    if not old["spec"].get("suspend") and not new["spec"].get("suspend"):
        return f"{PATH}: RuntimePatches can only be modified when the TrainJob is suspended before or after the update"
    if active_jobs:
        return f"{PATH}: RuntimePatches cannot be modified when the JobSet's ReplicatedJob {active_jobs[0]} is still active"
    return None


def apply(trainjob, template):
    """The runtime's template ({metadata, spec}) with trainjob's patches applied."""
    out = copy.deepcopy(template)
    order = {rjob["name"]: i for i, rjob in enumerate(out["spec"]["replicatedJobs"])}
    for patch in trainjob["spec"].get("runtimePatches") or []:
        patched = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        for key in ("labels", "annotations"):
            extra = (patched.get("metadata") or {}).get(key)
            if extra:
                out.setdefault("metadata", {}).setdefault(key, {}).update(extra)
        if patched.get("spec") is not None:
            out["spec"] = merge(out["spec"], patched["spec"])
    out["spec"]["replicatedJobs"].sort(key=lambda rjob: order.get(rjob["name"], len(order)))
    return out
