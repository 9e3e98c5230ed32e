#!/usr/bin/env bash
# The GPU check of issue 26: one short script that a lent GPU machine (an H100 with nvcc 13, cuBLAS, PyTorch with
# CUDA and compute-sanitizer, but none of the Debian libraries lmforge links on the CPU) runs in well under 8 minutes,
# and that MEASURES: the CUDA op cases; GPT, BERT and T5 small training on cuda against the CPU build's losses (fp32
# and bf16, max relative difference per step); a checkpoint written on the GPU resumed on the CPU; greedy generation
# on cuda against the cpu; GPT-2 124M training throughput (bf16, seq 1024) against PyTorch on the same GPU (eager
# with SDPA and fused AdamW, and torch.compile). Everything it writes goes under OUTDIR; the table is printed last
# and written to OUTDIR/device-check.txt (the throughput table also to OUTDIR/throughput.txt).
#
#   bash scripts/device-check.sh --prepare      # here (no GPU): build, pack and check everything the run needs into
#                                               # build-device-deps/ (git-ignored; carry its bin.tar.xz,
#                                               # devlibs.tar.xz, data, ref and googletest: < 64 MiB), then dry-run
#   bash scripts/device-check.sh --dry-run [D]  # here: the whole flow with --device cpu and tiny shapes (parsing,
#                                               # comparisons, the PyTorch peer's code), no GPU needed
#   bash scripts/device-check.sh [OUTDIR]       # there (OUTDIR defaults to $OUT, else ./device-check-out)
#
# What --prepare puts in build-device-deps/: bin/ (lmforge and kernels_test_ops_cuda from the CUDA build here,
# stripped), devlibs.tar.xz (their Debian runtime libraries, minus glibc and the CUDA libraries the GPU machine has),
# data/ (the shared GPT-2 and BERT sample datasets and vocabularies), ref/ (the CPU's per-step losses of every parity
# run, made here with the same binary), googletest/ (sources for the kernels-only fallback build, used only when the
# carried binaries cannot run there).
#
# Budget on an H100 (device time; the machine's start is extra): unpack 10 s, op cases ≤ 150 s (+ ≤ 60 s for the
# fallback GEMM, ≤ 60 s each for the WMMA flash and the row attention kernels), six small parity runs + two
# two-rank runs + resume + generate ≈ 1 min, the bf16 GEMM peak ≤ 60 s, throughput: lmforge ≤ 150 s, PyTorch eager
# ≤ 90 s, torch.compile ≤ 150 s. Each part runs only while the elapsed time (DEVICE_CHECK_BUDGET, default 450 s)
# leaves room (the rows say when one was skipped). Measured on the H100 (2026-11-27): the whole check 104 s, the op
# cases 3 s, each parity run ~1 s.
#
# Environment: DEVICE_CHECK_SANITIZE=1 adds compute-sanitizer memcheck + racecheck over the op cases at the end
# (each up to DEVICE_CHECK_SANITIZE_LIMIT s, default 100); DEVICE_CHECK_COMPILE=0 leaves torch.compile out;
# DEVICE_CHECK_BUILD (default build) is the CUDA build --prepare copies from; DEVICE_CHECK_STEPS (20) the parity
# steps; DEVICE_CHECK_TP="B T steps" the lmforge throughput run (16 1024 15).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
deps=$root/build-device-deps
steps=${DEVICE_CHECK_STEPS:-20}
mode=run
case "${1:-}" in
  --prepare) mode=prepare; shift ;;
  --dry-run) mode=dry; shift ;;
  -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
  -*) echo "device-check: unknown option $1 (--prepare, --dry-run, or an output folder)" >&2; exit 2 ;;
esac

