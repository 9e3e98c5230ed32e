#!/usr/bin/python3
# defines: an independent float64 PyTorch GPT-2 (Hugging Face tensor names and layouts) that writes weights,
# tokens, logits, loss, every parameter gradient and the losses of N AdamW steps to one binary file, which
# tests/model/test_gpt2_parity.cpp compares lmforge's C++ model against (llm.c's test_gpt2 approach).
#
# The model is plain torch code written from the GPT-2 definition, not lmforge's: pre-LN blocks, GELU tanh
# approximation, causal attention with heads as column blocks of q|k|v, tied LM head over the padded
# vocabulary (padded columns take part in the softmax, as Megatron), mean cross-entropy over B*T.
#
# File format (little-endian):
#   int32[16]   header: magic 0x32545047 ("GPT2"), version 1, num_layers, hidden, heads, T, max_positions,
#               vocab_size, padded_vocab, B, adam_steps, 0, 0, 0, 0, 0
#   float64[5]  AdamW lr, beta1, beta2, eps, weight_decay (decay only on matrices: wte, wpe, *.weight of
#               c_attn/c_proj/c_fc; not on biases or LayerNorm)
#   int32[B*T]  tokens;  int32[B*T] targets
#   float32     every parameter, in the table order below, each in its HF layout (the initial weights)
#   float64[B*T*padded_vocab] logits;  float64 loss
#   float64     every parameter's gradient of the mean loss, same order and layouts
#   float64[adam_steps]  loss before each AdamW step k = 0..adam_steps-1 (same batch every step); step 0's loss is
#               the loss above
# Parameter order: transformer.wte.weight [Vp,C], transformer.wpe.weight [P,C], for each layer i
# transformer.h.i.{ln_1.weight, ln_1.bias, attn.c_attn.weight [C,3C], attn.c_attn.bias, attn.c_proj.weight [C,C],
# attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight [C,4C], mlp.c_fc.bias, mlp.c_proj.weight [4C,C],
# mlp.c_proj.bias}, transformer.ln_f.weight, transformer.ln_f.bias.
import argparse
import math
import struct

import torch

MAGIC = 0x32545047


def param_table(L, C, Vp, P):
    t = [("transformer.wte.weight", (Vp, C)), ("transformer.wpe.weight", (P, C))]
    for i in range(L):
        p = f"transformer.h.{i}."
        t += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
              (p + "attn.c_attn.weight", (C, 3 * C)), (p + "attn.c_attn.bias", (3 * C,)),
              (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
              (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
              (p + "mlp.c_fc.weight", (C, 4 * C)), (p + "mlp.c_fc.bias", (4 * C,)),
              (p + "mlp.c_proj.weight", (4 * C, C)), (p + "mlp.c_proj.bias", (C,))]
    t += [("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,))]
    return t


def layernorm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_loss(p, tokens, targets, L, H):
    B, T = tokens.shape
    wte = p["transformer.wte.weight"]
    C = wte.shape[1]
    hs = C // H
    x = wte[tokens] + p["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(L):
        g = lambda n: p[f"transformer.h.{i}.{n}"]
        h = layernorm(x, g("ln_1.weight"), g("ln_1.bias"))
        qkv = h @ g("attn.c_attn.weight") + g("attn.c_attn.bias")  # Conv1D: [in,out]
        q, k, v = qkv.split(C, dim=-1)
        q = q.view(B, T, H, hs).transpose(1, 2)
        k = k.view(B, T, H, hs).transpose(1, 2)
        v = v.view(B, T, H, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ g("attn.c_proj.weight") + g("attn.c_proj.bias")
        h = layernorm(x, g("ln_2.weight"), g("ln_2.bias"))
        h = gelu_tanh(h @ g("mlp.c_fc.weight") + g("mlp.c_fc.bias"))
        x = x + h @ g("mlp.c_proj.weight") + g("mlp.c_proj.bias")
    x = layernorm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"])
    logits = x @ wte.t()  # tied head over all padded rows
    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
    return logits, loss


def is_decayed(name):
    return name.endswith(".weight") and ".ln_" not in name


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--max-positions", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=500)
    ap.add_argument("--divisible-by", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--adam-steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(a.seed)
    L, C, H, T, B, V = a.layers, a.hidden, a.heads, a.seq, a.batch, a.vocab
    Vp = (V + a.divisible_by - 1) // a.divisible_by * a.divisible_by
    table = param_table(L, C, Vp, a.max_positions)

    # Random weights drawn in float32 (so the C++ side holds them exactly), then computed in float64. Biases and
    # LayerNorm parameters get random values too, so their gradients and uses are really exercised.
    params32 = {}
    for name, shape in table:
        if ".ln_" in name and name.endswith(".weight"):
            w = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif name.endswith(".bias"):
            w = 0.02 * torch.randn(shape, generator=gen)
        elif "c_proj.weight" in name:
            w = 0.02 / math.sqrt(2 * L) * torch.randn(shape, generator=gen)
        else:
            w = 0.02 * torch.randn(shape, generator=gen)
        params32[name] = w.float()
    tokens = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)

    p = {n: params32[n].double().requires_grad_(True) for n, _ in table}
    logits, loss = gpt2_loss(p, tokens, targets, L, H)
    loss.backward()
    grads = {n: p[n].grad.detach().clone() for n, _ in table}

    # AdamW steps from the same start on the same batch, Megatron's decay groups.
    decay = [p[n] for n, _ in table if is_decayed(n)]
    no_decay = [p[n] for n, _ in table if not is_decayed(n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    adam_losses = []
    for _ in range(a.adam_steps):
        opt.zero_grad()
        _, l = gpt2_loss(p, tokens, targets, L, H)
        l.backward()
        opt.step()
        adam_losses.append(l.item())

    with open(a.out, "wb") as f:
        f.write(struct.pack("<16i", MAGIC, 1, L, C, H, T, a.max_positions, V, Vp, B, a.adam_steps, 0, 0, 0, 0, 0))
        f.write(struct.pack("<5d", a.lr, a.beta1, a.beta2, a.eps, a.weight_decay))
        f.write(tokens.to(torch.int32).numpy().tobytes())
        f.write(targets.to(torch.int32).numpy().tobytes())
        for n, _ in table:
            f.write(params32[n].contiguous().numpy().astype("<f4").tobytes())
        f.write(logits.detach().contiguous().numpy().astype("<f8").tobytes())
        f.write(struct.pack("<d", loss.item()))
        for n, _ in table:
            f.write(grads[n].contiguous().numpy().astype("<f8").tobytes())
        f.write(struct.pack(f"<{a.adam_steps}d", *adam_losses))


if __name__ == "__main__":
    main()
