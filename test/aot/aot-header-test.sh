#!/usr/bin/env bash
# The ahead-of-time path without a GPU: `tilefuse compile --emit cubin|header` for the causal
# kernel, a header for gqa (whose signature declares its head counts) and the causal kernel's
# derived backward (--backward: three kernels, a caller's workspace); the headers compile
# with the C compiler as plain C99 (-Wall -Werror, and -Wextra -pedantic with cuda.h as a system
# header) and as C++; test/gpu/AotCheck.c builds against them, links against libcuda (the
# toolkit's stub where there is no driver) and runs: its host-side checks of the launchers'
# argument validation (gqa's declared head counts and the backward's included) must pass, and
# the GPU part says
# "skipped: no GPU" (or, on a GPU machine, runs and prints PASS).
#
#   aot-header-test.sh TILEFUSE CC CUDA_INCLUDE_DIR CUDA_LIB_DIR AOTCHECK_C WORK_DIR
# Prints "skipped: ..." and exits 0 where ptxas or cuda.h is missing.
set -uo pipefail
tilefuse=$1 cc=$2 cuda_include=$3 cuda_lib=$4 check_c=$5 work=$6

rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
if [ -z "$cuda_include" ] || [ ! -f "$cuda_include/cuda.h" ]; then
  echo "skipped: no cuda.h (the CUDA toolkit is not installed)"
  exit 0
fi
if ! "$tilefuse" compile --kernel causal --emit cubin -o causal.cubin 2> ptxas.log; then
  if grep -q "no ptxas" ptxas.log; then
    echo "skipped: no ptxas ($(tr "\n" " " < ptxas.log))"
    exit 0
  fi
  cat ptxas.log
  echo "FAIL: tilefuse compile --emit cubin"
  exit 1
fi
status=0
step() { # step DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@" > step.log 2>&1; then
    echo "ok    $what"
  else
    echo "FAIL  $what: $*"
    cat step.log
    status=1
  fi
}
step "cubin is an ELF image" sh -c "head -c 4 causal.cubin | od -An -c | grep -q 'E   L   F'"
step "causal.json beside it" grep -q '"name": "causal"' causal.json
step "--emit header" "$tilefuse" compile --kernel causal --emit header -o causal.h
step "--emit header --name, head dim 128, f16" "$tilefuse" compile --kernel causal \
  --head-dim 128 --dtype f16 --config Br=128 --emit header --name causal_f16_d128 \
  -o causal_f16_d128.h
# At head dim 128 on sm_90a the kernel is warp-specialized: its launcher encodes the K and V
# tensor maps (TMA) and passes them after the other parameters.
step "causal_f16_d128.h encodes TMA tensor maps" grep -q cuTensorMapEncodeTiled causal_f16_d128.h
step "--emit header for gqa (declares H = 8, Hkv = 2)" "$tilefuse" compile --kernel gqa \
  --emit header -o gqa.h
step "gqa.h embeds its declared sizes" grep -q '{-1, 8, -1, 64}, /\* Q: B H M D \*/' gqa.h
step "--emit header, persistent (head dim 128)" "$tilefuse" compile --kernel causal \
  --head-dim 128 --config persistent=true --emit header --name causal_persistent \
  -o causal_persistent.h
step "causal_persistent.h sizes its grid by the GPU" grep -q cuOccupancyMaxActiveBlocksPerMultiprocessor \
  causal_persistent.h
step "causal_persistent.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra \
  -pedantic -Werror -isystem "$cuda_include" -x c -c causal_persistent.h -o header_persistent.o
step "--emit header, persistent varlen (head dim 128)" "$tilefuse" compile --kernel causal \
  --head-dim 128 --varlen --config persistent=true --emit header \
  --name causal_varlen_persistent -o causal_varlen_persistent.h
step "causal_varlen_persistent.h sizes its grid by the GPU" grep -q \
  cuOccupancyMaxActiveBlocksPerMultiprocessor causal_varlen_persistent.h
step "causal_varlen_persistent.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall \
  -Wextra -pedantic -Werror -isystem "$cuda_include" -x c -c causal_varlen_persistent.h \
  -o header_varlen_persistent.o
step "--emit header --split-kv" "$tilefuse" compile --kernel causal --split-kv --emit header \
  --name causal_split -o causal_split.h
step "causal_split.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra \
  -pedantic -Werror -isystem "$cuda_include" -x c -c causal_split.h -o header5.o
step "--emit header --varlen" "$tilefuse" compile --kernel causal --varlen --emit header \
  --name causal_varlen -o causal_varlen.h
step "causal_varlen.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra \
  -pedantic -Werror -isystem "$cuda_include" -x c -c causal_varlen.h -o header6.o
step "--emit header --varlen, head dim 128 (TMA over the packed rows)" "$tilefuse" compile \
  --kernel causal --head-dim 128 --varlen --emit header --name causal_varlen_tma \
  -o causal_varlen_tma.h
step "causal_varlen_tma.h encodes maps N rows before k" grep -q \
  "(const char \*)k - N \* s\[3 + 2\] \* CAUSAL_VARLEN_TMA_ELEMENT_BYTES" causal_varlen_tma.h