# ---- the runs' shapes (shared by --prepare's CPU references and the device run) -----------------------------------
# Small models (every op of each family, dropout on, two micro-batches per step so accumulation is exercised): the
# CPU references cost seconds here, and the GPU side checks the same kernels as the large shapes do.
common_flags() {  # $1 model, $2 data folder, $3 cache folder
  local d=$2
  echo --num-layers 2 --hidden-size 128 --num-attention-heads 4 --micro-batch-size 4 --global-batch-size 8 \
    --lr 0.0006 --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.01 --seed 1234 --log-interval 1 \
    --train-iters "$steps" --split 100,0,0 --eval-iters 0 --hidden-dropout 0.1 --attention-dropout 0.1 \
    --data-cache-path "$3/cache-$1"
  case $1 in
    gpt) echo --seq-length 128 --max-position-embeddings 128 --data-path "$d/sample_gpt2_text_document" \
           --tokenizer-type GPT2BPETokenizer --vocab-file "$d/gpt2-vocab.json" --merge-file "$d/gpt2-merges.txt" ;;
    bert) echo --seq-length 128 --max-position-embeddings 128 --data-path "$d/sample_bert_text_sentence" \
            --tokenizer-type BertWordPieceLowerCase --vocab-file "$d/bert-base-uncased-vocab.txt" ;;
    t5) echo --encoder-seq-length 128 --decoder-seq-length 32 --max-position-embeddings 128 --vocab-extra-ids 100 \
          --data-path "$d/sample_bert_text_sentence" --tokenizer-type BertWordPieceLowerCase \
          --vocab-file "$d/bert-base-uncased-vocab.txt" ;;
  esac
}
precision_flag() { [ "$1" = bf16 ] && echo --bf16; }

# "iteration name value" for every per-iteration loss of a training log (lm, and BERT's sop).
losses() {
  awk '/^ iteration / { it = $2; sub(/\/.*/, "", it); n = split($0, f, "|");
         for (i = 1; i <= n; i++) if (f[i] ~ / loss: /) { name = f[i]; sub(/ loss: .*/, "", name); gsub(/ /, "", name);
           v = f[i]; sub(/.* loss: /, "", v); gsub(/ /, "", v); print it, name, v } }' "$1"
}
# compare REF GOT TOL FIRST LAST → "ok|FAIL <details>": every loss of iterations FIRST..LAST present in both, each
# within TOL relative of the reference; a non-number (nan, inf) never passes.
compare() {
  awk -v tol="$3" -v first="$4" -v last="$5" '
    NR == FNR { if ($1 >= first && $1 <= last) ref[$1 " " $2] = $3; next }
    $1 >= first && $1 <= last { key = $1 " " $2; if (!(key in ref)) { extra++; next }
      n++; seen[key] = 1; r = ref[key] + 0; g = $3 + 0
      if ($3 !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) { nonnum++; next }
      d = (g - r) / (r == 0 ? 1 : r); d = d < 0 ? -d : d; if (d > w) { w = d; at = key }
      if (!(d <= tol)) bad++ }
    END { for (k in ref) if (!(k in seen)) missing++
          expect = last - first + 1
          if (n == 0) print "FAIL no losses compared"
          else if (missing || extra) printf "FAIL %d losses compared, %d missing, %d unexpected\n", n, missing, extra
          else if (nonnum) printf "FAIL %d of %d losses not finite (nan/inf)\n", nonnum, n
          else if (bad) printf "FAIL max rel %.2e (iteration/loss %s) > %s; %d of %d over\n", w, at, tol, bad, n
          else printf "ok max rel %.2e over %d losses of iterations %d-%d (tol %s)\n", w, n, first, last, tol }' "$1" "$2"
}
# Median of the per-iteration times (ms) of iterations after the first $2 in a training log.
median_ms() {
  awk -v skip="$2" '/^ iteration / { it = $2; sub(/\/.*/, "", it); if (it + 0 <= skip) next
        s = $0; sub(/.*elapsed time per iteration \(ms\): /, "", s); sub(/ .*/, "", s); print s + 0 }' "$1" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2];
                                        else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ==== --prepare (here) ================================================================================================
