// RUN: tilefuse-opt %s -split-input-file --tile-specialize="head-dim=128 element-type=f16" \
// RUN:   | FileCheck %s --check-prefix=RETYPE
// RUN: tilefuse-opt %s -split-input-file \
// RUN:   --tile-specialize="params=window_left=37,window_right=5,cap=12.5" \
// RUN:   | FileCheck %s --check-prefix=PARAMS
// RUN: not tilefuse-opt %s -split-input-file --tile-specialize="params=window=3" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tilefuse-opt %s -split-input-file --tile-specialize="params=window_left=wide" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOTINT

// tile-specialize retypes a kernel (head dimension, storage type) and sets its variant
// parameters: the constants it marks with a tile.param name.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

// RETYPE-LABEL: func.func @window(
// RETYPE-SAME:    memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>
// RETYPE:         tile.load {{.*}} -> tensor<?x?x?x128xf16>
// RETYPE:         tile.dot {{.*}} : tensor<?x?x?x128xf16>, tensor<?x?x?x128xf16> -> tensor<?x?x?x?xf32>
// RETYPE:         tile.store {{.*}} : tensor<?x?x?x128xf32>, memref<?x?x?x128xf16
// RETYPE:         tile.store {{.*}} : tensor<?x?x?xf32>, memref<?x?x?xf32

// PARAMS-LABEL: func.func @window(
// PARAMS:         arith.constant {tile.param = "window_left"} 37 : index
// PARAMS:         arith.constant {tile.param = "window_right"} 5 : index
// PARAMS:         arith.constant {tile.param = "cap"} 1.250000e+01 : f32

// UNKNOWN: error: tile-specialize: the kernel has no parameter 'window' (it has: {{.*}}window_left
// NOTINT: error: tile-specialize: parameter 'window_left' is an integer, not 'wide'
func.func @window(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %left = arith.constant {tile.param = "window_left"} 100 : index
  %right = arith.constant {tile.param = "window_right"} 20 : index
  %cap = arith.constant {tile.param = "cap"} 30.0 : f32
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %c = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %x = arith.divf %score, %cap : f32
    tile.yield %x : f32
  }
  %u = tile.mask %c : !scores {
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
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
