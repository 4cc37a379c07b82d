#!/usr/bin/env bash
# Compiles the kernel set the GPU machine tests and times into DIR with `tilefuse compile` (the
# development build's): every bundled kernel at its own head dim and dtype (NAME.ptx), plus
# attention and causal at head dim 128 and in f16, and the variants written only for the tests
# (test/variants/), each with its launch metadata NAME.json and its float64 reference
# NAME.reference.so (derived from the same DSL text with the same specialization; the GPU machine
# has no compiler).
# Extra arguments go to every `tilefuse compile` (a tile configuration: --mma, --block-m, ...).
# Every kernel is attempted, so one compiler failure still leaves the others to test; the exit
# status says whether all compiled. Used by scripts/build-gpu.sh and build-gpu-variants.sh.
#
#   scripts/compile-kernels.sh DIR [tilefuse compile options...]
#   KERNEL_SET=split scripts/compile-kernels.sh DIR --split-kv    the split-KV set
#   KERNEL_SET=paged scripts/compile-kernels.sh DIR               the paged-KV set
#   KERNEL_SET=varlen scripts/compile-kernels.sh DIR              the varlen set (KERNELS="a b"
#                                                                 and VARIANTS="c": those only)
#   KERNEL_SET=paged-varlen scripts/compile-kernels.sh DIR        the varlen set over paged caches
#   KERNEL_SET=varlen-split scripts/compile-kernels.sh DIR        the varlen set, split-KV
#   KERNEL_SET=head-dims scripts/compile-kernels.sh DIR           every variant at 96, 192, 256
#                                                                 (HEAD_DIMS="256": those only)
#   KERNEL_SET=persist scripts/compile-kernels.sh DIR             attention and causal at 64-256,
#                                                                 persistent (HEAD_DIMS, and
#                                                                 PERSIST_CONFIG: more settings)
set -uo pipefail
cd "$(dirname "$0")/.."
(($#)) || { echo "usage: $0 DIR [tilefuse compile options...]" >&2; exit 2; }
dir=$1
shift
tilefuse=build/tools/tilefuse
if [ ! -f build/build.ninja ]; then
  echo "compile-kernels: no development build in build/ (run scripts/bootstrap.sh first)" >&2
  exit 1
fi
cmake --build build --target tilefuse >/dev/null || exit 1
mkdir -p "$dir"
rm -f "$dir"/*.ptx "$dir"/*.json "$dir"/*.reference.so

failed=()
compile() { # compile OUTPUT_NAME (--kernel NAME | FILE) [tilefuse compile options...]
  local name=$1
  shift
  if ! "$tilefuse" compile "$@" --emit ptx -o "$dir/$name.ptx"; then
    failed+=("$name")
    rm -f "$dir/$name.ptx" "$dir/$name.json"
  elif [ ! -s "$dir/$name.json" ]; then
    echo "compile-kernels: tilefuse compile wrote no $dir/$name.json" >&2
    failed+=("$name")
  elif ! "$tilefuse" compile "$@" --emit reference -o "$dir/$name.reference.o" ||
       ! cc -shared -o "$dir/$name.reference.so" "$dir/$name.reference.o" -lm; then
    echo "compile-kernels: no float64 reference for $name" >&2
    failed+=("$name")
    rm -f "$dir/$name.ptx" "$dir/$name.json"
  fi
  rm -f "$dir/$name.reference.o"
}

if [ "${KERNEL_SET:-full}" = head-dims ]; then
  # Every bundled variant and the test-only ones at head dims 96, 128, 192 and 256, as compiled by
  # default: warp-specialized and rotated at 96 and 192, with the key block the score and mask
  # regions' register cost leaves (ScoreRegionCost.h), one warpgroup at 256.
  for d in ${HEAD_DIMS:-96 128 192 256}; do
    for kernel in $("$tilefuse" list | awk '{print $1}'); do
      compile "${kernel}_d$d" --kernel "$kernel" --head-dim "$d" "$@"
    done
    for variant in test/variants/*.mlir; do
      compile "$(basename "$variant" .mlir)_d$d" "$variant" --head-dim "$d" "$@"
    done
  done
  echo "compile-kernels: $(ls "$dir"/*.ptx 2>/dev/null | wc -l) kernels in $dir${*:+ ($*)}"
  ((${#failed[@]} == 0)) || { echo "compile-kernels: FAILED: ${failed[*]}" >&2; exit 1; }
  exit 0
fi
if [ "${KERNEL_SET:-full}" = persist ]; then
  # The persistent set (KERNEL_SET=persist): persistent=true on the defaults of attention and
  # causal at head dims 64 to 256 (asked for with warp roles at d64 causal, whose short-sequence
  # default has none: its persistent form is the 192-row warp-specialized tile). Its CTAs run several tiles, so it is what takes Q's
  # one-stage ring through more than one phase. PERSIST_CONFIG adds settings to the
  # configuration (mma=wgmma,q=shared,warp_specialize=true for the d128 shared-Q set).
  for d in ${HEAD_DIMS:-64 128 192 256}; do
    for kernel in attention causal; do
      config=persistent=true
      [ "$d-$kernel" = 64-causal ] && config=warp_specialize=true,persistent=true
      compile "${kernel}_d$d" --kernel "$kernel" --head-dim "$d" \
        --config "$config${PERSIST_CONFIG:+,$PERSIST_CONFIG}" "$@"
    done
  done
  echo "compile-kernels: $(ls "$dir"/*.ptx 2>/dev/null | wc -l) kernels in $dir"
  ((${#failed[@]} == 0)) || { echo "compile-kernels: FAILED: ${failed[*]}" >&2; exit 1; }
  exit 0
fi
if [ "${KERNEL_SET:-full}" = paged ]; then
  # The paged-KV set (KERNEL_SET=paged): every bundled variant and the test-only ones read
  # through a page table (tile-paged-kv), unsplit (NAME) and split (NAME_split, the decode
  # form); attention at head dim 128 (the decode bench's) and on sm_80.
  for kernel in $("$tilefuse" list | awk '{print $1}'); do
    compile "$kernel" --kernel "$kernel" --paged-kv "$@"
    compile "${kernel}_split" --kernel "$kernel" --paged-kv --split-kv "$@"
  done
  for variant in test/variants/*.mlir; do
    compile "$(basename "$variant" .mlir)_split" "$variant" --paged-kv --split-kv "$@"
  done
  compile attention_d128 --kernel attention --head-dim 128 --paged-kv "$@"
  compile attention_d128_split --kernel attention --head-dim 128 --paged-kv --split-kv "$@"
  compile attention_sm80_split --kernel attention --arch sm_80 --paged-kv --split-kv "$@"
  # A page size fixed at compile time: 16 rows (vLLM's default) and 48 (not a power of two).
  compile attention_d128_split_p16 --kernel attention --head-dim 128 --paged-kv --split-kv \
    --page-size 16 "$@"
  compile causal_p48 --kernel causal --paged-kv --page-size 48 "$@"
  echo "compile-kernels: $(ls "$dir"/*.ptx 2>/dev/null | wc -l) kernels in $dir${*:+ ($*)}"
  ((${#failed[@]} == 0)) || { echo "compile-kernels: FAILED: ${failed[*]}" >&2; exit 1; }
  exit 0
fi
if [ "${KERNEL_SET:-full}" = varlen ]; then
  # The varlen set (KERNEL_SET=varlen): every bundled variant and the test-only ones on packed
  # batches of variable-length sequences (tile-varlen), as written and at head dim 128 (on
  # sm_90a warp-specialized, TMA over the packed rows); and on sm_80.
  for kernel in ${KERNELS:-$("$tilefuse" list | awk '{print $1}')}; do
    compile "$kernel" --kernel "$kernel" --varlen "$@"
    compile "${kernel}_d128" --kernel "$kernel" --head-dim 128 --varlen "$@"
  done
  for variant in ${VARIANTS:-test/variants/*.mlir}; do
    compile "$(basename "$variant" .mlir)" "$variant" --varlen "$@"
    compile "$(basename "$variant" .mlir)_d128" "$variant" --head-dim 128 --varlen "$@"
  done
  compile attention_sm80 --kernel attention --arch sm_80 --varlen "$@"
  compile sliding_window_sm80 --kernel sliding_window --arch sm_80 --varlen "$@"
  echo "compile-kernels: $(ls "$dir"/*.ptx 2>/dev/null | wc -l) kernels in $dir${*:+ ($*)}"
  ((${#failed[@]} == 0)) || { echo "compile-kernels: FAILED: ${failed[*]}" >&2; exit 1; }
  exit 0
fi
if [ "${KERNEL_SET:-full}" = paged-varlen ]; then
  # The paged varlen set (KERNEL_SET=paged-varlen): every bundled variant and the test-only ones
  # with packed queries over a paged cache (tile-paged-kv, then tile-varlen: chunked prefill);
  # attention at head dim 128, a page size fixed at compile time, and sm_80.
  for kernel in $("$tilefuse" list | awk '{print $1}'); do
    compile "$kernel" --kernel "$kernel" --paged-kv --varlen "$@"
  done
  for variant in test/variants/*.mlir; do
    compile "$(basename "$variant" .mlir)" "$variant" --paged-kv --varlen "$@"
  done
  compile attention_d128 --kernel attention --head-dim 128 --paged-kv --varlen "$@"
  compile causal_p16 --kernel causal --paged-kv --page-size 16 --varlen "$@"
  compile causal_sm80 --kernel causal --arch sm_80 --paged-kv --varlen "$@"
  echo "compile-kernels: $(ls "$dir"/*.ptx 2>/dev/null | wc -l) kernels in $dir${*:+ ($*)}"
  ((${#failed[@]} == 0)) || { echo "compile-kernels: FAILED: ${failed[*]}" >&2; exit 1; }
  exit 0
fi
if [ "${KERNEL_SET:-full}" = varlen-split ]; then
  # The split varlen set (KERNEL_SET=varlen-split): every bundled variant and the test-only ones
  # split-KV (GQA-packed) on packed batches (decode over ragged keys); attention at head dim 128,
  # over a paged cache, and on sm_80.
  for kernel in $("$tilefuse" list | awk '{print $1}'); do
    compile "$kernel" --kernel "$kernel" --varlen --split-kv "$@"
  done
  for variant in test/variants/*.mlir; do
    compile "$(basename "$variant" .mlir)" "$variant" --varlen --split-kv "$@"
  done
  compile attention_d128 --kernel attention --head-dim 128 --varlen --split-kv "$@"
  compile attention_d128_paged --kernel attention --head-dim 128 --varlen --split-kv \
    --paged-kv "$@"
  compile causal_paged_p16 --kernel causal --varlen --split-kv --paged-kv --page-size 16 "$@"
  compile attention_sm80 --kernel attention --arch sm_80 --varlen --split-kv "$@"
  echo "compile-kernels: $(ls "$dir"/*.ptx 2>/dev/null | wc -l) kernels in $dir${*:+ ($*)}"
  ((${#failed[@]} == 0)) || { echo "compile-kernels: FAILED: ${failed[*]}" >&2; exit 1; }
  exit 0
fi
if [ "${KERNEL_SET:-full}" = split ]; then
  # The split-KV set (KERNEL_SET=split, with --split-kv): the decode shapes' kernels and one of
  # each mask class, both chips, the test-only variants whose masks and scores read positions
  # and heads; each case of the GPU tests runs several split counts, so the set stays small.
  # Split kernels pack GQA groups by default; attention_unpacked keeps the unpacked split.
  for kernel in attention gqa mqa causal sliding_window softcap; do
    compile "$kernel" --kernel "$kernel" "$@"
  done
  compile attention_d128 --kernel attention --head-dim 128 "$@"
  compile attention_sm80 --kernel attention --arch sm_80 "$@"
  compile attention_unpacked --kernel attention --config pack_gqa=false "$@"
  compile chunked_local test/variants/chunked_local.mlir "$@"
  compile gqa_head_window test/variants/gqa_head_window.mlir "$@"
  echo "compile-kernels: $(ls "$dir"/*.ptx 2>/dev/null | wc -l) kernels in $dir${*:+ ($*)}"
  ((${#failed[@]} == 0)) || { echo "compile-kernels: FAILED: ${failed[*]}" >&2; exit 1; }
  exit 0
fi
for kernel in $("$tilefuse" list | awk '{print $1}'); do
  compile "$kernel" --kernel "$kernel" "$@"
done
compile attention_d128 --kernel attention --head-dim 128 "$@"
compile causal_d128 --kernel causal --head-dim 128 "$@"
# The short-sequence forms where the defaults differ (up to 1024 keys: d64 under a causal-like
# mask without region registers, one warpgroup; d64 and d128 under full masks and d96 under
# either, tile boundaries overlapped); their sidecars' seq_bucket is what bench.py matches a
# row's length against.
for kernel in attention causal sliding_window prefix_lm; do
  compile "${kernel}_short" --kernel "$kernel" --seq-len 1024 "$@"
done
compile attention_d128_short --kernel attention --head-dim 128 --seq-len 1024 "$@"
compile attention_d96_short --kernel attention --head-dim 96 --seq-len 1024 "$@"
compile causal_d96_short --kernel causal --head-dim 96 --seq-len 1024 "$@"
compile chunked_local_short test/variants/chunked_local.mlir --seq-len 1024 "$@"
# Every head dimension class: a 128-byte swizzle panel used in part (32, 96), several (192, 256).
for d in 32 96 192 256; do
  compile "attention_d$d" --kernel attention --head-dim "$d" "$@"
  compile "causal_d$d" --kernel causal --head-dim "$d" "$@"
done
# The portable floor (mma.sync, ldmatrix, chunk_xor tiles) as sm_80 PTX; the H200 JITs it too.
compile attention_sm80 --kernel attention --arch sm_80 "$@"
compile causal_sm80_d96 --kernel causal --arch sm_80 --head-dim 96 "$@"
compile sliding_window_sm80 --kernel sliding_window --arch sm_80 "$@"
compile attention_f16 --kernel attention --dtype f16 "$@"
compile causal_f16 --kernel causal --dtype f16 "$@"
for variant in test/variants/*.mlir; do
  compile "$(basename "$variant" .mlir)" "$variant" "$@"
done
echo "compile-kernels: $(ls "$dir"/*.ptx 2>/dev/null | wc -l) kernels in $dir${*:+ ($*)}"
if ((${#failed[@]})); then
  echo "compile-kernels: FAILED to compile: ${failed[*]}" >&2
  exit 1
fi
