// RUN: tilefuse-opt %s -split-input-file --tile-tiling --tile-online-softmax \
// RUN:   | FileCheck %s --implicit-check-not=tile.sweep --implicit-check-not=math.exp{{[^2]}}

// tile-online-softmax fuses the max / sum / P x V sweeps of tile-tiling into one loop carrying
// (m, l, acc) in base 2 (FA2). No sweep marker and no natural exp survive (implicit check-nots).

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// CHECK-LABEL: func.func @attention
// CHECK-SAME:    (%[[Q:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[V:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[O:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[LSE:[a-z0-9_]+]]: memref<{{[^%]+}}>)
// CHECK:         scf.forall
// CHECK-NOT:       scf.for %
//
// One loop carrying the row max m, the row sum l and the output accumulator acc.
// CHECK:           %[[AINIT:.+]] = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
// CHECK-NEXT:      %[[R:[a-z0-9_]+]]:3 = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[M:[a-z0-9_]+]] = %{{.+}}, %[[L:[a-z0-9_]+]] = %{{.+}}, %[[ACC:[a-z0-9_]+]] = %[[AINIT]]) -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK:             %[[KB:.+]] = tile.block_load %[[K]]
// CHECK:             %[[S:.+]] = tile.block_dot %{{.+}}, %[[KB]] transpose_rhs
//
// The softmax scale takes log2(e): 0.125 * 1.4426950 = 0.18033688.
// CHECK:             %[[SCALE:.+]] = arith.constant dense<{{0\.180336[0-9]*|1\.80336[0-9]*e-01}}> : tensor<64x64xf32>
// CHECK-NEXT:        %[[T:.+]] = arith.mulf %[[S]], %[[SCALE]] : tensor<64x64xf32>
// CHECK-NEXT:        %[[MASKED:.+]] = tile.block_mask %[[T]]
// CHECK-NOT:         arith.mulf
// CHECK:             %[[VB:.+]] = tile.block_load %[[V]]
//
// m' = max(m, rowmax(T)); p = exp2(T - m'); alpha = exp2(m - m'), with m' -> 0 for empty rows.
// CHECK:             %[[BMAX:.+]] = tile.reduce max %[[MASKED]] : tensor<64x64xf32> -> tensor<64xf32>
// CHECK-NEXT:        %[[MNEW:.+]] = arith.maximumf %[[M]], %[[BMAX]] : tensor<64xf32>
// CHECK:             %[[EMPTY:.+]] = arith.cmpf oeq, %[[MNEW]], %{{.+}} : tensor<64xf32>
// CHECK:             %[[MSAFE:.+]] = arith.select %[[EMPTY]], %{{.+}}, %[[MNEW]] : tensor<64xi1>, tensor<64xf32>
// CHECK-NEXT:        %[[MB:.+]] = tile.broadcast %[[MSAFE]] : tensor<64xf32> -> tensor<64x64xf32>
// CHECK-NEXT:        %[[D:.+]] = arith.subf %[[MASKED]], %[[MB]] : tensor<64x64xf32>
// CHECK-NEXT:        %[[P:.+]] = math.exp2 %[[D]] : tensor<64x64xf32>
// CHECK-NEXT:        %[[DM:.+]] = arith.subf %[[M]], %[[MSAFE]] : tensor<64xf32>
// CHECK-NEXT:        %[[ALPHA:.+]] = math.exp2 %[[DM]] : tensor<64xf32>
//
// l' = alpha l + rowsum(p); acc' = alpha acc + p V.
// CHECK-NEXT:        %[[BSUM:.+]] = tile.reduce sum %[[P]] : tensor<64x64xf32> -> tensor<64xf32>
// CHECK-NEXT:        %[[LA:.+]] = arith.mulf %[[L]], %[[ALPHA]] : tensor<64xf32>
// CHECK-NEXT:        %[[LNEW:.+]] = arith.addf %[[LA]], %[[BSUM]] : tensor<64xf32>
// CHECK-NEXT:        %[[AB:.+]] = tile.broadcast %[[ALPHA]] : tensor<64xf32> -> tensor<64x64xf32>
// CHECK-NEXT:        %[[ACCA:.+]] = arith.mulf %[[ACC]], %[[AB]] : tensor<64x64xf32>
// CHECK-NEXT:        %[[ACCNEW:.+]] = tile.block_dot %[[P]], %[[VB]] acc %[[ACCA]] : tensor<64x64xf32>, tensor<64x64xbf16>, tensor<64x64xf32> -> tensor<64x64xf32>
// CHECK-NEXT:        scf.yield %[[MNEW]], %[[LNEW]], %[[ACCNEW]] : tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>
// CHECK-NEXT:      } {tile.kv_loop}
// CHECK-NOT:       scf.for %
//
// Normalized once after the loop: O = acc · (1 / l) (l = 0 -> 1; one division a row, not one
// an element); the max goes back to natural units (m ln 2) for the logsumexp m + log(l).
// CHECK:           %[[LZERO:.+]] = arith.cmpf oeq, %[[R]]#1, %{{.+}} : tensor<64xf32>
// CHECK:           %[[LSAFE:.+]] = arith.select %[[LZERO]], %{{.+}}, %[[R]]#1 : tensor<64xi1>, tensor<64xf32>
// CHECK:           %[[RL:.+]] = arith.divf %{{.+}}, %[[LSAFE]] : tensor<64xf32>
// CHECK-NEXT:      %[[LB:.+]] = tile.broadcast %[[RL]] : tensor<64xf32> -> tensor<64x64xf32>
// CHECK-NEXT:      %[[OUT:.+]] = arith.mulf %[[R]]#2, %[[LB]] : tensor<64x64xf32>
// CHECK-NEXT:      %[[LN2:.+]] = arith.constant dense<0.693147182> : tensor<64xf32>
// CHECK-NEXT:      %[[MNAT:.+]] = arith.mulf %[[R]]#0, %[[LN2]] : tensor<64xf32>
// CHECK:           %[[MNATSAFE:.+]] = arith.select %{{.+}}, %{{.+}}, %[[MNAT]] : tensor<64xi1>, tensor<64xf32>
// CHECK-NEXT:      tile.block_store %[[OUT]], %[[O]]
// CHECK-NEXT:      %[[LOGL:.+]] = math.log %[[R]]#1 : tensor<64xf32>
// CHECK-NEXT:      %[[LSEV:.+]] = arith.addf %[[MNATSAFE]], %[[LOGL]] : tensor<64xf32>
// CHECK-NEXT:      tile.block_store %[[LSEV]], %[[LSE]]
// CHECK-NEXT:    }
func.func @attention(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by 0.125 : !scores
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// Only a mask between the scale and the softmax: -inf stays -inf under a positive scale, so
// log2(e) still joins the scale constant, and the mask moves into the fused loop unchanged.

// CHECK-LABEL: func.func @causal
// CHECK:         scf.forall
// CHECK-NOT:       scf.for %
// CHECK:           scf.for {{.+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK:             %[[SCALE:.+]] = arith.constant dense<{{0\.180336[0-9]*|1\.80336[0-9]*e-01}}> : tensor<64x64xf32>
// CHECK-NEXT:        %[[T:.+]] = arith.mulf %{{.+}}, %[[SCALE]] : tensor<64x64xf32>
// CHECK-NEXT:        %[[MASKED:.+]] = tile.block_mask %[[T]]
// CHECK-NEXT:        ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:          %[[USER:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:          %[[IN:.+]] = arith.cmpi ult, %[[KV]], %{{.+}} : index
// CHECK-NEXT:          arith.andi %[[USER]], %[[IN]] : i1
// CHECK-NOT:         arith.mulf %[[MASKED]]
// CHECK:             tile.reduce max %[[MASKED]]
// CHECK:             math.exp2
// CHECK:           } {tile.kv_loop}
// CHECK-NOT:       scf.for %
// CHECK:         return
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

// -----

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// A score_mod between the scale and the softmax is not linear: the scale keeps 0.125 and the
// modified (and masked) scores are multiplied by log2(e) explicitly.

// CHECK-LABEL: func.func @softcap
// CHECK:         scf.for {{.+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK:           %[[SCALE:.+]] = arith.constant dense<1.250000e-01> : tensor<64x64xf32>
// CHECK-NEXT:      %[[T:.+]] = arith.mulf %{{.+}}, %[[SCALE]] : tensor<64x64xf32>
// CHECK-NEXT:      %[[MOD:.+]] = tile.block_score_mod %[[T]]
// CHECK:             math.tanh
// CHECK:           %[[MASKED:.+]] = tile.block_mask %[[MOD]]
// CHECK:           }
// CHECK-NEXT:      %[[LOG2E:.+]] = arith.constant dense<1.44269502> : tensor<64x64xf32>
// CHECK-NEXT:      %[[T2:.+]] = arith.mulf %[[MASKED]], %[[LOG2E]] : tensor<64x64xf32>
// CHECK:           %[[BMAX:.+]] = tile.reduce max %[[T2]]
// CHECK:           %[[MB:.+]] = tile.broadcast
// CHECK-NEXT:      %[[D:.+]] = arith.subf %[[T2]], %[[MB]]
// CHECK-NEXT:      math.exp2 %[[D]]
// CHECK:         } {tile.kv_loop}
func.func @softcap(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by 0.125 : !scores
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %score, %cap : f32
    %th = math.tanh %x : f32
    %r = arith.mulf %th, %cap : f32
    tile.yield %r : f32
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// A negative scale would turn -inf (masked) into +inf if log2(e) were folded past a mask; it is
// only folded into positive constants, so here it is multiplied explicitly.

// CHECK-LABEL: func.func @negative_scale
// CHECK:         scf.for
// CHECK:           %[[SCALE:.+]] = arith.constant dense<-2.500000e-01> : tensor<64x64xf32>
// CHECK-NEXT:      %[[T:.+]] = arith.mulf %{{.+}}, %[[SCALE]] : tensor<64x64xf32>
// CHECK-NEXT:      %[[MASKED:.+]] = tile.block_mask %[[T]]
// CHECK:           %[[LOG2E:.+]] = arith.constant dense<1.44269502> : tensor<64x64xf32>
// CHECK-NEXT:      arith.mulf %[[MASKED]], %[[LOG2E]] : tensor<64x64xf32>
// CHECK:         } {tile.kv_loop}
func.func @negative_scale(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by -0.25 : !scores
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// Two attentions in one function: each program gets its own single fused loop.

// CHECK-LABEL: func.func @two_attentions
// CHECK:         scf.forall
// CHECK-NOT:       scf.for %
// CHECK:           scf.for {{.+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK:           } {tile.kv_loop}
// CHECK-NOT:       scf.for %
// CHECK:         scf.forall
// CHECK-NOT:       scf.for %
// CHECK:           scf.for {{.+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK:           } {tile.kv_loop}
// CHECK-NOT:       scf.for %
// CHECK:         return
func.func @two_attentions(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %O2: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  %s2 = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p2, %lse2 = tile.softmax %s2 : !scores -> !scores, tensor<?x?x?xf32>
  %o2 = tile.dot %p2, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o2, %O2 : tensor<?x?x?x64xf32>, !qkv
  return
}
