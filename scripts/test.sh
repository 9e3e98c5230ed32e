#!/usr/bin/env bash
# Installs dependencies, builds lmforge (Release) and runs its whole test suite: what a user checks an install with
# (README's second command; minutes on a quiet machine). CI (.ci/run) runs this, then the sanitizer build and the
# fuzzing pass of scripts/sanitize.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh -DLMFORGE_TESTS=ON
cd build && ctest --output-on-failure -j"$(nproc)"
