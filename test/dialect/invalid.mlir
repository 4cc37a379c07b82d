// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics

// One case per verifier message of dialect/lib/TileOps.cpp. The messages name the sizes that
// disagree, so the checks include them.

//===----------------------------------------------------------------------===//
// tile.load
//===----------------------------------------------------------------------===//

func.func @load_rank2(%v: memref<?x64xbf16>) {
  // expected-error @+1 {{'tile.load' op operand #0 must be}}
  %t = tile.load %v : memref<?x64xbf16> -> tensor<?x64xbf16>
  return
}

// -----

func.func @load_element_type(%v: memref<?x?x?x64xbf16>) {
  // expected-error @+1 {{'tile.load' op result element type 'f16' differs from the view's 'bf16'}}
  %t = tile.load %v : memref<?x?x?x64xbf16> -> tensor<?x?x?x64xf16>
  return
}

// -----

func.func @load_shape(%v: memref<?x?x?x64xbf16>) {
  // expected-error @+1 {{'tile.load' op result shape does not match the view shape}}
  %t = tile.load %v : memref<?x?x?x64xbf16> -> tensor<?x?x?x32xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.store
//===----------------------------------------------------------------------===//

func.func @store_rank(%t: tensor<?x?x?xf32>, %v: memref<?x?x?x64xbf16>) {
  // expected-error @+1 {{'tile.store' op value rank 3 differs from view rank 4}}
  tile.store %t, %v : tensor<?x?x?xf32>, memref<?x?x?x64xbf16>
  return
}

// -----

func.func @store_shape(%t: tensor<2x?x?x64xf32>, %v: memref<3x?x?x64xbf16>) {
  // expected-error @+1 {{'tile.store' op value shape does not match the view shape}}
  tile.store %t, %v : tensor<2x?x?x64xf32>, memref<3x?x?x64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.dot
//===----------------------------------------------------------------------===//

func.func @dot_rank(%q: tensor<?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>) {
  // expected-error @+1 {{'tile.dot' op operands and result must be rank-4 B x H x rows x cols tensors}}
  %s = tile.dot %q, %k transpose_rhs : tensor<?x?x64xbf16>, tensor<?x?x?x64xbf16> -> tensor<?x?x?x?xf32>
  return
}

// -----

func.func @dot_batch(%q: tensor<2x8x?x64xbf16>, %k: tensor<3x8x?x64xbf16>) {
  // expected-error @+1 {{'tile.dot' op batch sizes differ: lhs has 2, rhs has 3}}
  %s = tile.dot %q, %k transpose_rhs : tensor<2x8x?x64xbf16>, tensor<3x8x?x64xbf16> -> tensor<2x8x?x?xf32>
  return
}

// -----

// Grouped-query attention needs H to be a multiple of Hkv.
func.func @dot_gqa_heads(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x3x?x64xbf16>) {
  // expected-error @+1 {{'tile.dot' op query heads (8) must be a multiple of key/value heads (3) for grouped-query attention}}
  %s = tile.dot %q, %k transpose_rhs : tensor<?x8x?x64xbf16>, tensor<?x3x?x64xbf16> -> tensor<?x8x?x?xf32>
  return
}

// -----

// Zero key/value heads is not a divisor of anything (and must not divide by zero).
func.func @dot_zero_kv_heads(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x0x?x64xbf16>) {
  // expected-error @+1 {{query heads (8) must be a multiple of key/value heads (0)}}
  %s = tile.dot %q, %k transpose_rhs : tensor<?x8x?x64xbf16>, tensor<?x0x?x64xbf16> -> tensor<?x8x?x?xf32>
  return
}

// -----

func.func @dot_contraction_transposed(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x32xbf16>) {
  // expected-error @+1 {{'tile.dot' op contraction sizes differ: lhs has 64, rhs has 32}}
  %s = tile.dot %q, %k transpose_rhs : tensor<?x?x?x64xbf16>, tensor<?x?x?x32xbf16> -> tensor<?x?x?x?xf32>
  return
}

// -----

// Without transpose_rhs the contraction runs over the rows of rhs.
func.func @dot_contraction(%p: tensor<?x?x?x128xf32>, %v: tensor<?x?x256x64xbf16>) {
  // expected-error @+1 {{'tile.dot' op contraction sizes differ: lhs has 128, rhs has 256}}
  %o = tile.dot %p, %v : tensor<?x?x?x128xf32>, tensor<?x?x256x64xbf16> -> tensor<?x?x?x64xf32>
  return
}

// -----

func.func @dot_result_shape(%p: tensor<?x8x?x?xf32>, %v: tensor<?x2x?x64xbf16>) {
  // expected-error @+1 {{'tile.dot' op result shape must be ?x8x?x64}}
  %o = tile.dot %p, %v : tensor<?x8x?x?xf32>, tensor<?x2x?x64xbf16> -> tensor<?x8x?x32xf32>
  return
}

// -----

// The result keeps the query heads, not the key/value heads.
func.func @dot_result_heads(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>) {
  // expected-error @+1 {{'tile.dot' op result shape must be ?x8x?x?}}
  %s = tile.dot %q, %k transpose_rhs : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16> -> tensor<?x2x?x?xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.scale
//===----------------------------------------------------------------------===//

func.func @scale_zero(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.scale' op factor must be finite and non-zero, got 0}}
  %t = tile.scale %s by 0.0 : tensor<?x?x?x?xf32>
  return
}

// -----

func.func @scale_inf(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.scale' op factor must be finite and non-zero}}
  %t = tile.scale %s by 0x7FF0000000000000 : tensor<?x?x?x?xf32>
  return
}

// -----

func.func @scale_nan(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.scale' op factor must be finite and non-zero}}
  %t = tile.scale %s by 0x7FF8000000000000 : tensor<?x?x?x?xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.score_mod
//===----------------------------------------------------------------------===//

func.func @score_mod_arg_count(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.score_mod' op body must take 5 arguments (score: f32, b, h, q_idx, kv_idx: index), got 4}}
  %t = tile.score_mod %s : tensor<?x?x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %z = arith.constant 0.0 : f32
    tile.yield %z : f32
  }
  return
}

// -----

func.func @score_mod_score_type(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.score_mod' op body argument #0 (the score) must be f32, got 'f16'}}
  %t = tile.score_mod %s : tensor<?x?x?x?xf32> {
  ^bb0(%score: f16, %b: index, %h: index, %qi: index, %kv: index):
    %z = arith.constant 0.0 : f32
    tile.yield %z : f32
  }
  return
}

// -----

func.func @score_mod_index_type(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.score_mod' op body argument #3 must be index, got 'i64'}}
  %t = tile.score_mod %s : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: i64, %kv: index):
    tile.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_yield_type(%s: tensor<?x?x?x?xf32>) {
  %t = tile.score_mod %s : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %d = arith.extf %score : f32 to f64
    // expected-error @+1 {{'tile.yield' op must yield exactly one 'f32' (the new score)}}
    tile.yield %d : f64
  }
  return
}

// -----

func.func @score_mod_grad_yield_one(%s: tensor<?x?x?x?xf32>) {
  %t, %dt = tile.score_mod_grad %s : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'tile.yield' op must yield exactly two 'f32' (the new score and its derivative with respect to the score)}}
    tile.yield %score : f32
  }
  return
}

