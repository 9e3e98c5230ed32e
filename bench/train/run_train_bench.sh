#!/usr/bin/env bash
# GPT-2 training throughput (forward + backward + AdamW, fp32, 2 threads, median of STEPS steps): lmforge's
# bench_train and the PyTorch peer (bench/train/train_bench_torch.py) on the same configurations in one run, with
# the ratios of wall-clock tokens/s and of tokens per CPU-second (user + system; the figure to read on a shared
# machine), each side's GFLOP/s and its fraction of this CPU's measured fp32 GEMM peak.
#   usage: bench/train/run_train_bench.sh [CONFIGS (A, B or AB; default AB)] [STEPS (default 8)] [ROUNDS (default 1)]
# Configurations (../shared/docs/gpt2-reference-notes.md): A = vocab 50257 (padded 50304), 4 layers, hidden 256,
# 4 heads, seq 256, batch 4; B = GPT-2 124M, seq 256, batch 2.
# The CPU line, the peaks and the peer at its best on this CPU (OpenBLAS's OpenMP build with the best
# OPENBLAS_CORETYPE, tuned malloc; TORCH_BLAS_DIR=<dir with libblas.so.3> names the BLAS) come from
# bench/train/common.sh. With ROUNDS > 1 the two sides alternate ROUNDS times and each keeps its best round, so a
# burst of someone else's load does not decide the ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
configs=${1:-AB}
steps=${2:-8}
rounds=${3:-1}
build=${BUILD_DIR:-$root/build}
bin=$build/bench/bench_train
[ -x "$bin" ] || { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$build" --target bench_train -j2 >/dev/null; }
source "$root/bench/train/common.sh"
bench_header "$@"
export OMP_NUM_THREADS=2
# num <output> <line prefix> <unit>: the number before the unit on the line that starts with the prefix
num() { echo "$1" | grep "^$2" | head -1 | sed -E "s#.* ([0-9.]+) $3.*#\1#"; }
declare -A best=() fpt=()
keep() { awk -v a="$2" -v b="${best[$1]:-0}" 'BEGIN { exit !(a > b) }' && best[$1]=$2 || true; }
for r in $(seq 1 "$rounds"); do
  out=$("${ours[@]}" "$bin" --config "$configs" --steps "$steps")
  echo "$out" | sed "s/^/[round $r] /"
  theirs=$("${peer[@]}" "$root/bench/train/train_bench_torch.py" --config "$configs" --steps "$steps" --threads 2)
  echo "$theirs" | sed "s/^/[round $r] /"
  for c in $(echo "$configs" | grep -o .); do
    for side in lmforge torch; do
      o=$out; [ $side = lmforge ] || o=$theirs
      keep "$side$c" "$(num "$o" "$side $c:" tok/s)"
      keep "$side${c}cpu" "$(num "$o" "$side $c cpu:" tok/cpu-s)"
    done
    # the model's flop per token (one count for both sides, bench_train's = the peer's formula): GFLOP/s over tok/s
    fpt[$c]=$(awk -v g="$(num "$out" "lmforge $c:" GFLOP/s)" -v t="$(num "$out" "lmforge $c:" tok/s)" 'BEGIN { print g * 1e9 / t }')
  done
done
for c in $(echo "$configs" | grep -o .); do
  awk -v c="$c" -v a="${best[lmforge$c]}" -v b="${best[torch$c]}" -v ac="${best[lmforge${c}cpu]}" \
    -v bc="${best[torch${c}cpu]}" -v r="$rounds" \
    'BEGIN { printf "ratio %s (best of %d): lmforge %d tok/s / torch %d tok/s = %.2fx; cpu %d / %d tok/cpu-s = %.2fx\n", c, r, a, b, a / b, ac, bc, ac / bc }'
  bench_side "lmforge $c fp32" f32 "${best[lmforge$c]}" "${best[lmforge${c}cpu]}" "${fpt[$c]}"
  bench_side "torch $c fp32" f32 "${best[torch$c]}" "${best[torch${c}cpu]}" "${fpt[$c]}"
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
