#!/usr/bin/env python3
"""rendered_examples_test.py: every example TrainJob of examples/, with its runtime, through
Trainer v2.3.0 and JobSet v0.12.0 (trainer_model, jobset_model), and what must hold of the
pods that come out.

Design: each TrainJob is rendered once (CRD defaults, Trainer, JobSet's webhook, the JobSet
CRD, the Job API's checks); the tests then read the rendered pods: one launcher pod, as
many hosts as numNodes says, GPUs only on pods that run ranks, a hostfile that names pods
that exist, every mount and flag a command needs (manifests_test.py's container checks, run
on the rendered pods and their real volumes instead of the runtime's), and the failure
policy played through for each exit code of the README's table. Every test checks every
example, and fails if there are none.
usage: rendered_examples_test.py [SOURCE_DIR BUILD_DIR]  (default: the checkout, build/dev)
"""
import copy
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import jobset_model as jm  # noqa: E402
import manifests_test  # noqa: E402
import trainer_model as tm  # noqa: E402
from model_fixtures import SCHEMAS, examples  # noqa: E402

# README.md's exit codes: the launcher's 69 and 75 are retried; the others, and a rank's own code
# (3 here; 137 a rank killed by SIGKILL), are the program's.
INFRASTRUCTURE, PROGRAM = (69, 75), (1, 3, 64, 65, 70, 71, 74, 77, 137)


def render_all():
    docs = [(path, SCHEMAS.apply_defaults(copy.deepcopy(doc))) for path, doc in examples()
            if doc["kind"] in ("TrainJob", "ClusterTrainingRuntime")]
    runtimes = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "ClusterTrainingRuntime"}
    cases = []
    for path, tj in docs:
        if tj["kind"] != "TrainJob":
            continue
        rt = runtimes[tj["spec"]["runtimeRef"]["name"]]
        out = tm.render(tj, rt)
        js = jm.admit(SCHEMAS.apply_defaults(out["jobset"]))
        cases.append({"name": f"{path} ({tj['metadata']['name']} on {rt['metadata']['name']})", "trainjob": tj,
                      "runtime": rt, "out": out, "jobset": js, "jobs": jm.jobs(js), "pods": jm.pods(js)})
    return cases


def main_container(pod):
    return next(c for c in pod["spec"]["containers"] if c["name"] == "node")


def containers(pod):
    return pod["spec"].get("initContainers", []) + pod["spec"]["containers"]


def hosts(case):
    return [line.split()[0] for line in case["out"]["hostfile"]["data"]["hostfile"].splitlines()]


def expand(container, pod, text):
    """$(VAR) as the kubelet expands it, downward-API labels from the rendered pod."""
    env = {}
    for item in container.get("env", []):
        path = (item.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath", "")
        label = re.fullmatch(r"metadata\.labels\['(.+)'\]", path)
        env[item["name"]] = pod["metadata"]["labels"].get(label.group(1)) if label else item.get("value")
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1)) or m.group(0), text)


def flag(command, name):
    return command[command.index(name) + 1] if name in command else None


