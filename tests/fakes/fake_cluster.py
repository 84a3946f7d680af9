"""fake_cluster.py: the API that kubectl 1.32 needs for apply, get, describe, logs and delete,
with a stand-in for Trainer, JobSet and the kubelet behind it (fake_kube_api.py --cluster).

It serves what the first-steps script (scripts/first_steps.sh) runs against, no more:
- Discovery, the legacy form: /api, /apis and one APIResourceList per group version. kubectl
  asks for the aggregated form (apidiscovery.k8s.io/v2) first and falls back to these when
  the answer's Content-Type is plain JSON (client-go discovery/discovery_client.go,
  ServerGroupsAndResources and downloadAPIs).
- OpenAPI v3, only so far as kubectl's --validate=strict (its default) reads it: the index
  /openapi/v3 and, per group version, a document whose PATCH operations carry the
  `fieldValidation` parameter and the kind's x-kubernetes-group-version-kind. With that,
  kubectl leaves the validation to the server and sends fieldValidation=Strict
  (cli-runtime resource/query_param_verifier_v3.go, HasSupport; without it kubectl downloads
  /openapi/v2 to validate on its side). The server's side of Strict: Trainer's and JobSet's
  kinds are checked against their CRDs (tests/examples/crd_schema.py, as the apiserver would).
- Create (kubectl's client-side apply: a GET that finds nothing, then a POST), get, list
  with label and field selectors (involvedObject.*, which describe lists Events by,
  describe.go searchEvents), delete (at once; a namespace takes its objects with it: the GET
  that `kubectl delete --wait` makes next finds nothing, kubectl cmd/wait/delete.go
  IsDeleted), a pod's log.
- Namespaces as the NamespaceLifecycle admission plugin has them: a namespaced object in a
  namespace that does not exist is refused, 404 `namespaces "X" not found`.
The stand-in, on a TrainJob's create: its pods as tests/examples/render.py makes them from
the ClusterTrainingRuntime it names (Trainer v2.3 and JobSet v0.12.0 modelled there), then
the kubelet's pull of each image from --registry (the references a fake `push` wrote, one a
line): an image not there leaves the pod waiting in ErrImagePull with the kubelet's Warning
Event, and the TrainJob never ends. Otherwise the launcher ends as --outcome says
(exitCode, message: its termination message, log, events: the launcher's Events on the
TrainJob) and the TrainJob gets Complete or Failed, as Trainer copies the JobSet's.
"""
import json
import os
import sys
import time
import urllib.parse
import uuid

from fake_https import status

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import render  # noqa: E402

# (group, version, plural, kind, namespaced); the verbs are the same for all.
RESOURCES = [
    ("", "v1", "namespaces", "Namespace", False), ("", "v1", "pods", "Pod", True),
    ("", "v1", "events", "Event", True), ("", "v1", "serviceaccounts", "ServiceAccount", True),
    ("", "v1", "configmaps", "ConfigMap", True), ("", "v1", "secrets", "Secret", True),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    ("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True),
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True),
    ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", False),
]
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
BY_PATH = {(g, v, plural): (kind, ns) for g, v, plural, kind, ns in RESOURCES}
CHECKED = {"trainer.kubeflow.org", "jobset.x-k8s.io"}  # the kinds with a CRD schema here


def gv_path(group, version):
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def group_versions():
    return sorted({(g, v) for g, v, *_ in RESOURCES})


def resource_list(group, version):
    items = []
    for g, v, plural, kind, namespaced in RESOURCES:
        if (g, v) == (group, version):
            items.append({"name": plural, "singularName": kind.lower(), "namespaced": namespaced,
                          "kind": kind, "verbs": VERBS})
            if plural == "pods":
                items.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                              "verbs": ["get"]})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": items}


def openapi_doc(group, version):
    """The PATCH operation of every kind, with the fieldValidation parameter (the part of the
    real document that query_param_verifier_v3.go reads)."""
    paths = {}
    for g, v, plural, kind, namespaced in RESOURCES:
        if (g, v) != (group, version):
            continue
        prefix = "/" + gv_path(g, v) + ("/namespaces/{namespace}" if namespaced else "")
        paths[f"{prefix}/{plural}/{{name}}"] = {"patch": {
            "x-kubernetes-group-version-kind": {"group": g, "version": v, "kind": kind},
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "OK"}}}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths}


