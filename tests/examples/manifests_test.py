#!/usr/bin/env python3
"""The package's runtimes (every overlay of manifests/, as `kubectl kustomize` renders it) and
examples/ checked against the programs and images they name (no cluster needed).

A manifest that a user applies must not fail on a renamed flag, a path that no volume
holds, a port that the programs do not use, or an image that no Dockerfile builds. The
parameter registry (`mpi-init --params-markdown`, the README's table) says which flags and
TMPI_ variables each program takes, with their defaults; images/Dockerfile* say which tags
they build (an image is a fully qualified name whose last part and tag is one of those:
the registry is the overlay's images: to choose). Volumes "mpi-ssh-auth" and "mpi-hostfile" are the ones Trainer's MPI plugin adds
(the second to the launcher only), so they need mlPolicy.mpi.

usage: manifests_test.py SOURCE_DIR BUILD_DIR
"""
import glob
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_fixtures  # noqa: E402

SRC = BUILD = None  # setup() sets them; rendered_examples_test.py imports this file's checks
PROGRAMS = {"mpi-init", "mpi-rendezvous", "mpi-launcher", "nccl-check", "mpi-sshd"}
TRAINER_VOLUMES = {"mpi-ssh-auth": {"launcher", "node"}, "mpi-hostfile": {"launcher"}}
failures = []


def fail(where, message):
    failures.append(f"{where}: {message}")


def registry():
    """flag -> (variable, default, programs) from the parameter registry."""
    out = subprocess.run([os.path.join(BUILD, "bin", "mpi-init"), "--params-markdown"],
                         check=True, capture_output=True, text=True).stdout
    params = {}
    for line in out.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("--"):
            params[cells[0]] = (cells[1], cells[2], {p.strip() for p in cells[3].split(",")})
    return params


PARAMS = {}


def default(flag):
    return PARAMS[flag][1]


def check_flags(where, program, args):
    """Every --flag in args is one the program takes (up to `--`); returns {flag: value}."""
    values = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest = args[i + 1:]
            if rest and rest[0] == "nccl-check":  # the job itself may be nccl-check
                check_flags(where + " (after --)", "nccl-check", rest[1:])
            break
        if arg.startswith("--"):
            flag, _, inline = arg.partition("=")
            if flag not in PARAMS or program not in PARAMS[flag][2]:
                fail(where, f"{program} takes no {flag} (see the README's parameter table)")
            elif not inline and i + 1 < len(args) and not args[i + 1].startswith("--"):
                values[flag] = args[i + 1]
                i += 1
            else:
                values[flag] = inline or "true"
        i += 1
    return values


def check_env(where, program, env):
    known = {var: flag for flag, (var, _, programs) in PARAMS.items() if program in programs}
    for item in env:
        name = item.get("name", "")
        if name.startswith("TMPI_") and name not in known:
            fail(where, f"{program} reads no {name}")


def mounted(container, path):
    return any(path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")
               for m in container.get("volumeMounts", []))


def image_tags():
    tags = set()
    for dockerfile in glob.glob(os.path.join(SRC, "images", "Dockerfile*")):
        with open(dockerfile) as stream:
            lines = stream.readlines()
        for line in lines:
            m = re.search(r"docker build -f images/\S+ .*-t (\S+)", line)
            if m and os.path.basename(dockerfile) in line:
                tags.add(m.group(1))
    return tags


TAGS = set()


def setup(src, build):
    global SRC, BUILD, PARAMS, TAGS
    SRC, BUILD = src, build
    PARAMS = registry()
    assert PARAMS, "the parameter registry printed no rows"
    TAGS = image_tags()


