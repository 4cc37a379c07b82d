// `tilefuse run --varlen`: the kernel runs on a packed batch of variable-length sequences
// (tile-varlen, the THD layout), ragged query and key lengths, on the CPU reference backend,
// against float64 per sequence.
//
// RUN: tilefuse run --varlen --device cpu --kernel causal --B 4 --M 300 --N 777 \
// RUN:   | FileCheck %s --check-prefix=VARLEN
// VARLEN: shape        B=4 H=8 Hkv=8 M=300 N=777 D=64
// VARLEN: varlen       query lengths 300, 200, 1, 1, key lengths 777, 518, 1, 1, packed
// VARLEN: result       PASS
//
// Grouped heads and a sliding window: masks and pruning per sequence.
// RUN: tilefuse run --varlen --device cpu --kernel sliding_window --B 3 --H 8 --Hkv 2 \
// RUN:   --M 500 --N 500 | FileCheck %s --check-prefix=WINDOW
// WINDOW: varlen       query lengths 500, 334, 1, key lengths 500, 334, 1, packed
// WINDOW: result       PASS
//
// RUN: not tilefuse run --varlen --paged-kv 2>&1 | FileCheck %s --check-prefix=FORM
// RUN: not tilefuse run --varlen --split-kv 2>&1 | FileCheck %s --check-prefix=FORM
// FORM: error: --varlen runs the forward kernel, neither split nor paged
