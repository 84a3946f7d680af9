#!/usr/bin/env python3
"""bundle_test.py: any image as the `node` containers, trainer-mpi's programs from the bundle
(docs/design.md, "The image contract"), on every pod Trainer v2.3.0 and JobSet v0.12.0 make of
every example TrainJob and of the SDK's (sdk_trainjob.py), on every overlay of manifests/.

Design: `violations(pod, image)` says what a rendered pod lacks of the contract, as
pod_security_test.py does for Pod Security: the init container `bundle` first, running
`/opt/trainer-mpi/bin/mpi-bundle copy /mnt/trainer-mpi` in trainer-mpi's image (mpi-init's)
into the emptyDir trainer-mpi-bundle; every `node` container mounting that volume read-only
at /opt/trainer-mpi, with PATH /opt/trainer-mpi/bin first and then the usual MPI folders and
the system's, and running our programs by that path (or the user's command); the launcher's
`node` in the TrainJob's image when it names one. Each rule has a pod broken in that one
way that it must catch. manifests/image-volume: the same with the volume an image volume
(k8s.io/api core/v1 ImageVolumeSource: `reference`, `pullPolicy`; VolumeMount `subPath`;
kubernetes/api v0.33.0, 82c0029e) and no init container. A TrainJob's trainer.env PATH
replaces the runtime's on every `node` (Trainer's builder.go upserts env by name).
usage: bundle_test.py
"""
import copy
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import render  # noqa: E402
import sdk_trainjob  # noqa: E402
from model_fixtures import SCHEMAS, examples, package, runtime_overlays  # noqa: E402

BUNDLE, MOUNT, COPY_TO = "trainer-mpi-bundle", "/opt/trainer-mpi", "/mnt/trainer-mpi"
COPY = [MOUNT + "/bin/mpi-bundle", "copy", COPY_TO]
# PATH: the bundle, then NVIDIA NGC PyTorch's MPI and CUDA folders, conda, Intel MPI, the system's.
FOLDERS = ["/usr/local/mpi/bin", "/opt/hpcx/ompi/bin", "/usr/local/nvidia/bin", "/usr/local/cuda/bin",
           "/usr/local/ucx/bin", "/opt/conda/bin", "/opt/intel/oneapi/mpi/latest/bin"]
SYSTEM = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
IMAGE_VOLUME_FIELDS = {"reference", "pullPolicy"}  # k8s.io/api core/v1 types.go ImageVolumeSource
OURS = {"mpi-init", "mpi-launcher", "mpi-rank", "mpi-ssh", "mpi-ssh-client", "mpi-sshd", "mpi-rendezvous",
        "nccl-check", "mpi-bundle"}
FOREIGN = "nvcr.io/nvidia/pytorch:24.05-py3"  # an image that holds no program of ours


def named(items, name):
    return next((i for i in items or [] if i["name"] == name), None)


