#!/usr/bin/env bash
# Training throughput before and after a change, against the PyTorch peer, in one run: bench_train of an earlier
# commit (built in a git worktree), bench_train of this checkout and bench/train/train_bench_torch.py alternate, 2
# rounds per OpenBLAS core (the environment's, and SkylakeX), configs A and B (see run_train_bench.sh), 4 steps each.
#   usage: bench/train/run_train_before_after.sh COMMIT      (BUILD_DIR: this checkout's build, default build;
#          TORCH_BLAS_DIR: the peer's BLAS, e.g. OpenBLAS's OpenMP build as in run_train_bench.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
before=${1:?usage: bench/train/run_train_before_after.sh COMMIT}
build=${BUILD_DIR:-$root/build}
wt=$root/bench/out/before-$before
[ -d "$wt" ] || git worktree add -q "$wt" "$before"
[ -x "$wt/build/bench/bench_train" ] || { cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=Release >/dev/null;
  cmake --build "$wt/build" --target bench_train -j2 >/dev/null; }
[ -x "$build/bench/bench_train" ] || cmake --build "$build" --target bench_train -j2 >/dev/null
export OMP_NUM_THREADS=2
tuned_malloc=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000)
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
for core in default SkylakeX; do
  if [ $core = default ]; then env=(); else env=(OPENBLAS_CORETYPE=$core); fi
  for r in 1 2; do
    echo "== OPENBLAS_CORETYPE=$core, round $r"
    env "${env[@]}" "$wt/build/bench/bench_train" --config AB --steps 4 | grep -E "^lmforge [AB]:" | sed 's/^/before /'
    env "${env[@]}" "$build/bench/bench_train" --config AB --steps 4 | grep -E "^lmforge [AB]:" | sed 's/^/after  /'
    env "${env[@]}" "${tuned_malloc[@]}" ${TORCH_BLAS_DIR:+LD_LIBRARY_PATH=$TORCH_BLAS_DIR} /usr/bin/python3 \
      "$root/bench/train/train_bench_torch.py" --config AB --steps 4 --threads 2 | grep -E "^torch [AB]:" | sed 's/^/peer   /'
  done
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
