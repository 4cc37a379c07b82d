// Regression (tilefuse-fuzz seed 1, input 9643): kernels/alibi.mlir with lines 19 and 41
// swapped, so the score_mod region defines the block '^bb0' twice. MLIR 22's parser writes to
// freed memory while it reports that; parseKernel refuses the text before the parser sees it,
// with the parser's own message at the second definition.
//
// RUN: not tilefuse compile %s -o /dev/null 2>&1 | FileCheck %s
// RUN: not tilefuse run --device cpu --file %s 2>&1 | FileCheck %s
// CHECK: duplicate-block-label.mlir:[[@LINE+42]]:{{[0-9]+}}: error: redefinition of block '^bb0'
// CHECK-NOT: error:
// ALiBi (Press et al.): causal attention plus a per-head linear bias slope_h * (kv - q), with
// slope_h = 2^(-8 (h + 1) / H).
!elt = bf16
!qkv = memref<?x?x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64x!elt>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @alibi(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %c1 = arith.constant 1 : index
  %H = memref.dim %Q, %c1 : !qkv
  %biased = tile.score_mod %t : !scores {
    tile.yield %keep : i1
    %one = arith.constant 1 : index
    %h1 = arith.addi %h, %one : index
    %h1i = arith.index_cast %h1 : index to i64
    %Hi = arith.index_cast %H : index to i64
    %h1f = arith.sitofp %h1i : i64 to f32
    %Hf = arith.sitofp %Hi : i64 to f32
    %m8 = arith.constant -8.0 : f32
    %e = arith.mulf %m8, %h1f : f32
    %e2 = arith.divf %e, %Hf : f32
    %slope = math.exp2 %e2 : f32
    %qi64 = arith.index_cast %qi : index to i64
    %kv64 = arith.index_cast %kv : index to i64
    %d = arith.subi %kv64, %qi64 : i64
    %df = arith.sitofp %d : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %score, %bias : f32
    tile.yield %r : f32
  }
  %u = tile.mask %biased : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
