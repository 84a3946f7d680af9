#!/usr/bin/env python3
"""package_test.py: the install package (manifests/) as a user gets it from `kubectl kustomize`.

Design: every kustomization under manifests/ is rendered by the real kubectl (kustomize 5.5),
never read as files, so a patch that no longer applies or a wrong path fails here as it
would fail `kubectl apply -k`. Then what the README promises of each overlay:
- the image is named in one place: every runtime of every overlay built on trainer-v2.3
  takes that overlay's `images:` newName, and a copy of the package with another newName
  changes every container at once; every name is fully qualified;
- runtime names carry the package's version (project(VERSION) of CMakeLists.txt), so an
  upgrade adds runtimes instead of editing the ones suspended TrainJobs point at, and every
  example TrainJob names one;
- openshift: no uid, gid or fsGroup on any pod or container, and nothing else changed;
- kubeflow: Istio's injection off on every pod template, nothing else changed, and its
  profile's NetworkPolicy selects every pod of every runtime;
- every example TrainJob renders through the models on every overlay's runtimes.
usage: package_test.py
"""
import copy
import os
import re
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render  # noqa: E402
import yaml  # noqa: E402
from model_fixtures import MANIFESTS, ROOT, examples, overlays, package, runtime_overlays  # noqa: E402

ISTIO = "sidecar.istio.io/inject"
IDS = ("runAsUser", "runAsGroup", "fsGroup")


def runtimes(docs):
    return [d for d in docs if d["kind"] == "ClusterTrainingRuntime"]


def pod_templates(runtime):
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        yield job["name"], job["template"]["spec"]["template"]


def containers(runtime):
    for _, template in pod_templates(runtime):
        yield from template["spec"].get("initContainers", []) + template["spec"]["containers"]


def registry_name(root=MANIFESTS):
    with open(os.path.join(root, "trainer-v2.3", "kustomization.yaml")) as stream:
        images = yaml.safe_load(stream)["images"]
    return [(i["name"], i["newName"]) for i in images]


def without(doc, strip):
    """doc with strip(doc) applied to a copy, for "nothing else changed"."""
    doc = copy.deepcopy(doc)
    strip(doc)
    return doc


class Package(unittest.TestCase):
    def test_every_kustomization_renders(self):
        found = overlays()
        self.assertTrue({"base", "trainer-v2.3", "openshift", "kubeflow", "kubeflow/profile", "image-volume"} <= set(found), found)
        for overlay in found:
            self.assertTrue(package(overlay), f"manifests/{overlay} renders nothing")

    def test_the_image_is_set_in_one_place(self):
        [(name, new_name)] = registry_name()
        self.assertNotEqual(name, new_name)
        for overlay in ("trainer-v2.3", "openshift", "kubeflow"):
            for runtime in runtimes(package(overlay)):
                for c in containers(runtime):
                    self.assertEqual(c["image"].rpartition(":")[0], new_name, f"{overlay}: {c['name']}")
        with tempfile.TemporaryDirectory() as tmp:  # one edit moves every container of every overlay
            copy_root = os.path.join(tmp, "manifests")
            shutil.copytree(MANIFESTS, copy_root)
            path = os.path.join(copy_root, "trainer-v2.3", "kustomization.yaml")
            with open(path) as stream:
                text = stream.read()
            with open(path, "w") as stream:
                stream.write(text.replace(new_name, "registry.test:5000/team/tmpi"))
            for overlay in ("trainer-v2.3", "openshift", "kubeflow"):
                images = {c["image"].rpartition(":")[0] for r in runtimes(package(overlay, copy_root))
                          for c in containers(r)}
                self.assertEqual(images, {"registry.test:5000/team/tmpi"}, overlay)

    def test_runtime_names_carry_the_version(self):
        with open(os.path.join(ROOT, "CMakeLists.txt")) as stream:
            major, minor = re.search(r"project\(trainer-mpi VERSION (\d+)\.(\d+)", stream.read()).groups()
        names = set()
        for overlay in runtime_overlays():
            for runtime in runtimes(package(overlay)):
                name = runtime["metadata"]["name"]
                self.assertTrue(name.endswith(f"-v{major}-{minor}"), f"{overlay}: {name} has no -v{major}-{minor}")
                names.add(name)
        refs = [d["spec"]["runtimeRef"]["name"] for _, d in examples() if d["kind"] == "TrainJob"]
        self.assertTrue(refs)
        self.assertLessEqual(set(refs), names)

    def test_openshift_leaves_the_ids_to_the_scc(self):
        plain, openshift = runtimes(package("trainer-v2.3")), runtimes(package("openshift"))
        self.assertEqual(len(plain), len(openshift))

        def strip(runtime):
            for _, template in pod_templates(runtime):
                for key in IDS:
                    template["spec"]["securityContext"].pop(key, None)

        for before, after in zip(plain, openshift):
            self.assertTrue(any(k in t["spec"]["securityContext"] for _, t in pod_templates(before) for k in IDS))
            for role, template in pod_templates(after):
                self.assertFalse(set(template["spec"]["securityContext"]) & set(IDS), role)
                self.assertTrue(template["spec"]["securityContext"]["runAsNonRoot"], role)
                for c in template["spec"].get("initContainers", []) + template["spec"]["containers"]:
                    self.assertFalse(set(c.get("securityContext") or {}) & set(IDS), c["name"])
            self.assertEqual(after, without(before, strip))

    def test_kubeflow_turns_istio_off_and_selects_every_pod(self):
        plain, kubeflow = runtimes(package("trainer-v2.3")), runtimes(package("kubeflow"))

        def strip(runtime):
            for _, template in pod_templates(runtime):
                template["metadata"]["labels"].pop(ISTIO)

        [policy] = [d for d in package("kubeflow/profile") if d["kind"] == "NetworkPolicy"]
        selector = policy["spec"]["podSelector"]["matchLabels"]
        for before, after in zip(plain, kubeflow):
            for role, template in pod_templates(after):
                labels = template["metadata"]["labels"]
                self.assertEqual(labels.get(ISTIO), "false", role)
                self.assertLessEqual(selector.items(), labels.items(), f"the NetworkPolicy misses {role}")
            self.assertEqual(without(after, strip), before)

    def test_every_example_renders_on_every_overlay(self):
        count = 0
        for overlay in runtime_overlays():
            byname = {r["metadata"]["name"]: r for r in runtimes(package(overlay))}
            for path, trainjob in examples(overlay):
                if trainjob["kind"] == "TrainJob":
                    out = render.render(trainjob, byname[trainjob["spec"]["runtimeRef"]["name"]])
                    self.assertTrue(out["pods"], f"{path} on {overlay}")
                    count += 1
        self.assertGreaterEqual(count, 3 * 4)


if __name__ == "__main__":
    unittest.main()
