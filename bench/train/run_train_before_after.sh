#!/usr/bin/env bash
# Training throughput before and after a change, against the PyTorch peers, in one alternating run: the bench
# binaries of an earlier commit (built in a git worktree), this checkout's and the peers' Python scripts take turns,
# ROUNDS rounds. Rows: GPT config A fp32 and --bf16 (bench_train / train_bench_torch.py, 4 steps), BERT-base and
# T5-small fp32 (bench_bert_t5_train / bert_t5_train_bench_torch.py, 3 steps). Printed per row and round: wall
# tokens/s and tokens per CPU-second (user+sys); on a loaded machine read the CPU figures.
#   usage: bench/train/run_train_before_after.sh COMMIT [ROUNDS (default 2)]
#   BUILD_DIR: this checkout's build (default build); TORCH_BLAS_DIR: the peer's BLAS, as in run_train_bench.sh.
# Each side uses the OpenBLAS core the environment picks; OPENBLAS_CORETYPE=SkylakeX is added as a second pass
# only on a CPU with AVX-512 (elsewhere that kernel dies with an illegal instruction).
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
export OMP_NUM_THREADS=2
tuned_malloc=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000)
peer=(env "${tuned_malloc[@]}" ${TORCH_BLAS_DIR:+LD_LIBRARY_PATH=$TORCH_BLAS_DIR} /usr/bin/python3)
cores=(default)
grep -q avx512f /proc/cpuinfo && cores+=(SkylakeX)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); avx512f $(grep -c avx512f /proc/cpuinfo) of $(nproc) cpus"
echo "before = $before, after = $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes'); load $(cut -d' ' -f1-3 /proc/loadavg)"
# gpt <label> <binary> [--bf16]: "<label> gpt-A[-bf16]: W tok/s, C tok/cpu-s"
gpt() {
  local out; out=$("$2" --config A --steps 4 ${3:-})
  echo "$1 gpt-A${3:+-bf16}: $(echo "$out" | grep -E '^lmforge A:' | grep -oE '[0-9]+ tok/s'), $(echo "$out" | grep -E '^lmforge A cpu:' | grep -oE '[0-9]+ tok/cpu-s')"
}
gpt_peer() {
  local out; out=$("${peer[@]}" "$root/bench/train/train_bench_torch.py" --config A --steps 4 --threads 2 ${1:-})
  echo "peer   gpt-A${1:+-bf16}: $(echo "$out" | grep -E '^torch A:' | grep -oE '[0-9]+ tok/s'), $(echo "$out" | grep -E '^torch A cpu:' | grep -oE '[0-9]+ tok/cpu-s')"
}
# bert_t5 <label> <command...>: one line per model, "<label> <model>: W tok/s, C tok/cpu-s"
bert_t5() {
  local label=$1; shift
  "$@" --model both --steps 3 | grep -E '^(lmforge|torch) (bert|t5)' | while read -r line; do
    echo "$label $(echo "$line" | cut -d' ' -f2): $(echo "$line" | grep -oE '[0-9]+ tok/s' | head -1), $(echo "$line" |
      grep -oE '[0-9]+ tok/cpu-s' | head -1)"
  done
}
env_core=${OPENBLAS_CORETYPE:-}
for core in "${cores[@]}"; do
  if [ "$core" = SkylakeX ]; then export OPENBLAS_CORETYPE=SkylakeX
  elif [ -n "$env_core" ]; then export OPENBLAS_CORETYPE=$env_core
  else unset OPENBLAS_CORETYPE; fi
  for r in $(seq 1 "$rounds"); do
    echo "== OPENBLAS_CORETYPE=$core, round $r"
    for flag in "" --bf16; do
      gpt "before" "$wt/build/bench/bench_train" $flag
      gpt "after " "$build/bench/bench_train" $flag
      # PyTorch's bf16 autocast on a CPU without AVX512-BF16/AMX takes over ten minutes for these 4 steps.
      if [ -z "$flag" ] || grep -q 'avx512_bf16\|amx_bf16' /proc/cpuinfo; then gpt_peer $flag
      else echo "peer   gpt-A-bf16: not run (no AVX512-BF16 or AMX on this CPU)"; fi
    done
    bert_t5 "before" "$wt/build/bench/bench_bert_t5_train"
    bert_t5 "after " "$build/bench/bench_bert_t5_train"
    bert_t5 "peer  " "${peer[@]}" "$root/bench/train/bert_t5_train_bench_torch.py" --threads 2
  done
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
