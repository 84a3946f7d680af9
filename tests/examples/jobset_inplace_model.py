"""jobset_inplace_model.py: JobSet v0.12.0's InPlaceRestart strategy, the controller's and the
agent's rules, and the Kubernetes parts they lean on.

Design: plain functions on dicts, one per upstream rule, then a small cluster that runs them:
  admit          the webhook's create checks for the strategy, on top of jobset_model.admit
  attempts       the pods' attempt annotations as the controller reads them
  reconcile      the JobSet controller's in-place step: fail, lift (current) or outdate (previous)
  agent_step     one agent process on one event of its JobSet: annotate, exit, lift the barrier
  container_exit the kubelet on a container's exit: restart it, restart the pod's containers
                 in place, or let it end (container restart rules)
  Cluster        pods from jobset_model.pods, an agent per running container, the Job
                 controller's replacement of a failed pod; `settle` runs every loop until
                 nothing changes, as the watches would.
The agent here is the "main container" kind: it runs the worker itself, so a worker's exit is
the agent's exit. Statuses and annotations hold what the apiserver stores (strings for
annotations, ints or None for the status fields).
`J:` is kubernetes-sigs/jobset at v0.12.0 (f22e565ac3cc3265c7c45ef67ecffdc689af5d77); `KA:` is
kubernetes/api v0.36.3 (3fde3c43c3cf3447606b9c2ac2c6257095444387) core/v1/types.go; `KK:` is
kubernetes/kubernetes pkg/features/kube_features.go (b0b89d3b).
"""
import copy

import jobset_model as jm

