# Megatron M23's tools/merge_datasets.py path, transcribed in our own words with numpy only (Megatron itself needs
# torch >= 2 here): for each input prefix, read the .idx, extend the Python list of sequence lengths, extend the
# document index shifted (without its leading 0), copy the .bin with shutil.copyfileobj; finalize computes pointers
# with a Python loop as _IndexWriter._sequence_pointers does, then writes the .idx.
#   usage: megatron_merge_peer.py OUTPUT_PREFIX INPUT_PREFIX...
import shutil
import struct
import sys

import numpy

ITEMSIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 4, 8: 2}


def read_index(path):
    with open(path, "rb") as f:
        header = f.read(34)
    assert header[:9] == b"MMIDIDX\x00\x00", path
    code = header[17]
    s, d = struct.unpack("<QQ", header[18:34])
    buf = numpy.memmap(path, mode="r", order="C")
    lengths = numpy.frombuffer(buf, dtype=numpy.int32, count=s, offset=34)
    doc_idx = numpy.frombuffer(buf, dtype=numpy.int64, count=d, offset=34 + 12 * s)
    assert doc_idx[-1] == s
    return code, lengths, doc_idx


def main():
    out, inputs = sys.argv[1], sys.argv[2:]
    code = read_index(inputs[0] + ".idx")[0]
    lengths, doc_idx = [], [0]
    with open(out + ".bin", "wb") as data:
        for prefix in inputs:
            c, l, d = read_index(prefix + ".idx")
            assert c == code
            offset = len(lengths)
            lengths.extend(l)
            doc_idx.extend((offset + d)[1:])
            with open(prefix + ".bin", "rb") as f:
                shutil.copyfileobj(f, data)
    item = ITEMSIZE[code]
    pointers, cur = [], 0
    for length in lengths:
        pointers.append(cur)
        cur += length * item
    with open(out + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(numpy.array(lengths, dtype=numpy.int32).tobytes(order="C"))
        f.write(numpy.array(pointers, dtype=numpy.int64).tobytes(order="C"))
        f.write(numpy.array(doc_idx, dtype=numpy.int64).tobytes(order="C"))


if __name__ == "__main__":
    main()
