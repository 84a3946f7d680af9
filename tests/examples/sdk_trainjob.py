#!/usr/bin/env python3
"""sdk_trainjob.py: the TrainJobs that Kubeflow's Python SDK makes for an MPI runtime, from a
CustomTrainer (to run through the image's mpirun hand-off, launcher/mpirun_handoff.sh) and
from a CustomTrainerContainer, for the cluster in a box (tests/cluster/examples_test.sh sdk
and sdk-container).

Design: the SDK's own rules, as docs/trainer-rules.md §6 has them from kubeflow/sdk, and
nothing else; the TrainJob is then rendered by render.py like every example.
  - The command (kubeflow/sdk kubeflow/trainer/constants/constants.py, MPI_COMMAND; filled by
    backends/kubernetes/utils.py get_command_using_train_func): six words, `mpirun --hostfile
    /etc/mpi/hostfile bash -c SCRIPT`, the SCRIPT writing the function's source, dedented and
    followed by its call (`name(**func_args)` where the trainer has func_args), to
    `{DEFAULT_MPI_USER_HOME}/{file}` through an unquoted heredoc, then `python` on it. The
    SCRIPT is constants.py's EXEC_FUNC_SCRIPT with `python` as its entrypoint
    (DEFAULT_COMMAND), and MPI_COMMAND is `mpirun --hostfile /etc/mpi/hostfile` before it
    (kubeflow/sdk @ 0863f3b3, constants.py; the file is in DEFAULT_MPI_USER_HOME,
    /home/mpiuser unless that variable says otherwise). No args.
  - packages_to_install (get_script_for_python_packages, utils.py @ 0c2dacae): a script put
    before the SCRIPT, so every rank runs it: where no `pip` is on PATH, ensurepip (user, then
    system) or apt-get; then `python -m pip install --user` with the index options, else the
    same system-wide (both with PIP_BREAK_SYSTEM_PACKAGES=1 and pip's output to
    {DEFAULT_MPI_USER_HOME}/pip_install.log); else it prints an error naming the packages, the
    log, and exits 1. PACKAGES_SCRIPT below is that script's behaviour, written here.
  - The trainer (get_trainer_cr_from_custom_trainer, utils.py @ 0c2dacae): numNodes, and for
    a CustomTrainer the command; no numProcPerNode for a CustomTrainer, so the runtime's
    mlPolicy.mpi.numProcPerNode stands. A CustomTrainerContainer sets no command at all, only
    numNodes and its image (`if trainer.image: trainer_cr.image = ...`), so its image runs
    the runtime's own command (the runtimes' demo, under mpi-launcher).
usage: sdk_trainjob.py NAME NUM_NODES MPI_USER_HOME [--image IMAGE | --packages-from DIR]
  --image: the CustomTrainerContainer's TrainJob, with that image; else the CustomTrainer's;
  --packages-from: with packages_to_install ["tmpi-probe"] from a file index that this writes
    in DIR (a wheel made here: the box has no PyPI), and func_args naming it to the function.
The function is hello() below; its file name is this file's.
"""
import base64
import hashlib
import inspect
import os
import sys
import textwrap
import zipfile

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

# What get_script_for_python_packages does, in its order ({packages}, {options} and {log} as
# it quotes them); its two messages on success name the way that worked.
PACKAGES_SCRIPT = """
if ! [ -x "$(command -v pip)" ]; then
    python -m ensurepip || python -m ensurepip --user || apt-get install python-pip
fi
PACKAGES=({packages})
PIP_OPTS=({options})
LOG_FILE="{log}"
rm -f "$LOG_FILE"
if PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 python -m pip install --quiet \\
    --no-warn-script-location "${{PIP_OPTS[@]}}" --user "${{PACKAGES[@]}}" >"$LOG_FILE" 2>&1; then
    echo "Successfully installed Python packages (user): ${{PACKAGES[*]}}"
elif PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 python -m pip install --quiet \\
    --no-warn-script-location "${{PIP_OPTS[@]}}" "${{PACKAGES[@]}}" >>"$LOG_FILE" 2>&1; then
    echo "Successfully installed Python packages (system-wide): ${{PACKAGES[*]}}"
else
    echo "ERROR: Failed to install Python packages: ${{PACKAGES[*]}}" >&2
    cat "$LOG_FILE" >&2
    exit 1
fi
"""
PROBE, PROBE_VERSION = "tmpi-probe", "1.0"


