// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics --tile-derive-backward \
// RUN:   | FileCheck %s

// tile-derive-backward: beside each forward kernel @k(Q, K, V, O, LSE), the backward written
// form @k_backward(Q, K, V, O, dO, LSE, dQ, dK, dV): the scores recomputed through the same
// chain (score_mod as score_mod_grad), P from the logsumexp, D = rowsum(dO o O), dV = P^T dO,
// dP = dO V^T, dS = P o (dP - D), back through the chain, dQ = c dS K, dK = c dS^T Q (c the
// chain's scales, moved out of dS: every step back is linear in it), with dK and dV summed over
// the query heads of each group.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// Soft-capping: f' comes from the score_mod_grad; the implicit scale becomes `by 1/sqrt(64)`
// in both directions; the forward kernel stays.
// CHECK-LABEL: func.func @softcap(
// CHECK:         tile.score_mod %
// CHECK:         tile.softmax
// CHECK-LABEL: func.func @softcap_backward
// CHECK-SAME:    (%[[Q:[^:]+]]: [[QKV:memref<\?x\?x\?x64xbf16, strided<\[\?, \?, \?, 1\], offset: \?>>]], %[[K:[^:]+]]: [[QKV]], %[[V:[^:]+]]: [[QKV]], %[[O:[^:]+]]: [[QKV]], %[[DO:[^:]+]]: [[QKV]], %[[LSE:[^:]+]]: memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>, %[[DQ:[^:]+]]: [[QKV]], %[[DK:[^:]+]]: [[QKV]], %[[DV:[^:]+]]: [[QKV]])
// CHECK:         %[[CAP:.+]] = arith.constant {tile.param = "cap"} 3.000000e+01 : f32
// CHECK-DAG:     %[[q:.+]] = tile.load %[[Q]]
// CHECK-DAG:     %[[k:.+]] = tile.load %[[K]]
// CHECK-DAG:     %[[v:.+]] = tile.load %[[V]]
// CHECK-DAG:     %[[o:.+]] = tile.load %[[O]]
// CHECK-DAG:     %[[do:.+]] = tile.load %[[DO]]
// CHECK-DAG:     %[[lse:.+]] = tile.load %[[LSE]] : memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>> -> tensor<?x?x?xf32>
// CHECK:         %[[S:.+]] = tile.dot %[[q]], %[[k]] transpose_rhs
// CHECK:         %[[T:.+]] = tile.scale %[[S]] by 1.250000e-01
// CHECK:         %[[F:.+]], %[[DF:.+]] = tile.score_mod_grad %[[T]]
// CHECK:           math.tanh
// CHECK:           tile.yield
// CHECK:         %[[P:.+]] = tile.softmax_from_lse %[[F]], %[[lse]]
// CHECK:         %[[DOO:.+]] = tile.map %[[do]], %[[o]]
// CHECK:           arith.mulf
// CHECK:         %[[D:.+]] = tile.row_reduce sum %[[DOO]] : tensor<?x?x?x64xf32> -> tensor<?x?x?xf32>
// CHECK:         %[[DVH:.+]] = tile.dot %[[P]], %[[do]] transpose_lhs : tensor<?x?x?x?xf32>, tensor<?x?x?x64xbf16> -> tensor<?x?x?x64xf32>
// CHECK:         %[[HV:.+]] = memref.dim %[[V]], %{{.+}}
// CHECK:         %[[dV:.+]] = tile.sum_head_groups %[[DVH]], %[[HV]]
// CHECK:         %[[DP:.+]] = tile.dot %[[do]], %[[v]] transpose_rhs
// CHECK:         %[[DS:.+]] = tile.map %[[P]], %[[DP]], %[[D]] : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?xf32> -> tensor<?x?x?x?xf32> {
// CHECK-NEXT:    ^bb0(%[[p:.+]]: f32, %[[dp:.+]]: f32, %[[d:.+]]: f32):
// CHECK-NEXT:      %[[C:.+]] = arith.subf %[[dp]], %[[d]] : f32
// CHECK-NEXT:      %[[PC:.+]] = arith.mulf %[[p]], %[[C]] : f32
// CHECK-NEXT:      tile.yield %[[PC]] : f32
// CHECK:         %[[DSR:.+]] = tile.map %[[DS]], %[[DF]]
// CHECK-NOT:     tile.scale
// CHECK:         %[[DQU:.+]] = tile.dot %[[DSR]], %[[k]] : tensor<?x?x?x?xf32>, tensor<?x?x?x64xbf16> -> tensor<?x?x?x64xf32>
// CHECK:         %[[DKH:.+]] = tile.dot %[[DSR]], %[[q]] transpose_lhs
// CHECK:         %[[HK:.+]] = memref.dim %[[K]], %{{.+}}
// CHECK:         %[[DKU:.+]] = tile.sum_head_groups %[[DKH]], %[[HK]]
// CHECK:         %[[dQ:.+]] = tile.scale %[[DQU]] by 1.250000e-01 : tensor<?x?x?x64xf32>
// CHECK:         %[[dK:.+]] = tile.scale %[[DKU]] by 1.250000e-01 : tensor<?x?x?x64xf32>
// CHECK:         tile.store %[[dQ]], %[[DQ]]
// CHECK:         tile.store %[[dK]], %[[DK]]
// CHECK:         tile.store %[[dV]], %[[DV]]
// CHECK-NEXT:    return
func.func @softcap(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %cap = arith.constant {tile.param = "cap"} 30.0 : f32
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

// -----

// GQA with static heads (8 query heads, 2 key/value heads): dK and dV are summed back to 2
// heads; a mask before the softmax needs no backward op (P is 0 where it masks); an explicit
// factor is kept.
!qv = memref<?x8x?x32xf16, strided<[?, ?, ?, 1], offset: ?>>
!kv = memref<?x2x?x32xf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x8x?xf32, strided<[?, ?, 1], offset: ?>>
!qin = tensor<?x8x?x32xf16>
!kvin = tensor<?x2x?x32xf16>
!scores = tensor<?x8x?x?xf32>
// CHECK-LABEL: func.func @gqa_causal_backward
// CHECK:         tile.scale %{{.+}} by 5.000000e-01 : tensor<?x8x?x?xf32>
// CHECK:         %[[M:.+]] = tile.mask
// CHECK:         tile.softmax_from_lse %[[M]], %{{.+}} : tensor<?x8x?x?xf32>, tensor<?x8x?xf32> -> tensor<?x8x?x?xf32>
// CHECK:         tile.sum_head_groups %{{.+}}, %{{.+}} : tensor<?x8x?x32xf32> -> tensor<?x2x?x32xf32>
// CHECK:         %[[DS:.+]] = tile.map
// CHECK-NOT:     tile.map
// CHECK:         %[[DQ:.+]] = tile.dot %[[DS]], %{{.+}} : tensor<?x8x?x?xf32>, tensor<?x2x?x32xf16> -> tensor<?x8x?x32xf32>
// CHECK:         %[[DK:.+]] = tile.sum_head_groups %{{.+}}, %{{.+}} : tensor<?x8x?x32xf32> -> tensor<?x2x?x32xf32>
// CHECK:         tile.scale %[[DQ]] by 5.000000e-01 : tensor<?x8x?x32xf32>
// CHECK:         tile.scale %[[DK]] by 5.000000e-01 : tensor<?x2x?x32xf32>
func.func @gqa_causal(%Q: !qv, %K: !kv, %V: !kv, %O: !qv, %LSE: !lse) {
  %q = tile.load %Q : !qv -> !qin
  %k = tile.load %K : !kv -> !kvin
  %v = tile.load %V : !kv -> !kvin
  %s = tile.dot %q, %k transpose_rhs : !qin, !kvin -> !scores
  %t = tile.scale %s by 0.5 : !scores
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x8x?xf32>
  %o = tile.dot %p, %v : !scores, !kvin -> tensor<?x8x?x32xf32>
  tile.store %o, %O : tensor<?x8x?x32xf32>, !qv
  tile.store %lse, %LSE : tensor<?x8x?xf32>, !lse
  return
}

// -----

// A score_mod after a mask may make a masked score finite: the masked elements' gradient is
// zeroed explicitly (a map selecting 0 where the mask's output is -inf) before the mask.
!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
// CHECK-LABEL: func.func @mask_then_score_mod_backward
// CHECK:         %[[M:.+]] = tile.mask
// CHECK:         %[[F:.+]], %[[DF:.+]] = tile.score_mod_grad %[[M]]
// CHECK:         %[[DS:.+]] = tile.map %{{.+}}, %{{.+}}, %{{.+}} :
// CHECK:         %[[DSR:.+]] = tile.map %[[DS]], %[[DF]]
// CHECK:         %[[Z:.+]] = tile.map %[[DSR]], %[[M]]
// CHECK-NEXT:    ^bb0(%[[g:.+]]: f32, %[[m:.+]]: f32):
// CHECK-DAG:       %[[NINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK-DAG:       %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK:           %[[ISM:.+]] = arith.cmpf oeq, %[[m]], %[[NINF]] : f32
// CHECK:           %[[SEL:.+]] = arith.select %[[ISM]], %[[ZERO]], %[[g]] : f32
// CHECK:           tile.yield %[[SEL]] : f32
// CHECK:         tile.dot %[[Z]], %{{.+}} :
func.func @mask_then_score_mod(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %w = tile.score_mod %u : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %e = math.exp %score : f32
    tile.yield %e : f32
  }
  %p, %lse = tile.softmax %w : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// A score_mod op without a derivative rule: the error is at that op, and the pass fails.
!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
func.func @remainder(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %c = arith.constant 3.0 : f32
  %u = tile.score_mod %s : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'arith.remf' op cannot be differentiated with respect to the score}}
    %r = arith.remf %score, %c : f32
    tile.yield %r : f32
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// The implicit scale 1/sqrt(D) with a dynamic head dimension: the backward cannot state its
// factor.
!qkv = memref<?x?x?x?xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x?xbf16>
!scores = tensor<?x?x?x?xf32>
func.func @dynamic_head_dim(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  // expected-error @+1 {{'tile.scale' op the derived backward needs the factor: give tile.scale `by`, or specialize the kernel to a static head dimension}}
  %t = tile.scale %s : !scores
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !scores
  tile.store %o, %O : !scores, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// A tile op outside the attention (a second store, of the probabilities) would carry a gradient
// the derivation does not model.
!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
func.func @stores_scores(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse,
                         %S: memref<?x?x?x?xf32>) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  // expected-error @+1 {{'tile.store' op is not part of the attention the derived backward differentiates}}
  tile.store %s, %S : !scores, memref<?x?x?x?xf32>
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// P is recomputed from the stored logsumexp: a kernel that does not store it has no backward.
!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
func.func @no_lse(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  // expected-error @+1 {{'tile.softmax' op the derived backward recomputes P from the stored logsumexp}}
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  return
}

// -----

// The backward takes Q, K, V, O and the logsumexp as five arguments: one view in two roles
// (self-attention on one tensor) has no place in its signature.
!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
// expected-error @+1 {{'func.func' op the derived backward needs Q, K, V, O and the logsumexp to be five different arguments}}
func.func @shared_view(%X: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %X : !qkv -> !in
  %k = tile.load %X : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