// -----

func.func @score_mod_yield_none(%s: tensor<?x?x?x?xf32>) {
  %t = tile.score_mod %s : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'tile.yield' op must yield exactly one 'f32' (the new score)}}
    tile.yield
  }
  return
}

// -----

func.func @score_mod_terminator(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.score_mod' op body must end with tile.yield}}
  %t = tile.score_mod %s : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    ub.unreachable
  }
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.mask
//===----------------------------------------------------------------------===//

func.func @mask_arg_count(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.mask' op body must take 4 arguments (b, h, q_idx, kv_idx: index), got 5}}
  %t = tile.mask %s : tensor<?x?x?x?xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  return
}

// -----

func.func @mask_index_type(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.mask' op body argument #0 must be index, got 'f32'}}
  %t = tile.mask %s : tensor<?x?x?x?xf32> {
  ^bb0(%b: f32, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  return
}

// -----

// A mask yields a predicate, not a score.
func.func @mask_yields_f32(%s: tensor<?x?x?x?xf32>) {
  %t = tile.mask %s : tensor<?x?x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %z = arith.constant 0.0 : f32
    // expected-error @+1 {{'tile.yield' op must yield exactly one 'i1' (true keeps the score)}}
    tile.yield %z : f32
  }
  return
}

// -----

func.func @mask_yields_two(%s: tensor<?x?x?x?xf32>) {
  %t = tile.mask %s : tensor<?x?x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %true = arith.constant true
    // expected-error @+1 {{'tile.yield' op must yield exactly one 'i1' (true keeps the score)}}
    tile.yield %true, %true : i1, i1
  }
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.softmax
//===----------------------------------------------------------------------===//

func.func @softmax_rank(%s: tensor<?x?x?xf32>) {
  // expected-error @+1 {{'tile.softmax' op expects rank-4 B x H x M x N scores}}
  %p, %lse = tile.softmax %s : tensor<?x?x?xf32> -> tensor<?x?x?xf32>, tensor<?x?xf32>
  return
}

// -----

func.func @softmax_probs_type(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.softmax' op probabilities must have the scores' type}}
  %p, %lse = tile.softmax %s : tensor<?x?x?x?xf32> -> tensor<2x?x?x?xf32>, tensor<?x?x?xf32>
  return
}

