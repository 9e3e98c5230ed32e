#!/usr/bin/env bash
# Training throughput before and after a change, against the PyTorch peers, in one alternating run: the bench
# binaries of an earlier commit (built in a git worktree), this checkout's and the peers' Python scripts take turns,
# ROUNDS rounds. Rows: GPT config A fp32 and --bf16 (bench_train / train_bench_torch.py, 4 steps), BERT-base and
# T5-small fp32 (bench_bert_t5_train / bert_t5_train_bench_torch.py, 3 steps). Printed per row and round: wall
# tokens/s and tokens per CPU-second (user+sys); on a loaded machine read the CPU figures.
#   usage: bench/train/run_train_before_after.sh COMMIT [ROUNDS (default 2)]
#   BUILD_DIR: this checkout's build (default build); TORCH_BLAS_DIR: the peer's BLAS, as in run_train_bench.sh;
#   STEPS: timed steps of every row (default 4 for GPT, 3 for BERT/T5; 1 for a quick check of the script).
# The CPU line, the GEMM peaks and the peer at its best on this CPU (OpenBLAS's OpenMP build with the best
# OPENBLAS_CORETYPE for both sides, tuned malloc; its bf16 autocast only where oneDNN has bf16 kernels) come from
# bench/train/common.sh; every row also gives its GFLOP per CPU-second as a fraction of the measured peak of its
# precision (per cpu-s).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
before=${1:?usage: bench/train/run_train_before_after.sh COMMIT [ROUNDS]}
rounds=${2:-2}
build=${BUILD_DIR:-$root/build}
wt=$root/bench/out/before-$before
[ -d "$wt" ] || git worktree add -q "$wt" "$before"
for b in "$wt/build" "$build"; do
  [ -f "$b/CMakeCache.txt" ] || cmake -S "$(dirname "$b")" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLMFORGE_TESTS=OFF -DLMFORGE_CUDA=OFF >/dev/null
  cmake --build "$b" --target bench_train bench_bert_t5_train -j2 >/dev/null
done
source "$root/bench/train/common.sh"
bench_header "$@"
echo "before = $before, after = $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes')"
export OMP_NUM_THREADS=2
# frac <tok/cpu-s> <flop per token> <f32|bf16>: the CPU-second fraction of the measured peak
frac() {
  local p=$peak_f32_cpu; [ "$3" = bf16 ] && p=$peak_bf16_cpu
  awk -v c="$1" -v f="$2" -v p="$p" -v d="$3" 'BEGIN { printf "%.1f %% of the %s peak per cpu-s", 100 * c * f / 1e9 / p, d }'
}
# gpt_line <label> <side> <output> [--bf16]: "<label> gpt-A[-bf16]: W tok/s, C tok/cpu-s, F % of the peak"
gpt_line() {
  local w c g
  w=$(echo "$3" | grep -E "^$2 A:" | grep -oE '[0-9]+ tok/s' | cut -d' ' -f1)
  g=$(echo "$3" | grep -E "^$2 A:" | grep -oE '[0-9.]+ GFLOP/s' | tail -1 | cut -d' ' -f1)  # not the GFLOP/step
  c=$(echo "$3" | grep -E "^$2 A cpu:" | grep -oE '[0-9]+ tok/cpu-s' | cut -d' ' -f1)
  echo "$1 gpt-A${4:+-bf16}: $w tok/s, $c tok/cpu-s, $(frac "$c" "$(awk -v g="$g" -v w="$w" 'BEGIN { print g * 1e9 / w }')" \
    "$([ -n "${4:-}" ] && echo bf16 || echo f32)")"
}
gpt() { gpt_line "$1" lmforge "$("${ours[@]}" "$2" --config A --steps "${STEPS:-4}" ${3:-})" ${3:-}; }
gpt_peer() {
  gpt_line "peer  " torch "$("${peer[@]}" "$root/bench/train/train_bench_torch.py" --config A --steps "${STEPS:-4}" --threads 2 ${1:-})" \
    ${1:-}
}
# bert_t5 <label> <command...>: one line per model, "<label> <model>: W tok/s, C tok/cpu-s, F % of the peak"; the
# flop per token of each model is taken from lmforge's lines (fpt_bert, fpt_t5: the peer prints none)
bert_t5() {
  local label=$1 out line m w c g; shift
  out=$("$@" --model both --steps "${STEPS:-3}" | grep -E '^(lmforge|torch) (bert|t5)')
  while read -r line; do
    m=$(echo "$line" | cut -d' ' -f2)
    w=$(echo "$line" | grep -oE '[0-9]+ tok/s' | head -1 | cut -d' ' -f1)
    c=$(echo "$line" | grep -oE '[0-9]+ tok/cpu-s' | head -1 | cut -d' ' -f1)
    g=$(echo "$line" | grep -oE '[0-9.]+ GFLOP/s' | head -1 | cut -d' ' -f1 || true)  # the peer prints none
    local f=fpt_${m%%-*}  # bert-base -> fpt_bert, t5-small -> fpt_t5
    [ -z "$g" ] || printf -v "$f" '%s' "$(awk -v g="$g" -v w="$w" 'BEGIN { print g * 1e9 / w }')"
    echo "$label $m: $w tok/s, $c tok/cpu-s, $(frac "$c" "${!f}" f32)"
  done <<< "$out"
}
for r in $(seq 1 "$rounds"); do
  echo "== round $r"
  for flag in "" --bf16; do
    gpt "before" "$wt/build/bench/bench_train" $flag
    gpt "after " "$build/bench/bench_train" $flag
    if [ -z "$flag" ] || [ "$peer_bf16" = 1 ]; then gpt_peer $flag
    else echo "peer   gpt-A-bf16: skipped ($peer_bf16_why)"; fi
  done
  bert_t5 "before" "${ours[@]}" "$wt/build/bench/bench_bert_t5_train"
  bert_t5 "after " "${ours[@]}" "$build/bench/bench_bert_t5_train"
  bert_t5 "peer  " "${peer[@]}" "$root/bench/train/bert_t5_train_bench_torch.py" --threads 2
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
