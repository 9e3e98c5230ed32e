# defines: an independent float64 PyTorch re-statement of Megatron's T5 (bert-t5-reference-notes §3.1), the reference
# of tests/model/test_t5_parity.cpp: shared learned word+position embedding, pre-LN encoder with a final LayerNorm,
# decoder layers (causal self-attention, cross-attention with a separate query and a fused key_value, MLP, three
# LayerNorms) with a final LayerNorm, head tied to the word embedding with a bias, lm loss over the decoder's loss
# mask. Masks as Megatron's T5Dataset builds them and pretrain_t5.py applies them: 2-D 0/1 matrices from the padding
# (enc_mask = real_i·real_j, dec_mask = real_i·real_j·[j <= i], enc_dec_mask = dec_real_i·enc_real_j), masked scores
# REPLACED by -10000. Fused weights read as Megatron lays them out: query_key_value rows [head][q|k|v][d], key_value
# rows [head][k|v][d].
#
# Usage: t5_reference.py --out FILE.safetensors [shapes...]
# Writes: param.<Megatron name> F32 (random, std 0.2, LayerNorm weights 1 + N(0, 0.2), random biases);
#   enc_tokens, enc_padding, dec_tokens, dec_padding, labels I32; loss_mask F32; loss F64 [1]; grad.<name> F64;
#   adamw_losses, lamb_losses F64 [steps] (as in bert_reference.py); hyper F64.
import argparse
import math

import torch

from reference_common import (Params, fresh, hyper, layer_norm as layer_norm_eps, linear, masked_lm_loss, normal,
                              optimizer_losses, padded_vocab, write_safetensors)

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--encoder-layers", type=int, default=2)
p.add_argument("--decoder-layers", type=int, default=2)
p.add_argument("--hidden", type=int, default=32)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--ffn", type=int, default=64)
p.add_argument("--enc-seq", type=int, default=12)
p.add_argument("--dec-seq", type=int, default=8)
p.add_argument("--max-positions", type=int, default=16)
p.add_argument("--vocab", type=int, default=300)
p.add_argument("--divisible-by", type=int, default=128)
p.add_argument("--batch", type=int, default=3)
p.add_argument("--gelu", choices=["tanh", "erf"], default="tanh")
p.add_argument("--eps", type=float, default=1e-5)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--seed", type=int, default=11)
a = p.parse_args()

torch.manual_seed(a.seed)
H, n, F, B, Te, Td = a.hidden, a.heads, a.ffn, a.batch, a.enc_seq, a.dec_seq
d = H // n
Vp = padded_vocab(a.vocab, a.divisible_by)

params = Params(H)
add_linear, add_ln = params.add_linear, params.add_ln

params["language_model.embedding.word_embeddings.weight"] = normal(Vp, H)
params["language_model.embedding.position_embeddings.weight"] = normal(a.max_positions, H)
for l in range(a.encoder_layers):
    h = f"language_model.encoder.layers.{l}."
    add_ln(h + "input_norm")
    add_linear(h + "self_attention.query_key_value", 3 * H, H)
    add_linear(h + "self_attention.dense", H, H)
    add_ln(h + "post_attention_norm")
    add_linear(h + "mlp.dense_h_to_4h", F, H)
    add_linear(h + "mlp.dense_4h_to_h", H, F)
add_ln("language_model.encoder.final_norm")
for l in range(a.decoder_layers):
    h = f"language_model.decoder.layers.{l}."
    add_ln(h + "input_norm")
    add_linear(h + "self_attention.query_key_value", 3 * H, H)
    add_linear(h + "self_attention.dense", H, H)
    add_ln(h + "post_attention_norm")
    add_linear(h + "inter_attention.query", H, H)
    add_linear(h + "inter_attention.key_value", 2 * H, H)
    add_linear(h + "inter_attention.dense", H, H)
    add_ln(h + "post_inter_attention_norm")
    add_linear(h + "mlp.dense_h_to_4h", F, H)
    add_linear(h + "mlp.dense_4h_to_h", H, F)
add_ln("language_model.decoder.final_norm")
params["lm_head.bias"] = normal(Vp)

