#!/usr/bin/env bash
# BERT-base (12 layers, hidden 768, 12 heads, seq 128) and Megatron's small T5 (6+6 layers, hidden 512, 8 heads,
# ffn 2048, encoder 512 / decoder 128) training throughput: lmforge's bench_bert_t5_train and the PyTorch peer
# (bench/train/bert_t5_train_bench_torch.py) on the same shapes in one run, fp32, 2 threads, dropout off, with the
# ratios of wall-clock tokens/s (median step) and of tokens per CPU-second (user+sys, mean over the steps) — the
# latter is what to read on a loaded machine.
#   usage: bench/train/run_bert_t5_train_bench.sh [MODEL (bert, t5 or both; default both)] [STEPS (default 3)]
#          [ROUNDS (default 1)] [BATCH_BERT (default 4)] [BATCH_T5 (default 2)]
# The CPU line, the GEMM peaks and the peer at its best on this CPU (OpenBLAS's OpenMP build with the best
# OPENBLAS_CORETYPE, tuned malloc; TORCH_BLAS_DIR=<dir with libblas.so.3> names the BLAS) come from
# bench/train/common.sh; at the end each side's GFLOP/s (bench_bert_t5_train's flop count for both) as a fraction of
# the measured fp32 peak. With ROUNDS > 1 the sides alternate and each keeps its best round (wall and CPU separately).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
model=${1:-both}
steps=${2:-3}
rounds=${3:-1}
bb=${4:-4}
bt=${5:-2}
build=${BUILD_DIR:-$root/build}
bin=$build/bench/bench_bert_t5_train
[ -x "$bin" ] || { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$build" --target bench_bert_t5_train -j2 >/dev/null; }
source "$root/bench/train/common.sh"
bench_header "$@"
export OMP_NUM_THREADS=2
# field <output> <side> <model> <unit> <n>: the n-th number followed by that unit on the side's line
field() { echo "$1" | grep "^$2 $3" | grep -oE "[0-9]+ $4" | sed -n "${5}p" | cut -d' ' -f1; }
declare -A best=() fpt=()
keep() { [ "${best[$1]:-0}" -ge "$2" ] || best[$1]=$2; }
for r in $(seq 1 "$rounds"); do
  mine=$("${ours[@]}" "$bin" --model "$model" --steps "$steps" --batch-bert "$bb" --batch-t5 "$bt")
  echo "$mine" | sed "s/^/[round $r] /"
  theirs=$("${peer[@]}" "$root/bench/train/bert_t5_train_bench_torch.py" --model "$model" --steps "$steps" --threads 2 --batch-bert "$bb" \
    --batch-t5 "$bt")
  echo "$theirs" | sed "s/^/[round $r] /"
  for m in bert t5; do
    [ "$model" = both ] || [ "$model" = "$m" ] || continue
    for side in lmforge torch; do
      out=$mine; [ $side = lmforge ] || out=$theirs
      keep "$side-$m-wall" "$(field "$out" $side $m tok/s 1)"
      keep "$side-$m-cpu" "$(field "$out" $side $m tok/cpu-s 1)"
      keep "$side-$m-fb" "$(field "$out" $side $m tok/cpu-s 2)"
    done
    # the model's flop per token, bench_bert_t5_train's count (GFLOP/s over tok/s of its line), for both sides
    fpt[$m]=$(echo "$mine" | grep "^lmforge $m" | sed -E 's/.* ([0-9]+) tok\/s, ([0-9.]+) GFLOP\/s.*/\1 \2/' |
      awk '{ print $2 * 1e9 / $1 }')
  done
done
for m in bert t5; do
  [ "$model" = both ] || [ "$model" = "$m" ] || continue
  awk -v m="$m" -v r="$rounds" -v aw="${best[lmforge-$m-wall]}" -v tw="${best[torch-$m-wall]}" \
    -v ac="${best[lmforge-$m-cpu]}" -v tc="${best[torch-$m-cpu]}" -v af="${best[lmforge-$m-fb]}" \
    -v tf="${best[torch-$m-fb]}" \
    'BEGIN { printf "ratio %s (best of %d): wall %d / %d tok/s = %.2fx; cpu %d / %d tok/cpu-s = %.2fx; cpu without AdamW %d / %d = %.2fx (lmforge / torch)\n", m, r, aw, tw, aw / tw, ac, tc, ac / tc, af, tf, af / tf }'
  bench_side "lmforge $m fp32" f32 "${best[lmforge-$m-wall]}" "${best[lmforge-$m-cpu]}" "${fpt[$m]}"
  bench_side "torch $m fp32" f32 "${best[torch-$m-wall]}" "${best[torch-$m-cpu]}" "${fpt[$m]}"
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
