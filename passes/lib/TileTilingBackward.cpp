//===- TileTilingBackward.cpp - the derived backward in FlashAttention-2's schedule -===//
//
// Level 1 -> level 2 for a backward written form (tile-derive-backward's @k_backward: whole
// tensors, with tile.softmax_from_lse). Three grids of programs, in this order:
//
//  1. preprocessing, one program per (batch, head, Br-row block): every per-row reduction of the
//     written form (D = rowsum(dO o O)) is computed once per row into a B x H x M f32 workspace;
//     without `deterministic`, the dQ accumulator (B x H x M x D f32) is zeroed;
//  2. dK and dV, one program per (batch, key/value head, Bc-key block): K and V blocks are loaded
//     once; a loop over the query heads of the group (GQA sums there, in registers) holds a loop
//     over query blocks, which recomputes the scores through the forward's chain, P from the
//     stored logsumexp, dP = dO V^T, dS = P o (dP - D) and its way back through the chain, and
//     accumulates dV += P^T dO and dK += dS^T Q. Without `deterministic`, dQ += dS K goes to the
//     f32 accumulator by tile.block_atomic_add. A gradient's tile.scale (the softmax scale the
//     derivation moved out of dS) multiplies the finished block once, at its store or, for the
//     atomic dQ, where grid 3 converts it; P is recomputed in base 2 (exp2, log2(e) folded into
//     the softmax scale where only masks follow it);
//  3. dQ, one program per (batch, head, Br-row block): without `deterministic`, the accumulator
//     converted to dQ's type; with it, a loop over key blocks that recomputes dS and accumulates
//     dQ += dS K in key-block order inside the program that owns the rows (no atomics, no
//     workspace: bitwise the same result whatever order programs run in, at the price of
//     recomputing Q K^T and dO V^T).
//
// The query loop of (2) is marked tile.query_loop and the key loop of (3) tile.kv_loop, so
// tile-block-pruning skips their empty blocks and drops the mask on full ones: the mask region's
// interval evaluation (IntervalMask) with the row interval as the loop's and the column interval
// fixed, i.e. taken the other way round for dK/dV. Boundary rows and keys join the last mask
// before softmax_from_lse (q_idx < M, kv_idx < N), so any M and N work and padded elements get
// P = 0 exactly.
//
// Nothing here knows a variant: the score chain's ops (scale, score_mod_grad, mask, map) are
// rebuilt as block ops whatever their order; the outputs are recognized by their form (a store
// of sum_head_groups(dot(A^T, X)) is a key-side gradient, of dot(A, Y) a query-side one).
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/Base2Scores.h"
#include "tilefuse/dialect/TileMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

#include <cmath>

namespace tilefuse {
#define GEN_PASS_DEF_TILETILINGBACKWARD
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// A gradient of K or V: store([scale] sum_head_groups(dot(A^T, X))), A scores, X query rows;
/// `factor` is the scale's (1 without one), applied once to the summed block before its store.
struct KeyGradient {
  StoreOp store;
  DotOp dot;
  double factor = 1.0;
};

/// A gradient of Q: store([scale] dot(A, Y)), A scores, Y key rows; `accumulator` is its f32
/// workspace when dQ is accumulated atomically (the sums go in unscaled, and `factor` is applied
/// where they are converted).
struct QueryGradient {
  StoreOp store;
  DotOp dot;
  Value accumulator;
  double factor = 1.0;
};

/// Where block values of one kind are built, and what was built there. A value is built once per
/// scope: key blocks once per program in the dK/dV grid, query blocks once per query block.
struct Scope {
  explicit Scope(OpBuilder::InsertPoint at) : at(at) {}
  OpBuilder::InsertPoint at;
  DenseMap<Value, Value> built;
};

/// The program's and the iteration's coordinates: batch, query head, key/value head, first row
/// of the query block, first key of the key block.
struct Coordinates {
  Value batch, head, kvHead, row0, col0;
};

/// A loop built without iteration values comes with an scf.yield; the emitter adds its own.
void dropImplicitYield(scf::ForOp loop) {
  Block *body = loop.getBody();
  if (!body->empty() && isa<scf::YieldOp>(body->back()))
    body->back().erase();
}

DenseElementsAttr splat(RankedTensorType ty, double v) {
  return DenseElementsAttr::get(ty, APFloat(static_cast<float>(v)));
}

class BackwardTiler {
public:
  BackwardTiler(func::FuncOp fn, int64_t br, int64_t bc, bool deterministic)
      : fn(fn), b(fn.getContext()), br(br), bc(bc), deterministic(deterministic) {}

