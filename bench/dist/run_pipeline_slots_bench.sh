#!/usr/bin/env bash
# GPT under 1F1B pipeline parallelism at P = 2 and P = 4 (one single-threaded process per stage, m = 8 micro-batches),
# an earlier lmforge build against this one in one alternating run: step time, each stage's busy time, forwards per
# step and peak resident memory, from the trainer's own end-of-run lines. Before the engine's second step, layers kept
# ONE micro-batch's activations, so every stage but the last ran each micro-batch's forward twice (its log says
# "recomputation X ms"); now each micro-batch's activations live in its own slot and each forward runs once (the log
# says "in N forwards": N = m per step). One process is the reference for the losses.
#   usage: BEFORE=path/to/older/lmforge bench/dist/run_pipeline_slots_bench.sh   (BUILD=build-dir, default build;
#          ITERS, default 3; without BEFORE only this build runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD:-build}
after="$root/$build/lmforge"
before=${BEFORE:-}
iters=${ITERS:-3}
out="$root/bench/out/pipeline-slots"
mkdir -p "$out"
[ -x "$after" ] || { echo "build lmforge first: cmake --build $build --target lmforge" >&2; exit 1; }
shared=$root/../shared
grep -m1 'model name' /proc/cpuinfo
model="--num-layers 8 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128
  --micro-batch-size 2 --global-batch-size 16 --lr 1e-4 --train-iters $iters --log-interval 1 --eval-iters 0
  --split 1000,0,0 --data-cache-path $out/cache --threads 1 --vocab-file $shared/data/vocab/gpt2-vocab.json
  --merge-file $shared/data/vocab/gpt2-merges.txt --data-path $shared/data/sample/sample_gpt2_text_document"
model=$(echo $model)
mpi="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none --mca btl self,tcp"
OMP_NUM_THREADS=1 "$after" train gpt $model > "$out/one.log" 2>&1
grep -E "iteration +$iters/" "$out/one.log" | sed 's/^/one process: /'
for P in 2 4; do
  for which in before after; do
    exe=$after
    if [ "$which" = before ]; then
      [ -n "$before" ] || continue
      exe=$before
    fi
    log="$out/p$P-$which.log"
    $mpi -np $P -x OMP_NUM_THREADS=1 "$exe" train gpt $model --pipeline-model-parallel-size $P > "$log" 2>&1
    grep -E "iteration +$iters/|pipeline stage" "$log" | sed "s/^/P=$P $which: /"
  done
done
