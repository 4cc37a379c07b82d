// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics --tile-tiling="block-m=64 block-n=32" \
// RUN:   | FileCheck %s --implicit-check-not=tile.load --implicit-check-not=tile.dot \
// RUN:       --implicit-check-not=tile.scale --implicit-check-not=tile.softmax \
// RUN:       --implicit-check-not=tile.store --implicit-check-not=tile.mask \
// RUN:       --implicit-check-not=tile.score_mod
// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics --tile-tiling="block-m=128 block-n=16" \
// RUN:   | FileCheck %s --check-prefix=ASYM
// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics --tile-tiling \
// RUN:   | FileCheck %s --check-prefix=DEFAULT
// RUN: not tilefuse-opt %s -split-input-file --tile-tiling="block-m=0" -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ZERO

// tile-tiling turns the written form into one program per (batch, head, Br rows of Q) and three
// sweeps over Bc-column blocks of K/V (row max, row sum, normalized P x V). The implicit
// check-nots say that no written-form op survives in any function that tiles.

// Non-positive block sizes are refused before anything is rewritten.
// ZERO: error: tile-tiling: block sizes must be positive (block-m=0, block-n=64)

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// Plain attention: the grid, the three sweeps, and the key bound as the only mask.

// CHECK-LABEL: func.func @attention
// CHECK-SAME:    (%[[Q:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[V:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[O:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[LSE:[a-z0-9_]+]]: memref<{{[^%]+}}>)
// CHECK:         %[[B:.+]] = memref.dim %[[Q]], %c0{{(_[0-9]+)?}} :
// CHECK:         %[[H:.+]] = memref.dim %[[Q]], %c1{{(_[0-9]+)?}} :
// CHECK:         %[[M:.+]] = memref.dim %[[Q]], %c2{{(_[0-9]+)?}} :
// CHECK:         %[[HKV:.+]] = memref.dim %[[K]], %c1{{(_[0-9]+)?}} :
// CHECK:         %[[N:.+]] = memref.dim %[[K]], %c2{{(_[0-9]+)?}} :
// CHECK:         %[[GROUP:.+]] = arith.divui %[[H]], %[[HKV]] : index
// CHECK:         %[[C64:.+]] = arith.constant 64 : index
// CHECK:         %[[ROWBLOCKS:.+]] = arith.ceildivui %[[M]], %[[C64]] : index
// CHECK:         %[[C32:.+]] = arith.constant 32 : index
// CHECK:         %[[COLBLOCKS:.+]] = arith.ceildivui %[[N]], %[[C32]] : index
// CHECK:         scf.forall (%[[BI:[a-z0-9_]+]], %[[HI:[a-z0-9_]+]], %[[RI:[a-z0-9_]+]]) in (%[[B]], %[[H]], %[[ROWBLOCKS]]) {
// CHECK:           %[[BR:.+]] = arith.constant 64 : index
// CHECK:           %[[ROW0:.+]] = arith.muli %[[RI]], %[[BR]] : index
// CHECK:           %[[HK:.+]] = arith.divui %[[HI]], %[[GROUP]] : index
// CHECK:           %[[QB:.+]] = tile.block_load %[[Q]][%[[BI]], %[[HI]], %[[ROW0]]] bound %[[M]] : memref<{{.+}}> -> tensor<64x64xbf16>
//
// Sweep 1: the row max.
// CHECK:           %[[MAX:.+]] = scf.for %[[J:[a-z0-9_]+]] = %{{.+}} to %[[COLBLOCKS]] step %{{.+}} iter_args(%[[MCUR:[a-z0-9_]+]] = %{{.+}}) -> (tensor<64xf32>) {
// CHECK:             %[[BC:.+]] = arith.constant 32 : index
// CHECK:             %[[COL0:.+]] = arith.muli %[[J]], %[[BC]] : index
// CHECK:             %[[KB:.+]] = tile.block_load %[[K]][%[[BI]], %[[HK]], %[[COL0]]] bound %[[N]] : memref<{{.+}}> -> tensor<32x64xbf16>
// CHECK:             %[[S:.+]] = tile.block_dot %[[QB]], %[[KB]] transpose_rhs : tensor<64x64xbf16>, tensor<32x64xbf16> -> tensor<64x32xf32>
// CHECK:             %[[SCALE:.+]] = arith.constant dense<1.250000e-01> : tensor<64x32xf32>
// CHECK:             %[[T:.+]] = arith.mulf %[[S]], %[[SCALE]] : tensor<64x32xf32>
// CHECK:             %[[MASKED:.+]] = tile.block_mask %[[T]] at(%[[BI]], %[[HI]], %[[ROW0]], %[[COL0]]) : tensor<64x32xf32> {
// CHECK-NEXT:        ^bb0(%{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:          %[[TRUE:.+]] = arith.constant true
// CHECK-NEXT:          %[[IN:.+]] = arith.cmpi ult, %[[KV]], %[[N]] : index
// CHECK-NEXT:          %[[KEEP:.+]] = arith.andi %[[TRUE]], %[[IN]] : i1
// CHECK-NEXT:          tile.yield %[[KEEP]] : i1
// CHECK-NEXT:        }
// CHECK-NEXT:        %[[BMAX:.+]] = tile.reduce max %[[MASKED]] : tensor<64x32xf32> -> tensor<64xf32>
// CHECK-NEXT:        %[[NMAX:.+]] = arith.maximumf %[[MCUR]], %[[BMAX]] : tensor<64xf32>
// CHECK-NEXT:        scf.yield %[[NMAX]] : tensor<64xf32>
// CHECK-NEXT:      } {tile.kv_loop, tile.sweep = "max"}
//
// Rows with nothing kept keep m = -inf; they are shifted by 0 instead.
// CHECK:           %[[EMPTY:.+]] = arith.cmpf oeq, %[[MAX]], %{{.+}} : tensor<64xf32>
// CHECK:           %[[MSAFE:.+]] = arith.select %[[EMPTY]], %{{.+}}, %[[MAX]] : tensor<64xi1>, tensor<64xf32>
//
// Sweep 2: the row sum of exp(s - m).
// CHECK:           %[[SUM:.+]] = scf.for %{{.+}} = %{{.+}} to %[[COLBLOCKS]] step %{{.+}} iter_args(%[[LCUR:[a-z0-9_]+]] = %{{.+}}) -> (tensor<64xf32>) {
// CHECK:             tile.block_load %[[K]]
// CHECK:             tile.block_dot %[[QB]], %{{.+}} transpose_rhs
// CHECK:             %[[MASKED2:.+]] = tile.block_mask
// CHECK:             %[[MB:.+]] = tile.broadcast %[[MSAFE]] : tensor<64xf32> -> tensor<64x32xf32>
// CHECK-NEXT:        %[[SHIFTED:.+]] = arith.subf %[[MASKED2]], %[[MB]] : tensor<64x32xf32>
// CHECK-NEXT:        %[[E:.+]] = math.exp %[[SHIFTED]] : tensor<64x32xf32>
// CHECK-NEXT:        %[[BSUM:.+]] = tile.reduce sum %[[E]] : tensor<64x32xf32> -> tensor<64xf32>
// CHECK-NEXT:        %[[NSUM:.+]] = arith.addf %[[LCUR]], %[[BSUM]] : tensor<64xf32>
// CHECK-NEXT:        scf.yield %[[NSUM]] : tensor<64xf32>
// CHECK-NEXT:      } {tile.kv_loop, tile.sweep = "sum"}
// CHECK:           %[[RL:.+]] = arith.divf %{{.+}}, %{{.+}} : tensor<64xf32>
//
// Sweep 3: acc += (exp(s - m) / l) x V.
// CHECK:           %[[PV:.+]] = scf.for %[[J3:[a-z0-9_]+]] = %{{.+}} to %[[COLBLOCKS]] step %{{.+}} iter_args(%[[ACC:[a-z0-9_]+]] = %{{.+}}) -> (tensor<64x64xf32>) {
// CHECK:             tile.block_mask
// CHECK:             math.exp
// CHECK:             %[[RLB:.+]] = tile.broadcast %[[RL]] : tensor<64xf32> -> tensor<64x32xf32>
// CHECK-NEXT:        %[[P:.+]] = arith.mulf %{{.+}}, %[[RLB]] : tensor<64x32xf32>
// CHECK:             %[[VCOL0:.+]] = arith.muli %[[J3]], %{{.+}} : index
// CHECK-NEXT:        %[[VB:.+]] = tile.block_load %[[V]][%[[BI]], %[[HK]], %[[VCOL0]]] bound %[[N]] : memref<{{.+}}> -> tensor<32x64xbf16>
// CHECK-NEXT:        %[[NACC:.+]] = tile.block_dot %[[P]], %[[VB]] acc %[[ACC]] : tensor<64x32xf32>, tensor<32x64xbf16>, tensor<64x64xf32> -> tensor<64x64xf32>
// CHECK-NEXT:        scf.yield %[[NACC]] : tensor<64x64xf32>
// CHECK-NEXT:      } {tile.kv_loop, tile.sweep = "pv"}
//
// The output and the logsumexp m + log(l), both bounded by M.
// CHECK-NEXT:      tile.block_store %[[PV]], %[[O]][%[[BI]], %[[HI]], %[[ROW0]]] bound %[[M]] : tensor<64x64xf32>, memref<{{.+}}>
// CHECK-NEXT:      %[[LOGL:.+]] = math.log %[[SUM]] : tensor<64xf32>
// CHECK-NEXT:      %[[LSEV:.+]] = arith.addf %[[MSAFE]], %[[LOGL]] : tensor<64xf32>
// CHECK-NEXT:      tile.block_store %[[LSEV]], %[[LSE]][%[[BI]], %[[HI]], %[[ROW0]]] bound %[[M]] : tensor<64xf32>, memref<{{.+}}>
// CHECK-NEXT:    }
// CHECK-NEXT:    return

