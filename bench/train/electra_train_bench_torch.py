#!/usr/bin/python3
# defines: the PyTorch peer of `lmforge train electra` for the speed row of ELECTRA-Small at sequence 128 — ELECTRA
# (electra-reference-notes §2-§3) written plainly for speed: shared embeddings + LayerNorm, post-LN BERT encoders with
# fused q|k|v and attention as batched GEMMs (baddbmm + softmax + bmm), erf GELU, the generator's head on the masked
# slots only, masking with torch.multinomial (with replacement, 85% [MASK]), Gumbel argmax sampling under no_grad,
# the fake ids by scatter, BCE over the real tokens, loss = mlm + 50·disc, torch.optim.AdamW(foreach=True); dropout
# 0.1 as ELECTRA trains (--no-dropout: off). Synthetic examples (every position a real token: [CLS] ids [SEP]).
# The step is what lmforge's trainer times: zero_grad + forward + backward + AdamW. Prints wall and CPU time (user +
# sys of the process) per step and tokens/s over the steps after the first, and the model's training flops per step
# (model_flops; --flops-only prints just that line, for lmforge's side of run_electra_train_bench.sh).
#   usage: electra_train_bench_torch.py [--steps N] [--batch B] [--threads 2] [--seq 128] [--bf16] [--no-dropout]
#          [--flops-only]
import argparse
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CLS, SEP, MASK, V = 101, 102, 103, 30522


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


class Layer(nn.Module):
    def __init__(self, H, n, ffn, p):
        super().__init__()
        self.n, self.d, self.p = n, H // n, p
        self.qkv = nn.Linear(H, 3 * H)
        self.out = nn.Linear(H, H)
        self.ln1 = nn.LayerNorm(H, eps=1e-12)
        self.fc = nn.Linear(H, ffn)
        self.proj = nn.Linear(ffn, H)
        self.ln2 = nn.LayerNorm(H, eps=1e-12)

    def forward(self, x, bias):
        B, T, H = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n, self.d).permute(2, 0, 3, 1, 4)
        q, k, v = (t.reshape(B * self.n, T, self.d) for t in (q, k, v))
        scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=1.0 / math.sqrt(self.d))
        probs = F.dropout(torch.softmax(scores, -1), self.p, self.training)
        ctx = torch.bmm(probs, v).view(B, self.n, T, self.d).transpose(1, 2).reshape(B, T, H)
        # LayerNorm on fp32 input: under bf16 autocast the residual stream is bf16 (the projections' outputs), and
        # PyTorch 1.13's CPU autocast leaves layer_norm out of its fp32 list, so a bf16 input with the fp32 weight
        # fails ("expected scalar type BFloat16 but found Float"); later versions cast it to fp32 themselves.
        a = self.ln1((x + F.dropout(self.out(ctx), self.p, self.training)).float())
        return self.ln2((a + F.dropout(self.proj(F.gelu(self.fc(a))), self.p, self.training)).float())