// -----

func.func @softmax_lse_rank(%s: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.softmax' op logsumexp must be B x H x M}}
  %p, %lse = tile.softmax %s : tensor<?x?x?x?xf32> -> tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
  return
}

// -----

func.func @softmax_lse_shape(%s: tensor<?x8x128x?xf32>) {
  // expected-error @+1 {{'tile.softmax' op logsumexp must be B x H x M}}
  %p, %lse = tile.softmax %s : tensor<?x8x128x?xf32> -> tensor<?x8x128x?xf32>, tensor<?x8x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.block_load / tile.block_store
//===----------------------------------------------------------------------===//

func.func @block_load_index_count(%v: memref<?x?x?x64xbf16>, %i: index, %n: index) {
  // expected-error @+1 {{'tile.block_load' op a rank-2 block of a rank-4 view needs 3 indices, got 2}}
  %b = tile.block_load %v[%i, %i] bound %n : memref<?x?x?x64xbf16> -> tensor<32x64xbf16>
  return
}

// -----

func.func @block_load_no_index(%v: memref<?x?x?x64xbf16>, %n: index) {
  // expected-error @+1 {{'tile.block_load' op a rank-2 block of a rank-4 view needs 3 indices, got 0}}
  %b = tile.block_load %v[] bound %n : memref<?x?x?x64xbf16> -> tensor<32x64xbf16>
  return
}

// -----

func.func @block_load_element_type(%v: memref<?x?x?x64xbf16>, %i: index, %n: index) {
  // expected-error @+1 {{'tile.block_load' op result element type must equal the view's}}
  %b = tile.block_load %v[%i, %i, %i] bound %n : memref<?x?x?x64xbf16> -> tensor<32x64xf32>
  return
}

// -----

func.func @block_load_dynamic(%v: memref<?x?x?x64xbf16>, %i: index, %n: index) {
  // expected-error @+1 {{'tile.block_load' op block shape must be static}}
  %b = tile.block_load %v[%i, %i, %i] bound %n : memref<?x?x?x64xbf16> -> tensor<?x64xbf16>
  return
}

// -----

func.func @block_load_width(%v: memref<?x?x?x64xbf16>, %i: index, %n: index) {
  // expected-error @+1 {{'tile.block_load' op block dimension 1 (32) must equal the view's static dimension (64)}}
  %b = tile.block_load %v[%i, %i, %i] bound %n : memref<?x?x?x64xbf16> -> tensor<32x32xbf16>
  return
}

// -----

// The trailing dimensions are taken in full, so they must be static in the view.
func.func @block_load_dynamic_width(%v: memref<?x?x?x?xbf16>, %i: index, %n: index) {
  // expected-error @+1 {{'tile.block_load' op block dimension 1 (64) must equal the view's static dimension (?)}}
  %b = tile.block_load %v[%i, %i, %i] bound %n : memref<?x?x?x?xbf16> -> tensor<32x64xbf16>
  return
}

// -----

func.func @block_store_index_count(%t: tensor<64xf32>, %v: memref<?x?x?xf32>, %i: index, %n: index) {
  // expected-error @+1 {{'tile.block_store' op a rank-1 block of a rank-3 view needs 3 indices, got 4}}
  tile.block_store %t, %v[%i, %i, %i, %i] bound %n : tensor<64xf32>, memref<?x?x?xf32>
  return
}

// -----

func.func @block_store_width(%t: tensor<64x128xf32>, %v: memref<?x?x?x64xbf16>, %i: index, %n: index) {
  // expected-error @+1 {{'tile.block_store' op block dimension 1 (128) must equal the view's static dimension (64)}}
  tile.block_store %t, %v[%i, %i, %i] bound %n : tensor<64x128xf32>, memref<?x?x?x64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.block_dot
//===----------------------------------------------------------------------===//

func.func @block_dot_contraction(%q: tensor<64x64xbf16>, %k: tensor<32x128xbf16>) {
  // expected-error @+1 {{'tile.block_dot' op contraction sizes differ: lhs has 64, rhs has 128}}
  %s = tile.block_dot %q, %k transpose_rhs : tensor<64x64xbf16>, tensor<32x128xbf16> -> tensor<64x32xf32>
  return
}

// -----

func.func @block_dot_contraction_plain(%p: tensor<64x32xf32>, %v: tensor<64x64xbf16>) {
  // expected-error @+1 {{'tile.block_dot' op contraction sizes differ: lhs has 32, rhs has 64}}
  %o = tile.block_dot %p, %v : tensor<64x32xf32>, tensor<64x64xbf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @block_dot_result(%q: tensor<64x64xbf16>, %k: tensor<32x64xbf16>) {
  // expected-error @+1 {{'tile.block_dot' op result must be 64x32}}
  %s = tile.block_dot %q, %k transpose_rhs : tensor<64x64xbf16>, tensor<32x64xbf16> -> tensor<64x64xf32>
  return
}

// -----

func.func @block_dot_acc(%p: tensor<64x32xf32>, %v: tensor<32x64xbf16>, %acc: tensor<64x32xf32>) {
  // expected-error @+1 {{'tile.block_dot' op accumulator type must equal the result type}}
  %o = tile.block_dot %p, %v acc %acc : tensor<64x32xf32>, tensor<32x64xbf16>, tensor<64x32xf32> -> tensor<64x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.block_score_mod / tile.block_mask
//===----------------------------------------------------------------------===//

func.func @block_score_mod_arg_count(%s: tensor<64x32xf32>, %i: index) {
  // expected-error @+1 {{'tile.block_score_mod' op body must take 5 arguments (score: f32, b, h, q_idx, kv_idx: index), got 1}}
  %t = tile.block_score_mod %s at (%i, %i, %i, %i) : tensor<64x32xf32> {
  ^bb0(%score: f32):
    tile.yield %score : f32
  }
  return
}

// -----

func.func @block_score_mod_score_type(%s: tensor<64x32xf32>, %i: index) {
  // expected-error @+1 {{'tile.block_score_mod' op body argument #0 (the score) must be f32, got 'index'}}
  %t = tile.block_score_mod %s at (%i, %i, %i, %i) : tensor<64x32xf32> {
  ^bb0(%score: index, %b: index, %h: index, %qi: index, %kv: index):
    %z = arith.constant 0.0 : f32
    tile.yield %z : f32
  }
  return
}

// -----

func.func @block_score_mod_yield(%s: tensor<64x32xf32>, %i: index) {
  %t = tile.block_score_mod %s at (%i, %i, %i, %i) : tensor<64x32xf32> {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'tile.yield' op must yield exactly one 'f32' (the new score)}}
    tile.yield %kv : index
  }
  return
}

// -----

func.func @block_mask_index_type(%s: tensor<64x32xf32>, %i: index) {
  // expected-error @+1 {{'tile.block_mask' op body argument #2 must be index, got 'i32'}}
  %t = tile.block_mask %s at (%i, %i, %i, %i) : tensor<64x32xf32> {
  ^bb0(%b: index, %h: index, %qi: i32, %kv: index):
    %true = arith.constant true
    tile.yield %true : i1
  }
  return
}

// -----

func.func @block_mask_yields_f32(%s: tensor<64x32xf32>, %i: index) {
  %t = tile.block_mask %s at (%i, %i, %i, %i) : tensor<64x32xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %z = arith.constant 0.0 : f32
    // expected-error @+1 {{'tile.yield' op must yield exactly one 'i1' (true keeps the score)}}
    tile.yield %z : f32
  }
  return
}

// -----

//===----------------------------------------------------------------------===//
// tile.reduce / tile.broadcast
//===----------------------------------------------------------------------===//

func.func @reduce_length(%s: tensor<64x32xf32>) {
  // expected-error @+1 {{'tile.reduce' op result length must equal the input's row count}}
  %r = tile.reduce max %s : tensor<64x32xf32> -> tensor<32xf32>
  return
}

// -----

func.func @reduce_sum_length(%s: tensor<64x32xf32>) {
  // expected-error @+1 {{'tile.reduce' op result length must equal the input's row count}}
  %r = tile.reduce sum %s : tensor<64x32xf32> -> tensor<128xf32>
  return
}

// -----

func.func @broadcast_length(%r: tensor<64xf32>) {
  // expected-error @+1 {{'tile.broadcast' op result row count must equal the input length}}
  %b = tile.broadcast %r : tensor<64xf32> -> tensor<32x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Ops of derived (backward) kernels
//===----------------------------------------------------------------------===//

func.func @dot_transpose_lhs_contraction(%p: tensor<?x8x16x?xf32>, %do: tensor<?x8x32x64xbf16>) {
  // expected-error @+1 {{'tile.dot' op contraction sizes differ: lhs has 16, rhs has 32}}
  %dv = tile.dot %p, %do transpose_lhs : tensor<?x8x16x?xf32>, tensor<?x8x32x64xbf16> -> tensor<?x8x?x64xf32>
  return
}

// -----

func.func @dot_transpose_lhs_result(%p: tensor<?x8x16x40xf32>, %do: tensor<?x8x16x64xbf16>) {
  // expected-error @+1 {{'tile.dot' op result shape must be ?x8x40x64}}
  %dv = tile.dot %p, %do transpose_lhs : tensor<?x8x16x40xf32>, tensor<?x8x16x64xbf16> -> tensor<?x8x16x64xf32>
  return
}

// -----

func.func @softmax_from_lse_rank(%s: tensor<?x?x?xf32>, %lse: tensor<?x?x?xf32>) {
  // expected-error @+1 {{'tile.softmax_from_lse' op expects rank-4 B x H x M x N scores}}
  %p = tile.softmax_from_lse %s, %lse : tensor<?x?x?xf32>, tensor<?x?x?xf32> -> tensor<?x?x?xf32>
  return
}

// -----

func.func @softmax_from_lse_rows(%s: tensor<?x?x7x?xf32>, %lse: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'tile.softmax_from_lse' op logsumexp must be B x H x M of the scores, got 'tensor<?x?x8xf32>'}}
  %p = tile.softmax_from_lse %s, %lse : tensor<?x?x7x?xf32>, tensor<?x?x8xf32> -> tensor<?x?x7x?xf32>
  return
}