// Other block sizes change every block type, and nothing else.
// ASYM-LABEL: func.func @attention
// ASYM:         %[[C128:.+]] = arith.constant 128 : index
// ASYM:         arith.ceildivui %{{.+}}, %[[C128]] : index
// ASYM:         %[[C16:.+]] = arith.constant 16 : index
// ASYM:         arith.ceildivui %{{.+}}, %[[C16]] : index
// ASYM:         scf.forall
// ASYM:           tile.block_load {{.+}} -> tensor<128x64xbf16>
// ASYM:           scf.for {{.+}} -> (tensor<128xf32>) {
// ASYM:             tile.block_load {{.+}} -> tensor<16x64xbf16>
// ASYM:             tile.block_dot {{.+}} transpose_rhs : tensor<128x64xbf16>, tensor<16x64xbf16> -> tensor<128x16xf32>
// ASYM:             arith.constant dense<1.250000e-01> : tensor<128x16xf32>
// ASYM:             tile.block_mask {{.+}} : tensor<128x16xf32>
// ASYM:             tile.reduce max {{.+}} : tensor<128x16xf32> -> tensor<128xf32>
// ASYM:           } {tile.kv_loop, tile.sweep = "max"}
// ASYM:           } {tile.kv_loop, tile.sweep = "sum"}
// ASYM:           scf.for {{.+}} -> (tensor<128x64xf32>) {
// ASYM:             tile.broadcast {{.+}} : tensor<128xf32> -> tensor<128x16xf32>
// ASYM:             tile.block_dot {{.+}} acc {{.+}} : tensor<128x16xf32>, tensor<16x64xbf16>, tensor<128x64xf32> -> tensor<128x64xf32>
// ASYM:           } {tile.kv_loop, tile.sweep = "pv"}
// ASYM:           tile.block_store {{.+}} : tensor<128x64xf32>, memref
// ASYM:           tile.block_store {{.+}} : tensor<128xf32>, memref

