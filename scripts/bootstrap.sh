#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and builds tilefuse into build/: installs the Debian packages
# that are missing (LLVM/MLIR 22, fmt, GoogleTest, Ninja), configures with CMake and builds.
# Safe to run again: it installs nothing that is there and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ ccache python3 llvm-22-dev libmlir-22-dev mlir-22-tools
          llvm-22-tools libfmt-dev libgtest-dev libzstd-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "bootstrap: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build
