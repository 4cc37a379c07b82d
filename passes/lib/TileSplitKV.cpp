//===- TileSplitKV.cpp - split each row block's keys across programs -------===//
//
// Split-KV (FlashDecoding). A grid of (batch, head, row block) programs has B·H·ceil(M/Br)
// programs; at decode (M = 1, or a few rows) that leaves most of the GPU idle while each program
// walks the whole key range. This pass gives every row block S programs (a fourth grid
// dimension), each over an equal share of the row block's key blocks (the range block pruning
// left), and merges their results exactly:
//
//   program (b, h, mb, s)   keys [lo_s, hi_s): the online softmax as before, then its normalized
//                           partial O_s (f32) and LSE_s stored into workspace row s·B + b of
//                           O_part [S·B, H, M, D] and LSE_part [S·B, H, M]
//   the last to arrive      (tile.split_arrive on the row block's counter) merges the S
//                           partials: LSE = log Σ_s exp(LSE_s), O = Σ_s exp(LSE_s − LSE) O_s, and
//                           stores O and LSE where the kernel stored them; it reads the
//                           partials a few splits at a time, so their loads overlap
//
// An empty share (S larger than the row block's key blocks, or a fully masked row) has
// LSE_s = −inf and O_s = 0 and weighs nothing; all shares empty gives O = 0 and LSE = −inf, what
// the unsplit kernel writes. The split count is a kernel argument: the runtime picks it per
// launch (and S = 1 is the unsplit result through the workspace).
//
// The kernel gets four trailing arguments: O_part, LSE_part, the arrival counters (i32, one per
// program of the unsplit grid, indexed by its ids; zero before the first launch, the merging
// program resets its own) and S. The partials are stored and read at the rows O is (packed rows
// of a GQA group included). A varlen kernel's partials are a padded batch's: workspace row
// s·B + b holds sequence b's rows (at most M) at their rows within the sequence, and the merge
// stores O and LSE packed, where the kernel stored them. Runs after tile-block-pruning (it
// splits the pruned range) and before tile-pipeline.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILESPLITKV
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// The pieces of a tiled kernel the split rewrites.
struct TiledKernel {
  scf::ForallOp grid;
  scf::ForOp keyLoop;
  BlockStoreOp outputStore, lseStore;
};

/// Whether `index` is the program's batch `batch`, or (a packed batch, tile-varlen) its
/// sequence's first row: the offsets read at `batch`.
bool isProgramBatch(Value index, Value batch) {
  if (index == batch)
    return true;
  auto cast = index.getDefiningOp<arith::IndexCastUIOp>();
  auto load = cast ? cast.getIn().getDefiningOp<memref::LoadOp>() : nullptr;
  return load && load.getIndices().size() == 1 && load.getIndices()[0] == batch;
}

FailureOr<TiledKernel> matchTiledKernel(func::FuncOp func) {
  TiledKernel k;
  SmallVector<scf::ForallOp> grids;
  func.walk([&](scf::ForallOp op) { grids.push_back(op); });
  if (grids.size() != 1 || grids.front().getRank() != 3)
    return func.emitError("tile-split-kv: expects one (batch, head, row block) scf.forall of a "
                          "tiled kernel (run tile-tiling first)");
  k.grid = grids.front();
  for (Operation &op : k.grid.getBody()->without_terminator()) {
    if (auto loop = dyn_cast<scf::ForOp>(op); loop && loop->hasAttr(kKVLoopAttr)) {
      if (k.keyLoop)
        return loop.emitError("tile-split-kv: a program with more than one key loop");
      k.keyLoop = loop;
    }
    if (auto store = dyn_cast<BlockStoreOp>(op)) {
      BlockStoreOp &slot = store.getValue().getType().getRank() == 2 ? k.outputStore : k.lseStore;
      if (slot)
        return store.emitError("tile-split-kv: a program with more than one O or LSE store");
      slot = store;
    }
  }
  if (!k.keyLoop || !k.outputStore || !k.lseStore)
    return k.grid.emitError("tile-split-kv: the program needs a key loop (tile.kv_loop) and "
                            "the block stores of O and LSE after it");
  for (BlockStoreOp store : {k.outputStore, k.lseStore}) {
    if (!k.keyLoop->isBeforeInBlock(store))
      return store.emitError("tile-split-kv: the store must follow the key loop");
    if (store.getIndices().size() != 3 ||
        !isProgramBatch(store.getIndices()[0], k.grid.getInductionVar(0)))
      return store.emitError("tile-split-kv: the store must address [batch, head, row] of its "
                             "program");
  }
  if (k.outputStore.getHeadRows() != k.lseStore.getHeadRows() ||
      !llvm::equal(k.outputStore.getIndices(), k.lseStore.getIndices()))
    return k.lseStore.emitError("tile-split-kv: O and LSE must be stored at the same rows");
  return k;
}

Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value splat(OpBuilder &b, Location loc, RankedTensorType type, float v) {
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(v)));
}