if [ $mode = prepare ]; then
  set -e
  build=${DEVICE_CHECK_BUILD:-build}
  shared=${LMFORGE_SHARED:-$root/../shared}
  [ -d "$shared/data/sample" ] || shared=/work/shared
  grep -q '^LMFORGE_CUDA:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null ||
    { echo "device-check --prepare: $build is not a CUDA build (configure with -DLMFORGE_CUDA=ON -DLMFORGE_TESTS=ON)" >&2; exit 1; }
  echo "== build (lmforge, kernels_test_ops_cuda in $build)"
  cmake --build "$build" --target lmforge kernels_test_ops_cuda
  rm -rf "$deps" && mkdir -p "$deps/bin" "$deps/data" "$deps/ref"
  cp "$build/lmforge" "$build/tests/kernels_test_ops_cuda" "$deps/bin/"
  strip --strip-unneeded "$deps/bin/"*
  # -march=native here (an AMD EPYC): instructions only AMD has would stop the binaries on an Intel host.
  if objdump -d --no-show-raw-insn "$deps/bin/lmforge" "$deps/bin/kernels_test_ops_cuda" |
     grep -qwE 'extrq|insertq|movntss|movntsd|clzero|mwaitx|monitorx'; then
    echo "device-check --prepare: the binaries use AMD-only instructions; rebuild with -DLMFORGE_NATIVE=OFF" >&2
    exit 1
  fi
  # The binaries again as one xz archive (the CUDA kernels of two architectures make them ~30 MB each, ~5 MB packed):
  # carry build-device-deps/{bin.tar.xz,devlibs.tar.xz,data,ref,googletest} rather than the whole folder.
  tar -C "$deps" -cf - bin | xz -6 -T2 >"$deps/bin.tar.xz"
  echo "== runtime libraries"
  # The Debian closure of both binaries, without glibc (the GPU machine's is newer) and the CUDA libraries (cuBLASLt
  # alone is ~500 MB; the machine has CUDA 13's). libcudart is small and carried, so only cuBLASLt is searched there
  # (the binaries open it with dlopen when the CUDA backend starts; ldd does not list it).
  ldd "$deps/bin/lmforge" "$deps/bin/kernels_test_ops_cuda" | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64|libcuda|libcublas|libcublasLt)\.so' \
    >"$deps/libs.txt"
  grep -q libcudart "$deps/libs.txt" || { echo "device-check --prepare: the binaries do not link libcudart" >&2; exit 1; }
  tar -cf - --dereference --transform 's,.*/,lib/,' -T "$deps/libs.txt" | xz -6 -T2 >"$deps/devlibs.tar.xz"
  echo "$(wc -l <"$deps/libs.txt") libraries, $(du -h "$deps/devlibs.tar.xz" | cut -f1) packed"
  echo "== data, GoogleTest sources"
  for f in sample/sample_gpt2_text_document.bin sample/sample_gpt2_text_document.idx \
           sample/sample_bert_text_sentence.bin sample/sample_bert_text_sentence.idx \
           vocab/gpt2-vocab.json vocab/gpt2-merges.txt vocab/bert-base-uncased-vocab.txt; do
    cp "$shared/data/$f" "$deps/data/"
  done
  chmod u+w "$deps/data/"*
  gtest=${LMFORGE_GTEST_SOURCE_DIR:-/usr/src/googletest}
  [ -f "$gtest/CMakeLists.txt" ] && cp -r "$gtest" "$deps/googletest"
  echo "== CPU references (the parity runs on --device cpu, this build)"
  tmp=$(mktemp -d)
  for model in gpt bert t5; do
    for p in fp32 bf16; do
      t0=$SECONDS
      # shellcheck disable=SC2046
      "$deps/bin/lmforge" train $model $(common_flags $model "$deps/data" "$tmp") $(precision_flag $p) --device cpu \
        >"$deps/ref/$model-$p.txt" 2>&1 || { tail -20 "$deps/ref/$model-$p.txt"; exit 1; }
      echo "$model $p: $(losses "$deps/ref/$model-$p.txt" | wc -l) losses, $((SECONDS - t0)) s"
    done
  done
  rm -rf "$tmp"
  echo "== checks of the run's non-GPU parts"
  bash -n "$0"
  /usr/bin/python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' bench/train/train_bench_torch_cuda.py
  echo "build-device-deps without bin/: $(du -sh --exclude=bin "$deps" | cut -f1) (the device tool carries 64 MiB)"
  set +e
  # DEVICE_CHECK_SKIP_DRY=1: only when the script's flow has not changed since its last dry run (saves ~5 minutes).
  [ "${DEVICE_CHECK_SKIP_DRY:-0}" = 1 ] || DEVICE_CHECK_STEPS=3 bash "$0" --dry-run "$root/device-check-out/dry-run" || exit 1
  echo "prepared: carry build-device-deps with the run (bash scripts/device-check.sh \"\$OUT\")"
  exit 0
fi

