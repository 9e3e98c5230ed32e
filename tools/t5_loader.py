#!/usr/bin/python3
# defines: a short PyTorch loader of lmforge's Megatron-T5 checkpoints (there is no Hugging Face class for this
# model: HF's T5 has relative position buckets, RMSNorm and no biases) and greedy span filling with it, in float64.
# Written from the architecture (../shared/docs/bert-t5-reference-notes §3.1) and the checkpoint's documented names
# (README, src/model/t5.h), independently of lmforge's code: config.json gives the shapes, model.safetensors (parsed
# here from its layout: 8-byte header length, JSON header, raw tensors) the weights.
#
# usage: t5_loader.py --checkpoint PATH --vocab-file vocab.txt --vocab-extra-ids N --prompt-ids "id id ..."
#                     [--max-new-tokens 64] [--ignore-eos]
#   PATH: a --save directory (its latest_checkpointed_iteration.txt), an iteration directory, or a model.safetensors
#   with config.json beside it. Prints one JSON line: {"bos", "eos", "sentinels" (the first 4), "generated" (greedy
#   ids after [BOS], [EOS] included when reached), "min_margin" (smallest top-1 − top-2 logit gap over the steps)}.
import argparse
import json
import math
import os
import struct

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32}


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float64))
    return out


def checkpoint_files(path):
    if os.path.isdir(path):
        pointer = os.path.join(path, "latest_checkpointed_iteration.txt")
        if os.path.exists(pointer):
            it = open(pointer).read().strip()
            path = os.path.join(path, "release" if it == "release" else "iter_%07d" % int(it))
        return os.path.join(path, "model.safetensors"), os.path.join(path, "config.json")
    return path, os.path.join(os.path.dirname(path) or ".", "config.json")


def megatron_bert_vocab(vocab_file, extra_ids):
    """Megatron's BertWordPieceTokenizer ids: vocab.txt line i (stripped) is id i; then [BOS], [EOS] and
    <extra_id_0..N-1> are added when absent, each with id len(inv_vocab) at the time."""
    vocab, inv = {}, {}
    for i, line in enumerate(open(vocab_file, encoding="utf-8")):
        tok = line.strip()
        vocab[tok] = i
        inv[i] = tok
    for tok in ["[BOS]", "[EOS]"] + ["<extra_id_%d>" % i for i in range(extra_ids)]:
        if tok not in vocab:
            vocab[tok] = len(inv)
            inv[len(inv)] = tok
    return vocab, len(inv)


class MegatronT5:
    def __init__(self, config, P):
        assert config["model_type"] == "lmforge-megatron-t5", config["model_type"]
        self.P = P
        self.H = config["hidden_size"]
        self.n = config["num_attention_heads"]
        self.d = self.H // self.n
        self.Le = config["encoder_num_layers"]
        self.Ld = config["decoder_num_layers"]
        self.eps = config["layer_norm_eps"]
        self.vocab = config["lmforge_vocab_size"]  # real ids; the padded rows are never candidates
        self.tanh_gelu = config["hidden_act"] == "gelu_new"

    def ln(self, x, name):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.P[name + ".weight"] + self.P[name + ".bias"]

    def linear(self, x, name):
        return x @ self.P[name + ".weight"].T + self.P[name + ".bias"]

    def gelu(self, x):
        if self.tanh_gelu:
            return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)))
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))

    def split(self, x, parts):  # [T, n·parts·d], Megatron's per-head rows → `parts` tensors [n, T, d]
        x = x.view(x.shape[0], self.n, parts, self.d)
        return [x[:, :, i, :].transpose(0, 1) for i in range(parts)]

    def attend(self, q, k, v, causal, dense):
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d)
        if causal:
            T = scores.shape[-1]
            scores = scores.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), -10000.0)
        ctx = (torch.softmax(scores, -1) @ v).transpose(0, 1)
        return self.linear(ctx.reshape(ctx.shape[0], self.H), dense)

    def mlp(self, x, h):
        return self.linear(self.gelu(self.linear(x, h + "mlp.dense_h_to_4h")), h + "mlp.dense_4h_to_h")

    def embed(self, ids):
        W = self.P["language_model.embedding.word_embeddings.weight"]
        pos = self.P["language_model.embedding.position_embeddings.weight"]
        return W[torch.tensor(ids)] + pos[torch.arange(len(ids))]

    def encode(self, ids):
        x = self.embed(ids)
        for l in range(self.Le):
            h = "language_model.encoder.layers.%d." % l
            q, k, v = self.split(self.linear(self.ln(x, h + "input_norm"), h + "self_attention.query_key_value"), 3)
            x = x + self.attend(q, k, v, False, h + "self_attention.dense")
            x = x + self.mlp(self.ln(x, h + "post_attention_norm"), h)
        return self.ln(x, "language_model.encoder.final_norm")

    def decode_logits(self, memory, ids):  # logits [len(ids), vocab] of the decoder over its whole input
        y = self.embed(ids)
        for l in range(self.Ld):
            h = "language_model.decoder.layers.%d." % l
            q, k, v = self.split(self.linear(self.ln(y, h + "input_norm"), h + "self_attention.query_key_value"), 3)
            y = y + self.attend(q, k, v, True, h + "self_attention.dense")
            (q,) = self.split(self.linear(self.ln(y, h + "post_attention_norm"), h + "inter_attention.query"), 1)
            k, v = self.split(self.linear(memory, h + "inter_attention.key_value"), 2)
            y = y + self.attend(q, k, v, False, h + "inter_attention.dense")
            y = y + self.mlp(self.ln(y, h + "post_inter_attention_norm"), h)
        y = self.ln(y, "language_model.decoder.final_norm")
        W = self.P["language_model.embedding.word_embeddings.weight"]
        return (y @ W.T + self.P["lm_head.bias"])[:, : self.vocab]


def greedy(model, prompt, bos, eos, max_new, stop_at_eos=True):
    memory = model.encode(prompt)
    dec, out, margin = [bos], [], math.inf
    for _ in range(max_new):
        logits = model.decode_logits(memory, dec)[-1]
        top = torch.topk(logits, 2)
        margin = min(margin, float(top.values[0] - top.values[1]))
        nxt = int(torch.argmax(logits))  # the first maximum: the lowest id on ties, as lmforge's greedy
        out.append(nxt)
        if stop_at_eos and nxt == eos:
            break
        dec.append(nxt)
    return out, margin


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--vocab-file", required=True)
    p.add_argument("--vocab-extra-ids", type=int, required=True)
    p.add_argument("--prompt-ids", required=True, help="the encoder's input ids, separated by spaces or commas")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--ignore-eos", action="store_true")
    a = p.parse_args()
    weights, config_file = checkpoint_files(a.checkpoint)
    config = json.load(open(config_file))
    model = MegatronT5(config, read_safetensors(weights))
    vocab, size = megatron_bert_vocab(a.vocab_file, a.vocab_extra_ids)
    if size != model.vocab:
        raise SystemExit("the tokenizer has %d ids, the checkpoint %d" % (size, model.vocab))
    prompt = [int(t) for t in a.prompt_ids.replace(",", " ").split()]
    out, margin = greedy(model, prompt, vocab["[BOS]"], vocab["[EOS]"], a.max_new_tokens, not a.ignore_eos)
    sentinels = [vocab["<extra_id_%d>" % i] for i in range(min(4, a.vocab_extra_ids))]
    print(json.dumps({"bos": vocab["[BOS]"], "eos": vocab["[EOS]"], "sentinels": sentinels, "generated": out,
                      "min_margin": margin}))


if __name__ == "__main__":
    main()
