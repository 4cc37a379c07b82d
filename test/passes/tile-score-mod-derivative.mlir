// RUN: tilefuse-opt %s -split-input-file -verify-diagnostics --tile-score-mod-derivative \
// RUN:   | FileCheck %s

// tile-score-mod-derivative: every score_mod becomes a score_mod_grad yielding (f, df/ds); the
// body is f's ops, each followed by its tangent. Values independent of the score (indices,
// constants, values captured from above) get no tangent ops.

!scores = tensor<?x?x?x?xf32>

// Soft-capping: f = cap tanh(s / cap), f' = (1 - tanh^2(s / cap)) (1 / cap) cap.
// CHECK-LABEL: func.func @softcap
// CHECK-SAME:    (%[[T:.+]]: tensor<?x?x?x?xf32>)
// CHECK:         %[[CAP:.+]] = arith.constant 3.000000e+01 : f32
// CHECK:         %[[V:[^,]+]], %{{.+}} = tile.score_mod_grad %[[T]] : tensor<?x?x?x?xf32> {
// CHECK-NEXT:    ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT:      %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[X:.+]] = arith.divf %[[S]], %[[CAP]] : f32
// CHECK-NEXT:      %[[DX:.+]] = arith.divf %[[ONE]], %[[CAP]] : f32
// CHECK-NEXT:      %[[TH:.+]] = math.tanh %[[X]] : f32
// CHECK-NEXT:      %[[ONE2:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[SQ:.+]] = arith.mulf %[[TH]], %[[TH]] : f32
// CHECK-NEXT:      %[[SECH2:.+]] = arith.subf %[[ONE2]], %[[SQ]] : f32
// CHECK-NEXT:      %[[DTH:.+]] = arith.mulf %[[DX]], %[[SECH2]] : f32
// CHECK-NEXT:      %[[R:.+]] = arith.mulf %[[TH]], %[[CAP]] : f32
// CHECK-NEXT:      %[[DR:.+]] = arith.mulf %[[DTH]], %[[CAP]] : f32
// CHECK-NEXT:      tile.yield %[[R]], %[[DR]] : f32, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[V]]
// CHECK-NOT:     tile.score_mod %
func.func @softcap(%t: !scores) -> !scores {
  %cap = arith.constant 30.0 : f32
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %x = arith.divf %score, %cap : f32
    %th = math.tanh %x : f32
    %r = arith.mulf %th, %cap : f32
    tile.yield %r : f32
  }
  return %u : !scores
}

// -----

// ALiBi: the bias comes from indices (through index casts and sitofp) and a value captured from
// above; none of it depends on the score, so f' = 1, the score's own tangent, and the bias is
// copied without tangent ops.
!qkv = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!scores = tensor<?x?x?x?xf32>
// CHECK-LABEL: func.func @alibi
// CHECK:         tile.score_mod_grad
// CHECK-NEXT:    ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %[[H:.+]]: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT:      %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[HF:.+]] = arith.index_cast %[[H]] : index to i64
// CHECK-NEXT:      %[[HFF:.+]] = arith.sitofp %[[HF]] : i64 to f32
// CHECK-NEXT:      %[[BIAS:.+]] = arith.mulf %{{.+}}, %[[HFF]] : f32
// CHECK-NEXT:      %[[R:.+]] = arith.addf %[[S]], %[[BIAS]] : f32
// CHECK-NEXT:      tile.yield %[[R]], %[[ONE]] : f32, f32
func.func @alibi(%Q: !qkv, %t: !scores) -> !scores {
  %c1 = arith.constant 1 : index
  %H = memref.dim %Q, %c1 : !qkv
  %Hi = arith.index_cast %H : index to i64
  %Hf = arith.sitofp %Hi : i64 to f32
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %hi = arith.index_cast %h : index to i64
    %hf = arith.sitofp %hi : i64 to f32
    %bias = arith.mulf %Hf, %hf : f32
    %r = arith.addf %score, %bias : f32
    tile.yield %r : f32
  }
  return %u : !scores
}

