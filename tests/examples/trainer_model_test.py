#!/usr/bin/env python3
"""trainer_model_test.py: each rule of trainer_model.py (Trainer v2.3.0), on small inputs.

Design: one test per rule, on the least input that shows it (model_fixtures), asserting the
exact value Trainer's code gives, so that a model that drifts from the rule fails here and
names the field. The examples themselves go through the model in rendered_examples_test.py.
usage: trainer_model_test.py (plain unittest; exit status 1 on any failure)
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trainer_model as tm  # noqa: E402
from model_fixtures import container, job, named, pod_spec, rjob, runtime, trainjob  # noqa: E402


def counts(out):
    return {ps["name"]: ps["count"] for ps in out["podsets"]}


class PodCounts(unittest.TestCase):
    def test_trainer_step_takes_the_runtime_num_nodes(self):
        out = tm.render(trainjob(), runtime(num_nodes=3))
        self.assertEqual(counts(out), {"launcher": 3, "node": 1},
                         "the trainer-labelled job's pod count is mlPolicy.numNodes; others keep parallelism (1)")
        spec = job(out["jobset"], "launcher")["template"]["spec"]
        self.assertEqual((spec["parallelism"], spec["completions"]), (3, 3), "parallelism and completions both")

    def test_other_jobs_keep_their_parallelism_and_counts_are_at_least_one(self):
        rt = runtime(jobs=[rjob("launcher", trainer=True), rjob("node", parallelism=4)], num_nodes=0)
        self.assertEqual(counts(tm.render(trainjob(), rt)), {"launcher": 1, "node": 4},
                         "numNodes 0 is clamped to 1; the node job keeps parallelism 4 without TrainJob numNodes")

    def test_mpi_resizes_only_the_job_named_node(self):
        rt = runtime(jobs=[rjob("launcher", trainer=True), rjob("node"), rjob("worker")])
        self.assertEqual(counts(tm.render(trainjob(numNodes=5), rt)), {"launcher": 1, "node": 5, "worker": 1},
                         "TrainJob numNodes sizes the job named node only")

    def test_run_launcher_as_node_counts_the_launcher(self):
        for n, nodes in ((5, 4), (2, 1), (1, 1)):
            out = tm.render(trainjob(numNodes=n), runtime(launcher_as_node=True))
            self.assertEqual(counts(out)["node"], nodes, f"numNodes {n} with runLauncherAsNode: max(n-1, 1) node pods")
            self.assertEqual(counts(out)["launcher"], 1, "the launcher's count is never the MPI plugin's")


class Hostfile(unittest.TestCase):
    def test_lines_are_node_pods_with_slots_and_a_trailing_newline(self):
        out = tm.render(trainjob(name="job", numNodes=2, numProcPerNode=4), runtime())
        self.assertEqual(out["hostfile"]["data"]["hostfile"], "job-node-0-0.job slots=4\njob-node-0-1.job slots=4\n")
        self.assertEqual(out["hostfile"]["metadata"]["name"], "job-mpi-hostfile")

    def test_launcher_as_node_lists_jobs_in_runtime_order_under_the_subdomain(self):
        out = tm.render(trainjob(name="job", numNodes=3), runtime(launcher_as_node=True, network={"subdomain": "net"}))
        self.assertEqual(out["hostfile"]["data"]["hostfile"].splitlines(),
                         ["job-launcher-0-0.net slots=1", "job-node-0-0.net slots=1", "job-node-0-1.net slots=1"],
                         "launcher first (runtime order), then the node pods, under network.subdomain")


class Slots(unittest.TestCase):
    def gpu_runtime(self, launcher_resources=None, node_resources=None, slots=None):
        jobs = [rjob("launcher", [container(resources=launcher_resources)] if launcher_resources is not None
                     else None, trainer=True),
                rjob("node", [container(resources=node_resources or {"limits": {"nvidia.com/gpu": 8}})])]
        return runtime(jobs=jobs, slots=slots)

    def test_trainjob_num_proc_per_node_wins(self):
        out = tm.render(trainjob(numProcPerNode=3), self.gpu_runtime(slots=8))
        self.assertEqual(out["slots"], 3, "TrainJob numProcPerNode overrides the runtime's")

    def test_a_runtime_value_other_than_one_stays(self):
        self.assertEqual(tm.render(trainjob(), self.gpu_runtime(slots=2))["slots"], 2)

    def test_one_means_the_gpus_of_resources_per_node(self):
        out = tm.render(trainjob(resourcesPerNode={"requests": {"amd.com/GPU": 4}, "limits": {"nvidia.com/gpu": 2}}),
                        self.gpu_runtime())
        self.assertEqual(out["slots"], 4, "requests before limits; any resource whose name contains gpu")
        env = named(named(pod_spec(out["jobset"], "launcher")["containers"], "node")["env"],
                    "OMPI_MCA_orte_set_default_slots")
        self.assertEqual(env["value"], "4", "the slots reach OMPI_MCA_orte_set_default_slots")

    def test_one_means_the_gpus_of_the_first_runtime_container_node(self):
        self.assertEqual(tm.render(trainjob(), self.gpu_runtime(launcher_resources={"limits": {"x.com/gpu": 4}}))
                         ["slots"], 4, "the trainer-labelled launcher comes first: its 4 GPUs")
        self.assertEqual(tm.render(trainjob(), self.gpu_runtime())["slots"], 1,
                         "a launcher without resources still comes first (Trainer's apply config holds an empty "
                         "resources for every container): no GPU, slots stay 1, whatever the node pods have")
        node_first = self.gpu_runtime()
        node_first["spec"]["template"]["spec"]["replicatedJobs"].reverse()
        self.assertEqual(tm.render(trainjob(), node_first)["slots"], 8, "the job named node first: its 8 GPUs")

    def test_one_gpu_keeps_one_slot(self):
        rt = self.gpu_runtime(node_resources={"limits": {"nvidia.com/gpu": 1}})
        self.assertEqual(tm.render(trainjob(), rt)["slots"], 1)


class SecretAndVolumes(unittest.TestCase):
    def render(self, **kw):
        jobs = [rjob("launcher", [container(), container("helper")], init=[container("init")], trainer=True),
                rjob("node"), rjob("extra")]
        return tm.render(trainjob(name="job", **kw), runtime(jobs=jobs, ssh_path="/etc/ssh-secret"))

    def test_the_secret(self):
        secret = self.render()["secret"]
        self.assertEqual((secret["metadata"]["name"], secret["type"], secret["immutable"]),
                         ("job-mpi-ssh-auth", "kubernetes.io/ssh-auth", True))
        self.assertEqual(sorted(secret["stringData"]), ["ssh-privatekey", "ssh-publickey"])

    def test_ssh_volume_with_v2_3_modes_on_launcher_and_node_only(self):
        out = self.render()
        for name in ("launcher", "node"):
            volume = named(pod_spec(out["jobset"], name)["volumes"], "mpi-ssh-auth")["secret"]
            self.assertEqual((volume["secretName"], volume["defaultMode"]), ("job-mpi-ssh-auth", 0o400))
            self.assertEqual([(i["key"], i["path"], i["mode"]) for i in volume["items"]],
                             [("ssh-privatekey", "id_rsa", 0o640), ("ssh-publickey", "id_rsa.pub", 0o644),
                              ("ssh-publickey", "authorized_keys", 0o644)], f"{name}: the v2.3 item modes")
        self.assertNotIn("volumes", pod_spec(out["jobset"], "extra"), "a job named neither launcher nor node")

    def test_hostfile_volume_on_the_launcher_only(self):
        out = self.render()
        volume = named(pod_spec(out["jobset"], "launcher")["volumes"], "mpi-hostfile")["configMap"]
        self.assertEqual(volume, {"name": "job-mpi-hostfile",
                                  "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}]})
        self.assertNotIn("mpi-hostfile", [v["name"] for v in pod_spec(out["jobset"], "node")["volumes"]])

    def test_mounts_reach_containers_named_node_only(self):
        spec = pod_spec(self.render()["jobset"], "launcher")
        node = {m["mountPath"]: m["name"] for m in named(spec["containers"], "node")["volumeMounts"]}
        self.assertEqual(node, {"/etc/ssh-secret": "mpi-ssh-auth", "/etc/mpi": "mpi-hostfile"})
        for other in (named(spec["containers"], "helper"), named(spec["initContainers"], "init")):
            self.assertNotIn("volumeMounts", other, f"{other['name']} is not named node: no mount")
        node_job = named(pod_spec(self.render()["jobset"], "node")["containers"], "node")["volumeMounts"]
        self.assertEqual(node_job, [{"name": "mpi-ssh-auth", "mountPath": "/etc/ssh-secret"}])

    def test_a_mount_at_the_same_path_is_replaced(self):
        mount = {"name": "ssh-home", "mountPath": "/root/.ssh"}
        out = tm.render(trainjob(), runtime(jobs=[rjob("launcher", [container(volumeMounts=[mount])], trainer=True),
                                                  rjob("node")]))  # sshAuthMountPath defaults to /root/.ssh
        mounts = named(pod_spec(out["jobset"], "launcher")["containers"], "node")["volumeMounts"]
        self.assertEqual(mounts[0], {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"},
                         "mounts are upserted by mountPath: the runtime's ~/.ssh volume is gone")


class Env(unittest.TestCase):
    def test_openmpi_env_in_the_launcher_node_container_only(self):
        jobs = [rjob("launcher", [container(env=[{"name": "OMPI_MCA_plm_rsh_args", "value": "mine"}])], trainer=True),
                rjob("node")]
        out = tm.render(trainjob(numProcPerNode=2), runtime(jobs=jobs))
        env = {e["name"]: e["value"] for e in named(pod_spec(out["jobset"], "launcher")["containers"], "node")["env"]}
        self.assertEqual(env, {"OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                               "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                               "OMPI_MCA_orte_keep_fqdn_hostnames": "true", "OMPI_MCA_orte_set_default_slots": "2"},
                         "Trainer's values replace the runtime's, in place")
        self.assertNotIn("env", named(pod_spec(out["jobset"], "node")["containers"], "node"))

    def test_reserved_env_is_refused(self):
        with self.assertRaisesRegex(tm.Rejected, "reserved envs"):
            tm.render(trainjob(env=[{"name": "OMPI_MCA_orte_set_default_slots", "value": "9"}]), runtime())


class TrainerFields(unittest.TestCase):
    def render(self, launcher_as_node):
        jobs = [rjob("launcher", [container(), container("helper")], init=[container("init")], trainer=True),
                rjob("node")]
        fields = {"image": "mine", "command": ["run"], "args": ["x"], "env": [{"name": "A", "value": "1"}],
                  "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}}
        return tm.render(trainjob(**fields), runtime(jobs=jobs, launcher_as_node=launcher_as_node))["jobset"]

    def test_image_command_args_reach_the_trainer_step_node_container_only(self):
        js = self.render(True)
        node = named(pod_spec(js, "launcher")["containers"], "node")
        self.assertEqual((node["image"], node["command"], node["args"]), ("mine", ["run"], ["x"]))
        for other in (named(pod_spec(js, "launcher")["containers"], "helper"),
                      named(pod_spec(js, "launcher")["initContainers"], "init"),
                      named(pod_spec(js, "node")["containers"], "node")):
            self.assertEqual((other["image"], other.get("command")), ("img", None), f"{other['name']} keeps its own")

    def test_env_and_resources_reach_the_node_job_only_with_launcher_as_node(self):
        for flag in (False, True):
            js = self.render(flag)
            node = named(pod_spec(js, "node")["containers"], "node")
            self.assertEqual("env" in node, flag, f"runLauncherAsNode {flag}: TrainJob env on the node pods")
            self.assertEqual("resources" in node, flag, f"runLauncherAsNode {flag}: resourcesPerNode on the node pods")
            launcher = named(pod_spec(js, "launcher")["containers"], "node")
            self.assertEqual(launcher["resources"], {"limits": {"nvidia.com/gpu": 2}}, "always on the trainer step")
            self.assertNotIn("resources", named(pod_spec(js, "launcher")["containers"], "helper"))

    def test_resources_merge_key_by_key(self):
        base = {"limits": {"cpu": "4", "nvidia.com/gpu": 8}, "requests": {"memory": "1Gi"}}
        jobs = [rjob("launcher", [container(resources=base)], trainer=True), rjob("node")]
        out = tm.render(trainjob(resourcesPerNode={"limits": {"nvidia.com/gpu": 2}}), runtime(jobs=jobs))
        self.assertEqual(named(pod_spec(out["jobset"], "launcher")["containers"], "node")["resources"],
                         {"limits": {"cpu": "4", "nvidia.com/gpu": 2}, "requests": {"memory": "1Gi"}},
                         "v2.3 merges per resource (v2.0-v2.2 replaced the whole requirements)")


class Admission(unittest.TestCase):
    def test_launcher_as_node_with_two_nodes_needs_both_jobs(self):
        with self.assertRaisesRegex(tm.Rejected, "runLauncherAsNode"):
            tm.render(trainjob(numNodes=2), runtime(jobs=[rjob("launcher", trainer=True)], launcher_as_node=True))
        self.assertEqual(counts(tm.render(trainjob(numNodes=1), runtime(jobs=[rjob("launcher", trainer=True)],
                                                                         launcher_as_node=True))), {"launcher": 1})

    def test_the_trainer_step_has_one_replica_and_a_node_container(self):
        two = rjob("launcher", trainer=True)
        two["replicas"] = 2
        with self.assertRaisesRegex(tm.Rejected, "must be 1"):
            tm.render(trainjob(), runtime(jobs=[two, rjob("node")]))
        with self.assertRaisesRegex(tm.Rejected, "container named node"):
            tm.render(trainjob(), runtime(jobs=[rjob("launcher", [container("main")], trainer=True), rjob("node")]))
        unchecked = runtime(jobs=[two, rjob("node")], labels={"trainer.kubeflow.org/webhook-validation": "disabled"})
        self.assertEqual(job(tm.render(trainjob(), unchecked)["jobset"], "launcher")["replicas"], 1,
                         "an unchecked runtime still gets replicas 1 from the builder")

    def test_only_open_mpi_is_implemented(self):
        rt = runtime()
        rt["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = ""
        with self.assertRaisesRegex(tm.Rejected, "doesn't supported"):
            tm.render(trainjob(), rt)

    def test_unmodeled_inputs_are_refused(self):
        tj = trainjob()
        tj["spec"]["initializer"] = {"dataset": {"storageUri": "hf://x"}}
        with self.assertRaises(tm.NotModeled):
            tm.render(tj, runtime())
        rt = runtime()
        rt["spec"]["mlPolicy"]["torch"] = {}
        with self.assertRaises(tm.NotModeled):
            tm.render(trainjob(), rt)


class JobSetObject(unittest.TestCase):
    def test_name_owner_labels_suspend(self):
        rt = runtime()
        rt["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}
        js = tm.render(trainjob(name="job", namespace="ns"), rt)["jobset"]
        self.assertEqual((js["metadata"]["name"], js["metadata"]["namespace"], js["metadata"]["labels"]),
                         ("job", "ns", {"team": "a"}))
        self.assertEqual(js["metadata"]["ownerReferences"][0]["kind"], "TrainJob")
        self.assertEqual(js["metadata"]["ownerReferences"][0]["controller"], True)
        self.assertIs(js["spec"]["suspend"], False, "spec.suspend is the TrainJob's (CRD default false)")

    def test_failure_fields_pass_through_unchanged(self):
        policy = {"maxRestarts": 2, "rules": [{"name": "a", "action": "FailJobSet"}]}
        pod_policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [75]}}]}
        jobs = [rjob("launcher", trainer=True, restartPolicy="Never"), rjob("node")]
        jobs[0]["template"]["spec"].update(podFailurePolicy=pod_policy, backoffLimit=0)
        js = tm.render(trainjob(numNodes=3), runtime(jobs=jobs, failurePolicy=policy))["jobset"]
        self.assertEqual(js["spec"]["failurePolicy"], policy, "Trainer sets no failure policy of its own")
        launcher = job(js, "launcher")["template"]["spec"]
        self.assertEqual((launcher["podFailurePolicy"], launcher["backoffLimit"], launcher["template"]["spec"]
                          ["restartPolicy"]), (pod_policy, 0, "Never"), "nor pod failure or restart policies")
        self.assertNotIn("restartPolicy", pod_spec(js, "node"), "an unset restartPolicy stays unset (JobSet sets it)")


if __name__ == "__main__":
    unittest.main()
