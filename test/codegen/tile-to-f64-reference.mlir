// RUN: tilefuse-opt %s --split-input-file --tile-to-f64-reference --verify-diagnostics | FileCheck %s

// The written form of a softcapped, causal kernel becomes @<name>_reference: f64 views with
// dynamic sizes and strides plus the row range, one loop over query rows, and inside it one loop
// per op over the row (loops arranged for the CPU, sums in the definition's order): Q.K^T (GQA
// head h / (H / Hkv)), the scale 1/sqrt(D) of the contraction
// length, the score region in f64, the mask, a two-pass softmax, P.V and the stores.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @softcap_causal_reference(
// CHECK-SAME:    %[[Q:[a-z0-9]+]]: memref<?x?x?x?xf64, strided<[?, ?, ?, ?], offset: ?>>,
// CHECK-SAME:    %[[LSE:[a-z0-9]+]]: memref<?x?x?xf64, strided<[?, ?, ?], offset: ?>>,
// CHECK-SAME:    %[[BEGIN:[a-z0-9]+]]: index, %[[END:[a-z0-9]+]]: index)
// CHECK-SAME:    attributes {llvm.emit_c_interface}
// The parameter outside the region is evaluated once, in f64.
// CHECK:         %[[CAP:.+]] = arith.constant 3.000000e+01 : f64
// CHECK:         scf.for %[[ROW:.+]] = %[[BEGIN]] to %[[END]]
// Q.K^T: a full dot product per key, four keys at a time (four independent sums, each in the
// order of the definition), then the keys left over one at a time.
// CHECK:           %[[FOUR:.+]] = arith.constant 4 : index
// CHECK:           scf.for {{.*}} step %[[FOUR]]
// CHECK:             scf.for {{.*}} iter_args({{.*}}) -> (f64, f64, f64, f64)
// CHECK-COUNT-4:       arith.mulf {{.*}} : f64
// CHECK:           scf.for
// CHECK:             scf.for {{.*}} iter_args({{.*}}) -> (f64)
// CHECK:               arith.mulf {{.*}} : f64
// The default scale: 1/sqrt of the contraction length.
// CHECK:           math.sqrt {{.*}} : f64
// The score region, promoted to f64.
// CHECK:           scf.for
// CHECK:             arith.divf %{{.+}}, %[[CAP]] : f64
// CHECK:             math.tanh {{.*}} : f64
// The mask region: -inf where it yields false.
// CHECK:           scf.for
// CHECK:             arith.cmpi ule
// CHECK:             arith.select {{.*}} : f64
// Softmax: row max, sum of exp, probabilities (zero for a row with no kept score), logsumexp.
// CHECK:           arith.maximumf
// CHECK:           math.exp
// CHECK:           arith.divf
// CHECK:           math.log
// P.V by rows of V: O's row zeroed, then row k of V times P[k] added to all of it, k in order.
// CHECK:           scf.for
// CHECK:             memref.store {{.*}} : memref<?xf64>
// CHECK:           scf.for
// CHECK:             scf.for
// CHECK:               memref.load {{.*}} : memref<?xf64>
// CHECK:               arith.mulf
// CHECK:               arith.addf
// CHECK:               memref.store {{.*}} : memref<?xf64>
// Then the stores of O and of the logsumexp.
// CHECK:           memref.store {{.*}} : memref<?x?x?x?xf64, strided<[?, ?, ?, ?], offset: ?>>
// CHECK:           memref.store {{.*}}, %[[LSE]]
// CHECK-NOT:     func.func @softcap_causal(
func.func @softcap_causal(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s : !scores
  %cap = arith.constant {tile.param = "cap"} 30.0 : f32
  %c = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %x = arith.divf %score, %cap : f32
    %th = math.tanh %x : f32
    %r = arith.mulf %th, %cap : f32
    tile.yield %r : f32
  }
  %u = tile.mask %c : !scores {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %keep = arith.cmpi ule, %kv, %qi : index
    tile.yield %keep : i1
  }
  %p, %lse = tile.softmax %u : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// A scale with a factor uses it; f32 <-> f16 casts in a region keep their meaning in f64.

!qkv = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

// CHECK-LABEL: func.func @scaled_reference(
// CHECK-NOT:     math.sqrt
// CHECK:         arith.constant 1.250000e-01 : f64
// CHECK:         arith.truncf %{{.+}} : f64 to f16
// CHECK:         arith.extf %{{.+}} : f16 to f64
func.func @scaled(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %t = tile.scale %s by 0.125 : !scores
  %r = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %h16 = arith.truncf %score : f32 to f16
    %back = arith.extf %h16 : f16 to f32
    tile.yield %back : f32
  }
  %p, %lse = tile.softmax %r : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// An op with no f64 meaning (the bits of an f32) is an error at that op.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>
!out = tensor<?x?x?x64xf32>

func.func @bits(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %v = tile.load %V : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %r = tile.score_mod %s : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    // expected-error @below {{cannot be evaluated in f64 by the float64 reference}}
    %i = arith.bitcast %score : f32 to i32
    %f = arith.bitcast %i : i32 to f32
    tile.yield %f : f32
  }
  %p, %lse = tile.softmax %r : !scores -> !scores, tensor<?x?x?xf32>
  %o = tile.dot %p, %v : !scores, !in -> !out
  tile.store %o, %O : !out, !qkv
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// The right operand of a dot must be a loaded view.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!lse = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!in = tensor<?x?x?x64xbf16>
!scores = tensor<?x?x?x?xf32>

func.func @computed_rhs(%Q: !qkv, %K: !qkv, %V: !qkv, %O: !qkv, %LSE: !lse) {
  %q = tile.load %Q : !qkv -> !in
  %k = tile.load %K : !qkv -> !in
  %s = tile.dot %q, %k transpose_rhs : !in, !in -> !scores
  %p, %lse = tile.softmax %s : !scores -> !scores, tensor<?x?x?xf32>
  // expected-error @below {{the float64 reference needs the right operand of tile.dot to be a tile.load of a view}}
  %pp = tile.dot %p, %p : !scores, !scores -> !scores
  tile.store %lse, %LSE : tensor<?x?x?xf32>, !lse
  return
}

// -----

// Tiled IR is not the written form.

!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>

func.func @tiled(%Q: !qkv, %i: index, %n: index) {
  // expected-error @below {{is not part of the written form the float64 reference evaluates}}
  %blk = tile.block_load %Q[%i, %i, %i] bound %n : !qkv -> tensor<64x64xbf16>
  return
}
