#!/usr/bin/env bash
# The sanitizer and fuzzing pass of CI (.ci/run runs it after scripts/test.sh, the Release suite):
#   1. the unit tests of $LMFORGE_SANITIZE_LABELS built with clang and AddressSanitizer + UndefinedBehaviorSanitizer
#      (any UB report is fatal) and run with ctest;
#   2. the libFuzzer targets of tests/fuzz (same sanitizers), each run for a fixed time from its seed corpus in
#      tests/fuzz/corpus/<target>/ (new inputs go to a temporary directory, never into the source tree).
# Both live in build-asan: one compile of the libraries serves both, which keeps CI's total time down. Only the
# modules the fuzz targets reach carry libFuzzer's coverage hooks (src/CMakeLists.txt): in the kernels they
# made the sanitized training runs several times slower.
# Usage: scripts/sanitize.sh [seconds per fuzz target, default 10]; a longer hunt: scripts/sanitize.sh 3600.
# LMFORGE_SANITIZE_LABELS (a ctest -L regex; default every label, ".*") and LMFORGE_SANITIZE_EXCLUDE (a ctest -LE
# regex; default "^$", nothing) choose the tests: by default the whole suite; CI gives
# LMFORGE_SANITIZE_EXCLUDE='train_runs|cli_runs', leaving out the tests that start `lmforge train` processes
# (parallel layouts, faults, resumes, the seed projects' command lines) to stay within its time (see .ci/run). LMFORGE_SKIP_ASAN=1 or LMFORGE_SKIP_FUZZ=1 choose the parts. A failing
# input is kept as build-asan/<target>-crash-<sha1> (libFuzzer's).
# What keeps the pass within CI's 35 minutes on 2 cores:
#   - the libraries are -O2 with line tables only: at -O1 the kernels were not vectorised (the sanitized tests
#     ran ~3x longer), and full debug info only slows the compile; -Wno-pass-failed silences clang's "loop not
#     vectorized" notes, which the sanitizers' checks cause;
#   - in kernels/ and optim/ five UBSan checks that stop every `omp simd` loop vectorising are off
#     (LMFORGE_NUMERIC_FLAGS below; AddressSanitizer still checks every access there): with them a sanitized
#     tiny GPT run took 8x the Release run's time, without them 2x;
#   - the tests' own code is compiled at -O0 (instrumented -O1 took twice as long to compile, and the hundred
#     test files are most of this build).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
labels="${LMFORGE_SANITIZE_LABELS:-.*}"
exclude="${LMFORGE_SANITIZE_EXCLUDE:-^\$}"
jobs="${LMFORGE_JOBS:-2}"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
export CCACHE_BASEDIR="$PWD"
# Leak reports would come from the libraries' process-lifetime caches (ICU, TBB), not from lmforge.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

configure() {  # <build dir> <extra flags> <cmake args...>
  local dir="$1" flags="$2"
  shift 2
  local generator=()
  [ -f "$dir/CMakeCache.txt" ] || generator=(-G Ninja)  # as scripts/build.sh
  CXX=clang++ cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" -DCMAKE_CXX_FLAGS="$flags -Wno-pass-failed" \
    -DLMFORGE_BENCH=OFF "$@" > /dev/null
}

# LMFORGE_SANITIZE_NUMERIC_FLAGS= (empty) keeps every UBSan check in kernels/ and optim/ too (slower; the whole
# suite passed that way on 2026-11-26).
numeric="${LMFORGE_SANITIZE_NUMERIC_FLAGS-"-fno-sanitize=alignment,float-cast-overflow,null,pointer-overflow,signed-integer-overflow"}"
# No CUDA here: the main build compiles (and warning-checks) every CUDA file once, and no sanitized test runs on a
# GPU; compiling them again under clang cost CI another minute.
# No precompiled header for the tests either: clang refuses a PCH whose flags differ instead of parsing the headers
# itself, and the tests' -O0/-O1 mix here would need two of them.
configure build-asan "$san" -DLMFORGE_FUZZ=ON -DLMFORGE_TEST_OPT=-O0 -DLMFORGE_NUMERIC_FLAGS="$numeric" -DLMFORGE_CUDA=OFF \
  -DLMFORGE_TEST_PCH=OFF

if [ "${LMFORGE_SKIP_ASAN:-0}" != 1 ]; then
  # The test executables whose label (every test of one executable has the same: its folder, or train_runs for
  # those that start `lmforge train`) is chosen and not left out, from the list the configure step wrote
  # (tests/CMakeLists.txt): with train_runs left out, its 16 executables (~100 s of compiling) are not built.
  targets=$(while read -r target label; do
      if echo "$label" | grep -Eq "^($labels)\$" && ! echo "$label" | grep -Eq "^($exclude)\$"; then echo "$target"; fi
    done < build-asan/test-executables.txt)
  # shellcheck disable=SC2086
  cmake --build build-asan -j"$jobs" --target $targets
  # The guarded-device tests are left out here: that device is a memory checker of its own (every access outside
  # its calls faults), its mprotect per op made them the slowest tests under the sanitizers, and the same training
  # code runs under ASan in the cpu tests they compare with.
  (cd build-asan && ctest --output-on-failure -j"$jobs" -L "^($labels)\$" -LE "^($exclude)\$" -E "Guarded")
fi

if [ "${LMFORGE_SKIP_FUZZ:-0}" != 1 ]; then
  fuzzers="fuzz_json_document fuzz_indexed_dataset fuzz_safetensors fuzz_compressed fuzz_tokenizers fuzz_model_config"
  # shellcheck disable=SC2086
  cmake --build build-asan -j"$jobs" --target $fuzzers
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  for f in $fuzzers; do
    name="${f#fuzz_}"
    mkdir -p "$work/$name"
    echo "fuzzing $name for ${seconds} s"
    status=0
    "build-asan/tests/fuzz/$f" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
      -artifact_prefix="build-asan/$name-" \
      "$work/$name" "tests/fuzz/corpus/$name" > "$work/$name.log" 2>&1 || status=$?
    grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$work/$name.log" | tr '\n' ' ' || true
    echo
    if [ "$status" -ne 0 ]; then
      tail -n 60 "$work/$name.log"
      echo "fuzzing $name found a failure (exit $status; the input is saved as build-asan/$name-crash-* / -timeout-* / -oom-*)"
      exit 1
    fi
  done
fi
