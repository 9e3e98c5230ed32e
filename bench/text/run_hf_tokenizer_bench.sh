#!/usr/bin/env bash
# tokenizer.json throughput, one thread: lmforge (PretrainedFromHF; tuned fast path where one applies, and the
# generic pipeline) vs Hugging Face tokenizers (native Node binding, RAYON_NUM_THREADS=1) on the same input, for the
# shared GPT-2 and BERT files and the committed fixture families. Checks the ids are identical; prints MB/s and ratio.
#
#   bench/text/run_hf_tokenizer_bench.sh [corpus.jsonl]
#     default input: the shared sample corpus repeated 4 times (~10 MB, bench/out/hf_tokenizer/sample_x4.jsonl)
#   env: BUILD_DIR (default ./build), REPEAT (lmforge runs, best kept; default 3), PEER_REPEAT (default 1),
#        FAMILIES (default: all 11 files), LMFORGE_SHARED_DIR (../shared)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD_DIR:-$root/build}
shared=${LMFORGE_SHARED_DIR:-$root/../shared}
repeat=${REPEAT:-3}
peer_repeat=${PEER_REPEAT:-1}
families=${FAMILIES:-gpt2 bert roberta llama3 llama2 t5 t5spm xlmr wordpiece subword wordlevel}
out=$root/bench/out/hf_tokenizer
mkdir -p "$out"

if [ ! -d bench/text/peers/node_modules/tokenizers ]; then
  echo "== installing peers (npm: tokenizers, tiktoken) into bench/text/peers/node_modules"
  (cd bench/text/peers && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ ! -x "$build/bench/bench_hf_tokenizer" ]; then
  echo "== building bench_hf_tokenizer in $build"
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --target bench_hf_tokenizer -j2
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

status=0
results=$out/results.txt
: > "$results"
for fam in $families; do
  case $fam in
    gpt2|bert) json=$shared/data/vocab/$fam.tokenizer.json ;;
    *) json=$root/tests/text/hf_fixtures/$fam.tokenizer.json ;;
  esac
  echo "== $fam ($json)"
  "$build/bench/bench_hf_tokenizer" --input "$input" --tokenizer-json "$json" --repeat "$repeat" \
    --label "$fam/lmforge" --ids-out "$out/$fam.lmforge.ids" | tee -a "$results"
  "$build/bench/bench_hf_tokenizer" --input "$input" --tokenizer-json "$json" --repeat "$repeat" --generic \
    --label "$fam/lmforge-generic" --ids-out "$out/$fam.generic.ids" | tee -a "$results"
  TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 node bench/text/peers/tokenize.js --lib hf --input "$input" \
    --tokenizer-json "$json" --repeat "$peer_repeat" --label "$fam/hf" --ids-out "$out/$fam.hf.ids" | tee -a "$results"
  for side in lmforge generic; do
    if cmp -s "$out/$fam.$side.ids" "$out/$fam.hf.ids"; then
      echo "$fam: $side == hf: identical ($(stat -c %s "$out/$fam.hf.ids") bytes of ids)"
    else
      echo "$fam: $side != hf: IDS DIFFER" >&2
      status=1
    fi
  done
  rm -f "$out/$fam".*.ids
done

echo
awk '
  /^RESULT/ {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    split(f["side"], s, "/"); fam = s[1]; side = s[2]
    if (!(fam in seen)) { seen[fam] = 1; order[++n] = fam }
    mbps[fam, side] = f["mbps"]; cpu[fam, side] = f["cpu_mbps"]
  }
  END {
    printf "%-10s %8s %8s %8s %10s %10s   %s\n", "family", "lmforge", "generic", "HF", "lmforge/HF", "generic/HF",
           "(CPU-time MB/s: lmforge generic HF; ratios)"
    for (i = 1; i <= n; i++) {
      fam = order[i]; hf = mbps[fam, "hf"]; ch = cpu[fam, "hf"]
      printf "%-10s %8.2f %8.2f %8.2f %9.1fx %9.1fx   (%.2f %.2f %.2f; %.1fx %.1fx)\n", fam, mbps[fam, "lmforge"],
             mbps[fam, "lmforge-generic"], hf, mbps[fam, "lmforge"] / hf, mbps[fam, "lmforge-generic"] / hf,
             cpu[fam, "lmforge"], cpu[fam, "lmforge-generic"], ch, cpu[fam, "lmforge"] / ch, cpu[fam, "lmforge-generic"] / ch
    }
    print "(one thread each; MB/s = UTF-8 bytes of text per wall second, texts in memory; generic = fast paths off;"
    print " CPU-time figures divide by process CPU seconds instead, which a busy machine distorts less)"
  }' "$results"
exit $status
