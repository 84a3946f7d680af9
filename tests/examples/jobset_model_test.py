#!/usr/bin/env python3
"""jobset_model_test.py: each rule of jobset_model.py (JobSet v0.12.0, the Job API), on
small inputs.

Design: as trainer_model_test.py: one test per rule, the least input that shows it, the
exact value the upstream code gives. JobSets come from trainer_model.render on a synthetic
runtime, so these tests also hold the two models together.
usage: jobset_model_test.py (plain unittest; exit status 1 on any failure)
"""
import copy
import hashlib
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobset_model as jm  # noqa: E402
import trainer_model as tm  # noqa: E402
from model_fixtures import job, pod_spec, rjob, runtime, trainjob  # noqa: E402


def jobset(rt=None, **trainer):
    return tm.render(trainjob(name="js", namespace="ns", **trainer), rt or runtime())["jobset"]


def admitted(rt=None, **trainer):
    return jm.admit(jobset(rt, **trainer))


class Defaults(unittest.TestCase):
    def test_webhook_defaults(self):
        js = admitted()
        self.assertEqual(js["spec"]["successPolicy"], {"operator": "All"})
        self.assertEqual(js["spec"]["network"], {"enableDNSHostnames": True, "publishNotReadyAddresses": True})
        self.assertEqual(job(js, "node")["template"]["spec"]["completionMode"], "Indexed")
        self.assertEqual(pod_spec(js, "node")["restartPolicy"], "OnFailure", "an empty restartPolicy becomes OnFailure")

    def test_a_set_restart_policy_and_rule_names(self):
        rt = runtime(jobs=[rjob("launcher", trainer=True, restartPolicy="Never"), rjob("node")],
                     failurePolicy={"rules": [{"name": "", "action": "FailJobSet"}]})
        js = jm.admit(jobset(rt))
        self.assertEqual(pod_spec(js, "launcher")["restartPolicy"], "Never")
        self.assertEqual(js["spec"]["failurePolicy"]["rules"][0]["name"], "failurePolicyRule0")


class Validation(unittest.TestCase):
    def refused(self, js, text):
        with self.assertRaisesRegex(jm.Rejected, text):
            jm.admit(js)

    def test_depends_on(self):
        js = jobset()
        job(js, "launcher")["dependsOn"] = [{"name": "node", "status": "Ready"}]
        self.refused(js, "can't be set for the first")
        js = jobset()
        job(js, "node")["dependsOn"] = [{"name": "other", "status": "Ready"}]
        self.refused(js, "cannot depend on replicatedJob: other")

    def test_names_must_fit_63_characters(self):
        self.refused(tm.render(trainjob(name="x" * 48, numNodes=2), runtime())["jobset"], "DNS-1035")
        jm.admit(tm.render(trainjob(name="x" * 44, numNodes=2), runtime())["jobset"])  # …-launcher-0-0-abcde: 63

    def test_failure_policy(self):
        for rule, text in (({"name": "a-b", "action": "FailJobSet"}, "rule name"),
                           ({"name": "a", "action": "RestartJob"}, "feature gate"),
                           ({"name": "a", "action": "FailJobSet", "onJobFailureReasons": ["Evicted"]}, "reason"),
                           ({"name": "a", "action": "FailJobSet", "targetReplicatedJobs": ["x"]}, "no replicated")):
            js = jobset()
            js["spec"]["failurePolicy"] = {"rules": [rule]}
            self.refused(js, text)
        js = jobset()
        js["spec"]["failurePolicy"] = {"rules": [{"name": "a", "action": "FailJobSet"}] * 2}
        self.refused(js, "not unique")


