#!/usr/bin/env python3
"""cpu_smoke.py: an example TrainJob of the PyTorch runtime (DeepSpeed, Megatron-LM) cut down
to what this machine can run: no GPU, and neither DeepSpeed nor Megatron-LM (their packages
come from PyPI, which cannot be reached here). tests/cluster/examples_test.sh runs the result
from its rendered pods, so the runtime's own pods, files, users and mpi-launcher flags are the
real ones; only the training script is a stand-in.

Design: the TrainJob is the example's, with four changes, each named in the output's
annotation so a reader of a failure knows what ran:
  - numNodes 2, numProcPerNode 2 (the example asks for 4 or 8 hosts of 8 GPUs);
  - no resourcesPerNode (no GPU to ask for);
  - after mpi-launcher's `--`, the training script becomes a torch.distributed all-reduce
    that then writes each rank's checkpoint file (rank-<RANK>.pt) into the example's
    checkpoint folder (its --save, else /data/checkpoints/<name>) on the data volume that
    its runtimePatches mount;
    over gloo, initialised from the environment alone (env://), which is how
    deepspeed.init_distributed and Megatron-LM's initialize start when RANK, WORLD_SIZE,
    MASTER_ADDR and MASTER_PORT are set, as mpi-rank sets them; mpi-launcher's own flags
    (--check mpi, --env-prefix, --grace) stay;
  - GLOO_SOCKET_IFNAME=eth0 in trainer.env (gloo's interface, as NCCL_SOCKET_IFNAME would be).
With --small-check, trainer.env also cuts the fabric check down to 4 MiB messages
(TMPI_MAX_BYTES, TMPI_PAIR_BYTES, which mpi-launcher reads and hands every rank on nccl-check's
command line), as a user would for a smoke run: every run but DeepSpeed's as the runtime's uid
proves the uid and the TrainJob, not the check, which that one runs at its default sizes (35 s
of 4 ranks on 2 cores, against 3 s cut down).
usage: cpu_smoke.py [--small-check] EXAMPLE_TRAINJOB.yaml > trainjob.yaml
"""
import sys

import yaml

SMOKE = """
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
assert total.item() == size * (size + 1) / 2, total
local_rank = os.environ["LOCAL_RANK"]
print(f"torch gloo: rank {rank} of {size}, local rank {local_rank}, sum {total.item():.0f}", flush=True)
os.makedirs(sys.argv[1], exist_ok=True)  # every rank's shard of the checkpoint, on the shared volume
torch.save({"rank": rank, "sum": total.item()}, os.path.join(sys.argv[1], f"rank-{rank}.pt"))
dist.barrier()
dist.destroy_process_group()
"""


SMALL_CHECK = [{"name": "TMPI_MAX_BYTES", "value": "4M"}, {"name": "TMPI_PAIR_BYTES", "value": "4M"}]


def cut_down(trainjob, small_check):
    trainer = trainjob["spec"]["trainer"]
    command = trainer["command"]
    if command[:2] != ["mpi-launcher", "run"] or "--" not in command:
        sys.exit(f"cpu_smoke.py: {trainjob['metadata']['name']}: the command is not `mpi-launcher run ... -- CMD`")
    # The checkpoint folder: the example's own (--save), else one on its data volume.
    rest = command[command.index("--") + 1:]
    checkpoints = rest[rest.index("--save") + 1] if "--save" in rest else f"/data/checkpoints/{trainjob['metadata']['name']}"
    trainer["command"] = command[: command.index("--") + 1] + ["python", "-c", SMOKE, checkpoints]
    trainer["numNodes"], trainer["numProcPerNode"] = 2, 2
    trainer.pop("resourcesPerNode", None)
    trainer["env"] = [e for e in trainer.get("env", []) if e["name"] != "GLOO_SOCKET_IFNAME"]
    trainer["env"].append({"name": "GLOO_SOCKET_IFNAME", "value": "eth0"})
    changes = "numNodes 2, numProcPerNode 2, no resourcesPerNode, the script a gloo all-reduce, GLOO_SOCKET_IFNAME=eth0"
    if small_check:
        names = {e["name"] for e in SMALL_CHECK}
        trainer["env"] = [e for e in trainer["env"] if e["name"] not in names] + SMALL_CHECK
        changes += ", the fabric check at 4 MiB (TMPI_MAX_BYTES, TMPI_PAIR_BYTES)"
    trainjob["metadata"].setdefault("annotations", {})["trainer-mpi/cpu-smoke"] = changes
    return trainjob


if __name__ == "__main__":
    args = sys.argv[1:]
    small = args[:1] == ["--small-check"]
    args = args[1:] if small else args
    if len(args) != 1:
        sys.exit("usage: cpu_smoke.py [--small-check] EXAMPLE_TRAINJOB.yaml > trainjob.yaml")
    with open(args[0]) as stream:
        docs = [d for d in yaml.safe_load_all(stream) if d and d.get("kind") == "TrainJob"]
    if len(docs) != 1:
        sys.exit(f"cpu_smoke.py: {args[0]} holds {len(docs)} TrainJobs; expected 1")
    yaml.safe_dump(cut_down(docs[0], small), sys.stdout, sort_keys=False)