  /// Finds the outputs and the views that size the grids; a located error on what does not fit.
  LogicalResult match();
  /// Emits the three grids before the function's return and erases the written form.
  LogicalResult emit();

private:
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value cst(RankedTensorType ty, double v) {
    return arith::ConstantOp::create(b, loc, ty, splat(ty, v));
  }
  RankedTensorType f32Block(int64_t rows, int64_t cols) {
    return RankedTensorType::get({rows, cols}, b.getF32Type());
  }
  /// `block` times `factor` (a gradient's scale), or `block` itself for a factor of 1.
  Value scaled(Value block, double factor) {
    if (factor == 1.0)
      return block;
    return arith::MulFOp::create(b, loc, block,
                                 cst(cast<RankedTensorType>(block.getType()), factor));
  }

  /// Builds `v`'s block in `scope` (once); `build` runs at the scope's insertion point.
  FailureOr<Value> inScope(Scope &scope, Value v, function_ref<FailureOr<Value>()> build);

  FailureOr<Value> scores(Value v);
  FailureOr<Value> rows(Value v);
  FailureOr<Value> queryRows(Value v);
  FailureOr<Value> keyRows(Value v);
  FailureOr<Value> rowsBlockLoad(Value v, Value view);
  FailureOr<double> scaleFactor(ScaleOp scale);
  void andBounds(BlockMaskOp mask);

  scf::ForallOp grid(ArrayRef<OpFoldResult> sizes, StringRef phase);
  LogicalResult emitPreprocessing();
  LogicalResult emitKeyGradients();
  LogicalResult emitQueryGradients();

  func::FuncOp fn;
  OpBuilder b;
  Location loc = UnknownLoc::get(fn.getContext());
  int64_t br, bc;
  bool deterministic;

  SmallVector<KeyGradient> keyGradients;
  SmallVector<QueryGradient> queryGradients;
  /// Per-row reductions of query rows, and their B x H x M workspaces.
  SmallVector<std::pair<RowReduceOp, Value>> rowWorkspaces;
  Value queryView, keyView; ///< the views of Q.K^T's operands: they size the grids
  int64_t headDim = 0;      ///< Q's (for a tile.scale without `by`)
  Value batches, heads, kvHeads, M, N, group, rowBlocks, colBlocks;

