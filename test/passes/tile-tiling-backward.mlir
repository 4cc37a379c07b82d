// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics \
// RUN:   --tile-tiling-backward="block-m=32 block-n=16" | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics \
// RUN:   --tile-tiling-backward="block-m=32 block-n=16 deterministic=true" \
// RUN:   | FileCheck %s --check-prefix=DET

// tile-tiling-backward: a backward written form (as tile-derive-backward writes it) becomes
// three grids: preprocess (D = rowsum(dO o O) into a workspace, the dQ accumulator zeroed),
// key_gradients (per batch, key/value head and key block: a loop over the group's query heads
// and a tile.query_loop over query blocks accumulating dK and dV; dQ by block_atomic_add) and
// query_gradients (the accumulator converted to dQ; with deterministic=true, a tile.kv_loop over
// key blocks accumulating dQ in order instead, and no accumulator).

!qkv = memref<?x?x?x16xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x16xbf16>
!rows = tensor<?x?x?xf32>
!scores = tensor<?x?x?x?xf32>
!grad = tensor<?x?x?x16xf32>

// A causal mask, then a soft cap: the score chain is rebuilt as block ops in its order; the
// sequence bounds join the chain's last mask, a mask of their own here (the score_mod is last).
// CHECK-LABEL: func.func @capped_backward
// CHECK-SAME:    (%[[Q:[^:]+]]: [[QKV:memref<[^>]+>>]], %[[K:[^:]+]]: [[QKV]], %[[V:[^:]+]]: [[QKV]], %[[O:[^:]+]]: [[QKV]], %[[DO:[^:]+]]: [[QKV]], %[[LSE:[^:]+]]: memref<{{[^>]+}}>>, %[[DQ:[^:]+]]: [[QKV]], %[[DK:[^:]+]]: [[QKV]], %[[DV:[^:]+]]: [[QKV]])
// CHECK-DAG:     %[[M:.+]] = memref.dim %[[Q]], %c2
// CHECK-DAG:     %[[N:.+]] = memref.dim %[[K]], %c2
// CHECK:         %[[WS:.+]] = memref.alloc({{.+}}) {tile.workspace = "row_reduce"} : memref<?x?x?xf32>
// CHECK:         %[[ACC:.+]] = memref.alloc({{.+}}) {tile.workspace = "dq_accumulator"} : memref<?x?x?x16xf32>
// CHECK:         scf.forall (%[[B:.+]], %[[H:.+]], %[[I:.+]]) in
// CHECK:           %[[R:.+]] = arith.muli %[[I]], %c32
// CHECK:           %[[DOB:.+]] = tile.block_load %[[DO]][%[[B]], %[[H]], %[[R]]] bound %[[M]] : {{.+}} -> tensor<32x16xbf16>
// CHECK:           %[[OB:.+]] = tile.block_load %[[O]][%[[B]], %[[H]], %[[R]]] bound %[[M]]
// CHECK:           %[[PROD:.+]] = tile.block_map %[[DOB]], %[[OB]] : tensor<32x16xbf16>, tensor<32x16xbf16> -> tensor<32x16xf32>
// CHECK:           %[[D:.+]] = tile.reduce sum %[[PROD]] : tensor<32x16xf32> -> tensor<32xf32>
// CHECK:           tile.block_store %[[D]], %[[WS]][%[[B]], %[[H]], %[[R]]] bound %[[M]]
// CHECK:           tile.block_store %{{.+}}, %[[ACC]][%[[B]], %[[H]], %[[R]]] bound %[[M]] : tensor<32x16xf32>
// CHECK:         } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>], tile.backward_phase = "preprocess"}
// CHECK:         scf.forall (%[[B2:.+]], %[[G:.+]], %[[J:.+]]) in
// CHECK:           %[[C:.+]] = arith.muli %[[J]], %c16
// CHECK:           %[[KB:.+]] = tile.block_load %[[K]][%[[B2]], %[[G]], %[[C]]] bound %[[N]] : {{.+}} -> tensor<16x16xbf16>
// CHECK:           %[[VB:.+]] = tile.block_load %[[V]][%[[B2]], %[[G]], %[[C]]] bound %[[N]]
// CHECK:           %[[SUMS:.+]]:2 = scf.for %[[HQ:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
// CHECK:             %[[LOOP:.+]]:2 = scf.for %[[IB:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[DKA:.+]] = %{{.+}}, %[[DVA:.+]] = %{{.+}})
// CHECK:               %[[R2:.+]] = arith.muli %[[IB]], %c32
// CHECK:               %[[QB:.+]] = tile.block_load %[[Q]][%[[B2]], %[[HQ]], %[[R2]]] bound %[[M]]
// CHECK:               %[[S:.+]] = tile.block_dot %[[QB]], %[[KB]] transpose_rhs : tensor<32x16xbf16>, tensor<16x16xbf16> -> tensor<32x16xf32>
// CHECK:               %[[T:.+]] = arith.mulf %[[S]], %{{.+}} : tensor<32x16xf32>
// CHECK:               %[[MASK:.+]] = tile.block_mask %[[T]] at(%[[B2]], %[[HQ]], %[[R2]], %[[C]])
// CHECK:                 arith.cmpi ule
// CHECK-NOT:             arith.cmpi ult
// CHECK:                 tile.yield
// CHECK:               %[[F:.+]], %[[DF:.+]] = tile.block_score_mod_grad %[[MASK]] at(%[[B2]], %[[HQ]], %[[R2]], %[[C]])
// CHECK:                 math.tanh
// CHECK:               %[[L:.+]] = tile.block_load %[[LSE]][%[[B2]], %[[HQ]], %[[R2]]] bound %[[M]] : {{.+}} -> tensor<32xf32>
// CHECK:               %[[BOUNDED:.+]] = tile.block_mask %[[F]] at(%[[B2]], %[[HQ]], %[[R2]], %[[C]])
// CHECK-NEXT:          ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:.+]]: index, %[[KV:.+]]: index):
// CHECK:                 arith.cmpi ult, %[[QI]], %[[M]]
// CHECK:                 arith.cmpi ult, %[[KV]], %[[N]]
// CHECK:               %[[EMPTY:.+]] = arith.cmpf oeq, %[[L]]
// CHECK:               %[[LS:.+]] = arith.select %[[EMPTY]], %{{.+}}, %[[L]] : tensor<32xi1>, tensor<32xf32>
// CHECK:               %[[LOG2E:.+]] = arith.constant dense<1.44269502> : tensor<32xf32>
// CHECK:               %[[LS2:.+]] = arith.mulf %[[LS]], %[[LOG2E]] : tensor<32xf32>
// CHECK:               %[[LB:.+]] = tile.broadcast %[[LS2]]
// CHECK:               %[[LOG2EB:.+]] = arith.constant dense<1.44269502> : tensor<32x16xf32>
// CHECK:               %[[S2:.+]] = arith.mulf %[[BOUNDED]], %[[LOG2EB]] : tensor<32x16xf32>
// CHECK:               %[[SHIFT:.+]] = arith.subf %[[S2]], %[[LB]]
// CHECK:               %[[P:.+]] = math.exp2 %[[SHIFT]] : tensor<32x16xf32>
// CHECK:               %[[DOB2:.+]] = tile.block_load %[[DO]][%[[B2]], %[[HQ]], %[[R2]]] bound %[[M]]
// CHECK:               %[[DP:.+]] = tile.block_dot %[[DOB2]], %[[VB]] transpose_rhs
// CHECK:               %[[DB:.+]] = tile.block_load %[[WS]][%[[B2]], %[[HQ]], %[[R2]]] bound %[[M]] : memref<?x?x?xf32> -> tensor<32xf32>
// CHECK:               %[[DS:.+]] = tile.block_map %[[P]], %[[DP]], %[[DB]] : tensor<32x16xf32>, tensor<32x16xf32>, tensor<32xf32> -> tensor<32x16xf32>
// CHECK:               %[[DSF:.+]] = tile.block_map %[[DS]], %[[DF]]
// CHECK:               %[[DSM:.+]] = tile.block_map %[[DSF]], %[[MASK]]
// CHECK-NOT:           arith.mulf
// CHECK:               %[[NDK:.+]] = tile.block_dot %[[DSM]], %[[QB]] acc %[[DKA]] transpose_lhs : tensor<32x16xf32>, tensor<32x16xbf16>, tensor<16x16xf32> -> tensor<16x16xf32>
// CHECK:               %[[NDV:.+]] = tile.block_dot %[[P]], %[[DOB2]] acc %[[DVA]] transpose_lhs
// CHECK:               %[[PART:.+]] = tile.block_dot %[[DSM]], %[[KB]] : tensor<32x16xf32>, tensor<16x16xbf16> -> tensor<32x16xf32>
// CHECK:               tile.block_atomic_add %[[PART]], %[[ACC]][%[[B2]], %[[HQ]], %[[R2]]] bound %[[M]]
// CHECK:               scf.yield %[[NDK]], %[[NDV]]
// CHECK:             } {tile.query_loop}
// CHECK:           %[[QUARTER:.+]] = arith.constant dense<2.500000e-01> : tensor<16x16xf32>
// CHECK:           %[[DKS:.+]] = arith.mulf %[[SUMS]]#0, %[[QUARTER]]
// CHECK:           tile.block_store %[[DKS]], %[[DK]][%[[B2]], %[[G]], %[[C]]] bound %[[N]]
// CHECK-NOT:       arith.mulf
// CHECK:           tile.block_store %[[SUMS]]#1, %[[DV]][%[[B2]], %[[G]], %[[C]]] bound %[[N]]
// CHECK:         } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>], tile.backward_phase = "key_gradients"}
// CHECK:         scf.forall (%[[B3:.+]], %[[H3:.+]], %[[I3:.+]]) in
// CHECK:           %[[R3:.+]] = arith.muli %[[I3]], %c32
// CHECK:           %[[SUM:.+]] = tile.block_load %[[ACC]][%[[B3]], %[[H3]], %[[R3]]] bound %[[M]] : memref<?x?x?x16xf32> -> tensor<32x16xf32>
// CHECK:           %[[DQSC:.+]] = arith.mulf %[[SUM]], %{{.+}} : tensor<32x16xf32>
// CHECK:           tile.block_store %[[DQSC]], %[[DQ]][%[[B3]], %[[H3]], %[[R3]]] bound %[[M]]
// CHECK:         } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>], tile.backward_phase = "query_gradients"}
// CHECK-NOT:     tile.load
// CHECK-NOT:     tile.dot
// CHECK:         return

