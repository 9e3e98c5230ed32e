#!/usr/bin/env bash
# Wall time per iteration of data parallelism over two ranks of unequal speed: `lmforge train gpt` over Gloo (ranks
# started by hand, tcp://), rank 0 pinned to core 0 and rank 1 to core 1, which it shares with a busy process (a
# pinned busy neighbour: rank 1 gets about half a core), plain (equal shares) and --balance-data-parallel (shares
# re-measured every 2 steps). Each pair runs ROUNDS times alternately so machine noise hits both; the last losses
# must be equal (the same micro-batches, only the summation order of the gradient differs).
#   usage: bench/dist/run_balance_bench.sh  (BUILD=build-dir, default build; ITERS, default 12; ROUNDS, default 2;
#          NICE1, rank 1's niceness, default 0 — raise it when other processes load the cores, so that the busy
#          neighbour still takes the larger share of core 1)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD:-build}
exe="$root/$build/lmforge"
iters=${ITERS:-12}
rounds=${ROUNDS:-2}
nice1=${NICE1:-0}  # rank 1's niceness against its busy neighbour (0: an equal share of core 1, about half speed)
out="$root/bench/out/balance"
mkdir -p "$out"
[ -x "$exe" ] || { echo "build lmforge first: cmake --build $build --target lmforge" >&2; exit 1; }
shared=$root/../shared
# A small GPT (2 layers, hidden 128, 2 heads, seq 128, GPT-2's vocabulary); a global batch of 12 one-sample
# micro-batches, 6 per rank when plain.
flags="--num-layers 2 --hidden-size 128 --num-attention-heads 2 --seq-length 128 --max-position-embeddings 128
  --micro-batch-size 1 --global-batch-size 12 --lr 1e-4 --train-iters $iters --log-interval 1
  --eval-iters 0 --split 1000,0,0 --data-cache-path $out/cache --threads 1
  --vocab-file $shared/data/vocab/gpt2-vocab.json --merge-file $shared/data/vocab/gpt2-merges.txt
  --data-path $shared/data/sample/sample_gpt2_text_document"

# Mean elapsed time per iteration over the second half of the run (the balance has settled by then).
step_ms() {
  grep -o 'elapsed time per iteration (ms): [0-9.]*' "$1" | awk -v n="$iters" '
    { ms[NR] = $6 } END { s = 0; c = 0; for (i = int(n / 2) + 1; i <= NR; i++) { s += ms[i]; c++ } printf "%.1f", s / c }'
}
loss() { grep -o 'lm loss: [0-9.E+-]*' "$1" | tail -1 | awk '{print $3}'; }

pair_run() {  # $1: log, $2...: extra flags
  local log=$1; shift
  local port=$((20000 + RANDOM % 20000))
  OMP_NUM_THREADS=1 taskset -c 1 nice -n "$nice1" "$exe" train gpt $flags "$@" --distributed-init-method tcp://127.0.0.1:$port \
    --distributed-world-size 2 --distributed-rank 1 > "$log.rank1" 2>&1 &
  local pid=$!
  OMP_NUM_THREADS=1 taskset -c 0 "$exe" train gpt $flags "$@" --distributed-init-method tcp://127.0.0.1:$port \
    --distributed-world-size 2 --distributed-rank 0 > "$log" 2>&1
  wait $pid
}

taskset -c 1 sh -c 'while :; do :; done' &
busy=$!
trap 'kill $busy 2>/dev/null || true' EXIT
echo "rank 1 shares core 1 with a busy process (pid $busy); $iters iterations, global batch 12 x 1 sample"
for r in $(seq 1 "$rounds"); do
  pair_run "$out/plain.$r.log"
  pair_run "$out/balanced.$r.log" --balance-data-parallel --balance-interval 2
  printf "round %d: plain %s ms/iteration, balanced %s ms/iteration; last lm loss plain %s, balanced %s\n" "$r" \
    "$(step_ms "$out/plain.$r.log")" "$(step_ms "$out/balanced.$r.log")" "$(loss "$out/plain.$r.log")" \
    "$(loss "$out/balanced.$r.log")"
  grep 'data-parallel balance' "$out/balanced.$r.log" | sed 's/^/  /'
done