# J:api/jobset/v1alpha2/jobset_types.go InPlaceRestartAttemptKey, DisableInPlaceRestartKey
ATTEMPT = "jobset.sigs.k8s.io/in-place-restart-attempt"
DISABLE = "jobset.sigs.k8s.io/disable-in-place-restart"
JOBSET_NAME = jm.PREFIX + "jobset-name"  # the label the controller finds pods by, the annotation the agent reads
MAX_INT32 = 2 ** 31 - 1
RESTART_EXIT_CODE = 1  # J:cmd/in-place-restart-agent/main.go DefaultInPlaceRestartExitCode
EXIT_CODE_ENV = "IN_PLACE_RESTART_EXIT_CODE"
# J:cmd/in-place-restart-agent/main.go parseEnvOrDie: the namespace from the token's mount, the
# rest from the environment (the upstream examples fill these two from the downward API).
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
AGENT_ENV = {"JOBSET_NAME": f"metadata.annotations['{JOBSET_NAME}']", "POD_NAME": "metadata.name"}
# J:site/static/examples/in-place-restart/service-account.yaml: the Role the agent's account needs.
AGENT_RULES = ({"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]},
               {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list", "watch"]})
MAX_RESTARTS_MESSAGE = "jobset failed due to reaching max number of restarts"  # J:pkg/constants/constants.go


def in_place(js):
    """J:pkg/controllers/in_place_restart.go isInPlaceRestartStrategy."""
    return (js["spec"].get("failurePolicy") or {}).get("restartStrategy") == "InPlaceRestart"


def admit(jobset, gate=True):
    """J:pkg/webhooks/jobset_webhook.go ValidateCreate, the InPlaceRestart rules (the feature
    gate `InPlaceRestart`, J:pkg/features/features.go: alpha, off by default). Every error is
    gathered, as upstream does; the rest is jobset_model.admit. Returns the defaulted copy."""
    errors = []
    if in_place(jobset) and not gate:
        errors.append("InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled")
    for rjob in jobset["spec"]["replicatedJobs"] if in_place(jobset) and gate else ():
        job = rjob["template"]["spec"]
        if job.get("backoffLimit") != MAX_INT32:
            errors.append(f"replicatedJob {rjob['name']}: backoffLimit must be set to {MAX_INT32} (MaxInt32)")
        if job.get("podReplacementPolicy") != "Failed":
            errors.append(f"replicatedJob {rjob['name']}: podReplacementPolicy must be set to Failed")
        if job.get("completions") is None or job.get("completions") != job.get("parallelism"):
            errors.append(f"replicatedJob {rjob['name']}: completions and parallelism must be set and equal")
    try:
        admitted = jm.admit(jobset)
    except jm.Rejected as refused:
        errors.append(str(refused))
    if errors:
        raise jm.Rejected("; ".join(errors))
    return admitted


def total_pods(js):
    """J:…/in_place_restart.go getTotalNumberOfPods: replicas x parallelism, summed."""
    total = 0
    for rjob in js["spec"]["replicatedJobs"]:
        job = rjob["template"]["spec"]
        if job.get("completions") is None or job.get("completions") != job.get("parallelism"):
            raise ValueError(f"{rjob['name']}: in-place restart requires completions == parallelism != nil")
        total += rjob["replicas"] * job["parallelism"]
    return total


def attempts(pods):
    """J:…/in_place_restart.go getPodInPlaceRestartAttempts: a Failed pod (its replacement may
    already run) and a pod whose agent has not written yet are left out."""
    found = []
    for pod in pods:
        raw = (pod["metadata"].get("annotations") or {}).get(ATTEMPT)
        if pod["status"]["phase"] == "Failed" or raw is None:
            continue
        if not raw.isdigit():  # Atoi, then the sign check: a non-negative integer
            raise ValueError(f"invalid value for annotation {ATTEMPT}, must be non-negative integer")
        found.append(int(raw))
    return found


def max_container_restarts(pods):
    """J:…/in_place_restart.go getMaxContainerRestartCount: init and regular containers alike."""
    counts = [c.get("restartCount", 0) for pod in pods
              for c in pod["status"].get("initContainerStatuses", []) + pod["status"].get("containerStatuses", [])]
    return max(counts, default=0)


def reconcile(js, pods):
    """J:…/in_place_restart.go reconcileInPlaceRestart: a new status. `pods` are every pod with
    the JobSet's name label in its namespace (getAssociatedPods), whatever restart made them."""
    status = copy.deepcopy(js.get("status") or {})
    policy = js["spec"]["failurePolicy"]

    def failed():
        status["terminalState"] = "Failed"
        status["conditions"] = [{"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts",
                                 "message": MAX_RESTARTS_MESSAGE}]
        return status

    # A container that dies before any barrier lifts never raises an attempt: its restartCount does.
    if max_container_restarts(pods) > policy.get("maxRestarts", 0):
        return failed()
    found = attempts(pods)
    # J:…/in_place_restart.go exceededMaxRestarts: full restarts that ignore maxRestarts do not count.
    uncounted = status.get("restarts", 0) - status.get("restartsCountTowardsMax", 0)
    if max(found, default=0) - uncounted > policy.get("maxRestarts", 0):
        return failed()
    if len(found) == total_pods(js) and len(set(found)) == 1:  # allEqual: everyone at one attempt
        status["currentInPlaceRestartAttempt"] = found[0]  # updateCurrentInPlaceRestartAttempt
        return status
    if not found or max(found) == 0:  # the first start: agents still writing 0
        return status
    previous = status.get("previousInPlaceRestartAttempt")
    if previous is None or max(found) - 1 > previous:  # updatePreviousInPlaceRestartAttempt: never lowered
        status["previousInPlaceRestartAttempt"] = max(found) - 1
    return status


def new_agent(exit_code=RESTART_EXIT_CODE):
    """J:cmd/in-place-restart-agent/main.go NewInPlaceRestartAgent: what a fresh process knows."""
    return {"attempt": None, "barrier": True, "worker": False, "exit": None, "exit_code": exit_code}


def bypass(js):
    """J:…/main.go shouldBypassBarrier: the JobSet's disable annotation (any value), or another
    strategy: the agent runs its worker at once and writes no annotation."""
    return DISABLE in (js["metadata"].get("annotations") or {}) or not in_place(js)


def agent_step(agent, js, can_patch=True):
    """J:…/main.go Reconcile, on one event of the agent's JobSet: (agent, annotations it applied
    to its pod). An agent without `patch` on pods (can_patch False) keeps retrying its first write."""
    agent = dict(agent)
    if agent["exit"] is not None:
        return agent, {}
    if bypass(js):
        agent["barrier"], agent["worker"] = False, True
        return agent, {}
    status = js.get("status") or {}
    current, previous = status.get("currentInPlaceRestartAttempt"), status.get("previousInPlaceRestartAttempt")
    applied = {}
    if agent["attempt"] is None:  # once per process: 0 on the first start, else one past current
        if not can_patch:
            return agent, {}  # the apply failed: the request is retried, nothing else runs
        agent["attempt"] = 0 if current is None else current + 1
        applied = {ATTEMPT: str(agent["attempt"])}  # patchPodInPlaceRestartAttempt: server-side apply
    if previous is not None and agent["attempt"] <= previous:
        agent["exit"] = agent["exit_code"]  # outdated: exit so the kubelet restarts the container
        return agent, applied
    if agent["barrier"] and current is not None and agent["attempt"] == current:
        agent["barrier"], agent["worker"] = False, True  # executeWorkerCommand (main container mode)
    return agent, applied


def container_exit(container, pod_restart_policy, code, rules_gate=True):
    """The kubelet on a container's exit (KA:types.go Container.restartPolicyRules): the first
    rule whose exit codes match decides; else the container's restartPolicy; else the pod's.
    Rules and a regular container's restartPolicy need the gate ContainerRestartRules (KK: alpha
    1.34, beta on by default 1.35); the apiserver drops them when it is off. Returns "Restart",
    "RestartAllContainers" (KK RestartAllContainersOnContainerExits, alpha 1.35) or "Terminated"."""
    policy = pod_restart_policy
    if rules_gate:
        for rule in container.get("restartPolicyRules", []):
            codes = rule["exitCodes"]
            if (code in codes.get("values", [])) == (codes["operator"] == "In"):
                return rule["action"]
        policy = container.get("restartPolicy") or pod_restart_policy
    if policy == "Always" or (policy == "OnFailure" and code != 0):
        return "Restart"
    return "Terminated"


class Cluster:
    """The pods of one admitted InPlaceRestart JobSet and an agent in each pod's main container.
    The Job controller makes a new pod for a Failed one (backoffLimit MaxInt32 never fails the
    Job; podReplacementPolicy Failed: only once the old pod is terminal): the same hostname and
    index, a new name, UID and IP, and a fresh agent."""

    def __init__(self, js, rules_gate=True, container="node"):
        self.js = copy.deepcopy(js)
        self.js.setdefault("status", {})
        self.rules_gate, self.container, self.made = rules_gate, container, 0
        self.pods, self.agents, self.no_patch = [], {}, set()
        for pod in jm.pods(self.js):
            self._start(pod)

    def _start(self, template):
        self.made += 1
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"{pod['spec']['hostname']}-{self.made:05d}"
        pod["metadata"]["uid"], pod["status"] = f"uid-{self.made}", {"phase": "Running", "podIP": f"10.0.0.{self.made}"}
        pod["metadata"]["annotations"] = {k: v for k, v in pod["metadata"]["annotations"].items() if k != ATTEMPT}
        pod["status"]["containerStatuses"] = [{"name": self.container, "restartCount": 0}]
        self.pods.append(pod)
        self.agents[pod["metadata"]["uid"]] = new_agent()

    def pod(self, hostname):
        """The pod that is not Failed at hostname (the live one)."""
        return next(p for p in self.pods if p["spec"]["hostname"] == hostname and p["status"]["phase"] != "Failed")

    def agent(self, hostname):
        return self.agents[self.pod(hostname)["metadata"]["uid"]]

    def worker_exits(self, hostname, code):
        """The worker a barrier let run ends with code: the agent ends with it (executeWorkerCommand)."""
        self.agents[self.pod(hostname)["metadata"]["uid"]]["exit"] = code

    def node_lost(self, hostname):
        self.pod(hostname)["status"]["phase"] = "Failed"

    def _exit(self, pod, code):
        spec = pod["spec"]
        main = next(c for c in spec["containers"] if c["name"] == self.container)
        action = container_exit(main, spec.get("restartPolicy"), code, self.rules_gate)
        if action == "Terminated":
            pod["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
            return
        for status in pod["status"]["containerStatuses"]:  # Restart: this one; the other: all of them
            if action == "RestartAllContainers" or status["name"] == self.container:
                status["restartCount"] += 1
        self.agents[pod["metadata"]["uid"]] = new_agent()

    def step(self):
        """One round: the controller, then each running pod's agent (its write, its exit and
        the kubelet's answer), then the Job controller. Returns whether anything changed."""
        before = copy.deepcopy((self.js["status"], self.pods, self.agents))
        if self.js["status"].get("terminalState"):
            return False
        self.js["status"] = reconcile(self.js, self.pods)
        for pod in [p for p in self.pods if p["status"]["phase"] == "Running"]:
            uid = pod["metadata"]["uid"]
            agent, applied = agent_step(self.agents[uid], self.js, uid not in self.no_patch)
            self.agents[uid] = agent
            pod["metadata"]["annotations"].update(applied)
            if agent["exit"] is not None:
                self._exit(pod, agent["exit"])
        live = {p["spec"]["hostname"] for p in self.pods if p["status"]["phase"] != "Failed"}
        for pod in [p for p in self.pods if p["status"]["phase"] == "Failed"]:
            if pod["spec"]["hostname"] not in live:
                live.add(pod["spec"]["hostname"])
                self._start(pod)
        return before != (self.js["status"], self.pods, self.agents)

    def settle(self, rounds=50):
        """Every loop until a round changes nothing, as the watches would; returns the rounds."""
        for n in range(rounds):
            if not self.step():
                return n
        raise AssertionError(f"no fixed point in {rounds} rounds")
