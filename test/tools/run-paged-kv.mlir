// `tilefuse run --paged-kv`: the kernel reads K and V through a page table (tile-paged-kv), from
// vLLM's [pages, page size, Hkv, D] cache with the pages in a random order and ragged sequence
// lengths, on the CPU reference backend, against float64 per sequence.
//
// RUN: tilefuse run --paged-kv --device cpu --B 4 --N 777 --page-size 5 \
// RUN:   | FileCheck %s --check-prefix=PAGED
// PAGED: shape        B=4 H=8 Hkv=8 M=300 N=777 D=64
// PAGED: paged KV     625 pages of 5 rows, lengths 777, 518, 1, 1
// PAGED: result       PASS
//
// Split-KV decode on pages of 48 rows (not a power of two), grouped heads, a masked variant
// (pruning per sequence).
// RUN: tilefuse run --paged-kv --split-kv --kv-splits 3 --device cpu --kernel sliding_window \
// RUN:   --B 4 --H 8 --Hkv 2 --M 1 --N 3000 --page-size 48 | FileCheck %s --check-prefix=DECODE
// DECODE: split-KV     3 key splits per row block, GQA-packed
// DECODE: paged KV     {{[0-9]+}} pages of 48 rows, lengths 3000, 2000, 1, 1
// DECODE: result       PASS
//
// RUN: not tilefuse run --paged-kv --backward 2>&1 | FileCheck %s --check-prefix=BACKWARD
// BACKWARD: error: --paged-kv is a forward kernel
// RUN: not tilefuse run --paged-kv --page-size 0 2>&1 | FileCheck %s --check-prefix=PAGE
// PAGE: error: --page-size must be positive, not 0
