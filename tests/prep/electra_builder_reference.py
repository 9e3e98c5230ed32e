#!/usr/bin/python3
"""An independent re-statement of google-research/electra's build_pretraining_dataset.py (commit 8a46635f) without
TensorFlow: ExampleBuilder, ExampleWriter, write_examples and main's process split, model/tokenization.py's
FullTokenizer, and the pieces of TensorFlow the script touches (GFile's line reading, tf.train.Example
serialization, TFRecordWriter framing with masked CRC32C). Used by the prep and datasets tests as the reference.

  build CORPUS_DIR VOCAB OUTPUT_DIR MAX_SEQ_LENGTH SEED [NUM_PROCESSES [NUM_OUT_FILES [lower|cased]]]
      what `build_pretraining_dataset.py --corpus-dir CORPUS_DIR --vocab-file VOCAB --output-dir OUTPUT_DIR
      --max-seq-length M --num-processes J` writes after random.seed(SEED) (each forked process inherits the state:
      here every job re-seeds, which is the same state); num_out_files is ExampleWriter's argument (main uses 1000).
  megatron PREFIX VOCAB OUTPUT_FILE MAX_SEQ_LENGTH SEED
      the builder fed a Megatron sentence-level dataset (PREFIX.bin/.idx) as one file: a line per sequence, a blank
      line after each document; every example, in order, to OUTPUT_FILE.npy as int64 [examples, 3, M] (input_ids,
      input_mask, segment_ids).
  compare DIR_A DIR_B
      the same file names in both, and every file's records (CRCs checked) parse to the same feature values.
  make-corpus SHARED_DATA_DIR OUTPUT_DIR [EVERY]
      a second corpus for the tests: sample.jsonl's documents over three files, and a fourth of edge cases (the
      edge-case texts, '\\r' inside lines, "[SEP]" as text, a 150-character word, control and private-use
      characters, whitespace-only lines); with EVERY, only every EVERY-th document of sample.jsonl.
"""
import collections
import json
import os
import random
import struct
import sys
import unicodedata

# --- model/tokenization.py --------------------------------------------------------------------------------------


def load_vocab(vocab_file):
    vocab = collections.OrderedDict()
    index = 0
    with open(vocab_file, "r", encoding="utf-8") as reader:
        while True:
            token = reader.readline()
            if not token:
                break
            vocab[token.strip()] = index
            index += 1
    return vocab


def whitespace_tokenize(text):
    text = text.strip()
    return text.split() if text else []


def is_whitespace(ch):
    if ch in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if (33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or (123 <= cp <= 126):
        return True
    return unicodedata.category(ch).startswith("P")


def is_chinese_char(cp):
    return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or (0x20000 <= cp <= 0x2A6DF) or
            (0x2A700 <= cp <= 0x2B73F) or (0x2B740 <= cp <= 0x2B81F) or (0x2B820 <= cp <= 0x2CEAF) or
            (0xF900 <= cp <= 0xFAFF) or (0x2F800 <= cp <= 0x2FA1F))


