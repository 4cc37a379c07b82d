//===- TileOps.cpp - tile dialect operations ------------------------------===//
//
// Verifiers: every message names the operand and the sizes that disagree, because the DSL author
// reads them at the file:line:col of the op.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/dialect/TileOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace tilefuse::tile;

namespace {
std::string dimStr(int64_t d) { return ShapedType::isDynamic(d) ? "?" : std::to_string(d); }

/// Two sizes agree when either is dynamic or both are equal.
bool sizesAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// Checks the block of a score/mask region: the argument types and `numYielded` values of
/// `yieldedType`.
LogicalResult verifyIndexRegion(Operation *op, Region &body, bool hasScoreArg,
                                Type yieldedType, StringRef yieldedName,
                                unsigned numYielded = 1) {
  if (body.empty())
    return op->emitOpError("needs a body");
  Block &block = body.front();
  unsigned numIndices = 4;
  unsigned expected = numIndices + (hasScoreArg ? 1 : 0);
  if (block.getNumArguments() != expected)
    return op->emitOpError() << "body must take " << expected << " arguments ("
                             << (hasScoreArg ? "score: f32, " : "")
                             << "b, h, q_idx, kv_idx: index), got " << block.getNumArguments();
  unsigned i = 0;
  if (hasScoreArg) {
    if (!block.getArgument(0).getType().isF32())
      return op->emitOpError("body argument #0 (the score) must be f32, got ")
             << block.getArgument(0).getType();
    i = 1;
  }
  for (; i < expected; ++i)
    if (!block.getArgument(i).getType().isIndex())
      return op->emitOpError() << "body argument #" << i << " must be index, got "
                               << block.getArgument(i).getType();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError("body must end with tile.yield");
  if (yield.getValues().size() != numYielded ||
      llvm::any_of(yield.getValues(), [&](Value v) { return v.getType() != yieldedType; }))
    return yield.emitOpError() << "must yield exactly " << (numYielded == 1 ? "one" : "two")
                               << " " << yieldedType << " (" << yieldedName << ")";
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// Written form
//===----------------------------------------------------------------------===//

LogicalResult LoadOp::verify() {
  auto viewTy = getView().getType();
  auto resTy = getResult().getType();
  if (viewTy.getRank() != 4 && viewTy.getRank() != 3)
    return emitOpError("expects a rank-4 B x H x L x D or a rank-3 B x H x M view, got rank ")
           << viewTy.getRank();
  if (viewTy.getElementType() != resTy.getElementType())
    return emitOpError("result element type ")
           << resTy.getElementType() << " differs from the view's " << viewTy.getElementType();
  if (static_cast<bool>(getPageTable()) != static_cast<bool>(getKvLengths()))
    return emitOpError("a paged load takes both `pages` (the page table) and `lengths`");
  if (getSequences() && isPaged())
    return emitOpError("a load reads a paged cache or a packed batch (`sequences`), not both");
  if (getSequences() && viewTy.getRank() != 4)
    return emitOpError("a packed batch (`sequences`) is read from a rank-4 B x H x L x D view");
  if (isPaged()) {
    // The view is P x Hkv x S x D, the result B x Hkv x N x D: only heads and D correspond.
    if (viewTy.getRank() != 4)
      return emitOpError("a paged load reads a rank-4 pages x heads x page rows x D cache");
    for (int64_t d : {1, 3})
      if (!sizesAgree(viewTy.getDimSize(d), resTy.getDimSize(d)))
        return emitOpError() << "result dimension " << d << " (" << dimStr(resTy.getDimSize(d))
                             << ") differs from the cache's (" << dimStr(viewTy.getDimSize(d))
                             << ")";
    if (viewTy.getDimSize(2) == 0)
      return emitOpError("a paged cache's pages must have at least one row");
    return success();
  }
  if (failed(verifyCompatibleShape(viewTy.getShape(), resTy.getShape())))
    return emitOpError("result shape does not match the view shape");
  return success();
}

LogicalResult StoreOp::verify() {
  auto viewTy = getView().getType();
  auto valTy = getValue().getType();
  if (viewTy.getRank() != valTy.getRank())
    return emitOpError("value rank ") << valTy.getRank() << " differs from view rank "
                                      << viewTy.getRank();
  if (failed(verifyCompatibleShape(viewTy.getShape(), valTy.getShape())))
    return emitOpError("value shape does not match the view shape");
  return success();
}

LogicalResult DotOp::verify() {
  auto lhsTy = getLhs().getType();
  auto rhsTy = getRhs().getType();
  auto resTy = getResult().getType();
  if (lhsTy.getRank() != 4 || rhsTy.getRank() != 4 || resTy.getRank() != 4)
    return emitOpError("operands and result must be rank-4 B x H x rows x cols tensors");
  ArrayRef<int64_t> l = lhsTy.getShape(), r = rhsTy.getShape(), o = resTy.getShape();
  int64_t lhsM = getTransposeLhs() ? l[3] : l[2];
  int64_t lhsK = getTransposeLhs() ? l[2] : l[3];
  int64_t rhsK = getTransposeRhs() ? r[3] : r[2];
  int64_t rhsN = getTransposeRhs() ? r[2] : r[3];
  if (!sizesAgree(l[0], r[0]))
    return emitOpError() << "batch sizes differ: lhs has " << dimStr(l[0]) << ", rhs has "
                         << dimStr(r[0]);
  if (!ShapedType::isDynamic(l[1]) && !ShapedType::isDynamic(r[1]) &&
      (r[1] == 0 || l[1] % r[1] != 0))
    return emitOpError() << "query heads (" << l[1] << ") must be a multiple of key/value heads ("
                         << r[1] << ") for grouped-query attention";
  if (!sizesAgree(lhsK, rhsK))
    return emitOpError() << "contraction sizes differ: lhs has " << dimStr(lhsK) << ", rhs has "
                         << dimStr(rhsK);
  if (!sizesAgree(o[0], l[0]) || !sizesAgree(o[1], l[1]) || !sizesAgree(o[2], lhsM) ||
      !sizesAgree(o[3], rhsN))
    return emitOpError() << "result shape must be " << dimStr(l[0]) << "x" << dimStr(l[1]) << "x"
                         << dimStr(lhsM) << "x" << dimStr(rhsN);
  return success();
}

LogicalResult ScaleOp::verify() {
  if (!getFactor())
    return success();
  double f = getFactor()->convertToDouble();
  if (!std::isfinite(f) || f == 0.0)
    return emitOpError("factor must be finite and non-zero, got ") << f;
  return success();
}

LogicalResult ScoreModOp::verifyRegions() {
  return verifyIndexRegion(*this, getBody(), /*hasScoreArg=*/true,
                           Float32Type::get(getContext()), "the new score");
}

LogicalResult ScoreModGradOp::verifyRegions() {
  return verifyIndexRegion(*this, getBody(), /*hasScoreArg=*/true,
                           Float32Type::get(getContext()),
                           "the new score and its derivative with respect to the score",
                           /*numYielded=*/2);
}

LogicalResult MaskOp::verifyRegions() {
  return verifyIndexRegion(*this, getBody(), /*hasScoreArg=*/false,
                           IntegerType::get(getContext(), 1), "true keeps the score");
}

LogicalResult SoftmaxOp::verify() {
  auto inTy = getInput().getType();
  auto lseTy = getLogsumexp().getType();
  if (inTy.getRank() != 4)
    return emitOpError("expects rank-4 B x H x M x N scores");
  if (getProbs().getType() != inTy)
    return emitOpError("probabilities must have the scores' type");
  if (lseTy.getRank() != 3 ||
      failed(verifyCompatibleShape(lseTy.getShape(), inTy.getShape().take_front(3))))
    return emitOpError("logsumexp must be B x H x M");
  return success();
}

/// The B x H x M per-row shape of B x H x M x N scores.
static bool isRowShapeOf(RankedTensorType rows, RankedTensorType scores) {
  return rows.getRank() == 3 && scores.getRank() == 4 &&
         succeeded(verifyCompatibleShape(rows.getShape(), scores.getShape().take_front(3)));
}

LogicalResult SoftmaxFromLseOp::verify() {
  auto scoresTy = getScores().getType();
  if (scoresTy.getRank() != 4)
    return emitOpError("expects rank-4 B x H x M x N scores");
  if (!isRowShapeOf(getLogsumexp().getType(), scoresTy))
    return emitOpError("logsumexp must be B x H x M of the scores, got ")
           << getLogsumexp().getType();
  if (getProbs().getType() != scoresTy)
    return emitOpError("probabilities must have the scores' type");
  return success();
}

/// The scalar body of tile.map and tile.block_map: one f32 argument per operand, one f32
/// yielded (the result element).
static LogicalResult verifyElementBody(Operation *op, Region &body, size_t operands) {
  Block &block = body.front();
  if (block.getNumArguments() != operands)
    return op->emitOpError() << "body must take one f32 per operand (" << operands << "), got "
                             << block.getNumArguments() << " arguments";
  for (BlockArgument arg : block.getArguments())
    if (!arg.getType().isF32())
      return op->emitOpError() << "body argument #" << arg.getArgNumber()
                               << " must be f32, got " << arg.getType();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError("body must end with tile.yield");
  if (yield.getValues().size() != 1 || !yield.getValues()[0].getType().isF32())
    return yield.emitOpError("must yield exactly one f32 (the result element)");
  return success();
}

LogicalResult MapOp::verifyRegions() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  auto resTy = getResult().getType();
  int64_t rank = resTy.getRank();
  if (rank != 3 && rank != 4)
    return emitOpError("result must be rank 4 (B x H x M x N) or rank 3 (B x H x M), got rank ")
           << rank;
  bool sameRankOperand = false;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto ty = cast<RankedTensorType>(input.getType());
    if (ty.getRank() == rank) {
      sameRankOperand = true;
      if (failed(verifyCompatibleShape(ty.getShape(), resTy.getShape())))
        return emitOpError() << "operand #" << i << " of type " << ty
                             << " does not match the result shape " << resTy;
      continue;
    }
    if (ty.getRank() != 3 || !isRowShapeOf(ty, resTy))
      return emitOpError() << "operand #" << i << " of type " << ty
                           << " must have the result's shape or be its B x H x M rows";
  }
  if (!sameRankOperand)
    return emitOpError("needs an operand of the result's rank");
  return verifyElementBody(*this, getBody(), getInputs().size());
}

