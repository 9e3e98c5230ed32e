#!/usr/bin/env bash
# Peak memory (RSS) of one GPT-2 124M training step at seq 1024 (batch B, default 1), fp32 and bf16, without
# recomputation and with selective (attention core) and full (every layer, one per chunk) recomputation, and
# PyTorch's for the same model (fp32; glibc malloc as in run_train_bench.sh). One process per row: the peak is the
# process's ru_maxrss after the steps.   usage: bench/train/run_recompute_memory.sh [BATCH] [STEPS (default 1)]
# The CPU line and the peer's set-up (OpenBLAS's OpenMP build, the best OPENBLAS_CORETYPE, tuned malloc) come from
# bench/train/common.sh; no GEMM peaks (this measures memory, not speed).
set -euo pipefail
cd "$(dirname "$0")/../.."
batch=${1:-1}
steps=${2:-1}
root=$(pwd)
build=${BUILD_DIR:-$root/build}
bin=$build/bench/bench_train
no_peaks=1
source "$root/bench/train/common.sh"
bench_header "$@"
export OMP_NUM_THREADS=2
for dtype in "" --bf16; do
  for r in none selective full; do
    extra=(); [ "$r" = none ] || extra=(--recompute "$r")
    "${ours[@]}" "$bin" --config B --seq 1024 --batch "$batch" --steps "$steps" $dtype "${extra[@]}" | grep -v phases
  done
done
"${peer[@]}" bench/train/train_bench_torch.py --config B \
  --seq 1024 --batch "$batch" --steps "$steps" --threads 2
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