class FullTokenizer:
    def __init__(self, vocab_file, do_lower_case=True, strip_accents=True):
        self.vocab = load_vocab(vocab_file)
        self.do_lower_case = do_lower_case
        self.strip_accents = strip_accents
        self.max_input_chars_per_word = 200

    def basic(self, text):
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or is_control(ch):
                continue
            out.append(" " if is_whitespace(ch) else ch)
        text = "".join(out)
        out = []
        for ch in text:
            if is_chinese_char(ord(ch)):
                out += [" ", ch, " "]
            else:
                out.append(ch)
        text = "".join(out)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = token.lower()
                if self.strip_accents:
                    token = "".join(c for c in unicodedata.normalize("NFD", token)
                                    if unicodedata.category(c) != "Mn")
            words, start_new = [], True
            for ch in token:
                if is_punctuation(ch):
                    words.append([ch])
                    start_new = True
                else:
                    if start_new:
                        words.append([])
                    start_new = False
                    words[-1].append(ch)
            split_tokens.extend("".join(w) for w in words)
        return whitespace_tokenize(" ".join(split_tokens))

    def wordpiece(self, text):
        output = []
        for token in whitespace_tokenize(text):
            chars = list(token)
            if len(chars) > self.max_input_chars_per_word:
                output.append("[UNK]")
                continue
            start, pieces, bad = 0, [], False
            while start < len(chars):
                end, cur = len(chars), None
                while start < end:
                    sub = "".join(chars[start:end])
                    if start > 0:
                        sub = "##" + sub
                    if sub in self.vocab:
                        cur = sub
                        break
                    end -= 1
                if cur is None:
                    bad = True
                    break
                pieces.append(cur)
                start = end
            output.extend(["[UNK]"] if bad else pieces)
        return output

    def tokenize(self, text):
        return [p for t in self.basic(text) for p in self.wordpiece(t)]

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]


# --- TensorFlow stand-ins ---------------------------------------------------------------------------------------


def gfile_lines(path):
    """`for line in tf.io.gfile.GFile(path)`: lines end at '\\n' (kept), BufferedInputStream::ReadLine drops every
    '\\r', and the bytes are decoded as strict UTF-8."""
    data = open(path, "rb").read()
    pieces = data.split(b"\n")
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        if last and not piece:
            break
        yield (piece.replace(b"\r", b"") + (b"" if last else b"\n")).decode("utf-8")


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def length_delimited(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def serialize_example(features):
    """tf.train.Example(features=tf.train.Features(feature={name: Feature(int64_list=Int64List(value=...))}))."""
    entries = b""
    for name, values in features.items():
        packed = b"".join(varint(v) for v in values)
        feature = length_delimited(3, length_delimited(1, packed))
        entries += length_delimited(1, length_delimited(1, name.encode()) + length_delimited(2, feature))
    return length_delimited(1, entries)


def crc32c_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = crc32c_table()


def masked_crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ CRC_TABLE[(c ^ b) & 0xFF]
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class TFRecordWriter:
    def __init__(self, path):
        self.f = open(path, "wb")

    def write(self, record):
        header = struct.pack("<Q", len(record))
        self.f.write(header + struct.pack("<I", masked_crc32c(header)) + record +
                     struct.pack("<I", masked_crc32c(record)))

    def close(self):
        self.f.close()


# --- build_pretraining_dataset.py -------------------------------------------------------------------------------


class ExampleBuilder:
    def __init__(self, tokenizer, max_length):
        self._tokenizer = tokenizer
        self._current_sentences = []
        self._current_length = 0
        self._max_length = max_length
        self._target_length = max_length

    def add_line(self, line):
        line = line.strip().replace("\n", " ")
        if (not line) and self._current_length != 0:
            return self._create_example()
        return self.add_ids(self._tokenizer.convert_tokens_to_ids(self._tokenizer.tokenize(line)))

    def add_ids(self, ids):
        self._current_sentences.append(ids)
        self._current_length += len(ids)
        if self._current_length >= self._target_length:
            return self._create_example()
        return None

    def end_document(self):
        return self._create_example() if self._current_length != 0 else None

    def _create_example(self):
        if random.random() < 0.1:
            first_segment_target_length = 100000
        else:
            first_segment_target_length = (self._target_length - 3) // 2
        first_segment, second_segment = [], []
        for sentence in self._current_sentences:
            if (len(first_segment) == 0 or
                    len(first_segment) + len(sentence) < first_segment_target_length or
                    (len(second_segment) == 0 and
                     len(first_segment) < first_segment_target_length and
                     random.random() < 0.5)):
                first_segment += sentence
            else:
                second_segment += sentence
        first_segment = first_segment[:self._max_length - 2]
        second_segment = second_segment[:max(0, self._max_length - len(first_segment) - 3)]
        self._current_sentences = []
        self._current_length = 0
        if random.random() < 0.05:
            self._target_length = random.randint(5, self._max_length)
        else:
            self._target_length = self._max_length
        return self._make_example(first_segment, second_segment)

    def _make_example(self, first_segment, second_segment):
        vocab = self._tokenizer.vocab
        input_ids = [vocab["[CLS]"]] + first_segment + [vocab["[SEP]"]]
        segment_ids = [0] * len(input_ids)
        if second_segment:
            input_ids += second_segment + [vocab["[SEP]"]]
            segment_ids += [1] * (len(second_segment) + 1)
        input_mask = [1] * len(input_ids)
        input_ids += [0] * (self._max_length - len(input_ids))
        input_mask += [0] * (self._max_length - len(input_mask))
        segment_ids += [0] * (self._max_length - len(segment_ids))
        return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}  # a tf.train.Example