// DET-LABEL: func.func @capped_backward
// DET-NOT:       dq_accumulator
// DET-NOT:       tile.block_atomic_add
// DET:           } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>], tile.backward_phase = "preprocess"}
// DET:           tile.block_dot %{{.+}} transpose_lhs
// DET:           } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>], tile.backward_phase = "key_gradients"}
// DET:           scf.forall (%[[B:.+]], %[[H:.+]], %[[I:.+]]) in
// DET:             %[[R:.+]] = arith.muli %[[I]], %c32
// DET:             %[[HKV:.+]] = arith.divui %[[H]], %{{.+}}
// DET:             %[[QB:.+]] = tile.block_load %{{.+}}[%[[B]], %[[H]], %[[R]]]
// DET:             %[[DQS:.+]] = scf.for %[[J:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[DQA:.+]] = %{{.+}}) -> (tensor<32x16xf32>)
// DET:               %[[C:.+]] = arith.muli %[[J]], %c16
// DET:               %[[KB:.+]] = tile.block_load %{{.+}}[%[[B]], %[[HKV]], %[[C]]]
// DET:               tile.block_dot %[[QB]], %[[KB]] transpose_rhs
// DET:               %[[NDQ:.+]] = tile.block_dot %{{.+}}, %[[KB]] acc %[[DQA]] : tensor<32x16xf32>, tensor<16x16xbf16>, tensor<32x16xf32> -> tensor<32x16xf32>
// DET:               scf.yield %[[NDQ]]
// DET:             } {tile.kv_loop}
// DET:             %[[DQSC:.+]] = arith.mulf %[[DQS]], %{{.+}} : tensor<32x16xf32>
// DET:             tile.block_store %[[DQSC]], %{{.+}}[%[[B]], %[[H]], %[[R]]]
// DET:           } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>], tile.backward_phase = "query_gradients"}
func.func @capped_backward(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %dO: !qkv, %LSE: !lse,
                           %dQ: !qkv, %dK: !qkv, %dV: !qkv) {
  %cap = arith.constant 2.0 : f32
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %o = tile.load %O : !qkv -> !in
  %do = tile.load %dO : !qkv -> !in
  %lse = tile.load %LSE : !lse -> !rows
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by 0.25 : !scores
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %f, %df = tile.score_mod_grad %u : !scores {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %kv: index):
    %y = arith.divf %x, %cap : f32
    %th = math.tanh %y : f32
    %one = arith.constant 1.0 : f32
    %th2 = arith.mulf %th, %th : f32
    %sech2 = arith.subf %one, %th2 : f32
    %r = arith.mulf %th, %cap : f32
    tile.yield %r, %sech2 : f32, f32
  }
  %p = tile.softmax_from_lse %f, %lse : !scores, !rows -> !scores
  %doo = tile.map %do, %o : !in, !in -> !grad {
  ^bb0(%a: f32, %c: f32):
    %ac = arith.mulf %a, %c : f32
    tile.yield %ac : f32
  }
  %d = tile.row_reduce sum %doo : !grad -> !rows
  %dvh = tile.dot %p, %do transpose_lhs : !scores, !in -> !grad
  %c1 = arith.constant 1 : index
  %hv = memref.dim %V, %c1 : !qkv
  %dvs = tile.sum_head_groups %dvh, %hv : !grad -> !grad
  %dp = tile.dot %do, %v transpose_rhs : !in, !in -> !scores
  %ds = tile.map %p, %dp, %d : !scores, !scores, !rows -> !scores {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %c = arith.subf %y, %z : f32
    %r = arith.mulf %x, %c : f32
    tile.yield %r : f32
  }
  %dsf = tile.map %ds, %df : !scores, !scores -> !scores {
  ^bb0(%x: f32, %y: f32):
    %r = arith.mulf %x, %y : f32
    tile.yield %r : f32
  }
  %dsm = tile.map %dsf, %u : !scores, !scores -> !scores {
  ^bb0(%x: f32, %m: f32):
    %ninf = arith.constant 0xFF800000 : f32
    %zero = arith.constant 0.0 : f32
    %masked = arith.cmpf oeq, %m, %ninf : f32
    %r = arith.select %masked, %zero, %x : f32
    tile.yield %r : f32
  }
  %dqu = tile.dot %dsm, %k : !scores, !in -> !grad
  %dkh = tile.dot %dsm, %q transpose_lhs : !scores, !in -> !grad
  %hk = memref.dim %K, %c1 : !qkv
  %dku = tile.sum_head_groups %dkh, %hk : !grad -> !grad
  %dqs = tile.scale %dqu by 0.25 : !grad
  %dks = tile.scale %dku by 0.25 : !grad
  tile.store %dqs, %dQ : !grad, !qkv
  tile.store %dks, %dK : !grad, !qkv
  tile.store %dvs, %dV : !grad, !qkv
  return
}

