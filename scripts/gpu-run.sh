#!/usr/bin/env bash
# The one script run on the GPU machine, from the repository root, after scripts/build-gpu.sh
# (and, for the runtime step, scripts/build-gpu-full.sh) built build-gpu/ on the development
# machine and build-gpu/ was carried over:
#
#   tests      build-gpu/tilefuse-gpu-tests on every kernel in build-gpu/kernels, and the C API
#              test build-gpu/tilefuse-capi-test
#   sanitize   compute-sanitizer memcheck and racecheck on the small cases (TILEFUSE_GPU_SMALL=1)
#   bench      tools/bench/bench.py: tilefuse vs SDPA flash / cuDNN / FlexAttention (and the
#              column "tuned" when build-gpu/tuned/ holds the tune step's kernels)
#   tests-backward  the derived backward of every bundled and test-only variant, compiled in
#              process by the self-contained CLI (`tilefuse run --backward`): head dims 64 and
#              128, odd and unequal lengths, atomic and deterministic dQ, against the float64
#              backward; deterministic runs bitwise equal; memcheck, racecheck and synccheck
#              (scripts/gpu-backward-tests.sh; logs in backward/)
#   bench-backward  bench.py --backward: the derived backward (dQ, dK, dV of
#              build-gpu/kernels-backward, after the forward of build-gpu/kernels wrote O and LSE)
#              vs the autograd backward of SDPA flash / cuDNN / FlexAttention on the bench's grid,
#              tilefuse's gradients checked against SDPA's; bench-backward.json
#              (BENCH_BACKWARD_ARGS="--impls tilefuse,sdpa-flash,sdpa-cudnn" skips FlexAttention's
#              compiles of every shape's forward and backward; --backward-deterministic times the
#              deterministic backwards, where kernels-backward holds some)
#   runtime    the self-contained build (scripts/build-gpu-full.sh, build-gpu/tilefuse-full.tar.xz,
#              unpacked into build-gpu-unpacked/, which is not carried back to the device machine
#              on the next trip): the compiler in process on this machine. `tilefuse
#              run` (the README's main job) and `tilefuse run --file` on a test-only variant, the
#              runtime API's GPU tests (DSL compiled in process, launched, checked against float64;
#              one disk cache shared by two processes), and tools/embed-example built with this
#              machine's cmake and g++ against the installed package, run twice (the second from
#              the disk cache). A few minutes.
#   sass       ptxas + cuobjdump of every kernel (and of build-gpu/variants/*): registers, HGMMA,
#              HMMA, LDL/STL (spills), barriers, instructions; the listings under $OUT/sass/
#   tests-head-dims  every bundled and test-only variant at head dims 96, 128, 192 and 256
#              (build-gpu/kernels-head-dims), then memcheck, racecheck and synccheck on small cases
#   tests-d64-ws  every variant at head dim 64 warp-specialized with three consumer warpgroups
#              (Br = 192, Q in shared memory: build-gpu/kernels-d64-ws192), then memcheck,
#              racecheck and synccheck on small cases
#   ncu        Nsight Compute on one launch of tilefuse's forward and one of cuDNN's
#              (NCU_SHAPE="--head-dims 128 --seq 4096 --causal no" by default)
#   ncu-source the same launches under warp-state sampling, per SASS instruction
#              (ncu-source-IMPL.csv; scripts/ncu-source-phases.py reads it)
#   ablation   bench.py on the defaults beside each technique switched alone
#              (build-gpu/ablation/NAME: nows, noov, noqtma, nopersist, persist, pp,
#              asc), FA2 and cuDNN, in one run (ABLATION_ARGS: the shapes; ablation.json)
#   tests-persist  the persistent kernels (build-gpu/kernels-persist: d64 to d256, attention and
#              causal; kernels-persist-qs: d128 with Q in shared memory; kernels-persist-paired:
#              the same tiles dealt row_order=paired; kernels-overlap-tiles: d64 and d128
#              with overlap_tiles=true) against float64, then
#              memcheck, racecheck and synccheck on small cases
#   tests-split  the split-KV kernels (build-gpu/kernels-split, or SPLIT_KERNELS=DIR) at several
#              split counts, and memcheck, racecheck and synccheck on their small cases
#   tests-paged  the paged-KV kernels (build-gpu/kernels-paged, or PAGED_KERNELS=DIR), unsplit
#              and split, on ragged sequences in pages of odd and even sizes, and memcheck +
#              racecheck on small cases
#   tests-varlen the varlen kernels (build-gpu/kernels-varlen, or VARLEN_KERNELS=DIR) on ragged
#              packed sequences, and memcheck, racecheck and synccheck on small cases
#   tests-set  any kernel set (SET_KERNELS=DIR) against float64, then memcheck, racecheck and
#              synccheck on its small cases
#   tests-paged-varlen  the same over paged caches (build-gpu/kernels-paged-varlen: chunked
#              prefill), odd and even page sizes
#   tests-ws   the warp-specialized kernels (build-gpu/variants/ws, made here by
#              `scripts/build-gpu-variants.sh ws --config warp_specialize=true`: TMA producer and
#              wgmma consumers, every bundled variant) against float64, then memcheck, racecheck
#              and synccheck on their small cases
#   tests-varlen-split  split-KV varlen kernels (build-gpu/kernels-varlen-split): decode over
#              ragged keys at several split counts, contiguous and paged
#   varlen     bench.py --varlen: prefill on a mix of sequence lengths, packed (tf:varlen,
#              tf:varlen-budget with ctas_per_sm=3, and tf:tuned-varlen when the tune step wrote
#              build-gpu/tuned-varlen/) beside the same sequences padded to the longest
#              (tilefuse, its BSHD form, SDPA flash and cuDNN)
#   decode     bench.py --decode: one query row, GQA 32/8, D = 128, KV 1k-128k; GB/s beside SDPA
#              and a device copy (DECODE_LENGTHS=...; DECODE_IMPLS=...,flex,flex-paged adds
#              FlexDecoding, plain and on a paged cache, with DECODE_ARGS="--flex-page-size 16,128")
#   tune       `tilefuse tune` of the self-contained build: attention and causal at head dim 64
#              and 128 (TUNE_HEAD_DIMS="64 128 256") for the bench's sequence lengths
#              (TUNE_SEQS=1024,4096), their varlen forms (TUNE_VARLEN_SEQS, empty to skip, into
#              build-gpu/tuned-varlen/), and a test-only variant, into the tuning
#              database build-gpu/cache/tuning/ and build-gpu/tuned/ (PTX + JSON for bench); then
#              a second process that must find every entry in the database.
#              Not in the default steps: run `scripts/gpu-run.sh runtime tune bench`.
#   tune-split `tilefuse tune --split-kv` of the self-contained build: split-KV attention at
#              D = 128, decode GQA 32/8 at B = 1, then B = 8 (TUNE_SPLIT_SHAPES, B,H,Hkv,M each)
#              over KV 4k and 32k (TUNE_SPLIT_SEQS): the configuration and the split count
#              (the launcher's choice and the counts around it, each listed) into the tuning
#              database build-gpu/cache/tuning/; logs tune-split-b<B>.log.
#
#   scripts/gpu-run.sh                   tests, sanitize and bench
#   scripts/gpu-run.sh tests sanitize    some of them (each step takes minutes; a device call may
#                                        be limited to 10)
#   BENCH_ARGS="--seq 4096 --head-dims 128" scripts/gpu-run.sh bench
#
# Logs go to $OUT (default build-gpu/out/): <step>.log per step, bench.json from the benchmark
# (bench-backward.json, varlen.json, decode.json from theirs).
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

