#!/usr/bin/env bash
# Data-parallel `lmforge train gpt` on this machine: tokens/s of 1 process × 2 threads against 2 MPI processes ×
# 1 thread (replicated and distributed optimizer), the same global batch, against PyTorch DDP (gloo) with the
# same model and split in one run; and the bytes each iteration communicated against the theoretical
# 2·(N−1)/N·4·P of a bandwidth-optimal all-reduce.
#   usage: bench/dist/run_train_scaling.sh        (BUILD=build-dir, default build; ITERS, default 12)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD:-build}
exe="$root/$build/lmforge"
iters=${ITERS:-12}
out="$root/bench/out/train-scaling"
mkdir -p "$out"
[ -x "$exe" ] || { echo "build lmforge first: cmake --build $build --target lmforge" >&2; exit 1; }
shared=$root/../shared
# bench_train's config A: 4 layers, hidden 256, 4 heads, seq 256; global batch 4 in micro-batches of 2.
flags="--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 256 --max-position-embeddings 1024
  --micro-batch-size 2 --global-batch-size 4 --lr 1e-4 --train-iters $iters --log-interval $((iters - 4))
  --eval-iters 0 --split 1000,0,0 --data-cache-path $out/cache
  --vocab-file $shared/data/vocab/gpt2-vocab.json --merge-file $shared/data/vocab/gpt2-merges.txt
  --data-path $shared/data/sample/sample_gpt2_text_document"
mpi="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none --mca btl self,tcp"

# Throughput of the last log line: the mean over the last 4 iterations (the first ones warm caches up).
tps() { grep -o 'throughput (tokens/s): [0-9.]*' "$1" | tail -1 | awk '{print $3}'; }
loss() { grep -o 'lm loss: [0-9.E+-]*' "$1" | tail -1 | awk '{print $3}'; }

echo "== lmforge"
OMP_NUM_THREADS=2 "$exe" train gpt $flags --threads 2 > "$out/one.log" 2>&1
$mpi -np 2 env OMP_NUM_THREADS=1 "$exe" train gpt $flags --threads 1 > "$out/dp2.log" 2>&1
$mpi -np 2 env OMP_NUM_THREADS=1 "$exe" train gpt $flags --threads 1 --use-distributed-optimizer > "$out/zero2.log" 2>&1
one=$(tps "$out/one.log"); dp2=$(tps "$out/dp2.log"); zero2=$(tps "$out/zero2.log")
printf '%-44s %10s tokens/s  (last loss %s)\n' "1 process x 2 threads" "$one" "$(loss "$out/one.log")"
printf '%-44s %10s tokens/s  (last loss %s)\n' "2 processes x 1 thread (replicated AdamW)" "$dp2" "$(loss "$out/dp2.log")"
printf '%-44s %10s tokens/s  (last loss %s)\n' "2 processes x 1 thread (distributed optimizer)" "$zero2" "$(loss "$out/zero2.log")"
grep -h "communication per iteration\|optimizer: state" "$out/dp2.log" "$out/zero2.log" | sed 's/^/  /'

echo "== PyTorch DDP (gloo), same model and batch split"
t1=$(/usr/bin/python3 bench/dist/peers/ddp_train_peer.py --procs 1 --threads 2 --steps $((iters - 4)) | tee /dev/stderr | grep -o '[0-9]* tokens/s' | awk '{print $1}')
t2=$(/usr/bin/python3 bench/dist/peers/ddp_train_peer.py --procs 2 --threads 1 --steps $((iters - 4)) | tee /dev/stderr | grep -o '[0-9]* tokens/s' | awk '{print $1}')

echo "== ratios"
awk -v a="$one" -v b="$dp2" -v c="$zero2" -v t1="$t1" -v t2="$t2" 'BEGIN {
  printf "lmforge 2x1 / 1x2: replicated %.2f, distributed optimizer %.2f\n", b / a, c / a
  printf "torch   2x1 / 1x2: %.2f\n", t2 / t1
  printf "lmforge / torch: 1x2 %.2f, 2x1 %.2f\n", a / t1, b / t2 }'
