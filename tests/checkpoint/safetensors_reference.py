# defines: an independent safetensors writer/reader (json + struct + numpy) for tests/checkpoint/test_safetensors.cpp
# Usage:
#   safetensors_reference.py write DIR   writes DIR/ref.safetensors and, per tensor, DIR/<k>.raw (its bytes)
#                                        and DIR/<k>.f32 (its values as float32) plus DIR/manifest.txt
#                                        ("k name dtype dims..." per line, the name percent-encoded)
#   safetensors_reference.py check FILE DIR
#                                        reads FILE (written by lmforge), checks the layout rules of the
#                                        reference implementation byte for byte and compares every tensor with
#                                        DIR/<k>.raw as listed in DIR/manifest.txt; exit status 0 when all agree
import json
import os
import struct
import sys
import urllib.parse

import numpy as np

DTYPES = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16, "F16": np.float16,
          "I32": np.int32, "U32": np.uint32, "F32": np.float32, "F64": np.float64, "I64": np.int64,
          "U64": np.uint64}
# The reference (Rust) dtype enum order; its writer sorts by it descending, then by name.
ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
         "I64", "U64"]


def reference_bytes(tensors, metadata):
    """What the reference implementation writes for {name: (dtype, shape, raw bytes)}."""
    items = sorted(tensors.items(), key=lambda kv: kv[0])
    items.sort(key=lambda kv: ORDER.index(kv[1][0]), reverse=True)  # stable: names stay sorted within a dtype
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(sorted(metadata.items()))
    for name, (dtype, shape, raw) in items:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(raw for _, (_, _, raw) in items)


def read(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        out[name] = (info["dtype"], tuple(info["shape"]), data[b:e])
    return blob, n, out, metadata


def write_mode(d):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(7)
    specs = [
        ("transformer.h.0.attn.c_attn.weight", "F32", (3, 9)),
        ("transformer.wte.weight", "F32", (5, 4)),
        ("b16", "BF16", (7,)),
        ("half \"quoted\" \\ name", "F16", (2, 3)),
        ("doubles.\u00e9\u4e2d", "F64", (3,)),
        ("scalar", "F32", ()),
        ("empty", "F32", (0, 4)),
        ("ints", "I64", (2, 2)),
        ("bytes", "U8", (3,)),
    ]
    tensors, values = {}, {}
    for name, dtype, shape in specs:
        if dtype == "BF16":
            f = rng.normal(0, 2, shape).astype(np.float32)
            raw = (f.view(np.uint32) >> 16).astype(np.uint16)  # truncation: exact bf16 values
            vals = (raw.astype(np.uint32) << 16).view(np.float32)
            raw = raw.tobytes()
        elif dtype in ("F32", "F16", "F64"):
            a = rng.normal(0, 2, shape).astype(DTYPES[dtype])
            if dtype == "F16" and a.size:
                a.flat[0] = np.float16(3e-6)  # a subnormal half
            raw, vals = a.tobytes(), a.astype(np.float32)
        else:
            a = rng.integers(0, 100, shape).astype(DTYPES[dtype])
            raw, vals = a.tobytes(), None
        tensors[name] = (dtype, shape, raw)
        values[name] = vals
    metadata = {"format": "pt", "note": "line\nbreak \"quote\" \u00fc"}
    with open(os.path.join(d, "ref.safetensors"), "wb") as f:
        f.write(reference_bytes(tensors, metadata))
    with open(os.path.join(d, "manifest.txt"), "w") as m:
        for k, (name, (dtype, shape, raw)) in enumerate(tensors.items()):
            open(os.path.join(d, f"{k}.raw"), "wb").write(raw)
            if values[name] is not None:
                values[name].astype("<f4").tofile(os.path.join(d, f"{k}.f32"))
            m.write(" ".join([str(k), urllib.parse.quote(name, safe=""), dtype] + [str(x) for x in shape]) + "\n")
    with open(os.path.join(d, "metadata.txt"), "w") as m:
        for k, v in metadata.items():
            m.write(urllib.parse.quote(k, safe="") + " " + urllib.parse.quote(v, safe="") + "\n")


def check_mode(path, d):
    blob, n, tensors, metadata = read(path)
    assert n % 8 == 0, f"header length {n} is not a multiple of 8"
    assert blob[8:9] == b"{", "header does not start with '{'"
    expected, expected_meta = {}, {}
    for line in open(os.path.join(d, "manifest.txt")):
        k, name, dtype, *shape = line.split()
        name = urllib.parse.unquote(name)
        expected[name] = (dtype, tuple(int(x) for x in shape), open(os.path.join(d, f"{k}.raw"), "rb").read())
    if os.path.exists(os.path.join(d, "metadata.txt")):
        for line in open(os.path.join(d, "metadata.txt")):
            k, v = (line.split() + [""])[:2]
            expected_meta[urllib.parse.unquote(k)] = urllib.parse.unquote(v)
    assert set(tensors) == set(expected), f"names differ: {sorted(set(tensors) ^ set(expected))}"
    for name, (dtype, shape, raw) in expected.items():
        got = tensors[name]
        assert got[0] == dtype and got[1] == shape, f"{name}: {got[:2]} != {(dtype, shape)}"
        assert got[2] == raw, f"{name}: data differs"
        if dtype in DTYPES:  # values as numpy sees them
            a = np.frombuffer(got[2], dtype=np.dtype(DTYPES[dtype]).newbyteorder("<")).reshape(shape)
            b = np.frombuffer(raw, dtype=np.dtype(DTYPES[dtype]).newbyteorder("<")).reshape(shape)
            assert np.array_equal(a, b, equal_nan=True)
    assert metadata == expected_meta, f"metadata {metadata} != {expected_meta}"
    # Byte for byte what the reference implementation would write for the same tensors and metadata.
    assert blob == reference_bytes(expected, expected_meta), "file differs from the reference layout"
    print(f"ok: {len(tensors)} tensors, header {n} bytes")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write_mode(sys.argv[2])
    elif sys.argv[1] == "check":
        check_mode(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: safetensors_reference.py write DIR | check FILE DIR")