# run_sharded LOG_NAME COMMAND...: a GoogleTest COMMAND (the binary, or compute-sanitizer
# running it) as GPU_TEST_SHARDS processes at once (default 8; GoogleTest's own
# GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX split the cases), so the float64 references of different
# cases are computed on different cores while the one GPU runs their kernels: the default set
# took more than 250 s in one process. The shards' outputs are appended to $out/LOG_NAME.log in
# shard order, with the summed counts last; the step fails if any shard does.
run_sharded() {
  local name=$1 shards=${GPU_TEST_SHARDS:-8} i rc=0 start=$SECONDS pids=()
  shift
  echo "=== $name: $* ($shards shards)" | tee "$out/$name.log"
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$@" >"$out/$name.shard$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < shards; i++)); do
    wait "${pids[$i]}" || rc=1
    cat "$out/$name.shard$i.log" | tee -a "$out/$name.log"
    rm -f "$out/$name.shard$i.log"
  done
  local passed failed
  passed=$(grep -ohE '^\[  PASSED  \] [0-9]+' "$out/$name.log" | awk '{s += $NF} END {print s + 0}')
  failed=$(grep -ohE '^\[  FAILED  \] [0-9]+ tests?,' "$out/$name.log" |
    awk '{s += $(NF - 1)} END {print s + 0}')
  echo "=== $name: $passed passed, $failed failed in $shards shards" | tee -a "$out/$name.log"
  # No case at all is a failure too: a kernel directory without NAME.reference.so beside each
  # PTX (a --variant directory compiled with --emit ptx only) gives the tests nothing to check.
  if ((passed + failed == 0)); then
    echo "=== $name: no test ran (TILEFUSE_PTX_DIR holds no kernel with its reference?)" |
      tee -a "$out/$name.log"
    rc=1
  fi
  echo "=== $name: exit $rc after $((SECONDS - start)) s" | tee -a "$out/$name.log"
  ((rc == 0)) || status=1
}