struct TileSplitKVPass : public tilefuse::impl::TileSplitKVBase<TileSplitKVPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    FailureOr<TiledKernel> matched = matchTiledKernel(func);
    if (failed(matched))
      return signalPassFailure();
    TiledKernel k = *matched;
    MLIRContext *ctx = &getContext();
    Location loc = k.grid.getLoc();
    OpBuilder b(ctx);

    // The workspace arguments. The split index folds into the batch dimension (row s·B + b), so
    // the partials are views of the kernel's own ranks.
    auto outputView = cast<MemRefType>(k.outputStore.getView().getType());
    int64_t dyn = ShapedType::kDynamic, headDim = outputView.getShape().back();
    Type f32 = b.getF32Type();
    auto outputPartType = MemRefType::get({dyn, dyn, dyn, headDim}, f32);
    auto lsePartType = MemRefType::get({dyn, dyn, dyn}, f32);
    auto countersType = MemRefType::get({dyn, dyn, dyn}, b.getI32Type());
    unsigned first = func.getNumArguments();
    SmallVector<unsigned> positions(4, first);
    SmallVector<Type> types = {outputPartType, lsePartType, countersType, b.getIndexType()};
    SmallVector<DictionaryAttr> attrs(4, DictionaryAttr::get(ctx));
    SmallVector<Location> locs(4, func.getLoc());
    if (failed(func.insertArguments(positions, types, attrs, locs))) {
      func.emitError("tile-split-kv: cannot add the workspace arguments");
      return signalPassFailure();
    }
    Value outputPart = func.getArgument(first), lsePart = func.getArgument(first + 1);
    Value counters = func.getArgument(first + 2), splits = func.getArgument(first + 3);
    // The launch ABI's split form (tilefuse/runtime/device/LaunchAbi.h) follows from this mark.
    func->setAttr(tile::kSplitKVAttr, b.getUnitAttr());

    // The grid gets the split dimension: (batch, head, row block, split).
    b.setInsertionPoint(k.grid);
    SmallVector<OpFoldResult> bounds = k.grid.getMixedUpperBound();
    bounds.push_back(splits);
    auto grid = scf::ForallOp::create(b, loc, bounds, ValueRange(),
                                      tile::gridMapping(ctx, /*split=*/true));
    Block *body = grid.getBody();
    body->getOperations().splice(body->getTerminator()->getIterator(),
                                 k.grid.getBody()->getOperations(),
                                 k.grid.getBody()->begin(),
                                 k.grid.getBody()->getTerminator()->getIterator());
    for (unsigned i = 0; i < 3; ++i)
      k.grid.getInductionVar(i).replaceAllUsesWith(grid.getInductionVar(i));
    k.grid.erase();
    Value batch = grid.getInductionVar(0), head = grid.getInductionVar(1);
    Value rowBlock = grid.getInductionVar(2), split = grid.getInductionVar(3);
    Value batches = getValueOrCreateConstantIndexOp(b, loc, bounds[0]);

    // This program's share of the key blocks [lo, hi): ceil((hi - lo) / S) blocks each.
    b.setInsertionPoint(k.keyLoop);
    Value zero = indexConstant(b, loc, 0), one = indexConstant(b, loc, 1);
    Value lo = k.keyLoop.getLowerBound(), hi = k.keyLoop.getUpperBound();
    Value count = arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, hi, lo), zero);
    Value share = arith::CeilDivUIOp::create(b, loc, count, splits);
    Value shareLo = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, lo, arith::MulIOp::create(b, loc, split, share)),
        hi);
    Value shareHi =
        arith::MinSIOp::create(b, loc, arith::AddIOp::create(b, loc, shareLo, share), hi);
    k.keyLoop.setLowerBound(shareLo);
    k.keyLoop.setUpperBound(shareHi);

    // The partials go to workspace row s·B + b, at O's (head, row) and packing.
    Value outHead = k.outputStore.getIndices()[1], row = k.outputStore.getIndices()[2];
    Value headRows = k.outputStore.getHeadRows();
    b.setInsertionPointAfter(k.keyLoop);
    Value partRow = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, split, batches),
                                          batch);
    auto storePartial = [&](BlockStoreOp store, Value view) {
      b.setInsertionPoint(store);
      BlockStoreOp::create(b, store.getLoc(), store.getValue(), view,
                           ValueRange{partRow, outHead, row}, store.getBound(), headRows);
    };
    storePartial(k.outputStore, outputPart);
    storePartial(k.lseStore, lsePart);

    // The last program of the row block merges.
    b.setInsertionPoint(body->getTerminator());
    Location mergeLoc = k.outputStore.getLoc();
    // Every thread of the CTA arrives; tgpu-warp-specialize narrows it to the consumers.
    Value last = SplitArriveOp::create(b, mergeLoc, counters, ValueRange{batch, head, rowBlock},
                                       splits, /*barrier_id=*/IntegerAttr(),
                                       /*threads=*/IntegerAttr());
    auto merge = scf::IfOp::create(b, mergeLoc, last, /*withElseRegion=*/false);
    b.setInsertionPointToStart(merge.thenBlock());
    auto outType = cast<RankedTensorType>(k.outputStore.getValue().getType());
    auto rowType = RankedTensorType::get({outType.getDimSize(0)}, f32);
    auto accType = RankedTensorType::get(outType.getShape(), f32);
    float inf = std::numeric_limits<float>::infinity();
    Value negInf = splat(b, mergeLoc, rowType, -inf), zeros = splat(b, mergeLoc, rowType, 0);
    Value ones = splat(b, mergeLoc, rowType, 1);
    Value bound = k.outputStore.getBound();
    // Split t's partial LSE and O (workspace row t·B + b).
    auto loadPartial = [&](OpBuilder &b, Location loc, Value t) -> std::pair<Value, Value> {
      Value tRow = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, t, batches),
                                         batch);
      Value lse = BlockLoadOp::create(b, loc, rowType, lsePart, ValueRange{tRow, outHead, row},
                                      bound, headRows);
      Value out = BlockLoadOp::create(b, loc, accType, outputPart,
                                      ValueRange{tRow, outHead, row}, bound, headRows);
      return {lse, out};
    };
    // Online: rescale what was merged (max, sum, acc) to the new max and add one partial. A
    // max of -inf (nothing yet) is taken as 0 so that -inf - max stays -inf (weight 0), not NaN.
    auto combine = [&](OpBuilder &b, Location loc, SmallVector<Value, 3> merged, Value lse,
                       Value out) -> SmallVector<Value, 3> {
      Value max = merged[0], sum = merged[1], acc = merged[2];
      Value newMax = arith::MaximumFOp::create(b, loc, max, lse);
      Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, newMax, negInf);
      Value safeMax = arith::SelectOp::create(b, loc, none, zeros, newMax);
      Value alpha = math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, max, safeMax));
      Value beta = math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, lse, safeMax));
      Value newSum =
          arith::AddFOp::create(b, loc, arith::MulFOp::create(b, loc, sum, alpha), beta);
      Value scaledAcc =
          arith::MulFOp::create(b, loc, acc, BroadcastOp::create(b, loc, accType, alpha));
      Value scaledOut =
          arith::MulFOp::create(b, loc, out, BroadcastOp::create(b, loc, accType, beta));
      return {newMax, newSum, arith::AddFOp::create(b, loc, scaledAcc, scaledOut)};
    };
    // The merge is the last CTA's alone, after every other split finished: its time is the
    // latency of its loads. So they go a batch of splits at a time, all loads first (in flight
    // together), then the combines; the S mod batch left over one by one. A batch's partial
    // tiles are live at once: up to four, within a budget of values per thread (a warp holds
    // rows_per_warp rows of the head dim). The budget is what ptxas fits without spilling:
    // 128 for wgmma kernels (d128: two tiles, 254 registers), 64 for mma.sync ones, whose
    // fragments take more (sm_80 d64 spills with two).
    FailureOr<TileConfig> config = tile::readModuleConfig(func);
    if (failed(config))
      return signalPassFailure();
    int64_t valuesPerThread = config->rowsPerWarp.value_or(16) * headDim / 32;
    int64_t budget = config->mma == MmaKind::Sync ? 64 : 128;
    int64_t mergeBatch =
        std::clamp<int64_t>(budget / std::max<int64_t>(valuesPerThread, 1), 1, 4);
    Value batchSize = indexConstant(b, mergeLoc, mergeBatch);
    Value whole = arith::MulIOp::create(
        b, mergeLoc, arith::DivUIOp::create(b, mergeLoc, splits, batchSize), batchSize);
    SmallVector<Value> init = {negInf, zeros, splat(b, mergeLoc, accType, 0)};
    auto batched = scf::ForOp::create(
        b, mergeLoc, zero, whole, batchSize, init,
        [&](OpBuilder &b, Location loc, Value t0, ValueRange carried) {
          SmallVector<std::pair<Value, Value>> partials;
          for (int64_t u = 0; u < mergeBatch; ++u)
            partials.push_back(loadPartial(
                b, loc, arith::AddIOp::create(b, loc, t0, indexConstant(b, loc, u))));
          SmallVector<Value, 3> merged(carried.begin(), carried.end());
          for (auto [lse, out] : partials)
            merged = combine(b, loc, merged, lse, out);
          scf::YieldOp::create(b, loc, merged);
        });
    auto loop = scf::ForOp::create(
        b, mergeLoc, whole, splits, one, batched.getResults(),
        [&](OpBuilder &b, Location loc, Value t, ValueRange carried) {
          auto [lse, out] = loadPartial(b, loc, t);
          SmallVector<Value, 3> merged(carried.begin(), carried.end());
          scf::YieldOp::create(b, loc, combine(b, loc, merged, lse, out));
        });
    Value max = loop.getResult(0), sum = loop.getResult(1), acc = loop.getResult(2);
    // No weight at all (every share empty): O = 0 and LSE = -inf + log 0 = -inf.
    Value empty = arith::CmpFOp::create(b, mergeLoc, arith::CmpFPredicate::OEQ, sum, zeros);
    Value divisor = arith::SelectOp::create(b, mergeLoc, empty, ones, sum);
    // acc · (1 / sum): one reciprocal a row (as tile-online-softmax normalizes).
    Value reciprocal = arith::DivFOp::create(b, mergeLoc, ones, divisor);
    Value output = arith::MulFOp::create(b, mergeLoc, acc,
                                         BroadcastOp::create(b, mergeLoc, accType, reciprocal));
    Value lse = arith::AddFOp::create(b, mergeLoc, max, math::LogOp::create(b, mergeLoc, sum));
    k.outputStore->moveBefore(merge.thenBlock()->getTerminator());
    k.lseStore->moveBefore(merge.thenBlock()->getTerminator());
    k.outputStore.getValueMutable().assign(output);
    k.lseStore.getValueMutable().assign(lse);
  }
};

} // namespace
