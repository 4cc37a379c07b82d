//===- Base2Scores.h - scores in base-2 units for an exp2 softmax -*- C++ -*-===//
//
// exp(x) = exp2(x * log2(e)). The forward's online softmax and the backward's recompute of P
// both exponentiate in base 2; where the scores come from a multiplication by a positive
// constant (the softmax scale), log2(e) joins that constant instead of costing a multiply per
// score element.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_BASE2SCORES_H
#define TILEFUSE_PASSES_BASE2SCORES_H

#include "mlir/IR/Builders.h"

namespace tilefuse {

/// `s` (a block of scores) times log2(e). When only tile.block_mask ops separate `s` from an
/// arith.mulf by a positive splat constant that has one user, the constant is multiplied by
/// log2(e) in place and `s` itself is returned (a mask maps -inf to -inf under any positive
/// factor, so its meaning is unchanged); otherwise a new multiply is built at the builder's
/// insertion point. The caller guarantees that nothing else reads the masks between the
/// product and `s`, now or later: their values change units.
mlir::Value scoresInBase2(mlir::OpBuilder &b, mlir::Location loc, mlir::Value s);

} // namespace tilefuse

#endif
