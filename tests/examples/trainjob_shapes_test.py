#!/usr/bin/env python3
"""trainjob_shapes_test.py: TrainJobs shaped as users and their tools write them, rendered on
the package's runtimes (`kubectl kustomize`), and the launcher's command run as rendered.

Design: Trainer v2.3 sets a TrainJob's image, command and args on the trainer step's `node`
container each only where the TrainJob gives it (T:pkg/runtime/framework/plugins/jobset/
builder.go, Builder.Trainer: `if image != nil`, `if command != nil`, `if args != nil`), and
a container runs command + args. So a TrainJob with only `args` would append them to the
runtime's demo, and one with only `image` would run the demo in an image that may not
hold mpi-launcher (SDK's CustomTrainerContainer, upstream #2825). The runtimes' demo is a
guard instead: with args and no command, or with an image that lacks mpi-launcher, it
refuses with exit 64 and says what to set (`trainer.command: [mpi-launcher, run, --, ...]`);
given neither, it execs the demo under mpi-launcher; a TrainJob's command replaces it whole.
Each case renders the TrainJob, then runs the launcher's rendered command + args with
/bin/sh and a PATH that holds a stand-in mpi-launcher (it records its arguments) or not.
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
        argv = container.get("command", []) + container.get("args", [])
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

    def test_an_image_without_mpi_launcher_is_refused_with_the_fix(self):
        for where, overlay, runtime in self.cases():
            container = launcher_container(overlay, runtime, image="registry.example.com/me/trainer:1")
            self.assertEqual(container["image"], "registry.example.com/me/trainer:1", where)
            code, err, _ = run(container, with_launcher=False)
            self.assertEqual(code, 64, where)
            self.assertIn("trainer.image has no mpi-launcher", err, where)
            self.assertIn("trainer.command:", err, where)

    def test_neither_runs_the_demo_under_mpi_launcher(self):
        for where, overlay, runtime in self.cases():
            for trainer in ({}, {"image": "registry.example.com/me/from-trainer-mpi:1"}):
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