LogicalResult RowReduceOp::verify() {
  if (!isRowShapeOf(getResult().getType(), getInput().getType()))
    return emitOpError() << "reduces a rank-4 B x H x M x N tensor to its B x H x M rows; got "
                         << getInput().getType() << " to " << getResult().getType();
  return success();
}

LogicalResult SumHeadGroupsOp::verify() {
  auto inTy = getInput().getType();
  auto resTy = getResult().getType();
  if (inTy.getRank() != 4 || resTy.getRank() != 4)
    return emitOpError("input and result must be rank-4 B x H x rows x cols tensors");
  ArrayRef<int64_t> in = inTy.getShape(), out = resTy.getShape();
  for (int64_t d : {0, 2, 3})
    if (!sizesAgree(in[d], out[d]))
      return emitOpError() << "dimension " << d << " differs: input has " << dimStr(in[d])
                           << ", result has " << dimStr(out[d]);
  if (!ShapedType::isDynamic(in[1]) && !ShapedType::isDynamic(out[1]) &&
      (out[1] == 0 || in[1] % out[1] != 0))
    return emitOpError() << "query heads (" << in[1] << ") must be a multiple of key/value heads ("
                         << out[1] << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Tiled form
//===----------------------------------------------------------------------===//

/// Shared by block_load and block_store: the leading indices address the view, the last one is
/// the block's first row, and the block covers the trailing dimensions in full.
static LogicalResult verifyBlockAccess(Operation *op, MemRefType viewTy, RankedTensorType blockTy,
                                       size_t numIndices) {
  int64_t rank = viewTy.getRank();
  if (numIndices < 1 || static_cast<int64_t>(numIndices) + blockTy.getRank() - 1 != rank)
    return op->emitOpError() << "a rank-" << blockTy.getRank() << " block of a rank-" << rank
                             << " view needs " << rank - blockTy.getRank() + 1
                             << " indices, got " << numIndices;
  if (!blockTy.hasStaticShape())
    return op->emitOpError("block shape must be static");
  for (int64_t i = 1; i < blockTy.getRank(); ++i) {
    int64_t viewDim = viewTy.getDimSize(numIndices - 1 + i);
    if (viewDim != blockTy.getDimSize(i))
      return op->emitOpError() << "block dimension " << i << " (" << blockTy.getDimSize(i)
                               << ") must equal the view's static dimension ("
                               << dimStr(viewDim) << ")";
  }
  return success();
}

HeadAndRow tilefuse::tile::unpackRow(OpBuilder &b, Location loc, Value head, Value packedRow,
                           Value headRows) {
  // Unsigned: rows and counts are never negative, and udiv/urem are what the GPU lowers best.
  Value headOffset = b.createOrFold<arith::DivUIOp>(loc, packedRow, headRows);
  return {b.createOrFold<arith::AddIOp>(loc, head, headOffset),
          b.createOrFold<arith::RemUIOp>(loc, packedRow, headRows)};
}

/// A packed block op addresses (head, row) pairs: it needs a head index before the row index.
static LogicalResult verifyPacked(Operation *op, Value headRows, size_t numIndices) {
  if (headRows && numIndices < 2)
    return op->emitOpError("packed rows need a head index before the row index");
  return success();
}

// Division by a page size S given at launch, by the round-up method (Granlund and Montgomery;
// libdivide's branch-free unsigned 32-bit form). With l = ceil(log2 S) and
// m = ceil(2^(32+l) / S), floor(x * m / 2^(32+l)) = floor(x / S) for every x < 2^31 and
// 1 <= S <= 2^31:
//   m = (2^(32+l) + e) / S with 0 <= e < S <= 2^l, so x * m / 2^(32+l) = x / S + d with
//   0 <= d = x * e / (S * 2^(32+l)) < x / (S * 2^32). Writing x = q * S + r (r <= S - 1),
//   x / S + d < q + (r + x / 2^32) / S < q + 1 since x < 2^32 (the bound x < 2^31 is for
//   the 32-bit sum below), so the floor is q.
// m lies in [2^32, 2^33) (S > 2^(l-1), and m = 2^32 at S = 1 or any power of two), 33 bits: so
// the multiplier kept is m' = m - 2^32, and
//   floor(x * m / 2^(32+l)) = floor((x + mulhi(x, m')) / 2^l),
// x * m' = mulhi * 2^32 + lo with lo < 2^32 dropping out of the floor. x + mulhi(x, m') <= 2x
// < 2^32 for x < 2^31, so the sum does not wrap in 32 bits: on the GPU one IMAD.WIDE.U32 (the
// product's high word), an add and a shift. Rows are below 2^31 (pagedRow); S >= 1 is checked
// at launch by both runtimes, and S < 2^31 on the GPU, whose runtime checks that a cache's
// element offsets fit in 32 bits.
PageDivisor tilefuse::tile::pageReciprocal(OpBuilder &b, Location loc, Value pageSize) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto constant = [&](Type type, int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, type, v);
  };
  Value size32 = b.createOrFold<arith::IndexCastUIOp>(loc, i32, pageSize);
  // l = ceil(log2 S), the bit length of S - 1: 0 at S = 1, 31 at S = 2^31. By halving steps in
  // arith (math.ctlz has no lowering in the NVVM pipeline; this runs once per program).
  Value rest = b.createOrFold<arith::SubIOp>(loc, size32, constant(i32, 1));
  Value shift = constant(i32, 0);
  for (int64_t step : {16, 8, 4, 2, 1}) {
    Value stepValue = constant(i32, step);
    Value wide = b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::uge, rest,
                                               constant(i32, int64_t(1) << step));
    rest = b.createOrFold<arith::SelectOp>(
        loc, wide, b.createOrFold<arith::ShRUIOp>(loc, rest, stepValue), rest);
    shift = b.createOrFold<arith::SelectOp>(
        loc, wide, b.createOrFold<arith::AddIOp>(loc, shift, stepValue), shift);
  }
  shift = b.createOrFold<arith::AddIOp>(loc, shift, rest); // what is left is 0 or 1
  // m = ceil(2^(32+l) / S) = (2^(32+l) + S - 1) div S, in 64 bits: 2^(32+l) + S - 1 < 2^64.
  Value size64 = b.createOrFold<arith::ExtUIOp>(loc, i64, size32);
  Value power = b.createOrFold<arith::ShLIOp>(
      loc, constant(i64, 1),
      b.createOrFold<arith::AddIOp>(loc, b.createOrFold<arith::ExtUIOp>(loc, i64, shift),
                                    constant(i64, 32)));
  Value numerator = b.createOrFold<arith::AddIOp>(
      loc, power, b.createOrFold<arith::SubIOp>(loc, size64, constant(i64, 1)));
  Value m = b.createOrFold<arith::DivUIOp>(loc, numerator, size64);
  // Its low 32 bits are m - 2^32.
  Value multiplier = b.createOrFold<arith::TruncIOp>(loc, i32, m);
  return {pageSize, multiplier, shift};
}

