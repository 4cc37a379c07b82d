// Scaled dot-product attention, written once:
//   O = softmax(Q K^T / sqrt(D)) V      LSE = logsumexp(Q K^T / sqrt(D)) per query row
// (`tile.scale` without a factor is 1/sqrt(D)). The head dimension (64) and the storage type
// (`!elt`) are specialization parameters: `tilefuse compile --head-dim 128 --dtype f16`.
// Q, O: B x H x M x D;  K, V: B x Hkv x N x D (H a multiple of Hkv);  LSE: B x H x M, f32.
// Every variant in this folder is this text plus a score_mod and/or a mask region.
!elt = bf16
!qkv = memref<?x?x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64x!elt>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @attention(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
