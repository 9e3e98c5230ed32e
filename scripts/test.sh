#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite (README's second command; CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build && ctest --output-on-failure -j"$(nproc)"
# The sanitizer build (ASan + UBSan) of the suite but the train_runs tests (see scripts/sanitize.sh) and a 15 s
# fuzzing pass per libFuzzer target (its own build directory, build-asan).
cd .. && bash scripts/sanitize.sh 15
