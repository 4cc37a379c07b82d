// Sliding-window (local) attention: query i sees keys i - 100 .. i + 20 (parameters
// window_left, window_right). Blocks outside the band
// leave the loop range; blocks inside it run without mask arithmetic.
!elt = bf16
!qkv = memref<?x?x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64x!elt>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @sliding_window(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %left = arith.constant {tile.param = "window_left"} 100 : index
  %right = arith.constant {tile.param = "window_right"} 20 : index
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %lo = arith.addi %kv, %left : index
    %hi = arith.addi %qi, %right : index
    %after = arith.cmpi sge, %lo, %qi : index
    %before = arith.cmpi sle, %kv, %hi : index
    %keep = arith.andi %after, %before : i1
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
