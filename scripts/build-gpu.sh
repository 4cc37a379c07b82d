#!/usr/bin/env bash
# Builds, on the development machine, everything scripts/gpu-run.sh runs on the GPU machine, into
# build-gpu/ (ignored by git; carry it to the device machine):
#
#   build-gpu/tilefuse-gpu-tests     GPU tests; static libstdc++/libgcc/LLVMSupport, stripped
#   build-gpu/libtilefuse_cuda.so    the C API, for tools/bench/bench.py; same linking, stripped
#   build-gpu/tilefuse-capi-test     the C API from C (runs with LD_LIBRARY_PATH=build-gpu)
#   build-gpu/kernels/NAME.ptx       kernels from `tilefuse compile`, each with NAME.json beside it
#   build-gpu/kernels-*/             the other kernel sets (split-KV, paged, varlen, backward, ...)
#
# The GPU machine has no LLVM, so the two binaries come from a separate CMake tree,
# build-gpu-cmake/, configured with TILEFUSE_GPU_STANDALONE=ON (only the GPU-side targets are
# built there); the compiler that emits the PTX is the development build's, build/tools/tilefuse.
#
#   scripts/build-gpu.sh             binaries and kernels
#   scripts/build-gpu.sh --no-ptx    binaries only
set -euo pipefail
cd "$(dirname "$0")/.."

emit_ptx=1
for arg in "$@"; do
  case "$arg" in
    --no-ptx) emit_ptx=0 ;;
    *) echo "usage: $0 [--no-ptx]" >&2; exit 2 ;;
  esac
done

out=build-gpu
tree=build-gpu-cmake # outside build-gpu/ so that only the artifacts travel
mkdir -p "$out/kernels"

if [ ! -f "$tree/build.ninja" ]; then
  cmake -S . -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILEFUSE_GPU_STANDALONE=ON >/dev/null
fi
cmake --build "$tree" --target tilefuse-gpu-tests tilefuse_cuda tilefuse-capi-test
strip -o "$out/tilefuse-gpu-tests" "$tree/test/gpu/tilefuse-gpu-tests"
strip --strip-unneeded -o "$out/libtilefuse_cuda.so" "$tree/runtime/libtilefuse_cuda.so"
strip -o "$out/tilefuse-capi-test" "$tree/test/gpu/tilefuse-capi-test"

# They must run where only glibc is: no libLLVM, libstdc++ or libgcc_s.
for binary in "$out/tilefuse-gpu-tests" "$out/libtilefuse_cuda.so"; do
  if ldd "$binary" | grep -E 'libLLVM|libstdc\+\+|libgcc_s|libMLIR|libcuda'; then
    echo "build-gpu: $binary links a library the GPU machine does not have (above)" >&2
    exit 1
  fi
done
echo "build-gpu: $(du -h "$out/tilefuse-gpu-tests" | cut -f1) tilefuse-gpu-tests," \
  "$(du -h "$out/libtilefuse_cuda.so" | cut -f1) libtilefuse_cuda.so"

[ "$emit_ptx" = 1 ] || exit 0

# PTX: tilefuse compile --emit ptx ...
# The kernel set (scripts/compile-kernels.sh): every bundled kernel, plus attention and causal at
# head dim 128 and in f16, each NAME.ptx with its launch metadata NAME.json.
scripts/compile-kernels.sh "$out/kernels"
# The decode bench's unpacked column: split-KV attention with GQA packing off (pack_gqa=false),
# beside the packed default of kernels-split.
mkdir -p "$out/kernels-split-unpacked"
rm -f "$out/kernels-split-unpacked"/*
for d in 64 128; do
  build/tools/tilefuse compile --kernel attention --head-dim "$d" --split-kv \
    --config pack_gqa=false --emit ptx -o "$out/kernels-split-unpacked/attention_d$d.ptx" || exit 1
done
# The paged-KV kernels (tile-paged-kv), unsplit and split (scripts/gpu-run.sh tests-paged), and
# the decode bench's paged column: split-KV attention read through a page table.
KERNEL_SET=paged scripts/compile-kernels.sh "$out/kernels-paged" || exit 1
mkdir -p "$out/kernels-paged-bench"
rm -rf "$out"/kernels-paged-bench*/*
for d in 64 128; do
  build/tools/tilefuse compile --kernel attention --head-dim "$d" --split-kv --paged-kv \
    --emit ptx -o "$out/kernels-paged-bench/attention_d$d.ptx" || exit 1
  # The page size fixed at compile time (tile-paged-kv's page-size), 16 and 128 rows.
  for p in 16 128; do
    mkdir -p "$out/kernels-paged-bench-p$p"
    build/tools/tilefuse compile --kernel attention --head-dim "$d" --split-kv --paged-kv \
      --page-size "$p" --emit ptx -o "$out/kernels-paged-bench-p$p/attention_d$d.ptx" || exit 1
  done
