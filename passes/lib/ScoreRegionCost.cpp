//===- ScoreRegionCost.cpp - registers a kernel's score and mask regions take -===//
#include "tilefuse/passes/ScoreRegionCost.h"

#include "tilefuse/dialect/TileOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace tilefuse::tile;

namespace {

/// How often a value of a region is computed: bit 0 varies by row (q_idx), bit 1 by column
/// (kv_idx); both, or the score itself, per element.
enum Varies : unsigned { Uniform = 0, ByRow = 1, ByColumn = 2, ByElement = 3 };

/// Calls `visit(op, how)` for each op of `body` in order, with how the op's results vary, given
/// how the block arguments vary (`arguments`).
void walkVariation(Block &body, llvm::ArrayRef<unsigned> arguments,
                   llvm::function_ref<void(Operation *, unsigned)> visit) {
  llvm::DenseMap<Value, unsigned> varies;
  for (auto [argument, how] : llvm::zip(body.getArguments(), arguments))
    varies[argument] = how;
  body.walk([&](Operation *op) {
    unsigned how = Uniform;
    for (Value operand : op->getOperands())
      how |= varies.lookup(operand); // values from above the region: uniform
    for (Value result : op->getResults())
      varies[result] = how;
    visit(op, how);
  });
}

/// Counts the per-element ops of `body`, whose block arguments vary as `arguments` says.
int64_t countPerElementOps(Block &body, llvm::ArrayRef<unsigned> arguments) {
  int64_t count = 0;
  walkVariation(body, arguments, [&](Operation *op, unsigned how) {
    if (how != ByElement || op->hasTrait<OpTrait::IsTerminator>())
      return;
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::CmpIOp, arith::CmpFOp>(op))
      return;
    if (llvm::all_of(op->getResultTypes(), [](Type t) { return t.isInteger(1); }))
      return;
    ++count;
  });
  return count;
}

} // namespace

int64_t tilefuse::perElementRegionOps(Operation *kernel) {
  int64_t count = 0;
  kernel->walk([&](Operation *op) {
    // score_mod: (score, b, h, q_idx, kv_idx); mask: (b, h, q_idx, kv_idx).
    if (auto scoreMod = dyn_cast<ScoreModOp>(op))
      count += countPerElementOps(scoreMod.getBody().front(),
                                  {ByElement, Uniform, Uniform, ByRow, ByColumn});
    else if (auto mask = dyn_cast<MaskOp>(op))
      count += countPerElementOps(mask.getBody().front(), {Uniform, Uniform, ByRow, ByColumn});
  });
  return count;
}

int64_t tilefuse::scoreRegionRegisters(Operation *kernel) {
  return perElementRegionOps(kernel) * registersPerElementOp;
}

bool tilefuse::maskComparesRowsWithColumns(Operation *kernel) {
  bool compares = false;
  kernel->walk([&](MaskOp mask) {
    walkVariation(mask.getBody().front(), {Uniform, Uniform, ByRow, ByColumn},
                  [&](Operation *op, unsigned how) {
                    // The yield's operand: the kept predicate.
                    if (op->hasTrait<OpTrait::IsTerminator>() && how == ByElement)
                      compares = true;
                  });
  });
  return compares;
}
