#!/usr/bin/python3
# defines: the PyTorch peer of bench/train/bert_t5_train_bench.cpp — Megatron's BERT (pre-LN, binary head, MLM head
# on the masked positions only) and Megatron's T5 written plainly for speed in fp32: fused q|k|v and k|v projections,
# attention as batched GEMMs (baddbmm + softmax + bmm), F.gelu(approximate="tanh"), F.layer_norm, tied heads,
# torch.optim.AdamW(foreach=True); dropout off; the same shapes, token counts and step (zero_grad + forward +
# backward + AdamW) as the C++ side. Prints wall and CPU time (user+sys of the process) per step.
#   usage: bert_t5_train_bench_torch.py [--model bert|t5|both] [--steps N] [--threads 2] [--batch-bert B]
#          [--batch-t5 B]
import argparse
import math
import os
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


class Attention(nn.Module):
    def __init__(self, H, n, cross=False):
        super().__init__()
        self.n, self.d, self.cross = n, H // n, cross
        if cross:
            self.q = nn.Linear(H, H)
            self.kv = nn.Linear(H, 2 * H)
        else:
            self.qkv = nn.Linear(H, 3 * H)
        self.dense = nn.Linear(H, H)

    def forward(self, x, memory=None, causal=False):
        B, T, H = x.shape
        if self.cross:
            Tk = memory.shape[1]
            q = self.q(x).view(B, T, self.n, self.d).transpose(1, 2)
            k, v = self.kv(memory).view(B, Tk, 2, self.n, self.d).permute(2, 0, 3, 1, 4)
        else:
            Tk = T
            q, k, v = self.qkv(x).view(B, T, 3, self.n, self.d).permute(2, 0, 3, 1, 4)
        q = q.reshape(B * self.n, T, self.d)
        k = k.reshape(B * self.n, Tk, self.d)
        v = v.reshape(B * self.n, Tk, self.d)
        scores = torch.bmm(q, k.transpose(1, 2)).mul_(1.0 / math.sqrt(self.d))
        if causal:
            scores = scores.masked_fill(torch.triu(torch.ones(T, Tk, dtype=torch.bool), 1), float("-inf"))
        ctx = torch.bmm(torch.softmax(scores, -1), v).view(B, self.n, T, self.d).transpose(1, 2).reshape(B, T, H)
        return self.dense(ctx)