def selected(obj, labels, fields):
    meta = obj.get("metadata") or {}
    have = meta.get("labels") or {}
    for term in filter(None, labels.split(",")):
        key, _, value = term.partition("=")
        if have.get(key) != value.lstrip("="):
            return False
    for term in filter(None, fields.split(",")):
        key, _, value = term.partition("=")
        where = obj
        for part in key.split("."):
            where = (where or {}).get(part) if isinstance(where, dict) else None
        if str(where if where is not None else "") != value.lstrip("="):
            return False
    return True


class Cluster:
    """The objects, by (group, plural, namespace or "", name), and what the stand-in made."""

    def __init__(self, args):
        self.args = args
        self.objects = {}
        self.logs = {}  # (namespace, pod name) -> the node container's log
        self.rv = 100

    def stamp(self, obj, namespace):
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        if namespace:
            meta["namespace"] = namespace
        meta.update(uid=meta.get("uid") or str(uuid.uuid4()), resourceVersion=str(self.rv),
                    creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        return obj

    def put(self, group, plural, namespace, obj):
        self.objects[(group, plural, namespace, obj["metadata"]["name"])] = self.stamp(obj, namespace)
        return obj

    def event(self, namespace, about, kind, reason, message, type_="Warning", source="trainer-mpi"):
        name = f"{about['metadata']['name']}.{uuid.uuid4().hex[:12]}"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.put("", "events", namespace, {
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": name}, "type": type_, "reason": reason,
            "message": message, "count": 1, "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": source},
            "involvedObject": {"apiVersion": about["apiVersion"], "kind": kind, "namespace": namespace,
                               "name": about["metadata"]["name"], "uid": about["metadata"]["uid"]}})

    def run_trainjob(self, trainjob):
        """What Trainer, JobSet and the kubelet would leave behind for this TrainJob."""
        ns = trainjob["metadata"]["namespace"]
        runtime = self.objects.get(("trainer.kubeflow.org", "clustertrainingruntimes", "",
                                    trainjob["spec"]["runtimeRef"]["name"]))
        if runtime is None:  # no runtime of that name: the stand-in makes no pods, the job never ends
            return
        pods = render.render(trainjob, runtime)["pods"]
        pushed = set()  # nothing pushed yet: no file
        if os.path.exists(self.args.registry):
            with open(self.args.registry) as f:
                pushed = {line.strip() for line in f if line.strip()}
        with open(self.args.outcome) as f:
            outcome = json.load(f)
        for pod in pods:
            if pod["replicatedJob"] != "launcher":
                continue
            obj = {"apiVersion": "v1", "kind": "Pod", "metadata": pod["metadata"], "spec": pod["spec"]}
            obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": pod["job"],
                                                   "uid": str(uuid.uuid4()), "controller": True}]
            images = [c["image"] for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]]
            missing = [i for i in images if i not in pushed]
            self.put("", "pods", ns, obj)
            if missing:  # the kubelet's pull fails: the pod waits, the job never ends
                obj["status"] = {"phase": "Pending", "containerStatuses": [{
                    "name": "node", "ready": False, "restartCount": 0, "image": missing[0],
                    "state": {"waiting": {"reason": "ErrImagePull",
                                          "message": f'failed to pull and unpack image "{missing[0]}": not found'}}}]}
                self.event(ns, obj, "Pod", "Failed", f'Failed to pull image "{missing[0]}": not found', source="kubelet")
                return
            code = int(outcome["exitCode"])
            obj["status"] = {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [{
                "name": "node", "ready": False, "restartCount": 0, "image": images[-1],
                "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                         "message": outcome["message"],
                                         "startedAt": trainjob["metadata"]["creationTimestamp"],
                                         "finishedAt": trainjob["metadata"]["creationTimestamp"]}}}]}
            self.logs[(ns, obj["metadata"]["name"])] = outcome["log"]
        for reason, message in outcome.get("events", []):
            self.event(ns, trainjob, "TrainJob", reason, message)
        kind = "Complete" if int(outcome["exitCode"]) == 0 else "Failed"
        trainjob["status"] = {"conditions": [{"type": kind, "status": "True", "reason": "JobSet" + kind,
                                              "message": "jobset " + ("completed" if kind == "Complete" else
                                                                      "failed: " + outcome["message"][:200]),
                                              "lastTransitionTime": trainjob["metadata"]["creationTimestamp"]}]}