# ==== the run (there), or its dry run (here) ==========================================================================
out=${1:-${OUT:-$root/device-check-out}}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
t0=$SECONDS
declare -a rows=()
row() { rows+=("$(printf '%-44s %-8s %s' "$1" "$2" "$3")"); echo ">> $1: $2 $3"; }
table() {
  {
    echo "== device check ($mode, $((SECONDS - t0)) s)"
    printf '%-44s %-8s %s\n' "part" "result" "details"
    for r in "${rows[@]}"; do echo "$r"; done
  } | tee "$out/device-check.txt"
}
trap table EXIT
dev=cuda slow=1 budget=${DEVICE_CHECK_BUDGET:-450} py=python3 cpu=()
# The dry run: the CPU for the GPU, a loaded 2-core machine's time limits (one thread: OpenMP's spinning threads
# crawl on a machine that is shared), Debian's Python with its torch.
[ $mode = dry ] && dev=cpu slow=10 budget=100000 py=/usr/bin/python3 cpu=(--threads 1)
# A part's time limit (seconds on the GPU machine), and whether the elapsed time leaves room for it.
lim() { echo $(($1 * slow)); }
room() { [ $((SECONDS - t0 + $(lim "$1"))) -le "$budget" ]; }
if [ ! -x "$deps/bin/lmforge" ] && [ -f "$deps/bin.tar.xz" ]; then tar -C "$deps" -xJf "$deps/bin.tar.xz"; fi
[ -x "$deps/bin/lmforge" ] || { row "prepared files" "FAIL" "no $deps/bin/lmforge: run --prepare here and carry build-device-deps"; exit 1; }
echo "== machine"
if [ $mode = run ]; then
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm,memory.total --format=csv 2>&1 || true
fi
head -2 /etc/os-release 2>/dev/null; ldd --version 2>&1 | head -1; nproc

# ---- libraries: the carried Debian ones, cuBLASLt from this machine -------------------------------------------------
libs=$deps/bin
if [ $mode = run ]; then
  libs=${TMPDIR:-/tmp}/lmforge-devlibs
  rm -rf "$libs" && mkdir -p "$libs" && tar -xJf "$deps/devlibs.tar.xz" -C "$libs" && libs=$libs/lib
  # A newer C++ runtime on this machine serves Debian's binaries too (and Python's modules need it): use it.
  sys_cxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/{print $NF; exit}')
  if [ -n "$sys_cxx" ] && grep -q GLIBCXX_3.4.30 "$sys_cxx" 2>/dev/null; then rm -f "$libs"/libstdc++.so.6 "$libs"/libgcc_s.so.1; fi
  lt=""
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c 'import site; print(" ".join(p + "/nvidia/cublas/lib" for p in site.getsitepackages()))' 2>/dev/null); do
    ls "$dir"/libcublasLt.so.13* >/dev/null 2>&1 && { lt=$dir; break; }
  done
  if [ -z "$lt" ]; then
    f=$(timeout 60 find / -name 'libcublasLt.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)
    [ -n "$f" ] && lt=$(dirname "$f")
  fi
  echo "cuBLASLt: ${lt:-not found}"
  # The binaries do not link cuBLASLt (ldd cannot report it missing): --device cuda opens it with dlopen.
  [ -n "$lt" ] || row "cuBLASLt" "FAIL" "no libcublasLt.so.13 on this machine (--device cuda loads it with dlopen)"
  libs=$libs${lt:+:$lt}
fi
lmf() { LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$deps/bin/lmforge" "$@"; }
missing=$(LD_LIBRARY_PATH=$libs ldd "$deps/bin/lmforge" "$deps/bin/kernels_test_ops_cuda" 2>&1 | grep 'not found' | sort -u)
if [ -n "$missing" ]; then
  row "carried binaries" "FAIL" "missing libraries: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')"
else
  row "carried binaries" "ok" "$(lmf --version 2>&1 | head -1), libraries: ${libs//:/ }"
fi

# ---- the op cases -----------------------------------------------------------------------------------------------------
summary() {  # gtest's summary lines
  local p f s
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
  echo "passed ${p:-0}, failed ${f:-0}, skipped ${s:-0}"
}
ops=$deps/bin/kernels_test_ops_cuda
ops_env=(env "LD_LIBRARY_PATH=$libs")
if [ -n "$missing" ] && [ $mode = run ]; then
  # The carried test cannot run here: build the kernels-only configuration with this machine's toolkit.
  echo "== fallback: kernels-only build"
  b0=$SECONDS
  nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
  [ -x "$nvcc" ] || nvcc=$(command -v nvcc)
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  arch=${cap:-90}; [ "$arch" = 90 ] && arch=90a
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  if cmake -S . -B build-device "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLMFORGE_KERNELS_ONLY=ON -DLMFORGE_CUDA=ON \
       -DLMFORGE_CUDA_WERROR=OFF -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
       -DLMFORGE_GTEST_SOURCE_DIR="$deps/googletest" >"$out/configure.txt" 2>&1 &&
     timeout 240 cmake --build build-device -j"$(nproc)" --target kernels_test_ops_cuda >"$out/build.txt" 2>&1; then
    ops="$root/build-device/tests/kernels_test_ops_cuda" ops_env=(env)
    row "kernels-only build" "ok" "$((SECONDS - b0)) s"
  else
    row "kernels-only build" "FAIL" "$((SECONDS - b0)) s; see configure.txt, build.txt"
  fi
fi
echo "== CUDA op cases"
s0=$SECONDS
timeout "$(lim 150)" "${ops_env[@]}" "$ops" --gtest_output=xml:"$out/ops.xml" >"$out/ops.txt" 2>&1
rc=$?
grep -E '^\[  (FAILED|SKIPPED) \]|Failure' "$out/ops.txt" | head -20
case $rc in 0) res=ok ;; 124) res=TIMEOUT ;; *) res=FAIL ;; esac
# On a GPU machine a skipped device test means the backend could not open the GPU: a failure of this check.
[ $mode = run ] && grep -q 'no usable CUDA device' "$out/ops.txt" && res=FAIL
row "op cases (f32, bf16, f16)" "$res" "$(summary "$out/ops.txt"), $((SECONDS - s0)) s"
if [ $mode = run ] && room 60; then
  s0=$SECONDS
  # The GEMM kernel taken where cuBLASLt has no algorithm, on every linear case.
  LMFORGE_CUDA_GEMM=fallback timeout 60 "${ops_env[@]}" "$ops" \
    --gtest_filter='OpCasesCuda.ForwardMatchesTheReference:OpCasesCuda.BackwardMatchesFiniteDifferences' \
    >"$out/ops-gemm-fallback.txt" 2>&1
  rc=$?
  case $rc in 0) res=ok ;; 124) res=TIMEOUT ;; *) res=FAIL ;; esac
  row "op cases, fallback GEMM" "$res" "$(summary "$out/ops-gemm-fallback.txt"), $((SECONDS - s0)) s"