// -----

func.func @softmax_from_lse_type(%s: tensor<?x?x?x?xf32>, %lse: tensor<?x?x?xf32>) {
  // expected-error @+1 {{'tile.softmax_from_lse' op probabilities must have the scores' type}}
  %p = tile.softmax_from_lse %s, %lse : tensor<?x?x?x?xf32>, tensor<?x?x?xf32> -> tensor<1x?x?x?xf32>
  return
}

// -----

func.func @map_no_operand() {
  // expected-error @+1 {{'tile.map' op needs at least one operand}}
  %m = "tile.map"() ({
  ^bb0:
    %c = arith.constant 1.0 : f32
    tile.yield %c : f32
  }) : () -> tensor<?x?x?x?xf32>
  return
}

// -----

func.func @map_rank(%a: tensor<?x?xf32>) {
  // expected-error @+1 {{'tile.map' op result must be rank 4 (B x H x M x N) or rank 3 (B x H x M), got rank 2}}
  %m = tile.map %a : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%x: f32):
    tile.yield %x : f32
  }
  return
}

// -----

func.func @map_shape(%a: tensor<2x?x?x?xf32>) {
  // expected-error @+1 {{'tile.map' op operand #0 of type 'tensor<2x?x?x?xf32>' does not match the result shape 'tensor<3x?x?x?xf32>'}}
  %m = tile.map %a : tensor<2x?x?x?xf32> -> tensor<3x?x?x?xf32> {
  ^bb0(%x: f32):
    tile.yield %x : f32
  }
  return
}

