//===- ElementwiseToNVVM.cpp - element-wise block arithmetic --------------===//
//
// An element-wise op on blocks is the same op on the values each thread holds (the layouts
// of its operands and results agree: tgpu-assign-layouts made them one class), so arith and
// math ops on blocks are rebuilt on the converted vectors and block constants become vector
// splats. The score and mask regions (tile.block_score_mod, tile.block_mask, and the
// backward's tile.block_score_mod_grad, which yields f and df/ds) are inlined once per value
// the thread holds, with that value's row and column; a mask keeps the score or gives -inf.
// tile.block_map's body is inlined once per value too, on the thread's values of its block
// operands (16-bit ones extended) and the row's value of its vector operands. tgpu.pack_operand_a rounds and packs value pairs into the A fragments' 32-bit
// registers (the layouts' value slots coincide).
//
// After the conversion, math ops on f32 become the NVVM approximate intrinsics
// (ex2.approx.ftz, lg2.approx.ftz): one instruction each, no libdevice. convert-gpu-to-nvvm
// would send math ops and llvm.intr.exp2 to libdevice.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileMath.h"
#include "tilefuse/dialect/TileOps.h"

#include <cmath>

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;
using tilefuse::tile::kLn2;
using tilefuse::tile::kLog2E;

namespace {

bool hasBlocks(Operation *op) {
  auto isBlock = [](Type t) { return isa<RankedTensorType>(t); };
  return llvm::any_of(op->getOperandTypes(), isBlock) ||
         llvm::any_of(op->getResultTypes(), isBlock);
}

/// arith and math ops on blocks: the same op on each thread's values.
struct ElementwiseOnValues : ConversionPattern {
  ElementwiseOnValues(TypeConverter &converter, MLIRContext *ctx)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) || !hasBlocks(op) ||
        op->getNumRegions() != 0)
      return failure();
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      auto type = dyn_cast_or_null<VectorType>(getTypeConverter()->convertType(op->getResult(0).getType()));
      if (!dense || !dense.isSplat() || !type)
        return op->emitOpError("only splat block constants in a register layout have a GPU form");
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(
          op, type, DenseElementsAttr::get(type, dense.getSplatValue<Attribute>()));
      return success();
    }
    SmallVector<Type> types;
    if (failed(getTypeConverter()->convertTypes(op->getResultTypes(), types)))
      return op->emitOpError("a block without a register layout has no GPU form");
    OperationState state(op->getLoc(), op->getName());
    state.addOperands(operands);
    state.addTypes(types);
    state.addAttributes(op->getAttrs());
    rewriter.replaceOp(op, rewriter.create(state)->getResults());
    return success();
  }
};

