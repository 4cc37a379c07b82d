// RUN: tilefuse-opt %s -split-input-file --tile-order-row-blocks | FileCheck %s

// tile-order-row-blocks: with row_order=descending in the module's tile.config, the program of
// row-block index x in a forward grid (and in the backward's dQ grid) takes row block R - 1 - x;
// every use of the induction variable reads the reversed index. Without it, and in the
// backward's other grids, nothing changes.

// CHECK-LABEL: func.func @grid
// CHECK:         %[[R:.+]] = arith.ceildivui
// CHECK:         scf.forall (%[[B:.+]], %[[H:.+]], %[[X:.+]]) in (%{{.+}}, %{{.+}}, %[[R]])
// CHECK:           %[[LAST:.+]] = arith.subi %[[R]], %c1
// CHECK:           %[[ROW:.+]] = arith.subi %[[LAST]], %[[X]]
// CHECK:           %[[ROW0:.+]] = arith.muli %[[ROW]], %c64
// CHECK:           tile.block_load %{{.+}}[%[[B]], %[[H]], %[[ROW0]]]
// CHECK-NOT:       %[[X]]
// CHECK:         } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
module attributes {tile.config = #tile.config<"row_order=descending">} {
  func.func @grid(%Q: memref<?x?x?x64xbf16>, %O: memref<?x?x?x64xbf16>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %b = memref.dim %Q, %c0 : memref<?x?x?x64xbf16>
    %h = memref.dim %Q, %c1 : memref<?x?x?x64xbf16>
    %m = memref.dim %Q, %c2 : memref<?x?x?x64xbf16>
    %rows = arith.ceildivui %m, %c64 : index
    scf.forall (%i, %j, %x) in (%b, %h, %rows) {
      %r0 = arith.muli %x, %c64 : index
      %q = tile.block_load %Q[%i, %j, %r0] bound %m : memref<?x?x?x64xbf16> -> tensor<64x64xbf16>
      tile.block_store %q, %O[%i, %j, %r0] bound %m : tensor<64x64xbf16>, memref<?x?x?x64xbf16>
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

// A split grid (rank 4) reverses its row-block dimension, not the split; a static row-block
// count gives a constant R - 1.
// CHECK-LABEL: func.func @split_grid
// CHECK:         scf.forall (%{{.+}}, %{{.+}}, %[[X:.+]], %[[S:.+]]) in (2, 3, 5, 4)
// CHECK:           %[[ROW:.+]] = arith.subi %c4, %[[X]]
// CHECK:           arith.muli %[[ROW]], %c64
// CHECK:           arith.muli %[[S]], %c64
module attributes {tile.config = #tile.config<"row_order=descending">} {
  func.func @split_grid(%Q: memref<2x3x320x64xbf16>, %O: memref<2x3x320x64xbf16>) {
    %c64 = arith.constant 64 : index
    scf.forall (%i, %j, %x, %s) in (2, 3, 5, 4) {
      %r0 = arith.muli %x, %c64 : index
      %k0 = arith.muli %s, %c64 : index
      %q = tile.block_load %Q[%i, %j, %r0] bound %k0 : memref<2x3x320x64xbf16> -> tensor<64x64xbf16>
      tile.block_store %q, %O[%i, %j, %r0] bound %k0 : tensor<64x64xbf16>, memref<2x3x320x64xbf16>
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>, #tile.grid<split>]}
    return
  }
}

// -----

// Ascending (unset, or row_order=ascending) grids and the backward's dK/dV grid keep their
// order.
// CHECK-LABEL: func.func @ascending
// CHECK-NOT:     arith.subi
// CHECK:         return
// CHECK-LABEL: func.func @backward_grid
// CHECK-NOT:     arith.subi
// CHECK:         return
module attributes {tile.config = #tile.config<"row_order=ascending">} {
  func.func @ascending(%Q: memref<2x3x320x64xbf16>, %O: memref<2x3x320x64xbf16>) {
    %c64 = arith.constant 64 : index
    %c320 = arith.constant 320 : index
    scf.forall (%i, %j, %x) in (2, 3, 5) {
      %r0 = arith.muli %x, %c64 : index
      %q = tile.block_load %Q[%i, %j, %r0] bound %c320 : memref<2x3x320x64xbf16> -> tensor<64x64xbf16>
      tile.block_store %q, %O[%i, %j, %r0] bound %c320 : tensor<64x64xbf16>, memref<2x3x320x64xbf16>
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

module attributes {tile.config = #tile.config<"row_order=descending">} {
  func.func @backward_grid(%Q: memref<2x3x320x64xbf16>, %O: memref<2x3x320x64xbf16>) {
    %c64 = arith.constant 64 : index
    %c320 = arith.constant 320 : index
    scf.forall (%i, %j, %x) in (2, 3, 5) {
      %r0 = arith.muli %x, %c64 : index
      %q = tile.block_load %Q[%i, %j, %r0] bound %c320 : memref<2x3x320x64xbf16> -> tensor<64x64xbf16>
      tile.block_store %q, %O[%i, %j, %r0] bound %c320 : tensor<64x64xbf16>, memref<2x3x320x64xbf16>
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>], tile.backward_phase = "key_gradients"}
    return
  }
}

// -----

// The backward: its dQ grid (query_gradients, the ordered loop's row block r runs r + 1 key
// blocks under a causal mask) is reversed; its dK/dV grid (key block j runs the query blocks
// from j on, longest first already, @backward_grid above) is not.
// CHECK-LABEL: func.func @query_gradients_grid
// CHECK:         scf.forall (%{{.+}}, %{{.+}}, %[[X:.+]]) in (2, 3, 5)
// CHECK:           %[[ROW:.+]] = arith.subi %c4, %[[X]]
// CHECK:           arith.muli %[[ROW]], %c64
module attributes {tile.config = #tile.config<"row_order=descending">} {
  func.func @query_gradients_grid(%Q: memref<2x3x320x64xbf16>, %O: memref<2x3x320x64xbf16>) {
    %c64 = arith.constant 64 : index
    %c320 = arith.constant 320 : index
    scf.forall (%i, %j, %x) in (2, 3, 5) {
      %r0 = arith.muli %x, %c64 : index
      %q = tile.block_load %Q[%i, %j, %r0] bound %c320 : memref<2x3x320x64xbf16> -> tensor<64x64xbf16>
      tile.block_store %q, %O[%i, %j, %r0] bound %c320 : tensor<64x64xbf16>, memref<2x3x320x64xbf16>
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>], tile.backward_phase = "query_gradients"}
    return
  }
}
