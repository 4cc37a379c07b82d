// RUN: tilefuse-opt %s -split-input-file -tile-tiling="block-m=64 block-n=32" -verify-diagnostics | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -tile-tiling="block-m=64 block-n=32 row-align-end" \
// RUN:   -verify-diagnostics | FileCheck %s --check-prefix=END

// A packed batch (tile.load / tile.store `sequences`): the grid runs over the sequences (the
// offsets' size minus one); each program reads its sequence's first rows and lengths from the
// offsets. The blocks take the first row as their batch index (a packed view's batch index
// counts rows) and keep the rows within the sequence, bounded by its length, as the mask
// regions see them; a program past its sequence's end has no keys (no key block, no copy).

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @varlen
// CHECK-SAME:    (%[[Q:[^:]+]]: memref<{{[^%]+}}>, %[[K:[^:]+]]: memref<{{[^%]+}}>, %[[V:[^:]+]]: memref<{{[^%]+}}>, %[[O:[^:]+]]: memref<{{[^%]+}}>, %[[LSE:[^:]+]]: memref<{{[^%]+}}>, %[[CUQ:[^:]+]]: memref<?xi32>, %[[CUK:[^:]+]]: memref<?xi32>)
// CHECK:         %[[OFFSETS:.+]] = memref.dim %[[CUQ]], %{{.+}} : memref<?xi32>
// CHECK:         %[[SEQUENCES:.+]] = arith.subi %[[OFFSETS]], %{{.+}} : index
// CHECK:         scf.forall (%[[B:[^,]+]], %[[H:[^,]+]], %{{.+}}) in (%[[SEQUENCES]],
// CHECK:           %[[QS:.+]] = arith.index_castui %{{.+}} : i32 to index
// CHECK:           %[[QE:.+]] = arith.index_castui %{{.+}} : i32 to index
// CHECK:           %[[M:.+]] = arith.subi %[[QE]], %[[QS]] : index
// CHECK:           memref.load %[[CUK]][%[[B]]] : memref<?xi32>
// CHECK:           %[[KS:.+]] = arith.index_castui %{{.+}} : i32 to index
// CHECK:           %[[KE:.+]] = arith.index_castui %{{.+}} : i32 to index
// CHECK:           %[[KEYS:.+]] = arith.subi %[[KE]], %[[KS]] : index
// CHECK:           %[[ROW0:.+]] = arith.muli
// CHECK:           %[[LIVE:.+]] = arith.cmpi ult, %[[ROW0]], %[[M]] : index
// CHECK:           %[[N:.+]] = arith.select %[[LIVE]], %[[KEYS]], %{{.+}} : index
// CHECK:           %[[LOOPEND:.+]] = arith.ceildivui %[[N]], %{{.+}} : index
// CHECK:           tile.block_load %[[Q]][%[[QS]], %[[H]], %[[ROW0]]] bound %[[M]]
// CHECK:           scf.for %{{.+}} = %{{.+}} to %[[LOOPEND]]
// CHECK:             %[[COL0:.+]] = arith.muli
// CHECK:             tile.block_load %[[K]][%[[KS]], %{{.+}}, %[[COL0]]] bound %[[N]]
// CHECK:             tile.block_mask %{{.+}} at(%[[B]], %[[H]], %[[ROW0]], %[[COL0]])
// CHECK:               arith.cmpi ult, %{{.+}}, %[[N]] : index
// CHECK:           tile.block_load %[[V]][%[[KS]], %{{.+}}, %{{.+}}] bound %[[N]]
// CHECK:           tile.block_store %{{.+}}, %[[O]][%[[QS]], %[[H]], %[[ROW0]]] bound %[[M]]
// CHECK:           tile.block_store %{{.+}}, %[[LSE]][%[[QS]], %[[H]], %[[ROW0]]] bound %[[M]]
// Row blocks aligned to each sequence's end (row_align=end): s = ceil(len / Br)·Br - len; row
// block r starts at r·Br - s, the first at 0 (clipped), and stores its rows up to
// min(len, r·Br + Br - s); a program past the sequence's end starts at or past len, so it is
// not live, as before.
// END-LABEL: func.func @varlen
// END:         scf.forall
// END:           %[[QS:.+]] = arith.index_castui
// END:           %[[M:.+]] = arith.subi %{{.+}}, %[[QS]] : index
// END:           %[[START:.+]] = arith.muli %{{.+}}, %[[BR:.+]] : index
// END:           %[[BLOCKS:.+]] = arith.ceildivui %[[M]], %{{.+}} : index
// END:           %[[SPAN:.+]] = arith.muli %[[BLOCKS]], %{{.+}} : index
// END:           %[[S:.+]] = arith.subi %[[SPAN]], %[[M]] : index
// END:           %[[CLIPPED:.+]] = arith.cmpi ult, %[[START]], %[[S]] : index
// END:           %[[SHIFTED:.+]] = arith.subi %[[START]], %[[S]] : index
// END:           %[[ROW0:.+]] = arith.select %[[CLIPPED]], %{{.+}}, %[[SHIFTED]] : index
// END:           %[[END:.+]] = arith.addi %[[START]], %{{.+}} : index
// END:           %[[OWN:.+]] = arith.subi %[[END]], %[[S]] : index
// END:           %[[STOREBOUND:.+]] = arith.minui %[[M]], %[[OWN]] : index
// END:           %[[LIVE:.+]] = arith.cmpi ult, %[[ROW0]], %[[M]] : index
// END:           tile.block_load %{{.+}}[%{{.+}}, %{{.+}}, %[[ROW0]]] bound %[[M]]
// END:           tile.block_mask %{{.+}} at(%{{.+}}, %{{.+}}, %[[ROW0]], %{{.+}})
// END:           tile.block_store %{{.+}}[%{{.+}}, %{{.+}}, %[[ROW0]]] bound %[[STOREBOUND]]
// END:           tile.block_store %{{.+}}[%{{.+}}, %{{.+}}, %[[ROW0]]] bound %[[STOREBOUND]]
func.func @varlen(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse,
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

// The output is per query row: packed through the queries' offsets, or not at all, as Q is.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @unpacked_output(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse,
                           %cuq: memref<?xi32>, %cuk: memref<?xi32>) {
  %q = tile.load %Q sequences %cuq : !qkv -> !in
  %k = tile.load %K sequences %cuk : !qkv -> !in
  %v = tile.load %V sequences %cuk : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  // expected-error @below {{the output and logsumexp are per query row}}
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE sequences %cuq : tensor<?x?x?xf32>, !lse
  return
}

