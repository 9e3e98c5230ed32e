#!/usr/bin/env bash
# GPT-2 training throughput (forward + backward + AdamW, fp32, 2 threads, median of N steps): lmforge's bench_train
# and the PyTorch peer (bench/train_bench_torch.py) on the same configurations in one run, with the ratio.
#   usage: bench/run_train_bench.sh [CONFIGS (A, B or AB; default AB)] [STEPS (default 8)]
# Configurations (docs/gpt2-reference-notes.md): A = vocab 50257 (padded 50304), 4 layers, hidden 256, 4 heads,
# seq 256, batch 4; B = GPT-2 124M, seq 256, batch 2.
# Each side runs twice: with the OpenBLAS core this environment picks (OPENBLAS_CORETYPE as set, which may cap
# it at AVX2), and with OPENBLAS_CORETYPE=SkylakeX (AVX-512). The PyTorch rows use Debian's torch, whose BLAS is
# whatever libblas.so.3 points at (OpenBLAS here when update-alternatives selects it), with glibc malloc told
# to keep freed memory (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ huge) — the strongest peer row of the notes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
configs=${1:-AB}
steps=${2:-8}
build=${BUILD_DIR:-$root/build}
bin=$build/bench/bench_train
[ -x "$bin" ] || { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$build" --target bench_train -j2 >/dev/null; }
echo "libblas.so.3 -> $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
export OMP_NUM_THREADS=2
tuned_malloc=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000)
for core in "${OPENBLAS_CORETYPE:-default}" SkylakeX; do
  if [ "$core" = default ]; then coreenv=(); else coreenv=(OPENBLAS_CORETYPE=$core); fi
  echo "== OPENBLAS_CORETYPE=$core"
  ours=$(env "${coreenv[@]}" "$bin" --config "$configs" --steps "$steps")
  echo "$ours"
  theirs=$(env "${coreenv[@]}" "${tuned_malloc[@]}" /usr/bin/python3 "$root/bench/train_bench_torch.py" \
    --config "$configs" --steps "$steps" --threads 2)
  echo "$theirs"
  for c in $(echo "$configs" | grep -o .); do
    a=$(echo "$ours" | grep "^lmforge $c:" | sed -E 's/.* ([0-9]+) tok\/s.*/\1/')
    b=$(echo "$theirs" | grep "^torch $c:" | sed -E 's/.* ([0-9]+) tok\/s.*/\1/')
    awk -v c="$c" -v a="$a" -v b="$b" -v core="$core" \
      'BEGIN { printf "ratio %s (%s): lmforge %d tok/s / torch %d tok/s = %.2fx\n", c, core, a, b, a / b }'
  done
done