// -----

// GQA (8 query heads over 2 key/value heads, declared): each key_gradients program loops over
// the 4 query heads of its group, so dK and dV are summed in its accumulators; a mask last in
// the chain takes the sequence bounds into its own region. An implicit scale is 1/sqrt(D), and
// log2(e) joins it (only the mask lies between it and P). Here dS is scaled elementwise before
// the products (an older written form the schedule still takes).
!qv = memref<?x8x?x32xf16, strided<[?, ?, ?, 1], offset: ?>>
!kv = memref<?x2x?x32xf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x8x?xf32, strided<[?, ?, 1], offset: ?>>
!qin = tensor<?x8x?x32xf16>
!kvin = tensor<?x2x?x32xf16>
!rows = tensor<?x8x?xf32>
!scores = tensor<?x8x?x?xf32>
!qgrad = tensor<?x8x?x32xf32>
!kvgrad = tensor<?x2x?x32xf32>
// CHECK-LABEL: func.func @gqa_backward
// CHECK:         %[[GROUP:.+]] = arith.divui %{{.+}}, %[[HKV:.+]] : index
// CHECK:         scf.forall (%{{.+}}, %[[KVH:.+]], %{{.+}}) in (%{{.+}}, %[[HKV]], %{{.+}})
// CHECK:           %[[LO:.+]] = arith.muli %[[KVH]], %[[GROUP]]
// CHECK:           %[[HI:.+]] = arith.addi %[[LO]], %[[GROUP]]
// CHECK:           scf.for %{{.+}} = %[[LO]] to %[[HI]]
// CHECK:             %[[BASE2:.+]] = arith.constant dense<0.255034{{[0-9]+}}> : tensor<32x16xf32>
// CHECK:             arith.mulf %{{.+}}, %[[BASE2]] : tensor<32x16xf32>
// CHECK:             tile.block_mask
// CHECK-NEXT:        ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:.+]]: index, %[[KV:.+]]: index):
// CHECK-NEXT:          %[[KEEP:.+]] = arith.cmpi ule, %[[KV]], %[[QI]]
// CHECK-NEXT:          %[[QIN:.+]] = arith.cmpi ult, %[[QI]]
// CHECK-NEXT:          %[[KVIN:.+]] = arith.cmpi ult, %[[KV]]
// CHECK-NEXT:          %[[K1:.+]] = arith.andi %[[KEEP]], %[[QIN]]
// CHECK-NEXT:          %[[K2:.+]] = arith.andi %[[K1]], %[[KVIN]]
// CHECK-NEXT:          tile.yield %[[K2]] : i1
// CHECK-NOT:         tile.block_mask
// CHECK:             math.exp2
// CHECK:             arith.constant dense<0.176776{{[0-9]+}}> : tensor<32x16xf32>
// CHECK:             tile.block_dot {{.+}} transpose_lhs : tensor<32x16xf32>, tensor<32x32xf16>, tensor<16x32xf32> -> tensor<16x32xf32>
// CHECK:           } {tile.query_loop}
// CHECK:         tile.block_store %{{.+}}, %arg7[{{.+}}] bound %{{.+}} : tensor<16x32xf32>, memref<?x2x?x32xf16
func.func @gqa_backward(%Q: !qv, %K: !kv, %V: !kv, %O: !qv, %dO: !qv, %LSE: !lse, %dQ: !qv,
                        %dK: !kv, %dV: !kv) {
  %q = tile.load %Q : !qv -> !qin
  %k = tile.load %K : !kv -> !kvin
  %v = tile.load %V : !kv -> !kvin
  %o = tile.load %O : !qv -> !qin
  %do = tile.load %dO : !qv -> !qin
  %lse = tile.load %LSE : !lse -> !rows
  %s = tile.dot %q, %k transpose_rhs : !qin, !kvin -> !scores
  %t = tile.scale %s : !scores
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %p = tile.softmax_from_lse %u, %lse : !scores, !rows -> !scores
  %doo = tile.map %do, %o : !qin, !qin -> !qgrad {
  ^bb0(%a: f32, %c: f32):
    %ac = arith.mulf %a, %c : f32
    tile.yield %ac : f32
  }
  %d = tile.row_reduce sum %doo : !qgrad -> !rows
  %dvh = tile.dot %p, %do transpose_lhs : !scores, !qin -> !qgrad
  %c1 = arith.constant 1 : index
  %hv = memref.dim %V, %c1 : !kv
  %dvs = tile.sum_head_groups %dvh, %hv : !qgrad -> !kvgrad
  %dp = tile.dot %do, %v transpose_rhs : !qin, !kvin -> !scores
  %ds = tile.map %p, %dp, %d : !scores, !scores, !rows -> !scores {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %c = arith.subf %y, %z : f32
    %r = arith.mulf %x, %c : f32
    tile.yield %r : f32
  }
  %g = tile.scale %ds by 0.17677669529663687 : !scores
  %dqs = tile.dot %g, %k : !scores, !kvin -> !qgrad
  %dkh = tile.dot %g, %q transpose_lhs : !scores, !qin -> !qgrad
  %hk = memref.dim %K, %c1 : !kv
  %dks = tile.sum_head_groups %dkh, %hk : !qgrad -> !kvgrad
  tile.store %dqs, %dQ : !qgrad, !qv
  tile.store %dks, %dK : !kvgrad, !kv
  tile.store %dvs, %dV : !kvgrad, !kv
  return
}