  Coordinates at;
  Scope *queryScope = nullptr, *keyScope = nullptr, *scoreScope = nullptr;
  llvm::SmallPtrSet<Operation *, 2> boundedMasks;
};

LogicalResult BackwardTiler::match() {
  for (StoreOp store : fn.getBody().getOps<StoreOp>()) {
    Value value = store.getValue();
    double factor = 1.0;
    if (auto scale = value.getDefiningOp<ScaleOp>()) {
      if (!scale.getFactor())
        return scale.emitOpError("the tiled backward scales a gradient only by a given "
                                 "factor (`by`)");
      factor = scale.getFactor()->convertToDouble();
      value = scale.getInput();
    }
    if (auto sum = value.getDefiningOp<SumHeadGroupsOp>()) {
      auto dot = sum.getInput().getDefiningOp<DotOp>();
      if (!dot || !dot.getTransposeLhs() || dot.getTransposeRhs())
        return sum.emitOpError("the tiled backward sums over head groups only a tile.dot "
                               "%scores, %rows transpose_lhs (a gradient of K or V)");
      keyGradients.push_back({store, dot, factor});
      continue;
    }
    auto dot = value.getDefiningOp<DotOp>();
    if (!dot || dot.getTransposeLhs() || dot.getTransposeRhs())
      return store.emitOpError("the tiled backward stores gradients of K and V "
                               "([tile.scale of] tile.sum_head_groups of tile.dot "
                               "transpose_lhs) and of Q ([tile.scale of] tile.dot %scores, "
                               "%key_rows) only");
    queryGradients.push_back({store, dot, Value(), factor});
  }
  if (keyGradients.empty() && queryGradients.empty())
    return fn.emitOpError("is a backward written form that stores no gradient");

  // Q.K^T: the scores' product whose operands are loads sizes the grids.
  for (DotOp dot : fn.getBody().getOps<DotOp>()) {
    if (!dot.getTransposeRhs() || dot.getTransposeLhs())
      continue;
    auto q = dot.getLhs().getDefiningOp<LoadOp>();
    auto k = dot.getRhs().getDefiningOp<LoadOp>();
    if (!q || !k)
      continue;
    queryView = q.getView();
    keyView = k.getView();
    headDim = q.getResult().getType().getDimSize(3);
    break;
  }
  if (!queryView)
    return fn.emitOpError("the tiled backward needs the scores tile.dot %q, %k transpose_rhs "
                          "of two tile.load results");
  return success();
}

FailureOr<Value> BackwardTiler::inScope(Scope &scope, Value v,
                                        function_ref<FailureOr<Value>()> build) {
  if (Value done = scope.built.lookup(v))
    return done;
  OpBuilder::InsertionGuard guard(b);
  b.restoreInsertionPoint(scope.at);
  // Block ops carry the location of the written-form op they tile.
  Location outer = loc;
  if (Operation *def = v.getDefiningOp())
    loc = def->getLoc();
  FailureOr<Value> made = build();
  loc = outer;
  if (failed(made))
    return failure();
  scope.built[v] = *made;
  return made;
}

FailureOr<double> BackwardTiler::scaleFactor(ScaleOp scale) {
  if (scale.getFactor())
    return scale.getFactor()->convertToDouble();
  if (ShapedType::isDynamic(headDim))
    return scale.emitOpError("the tiled backward needs the factor: give tile.scale `by`, or "
                             "specialize the kernel to a static head dimension");
  return 1.0 / std::sqrt(double(headDim));
}

/// Rewrites the mask's yield to `yield(pred && q_idx < M && kv_idx < N)`.
void BackwardTiler::andBounds(BlockMaskOp mask) {
  if (!boundedMasks.insert(mask).second)
    return;
  Block &body = mask.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(yield);
  Value rowInside =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, body.getArgument(2), M);
  Value colInside =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, body.getArgument(3), N);
  Value keep = arith::AndIOp::create(b, loc, yield.getValues()[0], rowInside);
  keep = arith::AndIOp::create(b, loc, keep, colInside);
  yield->setOperands(ValueRange{keep});
}

FailureOr<Value> BackwardTiler::queryRows(Value v) {
  return inScope(*queryScope, v, [&]() -> FailureOr<Value> {
    Operation *def = v.getDefiningOp();
    auto ty = dyn_cast<RankedTensorType>(v.getType());
    if (!def || !ty || ty.getRank() != 4 || ty.isDynamicDim(3))
      return (def ? def : fn.getOperation())
          ->emitOpError("the tiled backward needs query rows here: a B x H x M x D tensor "
                        "with a static D");
    if (auto load = dyn_cast<LoadOp>(def))
      return Value(BlockLoadOp::create(
          b, loc, RankedTensorType::get({br, ty.getDimSize(3)}, ty.getElementType()),
          load.getView(), ValueRange{at.batch, at.head, at.row0}, M));
    if (auto map = dyn_cast<MapOp>(def)) {
      SmallVector<Value> inputs;
      for (Value input : map.getInputs()) {
        FailureOr<Value> block = queryRows(input);
        if (failed(block))
          return failure();
        inputs.push_back(*block);
      }
      auto blockMap = BlockMapOp::create(b, loc, f32Block(br, ty.getDimSize(3)), inputs);
      IRMapping mapping;
      map.getBody().cloneInto(&blockMap.getBody(), mapping);
      return Value(blockMap);
    }
    return def->emitOpError("is not tiled as query rows by the tiled backward (a tile.load "
                            "or a tile.map of them)");
  });
}