// Without options the blocks are 64 x 64.
// DEFAULT-LABEL: func.func @attention
// DEFAULT:         tile.block_load {{.+}} -> tensor<64x64xbf16>
// DEFAULT:         tile.block_dot {{.+}} transpose_rhs : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
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

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// Causal: the user's mask region is copied into every sweep and ANDed with the key bound; no
// second mask is added.

// CHECK-LABEL: func.func @causal
// CHECK-SAME:    (%{{[a-z0-9_]+}}: memref<{{[^%]+}}>, %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>,
// CHECK:         %[[N:.+]] = memref.dim %[[K]], %c2{{(_[0-9]+)?}} :
// CHECK:         scf.forall
// CHECK:           scf.for
// CHECK:             tile.block_mask %{{.+}} at(%{{.+}}) : tensor<64x32xf32> {
// CHECK-NEXT:        ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:          %[[USER:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:          %[[IN:.+]] = arith.cmpi ult, %[[KV]], %[[N]] : index
// CHECK-NEXT:          %[[KEEP:.+]] = arith.andi %[[USER]], %[[IN]] : i1
// CHECK-NEXT:          tile.yield %[[KEEP]] : i1
// CHECK-NEXT:        }
// CHECK-NOT:         tile.block_mask
// CHECK:           } {tile.kv_loop, tile.sweep = "max"}
// CHECK:           scf.for
// CHECK:             tile.block_mask %{{.+}} at(%{{.+}}) : tensor<64x32xf32> {
// CHECK-NEXT:        ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:          %[[USER:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:          %[[IN:.+]] = arith.cmpi ult, %[[KV]], %[[N]] : index
// CHECK-NEXT:          %[[KEEP:.+]] = arith.andi %[[USER]], %[[IN]] : i1
// CHECK-NEXT:          tile.yield %[[KEEP]] : i1
// CHECK-NEXT:        }
// CHECK-NOT:         tile.block_mask
// CHECK:           } {tile.kv_loop, tile.sweep = "sum"}
// CHECK:           scf.for
// CHECK:             tile.block_mask %{{.+}} at(%{{.+}}) : tensor<64x32xf32> {
// CHECK-NEXT:        ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:          %[[USER:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:          %[[IN:.+]] = arith.cmpi ult, %[[KV]], %[[N]] : index
// CHECK-NEXT:          %[[KEEP:.+]] = arith.andi %[[USER]], %[[IN]] : i1
// CHECK-NEXT:          tile.yield %[[KEEP]] : i1
// CHECK-NEXT:        }
// CHECK-NOT:         tile.block_mask
// CHECK:           } {tile.kv_loop, tile.sweep = "pv"}
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