// -----

// A stored value that is no gradient the schedule knows.
!qkv = memref<?x?x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x16xf32>
!rows = tensor<?x?x?xf32>
!scores = tensor<?x?x?x?xf32>
func.func @stores_a_map(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %dO: !qkv, %LSE: !lse,
                        %dQ: !qkv, %dK: !qkv, %dV: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %lse = tile.load %LSE : !lse -> !rows
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p = tile.softmax_from_lse %s, %lse : !scores, !rows -> !scores
  %twice = tile.map %q : !in -> !in {
  ^bb0(%x: f32):
    %y = arith.addf %x, %x : f32
    tile.yield %y : f32
  }
  // expected-error @+1 {{'tile.store' op the tiled backward stores gradients of K and V ([tile.scale of] tile.sum_head_groups of tile.dot transpose_lhs) and of Q ([tile.scale of] tile.dot %scores, %key_rows) only}}
  tile.store %twice, %dQ : !in, !qkv
  return
}

// -----

// A gradient's scale must state its factor: the default 1/sqrt(D) belongs to the scores.
!qkv = memref<?x?x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x16xf32>
!rows = tensor<?x?x?xf32>
!scores = tensor<?x?x?x?xf32>
!grad = tensor<?x?x?x16xf32>
func.func @gradient_scale_without_factor(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %dO: !qkv,
                                         %LSE: !lse, %dQ: !qkv, %dK: !qkv, %dV: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %lse = tile.load %LSE : !lse -> !rows
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p = tile.softmax_from_lse %s, %lse : !scores, !rows -> !scores
  %dqu = tile.dot %p, %k : !scores, !in -> !grad
  // expected-error @+1 {{'tile.scale' op the tiled backward scales a gradient only by a given factor (`by`)}}
  %dqs = tile.scale %dqu : !grad
  tile.store %dqs, %dQ : !grad, !qkv
  return
}