step "causal_varlen_tma.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra \
  -pedantic -Werror -isystem "$cuda_include" -x c -c causal_varlen_tma.h -o header_varlen_tma.o
# Q in shared memory, loaded by TMA through the packed q_map (M rows before q): AotCheck.c runs
# it beside causal_varlen.h.
step "--emit header --varlen, Q by TMA" "$tilefuse" compile --kernel causal --varlen \
  --config mma=wgmma,warp_specialize=true,q=shared --emit header --name causal_varlen_qtma \
  -o causal_varlen_qtma.h
step "causal_varlen_qtma.h encodes Q's map M rows before q" grep -q \
  "(const char \*)q - M \* s\[0 + 2\] \* CAUSAL_VARLEN_QTMA_ELEMENT_BYTES, (total_q > 0 ? total_q : 0) + 1" \
  causal_varlen_qtma.h
step "causal_varlen_qtma.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra \
  -pedantic -Werror -isystem "$cuda_include" -x c -c causal_varlen_qtma.h -o header_varlen_qtma.o
step "--emit header --paged-kv" "$tilefuse" compile --kernel causal --paged-kv --emit header \
  --name causal_paged -o causal_paged.h
step "causal_paged.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra \
  -pedantic -Werror -isystem "$cuda_include" -x c -c causal_paged.h -o header7.o
step "--emit header --paged-kv --varlen --page-size 16" "$tilefuse" compile --kernel causal \
  --paged-kv --varlen --page-size 16 --emit header --name causal_paged_varlen \
  -o causal_paged_varlen.h
step "causal_paged_varlen.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra \
  -pedantic -Werror -isystem "$cuda_include" -x c -c causal_paged_varlen.h -o header9.o
step "--emit header --paged-kv --split-kv --page-size 16" "$tilefuse" compile --kernel attention \
  --paged-kv --split-kv --page-size 16 --emit header --name attention_paged_split \
  -o attention_paged_split.h
step "attention_paged_split.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall \
  -Wextra -pedantic -Werror -isystem "$cuda_include" -x c -c attention_paged_split.h \
  -o header8.o
step "--backward --emit header" "$tilefuse" compile --kernel causal --backward --emit header \
  -o causal_backward.h
step "causal_backward.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra \
  -pedantic -Werror -isystem "$cuda_include" -x c -c causal_backward.h -o header_backward.o
# Above head dim 64 on sm_90a the backward is deterministic: no dQ accumulator in its workspace.
step "--backward --emit header --name, head dim 128, f16 (deterministic)" "$tilefuse" compile \
  --kernel causal --backward --head-dim 128 --dtype f16 --emit header --name causal_d128 \
  -o causal_d128_backward.h
step "causal_d128_backward.h has no dQ accumulator" grep -q \
  '#define CAUSAL_D128_BACKWARD_DETERMINISTIC 1' causal_d128_backward.h
step "causal_d128_backward.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall \
  -Wextra -pedantic -Werror -isystem "$cuda_include" -x c -c causal_d128_backward.h \
  -o header_backward_d128.o
# The headers' workspace layouts and grids are C copies of launch_abi's splitWorkspace,
# backwardWorkspace and backwardGrid: they must agree.
abi_include=$(cd "$(dirname "$check_c")/../../runtime/device/include" && pwd)
if command -v c++ > /dev/null; then
  cat > layout.cpp <<'CPP'
