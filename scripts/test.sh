#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite (README's second command; CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build && ctest --output-on-failure -j"$(nproc)"
