# defines: what make_bert_hdf5.py (tests/datasets) and make_bert_hdf5_train.py (tests/train) share, each written
#   independently of lmforge: NVIDIA's shard layout (NVIDIA_DTYPES in create_pretraining_data.py's order,
#   write_shard), the fields NVIDIA's run_pretraining.py loader derives from a row (nvidia_fields, its code
#   transcribed) and the stream order documented in src/datasets/hdf5_bert_shards.h (stream, re-stated).
import os

import h5py
import numpy as np

NVIDIA_DTYPES = dict(input_ids='i4', input_mask='i1', segment_ids='i1', masked_lm_positions='i4',
                     masked_lm_ids='i4', next_sentence_labels='i1')


def write_shard(path, arrays, dtypes=NVIDIA_DTYPES, skip=()):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, 'w') as f:
        for name in NVIDIA_DTYPES:  # create_pretraining_data.py's order
            if name not in skip:
                f.create_dataset(name, data=arrays[name], dtype=dtypes[name], compression='gzip')


def nvidia_fields(f, index, max_pred_length):
    """run_pretraining.py's pretraining_dataset.__getitem__ (DLE @ 7a4c4250) on an open h5py file, torch replaced by
    numpy (torch's (x == 0).nonzero()[0].item() is numpy's flatnonzero(x == 0)[0]); Megatron's field names."""
    keys = ['input_ids', 'input_mask', 'segment_ids', 'masked_lm_positions', 'masked_lm_ids', 'next_sentence_labels']
    inputs = [np.asarray(f[key][:]) for key in keys]
    [input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels] = [
        input[index].astype(np.int64) if indice < 5 else np.asarray(input[index].astype(np.int64))
        for indice, input in enumerate(inputs)]
    masked_lm_labels = np.ones(input_ids.shape, dtype=np.int64) * -1
    index = max_pred_length
    padded_mask_indices = np.flatnonzero(masked_lm_positions == 0)
    if len(padded_mask_indices) != 0:
        index = padded_mask_indices[0]
    masked_lm_labels[masked_lm_positions[:index]] = masked_lm_ids[:index]
    loss_mask = (masked_lm_labels != -1).astype(np.int64)
    return dict(text=input_ids, types=segment_ids, labels=masked_lm_labels, loss_mask=loss_mask,
                padding_mask=input_mask, is_random=int(next_sentence_labels))


# The documented stream order (src/datasets/hdf5_bert_shards.h), re-stated.
M64 = (1 << 64) - 1


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def permutation(n, state):
    a = list(range(n))

    def draw(b):
        nonlocal state
        while True:
            state = (state + 0x9E3779B97F4A7C15) & M64
            r = mix(state)
            if r >= ((1 << 64) - b) % b:
                return r % b

    for j in range(n - 1, 0, -1):
        k = draw(j + 1)
        a[j], a[k] = a[k], a[j]
    return a


def stream(files, rows, seed, count):
    """(file index, row) of samples 0..count-1."""
    result = []
    epoch = 0
    while len(result) < count:
        order = permutation(len(files), mix(mix(seed ^ 0x5348415244) ^ epoch))
        for f in order:
            sigma = permutation(rows[f], mix(mix(mix(seed ^ 0x524F57) ^ epoch) ^ f))
            result.extend((f, r) for r in sigma)
        epoch += 1
    return result[:count]