// A score_mod becomes a block_score_mod at the block's origin; since no mask follows it, the key
// bound gets a mask of its own after it.

// CHECK-LABEL: func.func @softcap
// CHECK-SAME:    (%{{[a-z0-9_]+}}: memref<{{[^%]+}}>, %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>,
// CHECK:         %[[N:.+]] = memref.dim %[[K]], %c2{{(_[0-9]+)?}} :
// CHECK:         scf.forall (%[[BI:[a-z0-9_]+]], %[[HI:[a-z0-9_]+]], %{{[a-z0-9_]+}}) in
// CHECK:           %[[ROW0:.+]] = arith.muli
// CHECK:           scf.for
// CHECK:             %[[COL0:.+]] = arith.muli
// CHECK:             %[[T:.+]] = arith.mulf %{{.+}}, %{{.+}} : tensor<64x32xf32>
// CHECK-NEXT:        %[[MOD:.+]] = tile.block_score_mod %[[T]] at(%[[BI]], %[[HI]], %[[ROW0]], %[[COL0]]) : tensor<64x32xf32> {
// CHECK-NEXT:        ^bb0(%[[SC:[a-z0-9_]+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT:          %[[CAP:.+]] = arith.constant 3.000000e+01 : f32
// CHECK-NEXT:          %[[X:.+]] = arith.divf %[[SC]], %[[CAP]] : f32
// CHECK-NEXT:          %[[TH:.+]] = math.tanh %[[X]] : f32
// CHECK-NEXT:          %[[R:.+]] = arith.mulf %[[TH]], %[[CAP]] : f32
// CHECK-NEXT:          tile.yield %[[R]] : f32
// CHECK-NEXT:        }
// CHECK-NEXT:        %[[BOUND:.+]] = tile.block_mask %[[MOD]] at(%[[BI]], %[[HI]], %[[ROW0]], %[[COL0]]) : tensor<64x32xf32> {
// CHECK-NEXT:        ^bb0(%{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:          %[[TRUE:.+]] = arith.constant true
// CHECK-NEXT:          %[[IN:.+]] = arith.cmpi ult, %[[KV]], %[[N]] : index
// CHECK-NEXT:          %[[KEEP:.+]] = arith.andi %[[TRUE]], %[[IN]] : i1
// CHECK-NEXT:          tile.yield %[[KEEP]] : i1
// CHECK-NEXT:        }
// CHECK-NEXT:        tile.reduce max %[[BOUND]]
// CHECK:           } {tile.kv_loop, tile.sweep = "max"}
func.func @softcap(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by 0.125 : !scores
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %score, %cap : f32
    %th = math.tanh %x : f32
    %r = arith.mulf %th, %cap : f32
    tile.yield %r : f32
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// A score_mod reading a value defined above it (the head count), then a mask: the regions keep
// using that value, the chain keeps its order, and the key bound joins the (last) user mask. The
// logsumexp is not stored, so nothing computes it.

// CHECK-LABEL: func.func @bias_then_mask
// CHECK-SAME:    (%[[Q:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>,
// CHECK:         %[[HEADS:.+]] = memref.dim %[[Q]], %[[C1:[a-z0-9_]+]] :
// CHECK:         %[[N:.+]] = memref.dim %[[K]], %c2{{(_[0-9]+)?}} :
// CHECK:         scf.forall
// CHECK:           scf.for
// CHECK:             %[[MOD:.+]] = tile.block_score_mod
// CHECK:               arith.index_cast %[[HEADS]] : index to i64
// CHECK:               tile.yield %{{.+}} : f32
// CHECK:             tile.block_mask %[[MOD]]
// CHECK-NEXT:        ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:          %[[USER:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:          %[[IN:.+]] = arith.cmpi ult, %[[KV]], %[[N]] : index
// CHECK-NEXT:          arith.andi %[[USER]], %[[IN]] : i1
// CHECK-NOT:         tile.block_mask
// CHECK:             tile.reduce max
// CHECK:           } {tile.kv_loop, tile.sweep = "pv"}
// CHECK-NEXT:      tile.block_store
// CHECK-NOT:       math.log
// CHECK-NOT:       tile.block_store
// CHECK:         return
func.func @bias_then_mask(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %c1 = arith.constant 1 : index
  %H = memref.dim %Q, %c1 : !qkv
  %biased = tile.score_mod %s : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %Hi = arith.index_cast %H : index to i64
    %Hf = arith.sitofp %Hi : i64 to f32
    %r = arith.addf %score, %Hf : f32
    tile.yield %r : f32
  }
  %u = tile.mask %biased : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}

