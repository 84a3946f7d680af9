"""trainer_model.py: what Kubeflow Trainer v2.3.0 makes of a TrainJob and its runtime.

Design: `render(trainjob, runtime)` follows the controller's own steps, in its order, on
plain dicts (the YAML documents, CRD defaults already applied by crd_schema):
  admit      the TrainJob and runtime webhooks (Rejected: what the apiserver would answer)
  podsets    newRuntimeInfo: one PodSet per replicated job, its pod count, and the
             TrainJob's resourcesPerNode merged into the runtime's pod spec
  mpi        the MPI plugin's EnforceMLPolicy: node count, slots, Secret and hostfile
             volumes and mounts, OMPI_MCA_* env
  endpoints  the JobSet plugin's IdentifyPodNetwork: the hosts of the hostfile
  build      SyncParallelCount and Build: the JobSet Trainer applies, the Secret and the
             hostfile ConfigMap.
Every rule cites the upstream file it comes from; `T:` is kubeflow/trainer at v2.3.0
(658725bdae5c7e3a0854d93ac6ff492e109a22ab), paths under pkg/. docs/trainer-rules.md holds
the same rules in prose. What Kubernetes and JobSet then do with the JobSet is in
jobset_model.py. A TrainJob's runtimePatches are validated in admit and applied first in
render, as newRuntimeInfo does (runtime_patches.py). A feature this model does not follow
(initializers, podGroupPolicy, ML policies other than MPI) raises NotModeled instead of
being ignored.
"""
import copy

TRAINER_VERSION = "kubeflow/trainer v2.3.0 @ 658725bd"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"  # T:constants/constants.go LabelTrainJobAncestor
ANCESTOR_CONTAINER = {"trainer": "node", "dataset-initializer": "dataset-initializer",
                      "model-initializer": "model-initializer"}  # T:webhooks/trainingruntime_webhook.go
SECRET_SUFFIX, HOSTFILE_SUFFIX = "-mpi-ssh-auth", "-mpi-hostfile"  # T:constants/constants.go MPI*Suffix
# T:constants/constants.go OpenMPIEnv*; mpi.Validate refuses them in a TrainJob's env.
OMPI_RESERVED = ("OMPI_MCA_orte_default_hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames",
                 "OMPI_MCA_orte_set_default_slots", "OMPI_MCA_plm_rsh_args")


class Rejected(Exception):
    """An admission webhook refuses the object: (field path, message)."""


class NotModeled(Exception):
    """The input uses something this model does not follow."""


def _jobs(runtime):
    return runtime["spec"]["template"]["spec"]["replicatedJobs"]


def _labels(rjob):
    return ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}


def _upsert(items, item, same):
    """T:apply/apply.go upsert: replace the first item `same` matches, else append."""
    for i, old in enumerate(items):
        if same(old, item):
            items[i] = copy.deepcopy(item)
            return
    items.append(copy.deepcopy(item))


def by_name(a, b):
    return a.get("name") == b.get("name")


def by_mount_path(a, b):  # T:apply/apply.go byVolumeMountPath: mounts are keyed by path, not name
    return a.get("mountPath") == b.get("mountPath")


def by_port(a, b):  # T:apply/apply.go byContainerPortOrName
    return a.get("containerPort") == b.get("containerPort") or (a.get("name") and a.get("name") == b.get("name"))


