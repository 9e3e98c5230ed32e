#!/usr/bin/env bash
# Mixed-precision training throughput (issue 12's acceptance rows): lmforge fp32 and --bf16 (bench_train) against
# the PyTorch peer (bench/train/train_bench_torch.py) in fp32 and under torch.autocast("cpu", bfloat16), same model and
# batch, 2 threads, dropout 0, forward + backward + AdamW; plus the fp32 / bf16 GEMM peaks (bench_gemm_peak) and
# the fraction of them each side's step reaches.
#   usage: bench/train/run_mixed_precision_bench.sh [CONFIGS (A, B or AB; default AB)] [STEPS (default 4)] [ROUNDS (default 2)]
#          THREADS=n (default 2) for both sides. Besides wall-clock tok/s each side reports tok per CPU-second (user +
#          system time of all its threads over the timed steps), the steadier figure on a shared machine (it still
#          counts threads spinning at barriers as work); a second table gives those ratios.
# The four runs alternate ROUNDS times and each keeps its best round (a shared machine's bursts of load). The
# PyTorch side is the notes' strongest setup: glibc malloc kept from returning memory and, with
# TORCH_BLAS_DIR=<dir with libblas.so.3>, OpenBLAS's OpenMP build (see run_train_bench.sh for how to unpack it).
# OPENBLAS_CORETYPE as set in the environment applies to both sides (SkylakeX: AVX-512 kernels).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
configs=${1:-AB}
steps=${2:-4}
rounds=${3:-2}
build=${BUILD_DIR:-$root/build}
[ -x "$build/bench/bench_train" ] && [ -x "$build/bench/bench_gemm_peak" ] ||
  cmake --build "$build" --target bench_train bench_gemm_peak -j2 >/dev/null
threads=${THREADS:-2}
export OMP_NUM_THREADS=$threads
tuned_malloc=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000)
echo "libblas.so.3 -> ${TORCH_BLAS_DIR:-$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)};" \
  "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%F %H:%M UTC')"
peaks=$("$build/bench/bench_gemm_peak" --reps 5)
echo "$peaks"
peak_f32=$(echo "$peaks" | sed -n 's/^peak f32: \([0-9]*\).*/\1/p')
peak_bf16=$(echo "$peaks" | sed -n 's/^peak bf16: \([0-9]*\).*/\1/p')
field() { echo "$1" | grep "^$2 $3:" | sed -E "s#.* ([0-9.]+) $4.*#\1#"; }  # the number before unit $4
declare -A best_tok=() best_gf=() best_cpu=()
for r in $(seq 1 "$rounds"); do
  for run in lmforge-f32 lmforge-bf16 torch-f32 torch-bf16; do
    case $run in
      lmforge-f32) out=$("$build/bench/bench_train" --config "$configs" --steps "$steps") ;;
      lmforge-bf16) out=$("$build/bench/bench_train" --config "$configs" --steps "$steps" --bf16) ;;
      torch-*) flag=(); [ "$run" = torch-bf16 ] && flag=(--bf16)
        out=$(env "${tuned_malloc[@]}" ${TORCH_BLAS_DIR:+LD_LIBRARY_PATH=$TORCH_BLAS_DIR} /usr/bin/python3 \
          "$root/bench/train/train_bench_torch.py" --config "$configs" --steps "$steps" --threads "$threads" "${flag[@]}") ;;
    esac
    echo "$out" | grep -v '^backend' | sed "s/^/[round $r $run] /"
    side=${run%%-*}
    for c in $(echo "$configs" | grep -o .); do
      t=$(field "$out" "$side" "$c" "tok/s"); g=$(field "$out" "$side" "$c" "GFLOP/s")
      u=$(field "$out" "$side" "$c cpu" "tok/cpu-s")
      if awk -v a="$u" -v b="${best_cpu[$run$c]:-0}" 'BEGIN { exit !(a > b) }'; then best_cpu[$run$c]=$u; fi
      if awk -v a="$t" -v b="${best_tok[$run$c]:-0}" 'BEGIN { exit !(a > b) }'; then
        best_tok[$run$c]=$t; best_gf[$run$c]=$g
      fi
    done
  done
done
echo "| config | lmforge fp32 tok/s (% fp32 peak) | lmforge bf16 tok/s (% bf16 peak) | PyTorch fp32 tok/s (% fp32 peak) | PyTorch bf16 autocast tok/s (% bf16 peak) | bf16 / PyTorch fp32 | bf16 / PyTorch autocast | fp32 / PyTorch fp32 |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for c in $(echo "$configs" | grep -o .); do
  awk -v c="$c" -v lf="${best_tok[lmforge-f32$c]}" -v lb="${best_tok[lmforge-bf16$c]}" \
    -v tf="${best_tok[torch-f32$c]}" -v tb="${best_tok[torch-bf16$c]}" \
    -v glf="${best_gf[lmforge-f32$c]}" -v glb="${best_gf[lmforge-bf16$c]}" \
    -v gtf="${best_gf[torch-f32$c]}" -v gtb="${best_gf[torch-bf16$c]}" -v pf="$peak_f32" -v pb="$peak_bf16" \
    'BEGIN { printf "| %s | %d (%.0f %%) | %d (%.0f %%) | %d (%.0f %%) | %d (%.0f %%) | %.2fx | %.2fx | %.2fx |\n",
             c, lf, 100 * glf / pf, lb, 100 * glb / pb, tf, 100 * gtf / pf, tb, 100 * gtb / pb, lb / tf, lb / tb, lf / tf }'
done
echo "| config | lmforge fp32 tok/cpu-s | lmforge bf16 tok/cpu-s | PyTorch fp32 tok/cpu-s | PyTorch bf16 autocast tok/cpu-s | bf16 / PyTorch fp32 | bf16 / PyTorch autocast | fp32 / PyTorch fp32 |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for c in $(echo "$configs" | grep -o .); do
  awk -v c="$c" -v lf="${best_cpu[lmforge-f32$c]}" -v lb="${best_cpu[lmforge-bf16$c]}" \
    -v tf="${best_cpu[torch-f32$c]}" -v tb="${best_cpu[torch-bf16$c]}" \
    'BEGIN { printf "| %s | %d | %d | %d | %d | %.2fx | %.2fx | %.2fx |\n", c, lf, lb, tf, tb, lb / tf, lb / tb, lf / tf }'
done
echo "$threads threads; best of $rounds rounds; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
