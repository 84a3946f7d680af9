# The PyTorch reference for bench/gpu/run.sh: torch.distributed all-reduce with NCCL,
# timed as nccl-tests times it (warm-up, then 20 iterations between two synchronisations),
# at the same sizes as nccl-check (1 MiB, times 4, up to the argument). Rank 0 prints rows
# "bytes algbw busbw" (GB/s of 10^9 bytes).
import os
import sys
import time

import torch
import torch.distributed as dist


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * scale[text[-1].upper()] if text[-1].upper() in scale else int(text)


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    size, largest = 1 << 20, parse_size(sys.argv[1] if len(sys.argv) > 1 else "1G")
    sizes = []
    while size < largest:
        sizes.append(size)
        size *= 4
    sizes.append(largest)
    for nbytes in sizes:
        data = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(data)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(20):
            dist.all_reduce(data)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / 20
        algbw = nbytes / seconds / 1e9
        if rank == 0:
            print(nbytes, f"{algbw:.3f}", f"{algbw * 2 * (world - 1) / world:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
