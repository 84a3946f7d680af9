"""fake_jobset_controller.py: JobSet's in-place restart controller and the apiserver's
server-side apply of a pod annotation, for fake_kube_api.py.

Design: the controller's rules are written once, in tests/examples/jobset_inplace_model.py
(`reconcile`, from J:pkg/controllers/in_place_restart.go reconcileInPlaceRestart :38-99); this
module runs them where JobSet's manager would: after every change of a pod of the JobSet (the
controller watches pods, J:pkg/controllers/jobset_controller.go :273-292) and the apiserver's
side of the agent's write (J:cmd/in-place-restart-agent/main.go patchPodInPlaceRestartAttempt:
PATCH pods/NAME, application/apply-patch+yaml, fieldManager in-place-restart-agent, force).
Only a JobSet whose failurePolicy.restartStrategy is InPlaceRestart is reconciled
(J:…/jobset_controller.go :247-260, the gate taken as on), and one that is finished is not
(:163). `J:` is kubernetes-sigs/jobset v0.12.0 (f22e565ac3cc3265c7c45ef67ecffdc689af5d77).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import jobset_inplace_model as ipr  # noqa: E402

# The patch types the apiserver takes (k8s.io/apiserver handlers/patch.go); anything else is 415.
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml")


def reconcile_all(jobsets, pods):
    """Every in-place JobSet's status anew from its pods (getAssociatedPods: the namespace and
    the jobset-name label). Returns the JobSets whose status changed."""
    changed = []
    for (ns, name), js in jobsets.items():
        if not ipr.in_place(js) or (js.get("status") or {}).get("terminalState"):
            continue
        own = [p for p in pods if p["metadata"].get("namespace") == ns
               and (p["metadata"].get("labels") or {}).get(ipr.JOBSET_NAME) == name]
        for pod in own:
            pod.setdefault("status", {}).setdefault("phase", "Running")
        try:
            status = ipr.reconcile(js, own)
        except ValueError as e:  # a bad annotation or template: the controller logs it and requeues
            print(f"fake jobset controller: {ns}/{name}: {e}", file=sys.stderr)
            continue
        if status != js.get("status"):
            js["status"] = status
            changed.append(js)
    return changed


def apply_pod(pods, ns, name, query, content_type, raw):
    """A PATCH of pods/NAME: (code, body). Server-side apply needs a fieldManager and names the
    object it patches; this fake applies metadata.annotations, the only field an agent owns."""
    if content_type not in PATCH_TYPES:
        return 415, f'the body of the request was in an unknown format - accepted media types include: {", ".join(PATCH_TYPES)}'
    if content_type != "application/apply-patch+yaml":
        return 405, "this fake takes server-side apply only"
    if not query.get("fieldManager", [""])[0]:
        return 400, "PATCH with apply requires fieldManager"
    obj = json.loads(raw)  # JSON is YAML; the agents send JSON
    meta = obj.get("metadata") or {}
    if obj.get("apiVersion") != "v1" or obj.get("kind") != "Pod":
        return 400, "the body must be a v1 Pod"
    if meta.get("name") != name:
        return 400, f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
    pod = next((p for p in pods if p["metadata"]["name"] == name and p["metadata"].get("namespace") == ns), None)
    if pod is None:
        return 404, f'pods "{name}" not found'
    annotations = meta.get("annotations") or {}
    if any(not isinstance(v, str) for v in annotations.values()):
        return 400, "metadata.annotations: values must be strings"
    pod["metadata"].setdefault("annotations", {}).update(annotations)
    return 200, pod
