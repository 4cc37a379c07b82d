// RUN: tilefuse-opt %s --tile-to-cpu-loops | FileCheck %s \
// RUN:   --implicit-check-not='{{(= |^ *)tile\.}}' --implicit-check-not='tensor<' \
// RUN:   --implicit-check-not=unrealized_conversion_cast

// The CPU lowering of the tiled backward's block ops: each a scalar loop nest over heap buffers.

// CHECK-LABEL: func.func @backward_block_ops
// CHECK-SAME:    (%{{[a-z0-9_]+}}: memref<?x?x?x4xf32>, %{{[a-z0-9_]+}}: memref<?x?x?x2xbf16>, %{{[a-z0-9_]+}}: memref<?x?x?xf32>, %[[WS:[a-z0-9_]+]]: memref<?x?x?x4xf32>, %{{[a-z0-9_]+}}: memref<?x?x?x2xf32>, %[[I:[a-z0-9_]+]]: index, %[[M:[a-z0-9_]+]]: index)
// CHECK:         %[[P:.+]] = memref.alloc() : memref<8x4xf32>
// CHECK:         %[[DO:.+]] = memref.alloc() : memref<8x2xbf16>
// CHECK:         %[[ROWS:.+]] = memref.alloc() : memref<8xf32>
//
// block_dot transpose_lhs: out[i, j] = sum_k lhs[k, i] rhs[k, j], k over the 8 rows.
// CHECK:         %[[DV:.+]] = memref.alloc() : memref<4x2xf32>
// CHECK:         scf.for %[[R:[a-z0-9_]+]] =
// CHECK-NEXT:      scf.for %[[C:[a-z0-9_]+]] =
// CHECK:             scf.for %[[K:[a-z0-9_]+]] = %{{.+}} to %c8{{.*}} step
// CHECK-NEXT:          memref.load %[[P]][%[[K]], %[[R]]] : memref<8x4xf32>
// CHECK-NEXT:          memref.load %[[DO]][%[[K]], %[[C]]] : memref<8x2xbf16>
//
// block_score_mod_grad: the region per element, (score, b, h, row + i, col + j); two buffers.
// CHECK:         %[[F:.+]] = memref.alloc() : memref<8x4xf32>
// CHECK:         %[[DF:.+]] = memref.alloc() : memref<8x4xf32>
// CHECK:         scf.for %[[R2:[a-z0-9_]+]] =
// CHECK-NEXT:      scf.for %[[C2:[a-z0-9_]+]] =
// CHECK-NEXT:        %[[S:.+]] = memref.load %[[P]][%[[R2]], %[[C2]]]
// CHECK-NEXT:        arith.addi %[[I]], %[[R2]]
// CHECK-NEXT:        arith.addi %[[I]], %[[C2]]
// CHECK-NEXT:        %[[T:.+]] = math.tanh %[[S]] : f32
// CHECK:             memref.store %[[T]], %[[F]][%[[R2]], %[[C2]]]
// CHECK-NEXT:        memref.store %{{.+}}, %[[DF]][%[[R2]], %[[C2]]]
//
// block_map: a vector operand gives its row's value.
// CHECK:         %[[MAP:.+]] = memref.alloc() : memref<8x4xf32>
// CHECK:         scf.for %[[R3:[a-z0-9_]+]] =
// CHECK-NEXT:      scf.for %[[C3:[a-z0-9_]+]] =
// CHECK-NEXT:        %[[X:.+]] = memref.load %[[F]][%[[R3]], %[[C3]]]
// CHECK-NEXT:        %[[DX:.+]] = memref.load %[[DF]][%[[R3]], %[[C3]]]
// CHECK-NEXT:        %[[Y:.+]] = memref.load %[[ROWS]][%[[R3]]] : memref<8xf32>
// CHECK-NEXT:        %[[XY:.+]] = arith.mulf %[[X]], %[[DX]] : f32
// CHECK-NEXT:        %[[Z:.+]] = arith.subf %[[XY]], %[[Y]] : f32
// CHECK-NEXT:        memref.store %[[Z]], %[[MAP]][%[[R3]], %[[C3]]]
//
// block_atomic_add: read, add, write each element of the rows before the bound.
// CHECK:         scf.for %[[R4:[a-z0-9_]+]] =
// CHECK-NEXT:      scf.for %[[C4:[a-z0-9_]+]] =
// CHECK-NEXT:        %[[ROW:.+]] = arith.addi %[[I]], %[[R4]] : index
// CHECK-NEXT:        %[[IN:.+]] = arith.cmpi ult, %[[ROW]], %[[M]] : index
// CHECK-NEXT:        scf.if %[[IN]] {
// CHECK-NEXT:          %[[OLD:.+]] = memref.load %[[WS]][%[[I]], %[[I]], %[[ROW]], %[[C4]]]
// CHECK-NEXT:          %[[ADD:.+]] = memref.load %[[MAP]][%[[R4]], %[[C4]]]
// CHECK-NEXT:          %[[NEW:.+]] = arith.addf %[[OLD]], %[[ADD]] : f32
// CHECK-NEXT:          memref.store %[[NEW]], %[[WS]][%[[I]], %[[I]], %[[ROW]], %[[C4]]]
// CHECK:         return
func.func @backward_block_ops(%P: memref<?x?x?x4xf32>, %DO: memref<?x?x?x2xbf16>,
                              %ROWS: memref<?x?x?xf32>, %WS: memref<?x?x?x4xf32>,
                              %OUT: memref<?x?x?x2xf32>, %i: index, %m: index) {
  %p = tile.block_load %P[%i, %i, %i] bound %m : memref<?x?x?x4xf32> -> tensor<8x4xf32>
  %do = tile.block_load %DO[%i, %i, %i] bound %m : memref<?x?x?x2xbf16> -> tensor<8x2xbf16>
  %rows = tile.block_load %ROWS[%i, %i, %i] bound %m : memref<?x?x?xf32> -> tensor<8xf32>
  %dv = tile.block_dot %p, %do transpose_lhs : tensor<8x4xf32>, tensor<8x2xbf16> -> tensor<4x2xf32>
  %f, %df = tile.block_score_mod_grad %p at(%i, %i, %i, %i) : tensor<8x4xf32> {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %t = math.tanh %s : f32
    %one = arith.constant 1.0 : f32
    %t2 = arith.mulf %t, %t : f32
    %d = arith.subf %one, %t2 : f32
    tile.yield %t, %d : f32, f32
  }
  %z = tile.block_map %f, %df, %rows : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xf32> -> tensor<8x4xf32> {
  ^bb0(%x: f32, %dx: f32, %y: f32):
    %xy = arith.mulf %x, %dx : f32
    %r = arith.subf %xy, %y : f32
    tile.yield %r : f32
  }
  tile.block_atomic_add %z, %WS[%i, %i, %i] bound %m : tensor<8x4xf32>, memref<?x?x?x4xf32>
  tile.block_store %dv, %OUT[%i, %i, %i] bound %m : tensor<4x2xf32>, memref<?x?x?x2xf32>
  return
}
