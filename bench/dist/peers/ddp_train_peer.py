#!/usr/bin/python3
# defines: the PyTorch peer of run_train_scaling.sh — bench/train/train_bench_torch.py's GPT-2 trained with
# torch.distributed DistributedDataParallel over gloo (CPU), N processes × T threads, the global batch split
# across ranks like lmforge's data parallelism; prints tokens/s of the global batch (median step time).
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "train"))
from train_bench_torch import GPT  # noqa: E402


def worker(rank, a):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(a.port))
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.procs)
    torch.manual_seed(1234)
    Vp = 50304
    model = GPT(a.layers, a.hidden, a.heads, Vp, 1024)
    ddp = torch.nn.parallel.DistributedDataParallel(model) if a.procs > 1 else model
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4)
    local = a.global_batch // a.procs
    micro = a.micro_batch
    times = []
    gen = torch.Generator().manual_seed(rank)
    for s in range(a.steps + 1):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for k in range(local // micro):
            tok = torch.randint(0, 50257, (micro, a.seq + 1), generator=gen)
            if a.procs > 1 and k + 1 < local // micro:
                with ddp.no_sync():  # accumulate locally; reduce with the last micro-batch, as DDP users do
                    ddp(tok[:, :-1], tok[:, 1:]).backward()
            else:
                ddp(tok[:, :-1], tok[:, 1:]).backward()
        opt.step()
        dist.barrier()
        if s > 0:
            times.append(time.perf_counter() - t0)
    if rank == 0:
        med = statistics.median(times)
        print(f"torch DDP (gloo) {a.procs} x {a.threads} threads: median {med * 1000:.1f} ms/step -> "
              f"{a.global_batch * a.seq / med:.0f} tokens/s")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--global-batch", type=int, default=4)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--port", type=int, default=29533)
    a = ap.parse_args()
    if a.procs == 1:
        worker(0, a)
    else:
        mp.spawn(worker, args=(a,), nprocs=a.procs, join=True)


if __name__ == "__main__":
    main()
