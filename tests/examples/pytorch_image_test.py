#!/usr/bin/env python3
"""pytorch_image_test.py: images/Dockerfile.pytorch and the TrainJobs that run on it, checked
as far as can be done without building the image (its packages come from PyPI, which this
machine cannot reach) or a GPU.

Design: each check is a rule read from the upstream source that a GPU pod would trip over,
with the file that says so (docs/trainer-rules.md has the Trainer side; these are the
DeepSpeed and Megatron-LM side):
  - DeepSpeed 0.16 runs $CUDA_HOME/bin/nvcc -V when imported on a GPU pod and raises
    MissingCUDAException without it (deepspeed/git_version_info.py, every op's
    is_compatible; op_builder/builder.py installed_cuda_version): the image installs NVIDIA's
    nvcc wheel of the CUDA that torch's default wheel uses, and CUDA_HOME names its folder.
  - Megatron-LM core_r0.10.0 defaults to Transformer Engine (megatron/training/arguments.py
    --transformer-impl), fuses gradient accumulation and masked softmax with Apex kernels
    (megatron/core/tensor_parallel/layers.py, megatron/core/fusions/fused_softmax.py), and its
    torch layer norm fallback asserts persist_layer_norm off (megatron/core/transformer/
    torch_norm.py): with neither TE nor Apex in the image, every Megatron TrainJob passes the
    four flags that avoid them, and none that needs them.
  - The pods run as uid 1000 or any uid and cannot write to /opt: Megatron-LM's dataset
    helpers are built in the image, and its fused-kernel build folder is writable by all.
Each rule is also broken on purpose below, so that the check is seen to fail.
usage: pytorch_image_test.py SRC
"""
import os
import re
import sys

import yaml

# torch's default PyPI wheel per release, and its CUDA (pytorch.org's release matrix).
TORCH_CUDA = {"2.4.1": "12.1", "2.5.1": "12.4", "2.6.0": "12.4"}
MEGATRON_NO_TE_APEX = ["--transformer-impl local", "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion",
                       "--no-persist-layer-norm"]
MEGATRON_NEEDS_TE_APEX = ["--fp8-format", "--tp-comm-overlap", "--sequence-parallel", "--apply-layernorm-1p",
                          "--use-legacy-models", "--transformer-impl transformer_engine"]


def dockerfile_problems(text):
    problems = []
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.M))
    torch = args.get("TORCH_VERSION")
    if torch not in TORCH_CUDA:
        return [f"TORCH_VERSION {torch}: its wheel's CUDA is not known here; add it to TORCH_CUDA"]
    nvcc = args.get("CUDA_NVCC_VERSION", "")
    if "nvidia-cuda-nvcc-cu12==${CUDA_NVCC_VERSION}" not in text:
        problems.append("no nvcc: `import deepspeed` on a GPU pod raises MissingCUDAException")
    elif not nvcc.startswith(TORCH_CUDA[torch] + "."):
        problems.append(f"nvcc {nvcc} is not torch {torch}'s CUDA {TORCH_CUDA[torch]}")
    env = " ".join(re.findall(r"^ENV (.*)$", text, re.M))
    home = re.search(r"\bCUDA_HOME=(\S+)", env)
    if not home:
        problems.append("CUDA_HOME is not set: DeepSpeed would not find nvcc")
    elif f"{home.group(1)}/bin/nvcc --version" not in text:
        problems.append(f"CUDA_HOME={home.group(1)}: the build never runs its bin/nvcc, so nothing proves it is there")
    if not re.search(r"make -C /opt/Megatron-LM/megatron/core/datasets", text):
        problems.append("Megatron-LM's dataset helpers are not built in the image (rank 0 would make them in /opt)")
    if not re.search(r"chmod 1777 /opt/Megatron-LM/megatron/legacy/fused_kernels/build", text):
        problems.append("Megatron-LM's fused-kernel build folder is not writable by the pods' uid")
    return problems


def installs(image_text):
    """The Dockerfile's instructions, comments left out."""
    return "\n".join(line for line in image_text.splitlines() if not line.lstrip().startswith("#"))


def megatron_problems(command, image_text):
    words = " ".join(command)
    if "pretrain_gpt.py" not in words or re.search(r"transformer.engine|\bapex\b", installs(image_text), re.I):
        return []
    problems = [f"needs {flag!r}: the image has neither Transformer Engine nor Apex"
                for flag in MEGATRON_NO_TE_APEX if flag not in words]
    problems += [f"{flag!r} needs Transformer Engine or Apex" for flag in MEGATRON_NEEDS_TE_APEX if flag in words]
    return problems


def main():
    src = sys.argv[1]
    image = open(os.path.join(src, "images", "Dockerfile.pytorch")).read()
    failures = [f"images/Dockerfile.pytorch: {p}" for p in dockerfile_problems(image)]
    checked = 0
    for name in sorted(os.listdir(os.path.join(src, "examples"))):
        if not name.startswith("trainjob-"):
            continue
        for doc in yaml.safe_load_all(open(os.path.join(src, "examples", name))):
            command = (doc or {}).get("spec", {}).get("trainer", {}).get("command") or []
            if "pretrain_gpt.py" in " ".join(command):
                checked += 1
                failures += [f"examples/{name}: {p}" for p in megatron_problems(command, image)]
    if checked == 0:
        failures.append("no Megatron-LM TrainJob found in examples/")
    # Each rule, broken on purpose, must be caught.
    broken = {
        "no nvcc": image.replace("nvidia-cuda-nvcc-cu12==${CUDA_NVCC_VERSION}", "pybind11"),
        "another CUDA": re.sub(r"^ARG CUDA_NVCC_VERSION=.*$", "ARG CUDA_NVCC_VERSION=11.8.*", image, flags=re.M),
        "no CUDA_HOME": re.sub(r"\s*CUDA_HOME=\S+", "", image),
        "no helpers": image.replace("make -C /opt/Megatron-LM/megatron/core/datasets", "true"),
        "no build folder": image.replace("chmod 1777", "chmod 755"),
    }
    for what, text in broken.items():
        if not dockerfile_problems(text):
            failures.append(f"the check missed a Dockerfile with {what}")
    flags = ["python", "/opt/Megatron-LM/pretrain_gpt.py", "--transformer-impl", "local",
             "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-persist-layer-norm"]
    if megatron_problems(flags, image):
        failures.append(f"the check refused the four flags: {megatron_problems(flags, image)}")
    for drop in range(2, len(flags)):
        if not megatron_problems(flags[:drop] + flags[drop + 1:], image):
            failures.append(f"the check missed a Megatron command without {flags[drop]!r}")
    if not megatron_problems(flags + ["--sequence-parallel"], image):
        failures.append("the check missed --sequence-parallel")
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        sys.exit(1)
    print(f"ok: Dockerfile.pytorch gives DeepSpeed its nvcc (torch's CUDA) and Megatron-LM its built helpers; "
          f"{checked} Megatron-LM TrainJob(s) build the model without TE or Apex")


if __name__ == "__main__":
    main()
