#!/usr/bin/env bash
# Installs dependencies, builds lmforge (Release) and runs its whole test suite: what a user checks an install with
# (README's second command; minutes on a quiet machine). CI (.ci/run) runs this with LMFORGE_CUDA=1, then the
# sanitizer build and the fuzzing pass of scripts/sanitize.sh.
#
# The CUDA backend: on a machine with no NVIDIA driver its tests can only skip, and compiling it for sm_80 and
# sm_90a is ~200 s of CPU (a third of that one flash-attention file), so a new build directory there is configured
# without it (LMFORGE_CUDA=OFF, said below). LMFORGE_CUDA=1 builds it anyway (CI does: every CUDA file must pass the
# compiler with warnings as errors), LMFORGE_CUDA=0 never; an existing build keeps its setting (the quickstart's
# build, with the backend wherever a CUDA compiler is found, is tested as it is).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cuda=()
case "${LMFORGE_CUDA:-}" in
  1) cuda=(-DLMFORGE_CUDA=ON) ;;
  0) cuda=(-DLMFORGE_CUDA=OFF) ;;
  "")
    if [ ! -f build/CMakeCache.txt ] && [ ! -e /proc/driver/nvidia/version ] && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
      echo "test.sh: no NVIDIA driver on this machine: building without the CUDA backend (LMFORGE_CUDA=1 builds it)"
      cuda=(-DLMFORGE_CUDA=OFF)
    fi ;;
  *) echo "test.sh: LMFORGE_CUDA must be 1 or 0, not '$LMFORGE_CUDA'" >&2; exit 2 ;;
esac
bash scripts/build.sh -DLMFORGE_TESTS=ON "${cuda[@]}"
# One test more than cores: a sixth of the suite's time is a test waiting (process starts, sockets, sleeps, a rank
# yielding to another), which another test's work fills (2 cores, a clean build: 389 s at -j2, 370 s at -j3).
cd build && ctest --output-on-failure -j"$(( $(nproc) + 1 ))"
