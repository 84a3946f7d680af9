#!/usr/bin/env python3
"""pod_security_test.py: every runtime of every overlay of manifests/ (as `kubectl kustomize`
renders it), and every pod that Trainer and JobSet make of every example TrainJob on each
(render.py), passes Pod Security "restricted", the profile that
Pod Security Admission enforces.

The rules are those of kubernetes/pod-security-admission (policy/check_*.go at 8f84a87c,
July 2026; the page kubernetes.io/docs/concepts/security/pod-security-standards is made from
them), "restricted" being "baseline" plus its own checks. Each rule below names its file.
Fields that no example needs (Windows options, AppArmor, SELinux, sysctls) must be absent
at pod level, stricter than the profile, which allows some of their values. Seccomp is also
checked against baseline's "not Unconfined". Each rule has a negative case: a runtime
broken in that one way must fail.

usage: pod_security_test.py
"""
import copy
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import render  # noqa: E402
from model_fixtures import examples, package, runtime_overlays  # noqa: E402

# check_capabilities_baseline.go: the default set; check_capabilities_restricted.go: only this one.
RESTRICTED_ADD = {"NET_BIND_SERVICE"}
# check_restrictedVolumes.go: the inline volume sources allowed.
VOLUMES = {"configMap", "downwardAPI", "emptyDir", "projected", "secret", "csi", "persistentVolumeClaim",
           "ephemeral", "image"}


def containers(pod):
    """(kind, container) of a pod spec: initContainers (native sidecars too), containers, ephemeral."""
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in pod.get(kind, []) or []:
            yield kind, c


def violations(pod):
    """Why `pod` (a pod spec) is not "restricted"; empty when it is."""
    out = []
    psc = pod.get("securityContext", {}) or {}
    user_ns = pod.get("hostUsers") is False
    # Baseline: check_hostNamespaces.go, check_privileged.go, check_hostPathVolumes.go, check_hostPorts.go.
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            out.append(f"spec.{field} is true")
    for v in pod.get("volumes", []) or []:
        source = [k for k in v if k != "name"]
        if "hostPath" in source:
            out.append(f"volume {v['name']} is a hostPath")
        elif not set(source) <= VOLUMES:  # check_restrictedVolumes.go
            out.append(f"volume {v['name']} is of type {source}, not one of {sorted(VOLUMES)}")
    # check_runAsNonRoot.go: pod-level true, or every container true; never false.
    pod_nonroot = psc.get("runAsNonRoot")
    # check_seccompProfile_restricted.go: RuntimeDefault or Localhost at pod level or on every container.
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if pod_seccomp not in (None, "RuntimeDefault", "Localhost"):
        out.append(f"spec.securityContext.seccompProfile.type is {pod_seccomp}")
    if psc.get("runAsUser") == 0 and not user_ns:  # check_runAsUser.go
        out.append("spec.securityContext.runAsUser is 0")
    if pod_nonroot is False and not user_ns:
        out.append("spec.securityContext.runAsNonRoot is false")
    for key in ("seLinuxOptions", "sysctls", "appArmorProfile", "windowsOptions"):
        if key in psc:  # check_seLinuxOptions.go, check_sysctls.go, ...: allowed only in part; none needed
            out.append(f"spec.securityContext.{key} is set (the examples need none)")
    for kind, c in containers(pod):
        where = f"{kind}[{c['name']}]"
        sc = c.get("securityContext", {}) or {}
        for port in c.get("ports", []) or []:
            if port.get("hostPort"):
                out.append(f"{where} asks for hostPort {port['hostPort']}")
        if sc.get("privileged"):
            out.append(f"{where} is privileged")
        if sc.get("procMount") not in (None, "Default"):  # check_procMount_restricted.go
            out.append(f"{where} procMount is {sc['procMount']}")
        if sc.get("allowPrivilegeEscalation") is not False:  # check_allowPrivilegeEscalation.go
            out.append(f"{where} securityContext.allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities", {}) or {}
        if "ALL" not in (caps.get("drop") or []):  # check_capabilities_restricted.go
            out.append(f"{where} securityContext.capabilities.drop does not include ALL")
        extra = set(caps.get("add") or []) - RESTRICTED_ADD
        if extra:
            out.append(f"{where} adds capabilities {sorted(extra)}; only NET_BIND_SERVICE is allowed")
        if not user_ns:
            nonroot = sc.get("runAsNonRoot")
            if nonroot is False or (nonroot is None and pod_nonroot is not True):
                out.append(f"{where} may run as root: runAsNonRoot is true neither here nor on the pod")
            if sc.get("runAsUser") == 0:
                out.append(f"{where} securityContext.runAsUser is 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp not in (None, "RuntimeDefault", "Localhost") or (seccomp is None and pod_seccomp is None):
            out.append(f"{where} seccompProfile is {seccomp or 'unset, here and on the pod'}")
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):  # check_hostProbesAndhostLifecycle.go
            for handler in ("httpGet", "tcpSocket"):
                if ((c.get(probe) or {}).get(handler) or {}).get("host"):
                    out.append(f"{where} {probe}.{handler}.host is set")
    return out


