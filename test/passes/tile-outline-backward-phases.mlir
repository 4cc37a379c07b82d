// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics --tile-outline-backward-phases \
// RUN:   | FileCheck %s

// tile-outline-backward-phases: each grid of a tiled backward becomes a kernel function of its
// own, @NAME_PHASE marked tile.backward_phase, taking the nine views and then the workspaces
// (D, the dQ accumulator) as arguments in the launch ABI's order; the grids' function goes.

!v = memref<?x?x?x16xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>

// CHECK-LABEL: func.func @k_backward_preprocess
// CHECK-SAME:    %{{[^:]+}}: memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>, %[[ACC:[^:]+]]: memref<?x?x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>)
// CHECK-SAME:    attributes {tile.backward_phase = "preprocess"}
// CHECK-NOT:     memref.alloc
// CHECK:         scf.forall
// CHECK:           tile.block_store %{{.+}}, %[[ACC]]
// CHECK:         } {tile.backward_phase = "preprocess"}
// CHECK-NOT:     scf.forall
// CHECK:         return
// CHECK-LABEL: func.func @k_backward_key_gradients
// CHECK-SAME:    (%{{[^:]+}}: [[V:memref<[^>]+>>]], %{{[^:]+}}: [[V]], %{{[^:]+}}: [[V]], %{{[^:]+}}: [[V]], %{{[^:]+}}: [[V]], %{{[^:]+}}: memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>, %{{[^:]+}}: [[V]], %{{[^:]+}}: [[V]], %{{[^:]+}}: [[V]], %[[D:[^:]+]]: memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>, %[[ACC2:[^:]+]]: memref<?x?x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>)
// CHECK:         scf.forall
// CHECK:           tile.block_load %[[D]]
// CHECK:           tile.block_atomic_add %{{.+}}, %[[ACC2]]
// CHECK:         } {tile.backward_phase = "key_gradients"}
// CHECK-LABEL: func.func @k_backward_query_gradients
// CHECK:         } {tile.backward_phase = "query_gradients"}
// CHECK-NOT:   func.func @k_backward(
func.func @k_backward(%q: !v, %k: !v, %vv: !v, %o: !v, %do: !v, %lse: !l, %dq: !v, %dk: !v,
                      %dv: !v) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %B = memref.dim %q, %c0 : !v
  %H = memref.dim %q, %c1 : !v
  %M = memref.dim %q, %c2 : !v
  %d = memref.alloc(%B, %H, %M) {tile.workspace = "row_reduce"} : memref<?x?x?xf32>
  %acc = memref.alloc(%B, %H, %M) {tile.workspace = "dq_accumulator"} : memref<?x?x?x16xf32>
  scf.forall (%b, %h, %i) in (%B, %H, %M) {
    tile.block_store %zero, %acc[%b, %h, %i] bound %M : tensor<16x16xf32>, memref<?x?x?x16xf32>
  } {tile.backward_phase = "preprocess"}
  scf.forall (%b, %h, %i) in (%B, %H, %M) {
    %rows = tile.block_load %d[%b, %h, %i] bound %M : memref<?x?x?xf32> -> tensor<16xf32>
    %s = tile.broadcast %rows : tensor<16xf32> -> tensor<16x16xf32>
    tile.block_atomic_add %s, %acc[%b, %h, %i] bound %M : tensor<16x16xf32>, memref<?x?x?x16xf32>
  } {tile.backward_phase = "key_gradients"}
  scf.forall (%b, %h, %i) in (%B, %H, %M) {
    %a = tile.block_load %acc[%b, %h, %i] bound %M : memref<?x?x?x16xf32> -> tensor<16x16xf32>
    tile.block_store %a, %dq[%b, %h, %i] bound %M : tensor<16x16xf32>, !v
  } {tile.backward_phase = "query_gradients"}
  return
}

// -----

!v = memref<?x?x?x16xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>

// A buffer the launch does not provide.
func.func @k_backward(%q: !v, %k: !v, %vv: !v, %o: !v, %do: !v, %lse: !l, %dq: !v, %dk: !v,
                      %dv: !v) {
  %c0 = arith.constant 0 : index
  %B = memref.dim %q, %c0 : !v
  %d = memref.alloc(%B, %B, %B) {tile.workspace = "row_reduce"} : memref<?x?x?xf32>
  // expected-error @below {{is not a workspace the backward's launch provides}}
  %x = memref.alloc(%B, %B, %B) : memref<?x?x?xf32>
  scf.forall (%b) in (%B) {
  } {tile.backward_phase = "preprocess"}
  return
}

// -----

!v = memref<?x?x?x16xbf16, strided<[?, ?, ?, 1], offset: ?>>

// expected-error @below {{a tiled backward takes the nine views}}
func.func @k_backward(%q: !v) {
  %c0 = arith.constant 0 : index
  %B = memref.dim %q, %c0 : !v
  scf.forall (%b) in (%B) {
  } {tile.backward_phase = "preprocess"}
  return
}
