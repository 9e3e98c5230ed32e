#!/usr/bin/python3
# defines: the PyTorch-on-GPU peer of `lmforge train gpt --device cuda` (scripts/device-check.sh runs both on the same
# GPU): the same GPT-2 training step (forward, backward, global-norm clip, AdamW) at PyTorch's fastest settings —
# bf16 autocast, F.scaled_dot_product_attention (flash), AdamW(fused=True), torch.compile with --compile; TF32 off
# unless --tf32 (so an fp32 run is real fp32, as lmforge's) — median seconds per step, tokens/s, MFU and peak memory.
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


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

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.H, C // self.H).transpose(1, 2)
        k = k.view(B, T, self.H, C // self.H).transpose(1, 2)
        v = v.view(B, T, self.H, C // self.H).transpose(1, 2)
        if HAVE_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0 (the dry run on a development machine): the same causal attention, unfused
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ v
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H, V, P):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(P, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        for n, p in self.named_parameters():
            if n.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L) if "proj" in n else 0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda", help="cuda (the measurement) or cpu (a syntax/flow check only)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50304, help="padded vocabulary (50257 -> 50304, as lmforge pads)")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=30, help="timed steps, after the warm-up")
    ap.add_argument("--warmup", type=int, default=5, help="untimed first steps (cuBLAS/autotune, compilation)")
    ap.add_argument("--bf16", action="store_true", help="torch.autocast(dtype=torch.bfloat16) around the forward")
    ap.add_argument("--compile", action="store_true", help="torch.compile(model) (its time is reported apart)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in fp32 matrix products (off: real fp32)")
    ap.add_argument("--clip-grad", type=float, default=1.0, help="global-norm clip, as lmforge's --clip-grad")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="MFU base (H100 SXM dense bf16 datasheet)")
    ap.add_argument("--label", default="torch")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("train_bench_torch_cuda: --device cuda but torch sees no GPU")
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.manual_seed(1234)
    L, C, H, V, T, B = a.layers, a.hidden, a.heads, a.vocab, a.seq, a.batch
    model = GPT(L, C, H, V, max(T, 1024)).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    fused = dev.type == "cuda"
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if fused else {}))
    compile_note = "eager"
    step_model = model
    if a.compile and hasattr(torch, "compile"):
        step_model, compile_note = torch.compile(model), "torch.compile"
    elif a.compile:
        compile_note = f"eager (torch {torch.__version__} has no torch.compile)"

    # foreach (one multi-tensor kernel per step of the norm) from torch 2.0; the default before.
    clip_kw = {"foreach": True} if "foreach" in torch.nn.utils.clip_grad_norm_.__code__.co_varnames else {}

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def step():
        tok = torch.randint(0, min(50257, V), (B, T + 1), device=dev)
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.bf16):
            loss = step_model(tok[:, :-1], tok[:, 1:])
        loss.backward()
        if a.clip_grad > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad, **clip_kw)
        opt.step()
        sync()
        return time.perf_counter() - t0, loss

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t_first = time.perf_counter()
    try:
        step()  # torch.compile compiles here
    except Exception as e:  # noqa: BLE001 — a compile failure is reported, then eager is measured
        if step_model is model:
            raise
        print(f"{a.label}: torch.compile failed ({type(e).__name__}: {str(e)[:300]}); measuring eager", flush=True)
        step_model, compile_note = model, "eager (torch.compile failed)"
        step()
    for _ in range(a.warmup - 1):
        step()
    warm_s = time.perf_counter() - t_first
    times, loss = [], None
    for _ in range(a.steps):
        dt, loss = step()
        times.append(dt)
    med = statistics.median(times)
    flops_per_token = 6.0 * n_params + 6.0 * L * C * T  # as llm.c counts (tied embedding in n_params)
    tok_s = B * T / med
    mfu = flops_per_token * tok_s / (a.peak_tflops * 1e12)
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else 0.0
    reserved = torch.cuda.max_memory_reserved() / 2**20 if dev.type == "cuda" else 0.0
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    precision = "bf16 autocast" if a.bf16 else ("fp32 (TF32 allowed)" if a.tf32 else "fp32 (no TF32)")
    print(f"{a.label}: {name}, torch {torch.__version__}, {compile_note}, {precision}, "
          f"{'SDPA' if HAVE_SDPA else 'unfused attention (no SDPA)'}, fused AdamW "
          f"{fused}, {n_params / 1e6:.1f}M parameters, B={B} T={T}; warm-up {a.warmup} steps {warm_s:.1f} s")
    # One line for scripts/device-check.sh: key=value fields.
    print(f"RESULT {a.label} tokens_per_s={tok_s:.0f} step_ms={med * 1000:.1f} mfu={mfu:.4f} "
          f"peak_alloc_mib={peak:.0f} peak_reserved_mib={reserved:.0f} loss={loss.item():.4f} steps={len(times)}",
          flush=True)


if __name__ == "__main__":
    main()
