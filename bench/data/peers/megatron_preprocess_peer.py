#!/usr/bin/python3
"""A stand-in for Megatron-LM's tools/preprocess_data.py (GPT2BPETokenizer path), for benchmarks on machines where
Megatron itself cannot be installed (it needs PyPI and torch). It follows the same pipeline as Megatron at commit
4c7a0251 (see ../shared/docs/megatron-data-format.md §3 and §5): a multiprocessing Pool whose initializer builds the
tokenizer per worker, Pool.imap(encode, lines, 32) in input order, json.loads per line, GPT-2's byte-level BPE with
the `regex` pre-tokenizer and an unbounded per-process word cache, EOD appended to non-empty documents, a .bin
streamed and an .idx (MMIDIDX v1) written at the end. It does not import torch, so it starts faster than Megatron.

usage: megatron_preprocess_peer.py INPUT OUTPUT_PREFIX VOCAB_JSON MERGES_TXT WORKERS
"""
import json
import multiprocessing
import struct
import sys

import numpy as np
import regex as re


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def get_pairs(word):
    return {(a, b) for a, b in zip(word, word[1:])}


class GPT2BPE:
    def __init__(self, vocab_file, merges_file):
        self.encoder = json.load(open(vocab_file, encoding="utf-8"))
        merges = open(merges_file, encoding="utf-8").read().split("\n")[1:-1]
        self.bpe_ranks = {tuple(m.split()): i for i, m in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()
        self.cache = {}
        self.pat = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
        self.eod = self.encoder["<|endoftext|>"]

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = " ".join(word)
        self.cache[token] = word
        return word

    def tokenize(self, text):
        ids = []
        for token in re.findall(self.pat, text):
            token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(token).split(" "))
        return ids


class Encoder:
    tokenizer = None

    def __init__(self, vocab, merges):
        self.vocab, self.merges = vocab, merges

    def initializer(self):
        Encoder.tokenizer = GPT2BPE(self.vocab, self.merges)

    def encode(self, line):
        text = json.loads(line)["text"]
        ids = Encoder.tokenizer.tokenize(text)
        if ids:
            ids.append(Encoder.tokenizer.eod)
        return ids, len(line)


def main():
    inp, prefix, vocab, merges, workers = sys.argv[1:6]
    encoder = Encoder(vocab, merges)
    pool = multiprocessing.Pool(int(workers), initializer=encoder.initializer)
    lengths, doc_idx = [], [0]
    with open(inp, "r", encoding="utf-8") as fin, open(prefix + "_text_document.bin", "wb") as bin_out:
        for ids, _ in pool.imap(encoder.encode, fin, 32):
            if ids:
                bin_out.write(np.array(ids, dtype=np.uint16).tobytes(order="C"))
                lengths.append(len(ids))
            doc_idx.append(len(lengths))
    with open(prefix + "_text_document.idx", "wb") as idx:
        idx.write(b"MMIDIDX\x00\x00")
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", 8))
        idx.write(struct.pack("<Q", len(lengths)))
        idx.write(struct.pack("<Q", len(doc_idx)))
        sizes = np.array(lengths, dtype=np.int32)
        idx.write(sizes.tobytes(order="C"))
        pointers = np.zeros(len(lengths), dtype=np.int64)
        if len(lengths) > 1:
            np.cumsum(sizes[:-1].astype(np.int64) * 2, out=pointers[1:])
        idx.write(pointers.tobytes(order="C"))
        idx.write(np.array(doc_idx, dtype=np.int64).tobytes(order="C"))


if __name__ == "__main__":
    main()
