#!/usr/bin/python3
# defines: the PyTorch peer of bench_generate: greedy decoding of a GPT-2 (HF layout, random weights) with a per-layer
# key/value cache as Hugging Face's GPT2LMHeadModel keeps it (past_key_values concatenated each step), fp32, no grad.
import argparse
import math
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    L, C, H, V, P = a.layers, a.hidden, a.heads, 50257, 1024
    hs = C // H
    wte = torch.randn(V, C) * 0.02
    wpe = torch.randn(P, C) * 0.02
    layers = []
    for _ in range(L):
        layers.append(dict(ln1=(torch.ones(C), torch.zeros(C)), attn=(torch.randn(C, 3 * C) * 0.02, torch.zeros(3 * C)),
                           proj=(torch.randn(C, C) * 0.02, torch.zeros(C)), ln2=(torch.ones(C), torch.zeros(C)),
                           fc=(torch.randn(C, 4 * C) * 0.02, torch.zeros(4 * C)),
                           fcproj=(torch.randn(4 * C, C) * 0.02, torch.zeros(C))))
    lnf = (torch.ones(C), torch.zeros(C))
    ln = torch.nn.functional.layer_norm
    gelu = lambda x: torch.nn.functional.gelu(x, approximate="tanh")

    def step(ids, pos0, cache):
        T = ids.shape[0]
        x = wte[ids] + wpe[pos0:pos0 + T]
        for l, w in enumerate(layers):
            h = ln(x, (C,), *w["ln1"], 1e-5)
            q, k, v = torch.addmm(w["attn"][1], h, w["attn"][0]).split(C, dim=-1)
            q = q.view(T, H, hs).transpose(0, 1)
            k = k.view(T, H, hs).transpose(0, 1)
            v = v.view(T, H, hs).transpose(0, 1)
            if cache[l] is not None:
                k = torch.cat([cache[l][0], k], dim=1)
                v = torch.cat([cache[l][1], v], dim=1)
            cache[l] = (k, v)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
            S = k.shape[1]
            mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(0, 1).reshape(T, C)
            x = x + torch.addmm(w["proj"][1], y, w["proj"][0])
            h = ln(x, (C,), *w["ln2"], 1e-5)
            x = x + torch.addmm(w["fcproj"][1], gelu(torch.addmm(w["fc"][1], h, w["fc"][0])), w["fcproj"][0])
        x = ln(x[-1:], (C,), *lnf, 1e-5)
        return (x @ wte.t())[0]

    prompt = torch.tensor([(i * 7919) % V for i in range(a.prompt)])
    times = []
    with torch.no_grad():
        for r in range(a.reps + 1):
            t0 = time.perf_counter()
            cache = [None] * L
            logits = step(prompt, 0, cache)
            pos = a.prompt
            for _ in range(a.new):
                nxt = int(torch.argmax(logits))
                if _ == a.new - 1:
                    break
                logits = step(torch.tensor([nxt]), pos, cache)
                pos += 1
            if r > 0:
                times.append(time.perf_counter() - t0)
    times.sort()
    s = times[len(times) // 2]
    print(f"torch kv-cache: {L} layers, hidden {C}, prompt {a.prompt}, {a.new} new tokens: {s:.3f} s, {a.new / s:.1f} tok/s")


if __name__ == "__main__":
    main()
