#!/usr/bin/env bash
# Greedy decoding throughput, batch 1, fp32, 2 threads, median of 3: lmforge generate's KV-cache decoder (and its
# uncached full-forward path) vs a PyTorch peer with Hugging Face-style past_key_values, same shapes, one run.
#   usage: bench/generate/run_generate_bench.sh [LAYERS HIDDEN HEADS] (default GPT-2 124M: 12 768 12),
#          prompt 32, 128 new
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${BUILD_DIR:-$root/build}
bin=$build/bench/bench_generate
[ -x "$bin" ] || { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$build" --target bench_generate -j2 >/dev/null; }
shape=(--layers "${1:-12}" --hidden "${2:-768}" --heads "${3:-12}" --prompt 32 --new 128)
export OMP_NUM_THREADS=2
ours=$("$bin" "${shape[@]}")
echo "$ours"
"$bin" "${shape[@]}" --uncached --new 16 --reps 1  # the full forward per token, for scale
theirs=$(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 /usr/bin/python3 "$root/bench/generate/generate_bench_torch.py" "${shape[@]}" --threads 2)
echo "$theirs"
a=$(echo "$ours" | sed -E 's/.* ([0-9.]+) tok\/s.*/\1/')
b=$(echo "$theirs" | sed -E 's/.* ([0-9.]+) tok\/s.*/\1/')
awk -v a="$a" -v b="$b" 'BEGIN { printf "ratio: lmforge %.1f tok/s / torch %.1f tok/s = %.2fx\n", a, b, a / b }'
