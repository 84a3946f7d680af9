#!/usr/bin/env python3
"""convert_test.py: `mpi-launcher convert` on mpi-operator's own example MPIJobs
(tests/launcher/mpijobs, each with its source and commit), and what comes out rendered as
Trainer v2.3.0 and JobSet v0.12.0 would (render.py: every input validated against the v2.3.0
CRDs, CEL rules included; then trainer_model, runtime_patches, jobset_model).

Design: the built program, as a user runs it: the file on the command line, and again on
stdin; its stdout must be one TrainJob, and its stderr must name each field of the MPIJob
that the TrainJob does not carry (the MPIJob's own spelling of its path) and nothing else.
Its stderr must also name the image the TrainJob keeps, the MPIJob's own (the Launcher's and
the Worker's: every example has one image), with what the image must have (/bin/sh and the
MPIJob's MPI) and where trainer-mpi's programs come from (the runtime's bundle).
The rendered pods then must be the MPIJob's hosts: numNodes pods (the launcher a host too,
docs/migrating.md), the launcher's `node` container with the MPIJob's image and its mpirun
line word for word behind `mpi-launcher run --mpirun-line --` (never the image's mpirun alone), the Worker's resources on the `node` container of every pod that runs
ranks, and slotsPerWorker slots a host in the hostfile. A hydra MPIJob gets TMPI_MPI, the
package having no hydra runtime (which stderr says). Then --output writes the same document.
usage: convert_test.py BUILD_DIR
"""
import os
import subprocess
import sys
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render  # noqa: E402
from model_fixtures import ROOT, package  # noqa: E402

BUILD = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "dev")
LAUNCHER = os.path.join(BUILD, "bin", "mpi-launcher")
MPIJOBS = os.path.join(ROOT, "tests", "launcher", "mpijobs")
CONTAINER = "spec.mpiReplicaSpecs.{}.template.spec.containers[0].{}"
# What each example must have named on stderr: every field of it that has no home.
COMMON = {"spec.runPolicy.cleanPodPolicy"}
# The MPI each example's image must have, by its mpiImplementation (stderr says it).
MPI_NEEDED = {None: "Open MPI (4 or 5)", "OpenMPI": "Open MPI (4 or 5)", "MPICH": "MPICH", "Intel": "Intel MPI"}
KEEPS = "mpi-launcher convert: keeps image "
PI = COMMON | {"spec.sshAuthMountPath", CONTAINER.format("Launcher", "securityContext"),
               CONTAINER.format("Worker", "securityContext"), CONTAINER.format("Worker", "args")}
# The pi program in the image's /home/mpiuser, which the runtime's home emptyDir hides.
PI_PROGRAM = " (/home/mpiuser/pi)"
HYDRA = PI | {"spec.mpiImplementation", CONTAINER.format("Launcher", "command"),
              CONTAINER.format("Launcher", "args[3]") + PI_PROGRAM,
              CONTAINER.format("Launcher", "imagePullPolicy"), CONTAINER.format("Worker", "imagePullPolicy"),
              CONTAINER.format("Worker", "readinessProbe")}
UNMAPPED = {
    "pi.yaml": PI | {"spec.runPolicy.ttlSecondsAfterFinished", CONTAINER.format("Worker", "command"),
                     CONTAINER.format("Launcher", "args[2]") + PI_PROGRAM},
    "pi-mpich.yaml": HYDRA,
    "pi-intel.yaml": HYDRA,
    "tensorflow-mnist.yaml": COMMON | {CONTAINER.format("Launcher", "resources")},
    "tensorflow-benchmarks.yaml": COMMON,
}


def convert(*args, stdin=None):
    run = subprocess.run([LAUNCHER, "convert", *args], input=stdin, capture_output=True, text=True, timeout=30)
    return run.returncode, run.stdout, run.stderr


def named_fields(stderr):
    prefix = "mpi-launcher convert: "
    return {line[len(prefix):].split(": ", 1)[0] for line in stderr.splitlines()
            if line.startswith(prefix) and "have no home" not in line and not line.startswith(KEEPS)}