done
# The varlen kernels (tile-varlen): every variant on packed sequences (scripts/gpu-run.sh
# tests-varlen), and the varlen bench's: attention and causal at head dims 64 and 128, as
# compiled by default (warp-specialized at 128) and, the one-warpgroup kernel, with the register
# budget of 3 CTAs an SM (ctas_per_sm=3,warp_specialize=false).
KERNEL_SET=varlen scripts/compile-kernels.sh "$out/kernels-varlen" || exit 1
# The same over paged caches (chunked prefill; scripts/gpu-run.sh tests-paged-varlen).
KERNEL_SET=paged-varlen scripts/compile-kernels.sh "$out/kernels-paged-varlen" || exit 1
# Split-KV on packed batches (scripts/gpu-run.sh tests-varlen-split).
KERNEL_SET=varlen-split scripts/compile-kernels.sh "$out/kernels-varlen-split" || exit 1
rm -rf "$out"/kernels-varlen-bench*
mkdir -p "$out/kernels-varlen-bench" "$out/kernels-varlen-bench-budget"
for d in 64 128; do
  for kernel in attention causal; do
    build/tools/tilefuse compile --kernel "$kernel" --head-dim "$d" --varlen --emit ptx \
      -o "$out/kernels-varlen-bench/${kernel}_d$d.ptx" || exit 1
    build/tools/tilefuse compile --kernel "$kernel" --head-dim "$d" --varlen \
      --config ctas_per_sm=3,warp_specialize=false --emit ptx \
      -o "$out/kernels-varlen-bench-budget/${kernel}_d$d.ptx" || exit 1
  done
done
# Every variant at head dims 96, 128, 192 and 256 (scripts/gpu-run.sh tests-head-dims): d128 for
# its causal-like defaults (paired, overlapped tile boundaries), which the d64 set does not reach.
KERNEL_SET=head-dims scripts/compile-kernels.sh "$out/kernels-head-dims" || exit 1
# The reversed row order's A/B sets (kernels-desc, kernels-varlen-desc, ...) were measured on
# the H200 in the fifteenth session (docs/perf.md) and are no longer built: the default kernel
# set now holds the descending causal-like kernels, and what travels is capped at 64 MiB. Remake
# one with `scripts/build-gpu-variants.sh desc --config row_order=descending`.
rm -rf "$out/kernels-desc" "$out/kernels-varlen-desc" "$out/kernels-varlen-bench-desc" \
  "$out/kernels-backward-desc" "$out/kernels-backward-base"
# Head dims 192 and 256 are warp-specialized with Q in shared memory by default now (measured in
# the sixteenth session: docs/perf.md), so kernels-head-dims holds them and tests-head-dims
# checks them; the d256-qs and qs-same sets that measured them are no longer built.
rm -rf "$out/kernels-d256-qs" "$out/kernels-d256-qs80" "$out/kernels-qs-same"
# d64 warp-specialized with three consumer warpgroups (Br = 192, Bc = 128, Q in shared memory,
# rotated: FlashAttention-3's d64 tile; with Q in registers it spills), every variant:
# scripts/gpu-run.sh tests-d64-ws, and bench.py --variant ws192=build-gpu/kernels-d64-ws192.
HEAD_DIMS=64 KERNEL_SET=head-dims scripts/compile-kernels.sh "$out/kernels-d64-ws192" \
  --config Br=192,Bc=128,mma=wgmma,q=shared,warp_specialize=true,softmax_overlap=true || exit 1
# d128 with Q in shared memory and the wider key block the freed registers allow (Bc = 160;
# the d128 default keeps Q in registers at Bc = 128): bench.py --variant
# wsqs-wide=build-gpu/kernels-qs-wide, attention and causal.
rm -rf "$out/kernels-qs-wide" && mkdir -p "$out/kernels-qs-wide"
for kernel in attention causal; do
  build/tools/tilefuse compile --kernel "$kernel" --head-dim 128 --emit ptx \
    --config mma=wgmma,q=shared,warp_specialize=true,Bc=160,softmax_overlap=true \
    -o "$out/kernels-qs-wide/${kernel}_d128.ptx" || exit 1
done
# Persistent tiles (persistent=true) on the defaults at d64, d128, d192 and d256, attention and
# causal: the tile loop in the row order (a head's row blocks together under a full mask, longest
# first across heads under a causal one): bench.py --variant persist=build-gpu/kernels-persist,
# and scripts/gpu-run.sh tests-persist (the only kernels whose CTAs run several tiles, so the only
# ones that take Q's one-stage ring through more than one phase). kernels-persist-qs: d128 with
# Q in shared memory (loaded by the producer with TMA while the consumers finish a tile).
KERNEL_SET=persist scripts/compile-kernels.sh "$out/kernels-persist" || exit 1
HEAD_DIMS=128 PERSIST_CONFIG=mma=wgmma,q=shared,warp_specialize=true KERNEL_SET=persist \
  scripts/compile-kernels.sh "$out/kernels-persist-qs" || exit 1