class Electra(nn.Module):
    def __init__(self, L, layers=12, H=256, heads=4, ffn=1024, E=128, gH=64, p=0.1):
        super().__init__()
        self.p = p
        self.word = nn.Embedding(V, E)
        self.pos = nn.Embedding(512, E)
        self.typ = nn.Embedding(2, E)
        self.ln = nn.LayerNorm(E, eps=1e-12)
        self.disc_project = nn.Linear(E, H)
        self.gen_project = nn.Linear(E, gH)
        self.disc = nn.ModuleList(Layer(H, heads, ffn, p) for _ in range(layers))
        self.gen = nn.ModuleList(Layer(gH, max(1, gH // 64), 4 * gH, p) for _ in range(layers))
        self.disc_dense = nn.Linear(H, H)
        self.disc_out = nn.Linear(H, 1)
        self.gen_dense = nn.Linear(gH, E)
        self.gen_ln = nn.LayerNorm(E, eps=1e-12)
        self.gen_bias = nn.Parameter(torch.zeros(V))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def encode(self, ids, types, bias, project, layers):
        B, T = ids.shape
        x = self.ln(self.word(ids) + self.pos.weight[:T] + self.typ(types))
        x = project(F.dropout(x, self.p, self.training))
        for layer in layers:
            x = layer(x, bias)
        return x

    def forward(self, ids, mask, types, N, mask_prob=0.15):
        B, T = ids.shape
        heads = self.disc[0].n
        key_bias = (1.0 - mask.to(torch.float32))[:, None, None, :] * -10000.0
        # 1. Masking: N positions with replacement among the candidates, 85% of them [MASK].
        cand = (mask == 1) & (ids != CLS) & (ids != SEP) & (ids != MASK)
        num = torch.clamp(torch.round(mask.sum(1).float() * mask_prob), 1, N).long()
        pos = torch.multinomial(cand.float(), N, replacement=True)
        weights = (torch.arange(N)[None] < num[:, None]).float()
        pos = pos * weights.long()
        labels = torch.gather(ids, 1, pos) * weights.long()
        to_mask = (torch.rand(B, N) < 0.85) & (weights > 0)
        masked = ids.clone()
        masked.scatter_(1, torch.where(to_mask, pos, torch.zeros_like(pos)), MASK)
        masked[:, 0] = ids[:, 0]
        # 2. Generator: MLM on the slots only.
        gbias = key_bias.expand(B, self.gen[0].n, 1, T).reshape(B * self.gen[0].n, 1, T)
        h = self.encode(masked, types, gbias, self.gen_project, self.gen)
        h = torch.gather(h, 1, pos[:, :, None].expand(B, N, h.shape[-1]))
        h = self.gen_ln(F.gelu(self.gen_dense(h)).float())  # fp32 input, as in Layer.forward
        logits = h @ self.word.weight.T + self.gen_bias
        ce = F.cross_entropy(logits.reshape(B * N, V).float(), labels.reshape(-1), reduction="none")
        mlm = (ce * weights.reshape(-1)).sum() / (weights.sum() + 1e-6)
        # 3. Sampling (no gradient) and the fake ids.
        with torch.no_grad():
            u = torch.rand(B, N, V)
            sampled = torch.argmax(logits.float() - torch.log(-torch.log(u + 1e-9) + 1e-9), -1)
            fake = ids.clone()
            fake.scatter_(1, pos, sampled)
            fake[:, 0] = ids[:, 0]
            replaced = (fake != ids).float()
        # 4. Discriminator and BCE over the real tokens.
        dbias = key_bias.expand(B, heads, 1, T).reshape(B * heads, 1, T)
        x = self.encode(fake, types, dbias, self.disc_project, self.disc)
        z = self.disc_out(F.gelu(self.disc_dense(x))).squeeze(-1).float()
        m = mask.float()
        disc = (F.binary_cross_entropy_with_logits(z, replaced, reduction="none") * m).sum() / (m.sum() + 1e-6)
        return mlm + 50.0 * disc


def model_flops(B, T, N, layers=12, H=256, ffn=1024, E=128, gH=64, V=30522):
    """Training flops of one step of this model (the Electra above): 6 flops per multiply-add of every linear map
    over the rows it sees (forward, input gradient, weight gradient) and 12·T·width per token and layer for the
    attention products (QKᵀ and PV, forward and backward); embeddings, norms and softmax not counted. The
    generator's layers have width gH, heads of 64, ffn 4·gH; its head runs on the N masked slots only."""
    M = B * T
    mac = M * E * H + M * E * gH  # disc_project, gen_project
    mac += layers * M * (4 * H * H + 2 * H * ffn)  # discriminator layers (q|k|v, out, fc, proj)
    mac += layers * M * (4 * gH * gH + 2 * gH * 4 * gH)  # generator layers
    mac += M * H * H + M * H  # disc_dense, disc_out
    mac += B * N * (gH * E + E * V)  # gen_dense, the tied MLM head over the slots
    return 6.0 * mac + 12.0 * M * T * layers * (H + gH)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--no-dropout", action="store_true")
    ap.add_argument("--flops-only", action="store_true", help="print the model's GFLOP per step and stop")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    B, T = a.batch, a.seq
    N = int((0.15 + 0.005) * T)
    flops = model_flops(B, T, N)
    if a.flops_only:
        print("electra-small B=%d T=%d: %.3f GFLOP/step" % (B, T, flops / 1e9))
        return
    model = Electra(T, p=0.0 if a.no_dropout else 0.1)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, eps=1e-6, weight_decay=0.01, foreach=True)
    ids = torch.randint(1000, 30000, (B, T))
    ids[:, 0], ids[:, -1] = CLS, SEP
    mask = torch.ones(B, T, dtype=torch.long)
    types = torch.zeros(B, T, dtype=torch.long)
    times, cpus = [], []
    for step in range(a.steps):
        t0, c0 = time.perf_counter(), cpu_seconds()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = model(ids, mask, types, N)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        cpus.append(cpu_seconds() - c0)
        print("torch electra step %d: loss %.4f, %.1f ms, cpu %.1f s" % (step + 1, loss.item(), 1e3 * times[-1], cpus[-1]))
    tokens = B * T * (len(times) - 1)
    if tokens > 0:
        print("torch electra-small%s: %.0f tok/s, %.0f tok/cpu-s, %.3f GFLOP/step" % (
            "-bf16" if a.bf16 else "", tokens / sum(times[1:]), tokens / sum(cpus[1:]), flops / 1e9))


if __name__ == "__main__":
    main()