PageDivisor tilefuse::tile::pageDivisor(OpBuilder &b, Location loc, Value pageSize) {
  if (getConstantIntValue(pageSize))
    return {pageSize, Value(), Value()};
  return pageReciprocal(b, loc, pageSize);
}

Value tilefuse::tile::divideByPage(OpBuilder &b, Location loc, Value row,
                                   const PageDivisor &pageSize) {
  if (!pageSize.multiplier)
    return b.createOrFold<arith::DivUIOp>(loc, row, pageSize.size);
  Type i32 = b.getI32Type();
  Value row32 = b.createOrFold<arith::IndexCastUIOp>(loc, i32, row);
  SmallVector<Value, 2> product;
  b.createOrFold<arith::MulUIExtendedOp>(product, loc, row32, pageSize.multiplier);
  Value sum = b.createOrFold<arith::AddIOp>(loc, row32, product[1]);
  Value quotient = b.createOrFold<arith::ShRUIOp>(loc, sum, pageSize.shift);
  return b.createOrFold<arith::IndexCastUIOp>(loc, b.getIndexType(), quotient);
}

PageAndRow tilefuse::tile::pagedRow(
    OpBuilder &b, Location loc, Value row, const PageDivisor &pageSize,
    function_ref<Value(OpBuilder &, Location, Value)> readTable) {
  Value column = divideByPage(b, loc, row, pageSize);
  // A constant S: LLVM derives the remainder from the division by a constant.
  Value rowInPage =
      pageSize.multiplier
          ? b.createOrFold<arith::SubIOp>(
                loc, row, b.createOrFold<arith::MulIOp>(loc, column, pageSize.size))
          : b.createOrFold<arith::RemUIOp>(loc, row, pageSize.size);
  return {readTable(b, loc, column), rowInPage};
}