FailureOr<Value> BackwardTiler::keyRows(Value v) {
  return inScope(*keyScope, v, [&]() -> FailureOr<Value> {
    auto load = v.getDefiningOp<LoadOp>();
    auto ty = dyn_cast<RankedTensorType>(v.getType());
    if (!load || !ty || ty.getRank() != 4 || ty.isDynamicDim(3)) {
      Operation *def = v.getDefiningOp();
      return (def ? def : fn.getOperation())
          ->emitOpError("the tiled backward needs key rows here: a tile.load of a "
                        "B x Hkv x N x D view with a static D");
    }
    return Value(BlockLoadOp::create(
        b, loc, RankedTensorType::get({bc, ty.getDimSize(3)}, ty.getElementType()),
        load.getView(), ValueRange{at.batch, at.kvHead, at.col0}, N));
  });
}

FailureOr<Value> BackwardTiler::rowsBlockLoad(Value v, Value view) {
  auto viewTy = cast<MemRefType>(view.getType());
  if (!viewTy.getElementType().isF32())
    return v.getDefiningOp()->emitOpError("per-row values must be f32 to be tiled");
  return Value(BlockLoadOp::create(b, loc, RankedTensorType::get({br}, b.getF32Type()), view,
                                   ValueRange{at.batch, at.head, at.row0}, M));
}

FailureOr<Value> BackwardTiler::rows(Value v) {
  return inScope(*queryScope, v, [&]() -> FailureOr<Value> {
    Operation *def = v.getDefiningOp();
    if (auto load = dyn_cast_or_null<LoadOp>(def))
      return rowsBlockLoad(v, load.getView());
    if (auto reduce = dyn_cast_or_null<RowReduceOp>(def))
      for (auto &[op, workspace] : rowWorkspaces)
        if (op == reduce)
          return rowsBlockLoad(v, workspace);
    return (def ? def : fn.getOperation())
        ->emitOpError("is not tiled as per-row values by the tiled backward (a tile.load of a "
                      "B x H x M view, or a tile.row_reduce of query rows)");
  });
}

