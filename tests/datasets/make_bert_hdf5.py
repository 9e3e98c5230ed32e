# defines: the fixtures and independent expectations for tests/datasets/test_hdf5_bert_shards.cpp —
#   NVIDIA BERT .hdf5 shards with random content written the way NVIDIA's create_pretraining_data.py writes them
#   (h5py create_dataset(..., dtype='i4'/'i1', compression='gzip')), the fields NVIDIA's run_pretraining.py loader
#   derives from each row (its code, transcribed), the stream order documented in src/datasets/hdf5_bert_shards.h
#   re-stated here, and broken shards with the words their error must name.
# Usage: /usr/bin/python3 make_bert_hdf5.py OUT_DIR   (Debian python3-h5py, python3-numpy)
# Writes OUT_DIR/good/*.hdf5 (+ a notes.txt a directory listing must skip), OUT_DIR/narrow/, OUT_DIR/bad/<case>/,
# OUT_DIR/mixed_len/, OUT_DIR/unnamed/ and the text files expected.txt, order.txt, bad.txt (formats below).
import os
import shutil
import sys

import h5py
import numpy as np

from nvidia_hdf5_reference import NVIDIA_DTYPES, nvidia_fields, stream, write_shard

out = sys.argv[1]
rng = np.random.default_rng(20240611)
L, P, VOCAB = 24, 5, 30522


def make_arrays(n, seq_len=L, preds=P):
    """n instances laid out as create_pretraining_data.py's write_instance_to_example_files lays them out."""
    ids = np.zeros((n, seq_len), np.int64)
    mask = np.zeros((n, seq_len), np.int64)
    seg = np.zeros((n, seq_len), np.int64)
    pos = np.zeros((n, preds), np.int64)
    mids = np.zeros((n, preds), np.int64)
    nsp = rng.integers(0, 2, n)
    for r in range(n):
        length = int(rng.integers(8, seq_len + 1))  # [CLS] A [SEP] B [SEP], at least one token each
        a_end = int(rng.integers(2, length - 2))     # index of the first [SEP]
        ids[r, :length] = rng.integers(999, VOCAB, length)
        ids[r, 0], ids[r, a_end], ids[r, length - 1] = 101, 102, 102
        mask[r, :length] = 1
        seg[r, a_end + 1:length] = 1
        # 0..P masked positions (some rows none, some all P), ascending, never [CLS]/[SEP]; then 0 padding.
        candidates = [i for i in range(1, length - 1) if i != a_end]
        m = min([0, preds, int(rng.integers(1, preds + 1))][r % 3], len(candidates))
        chosen = np.sort(rng.choice(candidates, m, replace=False))
        pos[r, :m] = chosen
        mids[r, :m] = ids[r, chosen]
        # 80% [MASK], else a random id (NVIDIA's 10% kept unchanged are folded in; content is random anyway)
        ids[r, chosen] = np.where(rng.random(m) < 0.8, 103, rng.integers(0, VOCAB, m))
    return dict(input_ids=ids, input_mask=mask, segment_ids=seg, masked_lm_positions=pos, masked_lm_ids=mids,
                next_sentence_labels=nsp)


if os.path.exists(out):
    shutil.rmtree(out)
good = os.path.join(out, 'good')
sizes = {'wiki_training_0.hdf5': 7, 'wiki_training_1.hdf5': 1, 'wiki_training_2.hdf5': 0,
         'books_training_3.hdf5': 13, 'wiki_training_4.hdf5': 9, 'wiki_test_0.hdf5': 4}
arrays_of = {}
for name, n in sizes.items():
    arrays_of[name] = make_arrays(n)
    write_shard(os.path.join(good, name), arrays_of[name])
with open(os.path.join(good, 'notes.txt'), 'w') as f:
    f.write('wiki_training shards, not an HDF5 file\n')

# The same rows as wiki_training_0 in narrower integer types (int16 ids, uint8 positions, uint16 labels): widened on
# reading.
narrow = dict(NVIDIA_DTYPES, input_ids='i2', masked_lm_positions='u1', masked_lm_ids='u2')
write_shard(os.path.join(out, 'narrow', 'wiki_training_0.hdf5'), arrays_of['wiki_training_0.hdf5'], narrow)
# The same rows with the 0/1 datasets in wider types, as shards written from the script's int32 arrays without its
# dtype='i1' hold them (NVIDIA's loader reads them): int32 input_mask, uint8 segment_ids, int64 labels.
wide = dict(NVIDIA_DTYPES, input_mask='i4', segment_ids='u1', next_sentence_labels='i8')
write_shard(os.path.join(out, 'wide', 'wiki_training_0.hdf5'), arrays_of['wiki_training_0.hdf5'], wide)

# expected.txt: per shard row "row <file> <row> <is_random>" then lines "<field> v v ..." for the five vectors.
with open(os.path.join(out, 'expected.txt'), 'w') as e:
    for name in sorted(sizes):
        with h5py.File(os.path.join(good, name), 'r') as f:
            for r in range(sizes[name]):
                x = nvidia_fields(f, r, P)
                e.write(f'row {name} {r} {x["is_random"]}\n')
                for field in ('text', 'types', 'labels', 'loss_mask', 'padding_mask'):
                    e.write(field + ' ' + ' '.join(str(int(v)) for v in x[field]) + '\n')

# order.txt: "order <seed> <index> <file> <row>" for the training shards (sorted by path) over three epochs.
train = sorted(os.path.join(good, n) for n in sizes if 'training' in n)
train_rows = [sizes[os.path.basename(p)] for p in train]
with open(os.path.join(out, 'order.txt'), 'w') as o:
    for seed in (1234, 7, 2**63 + 5):
        for i, (f, r) in enumerate(stream(train, train_rows, seed, 3 * sum(train_rows))):
            o.write(f'order {seed} {i} {os.path.basename(train[f])} {r}\n')

