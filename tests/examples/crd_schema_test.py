#!/usr/bin/env python3
"""crd_schema_test.py: the CRD validator's rules, then every document of examples/ against
Trainer v2.3.0's CRDs (tests/examples/crds/).

Design: each validator rule gets a broken copy of a valid document that only that rule
catches, so a rule that stops working fails its test (and a valid document must give no
error at all, so the checks cannot all be failing quietly either). Kinds with no CRD here
(ServiceAccount, Role, RoleBinding: core Kubernetes) are named, not checked.
usage: crd_schema_test.py (plain unittest; exit status 1 on any failure)
"""
import copy
import hashlib
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crd_schema  # noqa: E402
from model_fixtures import SCHEMAS, examples, runtime, trainjob  # noqa: E402

CORE_KINDS = {"ServiceAccount", "Role", "RoleBinding"}


def node_container(doc):
    return doc["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]


class Rules(unittest.TestCase):
    def errors(self, doc):
        return SCHEMAS.validate(doc)

    def broken(self, change, expected, doc=None):
        doc = copy.deepcopy(doc or runtime())
        change(doc)
        errors = self.errors(doc)
        self.assertTrue(any(expected in e for e in errors), f"expected an error with {expected!r}, got {errors}")

    def test_valid_documents_give_no_error(self):
        self.assertEqual(self.errors(runtime()), [])
        self.assertEqual(self.errors(trainjob(numNodes=2, resourcesPerNode={"limits": {"nvidia.com/gpu": 8}})), [])

    def test_defaults_are_applied(self):
        mpi = runtime()["spec"]["mlPolicy"]["mpi"]
        self.assertEqual((mpi["mpiImplementation"], mpi["numProcPerNode"], mpi["sshAuthMountPath"]),
                         ("OpenMPI", 1, "/root/.ssh"), "the CRD's defaults for mlPolicy.mpi")
        self.assertEqual(trainjob()["spec"]["runtimeRef"]["kind"], "ClusterTrainingRuntime")

    def test_type_unknown_field_required_enum(self):
        self.broken(lambda d: d["spec"]["mlPolicy"]["mpi"].update(numProcPerNode="8"), "the schema wants integer")
        self.broken(lambda d: node_container(d).update(env=[{"name": "A", "value": 1}]), "wants string")
        self.broken(lambda d: d["spec"]["mlPolicy"].update(numnodes=2), "unknown field")
        self.broken(lambda d: node_container(d).pop("name"), "name: required")
        self.broken(lambda d: d["spec"]["mlPolicy"]["mpi"].update(mpiImplementation="MPICH"), "is not one of")

    def test_formats_patterns_lengths_list_maps(self):
        self.broken(lambda d: d["spec"]["mlPolicy"].update(numNodes=2**31), "outside")
        self.broken(lambda d: node_container(d).update(resources={"limits": {"cpu": "lots"}}), "does not match")
        self.broken(lambda d: d["spec"]["mlPolicy"]["mpi"].update(sshAuthMountPath="/" * 4097), "length")
        self.broken(lambda d: node_container(d).update(env=[{"name": "A"}, {"name": "A"}]), "map list keyed")
        self.broken(lambda d: d["spec"]["trainer"].update(command=["x"] * 129), "items", trainjob(numNodes=1))

    def test_int_or_string(self):
        doc = runtime()
        node_container(doc).update(resources={"limits": {"nvidia.com/gpu": 8, "cpu": "500m"}})
        self.assertEqual(self.errors(doc), [], "a quantity is an integer or a string")
        self.broken(lambda d: node_container(d).update(resources={"limits": {"cpu": True}}), "int or string")

    def test_cel_rules(self):
        self.broken(lambda d: d["spec"]["mlPolicy"].update(torch={}), "Only one of the policy")
        self.broken(lambda d: d["metadata"].update(name="Bad_Name"), "RFC 1035", trainjob())
        self.broken(lambda d: d["metadata"].update(name="a" * 64), "63 characters", trainjob())
        self.broken(lambda d: d["spec"]["template"]["spec"].update(
            startupPolicy={"startupPolicyOrder": "InOrder"},
            replicatedJobs=[d["spec"]["template"]["spec"]["replicatedJobs"][0],
                            {**d["spec"]["template"]["spec"]["replicatedJobs"][1],
                             "dependsOn": [{"name": "launcher", "status": "Ready"}]}]), "mutually exclusive")

    def test_an_unknown_cel_rule_is_an_error_not_a_pass(self):
        schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.x > 1"}], "properties": {}}
        errors = []
        crd_schema._check({}, schema, "", errors)
        self.assertEqual(len(errors), 1)
        self.assertIn("not implemented", errors[0])

    def test_object_meta(self):
        self.broken(lambda d: d["metadata"].update(namespace="a"), "cluster-scoped")
        self.broken(lambda d: d["metadata"].update(labels={"a": 1}), "must be a string")


class UpstreamCopies(unittest.TestCase):
    def test_the_crd_files_are_the_upstream_blobs_the_readme_names(self):
        with open(os.path.join(crd_schema.CRD_DIR, "README.md")) as stream:
            table = dict(re.findall(r"^\| `([^`]+\.yaml)` \|.*\| `([0-9a-f]{40})` \|$", stream.read(), re.M))
        self.assertEqual(len(table), 3, "crds/README.md names three files with their git blob ids")
        for name, blob in table.items():
            with open(os.path.join(crd_schema.CRD_DIR, name), "rb") as stream:
                data = stream.read()
            self.assertEqual(hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(), blob,
                             f"crds/{name} differs from the upstream file the README names")


class Examples(unittest.TestCase):
    def test_every_document_validates(self):
        checked, skipped = [], []
        for path, doc in examples():
            kind = doc.get("kind")
            if kind in CORE_KINDS:
                skipped.append(kind)
                continue
            errors = SCHEMAS.validate(SCHEMAS.apply_defaults(copy.deepcopy(doc)))
            self.assertEqual(errors, [], f"{path}: {kind} {doc['metadata']['name']} against Trainer v2.3.0's CRD")
            checked.append(kind)
        self.assertGreaterEqual(checked.count("ClusterTrainingRuntime"), 2, f"checked {checked}")
        self.assertGreaterEqual(checked.count("TrainJob"), 3, f"checked {checked}")
        self.assertEqual(set(skipped), CORE_KINDS, "the RBAC kinds are core Kubernetes: no CRD here")


if __name__ == "__main__":
    unittest.main()
