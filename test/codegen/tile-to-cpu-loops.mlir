// RUN: tilefuse-opt %s -split-input-file --tile-front-end="instrument=true" --tile-to-cpu-loops \
// RUN:   | FileCheck %s --implicit-check-not='{{(= |^ *)tile\.}}' \
// RUN:       --implicit-check-not='tensor<' --implicit-check-not=scf.forall \
// RUN:       --implicit-check-not=unrealized_conversion_cast
// RUN: tilefuse-opt %s -split-input-file --tile-front-end --tile-to-cpu-loops \
// RUN:   | FileCheck %s --check-prefix=NOINST --implicit-check-not=tilefuse_block_event

// The CPU reference lowering: the grid becomes a sequential loop nest, every block a heap
// buffer, every block op a scalar loop nest, and tile.block_event a call the runner counts. No
// tile op, no tensor, no forall and no leftover cast survives (implicit check-nots; the
// tile.kv_loop marker is an attribute, not an op, and may stay).

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// CHECK:       func.func private @tilefuse_block_event(i32)
// CHECK-LABEL: func.func @causal
// CHECK-SAME:    (%[[Q:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[V:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[O:[a-z0-9_]+]]: memref<{{[^%]+}}>, %[[LSE:[a-z0-9_]+]]: memref<{{[^%]+}}>)
// CHECK:         memref.alloc() : memref<64xf32>
// CHECK:         %[[B:.+]] = memref.dim %[[Q]], %c0{{(_[0-9]+)?}} :
// CHECK:         %[[H:.+]] = memref.dim %[[Q]], %c1{{(_[0-9]+)?}} :
// CHECK:         %[[M:.+]] = memref.dim %[[Q]], %c2{{(_[0-9]+)?}} :
// CHECK:         %[[ROWBLOCKS:.+]] = arith.ceildivui %[[M]], %{{.+}} : index
//
// The program grid, sequentially.
// CHECK:         scf.for %[[BI:[a-z0-9_]+]] = %{{.+}} to %[[B]] step
// CHECK-NEXT:      scf.for %[[HI:[a-z0-9_]+]] = %{{.+}} to %[[H]] step
// CHECK-NEXT:        scf.for %[[RI:[a-z0-9_]+]] = %{{.+}} to %[[ROWBLOCKS]] step
// CHECK-NEXT:          %[[ROW0:.+]] = arith.muli %[[RI]], %{{.+}} : index
//
// The Q block: rows at or past M read as zero. The element leaves the guard as its bits (i16):
// a bf16 crossing a branch would need a compiler-runtime call on CPUs without bf16 support.
// CHECK:               %[[QBUF:.+]] = memref.alloc() : memref<64x64xbf16>
// CHECK:               scf.for %[[I:[a-z0-9_]+]] =
// CHECK-NEXT:            scf.for %[[D:[a-z0-9_]+]] =
// CHECK-NEXT:              %[[ROW:.+]] = arith.addi %[[ROW0]], %[[I]] : index
// CHECK-NEXT:              %[[IN:.+]] = arith.cmpi ult, %[[ROW]], %[[M]] : index
// CHECK-NEXT:              %[[XB:.+]] = scf.if %[[IN]] -> (i16) {
// CHECK-NEXT:                %[[LD:.+]] = memref.load %[[Q]][%[[BI]], %[[HI]], %[[ROW]], %[[D]]]
// CHECK-NEXT:                %[[LDB:.+]] = arith.bitcast %[[LD]] : bf16 to i16
// CHECK-NEXT:                scf.yield %[[LDB]] : i16
// CHECK-NEXT:              } else {
// CHECK-NEXT:                %[[ZERO:.+]] = arith.constant 0 : i16
// CHECK-NEXT:                scf.yield %[[ZERO]] : i16
// CHECK-NEXT:              }
// CHECK-NEXT:              %[[X:.+]] = arith.bitcast %[[XB]] : i16 to bf16
// CHECK-NEXT:              memref.store %[[X]], %[[QBUF]][%[[I]], %[[D]]] : memref<64x64xbf16>
//
// The pruned key/value loop carries (m, l, acc) as buffers.
// CHECK:               %[[LO:.+]] = scf.while
// CHECK:               %[[HIB:.+]] = scf.while
// CHECK:               %[[RES:.+]]:3 = scf.for %{{.+}} = %[[LO]] to %[[HIB]] step %{{.+}} iter_args({{.+}}) -> (memref<64xf32>, memref<64xf32>, memref<64x64xf32>) {
// CHECK:                 scf.if %{{.+}} -> (memref<64xf32>, memref<64xf32>, memref<64x64xf32>) {
// CHECK-NEXT:              scf.if %{{.+}} -> (memref<64xf32>, memref<64xf32>, memref<64x64xf32>) {
//
// Partial block: the mask region runs per element and selects -inf where it fails.
// CHECK:                     %[[QI:.+]] = arith.addi %[[ROW0]], %{{.+}} : index
// CHECK-NEXT:                %[[KV:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK-NEXT:                %[[CAUSAL:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:                %[[BOUND:.+]] = arith.cmpi ult, %[[KV]], %{{.+}} : index
// CHECK-NEXT:                %[[KEEP:.+]] = arith.andi %[[CAUSAL]], %[[BOUND]] : i1
// CHECK-NEXT:                %[[NEGINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT:                arith.select %[[KEEP]], %{{.+}}, %[[NEGINF]] : f32
// CHECK:                     math.exp2 %{{.+}} : f32
// CHECK:                   %[[PARTIAL:.+]] = arith.constant 1 : i32
// CHECK-NEXT:              func.call @tilefuse_block_event(%[[PARTIAL]]) : (i32) -> ()
// CHECK:                 } else {
// CHECK-NOT:               arith.cmpi ule
// CHECK:                   %[[FULL:.+]] = arith.constant 0 : i32
// CHECK-NEXT:              func.call @tilefuse_block_event(%[[FULL]]) : (i32) -> ()
// The key/value loop ends; the passes' tile.* markers are gone below the tile level.
// CHECK:               }
// CHECK-NOT:           tile.kv_loop
//
// O = acc / l, converted to bf16 on the store, rows past M not written; then the logsumexp.
// CHECK:               arith.divf %{{.+}}, %{{.+}} : f32
// CHECK:               scf.if %{{.+}} {
// CHECK-NEXT:            %[[OV:.+]] = memref.load
// CHECK-NEXT:            %[[OB:.+]] = arith.truncf %[[OV]] : f32 to bf16
// CHECK-NEXT:            memref.store %[[OB]], %[[O]][%[[BI]], %[[HI]], %{{.+}}, %{{.+}}]
// CHECK:               math.log %{{.+}} : f32
// CHECK:               scf.if %{{.+}} {
// CHECK-NEXT:            %[[LV:.+]] = memref.load
// CHECK-NEXT:            memref.store %[[LV]], %[[LSE]][%[[BI]], %[[HI]], %{{.+}}]
// CHECK:         return

