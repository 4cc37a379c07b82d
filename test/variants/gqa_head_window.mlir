// Grouped-query attention whose score and mask depend on the query head (a test-only variant,
// not in kernels/): an ALiBi-style bias -0.05 (h + 1) (q - kv) and a causal window of 16 (h + 1)
// keys. With GQA packing one program's rows span several query heads, so every row must see its
// own head, and block pruning must classify blocks over the heads they hold.
!elt = bf16
!qo = memref<?x?x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!kv = memref<?x?x?x64x!elt, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64x!elt>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @gqa_head_window(%Q: !qo, %K: !kv, %V: !kv, %O: !qo, %LSE: !lse) {
  %q = tile.load %Q : !qo -> !in
  %k = tile.load %K : !kv -> !in
  %v = tile.load %V : !kv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %biased = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kvi: index):
    %one = arith.constant 1 : index
    %h1 = arith.addi %h, %one : index
    %h64 = arith.index_cast %h1 : index to i64
    %hf = arith.sitofp %h64 : i64 to f32
    %m = arith.constant -0.05 : f32
    %slope = arith.mulf %m, %hf : f32
    %qi64 = arith.index_cast %qi : index to i64
    %kv64 = arith.index_cast %kvi : index to i64
    %d = arith.subi %qi64, %kv64 : i64
    %df = arith.sitofp %d : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %score, %bias : f32
    tile.yield %r : f32
  }
  %u = tile.mask %biased : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kvi: index):
    %one = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %h1 = arith.addi %h, %one : index
    %window = arith.muli %h1, %c16 : index
    %causal = arith.cmpi ule, %kvi, %qi : index
    %reach = arith.addi %kvi, %window : index
    %near = arith.cmpi ugt, %reach, %qi : index
    %keep = arith.andi %causal, %near : i1
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qo
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}
