#!/usr/bin/env bash
# ELECTRA-Small at sequence 128 (issue 27's speed row): `lmforge train electra --electra-size small` on the sample
# corpus and the PyTorch peer (bench/train/electra_train_bench_torch.py: ELECTRA written for speed, synthetic full
# sequences) in one alternating run, ROUNDS rounds, fp32 then --bf16, 2 threads, dropout 0.1 on both sides. lmforge's
# figure is the mean "elapsed time per iteration" of the iterations after the first (the trainer's own timing of
# zero_grad + forward + backward + optimizer step) as tokens/s, and the CPU time (user + system) the process used
# between those log lines (bench/train/cpu_per_line.py) as tokens per CPU-second; the peer prints the same over its
# steps after the first. Sample examples are shorter than 128 tokens where a document ends, the peer's are full:
# lmforge's tokens/s counts the padded length (global batch x 128, as its log), so both count the same positions per
# step. Each side's GFLOP/s uses the peer's model_flops count (the same model) and is given as a fraction of the
# measured peak of its precision.
#   usage: bench/train/run_electra_train_bench.sh [STEPS (default 4)] [BATCH (default 32)] [ROUNDS (default 1)]
#   BUILD_DIR: the build (default build); TORCH_BLAS_DIR: the peer's BLAS. The CPU line, the peaks and the peer at
#   its best on this CPU (OpenBLAS's OpenMP build, best OPENBLAS_CORETYPE, tuned malloc; its bf16 autocast only
#   where oneDNN has bf16 kernels) come from bench/train/common.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
steps=${1:-4}
batch=${2:-32}
rounds=${3:-1}
build=${BUILD_DIR:-$root/build}
[ -x "$build/lmforge" ] || { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$build" --target lmforge -j2 >/dev/null; }
shared=${LMFORGE_SHARED_DIR:-$root/../shared}
source "$root/bench/train/common.sh"
bench_header "$@"
export OMP_NUM_THREADS=2
fpt=$(/usr/bin/python3 "$root/bench/train/electra_train_bench_torch.py" --batch "$batch" --flops-only |
  sed -E 's/.*: ([0-9.]+) GFLOP\/step/\1/' | awk -v b="$batch" '{ print $1 * 1e9 / (b * 128) }')
declare -A best=()
keep() { awk -v a="$2" -v b="${best[$1]:-0}" 'BEGIN { exit !(a > b) }' && best[$1]=$2 || true; }
# ours [--bf16]: "lmforge electra-small[-bf16]: W tok/s, C tok/cpu-s (...)"
ours_run() {
  local log; log=$("${ours[@]}" /usr/bin/python3 "$root/bench/train/cpu_per_line.py" 'elapsed time per iteration' \
    "$build/lmforge" train electra --electra-size small --seq-length 128 --max-position-embeddings 512 \
    --micro-batch-size "$batch" --global-batch-size "$batch" --train-iters "$steps" --log-interval 1 --eval-iters 0 \
    --lr-warmup-iters 0 --weight-decay 0.01 --adam-eps 1e-6 --threads 2 ${1:-} \
    --vocab-file "$shared/data/vocab/bert-base-uncased-vocab.txt" --data-path "$shared/data/sample/sample_bert_text_sentence")
  echo "$log" | grep 'elapsed time per iteration' | sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+) .*cpu-s since the previous line: ([0-9.]+).*/\1 \2/' |
    awk -v b="$batch" -v f="${1:-}" '
    NR > 1 { s += $1; c += $2; n++ }
    END { if (n) printf "lmforge electra-small%s: %.0f tok/s, %.0f tok/cpu-s (%d iterations after the first)\n", (f == "" ? "" : "-bf16"), b * 128 * n / (s / 1000), b * 128 * n / c, n }'
}
for r in $(seq 1 "$rounds"); do
  echo "== round $r"
  for flag in "" --bf16; do
    line=$(ours_run $flag); echo "$line"
    keep "lmforge$flag" "$(echo "$line" | grep -oE '[0-9]+ tok/s' | cut -d' ' -f1)"
    keep "lmforge${flag}cpu" "$(echo "$line" | grep -oE '[0-9]+ tok/cpu-s' | cut -d' ' -f1)"
    if [ -z "$flag" ] || [ "$peer_bf16" = 1 ]; then
      line=$("${peer[@]}" "$root/bench/train/electra_train_bench_torch.py" --steps "$steps" --batch "$batch" --threads 2 $flag | tail -1)
      echo "$line"
      keep "torch$flag" "$(echo "$line" | grep -oE '[0-9]+ tok/s' | cut -d' ' -f1)"
      keep "torch${flag}cpu" "$(echo "$line" | grep -oE '[0-9]+ tok/cpu-s' | cut -d' ' -f1)"
    else
      echo "torch electra-small-bf16: skipped ($peer_bf16_why)"
    fi
  done
done
awk -v a="${best[lmforge]}" -v b="${best[torch]}" -v ac="${best[lmforgecpu]}" -v bc="${best[torchcpu]}" -v r="$rounds" \
  'BEGIN { printf "ratio electra-small fp32 (best of %d): %d / %d tok/s = %.2fx; cpu %d / %d tok/cpu-s = %.2fx\n", r, a, b, a / b, ac, bc, ac / bc }'
bench_side "lmforge electra-small fp32" f32 "${best[lmforge]}" "${best[lmforgecpu]}" "$fpt"
bench_side "lmforge electra-small bf16" bf16 "${best[lmforge--bf16]}" "${best[lmforge--bf16cpu]}" "$fpt"
bench_side "torch electra-small fp32" f32 "${best[torch]}" "${best[torchcpu]}" "$fpt"
[ "$peer_bf16" = 1 ] && bench_side "torch electra-small bf16 autocast" bf16 "${best[torch--bf16]}" "${best[torch--bf16cpu]}" "$fpt"
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
