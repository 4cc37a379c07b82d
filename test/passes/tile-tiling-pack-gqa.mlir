// RUN: tilefuse-opt %s -split-input-file --tile-tiling="block-m=64 block-n=32 pack-gqa=true" \
// RUN:   | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file --tile-tiling="block-m=64 block-n=32 pack-gqa=true" \
// RUN:   --tile-online-softmax --tile-block-pruning | FileCheck %s --check-prefix=PRUNE
// RUN: tilefuse-opt %s -split-input-file --tile-specialize="config=pack_gqa=true" \
// RUN:   --tile-tiling="block-m=64 block-n=32" | FileCheck %s --check-prefix=CONFIG
// RUN: tilefuse-opt %s -split-input-file --tile-tiling="block-m=64 block-n=32 pack-gqa=true" \
// RUN:   --canonicalize | FileCheck %s --check-prefix=UNIT

// GQA packing: the G = H / Hkv query heads that share a key/value head are one program's rows.
// The grid runs over (batch, kv head, ceil(G·M / Br)); Q, O and LSE are addressed at the
// group's first head with `packed M` (row p is row p mod M of head first + p div M), the score
// and mask regions see each row's own head and query index the same way, and K and V are read
// at the grid's kv head.

!qo = memref<?x8x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!kv = memref<?x2x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x8x?xf32, strided<[?, ?, 1], offset: ?>>
!qin = tensor<?x8x?x64xbf16>
!kvin = tensor<?x2x?x64xbf16>
!scores = tensor<?x8x?x?xf32>
!out = tensor<?x8x?x64xf32>

// CHECK-LABEL: func.func @gqa_causal
// CHECK-SAME:    (%[[Q:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[V:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[O:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[LSE:[a-z0-9_]+]]: memref<{{[^%]+}}>)
// CHECK:         %[[B:.+]] = memref.dim %[[Q]], %c0{{(_[0-9]+)?}} :
// CHECK:         %[[H:.+]] = memref.dim %[[Q]], %c1{{(_[0-9]+)?}} :
// CHECK:         %[[M:.+]] = memref.dim %[[Q]], %c2{{(_[0-9]+)?}} :
// CHECK:         %[[HKV:.+]] = memref.dim %[[K]], %c1{{(_[0-9]+)?}} :
// CHECK:         %[[GROUP:.+]] = arith.divui %[[H]], %[[HKV]] : index
// CHECK:         %[[ROWS:.+]] = arith.muli %[[GROUP]], %[[M]] : index
// CHECK:         %[[ROWBLOCKS:.+]] = arith.ceildivui %[[ROWS]], %{{.+}} : index
// CHECK:         scf.forall (%[[BI:[a-z0-9_]+]], %[[HK:[a-z0-9_]+]], %[[RI:[a-z0-9_]+]]) in (%[[B]], %[[HKV]], %[[ROWBLOCKS]]) {
// CHECK:           %[[ROW0:.+]] = arith.muli %[[RI]], %{{.+}} : index
// CHECK:           %[[H0:.+]] = arith.muli %[[HK]], %[[GROUP]] : index
// CHECK:           tile.block_load %[[Q]][%[[BI]], %[[H0]], %[[ROW0]]] bound %[[ROWS]] packed %[[M]] :
// CHECK:           tile.block_load %[[K]][%[[BI]], %[[HK]], %{{.+}}] bound %{{.+}} :
// CHECK-NOT:         packed
// CHECK:           tile.block_mask %{{.+}} at{{ ?}}(%[[BI]], %[[H0]], %[[ROW0]], %{{.+}}) packed %[[M]] :
// CHECK:           tile.block_load %[[V]][%[[BI]], %[[HK]], %{{.+}}] bound %{{.+}} :
// CHECK:           tile.block_store %{{.+}}, %[[O]][%[[BI]], %[[H0]], %[[ROW0]]] bound %[[ROWS]] packed %[[M]] :
// CHECK:           tile.block_store %{{.+}}, %[[LSE]][%[[BI]], %[[H0]], %[[ROW0]]] bound %[[ROWS]] packed %[[M]] :
// CHECK:         } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}

// Pruning classifies a block of packed rows over the heads and query rows it holds: its first
// and last packed rows unpacked (div/rem by M); within one head the rows are exact, across
// heads every row of a head may be in it.
// PRUNE-LABEL: func.func @gqa_causal
// PRUNE:         scf.forall
// PRUNE:           arith.divui %{{.+}}, %[[M:.+]] : index
// PRUNE:           arith.remui %{{.+}}, %[[M]] : index
// PRUNE:           arith.cmpi eq
// PRUNE:           arith.select
// PRUNE:           scf.for {{.+}} {
// PRUNE:             tile.block_mask {{.+}} packed

// The module's tile.config sets it as well as the option does.
// CONFIG-LABEL: func.func @gqa_causal
// CONFIG:         tile.block_load %{{.+}} bound %{{.+}} packed %{{.+}} :
func.func @gqa_causal(%Q: !qo, %K: !kv, %V: !kv, %O: !qo, %LSE: !lse) {
  %q = tile.load %Q : !qo -> !qin
  %k = tile.load %K : !kv -> !kvin
  %v = tile.load %V : !kv -> !kvin
  %s = tile.dot %q, %k transpose_rhs : !qin, !kvin -> !scores
  %t = tile.scale %s : !scores
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kvi: index):
    %keep = arith.cmpi ule, %kvi, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x8x?xf32>
  %o = tile.dot %p, %v : !scores, !kvin -> !out
  tile.store %o, %O : !out, !qo
  tile.store %lse, %LSE : tensor<?x8x?xf32>, !lse
  return
}

// -----

// One key/value head (MQA), packed: the grid's head dimension has one program, and the mapped
// forall keeps it through canonicalization (an unmapped one would lose it, and the GPU grid would
// be read one dimension off).
// UNIT-LABEL: func.func @mqa
// UNIT:         scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}}, 1, %{{.+}}) {
// UNIT:         } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
!q1 = memref<?x8x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!kv1 = memref<?x1x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse1 = memref<?x8x?xf32, strided<[?, ?, 1], offset: ?>>
func.func @mqa(%Q: !q1, %K: !kv1, %V: !kv1, %O: !q1, %LSE: !lse1) {
  %q = tile.load %Q : !q1 -> tensor<?x8x?x64xbf16>
  %k = tile.load %K : !kv1 -> tensor<?x1x?x64xbf16>
  %v = tile.load %V : !kv1 -> tensor<?x1x?x64xbf16>
  %s = tile.dot %q, %k transpose_rhs : tensor<?x8x?x64xbf16>, tensor<?x1x?x64xbf16> -> tensor<?x8x?x?xf32>
  %p, %lse = tile.softmax %s : tensor<?x8x?x?xf32> -> tensor<?x8x?x?xf32>, tensor<?x8x?xf32>
  %o = tile.dot %p, %v : tensor<?x8x?x?xf32>, tensor<?x1x?x64xbf16> -> tensor<?x8x?x64xf32>
  tile.store %o, %O : tensor<?x8x?x64xf32>, !q1
  tile.store %lse, %LSE : tensor<?x8x?xf32>, !lse1
  return
}
