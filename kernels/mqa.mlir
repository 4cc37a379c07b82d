// Multi-query attention: 8 query heads share a single key/value head.
!elt = bf16
!qo = memref<?x8x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!kv = memref<?x1x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x8x?xf32, strided<[?, ?, 1], offset: ?>>
!qin = tensor<?x8x?x64x!elt>
!kvin = tensor<?x1x?x64x!elt>
!scores = tensor<?x8x?x?xf32>
!out = tensor<?x8x?x64xf32>

func.func @mqa(%Q: !qo, %K: !kv, %V: !kv, %O: !qo, %LSE: !lse) {
  %q = tile.load %Q : !qo -> !qin
  %k = tile.load %K : !kv -> !kvin
  %v = tile.load %V : !kv -> !kvin
  %s = tile.dot %q, %k transpose_rhs : !qin, !kvin -> !scores
  %t = tile.scale %s : !scores
  %p, %lse = tile.softmax %t : !scores -> !scores, tensor<?x8x?xf32>
  %o = tile.dot %p, %v : !scores, !kvin -> !out
  tile.store %o, %O : !out, !qo
  tile.store %lse, %LSE : tensor<?x8x?xf32>, !lse
  return
}