class ClusterRoutes:
    """The HTTP side: handler is a fake_https.FakeHandler subclass whose reply() answers."""

    def __init__(self, cluster):
        self.cluster = cluster

    def route(self, handler, method, raw):
        url = urllib.parse.urlsplit(handler.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        parts = url.path.strip("/").split("/")
        if parts == ["api"]:
            return handler.reply(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        if parts == ["apis"]:
            groups = {}
            for g, v in group_versions():
                if g:
                    groups.setdefault(g, []).append({"groupVersion": f"{g}/{v}", "version": v})
            return handler.reply(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": vs, "preferredVersion": vs[0]} for g, vs in groups.items()]})
        if parts == ["openapi", "v3"]:
            return handler.reply(200, {"paths": {gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{gv_path(g, v)}?hash=0"}
                                                 for g, v in group_versions()}})
        if parts[:2] == ["openapi", "v3"]:
            gv = parts[2:]
            group, version = ("", gv[1]) if gv[0] == "api" else (gv[1], gv[2])
            return handler.reply(200, openapi_doc(group, version))
        if parts == ["version"]:
            return handler.reply(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0"})
        group, version, rest = ("", parts[1], parts[2:]) if parts[0] == "api" else (parts[1], parts[2], parts[3:])
        if len(rest) == 0:
            return handler.reply(200, resource_list(group, version))
        namespace = ""
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural, name, sub = rest[0], (rest[1] if len(rest) > 1 else ""), (rest[2] if len(rest) > 2 else "")
        if (group, version, plural) not in BY_PATH:
            return handler.reply(*status(404, "NotFound", "the server could not find the requested resource"))
        kind, namespaced = BY_PATH[(group, version, plural)]
        return self.serve(handler, method, raw, query, (group, version, plural, kind, namespaced), namespace, name, sub)

    def serve(self, handler, method, raw, query, res, namespace, name, sub):
        group, version, plural, kind, namespaced = res
        c = self.cluster
        gname = f"{plural}.{group}" if group else plural
        if namespaced and namespace and ("", "namespaces", "", namespace) not in c.objects and method == "POST":
            return handler.reply(*status(404, "NotFound", f'namespaces "{namespace}" not found', name=namespace,
                                         kind="namespaces"))
        key = (group, plural, namespace, name)
        if method == "GET" and sub == "log":
            if key not in c.objects:
                return handler.reply(*status(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods"))
            return handler.reply_text(c.logs.get((namespace, name), ""))
        if method == "GET" and name:
            if key not in c.objects:
                return handler.reply(*status(404, "NotFound", f'{gname} "{name}" not found', name=name, kind=plural))
            return handler.reply(200, c.objects[key])
        if method == "GET":
            items = [o for (g, p, ns, _), o in sorted(c.objects.items())
                     if (g, p) == (group, plural) and (not namespace or ns == namespace)
                     and selected(o, query.get("labelSelector", ""), query.get("fieldSelector", ""))]
            return handler.reply(200, {"kind": kind + "List", "apiVersion": f"{group}/{version}" if group else version,
                                       "metadata": {"resourceVersion": str(c.rv)}, "items": items})
        if method == "POST":
            if "json" not in (handler.headers.get("Content-Type") or ""):
                # kubectl apply sends objects as JSON; its typed commands (`kubectl create
                # namespace`) send protobuf, which the real server reads and this fake does not.
                return handler.reply(*status(415, "UnsupportedMediaType", "the fake API reads JSON bodies only"))
            obj = json.loads(raw)
            name = obj.get("metadata", {}).get("name", "")
            if (group, plural, namespace, name) in c.objects:
                return handler.reply(*status(409, "AlreadyExists", f'{gname} "{name}" already exists',
                                             name=name, kind=plural))
            if group in CHECKED:
                try:
                    obj = render.admitted(obj)
                except render.tm.Rejected as error:
                    return handler.reply(*status(422, "Invalid", f'{kind}.{group} "{name}" is invalid: {error}',
                                                 name=name, kind=kind))
            c.put(group, plural, namespace, obj)
            if plural == "trainjobs":
                c.run_trainjob(obj)
            return handler.reply(201, obj)
        if method == "DELETE":
            if key not in c.objects:
                return handler.reply(*status(404, "NotFound", f'{gname} "{name}" not found', name=name, kind=plural))
            gone = c.objects.pop(key)
            if plural == "namespaces":  # its objects go with it (the namespace controller)
                for other in [k for k in c.objects if k[2] == name]:
                    del c.objects[other]
            return handler.reply(200, gone)
        return handler.reply(*status(405, "MethodNotAllowed", "the server does not allow this method"))