// -----

func.func @map_rows(%a: tensor<?x?x?x?xf32>, %r: tensor<?x?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.map' op operand #1 of type 'tensor<?x?x?x?x?xf32>' must have the result's shape or be its B x H x M rows}}
  %m = tile.map %a, %r : tensor<?x?x?x?xf32>, tensor<?x?x?x?x?xf32> -> tensor<?x?x?x?xf32> {
  ^bb0(%x: f32, %y: f32):
    tile.yield %x : f32
  }
  return
}

// -----

func.func @map_rows_only(%r: tensor<?x?x?xf32>) {
  // expected-error @+1 {{'tile.map' op needs an operand of the result's rank}}
  %m = tile.map %r : tensor<?x?x?xf32> -> tensor<?x?x?x?xf32> {
  ^bb0(%x: f32):
    tile.yield %x : f32
  }
  return
}

// -----

func.func @map_arguments(%a: tensor<?x?x?x?xf32>) {
  // expected-error @+1 {{'tile.map' op body must take one f32 per operand (1), got 2 arguments}}
  %m = tile.map %a : tensor<?x?x?x?xf32> -> tensor<?x?x?x?xf32> {
  ^bb0(%x: f32, %y: f32):
    tile.yield %x : f32
  }
  return
}

// -----

func.func @map_argument_type(%a: tensor<?x?x?x?xbf16>) {
  // expected-error @+1 {{'tile.map' op body argument #0 must be f32, got 'bf16'}}
  %m = tile.map %a : tensor<?x?x?x?xbf16> -> tensor<?x?x?x?xf32> {
  ^bb0(%x: bf16):
    %y = arith.extf %x : bf16 to f32
    tile.yield %y : f32
  }
  return
}

