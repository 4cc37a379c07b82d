#!/usr/bin/env bash
# Run on the GPU machine, from the repository root, after scripts/build-aot.sh filled
# build-gpu/aot/ on the development machine and build-gpu/ was carried over. Needs gcc, the CUDA
# driver and cuda.h (CUDA_HOME, CUDA_PATH or /usr/local/cuda); no LLVM and nothing of tilefuse:
#
#   1. causal.h, causal_split.h, causal_varlen.h, causal_varlen_qtma.h, causal_paged.h,
#      causal_paged_varlen.h, gqa.h and causal_backward.h, the headers `tilefuse compile
#      --emit header` wrote,
#      compile as plain C99 with gcc -Wall -Werror (and -Wextra -pedantic, cuda.h as a system
#      header);
#   2. AotCheck.c (test/gpu/AotCheck.c) compiles with gcc against them and links -lcuda;
#   3. it runs: the kernel from the header on random inputs (threads racing for the first
#      launch, grouped heads, M != N, strided tensors) against a float64 attention in C, the
#      launchers' argument checks (gqa refusing head counts it does not declare, its output
#      untouched), the backward's launcher after the forward's (dQ, dK and dV against a float64
#      backward in C), causal.cubin (`--emit cubin`) loading with cuModuleLoad, and
#      causal.ptx loading through the driver's JIT (both loads timed; the JIT cold, with
#      CUDA_CACHE_DISABLE=1).
#
#   scripts/gpu-check-aot.sh              steps 1-3; prints PASS or FAIL (exit 1)
#   scripts/gpu-check-aot.sh --sanitize   also step 3 under compute-sanitizer memcheck
#
# The log goes to $OUT/aot.log (default build-gpu/out/).
set -uo pipefail
cd "$(dirname "$0")/.."

sanitize=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    *) echo "usage: $0 [--sanitize]" >&2; exit 2 ;;
  esac
done
aot=build-gpu/aot
out=${OUT:-$PWD/build-gpu/out}
mkdir -p "$out"
log=$out/aot.log
: > "$log"
say() { echo "$*" | tee -a "$log"; }

if [ ! -f "$aot/causal.h" ] || [ ! -f "$aot/gqa.h" ] || [ ! -f "$aot/AotCheck.c" ] ||
  [ ! -f "$aot/causal.cubin" ] || [ ! -f "$aot/causal_split.h" ] ||
  [ ! -f "$aot/causal_varlen.h" ] || [ ! -f "$aot/causal_varlen_qtma.h" ] ||
  [ ! -f "$aot/causal_paged.h" ] ||
  [ ! -f "$aot/causal_paged_varlen.h" ] || [ ! -f "$aot/causal_backward.h" ]; then
  say "gpu-check-aot: $aot/ is incomplete (run scripts/build-aot.sh on the development machine)"
  say "FAIL"
  exit 1
fi
cuda=""
for dir in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda "$(dirname "$(dirname "$(command -v nvcc 2> /dev/null || echo /x/x)")")"; do
  if [ -n "$dir" ] && [ -f "$dir/include/cuda.h" ]; then
    cuda=$dir
    break
  fi
done
if [ -z "$cuda" ]; then
  say "gpu-check-aot: no cuda.h (set CUDA_HOME)"
  say "FAIL"
  exit 1
fi
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  gcc --version | head -1
  sed -n '1,8p' "$aot/causal.h"
} | tee -a "$log"

status=0
run() { # run DESCRIPTION COMMAND...
  local what=$1
  shift
  say "=== $what: $*"
  "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  if ((rc != 0)); then
    say "=== $what: FAILED (exit $rc)"
    status=1
  fi
  return $rc
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run "causal.h as C99" gcc -std=c99 -Wall -Werror -I"$cuda/include" -x c -c "$aot/causal.h" \
  -o "$work/h.o"
run "causal.h as C99, -Wextra -pedantic" gcc -std=c99 -Wall -Wextra -pedantic -Werror \
  -isystem "$cuda/include" -x c -c "$aot/causal.h" -o "$work/h2.o"
run "gqa.h as C99, -Wextra -pedantic" gcc -std=c99 -Wall -Wextra -pedantic -Werror \
  -isystem "$cuda/include" -x c -c "$aot/gqa.h" -o "$work/h3.o"
run "causal_split.h as C99, -Wextra -pedantic" gcc -std=c99 -Wall -Wextra -pedantic -Werror \
  -isystem "$cuda/include" -x c -c "$aot/causal_split.h" -o "$work/h4.o"
run "causal_varlen.h as C99, -Wextra -pedantic" gcc -std=c99 -Wall -Wextra -pedantic -Werror \
  -isystem "$cuda/include" -x c -c "$aot/causal_varlen.h" -o "$work/h5.o"
run "causal_varlen_qtma.h as C99, -Wextra -pedantic" gcc -std=c99 -Wall -Wextra -pedantic \
  -Werror -isystem "$cuda/include" -x c -c "$aot/causal_varlen_qtma.h" -o "$work/h5q.o"
run "causal_paged.h as C99, -Wextra -pedantic" gcc -std=c99 -Wall -Wextra -pedantic -Werror \
  -isystem "$cuda/include" -x c -c "$aot/causal_paged.h" -o "$work/h6.o"
run "causal_paged_varlen.h as C99, -Wextra -pedantic" gcc -std=c99 -Wall -Wextra -pedantic \
  -Werror -isystem "$cuda/include" -x c -c "$aot/causal_paged_varlen.h" -o "$work/h7.o"
run "causal_backward.h as C99, -Wextra -pedantic" gcc -std=c99 -Wall -Wextra -pedantic \
  -Werror -isystem "$cuda/include" -x c -c "$aot/causal_backward.h" -o "$work/h8.o"
# -lcuda: the driver's libcuda.so if the linker finds it, else the toolkit's stub (the program
# still loads the driver's libcuda.so.1 when it runs).
if ! run "AotCheck.c with gcc" gcc -std=c99 -O2 -Wall -Wextra -Werror -I"$aot" -I"$cuda/include" \
  "$aot/AotCheck.c" -o "$work/aot-check" -lcuda -lpthread -lm; then
  status=0
  run "AotCheck.c with gcc, the toolkit's libcuda stub" gcc -std=c99 -O2 -Wall -Wextra -Werror \
    -I"$aot" -I"$cuda/include" "$aot/AotCheck.c" -o "$work/aot-check" \
    -L"$cuda/lib64/stubs" -lcuda -lpthread -lm
fi
if [ -x "$work/aot-check" ]; then
  run "aot-check" env CUDA_CACHE_DISABLE=1 "$work/aot-check" "$aot/causal.cubin" "$aot/causal.ptx"
  grep -q "^skipped: no GPU" "$log" && status=1 # this script is for the GPU machine
  if ((sanitize)); then
    run "aot-check under compute-sanitizer memcheck" compute-sanitizer --tool memcheck \
      --error-exitcode 1 --print-limit 20 "$work/aot-check" "$aot/causal.cubin" "$aot/causal.ptx"
  fi
fi
say "$( ((status == 0)) && echo PASS || echo FAIL)"
exit $status
