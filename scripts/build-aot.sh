#!/usr/bin/env bash
# Builds, on the development machine, what scripts/gpu-check-aot.sh checks on the GPU machine,
# into build-gpu/aot/ (ignored by git; it travels with build-gpu/):
#
#   build-gpu/aot/causal.h        `tilefuse compile --kernel causal --emit header`: the cubin
#                                 embedded and the C launcher causal_launch()
#   build-gpu/aot/causal.cubin    `tilefuse compile --kernel causal --emit cubin`, with causal.json
#   build-gpu/aot/causal.ptx      the PTX both come from, with causal.ptx.json (for reference)
#   build-gpu/aot/causal_split.h  `--split-kv --emit header --name causal_split`: the split launcher
#   build-gpu/aot/causal_varlen.h `--varlen --emit header --name causal_varlen`: the varlen launcher
#   build-gpu/aot/causal_varlen_qtma.h  the same with Q in shared memory, loaded by TMA (sm_90a)
#   build-gpu/aot/causal_paged.h  `--paged-kv --emit header --name causal_paged`: the paged launcher
#   build-gpu/aot/causal_paged_varlen.h  `--paged-kv --varlen`: the chunked-prefill launcher
#   build-gpu/aot/causal_backward.h  `--backward --emit header`: the derived backward's three
#                                 kernels and their launcher causal_backward_launch()
#   build-gpu/aot/gqa.h           the header of kernels/gqa.mlir, whose launcher refuses head
#                                 counts other than the 8 and 2 it declares
#   build-gpu/aot/AotCheck.c      the C program (test/gpu/AotCheck.c) that uses the headers and
#                                 loads causal.cubin; compiled on the GPU machine with gcc
#
# Needs the development build (build/, scripts/bootstrap.sh; TILEFUSE_BUILD_DIR for another) and the CUDA toolkit's ptxas
# (CUDA_HOME, CUDA_PATH, PATH or /usr/local/cuda/bin).
#
#   scripts/build-aot.sh [--arch sm_90a] [--head-dim D]
#
# --head-dim sets the causal kernels' head dimension (default: the kernel's own, 64); at 96 to 192
# on sm_90a causal.h is the warp-specialized kernel, whose launcher encodes TMA tensor maps.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=sm_90a
dims=()
while (($#)); do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --head-dim) dims=(--head-dim "$2"); shift 2 ;;
    *) echo "usage: $0 [--arch sm_90a|sm_80] [--head-dim D]" >&2; exit 2 ;;
  esac
done

build=${TILEFUSE_BUILD_DIR:-build} # the development build
if [ ! -f "$build/build.ninja" ]; then
  echo "build-aot: no development build in $build/ (run scripts/bootstrap.sh first)" >&2
  exit 1
fi
cmake --build "$build" --target tilefuse
tilefuse=$build/tools/tilefuse
out=build-gpu/aot
rm -rf "$out"
mkdir -p "$out"

"$tilefuse" compile --kernel causal "${dims[@]}" --arch "$arch" --emit ptx -o "$out/causal.ptx"
mv "$out/causal.json" "$out/causal.ptx.json"
"$tilefuse" compile --kernel causal "${dims[@]}" --arch "$arch" --emit cubin -o "$out/causal.cubin"
"$tilefuse" compile --kernel causal "${dims[@]}" --arch "$arch" --emit header -o "$out/causal.h"
"$tilefuse" compile --kernel gqa --arch "$arch" --emit header -o "$out/gqa.h"
"$tilefuse" compile --kernel causal "${dims[@]}" --arch "$arch" --split-kv --emit header --name causal_split \
  -o "$out/causal_split.h"
"$tilefuse" compile --kernel causal "${dims[@]}" --arch "$arch" --varlen --emit header --name causal_varlen \
  -o "$out/causal_varlen.h"
# The varlen launcher again with Q in shared memory, loaded by TMA through the packed q_map
# (sm_90a; on sm_80 the plain varlen kernel under this name).
qtma=()
[ "$arch" = sm_90a ] && qtma=(--config mma=wgmma,warp_specialize=true,q=shared)
"$tilefuse" compile --kernel causal "${dims[@]}" --arch "$arch" --varlen "${qtma[@]}" --emit header \
  --name causal_varlen_qtma -o "$out/causal_varlen_qtma.h"
"$tilefuse" compile --kernel causal "${dims[@]}" --arch "$arch" --paged-kv --emit header --name causal_paged \
  -o "$out/causal_paged.h"
"$tilefuse" compile --kernel causal "${dims[@]}" --arch "$arch" --paged-kv --varlen --emit header \
  --name causal_paged_varlen -o "$out/causal_paged_varlen.h"
"$tilefuse" compile --kernel causal "${dims[@]}" --arch "$arch" --backward --emit header \
  -o "$out/causal_backward.h"
cp test/gpu/AotCheck.c "$out/AotCheck.c"

# The same checks as the aot-header test, so nothing broken travels: the header is plain C99 and
# the program builds (against the toolkit's libcuda stub here).
cuda=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
if [ -f "$cuda/include/cuda.h" ]; then
  cc -std=c99 -Wall -Werror -I"$cuda/include" -x c -c "$out/causal.h" -o /dev/null
  cc -std=c99 -Wall -Werror -I"$cuda/include" -x c -c "$out/gqa.h" -o /dev/null
  cc -std=c99 -Wall -Werror -I"$cuda/include" -x c -c "$out/causal_backward.h" -o /dev/null
  cc -std=c99 -O2 -Wall -Wextra -Werror -I"$out" -I"$cuda/include" "$out/AotCheck.c" \
    -o /dev/null -L"$cuda/lib64/stubs" -lcuda -lpthread -lm
  echo "build-aot: causal.h, gqa.h and causal_backward.h compile as C99; AotCheck.c builds" \
    "against the headers"
else
  echo "build-aot: no $cuda/include/cuda.h here: the header was not compiled" >&2
fi
echo "build-aot: $(ls "$out" | tr '\n' ' ')in $out ($(du -sh "$out" | cut -f1))"
