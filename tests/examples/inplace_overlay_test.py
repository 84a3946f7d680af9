#!/usr/bin/env python3
"""inplace_overlay_test.py: manifests/inplace-restart as `kubectl kustomize` renders it, against
Trainer v2.3's and JobSet v0.12.0's CRDs, JobSet's webhook rules for InPlaceRestart
(jobset_inplace_model.admit), the agent's place in every pod, its token and its Role, and the
failure policy the overlay keeps for the launcher (jobset_model's Job controller and JobSet
failure policy).

Design: each runtime of the overlay rendered with a TrainJob through trainer_model.render, as
Trainer would, then each rule checked on the JobSet and its pods; the base (trainer-v2.3) is
the control: the same checks fail there, so they test the overlay and not the fixtures.
usage: inplace_overlay_test.py (plain unittest; exit status 1 on any failure)
"""
import copy
import os
import sys
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobset_inplace_model as ipr  # noqa: E402
import jobset_model as jm  # noqa: E402
import trainer_model as tm  # noqa: E402
from model_fixtures import SCHEMAS, package, pod_spec, trainjob  # noqa: E402

OVERLAY = "inplace-restart"
HERE = os.path.dirname(os.path.abspath(__file__))
RBAC = os.path.join(HERE, "..", "..", "manifests", OVERLAY, "agent-rbac.yaml")
TOKEN_MOUNT = "/var/run/secrets/trainer-mpi/in-place-agent"
EVENTS_TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def runtimes(overlay=OVERLAY):
    return [d for d in package(overlay) if d["kind"] == "ClusterTrainingRuntime"]


def jobset(runtime):
    tj = trainjob(name="train", namespace="team-a", numNodes=3)
    tj["spec"]["runtimeRef"] = {"name": runtime["metadata"]["name"], "kind": "ClusterTrainingRuntime",
                                "apiGroup": "trainer.kubeflow.org"}
    return tm.render(tj, copy.deepcopy(runtime))["jobset"]


def agent_problems(pod):
    """What a pod lacks of the agent's contract ([] when it holds)."""
    init = pod.get("initContainers", [])
    names = [c["name"] for c in init]
    if "in-place-agent" not in names:
        return ["no in-place-agent"]
    out, agent = [], init[names.index("in-place-agent")]
    after = [n for n in names[names.index("in-place-agent") + 1:]]
    if not {"mpi-rendezvous"} <= set(after) or names.index("in-place-agent") < names.index("mpi-init"):
        out.append(f"the agent is not after mpi-init and before the sidecars: {names}")
    if agent.get("restartPolicy") != "Always":  # KA:types.go:2990-3006, a native sidecar restarts alone
        out.append("the agent is not a native sidecar")
    if agent["image"] != init[names.index("mpi-init")]["image"]:
        out.append(f"the agent runs {agent['image']}, not trainer-mpi's image")
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in agent.get("env", [])}
    if env != {"JOBSET_NAME": f"metadata.labels['{ipr.JOBSET_NAME}']", "POD_NAME": "metadata.name"}:
        out.append(f"the agent's env {env}")
    if agent["command"] != ["mpi-rendezvous", "in-place-agent", "--in-place-jobset", "$(JOBSET_NAME)",
                            "--in-place-pod", "$(POD_NAME)"]:
        out.append(f"the agent's command {agent['command']}")
    if pod.get("automountServiceAccountToken") is not False:
        out.append("automountServiceAccountToken is not false")
    token = [v["name"] for v in pod.get("volumes", [])
             if any("serviceAccountToken" in s for s in (v.get("projected") or {}).get("sources", []))]
    mounted = {(c["name"], m["mountPath"]) for c in init + pod["containers"]
               for m in c.get("volumeMounts", []) if m["name"] in token}
    # The launcher pod's mpi-rendezvous holds the Events' token (examples.policies holds it there).
    mounted.discard(("mpi-rendezvous", EVENTS_TOKEN_MOUNT))
    if mounted != {("in-place-agent", TOKEN_MOUNT)}:
        out.append(f"the token is mounted at {sorted(mounted)}, not in the agent alone")
    if pod.get("serviceAccountName") != "trainer-mpi-in-place-agent" or pod.get("shareProcessNamespace"):
        out.append("not the agent's account, or a process namespace shared (the token would be reachable)")
    return out