def fully_qualified(image):
    """A name with its registry host (containers-registries.conf(5): a first part with a dot
    or a port, or localhost), which no short-name resolution can send elsewhere."""
    first, slash, _ = image.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def check_container(where, container, role, pod, has_mpi_policy):
    image = container.get("image") or ""
    if not fully_qualified(image):
        fail(where, f"image {image!r} is a short name (CRI-O's enforcing mode refuses it; Docker Hub has none)")
    if image.rpartition("/")[2] not in TAGS:
        fail(where, f"image {image} is built by no images/Dockerfile* (they build {sorted(TAGS)})")
    volumes = {v["name"] for v in pod.get("volumes", [])}
    for m in container.get("volumeMounts", []):
        if m["name"] in volumes:
            continue
        if m["name"] in TRAINER_VOLUMES and has_mpi_policy and role in TRAINER_VOLUMES[m["name"]]:
            continue
        fail(where, f"volume {m['name']} is neither in the pod nor one that Trainer's MPI plugin adds to a {role} pod")
    command = container.get("command", []) + container.get("args", [])
    if not command:
        return
    program = os.path.basename(command[0])
    env_names = {e["name"] for e in container.get("env", [])}
    for arg in command:
        for ref in re.findall(r"\$\((\w+)\)", arg):
            if ref not in env_names:
                fail(where, f"$({ref}) is not defined in the container's env")
    if program in PROGRAMS:
        args = command[2:] if program == "mpi-launcher" else command[1:]
        values = check_flags(where, program, args)
        check_env(where, program, container.get("env", []))
        for flag in ("--hostfile", "--ssh-secret", "--out"):
            if flag in values and not mounted(container, values[flag]):
                fail(where, f"{flag} {values[flag]} is on no volume of the container")
        for item in container.get("env", []):
            if item["name"] in ("TMPI_HOSTS", "TMPI_REPORT") and not mounted(container, item["value"]):
                fail(where, f"{item['name']}={item['value']} is on no volume of the container")
        if program == "mpi-rendezvous" and args[:1] == ["in-place-agent"]:  # manifests/inplace-restart
            probe = container.get("startupProbe", {}).get("httpGet", {})
            if (probe.get("path"), str(probe.get("port"))) != ("/barrier-is-down", default("--barrier-port")):
                fail(where, f"startupProbe {probe} is not GET /barrier-is-down on {default('--barrier-port')}")
            if container.get("restartPolicy") != "Always":
                fail(where, "the in-place agent is not a native sidecar: its exit would not restart it alone")
        elif program == "mpi-rendezvous":
            port = values.get("--coordinator", "").rpartition(":")[2]
            if port != default("--rendezvous-port"):
                fail(where, f"--coordinator port {port} is not the coordinator's {default('--rendezvous-port')}")
            probe = container.get("readinessProbe", {}).get("httpGet", {})
            if (probe.get("path"), str(probe.get("port"))) != ("/readyz", default("--probe-port")):
                fail(where, f"readinessProbe {probe} is not GET /readyz on {default('--probe-port')}")
    if program == "sshd":
        config = command[command.index("-f") + 1] if "-f" in command else ""
        if not mounted(container, config):
            fail(where, f"sshd's config {config} is on no volume (mpi-init --role node writes it to ~/.ssh)")
    for port in container.get("ports", []):
        expected = {"ssh": default("--ssh-port"), "rendezvous": default("--rendezvous-port")}.get(port.get("name"))
        if expected and str(port["containerPort"]) != expected:
            fail(where, f"port {port['name']} is {port['containerPort']}, the programs use {expected}")


# Every container shares one HOME (the emptyDir "home", where mpi-init makes .ssh). Where
# OpenSSH's sshd serves the pod (manifests/openssh), nss_wrapper's variables too, so that ssh
# and sshd find an arbitrary uid (initcontainer/account.h); the built-in mpi-sshd needs no
# passwd entry, and a pod it serves preloads nothing.
NSS_ENV = ("LD_PRELOAD", "NSS_WRAPPER_PASSWD", "NSS_WRAPPER_GROUP")


def ssh_server(pod):
    """The program that serves the pod's port 2222: sshd or mpi-sshd (None: no server)."""
    for container in pod.get("initContainers", []) + pod.get("containers", []):
        program = os.path.basename((container.get("command") or [""])[0])
        if program in ("sshd", "mpi-sshd"):
            return program
    return None


def check_home(where, container, server):
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
    if not env.get("HOME"):
        fail(where, "no HOME: mpi-init and the SSH server find the job's ~/.ssh through it")
        return
    if mounts.get("home") != env["HOME"]:
        fail(where, f"HOME {env['HOME']} is not the home volume ({mounts.get('home')})")
    if server != "sshd":
        preloaded = [name for name in NSS_ENV if name in env]
        if preloaded:
            fail(where, f"{', '.join(preloaded)} set where {server} serves the pod: "
                        "it needs no passwd entry, and nothing is to be preloaded")
        return
    missing = [name for name in NSS_ENV if not env.get(name)]
    if missing:
        fail(where, f"no {', '.join(missing)}: ssh and sshd need them as non-root")
        return
    for name in ("NSS_WRAPPER_PASSWD", "NSS_WRAPPER_GROUP"):
        if not env[name].startswith(env["HOME"] + "/"):
            fail(where, f"{name} {env[name]} is outside HOME, where mpi-init writes it")
    if "libnss_wrapper.so" not in env["LD_PRELOAD"].split():
        fail(where, f"LD_PRELOAD {env['LD_PRELOAD']} does not load libnss_wrapper.so")
    command = container.get("command", [])
    if command and command[0].endswith("sshd") and "-f" in command:
        if command[command.index("-f") + 1] != env["HOME"] + "/.ssh/sshd_config":
            fail(where, "sshd does not read the sshd_config mpi-init writes in $HOME/.ssh")


