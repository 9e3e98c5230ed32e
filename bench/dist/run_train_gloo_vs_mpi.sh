#!/usr/bin/env bash
# Step time of the same data-parallel `lmforge train gpt` run with its collectives over MPI (mpirun, Open MPI's TCP
# transport) and over Gloo (ranks started by hand with --distributed-init-method tcp://), 2 processes × 1 thread,
# replicated AdamW and --use-distributed-optimizer; each pair run ROUNDS times alternately so machine noise hits
# both; the last losses must be equal (both backends sum in rank order).
#   usage: bench/dist/run_train_gloo_vs_mpi.sh   (BUILD=build-dir, default build; ITERS, default 12; ROUNDS, default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD:-build}
exe="$root/$build/lmforge"
iters=${ITERS:-12}
rounds=${ROUNDS:-2}
out="$root/bench/out/train-gloo-vs-mpi"
mkdir -p "$out"
[ -x "$exe" ] || { echo "build lmforge first: cmake --build $build --target lmforge" >&2; exit 1; }
shared=$root/../shared
# bench_train's config A (as run_train_scaling.sh): 4 layers, hidden 256, 4 heads, seq 256; global batch 4 in
# micro-batches of 2, so each of the 2 ranks runs one micro-batch per step.
flags="--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 256 --max-position-embeddings 1024
  --micro-batch-size 2 --global-batch-size 4 --lr 1e-4 --train-iters $iters --log-interval $((iters - 4))
  --eval-iters 0 --split 1000,0,0 --data-cache-path $out/cache --threads 1
  --vocab-file $shared/data/vocab/gpt2-vocab.json --merge-file $shared/data/vocab/gpt2-merges.txt
  --data-path $shared/data/sample/sample_gpt2_text_document"
mpi="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none --mca btl self,tcp"

# Elapsed time per iteration of the last log line: the mean over the last 4 iterations (the first warm caches up).
step_ms() { grep -o 'elapsed time per iteration (ms): [0-9.]*' "$1" | tail -1 | awk '{print $6}'; }
loss() { grep -o 'lm loss: [0-9.E+-]*' "$1" | tail -1 | awk '{print $3}'; }

gloo_run() {  # $1: log, $2...: extra flags
  local log=$1; shift
  local port=$((20000 + RANDOM % 20000))
  OMP_NUM_THREADS=1 "$exe" train gpt $flags "$@" --distributed-init-method tcp://127.0.0.1:$port \
    --distributed-world-size 2 --distributed-rank 1 > "$log.rank1" 2>&1 &
  local pid=$!
  OMP_NUM_THREADS=1 "$exe" train gpt $flags "$@" --distributed-init-method tcp://127.0.0.1:$port \
    --distributed-world-size 2 --distributed-rank 0 > "$log" 2>&1
  wait $pid
}

printf '%-34s %-6s %12s %14s\n' configuration round "MPI ms/step" "Gloo ms/step"
for mode in replicated zero; do
  extra=""
  [ $mode = zero ] && extra="--use-distributed-optimizer"
  for round in $(seq 1 "$rounds"); do
    $mpi -np 2 env OMP_NUM_THREADS=1 "$exe" train gpt $flags $extra > "$out/mpi-$mode-$round.log" 2>&1
    gloo_run "$out/gloo-$mode-$round.log" $extra
    m=$(step_ms "$out/mpi-$mode-$round.log"); g=$(step_ms "$out/gloo-$mode-$round.log")
    lm=$(loss "$out/mpi-$mode-$round.log"); lg=$(loss "$out/gloo-$mode-$round.log")
    printf '%-34s %-6s %12s %14s   last loss MPI %s Gloo %s%s\n' "2 x 1 thread, $mode" "$round" "$m" "$g" "$lm" "$lg" \
      "$([ "$lm" = "$lg" ] && echo ' (equal)' || echo ' (DIFFERENT)')"
  done
done
grep -h "communication per iteration" "$out/gloo-replicated-1.log" | sed 's/^/  gloo: /'
grep -h "communication per iteration" "$out/mpi-replicated-1.log" | sed 's/^/  mpi:  /'
