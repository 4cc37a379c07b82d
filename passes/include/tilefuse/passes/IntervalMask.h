//===- IntervalMask.h - mask regions evaluated over index intervals -*- C++ -*-===//
//
// A mask region is a predicate of (b, h, q_idx, kv_idx). Evaluated over intervals of q_idx and
// kv_idx (a block's rows and columns) it tells whether the predicate may hold somewhere in the
// block (else the block is empty) and whether it may fail somewhere (else the block is full).
// The evaluation is emitted as scalar IR, so it runs wherever the kernel runs, with run-time
// sequence lengths and window sizes.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_INTERVALMASK_H
#define TILEFUSE_PASSES_INTERVALMASK_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Region.h"

namespace tilefuse {

/// i1 values: `mayKeep` is false only if no element of the block is kept (the block is empty);
/// `mayDrop` is false only if every element is kept (the block is full).
struct BlockClassification {
  mlir::Value mayKeep;
  mlir::Value mayDrop;
};

/// Emits, at the builder's insertion point, the interval evaluation of `maskBody` (block
/// arguments b, h, q_idx, kv_idx; yields i1) for b exact, h in [headLo, headHi] (one head, or the
/// heads of a block of packed rows), q_idx in [rowLo, rowHi], kv_idx in [colLo, colHi] (closed,
/// index-typed). Ops the evaluator does not model give "may keep, may drop": conservative,
/// never a wrong empty or full.
BlockClassification emitIntervalMaskEvaluation(mlir::OpBuilder &b, mlir::Location loc,
                                               mlir::Region &maskBody, mlir::Value batch,
                                               mlir::Value headLo, mlir::Value headHi,
                                               mlir::Value rowLo, mlir::Value rowHi,
                                               mlir::Value colLo, mlir::Value colHi);

} // namespace tilefuse

#endif
