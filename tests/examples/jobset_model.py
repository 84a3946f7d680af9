"""jobset_model.py: what JobSet v0.12.0 and Kubernetes make of the JobSet Trainer applies.

Design: plain functions on dicts, in the order the cluster runs them:
  admit          JobSet's webhook: its defaults, then the create checks (Rejected)
  jobs, pods     the controller's child Jobs, and the pods the Job controller makes of
                 each: names, hostnames, subdomain, labels and annotations
  check_job      the apiserver's Job checks that decide whether those Jobs can be created
  volume_files   the files a Secret or ConfigMap volume shows in a pod, with their modes
  pod_failure    the Job controller on a failed pod (podFailurePolicy, backoffLimit)
  jobset_failure the JobSet controller on a failed Job (failurePolicy, maxRestarts)
  succeeded      the JobSet's successPolicy
  can_create     dependsOn: whether a replicated job's Jobs may be created yet.
`J:` is kubernetes-sigs/jobset at v0.12.0 (f22e565ac3cc3265c7c45ef67ecffdc689af5d77);
`K:` is kubernetes/api at v0.36.3 (3fde3c43c3cf3447606b9c2ac2c6257095444387), the
Job API's documented contract. Simulated outcomes are strings, as the conditions name them.
"""
import copy
import hashlib
import re

JOBSET_VERSION = "kubernetes-sigs/jobset v0.12.0 @ f22e565a"
PREFIX = "jobset.sigs.k8s.io/"
# J:pkg/webhooks/jobset_webhook.go validOnJobFailureReasons (K:batch/v1/types.go JobReason*)
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                       "PodFailurePolicy")
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")  # J:…/jobset_webhook.go ruleNameFmt
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


class Rejected(Exception):
    """The apiserver (a webhook or the Job API's validation) refuses the object."""