# The self-contained build (scripts/build-gpu-full.sh), unpacked once per machine into
# build-gpu-unpacked/ (190 MB: outside build-gpu/, which travels). False when it is missing.
full=$PWD/build-gpu-unpacked
unpack_full() {
  [ -x "$full/prefix/bin/tilefuse" ] && return 0
  if [ ! -f build-gpu/tilefuse-full.tar.xz ]; then
    echo "gpu-run: no build-gpu/tilefuse-full.tar.xz (scripts/build-gpu-full.sh builds it)" >&2
    return 1
  fi
  rm -rf "$full" && mkdir -p "$full"
  run_step unpack tar -C "$full" -xJf build-gpu/tilefuse-full.tar.xz
  [ -x "$full/prefix/bin/tilefuse" ]
}
cli=$full/prefix/bin/tilefuse

# ncu_one_launch IMPL NCU_OPTION...: Nsight Compute on one launch (the fourth) of IMPL's forward
# under bench.py at NCU_SHAPE (bench.py options, default d128 4k full), clocks left alone
# (METHOD.md).
ncu_one_launch() {
  local impl=$1
  shift
  # shellcheck disable=SC2086 # NCU_SHAPE is a list of options
  ncu --clock-control none --target-processes all \
    -k 'regex:attention|causal|sdpa|fmha|flash|cudnn' --launch-skip 3 --launch-count 1 "$@" \
    python3 tools/bench/bench.py --ptx-dir build-gpu/kernels \
    --lib build-gpu/libtilefuse_cuda.so --impls "$impl" --reps 20 --warmup 3 \
    ${NCU_SHAPE:---head-dims 128 --seq 4096 --causal no}
}

# ncu_source IMPL: ncu_one_launch under warp-state sampling, its SASS source page as
# $out/ncu-source-IMPL.csv, and that page's phases (scripts/ncu-source-phases.py).
ncu_source() {
  local report=$out/ncu-source-$1
  ncu_one_launch "$1" -f -o "$report" \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight &&
    ncu -i "$report.ncu-rep" --page source --csv --print-source sass >"$report.csv" &&
    python3 scripts/ncu-source-phases.py "$report.csv" --top 6
}

# kernel_set_tests NAME DIR: the GPU tests on the kernels of DIR against float64, then memcheck
# and racecheck on their small cases; logs gpu-tests-NAME, memcheck-NAME, racecheck-NAME.
kernel_set_tests() {
  local name=$1 dir=$2 tool
  run_sharded "gpu-tests-$name" env TILEFUSE_PTX_DIR="$dir" "$tests" \
    --gtest_brief=1 --gtest_filter='GpuAttention*'
  for tool in memcheck racecheck; do
    run_sharded "$tool-$name" env TILEFUSE_PTX_DIR="$dir" TILEFUSE_GPU_SMALL=1 \
      compute-sanitizer --tool "$tool" --error-exitcode 1 --print-limit 20 "$tests" \
      --gtest_brief=1 --gtest_filter='GpuAttention*'
  done
}