class Layer(nn.Module):
    def __init__(self, H, n, F_, decoder=False):
        super().__init__()
        self.ln1 = nn.LayerNorm(H)
        self.attn = Attention(H, n)
        self.decoder = decoder
        if decoder:
            self.ln_cross = nn.LayerNorm(H)
            self.cross = Attention(H, n, cross=True)
        self.ln2 = nn.LayerNorm(H)
        self.fc = nn.Linear(H, F_)
        self.proj = nn.Linear(F_, H)

    def forward(self, x, memory=None):
        x = x + self.attn(self.ln1(x), causal=self.decoder)
        if self.decoder:
            x = x + self.cross(self.ln_cross(x), memory)
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Bert(nn.Module):
    def __init__(self, V, P, H, n, L):
        super().__init__()
        self.word = nn.Embedding(V, H)
        self.pos = nn.Embedding(P, H)
        self.types = nn.Embedding(2, H)
        self.layers = nn.ModuleList([Layer(H, n, 4 * H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(H)
        self.head_dense = nn.Linear(H, H)
        self.head_ln = nn.LayerNorm(H)
        self.head_bias = nn.Parameter(torch.zeros(V))
        self.pooler = nn.Linear(H, H)
        self.binary = nn.Linear(H, 2)

    def forward(self, tokens, types, positions, labels, is_random):
        B, T = tokens.shape
        x = self.word(tokens) + self.pos(torch.arange(T)) + self.types(types)
        for layer in self.layers:
            x = layer(x)
        x = self.ln_f(x)
        # MLM head on the masked positions only (15 %), Megatron's GELU (erf) in the head's transform.
        h = x.view(B * T, -1).index_select(0, positions)
        h = self.head_ln(F.gelu(self.head_dense(h)))
        logits = F.linear(h, self.word.weight, self.head_bias)
        lm = F.cross_entropy(logits, labels)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return lm + F.cross_entropy(self.binary(pooled), is_random)


class T5(nn.Module):
    def __init__(self, V, P, H, n, F_, Le, Ld):
        super().__init__()
        self.word = nn.Embedding(V, H)
        self.pos = nn.Embedding(P, H)
        self.encoder = nn.ModuleList([Layer(H, n, F_) for _ in range(Le)])
        self.enc_ln = nn.LayerNorm(H)
        self.decoder = nn.ModuleList([Layer(H, n, F_, decoder=True) for _ in range(Ld)])
        self.dec_ln = nn.LayerNorm(H)
        self.head_bias = nn.Parameter(torch.zeros(V))

    def forward(self, enc, dec, labels):
        x = self.word(enc) + self.pos(torch.arange(enc.shape[1]))
        for layer in self.encoder:
            x = layer(x)
        memory = self.enc_ln(x)
        y = self.word(dec) + self.pos(torch.arange(dec.shape[1]))
        for layer in self.decoder:
            y = layer(y, memory)
        y = self.dec_ln(y)
        logits = F.linear(y.view(-1, y.shape[-1]), self.word.weight, self.head_bias)
        return F.cross_entropy(logits, labels.view(-1))


def measure(name, model, inputs, tokens, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, foreach=True)
    walls, cpus, fwd, bwd, step_t, opt_cpus = [], [], [], [], [], []
    for s in range(steps + 1):  # the first warms up
        c0, t0 = cpu_seconds(), time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(*inputs)
        tf = time.perf_counter()
        loss.backward()
        tb, cb = time.perf_counter(), cpu_seconds()
        opt.step()
        t1, c1 = time.perf_counter(), cpu_seconds()
        if s > 0:
            walls.append(t1 - t0)
            cpus.append(c1 - c0)
            fwd.append(tf - t0)
            bwd.append(tb - tf)
            step_t.append(t1 - tb)
            opt_cpus.append(c1 - cb)
    order = sorted(range(len(walls)), key=lambda i: walls[i])
    m = order[len(order) // 2]
    cpu, opt_cpu = sum(cpus) / len(cpus), sum(opt_cpus) / len(opt_cpus)
    print("torch %s: %.3f s/step wall, %.0f tok/s; %.3f cpu-s/step, %.0f tok/cpu-s; without AdamW %.0f tok/cpu-s "
          "(forward %.3f, backward %.3f, adamw %.3f s wall; adamw %.3f cpu-s)"
          % (name, walls[m], tokens / walls[m], cpu, tokens / cpu, tokens / (cpu - opt_cpu), fwd[m], bwd[m],
             step_t[m], opt_cpu), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="both", choices=["bert", "t5", "both"])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-bert", type=int, default=4)
    p.add_argument("--batch-t5", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(42)
    if a.model in ("bert", "both"):
        B, T, V = a.batch_bert, 128, 30592
        model = Bert(V, 512, 768, 12, 12)
        tokens = torch.randint(0, 30522, (B, T), generator=g)
        types = (torch.arange(T) >= T // 2).long().expand(B, T).contiguous()
        masked = torch.rand(B * T, generator=g) < 0.15
        positions = masked.nonzero()[:, 0]
        labels = tokens.view(-1)[positions]
        is_random = torch.randint(0, 2, (B,), generator=g)
        measure("bert-base B=%d T=%d" % (B, T), model, (tokens, types, positions, labels, is_random), B * T, a.steps)
    if a.model in ("t5", "both"):
        B, Te, Td, V = a.batch_t5, 512, 128, 30720
        model = T5(V, 512, 512, 8, 2048, 6, 6)
        enc = torch.randint(1, 30622, (B, Te), generator=g)
        dec = torch.randint(1, 30622, (B, Td), generator=g)
        labels = torch.randint(1, 30622, (B, Td), generator=g)
        measure("t5-small B=%d Te=%d Td=%d" % (B, Te, Td), model, (enc, dec, labels), B * (Te + Td), a.steps)


if __name__ == "__main__":
    main()
