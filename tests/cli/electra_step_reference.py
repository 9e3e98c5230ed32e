# defines: an independent float64 PyTorch statement of one ELECTRA pretraining step (electra-reference-notes §2-§3:
# shared embeddings and embedding LayerNorm, post-LN BERT generator and discriminator with their projections, the
# masking, Gumbel sampling and fake data from given uniform draws, mlm + disc_weight·disc and its gradients), written
# as the shared reference step's files: meta.json, weights/batch/results/grads.safetensors in --out DIR. It does not
# use lmforge; tests/cli/test_electra_step.cpp compares `lmforge check electra-step` against it. With --replay DIR
# it recomputes a reference directory instead (the shared step: it agrees to 1e-12) and exits 1 on a difference.
import argparse
import json
import math
import os
import struct

import torch

F64 = torch.float64


def write_safetensors(path, tensors):
    names = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
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


def layer_norm(x, P, name, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * P[name + ".weight"] + P[name + ".bias"]


def dense(x, P, name):
    return x @ P[name + ".weight"].T + P[name + ".bias"]


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def encoder(x, P, prefix, layers, heads, mask, eps):
    B, L, H = x.shape
    d = H // heads
    bias = (1.0 - mask.to(F64))[:, None, None, :] * -10000.0  # on padded keys
    for l in range(layers):
        h = f"{prefix}encoder.layer.{l}."
        def split(t):
            return t.view(B, L, heads, d).transpose(1, 2)
        q = split(dense(x, P, h + "attention.self.query"))
        k = split(dense(x, P, h + "attention.self.key"))
        v = split(dense(x, P, h + "attention.self.value"))
        s = q @ k.transpose(-1, -2) / math.sqrt(d) + bias
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, L, H)
        x = layer_norm(x + dense(a, P, h + "attention.output.dense"), P, h + "attention.output.LayerNorm", eps)
        f = dense(gelu(dense(x, P, h + "intermediate.dense")), P, h + "output.dense")
        x = layer_norm(x + f, P, h + "output.LayerNorm", eps)
    return x


