// RUN: tilefuse-opt %s -split-input-file | tilefuse-opt -split-input-file | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file --mlir-print-op-generic | tilefuse-opt -split-input-file | FileCheck %s

// Every op of the written form and of the tiled form must print in a form that parses back to
// the same op. The second tilefuse-opt re-parses the printed IR; FileCheck checks it printed the
// same custom syntax again.

// CHECK-LABEL: func.func @load_store
// CHECK:         %[[T:.+]] = tile.load %{{.+}} : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> -> tensor<?x?x?x64xbf16>
// CHECK:         tile.store %[[T]], %{{.+}} : tensor<?x?x?x64xbf16>, memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
// CHECK:         %[[S:.+]] = tile.load %{{.+}} : memref<2x4x16x32xf16> -> tensor<2x4x16x32xf16>
// CHECK:         tile.store %[[S]], %{{.+}} : tensor<2x4x16x32xf16>, memref<2x4x16x32xf16>
func.func @load_store(%in: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>,
                      %out: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>,
                      %a: memref<2x4x16x32xf16>, %b: memref<2x4x16x32xf16>) {
  %t = tile.load %in : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> -> tensor<?x?x?x64xbf16>
  tile.store %t, %out : tensor<?x?x?x64xbf16>, memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
  %s = tile.load %a : memref<2x4x16x32xf16> -> tensor<2x4x16x32xf16>
  tile.store %s, %b : tensor<2x4x16x32xf16>, memref<2x4x16x32xf16>
  return
}

// -----

// CHECK-LABEL: func.func @dot
// CHECK-SAME:    (%[[Q:.+]]: tensor<?x8x?x64xbf16>, %[[K:.+]]: tensor<?x2x?x64xbf16>, %[[P:.+]]: tensor<?x8x?x?xf32>)
// CHECK:         tile.dot %[[Q]], %[[K]] transpose_rhs : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16> -> tensor<?x8x?x?xf32>
// CHECK:         tile.dot %[[P]], %[[K]] : tensor<?x8x?x?xf32>, tensor<?x2x?x64xbf16> -> tensor<?x8x?x64xf32>
// CHECK-NOT:     transpose_rhs
// CHECK:         return
func.func @dot(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %p: tensor<?x8x?x?xf32>)
    -> (tensor<?x8x?x?xf32>, tensor<?x8x?x64xf32>) {
  %s = tile.dot %q, %k transpose_rhs : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16> -> tensor<?x8x?x?xf32>
  %o = tile.dot %p, %k : tensor<?x8x?x?xf32>, tensor<?x2x?x64xbf16> -> tensor<?x8x?x64xf32>
  return %s, %o : tensor<?x8x?x?xf32>, tensor<?x8x?x64xf32>
}

// -----

// CHECK-LABEL: func.func @scale
// CHECK:         tile.scale %{{.+}} by 1.250000e-01 : tensor<?x?x?x?xf32>
// CHECK:         tile.scale %{{.+}} by -2.000000e+00 : tensor<1x2x3x4xf32>
func.func @scale(%s: tensor<?x?x?x?xf32>, %t: tensor<1x2x3x4xf32>) -> (tensor<?x?x?x?xf32>, tensor<1x2x3x4xf32>) {
  %a = tile.scale %s by 0.125 : tensor<?x?x?x?xf32>
  %b = tile.scale %t by -2.0 : tensor<1x2x3x4xf32>
  return %a, %b : tensor<?x?x?x?xf32>, tensor<1x2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @score_mod
// CHECK:         %[[CAP:.+]] = arith.constant 3.000000e+01 : f32
// CHECK:         tile.score_mod %{{.+}} : tensor<?x?x?x?xf32> {
// CHECK-NEXT:    ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT:      %[[X:.+]] = arith.divf %[[S]], %[[CAP]] : f32
// CHECK-NEXT:      %[[TH:.+]] = math.tanh %[[X]] : f32
// CHECK-NEXT:      %[[R:.+]] = arith.mulf %[[TH]], %[[CAP]] : f32
// CHECK-NEXT:      tile.yield %[[R]] : f32
// CHECK-NEXT:    }
func.func @score_mod(%s: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %cap = arith.constant 30.0 : f32
  %u = tile.score_mod %s : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %x = arith.divf %score, %cap : f32
    %th = math.tanh %x : f32
    %r = arith.mulf %th, %cap : f32
    tile.yield %r : f32
  }
  return %u : tensor<?x?x?x?xf32>
}