class JobsAndPods(unittest.TestCase):
    def test_names_hostnames_subdomain(self):
        pods = jm.pods(admitted(numNodes=2))
        self.assertEqual([(p["spec"]["hostname"], p["spec"]["subdomain"]) for p in pods],
                         [("js-launcher-0-0", "js"), ("js-node-0-0", "js"), ("js-node-0-1", "js")])
        self.assertTrue(pods[1]["metadata"]["name"].startswith("js-node-0-0-"), "<job>-<index>-<random>")
        self.assertEqual(jm.fqdn(pods[2]), "js-node-0-1.js")

    def test_subdomain_setting_and_dns_off(self):
        js = admitted(runtime(network={"subdomain": "net"}))
        self.assertEqual({p["spec"]["subdomain"] for p in jm.pods(js)}, {"net"})
        js["spec"]["network"]["enableDNSHostnames"] = False
        self.assertNotIn("subdomain", jm.pods(js)[0]["spec"], "no headless Service, no subdomain")

    def test_labels_and_annotations(self):
        js = admitted(runtime(jobs=[rjob("launcher", trainer=True), rjob("node")]), numNodes=2)
        pod = jm.pods(js, restarts=2)[2]
        labels = pod["metadata"]["labels"]
        expected = {"jobset-name": "js", "replicatedjob-name": "node", "restart-attempt": "2", "job-index": "0",
                    "job-global-index": "1", "global-replicas": "2", "group-name": "default",
                    "job-key": hashlib.sha1(b"ns/js-node-0").hexdigest()}
        for key, value in expected.items():
            self.assertEqual(labels[jm.PREFIX + key], value, key)
            self.assertEqual(pod["metadata"]["annotations"][jm.PREFIX + key], value, key + " (annotation)")
        self.assertEqual(labels["batch.kubernetes.io/job-completion-index"], "1")
        self.assertNotIn("trainer.kubeflow.org/trainjob-ancestor-step", labels, "Job-template labels stay on the Job")
        launcher_job = jm.jobs(js)[0]
        self.assertEqual(launcher_job["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"], "trainer")


class JobChecks(unittest.TestCase):
    def job_with(self, restart, **codes):
        rule = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [75], **codes}}
        rt = runtime(jobs=[rjob("launcher", trainer=True, restartPolicy=restart), rjob("node")])
        js = jobset(rt)
        job(js, "launcher")["template"]["spec"]["podFailurePolicy"] = {"rules": [rule]}
        return jm.jobs(jm.admit(js))[0]

    def test_pod_failure_policy_rules(self):
        jm.check_job(self.job_with("Never", containerName="node"))
        for restart, codes, text in (("", {}, "OnFailure"), ("Never", {"values": [0, 75]}, "0 cannot"),
                                     ("Never", {"values": [75, 69]}, "ordered"),
                                     ("Never", {"containerName": "main"}, "no container")):
            with self.assertRaisesRegex(jm.Rejected, text):
                jm.check_job(self.job_with(restart, **codes))


class PodFailure(unittest.TestCase):
    def job(self, rules, restart="Never", backoff=None):
        spec = {"template": {"spec": {"restartPolicy": restart}}, "podFailurePolicy": {"rules": rules}}
        if backoff is not None:
            spec["backoffLimit"] = backoff
        return {"spec": spec}

    def test_exit_codes(self):
        rule = {"action": "FailJob", "onExitCodes": {"containerName": "node", "operator": "In", "values": [75]}}
        j = self.job([rule], backoff=0)
        self.assertEqual(jm.pod_failure(j, "node", 75, namespace="ns", pod="p"),
                         ("Failed", "PodFailurePolicy",
                          "Container node for pod ns/p failed with exit code 75 matching FailJob rule at index 0"))
        self.assertEqual(jm.pod_failure(j, "sidecar", 75)[1], "BackoffLimitExceeded", "another container's 75")
        self.assertEqual(jm.pod_failure(j, "node", 3)[1], "BackoffLimitExceeded")
        self.assertEqual(jm.pod_failure(j, "node", 0)[0], "Succeeded")
        not_in = self.job([{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [69, 75]}}], backoff=1)
        self.assertEqual(jm.pod_failure(not_in, "node", 3)[1], "PodFailurePolicy", "NotIn: any code but those")
        self.assertEqual(jm.pod_failure(not_in, "node", 75)[0], "NewPod", "NotIn: a listed code counts, retried")

    def test_backoff_ignore_conditions_and_on_failure(self):
        j = self.job([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}])
        self.assertEqual(jm.pod_failure(j, "node", 137, ("DisruptionTarget",), failed_before=6)[0], "NewPod",
                         "Ignore: not counted against backoffLimit (default 6)")
        self.assertEqual(jm.pod_failure(j, "node", 1, failed_before=5)[0], "NewPod")
        self.assertEqual(jm.pod_failure(j, "node", 1, failed_before=6)[1], "BackoffLimitExceeded")
        fail = self.job([{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}])
        self.assertIn("has condition DisruptionTarget", jm.pod_failure(fail, "node", 143, ("DisruptionTarget",))[2])
        self.assertEqual(jm.pod_failure(self.job([], "OnFailure"), "node", 1)[0], "RestartContainer")