for step in "${steps[@]}"; do
  case "$step" in
    tests)
      run_sharded gpu-tests "$tests"
      run_step capi-test env LD_LIBRARY_PATH=build-gpu build-gpu/tilefuse-capi-test
      ;;
    tests-head-dims)
      # Every variant at head dims 96, 128, 192 and 256 (build-gpu/kernels-head-dims): the key blocks
      # the region cost picks; synccheck too, for the warp-specialized ones.
      kernel_set_tests head-dims build-gpu/kernels-head-dims
      run_sharded synccheck-head-dims env TILEFUSE_PTX_DIR=build-gpu/kernels-head-dims \
        TILEFUSE_GPU_SMALL=1 compute-sanitizer --tool synccheck --error-exitcode 1 \
        --print-limit 20 "$tests" --gtest_brief=1 --gtest_filter='GpuAttention*'
      ;;
    tests-d64-ws)
      # Three consumer warpgroups and their named barrier over 384 threads, the consumers' own
      # copy of Q: synccheck too.
      kernel_set_tests d64-ws build-gpu/kernels-d64-ws192
      run_sharded synccheck-d64-ws env TILEFUSE_PTX_DIR=build-gpu/kernels-d64-ws192 \
        TILEFUSE_GPU_SMALL=1 compute-sanitizer --tool synccheck --error-exitcode 1 \
        --print-limit 20 "$tests" --gtest_brief=1 --gtest_filter='GpuAttention*'
      ;;
    tests-persist)
      # Persistent kernels (build-gpu/kernels-persist, -persist-qs, -persist-paired,
      # -overlap-tiles: a tile's last P·V and epilogue in the next tile, Q in two stages): CTAs
      # looping over tiles, the rings' phases and Q's one-stage ring (loaded by TMA) carried
      # from tile to tile, in each deal (head by head, serpentine, paired).
      kernel_set_tests persist build-gpu/kernels-persist
      kernel_set_tests persist-qs build-gpu/kernels-persist-qs
      kernel_set_tests persist-paired build-gpu/kernels-persist-paired
      kernel_set_tests overlap-tiles build-gpu/kernels-overlap-tiles
      run_sharded synccheck-persist env TILEFUSE_PTX_DIR=build-gpu/kernels-persist \
        TILEFUSE_GPU_SMALL=1 compute-sanitizer --tool synccheck --error-exitcode 1 \
        --print-limit 20 "$tests" --gtest_brief=1 --gtest_filter='GpuAttention*'
      ;;
    tests-split)
      # The split-KV kernels at several split counts (the merge's cross-CTA protocol); synccheck
      # too, for the warp-specialized ones' mbarrier rings and the consumers' named barrier at
      # the row block's counter. SPLIT_KERNELS picks another set (a configuration's variant).
      split_dir=${SPLIT_KERNELS:-build-gpu/kernels-split}
      kernel_set_tests split "$split_dir"
      run_sharded synccheck-split env TILEFUSE_PTX_DIR="$split_dir" TILEFUSE_GPU_SMALL=1 \
        compute-sanitizer --tool synccheck --error-exitcode 1 --print-limit 20 "$tests" \
        --gtest_brief=1 --gtest_filter='GpuAttention*'
      ;;
    tests-paged)
      # The paged-KV kernels (unsplit and split) on ragged sequences. PAGED_KERNELS picks
      # another set (a configuration's variant).
      kernel_set_tests paged "${PAGED_KERNELS:-build-gpu/kernels-paged}"
      ;;
    tests-set)
      # Any kernel set (SET_KERNELS=DIR, e.g. a configuration's variant of the default set from
      # scripts/build-gpu-variants.sh) against float64, then memcheck, racecheck and synccheck
      # on its small cases; logs gpu-tests-set and the sanitizers' -set logs.
      set_dir=${SET_KERNELS:?tests-set needs SET_KERNELS=DIR}
      kernel_set_tests set "$set_dir"
      run_sharded synccheck-set env TILEFUSE_PTX_DIR="$set_dir" TILEFUSE_GPU_SMALL=1 \
        compute-sanitizer --tool synccheck --error-exitcode 1 --print-limit 20 "$tests" \
        --gtest_brief=1 --gtest_filter='GpuAttention*'
      ;;
    tests-varlen)
      # The varlen kernels on ragged packed sequences (VARLEN_KERNELS picks another set);
      # synccheck too, for the warp-specialized ones' mbarrier rings.
      varlen_dir=${VARLEN_KERNELS:-build-gpu/kernels-varlen}
      kernel_set_tests varlen "$varlen_dir"
      run_sharded synccheck-varlen env TILEFUSE_PTX_DIR="$varlen_dir" \
        TILEFUSE_GPU_SMALL=1 compute-sanitizer --tool synccheck --error-exitcode 1 \
        --print-limit 20 "$tests" --gtest_brief=1 --gtest_filter='GpuAttention*'
      ;;
    tests-paged-varlen)
      # The varlen kernels over paged caches: packed queries, paged keys.
      kernel_set_tests paged-varlen build-gpu/kernels-paged-varlen
      ;;
    tests-ws)
      # Warp-specialized kernels (mbarrier rings between a TMA producer and the consumers):
      # synccheck too, for the named and mbarrier synchronization.
      kernel_set_tests ws build-gpu/variants/ws
      run_sharded synccheck-ws env TILEFUSE_PTX_DIR=build-gpu/variants/ws TILEFUSE_GPU_SMALL=1 \
        compute-sanitizer --tool synccheck --error-exitcode 1 --print-limit 20 "$tests" \
        --gtest_brief=1 --gtest_filter='GpuAttention*'
      ;;
    tests-varlen-split)
      # The split varlen kernels: decode over ragged keys, several split counts.
      kernel_set_tests varlen-split build-gpu/kernels-varlen-split
      ;;
    varlen)
      tuned_varlen=()
      [ -d build-gpu/tuned-varlen ] && tuned_varlen=(--variant tuned-varlen=build-gpu/tuned-varlen)
      run_step varlen python3 tools/bench/bench.py --ptx-dir build-gpu/kernels \
        --lib build-gpu/libtilefuse_cuda.so --out "$out/varlen.json" \
        --impls tilefuse,sdpa-flash,sdpa-cudnn --variant varlen=build-gpu/kernels-varlen-bench \
        --variant varlen-budget=build-gpu/kernels-varlen-bench-budget \
        --varlen "${VARLEN_MAX:-1024,4096,16384}" "${tuned_varlen[@]}" ${VARLEN_ARGS:-}
      ;;
    decode)
      # Decode rows: the plain kernels, the split-KV ones (tf:split, GQA-packed) and unpacked
      # (tf:unpacked), the split-KV ones on a paged cache of 16- and 128-row pages (tf:paged16,
      # tf:paged128), the split varlen ones on the same rows packed (tf:varlen), SDPA and a
      # device copy.
      run_step decode python3 tools/bench/bench.py --ptx-dir build-gpu/kernels \
        --lib build-gpu/libtilefuse_cuda.so --out "$out/decode.json" \
        --impls "${DECODE_IMPLS:-tilefuse,sdpa-flash,sdpa-cudnn}" \
        --variant split=build-gpu/kernels-split \
        --variant unpacked=build-gpu/kernels-split-unpacked \
        --variant paged16=build-gpu/kernels-paged-bench@16 \
        --variant paged128=build-gpu/kernels-paged-bench@128 \
        --variant p16fixed=build-gpu/kernels-paged-bench-p16@16 \
        --variant p128fixed=build-gpu/kernels-paged-bench-p128@128 \
        --variant varlen=build-gpu/kernels-varlen-split ${DECODE_VARIANTS:-} \
        --decode "${DECODE_LENGTHS:-1024,4096,32768,131072}" \
        --decode-shape "${DECODE_SHAPE:-8,32,8,128}" ${DECODE_ARGS:-}
      ;;
    sanitize)
      # Small cases only: the sanitizers slow kernels down by orders of magnitude. The float64
      # reference still checks every result, so a race that corrupts output also fails a test.
      # Only the kernel tests: the CudaDriver tests make failing driver calls on purpose, which
      # memcheck would count as errors.
      export TILEFUSE_GPU_SMALL=1
      run_sharded memcheck compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 \
        "$tests" --gtest_brief=1 --gtest_filter='GpuAttention*'
      run_sharded racecheck compute-sanitizer --tool racecheck --error-exitcode 1 --print-limit 20 \
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
    ablation)
      # One bench run of the defaults beside each technique switched alone
      # (build-gpu/ablation/NAME, scripts/build-gpu.sh), FA2 and cuDNN: ablation.json.
      variants=()
      for dir in build-gpu/ablation/*/; do
        [ -d "$dir" ] && variants+=(--variant "$(basename "$dir")=$dir")
      done
      # shellcheck disable=SC2086 # ABLATION_ARGS is a list of options
      run_step ablation python3 tools/bench/bench.py --ptx-dir build-gpu/kernels \
        --lib build-gpu/libtilefuse_cuda.so --out "$out/ablation.json" \
        --impls tilefuse,sdpa-flash,sdpa-cudnn "${variants[@]}" \
        ${ABLATION_ARGS:---head-dims 64,128,192,256 --seq 1024,4096,16384}
      ;;
    tests-backward)
      # The derived backward of every variant through the self-contained CLI, against float64,
      # then sanitizers (scripts/gpu-backward-tests.sh).
      if ! unpack_full; then
        status=1
        continue
      fi
      run_step tests-backward env OUT="$out" scripts/gpu-backward-tests.sh "$cli"
      ;;
    bench-backward)
      # shellcheck disable=SC2086 # BENCH_BACKWARD_ARGS is a list of options
      run_step bench-backward python3 tools/bench/bench.py --backward --ptx-dir build-gpu/kernels \
        --backward-dir build-gpu/kernels-backward --lib build-gpu/libtilefuse_cuda.so \
        --out "$out/bench-backward.json" ${BENCH_BACKWARD_ARGS:-}
      ;;
    tune)
      if ! unpack_full; then
        status=1
        continue
      fi
      export TILEFUSE_CACHE_DIR=$PWD/build-gpu/cache
      seqs=${TUNE_SEQS:-1024,2048,4096,8192,16384}
      for kernel in attention causal; do
        for d in ${TUNE_HEAD_DIMS:-64 128}; do
          run_step "tune-$kernel-d$d" "$cli" tune --kernel "$kernel" --head-dim "$d" \
            --seq "$seqs" --force --emit-dir build-gpu/tuned
        done
      done
      # The varlen forms, at the varlen bench's longest lengths (`varlen` step's column
      # tf:tuned-varlen); TUNE_VARLEN_SEQS= (empty) skips them.
      varlen_seqs=${TUNE_VARLEN_SEQS-1024,4096,16384}
      for kernel in attention causal; do
        [ -n "$varlen_seqs" ] || break
        for d in ${TUNE_HEAD_DIMS:-64 128}; do
          run_step "tune-varlen-$kernel-d$d" "$cli" tune --kernel "$kernel" --head-dim "$d" \
            --varlen --seq "$varlen_seqs" --force \
            --emit-dir build-gpu/tuned-varlen
        done
      done
      run_step tune-chunked_local "$cli" tune test/variants/chunked_local.mlir \
        --seq 4096 --force
      # A second process: every entry from the database, no tuning.
      run_step tune-reuse "$cli" tune --kernel causal --head-dim 128 --seq "$seqs"
      if grep -q "candidates," "$out/tune-reuse.log"; then
        echo "gpu-run: the second process tuned again instead of using the database" >&2
        status=1
      fi
      mkdir -p "$out/tuning" && cp build-gpu/cache/tuning/*.json "$out/tuning/" 2>/dev/null
      cp -r build-gpu/tuned build-gpu/tuned-varlen "$out/" 2>/dev/null
      unset TILEFUSE_CACHE_DIR
      ;;
    tune-split)
      if ! unpack_full; then
        status=1
        continue
      fi
      export TILEFUSE_CACHE_DIR=$PWD/build-gpu/cache
      for shape in ${TUNE_SPLIT_SHAPES:-1,32,8,1 8,32,8,1}; do
        run_step "tune-split-b${shape%%,*}" "$cli" tune --kernel attention --head-dim 128 \
          --split-kv --shape "$shape" --seq "${TUNE_SPLIT_SEQS:-4096,32768}" --force
      done
      mkdir -p "$out/tuning" && cp build-gpu/cache/tuning/*.json "$out/tuning/" 2>/dev/null
      unset TILEFUSE_CACHE_DIR
      ;;
    runtime)
      if ! unpack_full; then
        status=1
        continue
      fi
      # Where nvidia-smi sees a GPU, nothing may fall back to the CPU or skip: that would pass
      # without having run on the GPU.
      gpu_present=0
      nvidia-smi -L >/dev/null 2>&1 && gpu_present=1
      must_have_run_on_gpu() { # must_have_run_on_gpu LOG_NAME
        if ((gpu_present)) && grep -qE "no GPU|built without the CUDA runtime" "$out/$1.log"; then
          echo "gpu-run: $1 did not run on the GPU (above)" | tee -a "$out/$1.log" >&2
          status=1
        fi
      }
      # Fresh caches, so the first run of each compiles in process here.
      export TILEFUSE_CACHE_DIR=$full/cache
      run_step main-job "$cli" run
      grep -q "result *PASS" "$out/main-job.log" || status=1
      must_have_run_on_gpu main-job
      run_step user-variant "$cli" run --file test/variants/chunked_local.mlir
      grep -q "result *PASS" "$out/user-variant.log" || status=1
      must_have_run_on_gpu user-variant
      run_step runtime-gpu-tests env LD_LIBRARY_PATH="$full/prefix/lib" \
        "$full/tilefuse-runtime-gpu-tests"
      must_have_run_on_gpu runtime-gpu-tests
      # An application of this machine's compiler against the installed package. The CUDA
      # toolkit here gives it the static CUDA runtime, so it launches and checks the kernel.
      run_step embed-build bash -c "cmake -S tools/embed-example -B '$full/embed-build' -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH='$full/prefix' && \
        cmake --build '$full/embed-build'"
      export TILEFUSE_CACHE_DIR=$full/embed-cache
      run_step embed-example "$full/embed-build/embed-example"
      must_have_run_on_gpu embed-example
      run_step embed-example-cached "$full/embed-build/embed-example"
      grep -q "(disk," "$out/embed-example-cached.log" || status=1
      unset TILEFUSE_CACHE_DIR
      ;;
    sass)
      # What ptxas made of every kernel (build-gpu/kernels and each build-gpu/variants/*):
      # registers, spills, the matrix instructions (HGMMA on sm_90a, HMMA), local-memory
      # traffic (LDL/STL), barriers, the instruction count and the softmax exp2s ptxas left
      # beside the pending P·V (scripts/sass-summary.py); sass/NAME.sass keeps the listings of
      # the defaults.
      run_step sass bash -c '
        python3 scripts/sass-summary.py --keep "$0/sass" build-gpu/kernels/*.ptx
        shopt -s nullglob
        variants=(build-gpu/variants/*/*.ptx)
        ((${#variants[@]} == 0)) || python3 scripts/sass-summary.py "${variants[@]}"' "$out"
      ;;
    ncu)
      # One launch each of tilefuse's forward and cuDNN's, Nsight Compute's speed of light,
      # warp states, compute and memory sections; ncu-tilefuse.log, ncu-sdpa-cudnn.log.
      for impl in tilefuse sdpa-cudnn; do
        run_step "ncu-$impl" ncu_one_launch "$impl" \
          --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
          --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis
      done
      ;;
    ncu-source)
      # Where each kernel's warps spend their time, instruction by instruction: the same launches
      # under Nsight Compute's warp-state sampling, exported as the SASS source page
      # (ncu-source-IMPL.csv: address, instruction, execution count, samples by stall reason).
      # scripts/ncu-source-phases.py groups the samples by how often each instruction ran: the
      # key loop, a tile's own code (prologue, epilogue), the producer.
      for impl in tilefuse sdpa-cudnn; do
        run_step "ncu-source-$impl" ncu_source "$impl"
      done
      ;;
    *)
      echo "gpu-run: unknown step '$step' (tests, sanitize, bench, ablation, tests-backward, bench-backward, runtime, tune, tune-split, sass, ncu, ncu-source)" >&2
      status=1
      ;;
  esac
done
exit $status
