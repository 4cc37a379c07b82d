//===- ReductionToNVVM.cpp - row reductions and row broadcasts ------------===//
//
// In the accumulator layouts a thread holds two rows per m-tile (g and g + 8), and the four
// lanes of a quad share them. tile.reduce combines a thread's values per row, then across the
// quad with two xor-shuffles; tile.broadcast copies each row's value to the thread's values of
// that row (a vector shuffle, no data moves between threads).
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "tilefuse/dialect/TileOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

int64_t tilefuse::nvvm::rowSlotOf(int64_t value, int64_t cols) {
  return 2 * (value / (cols / 8 * 4)) + (value % 4 >= 2 ? 1 : 0);
}

namespace {

struct ReduceRows : OpConversionPattern<tile::ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tile::ReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value in = adaptor.getInput();
    auto resultType = dyn_cast<VectorType>(getTypeConverter()->convertType(op.getType()));
    if (!resultType)
      return op.emitOpError("the reduced rows have no register layout");
    int64_t n = cast<VectorType>(in.getType()).getNumElements();
    int64_t cols = op.getInput().getType().getDimSize(1);
    bool isMax = op.getKind() == tile::ReduceKind::Max;
    auto combine = [&](Value x, Value y) -> Value {
      return isMax ? arith::MaximumFOp::create(b, loc, x, y).getResult()
                   : arith::AddFOp::create(b, loc, x, y).getResult();
    };
    SmallVector<Value> rows;
    for (int64_t slot = 0; slot < resultType.getNumElements(); ++slot) {
      Value r;
      for (int64_t e = 0; e < n; ++e)
        if (rowSlotOf(e, cols) == slot)
          r = r ? combine(r, extractValue(b, loc, in, e)) : extractValue(b, loc, in, e);
      for (int offset : {1, 2}) { // the four lanes of a quad share the row
        auto shfl = gpu::ShuffleOp::create(b, loc, r, i32Constant(b, loc, offset),
                                           i32Constant(b, loc, 32), gpu::ShuffleMode::XOR);
        r = combine(r, shfl.getShuffleResult());
      }
      rows.push_back(r);
    }
    rewriter.replaceOp(op, fromValues(b, loc, b.getF32Type(), rows));
    return success();
  }
};

struct BroadcastRows : OpConversionPattern<tile::BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tile::BroadcastOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto resultType = dyn_cast<VectorType>(getTypeConverter()->convertType(op.getType()));
    if (!resultType)
      return op.emitOpError("the broadcast block has no register layout");
    int64_t cols = op.getType().getDimSize(1);
    SmallVector<int64_t> mask;
    for (int64_t e = 0; e < resultType.getNumElements(); ++e)
      mask.push_back(rowSlotOf(e, cols));
    Value row = adaptor.getInput();
    rewriter.replaceOpWithNewOp<vector::ShuffleOp>(op, row, row, mask);
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateReductionToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                     RewritePatternSet &patterns) {
  patterns.add<ReduceRows, BroadcastRows>(converter, patterns.getContext());
}