class JobSetFailure(unittest.TestCase):
    def js(self, rules, max_restarts=2):
        return {"spec": {"failurePolicy": {"maxRestarts": max_restarts, "rules": rules}}}

    def test_without_a_policy_any_failed_job_fails_the_jobset(self):
        self.assertEqual(jm.jobset_failure({"spec": {}}, "node", "BackoffLimitExceeded", ""), ("Failed", "FailedJobs"))

    def test_first_matching_rule_wins_and_no_match_restarts(self):
        js = self.js([{"name": "a", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"],
                       "targetReplicatedJobs": ["launcher"]},
                      {"name": "b", "action": "RestartJobSet", "onJobFailureMessagePatterns": ["index 1$"]}])
        self.assertEqual(jm.jobset_failure(js, "launcher", "PodFailurePolicy", ""),
                         ("Failed", "FailJobSetFailurePolicyAction"))
        self.assertEqual(jm.jobset_failure(js, "node", "PodFailurePolicy", "rule at index 1"), ("Restart", "b"))
        self.assertEqual(jm.jobset_failure(js, "node", "PodFailurePolicy", "x"), ("Restart", "DefaultFailurePolicy"))
        self.assertEqual(jm.jobset_failure(js, "node", "PodFailurePolicy", "x", restarts_counted=2),
                         ("Failed", "ReachedMaxRestarts"))


class SuccessPolicy(unittest.TestCase):
    def test_all_of_the_targets_or_any(self):
        js = admitted(numNodes=2)
        self.assertFalse(jm.succeeded(js, {"launcher": 1}), "the default: All of every replicated job")
        self.assertTrue(jm.succeeded(js, {"launcher": 1, "node": 1}))
        js["spec"]["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["launcher"]}
        self.assertTrue(jm.succeeded(js, {"launcher": 1}), "the launcher alone, when it is the only target")
        js["spec"]["successPolicy"] = {"operator": "Any"}
        self.assertTrue(jm.succeeded(js, {"node": 1}))


class DependsOn(unittest.TestCase):
    def test_ready_counts_ready_succeeded_and_failed_jobs(self):
        js = admitted()
        job(js, "node")["dependsOn"] = [{"name": "launcher", "status": "Ready"}]
        self.assertFalse(jm.can_create(js, "node", {}))
        self.assertTrue(jm.can_create(js, "node", {"launcher": {"failed": 1}}))
        done = copy.deepcopy(js)
        job(done, "node")["dependsOn"][0]["status"] = "Complete"
        self.assertFalse(jm.can_create(done, "node", {"launcher": {"ready": 1}}))
        self.assertTrue(jm.can_create(done, "node", {"launcher": {"succeeded": 1}}))


class VolumeFiles(unittest.TestCase):
    def test_item_modes_and_the_default(self):
        spec = pod_spec(admitted(), "node")
        self.assertEqual(jm.volume_files(spec, "mpi-ssh-auth"),
                         {"id_rsa": ("ssh-privatekey", 0o640), "id_rsa.pub": ("ssh-publickey", 0o644),
                          "authorized_keys": ("ssh-publickey", 0o644)})
        spec["volumes"].append({"name": "c", "configMap": {"name": "c", "items": [{"key": "k", "path": "p"}]}})
        self.assertEqual(jm.volume_files(spec, "c"), {"p": ("k", 0o644)}, "no mode anywhere: 0644")


if __name__ == "__main__":
    unittest.main()