# The same tiles dealt row_order=paired (tgpu-persistent: row blocks i and R - 1 - i of a pair
# to one program): scripts/gpu-run.sh tests-persist, bench.py --variant
# paired=build-gpu/kernels-persist-paired.
PERSIST_CONFIG=row_order=paired KERNEL_SET=persist \
  scripts/compile-kernels.sh "$out/kernels-persist-paired" || exit 1
# The same tiles with their boundaries overlapped (overlap_tiles=true, tgpu-overlap-tiles: a
# tile's last P·V and epilogue run in the next tile's first key block, Q in two stages):
# scripts/gpu-run.sh tests-persist, bench.py --variant overlap=build-gpu/kernels-overlap-tiles.
# At Bc = 128: the d128 full-mask default (Bc = 176) needs 241 KiB of shared memory with the
# second Q stage. d192 and d256 are left out: their second Q stage does not fit beside the key
# and value rings (265 and 289 KiB at their defaults). d64 spills under this setting (ptxas:
# ~240 bytes, wgmma serialized), so it is here for correctness, not for timing.
HEAD_DIMS="64 128" PERSIST_CONFIG=overlap_tiles=true,block_n=128 KERNEL_SET=persist \
  scripts/compile-kernels.sh "$out/kernels-overlap-tiles" || exit 1
# The ablation (issue 10, FlashAttention-3's Table 2): each technique of the defaults switched
# the other way alone, attention and causal at head dims 64, 128, 192 and 256, one set each,
# build-gpu/ablation/NAME (one folder, one path to carry; scripts/gpu-run.sh ablation times them
# all in one bench run).
# Where the default does not use the technique the request changes nothing (q_tma=false at d128,
# whose Q is in registers) or asks for it anyway (pingpong=true).
#   nows       warp_specialize=false: the one-warpgroup kernel with cp.async copies
#   noov       softmax_overlap=false: the key loop not rotated
#   noqtma     q_tma=false: the consumers copy Q with cp.async
#   nopersist  persistent=false: one tile per CTA
#   persist    persistent=true, where the default has one tile per CTA
#   pp         pingpong=true: the consumer warpgroups take turns
#   asc        row_order=ascending: causal row blocks in grid order, not last first
ablations=(nows:warp_specialize=false noov:softmax_overlap=false noqtma:q_tma=false
           nopersist:persistent=false persist:persistent=true pp:pingpong=true
           asc:row_order=ascending)
for ablation in "${ablations[@]}"; do
  name=${ablation%%:*} config=${ablation#*:}
  dir="$out/ablation/$name"
  rm -rf "$dir" && mkdir -p "$dir"
  for d in 64 128 192 256; do
    for kernel in attention causal; do
      # A request the kernel cannot take (pingpong=true on one consumer warpgroup, persistent=true
      # without warp roles) leaves its cell n/a; the compiler's reason is printed.
      if ! why=$(build/tools/tilefuse compile --kernel "$kernel" --head-dim "$d" \
                   --config "$config" --emit ptx -o "$dir/${kernel}_d$d.ptx" 2>&1); then
        echo "build-gpu: ablation/$name/${kernel}_d$d n/a: ${why%%$'\n'*}" >&2
        rm -f "$dir/${kernel}_d$d".*
      fi
    done
  done
done
# The split-KV kernels (tile-split-kv), apart: their sidecars say "split_kv" and the GPU tests run
# them at several split counts (scripts/gpu-run.sh tests-split).
KERNEL_SET=split scripts/compile-kernels.sh "$out/kernels-split" --split-kv || exit 1
# The derived backwards (dQ, dK, dV) for bench.py --backward (scripts/gpu-run.sh bench-backward):
# attention and causal at head dims 64 and 128, atomic dQ; each K_backward_dD.ptx holds the three
# phases (preprocess, key_gradients, query_gradients), its sidecar K_backward_dD.json a JSON
# array of their metadata. The bench's forward kernels (O and LSE) stay those of kernels/.
mkdir -p "$out/kernels-backward"
rm -f "$out/kernels-backward"/*
for d in 64 128; do
  for kernel in attention causal; do
    build/tools/tilefuse compile --kernel "$kernel" --backward --head-dim "$d" --emit ptx \
      -o "$out/kernels-backward/${kernel}_backward_d$d.ptx" || exit 1
  done
done

# What travels to the device machine is capped at 64 MiB with the tracked files (about 5 MiB).
# With the self-contained tarball and every kernel set build-gpu/ is near that: then carry the
# paths a call needs (at most 8: build-gpu/kernels, build-gpu/ablation, build-gpu/libtilefuse_cuda.so
# and build-gpu/tilefuse-gpu-tests for the ablation step).
size=$(du -sm "$out" | cut -f1)
if ((size > 56)); then
  echo "build-gpu: $out is $size MiB; carry only the paths a device call needs (64 MiB cap)" >&2
fi
