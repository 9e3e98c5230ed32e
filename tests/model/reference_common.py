# defines: what the float64 PyTorch references bert_reference.py and t5_reference.py share: random parameters in a
# state_dict (normal, Params; drawn from torch's global generator in call order), the padded vocabulary, LayerNorm
# and linear over named parameters, the masked-LM loss, the AdamW / LAMB loss histories and the safetensors writer.
import json
import math
import struct

import torch


def normal(*shape):
    return (torch.randn(*shape, dtype=torch.float64) * 0.2).float()


def padded_vocab(vocab, divisible_by):
    return (vocab + divisible_by - 1) // divisible_by * divisible_by


class Params(dict):
    """name -> F32 tensor in the order added (the state_dict order), drawn from torch's global generator."""

    def __init__(self, hidden):
        super().__init__()
        self.hidden = hidden

    def add_linear(self, name, out_f, in_f):
        self[name + ".weight"] = normal(out_f, in_f)
        self[name + ".bias"] = normal(out_f)

    def add_ln(self, name):
        self[name + ".weight"] = (1.0 + torch.randn(self.hidden, dtype=torch.float64) * 0.2).float()
        self[name + ".bias"] = normal(self.hidden)


def layer_norm(x, P, name, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * P[name + ".weight"] + P[name + ".bias"]


def linear(x, P, name):
    return x @ P[name + ".weight"].T + P[name + ".bias"]


def masked_lm_loss(logits, labels, loss_mask):
    """Σ CE·loss_mask / Σ loss_mask over the positions of logits [..., V]; label -1 picks nothing."""
    lse = torch.logsumexp(logits, -1)
    picked = torch.gather(logits, -1, labels.clamp(min=0).long()[..., None])[..., 0]
    ce = lse - torch.where(labels >= 0, picked, torch.zeros_like(picked))
    m = loss_mask.double()
    return (ce * m).sum() / m.sum()


def fresh(params):
    """The parameters in float64, as leaves that collect gradients."""
    return {k: v.double().clone().requires_grad_(True) for k, v in params.items()}


# AdamW and LAMB hyperparameters of the optimizer histories: lr each, beta1, beta2, eps each, weight decay.
ADAMW_LR, LAMB_LR, BETA1, BETA2, ADAMW_EPS, LAMB_EPS, WD = 2e-3, 2e-2, 0.9, 0.999, 1e-8, 1e-6, 0.01


def hyper():
    return torch.tensor([ADAMW_LR, LAMB_LR, BETA1, BETA2, ADAMW_EPS, LAMB_EPS, WD], dtype=torch.float64)


def optimizer_losses(params, loss_of, steps, kind):
    """The losses before each of `steps` steps from `params`: torch.optim.AdamW's formula (kind "adamw") or apex
    FusedLAMB's in AdamW mode (trust ratio only for decayed tensors), in float64; decay = 2-D tensors (Megatron's
    rule). A parameter the loss does not reach gets a zero gradient."""
    P = fresh(params)
    m = {k: torch.zeros_like(v) for k, v in P.items()}
    s = {k: torch.zeros_like(v) for k, v in P.items()}
    history = []
    for step in range(1, steps + 1):
        for v in P.values():
            v.grad = None
        loss = loss_of(P)
        loss.backward()
        for v in P.values():
            if v.grad is None:
                v.grad = torch.zeros_like(v)
        history.append(loss.item())
        bc1, bc2 = 1 - BETA1**step, 1 - BETA2**step
        with torch.no_grad():
            for k, v in P.items():
                g = v.grad
                decay = WD if v.dim() >= 2 else 0.0
                m[k] = BETA1 * m[k] + (1 - BETA1) * g
                s[k] = BETA2 * s[k] + (1 - BETA2) * g * g
                if kind == "adamw":  # torch.optim.AdamW
                    v.mul_(1 - ADAMW_LR * decay)
                    v.sub_(ADAMW_LR / bc1 * m[k] / (torch.sqrt(s[k]) / math.sqrt(bc2) + ADAMW_EPS))
                else:  # apex FusedLAMB, AdamW mode
                    u = (m[k] / bc1) / (torch.sqrt(s[k] / bc2) + LAMB_EPS) + decay * v
                    pn, un = float(torch.norm(v)), float(torch.norm(u))
                    ratio = pn / un if (decay != 0 and pn != 0 and un != 0) else 1.0
                    v.sub_(LAMB_LR * ratio * u)
    return torch.tensor(history, dtype=torch.float64)


def write_safetensors(path, tensors):
    """safetensors: an 8-byte little-endian header length, the JSON header (dtype, shape, offsets), the data."""
    names = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32"}
    header, blobs, offset = {}, [], 0
    for k, v in tensors.items():
        raw = v.detach().contiguous().numpy().tobytes()
        header[k] = {"dtype": names[v.dtype], "shape": list(v.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)
