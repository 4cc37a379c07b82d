// RUN: tilefuse-opt %s -split-input-file --tile-tiling --tile-online-softmax \
// RUN:   --tile-block-pruning=instrument=true | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file --tile-tiling --tile-online-softmax \
// RUN:   --tile-block-pruning | FileCheck %s --check-prefix=NOINST --implicit-check-not=tile.block_event

// tile-block-pruning evaluates the block_mask regions over each block's index intervals: the
// key/value range shrinks to the blocks that may keep a score (two scf.while scans), and inside
// it empty blocks pass the loop values through, full blocks run a copy of the body with no mask,
// and only partial blocks apply it. With instrument=true each visited block reports its class.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// CHECK-LABEL: func.func @causal
// CHECK-SAME:    (%{{[a-z0-9_]+}}: memref<{{[^%]+}}>, %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>,
// CHECK:         %[[N:.+]] = memref.dim %[[K]], %c2{{(_[0-9]+)?}} :
// CHECK:         %[[NB:.+]] = arith.ceildivui %[[N]], %{{.+}} : index
// CHECK:         scf.forall (%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[RI:[a-z0-9_]+]]) in
// CHECK:           %[[ROW0:.+]] = arith.muli %[[RI]], %{{.+}} : index
//
// Leading empty blocks: j goes up from 0 while j != #blocks and block j keeps nothing.
// CHECK:           %[[LO:.+]] = scf.while (%[[JLO:[a-z0-9_]+]] = %{{.+}}) : (index) -> index {
// CHECK-NEXT:        %[[MORE:.+]] = arith.cmpi ne, %[[JLO]], %[[NB]] : index
// CHECK-NEXT:        %[[EMPTY:.+]] = scf.if %[[MORE]] -> (i1) {
// CHECK:             } else {
// CHECK-NEXT:          %[[F:.+]] = arith.constant false
// CHECK-NEXT:          scf.yield %[[F]] : i1
// CHECK-NEXT:        }
// CHECK-NEXT:        scf.condition(%[[EMPTY]]) %[[JLO]] : index
// CHECK-NEXT:      } do {
// CHECK-NEXT:      ^bb0(%[[J1:[a-z0-9_]+]]: index):
// CHECK-NEXT:        %[[NEXT:.+]] = arith.addi %[[J1]], %{{.+}} : index
// CHECK-NEXT:        scf.yield %[[NEXT]] : index
// CHECK-NEXT:      }
//
// Trailing empty blocks: j goes down from #blocks to LO while block j - 1 keeps nothing.
// CHECK:           %[[HI:.+]] = scf.while (%[[JHI:[a-z0-9_]+]] = %[[NB]]) : (index) -> index {
// CHECK-NEXT:        %[[MORE2:.+]] = arith.cmpi ne, %[[JHI]], %[[LO]] : index
// CHECK-NEXT:        scf.if %[[MORE2]] -> (i1) {
// CHECK-NEXT:          arith.subi %[[JHI]], %{{.+}} : index
// CHECK:             scf.condition
// CHECK:           } do {
// CHECK-NEXT:      ^bb0(%[[J2:[a-z0-9_]+]]: index):
// CHECK-NEXT:        %[[PREV:.+]] = arith.subi %[[J2]], %{{.+}} : index
// CHECK-NEXT:        scf.yield %[[PREV]] : index
// CHECK-NEXT:      }
//
// The fused loop runs over [LO, HI) only.
// CHECK-NOT:       scf.for
// CHECK:           %[[RES:.+]]:3 = scf.for %[[J:[a-z0-9_]+]] = %[[LO]] to %[[HI]] step %{{.+}} iter_args(%[[M:[a-z0-9_]+]] = %{{.+}}, %[[L:[a-z0-9_]+]] = %{{.+}}, %[[ACC:[a-z0-9_]+]] = %{{.+}}) -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
//
// The block's rows and columns as intervals: [row0, row0 + 63] x [j * 64, j * 64 + 63].
// CHECK:             %[[BC:.+]] = arith.constant 64 : index
// CHECK-NEXT:        %[[COL0:.+]] = arith.muli %[[J]], %[[BC]] : index
// CHECK:             %[[C63:.+]] = arith.constant 63 : index
// CHECK-NEXT:        %[[ROWHI:.+]] = arith.addi %[[ROW0]], %[[C63]] : index
// kv <= q may hold somewhere in the block iff col0 <= row0 + 63.
// CHECK:             arith.cmpi sle, %[[COL0]], %[[ROWHI]] : index
//
// Nothing kept -> pass (m, l, acc) through; else partial -> masked body; full -> unmasked copy.
// CHECK:             %[[OUTER:.+]]:3 = scf.if %{{[a-z0-9_]+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK-NEXT:          %[[INNER:.+]]:3 = scf.if %{{[a-z0-9_]+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK:                 tile.block_dot %{{.+}} transpose_rhs
// CHECK:                 %[[MASKED:.+]] = tile.block_mask
// CHECK-NEXT:            ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:              arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK:                 tile.reduce max %[[MASKED]]
// CHECK:                 math.exp2
// CHECK:                 tile.block_dot %{{.+}} acc
// CHECK-NEXT:            tile.block_event partial
// CHECK-NEXT:            scf.yield
// CHECK-NEXT:          } else {
// CHECK-NOT:             tile.block_mask
// CHECK:                 %[[S:.+]] = tile.block_dot %{{.+}} transpose_rhs
// CHECK-NOT:             tile.block_mask
// CHECK:                 %[[T:.+]] = arith.mulf %[[S]], %{{.+}} : tensor<64x64xf32>
// CHECK-NOT:             tile.block_mask
// CHECK:                 tile.reduce max %[[T]]
// CHECK-NOT:             tile.block_mask
// CHECK:                 math.exp2
// CHECK-NOT:             tile.block_mask
// CHECK:                 tile.block_dot %{{.+}} acc
// CHECK-NEXT:            tile.block_event full
// CHECK-NEXT:            scf.yield
// CHECK-NEXT:          }
// CHECK-NEXT:          scf.yield %[[INNER]]#0, %[[INNER]]#1, %[[INNER]]#2
// CHECK-NEXT:        } else {
// CHECK-NEXT:          scf.yield %[[M]], %[[L]], %[[ACC]]
// CHECK-NEXT:        }
// CHECK-NEXT:        scf.yield %[[OUTER]]#0, %[[OUTER]]#1, %[[OUTER]]#2
// CHECK-NEXT:      } {tile.kv_loop}
// CHECK-NOT:       tile.block_mask
// CHECK:           tile.block_store