LogicalResult BlockLoadOp::verify() {
  if (failed(verifyPacked(*this, getHeadRows(), getIndices().size())))
    return failure();
  if (getPageTable()) {
    if (getHeadRows())
      return emitOpError("packed rows are rows of query heads; a paged cache holds keys and "
                         "values: `packed` and `pages` do not go together");
    if (getView().getType().getRank() != 4 || getIndices().size() != 3)
      return emitOpError("a paged load reads a rank-4 cache at (batch, head, row)");
  }
  if (getView().getType().getElementType() != getResult().getType().getElementType())
    return emitOpError("result element type must equal the view's");
  return verifyBlockAccess(*this, getView().getType(), getResult().getType(),
                           getIndices().size());
}

LogicalResult SplitArriveOp::verify() {
  int64_t rank = getCounters().getType().getRank();
  if (static_cast<int64_t>(getIndices().size()) != rank)
    return emitOpError() << "needs one index per dimension of the counters (" << rank << "), got "
                         << getIndices().size();
  if (getBarrierId().has_value() != getThreads().has_value())
    return emitOpError("takes barrier_id and threads together (the named barrier and the "
                       "threads that meet there) or neither (the CTA's barrier)");
  if (auto id = getBarrierId(); id && (*id < 1 || *id > 15))
    return emitOpError() << "named barrier ids are 1 to 15 (0 is the CTA's), not " << *id;
  if (auto threads = getThreads(); threads && (*threads < 32 || *threads % 32))
    return emitOpError() << "a named barrier counts whole warps: threads must be a positive "
                            "multiple of 32, not "
                         << *threads;
  return success();
}

