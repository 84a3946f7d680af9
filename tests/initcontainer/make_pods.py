#!/usr/bin/env python3
"""make_pods.py: writes a realistic `kubectl get pods -o json` list of a Trainer JobSet
(one launcher, N nodes, GPU limits, the labels JobSet sets, a full pod spec and status, a
few KB each), for mpi-init's tests and its benchmark.

usage: make_pods.py NODES [--jobset NAME] [--gpus N] [--other-jobset NAME] > pods.json
"""
import argparse
import json


def pod(jobset, rjob, global_index, index, gpus):
    host = f"{jobset}-{rjob}-0-{index}"
    labels = {
        "jobset.sigs.k8s.io/jobset-name": jobset,
        "jobset.sigs.k8s.io/replicatedjob-name": rjob,
        "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
        "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/job-global-index": str(global_index),
        "jobset.sigs.k8s.io/job-key": "5f2c0a9e8b7d6c5e4f3a2b1c0d9e8f7a6b5c4d3e",
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "batch.kubernetes.io/job-completion-index": str(index),
        "batch.kubernetes.io/controller-uid": "0f9d2e8c-1b7a-4c6d-9e5f-3a2b1c0d9e8f",
        "batch.kubernetes.io/job-name": f"{jobset}-{rjob}-0",
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
    }
    limits = {"cpu": "16", "memory": "128Gi"}
    if gpus and rjob != "launcher":
        limits["nvidia.com/gpu"] = str(gpus)
    env = [{"name": n, "value": v} for n, v in [
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"), ("OMPI_MCA_orte_set_default_slots", str(gpus or 1)),
        ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"), ("NCCL_DEBUG", "WARN"),
        ("JOB_COMPLETION_INDEX", str(index)), ("PET_NNODES", "4")]]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{host}-{index:05x}", "namespace": "team-a", "uid": f"3c1e{index:08x}-aaaa-bbbb-cccc-0123456789ab",
            "resourceVersion": str(100000 + index), "creationTimestamp": "2026-11-29T10:00:00Z",
            "labels": labels,
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index),
                            "jobset.sigs.k8s.io/jobset-name": jobset,
                            "kubectl.kubernetes.io/default-container": rjob},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"{jobset}-{rjob}-0",
                                 "uid": "0f9d2e8c-1b7a-4c6d-9e5f-3a2b1c0d9e8f", "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "hostname": host, "subdomain": jobset, "restartPolicy": "Never",
            "serviceAccountName": "default", "nodeName": f"gpu-node-{index % 997:03d}",
            "containers": [{
                "name": rjob, "image": "ghcr.io/example/trainer-mpi:0.1",
                "command": ["mpi-launcher", "run", "--", "python", "train.py"] if rjob == "launcher" else ["/usr/sbin/sshd", "-De", "-p", "2222"],
                "env": env,
                "ports": [{"containerPort": 2222, "protocol": "TCP"}],
                "resources": {"limits": limits, "requests": limits},
                "volumeMounts": [{"name": "mpi-ssh-auth", "mountPath": "/etc/mpi-ssh", "readOnly": True},
                                 {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}],
                "readinessProbe": {"tcpSocket": {"port": 2222}, "periodSeconds": 5},
            }],
            "volumes": [{"name": "mpi-ssh-auth", "secret": {"secretName": f"{jobset}-mpi-ssh", "defaultMode": 0o400}},
                        {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": {
            "phase": "Running", "podIP": f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}",
            "hostIP": f"192.168.{index % 250}.10", "startTime": "2026-11-29T10:00:05Z", "qosClass": "Guaranteed",
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-11-29T10:00:09Z"}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": rjob, "ready": True, "restartCount": 0, "image": "ghcr.io/example/trainer-mpi:0.1",
                                   "imageID": "ghcr.io/example/trainer-mpi@sha256:" + "ab" * 32,
                                   "containerID": "containerd://" + "cd" * 32, "started": True,
                                   "state": {"running": {"startedAt": "2026-11-29T10:00:08Z"}}}],
        },
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("nodes", type=int)
    parser.add_argument("--jobset", default="train")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--other-jobset", default="")
    args = parser.parse_args()
    items = [pod(args.jobset, "launcher", 0, 0, args.gpus)]
    items += [pod(args.jobset, "node", 1, i, args.gpus) for i in range(args.nodes)]
    if args.other_jobset:
        items.append(pod(args.other_jobset, "node", 1, 0, args.gpus))
    print(json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}))


if __name__ == "__main__":
    main()
