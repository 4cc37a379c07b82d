// Chunked local attention (a test-only variant, not in kernels/): query i sees the keys of its
// own 384-token chunk up to itself: kv <= q and q / 384 == kv / 384.
!elt = bf16
!qkv = memref<?x?x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64x!elt>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @chunked_local(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %chunk = arith.constant {tile.param = "chunk"} 384 : index
  %u = tile.mask %t : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %causal = arith.cmpi ule, %kv, %qi : index
    %qc = arith.divui %qi, %chunk : index
    %kc = arith.divui %kv, %chunk : index
    %same = arith.cmpi eq, %qc, %kc : index
    %keep = arith.andi %causal, %same : i1
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
