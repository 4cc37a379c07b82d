// RUN: tilefuse-opt %s -split-input-file --tile-tiling --tile-online-softmax \
// RUN:   --tile-unscaled-row-max | FileCheck %s

// tile-unscaled-row-max: the running row max is taken over the masked, unscaled scores and
// scaled once per row; the scores are scaled only where the exponent's argument is formed, so
// that multiply has one reader (an FMA on the GPU). The scale is log2(e) / sqrt(64).

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @causal
// CHECK-DAG:     %[[CROW:.+]] = arith.constant dense<0.180336878> : tensor<64xf32>
// CHECK-DAG:     %[[CBLOCK:.+]] = arith.constant dense<0.180336878> : tensor<64x64xf32>
// CHECK:         scf.for
// CHECK:           %[[S:.+]] = tile.block_dot
// CHECK-NEXT:      %[[MASKED:.+]] = tile.block_mask %[[S]] at
// CHECK:           %[[RAW:.+]] = tile.reduce  max %[[MASKED]]
// CHECK-NEXT:      %[[ROWMAX:.+]] = arith.mulf %[[RAW]], %[[CROW]]
// CHECK-NEXT:      %[[M:.+]] = arith.maximumf %{{.+}}, %[[ROWMAX]]
// CHECK:           %[[SCALED:.+]] = arith.mulf %[[MASKED]], %[[CBLOCK]] : tensor<64x64xf32>
// CHECK-NEXT:      %[[ARG:.+]] = arith.subf %[[SCALED]], %{{.+}} : tensor<64x64xf32>
// CHECK-NEXT:      math.exp2 %[[ARG]]
// CHECK-NOT:       tile.block_mask
func.func @causal(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// A score modifier sits between the softmax scale (1/8, applied before it) and the max, so only
// the log2(e) that tile-online-softmax multiplies in after the modifier moves to the row max.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @softcap
// CHECK-DAG:     %[[LOG2E_ROW:.+]] = arith.constant dense<1.44269502> : tensor<64xf32>
// CHECK-DAG:     %[[LOG2E:.+]] = arith.constant dense<1.44269502> : tensor<64x64xf32>
// CHECK-DAG:     %[[EIGHTH:.+]] = arith.constant dense<1.250000e-01> : tensor<64x64xf32>
// CHECK:         scf.for
// CHECK:           %[[S:.+]] = tile.block_dot
// CHECK-NEXT:      %[[T:.+]] = arith.mulf %[[S]], %[[EIGHTH]]
// CHECK-NEXT:      %[[MOD:.+]] = tile.block_score_mod %[[T]]
// CHECK:           %[[MASKED:.+]] = tile.block_mask %[[MOD]]
// CHECK:           %[[RAW:.+]] = tile.reduce  max %[[MASKED]]
// CHECK-NEXT:      arith.mulf %[[RAW]], %[[LOG2E_ROW]]
// CHECK:           %[[SCALED:.+]] = arith.mulf %[[MASKED]], %[[LOG2E]]
// CHECK-NEXT:      arith.subf %[[SCALED]],
func.func @softcap(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %cap = arith.constant 30.0 : f32
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %x = arith.divf %score, %cap : f32
    %th = math.tanh %x : f32
    %r = arith.mulf %th, %cap : f32
    tile.yield %r : f32
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
