# defines: the fixtures of tests/train/test_train_bert_hdf5.cpp — small NVIDIA BERT .hdf5 shards a tiny BERT can
#   learn from (ids within bert-base-uncased's 30524, written as NVIDIA's create_pretraining_data.py writes them:
#   h5py, dtypes i4/i1, gzip), and the --print-samples lines expected of them, derived independently of lmforge:
#   each row's fields as NVIDIA's run_pretraining.py loader computes them (its code, transcribed) under Megatron's
#   field names, in the stream order documented in src/datasets/hdf5_bert_shards.h (re-stated here).
# Usage: /usr/bin/python3 make_bert_hdf5_train.py OUT_DIR   (Debian python3-h5py, python3-numpy)
# Writes OUT_DIR/shards/ (3 training shards + 1 test shard), OUT_DIR/train_only/ (the training shards alone),
# OUT_DIR/bad_vocab/ (a training shard holding id 30524), OUT_DIR/expected_{train,valid}.jsonl (first 60 samples
# of each stream, seed 1234, in bert_sample_json's format: json.dumps with its default separators).
import json
import os
import shutil
import sys

import h5py
import numpy as np

# The loader transcription, shard writer and stream order shared with tests/datasets/make_bert_hdf5.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'datasets'))
from nvidia_hdf5_reference import nvidia_fields, stream, write_shard  # noqa: E402

out = sys.argv[1]
rng = np.random.default_rng(31337)
L, P = 32, 5
CLS, SEP, MASK = 101, 102, 103
# A small skewed "language" so that a tiny model's lm loss falls within a few steps; segment B comes from another
# range when it is a random next sentence, so the nsp loss is learnable too.
WORDS = np.arange(2000, 2064)
ZIPF = 1.0 / np.arange(1, len(WORDS) + 1)
ZIPF /= ZIPF.sum()


def make_arrays(n, bad_id=None):
    ids = np.zeros((n, L), np.int64)
    mask = np.zeros((n, L), np.int64)
    seg = np.zeros((n, L), np.int64)
    pos = np.zeros((n, P), np.int64)
    mids = np.zeros((n, P), np.int64)
    nsp = rng.integers(0, 2, n)
    for r in range(n):
        length = int(rng.integers(12, L + 1))
        a_end = int(rng.integers(4, length - 4))  # the first [SEP]
        ids[r, 1:a_end] = rng.choice(WORDS, a_end - 1, p=ZIPF)
        ids[r, a_end + 1:length - 1] = rng.choice(WORDS, length - a_end - 2, p=ZIPF) + (100 if nsp[r] else 0)
        ids[r, 0], ids[r, a_end], ids[r, length - 1] = CLS, SEP, SEP
        mask[r, :length] = 1
        seg[r, a_end + 1:length] = 1
        # NVIDIA: candidates shuffled, the first min(P, max(1, round(0.15 len))) taken, positions ascending.
        candidates = [i for i in range(1, length - 1) if i != a_end]
        m = min(P, max(1, int(round(0.15 * length))))
        chosen = np.sort(rng.choice(candidates, m, replace=False))
        pos[r, :m] = chosen
        mids[r, :m] = ids[r, chosen]
        ids[r, chosen] = np.where(rng.random(m) < 0.8, MASK, rng.choice(WORDS, m))
        if bad_id is not None:
            ids[r, 1] = bad_id
    return dict(input_ids=ids, input_mask=mask, segment_ids=seg, masked_lm_positions=pos, masked_lm_ids=mids,
                next_sentence_labels=nsp)


if os.path.exists(out):
    shutil.rmtree(out)
sizes = {'wiki_training_0.hdf5': 13, 'wiki_training_1.hdf5': 7, 'books_training_2.hdf5': 20, 'wiki_test_0.hdf5': 8}
for name, n in sizes.items():
    arrays = make_arrays(n)
    write_shard(os.path.join(out, 'shards', name), arrays)
    if 'training' in name:
        write_shard(os.path.join(out, 'train_only', name), arrays)
write_shard(os.path.join(out, 'bad_vocab', 'wiki_training_0.hdf5'), make_arrays(4, bad_id=30524))

for split, short in (('training', 'train'), ('test', 'valid')):
    files = sorted(os.path.join(out, 'shards', n) for n in sizes if split in n)
    rows = [sizes[os.path.basename(p)] for p in files]
    with open(os.path.join(out, f'expected_{short}.jsonl'), 'w') as e:
        for i, (f, r) in enumerate(stream(files, rows, 1234, 60)):
            with h5py.File(files[f], 'r') as shard:
                x = nvidia_fields(shard, r, P)
            line = {'split': short, 'index': i, 'text': x['text'].tolist(), 'types': x['types'].tolist(),
                    'labels': x['labels'].tolist(), 'is_random': x['is_random'], 'loss_mask': x['loss_mask'].tolist(),
                    'padding_mask': x['padding_mask'].tolist(), 'truncated': 0}
            e.write(json.dumps(line) + '\n')
