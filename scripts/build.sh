#!/usr/bin/env bash
# Configures and builds lmforge (Release) into ./build; extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
# Ninja when the directory is new: it compiles any file whose inputs are ready, where make first waits for each
# library's dependencies to be built (with unity batches that left a core idle for most of a clean build).
generator=()
[ -f build/CMakeCache.txt ] || generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