class ExampleWriter:
    def __init__(self, job_id, tokenizer, output_dir, max_seq_length, num_jobs, num_out_files):
        self._example_builder = ExampleBuilder(tokenizer, max_seq_length)
        self._writers = []
        for i in range(num_out_files):
            if i % num_jobs == job_id:
                self._writers.append(TFRecordWriter(os.path.join(
                    output_dir, "pretrain_data.tfrecord-{:}-of-{:}".format(i, num_out_files))))
        self.n_written = 0

    def write(self, example):
        if example:
            self._writers[self.n_written % len(self._writers)].write(serialize_example(example))
            self.n_written += 1

    def write_examples(self, input_file):
        for line in gfile_lines(input_file):
            line = line.strip()
            if line or True:  # blanks_separate_docs: argparse type=bool, default True
                self.write(self._example_builder.add_line(line))
        self.write(self._example_builder.add_line(""))

    def finish(self):
        for w in self._writers:
            w.close()


def build(corpus_dir, vocab, output_dir, max_seq_length, seed, num_processes=1, num_out_files=1000, lower=True):
    os.makedirs(output_dir, exist_ok=True)
    tokenizer = FullTokenizer(vocab, do_lower_case=lower)
    for job_id in range(num_processes):
        random.seed(seed)  # a forked process starts from the parent's (seeded) state
        writer = ExampleWriter(job_id, tokenizer, output_dir, max_seq_length, num_processes, num_out_files)
        fnames = sorted(os.listdir(corpus_dir))
        fnames = [f for (i, f) in enumerate(fnames) if i % num_processes == job_id]
        random.shuffle(fnames)
        for fname in fnames:
            writer.write_examples(os.path.join(corpus_dir, fname))
        writer.finish()


def megatron(prefix, vocab, output_file, max_seq_length, seed):
    import numpy as np
    idx = open(prefix + ".idx", "rb").read()
    assert idx[:9] == b"MMIDIDX\x00\x00", "not a Megatron .idx"
    dtype = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
             8: np.uint16}[idx[17]]
    n_seq, n_doc = struct.unpack("<QQ", idx[18:34])
    sizes = np.frombuffer(idx, np.int32, n_seq, 34)
    pointers = np.frombuffer(idx, np.int64, n_seq, 34 + 4 * n_seq)
    docs = np.frombuffer(idx, np.int64, n_doc, 34 + 12 * n_seq)
    data = open(prefix + ".bin", "rb").read()
    itemsize = np.dtype(dtype).itemsize
    tokenizer = FullTokenizer(vocab)
    random.seed(seed)
    builder = ExampleBuilder(tokenizer, max_seq_length)
    rows = []

    def emit(example):
        if example:
            rows.append([example["input_ids"], example["input_mask"], example["segment_ids"]])

    for d in range(n_doc - 1):
        for s in range(docs[d], docs[d + 1]):
            ids = np.frombuffer(data, dtype, sizes[s], pointers[s]).astype(np.int64).tolist()
            emit(builder.add_ids(ids))
        emit(builder.end_document())
    emit(builder.end_document())
    np.save(output_file, np.array(rows, dtype=np.int64).reshape(len(rows), 3, max_seq_length))


