#!/usr/bin/env bash
# ELECTRA-Small at sequence 128 (issue 27's speed row): `lmforge train electra --electra-size small` on the sample
# corpus and the PyTorch peer (bench/train/electra_train_bench_torch.py: ELECTRA written for speed, synthetic full
# sequences) in one alternating run, ROUNDS rounds, fp32 then --bf16, 2 threads, dropout 0.1 on both sides. lmforge's
# figure is the mean "elapsed time per iteration" of the iterations after the first (the trainer's own timing of
# zero_grad + forward + backward + optimizer step) as tokens/s; the peer prints the same over its steps after the
# first. Sample examples are shorter than 128 tokens where a document ends, the peer's are full: lmforge's tokens/s
# counts the padded length (global batch x 128, as its log), so both count the same positions per step.
#   usage: bench/train/run_electra_train_bench.sh [STEPS (default 4)] [BATCH (default 32)] [ROUNDS (default 1)]
#   BUILD_DIR: the build (default build); TORCH_BLAS_DIR: the peer's BLAS, as in run_train_bench.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
steps=${1:-4}
batch=${2:-32}
rounds=${3:-1}
build=${BUILD_DIR:-$root/build}
[ -x "$build/lmforge" ] || { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$build" --target lmforge -j2 >/dev/null; }
shared=${LMFORGE_SHARED_DIR:-$root/../shared}
export OMP_NUM_THREADS=2
peer=(env MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000 ${TORCH_BLAS_DIR:+LD_LIBRARY_PATH=$TORCH_BLAS_DIR} /usr/bin/python3)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); load $(cut -d' ' -f1-3 /proc/loadavg)"
ours() {
  local log; log=$("$build/lmforge" train electra --electra-size small --seq-length 128 --max-position-embeddings 512 \
    --micro-batch-size "$batch" --global-batch-size "$batch" --train-iters "$steps" --log-interval 1 --eval-iters 0 \
    --lr-warmup-iters 0 --weight-decay 0.01 --adam-eps 1e-6 --threads 2 ${1:-} \
    --vocab-file "$shared/data/vocab/bert-base-uncased-vocab.txt" --data-path "$shared/data/sample/sample_bert_text_sentence")
  echo "$log" | grep -oE 'elapsed time per iteration \(ms\): [0-9.]+' | awk -v b="$batch" -v f="${1:-}" '
    NR > 1 { s += $NF; n++ }
    END { if (n) printf "lmforge electra-small%s: %.0f tok/s (%d iterations after the first)\n", (f == "" ? "" : "-bf16"), b * 128 * n / (s / 1000), n }'
}
for r in $(seq 1 "$rounds"); do
  echo "== round $r"
  for flag in "" --bf16; do
    ours $flag
    # PyTorch's bf16 autocast on a CPU without AVX512-BF16/AMX is very slow: only where the CPU has them.
    if [ -z "$flag" ] || grep -q 'avx512_bf16\|amx_bf16' /proc/cpuinfo; then
      "${peer[@]}" "$root/bench/train/electra_train_bench_torch.py" --steps "$steps" --batch "$batch" --threads 2 $flag | tail -1
    else
      echo "torch electra-small-bf16: not run (no AVX512-BF16 or AMX on this CPU)"
    fi
  done
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
