#!/usr/bin/env python3
"""policies_test.py: the cluster's own policies against every pod rendered from the package.

Design: each policy is modelled from the Kubernetes code that enforces it, then run on the
pods that Trainer and JobSet make (render.py) of every example TrainJob, and of the SDK's
TrainJob, on the runtimes of every overlay (`kubectl kustomize`); each has a broken case
that it must refuse.
- ResourceQuota (K: pkg/quota/v1/evaluator/core/pods.go, podEvaluator.Constraints and
  enforcePodContainerConstraints): a namespace quota that names cpu or memory (requests.*,
  or the bare names) refuses a pod unless every container, init containers and native
  sidecars included, requests that resource; one on limits.* likewise needs limits. The
  usage a pod is charged is the pod's effective request (k8s.io/component-helpers/resource
  PodRequests): regular containers and restartable init containers summed, or an init
  container with the sidecars started before it, whichever is larger.
- The trust boundary (docs/design.md, "Trust"): no container where ranks run mounts a
  service account token (automountServiceAccountToken false, no projected serviceAccountToken,
  no token Secret, no path under /var/run/secrets/kubernetes.io), since it is the user's code;
  the one token of the job is the launcher pod's mpi-rendezvous sidecar's (our image, no user
  code), short-lived, for the API server's audience; no pod shares its process namespace (the
  kubelet then gives each container its own, so a rank reaches no /proc/PID/root of the
  sidecar's); and mpi-launcher's Events are on, through that sidecar. examples/rbac-events.yaml
  grants exactly the requests rendezvous/trainjob_events.cpp makes, bound to the service account
  the pods run as (none named: the namespace's default).
  examples/rbac.yaml (mpi-init --jobset without Trainer) grants get on Secrets by name only,
  the job's own, and neither list nor watch on them (K: plugin/pkg/auth/authorizer/rbac
  RuleAllows: resourceNames match on the request's name, and a list has none). Its Role
  grants exactly the requests mpi-init makes (initcontainer/api_source.cpp), and its create
  on Secrets carries no resourceNames (a create has no name when it is authorized).
- The NetworkPolicy (manifests/kubeflow/profile): it selects every pod, and admits exactly
  the ports the programs use by default (sshd, the rendezvous, torch's MASTER_PORT) and the
  kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999), from the job's pods,
  and the probe's port from anywhere; the runtimes keep Open MPI's TCP transport in that
  range (it binds the first free port from btl_tcp_port_min_v4, 1024 by default). The egress
  policy (manifests/kubeflow/profile-egress) sends to the same ports of the job's pods, and
  DNS anywhere. tests/cluster/netpol_test.sh enforces both on a running job.
usage: policies_test.py
"""
import copy
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render  # noqa: E402
import sdk_trainjob  # noqa: E402
import yaml  # noqa: E402
from model_fixtures import EXAMPLES, ROOT, SCHEMAS, examples, package, runtime_overlays  # noqa: E402

TOKEN_DIR = "/var/run/secrets/kubernetes.io"

QUOTA_NAMES = {"cpu": ("requests", "cpu"), "memory": ("requests", "memory"),
               "requests.cpu": ("requests", "cpu"), "requests.memory": ("requests", "memory"),
               "limits.cpu": ("limits", "cpu"), "limits.memory": ("limits", "memory")}
UNITS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text):
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text)).groups()
    return float(number) * UNITS[unit]


def quota_refusals(pod_spec, hard):
    """What a ResourceQuota with these hard names refuses in the pod ([] if admitted)."""
    out = []
    for kind in ("initContainers", "containers"):
        for c in pod_spec.get(kind, []):
            resources = c.get("resources") or {}
            for name in hard:
                section, resource = QUOTA_NAMES[name]
                if resource not in (resources.get(section) or {}):
                    out.append(f"{kind[:-1]} {c['name']} has no {section}.{resource} ({name} is in the quota)")
    return out


def pod_request(pod_spec, resource):
    """PodRequests with native sidecars: max(Σ containers + Σ sidecars, each init + sidecars before it)."""
    def req(c):
        return quantity(((c.get("resources") or {}).get("requests") or {}).get(resource, 0))
    sidecars = total_init = 0
    for c in pod_spec.get("initContainers", []):
        if c.get("restartPolicy") == "Always":
            sidecars += req(c)
        else:
            total_init = max(total_init, sidecars + req(c))
    return max(total_init, sidecars + sum(req(c) for c in pod_spec["containers"]))