LogicalResult BlockStoreOp::verify() {
  Type valElt = getValue().getType().getElementType();
  Type viewElt = getView().getType().getElementType();
  if (valElt != viewElt && !valElt.isF32())
    return emitOpError() << "stores " << valElt << " into a " << viewElt
                         << " view: only f32 blocks are converted on store";
  if (failed(verifyPacked(*this, getHeadRows(), getIndices().size())))
    return failure();
  return verifyBlockAccess(*this, getView().getType(), getValue().getType(), getIndices().size());
}

/// Blocks of the tiled form have static shapes: tiling fixes Br, Bc and the head dimension.
static LogicalResult verifyStaticBlocks(Operation *op) {
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
    if (auto tt = dyn_cast<RankedTensorType>(t); tt && !tt.hasStaticShape())
      return op->emitOpError("block shapes must be static, got ") << tt;
  return success();
}

LogicalResult BlockDotOp::verify() {
  if (failed(verifyStaticBlocks(*this)))
    return failure();
  ArrayRef<int64_t> l = getLhs().getType().getShape(), r = getRhs().getType().getShape(),
                    o = getResult().getType().getShape();
  int64_t lhsM = getTransposeLhs() ? l[1] : l[0];
  int64_t lhsK = getTransposeLhs() ? l[0] : l[1];
  int64_t rhsK = getTransposeRhs() ? r[1] : r[0];
  int64_t rhsN = getTransposeRhs() ? r[0] : r[1];
  if (lhsK != rhsK)
    return emitOpError() << "contraction sizes differ: lhs has " << lhsK << ", rhs has " << rhsK;
  if (o[0] != lhsM || o[1] != rhsN)
    return emitOpError() << "result must be " << lhsM << "x" << rhsN;
  if (getAcc() && getAcc().getType() != getResult().getType())
    return emitOpError("accumulator type must equal the result type");
  return success();
}