// -----

// CHECK-LABEL: func.func @score_mod_grad
// CHECK:         %[[V:[^,]+]], %[[D:.+]] = tile.score_mod_grad %{{.+}} : tensor<?x?x?x?xf32> {
// CHECK-NEXT:    ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT:      %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      %[[R:.+]] = arith.mulf %[[S]], %[[TWO]] : f32
// CHECK-NEXT:      tile.yield %[[R]], %[[TWO]] : f32, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[V]], %[[D]]
func.func @score_mod_grad(%s: tensor<?x?x?x?xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %u, %du = tile.score_mod_grad %s : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %two = arith.constant 2.0 : f32
    %r = arith.mulf %score, %two : f32
    tile.yield %r, %two : f32, f32
  }
  return %u, %du : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}

// -----

// CHECK-LABEL: func.func @mask
// CHECK:         tile.mask %{{.+}} : tensor<?x?x?x?xf32> {
// CHECK-NEXT:    ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:.+]]: index, %[[KV:.+]]: index):
// CHECK-NEXT:      %[[KEEP:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:      tile.yield %[[KEEP]] : i1
// CHECK-NEXT:    }
func.func @mask(%s: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %u = tile.mask %s : tensor<?x?x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  return %u : tensor<?x?x?x?xf32>
}

// -----

// CHECK-LABEL: func.func @softmax
// CHECK:         %{{.+}}, %{{.+}} = tile.softmax %{{.+}} : tensor<?x8x?x?xf32> -> tensor<?x8x?x?xf32>, tensor<?x8x?xf32>
func.func @softmax(%s: tensor<?x8x?x?xf32>) -> (tensor<?x8x?x?xf32>, tensor<?x8x?xf32>) {
  %p, %lse = tile.softmax %s : tensor<?x8x?x?xf32> -> tensor<?x8x?x?xf32>, tensor<?x8x?xf32>
  return %p, %lse : tensor<?x8x?x?xf32>, tensor<?x8x?xf32>
}

// -----

// The written form as a kernel author writes it: every op in one function.

// CHECK-LABEL: func.func @written_form
// CHECK:         tile.load
// CHECK:         tile.load
// CHECK:         tile.load
// CHECK:         tile.dot %{{.+}}, %{{.+}} transpose_rhs
// CHECK:         tile.scale %{{.+}} by 1.250000e-01
// CHECK:         tile.score_mod
// CHECK:         tile.mask
// CHECK:         tile.softmax
// CHECK:         tile.dot
// CHECK:         tile.store
// CHECK:         tile.store
!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
func.func @written_form(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by 0.125 : !scores
  %m = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    tile.yield %score : f32
  }
  %u = tile.mask %m : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %p, %l = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  tile.store %l, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// CHECK-LABEL: func.func @block_load_store
// CHECK-SAME:    (%[[V:[^:]+]]: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %[[L:[^:]+]]: memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>, %[[B:[^:]+]]: index, %[[H:[^:]+]]: index, %[[R:[^:]+]]: index, %[[N:[^:]+]]: index,
// CHECK:         %[[BLK:.+]] = tile.block_load %[[V]][%[[B]], %[[H]], %[[R]]] bound %[[N]] : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> -> tensor<32x64xbf16>
// CHECK:         tile.block_store %[[BLK]], %[[V]][%[[B]], %[[H]], %[[R]]] bound %[[N]] : tensor<32x64xbf16>, memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
// CHECK:         tile.block_store %{{.+}}, %[[L]][%[[B]], %[[H]], %[[R]]] bound %[[N]] : tensor<32xf32>, memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
func.func @block_load_store(%v: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>,
                            %l: memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>,
                            %b: index, %h: index, %r: index, %n: index, %row: tensor<32xf32>) {
  %blk = tile.block_load %v[%b, %h, %r] bound %n : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> -> tensor<32x64xbf16>
  tile.block_store %blk, %v[%b, %h, %r] bound %n : tensor<32x64xbf16>, memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
  tile.block_store %row, %l[%b, %h, %r] bound %n : tensor<32xf32>, memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
  return
}

