// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics -tgpu-persistent="force=true" \
// RUN:   | FileCheck %s
// RUN: tilefuse-opt %s -split-input-file -tgpu-persistent 2>&1 | FileCheck %s --check-prefix=OFF

// tgpu-persistent: the program grid (batch, head, row block) becomes a one-dimensional grid of
// as many programs as the launcher starts, each looping over the tiles in the kernel's row
// order: ascending (unset) keeps a head's row blocks together; descending (where
// tile-order-row-blocks has already reversed the body's row block) takes row block index t /
// (B·H), so every (batch, head)'s last row block runs before any second-to-last one; paired
// deals each pair's row blocks i and R - 1 - i to one program, head by head.

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>
!qa = tensor<64x64xbf16, #tgpu.operand_a<warps = 4, rows_per_warp = 16>>

// Without persistent in the module's tile.config (and without force) nothing changes.
// OFF-LABEL: func.func @kernel
// OFF:         scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) in
// OFF-NOT:     gpu.grid_dim

// CHECK-LABEL: func.func @kernel
// CHECK-DAG:     %[[B:.+]] = memref.dim %arg0, %c0
// CHECK-DAG:     %[[H:.+]] = memref.dim %arg0, %c1
// CHECK-DAG:     %[[R:.+]] = arith.ceildivui
// CHECK:         %[[PROGRAMS:.+]] = gpu.grid_dim x
// CHECK:         scf.forall (%[[P:.+]]) in (%[[PROGRAMS]]) {
// CHECK-NEXT:      %[[BH:.+]] = arith.muli %[[B]], %[[H]]
// CHECK-NEXT:      %[[TILES:.+]] = arith.muli %[[BH]], %[[R]]
// CHECK-NEXT:      scf.for %[[T:.+]] = %[[P]] to %[[TILES]] step %[[PROGRAMS]] {
// CHECK-NEXT:        %[[HEAD:.+]] = arith.divui %[[T]], %[[R]]
// CHECK-NEXT:        %[[ROW:.+]] = arith.remui %[[T]], %[[R]]
// CHECK-NEXT:        %[[BATCH:.+]] = arith.divui %[[HEAD]], %[[H]]
// CHECK-NEXT:        %[[HB:.+]] = arith.remui %[[HEAD]], %[[H]]
// CHECK-NEXT:        %[[ROW0:.+]] = arith.muli %[[ROW]], %c64
// CHECK-NEXT:        %[[QB:.+]] = tile.block_load %arg0[%[[BATCH]], %[[HB]], %[[ROW0]]]
// CHECK:             tile.block_store %{{.+}}, %arg1[%[[BATCH]], %[[HB]], %[[ROW0]]]
// CHECK:           } {tgpu.tile_loop}
// CHECK:         } {mapping = [#tile.grid<program>]}
func.func @kernel(%q: !view, %o: !view, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %B = memref.dim %q, %c0 : !view
  %H = memref.dim %q, %c1 : !view
  %M = memref.dim %q, %c2 : !view
  %R = arith.ceildivui %M, %c64 : index
  scf.forall (%b, %h, %r) in (%B, %H, %R) {
    %row = arith.muli %r, %c64 : index
    %qb = tile.block_load %q[%b, %h, %row] bound %M : !view -> !qa
    %zero = arith.constant dense<0.0> : !acc
    tile.block_store %zero, %o[%b, %h, %row] bound %M : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}

// -----

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

// row_order=descending: the row block index is t / (B·H), the (batch, head) t mod (B·H), and the
// list is dealt serpentine: program p's k-th tile is t = k·P + p in even rounds and
// k·P + (P - 1 - p) in odd ones; it runs the full rounds, and the last partial one where its
// place there (p or P - 1 - p, by that round's parity) is below the tiles left.
// CHECK-LABEL: func.func @longest_first
// CHECK-DAG:     %[[B:.+]] = memref.dim %arg0, %c0
// CHECK-DAG:     %[[H:.+]] = memref.dim %arg0, %c1
// CHECK:         %[[PROGRAMS:.+]] = gpu.grid_dim x
// CHECK:         scf.forall (%[[P:.+]]) in (%[[PROGRAMS]]) {
// CHECK:           %[[BH0:.+]] = arith.muli %[[B]], %[[H]]
// CHECK-NEXT:      %[[TILES:.+]] = arith.muli %[[BH0]], %{{.+}} : index
// CHECK:           %[[LAST:.+]] = arith.subi %[[PROGRAMS]], %[[ONE:.+]] : index
// CHECK-NEXT:      %[[MIRROR:.+]] = arith.subi %[[LAST]], %[[P]]
// CHECK-NEXT:      %[[ROUNDS:.+]] = arith.divui %[[TILES]], %[[PROGRAMS]]
// CHECK-NEXT:      %[[LEFT:.+]] = arith.remui %[[TILES]], %[[PROGRAMS]]
// CHECK-NEXT:      %[[PARITY:.+]] = arith.remui %[[ROUNDS]], %[[TWO:.+]] : index
// CHECK-NEXT:      %[[EVEN:.+]] = arith.cmpi eq, %[[PARITY]], %[[ZERO:.+]] : index
// CHECK-NEXT:      %[[PLACE:.+]] = arith.select %[[EVEN]], %[[P]], %[[MIRROR]]
// CHECK-NEXT:      %[[IN:.+]] = arith.cmpi ult, %[[PLACE]], %[[LEFT]]
// CHECK-NEXT:      %[[EXTRA:.+]] = arith.select %[[IN]], %[[ONE]], %[[ZERO]]
// CHECK-NEXT:      %[[TRIPS:.+]] = arith.addi %[[ROUNDS]], %[[EXTRA]]
// CHECK-NEXT:      scf.for %[[K:.+]] = %[[ZERO]] to %[[TRIPS]] step %[[ONE]] {
// CHECK-NEXT:        %[[KP:.+]] = arith.remui %[[K]], %[[TWO]]
// CHECK-NEXT:        %[[KEVEN:.+]] = arith.cmpi eq, %[[KP]], %[[ZERO]]
// CHECK-NEXT:        %[[KPLACE:.+]] = arith.select %[[KEVEN]], %[[P]], %[[MIRROR]]
// CHECK-NEXT:        %[[BASE:.+]] = arith.muli %[[K]], %[[PROGRAMS]]
// CHECK-NEXT:        %[[T:.+]] = arith.addi %[[BASE]], %[[KPLACE]]
// CHECK-NEXT:        %[[BH:.+]] = arith.muli %[[B]], %[[H]]
// CHECK-NEXT:        %[[ROW:.+]] = arith.divui %[[T]], %[[BH]]
// CHECK-NEXT:        %[[HEAD:.+]] = arith.remui %[[T]], %[[BH]]
// CHECK-NEXT:        %[[BATCH:.+]] = arith.divui %[[HEAD]], %[[H]]
// CHECK-NEXT:        %[[HB:.+]] = arith.remui %[[HEAD]], %[[H]]
// CHECK-NEXT:        %[[ROW0:.+]] = arith.muli %[[ROW]], %c64
// CHECK:             tile.block_store %{{.+}}, %arg1[%[[BATCH]], %[[HB]], %[[ROW0]]]
// CHECK:           } {tgpu.tile_loop}
module attributes {tile.config = #tile.config<"row_order=descending">} {
  func.func @longest_first(%q: !view, %o: !view) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %B = memref.dim %q, %c0 : !view
    %H = memref.dim %q, %c1 : !view
    %M = memref.dim %q, %c2 : !view
    %R = arith.ceildivui %M, %c64 : index
    scf.forall (%b, %h, %r) in (%B, %H, %R) {
      %row = arith.muli %r, %c64 : index
      %zero = arith.constant dense<0.0> : !acc
      tile.block_store %zero, %o[%b, %h, %row] bound %M : !acc, !view
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

// row_order=paired: the tiles two at a time, twos p, p + P, ... to program p, each two the
// places 2q and 2q + 1 of the list that runs head by head (t / R the (batch, head), t mod R the
// place j, read backwards in odd pairs where R is odd), place j holding row index R - 1 - j/2
// for even j and j/2 for odd j. The trip count is twice the program's twos, less one where its
// last two is the list's last and holds one tile. tgpu-persistent-deal.mlir runs the deal.
// Its tile.config asks for persistent tiles: the pass runs without force too.
// OFF-LABEL:   func.func @paired
// OFF:           gpu.grid_dim x
// CHECK-LABEL: func.func @paired
// CHECK-DAG:     %[[B:.+]] = memref.dim %arg0, %c0
// CHECK-DAG:     %[[H:.+]] = memref.dim %arg0, %c1
// CHECK-DAG:     %[[R:.+]] = arith.ceildivui %{{.+}}, %c64
// CHECK:         %[[PROGRAMS:.+]] = gpu.grid_dim x
// CHECK:         scf.forall (%[[P:.+]]) in (%[[PROGRAMS]]) {
// CHECK:           %[[BH0:.+]] = arith.muli %[[B]], %[[H]]
// CHECK-NEXT:      %[[TILES:.+]] = arith.muli %[[BH0]], %[[R]] : index
// CHECK:           %[[TWOS:.+]] = arith.ceildivui %[[TILES]], %[[TWO:.+]] : index
// CHECK-NEXT:      %[[LASTP:.+]] = arith.subi %[[PROGRAMS]], %[[ONE:.+]] : index
// CHECK-NEXT:      %[[UP:.+]] = arith.addi %[[TWOS]], %[[LASTP]]
// CHECK-NEXT:      %[[LEFT:.+]] = arith.subi %[[UP]], %[[P]]
// CHECK-NEXT:      %[[MINE:.+]] = arith.divui %[[LEFT]], %[[PROGRAMS]]
// CHECK-NEXT:      %[[TPAR:.+]] = arith.remui %[[TILES]], %[[TWO]]
// CHECK-NEXT:      %[[ODDT:.+]] = arith.cmpi ne, %[[TPAR]], %[[ZERO:.+]] : index
// CHECK-NEXT:      %[[LASTTWO:.+]] = arith.subi %[[TWOS]], %[[ONE]]
// CHECK-NEXT:      %[[OWNER:.+]] = arith.remui %[[LASTTWO]], %[[PROGRAMS]]
// CHECK-NEXT:      %[[ISOWNER:.+]] = arith.cmpi eq, %[[P]], %[[OWNER]]
// CHECK-NEXT:      %[[SINGLE:.+]] = arith.andi %[[ODDT]], %[[ISOWNER]]
// CHECK-NEXT:      %[[DOUBLE:.+]] = arith.muli %[[MINE]], %[[TWO]]
// CHECK-NEXT:      %[[LESS:.+]] = arith.select %[[SINGLE]], %[[ONE]], %[[ZERO]]
// CHECK-NEXT:      %[[TRIPS:.+]] = arith.subi %[[DOUBLE]], %[[LESS]]
// CHECK-NEXT:      %[[RPAR:.+]] = arith.remui %[[R]], %[[TWO]]
// CHECK-NEXT:      %[[ODDR:.+]] = arith.cmpi ne, %[[RPAR]], %[[ZERO]]
// CHECK-NEXT:      %[[LASTR:.+]] = arith.subi %[[R]], %[[ONE]]
// CHECK-NEXT:      scf.for %[[K:.+]] = %[[ZERO]] to %[[TRIPS]] step %[[ONE]] {
// CHECK-NEXT:        %[[KH:.+]] = arith.divui %[[K]], %[[TWO]]
// CHECK-NEXT:        %[[KHP:.+]] = arith.muli %[[KH]], %[[PROGRAMS]]
// CHECK-NEXT:        %[[Q:.+]] = arith.addi %[[KHP]], %[[P]]
// CHECK-NEXT:        %[[Q2:.+]] = arith.muli %[[Q]], %[[TWO]]
// CHECK-NEXT:        %[[KP:.+]] = arith.remui %[[K]], %[[TWO]]
// CHECK-NEXT:        %[[T:.+]] = arith.addi %[[Q2]], %[[KP]]
// CHECK-NEXT:        %[[PAIR:.+]] = arith.divui %[[T]], %[[R]]
// CHECK-NEXT:        %[[PLACE:.+]] = arith.remui %[[T]], %[[R]]
// CHECK-NEXT:        %[[HPAR:.+]] = arith.remui %[[PAIR]], %[[TWO]]
// CHECK-NEXT:        %[[ODDH:.+]] = arith.cmpi ne, %[[HPAR]], %[[ZERO]]
// CHECK-NEXT:        %[[BOTH:.+]] = arith.andi %[[ODDR]], %[[ODDH]]
// CHECK-NEXT:        %[[BACK:.+]] = arith.subi %[[LASTR]], %[[PLACE]]
// CHECK-NEXT:        %[[J:.+]] = arith.select %[[BOTH]], %[[BACK]], %[[PLACE]]
// CHECK-NEXT:        %[[HALF:.+]] = arith.divui %[[J]], %[[TWO]]
// CHECK-NEXT:        %[[JPAR:.+]] = arith.remui %[[J]], %[[TWO]]
// CHECK-NEXT:        %[[EVENJ:.+]] = arith.cmpi eq, %[[JPAR]], %[[ZERO]]
// CHECK-NEXT:        %[[LONG:.+]] = arith.subi %[[LASTR]], %[[HALF]]
// CHECK-NEXT:        %[[ROW:.+]] = arith.select %[[EVENJ]], %[[LONG]], %[[HALF]]
// CHECK-NEXT:        %[[BATCH:.+]] = arith.divui %[[PAIR]], %[[H]]
// CHECK-NEXT:        %[[HB:.+]] = arith.remui %[[PAIR]], %[[H]]
// CHECK-NEXT:        %[[ROW0:.+]] = arith.muli %[[ROW]], %c64
// CHECK:             tile.block_store %{{.+}}, %arg1[%[[BATCH]], %[[HB]], %[[ROW0]]]
// CHECK:           } {tgpu.tile_loop}
module attributes {tile.config = #tile.config<"warp_specialize=true,persistent=true,row_order=paired">} {
  func.func @paired(%q: !view, %o: !view) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %B = memref.dim %q, %c0 : !view
    %H = memref.dim %q, %c1 : !view
    %M = memref.dim %q, %c2 : !view
    %R = arith.ceildivui %M, %c64 : index
    scf.forall (%b, %h, %r) in (%B, %H, %R) {
      %row = arith.muli %r, %c64 : index
      %zero = arith.constant dense<0.0> : !acc
      tile.block_store %zero, %o[%b, %h, %row] bound %M : !acc, !view
    } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
    return
  }
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

// A varlen grid (sequences, heads, the longest sequence's row blocks) becomes a tile list of each
// sequence's own row blocks: a loop over the sequences carries the tiles before each, and the
// tile loop runs the sequence's H · ceil(len / Br) tiles u ≡ p - before (mod P), head by head,
// so no tile lies past its sequence's end. (Br from the module's tile.config.)
// CHECK-LABEL: func.func @varlen
// CHECK-DAG:     %[[S:.+]] = arith.subi %{{.+}}, %c1
// CHECK-DAG:     %[[H:.+]] = memref.dim %arg0, %c1
// CHECK:         %[[PROGRAMS:.+]] = gpu.grid_dim x
// CHECK:         scf.forall (%[[P:.+]]) in (%[[PROGRAMS]]) {
// CHECK-DAG:       %[[ZERO:.+]] = arith.constant 0 : index
// CHECK-DAG:       %[[ONE:.+]] = arith.constant 1 : index
// CHECK-DAG:       %[[BR:.+]] = arith.constant 64 : index
// CHECK:           %[[BEFORE_END:.+]] = scf.for %[[SEQ:.+]] = %[[ZERO]] to %[[S]] step %[[ONE]] iter_args(%[[BEFORE:.+]] = %[[ZERO]]) -> (index) {
// CHECK-NEXT:        %[[START32:.+]] = memref.load %arg2[%[[SEQ]]]
// CHECK-NEXT:        %[[START:.+]] = arith.index_castui %[[START32]]
// CHECK-NEXT:        %[[NEXT:.+]] = arith.addi %[[SEQ]], %[[ONE]]
// CHECK-NEXT:        %[[END32:.+]] = memref.load %arg2[%[[NEXT]]]
// CHECK-NEXT:        %[[END:.+]] = arith.index_castui %[[END32]]
// CHECK-NEXT:        %[[LEN:.+]] = arith.subi %[[END]], %[[START]]
// CHECK-NEXT:        %[[RB:.+]] = arith.ceildivui %[[LEN]], %[[BR]]
// CHECK-NEXT:        %[[TILES:.+]] = arith.muli %[[H]], %[[RB]]
// CHECK-NEXT:        %[[BEHIND:.+]] = arith.remui %[[BEFORE]], %[[PROGRAMS]]
// CHECK-NEXT:        %[[PP:.+]] = arith.addi %[[P]], %[[PROGRAMS]]
// CHECK-NEXT:        %[[D:.+]] = arith.subi %[[PP]], %[[BEHIND]]
// CHECK-NEXT:        %[[FIRST:.+]] = arith.remui %[[D]], %[[PROGRAMS]]
// CHECK-NEXT:        scf.for %[[U:.+]] = %[[FIRST]] to %[[TILES]] step %[[PROGRAMS]] {
// CHECK-NEXT:          %[[HEAD:.+]] = arith.divui %[[U]], %[[RB]]
// CHECK-NEXT:          %[[ROW:.+]] = arith.remui %[[U]], %[[RB]]
// CHECK:               memref.load %arg2[%[[SEQ]]]
// CHECK:               tile.block_store %{{.+}}, %arg1[%{{.+}}, %[[HEAD]], %{{.+}}] bound
// CHECK:             } {tgpu.tile_loop}
// CHECK-NEXT:        %[[AFTER:.+]] = arith.addi %[[BEFORE]], %[[TILES]]
// CHECK-NEXT:        scf.yield %[[AFTER]] : index
// CHECK:         } {mapping = [#tile.grid<program>]}
module attributes {tile.config = #tile.config<"Br=64">} {
func.func @varlen(%q: !view, %o: !view, %cu: memref<?xi32>) attributes {tile.varlen} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %cu, %c0 : memref<?xi32>
  %S = arith.subi %n, %c1 : index
  %H = memref.dim %q, %c1 : !view
  %M = memref.dim %q, %c2 : !view
  %R = arith.ceildivui %M, %c64 : index
  scf.forall (%s, %h, %r) in (%S, %H, %R) {
    %row = arith.muli %r, %c64 : index
    %start = memref.load %cu[%s] : memref<?xi32>
    %s1 = arith.addi %s, %c1 : index
    %end = memref.load %cu[%s1] : memref<?xi32>
    %len32 = arith.subi %end, %start : i32
    %len = arith.index_castui %len32 : i32 to index
    %first = arith.index_castui %start : i32 to index
    %zero = arith.constant dense<0.0> : !acc
    tile.block_store %zero, %o[%first, %h, %row] bound %len : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!acc = tensor<64x64xf32, #tgpu.wgmma_acc<warpgroups = 1>>

// row_order=descending on a varlen grid: tile-order-row-blocks has made the body run row block
// R - 1 - x (R: the longest sequence's row blocks), so the list passes x = R - n + (u mod n)
// (n: the sequence's own row blocks) and each sequence's row blocks run from n - 1 down to 0.
// CHECK-LABEL: func.func @varlen_descending
// CHECK-DAG:     %[[R:.+]] = arith.ceildivui %{{.+}}, %c64
// CHECK:           scf.for
// CHECK:             %[[RB:.+]] = arith.ceildivui %{{.+}}, %{{.+}}
// CHECK:             scf.for %[[U:.+]] = %{{.+}} to %{{.+}} step %{{.+}} {
// CHECK-NEXT:          arith.divui %[[U]], %[[RB]]
// CHECK-NEXT:          %[[LOCAL:.+]] = arith.remui %[[U]], %[[RB]]
// CHECK-NEXT:          %[[SKIP:.+]] = arith.subi %[[R]], %[[RB]]
// CHECK-NEXT:          %[[X:.+]] = arith.addi %[[SKIP]], %[[LOCAL]]
// CHECK:               %[[LAST:.+]] = arith.subi %[[R]], %c1
// CHECK:               %[[ROW:.+]] = arith.subi %[[LAST]], %[[X]]
// CHECK:               arith.muli %[[ROW]], %c64
// CHECK:             } {tgpu.tile_loop}
module attributes {tile.config = #tile.config<"Br=64,row_order=descending">} {
func.func @varlen_descending(%q: !view, %o: !view, %cu: memref<?xi32>) attributes {tile.varlen} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %cu, %c0 : memref<?xi32>
  %S = arith.subi %n, %c1 : index
  %H = memref.dim %q, %c1 : !view
  %M = memref.dim %q, %c2 : !view
  %R = arith.ceildivui %M, %c64 : index
  scf.forall (%s, %h, %x) in (%S, %H, %R) {
    %last = arith.subi %R, %c1 : index
    %r = arith.subi %last, %x : index
    %row = arith.muli %r, %c64 : index
    %start = memref.load %cu[%s] : memref<?xi32>
    %s1 = arith.addi %s, %c1 : index
    %end = memref.load %cu[%s1] : memref<?xi32>
    %len32 = arith.subi %end, %start : i32
    %len = arith.index_castui %len32 : i32 to index
    %first = arith.index_castui %start : i32 to index
    %zero = arith.constant dense<0.0> : !acc
    tile.block_store %zero, %o[%first, %h, %row] bound %len : !acc, !view
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>]}
  return
}
}

// -----

!view = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>

// A split-KV grid (batch, head, row block, split) is not made persistent.
// expected-error @below {{persistent: paged and split-KV kernels are not persistent yet (use persistent=false)}}
func.func @split(%q: !view) attributes {tile.split_kv} {
  %c1 = arith.constant 1 : index
  scf.forall (%b, %h, %r, %s) in (%c1, %c1, %c1, %c1) {
  } {mapping = [#tile.grid<batch>, #tile.grid<head>, #tile.grid<row_block>, #tile.grid<split>]}
  return
}