fi
# The attention paths the tensor-core kernels fall back to: the WMMA flash kernels (f32, unaligned rows) and the row
# kernels (other head sizes): every attention case again on each.
for path in flash rows; do
  if [ $mode = run ] && room 40; then
    s0=$SECONDS
    LMFORGE_CUDA_ATTENTION=$path timeout 60 "${ops_env[@]}" "$ops" --gtest_filter='OpCasesCuda.*:AttentionCuda.*' \
      >"$out/ops-attention-$path.txt" 2>&1
    rc=$?
    case $rc in 0) res=ok ;; 124) res=TIMEOUT ;; *) res=FAIL ;; esac
    row "op cases, $path attention kernels" "$res" "$(summary "$out/ops-attention-$path.txt"), $((SECONDS - s0)) s"
  fi
done

# ---- parity: GPT, BERT, T5 on cuda against the CPU's losses ---------------------------------------------------------
tmp=$out/tmp
mkdir -p "$tmp"
for model in gpt bert t5; do
  for p in fp32 bf16; do
    name="parity $model $p ($steps steps)"
    if ! room 60; then row "$name" "skipped" "time budget"; continue; fi
    ref=$deps/ref/$model-$p.txt
    extra=()
    [ $model = gpt ] && [ $p = fp32 ] && extra=(--save "$tmp/ckpt" --save-interval $(((steps + 1) / 2)))
    s0=$SECONDS
    # shellcheck disable=SC2046
    timeout "$(lim 60)" env LD_LIBRARY_PATH="$libs" "$deps/bin/lmforge" train $model \
      $(common_flags $model "$deps/data" "$tmp") $(precision_flag $p) --device $dev "${extra[@]}" "${cpu[@]}" \
      >"$out/$model-$p-$dev.txt" 2>&1
    rc=$?
    tol=1e-4; [ $p = bf16 ] && tol=1e-2
    losses "$ref" >"$tmp/ref.txt"
    losses "$out/$model-$p-$dev.txt" >"$tmp/got.txt"
    verdict=$(compare "$tmp/ref.txt" "$tmp/got.txt" $tol 1 "$steps")
    [ $rc -ne 0 ] && verdict="FAIL rc $rc: $(grep -m1 -i 'error' "$out/$model-$p-$dev.txt" | cut -c1-150)"
    row "$name" "${verdict%% *}" "${verdict#* }, $((SECONDS - s0)) s"
  done
done