class Examples(unittest.TestCase):
    def test_every_example_converts_and_renders(self):
        files = sorted(f for f in os.listdir(MPIJOBS) if f.endswith(".yaml"))
        self.assertEqual(files, sorted(UNMAPPED), "an MPIJob without its expected fields, or the other way")
        runtime = next(d for d in package("trainer-v2.3") if d["metadata"]["name"] == "trainer-mpi-openmpi-v0-1")
        for name in files:
            with self.subTest(mpijob=name):
                path = os.path.join(MPIJOBS, name)
                rc, out, err = convert(path)
                self.assertEqual(rc, 0, err)
                with open(path) as stream:
                    self.assertEqual(convert("-", stdin=stream.read()), (rc, out, err.replace(path, "-")),
                                     "stdin differs from the file")
                self.assertEqual(named_fields(err), UNMAPPED[name], err)
                self.assertIn(f"{len(UNMAPPED[name])} field(s) of {path} have no home", err)
                with open(path) as stream:
                    mpijob = yaml.safe_load(stream)
                trainjob = yaml.safe_load(out)
                self.check_image(mpijob, trainjob, err)
                self.check_rendered(mpijob, trainjob, render.render(trainjob, runtime))

    def check_image(self, mpijob, trainjob, stderr):
        """The TrainJob keeps the MPIJob's own image, and stderr names it with its needs."""
        specs = mpijob["spec"]["mpiReplicaSpecs"]
        images = {specs[role]["template"]["spec"]["containers"][0]["image"] for role in ("Launcher", "Worker")}
        self.assertEqual(len(images), 1, "each example runs one image; DifferentImages* is the unit test's")
        image = images.pop()
        self.assertEqual(trainjob["spec"]["trainer"]["image"], image)
        keeps = [line for line in stderr.splitlines() if line.startswith(KEEPS)]
        self.assertEqual(len(keeps), 1, stderr)
        mpi = MPI_NEEDED[mpijob["spec"].get("mpiImplementation")]
        for part in (f"{KEEPS}{image} (the Launcher's and the Worker's image)", f"/bin/sh and {mpi},",
                     "the runtime's bundle (/opt/trainer-mpi/bin, first on PATH)"):
            self.assertIn(part, keeps[0])

    def check_rendered(self, mpijob, trainjob, rendered):
        spec = mpijob["spec"]
        workers = spec["mpiReplicaSpecs"]["Worker"]
        launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
        hosts = workers["replicas"] + (1 if spec.get("runLauncherAsWorker") else 0)
        self.assertEqual(len(rendered["pods"]), hosts, "one pod a host, the launcher one of them")
        slots = spec.get("slotsPerWorker", 1)
        self.assertEqual([line.split()[1] for line in rendered["hostfile"].splitlines()], [f"slots={slots}"] * hosts)
        resources = workers["template"]["spec"]["containers"][0].get("resources")
        for pod in rendered["pods"]:
            node = next(c for c in pod["spec"]["containers"] if c["name"] == "node")
            if pod["replicatedJob"] == "launcher":
                self.assertEqual(node["image"], launcher["image"])
                line = launcher.get("command", []) + launcher.get("args", [])
                self.assertEqual(line[0], "mpirun")
                self.assertEqual(node["command"], ["mpi-launcher", "run", "--mpirun-line", "--"] + line[1:])
            for kind, values in (resources or {}).items():
                for key, value in values.items():
                    self.assertEqual(str(node["resources"][kind][key]), str(value), pod["metadata"]["name"])
            env = {e["name"]: e.get("value") for e in node.get("env", [])}
            hydra = {"MPICH": "mpich", "Intel": "intel"}.get(spec.get("mpiImplementation"))
            self.assertEqual(env.get("TMPI_MPI"), hydra, pod["metadata"]["name"])
        self.assertEqual(trainjob["metadata"]["name"], mpijob["metadata"]["name"])

    def test_output_file_holds_the_same_document(self):
        path = os.path.join(MPIJOBS, "pi.yaml")
        with tempfile.TemporaryDirectory() as folder:
            target = os.path.join(folder, "trainjob.yaml")
            rc, out, err = convert("--output", target, path)
            self.assertEqual((rc, out), (0, ""), err)
            with open(target) as stream:
                self.assertEqual(stream.read(), convert(path)[1])

    def test_bad_input_is_named(self):
        with open(os.path.join(MPIJOBS, "pi.yaml")) as stream:
            pi = stream.read()
        rc, out, err = convert("-", stdin=pi.replace("slotsPerWorker: 1", "slotsPerWorker: two"))
        self.assertEqual((rc, out), (65, ""))
        self.assertIn("-: spec.slotsPerWorker: a whole number expected", err)
        rc, _, err = convert("-", stdin="[" * 5000)
        self.assertEqual(rc, 65, err)
        rc, _, err = convert()
        self.assertEqual(rc, 64, err)
        self.assertIn("convert takes one MPIJob", err)


if __name__ == "__main__":
    unittest.main()
