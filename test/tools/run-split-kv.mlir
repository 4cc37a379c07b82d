// `tilefuse run --split-kv`: the split-KV kernel, GQA-packed as split kernels are, on the CPU
// reference backend (the GPU where one exists, with --device auto), against float64.
//
// Decode: one query row, 32 query heads on 8 key/value heads, 5 key splits.
// RUN: tilefuse run --split-kv --kv-splits 5 --device cpu --H 32 --Hkv 8 --M 1 --N 3000 \
// RUN:   | FileCheck %s --check-prefix=DECODE
// DECODE: shape        B=2 H=32 Hkv=8 M=1 N=3000 D=64  Br=64 Bc=64
// DECODE: split-KV     5 key splits per row block, GQA-packed
// The packed grid: 2 x 8 programs (one row block of 4 packed rows each), 47 key blocks.
// DECODE: blocks       752 visited of 752
// DECODE: result       PASS
//
// A masked variant whose rows span heads in a block (4 heads x 100 rows), with the default split.
// RUN: tilefuse run --split-kv --device cpu --kernel causal --H 8 --Hkv 2 --M 100 --N 777 \
// RUN:   | FileCheck %s --check-prefix=CAUSAL
// CAUSAL: split-KV     4 key splits per row block, GQA-packed
// CAUSAL: result       PASS
//
// RUN: not tilefuse run --kv-splits 3 2>&1 | FileCheck %s --check-prefix=NOSPLIT
// NOSPLIT: error: --kv-splits is an option of --split-kv
// RUN: not tilefuse run --split-kv --kv-splits -1 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: --kv-splits must be 0 (the launcher's choice) or more, not -1
// RUN: not tilefuse run --split-kv --backward 2>&1 | FileCheck %s --check-prefix=BACKWARD
// BACKWARD: error: --split-kv is a forward kernel