// -----

// A select on a condition computed from the score and one from the indices: the condition
// carries no gradient and the tangents are selected the same way (the constant branch has
// tangent 0).
!scores = tensor<?x?x?x?xf32>
// CHECK-LABEL: func.func @select
// CHECK:         tile.score_mod_grad
// CHECK-NEXT:    ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %[[Q:.+]]: index, %[[KV:.+]]: index):
// CHECK-NEXT:      %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[LIMIT:.+]] = arith.constant 5.000000e+00 : f32
// CHECK-NEXT:      %[[BIG:.+]] = arith.cmpf ogt, %[[S]], %[[LIMIT]] : f32
// CHECK-NEXT:      %[[CLIPPED:.+]] = arith.select %[[BIG]], %[[LIMIT]], %[[S]] : f32
// CHECK-NEXT:      %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[D1:.+]] = arith.select %[[BIG]], %[[ZERO]], %[[ONE]] : f32
// CHECK-NEXT:      %[[DIAG:.+]] = arith.cmpi eq, %[[Q]], %[[KV]] : index
// CHECK-NEXT:      %[[TWICE:.+]] = arith.addf %[[CLIPPED]], %[[CLIPPED]] : f32
// CHECK-NEXT:      %[[D2:.+]] = arith.addf %[[D1]], %[[D1]] : f32
// CHECK-NEXT:      %[[R:.+]] = arith.select %[[DIAG]], %[[TWICE]], %[[CLIPPED]] : f32
// CHECK-NEXT:      %[[DR:.+]] = arith.select %[[DIAG]], %[[D2]], %[[D1]] : f32
// CHECK-NEXT:      tile.yield %[[R]], %[[DR]] : f32, f32
func.func @select(%t: !scores) -> !scores {
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %limit = arith.constant 5.0 : f32
    %big = arith.cmpf ogt, %score, %limit : f32
    %clipped = arith.select %big, %limit, %score : f32
    %diag = arith.cmpi eq, %qi, %kv : index
    %twice = arith.addf %clipped, %clipped : f32
    %r = arith.select %diag, %twice, %clipped : f32
    tile.yield %r : f32
  }
  return %u : !scores
}

// -----

// A composition: exp, log, a maximum (tangent of the operand the result equals, half of each on
// a tie), and a round trip through bf16 (the tangent is cast the same way).
!scores = tensor<?x?x?x?xf32>
// CHECK-LABEL: func.func @composition
// CHECK:         tile.score_mod_grad
// CHECK-NEXT:    ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT:      %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[FLOOR:.+]] = arith.constant -2.000000e+00 : f32
// CHECK-NEXT:      %[[M:.+]] = arith.maximumf %[[S]], %[[FLOOR]] : f32
// CHECK-NEXT:      %[[FROMS:.+]] = arith.cmpf oeq, %[[M]], %[[S]] : f32
// CHECK-NEXT:      %[[FROMC:.+]] = arith.cmpf oeq, %[[M]], %[[FLOOR]] : f32
// CHECK-NEXT:      %[[HALFC:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      %[[HALF:.+]] = arith.mulf %[[ONE]], %[[HALFC]] : f32
// CHECK-NEXT:      %[[INNER:.+]] = arith.select %[[FROMC]], %[[HALF]], %[[ONE]] : f32
// CHECK-NEXT:      %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[DM:.+]] = arith.select %[[FROMS]], %[[INNER]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[E:.+]] = math.exp %[[M]] : f32
// CHECK-NEXT:      %[[DE:.+]] = arith.mulf %[[DM]], %[[E]] : f32
// CHECK-NEXT:      %[[L:.+]] = math.log %[[E]] : f32
// CHECK-NEXT:      %[[DL:.+]] = arith.divf %[[DE]], %[[E]] : f32
// CHECK-NEXT:      %[[NARROW:.+]] = arith.truncf %[[L]] : f32 to bf16
// CHECK-NEXT:      %[[DNARROW:.+]] = arith.truncf %[[DL]] : f32 to bf16
// CHECK-NEXT:      %[[WIDE:.+]] = arith.extf %[[NARROW]] : bf16 to f32
// CHECK-NEXT:      %[[DWIDE:.+]] = arith.extf %[[DNARROW]] : bf16 to f32
// CHECK-NEXT:      %[[NEG:.+]] = arith.negf %[[WIDE]] : f32
// CHECK-NEXT:      %[[DNEG:.+]] = arith.negf %[[DWIDE]] : f32
// CHECK-NEXT:      tile.yield %[[NEG]], %[[DNEG]] : f32, f32
func.func @composition(%t: !scores) -> !scores {
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %floor = arith.constant -2.0 : f32
    %m = arith.maximumf %score, %floor : f32
    %e = math.exp %m : f32
    %l = math.log %e : f32
    %narrow = arith.truncf %l : f32 to bf16
    %wide = arith.extf %narrow : bf16 to f32
    %r = arith.negf %wide : f32
    tile.yield %r : f32
  }
  return %u : !scores
}

