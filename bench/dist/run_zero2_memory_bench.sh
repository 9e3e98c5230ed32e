#!/usr/bin/env bash
# Memory of ZeRO stage 2 against stage 1 and the replicated optimizer: peak RSS per rank of
# `mpirun -np 2 lmforge train gpt` on a GPT of ~95 M parameters (8 layers, hidden 768, 12 heads, GPT-2 vocabulary
# padded to 50304, 1024 positions), same model, same batch (2 micro-batches of 1 per rank), AdamW, with each rank's own
# start-up figures (parameters, gradients held after the backward, optimizer state). Each rank runs under GNU time,
# whose %M is the process's peak resident set over the whole run (start-up included, where every gradient page is
# touched once); a sampler also reads each rank's VmRSS every 0.2 s once iteration 1 has been logged, i.e. the
# resident set of the training steps after the first. Stage 2 comes from a DeepSpeed config (--deepspeed_config).
#   LAYERS, HIDDEN, HEADS: the model (default 8, 768, 12).
#   usage: bench/dist/run_zero2_memory_bench.sh     (BUILD=build-dir, default build; ITERS, default 3; SEQ, default 256)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD:-build}
exe="$root/$build/lmforge"
iters=${ITERS:-3}
seq=${SEQ:-256}
out="$root/bench/out/zero2-memory"
mkdir -p "$out"
[ -x "$exe" ] || { echo "build lmforge first: cmake --build $build --target lmforge" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs GNU time (apt-get install time)" >&2; exit 1; }
shared=$root/../shared
flags="--num-layers ${LAYERS:-8} --hidden-size ${HIDDEN:-768} --num-attention-heads ${HEADS:-12} --seq-length $seq --max-position-embeddings 1024
  --micro-batch-size 1 --global-batch-size 4 --lr 1e-4 --train-iters $iters --log-interval 1
  --eval-iters 0 --split 1000,0,0 --data-cache-path $out/cache --threads 1
  --vocab-file $shared/data/vocab/gpt2-vocab.json --merge-file $shared/data/vocab/gpt2-merges.txt
  --data-path $shared/data/sample/sample_gpt2_text_document"
flags=$(echo $flags)  # one line: it goes through sh -c below
cat > "$out/zero2.json" <<'JSON'
{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0,
 "zero_optimization": {"stage": 2, "reduce_bucket_size": 4194304, "reduce_scatter": true, "overlap_comm": true}}
JSON
mpi="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none --mca btl self,tcp"
rss() { grep -o 'peak-rss-kb [0-9]*' "$1" | awk '{print $2}'; }

run() {  # name, extra flags
  local name=$1
  shift
  echo "== mpirun -np 2, $name"
  rm -f "$out/$name".rss.*
  $mpi -np 2 -x OMP_NUM_THREADS=1 sh -c "/usr/bin/time -f 'peak-rss-kb %M' -o $out/$name.rss.\$OMPI_COMM_WORLD_RANK \
    $exe train gpt $flags $* --tensorboard-dir $out/tb-$name" > "$out/$name.log" 2>&1 &
  local job=$! steady=0
  while kill -0 $job 2>/dev/null; do
    if grep -q "iteration        1/" "$out/$name.log"; then
      for pid in $(pgrep -f "tensorboard-dir $out/tb-$name" | grep -v "^$$\$"); do
        kb=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || true)
        [ -n "$kb" ] && [ "$kb" -gt "$steady" ] && [ "$(cat /proc/$pid/comm 2>/dev/null)" = lmforge ] && steady=$kb
      done
    fi
    sleep 0.2
  done
  wait $job
  grep -E "memory on rank|data parallel:|iteration +$iters/" "$out/$name.log" | cut -c1-220
  for r in 0 1; do echo "rank $r peak RSS: $(( $(rss "$out/$name.rss.$r") / 1024 )) MiB"; done
  echo "largest VmRSS of a rank after iteration 1: $((steady / 1024)) MiB"
}
run replicated
run zero1 --use-distributed-optimizer
run zero2 --deepspeed --deepspeed_config "$out/zero2.json"
for name in replicated zero1 zero2; do
  echo "$name losses: $(grep -o 'lm loss: [0-9.E+-]*' "$out/$name.log" | tr '\n' ' ')"
done