def make_corpus(shared, output_dir, every=1):
    os.makedirs(output_dir, exist_ok=True)
    docs = [json.loads(line)["text"] for line in open(os.path.join(shared, "sample", "sample.jsonl"), encoding="utf-8")]
    docs = docs[::every]
    for k, name in enumerate(["b_part.txt", "a_part.txt", "c_part.txt"]):
        with open(os.path.join(output_dir, name), "w", encoding="utf-8", newline="") as f:
            for text in docs[k::3]:
                f.write(text.rstrip("\n") + "\n\n")
    edge = [json.loads(line)["text"] for line in open(os.path.join(shared, "edge", "edge_cases.jsonl"), encoding="utf-8")]
    extra = ["text with [SEP] and [CLS] and [MASK] inside", "carriage\rreturn inside a line\r",
             "x" * 150 + " long word", "bell\x07 and private\ue000use and\u200bzero width", "   \t  ", "\u3000",
             "Ünïcödé ÀÉÎÕÜ straße İstanbul ΣΊΣΥΦΟΣ 中文字符 한국어 日本語"]
    with open(os.path.join(output_dir, "d_edge.txt"), "w", encoding="utf-8", newline="") as f:
        for i, text in enumerate(edge):
            f.write(text.encode("utf-8", "replace").decode("utf-8") + "\n")
            if i % 7 == 6:
                f.write("\n")
            if i % 11 == 0:
                f.write(extra[(i // 11) % len(extra)] + "\n")
        f.write("\n".join(extra * 30))  # no final newline: the last line ends at the end of the file


def read_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def read_fields(b):
    i, out = 0, []
    while i < len(b):
        tag, i = read_varint(b, i)
        assert tag & 7 == 2, "unexpected wire type"
        n, i = read_varint(b, i)
        out.append((tag >> 3, b[i:i + n]))
        i += n
    return out


def parse_tfrecords(path):
    """Every record of a TFRecord file (CRCs checked) as {feature: [int64 values]}."""
    data, i, examples = open(path, "rb").read(), 0, []
    while i < len(data):
        header = data[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[i + 8:i + 12])[0] == masked_crc32c(header), path + ": length CRC"
        record = data[i + 12:i + 12 + n]
        assert struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0] == masked_crc32c(record), path + ": data CRC"
        i += 16 + n
        example = {}
        for _, features in read_fields(record):
            for _, entry in read_fields(features):
                fields = dict(read_fields(entry))
                values = []
                for _, lst in read_fields(fields[2]):
                    for _, packed in read_fields(lst):
                        j = 0
                        while j < len(packed):
                            v, j = read_varint(packed, j)
                            values.append(v)
                example[fields[1].decode()] = values
        examples.append(example)
    return examples


def compare(dir_a, dir_b):
    names = sorted(os.listdir(dir_a))
    assert names == sorted(os.listdir(dir_b)), "different file names"
    total = 0
    for name in names:
        a, b = parse_tfrecords(os.path.join(dir_a, name)), parse_tfrecords(os.path.join(dir_b, name))
        assert a == b, name + ": examples differ"
        total += len(a)
    print("equal:", len(names), "files,", total, "examples")


def main(argv):
    if argv[1] == "build":
        extra = argv[7:]
        build(argv[2], argv[3], argv[4], int(argv[5]), int(argv[6]),
              int(extra[0]) if len(extra) > 0 else 1, int(extra[1]) if len(extra) > 1 else 1000,
              (extra[2] if len(extra) > 2 else "lower") == "lower")
    elif argv[1] == "megatron":
        megatron(argv[2], argv[3], argv[4], int(argv[5]), int(argv[6]))
    elif argv[1] == "compare":
        compare(argv[2], argv[3])
    elif argv[1] == "make-corpus":
        make_corpus(argv[2], argv[3], int(argv[4]) if len(argv) > 4 else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
