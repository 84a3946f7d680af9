#!/usr/bin/env python3
"""resume_train.py: Megatron-LM's checkpoint loop cut down to what this machine can run (no
GPU, no Megatron-LM: its package comes from PyPI), as the stand-in for pretrain_gpt.py in the
restart-in-place test (tests/cluster/restarts_test.sh, case `resume`).

Design: what matters to a restart is Megatron's, kept:
  - the ranks start from the environment alone (torch.distributed's env://: RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT, as mpi-rank sets them), over gloo on the CPU;
  - data parallel training of a small model, the gradients all-reduced every step;
  - every --save-interval steps, rank 0 writes the model, the optimizer (momentum included)
    and the iteration into `iter_<7 digits>/model_optim_rng.pt` beside
    `latest_checkpointed_iteration.txt`, as Megatron's checkpointing.py lays them out, the
    tracker written last (renamed into place) so that a kill mid-write leaves the last whole one;
  - at start, --load's tracker names the iteration to resume from; the step count goes on from
    there (Megatron's `iteration`), and the data is the same function of the step, so a run
    that was killed and resumed ends with the weights of one that never was.
It prints `attempt A: resumed from step S` (or `starting at step 0`), `step N loss L` on rank 0,
and at the end `final step N weights CHECKSUM`.
usage: resume_train.py --save DIR --steps N [--save-interval K] [--step-seconds S]
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

TRACKER = "latest_checkpointed_iteration.txt"


def batch(step, rank, size):
    # Each rank's shard of the step's batch: a function of the step alone, so that a resumed
    # run sees what the uninterrupted one saw.
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(8, 4, generator=g)
    return x, x.sum(dim=1, keepdim=True) * (1 + 0.1 * size)


def load(folder, model, optimizer):
    tracker = os.path.join(folder, TRACKER)
    if not os.path.exists(tracker):
        return 0
    with open(tracker) as f:
        iteration = int(f.read().strip())
    state = torch.load(os.path.join(folder, f"iter_{iteration:07d}", "model_optim_rng.pt"))
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["iteration"]


def save(folder, iteration, model, optimizer):
    path = os.path.join(folder, f"iter_{iteration:07d}")
    os.makedirs(path, exist_ok=True)
    torch.save({"iteration": iteration, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
               os.path.join(path, "model_optim_rng.pt"))
    with open(os.path.join(folder, TRACKER + ".tmp"), "w") as f:
        f.write(str(iteration))
    os.replace(os.path.join(folder, TRACKER + ".tmp"), os.path.join(folder, TRACKER))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--save-interval", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=0.3)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    os.makedirs(args.save, exist_ok=True)
    start = load(args.save, model, optimizer)
    if rank == 0:
        said = f"resumed from step {start}" if start else "starting at step 0"
        print(f"attempt {attempt}: {said}", flush=True)
    for step in range(start + 1, args.steps + 1):
        x, y = batch(step, rank, size)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= size
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.6f}", flush=True)
        if step % args.save_interval == 0:
            if rank == 0:
                save(args.save, step, model, optimizer)
            dist.barrier()  # no rank runs ahead of a checkpoint that is not whole yet
        time.sleep(args.step_seconds)
    if rank == 0:
        weights = torch.cat([p.detach().flatten() for p in model.parameters()])
        print(f"final step {args.steps} weights {' '.join(f'{w:.6f}' for w in weights.tolist())}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
