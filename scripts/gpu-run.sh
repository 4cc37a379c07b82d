#!/usr/bin/env bash
# The one script run on the GPU machine, from the repository root, after scripts/build-gpu.sh
# built build-gpu/ on the development machine and build-gpu/ was carried over:
#
#   tests      build-gpu/tilefuse-gpu-tests on every kernel in build-gpu/kernels, and the C API
#              test build-gpu/tilefuse-capi-test
#   sanitize   compute-sanitizer memcheck and racecheck on the small cases (TILEFUSE_GPU_SMALL=1)
#   bench      tools/bench/bench.py: tilefuse vs SDPA flash / cuDNN / FlexAttention (and the
#              column "tuned" when build-gpu/tuned/ holds the tune step's kernels)
#   tune       build-gpu/tilefuse tune (the self-contained build): attention and causal at head
#              dim 64 and 128 for the bench's sequence lengths, and a test-only variant, into the
#              tuning database build-gpu/cache/tuning/ and build-gpu/tuned/ (PTX + JSON for
#              bench); then a second process that must find every entry in the database.
#              Not in the default steps: run `scripts/gpu-run.sh tune bench`.
#
#   scripts/gpu-run.sh                   all three steps
#   scripts/gpu-run.sh tests sanitize    some of them (each step takes minutes; a device call may
#                                        be limited to 10)
#   BENCH_ARGS="--seq 4096 --head-dims 128" scripts/gpu-run.sh bench
#
# Logs go to $OUT (default build-gpu/out/): <step>.log per step, bench.json from the benchmark.
# Every step runs even when an earlier one fails; the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

out=${OUT:-$PWD/build-gpu/out}
mkdir -p "$out"
export TILEFUSE_PTX_DIR=build-gpu/kernels
tests=build-gpu/tilefuse-gpu-tests

steps=("$@")
((${#steps[@]})) || steps=(tests sanitize bench)

status=0
run_step() { # run_step LOG_NAME COMMAND...: tees the output into $out/LOG_NAME.log
  local name=$1
  shift
  echo "=== $name: $*" | tee "$out/$name.log"
  local start=$SECONDS
  "$@" 2>&1 | tee -a "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc after $((SECONDS - start)) s" | tee -a "$out/$name.log"
  ((rc == 0)) || status=1
}

{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  ls build-gpu/kernels 2>&1 | tr '\n' ' '
  echo
} | tee "$out/machine.log"

for step in "${steps[@]}"; do
  case "$step" in
    tests)
      run_step gpu-tests "$tests"
      run_step capi-test env LD_LIBRARY_PATH=build-gpu build-gpu/tilefuse-capi-test
      ;;
    sanitize)
      # Small cases only: the sanitizers slow kernels down by orders of magnitude. The float64
      # reference still checks every result, so a race that corrupts output also fails a test.
      # Only the kernel tests: the CudaDriver tests make failing driver calls on purpose, which
      # memcheck would count as errors.
      export TILEFUSE_GPU_SMALL=1
      run_step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 \
        "$tests" --gtest_brief=1 --gtest_filter='GpuAttention*'
      run_step racecheck compute-sanitizer --tool racecheck --error-exitcode 1 --print-limit 20 \
        "$tests" --gtest_brief=1 --gtest_filter='GpuAttention*'
      unset TILEFUSE_GPU_SMALL
      ;;
    bench)
      tuned=()
      [ -d build-gpu/tuned ] && tuned=(--tuned-dir build-gpu/tuned)
      # shellcheck disable=SC2086 # BENCH_ARGS is a list of options
      run_step bench python3 tools/bench/bench.py --ptx-dir build-gpu/kernels \
        --lib build-gpu/libtilefuse_cuda.so --out "$out/bench.json" "${tuned[@]}" ${BENCH_ARGS:-}
      ;;
    tune)
      export TILEFUSE_CACHE_DIR=$PWD/build-gpu/cache
      seqs=${TUNE_SEQS:-1024,2048,4096,8192,16384}
      for kernel in attention causal; do
        for d in 64 128; do
          run_step "tune-$kernel-d$d" build-gpu/tilefuse tune --kernel "$kernel" --head-dim "$d" \
            --seq "$seqs" --force --emit-dir build-gpu/tuned
        done
      done
      run_step tune-chunked_local build-gpu/tilefuse tune test/variants/chunked_local.mlir \
        --seq 4096 --force
      # A second process: every entry from the database, no tuning.
      run_step tune-reuse build-gpu/tilefuse tune --kernel causal --head-dim 128 --seq "$seqs"
      if grep -q "candidates," "$out/tune-reuse.log"; then
        echo "gpu-run: the second process tuned again instead of using the database" >&2
        status=1
      fi
      mkdir -p "$out/tuning" && cp build-gpu/cache/tuning/*.json "$out/tuning/" 2>/dev/null
      cp -r build-gpu/tuned "$out/" 2>/dev/null
      unset TILEFUSE_CACHE_DIR
      ;;
    *)
      echo "gpu-run: unknown step '$step' (tests, sanitize, bench, tune)" >&2
      status=1
      ;;
  esac
done
exit $status