# Two ranks on the one GPU (each rank takes local rank mod visible GPUs), started by lmforge's own launcher: data-
# and tensor-parallel GPT fp32 against the single process's CPU losses (the layouts reproduce one process).
for layout in "dp2:" "tp2:--tensor-model-parallel-size 2"; do
  name="parity gpt fp32 ${layout%%:*} on one GPU ($steps steps)"
  if ! room 60; then row "$name" "skipped" "time budget"; continue; fi
  s0=$SECONDS
  # shellcheck disable=SC2046
  timeout "$(lim 60)" env LD_LIBRARY_PATH="$libs" "$deps/bin/lmforge" launch --num_gpus 2 --master_port 29611 \
    train gpt $(common_flags gpt "$deps/data" "$tmp") ${layout#*:} --device $dev "${cpu[@]}" \
    >"$out/gpt-fp32-${layout%%:*}-$dev.txt" 2>&1
  rc=$?
  losses "$deps/ref/gpt-fp32.txt" >"$tmp/ref.txt"
  losses "$out/gpt-fp32-${layout%%:*}-$dev.txt" >"$tmp/got.txt"
  verdict=$(compare "$tmp/ref.txt" "$tmp/got.txt" 1e-4 1 "$steps")
  [ $rc -ne 0 ] && verdict="FAIL rc $rc: $(grep -m1 -i 'error' "$out/gpt-fp32-${layout%%:*}-$dev.txt" | cut -c1-150)"
  row "$name" "${verdict%% *}" "${verdict#* }, $((SECONDS - s0)) s"
done

# A checkpoint written on the GPU at the middle iteration resumes on the CPU with the GPU's next losses (fp32).
half=$(((steps + 1) / 2))
if [ -f "$tmp/ckpt/latest_checkpointed_iteration.txt" ] && room 40; then
  s0=$SECONDS
  echo "$half" >"$tmp/ckpt/latest_checkpointed_iteration.txt"
  # shellcheck disable=SC2046
  timeout "$(lim 40)" env LD_LIBRARY_PATH="$libs" "$deps/bin/lmforge" train gpt $(common_flags gpt "$deps/data" "$tmp") \
    --load "$tmp/ckpt" --device cpu "${cpu[@]}" >"$out/gpt-resume-cpu.txt" 2>&1
  losses "$out/gpt-fp32-$dev.txt" >"$tmp/ref.txt"
  losses "$out/gpt-resume-cpu.txt" >"$tmp/got.txt"
  verdict=$(compare "$tmp/ref.txt" "$tmp/got.txt" 1e-4 $((half + 1)) "$steps")
  row "GPT $dev checkpoint resumed on cpu" "${verdict%% *}" "${verdict#* }, $((SECONDS - s0)) s"
  # Greedy generation from that checkpoint, cuda against cpu (token ids; near-ties may legitimately differ).
  gen=(generate --load "$tmp/ckpt" --vocab-file "$deps/data/gpt2-vocab.json" --merge-file "$deps/data/gpt2-merges.txt"
       --prompt "The quick brown fox" --greedy --ignore-eos --max-new-tokens 24 --print-ids)
  timeout "$(lim 30)" env LD_LIBRARY_PATH="$libs" "$deps/bin/lmforge" "${gen[@]}" --device cpu >"$tmp/gen-cpu.txt" 2>"$out/gen-cpu.err"
  timeout "$(lim 30)" env LD_LIBRARY_PATH="$libs" "$deps/bin/lmforge" "${gen[@]}" --device $dev >"$tmp/gen-dev.txt" 2>"$out/gen-$dev.err"
  rc=$?
  if [ $rc -ne 0 ]; then row "generate --device $dev" "FAIL" "rc $rc: $(grep -m1 -i error "$out/gen-$dev.err" | cut -c1-150)"
  elif cmp -s "$tmp/gen-cpu.txt" "$tmp/gen-dev.txt"; then row "generate --device $dev (greedy, 24 tokens)" "ok" "same ids as cpu"
  else row "generate --device $dev (greedy, 24 tokens)" "differs" "ids differ from cpu's (see gen-*.txt)"; fi
  cp "$tmp/gen-cpu.txt" "$tmp/gen-dev.txt" "$out/" 2>/dev/null
fi

# ---- throughput: GPT-2 124M, bf16, seq 1024, lmforge against PyTorch on the same GPU -------------------------------
read -r tb tt ts <<<"${DEVICE_CHECK_TP:-16 1024 15}"
L=12 C=768 H=12
if [ $mode = dry ]; then tb=2 tt=64 ts=3 L=2 C=64 H=2; fi
V=50304 warm=3
# llm.c's count: 6·N + 6·L·C·T FLOPs per token, N with the tied embedding and the 1024 positions.
flops=$(awk -v L=$L -v C=$C -v V=$V -v T="$tt" 'BEGIN { N = V*C + 1024*C + L*(12*C*C + 13*C) + 2*C;
                                                     printf "%.0f", 6*N + 6*L*C*T }')
peak_tflops=989  # H100 SXM dense bf16, datasheet
# The second basis (cuda-notes: report both): this GPU's bf16 GEMM peak measured now, torch.mm 8192³ (random data).
measured_tflops=0
if [ $mode = run ] && "$py" -c 'import torch' 2>/dev/null && room 30; then
  timeout 60 "$py" bench/kernels/gemm_peak_torch_cuda.py >"$out/gemm-peak.txt" 2>&1
  measured_tflops=$(sed -n 's/^peak cuda bf16: \([0-9]*\) TFLOP\/s.*/\1/p' "$out/gemm-peak.txt")
  measured_tflops=${measured_tflops:-0}
  row "bf16 GEMM peak (torch.mm 8192³)" "$([ "$measured_tflops" -gt 0 ] && echo ok || echo FAIL)" \
    "$measured_tflops TFLOP/s, the second MFU basis"
fi
# MFU of r tokens/s: "datasheet % / measured-peak %" (the second "n/a" where no peak was measured).
mfu_of() {
  awk -v f="$flops" -v r="$1" -v p=$peak_tflops -v m="$measured_tflops" 'BEGIN {
    printf "%.1f%%/", 100*f*r/(p*1e12); if (m > 0) printf "%.1f%%", 100*f*r/(m*1e12); else printf "n/a" }'
}
mem_watch() {  # samples the GPU's used memory (MiB) into $1 until killed
  [ $mode = run ] || return 0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 >"$1" 2>/dev/null &
  echo $! >"$1.pid"
}
mem_peak() {
  [ -f "$1.pid" ] && { kill "$(cat "$1.pid")" 2>/dev/null; wait "$(cat "$1.pid")" 2>/dev/null; rm -f "$1.pid"; }
  sort -n "$1" 2>/dev/null | tail -1
}
declare -a tp=()
tp_row() { tp+=("$(printf '%-30s %10s %9s %13s %10s  %s' "$@")"); }
tp_row "run" "tokens/s" "ms/step" "MFU" "peak MiB" "notes"
ours=0
if room 150; then
  echo "== throughput: lmforge, GPT-2 ${L}x$C, B=$tb T=$tt, bf16"
  s0=$SECONDS
  mem_watch "$tmp/mem-lmforge.txt"
  timeout "$(lim 150)" env LD_LIBRARY_PATH="$libs" "$deps/bin/lmforge" train gpt --num-layers $L --hidden-size $C \
    --num-attention-heads $H --seq-length "$tt" --max-position-embeddings 1024 --micro-batch-size "$tb" \
    --global-batch-size "$tb" --train-iters $((warm + ts)) --log-interval 1 --lr 0.0006 --clip-grad 1.0 \
    --weight-decay 0.1 --adam-beta2 0.95 --hidden-dropout 0 --attention-dropout 0 --split 100,0,0 --eval-iters 0 \
    --data-path "$deps/data/sample_gpt2_text_document" --tokenizer-type GPT2BPETokenizer \
    --vocab-file "$deps/data/gpt2-vocab.json" --merge-file "$deps/data/gpt2-merges.txt" \
    --data-cache-path "$tmp/cache-tp" --bf16 --device $dev "${cpu[@]}" >"$out/throughput-lmforge.txt" 2>&1
  rc=$?
  mem=$(mem_peak "$tmp/mem-lmforge.txt")
  ms=$(median_ms "$out/throughput-lmforge.txt" $warm)
  done_steps=$(grep -c '^ iteration ' "$out/throughput-lmforge.txt")
  if [ "$(awk -v m="$ms" 'BEGIN{print (m > 0)}')" = 1 ]; then
    ours=$(awk -v b="$tb" -v t="$tt" -v m="$ms" 'BEGIN { printf "%.0f", b*t/(m/1000) }')
    mfu=$(mfu_of "$ours")
    tp_row "lmforge $dev bf16" "$ours" "$ms" "$mfu" "${mem:-n/a}" "median of $((done_steps - warm)) steps after $warm (rc $rc)"
    row "throughput lmforge" "ok" "$ours tokens/s, $ms ms/step, MFU $mfu, peak ${mem:-n/a} MiB"
  else
    row "throughput lmforge" "FAIL" "rc $rc, $done_steps iterations: $(grep -m1 -i error "$out/throughput-lmforge.txt" | cut -c1-150)"
  fi
