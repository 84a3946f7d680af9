#!/usr/bin/env python3
"""fake_kube_api.py: a faithful fake of the few Kubernetes API calls trainer-mpi makes.

It is a fake only because no kube-apiserver can be installed on the test machines. It
serves HTTPS (a CA made at test time), checks the bearer token, and enforces what the real
API server enforces for these calls: label selectors, `limit`/`continue` paging, Secret
validation (name, namespace, type kubernetes.io/ssh-auth needs data.ssh-privatekey, base64
data, owner references), AlreadyExists, NotFound, and metav1.Status error bodies.

Also: GET of a TrainJob (trainer.kubeflow.org/v1alpha1, from the state's "trainjobs") and
core/v1 Event creation (name or generateName, involvedObject.namespace = the event's, type
Normal or Warning); created Events are logged with their body.

Failure switches: --throttle N (the first N requests get 429 with Retry-After), --fail-500 N,
--forbid RESOURCE (403 for pods, secrets, jobsets, trainjobs or events), --stall N (the first N requests hang),
--late-pods FILE --late-after N (pods that appear after N pod lists), --no-ip-until N
(pods have no IP until N pod lists), --race-secret FILE (the first Secret create finds that
another made it first: the create's body with the fields of FILE over it, its data at least,
is stored, and the answer is 409),
--not-json RESOURCE (a GET of it answers 200 with an HTML page, as a proxy or a captive
portal in front of the API would).
JobSet's in-place restart (fake_jobset_controller.py): a PATCH of a pod by server-side apply
(its annotations), and the controller's previous/currentInPlaceRestartAttempt moved after
each; --agent-token T is a second token with the agent's Role only (patch pods, get jobsets).
The kubelet's part, for tests that play it: --kubelet-token T may only PATCH pods/NAME/status,
as the kubelet's status manager does (pkg/kubelet/status/status_manager.go, by
statusutil.PatchPodStatus: a strategic merge patch of the status subresource; in it a list
without a merge key, containerStatuses, is replaced whole, and conditions merge by type).
Every request is logged as a JSON line to --log.

--cluster (with --registry FILE and --outcome FILE): the API that kubectl needs instead, with a
stand-in for Trainer, JobSet and the kubelet behind it (fake_cluster.py): the first steps'
test (tests/examples/first_steps_test.sh) runs scripts/first_steps.sh against it.

usage: fake_kube_api.py --cert C --key K --token T --state STATE.json --port-file F --log L
"""
import argparse
import base64
import binascii
import json
import re
import threading
import time
import urllib.parse
import uuid
from fake_https import FakeHandler, serve, status
import fake_jobset_controller as jobset_controller

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# What a GET by name serves, by resource (a State attribute of the same name), with the
# name the API gives it in a NotFound message.
STORED = {"jobsets": "jobsets.jobset.x-k8s.io", "secrets": "secrets", "trainjobs": "trainjobs.trainer.kubeflow.org"}


class State:
    def __init__(self, args):
        with open(args.state) as f:
            state = json.load(f)
        self.lock = threading.Lock()
        self.args = args
        self.jobsets = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in state.get("jobsets", [])}
        self.pods = list(state.get("pods", []))
        self.secrets = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in state.get("secrets", [])}
        self.trainjobs = {(t["metadata"]["namespace"], t["metadata"]["name"]): t for t in state.get("trainjobs", [])}
        self.events = []
        self.late = []
        if args.late_pods:
            with open(args.late_pods) as f:
                self.late = json.load(f)
        self.requests = 0
        self.pod_lists = 0
        self.resource_version = 1000
        self.raced = False
        self.cluster = None
        if args.cluster:  # imported only here: it loads the Trainer and JobSet models
            from fake_cluster import Cluster, ClusterRoutes
            self.cluster = ClusterRoutes(Cluster(args))

    def next_rv(self):
        self.resource_version += 1
        return str(self.resource_version)


