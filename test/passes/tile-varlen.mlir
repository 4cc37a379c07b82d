// RUN: tilefuse-opt %s -split-input-file -tile-varlen -verify-diagnostics | FileCheck %s

// Any variant becomes varlen: the queries' and the keys' sequence offsets are appended to the
// signature; Q's load and the O and LSE stores pack through the first, the loads a dot takes
// as its right operand (K in Q.K^T, V in P.V) through the second. Regions and other ops stay.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @causal
// CHECK-SAME:    (%[[Q:[^:]+]]: memref<{{[^%]+}}>, %[[K:[^:]+]]: memref<{{[^%]+}}>, %[[V:[^:]+]]: memref<{{[^%]+}}>, %[[O:[^:]+]]: memref<{{[^%]+}}>, %[[LSE:[^:]+]]: memref<{{[^%]+}}>, %[[CUQ:[^:]+]]: memref<?xi32>, %[[CUK:[^:]+]]: memref<?xi32>)
// CHECK-SAME:    attributes {tile.varlen}
// CHECK:         tile.load %[[Q]] sequences %[[CUQ]] :
// CHECK:         tile.load %[[K]] sequences %[[CUK]] :
// CHECK:         tile.load %[[V]] sequences %[[CUK]] :
// CHECK:         memref.dim %[[Q]], %{{.+}}
// CHECK:         tile.mask
// CHECK:         tile.store %{{.+}}, %[[O]] sequences %[[CUQ]] :
// CHECK:         tile.store %{{.+}}, %[[LSE]] sequences %[[CUQ]] :
func.func @causal(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  // The head count keeps its meaning in a packed batch.
  %c1 = arith.constant 1 : index
  %H = memref.dim %Q, %c1 : !qkv
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    %head = arith.cmpi ult, %h, %H : index
    %both = arith.andi %keep, %head : i1
    tile.yield %both : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// A kernel written varlen by hand (the two trailing arguments) is marked and left as it is.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @written_varlen
// CHECK-SAME:    attributes {tile.varlen}
// CHECK:         tile.load %arg0 sequences %arg5 :
// CHECK-COUNT-2: sequences %arg6 :
// CHECK-COUNT-2: sequences %arg5 :
func.func @written_varlen(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse,
                          %cuq: memref<?xi32>, %cuk: memref<?xi32>) {
  %q = tile.load %Q sequences %cuq : !qkv -> !in
  %k = tile.load %K sequences %cuk : !qkv -> !in
  %v = tile.load %V sequences %cuk : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O sequences %cuq : !out, !qkv
  tile.store %lse, %LSE sequences %cuq : tensor<?x?x?xf32>, !lse
  return
}

// -----

// Packed, a view's rows are the longest sequence's: a region reading Q's length would see it,
// not its own sequence's.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @reads_length(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  // expected-note @below {{the packed access}}
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %c2 = arith.constant 2 : index
  // expected-error @below {{tile-varlen: uses view 0 other than by its loads, stores and its head or head-dimension sizes}}
  %M = memref.dim %Q, %c2 : !qkv
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ult, %qi, %M : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// Over a paged cache (chunked prefill) only the queries pack: the key and value loads stay
// paged, each sequence's keys its lengths' rows of its pages; the key offsets are appended (the
// launch ABI's one varlen form) but not read.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
!table = memref<?x?xi32, strided<[?, 1]>>

// CHECK-LABEL: func.func @paged
// CHECK-SAME:    %[[T:[^:]+]]: memref<?x?xi32, strided<[?, 1]>>, %[[L:[^:]+]]: memref<?xi32>, %[[CUQ:[^:]+]]: memref<?xi32>, %[[CUK:[^:]+]]: memref<?xi32>)
// CHECK-SAME:    attributes {tile.paged_kv, tile.varlen}
// CHECK:         tile.load %{{.+}} sequences %[[CUQ]] :
// CHECK:         tile.load %{{.+}} pages %[[T]] lengths %[[L]] :
// CHECK:         tile.load %{{.+}} pages %[[T]] lengths %[[L]] :
// CHECK-NOT:     %[[CUK]]
// CHECK:         tile.store %{{.+}} sequences %[[CUQ]] :
// CHECK:         tile.store %{{.+}} sequences %[[CUQ]] :
func.func @paged(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse, %T: !table,
                 %L: memref<?xi32>) attributes {tile.paged_kv} {
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

// Written varlen over a paged cache by hand: the queries through the next-to-last argument,
// the keys paged.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>
!table = memref<?x?xi32, strided<[?, 1]>>

// CHECK-LABEL: func.func @written_paged_varlen
// CHECK-SAME:    attributes {tile.paged_kv, tile.varlen}
// CHECK:         tile.load %arg0 sequences %arg7 :
func.func @written_paged_varlen(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse, %T: !table,
                                %L: memref<?xi32>, %cuq: memref<?xi32>, %cuk: memref<?xi32>)
    attributes {tile.paged_kv} {
  %q = tile.load %Q sequences %cuq : !qkv -> !in
  %k = tile.load %K pages %T lengths %L : !qkv, !table, memref<?xi32> -> !in
  %v = tile.load %V pages %T lengths %L : !qkv, !table, memref<?xi32> -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O sequences %cuq : !out, !qkv
  tile.store %lse, %LSE sequences %cuq : tensor<?x?x?xf32>, !lse
  return
}

// -----

// One load read both as queries and as keys (self-attention of one view) cannot take one
// sequence offset.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @shared_load(%Q: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  // expected-error @below {{tile-varlen: a load read both as keys}}
  %q = tile.load %Q : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %q transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