/// tile.block_mask / tile.block_score_mod / tile.block_score_mod_grad: the region per value,
/// at the value's (row, col).
template <typename RegionOp> struct ElementRegionPerValue : OpConversionPattern<RegionOp> {
  using OpConversionPattern<RegionOp>::OpConversionPattern;
  static constexpr bool isMask = std::is_same_v<RegionOp, tile::BlockMaskOp>;
  static constexpr bool isGrad = std::is_same_v<RegionOp, tile::BlockScoreModGradOp>;

  LogicalResult matchAndRewrite(RegionOp op, typename RegionOp::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<tgpu::RegisterLayout> layout = registerLayoutOf(op.getInput().getType());
    if (!layout)
      return op.emitOpError("the block has no register layout");
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    ThreadCoordinates t = threadCoordinates(b, op);
    int64_t rowsPerWarp = layout->getRows() * 32 / layout->getThreads();
    // A value's element is the thread's origin (row w * rowsPerWarp + g, column 2c) plus the
    // value's offset, which is the same for every thread: thread 0's element (GPULayouts).
    Value rowOrigin = addIndex(b, loc, adaptor.getRow(), t.firstRow(b, loc, rowsPerWarp));
    Value colOrigin =
        addIndex(b, loc, adaptor.getCol(), mulIndex(b, loc, t.c, indexConstant(b, loc, 2)));
    Value in = adaptor.getInput();
    Block &body = op.getBody().front();
    Value negInf;
    if (isMask)
      negInf = arith::ConstantOp::create(b, loc, b.getF32Type(), b.getF32FloatAttr(-INFINITY));
    SmallVector<Value> out, derivative;
    for (int64_t e = 0; e < layout->getValuesPerThread(); ++e) {
      tgpu::RowCol offset = layout->elementOf(/*thread=*/0, e);
      Value s = extractValue(b, loc, in, e);
      Value head = adaptor.getHead();
      Value row = addIndex(b, loc, rowOrigin, indexConstant(b, loc, offset.row));
      if constexpr (!isGrad) {
        if (Value headRows = adaptor.getHeadRows()) {
          // Packed rows (a GQA group's heads); CSE leaves one unpacking per row of the thread.
          tile::HeadAndRow unpacked = tile::unpackRow(b, loc, head, row, headRows);
          head = unpacked.head;
          row = unpacked.row;
        }
      }
      IRMapping map;
      unsigned first = 0;
      if (!isMask)
        map.map(body.getArgument(first++), s);
      map.map(body.getArgument(first), adaptor.getBatch());
      map.map(body.getArgument(first + 1), head);
      map.map(body.getArgument(first + 2), row);
      map.map(body.getArgument(first + 3), addIndex(b, loc, colOrigin, indexConstant(b, loc, offset.col)));
      for (Operation &inner : body.without_terminator())
        b.clone(inner, map);
      auto yielded = cast<tile::YieldOp>(body.getTerminator()).getValues();
      Value y = map.lookupOrDefault(yielded[0]);
      out.push_back(isMask ? arith::SelectOp::create(b, loc, y, s, negInf).getResult() : y);
      if (isGrad)
        derivative.push_back(map.lookupOrDefault(yielded[1]));
    }
    SmallVector<Value> results = {fromValues(b, loc, b.getF32Type(), out)};
    if (isGrad)
      results.push_back(fromValues(b, loc, b.getF32Type(), derivative));
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// tile.block_map: the body per value of the result, on the operands' values of the same
/// element (a vector operand: its row's value, #tgpu.acc_rows).
struct BlockMapPerValue : OpConversionPattern<tile::BlockMapOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tile::BlockMapOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<tgpu::RegisterLayout> layout = registerLayoutOf(op.getType());
    if (!layout || (layout->getKind() != tgpu::RegisterLayout::Kind::MmaAccumulator &&
                    layout->getKind() != tgpu::RegisterLayout::Kind::WgmmaAccumulator))
      return op.emitOpError("maps a block in an accumulator layout only");
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    int64_t cols = op.getType().getDimSize(1);
    Block &body = op.getBody().front();
    SmallVector<Value> out;
    for (int64_t e = 0; e < layout->getValuesPerThread(); ++e) {
      IRMapping map;
      for (auto [arg, input, converted] :
           llvm::zip_equal(body.getArguments(), op.getInputs(), adaptor.getInputs())) {
        bool rowVector = cast<RankedTensorType>(input.getType()).getRank() == 1;
        Value x = extractValue(b, loc, converted, rowVector ? rowSlotOf(e, cols) : e);
        if (x.getType() != arg.getType())
          x = arith::ExtFOp::create(b, loc, arg.getType(), x);
        map.map(arg, x);
      }
      for (Operation &inner : body.without_terminator())
        b.clone(inner, map);
      out.push_back(map.lookupOrDefault(cast<tile::YieldOp>(body.getTerminator()).getValues()[0]));
    }
    rewriter.replaceOp(op, fromValues(b, loc, op.getType().getElementType(), out));
    return success();
  }
};

struct PackOperandAInPlace : OpConversionPattern<tgpu::PackOperandAOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::PackOperandAOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type elt = cast<RankedTensorType>(op.getType()).getElementType();
    Value in = adaptor.getInput();
    int64_t n = cast<VectorType>(in.getType()).getNumElements();
    SmallVector<Value> regs;
    for (int64_t i = 0; i + 1 < n; i += 2)
      regs.push_back(packPair(rewriter, loc, extractValue(rewriter, loc, in, i),
                              extractValue(rewriter, loc, in, i + 1), elt));
    rewriter.replaceOp(op, fromValues(rewriter, loc, rewriter.getI32Type(), regs));
    return success();
  }
};

/// For each value of a thread's share of `narrow`, the index of the same element among its
/// values of `wide`, a block of more columns in the same layout: the layouts place an element
/// by its row and column alone, so a thread holds the same elements of the first columns in
/// both, and thread 0's placement gives every thread's.
static SmallVector<int64_t> valuesInWiderBlock(const tgpu::RegisterLayout &narrow,
                                               const tgpu::RegisterLayout &wide) {
  SmallVector<int64_t> map;
  for (int64_t v = 0; v < narrow.getValuesPerThread(); ++v) {
    tgpu::RowCol element = narrow.elementOf(/*thread=*/0, v);
    map.push_back(wide.holdersOf(element).front().value);
  }
  return map;
}

/// tgpu.leading_columns: the wide block's values at the narrow one's elements.
struct LeadingColumnsInPlace : OpConversionPattern<tgpu::LeadingColumnsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::LeadingColumnsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    std::optional<tgpu::RegisterLayout> narrow = registerLayoutOf(op.getType());
    std::optional<tgpu::RegisterLayout> wide = registerLayoutOf(op.getInput().getType());
    if (!narrow || !wide)
      return rewriter.notifyMatchFailure(op, "blocks without register layouts");
    SmallVector<Value> out;
    for (int64_t w : valuesInWiderBlock(*narrow, *wide))
      out.push_back(extractValue(rewriter, loc, adaptor.getInput(), w));
    rewriter.replaceOp(op, fromValues(rewriter, loc, op.getType().getElementType(), out));
    return success();
  }
};