// -----

// Scores whose rows are reduced over the keys would need every key block at once: the reduction
// is refused at the op that would have to be tiled as query rows.
!qkv = memref<?x?x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x16xf32>
!rows = tensor<?x?x?xf32>
!scores = tensor<?x?x?x?xf32>
!grad = tensor<?x?x?x16xf32>
func.func @row_max_of_scores(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %dO: !qkv, %LSE: !lse,
                             %dQ: !qkv, %dK: !qkv, %dV: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %lse = tile.load %LSE : !lse -> !rows
  // expected-error @+1 {{'tile.dot' op the tiled backward needs query rows here: a B x H x M x D tensor with a static D}}
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %mx = tile.row_reduce max %s : !scores -> !rows
  %p = tile.softmax_from_lse %s, %mx : !scores, !rows -> !scores
  %dqs = tile.dot %p, %k : !scores, !in -> !grad
  tile.store %dqs, %dQ : !grad, !qkv
  return
}

// -----

// Only dQ is stored: the key_gradients grid carries nothing through its loops and only adds
// into the accumulator (its loops get one terminator each).
!qkv = memref<?x?x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x16xf32>
!rows = tensor<?x?x?xf32>
!scores = tensor<?x?x?x?xf32>
!grad = tensor<?x?x?x16xf32>
// CHECK-LABEL: func.func @only_dq
// CHECK:         scf.forall
// CHECK:           scf.for
// CHECK:             scf.for
// CHECK:               tile.block_atomic_add
// CHECK-NEXT:        } {tile.query_loop}
// CHECK-NEXT:      }
// CHECK:         } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>], tile.backward_phase = "key_gradients"}
// DET-LABEL: func.func @only_dq
// DET-NOT:       key_gradients
// DET:           tile.block_dot {{.+}} acc
// DET-NEXT:      scf.yield
// DET-NEXT:    } {tile.kv_loop}
func.func @only_dq(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %dO: !qkv, %LSE: !lse,
                   %dQ: !qkv, %dK: !qkv, %dV: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %lse = tile.load %LSE : !lse -> !rows
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p = tile.softmax_from_lse %s, %lse : !scores, !rows -> !scores
  %dqs = tile.dot %p, %k : !scores, !in -> !grad
  tile.store %dqs, %dQ : !grad, !qkv
  return
}