def admit(trainjob, runtime):
    """The runtime's webhook (run when the runtime is created) and the TrainJob's, which asks
    the runtime's plugins (T:webhooks/trainjob_webhook.go, T:runtime/core/*.go ValidateObjects)."""
    spec, trainer = runtime["spec"], trainjob["spec"].get("trainer") or {}
    if trainjob["spec"].get("initializer"):
        raise NotModeled("spec.initializer")
    import runtime_patches  # here: it imports this module's names
    runtime_patches.validate(trainjob, runtime)
    if spec.get("podGroupPolicy"):
        raise NotModeled("runtime spec.podGroupPolicy")
    if set((spec.get("mlPolicy") or {}).keys()) - {"numNodes", "mpi"} or "mpi" not in (spec.get("mlPolicy") or {}):
        raise NotModeled(f"runtime mlPolicy {sorted((spec.get('mlPolicy') or {}).keys())}: only mpi is modeled")
    # T:webhooks/trainingruntime_webhook.go validateReplicatedJobs, skipped for runtimes labelled
    # webhook-validation: disabled (T:manifests/base/webhook/patch_validating.yaml).
    if (runtime["metadata"].get("labels") or {}).get("trainer.kubeflow.org/webhook-validation") != "disabled":
        for i, rjob in enumerate(_jobs(runtime)):
            ancestor = _labels(rjob).get(ANCESTOR)
            if ancestor not in ANCESTOR_CONTAINER:
                continue
            if rjob.get("replicas", 1) != 1:
                raise Rejected(f"spec.template.spec.replicatedJobs[{i}].replicas", "must be 1 for an ancestor job")
            names = [c["name"] for c in rjob["template"]["spec"]["template"]["spec"].get("containers", [])]
            if ANCESTOR_CONTAINER[ancestor] not in names:
                raise Rejected(f"spec.template.spec.replicatedJobs[{i}].template.spec.template.spec.containers",
                               f"a {ancestor} job needs a container named {ANCESTOR_CONTAINER[ancestor]}")
    # T:runtime/framework/plugins/mpi/mpi.go Validate (on the runtime before any plugin ran)
    names = {rjob["name"] for rjob in _jobs(runtime)}
    if trainer.get("numNodes", 1) >= 2 and spec["mlPolicy"]["mpi"].get("runLauncherAsNode") \
            and not {"launcher", "node"} <= names:
        raise Rejected("spec.trainer.numNodes", "must have 1 when MPI trainingRuntime with enabled "
                       "runLauncherAsNode does not have either launcher and node")
    reserved = sorted({e["name"] for e in trainer.get("env", [])} & set(OMPI_RESERVED))
    if reserved:
        raise Rejected("spec.trainer.env", f"must not have reserved envs, invalid envs configured: {reserved}")


def merge_resources(base, override):
    """T:util/trainingruntime/trainingruntime.go MergeResourceRequirements (v2.3, #3602): a
    strategic merge, limits and requests key by key, claims by name. v2.0-v2.2 replaced all."""
    merged = copy.deepcopy(base or {})
    for key in ("limits", "requests"):
        if (override or {}).get(key):
            merged.setdefault(key, {}).update(override[key])
    for claim in (override or {}).get("claims", []):
        _upsert(merged.setdefault("claims", []), claim, by_name)
    return merged


def podsets(trainjob, runtime, jobset_spec):
    """T:runtime/core/trainingruntime.go newRuntimeInfo; T:runtime/runtime.go WithPodSet.
    Writes the resourcesPerNode merge into jobset_spec; returns the PodSets."""
    ml, trainer = runtime["spec"].get("mlPolicy"), trainjob["spec"].get("trainer") or {}
    launcher_as_node = bool(((ml or {}).get("mpi") or {}).get("runLauncherAsNode"))
    result = []
    for rjob in jobset_spec["replicatedJobs"]:
        count = rjob["template"]["spec"].get("parallelism", 1)
        ancestor = _labels(rjob).get(ANCESTOR)
        if ancestor == "trainer" and ml is not None:
            count = ml.get("numNodes", 1)  # the trainer step's size is the runtime's numNodes
        pod = rjob["template"]["spec"]["template"]["spec"]
        # resourcesPerNode reaches the first container named node of the trainer step, and of
        # the job *named* node when runLauncherAsNode (T:…/trainingruntime.go, the `break`).
        if trainer.get("resourcesPerNode") is not None and \
                ((ancestor == "trainer" and ml is not None) or (launcher_as_node and rjob["name"] == "node")):
            for container in pod.get("containers", []):
                if container["name"] == "node":
                    container["resources"] = merge_resources(container.get("resources"), trainer["resourcesPerNode"])
                    break
        keys = ("name", "image", "command", "env", "ports", "volumeMounts")  # T:runtime/runtime.go toPodSetContainer
        result.append({
            "name": rjob["name"], "ancestor": ancestor, "count": max(count, 1), "replicas": rjob.get("replicas", 1),
            "volumes": copy.deepcopy(pod.get("volumes", [])),
            "containers": [{k: copy.deepcopy(c.get(k)) for k in keys} for c in pod.get("containers", [])],
            "initContainers": [{k: copy.deepcopy(c.get(k)) for k in keys} for c in pod.get("initContainers", [])],
        })
    return result


def gpus(resources):
    """T:runtime/runtime.go GetNumGPUPerNode: the first resource named like *gpu*, requests first."""
    for key in ("requests", "limits"):
        for name, quantity in ((resources or {}).get(key) or {}).items():
            if "gpu" in name.lower() and int(quantity) > 0:
                return int(quantity)
    return 0


