//===- Base2Scores.cpp - scores in base-2 units for an exp2 softmax --------===//
#include "tilefuse/passes/Base2Scores.h"
#include "tilefuse/dialect/TileMath.h"
#include "tilefuse/dialect/TileOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace tilefuse;

Value tilefuse::scoresInBase2(OpBuilder &b, Location loc, Value s) {
  Value cur = s;
  while (auto mask = cur.getDefiningOp<tile::BlockMaskOp>())
    cur = mask.getInput();
  if (auto mul = cur.getDefiningOp<arith::MulFOp>()) {
    DenseElementsAttr factor;
    if (mul->hasOneUse() && matchPattern(mul.getRhs(), m_Constant(&factor)) &&
        factor.isSplat() && factor.getSplatValue<APFloat>().convertToDouble() > 0) {
      double f = factor.getSplatValue<APFloat>().convertToDouble() * tile::kLog2E;
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(mul);
      auto ty = cast<RankedTensorType>(mul.getType());
      Value folded = arith::ConstantOp::create(
          b, loc, ty, DenseElementsAttr::get(ty, APFloat(static_cast<float>(f))));
      mul.getRhsMutable().assign(folded);
      return s;
    }
  }
  auto ty = cast<RankedTensorType>(s.getType());
  Value c = arith::ConstantOp::create(
      b, loc, ty, DenseElementsAttr::get(ty, APFloat(static_cast<float>(tile::kLog2E))));
  return arith::MulFOp::create(b, loc, s, c);
}