// -----

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// A mask followed by a scale: the mask stays where it was, and the key bound gets a mask of its
// own after the scale.

// CHECK-LABEL: func.func @mask_then_scale
// CHECK:         scf.for
// CHECK:           %[[S:.+]] = tile.block_dot
// CHECK-NEXT:      %[[USER:.+]] = tile.block_mask %[[S]]
// CHECK-NEXT:      ^bb0(%{{.+}}: index, %{{.+}}: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index):
// CHECK-NEXT:        %[[C:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:        tile.yield %[[C]] : i1
// CHECK-NEXT:      }
// CHECK-NEXT:      %[[SCALE:.+]] = arith.constant dense<5.000000e-01> : tensor<64x32xf32>
// CHECK-NEXT:      %[[T:.+]] = arith.mulf %[[USER]], %[[SCALE]] : tensor<64x32xf32>
// CHECK-NEXT:      %[[BOUND:.+]] = tile.block_mask %[[T]]
// CHECK-NEXT:      ^bb0(
// CHECK-NEXT:        arith.constant true
// CHECK-NEXT:        arith.cmpi ult
// CHECK-NEXT:        arith.andi
// CHECK-NEXT:        tile.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      tile.reduce max %[[BOUND]]
func.func @mask_then_scale(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %u = tile.mask %s : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %t = tile.scale %u by 0.5 : !scores
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}

// -----

// Grouped-query attention with static heads: query head h reads key/value head h / (8 / 2).

!qo = memref<?x8x?x64xbf16>
!kv = memref<?x2x?x64xbf16>
!lse = memref<?x8x?xf32>
!qin = tensor<?x8x?x64xbf16>
!kvin = tensor<?x2x?x64xbf16>
!scores = tensor<?x8x?x?xf32>

// CHECK-LABEL: func.func @gqa
// CHECK-SAME:    (%[[Q:[a-z0-9_]+]]: memref<?x8x?x64xbf16>, %[[K:[a-z0-9_]+]]: memref<?x2x?x64xbf16>, %[[V:[a-z0-9_]+]]: memref<?x2x?x64xbf16>,
// CHECK:         %[[H:.+]] = memref.dim %[[Q]], %c1{{(_[0-9]+)?}} :
// CHECK:         %[[HKV:.+]] = memref.dim %[[K]], %c1{{(_[0-9]+)?}} :
// CHECK:         %[[GROUP:.+]] = arith.divui %[[H]], %[[HKV]] : index
// CHECK:         scf.forall (%[[BI:[a-z0-9_]+]], %[[HI:[a-z0-9_]+]], %{{[a-z0-9_]+}}) in
// CHECK:           %[[HK:.+]] = arith.divui %[[HI]], %[[GROUP]] : index
// CHECK:           tile.block_load %[[Q]][%[[BI]], %[[HI]], %{{.+}}]
// CHECK:           tile.block_load %[[K]][%[[BI]], %[[HK]], %{{.+}}] {{.+}} : memref<?x2x?x64xbf16> -> tensor<32x64xbf16>
// CHECK:           tile.block_load %[[V]][%[[BI]], %[[HK]], %{{.+}}] {{.+}} : memref<?x2x?x64xbf16> -> tensor<32x64xbf16>
func.func @gqa(%Q: !qo, %K: !kv, %V: !kv, %O: !qo, %LSE: !lse) {
  %q = tile.load %Q : !qo -> !qin
  %k = tile.load %K : !kv -> !kvin
  %v = tile.load %V : !kv -> !kvin
  %s = tile.dot %q, %k transpose_rhs : !qin, !kvin -> !scores
  %t = tile.scale %s by 0.125 : !scores
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x8x?xf32>
  %o = tile.dot %p, %v : !scores, !kvin -> tensor<?x8x?x64xf32>
  tile.store %o, %O : tensor<?x8x?x64xf32>, !qo
  tile.store %lse, %LSE : tensor<?x8x?xf32>, !lse
  return
}

