# defines: the PyTorch reference for tests/optim/test_sgd.cpp — torch.optim.SGD (momentum 0.9, and 0 under the prefix
# "m0.") with Megatron's param groups (weight decay on matrices only) after clip_grad_norm_, on random data
# Usage: sgd_reference.py OUT_DIR   (same file layout as adamw_reference.py)
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(4321)

shapes = [(37, 613), (613,), (120, 200), (1, 5), (3,), (40001,)]
decay = [True, False, True, True, False, False]
steps = 10
momentum, weight_decay, clip = 0.9, 0.1, 1.0
lrs = [0.0, 1e-2, 5e-2, 1e-1, 3e-2, 1e-2, 4e-2, 2e-1, 5e-3, 1e-2]  # the first step has lr 0 (Megatron's warm-up)

init = [rng.normal(0.0, 0.5, s).astype(np.float32) for s in shapes]
arrays = {}
for i, p in enumerate(init):
    arrays[f"param{i}.init"] = p.copy()
grads = []
for step in range(steps):
    scale = [0.002, 0.5, 0.003, 3.0][step % 4]  # some steps clip, some do not
    g_step = [rng.normal(0.0, scale, s).astype(np.float32) for s in shapes]
    for i, g in enumerate(g_step):
        arrays[f"grad{i}.step{step}"] = g
    grads.append(g_step)


def run(mu, prefix):
    params = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in init]
    groups = [
        {"params": [p for p, d in zip(params, decay) if d], "weight_decay": weight_decay},
        {"params": [p for p, d in zip(params, decay) if not d], "weight_decay": 0.0},
    ]
    # Megatron: SGD(param_groups, lr=args.lr, weight_decay=args.weight_decay, momentum=args.sgd_momentum), with
    # the scheduler setting each group's lr and weight decay (0 for the no-decay group) before every step.
    opt = torch.optim.SGD(groups, lr=1.0, momentum=mu)
    for step in range(steps):
        for i, p in enumerate(params):
            p.grad = torch.from_numpy(grads[step][i].copy())
        torch.nn.utils.clip_grad_norm_(params, clip)
        for g in opt.param_groups:
            g["lr"] = lrs[step]
        opt.step()
        for i, p in enumerate(params):
            arrays[f"{prefix}param{i}.step{step}"] = p.detach().numpy().copy()
    if mu != 0:
        for i, p in enumerate(params):
            arrays[f"{prefix}momentum_buffer{i}"] = opt.state[p]["momentum_buffer"].numpy().copy()


run(momentum, "")
run(0.0, "m0.")
arrays["lrs"] = np.array(lrs, dtype=np.float64)
arrays["hyper"] = np.array([momentum, 0.0, 0.0, weight_decay, clip, steps, len(shapes)], dtype=np.float64)
arrays["decay"] = np.array(decay, dtype=np.float32)

with open(os.path.join(out, "manifest.txt"), "w") as f:
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        ext = "f64" if a.dtype == np.float64 else "f32"
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(out, f"{name}.{ext}"))
        f.write(f"{name} {ext} {a.size}\n")