// -----

// CHECK-LABEL: func.func @block_dot
// CHECK-SAME:    (%[[Q:[^:]+]]: tensor<64x64xbf16>, %[[K:[^:]+]]: tensor<32x64xbf16>, %[[ACC:[^:]+]]: tensor<64x64xf32>)
// CHECK:         %[[S:.+]] = tile.block_dot %[[Q]], %[[K]] transpose_rhs : tensor<64x64xbf16>, tensor<32x64xbf16> -> tensor<64x32xf32>
// CHECK:         tile.block_dot %[[S]], %[[K]] acc %[[ACC]] : tensor<64x32xf32>, tensor<32x64xbf16>, tensor<64x64xf32> -> tensor<64x64xf32>
// CHECK:         tile.block_dot %[[S]], %[[K]] : tensor<64x32xf32>, tensor<32x64xbf16> -> tensor<64x64xf32>
// CHECK:         tile.block_dot %[[Q]], %[[K]] acc %{{.+}} transpose_rhs : tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<64x32xf32> -> tensor<64x32xf32>
func.func @block_dot(%q: tensor<64x64xbf16>, %k: tensor<32x64xbf16>, %acc: tensor<64x64xf32>)
    -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x32xf32>) {
  %s = tile.block_dot %q, %k transpose_rhs : tensor<64x64xbf16>, tensor<32x64xbf16> -> tensor<64x32xf32>
  %o = tile.block_dot %s, %k acc %acc : tensor<64x32xf32>, tensor<32x64xbf16>, tensor<64x64xf32> -> tensor<64x64xf32>
  %p = tile.block_dot %s, %k : tensor<64x32xf32>, tensor<32x64xbf16> -> tensor<64x64xf32>
  %t = tile.block_dot %q, %k acc %s transpose_rhs : tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<64x32xf32> -> tensor<64x32xf32>
  return %o, %p, %t : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x32xf32>
}

// -----

// CHECK-LABEL: func.func @block_regions
// CHECK-SAME:    (%[[S:[^:]+]]: tensor<64x32xf32>, %[[B:[^:]+]]: index, %[[H:[^:]+]]: index, %[[R:[^:]+]]: index, %[[C:[^:]+]]: index, %[[N:[^:]+]]: index)
// CHECK:         %[[M:.+]] = tile.block_score_mod %[[S]] at(%[[B]], %[[H]], %[[R]], %[[C]]) : tensor<64x32xf32> {
// CHECK-NEXT:    ^bb0(%[[SC:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT:      %[[NEG:.+]] = arith.negf %[[SC]] : f32
// CHECK-NEXT:      tile.yield %[[NEG]] : f32
// CHECK-NEXT:    }
// CHECK:         tile.block_mask %[[M]] at(%[[B]], %[[H]], %[[R]], %[[C]]) : tensor<64x32xf32> {
// CHECK-NEXT:    ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:.+]]: index, %[[KV:.+]]: index):
// CHECK-NEXT:      %[[A:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:      %[[IN:.+]] = arith.cmpi ult, %[[KV]], %[[N]] : index
// CHECK-NEXT:      %[[K:.+]] = arith.andi %[[A]], %[[IN]] : i1
// CHECK-NEXT:      tile.yield %[[K]] : i1
// CHECK-NEXT:    }
func.func @block_regions(%s: tensor<64x32xf32>, %b: index, %h: index, %r: index, %c: index, %n: index) -> tensor<64x32xf32> {
  %m = tile.block_score_mod %s at (%b, %h, %r, %c) : tensor<64x32xf32> {
  ^bb0(%score: f32, %bb: index, %hh: index, %qi: index, %kv: index):
    %neg = arith.negf %score : f32
    tile.yield %neg : f32
  }
  %u = tile.block_mask %m at (%b, %h, %r, %c) : tensor<64x32xf32> {
  ^bb0(%bb: index, %hh: index, %qi: index, %kv: index):
    %a = arith.cmpi ule, %kv, %qi : index
    %in = arith.cmpi ult, %kv, %n : index
    %keep = arith.andi %a, %in : i1
    tile.yield %keep : i1
  }
  return %u : tensor<64x32xf32>
}