# ---- one micro-batch with padding on both sides ------------------------------------------------------------------
enc_len = [Te - (2 * b) % (Te // 2) for b in range(B)]
dec_len = [Td - (3 * b + 1) % (Td // 2) for b in range(B)]
enc_tokens = torch.randint(1, a.vocab, (B, Te), dtype=torch.int32)
dec_tokens = torch.randint(1, a.vocab, (B, Td), dtype=torch.int32)
enc_padding = torch.zeros(B, Te, dtype=torch.int32)
dec_padding = torch.zeros(B, Td, dtype=torch.int32)
labels = torch.full((B, Td), -1, dtype=torch.int32)
loss_mask = torch.zeros(B, Td, dtype=torch.float32)
for b in range(B):
    enc_padding[b, : enc_len[b]] = 1
    dec_padding[b, : dec_len[b]] = 1
    enc_tokens[b, enc_len[b] :] = 0
    dec_tokens[b, dec_len[b] :] = 0
    labels[b, : dec_len[b]] = torch.randint(0, a.vocab, (dec_len[b],), dtype=torch.int32)
    loss_mask[b, : dec_len[b]] = 1.0
enc_real, dec_real = enc_padding.bool(), dec_padding.bool()
enc_mask = enc_real[:, :, None] & enc_real[:, None, :]  # [B,Te,Te]
causal = torch.tril(torch.ones(Td, Td, dtype=torch.bool))
dec_mask = dec_real[:, :, None] & dec_real[:, None, :] & causal
enc_dec_mask = dec_real[:, :, None] & enc_real[:, None, :]  # [B,Td,Te]


def gelu(x):
    if a.gelu == "tanh":
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)))
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def layer_norm(x, P, name):
    return layer_norm_eps(x, P, name, a.eps)


def heads(x, parts):  # [B,T,n·parts·d] in Megatron's per-head order → `parts` tensors [B,n,T,d]
    Bx, Tx = x.shape[0], x.shape[1]
    x = x.view(Bx, Tx, n, parts, d)
    return [x[:, :, :, i, :].transpose(1, 2) for i in range(parts)]


def attend(q, k, v, mask, P, dense):
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    scores = scores.masked_fill(~mask[:, None], -10000.0)
    ctx = (torch.softmax(scores, -1) @ v).transpose(1, 2)
    return linear(ctx.reshape(ctx.shape[0], ctx.shape[1], H), P, dense)


def self_attention(x, P, h, mask):
    q, k, v = heads(linear(x, P, h + "self_attention.query_key_value"), 3)
    return attend(q, k, v, mask, P, h + "self_attention.dense")


def cross_attention(x, memory, P, h):
    (q,) = heads(linear(x, P, h + "inter_attention.query"), 1)
    k, v = heads(linear(memory, P, h + "inter_attention.key_value"), 2)
    return attend(q, k, v, enc_dec_mask, P, h + "inter_attention.dense")


def mlp(x, P, h):
    return linear(gelu(linear(x, P, h + "mlp.dense_h_to_4h")), P, h + "mlp.dense_4h_to_h")


def lm_loss(P):
    W, pos = P["language_model.embedding.word_embeddings.weight"], P["language_model.embedding.position_embeddings.weight"]
    x = W[enc_tokens.long()] + pos[torch.arange(Te)]
    for l in range(a.encoder_layers):
        h = f"language_model.encoder.layers.{l}."
        x = x + self_attention(layer_norm(x, P, h + "input_norm"), P, h, enc_mask)
        x = x + mlp(layer_norm(x, P, h + "post_attention_norm"), P, h)
    memory = layer_norm(x, P, "language_model.encoder.final_norm")
    y = W[dec_tokens.long()] + pos[torch.arange(Td)]
    for l in range(a.decoder_layers):
        h = f"language_model.decoder.layers.{l}."
        y = y + self_attention(layer_norm(y, P, h + "input_norm"), P, h, dec_mask)
        y = y + cross_attention(layer_norm(y, P, h + "post_attention_norm"), memory, P, h)
        y = y + mlp(layer_norm(y, P, h + "post_inter_attention_norm"), P, h)
    y = layer_norm(y, P, "language_model.decoder.final_norm")
    logits = y @ W.T + P["lm_head.bias"]
    return masked_lm_loss(logits, labels, loss_mask)


f64 = torch.float64
P = fresh(params)
loss = lm_loss(P)
loss.backward()
out = {"loss": torch.tensor([loss.item()], dtype=f64)}
for k, v in params.items():
    out["param." + k] = v
    out["grad." + k] = P[k].grad.clone()

out["adamw_losses"] = optimizer_losses(params, lm_loss, a.steps, "adamw")
out["lamb_losses"] = optimizer_losses(params, lm_loss, a.steps, "lamb")
out["hyper"] = hyper()
out["enc_tokens"], out["enc_padding"], out["dec_tokens"], out["dec_padding"] = enc_tokens, enc_padding, dec_tokens, dec_padding
out["labels"], out["loss_mask"] = labels, loss_mask


write_safetensors(a.out, out)