def admit(jobset):
    """J:pkg/webhooks/jobset_webhook.go Default, then ValidateCreate; returns a defaulted copy."""
    js = copy.deepcopy(jobset)
    spec = js["spec"]
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rjob in spec["replicatedJobs"]:
        rjob.setdefault("replicas", 1)
        rjob.setdefault("groupName", "default")  # a CRD default (J:api/…/jobset_types.go)
        job = rjob["template"]["spec"]
        job.setdefault("completionMode", "Indexed")
        if not job["template"]["spec"].get("restartPolicy"):
            job["template"]["spec"]["restartPolicy"] = "OnFailure"  # what podFailurePolicy cannot have
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    rules = (spec.get("failurePolicy") or {}).get("rules", [])
    for i, rule in enumerate(rules):
        if not rule.get("name"):
            rule["name"] = f"failurePolicyRule{i}"
    errors, names = [], []
    for i, rjob in enumerate(spec["replicatedJobs"]):
        for dep in rjob.get("dependsOn", []):
            if i == 0:
                errors.append("DependsOn can't be set for the first ReplicatedJob")
            elif dep["name"] not in names:  # only an earlier job
                errors.append(f"replicatedJob: {rjob['name']} cannot depend on replicatedJob: {dep['name']}")
        names.append(rjob["name"])
        last_job = f"{js['metadata']['name']}-{rjob['name']}-{rjob['replicas'] - 1}"
        completions = rjob["template"]["spec"].get("completions")
        longest = [last_job] + ([f"{last_job}-{completions - 1}-abcde"] if completions else [])
        errors += [f"{n} is not a DNS-1035 label of 63 or fewer characters" for n in longest
                   if len(n) > 63 or not DNS1035.search(n)]
    for target in spec["successPolicy"].get("targetReplicatedJobs", []):
        if target not in names:
            errors.append(f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs")
    seen = set()
    for rule in rules:  # J:…/jobset_webhook.go validateFailurePolicy
        if rule["action"] in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
            errors.append(f"{rule['action']} needs the RestartJob feature gate (alpha, off)")
        if not RULE_NAME.search(rule["name"]) or len(rule["name"]) > 128 or rule["name"] in seen:
            errors.append(f"failure policy rule name {rule['name']!r} is invalid or not unique")
        seen.add(rule["name"])
        errors += [f"failure policy target {t!r} is no replicated job" for t in rule.get("targetReplicatedJobs", [])
                   if t not in names]
        errors += [f"invalid job failure reason {r!r}" for r in rule.get("onJobFailureReasons", [])
                   if r not in JOB_FAILURE_REASONS]
    if errors:
        raise Rejected("; ".join(errors))
    return js


def subdomain(js):
    """J:pkg/controllers/jobset_controller.go GetSubdomain."""
    return (js["spec"].get("network") or {}).get("subdomain") or js["metadata"]["name"]


def _stamp(meta, js, rjob, job_index, restarts):
    """J:…/jobset_controller.go labelAndAnnotateObject: the same keys as labels and annotations."""
    name, ns = js["metadata"]["name"], js["metadata"].get("namespace", "default")
    rjobs = js["spec"]["replicatedJobs"]
    before = sum(r["replicas"] for r in rjobs[:rjobs.index(rjob)])
    group = [r for r in rjobs if r["groupName"] == rjob["groupName"]]
    group_before = sum(r["replicas"] for r in group[:group.index(rjob)])
    job_name = f"{name}-{rjob['name']}-{job_index}"  # J:pkg/util/placement/placement.go GenJobName
    values = {"jobset-name": name, "jobset-uid": js["metadata"].get("uid", ""), "replicatedjob-name": rjob["name"],
              "restart-attempt": str(restarts), "replicatedjob-replicas": str(rjob["replicas"]),
              "global-replicas": str(sum(r["replicas"] for r in rjobs)), "job-index": str(job_index),
              "job-key": hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest(),
              "job-global-index": str(before + job_index), "group-name": rjob["groupName"],
              "group-replicas": str(sum(r["replicas"] for r in group)),
              "job-group-index": str(group_before + job_index)}
    for key in ("labels", "annotations"):
        meta[key] = {**(meta.get(key) or {}), **{PREFIX + k: v for k, v in values.items()}}


def jobs(js, restarts=0):
    """J:…/jobset_controller.go constructJob: one Job per replica of each replicated job."""
    result = []
    for rjob in js["spec"]["replicatedJobs"]:
        for index in range(rjob["replicas"]):
            meta = copy.deepcopy(rjob["template"].get("metadata") or {})
            meta["name"] = f"{js['metadata']['name']}-{rjob['name']}-{index}"
            meta["namespace"] = js["metadata"].get("namespace", "default")
            spec = copy.deepcopy(rjob["template"]["spec"])
            _stamp(meta, js, rjob, index, restarts)
            _stamp(spec["template"].setdefault("metadata", {}), js, rjob, index, restarts)
            if js["spec"]["network"].get("enableDNSHostnames"):
                spec["template"]["spec"]["subdomain"] = subdomain(js)
            spec["suspend"] = bool(js["spec"].get("suspend"))
            result.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec,
                           "replicatedJob": rjob["name"]})
    return result


def pods(js, restarts=0):
    """Each Job's pods (K:batch/v1/types.go completionMode Indexed): name `<job>-<i>-<random>`,
    hostname `<job>-<i>`, the index in label and annotation batch.kubernetes.io/job-completion-index."""
    result = []
    for job in jobs(js, restarts):
        for index in range(job["spec"].get("completions") or job["spec"].get("parallelism") or 1):
            template = copy.deepcopy(job["spec"]["template"])
            meta = template.get("metadata") or {}
            extra = {"batch.kubernetes.io/job-completion-index": str(index),
                     "batch.kubernetes.io/job-name": job["metadata"]["name"], "job-name": job["metadata"]["name"]}
            meta["labels"] = {**(meta.get("labels") or {}), **extra}
            meta["annotations"] = {**(meta.get("annotations") or {}),
                                   "batch.kubernetes.io/job-completion-index": str(index)}
            meta["name"] = f"{job['metadata']['name']}-{index}-abcde"
            template["spec"]["hostname"] = f"{job['metadata']['name']}-{index}"
            result.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"],
                           "replicatedJob": job["replicatedJob"], "job": job["metadata"]["name"], "index": index})
    return result