/// tgpu.pad_columns: the narrow block's values where its elements are, zero elsewhere.
struct PadColumnsInPlace : OpConversionPattern<tgpu::PadColumnsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::PadColumnsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    std::optional<tgpu::RegisterLayout> narrow = registerLayoutOf(op.getInput().getType());
    std::optional<tgpu::RegisterLayout> wide = registerLayoutOf(op.getType());
    if (!narrow || !wide)
      return rewriter.notifyMatchFailure(op, "blocks without register layouts");
    Type elt = op.getType().getElementType();
    Value zero = arith::ConstantOp::create(rewriter, loc, elt, rewriter.getZeroAttr(elt));
    SmallVector<Value> out(wide->getValuesPerThread(), zero);
    for (auto [v, w] : llvm::enumerate(valuesInWiderBlock(*narrow, *wide)))
      out[w] = extractValue(rewriter, loc, adaptor.getInput(), v);
    rewriter.replaceOp(op, fromValues(rewriter, loc, elt, out));
    return success();
  }
};

/// math ops on f32 (scalars or vectors) to the NVVM approximate intrinsics.
struct MathToIntrinsics : RewritePattern {
  MathToIntrinsics(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}

  static Value call(PatternRewriter &rw, Location loc, StringRef name, Value x) {
    auto vt = dyn_cast<VectorType>(x.getType());
    Type f32 = rw.getF32Type();
    auto one = [&](Value v) -> Value {
      return LLVM::CallIntrinsicOp::create(rw, loc, f32, rw.getStringAttr(name), ValueRange{v})
          .getResult(0);
    };
    if (!vt)
      return one(x);
    SmallVector<Value> out;
    for (int64_t i = 0; i < vt.getNumElements(); ++i)
      out.push_back(one(vector::ExtractOp::create(rw, loc, x, i)));
    return vector::FromElementsOp::create(rw, loc, vt, out);
  }

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    Location loc = op->getLoc();
    if (!isa<math::Exp2Op, math::ExpOp, math::LogOp, math::Log2Op, math::TanhOp>(op))
      return failure();
    Value x = op->getOperand(0);
    Type t = x.getType();
    if (!getElementTypeOrSelf(t).isF32())
      return rw.notifyMatchFailure(op, "only f32 is lowered without libdevice");
    auto c = [&](double v) -> Value {
      if (auto vt = dyn_cast<VectorType>(t))
        return arith::ConstantOp::create(rw, loc, vt,
                                         DenseElementsAttr::get(vt, rw.getF32FloatAttr(v)));
      return arith::ConstantOp::create(rw, loc, t, rw.getF32FloatAttr(v));
    };
    auto exp2 = [&](Value v) { return call(rw, loc, "llvm.nvvm.ex2.approx.ftz.f", v); };
    auto log2 = [&](Value v) { return call(rw, loc, "llvm.nvvm.lg2.approx.ftz.f", v); };
    Value r;
    if (isa<math::Exp2Op>(op))
      r = exp2(x);
    else if (isa<math::ExpOp>(op))
      r = exp2(arith::MulFOp::create(rw, loc, x, c(kLog2E)));
    else if (isa<math::Log2Op>(op))
      r = log2(x);
    else if (isa<math::LogOp>(op))
      r = arith::MulFOp::create(rw, loc, log2(x), c(kLn2));
    else { // tanh x = 1 - 2 / (exp(2x) + 1): saturates to +-1, exact enough for scores
      Value e = exp2(arith::MulFOp::create(rw, loc, x, c(2 * kLog2E)));
      Value q = arith::DivFOp::create(rw, loc, c(2.0), arith::AddFOp::create(rw, loc, e, c(1.0)));
      r = arith::SubFOp::create(rw, loc, c(1.0), q);
    }
    rw.replaceOp(op, r);
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateElementwiseToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                       RewritePatternSet &patterns,
                                                       ConversionTarget &target) {
  // Legality is the pass's: an arith or math op is legal once it has no blocks.
  patterns.add<ElementwiseOnValues>(converter, patterns.getContext());
  patterns.add<ElementRegionPerValue<tile::BlockMaskOp>,
               ElementRegionPerValue<tile::BlockScoreModOp>,
               ElementRegionPerValue<tile::BlockScoreModGradOp>, BlockMapPerValue,
               PackOperandAInPlace, LeadingColumnsInPlace, PadColumnsInPlace>(
      converter, patterns.getContext());
}

void tilefuse::nvvm::populateMathToNVVMIntrinsicsPatterns(RewritePatternSet &patterns) {
  patterns.add<MathToIntrinsics>(patterns.getContext());
}
