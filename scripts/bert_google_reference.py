#!/usr/bin/env python3
# defines: a line-for-line transcription of Google's BERT tokenization.py (BasicTokenizer + WordpieceTokenizer, as
# vendored by Megatron for BertWordPieceLowerCase/Case): the independent reference for lmforge's Megatron flavour.
#
# Run with Debian 12's /usr/bin/python3 (3.11: unicodedata = Unicode 14, the runtime Megatron's reference dataset was
# made with). Modes:
#   bert_google_reference.py check-sample SHARED_DIR     # ids of sample.jsonl vs Megatron's .bin/.idx (expect 0)
#   bert_google_reference.py codepoint-digests VOCAB     # per-block digests of every code point (uncased, cased)
import array
import json
import struct
import sys
import unicodedata


def load_vocab(path):
    vocab = {}
    with open(path, encoding="utf-8") as f:
        for index, token in enumerate(f):
            vocab[token.strip()] = index
    return vocab


def whitespace_tokenize(text):
    text = text.strip()
    return text.split() if text else []


def is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def is_control(c):
    if c in "\t\n\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf")


def is_punctuation(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def is_chinese_char(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
            0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
            0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class GoogleBert:
    def __init__(self, vocab, do_lower_case=True, max_input_chars_per_word=200):
        self.vocab = vocab
        self.lower = do_lower_case
        self.max_chars = max_input_chars_per_word

    def basic(self, text):
        text = "".join(" " if is_whitespace(c) else c for c in text
                       if not (ord(c) == 0 or ord(c) == 0xFFFD or is_control(c)))
        text = "".join(" " + c + " " if is_chinese_char(ord(c)) else c for c in text)
        split = []
        for token in whitespace_tokenize(text):
            if self.lower:
                token = token.lower()
                token = "".join(c for c in unicodedata.normalize("NFD", token) if unicodedata.category(c) != "Mn")
            current = []
            for c in token:
                if is_punctuation(c):
                    if current:
                        split.append("".join(current))
                        current = []
                    split.append(c)
                else:
                    current.append(c)
            if current:
                split.append("".join(current))
        return whitespace_tokenize(" ".join(split))

    def wordpiece(self, token):
        chars = list(token)
        if len(chars) > self.max_chars:
            return ["[UNK]"]
        start, pieces = 0, []
        while start < len(chars):
            end, piece = len(chars), None
            while start < end:
                substr = "".join(chars[start:end])
                if start > 0:
                    substr = "##" + substr
                if substr in self.vocab:
                    piece = substr
                    break
                end -= 1
            if piece is None:
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    def ids(self, text):
        return [self.vocab[p] for t in self.basic(text) for p in self.wordpiece(t)]


# The text each code point c is tested in: inside a word, before a final Σ, after a cased letter before Σ (is c
# case-ignorable?), between Σ and a cased letter.
def codepoint_probe(c):
    return "a" + c + "b " + c + "\u03a3 A" + c + "\u03a3 A\u03a3" + c + "B"


def fnv1a(h, v):
    return ((h ^ v) * 16777619) & 0xFFFFFFFF


# FNV-1a over the ids of each code point's probe, 0xFFFFFFFF after each, one digest per block of 4096 code points
# (surrogates skipped): the format of tests/text/bert_codepoint_digests.txt.
def codepoint_digests(encode, name):
    for block in range(0x110):
        h = 2166136261
        for cp in range(block << 12, (block + 1) << 12):
            if 0xD800 <= cp < 0xE000:
                continue
            for i in encode(codepoint_probe(chr(cp))):
                h = fnv1a(h, i)
            h = fnv1a(h, 0xFFFFFFFF)
        print(f"{name} {block:x} {h:08x}")


def check_sample(shared):
    vocab = load_vocab(shared + "/data/vocab/bert-base-uncased-vocab.txt")
    bert = GoogleBert(vocab)
    idx = open(shared + "/data/sample/sample_bert_text_document.idx", "rb").read()
    s, d = struct.unpack("<QQ", idx[18:34])
    lens = array.array("i")
    lens.frombytes(idx[34:34 + 4 * s])
    doc_idx = array.array("q")
    doc_idx.frombytes(idx[34 + 12 * s:34 + 12 * s + 8 * d])
    tokens = array.array("H")
    tokens.frombytes(open(shared + "/data/sample/sample_bert_text_document.bin", "rb").read())
    offsets = [0]
    for n in lens:
        offsets.append(offsets[-1] + n)
    bad = 0
    with open(shared + "/data/sample/sample.jsonl", encoding="utf-8") as f:
        for j, line in enumerate(f):
            expected = [t for q in range(doc_idx[j], doc_idx[j + 1]) for t in tokens[offsets[q]:offsets[q + 1]]]
            bad += bert.ids(json.loads(line)["text"]) != expected
    print(f"{bad} documents differ from Megatron's dataset")
    return 1 if bad else 0


if __name__ == "__main__":
    assert unicodedata.unidata_version == "14.0.0", "run with Python 3.11 (Unicode 14), as the reference was"
    if sys.argv[1] == "check-sample":
        sys.exit(check_sample(sys.argv[2]))
    elif sys.argv[1] == "codepoint-digests":
        vocab = load_vocab(sys.argv[2])
        codepoint_digests(GoogleBert(vocab, True).ids, "megatron-uncased")
        codepoint_digests(GoogleBert(vocab, False).ids, "megatron-cased")
    else:
        sys.exit("usage: bert_google_reference.py check-sample SHARED_DIR | codepoint-digests VOCAB")
