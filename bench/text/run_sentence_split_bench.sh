#!/usr/bin/env bash
# --split-sentences: lmforge's ICU splitter vs NLTK punkt (Megatron's splitter; parameters trained on the input,
# since the english.pickle model cannot be downloaded) on the same JSON-lines file, one thread each, in one run:
# speed, the ratio, and how often the two agree (documents with identical sentence lists, sentence boundaries).
#   usage: bench/text/run_sentence_split_bench.sh [BUILD_DIR] [INPUT.jsonl]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
input=${2:-../shared/data/sample/sample.jsonl}
out=bench/out
mkdir -p "$out"
cmake --build "$build" --target bench_sentence_splitter -j2 >/dev/null
for mode in "" --keep-newlines; do
  echo "== ${mode:-default (no --keep-newlines)}"
  /usr/bin/python3 bench/text/peers/punkt_split_peer.py "$input" "$out/split_punkt.jsonl" $mode | tee "$out/split_punkt.txt"
  "$build/bench/bench_sentence_splitter" "$input" "$out/split_icu.jsonl" $mode | tee "$out/split_icu.txt"
  /usr/bin/python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
mbs = lambda f: float(re.search(r"([0-9.]+) MB/s", open(f).read()).group(1))
a = [json.loads(l) for l in open(out + "/split_punkt.jsonl")]
b = [json.loads(l) for l in open(out + "/split_icu.jsonl")]
same = sum(x == y for x, y in zip(a, b))
def ends(doc):  # sentence end positions within the concatenation with whitespace removed
    pos, e = 0, set()
    for s in doc:
        pos += len("".join(s.split()))
        e.add(pos)
    return e
both = pa = pb = 0
for x, y in zip(a, b):
    ex, ey = ends(x), ends(y)
    both += len(ex & ey); pa += len(ex); pb += len(ey)
print("speed ratio (ICU / punkt): %.1fx" % (mbs(out + "/split_icu.txt") / mbs(out + "/split_punkt.txt")))
print("documents split identically: %d of %d (%.1f%%)" % (same, len(a), 100.0 * same / len(a)))
print("sentence ends shared: %d; punkt's found by ICU %.1f%%, ICU's found by punkt %.1f%%"
      % (both, 100.0 * both / pa, 100.0 * both / pb))
PY
done
