// RUN: tilefuse-opt %s -tile-tiling="block-m=64 block-n=32" -tile-online-softmax -tile-split-kv | FileCheck %s

// Split-KV on a packed batch (tile-varlen): the partials are a padded batch's, at workspace row
// s·B + b (b the grid's sequence index) and the row within the sequence, bounded by its length;
// the merge stores O and LSE packed, at the sequence's first row cu[b], as the unsplit kernel
// does. The tiled input comes from tile-tiling: the stores' batch index is the offsets read at
// the program's sequence.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @varlen
// CHECK-SAME:    %[[O:[^:]+]]: memref<?x?x?x64xbf16, {{[^%]+}}>, %[[LSE:[^:]+]]: memref<?x?x?xf32, {{[^%]+}}>, %[[CUQ:[^:]+]]: memref<?xi32>, %[[CUK:[^:]+]]: memref<?xi32>, %[[OPART:[^:]+]]: memref<?x?x?x64xf32>, %[[LPART:[^:]+]]: memref<?x?x?xf32>, %[[COUNTERS:[^:]+]]: memref<?x?x?xi32>, %[[S:[^:]+]]: index)
// CHECK-SAME:    attributes {tile.split_kv, tile.varlen}
// CHECK:         scf.forall (%[[B:[^,]+]], %[[H:[^,]+]], %[[RB:[^,]+]], %[[SPLIT:[^)]+]]) in (%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %[[S]])
// CHECK:           %[[FIRST:.+]] = memref.load %[[CUQ]][%[[B]]] : memref<?xi32>
// CHECK:           %[[START:.+]] = arith.index_castui %[[FIRST]] : i32 to index
// CHECK:           %[[PART:.+]] = arith.addi %{{.+}}, %[[B]] : index
// CHECK:           tile.block_store %{{.+}}, %[[OPART]][%[[PART]], %[[H]], %[[ROW:[0-9]+]]] bound %[[LEN:[0-9]+]] :
// CHECK:           tile.block_store %{{.+}}, %[[LPART]][%[[PART]], %[[H]], %[[ROW]]] bound %[[LEN]] :
// CHECK:           tile.split_arrive %[[COUNTERS]][%[[B]], %[[H]], %[[RB]]] count %[[S]]
// CHECK:             tile.block_store %{{.+}}, %[[O]][%[[START]], %[[H]], %[[ROW]]] bound %[[LEN]] :
// CHECK:             tile.block_store %{{.+}}, %[[LSE]][%[[START]], %[[H]], %[[ROW]]] bound %[[LEN]] :
func.func @varlen(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse,
                  %cuq: memref<?xi32>, %cuk: memref<?xi32>) attributes {tile.varlen} {
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
