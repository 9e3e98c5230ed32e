#!/usr/bin/env bash
# `lmforge prep --tokenizer-type GPTSentencePieceTokenizer` against a Megatron-style preprocess peer on Python's
# sentencepiece (bench/text/peers/megatron_spm_preprocess_peer.py), same input, 2 workers each, in one run: wall time,
# MB/s, the ratio, and whether the outputs are byte-identical (the SentencePiece model is the test fixture).
#   usage: bench/text/run_spm_prep_bench.sh [BUILD_DIR] [TARGET_MB]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${1:-build}
target_mb=${2:-30}
out="$root/bench/out"
mkdir -p "$out"
model=$root/tests/text/spm_fixtures/tiny_unigram.model
input=$out/sample-${target_mb}mb.jsonl
if [ ! -f "$input" ]; then
  : > "$input.part"
  while [ "$(stat -c %s "$input.part")" -lt $((target_mb * 1000000)) ]; do
    cat "$root/../shared/data/sample/sample.jsonl" >> "$input.part"
  done
  mv "$input.part" "$input"
fi
size=$(stat -c %s "$input")
seconds() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
t_peer=$(seconds /usr/bin/python3 bench/text/peers/megatron_spm_preprocess_peer.py "$input" "$out/spm_peer" "$model" 2)
t_us=$(seconds "$build/lmforge" prep --input "$input" --output-prefix "$out/spm_lmforge" \
  --tokenizer-type GPTSentencePieceTokenizer --tokenizer-model "$model" --append-eod --workers 2)
same=no
cmp -s "$out/spm_peer_text_document.bin" "$out/spm_lmforge_text_document.bin" &&
  cmp -s "$out/spm_peer_text_document.idx" "$out/spm_lmforge_text_document.idx" && same=yes
printf "input %.1f MB, 2 workers each\n" "$(echo "$size / 1000000" | bc -l)"
printf "megatron-style peer (python sentencepiece): %6.2f s  %6.2f MB/s\n" "$t_peer" "$(echo "$size / 1000000 / $t_peer" | bc -l)"
printf "lmforge prep:                               %6.2f s  %6.2f MB/s\n" "$t_us" "$(echo "$size / 1000000 / $t_us" | bc -l)"
printf "ratio (peer time / lmforge time): %.2fx; outputs byte-identical: %s\n" "$(echo "$t_peer / $t_us" | bc -l)" "$same"