def rendered_pods():
    """(where, pod) of every example TrainJob and the SDK's, on every overlay's runtimes."""
    out = []
    for overlay in runtime_overlays():
        byname = {d["metadata"]["name"]: d for d in package(overlay) if d["kind"] == "ClusterTrainingRuntime"}
        jobs = [(p, d) for p, d in examples(overlay) if d["kind"] == "TrainJob"]
        jobs.append(("the SDK's CustomTrainer", SCHEMAS.apply_defaults(sdk_trainjob.trainjob("sdk", 2, "/home/mpiuser"))))
        for path, trainjob in jobs:
            for pod in render.render(trainjob, byname[trainjob["spec"]["runtimeRef"]["name"]])["pods"]:
                out.append((f"{path} on {overlay}: {pod['metadata']['name']}", pod))
    return out


def in_place_agent(container):
    """manifests/inplace-restart's agent: our program, no user code, its own projected token."""
    return container["name"] == "in-place-agent" and container.get("command", [])[:2] == ["mpi-rendezvous", "in-place-agent"]


TOKEN_HOLDER = "mpi-rendezvous"  # the launcher pod's sidecar: our image, no user code


def token_exposures(pod):
    """Where a container of the pod could read an API token that it should not, or where the
    launcher pod's Events lack theirs ([] if the pod is as the trust boundary wants it)."""
    spec, out = pod["spec"], []
    launcher = pod["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name") == "launcher"
    if spec.get("automountServiceAccountToken") is not False:
        out.append("automountServiceAccountToken is not false: the kubelet mounts the token in every container")
    if spec.get("shareProcessNamespace"):
        out.append("shareProcessNamespace: a rank would reach the token through the sidecar's /proc/PID/root")
    token_volumes = {}
    for v in spec.get("volumes", []):
        sources = (v.get("projected") or {}).get("sources", [])
        tokens = [s["serviceAccountToken"] for s in sources if "serviceAccountToken" in s]
        if tokens or "token" in (v.get("secret") or {}).get("secretName", ""):
            token_volumes[v["name"]] = tokens
    holders = []
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind, []):
            for m in c.get("volumeMounts", []):
                if m["name"] not in token_volumes and not m["mountPath"].startswith(TOKEN_DIR):
                    continue
                sidecar = kind == "initContainers" and c.get("restartPolicy") == "Always"
                if launcher and sidecar and c["name"] == TOKEN_HOLDER and c["command"][0] == "mpi-rendezvous":
                    holders.append((c, m))
                elif not in_place_agent(c):
                    out.append(f"{c['name']} mounts {m['name']} at {m['mountPath']}")
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if c["name"] == "node" and c.get("command", [""])[0] == "mpi-launcher" and env.get("TMPI_EVENTS") == "off":
                out.append("mpi-launcher's Events are off")
    if launcher:
        if len(holders) != 1:
            return out + [f"the launcher pod's {TOKEN_HOLDER} mounts {len(holders)} tokens, not one: no Events"]
        c, m = holders[0]
        tokens = token_volumes.get(m["name"], [])
        if m["mountPath"] != TOKEN_DIR + "/serviceaccount" or not m.get("readOnly") or len(tokens) != 1:
            out.append(f"{c['name']}'s token is not one projected token, read-only, where the programs read it")
        elif tokens[0].get("audience") or tokens[0].get("expirationSeconds", 3600) > 3600:
            out.append(f"{c['name']}'s token is not for the API server alone, or lives past an hour")
        if "--trainjob" not in c["command"]:
            out.append(f"{c['name']} is not told its TrainJob (--trainjob): it would relay no Event")
    return out


def secret_rule_breaches(role, secret_name):
    out = []
    for rule in role["rules"]:
        if "" not in rule.get("apiGroups", []) or not {"secrets", "*"} & set(rule.get("resources", [])):
            continue
        verbs = set(rule["verbs"])
        if verbs & {"list", "watch", "*"}:
            out.append(f"{sorted(verbs & {'list', 'watch', '*'})} on every Secret (a list returns their data)")
        if "get" in verbs and rule.get("resourceNames") != [secret_name]:
            out.append(f"get on Secrets {rule.get('resourceNames') or 'of the whole namespace'}, not only {secret_name}")
    return out


def code_requests(*sources):
    """What a program asks the API: the KubeActions of its source files, as (apiGroup,
    resource, verb)."""
    found = []
    for source in sources:
        with open(os.path.join(ROOT, source)) as f:
            found += re.findall(r'const KubeAction k\w+\{"(\w+)", "([^"]*)", "(\w+)"\};', f.read())
    return {(group, resource, verb) for verb, group, resource in found}