FailureOr<Value> BackwardTiler::scores(Value v) {
  return inScope(*scoreScope, v, [&]() -> FailureOr<Value> {
    Operation *def = v.getDefiningOp();
    RankedTensorType scoreTy = f32Block(br, bc);
    auto regionOp = [&](auto blockOp, Region &body) {
      IRMapping mapping;
      body.cloneInto(&blockOp.getBody(), mapping);
    };
    if (auto dot = dyn_cast_or_null<DotOp>(def); dot && dot.getTransposeRhs() &&
                                                 !dot.getTransposeLhs()) {
      FailureOr<Value> lhs = queryRows(dot.getLhs());
      if (failed(lhs))
        return failure();
      FailureOr<Value> rhs = keyRows(dot.getRhs());
      if (failed(rhs))
        return failure();
      return Value(BlockDotOp::create(b, loc, scoreTy, *lhs, *rhs, Value(),
                                      /*transpose_rhs=*/true));
    }
    if (auto scale = dyn_cast_or_null<ScaleOp>(def)) {
      FailureOr<double> factor = scaleFactor(scale);
      FailureOr<Value> in = scores(scale.getInput());
      if (failed(factor) || failed(in))
        return failure();
      return Value(arith::MulFOp::create(b, loc, *in, cst(scoreTy, *factor)));
    }
    if (auto mask = dyn_cast_or_null<MaskOp>(def)) {
      FailureOr<Value> in = scores(mask.getInput());
      if (failed(in))
        return failure();
      auto blockMask =
          BlockMaskOp::create(b, loc, scoreTy, *in, at.batch, at.head, at.row0, at.col0);
      regionOp(blockMask, mask.getBody());
      return Value(blockMask);
    }
    if (auto mod = dyn_cast_or_null<ScoreModOp>(def)) {
      FailureOr<Value> in = scores(mod.getInput());
      if (failed(in))
        return failure();
      auto blockMod =
          BlockScoreModOp::create(b, loc, scoreTy, *in, at.batch, at.head, at.row0, at.col0);
      regionOp(blockMod, mod.getBody());
      return Value(blockMod);
    }
    if (auto grad = dyn_cast_or_null<ScoreModGradOp>(def)) {
      FailureOr<Value> in = scores(grad.getInput());
      if (failed(in))
        return failure();
      auto blockGrad = BlockScoreModGradOp::create(b, loc, scoreTy, scoreTy, *in, at.batch,
                                                   at.head, at.row0, at.col0);
      regionOp(blockGrad, grad.getBody());
      // Both results are built here: record the other one too.
      bool isValue = v == grad.getValue();
      scoreScope->built[isValue ? grad.getDerivative() : grad.getValue()] =
          isValue ? blockGrad.getDerivative() : blockGrad.getValue();
      return isValue ? blockGrad.getValue() : blockGrad.getDerivative();
    }
    if (auto softmax = dyn_cast_or_null<SoftmaxFromLseOp>(def)) {
      FailureOr<Value> s = scores(softmax.getScores());
      if (failed(s))
        return failure();
      FailureOr<Value> lse = rows(softmax.getLogsumexp());
      if (failed(lse))
        return failure();
      // The sequence bounds join the last mask (or a mask of their own): P is exactly 0 on
      // padded rows and keys, whatever the score chain makes of their zero inputs.
      Value masked = *s;
      auto lastMask = masked.getDefiningOp<BlockMaskOp>();
      if (!lastMask) {
        lastMask = BlockMaskOp::create(b, loc, scoreTy, masked, at.batch, at.head, at.row0,
                                       at.col0);
        OpBuilder::InsertionGuard guard(b);
        b.createBlock(&lastMask.getBody(), {}, SmallVector<Type>(4, b.getIndexType()),
                      SmallVector<Location>(4, loc));
        YieldOp::create(b, loc, ValueRange{arith::ConstantIntOp::create(b, loc, 1, 1)});
        masked = lastMask;
      }
      andBounds(lastMask);
      // p = exp(s - lse) = exp2(s log2(e) - lse log2(e)); a fully masked row (lse = -inf)
      // subtracts +inf instead, so its probabilities are 0, not NaN. log2(e) joins the softmax
      // scale where only masks follow it (the product feeds nothing but this chain: a mask's
      // output is read again only where a score_mod follows it, and then the chain to P
      // starts at that score_mod), and the row term is scaled once per row: the multiply
      // and the subtraction per score become one fused multiply-add.
      auto rowTy = RankedTensorType::get({br}, b.getF32Type());
      Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, *lse,
                                          cst(rowTy, -INFINITY));
      Value lseSafe = arith::SelectOp::create(b, loc, empty, cst(rowTy, INFINITY), *lse);
      Value lseBase2 = arith::MulFOp::create(b, loc, lseSafe, cst(rowTy, tile::kLog2E));
      Value lseBlock = BroadcastOp::create(b, loc, scoreTy, lseBase2);
      Value base2 = scoresInBase2(b, loc, masked);
      return Value(
          math::Exp2Op::create(b, loc, arith::SubFOp::create(b, loc, base2, lseBlock)));
    }
    if (auto map = dyn_cast_or_null<MapOp>(def)) {
      SmallVector<Value> inputs;
      for (Value input : map.getInputs()) {
        auto ty = cast<RankedTensorType>(input.getType());
        FailureOr<Value> block = ty.getRank() == 3 ? rows(input) : scores(input);
        if (failed(block))
          return failure();
        inputs.push_back(*block);
      }
      auto blockMap = BlockMapOp::create(b, loc, scoreTy, inputs);
      regionOp(blockMap, map.getBody());
      return Value(blockMap);
    }
    return (def ? def : fn.getOperation())
        ->emitOpError("is not tiled as scores by the tiled backward (Q.K^T, dO.V^T, tile.scale, "
                      "tile.mask, tile.score_mod(_grad), tile.softmax_from_lse, tile.map)");
  });
}

scf::ForallOp BackwardTiler::grid(ArrayRef<OpFoldResult> sizes, StringRef phase) {
  // Mapped as the forward's grid (batch, head, block): a GPU launch puts the block in x, the
  // head in y and the batch in z; the dK/dV grid's head is the key/value head and its block a
  // key block.
  auto forall = scf::ForallOp::create(b, loc, sizes, ValueRange{},
                                      tile::gridMapping(b.getContext(), /*split=*/false));
  forall->setAttr(kBackwardPhaseAttr, b.getStringAttr(phase));
  return forall;
}

