# defines: an independent float64 PyTorch BERT written from bert-t5-reference-notes §1 (Megatron's pre-LN BERT with
# its query-or-key "replace by -10000" mask, and the original post-LN BERT with the additive -10000 key mask), the
# reference of tests/model/test_bert_parity.cpp.
#
# Usage: bert_reference.py --out FILE.safetensors [--flavour megatron|original] [--binary-head 0|1] [shapes...]
# Writes one safetensors file:
#   param.<HF name>   F32  random weights (std 0.2, LayerNorm weights 1 + N(0, 0.2), every bias random), in
#                          HF state_dict order; the model below computes with these f32 values in float64
#   tokens, types, padding, labels, is_random  I32  one micro-batch (rows padded at different lengths, ~15 % of the
#                          real positions labelled, labels -1 elsewhere; token 0 and the top ids appear too)
#   loss_mask         F32
#   loss, lm_loss, sop_loss  F64 [1]
#   grad.<HF name>    F64  d(loss)/d(param)
#   adamw_losses, lamb_losses  F64 [steps]  the losses before each of `steps` optimizer steps from the same weights:
#                          torch.optim.AdamW's formula and apex FusedLAMB's (trust ratio only for decayed tensors),
#                          both in float64; decay = 2-D tensors (Megatron's rule); hyperparameters in "hyper"
#   hyper             F64  [adamw lr, lamb lr, beta1, beta2, adamw eps, lamb eps, weight decay]
import argparse
import math

import torch

from reference_common import (Params, fresh, hyper, layer_norm as layer_norm_eps, linear, masked_lm_loss, normal,
                              optimizer_losses, padded_vocab, write_safetensors)

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--flavour", choices=["megatron", "original"], default="megatron")
p.add_argument("--binary-head", type=int, default=1)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--hidden", type=int, default=32)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--ffn", type=int, default=64)
p.add_argument("--seq", type=int, default=16)
p.add_argument("--max-positions", type=int, default=24)
p.add_argument("--vocab", type=int, default=300)
p.add_argument("--divisible-by", type=int, default=128)
p.add_argument("--batch", type=int, default=3)
p.add_argument("--mlp-gelu", choices=["tanh", "erf"], default="tanh")
p.add_argument("--head-gelu", choices=["tanh", "erf"], default="erf")
p.add_argument("--eps", type=float, default=1e-5)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--seed", type=int, default=7)
a = p.parse_args()

torch.manual_seed(a.seed)
megatron = a.flavour == "megatron"
binary = bool(a.binary_head)
types_used = binary or not megatron
H, n, F, L, B, T = a.hidden, a.heads, a.ffn, a.layers, a.batch, a.seq
d = H // n
Vp = padded_vocab(a.vocab, a.divisible_by)

# ---- parameters, HF names and order ----------------------------------------------------------------------------
params = Params(H)
add_linear, add_ln = params.add_linear, params.add_ln

params["bert.embeddings.word_embeddings.weight"] = normal(Vp, H)
params["bert.embeddings.position_embeddings.weight"] = normal(a.max_positions, H)
# Megatron without the binary head has no token-type table; HF's class needs one, so it is held as zeros.
params["bert.embeddings.token_type_embeddings.weight"] = normal(2, H) if types_used else torch.zeros(2, H)
if not megatron:
    add_ln("bert.embeddings.LayerNorm")
for l in range(L):
    h = f"bert.encoder.layer.{l}."
    if megatron:
        add_ln(h + "attention.ln")
    for x in ("query", "key", "value"):
        add_linear(h + "attention.self." + x, H, H)
    add_linear(h + "attention.output.dense", H, H)
    if megatron:
        add_ln(h + "ln")
    else:
        add_ln(h + "attention.output.LayerNorm")
    add_linear(h + "intermediate.dense", F, H)
    add_linear(h + "output.dense", H, F)
    if not megatron:
        add_ln(h + "output.LayerNorm")
if megatron:
    add_ln("bert.encoder.ln")
if binary:
    add_linear("bert.pooler.dense", H, H)
params["cls.predictions.bias"] = normal(Vp)
add_linear("cls.predictions.transform.dense", H, H)
add_ln("cls.predictions.transform.LayerNorm")
if binary:
    add_linear("cls.seq_relationship", 2, H)