// -----

// GQA-packed (pack_gqa): a program's rows are the G query heads' rows of its sequence, G times
// the sequence's length; the blocks take the length (at least 1) as `packed` (a row's head and
// index within the sequence come from it), the group's first head and the sequence's first row.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @packed_gqa
// CHECK:         %[[G:.+]] = arith.divui
// CHECK:         scf.forall (%[[B:[^,]+]], %[[HKV:[^,]+]], %{{.+}}) in
// CHECK:           %[[QS:.+]] = arith.index_castui %{{.+}} : i32 to index
// CHECK:           %[[QE:.+]] = arith.index_castui %{{.+}} : i32 to index
// CHECK:           %[[LEN:.+]] = arith.subi %[[QE]], %[[QS]] : index
// CHECK:           %[[ROWS:.+]] = arith.muli %[[G]], %[[LEN]] : index
// CHECK:           %[[H0:.+]] = arith.muli %[[HKV]], %[[G]] : index
// CHECK:           %[[HEADROWS:.+]] = arith.maxui %[[LEN]], %{{.+}} : index
// CHECK:           tile.block_load %{{.+}}[%[[QS]], %[[H0]], %{{.+}}] bound %[[ROWS]] packed %[[HEADROWS]]
// CHECK:           tile.block_store %{{.+}}[%[[QS]], %[[H0]], %{{.+}}] bound %[[ROWS]] packed %[[HEADROWS]]
module attributes {tile.config = #tile.config<"pack_gqa=true">} {
  func.func @packed_gqa(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse,
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
}
