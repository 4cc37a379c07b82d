#!/usr/bin/env bash
# Compiles tile-configuration variants of the kernels for side-by-side checks on the GPU machine:
# build-gpu/variants/NAME/ holds every bundled kernel at its own head dim, plus attention and
# causal at D = 128 and f16, all compiled with the variant's `tilefuse compile` options, each
# NAME.ptx with its NAME.json. Run the GPU tests on one with TILEFUSE_PTX_DIR=build-gpu/variants/NAME
# and time them side by side with `tools/bench/bench.py --variant NAME=build-gpu/variants/NAME`.
#
#   scripts/build-gpu-variants.sh NAME [tilefuse compile options...] [-- NAME options... ...]
#   e.g. scripts/build-gpu-variants.sh s32 --block-m 128 --rows-per-warp 32 --q-operand shared \
#          -- r16 --block-m 64 --rows-per-warp 16 --q-operand registers
set -euo pipefail
cd "$(dirname "$0")/.."
tilefuse=build/tools/tilefuse
cmake --build build --target tilefuse >/dev/null

build_variant() { # build_variant NAME options...
  local name=$1
  shift
  local dir=build-gpu/variants/$name
  rm -rf "$dir"
  mkdir -p "$dir"
  local kernel
  for kernel in $("$tilefuse" list | awk '{print $1}'); do
    "$tilefuse" compile --kernel "$kernel" --emit ptx -o "$dir/$kernel.ptx" "$@"
  done
  "$tilefuse" compile --kernel attention --head-dim 128 --emit ptx -o "$dir/attention_d128.ptx" "$@"
  "$tilefuse" compile --kernel causal --head-dim 128 --emit ptx -o "$dir/causal_d128.ptx" "$@"
  "$tilefuse" compile --kernel attention --dtype f16 --emit ptx -o "$dir/attention_f16.ptx" "$@"
  echo "variants: $dir ($*): $(ls "$dir"/*.ptx | wc -l) kernels"
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