class Overlay(unittest.TestCase):
    def test_the_crds_and_the_webhook_admit_it(self):
        for rt in runtimes():
            name = rt["metadata"]["name"]
            self.assertEqual(SCHEMAS.validate(rt), [], f"{name}: Trainer v2.3's CRD")
            js = ipr.admit(jobset(rt))  # J:pkg/webhooks/jobset_webhook.go, the gate on
            self.assertTrue(ipr.in_place(js), name)
            self.assertEqual(SCHEMAS.validate(js), [], f"{name}: JobSet v0.12.0's CRD")
            self.assertEqual(ipr.total_pods(js), 3, name)  # launcher + 2 nodes: every pod at the barrier
            with self.assertRaises(jm.Rejected, msg="the gate off"):
                ipr.admit(jobset(rt), gate=False)

    def test_the_base_is_refused_with_the_strategy_alone(self):
        for rt in runtimes("trainer-v2.3"):
            rt["spec"]["template"]["spec"]["failurePolicy"]["restartStrategy"] = "InPlaceRestart"
            with self.assertRaisesRegex(jm.Rejected, "backoffLimit must be set to 2147483647"):
                ipr.admit(jobset(rt))

    def test_every_pod_runs_the_agent_with_the_only_token(self):
        for rt in runtimes():
            js = jobset(rt)
            for role in ("launcher", "node"):
                self.assertEqual(agent_problems(pod_spec(js, role)), [], f"{rt['metadata']['name']}/{role}")
        base = jobset(runtimes("trainer-v2.3")[0])
        self.assertEqual(agent_problems(pod_spec(base, "node")), ["no in-place-agent"])
        broken = copy.deepcopy(pod_spec(jobset(runtimes()[0]), "node"))
        broken["containers"][0]["volumeMounts"].append({"name": "in-place-agent-token", "mountPath": "/t"})
        self.assertTrue(any("token" in p for p in agent_problems(broken)))

    def test_the_role_is_what_the_agent_calls_and_no_more(self):
        with open(RBAC) as stream:
            all_docs = [d for d in yaml.safe_load_all(stream) if d]
        docs = {d["kind"]: d for d in all_docs if d["metadata"]["name"] == "trainer-mpi-in-place-agent"}
        [events] = [d for d in all_docs if d["metadata"]["name"] == "trainer-mpi-events-in-place"]
        self.assertEqual(events["roleRef"]["name"], "trainer-mpi-events", "the Events' Role, bound to the pods' account")
        self.assertEqual(events["subjects"], [{"kind": "ServiceAccount", "name": "trainer-mpi-in-place-agent"}])
        self.assertIs(docs["ServiceAccount"].get("automountServiceAccountToken"), False)
        self.assertEqual(docs["Role"]["rules"], [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]},
                                                 {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
                                                  "verbs": ["get"]}])
        for ours, upstream in zip(docs["Role"]["rules"], ipr.AGENT_RULES):  # within JobSet's own agent's Role
            self.assertLessEqual(set(ours["verbs"]), set(upstream["verbs"]))
        self.assertEqual(docs["RoleBinding"]["subjects"], [{"kind": "ServiceAccount", "name": "trainer-mpi-in-place-agent"}])
        self.assertEqual(docs["RoleBinding"]["roleRef"]["name"], docs["Role"]["metadata"]["name"])

    def test_the_launcher_pod_lost_restarts_the_jobset_a_program_failure_fails_it(self):
        for rt in runtimes():
            js = ipr.admit(jobset(rt))
            job = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == "launcher")["template"]
            cases = [("node", 137, ("DisruptionTarget",), ("Restart", "InfrastructureFault")),
                     ("node", 75, (), ("Restart", "InfrastructureFault")),
                     ("node", 69, (), ("Restart", "InfrastructureFault")),
                     ("node", 1, (), ("Failed", "FailJobSetFailurePolicyAction")),
                     ("mpi-init", 65, (), ("Failed", "FailJobSetFailurePolicyAction"))]
            for container, code, conditions, want in cases:
                outcome, reason, message = jm.pod_failure(job, container, code, conditions, namespace="team-a")
                self.assertEqual(outcome, "Failed", f"{container} {code}: a new launcher pod, not the JobSet's end")
                self.assertEqual(jm.jobset_failure(js, "launcher", reason, message), want, f"{container} {code}")

    def test_a_node_pod_lost_is_made_again_alone(self):
        for rt in runtimes():
            js = ipr.admit(jobset(rt))
            job = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == "node")["template"]
            # However many node pods were lost before (backoffLimit MaxInt32), once the old one is terminal.
            self.assertEqual(jm.pod_failure(job, "node", 137, ("DisruptionTarget",), failed_before=10 ** 6)[0], "NewPod")
            self.assertEqual(job["spec"]["podReplacementPolicy"], "Failed")
        base = jm.admit(jobset(runtimes("trainer-v2.3")[0]))
        job = next(r for r in base["spec"]["replicatedJobs"] if r["name"] == "node")["template"]
        self.assertEqual(jm.pod_failure(job, "node", 137, ("DisruptionTarget",), failed_before=10 ** 6)[0], "Failed")


if __name__ == "__main__":
    unittest.main()
