#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite (README's second command; CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build && ctest --output-on-failure -j"$(nproc)"
# The sanitizer build (ASan + UBSan) of the util/text/data/prep/datasets/param/optim/layers/checkpoint tests
# and a 15 s fuzzing pass per libFuzzer
# target (scripts/sanitize.sh; its own build directory, build-asan).
cd .. && bash scripts/sanitize.sh 15
