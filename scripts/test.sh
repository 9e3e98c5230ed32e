#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite (README's second command; CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build && ctest --output-on-failure -j"$(nproc)"
# The whole suite again built with AddressSanitizer + UndefinedBehaviorSanitizer, and a 10 s fuzzing pass per
# libFuzzer target (their own build directory, build-asan; see scripts/sanitize.sh).
cd .. && bash scripts/sanitize.sh 10
