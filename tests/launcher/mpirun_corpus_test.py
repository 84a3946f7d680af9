#!/usr/bin/env python3
"""Real mpirun lines (mpirun_corpus.txt: mpi-operator's and Horovod's examples, each with its
source) through the image's mpirun hand-off, and through `mpi-launcher run [MPI OPTIONS] --
CMD`, both with --dry-run. Each line reaches mpi-launcher. An accepted one keeps each of its
options in order (the owned ones as the launcher's own: its hostfile and -np), runs its own
command under the rank agent, and prints the same command both ways. A refused one exits 64,
naming the option once. Then the refusals that mpirun itself would make, both ways: an option
the MPI does not know, and under Open MPI more ranks than the job's slots without
--oversubscribe (hydra allows it). The job: 2 nodes of 8 slots, as the corpus's 16 ranks need.
Built binaries and Debian's Open MPI and MPICH; no cluster, no root."""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

BUILD = pathlib.Path(os.environ["TMPI_BUILD_DIR"])
SRC = pathlib.Path(__file__).resolve().parents[2]
REAL = {"openmpi": "/usr/bin/mpirun.openmpi", "mpich": "/usr/bin/mpiexec.hydra"}
OWNED_WITH_VALUE = {"-np", "-n", "-c", "--np", "--hostfile", "-hostfile", "-f", "--machinefile"}


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def corpus():
    source = ""
    for text in (SRC / "tests/launcher/mpirun_corpus.txt").read_text().splitlines():
        if text.startswith("# ") and ("/" in text.split()[1]):
            source = text[2:]
        elif text and not text.startswith("#"):
            flavour, expect, line = text.split(" ", 2)
            yield source, flavour, expect, line


def is_subsequence(wanted, words):
    it = iter(words)
    return all(any(word == w for w in it) for word in wanted)


def check_accepted(source, words, out, direct):
    agent = str(BUILD / "bin" / "mpi-rank")
    if agent not in out:
        fail(f"{source}: the command does not run under the rank agent: {out}")
    at = out.index("--", out.index(agent))
    command = out[at + 1:]
    if not command or words[-len(command):] != command:
        fail(f"{source}: the line's command {words} is not the ranks' {command}")
    options = words[1:len(words) - len(command)]
    passed, i = [], 0
    while i < len(options):
        word = options[i].split("=")[0]
        if word in OWNED_WITH_VALUE:
            if word in ("-np", "-n", "-c", "--np") and options[i + 1] not in out[:at]:
                fail(f"{source}: the rank count {options[i + 1]} is not the launcher's: {out}")
            i += 1 if "=" in options[i] else 2
            continue
        if word != "--allow-run-as-root":
            passed.append(options[i])
        i += 1
    if not is_subsequence(passed, out[:at]):
        fail(f"{source}: an option is lost or reordered: {passed} not in {out[:at]}")
    # hydra's ssh wrapper lies in a folder of random name, made for each run.
    if [re.sub(r"/tmpi-ssh-[^/]+/", "/", w) for w in direct] != [re.sub(r"/tmpi-ssh-[^/]+/", "/", w) for w in out]:
        fail(f"{source}: `mpi-launcher run [MPI OPTIONS] -- CMD` differs from the hand-off's:\n{direct}\n{out}")


# (MPI, how: "handoff" as the image's mpirun, "run" as `mpi-launcher run --dry-run OPTIONS --
# prog`, options, the exit code, what stderr says). The job has 16 slots on 2 hosts.
REFUSALS = [
    ("openmpi", "handoff", ["-np", "64"], 64, ["-np 64 asks for 64 ranks", "16 slots on 2 host(s)",
                                                "16 ranks or fewer", "--oversubscribe"]),
    ("openmpi", "run", ["-np", "17"], 64, ["-np 17 asks for 17 ranks", "--oversubscribe"]),
    ("openmpi", "handoff", ["-np", "64", "--oversubscribe"], 0, []),
    ("openmpi", "run", ["--map-by", "slot:OVERSUBSCRIBE", "-np", "64"], 0, []),
    ("mpich", "handoff", ["-n", "64"], 0, []),
    ("openmpi", "handoff", ["-ppn", "2"], 64, ['"-ppn" is unknown to Open MPI', "--map-by ppr:N:node"]),
    ("openmpi", "run", ["--bogus", "3"], 64, ['"--bogus" is unknown to Open MPI', "mpirun --help"]),
    ("mpich", "handoff", ["-x", "A=1"], 64, ['"-x" is unknown to hydra', "-genv NAME VALUE"]),
    ("mpich", "run", ["--oversubscribe", "-n", "64"], 64, ['"--oversubscribe" is unknown to hydra']),
]