/// Grid 1: per-row reductions into their workspaces; the dQ accumulator zeroed.
LogicalResult BackwardTiler::emitPreprocessing() {
  bool zeroAccumulators = !deterministic && !queryGradients.empty();
  if (rowWorkspaces.empty() && !zeroAccumulators)
    return success();
  auto forall = grid({batches, heads, rowBlocks},
                     launch_abi::backwardPhaseName(launch_abi::BackwardPhase::Preprocess));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(forall.getBody());
  at.batch = forall.getInductionVar(0);
  at.head = forall.getInductionVar(1);
  at.row0 = arith::MulIOp::create(b, loc, forall.getInductionVar(2), idx(br));
  Scope rowScope(b.saveInsertionPoint());
  queryScope = &rowScope;
  for (auto &[reduce, workspace] : rowWorkspaces) {
    FailureOr<Value> input = queryRows(reduce.getInput());
    if (failed(input))
      return failure();
    Value reduced = ReduceOp::create(b, loc, RankedTensorType::get({br}, b.getF32Type()),
                                     reduce.getKind(), *input);
    BlockStoreOp::create(b, loc, reduced, workspace, ValueRange{at.batch, at.head, at.row0}, M);
  }
  if (zeroAccumulators)
    for (QueryGradient &g : queryGradients) {
      int64_t cols = cast<MemRefType>(g.accumulator.getType()).getDimSize(3);
      BlockStoreOp::create(b, loc, cst(f32Block(br, cols), 0.0), g.accumulator,
                           ValueRange{at.batch, at.head, at.row0}, M);
    }
  return success();
}

/// Grid 2: per (batch, key/value head, key block), dK and dV over the group's query heads and
/// every query block; dQ atomically unless deterministic.
LogicalResult BackwardTiler::emitKeyGradients() {
  bool atomicQuery = !deterministic && !queryGradients.empty();
  if (keyGradients.empty() && !atomicQuery)
    return success();
  auto forall = grid({batches, kvHeads, colBlocks},
                     launch_abi::backwardPhaseName(launch_abi::BackwardPhase::KeyGradients));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(forall.getBody());
  at.batch = forall.getInductionVar(0);
  at.kvHead = forall.getInductionVar(1);
  at.col0 = arith::MulIOp::create(b, loc, forall.getInductionVar(2), idx(bc));

  SmallVector<Value> inits;
  for (KeyGradient &g : keyGradients) {
    int64_t cols = g.dot.getResult().getType().getDimSize(3);
    if (ShapedType::isDynamic(cols))
      return g.dot.emitOpError("the tiled backward needs a static head dimension");
    inits.push_back(cst(f32Block(bc, cols), 0.0));
  }
  Value headLo = arith::MulIOp::create(b, loc, at.kvHead, group);
  Value headHi = arith::AddIOp::create(b, loc, headLo, group);
  auto headLoop = scf::ForOp::create(b, loc, headLo, headHi, idx(1), inits);
  dropImplicitYield(headLoop);
  // Key blocks are built once per program, before the loops.
  Scope programScope(OpBuilder::InsertPoint(forall.getBody(), Block::iterator(headLoop)));
  keyScope = &programScope;

  b.setInsertionPointToStart(headLoop.getBody());
  at.head = headLoop.getInductionVar();
  auto queryLoop = scf::ForOp::create(b, loc, idx(0), rowBlocks, idx(1),
                                      headLoop.getRegionIterArgs());
  dropImplicitYield(queryLoop);
  queryLoop->setAttr(kQueryLoopAttr, b.getUnitAttr());
  scf::YieldOp::create(b, loc, queryLoop.getResults());

  b.setInsertionPointToStart(queryLoop.getBody());
  at.row0 = arith::MulIOp::create(b, loc, queryLoop.getInductionVar(), idx(br));
  Scope iterationScope(b.saveInsertionPoint());
  queryScope = scoreScope = &iterationScope;
  SmallVector<Value> next;
  for (auto [g, acc] : llvm::zip(keyGradients, queryLoop.getRegionIterArgs())) {
    FailureOr<Value> a = scores(g.dot.getLhs());
    if (failed(a))
      return failure();
    FailureOr<Value> x = queryRows(g.dot.getRhs());
    if (failed(x))
      return failure();
    b.restoreInsertionPoint(iterationScope.at);
    next.push_back(BlockDotOp::create(b, loc, acc.getType(), *a, *x, acc,
                                      /*transpose_rhs=*/false, /*transpose_lhs=*/true));
  }
  if (atomicQuery)
    for (QueryGradient &g : queryGradients) {
      FailureOr<Value> a = scores(g.dot.getLhs());
      if (failed(a))
        return failure();
      FailureOr<Value> y = keyRows(g.dot.getRhs());
      if (failed(y))
        return failure();
      b.restoreInsertionPoint(iterationScope.at);
      int64_t cols = cast<MemRefType>(g.accumulator.getType()).getDimSize(3);
      Value part = BlockDotOp::create(b, loc, f32Block(br, cols), *a, *y, Value(),
                                      /*transpose_rhs=*/false);
      BlockAtomicAddOp::create(b, loc, part, g.accumulator,
                               ValueRange{at.batch, at.head, at.row0}, M);
    }
  b.restoreInsertionPoint(iterationScope.at);
  scf::YieldOp::create(b, loc, next);

  b.setInsertionPointAfter(headLoop);
  for (auto [g, sum] : llvm::zip(keyGradients, headLoop.getResults()))
    BlockStoreOp::create(b, loc, scaled(sum, g.factor), g.store.getView(),
                         ValueRange{at.batch, at.kvHead, at.col0}, N);
  return success();
}

