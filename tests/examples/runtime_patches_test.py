#!/usr/bin/env python3
"""runtime_patches_test.py: runtimePatches as Trainer v2.3.0 applies them (runtime_patches.py),
on the package's runtimes, and the inputs the apiserver refuses before Trainer sees them.

Design: the Kueue-shaped TrainJob is the path a queued job takes: created suspended (the
JobSet too), then resumed in one update that sets suspend false and adds a patch (manager
kueue.x-k8s.io/manager) with the flavor's nodeSelector and tolerations for every replicated
job. Its pods must carry them and be otherwise the unpatched pods. Then the strategic
merge's rules one at a time (keyed lists, replaced lists, null, directives), the webhook's
refusals, the update rule, the examples that mount their data through a patch, and
render.py's validation of every input against the CRDs (the CEL rule that refuses an MPI
runtime that also sets a Torch, JAX or Flux policy, which Trainer's own tests check).
usage: runtime_patches_test.py
"""
import copy
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render  # noqa: E402
import runtime_patches as rp  # noqa: E402
import trainer_model as tm  # noqa: E402
from kueue_trainjob import FLAVOR, KUEUE, admitted, hello, kueue_patch, pod_patch, queued  # noqa: E402
from model_fixtures import examples, package  # noqa: E402



def runtime(name="trainer-mpi-openmpi-v0-1", overlay="trainer-v2.3"):
    return next(d for d in package(overlay) if d["metadata"]["name"] == name)


class Kueue(unittest.TestCase):
    def test_suspended_then_resumed_with_a_flavor(self):
        waiting, resumed = queued(), admitted()
        out = render.render(waiting, runtime())
        self.assertIs(out["jobset"]["spec"]["suspend"], True)
        self.assertIsNone(rp.update_refusal(waiting, resumed))
        patched = render.render(resumed, runtime())
        self.assertIs(patched["jobset"]["spec"]["suspend"], False)
        self.assertEqual(len(patched["pods"]), len(out["pods"]))
        for before, after in zip(out["pods"], patched["pods"]):
            for key, value in FLAVOR.items():
                self.assertEqual(after["spec"][key], value, after["metadata"]["name"])
            stripped = {k: v for k, v in after["spec"].items() if k not in FLAVOR}
            self.assertEqual(stripped, before["spec"], "the patch changed more than the flavor")

    def test_patches_change_only_around_a_suspension(self):
        running, changed = hello(suspend=False), hello(suspend=False, runtimePatches=[kueue_patch(**FLAVOR)])
        self.assertIn("suspended before or after", rp.update_refusal(running, changed))
        suspended = hello(suspend=True, runtimePatches=[kueue_patch(**FLAVOR)])
        self.assertIsNone(rp.update_refusal(running, suspended))  # Kueue's preemption: suspend and clear
        self.assertIn("still active", rp.update_refusal(running, suspended, active_jobs=["node"]))
        self.assertIsNone(rp.update_refusal(changed, changed))


class Merge(unittest.TestCase):
    def test_the_strategic_merge_rules(self):
        base = {"containers": [{"name": "node", "command": ["a"], "env": [{"name": "X", "value": "1"}],
                                "volumeMounts": [{"name": "home", "mountPath": "/home"}]}],
                "tolerations": [{"key": "old"}], "nodeSelector": {"a": "1"}, "hostname": "h"}
        patch = {"containers": [{"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                                {"name": "extra", "image": "i"}],
                 "tolerations": [{"key": "new"}], "nodeSelector": {"b": "2"}, "hostname": None}
        out = rp.merge(base, patch)
        node = out["containers"][0]
        self.assertEqual((node["command"], node["env"]), (["a"], [{"name": "X", "value": "1"}]))  # kept
        self.assertEqual([m["mountPath"] for m in node["volumeMounts"]], ["/home", "/data"])  # keyed by mountPath
        self.assertEqual([c["name"] for c in out["containers"]], ["node", "extra"])
        self.assertEqual(out["tolerations"], [{"key": "new"}])  # no merge key: replaced
        self.assertEqual(out["nodeSelector"], {"a": "1", "b": "2"})
        self.assertNotIn("hostname", out)  # null deletes
        with self.assertRaises(tm.NotModeled):
            rp.merge(base, {"containers": [{"name": "node", "$patch": "delete"}]})

    def test_the_runtimes_order_comes_back(self):
        patch = {"manager": KUEUE, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            pod_patch("node", nodeSelector={"n": "1"}), pod_patch("launcher", nodeSelector={"l": "1"})]}}}}
        out = rp.apply({"spec": {"runtimePatches": [patch]}}, runtime()["spec"]["template"])
        self.assertEqual([j["name"] for j in out["spec"]["replicatedJobs"]], ["launcher", "node"])
        labels = {"manager": KUEUE, "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"q": "a"}}}}}
        out = rp.apply({"spec": {"runtimePatches": [labels]}}, runtime()["spec"]["template"])
        self.assertEqual(out["metadata"]["labels"]["q"], "a")


class Refusals(unittest.TestCase):
    def refused(self, patch, pattern):
        with self.assertRaisesRegex(tm.Rejected, pattern):
            render.render(hello(runtimePatches=[patch]), runtime())

    def test_the_webhook_refuses(self):
        self.refused({**kueue_patch(**FLAVOR), "manager": "kueue"}, "domain-prefixed")
        self.refused({"manager": KUEUE, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            pod_patch("worker", **FLAVOR)]}}}}, "replicated job that doesn't exist")
        self.refused(kueue_patch(containers=[{"name": "sidecar"}]), "container that doesn't exist")
        self.refused(kueue_patch(containers=[{"name": "node", "env": [{"name": "A", "value": "1"}]}]),
                     "must not have envs")
        self.refused(kueue_patch(initContainers=[{"name": "nope"}]), "initContainer that doesn't exist")

    def test_an_mpi_runtime_with_another_policy_is_refused(self):
        for policy in ("torch", "jax", "flux"):
            rt = copy.deepcopy(runtime())
            rt["spec"]["mlPolicy"][policy] = {"numProcPerNode": 1} if policy == "flux" else {}
            with self.assertRaisesRegex(tm.Rejected, "Only one of the policy can be configured"):
                render.render(hello(), rt)


class DataVolumes(unittest.TestCase):
    def test_every_pod_that_runs_ranks_mounts_the_claim(self):
        cases = [(p, d) for p, d in examples() if p in ("examples/trainjob-deepspeed.yaml",
                                                         "examples/trainjob-megatron.yaml")]
        self.assertEqual(len(cases), 2)
        for path, job in cases:
            out = render.render(job, runtime("trainer-mpi-pytorch-v0-1"))
            for pod in out["pods"]:
                claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
                          if "persistentVolumeClaim" in v}
                node = next(c for c in pod["spec"]["containers"] if c["name"] == "node")
                mounts = {m["mountPath"]: m["name"] for m in node["volumeMounts"]}
                self.assertIn(mounts.get("/data"), claims, f"{path}: {pod['metadata']['name']}")
            command = job["spec"]["trainer"]["command"]
            for word in command[command.index("--") + 1:]:
                if word.startswith("/data") or word.startswith("/workspace"):
                    self.assertTrue(word.startswith("/data/"), f"{path}: {word} is on no volume")


if __name__ == "__main__":
    unittest.main()
