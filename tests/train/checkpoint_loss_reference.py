#!/usr/bin/python3
# defines: the loss of an lmforge checkpoint on one batch, computed by an independent float64 PyTorch GPT-2
# (tests/model/gpt2_reference.py's gpt2_loss) from the checkpoint's config.json and model.safetensors, the
# safetensors file parsed here from its documented layout (8-byte header length, JSON header, raw tensors).
#
# usage: checkpoint_loss_reference.py ITER_DIR BATCH_FILE B T   (BATCH_FILE: int32 tokens[B*T] then targets[B*T])
# prints the mean cross-entropy over B*T positions.
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from gpt2_reference import gpt2_loss  # noqa: E402

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16}


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float64))
    return out


def main():
    iter_dir, batch_file, B, T = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    config = json.load(open(os.path.join(iter_dir, "config.json")))
    assert config["activation_function"] == "gelu_new" and config["layer_norm_epsilon"] == 1e-5
    p = read_safetensors(os.path.join(iter_dir, "model.safetensors"))
    assert p["transformer.wte.weight"].shape == (config["vocab_size"], config["n_embd"])
    ids = np.fromfile(batch_file, dtype="<i4")
    tokens = torch.from_numpy(ids[:B * T].astype(np.int64)).view(B, T)
    targets = torch.from_numpy(ids[B * T:2 * B * T].astype(np.int64)).view(B, T)
    with torch.no_grad():
        _, loss = gpt2_loss(p, tokens, targets, config["n_layer"], config["n_head"])
    print(repr(loss.item()))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
