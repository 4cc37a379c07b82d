// Soft-capping with a per-head bias (a test-only variant, not in kernels/):
// score' = 20 tanh(score / 20) - 0.25 h.
!elt = bf16
!qkv = memref<?x?x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64x!elt>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @softcap_head_bias(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %cap = arith.constant 20.0 : f32
  %slope = arith.constant -0.25 : f32
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %x = arith.divf %score, %cap : f32
    %th = math.tanh %x : f32
    %capped = arith.mulf %th, %cap : f32
    %h64 = arith.index_cast %h : index to i64
    %hf = arith.sitofp %h64 : i64 to f32
    %bias = arith.mulf %slope, %hf : f32
    %r = arith.addf %capped, %bias : f32
    tile.yield %r : f32
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