// -----

// A score region that ignores the score: f' = 0.
!scores = tensor<?x?x?x?xf32>
// CHECK-LABEL: func.func @constant
// CHECK:         tile.score_mod_grad
// CHECK:           %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      tile.yield %{{.+}}, %[[ZERO]] : f32, f32
func.func @constant(%t: !scores) -> !scores {
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %c = arith.constant 1.5 : f32
    tile.yield %c : f32
  }
  return %u : !scores
}

// -----

!scores = tensor<?x?x?x?xf32>
func.func @pow_of_score_exponent(%t: !scores) -> !scores {
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %two = arith.constant 2.0 : f32
    // expected-error @+1 {{'math.powf' op cannot be differentiated with respect to the score: its exponent depends on the score}}
    %r = math.powf %two, %score : f32
    tile.yield %r : f32
  }
  return %u : !scores
}

// -----

!scores = tensor<?x?x?x?xf32>
func.func @remf(%t: !scores) -> !scores {
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %c = arith.constant 3.0 : f32
    // expected-error @+1 {{'arith.remf' op cannot be differentiated with respect to the score}}
    %r = arith.remf %score, %c : f32
    tile.yield %r : f32
  }
  return %u : !scores
}

// -----

!scores = tensor<?x?x?x?xf32>
func.func @bitcast(%t: !scores) -> !scores {
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'arith.bitcast' op cannot be differentiated with respect to the score}}
    %bits = arith.bitcast %score : f32 to i32
    %one = arith.constant 1 : i32
    %more = arith.addi %bits, %one : i32
    %r = arith.bitcast %more : i32 to f32
    tile.yield %r : f32
  }
  return %u : !scores
}

// -----

func.func private @user_fn(f32) -> f32
!scores = tensor<?x?x?x?xf32>
func.func @call(%t: !scores) -> !scores {
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'func.call' op cannot be differentiated with respect to the score}}
    %r = func.call @user_fn(%score) : (f32) -> f32
    tile.yield %r : f32
  }
  return %u : !scores
}

// -----

// An op with a region that reads the score is not differentiated through.
!scores = tensor<?x?x?x?xf32>
func.func @region(%t: !scores) -> !scores {
  %u = tile.score_mod %t : !scores {
  ^bb0(%score: f32, %b: index, %h: index, %qi: index, %kv: index):
    %c = arith.cmpi eq, %qi, %kv : index
    // expected-error @+1 {{'scf.if' op cannot be differentiated with respect to the score}}
    %r = scf.if %c -> f32 {
      %n = arith.negf %score : f32
      scf.yield %n : f32
    } else {
      scf.yield %score : f32
    }
    tile.yield %r : f32
  }
  return %u : !scores
}
