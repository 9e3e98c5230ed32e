#!/usr/bin/env bash
# Memory of tensor parallelism: peak RSS of `lmforge train gpt` on a GPT of ~95 M parameters (8 layers, hidden 768,
# 12 heads, GPT-2 vocabulary padded to 50304, 1024 positions) as one process, and per rank of
# `mpirun -np 2 ... --tensor-model-parallel-size 2` (same model, same micro-batch), with each rank's own start-up
# figures (parameters, gradients, optimizer state on the rank). Each rank runs under GNU time, whose %M is the
# process's peak resident set. Both runs stop after ITERS of ITERS+1 iterations (--exit-interval) and save a checkpoint
# (gathered tensor by tensor under tensor parallelism); a third run resumes the tensor-parallel one from it (loaded
# tensor by tensor) and runs the last step.
#   usage: bench/dist/run_tp_memory_bench.sh        (BUILD=build-dir, default build; ITERS, default 3; SEQ, default 256)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD:-build}
exe="$root/$build/lmforge"
iters=${ITERS:-3}
seq=${SEQ:-256}
out="$root/bench/out/tp-memory"
mkdir -p "$out"
[ -x "$exe" ] || { echo "build lmforge first: cmake --build $build --target lmforge" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs GNU time (apt-get install time)" >&2; exit 1; }
shared=$root/../shared
flags="--num-layers 8 --hidden-size 768 --num-attention-heads 12 --seq-length $seq --max-position-embeddings 1024
  --micro-batch-size 1 --global-batch-size 1 --lr 1e-4 --train-iters $((iters + 1)) --exit-interval $iters --log-interval 1
  --eval-iters 0 --split 1000,0,0 --data-cache-path $out/cache --threads 1
  --vocab-file $shared/data/vocab/gpt2-vocab.json --merge-file $shared/data/vocab/gpt2-merges.txt
  --data-path $shared/data/sample/sample_gpt2_text_document"
flags=$(echo $flags)  # one line: it goes through sh -c below
mpi="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none --mca btl self,tcp"
rss() { grep -o 'peak-rss-kb [0-9]*' "$1" | awk '{print $2}'; }

echo "== one process"
rm -rf "$out/ckpt-one" "$out/ckpt-tp"
OMP_NUM_THREADS=1 /usr/bin/time -f "peak-rss-kb %M" -o "$out/one.rss" "$exe" train gpt $flags --save "$out/ckpt-one" \
  > "$out/one.log" 2>&1
grep -E "^GPT:|memory on rank|iteration +$iters/" "$out/one.log"
one=$(rss "$out/one.rss")
echo "peak RSS: $((one / 1024)) MiB"

echo "== mpirun -np 2, --tensor-model-parallel-size 2"
rm -f "$out"/tp.rss.*
$mpi -np 2 -x OMP_NUM_THREADS=1 sh -c "/usr/bin/time -f 'peak-rss-kb %M' -o $out/tp.rss.\$OMPI_COMM_WORLD_RANK \
  $exe train gpt $flags --tensor-model-parallel-size 2 --save $out/ckpt-tp" > "$out/tp.log" 2>&1
grep -E "^GPT:|tensor parallel:|memory on rank|iteration +$iters/" "$out/tp.log"
for r in 0 1; do
  kb=$(rss "$out/tp.rss.$r")
  awk -v r=$r -v kb="$kb" -v one="$one" \
    'BEGIN { printf "rank %d peak RSS: %d MiB = %.3f of the single process\n", r, kb / 1024, kb / one }'
done
cmp "$out/ckpt-one/iter_$(printf %07d "$iters")/model.safetensors" \
  "$out/ckpt-tp/iter_$(printf %07d "$iters")/model.safetensors" >/dev/null \
  && echo "the two checkpoints' model.safetensors are byte-identical" \
  || echo "the two checkpoints' model.safetensors differ (fp32 rounding of the tensor-parallel sums)"

echo "== mpirun -np 2, --tensor-model-parallel-size 2, resumed from its checkpoint for one more step"
rm -f "$out"/resume.rss.*
$mpi -np 2 -x OMP_NUM_THREADS=1 sh -c "/usr/bin/time -f 'peak-rss-kb %M' -o $out/resume.rss.\$OMPI_COMM_WORLD_RANK \
  $exe train gpt $flags --tensor-model-parallel-size 2 --load $out/ckpt-tp --save $out/ckpt-tp" > "$out/resume.log" 2>&1
grep -E "loaded checkpoint|iteration +$((iters + 1))/" "$out/resume.log"
for r in 0 1; do
  kb=$(rss "$out/resume.rss.$r")
  awk -v r=$r -v kb="$kb" -v one="$one" \
    'BEGIN { printf "resumed rank %d peak RSS: %d MiB = %.3f of the single process\n", r, kb / 1024, kb / one }'
done
# Same losses: the layouts train the same model.
echo "losses: one $(grep -o 'lm loss: [0-9.E+-]*' "$out/one.log" | tail -1), TP=2 $(grep -o 'lm loss: [0-9.E+-]*' "$out/tp.log" | tail -1)"
