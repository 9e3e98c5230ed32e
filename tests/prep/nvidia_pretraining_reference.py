# defines: an independent re-statement of NVIDIA DeepLearningExamples' create_pretraining_data.py and its
#   tokenization.py (PyTorch BERT, the version described in ../shared/docs/nvidia-hdf5-creation-notes.md), written
#   for lmforge's tests without lmforge's code: CPython's own random.Random, unicodedata for the tokenizer, h5py to
#   write. `make` writes the .hdf5 the script would; `compare` checks two files dataset by dataset (names, dtypes,
#   shapes, every value).
#
#   nvidia_pretraining_reference.py make --input a.txt [b.txt ...] --vocab vocab.txt --output out.hdf5
#       [--max-seq-length 128] [--max-predictions-per-seq 20] [--masked-lm-prob 0.15] [--short-seq-prob 0.1]
#       [--dupe-factor 10] [--random-seed 12345] [--cased]
#   nvidia_pretraining_reference.py compare a.hdf5 b.hdf5
import argparse
import collections
import random
import sys
import unicodedata

import h5py
import numpy as np

NEVER_SPLIT = ("[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]")


def load_vocab(path):
    vocab = collections.OrderedDict()
    with open(path, encoding="utf-8") as f:
        for index, line in enumerate(f):
            vocab[line.strip()] = index
    return vocab