#include "causal_backward.h"
#include "causal_d128_backward.h"
#include "causal_split.h"
#include "tilefuse/runtime/device/LaunchAbi.h"
#include <cstdio>
int main() {
  namespace abi = tilefuse::launch_abi;
  const long long shapes[][5] = {{1, 1, 1, 1, 1}, {3, 2, 4, 2, 300}, {8, 1, 8, 2, 5},
                                 {128, 8, 32, 8, 1}, {5, 2, 6, 3, 1000}};
  int bad = 0;
  for (const auto &s : shapes) {
    causal_split_split_workspace_layout c = causal_split_split_workspace(s[0], s[1], s[2], s[3], s[4]);
    abi::SplitWorkspace a = abi::splitWorkspace(s[0], s[1], s[2], s[3], s[4], CAUSAL_SPLIT_HEAD_DIM,
                                                CAUSAL_SPLIT_BLOCK_M, CAUSAL_SPLIT_PACK_GQA);
    if ((long long)c.counters != a.countersOffset || (long long)c.counter_bytes != a.counterBytes ||
        (long long)c.o_part != a.outputPartOffset || (long long)c.lse_part != a.lsePartOffset ||
        (long long)c.bytes != a.bytes) {
      std::printf("layout differs at S=%lld B=%lld H=%lld Hkv=%lld M=%lld\n", s[0], s[1], s[2],
                  s[3], s[4]);
      bad = 1;
    }
  }
  // The backward's: its workspace (both dQ schedules) and each kernel's grid.
  const long long backwardShapes[][5] = {{1, 1, 1, 1, 1}, {2, 8, 2, 300, 129},
                                         {3, 6, 3, 1000, 77}, {1, 2, 1, 128, 128}};
  for (const auto &s : backwardShapes) {
    long long B = s[0], H = s[1], Hkv = s[2], M = s[3], N = s[4];
    abi::BackwardWorkspace atomic = abi::backwardWorkspace(B, H, M, CAUSAL_BACKWARD_HEAD_DIM,
                                                           CAUSAL_BACKWARD_DETERMINISTIC);
    abi::BackwardWorkspace ordered = abi::backwardWorkspace(
        B, H, M, CAUSAL_D128_BACKWARD_HEAD_DIM, CAUSAL_D128_BACKWARD_DETERMINISTIC);
    if ((long long)causal_backward_workspace_bytes(B, H, M) != atomic.bytes ||
        (long long)causal_backward_accumulator_offset_(B, H, M) != atomic.accumulatorOffset ||
        (long long)causal_d128_backward_workspace_bytes(B, H, M) != ordered.bytes) {
      std::printf("backward workspace differs at B=%lld H=%lld M=%lld\n", B, H, M);
      bad = 1;
    }
    const long long blockM[] = {CAUSAL_BACKWARD_PREPROCESS_BLOCK_M,
                                CAUSAL_BACKWARD_KEY_GRADIENTS_BLOCK_M,
                                CAUSAL_BACKWARD_QUERY_GRADIENTS_BLOCK_M};
    const long long blockN[] = {CAUSAL_BACKWARD_PREPROCESS_BLOCK_N,
                                CAUSAL_BACKWARD_KEY_GRADIENTS_BLOCK_N,
                                CAUSAL_BACKWARD_QUERY_GRADIENTS_BLOCK_N};
    for (int phase = 0; phase < CAUSAL_BACKWARD_PHASE_COUNT; ++phase) {
      unsigned grid[3];
      causal_backward_grid_(phase, B, H, Hkv, M, N, grid);
      abi::Grid a = abi::backwardGrid(abi::kBackwardPhases[phase], B, H, Hkv, M, N,
                                      blockM[phase], blockN[phase]);
      if ((long long)grid[0] != a.rowBlocks || (long long)grid[1] != a.heads ||
          (long long)grid[2] != a.batch) {
        std::printf("backward grid of phase %d differs at B=%lld H=%lld Hkv=%lld M=%lld N=%lld\n",
                    phase, B, H, Hkv, M, N);
        bad = 1;
      }
    }
  }
  return bad;
}
CPP
  step "the headers' workspaces and backward grids are launch_abi's" sh -c \
    "c++ -std=c++17 -Wall -Werror -I. -isystem '$cuda_include' -I'$abi_include' layout.cpp -o layout && ./layout"
fi
step "C99 -Wall -Werror" "$cc" -std=c99 -Wall -Werror -I"$cuda_include" -x c -c causal.h \
  -o header.o
step "C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra -pedantic -Werror \
  -isystem "$cuda_include" -x c -c causal_f16_d128.h -o header2.o
if command -v c++ > /dev/null; then
  step "C++ -Wall -Wextra -Werror" c++ -Wall -Wextra -Werror -isystem "$cuda_include" -x c++ \
    -c causal.h -o header3.o
  step "causal_backward.h: C++ -Wall -Wextra -Werror" c++ -Wall -Wextra -Werror \
    -isystem "$cuda_include" -x c++ -c causal_backward.h -o header_backward_cxx.o
fi
step "gqa.h: C99 -Wall -Wextra -pedantic -Werror" "$cc" -std=c99 -Wall -Wextra -pedantic \
  -Werror -isystem "$cuda_include" -x c -c gqa.h -o header4.o
step "three headers in one translation unit" sh -c "printf '#include \"causal.h\"\n#include \"causal_f16_d128.h\"\n#include \"causal_backward.h\"\n' > both.c && '$cc' -std=c99 -Wall -Werror -I. -I'$cuda_include' -c both.c -o both.o"
step "AotCheck.c builds against causal.h, causal_backward.h, causal_split.h, causal_varlen.h, causal_varlen_qtma.h, causal_paged.h, causal_paged_varlen.h and gqa.h" "$cc" -std=c99 -O2 -Wall -Wextra -Werror \
  -I. -I"$cuda_include" "$check_c" -o aot-check -L"$cuda_lib" -lcuda -lpthread -lm
if [ "$status" = 0 ]; then
  # Without a driver, the toolkit's stub stands in for libcuda.so.1 (its calls all fail).
  if ! ldconfig -p 2> /dev/null | grep -q 'libcuda.so.1 '; then
    mkdir -p stub && ln -sf "$cuda_lib/libcuda.so" stub/libcuda.so.1
    export LD_LIBRARY_PATH="$PWD/stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  ./aot-check causal.cubin > run.log 2>&1
  rc=$?
  cat run.log
  if [ $rc != 0 ] || ! grep -Eq '^(host checks PASS|PASS)$' run.log; then
    echo "FAIL  aot-check (exit $rc)"
    status=1
  fi
fi
[ "$status" = 0 ] && echo "PASS" || echo "FAIL"
exit $status