# ---- one micro-batch -----------------------------------------------------------------------------------------------
lengths = [T - (3 * b) % (T // 2) for b in range(B)]
tokens = torch.randint(0, a.vocab, (B, T), dtype=torch.int32)
tokens[0, 1] = 0
tokens[-1, 2] = a.vocab - 1
types = torch.zeros(B, T, dtype=torch.int32)
padding = torch.zeros(B, T, dtype=torch.int32)
labels = torch.full((B, T), -1, dtype=torch.int32)
loss_mask = torch.zeros(B, T, dtype=torch.float32)
for b in range(B):
    padding[b, : lengths[b]] = 1
    types[b, lengths[b] // 2 : lengths[b]] = 1
    tokens[b, lengths[b] :] = 0
    for t in range(1, lengths[b]):
        if torch.rand(()) < 0.2 or t == 1:
            labels[b, t] = int(torch.randint(0, a.vocab, ()))
            loss_mask[b, t] = 1.0
is_random = torch.randint(0, 2, (B,), dtype=torch.int32)


# ---- the model -----------------------------------------------------------------------------------------------------
def gelu(x, kind):
    if kind == "tanh":
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def layer_norm(x, P, name):
    return layer_norm_eps(x, P, name, a.eps)


def attention(x, P, name_self, name_out):
    q = linear(x, P, name_self + ".query").view(B, T, n, d).transpose(1, 2)
    k = linear(x, P, name_self + ".key").view(B, T, n, d).transpose(1, 2)
    v = linear(x, P, name_self + ".value").view(B, T, n, d).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # [B,n,T,T]
    real = padding.bool()
    if megatron:  # Megatron: REPLACED by -10000 where the query or the key is padding
        masked = ~(real[:, None, :, None] & real[:, None, None, :])
        scores = scores.masked_fill(masked, -10000.0)
    else:  # Google/DLE: -10000 ADDED on padding keys
        scores = scores + (1.0 - real[:, None, None, :].double()) * -10000.0
    probs = torch.softmax(scores, -1)
    ctx = (probs @ v).transpose(1, 2).reshape(B, T, H)
    return linear(ctx, P, name_out)


def mlp(x, P, h):
    return linear(gelu(linear(x, P, h + "intermediate.dense"), a.mlp_gelu), P, h + "output.dense")


def losses(P):
    pos = torch.arange(T)
    x = P["bert.embeddings.word_embeddings.weight"][tokens.long()] + P["bert.embeddings.position_embeddings.weight"][pos]
    if types_used:
        x = x + P["bert.embeddings.token_type_embeddings.weight"][types.long()]
    if not megatron:
        x = layer_norm(x, P, "bert.embeddings.LayerNorm")
    for l in range(L):
        h = f"bert.encoder.layer.{l}."
        if megatron:
            x = x + attention(layer_norm(x, P, h + "attention.ln"), P, h + "attention.self", h + "attention.output.dense")
            x = x + mlp(layer_norm(x, P, h + "ln"), P, h)
        else:
            x = layer_norm(x + attention(x, P, h + "attention.self", h + "attention.output.dense"), P,
                           h + "attention.output.LayerNorm")
            x = layer_norm(x + mlp(x, P, h), P, h + "output.LayerNorm")
    if megatron:
        x = layer_norm(x, P, "bert.encoder.ln")
    t = layer_norm(gelu(linear(x, P, "cls.predictions.transform.dense"), a.head_gelu), P,
                   "cls.predictions.transform.LayerNorm")
    logits = t @ P["bert.embeddings.word_embeddings.weight"].T + P["cls.predictions.bias"]  # [B,T,Vp]
    lm = masked_lm_loss(logits, labels, loss_mask)
    sop = torch.zeros((), dtype=torch.float64)
    if binary:
        pooled = torch.tanh(linear(x[:, 0], P, "bert.pooler.dense"))
        bl = linear(pooled, P, "cls.seq_relationship")
        sop = torch.nn.functional.cross_entropy(bl, is_random.long(), ignore_index=-1)
    return lm, sop


P = fresh(params)
lm, sop = losses(P)
loss = lm + sop
loss.backward()
f64 = torch.float64
out = {"loss": torch.tensor([loss.item()], dtype=f64), "lm_loss": torch.tensor([lm.item()], dtype=f64),
       "sop_loss": torch.tensor([sop.item()], dtype=f64)}
for k, v in params.items():
    out["param." + k] = v
    out["grad." + k] = P[k].grad.clone() if P[k].grad is not None else torch.zeros_like(P[k]).detach()

# ---- optimizer steps (the unused zero token-type table gets a zero gradient) ---------------------------------------
def total_loss(P):
    lm, sop = losses(P)
    return lm + sop


out["adamw_losses"] = optimizer_losses(params, total_loss, a.steps, "adamw")
out["lamb_losses"] = optimizer_losses(params, total_loss, a.steps, "lamb")
out["hyper"] = hyper()
out["tokens"], out["types"], out["padding"], out["labels"] = tokens, types, padding, labels
out["is_random"], out["loss_mask"] = is_random, loss_mask


write_safetensors(a.out, out)
