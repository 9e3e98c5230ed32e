# defines: the PyTorch peer of bench_optim: clip_grad_norm_ + torch.optim.AdamW over GPT-2 124M's tensors
# Usage: optim_bench_torch.py STEPS THREADS
import sys
import time

import torch

steps, threads = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
C, V, T = 768, 50304, 1024
shapes = [((V, C), True), ((T, C), True)]
for _ in range(12):
    shapes += [((C,), False), ((C,), False), ((C, 3 * C), True), ((3 * C,), False), ((C, C), True), ((C,), False),
               ((C,), False), ((C,), False), ((C, 4 * C), True), ((4 * C,), False), ((4 * C, C), True),
               ((C,), False)]
shapes += [((C,), False), ((C,), False)]
params = [torch.nn.Parameter(torch.randn(s) * 0.02) for s, _ in shapes]
total = sum(p.numel() for p in params)
for foreach in (False, True):
    groups = [{"params": [p for p, (_, d) in zip(params, shapes) if d], "weight_decay": 0.1},
              {"params": [p for p, (_, d) in zip(params, shapes) if not d], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, foreach=foreach)
    times = []
    for s in range(steps + 1):
        for p in params:
            p.grad = torch.randn_like(p) * 0.02
        t0 = time.perf_counter()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        t1 = time.perf_counter()
        if s > 0:
            times.append(t1 - t0)
    times.sort()
    med = times[len(times) // 2]
    gbs = total * 4.0 * 10 / med / 1e9
    print(f"torch adamw+clip (foreach={foreach}): {total / 1e6:.2f}M params, median {med * 1e3:.1f} ms/step over "
          f"{steps} steps, {gbs:.1f} GB/s (norm {float(norm):.3f})")