// -----

// CHECK-LABEL: func.func @reduce_broadcast
// CHECK:         %[[MX:.+]] = tile.reduce max %{{.+}} : tensor<64x32xf32> -> tensor<64xf32>
// CHECK:         %[[SM:.+]] = tile.reduce sum %{{.+}} : tensor<64x32xf32> -> tensor<64xf32>
// CHECK:         tile.broadcast %[[MX]] : tensor<64xf32> -> tensor<64x32xf32>
// CHECK:         tile.broadcast %[[SM]] : tensor<64xf32> -> tensor<64x128xf32>
func.func @reduce_broadcast(%s: tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x128xf32>) {
  %mx = tile.reduce max %s : tensor<64x32xf32> -> tensor<64xf32>
  %sm = tile.reduce sum %s : tensor<64x32xf32> -> tensor<64xf32>
  %a = tile.broadcast %mx : tensor<64xf32> -> tensor<64x32xf32>
  %b = tile.broadcast %sm : tensor<64xf32> -> tensor<64x128xf32>
  return %a, %b : tensor<64x32xf32>, tensor<64x128xf32>
}

// -----

// CHECK-LABEL: func.func @block_event
// CHECK:         tile.block_event full
// CHECK-NEXT:    tile.block_event partial
func.func @block_event() {
  tile.block_event full
  tile.block_event partial
  return
}

// -----

