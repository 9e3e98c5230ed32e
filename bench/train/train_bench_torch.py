#!/usr/bin/python3
# defines: the PyTorch peer of bench_train — the same GPT-2 training step (forward + backward + AdamW, fp32) in
# nanoGPT-style torch code, median seconds per step, tokens/s and GFLOP/s counted as bench_train counts them.
import argparse
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.H, C // self.H).transpose(1, 2)
        k = k.view(B, T, self.H, C // self.H).transpose(1, 2)
        v = v.view(B, T, self.H, C // self.H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
        att = att.masked_fill(mask[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H, V, P):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(P, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.register_buffer("mask", torch.tril(torch.ones(P, P)))
        for n, p in self.named_parameters():
            if n.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L) if "proj" in n else 0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="A")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="torch.autocast('cpu', dtype=torch.bfloat16) around forward")
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--batch", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    configs = {"A": (4, 256, 4, 256, 4), "B": (12, 768, 12, 256, 2)}  # L, C, H, T, B
    for name in a.config:
        L, C, H, T, B = configs[name]
        T, B = a.seq or T, a.batch or B
        Vp = 50304  # 50257 padded to a multiple of 128, as bench_train
        model = GPT(L, C, H, Vp, 1024)
        decay = [p for n, p in model.named_parameters() if p.dim() == 2]
        no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
        times, cpu = [], []
        for s in range(a.steps + 1):
            tok = torch.randint(0, 50257, (B, T + 1))
            t0, c0 = time.perf_counter(), time.process_time()
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                loss = model(tok[:, :-1], tok[:, 1:])
            loss.backward()
            opt.step()
            if s > 0:
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
        med = statistics.median(times)
        flops = B * T * (6.0 * (L * 12 * C * C + Vp * C) + 12.0 * L * C * T)
        print(f"torch {name}: {flops / 1e9:.1f} GFLOP/step, median {med:.3f} s/step over {a.steps} steps -> "
              f"{B * T / med:.0f} tok/s, {flops / med / 1e9:.1f} GFLOP/s (loss {loss.item():.3f}, "
              f"{torch.get_num_threads()} threads, {'bf16 autocast' if a.bf16 else 'fp32'}, peak RSS "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
        cmed = statistics.median(cpu)
        print(f"torch {name} cpu: median {cmed:.3f} cpu-s/step -> {B * T / cmed:.0f} tok/cpu-s")


if __name__ == "__main__":
    main()
