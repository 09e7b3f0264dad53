"""Workload: two gloo ranks (torch.distributed on loopback) all-reduce a known tensor N times.

Usage: gloo_allreduce.py N K STEPS. Each rank all-reduces a float32 tensor of K elements N times,
calling dpuprof.mark_step() every N // STEPS all-reduces, then trains a tiny DDP model for STEPS
steps (one DDP forward, so one gradient all-reduce of the model's PARAMS floats, per step). It
sleeps before starting, so that a recorder has attached to libtorch_cpu.so before the first
all-reduce. Rank 0 prints one JSON line: the ground truth per rank (allreduces, bytes, steps,
ddp_steps).
"""
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import dpuprof

PARAMS = 16 * 8 + 8  # nn.Linear(16, 8): one gradient bucket
SETTLE_S = 2.5  # > two drain intervals: the recorder sees the maps with libtorch and attaches


def rank_main(rank, world, port, n, k, steps):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.ones(k, dtype=torch.float32)
    time.sleep(SETTLE_S)
    per_step = n // steps
    for i in range(n):
        if i % per_step == 0:
            dpuprof.mark_step()
        dist.all_reduce(t)
    ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 8))
    for _ in range(steps):
        ddp(torch.ones(4, 16)).sum().backward()
    dist.barrier()
    dist.destroy_process_group()


def main():
    n, k, steps = (int(a) for a in sys.argv[1:4])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(rank_main, args=(2, port, n, k, steps), nprocs=2, start_method="fork")
    print(json.dumps({"allreduces": n + steps, "bytes": (n * k + steps * PARAMS) * 4, "steps": steps,
                      "ddp_steps": steps, "ranks": 2}))


if __name__ == "__main__":
    main()