// Ops of derived (backward) kernels: a rank-3 load of per-row values, a dot over the rows of its
// lhs, probabilities from a logsumexp, elementwise maps (per-row operands repeated along the
// rows), row reductions and the sum over query-head groups.
// CHECK-LABEL: func.func @backward_ops
// CHECK:         %[[L:.+]] = tile.load %{{.+}} : memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>> -> tensor<?x?x?xf32>
// CHECK:         %[[P:.+]] = tile.softmax_from_lse %{{.+}}, %[[L]] : tensor<?x8x?x?xf32>, tensor<?x?x?xf32> -> tensor<?x8x?x?xf32>
// CHECK:         %[[DV:.+]] = tile.dot %[[P]], %{{.+}} transpose_lhs : tensor<?x8x?x?xf32>, tensor<?x8x?x64xbf16> -> tensor<?x8x?x64xf32>
// CHECK:         tile.dot %{{.+}}, %{{.+}} transpose_lhs transpose_rhs : tensor<?x8x64x?xbf16>, tensor<?x2x?x64xbf16> -> tensor<?x8x?x?xf32>
// CHECK:         %[[M:.+]] = tile.map %{{.+}}, %{{.+}} : tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16> -> tensor<?x8x?x64xf32> {
// CHECK-NEXT:    ^bb0(%[[A:.+]]: f32, %[[B:.+]]: f32):
// CHECK-NEXT:      %[[AB:.+]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      tile.yield %[[AB]] : f32
// CHECK-NEXT:    }
// CHECK:         %[[D:.+]] = tile.row_reduce sum %[[M]] : tensor<?x8x?x64xf32> -> tensor<?x8x?xf32>
// CHECK:         tile.row_reduce max %[[M]] : tensor<?x8x?x64xf32> -> tensor<?x8x?xf32>
// CHECK:         tile.map %[[P]], %[[D]] : tensor<?x8x?x?xf32>, tensor<?x8x?xf32> -> tensor<?x8x?x?xf32> {
// CHECK:         tile.sum_head_groups %[[DV]], %{{.+}} : tensor<?x8x?x64xf32> -> tensor<?x2x?x64xf32>
func.func @backward_ops(%LSE: memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>,
                        %s: tensor<?x8x?x?xf32>, %do: tensor<?x8x?x64xbf16>,
                        %o: tensor<?x8x?x64xbf16>, %qt: tensor<?x8x64x?xbf16>,
                        %k: tensor<?x2x?x64xbf16>, %hkv: index) {
  %lse = tile.load %LSE : memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>> -> tensor<?x?x?xf32>
  %p = tile.softmax_from_lse %s, %lse : tensor<?x8x?x?xf32>, tensor<?x?x?xf32> -> tensor<?x8x?x?xf32>
  %dv = tile.dot %p, %do transpose_lhs : tensor<?x8x?x?xf32>, tensor<?x8x?x64xbf16> -> tensor<?x8x?x64xf32>
  %both = tile.dot %qt, %k transpose_lhs transpose_rhs : tensor<?x8x64x?xbf16>, tensor<?x2x?x64xbf16> -> tensor<?x8x?x?xf32>
  %m = tile.map %do, %o : tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16> -> tensor<?x8x?x64xf32> {
  ^bb0(%a: f32, %b: f32):
    %ab = arith.mulf %a, %b : f32
    tile.yield %ab : f32
  }
  %d = tile.row_reduce sum %m : tensor<?x8x?x64xf32> -> tensor<?x8x?xf32>
  %mx = tile.row_reduce max %m : tensor<?x8x?x64xf32> -> tensor<?x8x?xf32>
  %ds = tile.map %p, %d : tensor<?x8x?x?xf32>, tensor<?x8x?xf32> -> tensor<?x8x?x?xf32> {
  ^bb0(%x: f32, %r: f32):
    %y = arith.subf %x, %r : f32
    tile.yield %y : f32
  }
  %g = tile.sum_head_groups %dv, %hkv : tensor<?x8x?x64xf32> -> tensor<?x2x?x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @split_arrive
// CHECK:         %{{.+}} = tile.split_arrive %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] count %{{.+}} : memref<?x?x?xi32>
func.func @split_arrive(%c: memref<?x?x?xi32>, %b: index, %h: index, %mb: index, %s: index) -> i1 {
  %last = tile.split_arrive %c[%b, %h, %mb] count %s : memref<?x?x?xi32>
  return %last : i1
}

// -----

// A warp-specialized kernel's consumers arrive on a named barrier of their own.
// CHECK-LABEL: func.func @split_arrive_consumers
// CHECK:         tile.split_arrive %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] count %{{.+}} {barrier_id = 9 : i32, threads = 256 : i32} : memref<?x?x?xi32>
func.func @split_arrive_consumers(%c: memref<?x?x?xi32>, %b: index, %h: index, %mb: index, %s: index) -> i1 {
  %last = tile.split_arrive %c[%b, %h, %mb] count %s {barrier_id = 9 : i32, threads = 256 : i32} : memref<?x?x?xi32>
  return %last : i1
}

// -----

// The tiled backward's block ops: products contracting over rows (transpose_lhs), the score
// modifier with its derivative, element-wise maps with per-row operands, atomic accumulation.
// CHECK-LABEL: func.func @backward_block_ops
// CHECK:         %[[DV:.+]] = tile.block_dot %[[P:.+]], %[[DO:.+]] acc %{{.+}} transpose_lhs : tensor<64x32xf32>, tensor<64x16xbf16>, tensor<32x16xf32> -> tensor<32x16xf32>
// CHECK:         tile.block_dot %[[P]], %{{.+}} transpose_lhs transpose_rhs : tensor<64x32xf32>, tensor<16x64xbf16> -> tensor<32x16xf32>
// CHECK:         %[[F:.+]], %[[DF:.+]] = tile.block_score_mod_grad %[[P]] at(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) : tensor<64x32xf32> {
// CHECK-NEXT:    ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK:           tile.yield %{{.+}}, %{{.+}} : f32, f32
// CHECK:         %[[MAP:.+]] = tile.block_map %[[F]], %[[DF]], %{{.+}} : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32> -> tensor<64x32xf32> {
// CHECK-NEXT:    ^bb0(%{{.+}}: f32, %{{.+}}: f32, %{{.+}}: f32):
// CHECK:         tile.block_atomic_add %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} : tensor<64x16xf32>, memref<?x?x?x16xf32>
func.func @backward_block_ops(%p: tensor<64x32xf32>, %do: tensor<64x16xbf16>,
                              %dot: tensor<16x64xbf16>, %acc: tensor<32x16xf32>,
                              %d: tensor<64xf32>, %dq: tensor<64x16xf32>,
                              %ws: memref<?x?x?x16xf32>, %i: index, %n: index)
    -> (tensor<32x16xf32>, tensor<32x16xf32>, tensor<64x32xf32>) {
  %dv = tile.block_dot %p, %do acc %acc transpose_lhs : tensor<64x32xf32>, tensor<64x16xbf16>, tensor<32x16xf32> -> tensor<32x16xf32>
  %both = tile.block_dot %p, %dot transpose_lhs transpose_rhs : tensor<64x32xf32>, tensor<16x64xbf16> -> tensor<32x16xf32>
  %f, %df = tile.block_score_mod_grad %p at(%i, %i, %i, %i) : tensor<64x32xf32> {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %t = math.tanh %s : f32
    %one = arith.constant 1.0 : f32
    %t2 = arith.mulf %t, %t : f32
    %dt = arith.subf %one, %t2 : f32
    tile.yield %t, %dt : f32, f32
  }
  %m = tile.block_map %f, %df, %d : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32> -> tensor<64x32xf32> {
  ^bb0(%x: f32, %y: f32, %r: f32):
    %xy = arith.mulf %x, %y : f32
    %z = arith.subf %xy, %r : f32
    tile.yield %z : f32
  }
  tile.block_atomic_add %dq, %ws[%i, %i, %i] bound %n : tensor<64x16xf32>, memref<?x?x?x16xf32>
  return %dv, %both, %m : tensor<32x16xf32>, tensor<32x16xf32>, tensor<64x32xf32>
}

// -----

// A paged key/value cache: the written-form load and the tiled block load.
// CHECK-LABEL: func.func @paged
// CHECK:         tile.load %{{.+}} pages %{{.+}} lengths %{{.+}} : memref<?x?x?x64xbf16>, memref<?x?xi32>, memref<?xi32> -> tensor<?x?x?x64xbf16>
// CHECK:         tile.block_load %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] bound %{{.+}} pages %{{.+}} : memref<?x?x?x64xbf16>, memref<?x?xi32> -> tensor<32x64xbf16>
func.func @paged(%c: memref<?x?x?x64xbf16>, %t: memref<?x?xi32>, %l: memref<?xi32>, %i: index)
    -> (tensor<?x?x?x64xbf16>, tensor<32x64xbf16>) {
  %x = tile.load %c pages %t lengths %l : memref<?x?x?x64xbf16>, memref<?x?xi32>, memref<?xi32> -> tensor<?x?x?x64xbf16>
  %y = tile.block_load %c[%i, %i, %i] bound %i pages %t : memref<?x?x?x64xbf16>, memref<?x?xi32> -> tensor<32x64xbf16>
  return %x, %y : tensor<?x?x?x64xbf16>, tensor<32x64xbf16>
}

// -----

// A packed batch of variable-length sequences: the written-form load and store through
// cumulative offsets, whose type (memref<?xi32>) the assembly leaves out.
// CHECK-LABEL: func.func @varlen
// CHECK:         %[[X:.+]] = tile.load %{{.+}} sequences %[[CU:[^ ]+]] : memref<?x?x?x64xbf16> -> tensor<?x?x?x64xbf16>
// CHECK:         tile.store %[[X]], %{{.+}} sequences %[[CU]] : tensor<?x?x?x64xbf16>, memref<?x?x?x64xbf16>
func.func @varlen(%q: memref<?x?x?x64xbf16>, %o: memref<?x?x?x64xbf16>, %cu: memref<?xi32>) {
  %x = tile.load %q sequences %cu : memref<?x?x?x64xbf16> -> tensor<?x?x?x64xbf16>
  tile.store %x, %o sequences %cu : tensor<?x?x?x64xbf16>, memref<?x?x?x64xbf16>
  return
}