// -----

func.func @map_yield(%a: tensor<?x?x?x?xf32>) {
  %m = tile.map %a : tensor<?x?x?x?xf32> -> tensor<?x?x?x?xf32> {
  ^bb0(%x: f32):
    // expected-error @+1 {{'tile.yield' op must yield exactly one f32 (the result element)}}
    tile.yield %x, %x : f32, f32
  }
  return
}

// -----

func.func @row_reduce_shape(%a: tensor<?x?x5x?xf32>) {
  // expected-error @+1 {{'tile.row_reduce' op reduces a rank-4 B x H x M x N tensor to its B x H x M rows; got 'tensor<?x?x5x?xf32>' to 'tensor<?x?x6xf32>'}}
  %r = tile.row_reduce sum %a : tensor<?x?x5x?xf32> -> tensor<?x?x6xf32>
  return
}

// -----

func.func @sum_head_groups_rank(%a: tensor<?x?x?xf32>, %h: index) {
  // expected-error @+1 {{'tile.sum_head_groups' op input and result must be rank-4 B x H x rows x cols tensors}}
  %r = tile.sum_head_groups %a, %h : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
  return
}

// -----

func.func @sum_head_groups_dims(%a: tensor<?x8x16x?xf32>, %h: index) {
  // expected-error @+1 {{'tile.sum_head_groups' op dimension 2 differs: input has 16, result has 17}}
  %r = tile.sum_head_groups %a, %h : tensor<?x8x16x?xf32> -> tensor<?x2x17x?xf32>
  return
}

