// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tile-to-ptx -o /dev/null
// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tile-to-cpu -o /dev/null

// The front door (tile-check-written-form, first in every pipeline and run by the runtime right
// after parsing) answers input that verifies but that a pass or an upstream folder would crash
// on, at its file:line:col. Each case was a crash (tilefuse-fuzz, docs/fuzzing.md). The
// pipelines stop at the check, so the CPU and the GPU lowering give the same diagnostic.

// A dimension index that is a constant only after folding (5 - 8 = -3): SIGSEGV in a
// canonicalization pattern of the GPU lowering.
!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
func.func @folded_dim_index(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %c5 = arith.constant 5 : index
  %c8 = arith.constant 8 : index
  %c1 = arith.subi %c5, %c8 : index
  // expected-error @below {{'memref.dim' op dimension index -3 is out of range for its rank-4 operand}}
  %H = memref.dim %Q, %c1 : !qkv
  %t = tile.score_mod %s : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %hh = arith.addi %h, %H : index
    %hi = arith.index_cast %hh : index to i64
    %hf = arith.sitofp %hi : i64 to f32
    %r = arith.addf %score, %hf : f32
    tile.yield %r : f32
  }
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// A head dimension of 0: SIGFPE (a division by zero) in tile-to-nvvm.
!qkv = memref<?x?x?x0xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x0xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x0xf32>
// expected-error @below {{argument 0 of @empty_head_dim: dimension 3 of 'memref<?x?x?x0xbf16, strided<[?, ?, ?, 1], offset: ?>>' is 0: a view or tile cannot be empty}}
func.func @empty_head_dim(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// The raw scores feed the softmax and also a scale and mask whose result is unused: tile-tiling
// erased the dot and left the scale using a deleted value (SIGSEGV in the verifier).
// tilefuse-fuzz --seed 1 --first 2281 --runs 1, from kernels/causal.mlir.
!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
func.func @scores_used_twice(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  // expected-error @below {{'tile.dot' op intermediate scores must have a single use to be tiled}}
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
