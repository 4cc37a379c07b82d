//===- TileUnscaledRowMax.cpp - the row max over unscaled scores ----------===//
//
// After tile-online-softmax every score is scaled before anything reads it:
//
//   t = s * c          (c = softmax scale x log2(e), a positive constant)
//   t' = mask(t)       (optional: -inf where masked)
//   m = max(m_old, reduce_max(t'))     ...     p = exp2(t' - broadcast(m))
//
// so t feeds both the row max and the subtraction, and costs a multiply per score on top of the
// subtraction. For c > 0, scaling commutes with the max and with the mask (-inf x c = -inf):
//
//   s' = mask(s)       m = max(m_old, c x reduce_max(s'))     p = exp2(s' * c - broadcast(m))
//
// where the multiply now has one use and fuses with the subtraction into one FMA per score
// (the NVVM lowering marks arith ops `contract`); the max costs c x (one value per row). Only a
// multiply by a positive constant directly before the max (through masks) moves: a score
// modifier before it stays where it is (with one, the constant is log2(e) alone).
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILEUNSCALEDROWMAX
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// The positive splat constant `v` holds, if it does.
std::optional<APFloat> positiveSplat(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !attr.getElementType().isF32())
    return std::nullopt;
  APFloat c = attr.getSplatValue<APFloat>();
  if (c.isNegative() || c.isZero() || !c.isFiniteNonZero())
    return std::nullopt;
  return c;
}

/// Rewrites a row max over scaled (and possibly masked) scores whose only other readers are
/// subtractions of a row vector into a max over the unscaled scores (see the file comment).
struct RowMaxOverUnscaledScores : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceOp reduce, PatternRewriter &rw) const override {
    if (reduce.getKind() != ReduceKind::Max)
      return rw.notifyMatchFailure(reduce, "not a max");
    Value scaledMasked = reduce.getInput();
    auto mask = scaledMasked.getDefiningOp<BlockMaskOp>();
    Value scaled = mask ? mask.getInput() : scaledMasked;
    auto mul = scaled.getDefiningOp<arith::MulFOp>();
    if (!mul || (mask && !scaled.hasOneUse()))
      return rw.notifyMatchFailure(reduce, "the max does not read scaled scores");
    Value scores = mul.getLhs();
    std::optional<APFloat> c = positiveSplat(mul.getRhs());
    if (!c) {
      scores = mul.getRhs();
      c = positiveSplat(mul.getLhs());
    }
    if (!c)
      return rw.notifyMatchFailure(reduce, "the scale is not a positive constant");
    SmallVector<arith::SubFOp> subtractions;
    for (OpOperand &use : scaledMasked.getUses()) {
      if (use.getOwner() == reduce)
        continue;
      auto sub = dyn_cast<arith::SubFOp>(use.getOwner());
      if (!sub || use.getOperandNumber() != 0 || !sub.getRhs().getDefiningOp<BroadcastOp>())
        return rw.notifyMatchFailure(reduce, "the scaled scores have other readers");
      subtractions.push_back(sub);
    }

    Location loc = reduce.getLoc();
    Value cBlock = mul.getLhs() == scores ? mul.getRhs() : mul.getLhs();
    // The mask on the unscaled scores, where the scaled ones were masked.
    Value unscaled = scores;
    if (mask) {
      rw.setInsertionPoint(mask);
      auto clone = cast<BlockMaskOp>(rw.clone(*mask));
      rw.modifyOpInPlace(clone, [&] { clone.getInputMutable().assign(scores); });
      unscaled = clone.getResult();
    }
    rw.setInsertionPoint(reduce);
    Value rawMax = ReduceOp::create(rw, loc, reduce.getType(), ReduceKind::Max, unscaled);
    auto rowTy = cast<RankedTensorType>(reduce.getType());
    Value cRow = arith::ConstantOp::create(
        rw, loc, rowTy, DenseElementsAttr::get(rowTy, rw.getF32FloatAttr(c->convertToFloat())));
    Value rowMax = arith::MulFOp::create(rw, loc, rawMax, cRow);
    for (arith::SubFOp sub : subtractions) {
      rw.setInsertionPoint(sub);
      Value product = arith::MulFOp::create(rw, loc, unscaled, cBlock); // one reader: an FMA
      rw.modifyOpInPlace(sub, [&] { sub.getLhsMutable().assign(product); });
    }
    rw.replaceOp(reduce, rowMax);
    return success();
  }
};

struct TileUnscaledRowMaxPass
    : public tilefuse::impl::TileUnscaledRowMaxBase<TileUnscaledRowMaxPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RowMaxOverUnscaledScores>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
