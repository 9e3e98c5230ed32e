#!/usr/bin/env bash
# One optimizer step (clip to global norm 1.0 + AdamW, fp32, 2 threads, median of N steps) over GPT-2 124M's
# 148 parameter tensors: lmforge's bench_optim and torch.optim.AdamW + clip_grad_norm_ (single-tensor and
# foreach paths) in one run, with the ratio against the faster torch path.
#   usage: bench/kernels/run_optim_bench.sh [STEPS (default 5)]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
steps=${1:-5}
build=${BUILD_DIR:-$root/build}
bin=$build/bench/bench_optim
[ -x "$bin" ] || { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$build" --target bench_optim -j2 >/dev/null; }
export OMP_NUM_THREADS=2
ours=$("$bin" "$steps")
echo "$ours"
theirs=$(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 /usr/bin/python3 "$root/bench/kernels/optim_bench_torch.py" "$steps" 2)
echo "$theirs"
a=$(echo "$ours" | sed -E 's/.*median ([0-9.]+) ms.*/\1/')
b=$(echo "$theirs" | sed -E 's/.*median ([0-9.]+) ms.*/\1/' | sort -g | head -1)
awk -v a="$a" -v b="$b" 'BEGIN { printf "ratio: torch best %.1f ms / lmforge %.1f ms = %.2fx faster\n", b, a, b / a }'
