#!/usr/bin/env python3
"""jobset_inplace_model_test.py: JobSet v0.12.0's InPlaceRestart (jobset_inplace_model.py), rule
by rule, then played through on a cluster: every agent at the barrier, one worker failing, one
pod lost and made again; and the cases that break it.

Design: as jobset_model_test.py: the least input per rule, the exact value upstream gives. The
JobSets come from trainer_model.render on a synthetic MPI runtime whose two jobs carry what the
strategy asks (backoffLimit MaxInt32, podReplacementPolicy Failed) and whose main container is
the agent (restartPolicy Never, restarted in place on any non-zero exit), so the runtime is
checked against Trainer v2.3's CRD and the JobSet against JobSet v0.12.0's.
usage: jobset_inplace_model_test.py (plain unittest; exit status 1 on any failure)
"""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobset_inplace_model as ipr  # noqa: E402
import jobset_model as jm  # noqa: E402
import trainer_model as tm  # noqa: E402
from model_fixtures import SCHEMAS, container, job, rjob, runtime, trainjob  # noqa: E402

RESTART_ON_FAILURE = [{"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}}]
HOSTS = ["js-launcher-0-0", "js-node-0-0", "js-node-0-1"]


def agent_container():
    env = [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}} for name, path in ipr.AGENT_ENV.items()]
    return container("node", restartPolicy="Never", restartPolicyRules=copy.deepcopy(RESTART_ON_FAILURE), env=env)


def inplace_runtime(max_restarts=2, strategy="InPlaceRestart"):
    jobs = [rjob("launcher", [agent_container()], trainer=True, restartPolicy="Never"),
            rjob("node", [agent_container()], restartPolicy="Never")]
    for rj in jobs:
        rj["template"]["spec"].update(backoffLimit=ipr.MAX_INT32, podReplacementPolicy="Failed")
    return runtime(jobs=jobs, failurePolicy={"maxRestarts": max_restarts, "restartStrategy": strategy})


def jobset(max_restarts=2, rt=None):
    rt = rt or inplace_runtime(max_restarts)
    return tm.render(trainjob(name="js", namespace="ns", numNodes=2), rt)["jobset"]


def cluster(max_restarts=2, **options):
    return ipr.Cluster(ipr.admit(jobset(max_restarts)), **options)


def pod(uid="u", phase="Running", attempt=None, restarts=0):
    annotations = {} if attempt is None else {ipr.ATTEMPT: str(attempt)}
    return {"metadata": {"uid": uid, "annotations": annotations},
            "status": {"phase": phase, "containerStatuses": [{"name": "node", "restartCount": restarts}]}}


def running(c):
    """Whose worker runs: the barrier lifted in that pod's current agent."""
    return [c.agent(h)["worker"] for h in HOSTS]


def field_ref(obj, path):
    """The value the downward API gives for a fieldRef path: metadata.name or metadata.annotations['key']."""
    if path.startswith("metadata.annotations['"):
        return obj["metadata"]["annotations"][path[len("metadata.annotations['"):-2]]
    return obj["metadata"][path.split(".", 1)[1]]


def status(js, **fields):
    return {**js, "status": fields}


class Webhook(unittest.TestCase):
    def test_the_strategy_with_its_settings_and_the_crds(self):
        rt = inplace_runtime()
        self.assertEqual(SCHEMAS.validate(rt), [], "Trainer v2.3's ClusterTrainingRuntime CRD")
        js = ipr.admit(jobset())
        self.assertEqual(SCHEMAS.validate(js), [], "JobSet v0.12.0's CRD")
        self.assertEqual(ipr.total_pods(js), 3)
        bad = jobset(rt=inplace_runtime(strategy="InPlace"))
        self.assertTrue(any("restartStrategy" in e for e in SCHEMAS.validate(bad)), "the CRD's enum")

    def test_refusals(self):
        with self.assertRaisesRegex(jm.Rejected, "feature gate is disabled"):
            ipr.admit(jobset(), gate=False)
        for field, value, text in (("backoffLimit", 0, "backoffLimit must be set to 2147483647"),
                                   ("podReplacementPolicy", None, "podReplacementPolicy must be set to Failed"),
                                   ("completions", 1, "completions and parallelism must be set and equal")):
            js = jobset()
            job(js, "node")["template"]["spec"][field] = value
            with self.assertRaisesRegex(jm.Rejected, f"replicatedJob node: {text}"):
                ipr.admit(js)
        js = jobset()
        del job(js, "launcher")["template"]["spec"]["completions"]
        with self.assertRaisesRegex(jm.Rejected, "launcher: completions"):
            ipr.admit(js)

    def test_what_it_does_not_check(self):
        js = jobset(max_restarts=0)
        for rj in js["spec"]["replicatedJobs"]:
            rj["template"]["spec"]["template"]["spec"]["containers"] = [container("node")]
        ipr.admit(js)  # maxRestarts 0 and no agent at all: admitted