def hello(package=None):
    # What a user's function would read: the torch variables that only mpi-rank sets. Under a
    # plain mpirun they are missing, and this fails.
    import importlib
    import os
    import socket
    import sys

    rank, size = os.environ["RANK"], os.environ["WORLD_SIZE"]
    # Which python ran it, its links followed, and where the installed package was found.
    line = f"sdk hello from rank {rank} of {size} on {socket.gethostname()} with {os.path.realpath(sys.executable)}"
    if package:
        module = importlib.import_module(package)
        line += f", {package} {module.VERSION} from {module.__file__}"
    print(line, flush=True)


def packages_script(packages, index_url, log):
    quote = lambda word: "'" + word.replace("'", "'\\''") + "'"  # noqa: E731  (shlex.quote's form)
    return PACKAGES_SCRIPT.format(packages=" ".join(map(quote, packages)),
                                  options=f"--index-url {quote(index_url)}", log=log)


def command(func, mpi_user_home, func_args=None, install=""):
    call = f"{func.__name__}()" if func_args is None else f"{func.__name__}(**{func_args})"
    code = textwrap.dedent(inspect.getsource(func)) + "\n" + call + "\n"
    func_file = os.path.join(mpi_user_home, os.path.basename(inspect.getsourcefile(func)))
    return [install + word.format(func_code=code, func_file=func_file) if "{func_file}" in word else word
            for word in MPI_COMMAND]


def write_probe_index(folder):
    """A file index (pip's simple layout) in FOLDER holding one wheel, tmpi-probe; its URL."""
    project = os.path.join(folder, "simple", PROBE)
    os.makedirs(project, exist_ok=True)
    wheel = f"{PROBE.replace('-', '_')}-{PROBE_VERSION}-py3-none-any.whl"
    dist_info = f"{PROBE.replace('-', '_')}-{PROBE_VERSION}.dist-info"
    files = {"tmpi_probe/__init__.py": f'VERSION = "{PROBE_VERSION}"\n',
             f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {PROBE}\nVersion: {PROBE_VERSION}\n",
             f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: sdk_trainjob.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for name, text in files.items()]
    files[f"{dist_info}/RECORD"] = "\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(os.path.join(project, wheel), "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    with open(os.path.join(project, "index.html"), "w") as stream:
        stream.write(f'<!DOCTYPE html><html><body><a href="{wheel}">{wheel}</a></body></html>\n')
    return "file://" + os.path.join(os.path.abspath(folder), "simple")


def trainjob(name, num_nodes, mpi_user_home, image=None, index_folder=None):
    trainer = {"numNodes": num_nodes}
    if image is not None:
        trainer["image"] = image
    elif index_folder is not None:
        install = packages_script([PROBE], write_probe_index(index_folder), os.path.join(mpi_user_home, "pip_install.log"))
        trainer["command"] = command(hello, mpi_user_home, {"package": "tmpi_probe"}, install)
    else:
        trainer["command"] = command(hello, mpi_user_home)
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "runtimeRef": {"name": "trainer-mpi-openmpi-v0-1"},
            "trainer": trainer,
        },
    }


if __name__ == "__main__":
    args, options = sys.argv[1:4], dict(zip(sys.argv[4::2], sys.argv[5::2]))
    if (len(args) != 3 or not args[1].isdigit() or len(sys.argv) not in (4, 6)
            or not set(options) <= {"--image", "--packages-from"}):
        sys.exit("usage: sdk_trainjob.py NAME NUM_NODES MPI_USER_HOME [--image IMAGE | --packages-from DIR] > trainjob.yaml")
    yaml.safe_dump(trainjob(args[0], int(args[1]), args[2], options.get("--image"), options.get("--packages-from")),
                   sys.stdout, sort_keys=False)