// NOINST-LABEL: func.func @causal
// NOINST:         scf.while
// NOINST:         scf.while
// NOINST:         scf.for
// NOINST:           scf.if
// NOINST:             scf.if
// NOINST:               tile.block_mask
// NOINST:             } else {
// NOINST-NOT:           tile.block_mask
// NOINST:             }
// NOINST:         } {tile.kv_loop}
func.func @causal(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by 0.125 : !scores
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// No user mask: the key bound alone still makes the last block partial (any N works), so the
// loop is split all the same; the full copy has no mask at all.

// CHECK-LABEL: func.func @attention
// CHECK-SAME:    (%{{[a-z0-9_]+}}: memref<{{[^%]+}}>, %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>,
// CHECK:         %[[N:.+]] = memref.dim %[[K]], %c2{{(_[0-9]+)?}} :
// CHECK:         %[[LO:.+]] = scf.while
// CHECK:         %[[HI:.+]] = scf.while
// CHECK:         scf.for %[[J:[a-z0-9_]+]] = %[[LO]] to %[[HI]] step
// CHECK-NEXT:      %{{.+}} = arith.constant 64 : index
// CHECK-NEXT:      %[[COL0:.+]] = arith.muli %[[J]], %{{.+}} : index
// The block may keep something iff it starts before N.
// CHECK:           arith.cmpi slt, %[[COL0]], %[[N]] : index
// CHECK:           scf.if %{{.+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK-NEXT:        scf.if %{{.+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK:               tile.block_mask
// CHECK-NEXT:          ^bb0(%{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:            %[[TRUE:.+]] = arith.constant true
// CHECK-NEXT:            %[[IN:.+]] = arith.cmpi ult, %[[KV]], %[[N]] : index
// CHECK-NEXT:            arith.andi %[[TRUE]], %[[IN]] : i1
// CHECK:               tile.block_event partial
// CHECK-NEXT:          scf.yield
// CHECK-NEXT:        } else {
// CHECK-NOT:           tile.block_mask
// CHECK:               tile.block_event full
// CHECK-NEXT:          scf.yield
// CHECK-NEXT:        }
// CHECK:           } else {
// CHECK-NEXT:        scf.yield
// CHECK-NEXT:      }
// CHECK:         } {tile.kv_loop}

// NOINST-LABEL: func.func @attention
// NOINST:         scf.for
// NOINST:           scf.if
// NOINST:             scf.if
// NOINST:         } {tile.kv_loop}
func.func @attention(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by 0.125 : !scores
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// arith.shli is not modelled by the interval evaluator: every block in range "may drop", so the
// mask stays (partial branch) and the result is still correct, just not pruned. The key bound
// conjunct is still understood and still trims the range.

// CHECK-LABEL: func.func @unmodelled_op
// CHECK:         scf.while
// CHECK:         scf.while
// CHECK:         scf.for
// The "may drop" condition folds to the constant true.
// CHECK:           scf.if %{{.+}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK-NEXT:        scf.if %true{{(_[0-9]+)?}} -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
// CHECK:               tile.block_mask
// CHECK-NEXT:          ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:            %[[ONE:.+]] = arith.constant 1 : index
// CHECK-NEXT:            %[[TWICE:.+]] = arith.shli %[[KV]], %[[ONE]] : index
// CHECK-NEXT:            %[[USER:.+]] = arith.cmpi ule, %[[TWICE]], %[[QI]] : index
// CHECK-NEXT:            %[[IN:.+]] = arith.cmpi ult, %[[KV]], %{{.+}} : index
// CHECK-NEXT:            %[[KEEP:.+]] = arith.andi %[[USER]], %[[IN]] : i1
// CHECK-NEXT:            tile.yield %[[KEEP]] : i1
// CHECK:               tile.block_event partial
// CHECK:             } else {
// CHECK-NOT:           tile.block_mask
// CHECK:               tile.block_event full
// CHECK:         } {tile.kv_loop}
func.func @unmodelled_op(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %c1 = arith.constant 1 : index
    %twice = arith.shli %kv, %c1 : index
    %keep = arith.cmpi ule, %twice, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// Sliding window: both window edges are modelled (addi of a constant, signed compares), so
// blocks outside the band leave the range and the ones inside it run unmasked.

// CHECK-LABEL: func.func @sliding_window
// CHECK:         scf.while
// CHECK:         scf.while
// CHECK:         scf.for
// CHECK:           scf.if
// CHECK-NEXT:        scf.if
// CHECK:               tile.block_mask
// CHECK:               tile.block_event partial
// CHECK:             } else {
// CHECK-NOT:           tile.block_mask
// CHECK:               tile.block_event full
// CHECK:         } {tile.kv_loop}
func.func @sliding_window(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %left = arith.constant 100 : index
  %right = arith.constant 20 : index
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %lo = arith.addi %kv, %left : index
    %hi = arith.addi %qi, %right : index
    %after = arith.cmpi sge, %lo, %qi : index
    %before = arith.cmpi sle, %kv, %hi : index
    %keep = arith.andi %after, %before : i1
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}

// -----

// Hand-written tiled form (tiling and online softmax leave it alone). A mask region that reads a
// value computed in the loop body cannot be re-evaluated for another block: the loop is left
// exactly as it was.

// CHECK-LABEL: func.func @mask_reads_body_value
// CHECK-NOT:     scf.while
// CHECK-NOT:     scf.if
// CHECK:         scf.for
// CHECK:           %[[LIM:.+]] = arith.addi
// CHECK:           tile.block_mask
// CHECK:             arith.cmpi ult, %{{.+}}, %[[LIM]] : index
// CHECK-NOT:       scf.if
// CHECK-NOT:       tile.block_event
// CHECK:         } {tile.kv_loop}
func.func @mask_reads_body_value(%K: memref<?x?x?x64xbf16>, %q: tensor<64x64xbf16>, %b: index,
                                 %h: index, %row: index, %n: index, %nb: index) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %init = arith.constant dense<0xFF800000> : tensor<64xf32>
  %r = scf.for %j = %c0 to %nb step %c1 iter_args(%m = %init) -> (tensor<64xf32>) {
    %col = arith.muli %j, %c32 : index
    %kb = tile.block_load %K[%b, %h, %col] bound %n : memref<?x?x?x64xbf16> -> tensor<32x64xbf16>
    %s = tile.block_dot %q, %kb transpose_rhs : tensor<64x64xbf16>, tensor<32x64xbf16> -> tensor<64x32xf32>
    %lim = arith.addi %col, %c32 : index
    %u = tile.block_mask %s at (%b, %h, %row, %col) : tensor<64x32xf32> {
    ^bb0(%bb: index, %hh: index, %qi: index, %kv: index):
      %keep = arith.cmpi ult, %kv, %lim : index
      tile.yield %keep : i1
    }
    %bm = tile.reduce max %u : tensor<64x32xf32> -> tensor<64xf32>
    %mn = arith.maximumf %m, %bm : tensor<64xf32>
    scf.yield %mn : tensor<64xf32>
  } {tile.kv_loop}
  return %r : tensor<64xf32>
}

// -----

// Only loops marked tile.kv_loop are pruned.

// CHECK-LABEL: func.func @not_a_kv_loop
// CHECK-NOT:     scf.while
// CHECK-NOT:     scf.if
// CHECK:         scf.for
// CHECK:           tile.block_mask
// CHECK:         return
func.func @not_a_kv_loop(%K: memref<?x?x?x64xbf16>, %q: tensor<64x64xbf16>, %b: index,
                         %h: index, %row: index, %n: index, %nb: index) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %init = arith.constant dense<0xFF800000> : tensor<64xf32>
  %r = scf.for %j = %c0 to %nb step %c1 iter_args(%m = %init) -> (tensor<64xf32>) {
    %col = arith.muli %j, %c32 : index
    %kb = tile.block_load %K[%b, %h, %col] bound %n : memref<?x?x?x64xbf16> -> tensor<32x64xbf16>
    %s = tile.block_dot %q, %kb transpose_rhs : tensor<64x64xbf16>, tensor<32x64xbf16> -> tensor<64x32xf32>
    %u = tile.block_mask %s at (%b, %h, %row, %col) : tensor<64x32xf32> {
    ^bb0(%bb: index, %hh: index, %qi: index, %kv: index):
      %keep = arith.cmpi ult, %kv, %n : index
      tile.yield %keep : i1
    }
    %bm = tile.reduce max %u : tensor<64x32xf32> -> tensor<64xf32>
    %mn = arith.maximumf %m, %bm : tensor<64xf32>
    scf.yield %mn : tensor<64xf32>
  }
  return %r : tensor<64xf32>
}

// -----

// A key/value loop with a step other than 1 keeps its range (the scans step by one block) but
// its blocks are still classified.

// CHECK-LABEL: func.func @strided_kv_loop
// CHECK-NOT:     scf.while
// CHECK:         %[[C2:.+]] = arith.constant 2 : index
// CHECK:         scf.for %{{.+}} = %{{.+}} to %{{.+}} step %[[C2]]
// CHECK:           scf.if
// CHECK-NEXT:        scf.if
// CHECK:               tile.block_mask
// CHECK:               tile.block_event partial
// CHECK:             } else {
// CHECK-NOT:           tile.block_mask
// CHECK:               tile.block_event full
// CHECK:         } {tile.kv_loop}
func.func @strided_kv_loop(%K: memref<?x?x?x64xbf16>, %q: tensor<64x64xbf16>, %b: index,
                           %h: index, %row: index, %n: index, %nb: index) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %init = arith.constant dense<0xFF800000> : tensor<64xf32>
  %r = scf.for %j = %c0 to %nb step %c2 iter_args(%m = %init) -> (tensor<64xf32>) {
    %col = arith.muli %j, %c32 : index
    %kb = tile.block_load %K[%b, %h, %col] bound %n : memref<?x?x?x64xbf16> -> tensor<32x64xbf16>
    %s = tile.block_dot %q, %kb transpose_rhs : tensor<64x64xbf16>, tensor<32x64xbf16> -> tensor<64x32xf32>
    %u = tile.block_mask %s at (%b, %h, %row, %col) : tensor<64x32xf32> {
    ^bb0(%bb: index, %hh: index, %qi: index, %kv: index):
      %keep = arith.cmpi ult, %kv, %n : index
      tile.yield %keep : i1
    }
    %bm = tile.reduce max %u : tensor<64x32xf32> -> tensor<64xf32>
    %mn = arith.maximumf %m, %bm : tensor<64xf32>
    scf.yield %mn : tensor<64xf32>
  } {tile.kv_loop}
  return %r : tensor<64xf32>
}