def fqdn(pod):
    """The name a pod resolves by in its namespace: hostname.subdomain (the headless Service)."""
    return f"{pod['spec']['hostname']}.{pod['spec']['subdomain']}"


def check_job(job):
    """The Job API's rules for podFailurePolicy and restartPolicy (K:batch/v1/types.go
    JobSpec.podFailurePolicy, PodFailurePolicyRule, PodFailurePolicyOnExitCodesRequirement)."""
    spec, errors = job["spec"], []
    pod = spec["template"]["spec"]
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        errors.append(f"restartPolicy {pod.get('restartPolicy')!r}: a Job's pods take Never or OnFailure")
    rules = (spec.get("podFailurePolicy") or {}).get("rules")
    if rules is not None:
        if pod.get("restartPolicy") != "Never":
            errors.append("podFailurePolicy cannot be used with restartPolicy OnFailure; set Never")
        if len(rules) > 20:
            errors.append("podFailurePolicy: at most 20 rules")
        names = {c["name"] for c in pod.get("containers", []) + pod.get("initContainers", [])}
        for i, rule in enumerate(rules):
            codes = rule.get("onExitCodes")
            if bool(codes) == bool(rule.get("onPodConditions")):
                errors.append(f"podFailurePolicy.rules[{i}]: one of onExitCodes and onPodConditions")
            if codes:
                values = codes.get("values", [])
                if not values or len(values) > 255 or values != sorted(set(values)):
                    errors.append(f"podFailurePolicy.rules[{i}]: 1 to 255 exit codes, ordered, no duplicates")
                if codes["operator"] == "In" and 0 in values:
                    errors.append(f"podFailurePolicy.rules[{i}]: 0 cannot be used with In")
                if codes.get("containerName") and codes["containerName"] not in names:
                    errors.append(f"podFailurePolicy.rules[{i}]: no container {codes['containerName']!r}")
    if errors:
        raise Rejected(f"Job {job['metadata']['name']}: " + "; ".join(errors))


def volume_files(pod_spec, volume_name):
    """The files a Secret or ConfigMap volume shows: {path: (key, mode)}. An item's mode,
    else the volume's defaultMode, else 0644 (K:core/v1/types.go SecretVolumeSource)."""
    volume = next(v for v in pod_spec.get("volumes", []) if v["name"] == volume_name)
    source = volume.get("secret") or volume.get("configMap")
    default = source.get("defaultMode", 0o644)
    return {item["path"]: (item["key"], item.get("mode", default)) for item in source.get("items", [])}


def mounts(pod_spec, container_name):
    """{mountPath: volume name} of a container or init container."""
    containers = pod_spec.get("containers", []) + pod_spec.get("initContainers", [])
    container = next(c for c in containers if c["name"] == container_name)
    return {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}


