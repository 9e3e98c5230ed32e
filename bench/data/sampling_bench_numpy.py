# defines: the peer side of bench_sampling — Megatron M23's numpy steps of GPTDataset index building
# (_build_document_index + _build_shuffle_index) and its per-sample read (_query_document_sample_shuffle_indices on
# numpy.memmap), timed on the inputs bench_sampling wrote; checks its arrays equal ours.
# Usage: sampling_bench_numpy.py <dir> <seq_length> <num_samples> <seed> <data_prefix> <read_L> <read_n>
import json, os, sys, time
import numpy
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "datasets"))
import megatron_gpt_reference as ref

d, L, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sizes = numpy.fromfile(os.path.join(d, "sizes.bin"), dtype=numpy.int32)
documents = numpy.arange(0, len(sizes), 1, dtype=numpy.int32)
T = int(numpy.sum(sizes))
E = ref.num_epochs(T, L, n)
before = ((E - 1) * T - 1) // L
per_epoch = (T - 1) // L
separate = E > 1 and (n - before) < int(0.80 * per_epoch)
total = (E * T - 1) // L

t0 = time.perf_counter()
rng = numpy.random.RandomState(seed)
di = ref.build_document_index(documents, E, rng, separate)
t1 = time.perf_counter()
sh = ref.build_shuffle_index(before if separate else total, total, rng)
t2 = time.perf_counter()
ok = bool(numpy.array_equal(di, numpy.fromfile(os.path.join(d, "document.bin"), dtype=numpy.int32)) and
          numpy.array_equal(sh.astype(numpy.int64), numpy.fromfile(os.path.join(d, "shuffle.bin"), dtype=numpy.int64)))

# Sample reads as Megatron's GPTDataset.__getitem__ does them (indices built by the reference, not timed).
prefix, rL, rn = sys.argv[5], int(sys.argv[6]), int(sys.argv[7])
rs, rptrs, rdtype = ref.read_idx(prefix)
b = ref.split_indices(ref.parse_split("1"), len(rs))
rdi, rsi, rsh, _ = ref.gpt_indices(rs, b[0], b[1], rn, rL, seed)
data = numpy.memmap(prefix + ".bin", dtype=rdtype, mode="r")
item = numpy.dtype(rdtype).itemsize
def get(seq, offset=0, length=None):
    if length is None:
        length = int(rs[seq]) - offset
    start = int(rptrs[seq]) // item + offset
    return data[start:start + length]
t3 = time.perf_counter()
checksum = 0
for i in range(rn):
    j = rsh[i]
    bb, bo = rsi[j]
    e, eo = rsi[j + 1]
    if bb == e:
        parts = [get(rdi[bb], bo, eo - bo + 1)]
    else:
        parts = [get(rdi[k], 0 if k > bb else bo, None if k < e else eo + 1) for k in range(bb, e + 1)]
    text = numpy.array(numpy.concatenate(parts), dtype=numpy.int64)
    checksum += int(text[0]) + int(text[-1])
t4 = time.perf_counter()
print(json.dumps({"document_index_s": t1 - t0, "shuffle_index_s": t2 - t1, "equal": ok, "epochs": E,
                  "read_s": t4 - t3, "read_checksum": checksum}))
