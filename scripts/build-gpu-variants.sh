#!/usr/bin/env bash
# Compiles tile-configuration variants of the kernels for side-by-side checks on the GPU machine:
# build-gpu/variants/NAME/ holds the kernel set of scripts/compile-kernels.sh, all compiled with
# the variant's `tilefuse compile` options. Run the GPU tests on one with
# TILEFUSE_PTX_DIR=build-gpu/variants/NAME and time them side by side with
# `tools/bench/bench.py --variant NAME=build-gpu/variants/NAME`.
#
#   scripts/build-gpu-variants.sh NAME [tilefuse compile options...] [-- NAME options... ...]
#   e.g. scripts/build-gpu-variants.sh s32 --block-m 128 --rows-per-warp 32 --q-operand shared \
#          -- r16 --block-m 64 --rows-per-warp 16 --q-operand registers
set -euo pipefail
cd "$(dirname "$0")/.."

build_variant() { # build_variant NAME options...
  local name=$1
  shift
  scripts/compile-kernels.sh "build-gpu/variants/$name" "$@"
}

(($#)) || { echo "usage: $0 NAME [options...] [-- NAME [options...]]..." >&2; exit 2; }
args=()
for arg in "$@" --; do
  if [ "$arg" = -- ]; then
    ((${#args[@]})) && build_variant "${args[@]}"
    args=()
  else
    args+=("$arg")
  fi
done