def check_refusals(work, env_of):
    for flavour, how, options, code, said in REFUSALS:
        env = env_of(flavour)
        if how == "handoff":
            argv = [work / "image/mpirun", *options, "./prog"]
        else:
            env["TMPI_MPIRUN"] = str(work / flavour / "mpirun")
            argv = [BUILD / "bin/mpi-launcher", "run", "--dry-run", *options, "--", "./prog"]
        ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        name = f"{flavour} {how} {' '.join(options)}"
        if ran.returncode != code:
            fail(f"{name}: exit {ran.returncode}, not {code}: {ran.stderr}")
        if code != 0 and "mpi-rank" in ran.stdout:
            fail(f"{name}: refused, yet a command was printed: {ran.stdout}")
        for text in said:
            if text not in ran.stderr:
                fail(f"{name}: stderr does not say '{text}': {ran.stderr}")
        print(f"ok: exit {code:<3} {name}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        subprocess.run([BUILD / "bin/mpi-init", "--jobset", "rt", "--replicated-jobs", "launcher=1,node=2", "--slots", "8",
                        "--out", work / "etc", "--ssh-dir", work / "ssh"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (work / "image").mkdir()
        shutil.copy(SRC / "launcher/mpirun_handoff.sh", work / "image/mpirun")
        (work / "image/mpirun").chmod(0o755)
        (work / "image/mpi-launcher").symlink_to(BUILD / "bin/mpi-launcher")
        count = 0

        def env_of(flavour):
            (work / flavour).mkdir(exist_ok=True)
            if not (work / flavour / "mpirun").exists():
                (work / flavour / "mpirun").symlink_to(REAL[flavour])
            env = {k: v for k, v in os.environ.items() if not k.startswith("TMPI_")}
            env.update(PATH=f"{work / 'image'}:{work / flavour}:/usr/bin:/bin", TMPI_HOSTS=str(work / "etc/hosts.json"),
                       TMPI_SSH_DIR=str(work / "ssh"), TMPI_MPI=flavour, TMPI_DRY_RUN="true",
                       TMPI_LOG_LEVEL="warn")
            return env

        for source, flavour, expect, line in corpus():
            env = env_of(flavour)
            words = shlex.split(line.replace("/etc/mpi/", f"{work}/etc/"))
            ran = subprocess.run([work / "image/mpirun", *words[1:]], env=env, capture_output=True, text=True,
                                 timeout=30)
            if expect == "ok":
                if ran.returncode != 0:
                    fail(f"{source}: exit {ran.returncode}: {ran.stderr}")
                out = shlex.split(ran.stdout.strip().splitlines()[-1])
                agent_at = out.index("--", out.index(str(BUILD / "bin" / "mpi-rank")))
                command = out[agent_at + 1:]
                options = words[1:len(words) - len(command)]
                env["TMPI_MPIRUN"] = str(work / flavour / "mpirun")
                direct = subprocess.run([BUILD / "bin/mpi-launcher", "run", *options, "--", *command], env=env,
                                        capture_output=True, text=True, timeout=30)
                if direct.returncode != 0:
                    fail(f"{source}: mpi-launcher run [MPI OPTIONS] -- CMD: exit {direct.returncode}: {direct.stderr}")
                check_accepted(source, words, out, shlex.split(direct.stdout.strip().splitlines()[-1]))
            else:
                named = expect.split(":", 1)[1]
                if ran.returncode != 64 or ran.stderr.count(named) != 1:
                    fail(f"{source}: expected exit 64 naming {named} once, got {ran.returncode}: {ran.stderr}")
            count += 1
            print(f"ok: {expect:<22} {source}")
        if count < 10:
            fail(f"the corpus has {count} lines")
        check_refusals(work, env_of)


main()