def embed(ids, types, P, eps):
    L = ids.shape[1]
    e = P["electra.embeddings.word_embeddings.weight"][ids] + P["electra.embeddings.position_embeddings.weight"][
        torch.arange(L)][None] + P["electra.embeddings.token_type_embeddings.weight"][types]
    return layer_norm(e, P, "electra.embeddings.LayerNorm", eps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--replay", help="check this statement against a reference directory instead (exit 1 if not)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--vocab", type=int, default=400)
    ap.add_argument("--embedding", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--gen-hidden", type=int, default=32)
    ap.add_argument("--gen-layers", type=int, default=1)
    ap.add_argument("--gen-heads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=3)
    ap.add_argument("--seq", type=int, default=40)
    ap.add_argument("--mask-prob", type=float, default=0.25)
    a = ap.parse_args()
    if a.replay:
        return replay(a.replay)
    if not a.out:
        ap.error("--out or --replay is required")
    torch.manual_seed(a.seed)
    V, E, H, gH, Lmax = a.vocab, a.embedding, a.hidden, a.gen_hidden, 64
    eps, CLS, SEP, MASK = 1e-12, 101, 102, 103
    cfg = dict(vocab_size=V, embedding_size=E, hidden_size=H, num_layers=a.layers, heads=a.heads,
               intermediate=4 * H, gen_hidden=gH, gen_layers=a.gen_layers, gen_heads=a.gen_heads,
               gen_intermediate=4 * gH, max_position=Lmax, type_vocab=2, eps=eps, seq_len=a.seq,
               mask_prob=a.mask_prob, max_pred=int((a.mask_prob + 0.005) * a.seq), disc_weight=50.0,
               gen_weight=1.0, temperature=1.0, init_range=0.02)
    N = cfg["max_pred"]

    P = {}
    def lin(name, o, i):
        P[name + ".weight"] = torch.randn(o, i, dtype=F64) * 0.05
        P[name + ".bias"] = torch.randn(o, dtype=F64) * 0.05
    def ln(name, c):
        P[name + ".weight"] = 1.0 + torch.randn(c, dtype=F64) * 0.1
        P[name + ".bias"] = torch.randn(c, dtype=F64) * 0.1
    P["electra.embeddings.word_embeddings.weight"] = torch.randn(V, E, dtype=F64) * 0.5
    P["electra.embeddings.position_embeddings.weight"] = torch.randn(Lmax, E, dtype=F64) * 0.1
    P["electra.embeddings.token_type_embeddings.weight"] = torch.randn(2, E, dtype=F64) * 0.1
    ln("electra.embeddings.LayerNorm", E)
    def enc(prefix, layers, h):
        if E != h:
            lin(prefix + "embeddings_project", h, E)
        for l in range(layers):
            p = f"{prefix}encoder.layer.{l}."
            for n in ("query", "key", "value"):
                lin(p + "attention.self." + n, h, h)
            lin(p + "attention.output.dense", h, h)
            ln(p + "attention.output.LayerNorm", h)
            lin(p + "intermediate.dense", 4 * h, h)
            lin(p + "output.dense", h, 4 * h)
            ln(p + "output.LayerNorm", h)
    enc("electra.", a.layers, H)
    lin("discriminator_predictions.dense", H, H)
    lin("discriminator_predictions.dense_prediction", 1, H)
    enc("generator.electra.", a.gen_layers, gH)
    lin("generator.generator_predictions.dense", E, gH)
    ln("generator.generator_predictions.LayerNorm", E)
    P["generator.generator_lm_head.bias"] = torch.randn(V, dtype=F64) * 0.1
    for t in P.values():
        t.requires_grad_(True)

    # Examples: [CLS] A [SEP] B [SEP] then padding, ids among the ordinary tokens (> [MASK]), lengths varying.
    B, L = a.batch, a.seq
    ids = torch.zeros(B, L, dtype=torch.int64)
    mask = torch.zeros(B, L, dtype=torch.int64)
    seg = torch.zeros(B, L, dtype=torch.int64)
    for b in range(B):
        n = L if b == 0 else int(torch.randint(10, L, ()).item())
        cut = n // 2
        ids[b, :n] = torch.randint(MASK + 1, V, (n,))
        ids[b, 0], ids[b, cut], ids[b, n - 1] = CLS, SEP, SEP
        mask[b, :n] = 1
        seg[b, cut + 1:n] = 1
    pos_u = torch.rand(B, N, dtype=F64)
    keep_u = torch.rand(B, N, dtype=F64)
    gumbel_u = torch.rand(B, N, V, dtype=F64)
    batch = {"input_ids": ids, "input_mask": mask, "segment_ids": seg, "pos_u": pos_u, "keep_u": keep_u,
             "gumbel_u": gumbel_u}
    out = step(P, cfg, batch)

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump({"config": cfg, "loss": out["loss"], "mlm_loss": out["mlm_loss"], "disc_loss": out["disc_loss"],
                   "replaced": int(out["results"]["disc_labels"].sum())}, f, indent=1)
    write_safetensors(os.path.join(a.out, "weights.safetensors"), {k: v.detach() for k, v in P.items()})
    write_safetensors(os.path.join(a.out, "grads.safetensors"), {k: v.grad for k, v in P.items()})
    write_safetensors(os.path.join(a.out, "batch.safetensors"), batch)
    write_safetensors(os.path.join(a.out, "results.safetensors"), out["results"])


def step(P, cfg, batch):
    """One step from weights P (float64, requiring grad), the config and the batch with its draws."""
    ids, mask, seg = batch["input_ids"], batch["input_mask"], batch["segment_ids"]
    pos_u, keep_u, gumbel_u = batch["pos_u"], batch["keep_u"], batch["gumbel_u"]
    B, L = ids.shape
    N, V, E, H, gH = cfg["max_pred"], cfg["vocab_size"], cfg["embedding_size"], cfg["hidden_size"], cfg["gen_hidden"]
    eps, CLS, SEP, MASK = cfg["eps"], 101, 102, 103
    import numpy as np

    # Masking (pretrain_helpers.mask with the draws): position = candidate ⌊u·C⌋, [MASK] where keep_u < 0.85.
    masked = ids.clone()
    positions = torch.zeros(B, N, dtype=torch.int64)
    labels = torch.zeros(B, N, dtype=torch.int64)
    weights = torch.zeros(B, N, dtype=F64)
    for b in range(B):
        cand = [p for p in range(L) if mask[b, p] == 1 and int(ids[b, p]) not in (CLS, SEP, MASK)]
        num = max(1, min(N, int(np.round(np.float32(int(mask[b].sum())) * np.float32(cfg["mask_prob"])))))
        for j in range(num):
            p = cand[int(pos_u[b, j].item() * len(cand))]
            positions[b, j], labels[b, j], weights[b, j] = p, ids[b, p], 1.0
            if keep_u[b, j] < 0.85 and p != 0:
                masked[b, p] = MASK

    # Generator, its logits at the slots, the MLM loss.
    x = embed(masked, seg, P, eps)
    if E != gH:
        x = dense(x, P, "generator.electra.embeddings_project")
    x = encoder(x, P, "generator.electra.", cfg["gen_layers"], cfg["gen_heads"], mask, eps)
    g = x[torch.arange(B)[:, None], positions]
    t = layer_norm(gelu(dense(g, P, "generator.generator_predictions.dense")), P,
                   "generator.generator_predictions.LayerNorm", eps)
    logits = t @ P["electra.embeddings.word_embeddings.weight"].T + P["generator.generator_lm_head.bias"]
    logp = torch.log_softmax(logits, -1)
    ce = -logp.gather(-1, labels[..., None])[..., 0]
    mlm = (weights * ce).sum() / (weights.sum() + 1e-6)

    # Sampling (no gradient), fake ids with scatter_update's floor average, labels.
    gnoise = -torch.log(-torch.log(gumbel_u + 1e-9) + 1e-9)
    sampled = torch.argmax(logits.detach() / cfg["temperature"] + gnoise, -1)
    fake = ids.clone()
    disc_labels = torch.zeros(B, L, dtype=torch.int64)
    for b in range(B):
        acc = {}
        for j in range(N):
            p = int(positions[b, j])
            if p == 0:
                continue
            s, c = acc.get(p, (0, 0))
            acc[p] = (s + int(sampled[b, j]), c + 1)
        for p, (s, c) in acc.items():
            fake[b, p] = s // c
            disc_labels[b, p] = int(fake[b, p] != ids[b, p])

    # Discriminator and its loss.
    y = embed(fake, seg, P, eps)
    if E != H:
        y = dense(y, P, "electra.embeddings_project")
    y = encoder(y, P, "electra.", cfg["num_layers"], cfg["heads"], mask, eps)
    z = dense(gelu(dense(y, P, "discriminator_predictions.dense")), P, "discriminator_predictions.dense_prediction")[..., 0]
    lab = disc_labels.to(F64)
    bce = torch.clamp(z, min=0) - z * lab + torch.log1p(torch.exp(-torch.abs(z)))
    m = mask.to(F64)
    disc = (m * bce).sum() / (m.sum() + 1e-6)
    loss = cfg["gen_weight"] * mlm + cfg["disc_weight"] * disc
    loss.backward()
    return {"loss": loss.item(), "mlm_loss": mlm.item(), "disc_loss": disc.item(),
            "results": {"masked_ids": masked, "masked_lm_positions": positions, "masked_lm_ids": labels,
                        "masked_lm_weights": weights, "sampled": sampled, "fake_ids": fake,
                        "disc_labels": disc_labels, "disc_logits": z.detach(), "gen_logits": logits.detach()}}


def read_safetensors(path):
    dtypes = {"F64": torch.float64, "F32": torch.float32, "I64": torch.int64}
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    out = {}
    for k, v in json.loads(data[8:8 + n]).items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        out[k] = torch.frombuffer(bytearray(data[8 + n + b:8 + n + e]), dtype=dtypes[v["dtype"]]).reshape(v["shape"])
    return out


def replay(d):
    """Checks this statement against a reference directory (the shared step): losses, decisions and gradients."""
    meta = json.load(open(os.path.join(d, "meta.json")))
    P = {k: v.clone().requires_grad_(True) for k, v in read_safetensors(os.path.join(d, "weights.safetensors")).items()}
    out = step(P, meta["config"], read_safetensors(os.path.join(d, "batch.safetensors")))
    results, grads = read_safetensors(os.path.join(d, "results.safetensors")), read_safetensors(os.path.join(d, "grads.safetensors"))
    failures = []
    for k in ("loss", "mlm_loss", "disc_loss"):
        if abs(out[k] - meta[k]) > 1e-12 * abs(meta[k]):
            failures.append(f"{k}: {out[k]} vs {meta[k]}")
    for k, v in out["results"].items():
        diff = float((v.to(F64) - results[k].to(F64)).abs().max())
        if diff > (1e-12 * float(results[k].to(F64).abs().max()) if k.endswith("logits") else 0.0):
            failures.append(f"{k}: differs by {diff}")
    largest = max(float(g.abs().max()) for g in grads.values())
    for k, g in grads.items():
        err, mag = float((P[k].grad - g).abs().max()), float(g.abs().max())
        # Key biases have an exactly zero gradient (softmax ignores a shift shared by a row's scores): noise only.
        if err > 1e-9 * max(mag, 1e-6 * largest):
            failures.append(f"gradient of {k}: error {err}, largest {mag}")
    print("\n".join(failures) if failures else "replayed " + d + ": losses, decisions and gradients agree")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
