# defines: the PyTorch reference for tests/optim/test_adamw.cpp — torch.optim.AdamW + clip_grad_norm_ on random data
# Usage: adamw_reference.py OUT_DIR
# Writes OUT_DIR/<name>.f32|.f64 (raw little-endian) and OUT_DIR/manifest.txt ("name f32|f64 count" per line).
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(1234)
rng = np.random.default_rng(1234)

# Shapes mix big matrices (several OpenMP blocks, odd sizes) and small vectors; decay only on matrices.
shapes = [(37, 613), (613,), (613,), (120, 200), (1, 5), (3,), (40001,)]
decay = [True, False, False, True, True, False, False]
steps = 12
beta1, beta2, eps, weight_decay, clip = 0.9, 0.95, 1e-8, 0.1, 1.0
lrs = [0.0, 6e-4, 5.5e-4, 1e-3, 3e-3, 2e-4, 1e-4, 7e-4, 5e-3, 1e-3, 4e-4, 2e-5]

params = [torch.nn.Parameter(torch.from_numpy(rng.normal(0.0, 0.5, s).astype(np.float32))) for s in shapes]
arrays = {}
for i, p in enumerate(params):
    arrays[f"param{i}.init"] = p.detach().numpy().copy()
groups = [
    {"params": [p for p, d in zip(params, decay) if d], "weight_decay": weight_decay},
    {"params": [p for p, d in zip(params, decay) if not d], "weight_decay": 0.0},
]
opt = torch.optim.AdamW(groups, lr=1.0, betas=(beta1, beta2), eps=eps)
norms = []
for step in range(steps):
    # Gradient scale varies so some steps clip and some do not.
    scale = [0.002, 0.5, 0.003, 3.0][step % 4]
    for i, p in enumerate(params):
        g = rng.normal(0.0, scale, shapes[i]).astype(np.float32)
        arrays[f"grad{i}.step{step}"] = g
        p.grad = torch.from_numpy(g.copy())
    norms.append(float(torch.nn.utils.clip_grad_norm_(params, clip)))
    for i, p in enumerate(params):
        arrays[f"clipped{i}.step{step}"] = p.grad.numpy().copy()
    for g in opt.param_groups:
        g["lr"] = lrs[step]
    opt.step()
    for i, p in enumerate(params):
        arrays[f"param{i}.step{step}"] = p.detach().numpy().copy()
for i, p in enumerate(params):
    st = opt.state[p]
    arrays[f"exp_avg{i}"] = st["exp_avg"].numpy().copy()
    arrays[f"exp_avg_sq{i}"] = st["exp_avg_sq"].numpy().copy()
arrays["norms"] = np.array(norms, dtype=np.float32)
arrays["lrs"] = np.array(lrs, dtype=np.float64)
arrays["hyper"] = np.array([beta1, beta2, eps, weight_decay, clip, steps, len(shapes)], dtype=np.float64)
arrays["decay"] = np.array(decay, dtype=np.float32)

with open(os.path.join(out, "manifest.txt"), "w") as f:
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        ext = "f64" if a.dtype == np.float64 else "f32"
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(out, f"{name}.{ext}"))
        f.write(f"{name} {ext} {a.size}\n")
