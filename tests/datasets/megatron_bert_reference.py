# defines: an independent numpy re-statement of Megatron M23's legacy BertDataset / T5Dataset (samples map,
# segments, truncation, whole-word n-gram masking, T5 spans and sentinels), written from
# ../shared/docs/bert-t5-reference-notes.md §2-§3. Used by tests/datasets/test_{bert,t5}_dataset.cpp as the reference.
# Its per-sample RNG is numpy's own RandomState (randint, random, shuffle, choice, geometric): nothing here shares code
# with lmforge's C++ MT19937 clone. The map's std::mt19937 stream is numpy's legacy MT19937 (same init_genrand) and
# std::mt19937_64 is a pure-Python MT19937-64 checked against the C++ standard's 10000th-output value.
# Usage: megatron_bert_reference.py <cases.json> <out_dir>
# For each case and split it writes <name>.<split>.map.bin (uint64 rows), <name>.<split>.index.bin (int64 sample
# indices) and <name>.<split>.<field>.bin (int64, the samples' field concatenated), plus <name>.meta.json.
import json
import os
import struct
import sys

import numpy

M64 = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64 (Matsumoto & Nishimura's MT19937-64)."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & M64
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & M64
        self.index = 312

    def _twist(self):
        mt = self.mt
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & M64


def check_mt64():
    g = MT19937_64(5489)
    for _ in range(9999):
        g()
    assert g() == 9981545732273789042, "MT19937-64 self-check failed"


class Data:
    """sizes, doc_idx and tokens of a Megatron MMIDIDX dataset (megatron-data-format.md §2)."""

    def __init__(self, prefix):
        b = open(prefix + ".idx", "rb").read()
        assert b[:9] == b"MMIDIDX\x00\x00"
        code = b[17]
        s, d = struct.unpack("<QQ", b[18:34])
        self.sizes = numpy.frombuffer(b, dtype=numpy.int32, count=s, offset=34)
        self.pointers = numpy.frombuffer(b, dtype=numpy.int64, count=s, offset=34 + 4 * s)
        self.doc_idx = numpy.frombuffer(b, dtype=numpy.int64, count=d, offset=34 + 12 * s)
        dtype = {4: numpy.int32, 8: numpy.uint16}[code]
        self.bin = numpy.memmap(prefix + ".bin", dtype=dtype, mode="r")
        self.itemsize = numpy.dtype(dtype).itemsize

    def sentence(self, i):
        start = int(self.pointers[i]) // self.itemsize
        return [int(x) for x in self.bin[start : start + int(self.sizes[i])]]


def split_bounds(split, n):
    w = [float(x) for x in split.split(",")]
    w += [0.0] * (3 - len(w))
    total = sum(w)
    w = [x / total for x in w]
    b = [0]
    for x in w:
        b.append(b[-1] + int(round(x * float(n))))
    diff = b[-1] - n
    return [b[0]] + [x - diff for x in b[1:]]


def samples_map(data, docs, max_len, ssp, seed, min_sent, count):
    """Whole epochs of rows until >= count, then the mt19937_64(seed+1) shuffle (note §2.3)."""
    ratio = int(numpy.floor(1.0 / ssp + 0.5)) if ssp > 0 else 0
    draws = numpy.random.RandomState(seed)  # MT19937 init_genrand(seed): std::mt19937(seed)'s stream

    def target():
        if ratio == 0:
            return max_len
        u = int(draws.randint(0, 2**32, dtype=numpy.uint64))
        return 2 + u % (max_len - 1) if u % ratio == 0 else max_len

    rows = []
    while len(rows) < count:
        before = len(rows)
        for d in range(len(docs) - 1):
            first, last = int(docs[d]), int(docs[d + 1])
            n = last - first
            if n < min_sent:
                continue
            if n > 1 and any(int(data.sizes[s]) > 512 for s in range(first, last)):
                continue
            tgt, start, length, taken = target(), first, 0, 0
            for s in range(first, last):
                length += int(data.sizes[s])
                taken += 1
                remain = last - s - 1
                if (length >= tgt and remain > 1 and taken >= min_sent) or remain == 0:
                    rows.append((start, s + 1, tgt))
                    start, length, taken, tgt = s + 1, 0, 0, target()
        assert len(rows) > before, "no document qualifies"
    g = MT19937_64(seed + 1)
    for i in range(len(rows) - 1, 0, -1):
        j = g() % (i + 1)
        rows[i], rows[j] = rows[j], rows[i]
    return rows


def mask_tokens(tokens, target, vocab, mask_prob, rng, t5):
    """Whole-word n-gram masking (note §2.5, T5 variant §3.2). Returns output tokens, {pos: label}, spans."""
    cands = []
    for i, t in enumerate(tokens):
        if t in (vocab["cls"], vocab["sep"]):
            continue
        if cands and vocab["tokens"][t].startswith("##"):
            cands[-1].append(i)
        else:
            cands.append([i])
    out = list(tokens)
    if mask_prob == 0:
        return out, {}, []
    budget = min(mask_prob * target, max(1, int(round(len(tokens) * mask_prob))))
    max_n = 10 if t5 else 3
    w = 1.0 / numpy.arange(1, max_n + 1)
    w /= w.sum(keepdims=True)
    grams = [[cands[k : k + n] for n in range(1, max_n + 1)] for k in range(len(cands))]
    rng.shuffle(grams)
    masked, spans = {}, []
    for g in grams:
        if len(masked) >= budget:
            break
        n = min(rng.geometric(0.2), max_n) if t5 else rng.choice(numpy.arange(1, max_n + 1), p=w / w.sum(keepdims=True))
        while True:
            pos = [p for word in g[n - 1] for p in word]
            if len(masked) + len(pos) <= budget or n == 1:
                break
            n -= 1
        if len(masked) + len(pos) > budget or any(p in masked for p in pos):
            continue
        for p in pos:
            if t5 or rng.random() < 0.8:
                out[p] = vocab["mask"]
            elif rng.random() >= 0.5:
                out[p] = rng.randint(0, vocab["n_random"])  # the random-id table is 0..n-1 for this vocab
            masked[p] = tokens[p]
        spans.append(pos)
    return out, masked, sorted(spans, key=lambda s: s[0])


def bert_sample(data, row, idx, case, vocab):
    rng = numpy.random.RandomState((case["seed"] + idx) % 2**32)
    first, end, tgt = row
    sents = [data.sentence(s) for s in range(first, end)]
    is_random = 0
    if case["binary_head"]:
        a_end = rng.randint(1, len(sents)) if len(sents) > 2 else 1
        a = [t for s in sents[:a_end] for t in s]
        b = [t for s in sents[a_end:] for t in s]
        if rng.random() < 0.5:
            a, b, is_random = b, a, 1
    else:
        a, b = [t for s in sents for t in s], []
    truncated = 0
    while len(a) + len(b) > tgt:
        truncated = 1
        seg = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            seg.pop(0)
        else:
            seg.pop()
    tokens = [vocab["cls"]] + a + [vocab["sep"]]
    types = [0] * len(tokens)
    if b:
        tokens += b + [vocab["sep"]]
        types += [1] * (len(b) + 1)
    out, masked, _ = mask_tokens(tokens, tgt, vocab, case["mask_prob"], rng, False)
    L, n = case["seq_length"], len(tokens)
    return {
        "text": out + [0] * (L - n),
        "types": types + [0] * (L - n),
        "labels": [masked.get(i, -1) for i in range(L)],
        "is_random": [is_random],
        "loss_mask": [1 if i in masked else 0 for i in range(L)],
        "padding_mask": [1] * n + [0] * (L - n),
        "truncated": [truncated],
    }


def t5_sample(data, row, idx, case, vocab):
    rng = numpy.random.RandomState(case["seed"] + idx)
    first, end, tgt = row
    tokens = [t for s in range(first, end) for t in data.sentence(s)]
    truncated = int(len(tokens) > tgt)
    tokens = tokens[:tgt]
    out, masked, spans = mask_tokens(tokens, tgt, vocab, case["mask_prob"], rng, True)
    enc, dec, start = [], [vocab["bos"]], 0
    for k, span in enumerate(spans):
        sentinel = vocab["first_sentinel"] + k
        enc += out[start : span[0]] + [sentinel]
        dec += [sentinel] + [tokens[p] for p in span]
        start = span[-1] + 1
    enc += out[start:]
    le, ld = case["seq_length"], case["dec_length"]
    assert len(enc) <= le and len(dec) <= ld
    labels = dec[1:] + [vocab["eos"]]
    enc_p = numpy.array(enc + [0] * (le - len(enc)))
    dec_p = numpy.array(dec + [0] * (ld - len(dec)))
    real_e, real_d = (enc_p >= 1).astype(numpy.int64), (dec_p >= 1).astype(numpy.int64)
    causal = numpy.tril(numpy.ones((ld, ld), dtype=numpy.int64))
    return {
        "text_enc": enc_p,
        "text_dec": dec_p,
        "labels": labels + [-1] * (ld - len(dec)),
        "loss_mask": [1] * len(dec) + [0] * (ld - len(dec)),
        "truncated": [truncated],
        "enc_mask": numpy.outer(real_e, real_e).ravel(),
        "dec_mask": (numpy.outer(real_d, real_d) * causal).ravel(),
        "enc_dec_mask": numpy.outer(real_d, real_e).ravel(),
    }


def load_vocab(path, extra_ids):
    tokens = [line.strip() for line in open(path, encoding="utf-8").read().split("\n")]
    if tokens and tokens[-1] == "":
        tokens.pop()
    ids = {t: i for i, t in enumerate(tokens)}
    assert len(ids) == len(tokens), "this reference assumes a vocab.txt without repeated lines"
    tokens += ["[BOS]", "[EOS]"] + ["<extra_id_%d>" % i for i in range(extra_ids)]
    return {
        "tokens": tokens,
        "n_random": len(tokens),
        "cls": ids["[CLS]"],
        "sep": ids["[SEP]"],
        "mask": ids["[MASK]"],
        "bos": len(ids),
        "eos": len(ids) + 1,
        "first_sentinel": len(ids) + 2,
    }


def run_case(case, out_dir, data_cache):
    prefix = case["prefix"]
    if prefix not in data_cache:
        data_cache[prefix] = Data(prefix)
    data = data_cache[prefix]
    t5 = case["model"] == "t5"
    vocab = load_vocab(case["vocab"], 100 if t5 else 0)
    bounds = split_bounds(case["split"], len(data.doc_idx) - 1)
    meta = {"bounds": bounds, "splits": {}}
    for k, name in enumerate(("train", "valid", "test")):
        count = case["counts"][k]
        if bounds[k + 1] <= bounds[k] or count <= 0:
            continue
        docs = data.doc_idx[bounds[k] : bounds[k + 1] + 1]
        max_len = case["seq_length"] - (2 if t5 else 3)
        min_sent = 2 if (case.get("binary_head") and not t5) else 1
        rows = samples_map(data, docs, max_len, case["short_seq_prob"], case["seed"], min_sent, count)
        base = os.path.join(out_dir, "%s.%s" % (case["name"], name))
        numpy.array(rows, dtype=numpy.uint64).tofile(base + ".map.bin")
        # The first samples, every stride-th one, and the last few (later epochs).
        n = len(rows)
        idx = sorted(set(list(range(min(n, case["first"]))) + list(range(0, n, case["stride"])) +
                         list(range(max(0, n - 4), n))))
        numpy.array(idx, dtype=numpy.int64).tofile(base + ".index.bin")
        fields = {}
        for i in idx:
            s = t5_sample(data, rows[i], i, case, vocab) if t5 else bert_sample(data, rows[i], i, case, vocab)
            for key, v in s.items():
                fields.setdefault(key, []).append(numpy.asarray(v, dtype=numpy.int64))
        for key, v in fields.items():
            numpy.concatenate(v).tofile(base + "." + key + ".bin")
        meta["splits"][name] = {"rows": n, "samples": len(idx)}
    json.dump(meta, open(os.path.join(out_dir, case["name"] + ".meta.json"), "w"))


def main():
    check_mt64()
    cases = json.load(open(sys.argv[1]))
    data_cache = {}
    for case in cases:
        run_case(case, sys.argv[2], data_cache)


if __name__ == "__main__":
    main()
