# A TrainJob on trainer-mpi's runtime from Kubeflow's Python SDK (pip package kubeflow), the
# two forms: a CustomTrainer runs your function on every rank through the SDK's `mpirun`
# line, which the image hands to mpi-launcher (its preflight, RANK and WORLD_SIZE from the
# rank agents, the fail-fast teardown); a CustomTrainerContainer runs an image of yours (any
# with /bin/sh and an MPI) with the runtime's own command.
#   python3 examples/sdk_train.py             # the CustomTrainer
#   python3 examples/sdk_train.py container   # the CustomTrainerContainer
# tests/examples/sdk_snippet_test.py runs this file against the SDK's names and signatures,
# and renders what it submits on this package's runtime.
import sys

from kubeflow.trainer import CustomTrainer, CustomTrainerContainer, KubernetesBackendConfig, TrainerClient


def hello():
    import os
    import socket

    print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} on {socket.gethostname()}")


client = TrainerClient(KubernetesBackendConfig(namespace="team-a"))
runtime = client.get_runtime("trainer-mpi-openmpi-v0-1")
if sys.argv[1:] == ["container"]:
    trainer = CustomTrainerContainer(image="registry.example.com/team/trainer-mpi:openmpi", num_nodes=2)
else:
    trainer = CustomTrainer(func=hello, num_nodes=2)
job = client.train(runtime=runtime, trainer=trainer)
client.wait_for_job_status(job, status={"Complete", "Failed"}, timeout=900)
for line in client.get_job_logs(job, step="node-0"):  # the launcher's log, the verdict last
    print(line)
