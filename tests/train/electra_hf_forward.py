# defines: a float64 PyTorch statement of Hugging Face transformers' ElectraForPreTraining and ElectraForMaskedLM
# forward passes (models/electra/modeling_electra.py, eval mode: ElectraEmbeddings, the post-LN BertLayer-style
# ElectraLayer, ElectraDiscriminatorPredictions, ElectraGeneratorPredictions + generator_lm_head), loading each
# network the way from_pretrained does: config.json's fields and model.safetensors' tensors under HF's names (a
# tensor that is missing or has the wrong shape is an error; generator_lm_head.weight is tied to the word
# embeddings). It does not use lmforge. Given `lmforge check electra-step`'s output (fake_ids, masked_ids, the
# slots, disc_logits, gen_logits) and its batch (input_mask, segment_ids), it recomputes both networks' logits and
# exits 1 when they differ from lmforge's beyond --tolerance (largest absolute difference over the largest |logit|).
import argparse
import json
import math
import struct
import sys

import torch

F64 = torch.float64
DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(raw[base + a:base + b]), dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return out


def load(directory):
    with open(directory + "/config.json") as f:
        config = json.load(f)
    if config.get("model_type") != "electra":
        raise SystemExit(directory + ": model_type is not electra")
    weights = {k: v.to(F64) for k, v in read_safetensors(directory + "/model.safetensors").items()}
    return config, weights


class Net:
    def __init__(self, config, weights, architecture):
        self.c, self.w, self.used = config, weights, set()
        self.architecture = architecture

    def get(self, name, shape):
        if name not in self.w:
            raise SystemExit("%s: missing tensor %s" % (self.architecture, name))
        t = self.w[name]
        if list(t.shape) != list(shape):
            raise SystemExit("%s: %s has shape %s, expected %s" % (self.architecture, name, list(t.shape), shape))
        self.used.add(name)
        return t

    def linear(self, x, name, n_in, n_out):
        return x @ self.get(name + ".weight", [n_out, n_in]).T + self.get(name + ".bias", [n_out])

    def layer_norm(self, x, name, n):
        eps = self.c["layer_norm_eps"]
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * self.get(name + ".weight", [n]) + self.get(name + ".bias", [n])

    def act(self, x, name):
        if name == "gelu":
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        if name == "gelu_new":
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
        raise SystemExit("unknown activation " + name)

    # ElectraModel: embeddings (word + position + token type, LayerNorm), embeddings_project when E != hidden,
    # then the encoder; attention masks padded keys with the dtype's minimum.
    def electra(self, ids, mask, types):
        c = self.c
        V, E, H = c["vocab_size"], c["embedding_size"], c["hidden_size"]
        B, L = ids.shape
        word = self.get("electra.embeddings.word_embeddings.weight", [V, E])
        pos = self.get("electra.embeddings.position_embeddings.weight", [c["max_position_embeddings"], E])
        typ = self.get("electra.embeddings.token_type_embeddings.weight", [c["type_vocab_size"], E])
        x = word[ids] + pos[torch.arange(L)][None] + typ[types]
        x = self.layer_norm(x, "electra.embeddings.LayerNorm", E)
        if E != H:
            x = self.linear(x, "electra.embeddings_project", E, H)
        heads = c["num_attention_heads"]
        d = H // heads
        bias = (1.0 - mask.to(F64))[:, None, None, :] * torch.finfo(F64).min
        for i in range(c["num_hidden_layers"]):
            p = "electra.encoder.layer.%d." % i
            def split(t):
                return t.view(B, L, heads, d).transpose(1, 2)
            q = split(self.linear(x, p + "attention.self.query", H, H))
            k = split(self.linear(x, p + "attention.self.key", H, H))
            v = split(self.linear(x, p + "attention.self.value", H, H))
            scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias
            ctx = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, L, H)
            a = self.layer_norm(self.linear(ctx, p + "attention.output.dense", H, H) + x, p + "attention.output.LayerNorm", H)
            F = c["intermediate_size"]
            h = self.act(self.linear(a, p + "intermediate.dense", H, F), c["hidden_act"])
            x = self.layer_norm(self.linear(h, p + "output.dense", F, H) + a, p + "output.LayerNorm", H)
        return x

    # ElectraForPreTraining: discriminator_predictions.dense -> hidden_act -> dense_prediction, squeezed.
    def discriminator_logits(self, ids, mask, types):
        H = self.c["hidden_size"]
        x = self.electra(ids, mask, types)
        x = self.act(self.linear(x, "discriminator_predictions.dense", H, H), self.c["hidden_act"])
        return self.linear(x, "discriminator_predictions.dense_prediction", H, 1).squeeze(-1)

    # ElectraForMaskedLM: generator_predictions (dense -> gelu, hard-coded -> LayerNorm), generator_lm_head (tied).
    def generator_logits(self, ids, mask, types):
        c = self.c
        H, E, V = c["hidden_size"], c["embedding_size"], c["vocab_size"]
        x = self.electra(ids, mask, types)
        x = self.act(self.linear(x, "generator_predictions.dense", H, E), "gelu")
        x = self.layer_norm(x, "generator_predictions.LayerNorm", E)
        head = self.w.get("generator_lm_head.weight", self.w["electra.embeddings.word_embeddings.weight"])
        self.used.add("generator_lm_head.weight")
        return x @ head.T + self.get("generator_lm_head.bias", [V])

    def check_all_used(self):
        unused = sorted(set(self.w) - self.used)
        if unused:
            raise SystemExit("%s: tensors the model does not have: %s" % (self.architecture, unused))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--discriminator", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--step", required=True, help="lmforge check electra-step's output")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    a = ap.parse_args()
    batch, step = read_safetensors(a.batch), read_safetensors(a.step)
    mask = batch["input_mask"].to(torch.int64)
    types = batch["segment_ids"].to(torch.int64)
    failed = False

    c, w = load(a.discriminator)
    if c.get("architectures") != ["ElectraForPreTraining"]:
        raise SystemExit(a.discriminator + ": architectures is not ElectraForPreTraining")
    disc = Net(c, w, "ElectraForPreTraining")
    got = disc.discriminator_logits(step["fake_ids"].to(torch.int64), mask, types)
    disc.check_all_used()
    want = step["disc_logits"].to(F64)
    real = mask.bool()
    d = (got - want)[real].abs().max().item()
    scale = want[real].abs().max().item()
    print("discriminator logits: max abs difference %.3g over %d tokens, largest |logit| %.3g: relative %.3g"
          % (d, int(real.sum()), scale, d / scale))
    failed |= not d <= a.tolerance * scale

    c, w = load(a.generator)
    if c.get("architectures") != ["ElectraForMaskedLM"]:
        raise SystemExit(a.generator + ": architectures is not ElectraForMaskedLM")
    gen = Net(c, w, "ElectraForMaskedLM")
    logits = gen.generator_logits(step["masked_ids"].to(torch.int64), mask, types)
    gen.check_all_used()
    positions = step["masked_lm_positions"].to(torch.int64)
    B, N = positions.shape
    gathered = logits[torch.arange(B)[:, None], positions]
    want = step["gen_logits"].to(F64)
    d = (gathered - want).abs().max().item()
    scale = want.abs().max().item()
    print("generator logits: max abs difference %.3g over %d slots x %d, largest |logit| %.3g: relative %.3g"
          % (d, B * N, want.shape[-1], scale, d / scale))
    failed |= not d <= a.tolerance * scale
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