LogicalResult BlockScoreModOp::verifyRegions() {
  return verifyIndexRegion(*this, getBody(), /*hasScoreArg=*/true,
                           Float32Type::get(getContext()), "the new score");
}

LogicalResult BlockMaskOp::verifyRegions() {
  return verifyIndexRegion(*this, getBody(), /*hasScoreArg=*/false,
                           IntegerType::get(getContext(), 1), "true keeps the score");
}

LogicalResult BlockScoreModGradOp::verifyRegions() {
  if (failed(verifyStaticBlocks(*this)))
    return failure();
  return verifyIndexRegion(*this, getBody(), /*hasScoreArg=*/true,
                           Float32Type::get(getContext()),
                           "the new score and its derivative with respect to the score",
                           /*numYielded=*/2);
}

LogicalResult BlockMapOp::verifyRegions() {
  if (failed(verifyStaticBlocks(*this)))
    return failure();
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  ArrayRef<int64_t> shape = getResult().getType().getShape();
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto ty = cast<RankedTensorType>(input.getType());
    bool block = ty.getShape() == shape;
    bool rows = ty.getRank() == 1 && ty.getDimSize(0) == shape[0];
    if (!block && !rows)
      return emitOpError() << "operand #" << i << " of type " << ty << " must be "
                           << shape[0] << "x" << shape[1] << " or a vector of " << shape[0]
                           << " rows";
  }
  return verifyElementBody(*this, getBody(), getInputs().size());
}

LogicalResult BlockAtomicAddOp::verify() {
  return verifyBlockAccess(*this, getView().getType(), getValue().getType(),
                           getIndices().size());
}

LogicalResult ReduceOp::verify() {
  if (failed(verifyStaticBlocks(*this)))
    return failure();
  if (getResult().getType().getDimSize(0) != getInput().getType().getDimSize(0))
    return emitOpError("result length must equal the input's row count");
  return success();
}

LogicalResult BroadcastOp::verify() {
  if (failed(verifyStaticBlocks(*this)))
    return failure();
  if (getResult().getType().getDimSize(0) != getInput().getType().getDimSize(0))
    return emitOpError("result row count must equal the input length");
  return success();
}

#define GET_OP_CLASSES
#include "tilefuse/dialect/TileOps.cpp.inc"