def runtime_resources(jobset_spec):
    """T:runtime/runtime.go ExtractResourcePerNodeFromRuntime: the first container named node
    of the first job that is named node or is the trainer step. Trainer's apply config always
    holds a `resources` (apimachinery's converter never omits a struct), so that container's
    resources count even when empty."""
    for rjob in jobset_spec["replicatedJobs"]:
        if rjob["name"] == "node" or _labels(rjob).get(ANCESTOR) == "trainer":
            for container in rjob["template"]["spec"]["template"]["spec"].get("containers", []):
                if container["name"] == "node":
                    return container.get("resources") or {}
    return None


def enforce_mpi(trainjob, runtime, sets, jobset_spec):
    """T:runtime/framework/plugins/mpi/mpi.go EnforceMLPolicy. Returns the slots per host."""
    mpi, trainer = runtime["spec"]["mlPolicy"]["mpi"], trainjob["spec"].get("trainer") or {}
    launcher_as_node = bool(mpi.get("runLauncherAsNode"))
    name = trainjob["metadata"]["name"]
    if trainer.get("numNodes") is not None:  # only the job *named* node is resized
        for ps in sets:
            if ps["name"] == "node":
                ps["count"] = max(trainer["numNodes"] - 1, 1) if launcher_as_node else trainer["numNodes"]
    slots = mpi.get("numProcPerNode", 1)
    if trainer.get("numProcPerNode") is not None:
        slots = trainer["numProcPerNode"]
    elif slots == 1:  # the GPU count per node, when more than one
        resources = trainer.get("resourcesPerNode") if trainer.get("resourcesPerNode") is not None \
            else runtime_resources(jobset_spec)
        slots = gpus(resources) if gpus(resources) > 1 else slots
    if mpi.get("mpiImplementation", "OpenMPI") != "OpenMPI":
        raise Rejected("runtime mlPolicy.mpi.mpiImplementation",
                       f"MPI implementation for {mpi.get('mpiImplementation')!r} doesn't supported")
    for ps in sets:
        if ps["name"] not in ("node", "launcher"):
            continue
        _upsert(ps["volumes"], {"name": "mpi-ssh-auth", "secret": {
            "secretName": name + SECRET_SUFFIX, "defaultMode": 0o400,  # T:constants MPISSHAuthDefaultMode
            "items": [{"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},  # MPISSHPrivateKeyFileMode
                      {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                      {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644}]}}, by_name)
        if ps["name"] == "launcher":
            _upsert(ps["volumes"], {"name": "mpi-hostfile", "configMap": {
                "name": name + HOSTFILE_SUFFIX, "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}]}},
                by_name)
        for container in ps["containers"]:  # init containers and other names get nothing
            if container["name"] != "node":
                continue
            mounts = container["volumeMounts"] = container["volumeMounts"] or []
            _upsert(mounts, {"name": "mpi-ssh-auth", "mountPath": mpi.get("sshAuthMountPath", "/root/.ssh")},
                    by_mount_path)
            if ps["name"] == "launcher":
                _upsert(mounts, {"name": "mpi-hostfile", "mountPath": "/etc/mpi"}, by_mount_path)
                env = container["env"] = container["env"] or []
                for key, value in zip(OMPI_RESERVED, ("/etc/mpi/hostfile", "true", str(slots),
                                                      "-o ConnectionAttempts=10")):
                    _upsert(env, {"name": key, "value": value}, by_name)
    return slots


def endpoints(trainjob, runtime, ps):
    """T:runtime/framework/plugins/jobset/jobset.go IdentifyPodNetwork: no namespace, no svc."""
    network = runtime["spec"]["template"]["spec"].get("network") or {}
    subdomain = network.get("subdomain") or trainjob["metadata"]["name"]
    return [f"{trainjob['metadata']['name']}-{ps['name']}-{r}-{p}.{subdomain}"
            for r in range(ps["replicas"]) for p in range(ps["count"])]


def hostfile(trainjob, runtime, sets, slots):
    """T:…/mpi/mpi.go buildHostFileConfigMap, isNode: the job named node, and launcher when
    runLauncherAsNode, in runtime order; `host slots=N` lines with a trailing newline."""
    launcher_as_node = bool(runtime["spec"]["mlPolicy"]["mpi"].get("runLauncherAsNode"))
    lines = [f"{host} slots={slots}\n" for ps in sets
             if ps["name"] == "node" or (launcher_as_node and ps["name"] == "launcher")
             for host in endpoints(trainjob, runtime, ps)]
    return "".join(lines)


def owner(trainjob):
    return [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": trainjob["metadata"]["name"],
             "uid": trainjob["metadata"].get("uid", ""), "controller": True, "blockOwnerDeletion": True}]


def build(trainjob, runtime, sets, jobset_spec):
    """T:…/plugins/jobset/jobset.go SyncParallelCount and Build; T:…/jobset/builder.go Trainer."""
    trainer = trainjob["spec"].get("trainer") or {}
    launcher_as_node = bool(runtime["spec"]["mlPolicy"]["mpi"].get("runLauncherAsNode"))
    for ps, rjob in zip(sets, jobset_spec["replicatedJobs"]):
        job = rjob["template"]["spec"]
        job["parallelism"] = job["completions"] = ps["count"]
        pod = job["template"]["spec"]
        for volume in ps["volumes"]:
            _upsert(pod.setdefault("volumes", []), volume, by_name)
        for kind in ("containers", "initContainers"):
            for mine, theirs in zip(ps[kind], pod.get(kind, [])):
                if mine["command"]:
                    theirs["command"] = mine["command"]
                if mine["image"]:
                    theirs["image"] = mine["image"]
                for key, same in (("env", by_name), ("ports", by_port), ("volumeMounts", by_mount_path)):
                    for item in mine[key] or []:
                        _upsert(theirs.setdefault(key, []), item, same)
        ancestor = _labels(rjob).get(ANCESTOR)
        if ancestor == "trainer":
            rjob["replicas"] = 1
        for container in pod.get("containers", []):
            if container["name"] != "node":
                continue
            if ancestor == "trainer":  # image, command, args: the trainer step only
                for key in ("image", "command", "args"):
                    if trainer.get(key) is not None:
                        container[key] = copy.deepcopy(trainer[key])
            if ancestor == "trainer" or (launcher_as_node and rjob["name"] == "node"):
                for item in trainer.get("env", []):
                    _upsert(container.setdefault("env", []), item, by_name)
    template_meta = runtime["spec"]["template"].get("metadata") or {}
    jobset_spec["suspend"] = trainjob["spec"].get("suspend", False)
    meta = {"name": trainjob["metadata"]["name"], "namespace": trainjob["metadata"].get("namespace", "default"),
            "ownerReferences": owner(trainjob)}
    for key in ("labels", "annotations"):
        if template_meta.get(key):
            meta[key] = copy.deepcopy(template_meta[key])
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta, "spec": jobset_spec}


def render(trainjob, runtime):
    """The objects Trainer applies for trainjob: {jobset, secret, hostfile, podsets, slots}."""
    admit(trainjob, runtime)
    import runtime_patches
    # T:runtime/core/trainingruntime.go newRuntimeInfo: the patches before any plugin.
    runtime = {**runtime, "spec": {**runtime["spec"], "template": runtime_patches.apply(trainjob, runtime["spec"]["template"])}}
    jobset_spec = copy.deepcopy(runtime["spec"]["template"]["spec"])
    sets = podsets(trainjob, runtime, jobset_spec)
    slots = enforce_mpi(trainjob, runtime, sets, jobset_spec)
    name, namespace = trainjob["metadata"]["name"], trainjob["metadata"].get("namespace", "default")
    # T:…/mpi/mpi.go buildSSHAuthSecret: made once (only if absent), immutable, a P-521 key.
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth", "immutable": True,
              "metadata": {"name": name + SECRET_SUFFIX, "namespace": namespace, "ownerReferences": owner(trainjob)},
              "stringData": {"ssh-privatekey": "-----BEGIN EC PRIVATE KEY----- (P-521, SEC 1 DER)",
                             "ssh-publickey": "ecdsa-sha2-nistp521 AAAA…\n"}}
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": name + HOSTFILE_SUFFIX, "namespace": namespace,
                              "ownerReferences": owner(trainjob)},
                 "data": {"hostfile": hostfile(trainjob, runtime, sets, slots)}}
    jobset = build(trainjob, runtime, sets, jobset_spec)
    return {"jobset": jobset, "secret": secret, "hostfile": configmap, "podsets": sets, "slots": slots}