def match_selector(labels, selector):
    if not selector:
        return True
    for term in selector.split(","):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif labels.get(term) is None:
            return False
    return True


class Handler(FakeHandler):
    state: State = None

    def reply(self, code, body, headers=None, request=None):
        self.send_json(code, body, headers)
        entry = {"method": self.command, "path": self.path, "code": code,
                 "auth": self.headers.get("Authorization") == f"Bearer {self.state.args.token}"}
        if request is not None:  # what a created object said of itself; never its data
            entry["object"] = {k: v for k, v in request.items() if k != "data"}
        self.write_log(entry)

    def reply_text(self, text):
        self.send_text(text)
        self.write_log({"method": self.command, "path": self.path, "code": 200, "auth": True})

    def handle_any(self):
        st = self.state
        raw = self.read_request()
        if raw is None:
            return
        with st.lock:
            n = st.requests
        agent = st.args.agent_token and self.headers.get("Authorization") == f"Bearer {st.args.agent_token}"
        kubelet = st.args.kubelet_token and self.headers.get("Authorization") == f"Bearer {st.args.kubelet_token}"
        if kubelet:
            return self.kubelet_patch_status(raw)
        if self.headers.get("Authorization") != f"Bearer {st.args.token}" and not agent:
            return self.reply(*status(401, "Unauthorized", "Unauthorized"))
        if n <= st.args.stall + st.args.throttle:
            return self.reply(*status(429, "TooManyRequests", "the server has received too many requests"),
                              {"Retry-After": str(st.args.retry_after)})
        if n <= st.args.stall + st.args.throttle + st.args.fail_500:
            return self.reply(*status(500, "InternalError", "etcdserver: request timed out"))
        if st.cluster is not None:
            with st.lock:
                return st.cluster.route(self, self.command, raw)
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        parts = url.path.strip("/").split("/")
        try:
            if parts[:3] == ["api", "v1", "namespaces"] and len(parts) >= 5:
                ns, resource = parts[3], parts[4]
                name = parts[5] if len(parts) > 5 else None
            elif parts[:4] == ["apis", "jobset.x-k8s.io", "v1alpha2", "namespaces"] and len(parts) >= 6:
                ns, resource, name = parts[4], parts[5], (parts[6] if len(parts) > 6 else None)
            elif parts[:4] == ["apis", "trainer.kubeflow.org", "v1alpha1", "namespaces"] and len(parts) >= 6:
                ns, resource, name = parts[4], parts[5], (parts[6] if len(parts) > 6 else None)
            else:
                return self.reply(*status(404, "NotFound", "the server could not find the requested resource"))
            if agent and (resource, self.command, bool(name)) not in (("pods", "PATCH", True), ("jobsets", "GET", True)):
                return self.reply(*status(403, "Forbidden", f'{resource} is forbidden: User '
                                          f'"system:serviceaccount:{ns}:in-place-agent" cannot {self.command.lower()} '
                                          f'resource "{resource}" in the namespace "{ns}"', kind=resource))
            if resource in st.args.forbid:
                verb = "list" if name is None and self.command == "GET" else ("get" if self.command == "GET" else "create")
                group = {"jobsets": "jobset.x-k8s.io", "trainjobs": "trainer.kubeflow.org"}.get(resource, "")
                return self.reply(*status(403, "Forbidden",
                    f'{resource} is forbidden: User "system:serviceaccount:{ns}:default" cannot {verb} resource '
                    f'"{resource}" in API group "{group}" in the namespace "{ns}"', kind=resource))
            if resource in st.args.not_json and self.command == "GET":
                page = b"<html><body><h1>Welcome</h1>Please sign in to the proxy.</body></html>\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
                return self.write_log({"method": self.command, "path": self.path, "code": 200, "auth": True})
            if resource == "pods" and name and self.command == "PATCH":
                return self.patch_pod(ns, name, query, raw)
            if resource == "pods" and self.command in ("POST", "DELETE"):  # the Job controller's part, for tests
                return self.replace_pod(ns, name, raw)
            if resource == "pods" and name is None and self.command == "GET":
                return self.list_pods(ns, query)
            if resource in STORED and self.command == "GET" and name:
                return self.get_stored(resource, ns, name)
            if resource == "secrets" and self.command == "POST" and name is None:
                return self.create_secret(ns, raw)
            if resource == "events" and self.command == "POST" and name is None:
                return self.create_event(ns, raw)
            return self.reply(*status(405, "MethodNotAllowed", "the server does not allow this method"))
        except (KeyError, ValueError, TypeError) as e:
            return self.reply(*status(400, "BadRequest", f"bad request: {e}"))

    def kubelet_patch_status(self, raw):
        """PATCH /api/v1/namespaces/NS/pods/NAME/status, the kubelet's one call here."""
        parts = urllib.parse.urlsplit(self.path).path.strip("/").split("/")
        if (self.command != "PATCH" or len(parts) != 7 or parts[:3] != ["api", "v1", "namespaces"]
                or parts[4] != "pods" or parts[6] != "status"):
            return self.reply(*status(403, "Forbidden", "the kubelet's credential may only patch a pod's status"))
        if self.headers.get("Content-Type", "") != "application/strategic-merge-patch+json":
            return self.reply(*status(415, "UnsupportedMediaType", "the kubelet sends a strategic merge patch"))
        ns, name = parts[3], parts[5]
        try:
            patch = json.loads(raw).get("status") or {}
        except (ValueError, AttributeError) as e:
            return self.reply(*status(400, "BadRequest", f"bad request: {e}"))
        with self.state.lock:
            pod = next((p for p in self.state.pods
                        if p["metadata"]["name"] == name and p["metadata"].get("namespace") == ns), None)
            if pod is None:
                return self.reply(*status(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods"))
            current = pod.setdefault("status", {})
            for key, value in patch.items():
                if key == "conditions":
                    kept = [c for c in current.get("conditions", []) if c.get("type") not in {v.get("type") for v in value}]
                    current["conditions"] = kept + value
                else:
                    current[key] = value
            pod["metadata"]["resourceVersion"] = self.state.next_rv()
        return self.reply(200, pod, request={"status": patch})

    def patch_pod(self, ns, name, query, raw):
        with self.state.lock:
            code, body = jobset_controller.apply_pod(self.state.pods, ns, name, query,
                                                     self.headers.get("Content-Type", ""), raw)
            if code == 200:
                for js in jobset_controller.reconcile_all(self.state.jobsets, self.state.pods):
                    js["metadata"]["resourceVersion"] = self.state.next_rv()
                    self.write_log({"controller": js["metadata"]["name"], "status": js["status"]})
        if code != 200:
            reason = {400: "BadRequest", 404: "NotFound", 405: "MethodNotAllowed", 415: "UnsupportedMediaType"}[code]
            return self.reply(*status(code, reason, body, name=name, kind="pods"))
        return self.reply(200, body, request={"metadata": json.loads(raw).get("metadata")})

    def replace_pod(self, ns, name, raw):
        """DELETE pods/NAME (the pod is gone at once: no finalizer), or POST pods (a new pod,
        a name not taken); then the in-place controller, as its pod watch would."""
        st = self.state
        with st.lock:
            if self.command == "DELETE":
                gone = [p for p in st.pods if p["metadata"]["name"] == name and p["metadata"].get("namespace") == ns]
                st.pods = [p for p in st.pods if p not in gone]
                code, body = (200, gone[0]) if gone else status(404, "NotFound", f'pods "{name}" not found')
            else:
                pod = self.stored(json.loads(raw), ns)
                taken = any(p["metadata"]["name"] == pod["metadata"]["name"] and p["metadata"].get("namespace") == ns
                            for p in st.pods)
                code, body = status(409, "AlreadyExists", "pod exists") if taken else (201, pod)
                if not taken:
                    st.pods.append(pod)
            for js in jobset_controller.reconcile_all(st.jobsets, st.pods):
                self.write_log({"controller": js["metadata"]["name"], "status": js["status"]})
        return self.reply(code, body)

    def get_stored(self, resource, ns, name):
        with self.state.lock:
            obj = getattr(self.state, resource).get((ns, name))
        if obj is None:
            return self.reply(*status(404, "NotFound", f'{STORED[resource]} "{name}" not found',
                                      name=name, kind=resource))
        return self.reply(200, obj)

    def list_pods(self, ns, query):
        st = self.state
        selector = query.get("labelSelector", [""])[0]
        limit = query.get("limit", ["0"])[0]
        if not limit.isdigit():
            return self.reply(*status(400, "BadRequest", f'invalid limit "{limit}"'))
        limit = int(limit)
        start = 0
        token = query.get("continue", [""])[0]
        with st.lock:
            if token:
                try:
                    start = json.loads(base64.b64decode(token))["start"]
                except (ValueError, KeyError, binascii.Error):
                    return self.reply(*status(400, "BadRequest", "continue key is not valid: illegal base64 data"))
            else:
                st.pod_lists += 1
                if st.late and st.pod_lists > st.args.late_after:
                    st.pods.extend(st.late)
                    st.late = []
            pods = [p for p in st.pods if p["metadata"]["namespace"] == ns
                    and match_selector(p["metadata"].get("labels", {}), selector)]
            pods.sort(key=lambda p: p["metadata"]["name"])
            no_ip = st.pod_lists <= st.args.no_ip_until
        page = pods[start:start + limit] if limit else pods[start:]
        if no_ip:
            page = [dict(p, status={k: v for k, v in p.get("status", {}).items() if k != "podIP"}) for p in page]
        meta = {"resourceVersion": str(st.resource_version)}
        if limit and start + limit < len(pods):
            meta["continue"] = base64.b64encode(json.dumps({"start": start + limit}).encode()).decode()
            meta["remainingItemCount"] = len(pods) - start - limit
        return self.reply(200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": page})

    def create_secret(self, ns, raw):
        st = self.state
        obj = json.loads(raw)
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        if obj.get("kind") != "Secret" or obj.get("apiVersion") != "v1":
            return self.reply(*status(400, "BadRequest", "the body must be a v1 Secret"))
        if meta.get("namespace", ns) != ns:
            return self.reply(*status(400, "BadRequest",
                                      "the namespace of the provided object does not match the namespace sent on the request"))
        causes = []
        if not name or len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
            causes.append({"reason": "FieldValueInvalid", "field": "metadata.name",
                           "message": f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of ...'})
        data = obj.get("data") or {}
        for key, value in data.items():
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                return self.reply(*status(400, "BadRequest", f"illegal base64 data in data[{key}]"))
        if obj.get("type") == "kubernetes.io/ssh-auth" and not data.get("ssh-privatekey"):
            causes.append({"reason": "FieldValueRequired", "field": "data[ssh-privatekey]",
                           "message": "Required value"})
        for i, ref in enumerate(meta.get("ownerReferences") or []):
            for field in ("apiVersion", "kind", "name", "uid"):
                if not ref.get(field):
                    causes.append({"reason": "FieldValueRequired", "field": f"metadata.ownerReferences[{i}].{field}",
                                   "message": "Required value"})
        if causes:
            return self.reply(*status(422, "Invalid", f'Secret "{name}" is invalid: {causes[0]["field"]}: '
                                      f'{causes[0]["message"]}', name=name, kind="Secret", causes=causes))
        with st.lock:
            if st.args.race_secret and not st.raced:
                st.raced = True
                with open(st.args.race_secret) as f:
                    raced = json.load(f)
                # Its data, and whatever else it says of itself: a Secret planted by someone
                # else carries its own metadata and type, a racing launcher ours.
                other = dict(obj, **raced)
                other["metadata"] = dict(other["metadata"], name=name)
                st.secrets[(ns, name)] = self.stored(other, ns)
            if (ns, name) in st.secrets:
                return self.reply(*status(409, "AlreadyExists", f'secrets "{name}" already exists',
                                          name=name, kind="secrets"))
            stored = self.stored(obj, ns)
            st.secrets[(ns, name)] = stored
        return self.reply(201, stored, request=obj)

    def create_event(self, ns, raw):
        """core/v1 Events as the apiserver validates them (ValidateEventCreate, legacy form)."""
        obj = json.loads(raw)
        meta = obj.get("metadata") or {}
        if obj.get("kind") != "Event" or obj.get("apiVersion") != "v1":
            return self.reply(*status(400, "BadRequest", "the body must be a v1 Event"))
        if meta.get("namespace", ns) != ns:
            return self.reply(*status(400, "BadRequest",
                                      "the namespace of the provided object does not match the namespace sent on the request"))
        causes = []
        if not meta.get("name") and not meta.get("generateName"):
            causes.append({"reason": "FieldValueRequired", "field": "metadata.name",
                           "message": "Required value: name or generateName is required"})
        involved = obj.get("involvedObject") or {}
        if involved.get("namespace") != ns:
            causes.append({"reason": "FieldValueInvalid", "field": "involvedObject.namespace",
                           "message": f'Invalid value: "{involved.get("namespace", "")}": does not match event.namespace'})
        if obj.get("type") not in ("Normal", "Warning"):
            causes.append({"reason": "FieldValueNotSupported", "field": "type",
                           "message": f'Unsupported value: "{obj.get("type", "")}": supported values: "Normal", "Warning"'})
        if causes:
            name = meta.get("name") or meta.get("generateName", "")
            return self.reply(*status(422, "Invalid", f'Event "{name}" is invalid: {causes[0]["field"]}: '
                                      f'{causes[0]["message"]}', name=name, kind="Event", causes=causes))
        if not meta.get("name"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:10]
            obj["metadata"] = meta
        stored = self.stored(obj, ns)
        with self.state.lock:
            self.state.events.append(stored)
        return self.reply(201, stored, request=obj)

    def stored(self, obj, ns):
        obj = json.loads(json.dumps(obj))
        obj["metadata"].update({"namespace": ns, "uid": str(uuid.uuid4()), "resourceVersion": self.state.next_rv(),
                                "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        return obj


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--cert", "--key", "--token", "--state", "--port-file", "--log"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--late-pods", default="")
    parser.add_argument("--late-after", type=int, default=0)
    parser.add_argument("--no-ip-until", type=int, default=0)
    parser.add_argument("--throttle", type=int, default=0)
    parser.add_argument("--retry-after", type=int, default=1)
    parser.add_argument("--fail-500", type=int, default=0)
    parser.add_argument("--stall", type=int, default=0)
    parser.add_argument("--stall-seconds", type=float, default=30)
    parser.add_argument("--forbid", action="append", default=[])
    parser.add_argument("--not-json", action="append", default=[], help="a resource whose GET answers 200 with HTML")
    parser.add_argument("--address", default="127.0.0.1", help="where to listen (a pod's address for other pods)")
    parser.add_argument("--agent-token", default="", help="a token with the in-place agent's Role only")
    parser.add_argument("--kubelet-token", default="", help="a token that may only patch a pod's status")
    parser.add_argument("--race-secret", default="", help="the fields (data, metadata, type) of a Secret made first")
    parser.add_argument("--cluster", action="store_true", help="kubectl's API and a stand-in cluster (fake_cluster.py)")
    parser.add_argument("--registry", default="", help="--cluster: the images pushed, one reference a line")
    parser.add_argument("--outcome", default="", help="--cluster: how the launcher ends (JSON)")
    args = parser.parse_args()
    Handler.state = State(args)
    serve(Handler, args, args.address)

if __name__ == "__main__":
    main()
