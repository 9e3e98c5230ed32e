#!/usr/bin/python3
"""A stand-in for Megatron-LM's tools/preprocess_data.py with --tokenizer-type GPTSentencePieceTokenizer (M23,
megatron/tokenizer/tokenizer.py: tokenize() = SentencePieceProcessor.encode_as_ids(text), eod = eos_id,
vocab_size = number of pieces), for benchmarks where Megatron cannot be installed. Same pipeline as Megatron: a
multiprocessing Pool whose initializer loads the model per worker, Pool.imap(encode, lines, 32) in input order,
json.loads per line, EOD appended to non-empty documents, .bin streamed, .idx (MMIDIDX v1) written at the end.

usage: megatron_spm_preprocess_peer.py INPUT OUTPUT_PREFIX MODEL WORKERS
"""
import json
import multiprocessing
import struct
import sys

import numpy as np
import sentencepiece


class Encoder:
    sp = None

    def __init__(self, model):
        self.model = model

    def initializer(self):
        Encoder.sp = sentencepiece.SentencePieceProcessor(model_file=self.model)

    def encode(self, line):
        ids = Encoder.sp.encode_as_ids(json.loads(line)["text"])
        if ids:
            ids.append(Encoder.sp.eos_id())
        return ids, len(line)


def main():
    inp, prefix, model, workers = sys.argv[1:5]
    vocab_size = len(sentencepiece.SentencePieceProcessor(model_file=model))
    dtype, code = (np.uint16, 8) if vocab_size < 65500 else (np.int32, 4)
    encoder = Encoder(model)
    pool = multiprocessing.Pool(int(workers), initializer=encoder.initializer)
    lengths, doc_idx = [], [0]
    with open(inp, "r", encoding="utf-8") as fin, open(prefix + "_text_document.bin", "wb") as bin_out:
        for ids, _ in pool.imap(encoder.encode, fin, 32):
            if ids:
                bin_out.write(np.array(ids, dtype=dtype).tobytes(order="C"))
                lengths.append(len(ids))
            doc_idx.append(len(lengths))
    with open(prefix + "_text_document.idx", "wb") as idx:
        idx.write(b"MMIDIDX\x00\x00")
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", code))
        idx.write(struct.pack("<Q", len(lengths)))
        idx.write(struct.pack("<Q", len(doc_idx)))
        sizes = np.array(lengths, dtype=np.int32)
        idx.write(sizes.tobytes(order="C"))
        pointers = np.zeros(len(lengths), dtype=np.int64)
        if len(lengths) > 1:
            np.cumsum(sizes[:-1].astype(np.int64) * np.dtype(dtype).itemsize, out=pointers[1:])
        idx.write(pointers.tobytes(order="C"))
        idx.write(np.array(doc_idx, dtype=np.int64).tobytes(order="C"))


if __name__ == "__main__":
    main()
