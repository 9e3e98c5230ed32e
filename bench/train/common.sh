# defines: the parts every training benchmark against PyTorch shares (sourced from the repository root with $root
# and $build set): bench_header (the CPU line, the command and commit, the PyTorch peer at its best on this CPU,
# the GEMM peaks), bench_side (a side's tok/s and GFLOP/s as a fraction of the peak of its precision),
# cpu_has, and the arrays `ours` (lmforge's environment) and `peer` (the peer's interpreter and environment).
#
# The peer at its best on this CPU (issue 32):
#   BLAS     OpenBLAS's OpenMP build (PyTorch's own threads are OpenMP too: the pthread build's threads and torch's
#            fight over the cores). TORCH_BLAS_DIR=<dir with libblas.so.3> names one; otherwise Debian's
#            libopenblas0-openmp is fetched once with `apt-get download` and unpacked with `dpkg -x` into
#            <build>/bench/peer-blas (never installed into the system). If that fails the peer runs on the system's
#            libblas.so.3 and a WARNING says it is handicapped.
#   core     OPENBLAS_CORETYPE = the best this CPU can run, from /proc/cpuinfo: Cooperlake with AVX512-BF16,
#            SkylakeX with AVX-512 (F, BW, VL, DQ), else Zen on AMD and Haswell elsewhere with AVX2 + FMA,
#            Sandybridge with AVX only. Zen and Haswell share OpenBLAS 0.3.21's sgemm kernel: on an AMD EPYC with
#            AVX2 they measured 72.6 and 72.5 GFLOP/s (torch.mm [1024 x 768]·[768 x 3072], 2 threads); Zen is
#            what OpenBLAS's own detection picks on AMD. SkylakeX's kernels die with an illegal instruction
#            without AVX-512, so they are never tried there. A caller's OPENBLAS_CORETYPE wins (both sides).
#   malloc   glibc told to keep freed memory (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ huge): PyTorch's
#            activations are fresh allocations every step.
#   bf16     torch.autocast("cpu", bfloat16) runs its matrix products in oneDNN, which has bf16 kernels from
#            AVX-512 (avx512_core) up; below that oneDNN falls back to reference code (over ten minutes for 4 steps of
#            config A), so peer_bf16=0 and peer_bf16_why says why.
# lmforge runs with the same OPENBLAS_CORETYPE (its OpenBLAS is the system's; on some VMs OpenBLAS's detection
# falls back to Haswell on AVX-512 CPUs).
#
# Peaks: bench_gemm_peak (lmforge's linear layer, OpenBLAS's sgemm, oneDNN's matmul, fp32 and bf16) and
# bench/kernels/gemm_peak_torch.py (torch.mm under the peer's BLAS; bf16 only where peer_bf16) on 2 threads; the
# best over all paths and shapes is this CPU's measured peak of that precision, in GFLOP/s (best call's wall
# time) and in GFLOP per CPU-second (CPU time, user + system of all threads, over >= 0.3 s of calls: a short
# call's CPU time can miss the other threads'). On a shared machine read
# the CPU-second fractions: a side's GFLOP per CPU-second over the peak's.

cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2-)
cpu_has() { [[ " $cpu_flags " == *" $1 "* ]]; }
yesno() { if cpu_has "$1"; then echo yes; else echo no; fi; }

# The OpenBLAS core for this CPU (see above).
best_openblas_core() {
  if cpu_has avx512f && cpu_has avx512bw && cpu_has avx512vl && cpu_has avx512dq; then
    if cpu_has avx512_bf16; then echo Cooperlake; else echo SkylakeX; fi
  elif cpu_has avx2 && cpu_has fma; then
    if grep -qm1 'AuthenticAMD\|HygonGenuine' /proc/cpuinfo; then echo Zen; else echo Haswell; fi
  elif cpu_has avx; then echo Sandybridge
  else echo ""; fi
}

# The OpenMP build's directory (libblas.so.3), fetched into the build directory when TORCH_BLAS_DIR is unset.
# Prints nothing when it cannot be had.
peer_blas_dir() {
  if [ -n "${TORCH_BLAS_DIR:-}" ]; then echo "$TORCH_BLAS_DIR"; return; fi
  local cache=$build/bench/peer-blas dir
  dir=$cache/usr/lib/x86_64-linux-gnu/openblas-openmp
  if [ ! -e "$dir/libblas.so.3" ]; then
    mkdir -p "$cache"
    (cd "$cache" && rm -f libopenblas0-openmp_*.deb && apt-get download -q libopenblas0-openmp >/dev/null 2>&1 &&
      dpkg -x libopenblas0-openmp_*.deb .) || true
  fi
  if [ -e "$dir/libblas.so.3" ]; then echo "$dir"; fi
}

