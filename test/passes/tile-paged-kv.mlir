// RUN: tilefuse-opt %s -split-input-file -tile-paged-kv -verify-diagnostics | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -tile-paged-kv=page-size=16 -verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=FIXED

// With page-size the caches' types fix their rows a page (the third dimension), written paged
// or not; the other views keep theirs.
// FIXED-LABEL: func.func @attention
// FIXED-SAME:    %arg0: memref<?x?x?x64xbf16
// FIXED-SAME:    %arg1: memref<?x?x16x64xbf16
// FIXED-SAME:    %arg2: memref<?x?x16x64xbf16
// FIXED-SAME:    %arg3: memref<?x?x?x64xbf16
// FIXED-LABEL: func.func @written_paged
// FIXED-SAME:    %arg1: memref<?x?x16x64xbf16
// FIXED-SAME:    %arg2: memref<?x?x16x64xbf16

// Any variant becomes paged: the page table and the lengths are appended to the signature, and
// the loads a dot takes as its right operand (K in Q.K^T, V in P.V) read through them.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @attention
// CHECK-SAME:    (%[[Q:[^:]+]]: memref<{{[^%]+}}>, %[[K:[^:]+]]: memref<{{[^%]+}}>, %[[V:[^:]+]]: memref<{{[^%]+}}>, %{{[^:]+}}: memref<{{[^%]+}}>, %{{[^:]+}}: memref<{{[^%]+}}>, %[[T:[^:]+]]: memref<?x?xi32, strided<[?, 1]>>, %[[L:[^:]+]]: memref<?xi32>)
// CHECK-SAME:    attributes {tile.paged_kv}
// CHECK:         tile.load %[[Q]] :
// CHECK:         tile.load %[[K]] pages %[[T]] lengths %[[L]] :
// CHECK:         tile.load %[[V]] pages %[[T]] lengths %[[L]] :
func.func @attention(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
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

// A kernel written paged by hand (the two trailing arguments) is marked and left as it is.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
!table = memref<?x?xi32, strided<[?, 1]>>

// CHECK-LABEL: func.func @written_paged
// CHECK-SAME:    attributes {tile.paged_kv}
// CHECK-COUNT-2: pages %arg5 lengths %arg6
func.func @written_paged(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse, %T: !table,
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

// Paged, K's dimensions are a cache's (pages, heads, page rows, D): a kernel that reads K's
// length from the view would read the page size.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @reads_n(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %c2 = arith.constant 2 : index
  // expected-error@+1 {{tile-paged-kv: uses the key/value view 1 other than by its load}}
  %n = memref.dim %K, %c2 : !qkv
  // expected-note@+1 {{the paged load}}
  %k = tile.load %K : !qkv -> !in
  %q = tile.load %Q : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ult, %kv, %n : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