def is_cjk(cp):
    return any(lo <= cp <= hi for lo, hi in ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                                              (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
                                              (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))


def is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def basic_tokens(text, lower):
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if ch in "\t\n\r" or ch == " " or unicodedata.category(ch) == "Zs":
            cleaned.append(" ")
        elif cp == 0 or cp == 0xFFFD or unicodedata.category(ch).startswith("C"):
            continue
        elif is_cjk(cp):
            cleaned.append(" " + ch + " ")
        else:
            cleaned.append(ch)
    out = []
    for word in "".join(cleaned).split():
        if word in NEVER_SPLIT:
            out.append(word)
            continue
        if lower:
            word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")
        piece = ""
        for ch in word:
            if is_punct(ch):
                if piece:
                    out.append(piece)
                out.append(ch)
                piece = ""
            else:
                piece += ch
        if piece:
            out.append(piece)
    return " ".join(out).split()


def wordpiece(word, vocab):
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            sub = ("##" if start else "") + word[start:end]
            if sub in vocab:
                break
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(sub)
        start = end
    return pieces


def tokenize(text, vocab, lower):
    return [p for w in basic_tokens(text, lower) for p in wordpiece(w, vocab)]


def read_documents(paths, vocab, lower):
    documents = [[]]
    for path in paths:
        with open(path, encoding="utf-8") as f:  # text mode: universal newlines, strict UTF-8
            for line in f:
                line = line.strip()
                if not line:
                    documents.append([])
                tokens = tokenize(line, vocab, lower)
                if tokens:
                    documents[-1].append(tokens)
    return [d for d in documents if d]


def masked(tokens, prob, max_pred, words, rng):
    candidates = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    rng.shuffle(candidates)
    out = list(tokens)
    count = min(max_pred, max(1, int(round(len(tokens) * prob))))
    picks = []
    for i in candidates[:count]:
        if rng.random() < 0.8:
            out[i] = "[MASK]"
        elif rng.random() < 0.5:
            pass
        else:
            out[i] = words[rng.randint(0, len(words) - 1)]
        picks.append((i, tokens[i]))
    picks.sort()
    return out, [p for p, _ in picks], [t for _, t in picks]


def instances_of(docs, di, a):
    rng = a.rng
    doc = docs[di]
    max_tokens = a.max_seq_length - 3
    target = max_tokens
    if rng.random() < a.short_seq_prob:
        target = rng.randint(2, max_tokens)
    result, chunk, length, i = [], [], 0, 0
    while i < len(doc):
        chunk.append(doc[i])
        length += len(doc[i])
        if i == len(doc) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            first = [t for s in chunk[:a_end] for t in s]
            second = []
            if len(chunk) == 1 or rng.random() < 0.5:
                random_next = True
                for _ in range(10):
                    r = rng.randint(0, len(docs) - 1)
                    if r != di:
                        break
                if r == di:
                    random_next = False
                other = docs[r]
                for s in other[rng.randint(0, len(other) - 1):]:
                    second.extend(s)
                    if len(second) >= target - len(first):
                        break
                i -= len(chunk) - a_end
            else:
                random_next = False
                second = [t for s in chunk[a_end:] for t in s]
            while len(first) + len(second) > max_tokens:
                victim = first if len(first) > len(second) else second
                if rng.random() < 0.5:
                    del victim[0]
                else:
                    victim.pop()
            tokens = ["[CLS]"] + first + ["[SEP]"] + second + ["[SEP]"]
            segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
            tokens, positions, labels = masked(tokens, a.masked_lm_prob, a.max_predictions_per_seq, a.words, rng)
            result.append((tokens, segments, random_next, positions, labels))
            chunk, length = [], 0
        i += 1
    return result


def make(a):
    vocab = load_vocab(a.vocab)
    a.words = list(vocab.keys())
    a.rng = random.Random(a.random_seed)
    docs = read_documents(a.input, vocab, not a.cased)
    a.rng.shuffle(docs)
    instances = []
    for _ in range(a.dupe_factor):
        for di in range(len(docs)):
            instances.extend(instances_of(docs, di, a))
    a.rng.shuffle(instances)
    n, L, P = len(instances), a.max_seq_length, a.max_predictions_per_seq
    arrays = dict(input_ids=np.zeros((n, L), 'i4'), input_mask=np.zeros((n, L), 'i4'),
                  segment_ids=np.zeros((n, L), 'i4'), masked_lm_positions=np.zeros((n, P), 'i4'),
                  masked_lm_ids=np.zeros((n, P), 'i4'), next_sentence_labels=np.zeros(n, 'i4'))
    for r, (tokens, segments, random_next, positions, labels) in enumerate(instances):
        arrays['input_ids'][r, :len(tokens)] = [vocab[t] for t in tokens]
        arrays['input_mask'][r, :len(tokens)] = 1
        arrays['segment_ids'][r, :len(segments)] = segments
        arrays['masked_lm_positions'][r, :len(positions)] = positions
        arrays['masked_lm_ids'][r, :len(labels)] = [vocab[t] for t in labels]
        arrays['next_sentence_labels'][r] = 1 if random_next else 0
    with h5py.File(a.output, 'w') as f:
        for name, dtype in (('input_ids', 'i4'), ('input_mask', 'i1'), ('segment_ids', 'i1'),
                            ('masked_lm_positions', 'i4'), ('masked_lm_ids', 'i4'), ('next_sentence_labels', 'i1')):
            f.create_dataset(name, data=arrays[name], dtype=dtype, compression='gzip')
    print(n)


def compare(a_path, b_path):
    with h5py.File(a_path, 'r') as a, h5py.File(b_path, 'r') as b:
        if sorted(a.keys()) != sorted(b.keys()):
            sys.exit(f"datasets differ: {sorted(a.keys())} vs {sorted(b.keys())}")
        for name in a.keys():
            x, y = a[name], b[name]
            if x.dtype != y.dtype or x.shape != y.shape:
                sys.exit(f"{name}: {x.dtype} {x.shape} vs {y.dtype} {y.shape}")
            xv, yv = x[()], y[()]
            if not np.array_equal(xv, yv):
                rows = np.flatnonzero((xv != yv).reshape(len(xv), -1).any(axis=1))
                sys.exit(f"{name}: {len(rows)} rows differ, first {rows[:5].tolist()}")
        print(f"identical: {len(a['input_ids'])} rows")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest='command', required=True)
    m = sub.add_parser('make')
    m.add_argument('--input', nargs='+', required=True)
    m.add_argument('--vocab', required=True)
    m.add_argument('--output', required=True)
    m.add_argument('--max-seq-length', type=int, default=128)
    m.add_argument('--max-predictions-per-seq', type=int, default=20)
    m.add_argument('--masked-lm-prob', type=float, default=0.15)
    m.add_argument('--short-seq-prob', type=float, default=0.1)
    m.add_argument('--dupe-factor', type=int, default=10)
    m.add_argument('--random-seed', type=int, default=12345)
    m.add_argument('--cased', action='store_true')
    c = sub.add_parser('compare')
    c.add_argument('a')
    c.add_argument('b')
    a = parser.parse_args()
    if a.command == 'make':
        make(a)
    else:
        compare(a.a, a.b)


if __name__ == '__main__':
    main()
