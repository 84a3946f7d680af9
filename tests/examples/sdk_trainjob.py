#!/usr/bin/env python3
"""sdk_trainjob.py: the TrainJob that Kubeflow's Python SDK makes from a CustomTrainer for an
MPI runtime, to run through the image's mpirun hand-off (launcher/mpirun_handoff.sh) in the
cluster in a box (tests/cluster/examples_test.sh sdk).

Design: the SDK's own rules, as docs/trainer-rules.md §6 has them from kubeflow/sdk, and
nothing else; the TrainJob is then rendered by render.py like every example.
  - The command (kubeflow/sdk kubeflow/trainer/constants/constants.py, MPI_COMMAND; filled by
    backends/kubernetes/utils.py get_command_using_train_func): six words, `mpirun --hostfile
    /etc/mpi/hostfile bash -c SCRIPT`, the SCRIPT writing the function's source, dedented and
    followed by its call, to `{DEFAULT_MPI_USER_HOME}/{file}` through an unquoted heredoc,
    then `python` on it. No args.
  - The trainer (get_trainer_cr_from_custom_trainer): numNodes and the command; no
    numProcPerNode for a CustomTrainer, so the runtime's mlPolicy.mpi.numProcPerNode stands.
usage: sdk_trainjob.py NAME NUM_NODES MPI_USER_HOME > trainjob.yaml
The function is hello() below; its file name is this file's.
"""
import inspect
import os
import sys
import textwrap

import yaml

# kubeflow/sdk constants.py MPI_COMMAND, the list as the SDK writes it, {…} filled by format().
MPI_COMMAND = [
    "mpirun",
    "--hostfile",
    "/etc/mpi/hostfile",
    "bash",
    "-c",
    "\nread -r -d '' SCRIPT << EOM\n\n{func_code}\nEOM\nprintf \"%s\" \"$SCRIPT\" > \"{func_file}\"\npython \"{func_file}\"",
]


def hello():
    # What a user's function would read: the torch variables that only mpi-rank sets. Under a
    # plain mpirun they are missing, and this fails.
    import os
    import socket

    rank, size = os.environ["RANK"], os.environ["WORLD_SIZE"]
    print(f"sdk hello from rank {rank} of {size} on {socket.gethostname()}", flush=True)


def command(func, mpi_user_home):
    code = textwrap.dedent(inspect.getsource(func)) + "\n" + f"{func.__name__}()\n"
    func_file = os.path.join(mpi_user_home, os.path.basename(inspect.getsourcefile(func)))
    return [word.format(func_code=code, func_file=func_file) for word in MPI_COMMAND]


def trainjob(name, num_nodes, mpi_user_home):
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "runtimeRef": {"name": "trainer-mpi-openmpi-v0-1"},
            "trainer": {"numNodes": num_nodes, "command": command(hello, mpi_user_home)},
        },
    }


if __name__ == "__main__":
    if len(sys.argv) != 4 or not sys.argv[2].isdigit():
        sys.exit("usage: sdk_trainjob.py NAME NUM_NODES MPI_USER_HOME > trainjob.yaml")
    yaml.safe_dump(trainjob(sys.argv[1], int(sys.argv[2]), sys.argv[3]), sys.stdout, sort_keys=False)
