//===- ScoreModDerivative.h - forward-mode derivative of a score region -*- C++ -*-===//
//
// A score modifier f(s, b, h, q_idx, kv_idx) is a scalar SSA graph over arith and math ops. A
// derived backward kernel needs f and df/ds at every score; these functions emit df/ds beside a
// copy of f by forward-mode differentiation (one tangent per floating-point value that depends
// on s), so the backward pass reuses the forward text op by op. See tile-score-mod-derivative in
// Passes.td for the rules.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_SCOREMODDERIVATIVE_H
#define TILEFUSE_PASSES_SCOREMODDERIVATIVE_H

#include "mlir/IR/Builders.h"
#include "mlir/Support/LLVM.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse {

/// f and df/ds, emitted by emitScoreDerivative.
struct ScoreValueAndDerivative {
  mlir::Value value;
  mlir::Value derivative;
};

/// Checks that every op of `body` that depends on its first argument (the score) has a
/// derivative rule; emits an error at the first that has none ("'<op>' op cannot be
/// differentiated ...") and fails. `body` ends with a terminator whose first operand is f; its
/// score may be of any float type.
mlir::LogicalResult checkScoreDifferentiable(mlir::Block &body);

/// Emits at `b`'s insertion point a copy of `body` with its arguments replaced by `arguments`
/// (values defined above the body stay as they are), and the derivative of the terminator's
/// first operand with respect to the first argument. `body` must pass checkScoreDifferentiable.
ScoreValueAndDerivative emitScoreDerivative(mlir::OpBuilder &b, mlir::Block &body,
                                            mlir::ValueRange arguments);

/// Creates before `scoreMod` a tile.score_mod_grad over the same input whose body computes
/// scoreMod's f and df/ds; fails, with the error at the op, where the body cannot be
/// differentiated (nothing is created then). `scoreMod` is left as it is.
mlir::FailureOr<tile::ScoreModGradOp> buildScoreModGrad(mlir::OpBuilder &b,
                                                        tile::ScoreModOp scoreMod);

} // namespace tilefuse

#endif