def runtimes(overlays=None):
    return [(f"manifests/{overlay}", doc) for overlay in overlays or runtime_overlays()
            for doc in package(overlay) if doc.get("kind") == "ClusterTrainingRuntime"]


def runtime_pods(doc):
    for job in doc["spec"]["template"]["spec"]["replicatedJobs"]:
        yield job["name"], job["template"]["spec"]["template"]["spec"]


class PodSecurityRestricted(unittest.TestCase):
    def test_every_runtime_pod_template(self):
        self.assertTrue(runtimes())
        for path, doc in runtimes():
            for role, pod in runtime_pods(doc):
                self.assertEqual(violations(pod), [], f"{path}: {role}")

    def test_every_rendered_pod(self):
        count = 0
        for overlay in runtime_overlays():
            docs = dict((doc["metadata"]["name"], doc) for _, doc in runtimes([overlay]))
            for path, trainjob in examples():
                if trainjob.get("kind") != "TrainJob":
                    continue
                out = render.render(trainjob, docs[trainjob["spec"]["runtimeRef"]["name"]])
                for pod in out["pods"]:
                    self.assertEqual(violations(pod["spec"]), [], f"{path} on {overlay}: pod {pod['metadata']['name']}")
                    count += 1
        self.assertGreater(count, 0)

    def test_each_rule_catches_its_breach(self):
        _, doc = runtimes()[0]
        base = next(pod for _, pod in runtime_pods(doc))
        self.assertEqual(violations(base), [])

        def broken(change):
            pod = copy.deepcopy(base)
            change(pod)
            return violations(pod)

        first = ("initContainers", 0)
        breaches = {
            "root uid": lambda p: p["securityContext"].update(runAsUser=0),
            "runAsNonRoot unset": lambda p: p["securityContext"].pop("runAsNonRoot"),
            "no seccomp": lambda p: p["securityContext"].pop("seccompProfile"),
            "Unconfined": lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"}),
            "escalation": lambda p: p[first[0]][first[1]]["securityContext"].pop("allowPrivilegeEscalation"),
            "caps kept": lambda p: p[first[0]][first[1]]["securityContext"].pop("capabilities"),
            "caps added": lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
            "privileged": lambda p: p["containers"][0]["securityContext"].update(privileged=True),
            "hostPath": lambda p: p["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
            "nfs": lambda p: p["volumes"].append({"name": "n", "nfs": {"server": "s", "path": "/"}}),
            "hostNetwork": lambda p: p.update(hostNetwork=True),
            "hostPort": lambda p: p["containers"][0].setdefault("ports", []).append({"containerPort": 1, "hostPort": 1}),
            "probe host": lambda p: p["initContainers"][-1]["readinessProbe"]["httpGet"].update(host="10.0.0.1"),
        }
        for name, change in breaches.items():
            self.assertNotEqual(broken(change), [], f"a runtime with '{name}' passed")
        # Allowed: NET_BIND_SERVICE, and root inside a user namespace.
        self.assertEqual(broken(lambda p: p["containers"][0]["securityContext"]["capabilities"].update(
            add=["NET_BIND_SERVICE"])), [])
        self.assertEqual(broken(lambda p: (p.update(hostUsers=False), p["securityContext"].update(runAsUser=0))), [])


if __name__ == "__main__":
    unittest.main()
