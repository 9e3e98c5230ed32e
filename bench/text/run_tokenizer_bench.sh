#!/usr/bin/env bash
# GPT-2 tokenizer throughput: lmforge vs Hugging Face tokenizers (native Node binding) vs tiktoken, same input, one
# run; checks all sides produce identical ids and prints MB/s and the ratios.
#
#   bench/text/run_tokenizer_bench.sh [corpus.jsonl]
#     default input: the shared sample corpus repeated 10 times (~24 MB, bench/out/tokenizer/sample_x10.jsonl)
#   env: BUILD_DIR (default ./build), THREADS (default nproc), REPEAT (lmforge runs, best kept; default 3),
#        PEER_REPEAT (default 1), LMFORGE_SHARED_DIR (default ../shared)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD_DIR:-$root/build}
shared=${LMFORGE_SHARED_DIR:-$root/../shared}
threads=${THREADS:-$(nproc)}
repeat=${REPEAT:-3}
peer_repeat=${PEER_REPEAT:-1}
out=$root/bench/out/tokenizer
mkdir -p "$out"

vocab=$shared/data/vocab/gpt2-vocab.json
merges=$shared/data/vocab/gpt2-merges.txt
tokenizer_json=$shared/data/vocab/gpt2.tokenizer.json
for f in "$vocab" "$merges" "$tokenizer_json"; do
  [ -f "$f" ] || { echo "missing $f (set LMFORGE_SHARED_DIR)" >&2; exit 1; }
done

if [ ! -d bench/text/peers/node_modules/tokenizers ] || [ ! -d bench/text/peers/node_modules/tiktoken ]; then
  echo "== installing peers (npm: tokenizers, tiktoken) into bench/text/peers/node_modules"
  (cd bench/text/peers && npm ci --no-audit --no-fund --loglevel=error)
fi

if [ ! -x "$build/bench/bench_tokenizer" ]; then
  echo "== building bench_tokenizer in $build"
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --target bench_tokenizer -j"$(nproc)"
fi

input=${1:-}
if [ -z "$input" ]; then
  input=$out/sample_x10.jsonl
  if [ ! -f "$input" ]; then
    for _ in $(seq 10); do cat "$shared/data/sample/sample.jsonl"; done > "$input.part"
    mv "$input.part" "$input"
  fi
fi
echo "== input: $input ($(du -h "$input" | cut -f1)), threads 1 and $threads, $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"

results=$out/results.txt
: > "$results"
echo "== lmforge"
"$build/bench/bench_tokenizer" --input "$input" --vocab-file "$vocab" --merge-file "$merges" \
  --threads 1 "$threads" --repeat "$repeat" --ids-out "$out/lmforge.ids" | tee -a "$results"
echo "== Hugging Face tokenizers (Node binding)"
TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 node bench/text/peers/tokenize.js --lib hf --input "$input" \
  --tokenizer-json "$tokenizer_json" --repeat "$peer_repeat" --ids-out "$out/hf.ids" | tee -a "$results"
if [ "$threads" -gt 1 ]; then
  RAYON_NUM_THREADS=$threads node bench/text/peers/tokenize.js --lib hf --input "$input" \
    --tokenizer-json "$tokenizer_json" --repeat "$peer_repeat" | tee -a "$results"
fi
echo "== tiktoken (WASM, single thread)"
node bench/text/peers/tokenize.js --lib tiktoken --input "$input" --repeat "$peer_repeat" --ids-out "$out/tiktoken.ids" |
  tee -a "$results"

echo "== identical ids?"
status=0
for peer in hf tiktoken; do
  if cmp -s "$out/lmforge.ids" "$out/$peer.ids"; then
    echo "lmforge == $peer: identical ($(stat -c %s "$out/lmforge.ids") bytes of ids)"
  else
    echo "lmforge != $peer: IDS DIFFER" >&2
    status=1
  fi
done
digests=$(grep -o 'digest=[0-9a-f]*' "$results" | sort -u | wc -l)
[ "$digests" -eq 1 ] || { echo "digests differ between runs" >&2; status=1; }

echo
awk '
  /^RESULT/ {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    n++; side[n] = f["side"]; thr[n] = f["threads"]; mbps[n] = f["mbps"]; cpu[n] = f["cpu_mbps"]; mtok[n] = f["mtokps"]
    if (f["side"] == "hf") { hf[f["threads"]] = f["mbps"]; hfcpu[f["threads"]] = f["cpu_mbps"] }
    if (f["side"] == "tiktoken") { tt = f["mbps"]; ttcpu = f["cpu_mbps"] }
  }
  END {
    printf "%-9s %7s %8s %8s %8s %13s %8s %13s\n", "side", "threads", "MB/s", "Mtok/s", "vs HF", "vs tiktoken", "MB/cpu-s", "(cpu) vs HF/tt"
    for (i = 1; i <= n; i++) {
      vh = (thr[i] in hf) ? sprintf("%.1fx", mbps[i] / hf[thr[i]]) : "-"
      vt = tt ? sprintf("%.1fx", mbps[i] / tt) : "-"
      ch = (thr[i] in hfcpu) ? sprintf("%.1fx", cpu[i] / hfcpu[thr[i]]) : "-"
      ct = ttcpu ? sprintf("%.1fx", cpu[i] / ttcpu) : "-"
      printf "%-9s %7s %8.2f %8.3f %8s %13s %8.2f %13s\n", side[i], thr[i], mbps[i], mtok[i], vh, vt, cpu[i], ch "/" ct
    }
    print "MB/s: UTF-8 text bytes per wall-clock second, texts in memory. vs HF: HF at the same thread count;"
    print "vs tiktoken: tiktoken on one thread. MB/cpu-s: per second of process CPU time (user+system, all threads),"
    print "which a busy machine disturbs far less than wall time; for one thread it estimates the unloaded speed."
  }' "$results"
exit $status
