// RUN: tilefuse-opt %s -verify-diagnostics -tile-to-ptx -o /dev/null
// RUN: tilefuse-opt %s -tile-to-cpu -o /dev/null

// A head dimension of 2^31 verifies and runs on the CPU; the GPU lowering keeps Q in registers,
// d / 16 fragments per thread, and unrolled that many without bound (a hang, found by
// tilefuse-fuzz). It is refused at the Q block's load, which tiling places at the softmax.
!qkv = memref<?x?x?x2147483648xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x2147483648xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x2147483648xf32>
func.func @huge_head_dim(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  // expected-error @below {{'tile.block_load' op #tgpu.operand_a: m16k16 A fragments in registers cover at most 256 columns, not 2147483648}}
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