// NOINST-LABEL: func.func @causal
// NOINST:         scf.for
// NOINST:           memref.alloc
// NOINST:         return
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

// Block ops one by one (hand-written tiled form; the front end leaves it as it is).

// CHECK-LABEL: func.func @block_ops
// CHECK-SAME:    (%[[V:[a-z0-9_]+]]: memref<?x?x?x64xbf16>, %[[O:[a-z0-9_]+]]: memref<?x?x?x64xbf16>, %[[L:[a-z0-9_]+]]: memref<?x?x?xf32>, %[[B:[a-z0-9_]+]]: index, %[[H:[a-z0-9_]+]]: index, %[[R:[a-z0-9_]+]]: index, %[[N:[a-z0-9_]+]]: index)
//
// block_load: a 16 x 64 buffer filled under the row bound.
// CHECK:         %[[VB:.+]] = memref.alloc() : memref<16x64xbf16>
// CHECK:           arith.cmpi ult, %{{.+}}, %[[N]] : index
// CHECK:             memref.load %[[V]][%[[B]], %[[H]], %{{.+}}, %{{.+}}] : memref<?x?x?x64xbf16>
//
// block_dot transpose_rhs: sum over the 64 columns of both operands, in f32.
// CHECK:         %[[SB:.+]] = memref.alloc() : memref<16x16xf32>
// CHECK:         scf.for %[[I:[a-z0-9_]+]] =
// CHECK-NEXT:      scf.for %[[J:[a-z0-9_]+]] =
// CHECK:             %[[DOT:.+]] = scf.for %[[KK:[a-z0-9_]+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[SUM:[a-z0-9_]+]] = %{{.+}}) -> (f32) {
// CHECK-DAG:           %[[X:.+]] = memref.load %[[VB]][%[[I]], %[[KK]]] : memref<16x64xbf16>
// CHECK-DAG:           %[[Y:.+]] = memref.load %[[VB]][%[[J]], %[[KK]]] : memref<16x64xbf16>
// CHECK-DAG:           %[[XF:.+]] = arith.extf %[[X]] : bf16 to f32
// CHECK-DAG:           %[[YF:.+]] = arith.extf %[[Y]] : bf16 to f32
// CHECK:               %[[PROD:.+]] = arith.mulf %[[XF]], %[[YF]] : f32
// CHECK-NEXT:          %[[ACC:.+]] = arith.addf %[[SUM]], %[[PROD]] : f32
// CHECK-NEXT:          scf.yield %[[ACC]] : f32
// CHECK-NEXT:        }
// CHECK-NEXT:        memref.store %[[DOT]], %[[SB]][%[[I]], %[[J]]] : memref<16x16xf32>
//
// block_mask: the region inlined at (row + i, col + j), -inf where it yields false.
// CHECK:         %[[MB:.+]] = memref.alloc() : memref<16x16xf32>
// CHECK:         scf.for %[[I2:[a-z0-9_]+]] =
// CHECK-NEXT:      scf.for %[[J2:[a-z0-9_]+]] =
// CHECK-NEXT:        %[[S:.+]] = memref.load %[[SB]][%[[I2]], %[[J2]]] : memref<16x16xf32>
// CHECK-NEXT:        %[[QI:.+]] = arith.addi %[[R]], %[[I2]] : index
// CHECK-NEXT:        %[[KV:.+]] = arith.addi %[[R]], %[[J2]] : index
// CHECK-NEXT:        %[[KEEP:.+]] = arith.cmpi ule, %[[KV]], %[[QI]] : index
// CHECK-NEXT:        %[[NEGINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT:        %[[SEL:.+]] = arith.select %[[KEEP]], %[[S]], %[[NEGINF]] : f32
// CHECK-NEXT:        memref.store %[[SEL]], %[[MB]][%[[I2]], %[[J2]]] : memref<16x16xf32>
//
// reduce max: a per-row loop starting at -inf.
// CHECK:         %[[RB:.+]] = memref.alloc() : memref<16xf32>
// CHECK:         scf.for
// CHECK:           %[[INIT:.+]] = arith.constant 0xFF800000 : f32
// CHECK:           scf.for {{.+}} iter_args(%[[CUR:[a-z0-9_]+]] = %[[INIT]]) -> (f32) {
// CHECK:             arith.maximumf %[[CUR]], %{{.+}} : f32
//
// broadcast, then elementwise subf / exp2 on scalars.
// CHECK:         %[[BB:.+]] = memref.alloc() : memref<16x16xf32>
// CHECK:             memref.load %[[RB]][%{{.+}}] : memref<16xf32>
// CHECK:             memref.store %{{.+}}, %[[BB]]
// CHECK:         arith.subf %{{.+}}, %{{.+}} : f32
// CHECK:         math.exp2 %{{.+}} : f32
//
// reduce sum starts at 0.
// CHECK:         %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK:         scf.for {{.+}} iter_args(%[[CUR2:[a-z0-9_]+]] = %[[ZERO]]) -> (f32) {
// CHECK:           arith.addf %[[CUR2]], %{{.+}} : f32
//
// block_store: f32 to the bf16 view under the row bound; the f32 row vector as it is.
// CHECK:         arith.cmpi ult, %{{.+}}, %[[N]] : index
// CHECK:           arith.truncf %{{.+}} : f32 to bf16
// CHECK:           memref.store %{{.+}}, %[[O]][%[[B]], %[[H]], %{{.+}}, %{{.+}}] : memref<?x?x?x64xbf16>
// CHECK:         arith.cmpi ult, %{{.+}}, %[[N]] : index
// CHECK:           memref.store %{{.+}}, %[[L]][%[[B]], %[[H]], %{{.+}}] : memref<?x?x?xf32>
// CHECK:         return

