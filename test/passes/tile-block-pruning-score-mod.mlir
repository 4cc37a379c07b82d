// RUN: tilefuse-opt %s -split-input-file --tile-block-pruning --canonicalize | FileCheck %s

// A mask that a score modifier follows drops nothing for good: f(-inf) may be finite (a soft cap
// turns it into -cap), so the masked scores keep a probability. Such a mask cannot make a block
// empty: the loop keeps its whole range (no scan is left after folding) and no block is skipped.
// Where it keeps every score it is the identity, so full blocks still run without it.

// CHECK-LABEL: func.func @mask_then_cap
// CHECK-NOT:     scf.while
// CHECK:         scf.for %{{.+}} = %c0 to %[[NB:[a-z0-9_]+]] step
// CHECK:           %[[FULL:.+]] = scf.if %{{.+}} -> (tensor<16x16xf32>) {
// CHECK:             tile.block_mask
// CHECK:             tile.block_score_mod
// CHECK:           } else {
// CHECK-NOT:         tile.block_mask
// CHECK:             tile.block_score_mod
// CHECK:           }
// CHECK-NOT:       scf.if
// CHECK:           scf.yield %[[FULL]]
func.func @mask_then_cap(%row0: index, %nb: index, %q: tensor<16x16xbf16>, %k: tensor<16x16xbf16>,
                         %init: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %cap = arith.constant 2.0 : f32
  %r = scf.for %j = %c0 to %nb step %c1 iter_args(%acc = %init) -> (tensor<16x16xf32>) {
    %col0 = arith.muli %j, %c16 : index
    %s = tile.block_dot %q, %k transpose_rhs : tensor<16x16xbf16>, tensor<16x16xbf16> -> tensor<16x16xf32>
    %m = tile.block_mask %s at(%c0, %c0, %row0, %col0) : tensor<16x16xf32> {
    ^bb0(%b: index, %h: index, %qi: index, %kv: index):
      %keep = arith.cmpi ule, %kv, %qi : index
      tile.yield %keep : i1
    }
    %t = tile.block_score_mod %m at(%c0, %c0, %row0, %col0) : tensor<16x16xf32> {
    ^bb0(%x: f32, %b: index, %h: index, %qi: index, %kv: index):
      %y = arith.divf %x, %cap : f32
      %th = math.tanh %y : f32
      %z = arith.mulf %th, %cap : f32
      tile.yield %z : f32
    }
    %next = arith.addf %acc, %t : tensor<16x16xf32>
    scf.yield %next : tensor<16x16xf32>
  } {tile.kv_loop}
  return %r : tensor<16x16xf32>
}

// -----

// A mask after the score modifier prunes as usual: the range scans stay.
// CHECK-LABEL: func.func @cap_then_mask
// CHECK:         scf.while
// CHECK:         scf.while
func.func @cap_then_mask(%row0: index, %nb: index, %q: tensor<16x16xbf16>, %k: tensor<16x16xbf16>,
                         %init: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %cap = arith.constant 2.0 : f32
  %r = scf.for %j = %c0 to %nb step %c1 iter_args(%acc = %init) -> (tensor<16x16xf32>) {
    %col0 = arith.muli %j, %c16 : index
    %s = tile.block_dot %q, %k transpose_rhs : tensor<16x16xbf16>, tensor<16x16xbf16> -> tensor<16x16xf32>
    %t = tile.block_score_mod %s at(%c0, %c0, %row0, %col0) : tensor<16x16xf32> {
    ^bb0(%x: f32, %b: index, %h: index, %qi: index, %kv: index):
      %y = arith.divf %x, %cap : f32
      %th = math.tanh %y : f32
      %z = arith.mulf %th, %cap : f32
      tile.yield %z : f32
    }
    %m = tile.block_mask %t at(%c0, %c0, %row0, %col0) : tensor<16x16xf32> {
    ^bb0(%b: index, %h: index, %qi: index, %kv: index):
      %keep = arith.cmpi ule, %kv, %qi : index
      tile.yield %keep : i1
    }
    %next = arith.addf %acc, %m : tensor<16x16xf32>
    scf.yield %next : tensor<16x16xf32>
  } {tile.kv_loop}
  return %r : tensor<16x16xf32>
}
