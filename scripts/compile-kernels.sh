#!/usr/bin/env bash
# Compiles the kernel set the GPU machine tests and times into DIR with `tilefuse compile` (the
# development build's): every bundled kernel at its own head dim and dtype (NAME.ptx), plus
# attention and causal at head dim 128 and in f16, each with its launch metadata NAME.json.
# Extra arguments go to every `tilefuse compile` (a tile configuration: --mma, --block-m, ...).
# Every kernel is attempted, so one compiler failure still leaves the others to test; the exit
# status says whether all compiled. Used by scripts/build-gpu.sh and build-gpu-variants.sh.
#
#   scripts/compile-kernels.sh DIR [tilefuse compile options...]
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
rm -f "$dir"/*.ptx "$dir"/*.json

failed=()
compile() { # compile OUTPUT_NAME KERNEL [tilefuse compile options...]
  local name=$1 kernel=$2
  shift 2
  if ! "$tilefuse" compile --kernel "$kernel" --emit ptx -o "$dir/$name.ptx" "$@"; then
    failed+=("$name")
    rm -f "$dir/$name.ptx" "$dir/$name.json"
  elif [ ! -s "$dir/$name.json" ]; then
    echo "compile-kernels: tilefuse compile wrote no $dir/$name.json" >&2
    failed+=("$name")
  fi
}

for kernel in $("$tilefuse" list | awk '{print $1}'); do
  compile "$kernel" "$kernel" "$@"
done
compile attention_d128 attention --head-dim 128 "$@"
compile causal_d128 causal --head-dim 128 "$@"
compile attention_f16 attention --dtype f16 "$@"
compile causal_f16 causal --dtype f16 "$@"
echo "compile-kernels: $(ls "$dir"/*.ptx 2>/dev/null | wc -l) kernels in $dir${*:+ ($*)}"
if ((${#failed[@]})); then
  echo "compile-kernels: FAILED to compile: ${failed[*]}" >&2
  exit 1
fi
