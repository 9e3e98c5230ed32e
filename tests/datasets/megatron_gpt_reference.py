# defines: an independent numpy transcription of Megatron M23's GPTDataset / BlendedDataset index construction,
# used by tests/datasets/*.cpp as the reference (numpy.random.RandomState is the independent RNG).
# Usage: megatron_gpt_reference.py <cases.json> <out_dir>
# Each case writes <name>.<array>.bin (raw little-endian, dtype in the meta) and <name>.meta.json.
import hashlib
import json
import math
import os
import re
import struct
import sys
from collections import OrderedDict

import numpy


def read_idx(prefix):
    """Sizes, pointers, doc index and dtype of a Megatron MMIDIDX .idx (megatron-data-format.md §2)."""
    b = open(prefix + ".idx", "rb").read()
    assert b[:9] == b"MMIDIDX\x00\x00"
    code = b[17]
    S, D = struct.unpack("<QQ", b[18:34])
    sizes = numpy.frombuffer(b, dtype=numpy.int32, count=S, offset=34)
    ptrs = numpy.frombuffer(b, dtype=numpy.int64, count=S, offset=34 + 4 * S)
    dtype = {4: numpy.int32, 8: numpy.uint16}[code]
    return sizes, ptrs, dtype


def normalize(weights):
    w = numpy.array(weights, dtype=numpy.float64)
    return (w / numpy.sum(w)).tolist()


def parse_split(split):
    s = list(map(float, re.findall(r"[.0-9]+", split)))
    s = s + [0.0 for _ in range(3 - len(s))]
    return normalize(s)


def split_indices(split, n):
    b = [0]
    for w in split:
        b.append(b[-1] + int(round(w * float(n))))
    b[1:] = list(map(lambda x: x - (b[-1] - n), b[1:]))
    return b


