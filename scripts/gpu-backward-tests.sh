#!/usr/bin/env bash
# Run on the GPU machine, from the repository root, with the self-contained CLI (the runtime step
# of scripts/gpu-run.sh unpacks it): the derived backward of every bundled variant and of the
# test-only ones (test/variants), compiled in process for this GPU and run after the forward on
# random inputs, dQ, dK and dV checked against the float64 backward (`tilefuse run --backward`):
# head dims 64 and 128, M = N, M < N and M > N at lengths no block size divides, atomic and
# deterministic dQ; the grids' row blocks last first (--row-order descending) on the masks whose
# work follows the row; a deterministic run twice, bitwise the same; then memcheck, racecheck and
# synccheck on small cases. Logs into $OUT/backward/; prints `N passed, N failed` last.
#
#   scripts/gpu-backward-tests.sh CLI            CLI: the tilefuse binary to run
#   BACKWARD_KERNELS="causal softcap" ...         a subset (default: every variant)
#   JOBS=4 ...                                    cases at once (default 8)
set -uo pipefail
cd "$(dirname "$0")/.."

cli=${1:?usage: $0 path/to/tilefuse}
out=${OUT:-$PWD/build-gpu/out}/backward
mkdir -p "$out"
rm -f "$out"/*.args
passed=0 failed=0
failures=()

# The cases run JOBS at a time (default 8): the float64 reference of each runs on the host's
# cores, the kernels share the GPU. Each writes NAME.log; the tally is taken once all are done.
jobs=${JOBS:-8}
cases=()
check() { # check NAME ARGS...: `tilefuse run ARGS --backward`, PASS expected
  local name=$1
  shift
  cases+=("$name")
  while (($(jobs -rp | wc -l) >= jobs)); do
    wait -n
  done
  { "$cli" run "$@" --backward >"$out/$name.log" 2>&1 && echo "$*" >"$out/$name.args"; } &
}
record() { # record NAME PASSED: one case's outcome (PASSED 1 or 0; a failure shows its log)
  if (($2)); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$1")
    echo "FAIL $1" >&2
    [ ! -f "$out/$1.log" ] || tail -8 "$out/$1.log" >&2
  fi
}
tally() { # the cases started by check, once finished
  wait
  local name ok
  for name in "${cases[@]}"; do
    ok=0
    [ -f "$out/$name.args" ] && grep -q "result *PASS" "$out/$name.log" && ok=1
    record "$name" "$ok"
  done
  cases=()
}

kernels=${BACKWARD_KERNELS:-"attention causal softcap alibi sliding_window prefix_lm gqa mqa"}
variants=${BACKWARD_VARIANTS:-"chunked_local softcap_head_bias gqa_head_window"}
shapes=("-B 2 -M 300 -N 300" "-B 1 -M 77 -N 513" "-B 2 -M 1000 -N 129")
for d in 64 128; do
  for k in $kernels; do
    for i in "${!shapes[@]}"; do
      check "$k-d$d-s$i" --kernel "$k" --head-dim "$d" ${shapes[$i]}
    done
    check "$k-d$d-det" --kernel "$k" --head-dim "$d" -M 257 -N 383 --deterministic
  done
  for v in $variants; do
    check "$v-d$d" --file "test/variants/$v.mlir" --head-dim "$d" -M 300 -N 211
    check "$v-d$d-det" --file "test/variants/$v.mlir" --head-dim "$d" -M 211 -N 300 \
      --deterministic
  done
  # The mma.sync backward on sm_90a (run --config, as compile --backward --config takes it).
  check "causal-d$d-sync" --kernel causal --head-dim "$d" -M 300 -N 211 --config mma=sync
  # row_order=descending: the forward's grid and the backward's dQ grid reversed.
  for k in causal prefix_lm sliding_window; do
    check "$k-d$d-desc" --kernel "$k" --head-dim "$d" -M 1000 -N 777 --row-order descending
    check "$k-d$d-desc-det" --kernel "$k" --head-dim "$d" -M 333 -N 1000 --deterministic \
      --row-order descending
  done
done

tally

# Deterministic dQ is bitwise the same from run to run: the errors printed to 3 digits are the
# same, and so is a digest of the gradients the run prints.
for run in 1 2; do
  "$cli" run --kernel causal --head-dim 64 -M 1000 -N 1000 --backward --deterministic \
    >"$out/deterministic-$run.log" 2>&1
done
ok=0
grep -q "result *PASS" "$out/deterministic-1.log" &&
  diff <(grep -E "^(error|digest)" "$out/deterministic-1.log") \
    <(grep -E "^(error|digest)" "$out/deterministic-2.log") >/dev/null && ok=1
record deterministic-bitwise "$ok"

for tool in memcheck racecheck synccheck; do
  for k in causal softcap gqa; do
    name=$tool-$k
    ok=0
    compute-sanitizer --tool "$tool" --error-exitcode 1 --print-limit 20 \
      "$cli" run --kernel "$k" --head-dim 64 -B 1 -H 8 -M 77 -N 130 --backward \
      >"$out/$name.log" 2>&1 && grep -q "result *PASS" "$out/$name.log" && ok=1
    record "$name" "$ok"
  done
done

((failed == 0)) || echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