# bench_header "$@": prints the CPU, command, commit and load; sets ours, peer, peer_bf16(_why), core, and (unless
# no_peaks=1, for benchmarks of memory) the peaks peak_*.
bench_header() {
  echo "command: bench/train/$(basename "$0")${*:+ $*}"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cpus;" \
    "avx512f $(yesno avx512f), avx512_bf16 $(yesno avx512_bf16), amx $(cpu_has amx_tile && echo yes || echo no)" \
    "(amx_bf16 $(yesno amx_bf16))"
  echo "lmforge $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src || echo ' + uncommitted src changes');" \
    "$(date -u '+%F %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
  # Settings that change which kernels run (e.g. emulating a CPU without AVX512-BF16 on one with it:
  # ONEDNN_MAX_CPU_ISA=AVX512_CORE LMFORGE_CPU_BF16_GEMM=widen OPENBLAS_CORETYPE=SkylakeX), said so the figures
  # are read as that CPU's.
  local kernel_env
  kernel_env=$(env | { grep -E '^(ONEDNN_MAX_CPU_ISA|DNNL_MAX_CPU_ISA|LMFORGE_[A-Z0-9_]+)=' || true; } | sort | tr '\n' ' ')
  [ -z "$kernel_env" ] || echo "kernel settings from the environment (both sides): $kernel_env"
  local blas why_core
  if [ -n "${OPENBLAS_CORETYPE:-}" ]; then core=$OPENBLAS_CORETYPE why_core="set by the caller"
  else core=$(best_openblas_core) why_core="the best this CPU runs"; fi
  # A caller's core below this CPU's best (some machines' environments set Haswell) runs both sides on narrower
  # kernels than the CPU has: said loudly, since the figures are then not this CPU's.
  local best; best=$(best_openblas_core)
  if [ -n "${OPENBLAS_CORETYPE:-}" ] && [ -n "$best" ] && [ "${OPENBLAS_CORETYPE,,}" != "${best,,}" ]; then
    echo "WARNING: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE comes from the environment; the best this CPU runs is $best" \
      "(run with 'env -u OPENBLAS_CORETYPE' for both sides at their best, unless this is a deliberate emulation)" |
      tee /dev/stderr
  fi
  ours=(env ${core:+OPENBLAS_CORETYPE=$core})
  blas=$(peer_blas_dir)
  peer=(env ${core:+OPENBLAS_CORETYPE=$core} MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000)
  if [ -n "$blas" ]; then
    peer+=(LD_LIBRARY_PATH=$blas)
    echo "peer: PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null) on $blas/libblas.so.3" \
      "(OpenBLAS's OpenMP build), OPENBLAS_CORETYPE=${core:-detected} ($why_core), malloc keeps freed memory"
  else
    echo "WARNING: ******** OpenBLAS's OpenMP build is not available (TORCH_BLAS_DIR unset and apt-get download" \
      "libopenblas0-openmp failed): the PyTorch peer runs on $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)," \
      "possibly the pthread build, a HANDICAPPED peer ********" | tee /dev/stderr
  fi
  peer+=(/usr/bin/python3)
  echo "lmforge: OPENBLAS_CORETYPE=${core:-detected} ($why_core)"
  if cpu_has avx512f && cpu_has avx512bw && cpu_has avx512vl; then peer_bf16=1 peer_bf16_why=""
  else
    peer_bf16=0
    peer_bf16_why="no AVX-512 on this CPU: oneDNN has no bf16 kernel below AVX-512 and PyTorch's bf16 autocast falls back to reference code (minutes per step)"
  fi
  [ "$peer_bf16" = 1 ] || echo "peer bf16 autocast: skipped ($peer_bf16_why)"
  [ "${no_peaks:-0}" = 1 ] || bench_peaks
}

# Sets peak_f32, peak_bf16 (GFLOP/s) and peak_f32_cpu, peak_bf16_cpu (GFLOP/cpu-s): the best of both programs.
bench_peaks() {
  local mine theirs reps=${PEAK_REPS:-3}
  [ -x "$build/bench/bench_gemm_peak" ] || cmake --build "$build" --target bench_gemm_peak -j2 >/dev/null
  mine=$("${ours[@]}" OMP_NUM_THREADS=2 "$build/bench/bench_gemm_peak" --reps "$reps")
  theirs=$("${peer[@]}" "$root/bench/kernels/gemm_peak_torch.py" --reps "$reps" --threads 2 \
    $([ "$peer_bf16" = 1 ] && echo --bf16))
  echo "$mine" | grep '^peak\|^backend' | sed 's/^/gemm peaks (lmforge): /'
  echo "$theirs" | grep '^peak\|^blas' | sed 's/^/gemm peaks (peer): /'
  local all; all=$(printf '%s\n%s\n' "$mine" "$theirs")
  # pick <dtype> <field 1 wall | 2 cpu>: the best over both programs' "peak [torch] <dtype>:" lines
  pick() { echo "$all" | grep -E "^peak (torch )?$1:" | sed -E 's/.*: ([0-9]+) GFLOP\/s, ([0-9]+) GFLOP\/cpu-s.*/\1 \2/' |
    awk -v f="$2" '$f > m { m = $f } END { print m + 0 }'; }
  peak_f32=$(pick f32 1) peak_f32_cpu=$(pick f32 2) peak_bf16=$(pick bf16 1) peak_bf16_cpu=$(pick bf16 2)
  echo "measured peak (2 threads, best of lmforge's, OpenBLAS's, oneDNN's and torch's paths): fp32 $peak_f32 GFLOP/s," \
    "$peak_f32_cpu GFLOP/cpu-s; bf16 $peak_bf16 GFLOP/s, $peak_bf16_cpu GFLOP/cpu-s"
}

# bench_side <label> <f32|bf16> <tok/s> <tok/cpu-s or -> <flop per token>: one side's figures and its fractions
# of the measured peak of its precision.
bench_side() {
  local p=$peak_f32 pc=$peak_f32_cpu
  [ "$2" = bf16 ] && p=$peak_bf16 pc=$peak_bf16_cpu
  awk -v l="$1" -v d="$2" -v t="$3" -v c="$4" -v f="$5" -v p="$p" -v pc="$pc" 'BEGIN {
    g = t * f / 1e9; s = sprintf("%s: %d tok/s, %.1f GFLOP/s = %.1f %% of the %s peak", l, t, g, 100 * g / p, d)
    if (c != "-" && c > 0) { gc = c * f / 1e9
      s = s sprintf("; %d tok/cpu-s, %.1f GFLOP/cpu-s = %.1f %% of the %s peak per cpu-s", c, gc, 100 * gc / pc, d) }
    print s }'
}