// -----

//===----------------------------------------------------------------------===//
// Chains tiling does not take: a diagnostic at the op that does not fit.
//===----------------------------------------------------------------------===//

!qkv = memref<?x?x?x64xbf16>
!kt = memref<?x?x64x?xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// K given already transposed: Q.K without transpose_rhs is not the attention tiling knows.
func.func @no_transpose_rhs(%Q: !qkv, %KT: !kt, %V: !qkv, %O: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %kt = tile.load %KT : !kt -> tensor<?x?x64x?xbf16>
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %kt : !in, tensor<?x?x64x?xbf16> -> !scores
  // expected-error @+1 {{'tile.softmax' op scores must come from tile.dot %q, %k transpose_rhs through scale/score_mod/mask ops only}}
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// Scores handed in from outside.
func.func @scores_from_argument(%s: !scores, %V: !qkv, %O: !qkv) {
  %v = tile.load %V : !qkv -> !in
  // expected-error @+1 {{scores must come from tile.dot}}
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}

// -----

!dyn = memref<?x?x?x?xbf16>
!in = tensor<?x?x?x?xbf16>
!scores = tensor<?x?x?x?xf32>

// Block shapes are static, so the head dimension must be.
func.func @dynamic_head_dim(%Q: !dyn, %K: !dyn, %V: !dyn, %O: !dyn) {
  // expected-error @+1 {{'tile.load' op the head dimension must be static to be tiled}}
  %q = tile.load %Q : !dyn -> !in
  %k = tile.load %K : !dyn -> !in
  %v = tile.load %V : !dyn -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x?xf32>
  tile.store %o, %O : tensor<?x?x?x?xf32>, !dyn
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

func.func @q_not_loaded(%q: !in, %K: !qkv, %V: !qkv, %O: !qkv) {
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  // expected-error @+1 {{'tile.dot' op operands must be tile.load results to be tiled}}
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

func.func @scores_used_twice(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) -> !scores {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  // expected-error @+1 {{'tile.scale' op intermediate scores must have a single use to be tiled}}
  %t = tile.scale %s by 0.125 : !scores
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return %t : !scores
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

func.func @probs_returned(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) -> !scores {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  // expected-error @+1 {{'func.return' op the probabilities may only feed one tile.dot %p, %v}}
  return %p : !scores
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!lse = memref<?x?x?xf32>

func.func @probs_unused(%Q: !qkv, %K: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  // expected-error @+1 {{'tile.softmax' op probabilities are unused: nothing to compute}}
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

func.func @v_not_loaded(%Q: !qkv, %K: !qkv, %v: !in, %O: !qkv) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  // expected-error @+1 {{'tile.dot' op the value operand must be a tile.load result}}
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

func.func @output_returned(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv) -> tensor<?x?x?x64xf32> {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  // expected-error @+1 {{'func.return' op the attention output may only feed one tile.store}}
  return %o : tensor<?x?x?x64xf32>
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!lse = memref<?x?x?xf32>

func.func @output_not_stored(%Q: !qkv, %K: !qkv, %V: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  // expected-error @+1 {{'tile.dot' op the attention output is never stored}}
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

!qkv = memref<?x?x?x64xbf16>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!lse = memref<?x?x?xf32>

func.func @lse_returned(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %L: !lse) -> tensor<?x?x?xf32> {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> tensor<?x?x?x64xf32>
  tile.store %o, %O : tensor<?x?x?x64xf32>, !qkv
  tile.store %lse, %L : tensor<?x?x?xf32>, !lse
  // expected-error @+1 {{'func.return' op the logsumexp may only feed one tile.store}}
  return %lse : tensor<?x?x?xf32>
}