// NOINST-LABEL: func.func @block_ops
func.func @block_ops(%V: memref<?x?x?x64xbf16>, %O: memref<?x?x?x64xbf16>, %L: memref<?x?x?xf32>,
                     %b: index, %h: index, %r: index, %n: index) {
  %blk = tile.block_load %V[%b, %h, %r] bound %n : memref<?x?x?x64xbf16> -> tensor<16x64xbf16>
  %s = tile.block_dot %blk, %blk transpose_rhs : tensor<16x64xbf16>, tensor<16x64xbf16> -> tensor<16x16xf32>
  %m = tile.block_mask %s at (%b, %h, %r, %r) : tensor<16x16xf32> {
  ^bb0(%bb: index, %hh: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %mx = tile.reduce max %m : tensor<16x16xf32> -> tensor<16xf32>
  %bc = tile.broadcast %mx : tensor<16xf32> -> tensor<16x16xf32>
  %d = arith.subf %m, %bc : tensor<16x16xf32>
  %e = math.exp2 %d : tensor<16x16xf32>
  %sum = tile.reduce sum %e : tensor<16x16xf32> -> tensor<16xf32>
  %o = tile.block_dot %e, %blk : tensor<16x16xf32>, tensor<16x64xbf16> -> tensor<16x64xf32>
  tile.block_store %o, %O[%b, %h, %r] bound %n : tensor<16x64xf32>, memref<?x?x?x64xbf16>
  tile.block_store %sum, %L[%b, %h, %r] bound %n : tensor<16xf32>, memref<?x?x?xf32>
  return
}

// -----

// A paged block load (tile-paged-kv) with a page size given at launch (the cache's third
// dimension): the page size and its round-up reciprocal once at the function's entry
// (tile::pageDivisor, as the GPU lowering computes them), and per element a multiply-high, an
// add and a shift for the row's page column, a multiply and a subtraction for its row in the
// page; no division by the page size in the loops.
// CHECK-LABEL: func.func @paged_block_load
// CHECK-SAME:    (%[[K:[a-z0-9_]+]]: memref<{{[^%]+}}>, %{{[a-z0-9_]+}}: memref<{{[^%]+}}>, %[[T:[a-z0-9_]+]]: memref<{{[^%]+}}>,
// CHECK:         %[[S:.+]] = memref.dim %[[K]], %c2{{(_[0-9]+)?}} :
// CHECK-NEXT:    arith.index_castui %[[S]] : index to i32
// CHECK:         %[[M:.+]] = arith.divui %{{.+}}, %{{.+}} : i64
// CHECK-NEXT:    %[[MUL:.+]] = arith.trunci %[[M]] : i64 to i32
// CHECK:         scf.for
// CHECK-NOT:     arith.divui
// CHECK-NOT:     arith.remui
// CHECK:         %[[ROW32:.+]] = arith.index_castui %[[ROW:.+]] : index to i32
// CHECK-NEXT:    %{{.+}}, %[[HI:.+]] = arith.mului_extended %[[ROW32]], %[[MUL]] : i32
// CHECK-NEXT:    %[[SUM:.+]] = arith.addi %[[ROW32]], %[[HI]] : i32
// CHECK-NEXT:    %[[Q32:.+]] = arith.shrui %[[SUM]], %{{.+}} : i32
// CHECK-NEXT:    %[[Q:.+]] = arith.index_castui %[[Q32]] : i32 to index
// CHECK-NEXT:    %[[QS:.+]] = arith.muli %[[Q]], %[[S]] : index
// CHECK-NEXT:    %[[R:.+]] = arith.subi %[[ROW]], %[[QS]] : index
// CHECK-NEXT:    %[[P:.+]] = memref.load %[[T]][%{{.+}}, %[[Q]]]
// CHECK-NEXT:    %[[PAGE:.+]] = arith.index_castui %[[P]] : i32 to index
// CHECK-NEXT:    memref.load %[[K]][%[[PAGE]], %{{.+}}, %[[R]], %{{.+}}]
// CHECK-NOT:     arith.divui
// CHECK-NOT:     arith.remui
// CHECK:         return
//
// A page size fixed at compile time (page-size=16: the cache's type) is divided by as a
// constant (LLVM's shift), with no reciprocal.
// CHECK-LABEL: func.func @paged_block_load_fixed
// CHECK-NOT:     arith.mului_extended
// CHECK:         %[[C:.+]] = arith.divui %{{.+}}, %c16{{(_[0-9]+)?}} : index
// CHECK-NEXT:    arith.remui %{{.+}}, %c16{{(_[0-9]+)?}} : index
// CHECK-NEXT:    memref.load %{{.+}}[%{{.+}}, %[[C]]]
// CHECK-NOT:     arith.mului_extended
// CHECK:         return
func.func @paged_block_load(%K: memref<?x?x?x64xbf16>, %O: memref<?x?x?x64xbf16>,
                            %T: memref<?x?xi32, strided<[?, 1]>>, %b: index, %h: index,
                            %r: index, %n: index) {
  %blk = tile.block_load %K[%b, %h, %r] bound %n pages %T
      : memref<?x?x?x64xbf16>, memref<?x?xi32, strided<[?, 1]>> -> tensor<16x64xbf16>
  tile.block_store %blk, %O[%b, %h, %r] bound %n : tensor<16x64xbf16>, memref<?x?x?x64xbf16>
  return
}

func.func @paged_block_load_fixed(%K: memref<?x?x16x64xbf16>, %O: memref<?x?x?x64xbf16>,
                                  %T: memref<?x?xi32, strided<[?, 1]>>, %b: index, %h: index,
                                  %r: index, %n: index) {
  %blk = tile.block_load %K[%b, %h, %r] bound %n pages %T
      : memref<?x?x16x64xbf16>, memref<?x?xi32, strided<[?, 1]>> -> tensor<16x64xbf16>
  tile.block_store %blk, %O[%b, %h, %r] bound %n : tensor<16x64xbf16>, memref<?x?x?x64xbf16>
  return
}