else
  row "throughput lmforge" "skipped" "time budget"
fi
peer() {  # label, seconds, extra flags
  local label=$1 limit=$2 line tok ms mfu
  shift 2
  if ! room "$limit"; then row "throughput $label" "skipped" "time budget"; return; fi
  echo "== throughput: $label"
  local pydev=cuda
  [ $mode = dry ] && pydev=cpu
  mem_watch "$tmp/mem-$label.txt"
  timeout "$(lim "$limit")" "$py" bench/train/train_bench_torch_cuda.py --device $pydev --layers $L --hidden $C --heads $H \
    --seq "$tt" --batch "$tb" --steps 20 --warmup 5 --bf16 --label "$label" "$@" >"$out/throughput-$label.txt" 2>&1
  local rc=$? mem
  mem=$(mem_peak "$tmp/mem-$label.txt")
  line=$(grep "^RESULT $label " "$out/throughput-$label.txt" | tail -1)
  if [ -z "$line" ]; then
    row "throughput $label" "FAIL" "rc $rc: $(tail -1 "$out/throughput-$label.txt" | cut -c1-150)"
    return
  fi
  tok=$(sed -n 's/.*tokens_per_s=\([0-9]*\).*/\1/p' <<<"$line")
  ms=$(sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p' <<<"$line")
  mfu=$(mfu_of "$tok")
  tp_row "$label bf16" "$tok" "$ms" "$mfu" "${mem:-n/a}" "$(head -1 "$out/throughput-$label.txt" | cut -d, -f2-4)"
  local ratio
  ratio=$(awk -v a="$ours" -v b="$tok" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
  row "throughput vs $label" "ok" "lmforge/$label = ${ratio}x ($ours vs $tok tokens/s)"
}
if "$py" -c 'import torch' 2>/dev/null; then
  peer torch-eager 90
  # DEVICE_CHECK_COMPILE=0 leaves torch.compile out (its compile alone is ~1 minute of a short lease).
  [ "${DEVICE_CHECK_COMPILE:-1}" = 1 ] && peer torch-compile 150 --compile
else
  row "throughput PyTorch" "FAIL" "no $py with torch"
fi
{
  echo "GPT-2 ${L} layers x $C, vocab $V, B=$tb T=$tt, bf16; MFU of 6N + 6LCT = $flops FLOP/token on $peak_tflops"
  echo "TFLOP/s (H100 SXM bf16 dense, datasheet) / on $measured_tflops TFLOP/s (this GPU's torch.mm 8192³ bf16, measured"
  echo "in this run; 0: not measured); peak memory: nvidia-smi's used memory of the GPU (whole process)"
  for r in "${tp[@]}"; do echo "$r"; done
} | tee "$out/throughput.txt"
if [ $mode = run ]; then nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv 2>&1 | tail -1; fi
# compute-sanitizer last, with the time the measurements left (each tool up to DEVICE_CHECK_SANITIZE_LIMIT s).
if [ $mode = run ] && [ "${DEVICE_CHECK_SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck; do
    filter='OpCasesCuda.RunTwiceBitIdentical:CudaBackend.*:CudaMultiTensor.*'
    [ $tool = memcheck ] && filter="OpCasesCuda.ForwardMatchesTheReference:AttentionCuda.*:$filter"
    s0=$SECONDS
    # cudaMalloc per buffer so memcheck knows each buffer's bounds; any report fails (exit code 3).
    LMFORGE_CUDA_MALLOC=plain timeout "${DEVICE_CHECK_SANITIZE_LIMIT:-100}" "${ops_env[@]}" compute-sanitizer --tool $tool --error-exitcode 3 \
      "$ops" --gtest_filter="$filter" >"$out/$tool.txt" 2>&1
    rc=$?
    case $rc in 0) res=ok ;; 3) res=FAIL ;; 124) res=TIMEOUT ;; *) res="rc $rc" ;; esac
    row "compute-sanitizer $tool" "$res" "$(grep -o 'ERROR SUMMARY: [0-9]* error[s]*' "$out/$tool.txt" | tail -1), $((SECONDS - s0)) s"
  done
fi

rm -rf "$tmp/ckpt" "$tmp"/cache-*
