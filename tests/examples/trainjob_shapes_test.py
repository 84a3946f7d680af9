#!/usr/bin/env python3
"""trainjob_shapes_test.py: TrainJobs shaped as users and their tools write them, rendered on
the package's runtimes (`kubectl kustomize`), and the launcher's command run as rendered.

Design: Trainer v2.3 sets a TrainJob's image, command and args on the trainer step's `node`
container each only where the TrainJob gives it (T:pkg/runtime/framework/plugins/jobset/
builder.go, Builder.Trainer: `if image != nil`, `if command != nil`, `if args != nil`), and
a container runs command + args. So a TrainJob with only `args` would append them to the
runtime's demo, and one with only `image` runs the demo in that image (SDK's
CustomTrainerContainer, upstream #2825), with mpi-launcher from the bundle the runtime
mounts at /opt/trainer-mpi, whatever the image holds. The runtimes' demo is a guard: with
args and no command, or with no bundle mounted, it refuses with exit 64 and says what to set
or what is missing (`trainer.command: [mpi-launcher, run, --, ...]`); given neither, it execs
the demo under the bundle's mpi-launcher; a TrainJob's command replaces it whole.
Each case renders the TrainJob, then runs the launcher's rendered command + args with
/bin/sh, the bundle's folder /opt/trainer-mpi/bin standing for a temporary one that holds a
stand-in mpi-launcher (it records its arguments) or not, and a PATH with no other.
usage: trainjob_shapes_test.py
"""
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render  # noqa: E402
from model_fixtures import SCHEMAS, package, runtime_overlays  # noqa: E402

RUNTIMES = ("trainer-mpi-openmpi-v0-1", "trainer-mpi-pytorch-v0-1")


def trainjob(runtime, **trainer):
    return SCHEMAS.apply_defaults({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "shape", "namespace": "team-a"},
        "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": 2, **trainer}}})


def launcher_container(overlay, runtime, **trainer):
    byname = {d["metadata"]["name"]: d for d in package(overlay) if d["kind"] == "ClusterTrainingRuntime"}
    out = render.render(trainjob(runtime, **trainer), byname[runtime])
    [pod] = [p for p in out["pods"] if p["replicatedJob"] == "launcher"]
    return next(c for c in pod["spec"]["containers"] if c["name"] == "node")


def run(container, with_launcher):
    """(exit code, stderr, the stand-in mpi-launcher's argv or None)."""
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir, record = os.path.join(tmp, "bin"), os.path.join(tmp, "argv")
        os.mkdir(bin_dir)
        if with_launcher:
            path = os.path.join(bin_dir, "mpi-launcher")
            with open(path, "w") as stream:
                stream.write(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\n')
            os.chmod(path, stat.S_IRWXU)
        argv = [word.replace("/opt/trainer-mpi/bin/", bin_dir + "/")  # the bundle's folder, here
                for word in container.get("command", []) + container.get("args", [])]
        done = subprocess.run(argv, env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True, text=True,
                              timeout=30, check=False)
        recorded = None
        if os.path.exists(record):
            with open(record) as stream:
                recorded = stream.read().splitlines()
        return done.returncode, done.stderr, recorded


class Shapes(unittest.TestCase):
    def cases(self):
        for overlay in runtime_overlays():
            for runtime in RUNTIMES:
                yield f"{runtime} on {overlay}", overlay, runtime

    def test_args_alone_are_refused_with_the_fix(self):
        for where, overlay, runtime in self.cases():
            container = launcher_container(overlay, runtime, args=["train.py", "--epochs", "3"])
            self.assertEqual(container["args"], ["train.py", "--epochs", "3"], where)
            code, err, recorded = run(container, with_launcher=True)
            self.assertEqual((code, recorded), (64, None), where)
            self.assertIn("trainer.command: [mpi-launcher, run, --,", err, where)

    def test_without_the_bundle_the_demo_is_refused_naming_it(self):
        for where, overlay, runtime in self.cases():
            container = launcher_container(overlay, runtime, image="registry.example.com/me/trainer:1")
            self.assertEqual(container["image"], "registry.example.com/me/trainer:1", where)
            code, err, _ = run(container, with_launcher=False)
            self.assertEqual(code, 64, where)
            self.assertIn("bin/mpi-launcher: the runtime's bundle (init container bundle", err, where)

    def test_neither_runs_the_demo_under_mpi_launcher(self):
        for where, overlay, runtime in self.cases():
            for trainer in ({}, {"image": "registry.example.com/me/any-image:1"}):
                code, err, recorded = run(launcher_container(overlay, runtime, **trainer), with_launcher=True)
                self.assertEqual(code, 0, f"{where}: {err}")
                self.assertEqual(recorded[0], "run", where)
                self.assertIn("--", recorded, where)

    def test_a_command_replaces_the_guard_whole(self):
        for where, overlay, runtime in self.cases():
            command = ["mpi-launcher", "run", "--", "python", "train.py"]
            container = launcher_container(overlay, runtime, command=command, args=["--epochs", "3"])
            self.assertEqual(container["command"] + container["args"], command + ["--epochs", "3"], where)
            code, _, recorded = run(container, with_launcher=True)
            self.assertEqual((code, recorded), (0, command[1:] + ["--epochs", "3"]), where)


if __name__ == "__main__":
    unittest.main()