class RenderedExamples(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cases = render_all()

    def each(self):
        self.assertGreaterEqual(len(self.cases), 3, "examples/ holds the MPI hello, DeepSpeed and Megatron TrainJobs")
        return self.cases

    def test_the_jobset_passes_its_crd_and_the_job_api(self):
        for case in self.each():
            self.assertEqual(SCHEMAS.validate(case["jobset"]), [], f"{case['name']}: the rendered JobSet's CRD")
            for job in case["jobs"]:
                jm.check_job(job)

    def test_one_launcher_pod_and_num_nodes_hosts(self):
        for case in self.each():
            by_job = {}
            for pod in case["pods"]:
                by_job.setdefault(pod["replicatedJob"], []).append(pod)
            self.assertEqual(len(by_job["launcher"]), 1, f"{case['name']}: launcher pods")
            trainer, mpi = case["trainjob"]["spec"]["trainer"], case["runtime"]["spec"]["mlPolicy"]["mpi"]
            with_launcher = mpi["runLauncherAsNode"]
            want = trainer.get("numNodes", 1 + with_launcher)  # unset: the runtime's (launcher and 1 node pod)
            self.assertEqual(len(by_job["node"]) + with_launcher, max(want, 1 + with_launcher),
                             f"{case['name']}: hosts (node pods{', launcher' if with_launcher else ''}) "
                             f"for numNodes {trainer.get('numNodes')}")
            self.assertEqual(sorted(hosts(case)), sorted(jm.fqdn(p) for p in case["pods"]
                                                         if p["replicatedJob"] == "node" or with_launcher),
                             f"{case['name']}: the hostfile names exactly the rendered rank hosts")

    def test_gpus_only_on_pods_that_run_ranks(self):
        gpu_jobs = 0
        for case in self.each():
            wanted = case["trainjob"]["spec"]["trainer"].get("resourcesPerNode")
            gpu_jobs += bool(wanted)
            for pod in case["pods"]:
                for c in containers(pod):
                    if tm.gpus(c.get("resources")):
                        self.assertIn(jm.fqdn(pod), hosts(case),
                                      f"{case['name']}: {pod['metadata']['name']}/{c['name']} asks for GPUs but runs "
                                      "no ranks (it is not in the hostfile)")
                if wanted and jm.fqdn(pod) in hosts(case):
                    resources = main_container(pod).get("resources", {})
                    for key, values in wanted.items():
                        self.assertEqual({k: resources.get(key, {}).get(k) for k in values}, values,
                                         f"{case['name']}: {pod['metadata']['name']} container node {key}: the "
                                         "TrainJob's resourcesPerNode")
                    self.assertEqual(case["out"]["slots"], tm.gpus(resources),
                                     f"{case['name']}: slots per host = GPUs per host")
        self.assertGreaterEqual(gpu_jobs, 1, "at least one example asks for GPUs through resourcesPerNode")

    def test_the_trainjob_command_runs_on_the_launcher(self):
        for case in self.each():
            for pod in case["pods"]:
                command = main_container(pod)["command"]
                if pod["replicatedJob"] == "launcher":
                    self.assertEqual(command, case["trainjob"]["spec"]["trainer"]["command"], case["name"])
                else:
                    self.assertEqual(command[0], "/opt/trainer-mpi/bin/mpi-sshd",
                                     f"{case['name']}: a node pod runs the built-in server, from the bundle")

    def test_mounts_and_flags_of_every_rendered_container(self):
        manifests_test.setup(SRC, BUILD)
        manifests_test.failures.clear()
        seen = set()
        for case in self.each():
            for pod in case["pods"]:
                for c in containers(pod):
                    if (case["name"], pod["replicatedJob"], c["name"]) not in seen:
                        seen.add((case["name"], pod["replicatedJob"], c["name"]))
                        manifests_test.check_container(f"{case['name']}: {pod['metadata']['name']}/{c['name']}", c,
                                                       pod["replicatedJob"], pod["spec"], has_mpi_policy=False)
        self.assertGreater(len(seen), 10)
        self.assertEqual(manifests_test.failures, [], "the rendered pods' containers")

    def test_mpi_init_reads_trainers_files(self):
        for case in self.each():
            launcher = next(p for p in case["pods"] if p["replicatedJob"] == "launcher")
            for pod in case["pods"]:
                init = next(c for c in pod["spec"]["initContainers"] if c["name"] == "mpi-init")
                secret_dir = flag(init["command"], "--ssh-secret")
                self.assertEqual(jm.mounts(pod["spec"], "mpi-init").get(secret_dir), "mpi-ssh-auth",
                                 f"{case['name']}: {pod['metadata']['name']} mpi-init --ssh-secret {secret_dir}")
                self.assertIn("id_rsa", jm.volume_files(pod["spec"], "mpi-ssh-auth"))
            init = next(c for c in launcher["spec"]["initContainers"] if c["name"] == "mpi-init")
            command = [expand(init, launcher, word) for word in init["command"]]
            self.assertEqual(jm.mounts(launcher["spec"], "mpi-init").get(os.path.dirname(flag(command, "--hostfile"))),
                             "mpi-hostfile", f"{case['name']}: mpi-init --hostfile is Trainer's ConfigMap")
            self.assertEqual(flag(command, "--jobset"), case["jobset"]["metadata"]["name"])
            as_node = case["runtime"]["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"]
            self.assertEqual("--launcher-as-node" in command, as_node,
                             f"{case['name']}: mpi-init --launcher-as-node iff Trainer lists the launcher as a host")

    def test_sidecars_find_the_coordinator(self):
        for case in self.each():
            launcher = next(p for p in case["pods"] if p["replicatedJob"] == "launcher")
            found = 0
            for pod in case["pods"]:
                for c in pod["spec"].get("initContainers", []):
                    if c["name"] == "mpi-rendezvous":
                        found += 1
                        self.assertEqual(c.get("restartPolicy"), "Always", "a native sidecar")
                        address = expand(c, pod, flag(c["command"], "--coordinator"))
                        self.assertEqual(address, jm.fqdn(launcher) + ":29410",
                                         f"{case['name']}: {pod['metadata']['name']} mpi-rendezvous --coordinator")
            self.assertEqual(found, len(hosts(case)), f"{case['name']}: a sidecar on every rank host")

    def test_every_rank_host_runs_the_ssh_server(self):
        for case in self.each():
            for pod in case["pods"]:
                if jm.fqdn(pod) not in hosts(case):
                    continue
                running = [c for c in pod["spec"]["containers"] + [c for c in pod["spec"].get("initContainers", [])
                                                                   if c.get("restartPolicy") == "Always"]]
                self.assertTrue(any(os.path.basename(c["command"][0]) == "mpi-sshd" for c in running),
                                f"{case['name']}: {pod['metadata']['name']} is in the hostfile, so mpirun and the "
                                "preflight reach it by ssh: it needs a running mpi-sshd (main container or native "
                                "sidecar)")
                self.assertFalse(any("LD_PRELOAD" in {e["name"] for e in c.get("env", [])} for c in containers(pod)),
                                 f"{case['name']}: {pod['metadata']['name']} preloads something (nss_wrapper?)")


    def test_render_py_prints_the_same_hostfile_and_pods(self):
        def run(path, what):
            return subprocess.run([sys.executable, os.path.join(HERE, "render.py"), path, what],
                                  check=True, capture_output=True, text=True).stdout

        for case in self.each():
            path = os.path.join(HERE, "..", "..", case["name"].split()[0])
            self.assertEqual(run(path, "--hostfile"), case["out"]["hostfile"]["data"]["hostfile"], case["name"])
            self.assertEqual([line.split()[2] for line in run(path, "--pods").splitlines()],
                             [jm.fqdn(p) for p in case["pods"]], f"{case['name']}: render.py --pods")


class FailurePolicy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cases = render_all()

    def play(self, case, exit_code, conditions=()):
        """The JobSet's outcomes while every run's launcher pod ends with exit_code."""
        js, launcher_job = case["jobset"], next(j for j in case["jobs"] if j["replicatedJob"] == "launcher")
        outcomes = []
        for restarts in range(10):
            state, reason, message = jm.pod_failure(launcher_job, "node", exit_code, conditions)
            if state == "Succeeded":
                return outcomes + [("Completed", jm.succeeded(js, {"launcher": 1}))]
            self.assertEqual(state, "Failed", f"{case['name']}: exit {exit_code}: one launcher pod per run")
            outcomes.append(jm.jobset_failure(js, "launcher", reason, message, restarts))
            if outcomes[-1][0] == "Failed":
                return outcomes
        self.fail(f"{case['name']}: exit {exit_code}: the JobSet never ended")

    def test_the_users_failure_ends_the_jobset(self):
        for case in self.cases:
            for code in PROGRAM:
                self.assertEqual(self.play(case, code), [("Failed", "FailJobSetFailurePolicyAction")],
                                 f"{case['name']}: launcher exit {code} fails the JobSet with no restart")

    def test_an_infrastructure_fault_restarts_until_max_restarts(self):
        for case in self.cases:
            limit = case["jobset"]["spec"]["failurePolicy"]["maxRestarts"]
            self.assertGreaterEqual(limit, 1, f"{case['name']}: maxRestarts")
            for code, conditions in [(c, ()) for c in INFRASTRUCTURE] + [(143, ("DisruptionTarget",))]:
                self.assertEqual(self.play(case, code, conditions),
                                 [("Restart", "InfrastructureFault")] * limit + [("Failed", "ReachedMaxRestarts")],
                                 f"{case['name']}: launcher exit {code} {conditions}: restarts, then "
                                 "ReachedMaxRestarts")

    def test_success_and_a_failed_node_job(self):
        for case in self.cases:
            self.assertEqual(self.play(case, 0), [("Completed", True)],
                             f"{case['name']}: the launcher's success completes the JobSet (its node pods never end)")
            self.assertEqual(jm.jobset_failure(case["jobset"], "node", "BackoffLimitExceeded", "", 0),
                             ("Restart", "DefaultFailurePolicy"), f"{case['name']}: a node Job that failed")


if __name__ == "__main__":
    SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", ".."))
    BUILD = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(SRC, "build", "dev"))
    unittest.main(argv=sys.argv[:1])
