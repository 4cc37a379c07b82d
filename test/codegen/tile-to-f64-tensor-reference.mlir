// RUN: tilefuse-opt %s --split-input-file --tile-to-f64-tensor-reference --verify-diagnostics | FileCheck %s

// Written forms that are not row by row (a derived backward) in f64, whole tensor by tensor:
// each tile op fills an f64 buffer of its whole result with a loop nest.

!qkv = memref<?x?x?x16xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x16xbf16>
!scores = tensor<?x?x?x?xf32>
!grad = tensor<?x?x?x16xf32>

// CHECK-LABEL: func.func @grads_reference(
// CHECK-SAME:    %[[Q:[a-z0-9]+]]: memref<?x?x?x?xf64, strided<[?, ?, ?, ?], offset: ?>>,
// CHECK-SAME:    %[[LSE:[a-z0-9]+]]: memref<?x?x?xf64, strided<[?, ?, ?], offset: ?>>)
// CHECK-SAME:    attributes {llvm.emit_c_interface}
// Q.K^T: a full dot product per score.
// CHECK:         memref.alloc({{.*}}) : memref<?x?x?x?xf64>
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (f64)
// P from the logsumexp: exp(s - lse), 0 where lse = -inf.
// CHECK:         %[[P:.+]] = memref.alloc({{.*}}) : memref<?x?x?x?xf64>
// CHECK:         scf.for %[[B:.+]] = {{.*}} {
// CHECK-NEXT:      scf.for %[[H:.+]] = {{.*}} {
// CHECK-NEXT:        scf.for %[[I:.+]] = {{.*}} {
// CHECK-NEXT:          scf.for %[[J:.+]] = {{.*}} {
// CHECK-NEXT:            %[[L:.+]] = memref.load %[[LSE]][%[[B]], %[[H]], %[[I]]]
// CHECK:                 math.exp
// CHECK:                 arith.cmpf oeq, %[[L]]
// CHECK:                 arith.select
// CHECK:                 memref.store %{{.+}}, %[[P]]
// A map whose rank-3 operand (per row) repeats along the last dimension.
// CHECK:         %[[M:.+]] = memref.alloc({{.*}}) : memref<?x?x?x?xf64>
// CHECK:                 %[[X:.+]] = memref.load %[[P]][%[[B2:[a-z0-9_]+]], %[[H2:[a-z0-9_]+]], %[[I2:[a-z0-9_]+]], %[[J2:[a-z0-9_]+]]]
// CHECK-NEXT:            %[[R:.+]] = memref.load %[[LSE]][%[[B2]], %[[H2]], %[[I2]]]
// CHECK-NEXT:            %[[Y:.+]] = arith.subf %[[X]], %[[R]] : f64
// CHECK-NEXT:            memref.store %[[Y]], %[[M]]
// P^T dO: lhs read as [b, h, k, i], rhs (head h / group) as [b, h / group, k, j].
// CHECK:         %[[DV:.+]] = memref.alloc({{.*}}) : memref<?x?x?x?xf64>
// CHECK:         %[[GROUP:.+]] = arith.divui
// CHECK:                 %[[HKV:.+]] = arith.divui %[[H3:.+]], %[[GROUP]]
// CHECK:                 scf.for %[[K:.+]] = {{.*}} iter_args
// CHECK-NEXT:              memref.load %[[M]][%[[B3:[a-z0-9_]+]], %[[H3]], %[[K]], %[[I3:[a-z0-9_]+]]]
// CHECK-NEXT:              memref.load %{{.+}}[%[[B3]], %[[HKV]], %[[K]], %{{.+}}]
// Group sum: result head g adds input heads g * (H / Hkv) + j.
// CHECK:         %[[SUM:.+]] = memref.alloc({{.*}}) : memref<?x?x?x?xf64>
// CHECK:                 %[[FIRST:.+]] = arith.muli
// CHECK:                 scf.for %[[JH:.+]] = {{.*}} iter_args
// CHECK-NEXT:              %[[HH:.+]] = arith.addi %[[FIRST]], %[[JH]]
// CHECK-NEXT:              memref.load %[[DV]][%{{.+}}, %[[HH]], %{{.+}}, %{{.+}}]
// Row sum from 0.
// CHECK:         %[[RS:.+]] = memref.alloc({{.*}}) : memref<?x?x?xf64>
// CHECK:                 arith.constant 0.000000e+00 : f64
// CHECK:                 arith.addf
// The store into the view.
// CHECK:         memref.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : memref<?x?x?x?xf64, strided<[?, ?, ?, ?], offset: ?>>
// CHECK-NOT:     func.func @grads(
func.func @grads(%Q: !qkv, %K: !qkv, %V: !qkv, %dV: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %lse = tile.load %LSE : !lse -> tensor<?x?x?xf32>
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p = tile.softmax_from_lse %s, %lse : !scores, tensor<?x?x?xf32> -> !scores
  %m = tile.map %p, %lse : !scores, tensor<?x?x?xf32> -> !scores {
  ^bb0(%x: f32, %r: f32):
    %y = arith.subf %x, %r : f32
    tile.yield %y : f32
  }
  %dvh = tile.dot %m, %v transpose_lhs : !scores, !in -> !grad
  %c1 = arith.constant 1 : index
  %hkv = memref.dim %V, %c1 : !qkv
  %dv = tile.sum_head_groups %dvh, %hkv : !grad -> !grad
  %rows = tile.row_reduce sum %m : !scores -> tensor<?x?x?xf32>
  tile.store %dv, %dV : !grad, !qkv
  tile.store %rows, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// An op without an f64 meaning inside a map is an error at that op.
func.func @bits(%A: memref<?x?x?x?xf32>, %O: memref<?x?x?x?xf32>) {
  %a = tile.load %A : memref<?x?x?x?xf32> -> tensor<?x?x?x?xf32>
  %m = tile.map %a : tensor<?x?x?x?xf32> -> tensor<?x?x?x?xf32> {
  ^bb0(%x: f32):
    // expected-error @below {{cannot be evaluated in f64 by the float64 reference}}
    %i = arith.bitcast %x : f32 to i32
    %y = arith.bitcast %i : i32 to f32
    tile.yield %y : f32
  }
  tile.store %m, %O : tensor<?x?x?x?xf32>, memref<?x?x?x?xf32>
  return
}

// -----

// Ops of the tiled form are not written form.
func.func @tiled(%O: memref<?x?x?x?xf32>) {
  // expected-error @below {{is not part of the written form the float64 reference evaluates}}
  tile.block_event full
  return
}
