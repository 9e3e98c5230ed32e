#!/usr/bin/env bash
# Loss curves of config A (vocab 50257 padded 50304, 4 layers, hidden 256, 4 heads, seq 256, micro-batch 4) on the
# shared GPT-2 sample: `lmforge train gpt` for ITERS iterations in fp32, --bf16 and --fp16 (dynamic loss scaling,
# Megatron's defaults), same seed and data order, dropout 0; prints the lm loss every 25 iterations side by side
# with the relative difference from fp32 (issue 12: final loss within 2 %).
#   usage: bench/train/run_mixed_precision_curves.sh   (BUILD=build-dir, default build; ITERS, default 300; THREADS, default 2;
#          PARALLEL=1 runs the three at once, e.g. with THREADS=1 on a machine shared with other jobs;
#          CACHE_DIR: where the GPT index cache goes, default bench/out/mixed-precision-curves/cache)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD:-build}
exe="$root/$build/lmforge"
iters=${ITERS:-300}
threads=${THREADS:-2}
out="$root/bench/out/mixed-precision-curves"
mkdir -p "$out"
[ -x "$exe" ] || { echo "build lmforge first: cmake --build $build --target lmforge" >&2; exit 1; }
shared=$root/../shared
flags="--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 256 --max-position-embeddings 1024
  --micro-batch-size 4 --global-batch-size 4 --lr 6e-4 --min-lr 6e-5 --lr-decay-style cosine --lr-warmup-iters 30
  --train-iters $iters --log-interval 25 --eval-iters 0 --split 1000,0,0 --seed 1234
  --hidden-dropout 0 --attention-dropout 0 --clip-grad 1.0 --weight-decay 0.1
  --data-cache-path ${CACHE_DIR:-$out/cache} --threads $threads
  --vocab-file $shared/data/vocab/gpt2-vocab.json --merge-file $shared/data/vocab/gpt2-merges.txt
  --data-path $shared/data/sample/sample_gpt2_text_document"
run() {
  local extra=""; [ "$1" = fp32 ] || extra="--$1"
  echo "== $1 ($(date -u +%H:%M) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$exe" train gpt $flags $extra > "$out/$1.log" 2>&1 || { tail -5 "$out/$1.log"; return 1; }
}
if [ "${PARALLEL:-0}" = 1 ]; then
  run fp32 & run bf16 & run fp16 &
  wait
else
  for p in fp32 bf16 fp16; do run $p; done
fi
loss() { grep -o 'iteration *[0-9]*/[^|]*|.*lm loss: [0-9.E+-]*' "$out/$1.log" | sed -E 's/iteration *([0-9]+)\/.*lm loss: ([0-9.E+-]+)/\1 \2/'; }
echo "| iteration | fp32 lm loss | bf16 lm loss (vs fp32) | fp16 lm loss (vs fp32) |"
echo "|---:|---:|---:|---:|"
join <(loss fp32) <(loss bf16) | join - <(loss fp16) |
  awk '{ printf "| %d | %.4f | %.4f (%+.2f %%) | %.4f (%+.2f %%) |\n", $1, $2, $3, 100 * ($3 - $2) / $2, $4, 100 * ($4 - $2) / $2 }'
grep -h "skipped iterations\|loss scale" "$out/fp16.log" | tail -2
