// RUN: tilefuse-opt %kernels/softcap.mlir \
// RUN:   --pass-pipeline="builtin.module(tile-to-cpu-backward{block-m=32 block-n=16})" \
// RUN:   | FileCheck %s \
// RUN:   --implicit-check-not='{{(= |^ *)(tile|scf|memref|arith|math|func|cf|affine|bufferization|builtin)\.}}'
// RUN: tilefuse-opt %kernels/causal.mlir \
// RUN:   --pass-pipeline="builtin.module(tile-to-cpu-backward{deterministic=true instrument=true})" \
// RUN:   | FileCheck %s --check-prefix=INST

// tile-to-cpu-backward: the kernel's backward derived (tile-derive-backward), tiled
// (tile-tiling-backward), and both of the pair lowered through the CPU pipeline to the LLVM
// dialect only (implicit check-nots); the workspaces are malloc'ed and freed.

// CHECK:       llvm.func @free(!llvm.ptr)
// CHECK:       llvm.func @malloc(i64) -> !llvm.ptr
// CHECK:       llvm.func @softcap(
// CHECK:       llvm.func @softcap_backward(
// CHECK:         llvm.intr.tanh
// CHECK:         llvm.call @free

// The backward's query and key loops count their blocks like the forward's.
// INST:        llvm.func @causal_backward(
// INST:          llvm.call @tilefuse_block_event