class Controller(unittest.TestCase):
    def test_attempts_leave_out_failed_pods_and_unwritten_ones(self):
        self.assertEqual(ipr.attempts([pod(attempt=1), pod(phase="Failed", attempt=0), pod()]), [1])
        for raw in ("-1", "one"):
            bad = pod()
            bad["metadata"]["annotations"][ipr.ATTEMPT] = raw
            with self.assertRaisesRegex(ValueError, "non-negative integer"):
                ipr.attempts([bad])

    def test_first_start_lift_and_outdate(self):
        js = ipr.admit(jobset())
        self.assertEqual(ipr.reconcile(js, [pod(attempt=0)] * 2), {}, "one pod has not written yet")
        self.assertEqual(ipr.reconcile(js, [pod(attempt=0)] * 3), {"currentInPlaceRestartAttempt": 0})
        synced = status(js, currentInPlaceRestartAttempt=0)
        self.assertEqual(ipr.reconcile(synced, [pod(attempt=1), pod(attempt=0), pod(attempt=0)]),
                         {"currentInPlaceRestartAttempt": 0, "previousInPlaceRestartAttempt": 0})
        self.assertEqual(ipr.reconcile(synced, [pod(attempt=1), pod(attempt=1), pod(phase="Failed", attempt=0),
                                                 pod(attempt=1)]), {"currentInPlaceRestartAttempt": 1},
                         "the Failed pod is not counted: its replacement is")

    def test_previous_is_never_lowered(self):
        js = status(ipr.admit(jobset()), currentInPlaceRestartAttempt=1, previousInPlaceRestartAttempt=1)
        self.assertEqual(ipr.reconcile(js, [pod(attempt=1), pod(attempt=0)])["previousInPlaceRestartAttempt"], 1)

    def test_max_restarts(self):
        js = status(ipr.admit(jobset(max_restarts=1)), currentInPlaceRestartAttempt=1)
        self.assertNotIn("terminalState", ipr.reconcile(js, [pod(attempt=1, restarts=1)] * 3), "1 is allowed")
        failed = ipr.reconcile(js, [pod(attempt=2), pod(attempt=1), pod(attempt=1)])
        self.assertEqual((failed["terminalState"], failed["conditions"][0]["reason"]), ("Failed", "ReachedMaxRestarts"))
        crash = ipr.reconcile(js, [pod(attempt=1, restarts=2)])
        self.assertEqual(crash["terminalState"], "Failed", "a container restarted more than maxRestarts times")
        forgiven = {**js, "status": {**js["status"], "restarts": 1, "restartsCountTowardsMax": 0}}
        self.assertNotIn("terminalState", ipr.reconcile(forgiven, [pod(attempt=2), pod(attempt=1), pod(attempt=1)]),
                         "a full restart that ignored maxRestarts lowers the count")