/// Grid 3: per (batch, head, query block), dQ: the atomic accumulator converted, or the
/// deterministic loop over key blocks.
LogicalResult BackwardTiler::emitQueryGradients() {
  if (queryGradients.empty())
    return success();
  auto forall = grid({batches, heads, rowBlocks},
                     launch_abi::backwardPhaseName(launch_abi::BackwardPhase::QueryGradients));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(forall.getBody());
  at.batch = forall.getInductionVar(0);
  at.head = forall.getInductionVar(1);
  at.row0 = arith::MulIOp::create(b, loc, forall.getInductionVar(2), idx(br));
  at.kvHead = arith::DivUIOp::create(b, loc, at.head, group);
  if (!deterministic) {
    for (QueryGradient &g : queryGradients) {
      auto ty = cast<MemRefType>(g.accumulator.getType());
      Value sum = BlockLoadOp::create(b, loc, f32Block(br, ty.getDimSize(3)), g.accumulator,
                                      ValueRange{at.batch, at.head, at.row0}, M);
      BlockStoreOp::create(b, loc, scaled(sum, g.factor), g.store.getView(),
                           ValueRange{at.batch, at.head, at.row0}, M);
    }
    return success();
  }

  SmallVector<Value> inits;
  for (QueryGradient &g : queryGradients) {
    int64_t cols = g.dot.getResult().getType().getDimSize(3);
    if (ShapedType::isDynamic(cols))
      return g.dot.emitOpError("the tiled backward needs a static head dimension");
    inits.push_back(cst(f32Block(br, cols), 0.0));
  }
  auto keyLoop = scf::ForOp::create(b, loc, idx(0), colBlocks, idx(1), inits);
  dropImplicitYield(keyLoop);
  keyLoop->setAttr(kKVLoopAttr, b.getUnitAttr());
  // Query rows and per-row values are built once per program, before the loop.
  Scope programScope(OpBuilder::InsertPoint(forall.getBody(), Block::iterator(keyLoop)));
  queryScope = &programScope;

  b.setInsertionPointToStart(keyLoop.getBody());
  at.col0 = arith::MulIOp::create(b, loc, keyLoop.getInductionVar(), idx(bc));
  Scope iterationScope(b.saveInsertionPoint());
  keyScope = scoreScope = &iterationScope;
  SmallVector<Value> next;
  for (auto [g, acc] : llvm::zip(queryGradients, keyLoop.getRegionIterArgs())) {
    FailureOr<Value> a = scores(g.dot.getLhs());
    if (failed(a))
      return failure();
    FailureOr<Value> y = keyRows(g.dot.getRhs());
    if (failed(y))
      return failure();
    b.restoreInsertionPoint(iterationScope.at);
    next.push_back(BlockDotOp::create(b, loc, acc.getType(), *a, *y, acc,
                                      /*transpose_rhs=*/false));
  }
  b.restoreInsertionPoint(iterationScope.at);
  scf::YieldOp::create(b, loc, next);

  b.setInsertionPointAfter(keyLoop);
  for (auto [g, sum] : llvm::zip(queryGradients, keyLoop.getResults()))
    BlockStoreOp::create(b, loc, scaled(sum, g.factor), g.store.getView(),
                         ValueRange{at.batch, at.head, at.row0}, M);
  return success();
}

