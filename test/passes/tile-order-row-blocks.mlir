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

// -----

// row_order=grouped: the program at launch position L = x + R (h + H b) takes, in groups of G
// (batch, head) pairs (G = the pairs whose K and V, 2 R Br D element bytes each, fit in
// group-bytes, at most B H), row block R - 1 - w / G' and pair g G + w % G' (g = L / (G R),
// w = L - g G R, G' = min(G, B H - g G)); the batch and head are the pair's quotient and
// remainder by H. Every use of the three induction variables reads the mapped ones.
// CHECK-LABEL: func.func @grouped
// CHECK:         scf.forall (%[[B:.+]], %[[H:.+]], %[[X:.+]]) in (%[[NB:.+]], %[[NH:.+]], %[[R:.+]])
// CHECK-DAG:       %[[PAIRBYTES:.+]] = arith.muli %[[R]], %c16384
// CHECK-DAG:       %[[PAIRS:.+]] = arith.muli %[[NB]], %[[NH]]
// CHECK:           %[[FIT:.+]] = arith.divui %c26214400{{.*}}, %{{.+}}
// CHECK:           %[[G:.+]] = arith.minui %{{.+}}, %{{.+}}
// CHECK:           %[[HB:.+]] = arith.muli %[[NH]], %[[B]]
// CHECK:           %[[PH:.+]] = arith.addi %[[H]], %[[HB]]
// CHECK:           %[[RP:.+]] = arith.muli %[[R]], %[[PH]]
// CHECK:           %[[L:.+]] = arith.addi %[[X]], %[[RP]]
// CHECK:           %[[GT:.+]] = arith.muli %[[G]], %[[R]]
// CHECK:           %[[GI:.+]] = arith.divui %[[L]], %[[GT]]
// CHECK:           %[[FIRST:.+]] = arith.muli %[[GI]], %[[G]]
// CHECK:           %[[LEFT:.+]] = arith.subi %[[PAIRS]], %[[FIRST]]
// CHECK:           %[[SIZE:.+]] = arith.minui %[[G]], %[[LEFT]]
// CHECK:           %[[W:.+]] = arith.subi %[[L]], %{{.+}}
// CHECK:           %[[LAST:.+]] = arith.subi %[[R]], %c1
// CHECK:           %[[LEVEL:.+]] = arith.divui %[[W]], %[[SIZE]]
// CHECK:           %[[ROW:.+]] = arith.subi %[[LAST]], %[[LEVEL]]
// CHECK:           %[[MEMBER:.+]] = arith.remui %[[W]], %[[SIZE]]
// CHECK:           %[[PAIR:.+]] = arith.addi %[[FIRST]], %[[MEMBER]]
// CHECK:           %[[BATCH:.+]] = arith.divui %[[PAIR]], %[[NH]]
// CHECK:           %[[HEAD:.+]] = arith.remui %[[PAIR]], %[[NH]]
// CHECK:           %[[ROW0:.+]] = arith.muli %[[ROW]], %c64
// CHECK:           tile.block_load %{{.+}}[%[[BATCH]], %[[HEAD]], %[[ROW0]]]
// CHECK:           tile.block_store %{{.+}}[%[[BATCH]], %[[HEAD]], %[[ROW0]]]
// CHECK:         } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
module attributes {tile.config = #tile.config<"row_order=grouped">} {
  func.func @grouped(%Q: memref<?x?x?x64xbf16>, %O: memref<?x?x?x64xbf16>) {
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

// A grouped split grid (decode) is only reversed.
// CHECK-LABEL: func.func @grouped_split
// CHECK:         scf.forall (%{{.+}}, %{{.+}}, %[[X:.+]], %{{.+}}) in (2, 3, 5, 4)
// CHECK:           %[[ROW:.+]] = arith.subi %c4, %[[X]]
// CHECK:           arith.muli %[[ROW]], %c64
module attributes {tile.config = #tile.config<"row_order=grouped">} {
  func.func @grouped_split(%Q: memref<2x3x320x64xbf16>, %O: memref<2x3x320x64xbf16>) {
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