// -----

// A backward kernel's loop over query blocks (tile.query_loop, from tile-tiling-backward) is
// pruned the same way, with the intervals the other way round: the row interval follows the
// loop ([i * 32, i * 32 + 31]) and the column interval is the program's ([col0, col0 + 15]).
// Causal: query blocks before the key block are empty and leave the range (the scan from the
// bottom stops at the first block with i * 32 + 31 >= col0); full blocks drop the mask.
// CHECK-LABEL: func.func @query_loop
// CHECK-SAME:    (%[[COL0:[a-z0-9_]+]]: index, %[[NQB:[a-z0-9_]+]]: index,
// CHECK:         %[[LO:.+]] = scf.while (%[[I:[a-z0-9_]+]] = %{{.+}}) : (index) -> index {
// CHECK:           %[[R:.+]] = arith.muli %[[I]], %{{.+}} : index
// CHECK:           %[[RHI:.+]] = arith.addi %[[R]], %{{.+}} : index
// CHECK:           arith.cmpi sle, %[[COL0]], %[[RHI]] : index
// CHECK:         scf.for %{{.+}} = %[[LO]] to %{{.+}} step
// CHECK:           scf.if
// CHECK:             scf.if
// CHECK:               tile.block_mask
// CHECK:               tile.block_event  partial
// CHECK:             } else {
// CHECK-NOT:           tile.block_mask
// CHECK:               tile.block_event  full
// CHECK:         } {tile.query_loop}
func.func @query_loop(%col0: index, %nqb: index, %q: tensor<32x16xbf16>, %k: tensor<16x16xbf16>,
                      %init: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %r = scf.for %i = %c0 to %nqb step %c1 iter_args(%acc = %init) -> (tensor<16x16xf32>) {
    %row0 = arith.muli %i, %c32 : index
    %s = tile.block_dot %q, %k transpose_rhs : tensor<32x16xbf16>, tensor<16x16xbf16> -> tensor<32x16xf32>
    %m = tile.block_mask %s at(%c0, %c0, %row0, %col0) : tensor<32x16xf32> {
    ^bb0(%b: index, %h: index, %qi: index, %kv: index):
      %keep = arith.cmpi ule, %kv, %qi : index
      tile.yield %keep : i1
    }
    %next = tile.block_dot %m, %q acc %acc transpose_lhs : tensor<32x16xf32>, tensor<32x16xbf16>, tensor<16x16xf32> -> tensor<16x16xf32>
    scf.yield %next : tensor<16x16xf32>
  } {tile.query_loop}
  return %r : tensor<16x16xf32>
}

// -----

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// A mask whose window is a constant of its own region (no canonicalizer has hoisted it): the
// interval code before the loop gets a copy of the constant, not a use of the region's (which
// would not dominate it: the module would not verify).
// CHECK-LABEL: func.func @window_constant_in_region
// CHECK:         arith.constant 100 : index
// CHECK:         scf.while
// CHECK:         } {tile.kv_loop}
func.func @window_constant_in_region(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kvi: index):
    %window = arith.constant 100 : index
    %causal = arith.cmpi ule, %kvi, %qi : index
    %reach = arith.addi %kvi, %window : index
    %near = arith.cmpi ugt, %reach, %qi : index
    %keep = arith.andi %causal, %near : i1
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