def check_init_writes_for(where, pod, server):
    """mpi-init writes what the pod's server reads: --ssh-server (or TMPI_SSH_SERVER) names it."""
    wanted = {"sshd": "openssh", "mpi-sshd": "mpi-sshd"}.get(server)
    for container in pod.get("initContainers", []):
        command = container.get("command") or [""]
        if os.path.basename(command[0]) != "mpi-init" or wanted is None:
            continue
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        given = env.get("TMPI_SSH_SERVER", default("--ssh-server"))
        if "--ssh-server" in command[:-1]:
            given = command[command.index("--ssh-server") + 1]
        if given != wanted:
            fail(where, f"mpi-init writes the files of --ssh-server {given}, but {server} serves the pod; "
                        f"pass --ssh-server {wanted}")


def check_runtime(path, runtime):
    has_mpi_policy = "mpi" in runtime["spec"].get("mlPolicy", {})
    jobs = {j["name"]: j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]}
    if set(jobs) != {"launcher", "node"}:
        fail(path, f"replicatedJobs are {sorted(jobs)}, not launcher and node")
    homes = set()
    for role, job in jobs.items():
        pod = job["template"]["spec"]["template"]["spec"]
        server = ssh_server(pod)
        if server is None:
            fail(path, f"{role}: no container runs an SSH server (mpi-sshd, or sshd)")
        check_init_writes_for(f"{path}: {role}", pod, server)
        for kind in ("initContainers", "containers"):
            for container in pod.get(kind, []):
                where = f"{path}: {role}/{container['name']}"
                check_container(where, container, role, pod, has_mpi_policy)
                homes |= {m["mountPath"] for m in container.get("volumeMounts", []) if m["name"] == "home"}
                # mpi-bundle copies, the in-place agent reads only its token: no HOME, no key.
                if (container.get("command") or [""])[:2] not in (["/opt/trainer-mpi/bin/mpi-bundle", "copy"],
                                                                  ["mpi-rendezvous", "in-place-agent"]):
                    check_home(where, container, server)
        if not any(c["name"] == "node" for c in pod.get("containers", [])):
            fail(path, f"{role} has no container named node (Trainer applies the TrainJob's settings to it)")
    if len(homes) != 1:
        fail(path, f"the home volume is mounted at {sorted(homes)}, not at one path")
    labels = jobs["launcher"]["template"].get("metadata", {}).get("labels", {})
    if labels.get("trainer.kubeflow.org/trainjob-ancestor-step") != "trainer":
        fail(path, "the launcher is not the trainer step, so a TrainJob's command would not reach mpi-launcher")


def main():
    runtimes, trainjobs = {}, []
    for overlay in model_fixtures.runtime_overlays():
        for doc in model_fixtures.package(overlay):
            if doc["kind"] == "ClusterTrainingRuntime":
                runtimes[doc["metadata"]["name"]] = doc
                check_runtime(f"manifests/{overlay}", doc)
    for path in sorted(glob.glob(os.path.join(SRC, "examples", "*.yaml"))):
        name = os.path.relpath(path, SRC)
        with open(path) as stream:
            docs = list(yaml.safe_load_all(stream))
        for doc in docs:
            if doc is None:
                continue
            kind = doc.get("kind")
            if kind == "TrainJob":
                trainjobs.append((name, doc))
            elif kind not in ("ServiceAccount", "Role", "RoleBinding"):
                fail(name, f"unexpected kind {kind}")
    if not runtimes or not trainjobs:
        fail("manifests/, examples/", "expected ClusterTrainingRuntimes (manifests/) and TrainJobs (examples/)")
    for name, job in trainjobs:
        spec = job["spec"]
        if spec["runtimeRef"]["name"] not in runtimes:
            fail(name, f"runtimeRef {spec['runtimeRef']['name']} is in no runtime of manifests/")
        command = spec["trainer"].get("command", [])
        if command[:2] != ["mpi-launcher", "run"] or "--" not in command:
            fail(name, "the command is not `mpi-launcher run [options] -- CMD`")
        check_flags(name, "mpi-launcher", command[2:])
        if spec["trainer"].get("numNodes", 0) < 1:
            fail(name, "numNodes must be at least 1")
    for line in failures:
        print("FAIL:", line)
    print(f"{'FAILED' if failures else 'ok'}: {len(runtimes)} runtimes, {len(trainjobs)} TrainJobs, "
          f"{len(PARAMS)} parameters, images {sorted(TAGS)}")
    return 1 if failures else 0


if __name__ == "__main__":
    setup(sys.argv[1], sys.argv[2])
    sys.exit(main())