// -----

func.func @sum_head_groups_multiple(%a: tensor<?x8x?x?xf32>, %h: index) {
  // expected-error @+1 {{'tile.sum_head_groups' op query heads (8) must be a multiple of key/value heads (3)}}
  %r = tile.sum_head_groups %a, %h : tensor<?x8x?x?xf32> -> tensor<?x3x?x?xf32>
  return
}

// -----

func.func @split_arrive_indices(%c: memref<?x?x?xi32>, %b: index, %s: index) -> i1 {
  // expected-error @+1 {{'tile.split_arrive' op needs one index per dimension of the counters (3), got 1}}
  %last = tile.split_arrive %c[%b] count %s : memref<?x?x?xi32>
  return %last : i1
}

// -----

func.func @split_arrive_barrier_without_threads(%c: memref<?x?x?xi32>, %b: index, %s: index) -> i1 {
  // expected-error @+1 {{'tile.split_arrive' op takes barrier_id and threads together}}
  %last = tile.split_arrive %c[%b, %b, %b] count %s {barrier_id = 9 : i32} : memref<?x?x?xi32>
  return %last : i1
}

// -----

func.func @split_arrive_barrier_zero(%c: memref<?x?x?xi32>, %b: index, %s: index) -> i1 {
  // expected-error @+1 {{'tile.split_arrive' op named barrier ids are 1 to 15 (0 is the CTA's), not 0}}
  %last = tile.split_arrive %c[%b, %b, %b] count %s {barrier_id = 0 : i32, threads = 128 : i32} : memref<?x?x?xi32>
  return %last : i1
}

// -----

func.func @split_arrive_partial_warp(%c: memref<?x?x?xi32>, %b: index, %s: index) -> i1 {
  // expected-error @+1 {{'tile.split_arrive' op a named barrier counts whole warps: threads must be a positive multiple of 32, not 100}}
  %last = tile.split_arrive %c[%b, %b, %b] count %s {barrier_id = 9 : i32, threads = 100 : i32} : memref<?x?x?xi32>
  return %last : i1
}

// -----

func.func @block_dot_transpose_lhs_contraction(%p: tensor<64x32xf32>, %do: tensor<32x16xbf16>) {
  // expected-error @+1 {{'tile.block_dot' op contraction sizes differ: lhs has 64, rhs has 32}}
  %r = tile.block_dot %p, %do transpose_lhs : tensor<64x32xf32>, tensor<32x16xbf16> -> tensor<32x16xf32>
  return
}

// -----

func.func @block_dot_transpose_lhs_result(%p: tensor<64x32xf32>, %do: tensor<64x16xbf16>) {
  // expected-error @+1 {{'tile.block_dot' op result must be 32x16}}
  %r = tile.block_dot %p, %do transpose_lhs : tensor<64x32xf32>, tensor<64x16xbf16> -> tensor<64x16xf32>
  return
}

// -----

