# defines: the Megatron v1.1.5 project's word-level preprocessor re-stated for lmforge's tests (independent of
#   lmforge): every line of a raw text file (text-mode readlines(): universal newlines) is one document,
#   line.strip().split(), each token's id in vocab.json (<unk>'s id when absent), the EOD id appended (an empty line
#   gives an EOD-only document), written as Megatron's MMapIndexedDatasetBuilder writes .bin/.idx (dtype uint16 when
#   len(vocab) < 65500, else int32).
#
#   word_level_reference.py INPUT VOCAB_JSON OUTPUT_PREFIX [EOD_TOKEN] [UNK_TOKEN]
import json
import struct
import sys

import numpy as np

DTYPE_CODES = {np.uint16: 8, np.int32: 4}


def main():
    path, vocab_path, prefix = sys.argv[1:4]
    eod_token = sys.argv[4] if len(sys.argv) > 4 else '<|endoftext|>'
    unk_token = sys.argv[5] if len(sys.argv) > 5 else '<unk>'
    with open(vocab_path, encoding='utf-8') as f:
        vocab = json.load(f)
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.readlines()
    dtype = np.uint16 if len(vocab) < 65500 else np.int32
    sizes, doc_idx, data = [], [0], []
    for line in lines:
        ids = [vocab.get(token, vocab[unk_token]) for token in line.strip().split()] + [vocab[eod_token]]
        data.extend(ids)
        sizes.append(len(ids))
        doc_idx.append(len(sizes))
    with open(prefix + '.bin', 'wb') as f:
        f.write(np.array(data, dtype=dtype).tobytes(order='C'))
    itemsize = np.dtype(dtype).itemsize
    pointers, address = [], 0
    for size in sizes:
        pointers.append(address)
        address += size * itemsize
    with open(prefix + '.idx', 'wb') as f:
        f.write(b'MMIDIDX\x00\x00')
        f.write(struct.pack('<Q', 1))
        f.write(struct.pack('<B', DTYPE_CODES[dtype]))
        f.write(struct.pack('<Q', len(sizes)))
        f.write(struct.pack('<Q', len(doc_idx)))
        f.write(np.array(sizes, dtype=np.int32).tobytes(order='C'))
        f.write(np.array(pointers, dtype=np.int64).tobytes(order='C'))
        f.write(np.array(doc_idx, dtype=np.int64).tobytes(order='C'))


if __name__ == '__main__':
    main()
