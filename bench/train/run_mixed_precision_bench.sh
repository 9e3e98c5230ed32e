#!/usr/bin/env bash
# Mixed-precision training throughput (issue 12's acceptance rows): lmforge fp32 and --bf16 (bench_train) against
# the PyTorch peer (bench/train/train_bench_torch.py) in fp32 and under torch.autocast("cpu", bfloat16), same model and
# batch, 2 threads, dropout 0, forward + backward + AdamW; plus the fp32 / bf16 GEMM peaks (bench_gemm_peak) and
# the fraction of them each side's step reaches.
#   usage: bench/train/run_mixed_precision_bench.sh [CONFIGS (A, B or AB; default AB)] [STEPS (default 4)] [ROUNDS (default 2)]
#          THREADS=n (default 2) for both sides. Besides wall-clock tok/s each side reports tok per CPU-second (user +
#          system time of all its threads over the timed steps), the steadier figure on a shared machine (it still
#          counts threads spinning at barriers as work); a second table gives those ratios.
# The runs alternate ROUNDS times and each keeps its best round (a shared machine's bursts of load). The CPU line,
# the fp32 / bf16 GEMM peaks (bench_gemm_peak and the peer's torch.mm) and the peer at its best on this CPU
# (OpenBLAS's OpenMP build with the best OPENBLAS_CORETYPE, tuned malloc; TORCH_BLAS_DIR=<dir with libblas.so.3>
# names the BLAS) come from bench/train/common.sh. PyTorch's bf16 autocast runs only where oneDNN has bf16 kernels
# (AVX-512); elsewhere its column says why it was skipped.
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
source "$root/bench/train/common.sh"
bench_header "$@"
export OMP_NUM_THREADS=$threads
runs=(lmforge-f32 lmforge-bf16 torch-f32)
[ "$peer_bf16" = 1 ] && runs+=(torch-bf16)
field() { echo "$1" | grep "^$2 $3:" | sed -E "s#.* ([0-9.]+) $4.*#\1#"; }  # the number before unit $4
declare -A best_tok=() best_gf=() best_cpu=()
for r in $(seq 1 "$rounds"); do
  for run in "${runs[@]}"; do
    case $run in
      lmforge-f32) out=$("${ours[@]}" "$build/bench/bench_train" --config "$configs" --steps "$steps") ;;
      lmforge-bf16) out=$("${ours[@]}" "$build/bench/bench_train" --config "$configs" --steps "$steps" --bf16) ;;
      torch-*) flag=(); [ "$run" = torch-bf16 ] && flag=(--bf16)
        out=$("${peer[@]}" "$root/bench/train/train_bench_torch.py" --config "$configs" --steps "$steps" \
          --threads "$threads" "${flag[@]}") ;;
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
# cell <run> <config> <f32|bf16>: "tok/s (wall % of peak)" or why it was not run
cell() {
  if [ -z "${best_tok[$1$2]:-}" ]; then echo "skipped (no AVX-512)"; return; fi
  local p=$peak_f32; [ "$3" = bf16 ] && p=$peak_bf16
  awk -v t="${best_tok[$1$2]}" -v g="${best_gf[$1$2]}" -v p="$p" 'BEGIN { printf "%d (%.1f %%)", t, 100 * g / p }'
}
# cpucell <run> <config> <f32|bf16>: "tok/cpu-s (% of the peak per cpu-s)"; the model's flop per token from the
# same run's GFLOP/s over tok/s
cpucell() {
  if [ -z "${best_cpu[$1$2]:-}" ]; then echo "skipped"; return; fi
  local p=$peak_f32_cpu; [ "$3" = bf16 ] && p=$peak_bf16_cpu
  awk -v c="${best_cpu[$1$2]}" -v t="${best_tok[$1$2]}" -v g="${best_gf[$1$2]}" -v p="$p" \
    'BEGIN { printf "%d (%.1f %%)", c, 100 * c * (g / t) / p }'
}
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else printf "-" }'; }
echo "| config | lmforge fp32 tok/s (% fp32 peak) | lmforge bf16 tok/s (% bf16 peak) | PyTorch fp32 tok/s (% fp32 peak) | PyTorch bf16 autocast tok/s (% bf16 peak) | bf16 / PyTorch fp32 | bf16 / PyTorch autocast | fp32 / PyTorch fp32 |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for c in $(echo "$configs" | grep -o .); do
  echo "| $c | $(cell lmforge-f32 $c f32) | $(cell lmforge-bf16 $c bf16) | $(cell torch-f32 $c f32) |" \
    "$(cell torch-bf16 $c bf16) | $(ratio "${best_tok[lmforge-bf16$c]}" "${best_tok[torch-f32$c]}") |" \
    "$(ratio "${best_tok[lmforge-bf16$c]}" "${best_tok[torch-bf16$c]:-}") |" \
    "$(ratio "${best_tok[lmforge-f32$c]}" "${best_tok[torch-f32$c]}") |"
done
echo "| config | lmforge fp32 tok/cpu-s (% fp32 peak per cpu-s) | lmforge bf16 tok/cpu-s (% bf16 peak per cpu-s) | PyTorch fp32 tok/cpu-s (%) | PyTorch bf16 autocast tok/cpu-s (%) | bf16 / PyTorch fp32 | bf16 / PyTorch autocast | fp32 / PyTorch fp32 | bf16 / lmforge fp32 |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in $(echo "$configs" | grep -o .); do
  echo "| $c | $(cpucell lmforge-f32 $c f32) | $(cpucell lmforge-bf16 $c bf16) | $(cpucell torch-f32 $c f32) |" \
    "$(cpucell torch-bf16 $c bf16) | $(ratio "${best_cpu[lmforge-bf16$c]}" "${best_cpu[torch-f32$c]}") |" \
    "$(ratio "${best_cpu[lmforge-bf16$c]}" "${best_cpu[torch-bf16$c]:-}") |" \
    "$(ratio "${best_cpu[lmforge-f32$c]}" "${best_cpu[torch-f32$c]}") |" \
    "$(ratio "${best_cpu[lmforge-bf16$c]}" "${best_cpu[lmforge-f32$c]}") |"
done
# The same ratios one per line, for scripts (bench/train/run_cpu_speed_check.sh): "ratio <config> <a>/<b>: wall
# <x>x, cpu <y>x" ("-" where a side did not run).
for c in $(echo "$configs" | grep -o .); do
  for pair in lmforge-f32/torch-f32 lmforge-bf16/lmforge-f32 lmforge-bf16/torch-f32 lmforge-bf16/torch-bf16; do
    a=${pair%/*} b=${pair#*/}
    echo "ratio $c $pair: wall $(ratio "${best_tok[$a$c]:-}" "${best_tok[$b$c]:-}"), cpu" \
      "$(ratio "${best_cpu[$a$c]:-}" "${best_cpu[$b$c]:-}")"
  done
done
echo "$threads threads; best of $rounds rounds; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
