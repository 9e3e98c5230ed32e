#!/usr/bin/env bash
# BERT WordPiece throughput, one thread: lmforge (Megatron and HF flavours) vs Hugging Face tokenizers (native Node
# binding, bench/text/peers) on the same texts in one run; checks lmforge's HF flavour gives HF's very ids and prints
# MB/s and the ratios.
#
#   bench/text/run_bert_wordpiece_bench.sh [corpus.jsonl]
#     default input: the shared sample corpus repeated 4 times (~12 MB, bench/out/bert/sample_x4.jsonl)
#   env: BUILD_DIR (default ./build), REPEAT (lmforge runs, best kept; default 3), PEER_REPEAT (default 1),
#        LMFORGE_SHARED_DIR (default ../shared)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD_DIR:-$root/build}
shared=${LMFORGE_SHARED_DIR:-$root/../shared}
repeat=${REPEAT:-3}
peer_repeat=${PEER_REPEAT:-1}
out=$root/bench/out/bert
mkdir -p "$out"

vocab=$shared/data/vocab/bert-base-uncased-vocab.txt
tokenizer_json=$shared/data/vocab/bert.tokenizer.json
for f in "$vocab" "$tokenizer_json"; do
  [ -f "$f" ] || { echo "missing $f (set LMFORGE_SHARED_DIR)" >&2; exit 1; }
done
if [ ! -d bench/text/peers/node_modules/tokenizers ]; then
  echo "== installing peers (npm: tokenizers, tiktoken) into bench/text/peers/node_modules"
  (cd bench/text/peers && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ ! -x "$build/bench/bench_bert_wordpiece" ]; then
  echo "== building bench_bert_wordpiece in $build"
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --target bench_bert_wordpiece -j2
fi

input=${1:-}
if [ -z "$input" ]; then
  input=$out/sample_x4.jsonl
  if [ ! -f "$input" ]; then
    for _ in 1 2 3 4; do cat "$shared/data/sample/sample.jsonl"; done > "$input.part"
    mv "$input.part" "$input"
  fi
fi
echo "== input: $input ($(du -h "$input" | cut -f1)), one thread, $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"

results=$out/results.txt
: > "$results"
for flavor in megatron hf; do
  "$build/bench/bench_bert_wordpiece" --input "$input" --vocab-file "$vocab" --flavor "$flavor" \
    --repeat "$repeat" --ids-out "$out/lmforge-$flavor.ids" | tee -a "$results"
done
TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 node bench/text/peers/tokenize.js --lib hf --input "$input" \
  --tokenizer-json "$tokenizer_json" --repeat "$peer_repeat" --ids-out "$out/hf.ids" | tee -a "$results"

status=0
if cmp -s "$out/lmforge-hf.ids" "$out/hf.ids"; then
  echo "== lmforge (HF flavour) == HF: identical ($(stat -c %s "$out/hf.ids") bytes of ids)"
else
  echo "== lmforge (HF flavour) != HF: IDS DIFFER" >&2
  status=1
fi
awk '
  /^RESULT/ {
    delete f
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    n++; side[n] = f["side"]; mbps[n] = f["mbps"]; mtok[n] = f["mtokps"]; cpu[n] = f["cpu_mbps"]
    if (f["side"] == "hf") { hf = f["mbps"]; hfcpu = f["cpu_mbps"] }
  }
  END {
    printf "%-18s %9s %10s %8s %10s %10s\n", "side", "MB/s", "Mtok/s", "vs HF", "CPU MB/s", "CPU vs HF"
    for (i = 1; i <= n; i++)
      printf "%-18s %9.2f %10.3f %8s %10s %10s\n", side[i], mbps[i], mtok[i],
             hf ? sprintf("%.1fx", mbps[i] / hf) : "-", cpu[i] ? sprintf("%.2f", cpu[i]) : "-",
             (hfcpu && cpu[i]) ? sprintf("%.1fx", cpu[i] / hfcpu) : "-"
    print "(one thread; MB/s = UTF-8 bytes of text per second of wall time, CPU MB/s per second of the thread'"'"'s"
    print " CPU time (steadier on a busy machine); texts in memory, JSON parsing not timed)"
  }' "$results"
exit $status
