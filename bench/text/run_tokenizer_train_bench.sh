#!/usr/bin/env bash
# `lmforge tokenizer train` against Hugging Face's Rust trainer (npm `tokenizers`, its default BPE trainer: vocab
# 30000, min frequency 0, no special tokens, no initial alphabet; ByteLevel pre-tokenizer without prefix space) and,
# for SentencePiece, against spm_train, on the same corpus file and thread count, in one alternating run
# (HF, lmforge, HF, lmforge ... so that load changes hit both sides alike). Prints wall time, peak RSS, the ratio,
# and whether the outputs are identical (vocab.json + merges.txt byte for byte; SentencePiece: the pieces).
#
#   bash bench/text/run_tokenizer_train_bench.sh CORPUS.txt [ROUNDS]
# Environment: BUILD_DIR (default build), THREADS (default 2), SKIP_SPM=1 / SKIP_BPE=1 (one half only), SPM_VOCAB (default 8000) and SPM_SENTENCES (spm's input_sentence_size for both sides, default 2000000).
set -euo pipefail
cd "$(dirname "$0")/../.."
corpus=${1:?corpus text file}
rounds=${2:-1}
build=${BUILD_DIR:-build}
threads=${THREADS:-2}
spm_vocab=${SPM_VOCAB:-8000}
spm_sentences=${SPM_SENTENCES:-2000000}
work=$(mktemp -d)
if [ ! -d bench/text/peers/node_modules/tokenizers ]; then
  echo "== installing peers (npm: tokenizers, tiktoken) into bench/text/peers/node_modules"
  (cd bench/text/peers && npm ci --no-audit --no-fund --loglevel=error)
fi
export NODE_PATH=$PWD/bench/text/peers/node_modules
[ -x "$build/lmforge" ] || cmake --build "$build" --target lmforge
trap 'rm -rf "$work"' EXIT

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; threads $threads"
echo "corpus: $corpus, $(stat -c %s "$corpus") bytes, $(wc -l < "$corpus") lines"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# "<wall seconds> <peak RSS KiB> <CPU seconds, user + system>" of a command (GNU time). CPU time is reported beside
# wall time because the machine's other jobs stretch wall time far more.
measure() {
  /usr/bin/time -f "%e %M %U %S" -o "$work/time" "$@" > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }
  read -r wall rss user sys < "$work/time"
  echo "$wall $rss $(echo "$user + $sys" | bc)"
}

hf_total=0; lm_total=0
[ "${SKIP_BPE:-0}" = 1 ] && rounds=0
for round in $(seq 1 "$rounds"); do
  rm -rf "$work/hf" "$work/lm"
  read -r hf_s hf_kb hf_cpu < <(RAYON_NUM_THREADS=$threads measure node tests/tokenizer_train/hf_train.js train ByteLevelBPE \
    "$corpus" "$work/hf")
  read -r lm_s lm_kb lm_cpu < <(measure "$build/lmforge" tokenizer train --type ByteLevelBPE --input "$corpus" \
    --input-format text --vocab-size 30000 --special-tokens --no-initial-alphabet --threads "$threads" \
    --output-dir "$work/lm")
  same=no
  cmp -s "$work/hf/vocab.json" "$work/lm/vocab.json" && cmp -s "$work/hf/merges.txt" "$work/lm/merges.txt" && same=yes
  echo "byte-level BPE round $round: HF ${hf_s} s (cpu ${hf_cpu} s) ${hf_kb} KiB | lmforge ${lm_s} s (cpu ${lm_cpu} s)" \
       "${lm_kb} KiB | speed-up $(echo "scale=2; $hf_s / $lm_s" | bc)x wall, $(echo "scale=2; $hf_cpu / $lm_cpu" | bc)x cpu |" \
       "identical: $same | load $(cut -d' ' -f1 /proc/loadavg)"
  hf_total=$(echo "$hf_total + $hf_s" | bc); lm_total=$(echo "$lm_total + $lm_s" | bc)
done
[ "$rounds" = 0 ] || echo "byte-level BPE total: HF $hf_total s, lmforge $lm_total s, ratio $(echo "scale=2; $hf_total / $lm_total" | bc)x"

[ "${SKIP_SPM:-0}" = 1 ] && exit 0
for type in bpe unigram; do
  name=$([ $type = bpe ] && echo SentencePieceBPE || echo SentencePieceUnigram)
  rm -rf "$work/spm_$type"* "$work/lm_$type"
  read -r spm_s spm_kb spm_cpu < <(measure spm_train --input="$corpus" --model_prefix="$work/spm_$type" --model_type=$type \
    --vocab_size="$spm_vocab" --random_seed=42 --num_threads="$threads" --input_sentence_size="$spm_sentences" \
    --shuffle_input_sentence=true)
  read -r lm_s lm_kb lm_cpu < <(measure "$build/lmforge" tokenizer train --type $name --input "$corpus" --input-format text \
    --vocab-size "$spm_vocab" --random-seed 42 --threads "$threads" \
    --spm-option input_sentence_size="$spm_sentences" --spm-option shuffle_input_sentence=true \
    --output-dir "$work/lm_$type")
  cut -f1 "$work/spm_$type.vocab" > "$work/a"; cut -f1 "$work/lm_$type/tokenizer.vocab" > "$work/b"
  same=no; cmp -s "$work/a" "$work/b" && same=yes
  echo "SentencePiece $type: spm_train ${spm_s} s (cpu ${spm_cpu} s) ${spm_kb} KiB | lmforge ${lm_s} s (cpu ${lm_cpu} s)" \
       "${lm_kb} KiB | speed-up $(echo "scale=2; $spm_s / $lm_s" | bc)x wall | same pieces: $same |" \
       "load $(cut -d' ' -f1 /proc/loadavg)"
done
