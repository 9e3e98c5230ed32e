#!/usr/bin/env bash
# GPT-2 training throughput (forward + backward + AdamW, fp32, 2 threads, median of STEPS steps): lmforge's
# bench_train and the PyTorch peer (bench/train/train_bench_torch.py) on the same configurations in one run, with
# the ratio.
#   usage: bench/train/run_train_bench.sh [CONFIGS (A, B or AB; default AB)] [STEPS (default 8)] [ROUNDS (default 1)]
# Configurations (../shared/docs/gpt2-reference-notes.md): A = vocab 50257 (padded 50304), 4 layers, hidden 256,
# 4 heads, seq 256, batch 4; B = GPT-2 124M, seq 256, batch 2.
# Each side runs with the OpenBLAS core this environment picks (OPENBLAS_CORETYPE as set, which may cap it at
# AVX2) and with OPENBLAS_CORETYPE=SkylakeX (AVX-512). The PyTorch rows use Debian's torch, whose BLAS is
# whatever libblas.so.3 points at (printed first), with glibc malloc told to keep freed memory
# (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ huge): the strongest peer setup of the notes.
# TORCH_BLAS_DIR=<dir with libblas.so.3> runs the PyTorch side on another BLAS build, e.g. OpenBLAS's OpenMP variant
# (the notes' strongest peer) without switching the system's alternatives:
#   apt-get download libopenblas0-openmp && dpkg -x libopenblas0-openmp_*.deb /tmp/obomp
#   TORCH_BLAS_DIR=/tmp/obomp/usr/lib/x86_64-linux-gnu/openblas-openmp bench/train/run_train_bench.sh
# On a shared machine give ROUNDS > 1: the two sides alternate ROUNDS times and each keeps its best round, so
# a burst of someone else's load does not decide the ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
configs=${1:-AB}
steps=${2:-8}
rounds=${3:-1}
build=${BUILD_DIR:-$root/build}
bin=$build/bench/bench_train
[ -x "$bin" ] || { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$build" --target bench_train -j2 >/dev/null; }
echo "libblas.so.3 -> ${TORCH_BLAS_DIR:-$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)}; load $(cut -d' ' -f1-3 /proc/loadavg)"
export OMP_NUM_THREADS=2
tuned_malloc=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000)
toks() { echo "$1" | grep "^$2 $3:" | sed -E 's/.* ([0-9]+) tok\/s.*/\1/'; }
for core in "${OPENBLAS_CORETYPE:-default}" SkylakeX; do
  if [ "$core" = default ]; then coreenv=(); else coreenv=(OPENBLAS_CORETYPE=$core); fi
  echo "== OPENBLAS_CORETYPE=$core"
  declare -A best_ours=() best_theirs=()
  for r in $(seq 1 "$rounds"); do
    ours=$(env "${coreenv[@]}" "$bin" --config "$configs" --steps "$steps")
    echo "$ours" | sed "s/^/[round $r] /"
    theirs=$(env "${coreenv[@]}" "${tuned_malloc[@]}" ${TORCH_BLAS_DIR:+LD_LIBRARY_PATH=$TORCH_BLAS_DIR} /usr/bin/python3 "$root/bench/train/train_bench_torch.py" \
      --config "$configs" --steps "$steps" --threads 2)
    echo "$theirs" | sed "s/^/[round $r] /"
    for c in $(echo "$configs" | grep -o .); do
      a=$(toks "$ours" lmforge "$c"); b=$(toks "$theirs" torch "$c")
      [ "${best_ours[$c]:-0}" -ge "$a" ] || best_ours[$c]=$a
      [ "${best_theirs[$c]:-0}" -ge "$b" ] || best_theirs[$c]=$b
    done
  done
  for c in $(echo "$configs" | grep -o .); do
    awk -v c="$c" -v a="${best_ours[$c]}" -v b="${best_theirs[$c]}" -v core="$core" -v r="$rounds" \
      'BEGIN { printf "ratio %s (%s, best of %d): lmforge %d tok/s / torch %d tok/s = %.2fx\n", c, core, r, a, b, a / b }'
  done
  unset best_ours best_theirs
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