def num_epochs(tokens_per_epoch, seq_length, num_samples):
    e, t = 0, 0
    while True:
        e += 1
        t += tokens_per_epoch
        if ((t - 1) // seq_length) >= num_samples:
            return e


def build_document_index(documents, epochs, rng, separate):
    if not separate or epochs == 1:
        di = numpy.mgrid[0:epochs, 0 : len(documents)][1]
        di[:] = documents
        di = di.reshape(-1).astype(numpy.int32)
        rng.shuffle(di)
        return di
    first = build_document_index(documents, epochs - 1, rng, False)
    last = build_document_index(documents, 1, rng, False)
    return numpy.concatenate((first, last))


def build_sample_index(sizes, doc_idx, seq_length, epochs, tokens_per_epoch):
    n = (epochs * tokens_per_epoch - 1) // seq_length
    out = numpy.zeros((n + 1, 2), dtype=numpy.int32)
    pos, off = 0, 0
    s = 1
    while s <= n:
        remaining = seq_length + 1
        while remaining != 0:
            length = int(sizes[doc_idx[pos]]) - off
            remaining -= length
            if remaining <= 0:
                off += remaining + length - 1
                remaining = 0
            else:
                pos += 1
                off = 0
        out[s] = (pos, off)
        s += 1
    return out


def build_shuffle_index(num_samples, total, rng):
    dt = numpy.uint32
    if total >= (numpy.iinfo(numpy.uint32).max - 1):
        dt = numpy.int64
    first = numpy.arange(0, num_samples, 1, dtype=dt)
    rng.shuffle(first)
    if num_samples == total:
        return first
    last = numpy.arange(num_samples, total, 1, dtype=dt)
    rng.shuffle(last)
    return numpy.concatenate((first, last))


def gpt_indices(sizes, begin, end, num_samples, seq_length, seed):
    documents = numpy.arange(begin, end, 1, dtype=numpy.int32)
    T = int(numpy.sum(sizes[documents]))
    E = num_epochs(T, seq_length, num_samples)
    if E == 1:
        separate = False
        before = None
    else:
        before = ((E - 1) * T - 1) // seq_length
        from_last = num_samples - before
        per_epoch = (T - 1) // seq_length
        assert 0 <= from_last <= per_epoch + 1
        separate = from_last < int(0.80 * per_epoch)
    rng = numpy.random.RandomState(seed)
    di = build_document_index(documents, E, rng, separate)
    si = build_sample_index(sizes, di, seq_length, E, T)
    if separate:
        sh = build_shuffle_index(before, si.shape[0] - 1, rng)
    else:
        sh = build_shuffle_index(si.shape[0] - 1, si.shape[0] - 1, rng)
    return di, si, sh, dict(epochs=E, separate=bool(separate), tokens_per_epoch=T)


def sample_tokens(bin_path, dtype, ptrs, sizes, di, si, sh, i):
    data = numpy.memmap(bin_path, dtype=dtype, mode="r")
    item = numpy.dtype(dtype).itemsize

    def get(seq, offset=0, length=None):
        if length is None:
            length = int(sizes[seq]) - offset
        start = int(ptrs[seq]) // item + offset
        return data[start : start + length]

    j = sh[i]
    b, bo = si[j]
    e, eo = si[j + 1]
    parts = []
    if b == e:
        parts.append(get(di[b], bo, eo - bo + 1))
    else:
        for k in range(b, e + 1):
            off = 0 if k > b else bo
            length = None if k < e else eo + 1
            parts.append(get(di[k], off, length))
    return numpy.array(numpy.concatenate(parts), dtype=numpy.int64)


def description(path_prefix, num_samples, index_split, split, seed, seq_length):
    d = OrderedDict()
    d["class"] = "GPTDataset"
    d["path_prefix"] = path_prefix
    d["num_samples"] = num_samples
    d["index_split"] = index_split
    d["split"] = split
    d["random_seed"] = seed
    d["sequence_length"] = seq_length
    text = json.dumps(d, indent=4)
    return text, hashlib.md5(text.encode("utf-8")).hexdigest()


def blending_indices(weights, size):
    # helpers.cpp build_blending_indices, transcribed.
    weights = normalize(weights)
    di = numpy.zeros(size, dtype=numpy.int16)
    dsi = numpy.zeros(size, dtype=numpy.int64)
    current = [0] * len(weights)
    for s in range(size):
        sd = max(float(s), 1.0)
        best, best_err = 0, weights[0] * sd - float(current[0])
        for d in range(1, len(weights)):
            err = weights[d] * sd - float(current[d])
            if err > best_err:
                best, best_err = d, err
        di[s] = best
        dsi[s] = current[best]
        current[best] += 1
    return di, dsi


def blend_sizes(blend, per_split):
    weights, prefixes = zip(*[(float(blend[i]), blend[i + 1].strip()) for i in range(0, len(blend), 2)])
    weights = normalize(weights)
    sizes = [[int(math.ceil(t * w * 1.005)) for t in per_split] for w in weights]
    return list(prefixes), weights, sizes


def source(c, out, name):
    """What BlendedMegatronDatasetBuilder + GPTDataset (+ BlendedDataset) give for --data-path/--split, with the index
    cache written as Megatron writes it (numpy.save, md5-named) into <out>/<name>.cache/."""
    blend = c["data_path"]
    split_w = parse_split(c["split"])
    per_split = c["per_split"]
    if len(blend) == 1:
        prefixes, weights, asked = [blend[0]], [1.0], [per_split]
    else:
        prefixes, weights, asked = blend_sizes(blend, per_split)
    cache = os.path.join(out, name + ".cache")
    os.makedirs(cache, exist_ok=True)
    meta = {"splits": []}
    for k in range(3):
        entry = {"built": False}
        if split_w[k] == 0.0 or per_split[k] <= 0:
            meta["splits"].append(entry)
            continue
        parts = []
        for d, prefix in enumerate(prefixes):
            sizes, ptrs, dtype = read_idx(prefix)
            b = split_indices(split_w, len(sizes))
            if b[k] == b[k + 1]:
                parts = None
                break
            n = asked[d][k]
            di, si, sh, info = gpt_indices(sizes, b[k], b[k + 1], n, c["seq_length"], c["seed"])
            text, md5 = description(prefix, n, ["train", "valid", "test"][k], c["split"], c["seed"], c["seq_length"])
            get = lambda suffix: os.path.join(cache, f"{md5}-GPTDataset-{suffix}")
            open(get("description.txt"), "wt").write(text)
            numpy.save(get("document_index.npy"), di, allow_pickle=True)
            numpy.save(get("sample_index.npy"), si, allow_pickle=True)
            numpy.save(get("shuffle_index.npy"), sh, allow_pickle=True)
            parts.append((prefix, sizes, ptrs, dtype, di, si, sh, md5))
        if parts is None:
            meta["splits"].append(entry)
            continue
        entry["built"] = True
        entry["md5"] = [p[7] for p in parts]
        if len(blend) == 1:  # a bare prefix; "w p" is a BlendedDataset of one
            size = parts[0][6].shape[0]
            pick = lambda i: (0, i)
        else:
            size = sum(a[k] for a in asked)
            dsi_d, dsi_s = blending_indices(weights, size)
            pick = lambda i: (int(dsi_d[i]), int(dsi_s[i]))
        entry["size"] = int(size)
        toks = []
        for i in c["windows"]:
            if i >= size:
                continue
            d, j = pick(i)
            prefix, sizes, ptrs, dtype, di, si, sh, _ = parts[d]
            toks.append(sample_tokens(prefix + ".bin", dtype, ptrs, sizes, di, si, sh, j))
        if toks:
            save(out, name, f"windows{k}", numpy.concatenate(toks))
        meta["splits"].append(entry)
    return meta


def save(out, name, key, arr):
    arr = numpy.ascontiguousarray(arr)
    arr.tofile(os.path.join(out, f"{name}.{key}.bin"))
    return str(arr.dtype)


def main():
    cases = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    for c in cases:
        name = c["name"]
        meta = {}
        kind = c.get("kind", "gpt")
        if kind == "gpt":
            if "prefix" in c:
                sizes, ptrs, dtype = read_idx(c["prefix"])
            else:
                r = numpy.random.RandomState(c["sizes_seed"])
                sizes = r.randint(c["size_low"], c["size_high"], size=c["n_docs"]).astype(numpy.int32)
                save(out, name, "sizes", sizes)
            w = parse_split(c["split"])
            bounds = split_indices(w, len(sizes))
            k = c["index_split"]
            di, si, sh, info = gpt_indices(sizes, bounds[k], bounds[k + 1], c["num_samples"], c["seq_length"], c["seed"])
            meta.update(info)
            meta["bounds"] = bounds
            meta["shuffle_dtype"] = save(out, name, "shuffle", sh)
            save(out, name, "document", di)
            save(out, name, "sample", si)
            if "prefix" in c and "windows" in c:
                toks = [sample_tokens(c["prefix"] + ".bin", dtype, ptrs, sizes, di, si, sh, i) for i in c["windows"]]
                save(out, name, "windows", numpy.concatenate(toks))
            if "description" in c:
                d = c["description"]
                text, md5 = description(d["path_prefix"], d["num_samples"], d["index_split"], d["split"], d["seed"],
                                        d["seq_length"])
                meta["description"] = text
                meta["md5"] = md5
        elif kind == "blend":
            prefixes, weights, sizes = blend_sizes(c["blend"], c["per_split"])
            meta["weights"] = weights
            meta["weights_hex"] = [float(x).hex() for x in weights]
            meta["sizes"] = sizes
            size = sum(s[c["split_index"]] for s in sizes)
            di, dsi = blending_indices(weights, size)
            save(out, name, "dataset_index", di)
            save(out, name, "dataset_sample_index", dsi)
            meta["size"] = size
        elif kind == "source":
            meta.update(source(c, out, name))
        json.dump(meta, open(os.path.join(out, f"{name}.meta.json"), "w"))


if __name__ == "__main__":
    main()