LogicalResult BackwardTiler::emit() {
  Operation *ret = fn.getBody().front().getTerminator();
  b.setInsertionPoint(ret);
  loc = fn.getLoc();
  batches = memref::DimOp::create(b, loc, queryView, 0);
  heads = memref::DimOp::create(b, loc, queryView, 1);
  M = memref::DimOp::create(b, loc, queryView, 2);
  kvHeads = memref::DimOp::create(b, loc, keyView, 1);
  N = memref::DimOp::create(b, loc, keyView, 2);
  group = arith::DivUIOp::create(b, loc, heads, kvHeads);
  rowBlocks = arith::CeilDivUIOp::create(b, loc, M, idx(br));
  colBlocks = arith::CeilDivUIOp::create(b, loc, N, idx(bc));

  // Workspaces: one B x H x M f32 buffer per per-row reduction, and the dQ accumulators.
  // They are function-level allocations, marked tile.workspace, for a launcher to provide.
  for (RowReduceOp reduce : fn.getBody().getOps<RowReduceOp>()) {
    auto ty = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                               ShapedType::kDynamic},
                              b.getF32Type());
    auto alloc = memref::AllocOp::create(b, loc, ty, ValueRange{batches, heads, M});
    alloc->setAttr(kWorkspaceAttr, b.getStringAttr("row_reduce"));
    rowWorkspaces.push_back({reduce, alloc});
  }
  if (!deterministic)
    for (QueryGradient &g : queryGradients) {
      int64_t cols = g.dot.getResult().getType().getDimSize(3);
      if (ShapedType::isDynamic(cols))
        return g.dot.emitOpError("the tiled backward needs a static head dimension");
      auto ty = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                                 ShapedType::kDynamic, cols},
                                b.getF32Type());
      auto alloc = memref::AllocOp::create(b, loc, ty, ValueRange{batches, heads, M});
      alloc->setAttr(kWorkspaceAttr, b.getStringAttr("dq_accumulator"));
      g.accumulator = alloc;
    }

  if (failed(emitPreprocessing()) || failed(emitKeyGradients()) ||
      failed(emitQueryGradients()))
    return failure();

  // The written form goes: every tile op of the function, uses before definitions.
  SmallVector<Operation *> written;
  for (Operation &op : fn.getBody().front())
    if (isa<TileDialect>(op.getDialect()))
      written.push_back(&op);
  IRRewriter rewriter(fn.getContext());
  for (Operation *op : llvm::reverse(written))
    rewriter.eraseOp(op);
  return success();
}

struct TileTilingBackwardPass
    : public tilefuse::impl::TileTilingBackwardBase<TileTilingBackwardPass> {
  using TileTilingBackwardBase::TileTilingBackwardBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal() || fn.getBody().getOps<SoftmaxFromLseOp>().empty())
      return;
    TileConfig options;
    options.blockM = blockM;
    options.blockN = blockN;
    FailureOr<TileConfig> config = tile::configForPass(fn, options);
    if (failed(config))
      return signalPassFailure();
    int64_t br = *config->blockM, bc = *config->blockN;
    if (br <= 0 || bc <= 0) {
      fn.emitError() << "tile-tiling-backward: block sizes must be positive (block-m=" << br
                     << ", block-n=" << bc << ")";
      return signalPassFailure();
    }
    if (!fn.getBody().hasOneBlock()) {
      fn.emitOpError("the tiled backward needs a kernel of one block");
      return signalPassFailure();
    }
    BackwardTiler tiler(fn, br, bc, deterministic);
    if (failed(tiler.match()) || failed(tiler.emit()))
      return signalPassFailure();
  }
};

} // namespace