def mpi_init_requests():
    """What mpi-init --jobset asks the API (initcontainer/api_source.cpp)."""
    return code_requests("initcontainer/api_source.cpp")


# The launcher pod's sidecar, with its token: the Events, and the pods of hosts that never came.
EVENTS_SOURCES = ("rendezvous/trainjob_events.cpp", "rendezvous/job_pods.cpp")


def rbac_breaches(role, requests, who="mpi-init"):
    """What the Role grants beyond `requests`, or lacks of them (K: RuleAllows; a create's
    request has no name yet, so a create rule with resourceNames allows none)."""
    out, granted = [], set()
    for rule in role["rules"]:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    granted.add((group, resource, verb))
                    if (group, resource, verb) not in requests:
                        out.append(f"{verb} on {resource} ({group or 'core'}), which {who} never asks")
                    if verb == "create" and rule.get("resourceNames"):
                        out.append(f"create on {resource} by name, which refuses every create")
    out += [f"no {verb} on {resource} ({group or 'core'}), which {who} asks" for group, resource, verb
            in sorted(requests - granted)]
    return out


class Trust(unittest.TestCase):
    def test_only_the_launchers_sidecar_holds_a_token(self):
        pods = rendered_pods()
        self.assertTrue(pods)
        launchers = 0
        for where, pod in pods:
            self.assertEqual(token_exposures(pod), [], where)
            launchers += pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "launcher"
        self.assertGreater(launchers, 3)

    def test_the_token_check_sees_each_way_in(self):
        [(_, node), (_, launcher)] = [next((w, p) for w, p in rendered_pods()
                                           if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == r)
                                      for r in ("node", "launcher")]
        self.assertEqual(token_exposures(node), [])
        self.assertEqual(token_exposures(launcher), [])
        main = lambda s: next(c for c in s["containers"] if c["name"] == "node")  # noqa: E731
        sidecar = lambda s: next(c for c in s["initContainers"] if c["name"] == TOKEN_HOLDER)  # noqa: E731
        token = next(v for v in launcher["spec"]["volumes"] if "projected" in v)
        for pod, change in (
                (node, lambda s: s.pop("automountServiceAccountToken")),
                (node, lambda s: (s["volumes"].append({"name": "t", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token"}}]}}),
                                  main(s)["volumeMounts"].append({"name": "t", "mountPath": "/t"}))),
                (node, lambda s: main(s)["volumeMounts"].append({"name": "home", "mountPath": TOKEN_DIR})),
                (node, lambda s: (s["volumes"].append(token), sidecar(s)["volumeMounts"].append(
                    {"name": token["name"], "mountPath": TOKEN_DIR + "/serviceaccount", "readOnly": True}))),
                (launcher, lambda s: main(s)["volumeMounts"].append(sidecar(s)["volumeMounts"][-1])),
                (launcher, lambda s: next(c for c in s["initContainers"] if c["name"] == "sshd")["volumeMounts"].append(
                    sidecar(s)["volumeMounts"][-1])),
                (launcher, lambda s: s.update(shareProcessNamespace=True)),
                (launcher, lambda s: sidecar(s)["volumeMounts"].pop()),
                (launcher, lambda s: token["projected"]["sources"][0]["serviceAccountToken"].update(audience="vault")),
                (launcher, lambda s: token["projected"]["sources"][0]["serviceAccountToken"].update(
                    expirationSeconds=86400)),
                (launcher, lambda s: sidecar(s)["command"].remove("--trainjob")),
                (launcher, lambda s: main(s)["env"].append({"name": "TMPI_EVENTS", "value": "off"}))):
            broken = copy.deepcopy(pod)
            token = next((v for v in broken["spec"]["volumes"] if "projected" in v), copy.deepcopy(token))
            change(broken["spec"])
            self.assertNotEqual(token_exposures(broken), [], change)

    def test_the_events_role_grants_what_the_sidecar_asks_and_nothing_else(self):
        with open(os.path.join(EXAMPLES, "rbac-events.yaml")) as stream:
            docs = [d for d in yaml.safe_load_all(stream) if d]
        [role] = [d for d in docs if d["kind"] == "Role"]
        [binding] = [d for d in docs if d["kind"] == "RoleBinding"]
        requests = code_requests(*EVENTS_SOURCES)
        self.assertEqual(requests, {("", "events", "create"), ("trainer.kubeflow.org", "trainjobs", "get"),
                                    ("", "pods", "list")})
        self.assertEqual(rbac_breaches(role, requests, "the Events' sidecar"), [])
        # Bound to the account the pods run as: none is named, so the namespace's default; the
        # inplace-restart overlay's account gets the same binding in its agent-rbac.yaml
        # (examples.inplace-restart holds it there).
        for where, pod in rendered_pods():
            if " on inplace-restart:" in where:
                self.assertEqual(pod["spec"].get("serviceAccountName"), "trainer-mpi-in-place-agent", where)
            else:
                self.assertNotIn("serviceAccountName", pod["spec"], where)
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": "default",
                                                "namespace": role["metadata"]["namespace"]}])
        self.assertEqual(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                              "name": role["metadata"]["name"]})
        for change in (lambda r: r["rules"].append({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}),
                       lambda r: r["rules"].append({"apiGroups": [""], "resources": ["pods"], "verbs": ["watch"]}),
                       lambda r: r["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}),
                       lambda r: r["rules"][0].update(verbs=["create", "patch"]),
                       lambda r: r["rules"][0].update(resourceNames=["x"]),
                       lambda r: r["rules"].pop()):
            broken = copy.deepcopy(role)
            change(broken)
            self.assertNotEqual(rbac_breaches(broken, requests, "the Events' sidecar"), [], broken["rules"])

    def test_rbac_reads_only_the_jobs_own_secret(self):
        with open(os.path.join(EXAMPLES, "rbac.yaml")) as stream:
            docs = [d for d in yaml.safe_load_all(stream) if d]
        [role] = [d for d in docs if d["kind"] == "Role"]
        [account] = [d for d in docs if d["kind"] == "ServiceAccount"]
        self.assertIs(account.get("automountServiceAccountToken"), False)
        jobset = role["metadata"]["name"].removesuffix("-launcher")
        self.assertEqual(secret_rule_breaches(role, jobset + "-mpi-ssh"), [])  # initcontainer/api_source.cpp's name
        self.assertTrue(any("create" in r["verbs"] and "secrets" in r["resources"] for r in role["rules"]))
        for widen in ({"verbs": ["get"]}, {"verbs": ["list"], "resourceNames": [jobset + "-mpi-ssh"]},
                      {"verbs": ["get"], "resourceNames": ["other-mpi-ssh"]}):
            broken = copy.deepcopy(role)
            broken["rules"].append({"apiGroups": [""], "resources": ["secrets"], **widen})
            self.assertNotEqual(secret_rule_breaches(broken, jobset + "-mpi-ssh"), [], widen)

    def test_rbac_grants_what_mpi_init_asks_and_nothing_else(self):
        with open(os.path.join(EXAMPLES, "rbac.yaml")) as stream:
            [role] = [d for d in yaml.safe_load_all(stream) if d and d["kind"] == "Role"]
        requests = mpi_init_requests()
        self.assertEqual(requests, {("", "pods", "list"), ("jobset.x-k8s.io", "jobsets", "get"),
                                    ("", "secrets", "get"), ("", "secrets", "create")})
        self.assertEqual(rbac_breaches(role, requests), [])
        jobset = role["metadata"]["name"].removesuffix("-launcher")
        [jobsets] = [r for r in role["rules"] if "jobsets" in r["resources"]]
        self.assertEqual(jobsets.get("resourceNames"), [jobset])
        for change in (lambda r: r["rules"].append({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}),
                       lambda r: r["rules"].append({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}),
                       lambda r: r["rules"][-1].update(resourceNames=[jobset + "-mpi-ssh"]),
                       lambda r: r["rules"].pop(0)):
            broken = copy.deepcopy(role)
            change(broken)
            self.assertNotEqual(rbac_breaches(broken, requests), [], broken["rules"])


EPHEMERAL = (32768, 60999)


class NetworkPolicy(unittest.TestCase):
    def test_it_admits_what_the_programs_listen_on(self):
        import manifests_test
        manifests_test.setup(ROOT, os.environ.get("TMPI_BUILD_DIR", os.path.join(ROOT, "build", "dev")))
        [policy] = [d for d in package("kubeflow/profile") if d["kind"] == "NetworkPolicy"]
        selector = policy["spec"]["podSelector"]["matchLabels"]
        from_job, from_anyone = [], []
        for rule in policy["spec"]["ingress"]:
            ports = [(p["port"], p.get("endPort", p["port"])) for p in rule["ports"]]
            self.assertTrue(all(p.get("protocol") == "TCP" for p in rule["ports"]))
            if "from" in rule:
                self.assertEqual(rule["from"], [{"podSelector": {"matchLabels": selector}}])
                from_job += ports
            else:
                from_anyone += ports
        port = lambda flag: int(manifests_test.default(flag))  # noqa: E731
        self.assertEqual(sorted(from_job), sorted([(port("--ssh-port"),) * 2, (port("--rendezvous-port"),) * 2,
                                                   (port("--master-port"),) * 2, EPHEMERAL]))
        self.assertEqual(from_anyone, [(port("--probe-port"),) * 2])
        # The egress policy (for a namespace that denies egress too): the same ports, to the
        # job's pods, and DNS anywhere; nothing else.
        [egress] = [d for d in package("kubeflow/profile-egress") if d["kind"] == "NetworkPolicy"]
        self.assertEqual((egress["spec"]["podSelector"], egress["spec"]["policyTypes"]),
                         (policy["spec"]["podSelector"], ["Egress"]))
        to_job, to_anyone = [], []
        for rule in egress["spec"]["egress"]:
            ports = [(p["protocol"], p["port"], p.get("endPort", p["port"])) for p in rule["ports"]]
            if "to" in rule:
                self.assertEqual(rule["to"], [{"podSelector": {"matchLabels": selector}}])
                to_job += ports
            else:
                to_anyone += ports
        self.assertEqual(sorted(to_job), sorted(("TCP",) + p for p in from_job))
        self.assertEqual(sorted(to_anyone), [("TCP", 53, 53), ("UDP", 53, 53)])
        for where, pod in rendered_pods():
            self.assertLessEqual(selector.items(), pod["metadata"]["labels"].items(), where)
            for c in pod["spec"]["containers"]:
                env = {e["name"]: e.get("value") for e in c.get("env", [])}
                if c["command"][0] == "mpi-launcher":
                    low = int(env["OMPI_MCA_btl_tcp_port_min_v4"])
                    self.assertEqual((low, low + int(env["OMPI_MCA_btl_tcp_port_range_v4"]) - 1), EPHEMERAL, where)


class Quota(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pods = rendered_pods()

    def test_a_requests_quota_admits_every_pod(self):
        self.assertGreater(len(self.pods), 12)
        for where, pod in self.pods:
            self.assertEqual(quota_refusals(pod["spec"], ["cpu", "memory", "requests.cpu", "requests.memory"]), [],
                             where)
            self.assertGreater(pod_request(pod["spec"], "cpu"), 1, where)

    def test_the_helpers_have_limits_and_the_ranks_take_the_trainjobs(self):
        # Limits on what the runtime alone runs; the ranks' container takes its limits from
        # resourcesPerNode (the SDK gives requests and limits alike), so a limits.* quota
        # admits a TrainJob that sets them.
        for where, pod in self.pods:
            helpers = dict(pod["spec"], containers=[])
            self.assertEqual(quota_refusals(helpers, ["limits.cpu", "limits.memory"]), [], where)
        [(_, runtime)] = [(p, d) for p, d in examples() if d.get("metadata", {}).get("name") == "trainer-mpi-openmpi-v0-1"]
        tj = SCHEMAS.apply_defaults(sdk_trainjob.trainjob("sdk", 2, "/home/mpiuser"))
        tj["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": "2", "memory": "4Gi"},
                                                     "limits": {"cpu": "2", "memory": "4Gi"}}
        for pod in render.render(tj, runtime)["pods"]:
            self.assertEqual(quota_refusals(pod["spec"], list(QUOTA_NAMES)), [],
                             pod["metadata"]["name"])

    def test_the_quota_model_refuses_a_bare_container(self):
        where, pod = self.pods[0]
        for kind in ("initContainers", "containers"):
            spec = copy.deepcopy(pod["spec"])
            spec[kind][-1].pop("resources")
            self.assertNotEqual(quota_refusals(spec, ["cpu"]), [], f"{where}: {kind}")
        spec = copy.deepcopy(pod["spec"])
        spec["initContainers"][0]["resources"]["requests"].pop("memory")
        self.assertNotEqual(quota_refusals(spec, ["requests.memory"]), [])
        self.assertEqual(quota_refusals(spec, ["requests.cpu"]), [])
        # The sidecars count beside the main container; a plain init container only before them.
        spec = {"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}},
                                   {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}
        self.assertEqual(pod_request(spec, "cpu"), 3)
        spec["initContainers"].reverse()
        self.assertEqual(pod_request(spec, "cpu"), 4)


if __name__ == "__main__":
    unittest.main()