def pod_failure(job, container, exit_code, conditions=(), failed_before=0, namespace="default", pod="pod"):
    """K: the Job controller on one pod that ended: `Succeeded`, `RestartContainer` (the
    kubelet restarts it in place: restartPolicy OnFailure), `NewPod` (a replacement), or
    `Failed` with the Job condition's reason and message. The message of a FailJob rule is the
    one the Job controller writes (kubernetes pkg/controller/job/pod_failure_policy.go
    matchPodFailurePolicy; `conditions` are the pod's condition types whose status is True)."""
    spec = job["spec"]
    if exit_code == 0 and not conditions:
        return ("Succeeded", "", "")
    if spec["template"]["spec"].get("restartPolicy") == "OnFailure" and not conditions:
        return ("RestartContainer", "", "")
    count = True
    for i, rule in enumerate((spec.get("podFailurePolicy") or {}).get("rules", [])):
        codes = rule.get("onExitCodes")
        if codes:
            if codes.get("containerName") not in (None, container) or exit_code == 0:
                continue
            if (exit_code in codes["values"]) != (codes["operator"] == "In"):
                continue
        elif not any(p["type"] in conditions and p.get("status", "True") == "True"
                     for p in rule.get("onPodConditions", [])):
            continue
        if rule["action"] == "FailJob":
            if codes:
                return ("Failed", "PodFailurePolicy", f"Container {container} for pod {namespace}/{pod} failed "
                        f"with exit code {exit_code} matching FailJob rule at index {i}")
            matched = next(c for c in conditions if any(p["type"] == c for p in rule["onPodConditions"]))
            return ("Failed", "PodFailurePolicy",
                    f"Pod {namespace}/{pod} has condition {matched} matching FailJob rule at index {i}")
        count = rule["action"] == "Count"
        break
    failed = failed_before + (1 if count else 0)
    if failed > spec.get("backoffLimit", 6):
        return ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    return ("NewPod", "", "")


def jobset_failure(js, rjob_name, reason, message, restarts_counted=0):
    """J:pkg/controllers/failure_policy.go executeFailurePolicy, for one failed Job: rules in
    order, the first whose reasons, message patterns and targets match; none: RestartJobSet.
    Returns ("Restart", rule) or ("Failed", JobSet condition reason)."""
    policy = js["spec"].get("failurePolicy")
    if policy is None:
        return ("Failed", "FailedJobs")
    action, name = "RestartJobSet", ""
    for rule in policy.get("rules", []):
        if rule.get("onJobFailureReasons") and reason not in rule["onJobFailureReasons"]:
            continue
        if rule.get("onJobFailureMessagePatterns") and \
                not any(re.search(p, message) for p in rule["onJobFailureMessagePatterns"]):
            continue
        if rule.get("targetReplicatedJobs") and rjob_name not in rule["targetReplicatedJobs"]:
            continue
        action, name = rule["action"], rule["name"]
        break
    if action == "FailJobSet":
        return ("Failed", "FailJobSetFailurePolicyAction")
    if action == "RestartJobSet" and restarts_counted >= policy.get("maxRestarts", 0):
        return ("Failed", "ReachedMaxRestarts")
    return ("Restart", name or "DefaultFailurePolicy")


def succeeded(js, succeeded_jobs):
    """J:pkg/controllers/success_policy.go: whether the JobSet completes, given the number of
    succeeded Jobs of each replicated job: All of the targeted jobs' replicas, or Any one."""
    policy = js["spec"]["successPolicy"]
    targets = policy.get("targetReplicatedJobs") or [r["name"] for r in js["spec"]["replicatedJobs"]]
    done = sum(n for name, n in succeeded_jobs.items() if name in targets)
    if policy["operator"] == "Any":
        return done >= 1
    return done >= sum(r["replicas"] for r in js["spec"]["replicatedJobs"] if r["name"] in targets)


def can_create(js, rjob_name, status):
    """J:pkg/controllers/depends_on.go: a replicated job's Jobs are made only once each job it
    depends on has reached its status. `status` maps a replicated job to {ready, succeeded,
    failed} Job counts (a Job is ready once ready+succeeded pods >= min(parallelism, completions))."""
    rjob = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == rjob_name)
    for dep in rjob.get("dependsOn", []):
        other = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == dep["name"])
        counts = status.get(dep["name"], {})
        if dep["status"] == "Complete" and counts.get("succeeded", 0) != other["replicas"]:
            return False
        if dep["status"] == "Ready" and sum(counts.get(k, 0) for k in ("ready", "succeeded", "failed")) \
                != other["replicas"]:
            return False
    return True