# Broken shards: bad.txt lines "<case> <stage> <path> <word>|<word>..." — stage probe (the shape check refuses
# it) or read (only reading the values does); the error message must contain every word.
bad = []


def bad_case(case, stage, words, arrays=None, dtypes=NVIDIA_DTYPES, skip=(), raw=None):
    path = os.path.join(out, 'bad', case, 'x_training_0.hdf5')
    if raw is not None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(raw)
    else:
        write_shard(path, arrays, dtypes, skip)
    bad.append(f'{case} {stage} {path} ' + '|'.join([path] + words))


def variant(**changes):
    a = {k: v.copy() for k, v in make_arrays(6).items()}
    a.update(changes)
    return a


base = make_arrays(6)
bad_case('missing', 'probe', ['next_sentence_labels', 'missing'], base, skip=('next_sentence_labels',))
bad_case('wrong_width', 'probe', ['input_mask', '[6, 25]'], variant(input_mask=np.ones((6, L + 1), np.int64)))
bad_case('wrong_rank', 'probe', ['next_sentence_labels', '2 dimensions'],
         variant(next_sentence_labels=np.zeros((6, 1), np.int64)))
bad_case('rows_mismatch', 'probe', ['masked_lm_ids', '5 rows', 'N = 6'],
         variant(masked_lm_ids=np.zeros((5, P), np.int64)))
bad_case('p_mismatch', 'probe', ['masked_lm_ids', 'P = 5'], variant(masked_lm_ids=np.zeros((6, P + 1), np.int64)))
bad_case('wide_ids', 'probe', ['input_ids', '64-bit', 'int32'], base, dict(NVIDIA_DTYPES, input_ids='i8'))
nsp3 = base['next_sentence_labels'].copy()
nsp3[2] = 3  # an int32 0/1 dataset holding another value: refused on reading, never clamped to 1
bad_case('wide_nsp_value', 'read', ['next_sentence_labels', 'row 2', 'holds 3'], variant(next_sentence_labels=nsp3),
         dict(NVIDIA_DTYPES, next_sentence_labels='i4'))
bad_case('float_mask', 'probe', ['input_mask', 'not integer'], base, dict(NVIDIA_DTYPES, input_mask='f4'))
pos_high = base['masked_lm_positions'].copy()
pos_high[1, 0] = L  # row 1 always has P masked positions: slot 0 is used
bad_case('position_high', 'read', ['masked_lm_positions', 'row 1', 'position 24'], variant(masked_lm_positions=pos_high))
pos_neg = base['masked_lm_positions'].copy()
pos_neg[4, 2] = -3
bad_case('position_negative', 'read', ['masked_lm_positions', 'row 4', '-3'], variant(masked_lm_positions=pos_neg))
mask2 = base['input_mask'].copy()
mask2[3, 0] = 2
bad_case('mask_value', 'read', ['input_mask', 'row 3'], variant(input_mask=mask2))
good_bytes = open(os.path.join(good, 'books_training_3.hdf5'), 'rb').read()
bad_case('truncated', 'probe', ['HDF5'], raw=good_bytes[:len(good_bytes) // 2])
bad_case('not_hdf5', 'probe', ['cannot open as HDF5'], raw=b'this is not an HDF5 file\n' * 40)
# A gzip chunk of input_ids overwritten with garbage: the metadata is intact, decompression fails.
bad_case('corrupt_chunk', 'read', ['input_ids', 'cannot read'], base)
corrupt = os.path.join(out, 'bad', 'corrupt_chunk', 'x_training_0.hdf5')
with h5py.File(corrupt, 'r') as f:
    chunk = f['input_ids'].id.get_chunk_info(0)
with open(corrupt, 'r+b') as f:
    f.seek(chunk.byte_offset)
    f.write(bytes(range(256))[:chunk.size])
# A few-KB file declaring 2e8 rows: chunked gzip datasets whose chunks were never written (they would read as fill
# values). Refused by comparing the declared bytes with the stored ones, before anything is allocated.
huge = os.path.join(out, 'bad', 'huge_declared', 'x_training_0.hdf5')
os.makedirs(os.path.dirname(huge), exist_ok=True)
with h5py.File(huge, 'w') as f:
    for name, dtype in NVIDIA_DTYPES.items():
        shape = (200_000_000,) if name == 'next_sentence_labels' else (200_000_000, P if 'masked' in name else L)
        f.create_dataset(name, shape=shape, dtype=dtype, chunks=(1024,) + shape[1:], compression='gzip')
assert os.path.getsize(huge) < 16384
bad.append(f'huge_declared probe {huge} ' + '|'.join([huge, 'input_ids', '[200000000, 24]', 'stores 0 bytes']))
with open(os.path.join(out, 'bad.txt'), 'w') as b:
    b.write('\n'.join(bad) + '\n')

# Shards of two sequence lengths, and a file whose name says neither training nor validation.
write_shard(os.path.join(out, 'mixed_len', 'a_training_0.hdf5'), make_arrays(3))
write_shard(os.path.join(out, 'mixed_len', 'b_training_1.hdf5'), make_arrays(3, seq_len=32))
write_shard(os.path.join(out, 'unnamed', 'a_training_0.hdf5'), make_arrays(2))
write_shard(os.path.join(out, 'unnamed', 'shard_1.hdf5'), make_arrays(2))