class Agent(unittest.TestCase):
    def step(self, agent, **fields):
        return ipr.agent_step(agent, status(ipr.admit(jobset()), **fields))

    def test_start_wait_and_lift(self):
        agent, applied = self.step(ipr.new_agent())
        self.assertEqual((agent["attempt"], applied, agent["worker"]), (0, {ipr.ATTEMPT: "0"}, False))
        agent, applied = self.step(agent, currentInPlaceRestartAttempt=0)
        self.assertEqual((applied, agent["barrier"], agent["worker"]), ({}, False, True), "written once per process")
        later, applied = self.step(ipr.new_agent(), currentInPlaceRestartAttempt=3, previousInPlaceRestartAttempt=3)
        self.assertEqual((later["attempt"], applied, later["exit"], later["worker"]),
                         (4, {ipr.ATTEMPT: "4"}, None, False), "one past current: it waits for the others")

    def test_outdated_exits_with_the_restart_code(self):
        agent = {**ipr.new_agent(), "attempt": 0, "barrier": False, "worker": True}
        self.assertEqual(self.step(agent, currentInPlaceRestartAttempt=0, previousInPlaceRestartAttempt=0)[0]["exit"],
                         ipr.RESTART_EXIT_CODE)
        custom = {**ipr.new_agent(exit_code=42), "attempt": 0}  # IN_PLACE_RESTART_EXIT_CODE=42
        outdated = self.step(custom, currentInPlaceRestartAttempt=0, previousInPlaceRestartAttempt=0)[0]
        self.assertEqual(outdated["exit"], 42)

    def test_bypass_and_a_forbidden_patch(self):
        js = ipr.admit(jobset())
        js["metadata"]["annotations"] = {ipr.DISABLE: ""}
        self.assertEqual(ipr.agent_step(ipr.new_agent(), js)[1:], ({},))
        self.assertTrue(ipr.agent_step(ipr.new_agent(), js)[0]["worker"], "the disable annotation: run at once")
        recreate = ipr.admit(jobset(rt=inplace_runtime(strategy="Recreate")))
        self.assertTrue(ipr.agent_step(ipr.new_agent(), recreate)[0]["worker"], "another strategy: run at once")
        agent, applied = ipr.agent_step(ipr.new_agent(), status(ipr.admit(jobset()), currentInPlaceRestartAttempt=0),
                                        can_patch=False)
        self.assertEqual((agent["attempt"], applied, agent["worker"]), (None, {}, False))

    def test_the_downward_api_names_the_jobset_and_the_pod(self):
        for p in jm.pods(ipr.admit(jobset())):
            env = {name: field_ref(p, path) for name, path in ipr.AGENT_ENV.items()}
            self.assertEqual(env, {"JOBSET_NAME": "js", "POD_NAME": p["metadata"]["name"]})
            self.assertEqual(p["metadata"]["labels"][ipr.JOBSET_NAME], "js", "how the controller finds the pod")
        self.assertIn({"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}, ipr.AGENT_RULES)


class Kubelet(unittest.TestCase):
    def test_restart_rules(self):
        agent = agent_container()
        self.assertEqual(ipr.container_exit(agent, "Never", 1), "Restart")
        self.assertEqual(ipr.container_exit(agent, "Never", 0), "Terminated", "no rule: the container's Never")
        self.assertEqual(ipr.container_exit(agent, "Never", 1, rules_gate=False), "Terminated",
                         "ContainerRestartRules off: the rules are dropped, the pod's Never decides")
        self.assertEqual(ipr.container_exit(container("node"), "OnFailure", 1, rules_gate=False), "Restart")
        only_75 = container("n", restartPolicy="Never",
                            restartPolicyRules=[{"action": "Restart", "exitCodes": {"operator": "In", "values": [75]}}])
        self.assertEqual(ipr.container_exit(only_75, "OnFailure", 2), "Terminated",
                         "no rule matches: the container's Never, not the pod's OnFailure")
        self.assertEqual(ipr.container_exit(only_75, "OnFailure", 2, rules_gate=False), "Restart")
        everything = container("w", restartPolicy="Never", restartPolicyRules=[
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}])
        self.assertEqual(ipr.container_exit(everything, "Never", 1), "RestartAllContainers")


class Play(unittest.TestCase):
    def test_every_agent_waits_at_the_barrier_until_all_have_written(self):
        c = cluster()
        self.assertTrue(c.step())
        self.assertEqual(c.js["status"], {}, "the controller saw no annotation yet")
        self.assertEqual([c.pod(h)["metadata"]["annotations"][ipr.ATTEMPT] for h in HOSTS], ["0"] * 3)
        self.assertEqual(running(c), [False] * 3, "no current attempt: every barrier holds")
        self.assertEqual(c.settle(), 1, "one round: the controller sets current, every agent lifts")
        self.assertEqual(c.js["status"], {"currentInPlaceRestartAttempt": 0})
        self.assertEqual(running(c), [True] * 3)
        self.assertEqual([c.pod(h)["metadata"]["annotations"][ipr.ATTEMPT] for h in HOSTS], ["0"] * 3)

    def test_one_worker_fails_and_every_pod_restarts_in_place(self):
        c = cluster()
        c.settle()
        before = {h: (c.pod(h)["metadata"]["uid"], c.pod(h)["status"]["podIP"]) for h in HOSTS}
        c.worker_exits("js-node-0-1", 3)
        c.settle()
        self.assertEqual(c.js["status"], {"currentInPlaceRestartAttempt": 1, "previousInPlaceRestartAttempt": 0})
        self.assertEqual({h: (c.pod(h)["metadata"]["uid"], c.pod(h)["status"]["podIP"]) for h in HOSTS}, before,
                         "no pod made again")
        self.assertEqual([c.pod(h)["status"]["containerStatuses"][0]["restartCount"] for h in HOSTS], [1] * 3)
        self.assertEqual([c.pod(h)["metadata"]["annotations"][ipr.ATTEMPT] for h in HOSTS], ["1"] * 3)
        self.assertEqual(running(c), [True] * 3)
        self.assertEqual(len(c.pods), 3)

    def test_a_lost_pod_is_made_again_alone(self):
        c = cluster()
        c.settle()
        lost = copy.deepcopy(c.pod("js-node-0-0"))
        c.node_lost("js-node-0-0")
        c.settle()
        again = c.pod("js-node-0-0")
        self.assertEqual(again["spec"]["hostname"], lost["spec"]["hostname"])
        for key in ("name", "uid"):
            self.assertNotEqual(again["metadata"][key], lost["metadata"][key])
        self.assertNotEqual(again["status"]["podIP"], lost["status"]["podIP"])
        self.assertEqual(again["status"]["containerStatuses"][0]["restartCount"], 0)
        self.assertEqual([c.pod(h)["status"]["containerStatuses"][0]["restartCount"] for h in HOSTS], [1, 0, 1],
                         "the others restart in place")
        self.assertEqual([c.pod(h)["metadata"]["annotations"][ipr.ATTEMPT] for h in HOSTS], ["1"] * 3)
        self.assertEqual(c.js["status"]["currentInPlaceRestartAttempt"], 1)
        self.assertEqual(running(c), [True] * 3)
        self.assertEqual(len(c.pods), 4, "the Failed pod is still listed, and left out")


class Breaks(unittest.TestCase):
    def test_an_agent_that_never_writes_holds_the_barrier(self):
        c = cluster()
        c.no_patch.add(c.pod("js-node-0-1")["metadata"]["uid"])
        c.settle()
        self.assertEqual(c.js["status"], {})
        self.assertFalse(any(running(c)))
        c.no_patch.clear()
        c.settle()
        self.assertEqual(c.js["status"], {"currentInPlaceRestartAttempt": 0})

    def test_a_silent_agent_after_a_failure_holds_the_restart(self):
        c = cluster()
        c.settle()
        c.no_patch.add(c.pod("js-launcher-0-0")["metadata"]["uid"])  # from its next process on
        c.worker_exits("js-node-0-1", 1)
        c.settle()
        self.assertEqual(c.js["status"], {"currentInPlaceRestartAttempt": 0, "previousInPlaceRestartAttempt": 0})
        self.assertEqual([c.pod(h)["metadata"]["annotations"][ipr.ATTEMPT] for h in HOSTS], ["0", "1", "1"],
                         "the launcher's old value stays")
        self.assertFalse(any(running(c)), "all wait at the barrier")

    def test_a_failure_is_seen_only_once_the_restarted_agent_writes(self):
        c = cluster()
        c.settle()
        c.no_patch.add(c.pod("js-node-0-1")["metadata"]["uid"])
        c.worker_exits("js-node-0-1", 1)
        c.settle()
        self.assertEqual(c.js["status"], {"currentInPlaceRestartAttempt": 0}, "every annotation still says 0")
        self.assertEqual(running(c), [True, True, False], "the others run on, unaware")

    def test_max_restarts_exhausted_fails_the_jobset(self):
        c = cluster(max_restarts=1)
        c.settle()
        c.worker_exits("js-node-0-0", 1)
        c.settle()
        self.assertNotIn("terminalState", c.js["status"])
        c.worker_exits("js-node-0-0", 1)
        c.settle()
        self.assertEqual((c.js["status"]["terminalState"], c.js["status"]["conditions"][0]["reason"]),
                         ("Failed", "ReachedMaxRestarts"))

    def test_max_restarts_zero_is_admitted_and_fails_at_the_first_restart(self):
        c = cluster(max_restarts=0)
        c.settle()
        self.assertEqual(c.js["status"], {"currentInPlaceRestartAttempt": 0})
        c.worker_exits("js-node-0-0", 1)
        c.settle()
        self.assertEqual(c.js["status"]["terminalState"], "Failed")

    def test_without_container_restart_rules_every_pod_is_made_again(self):
        c = cluster(rules_gate=False)
        c.settle()
        first = {h: c.pod(h)["metadata"]["uid"] for h in HOSTS}
        c.worker_exits("js-node-0-1", 1)
        c.settle()
        self.assertEqual(c.js["status"]["currentInPlaceRestartAttempt"], 1, "it still converges")
        self.assertTrue(all(c.pod(h)["metadata"]["uid"] != first[h] for h in HOSTS),
                        "restartPolicy Never, no rules: each agent's exit fails its pod")


if __name__ == "__main__":
    unittest.main()