def env(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def violations(pod, image=None, image_volume=False):
    """What pod (a rendered pod's spec) lacks of the bundle's contract; image: the TrainJob's
    trainer.image, for a launcher pod."""
    out = []
    init, volume = pod.get("initContainers", []), named(pod.get("volumes"), BUNDLE)
    ours = named(init, "mpi-init")["image"]
    if image_volume:
        if named(init, "bundle"):
            out.append("an image volume and the bundle init container both")
        source = (volume or {}).get("image") or {}
        if set(volume or {}) != {"name", "image"} or set(source) != IMAGE_VOLUME_FIELDS:
            out.append(f"volume {BUNDLE} is {volume}, not an image volume with {sorted(IMAGE_VOLUME_FIELDS)}")
        elif (source["reference"], source["pullPolicy"]) != (ours, "IfNotPresent"):
            out.append(f"image volume {source} is not trainer-mpi's image {ours}, IfNotPresent")
    else:
        if not init or init[0]["name"] != "bundle":
            out.append(f"the first init container is {init[0]['name'] if init else None}, not bundle")
        else:
            b = init[0]
            if b["image"] != ours:
                out.append(f"bundle runs {b['image']}, not trainer-mpi's image (mpi-init's) {ours}")
            if b.get("command") != COPY or b.get("args"):
                out.append(f"bundle runs {b.get('command')} {b.get('args') or ''}, not {COPY}")
            mounts = [(m["name"], m["mountPath"], bool(m.get("readOnly"))) for m in b.get("volumeMounts", [])]
            if mounts != [(BUNDLE, COPY_TO, False)]:
                out.append(f"bundle mounts {mounts}, not {BUNDLE} writable at {COPY_TO}")
            if b.get("restartPolicy"):
                out.append("bundle is a sidecar: it must end before the others start")
        if set(volume or {}) != {"name", "emptyDir"}:
            out.append(f"volume {BUNDLE} is {volume}, not an emptyDir")
    for c in init:
        if c["image"] != ours:
            out.append(f"init container {c['name']} runs {c['image']}, not trainer-mpi's image")
    node = named(pod["containers"], "node")
    if image is not None and node["image"] != image:
        out.append(f"node runs {node['image']}, not the TrainJob's image {image}")
    mount = [m for m in node.get("volumeMounts", []) if m["name"] == BUNDLE]
    want = {"name": BUNDLE, "mountPath": MOUNT, "readOnly": True}
    if image_volume:
        want["subPath"] = MOUNT.lstrip("/")
    if mount != [want]:
        out.append(f"node mounts {mount}, not {want}")
    path = (env(node).get("PATH") or "").split(":")
    if path[:1] != [MOUNT + "/bin"]:
        out.append(f"node's PATH {':'.join(path)} does not start with {MOUNT}/bin (a user's mpirun would miss the hand-off)")
    elif [p for p in path if p in FOLDERS + SYSTEM] != FOLDERS + SYSTEM or path[-len(SYSTEM):] != SYSTEM:
        out.append(f"node's PATH {':'.join(path)} lacks the MPI folders {FOLDERS}, then {SYSTEM} last")
    return out


def command_violations(container, user_command, openssh=False):
    """A `node` container runs the user's command, or ours by the bundle's path (manifests/openssh:
    OpenSSH's sshd on the node pods, from the runtime's image, which Trainer leaves there)."""
    command = container.get("command") or []
    if openssh and command[:1] == ["/usr/sbin/sshd"]:
        return []
    if user_command is not None:
        return [] if command == user_command else [f"node runs {command}, not the TrainJob's {user_command}"]
    words = command[:1] if command[:1] != ["/bin/sh"] else command[2].split()
    bare = [w for w in words if w in OURS]
    if bare or not any(w.startswith(MOUNT + "/bin/") for w in words):
        return [f"node runs {command}: our programs not by {MOUNT}/bin/ ({bare})"]
    return []


def sdk_trainjobs():
    """The SDK's TrainJobs: a CustomTrainer's (mpirun ... bash -c), and a CustomTrainerContainer's
    (an image, no command), with the fields the cluster tests give them."""
    with tempfile.TemporaryDirectory() as tmp:
        yield "sdk CustomTrainer", sdk_trainjob.trainjob("sdk", 2, "/home/mpiuser")
        yield "sdk packages_to_install", sdk_trainjob.trainjob("sdk-pip", 2, "/home/mpiuser", index_folder=tmp)
    yield "sdk CustomTrainerContainer", sdk_trainjob.trainjob("sdk-container", 2, "/home/mpiuser", image=FOREIGN)


def trainjobs():
    for path, doc in examples():
        if doc.get("kind") == "TrainJob":
            yield path, doc
            foreign = copy.deepcopy(doc)  # the same TrainJob in an image of no trainer-mpi's
            foreign["spec"]["trainer"]["image"] = FOREIGN
            yield path + " in " + FOREIGN, foreign
    yield from sdk_trainjobs()


def runtimes(overlay):
    return {d["metadata"]["name"]: d for d in package(overlay) if d["kind"] == "ClusterTrainingRuntime"}


def rendered(overlay):
    byname = runtimes(overlay)
    for name, trainjob in trainjobs():
        out = render.render(trainjob, byname[trainjob["spec"]["runtimeRef"]["name"]])
        yield f"{name} on {overlay}", trainjob["spec"]["trainer"], out["pods"]


class Bundle(unittest.TestCase):
    def test_every_rendered_pod_gets_the_bundle(self):
        count = 0
        for overlay in runtime_overlays():
            for where, trainer, pods in rendered(overlay):
                for pod in pods:
                    launcher = pod["replicatedJob"] == "launcher"
                    image = trainer.get("image") if launcher else None
                    self.assertEqual(violations(pod["spec"], image, image_volume=overlay == "image-volume"), [],
                                     f"{where}: pod {pod['metadata']['name']}")
                    node = named(pod["spec"]["containers"], "node")
                    self.assertEqual(command_violations(node, trainer.get("command") if launcher else None,
                                                        openssh=overlay == "openssh"), [],
                                     f"{where}: pod {pod['metadata']['name']}")
                    count += 1
        self.assertGreater(count, 6 * 9 * 2, "every overlay, every example (and in a foreign image), the SDK's")

    def test_the_sdk_mpirun_line_reaches_the_hand_off(self):
        for where, trainer, pods in rendered("trainer-v2.3"):
            if trainer.get("command", [""])[0] == "mpirun":
                launcher = next(p for p in pods if p["replicatedJob"] == "launcher")
                path = env(named(launcher["spec"]["containers"], "node"))["PATH"].split(":")
                self.assertEqual(path[0], MOUNT + "/bin", f"{where}: the bundle's mpirun (the hand-off) comes first")
                return
        self.fail("no SDK TrainJob with an mpirun line")

    def test_the_image_volume_overlay(self):
        found = runtimes("image-volume")
        self.assertEqual(set(found), set(runtimes("trainer-v2.3")))
        for name, runtime in found.items():
            self.assertEqual(SCHEMAS.validate(SCHEMAS.apply_defaults(copy.deepcopy(runtime))), [],
                             f"manifests/image-volume: {name} against Trainer v2.3.0's CRD")
            for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
                pod = job["template"]["spec"]["template"]["spec"]
                self.assertEqual(violations(pod, image_volume=True), [], f"{name}: {job['name']}")
                reference = named(pod["volumes"], BUNDLE)["image"]["reference"]
                self.assertTrue(reference.startswith("registry.example.com/"),
                                f"{name}: {reference}: trainer-v2.3's registry (the image in one place)")

    def test_every_overlay_validates_against_the_crds(self):
        for overlay in runtime_overlays():
            for name, runtime in runtimes(overlay).items():
                self.assertEqual(SCHEMAS.validate(SCHEMAS.apply_defaults(copy.deepcopy(runtime))), [],
                                 f"manifests/{overlay}: {name}")

    def test_a_trainjob_path_replaces_the_runtimes(self):
        mine = "/opt/my-mpi/bin:/usr/bin:/bin"
        for name, trainjob in examples():
            if trainjob.get("kind") != "TrainJob":
                continue
            trainjob = copy.deepcopy(trainjob)
            trainjob["spec"]["trainer"].setdefault("env", []).append({"name": "PATH", "value": mine})
            runtime = runtimes("trainer-v2.3")[trainjob["spec"]["runtimeRef"]["name"]]
            for pod in render.render(trainjob, runtime)["pods"]:
                node = named(pod["spec"]["containers"], "node")
                self.assertEqual([e["value"] for e in node["env"] if e["name"] == "PATH"], [mine],
                                 f"{name}: {pod['metadata']['name']}: trainer.env's PATH, once")

    def test_each_rule_catches_its_breach(self):
        [(_, trainer, pods)] = [r for r in rendered("trainer-v2.3") if FOREIGN in r[0] and "hello" in r[0]]
        pod = next(p for p in pods if p["replicatedJob"] == "launcher")["spec"]
        self.assertEqual(violations(pod, FOREIGN), [])

        def broken(change, image=FOREIGN, image_volume=False):
            copied = copy.deepcopy(pod)
            change(copied)
            return violations(copied, image, image_volume)

        def node(p):
            return named(p["containers"], "node")

        def bundle_mount(p):
            return named(node(p)["volumeMounts"], BUNDLE)

        def path(p, value):
            named(node(p)["env"], "PATH")["value"] = value

        breaches = {
            "no init container": lambda p: p["initContainers"].pop(0),
            "init container second": lambda p: p["initContainers"].insert(1, p["initContainers"].pop(0)),
            "another image": lambda p: p["initContainers"][0].update(image="busybox"),
            "no copy": lambda p: p["initContainers"][0].update(command=["/opt/trainer-mpi/bin/mpi-bundle"]),
            "copied elsewhere": lambda p: p["initContainers"][0]["volumeMounts"][0].update(mountPath="/tmp"),
            "a sidecar": lambda p: p["initContainers"][0].update(restartPolicy="Always"),
            "not an emptyDir": lambda p: named(p["volumes"], BUNDLE).update(emptyDir=None, hostPath={"path": "/"}),
            "not mounted": lambda p: node(p)["volumeMounts"].remove(bundle_mount(p)),
            "writable": lambda p: bundle_mount(p).pop("readOnly"),
            "mounted elsewhere": lambda p: bundle_mount(p).update(mountPath="/opt/tmpi"),
            "no PATH": lambda p: node(p)["env"].remove(named(node(p)["env"], "PATH")),
            "PATH second": lambda p: path(p, "/usr/bin:/opt/trainer-mpi/bin:/bin"),
            "PATH without MPI": lambda p: path(p, "/opt/trainer-mpi/bin:" + ":".join(SYSTEM)),
            "the runtime's image": lambda p: node(p).update(image="localhost/trainer-mpi:openmpi"),
        }
        for name, change in breaches.items():
            self.assertNotEqual(broken(change), [], f"a pod with '{name}' passed")
        self.assertNotEqual(broken(lambda p: None, image_volume=True), [], "an emptyDir passed as an image volume")
        self.assertEqual(command_violations(node(pod), trainer["command"]), [])
        self.assertNotEqual(command_violations({"command": ["mpi-sshd"]}, None), [], "a bare mpi-sshd passed")
        self.assertNotEqual(command_violations({"command": ["/bin/sh", "-c", "exec mpi-launcher run -- x"]}, None), [],
                            "a bare mpi-launcher in the demo passed")
        self.assertNotEqual(command_violations({"command": ["python"]}, ["mpi-launcher"]), [])


if __name__ == "__main__":
    unittest.main()
