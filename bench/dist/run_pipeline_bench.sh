#!/usr/bin/env bash
# Pipeline parallelism (--pipeline-model-parallel-size 2, Megatron's 1F1B): each stage's busy and idle time per step
# against the bubble (P-1)/(m+P-1) for m = 2, 4, 8 micro-batches, the bytes each stage sends per step against the
# activation size (B·T·hidden fp32 per micro-batch and direction), the input stash and each process's peak resident
# memory — all from the trainer's own end-of-run lines ("pipeline stage s: ..."), which the last rank prints after
# gathering every stage's figures. Two stages with one thread each on this 2-core machine, so wall time means
# something; one process with one thread is the reference for step time and losses.
# The LM head over GPT-2's 50,304 columns costs as much as ~14 layers of hidden 256, and the first stage recomputes
# its forwards, so the 16 layers are split 13 + 3 (--decoder-first/last-pipeline-num-layers) to balance the stages.
#   usage: bench/dist/run_pipeline_bench.sh      (BUILD=build-dir, default build; ITERS, default 4)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD:-build}
exe="$root/$build/lmforge"
iters=${ITERS:-4}
out="$root/bench/out/pipeline"
mkdir -p "$out"
[ -x "$exe" ] || { echo "build lmforge first: cmake --build $build --target lmforge" >&2; exit 1; }
shared=$root/../shared
model="--num-layers 16 --hidden-size 256 --num-attention-heads 4 --seq-length 256 --max-position-embeddings 256
  --micro-batch-size 2 --lr 1e-4 --train-iters $iters --log-interval 1 --eval-iters 0 --split 1000,0,0
  --data-cache-path $out/cache --threads 1 --vocab-file $shared/data/vocab/gpt2-vocab.json
  --merge-file $shared/data/vocab/gpt2-merges.txt --data-path $shared/data/sample/sample_gpt2_text_document"
model=$(echo $model)
mpi="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none --mca btl self,tcp"
for m in 2 4 8; do
  gb=$((2 * m))
  echo "== m = $m micro-batches (global batch $gb)"
  OMP_NUM_THREADS=1 "$exe" train gpt $model --global-batch-size $gb > "$out/one-m$m.log" 2>&1
  grep -E "iteration +$iters/" "$out/one-m$m.log" | sed 's/^/one process: /'
  $mpi -np 2 -x OMP_NUM_THREADS=1 "$exe" train gpt $model --global-batch-size $gb \
    --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 13 --decoder-last-pipeline-num-layers 3 > "$out/p2-m$m.log" 2>&1
  grep -E "iteration +$iters/|pipeline bubble|pipeline stage|layers per stage" "$out/p2-m$m.log" | sed 's/^/P=2: /'
done
echo "activation per micro-batch and direction: B·T·hidden·4 = $((2 * 256 * 256 * 4)) bytes"
