// RUN: tilefuse-opt %s -split-input-file -tile-tiling="block-m=64 block-n=32" -verify-diagnostics | FileCheck %s

// A paged cache (tile.load `pages`/`lengths`): each program reads its sequence's length, and the
// key loops, the key and value block loads and the key-bound mask all take it; the block loads
// read through the page table.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
!table = memref<?x?xi32, strided<[?, 1]>>

// CHECK-LABEL: func.func @paged
// CHECK-SAME:    %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[V:[a-z0-9_]+]]: memref<{{[^%]+}}>, %{{[^:]+}}: memref<{{[^%]+}}>, %{{[^:]+}}: memref<{{[^%]+}}>, %[[T:[a-z0-9_]+]]: memref<?x?xi32, strided<[?, 1]>>, %[[L:[a-z0-9_]+]]: memref<?xi32>)
// CHECK-NOT:     memref.dim %[[K]], %c2
// CHECK:         scf.forall (%[[BI:[a-z0-9_]+]], %{{.+}}, %{{.+}}) in
// CHECK:           %[[LEN:.+]] = memref.load %[[L]][%[[BI]]] : memref<?xi32>
// CHECK:           %[[N:.+]] = arith.index_castui %[[LEN]] : i32 to index
// CHECK:           %[[BLOCKS:.+]] = arith.ceildivui %[[N]], %{{.+}} : index
// CHECK:           scf.for %[[J:.+]] = %{{.+}} to %[[BLOCKS]]
// CHECK:             tile.block_load %[[K]][%[[BI]], %{{.+}}, %{{.+}}] bound %[[N]] pages %[[T]] : {{.+}}, memref<?x?xi32, strided<[?, 1]>> -> tensor<32x64xbf16>
// CHECK:             tile.block_mask
// CHECK:               arith.cmpi ult, %{{.+}}, %[[N]] : index
// CHECK:           tile.block_load %[[V]][%[[BI]], %{{.+}}, %{{.+}}] bound %[[N]] pages %[[T]]
func.func @paged(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse, %T: !table,
                 %L: memref<?xi32>) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K pages %T lengths %L : !qkv, !table, memref<?xi32> -> !in
  %v = tile.load %V pages %T lengths %L : !qkv, !table, memref<?xi32> -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// Keys and values paged alike, or neither.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
!table = memref<?x?xi32, strided<[?, 1]>>

func.func @half_paged(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse, %T: !table,
                      %L: memref<?xi32>) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K pages %T lengths %L : !qkv, !table, memref<?xi32> -> !in
  // expected-error@+1 {{keys and values must be paged alike}}
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
