// RUN: tilefuse-opt %s --tile-to-cpu | FileCheck %s \
// RUN:   --implicit-check-not='{{(= |^ *)(tile|scf|memref|arith|math|func|cf|affine|bufferization|builtin)\.}}' \
// RUN:   --implicit-check-not=tilefuse_block_event
// RUN: tilefuse-opt %s --tile-to-cpu="instrument=true block-m=32 block-n=16" | FileCheck %s \
// RUN:   --check-prefix=INST \
// RUN:   --implicit-check-not='{{(= |^ *)(tile|scf|memref|arith|math|func|cf|affine|bufferization|builtin)\.}}'

// The whole CPU pipeline (front end, CPU loops, upstream lowering) ends in the LLVM dialect
// only: no op of any other dialect is left (implicit check-nots). Buffers are allocated with
// malloc and freed.

// CHECK:       llvm.func @free(!llvm.ptr)
// CHECK:       llvm.func @malloc(i64) -> !llvm.ptr
// CHECK-LABEL: llvm.func @causal(
// Each strided view is passed as its descriptor: two pointers, the offset, sizes and strides.
// CHECK-SAME:    %{{[a-z0-9_]+}}: !llvm.ptr, %{{[a-z0-9_]+}}: !llvm.ptr, %{{[a-z0-9_]+}}: i64,
// CHECK:         llvm.call @malloc
// CHECK:         llvm.intr.exp2
// CHECK:         llvm.intr.log
// CHECK:         llvm.call @free
// CHECK:         llvm.return

// A mask with an op the pruning evaluator does not model (shli) compiles all the same; the
// index shift (i64; the bf16 conversions shift i32) survives in the partial blocks.
// CHECK-LABEL: llvm.func @unmodelled_mask(
// CHECK:         llvm.shl %{{.+}}, %{{.+}} : i64
// CHECK:         llvm.return

// INST:        llvm.func @tilefuse_block_event(i32)
// INST-LABEL:  llvm.func @causal(
// INST:          llvm.call @tilefuse_block_event(%{{.+}}) : (i32) -> ()
// INST:          llvm.call @tilefuse_block_event(%{{.+}}) : (i32) -> ()
// INST:          llvm.return

!elt = bf16
!qkv = memref<?x?x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64x!elt>
!scores = tensor<?x?x?x?xf32>

func.func @causal(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by 0.125 : !scores
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

func.func @unmodelled_mask(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %c1 = arith.constant 1 : index
    %twice = arith.shli %kv, %c1 : index
    %keep = arith.cmpi ule, %twice, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}