func.func @block_score_mod_grad_yield(%s: tensor<64x32xf32>, %i: index) {
  // expected-error @+3 {{'tile.yield' op must yield exactly two 'f32' (the new score and its derivative with respect to the score)}}
  %f, %df = tile.block_score_mod_grad %s at(%i, %i, %i, %i) : tensor<64x32xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %q: index, %kv: index):
    tile.yield %x : f32
  }
  return
}

// -----

func.func @block_map_operand(%a: tensor<64x32xf32>, %r: tensor<32xf32>) {
  // expected-error @+1 {{'tile.block_map' op operand #1 of type 'tensor<32xf32>' must be 64x32 or a vector of 64 rows}}
  %m = tile.block_map %a, %r : tensor<64x32xf32>, tensor<32xf32> -> tensor<64x32xf32> {
  ^bb0(%x: f32, %y: f32):
    tile.yield %x : f32
  }
  return
}

// -----

func.func @block_map_arguments(%a: tensor<64x32xbf16>) {
  // expected-error @+1 {{'tile.block_map' op body argument #0 must be f32, got 'bf16'}}
  %m = tile.block_map %a : tensor<64x32xbf16> -> tensor<64x32xf32> {
  ^bb0(%x: bf16):
    %y = arith.extf %x : bf16 to f32
    tile.yield %y : f32
  }
  return
}

// -----

func.func @block_atomic_add_shape(%v: tensor<64x32xf32>, %ws: memref<?x?x?x16xf32>, %i: index) {
  // expected-error @+1 {{'tile.block_atomic_add' op block dimension 1 (32) must equal the view's static dimension (16)}}
  tile.block_atomic_add %v, %ws[%i, %i, %i] bound %i : tensor<64x32xf32>, memref<?x?x?x16xf32>
  return
}

// -----

func.func @paged_rank3(%c: memref<?x?x?xf32>, %t: memref<?x?xi32>, %l: memref<?xi32>) {
  // expected-error @+1 {{'tile.load' op a paged load reads a rank-4 pages x heads x page rows x D cache}}
  %x = tile.load %c pages %t lengths %l : memref<?x?x?xf32>, memref<?x?xi32>, memref<?xi32> -> tensor<?x?x?xf32>
  return
}

// -----

func.func @paged_head_dim(%c: memref<?x?x?x64xbf16>, %t: memref<?x?xi32>, %l: memref<?xi32>) {
  // expected-error @+1 {{'tile.load' op result dimension 3 (32) differs from the cache's (64)}}
  %x = tile.load %c pages %t lengths %l : memref<?x?x?x64xbf16>, memref<?x?xi32>, memref<?xi32> -> tensor<?x?x?x32xbf16>
  return
}

// -----

func.func @paged_and_packed(%c: memref<?x?x?x64xbf16>, %t: memref<?x?xi32>, %i: index) {
  // expected-error @+1 {{'tile.block_load' op packed rows are rows of query heads; a paged cache holds keys and values: `packed` and `pages` do not go together}}
  %x = tile.block_load %c[%i, %i, %i] bound %i packed %i pages %t : memref<?x?x?x64xbf16>, memref<?x?xi32> -> tensor<32x64xbf16>
  return
}

// -----

func.func @varlen_and_paged(%c: memref<?x?x?x64xbf16>, %t: memref<?x?xi32>, %l: memref<?xi32>) {
  // expected-error @+1 {{'tile.load' op a load reads a paged cache or a packed batch (`sequences`), not both}}
  %x = tile.load %c pages %t lengths %l sequences %l : memref<?x?x?x64xbf16>, memref<?x?xi32>, memref<?xi32> -> tensor<?x?x?x64xbf16>
  return
}

// -----

func.func @varlen_rank3(%c: memref<?x?x?xf32>, %cu: memref<?xi32>) {
  // expected-error @+1 {{'tile.load' op a packed batch (`sequences`) is read from a rank-4 B x H x L x D view}}
  %x = tile.load %c sequences %cu : memref<?x?x?xf32> -> tensor<?x?x?xf32>
  return
}
