# defines: the reference for tests/optim/test_lamb.cpp — apex FusedLAMB's AdamW-mode arithmetic (multi_tensor_lamb
# stage 1 and 2) transcribed in fp32 torch ops, after torch's clip_grad_norm_, on random data, for use_nvlamb False
# (arrays "param{i}.step{s}", "exp_avg{i}", ...) and True (the same names prefixed "nv.")
# apex passes beta1/beta2 to the kernel as float: beta3 = 1 - beta1 and (1 - beta2) are float subtractions, and the
# bias corrections are 1 - std::pow(float beta, int step) (promoted to double on the host, stored as float). With
# beta2 = 0.999 that (1 - beta2) is 0.99998713e-3, not 1e-3: a 1.3e-5 relative difference in v if done in double.
# Usage: lamb_reference.py OUT_DIR   (same file layout as adamw_reference.py)
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(99)

shapes = [(37, 613), (613,), (120, 200), (1, 5), (3,), (40001,), (4, 4), (6,)]
decay = [True, False, True, True, False, False, True, False]
steps = 10
beta1, beta2, eps, weight_decay, clip = 0.9, 0.999, 1e-6, 0.01, 1.0
lrs = [1e-3, 2e-3, 5e-3, 1e-2, 3e-3, 1e-3, 4e-3, 2e-2, 5e-4, 1e-3]

init = [torch.from_numpy(rng.normal(0.0, 0.5, s).astype(np.float32)) for s in shapes]
init[6].zero_()  # a zero tensor with decay: ‖p‖ = 0 at the first step, so its trust ratio is 1
arrays = {}
for i, p in enumerate(init):
    arrays[f"param{i}.init"] = p.numpy().copy()
grads = []  # grads[step][i]
for step in range(steps):
    scale = [0.002, 0.5, 0.003, 3.0][step % 4]
    g_step = []
    for i in range(len(shapes)):
        g = rng.normal(0.0, scale, shapes[i]).astype(np.float32)
        if i == 7:
            g[:] = 0.0  # no gradient and no decay: m = v = 0, so u = 0 and ‖u‖ = 0 (ratio 1 under use_nvlamb)
        arrays[f"grad{i}.step{step}"] = g
        g_step.append(g)
    grads.append(g_step)


def run(use_nvlamb, prefix):
    params = [p.clone() for p in init]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for step in range(steps):
        g_list = [torch.from_numpy(g.copy()) for g in grads[step]]
        wrapped = [torch.nn.Parameter(p) for p in params]
        for w, g in zip(wrapped, g_list):
            w.grad = g
        torch.nn.utils.clip_grad_norm_(wrapped, clip)
        t = step + 1
        b1, b2 = np.float32(beta1), np.float32(beta2)
        beta3, one_minus_b2 = np.float32(1) - b1, np.float32(1) - b2  # float arithmetic, as in the kernel
        bc1, bc2 = np.float32(1 - float(b1) ** t), np.float32(1 - float(b2) ** t)
        # as Python floats (exactly the float32 values) so torch applies them as fp32 scalars
        b1, b2, beta3, one_minus_b2, bc1, bc2 = map(float, (b1, b2, beta3, one_minus_b2, bc1, bc2))
        lr = lrs[step]
        for i, p in enumerate(params):
            g = g_list[i]
            wd = weight_decay if decay[i] else 0.0
            m[i] = m[i] * b1 + beta3 * g
            v[i] = v[i] * b2 + one_minus_b2 * g * g
            u = (m[i] / bc1) / (torch.sqrt(v[i] / bc2) + eps) + p * wd
            p_norm = float(torch.norm(p.double()))
            u_norm = float(torch.norm(u.double()))
            trust = (use_nvlamb or wd != 0) and p_norm != 0 and u_norm != 0
            ratio = lr * (p_norm / u_norm) if trust else lr
            params[i] = p - u * np.float32(ratio)
        for i, p in enumerate(params):
            arrays[f"{prefix}param{i}.step{step}"] = p.numpy().copy()
    for i in range(len(params)):
        arrays[f"{prefix}exp_avg{i}"] = m[i].numpy().copy()
        arrays[f"{prefix}exp_avg_sq{i}"] = v[i].numpy().copy()


run(False, "")
run(True, "nv.")
arrays["lrs"] = np.array(lrs, dtype=np.float64)
arrays["hyper"] = np.array([beta1, beta2, eps, weight_decay, clip, steps, len(shapes)], dtype=np.float64)
arrays["decay"] = np.array(decay, dtype=np.float32)

with open(os.path.join(out, "manifest.txt"), "w") as f:
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        ext = "f64" if a.dtype == np.float64 else "f32"
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(out, f"{name}.{ext}"))
        f.write(f"{name} {ext} {a.size}\n")
