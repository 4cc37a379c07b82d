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
// Over a paged cache (chunked prefill): packed queries, the keys the cache's pages (odd page
// size), their lengths the paged ones.
// RUN: tilefuse run --varlen --paged-kv --page-size 7 --device cpu --kernel causal --B 4 \
// RUN:   --H 4 --Hkv 2 --M 90 --N 333 | FileCheck %s --check-prefix=PAGED
// PAGED: paged KV     {{[0-9]+}} pages of 7 rows, lengths 333, 222, 1, 1
// PAGED: varlen       query lengths 90, 60, 1, 1 (keys: the paged lengths), packed
// PAGED: result       PASS
// RUN: tilefuse run --varlen --paged-kv --device cpu --kernel alibi --B 3 --M 40 --N 100 \
// RUN:   | FileCheck %s --check-prefix=ALIBI
// ALIBI: result       PASS
//
// Split-KV (GQA-packed, as split kernels are): decode over ragged keys, and over a paged cache.
// RUN: tilefuse run --varlen --split-kv --device cpu --kernel gqa --B 3 --M 1 --N 900 \
// RUN:   | FileCheck %s --check-prefix=SPLIT
// SPLIT: split-KV     4 key splits per row block, GQA-packed
// SPLIT: result       PASS
// RUN: tilefuse run --varlen --paged-kv --split-kv --kv-splits 5 --device cpu --kernel causal \
// RUN:   --B 4 --H 4 --Hkv 2 --M 40 --N 500 | FileCheck %s --check-prefix=SPLIT5
// SPLIT5: split-KV     5 key splits per row block, GQA-packed
// SPLIT5: result       PASS
//
// RUN: not tilefuse run --varlen --backward 2>&1 | FileCheck %s --check-prefix=FORM
// FORM: error: --varlen runs the forward kernel
