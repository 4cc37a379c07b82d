//===- TileTiling.cpp - written-form attention to a grid of block programs ===//
//
// Level 1 -> level 2. One program per (batch, head, Br-row block of Q) in an scf.forall whose
// induction variables are the program ids; inside, the softmax over keys is the exact tiled form:
// three sweeps over Bc-column blocks (row max, row sum of exp, normalized P x V). That form is
// correct on its own; tile-online-softmax fuses the sweeps into one.
//
// With GQA packing (TileConfig pack_gqa) a program is a block of the G·M packed rows of the G
// query heads that share key/value head hkv instead (grid (batch, kv head, ceil(G·M / Br))):
// the Q, O and LSE blocks and the score and mask regions take `packed M`, so a row's head and
// query index come from its packed row, and the group's keys are read once per program.
//
// A paged K/V cache (tile.load `pages %table lengths %lens`, see tile-paged-kv) gives the K and
// V block loads `pages %table`, and each program reads its batch's key count from lens: the key
// loop, the key-bound mask and the loads' bound all take it, so pruning and split-KV see a
// per-sequence range.
//
// A packed batch of variable-length sequences (tile.load / tile.store `sequences %cu`, see
// tile-varlen) gives each program its sequence's first row cu[b] and length cu[b + 1] - cu[b]:
// a packed view's batch index counts rows (its batch stride is its row stride), so the block
// loads and stores take cu[b] as their batch index and keep the rows r within the sequence,
// bounded by its length, as the score and mask regions do. The grid runs over the sequences
// (cu has one more entry). A program whose rows all lie past its sequence's end runs no key
// block. GQA-packed, a program's rows are the G heads' rows of its sequence (G·length, each
// head's `length` rows after the last's).
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "tilefuse/dialect/KernelConfig.h"

#include <cmath>

namespace tilefuse {
#define GEN_PASS_DEF_TILETILING
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// The written-form attention that tiling understands, found from its softmax.
struct AttentionChain {
  SoftmaxOp softmax;
  DotOp qk, pv;
  LoadOp q, k, v;
  /// scale / score_mod / mask ops between Q.K^T and the softmax, in program order.
  SmallVector<Operation *> scoreOps;
  StoreOp outStore;
  StoreOp lseStore; // may be null: the logsumexp is then not written
};

/// Walks from the softmax to its producers and consumers; emits a diagnostic at the op that does
/// not fit and fails.
FailureOr<AttentionChain> matchChain(SoftmaxOp softmax) {
  AttentionChain c;
  c.softmax = softmax;
  Value s = softmax.getInput();
  while (Operation *def = s.getDefiningOp()) {
    if (isa<ScaleOp, ScoreModOp, MaskOp>(def)) {
      c.scoreOps.push_back(def);
      s = def->getOperand(0);
      continue;
    }
    break;
  }
  std::reverse(c.scoreOps.begin(), c.scoreOps.end());
  c.qk = s.getDefiningOp<DotOp>();
  if (!c.qk || !c.qk.getTransposeRhs() || c.qk.getTransposeLhs())
    return softmax.emitOpError("scores must come from tile.dot %q, %k transpose_rhs through "
                               "scale/score_mod/mask ops only");
  c.q = c.qk.getLhs().getDefiningOp<LoadOp>();
  c.k = c.qk.getRhs().getDefiningOp<LoadOp>();
  if (!c.q || !c.k)
    return c.qk.emitOpError("operands must be tile.load results to be tiled");
  // The chain's ops are erased after tiling: a use outside it (a dead mask of the raw scores, say)
  // would be left dangling.
  SmallVector<Operation *> intermediates = {c.qk};
  llvm::append_range(intermediates, c.scoreOps);
  for (Operation *op : intermediates)
    if (!op->getResult(0).hasOneUse())
      return op->emitOpError("intermediate scores must have a single use to be tiled");

  for (Operation *user : softmax.getProbs().getUsers()) {
    auto dot = dyn_cast<DotOp>(user);
    if (!dot || dot.getLhs() != softmax.getProbs() || dot.getTransposeRhs() ||
        dot.getTransposeLhs() || c.pv)
      return user->emitOpError("the probabilities may only feed one tile.dot %p, %v");
    c.pv = dot;
  }
  if (!c.pv)
    return softmax.emitOpError("probabilities are unused: nothing to compute");
  c.v = c.pv.getRhs().getDefiningOp<LoadOp>();
  if (!c.v)
    return c.pv.emitOpError("the value operand must be a tile.load result");
  for (Operation *user : c.pv.getResult().getUsers()) {
    auto store = dyn_cast<StoreOp>(user);
    if (!store || c.outStore)
      return user->emitOpError("the attention output may only feed one tile.store");
    c.outStore = store;
  }
  if (!c.outStore)
    return c.pv.emitOpError("the attention output is never stored");
  for (Operation *user : softmax.getLogsumexp().getUsers()) {
    auto store = dyn_cast<StoreOp>(user);
    if (!store || c.lseStore)
      return user->emitOpError("the logsumexp may only feed one tile.store");
    c.lseStore = store;
  }
  for (LoadOp load : {c.q, c.k, c.v})
    if (load.getView().getType().isDynamicDim(3))
      return load.emitOpError("the head dimension must be static to be tiled");
  if (c.q.getView().getType().getDimSize(3) != c.k.getView().getType().getDimSize(3))
    return c.qk.emitOpError("query and key head dimensions differ");
  if (c.q.isPaged())
    return c.q.emitOpError("the queries cannot be paged: only the key/value cache is");
  if (c.k.getPageTable() != c.v.getPageTable() || c.k.getKvLengths() != c.v.getKvLengths())
    return c.v.emitOpError("keys and values must be paged alike: one page table and one "
                           "lengths operand for both, or neither paged");
  if (c.k.getSequences() != c.v.getSequences())
    return c.v.emitOpError("keys and values must be packed alike: one `sequences` operand for "
                           "both, or neither packed");
  for (StoreOp store : {c.outStore, c.lseStore})
    if (store && store.getSequences() != c.q.getSequences())
      return store.emitOpError("the output and logsumexp are per query row: they are packed "
                               "through the queries' `sequences`, or not at all, as Q is");
  return c;
}

DenseElementsAttr splat(RankedTensorType ty, double v) {
  return DenseElementsAttr::get(ty, APFloat(static_cast<float>(v)));
}

/// Emits the tiled program for one matched chain.
class TilingEmitter {
public:
  TilingEmitter(OpBuilder &b, Location loc, AttentionChain c, int64_t br, int64_t bc,
                bool packGqa, bool alignEnd)
      : b(b), loc(loc), c(c), br(br), bc(bc), packGqa(packGqa), alignEnd(alignEnd) {
    f32 = b.getF32Type();
    rowTy = RankedTensorType::get({br}, f32);
    scoreTy = RankedTensorType::get({br, bc}, f32);
    int64_t dv = c.v.getView().getType().getDimSize(3);
    accTy = RankedTensorType::get({br, dv}, f32);
  }

  void emit() {
    Value Q = c.q.getView(), K = c.k.getView(), V = c.v.getView();
    Value c0 = idx(0), c1 = idx(1);
    // A packed Q's batch dimension counts rows: the grid runs over the sequences instead.
    Value batch =
        c.q.getSequences()
            ? arith::SubIOp::create(b, loc, memref::DimOp::create(b, loc, c.q.getSequences(), 0),
                                    c1)
                  .getResult()
            : memref::DimOp::create(b, loc, Q, 0).getResult();
    Value heads = memref::DimOp::create(b, loc, Q, 1);
    M = memref::DimOp::create(b, loc, Q, 2);
    Value kvHeads = memref::DimOp::create(b, loc, K, 1);
    // The key count: the views' (the same for every program), or a paged cache's per batch,
    // read by each program below.
    pageTable = c.k.getPageTable();
    if (!pageTable && !c.k.getSequences())
      N = memref::DimOp::create(b, loc, K, 2);
    Value group = arith::DivUIOp::create(b, loc, heads, kvHeads);
    // A program's rows: one head's M rows, or (packed) the group's G·M rows; rowBound bounds
    // them either way.
    rowBound = packGqa ? arith::MulIOp::create(b, loc, group, M).getResult() : M;
    Value rowBlocks = arith::CeilDivUIOp::create(b, loc, rowBound, idx(br));
    Value colBlocks;
    if (N)
      colBlocks = arith::CeilDivUIOp::create(b, loc, N, idx(bc));

    auto forall = scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{batch, packGqa ? kvHeads : heads, rowBlocks},
        ValueRange{}, tile::gridMapping(b.getContext(), /*split=*/false));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forall.getBody());
    bIdx = forall.getInductionVar(0);
    if (pageTable) {
      Value length = memref::LoadOp::create(b, loc, c.k.getKvLengths(), ValueRange{bIdx});
      N = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), length);
      colBlocks = arith::CeilDivUIOp::create(b, loc, N, idx(bc));
    }
    // A packed batch: the program's sequence starts at row cu[b], the batch index of its
    // blocks, and has cu[b + 1] - cu[b] rows.
    // GQA-packed, a program's rows are the group's heads' rows of the sequence: G·length.
    Value qBatch = bIdx, kBatch = bIdx, sequenceRows;
    if (Value offsets = c.q.getSequences()) {
      auto [start, end] = sequence(offsets);
      sequenceRows = arith::SubIOp::create(b, loc, end, start);
      rowBound = packGqa ? arith::MulIOp::create(b, loc, group, sequenceRows).getResult()
                         : sequenceRows;
      qBatch = start;
    }
    if (Value offsets = c.k.getSequences()) {
      auto [start, end] = sequence(offsets);
      N = arith::SubIOp::create(b, loc, end, start);
      kBatch = start;
      colBlocks = arith::CeilDivUIOp::create(b, loc, N, idx(bc));
    }
    // The program's first row, and the bound of the rows it stores (its own).
    Value start = arith::MulIOp::create(b, loc, forall.getInductionVar(2), idx(br));
    row0 = start;
    Value storeBound = rowBound;
    if (alignEnd) {
      // Row block r covers [r·Br - s, (r + 1)·Br - s), s = ceil(rows / Br)·Br - rows: the first
      // starts at row 0 instead and stores only its Br - s rows (the second stores the rest).
      Value s = arith::SubIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, arith::CeilDivUIOp::create(b, loc, rowBound, idx(br)),
                                idx(br)),
          rowBound);
      Value clipped = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, start, s);
      row0 = arith::SelectOp::create(b, loc, clipped, c0,
                                     arith::SubIOp::create(b, loc, start, s));
      // (r + 1)·Br - s >= Br - s > 0; at most rowBound for the blocks that have rows.
      storeBound = arith::MinUIOp::create(
          b, loc, rowBound,
          arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, start, idx(br)), s));
    }
    if (c.q.getSequences()) {
      // Rows all past the sequence's end: no keys, so no key block runs and no key is copied
      // (the first block's copy is issued before the loop), and nothing is stored.
      Value live = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, row0, rowBound);
      N = arith::SelectOp::create(b, loc, live, N, c0);
      colBlocks = arith::CeilDivUIOp::create(b, loc, N, idx(bc));
    }
    qAccess = {qBatch, row0, rowBound, storeBound};
    kAccess = {kBatch, N};
    if (packGqa) {
      // hIdx is the group's first query head; a row's own head comes from its packed row.
      hkv = forall.getInductionVar(1);
      hIdx = arith::MulIOp::create(b, loc, hkv, group);
      // At least 1: a sequence without rows has no row to unpack, and no division by zero.
      headRows = sequenceRows ? arith::MaxUIOp::create(b, loc, sequenceRows, idx(1)).getResult()
                              : M;
    } else {
      hIdx = forall.getInductionVar(1);
      hkv = arith::DivUIOp::create(b, loc, hIdx, group);
    }

    auto qElt = c.q.getView().getType().getElementType();
    int64_t d = c.q.getView().getType().getDimSize(3);
    qBlock = BlockLoadOp::create(b, loc, RankedTensorType::get({br, d}, qElt), Q,
                                 ValueRange{qAccess.batch, hIdx, qAccess.row}, qAccess.bound,
                                 headRows);

    // Sweep 1: row max of the (modified, masked) scores.
    Value negInf = cst(rowTy, -INFINITY), zero = cst(rowTy, 0.0);
    auto maxLoop = sweep(c0, colBlocks, c1, zero.getType(), negInf, "max",
                         [&](Value j, Value m) -> Value {
                           Value s = scoreBlock(j);
                           Value bm = ReduceOp::create(b, loc, rowTy, ReduceKind::Max, s);
                           return arith::MaximumFOp::create(b, loc, m, bm);
                         });
    Value m = maxLoop.getResult(0);
    // Rows with no kept score keep m = -inf; subtract 0 there so exp gives 0, not NaN.
    Value isEmptyRow =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, negInf);
    Value mSafe = arith::SelectOp::create(b, loc, isEmptyRow, zero, m);

    // Sweep 2: row sum of exp(s - m).
    auto sumLoop = sweep(c0, colBlocks, c1, rowTy, zero, "sum", [&](Value j, Value l) -> Value {
      Value e = expShifted(scoreBlock(j), mSafe);
      Value bs = ReduceOp::create(b, loc, rowTy, ReduceKind::Sum, e);
      return arith::AddFOp::create(b, loc, l, bs);
    });
    Value l = sumLoop.getResult(0);
    Value isZero = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l, zero);
    Value lSafe = arith::SelectOp::create(b, loc, isZero, cst(rowTy, 1.0), l);
    Value rl = arith::DivFOp::create(b, loc, cst(rowTy, 1.0), lSafe);

    // Sweep 3: acc += (exp(s - m) / l) x V.
    auto pvLoop = sweep(c0, colBlocks, c1, accTy, cst(accTy, 0.0), "pv",
                        [&](Value j, Value acc) -> Value {
                          Value p = expShifted(scoreBlock(j), mSafe);
                          Value rlB = BroadcastOp::create(b, loc, scoreTy, rl);
                          p = arith::MulFOp::create(b, loc, p, rlB);
                          Value col0 = arith::MulIOp::create(b, loc, j, idx(bc));
                          auto vElt = c.v.getView().getType().getElementType();
                          Value vBlock = BlockLoadOp::create(
                              b, loc, RankedTensorType::get({bc, accTy.getDimSize(1)}, vElt), V,
                              ValueRange{kAccess.batch, hkv, col0}, kAccess.bound,
                              Value(), pageTable);
                          return BlockDotOp::create(b, loc, accTy, p, vBlock, acc,
                                                    /*transpose_rhs=*/false);
                        });
    BlockStoreOp::create(b, loc, pvLoop.getResult(0), c.outStore.getView(),
                         ValueRange{qAccess.batch, hIdx, qAccess.row}, qAccess.storeBound,
                         headRows);
    if (c.lseStore) {
      // logsumexp = m + log(l); -inf for rows with no kept score.
      Value lse = arith::AddFOp::create(b, loc, mSafe, math::LogOp::create(b, loc, l));
      BlockStoreOp::create(b, loc, lse, c.lseStore.getView(),
                           ValueRange{qAccess.batch, hIdx, qAccess.row}, qAccess.storeBound,
                           headRows);
    }
  }

private:
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  /// Sequence bIdx's first row and its end, cu[b] and cu[b + 1], as indices.
  std::pair<Value, Value> sequence(Value offsets) {
    auto read = [&](Value i) {
      Value x = memref::LoadOp::create(b, loc, offsets, ValueRange{i});
      return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), x).getResult();
    };
    return {read(bIdx), read(arith::AddIOp::create(b, loc, bIdx, idx(1)))};
  }

  Value cst(RankedTensorType ty, double v) {
    return arith::ConstantOp::create(b, loc, ty, splat(ty, v));
  }

  Value expShifted(Value s, Value rowMax) {
    Value mB = BroadcastOp::create(b, loc, scoreTy, rowMax);
    return math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, s, mB));
  }

  scf::ForOp sweep(Value lb, Value ub, Value step, Type iterTy, Value init, StringRef name,
                   function_ref<Value(Value, Value)> body) {
    auto loop = scf::ForOp::create(b, loc, lb, ub, step, ValueRange{init},
                                   [&](OpBuilder &nb, Location, Value iv, ValueRange iters) {
                                     OpBuilder::InsertionGuard g(b);
                                     b.setInsertionPoint(nb.getInsertionBlock(),
                                                         nb.getInsertionPoint());
                                     Value next = body(iv, iters[0]);
                                     scf::YieldOp::create(b, loc, next);
                                   });
    loop->setAttr(kSweepAttr, b.getStringAttr(name));
    loop->setAttr(kKVLoopAttr, b.getUnitAttr());
    return loop;
  }

  /// One Br x Bc block of scores for key block j: Q.K^T, then the chain's ops in order, then the
  /// key bound (kv_idx < N) as the last mask so any N works.
  Value scoreBlock(Value j) {
    Value col0 = arith::MulIOp::create(b, loc, j, idx(bc));
    auto kElt = c.k.getView().getType().getElementType();
    int64_t d = c.k.getView().getType().getDimSize(3);
    Value kBlock = BlockLoadOp::create(b, loc, RankedTensorType::get({bc, d}, kElt),
                                       c.k.getView(),
                                       ValueRange{kAccess.batch, hkv, col0},
                                       kAccess.bound, Value(), pageTable);
    Value s = BlockDotOp::create(b, loc, scoreTy, qBlock, kBlock, Value(),
                                 /*transpose_rhs=*/true);
    BlockMaskOp lastMask;
    for (Operation *op : c.scoreOps) {
      lastMask = nullptr;
      if (auto scale = dyn_cast<ScaleOp>(op)) {
        double factor = scale.getFactor()
                            ? scale.getFactor()->convertToDouble()
                            : 1.0 / std::sqrt(double(c.q.getView().getType().getDimSize(3)));
        s = arith::MulFOp::create(b, loc, s, cst(scoreTy, factor));
      } else if (auto mod = dyn_cast<ScoreModOp>(op)) {
        auto blk = BlockScoreModOp::create(b, loc, scoreTy, s, bIdx, hIdx, row0, col0, headRows);
        IRMapping map;
        mod.getBody().cloneInto(&blk.getBody(), map);
        s = blk;
      } else {
        auto mask = cast<MaskOp>(op);
        lastMask = BlockMaskOp::create(b, loc, scoreTy, s, bIdx, hIdx, row0, col0, headRows);
        IRMapping map;
        mask.getBody().cloneInto(&lastMask.getBody(), map);
        s = lastMask;
      }
    }
    if (!lastMask) {
      // No mask last in the chain: the key bound gets a mask of its own.
      lastMask = BlockMaskOp::create(b, loc, scoreTy, s, bIdx, hIdx, row0, col0, headRows);
      OpBuilder::InsertionGuard g(b);
      b.createBlock(&lastMask.getBody(), {}, SmallVector<Type>(4, b.getIndexType()),
                    SmallVector<Location>(4, loc));
      YieldOp::create(b, loc, ValueRange{arith::ConstantIntOp::create(b, loc, 1, 1)});
    }
    andKeyBound(lastMask);
    return lastMask;
  }

  /// Rewrites the mask's yield to `yield(pred && kv_idx < N)`.
  void andKeyBound(BlockMaskOp mask) {
    Block &blk = mask.getBody().front();
    auto yield = cast<YieldOp>(blk.getTerminator());
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(yield);
    Value inBounds =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, blk.getArgument(3), N);
    Value keep = arith::AndIOp::create(b, loc, yield.getValues()[0], inBounds);
    yield->setOperands(ValueRange{keep});
  }

  OpBuilder &b;
  Location loc;
  AttentionChain c;
  int64_t br, bc;
  bool packGqa;
  bool alignEnd; // TileConfig row_align=end
  Type f32;
  RankedTensorType rowTy, scoreTy, accTy;
  Value M, N, rowBound, bIdx, hIdx, row0, hkv, qBlock;
  Value pageTable; // the K/V cache's page table when paged (tile.load `pages`), else null
  /// How the Q/O/LSE blocks are addressed: the batch index, the first row and the rows' bound
  /// (a packed batch: cu[b], row0 and cu[b + 1] - cu[b]), and the bound of the rows the program
  /// stores (the rows' bound, or with alignEnd the end of its own rows).
  struct QueryAccess {
    Value batch, row, bound, storeBound;
  } qAccess;
  /// How the K/V blocks are: the batch index and the rows' bound (packed: cu[b] and the
  /// sequence's length).
  struct KeyAccess {
    Value batch, bound;
  } kAccess;
  Value headRows; // M when packed (the `packed` operand of the Q/O/LSE blocks and regions)
};

struct TileTilingPass : public tilefuse::impl::TileTilingBase<TileTilingPass> {
  using TileTilingBase::TileTilingBase;

  void runOnOperation() override {
    // The module's tile.config wins; the options fill what it leaves unset (KernelConfig.h).
    TileConfig options;
    options.blockM = blockM;
    options.blockN = blockN;
    options.packGqa = packGqa;
    if (alignRowsToEnd)
      options.alignRowsToEnd = true;
    FailureOr<TileConfig> config = tile::configForPass(getOperation(), options);
    if (failed(config))
      return signalPassFailure();
    int64_t br = *config->blockM, bc = *config->blockN;
    if (br <= 0 || bc <= 0) {
      getOperation().emitError() << "tile-tiling: block sizes must be positive (block-m=" << br
                                 << ", block-n=" << bc << ")";
      return signalPassFailure();
    }
    SmallVector<SoftmaxOp> softmaxes;
    getOperation().walk([&](SoftmaxOp op) { softmaxes.push_back(op); });
    for (SoftmaxOp softmax : softmaxes) {
      FailureOr<AttentionChain> chain = matchChain(softmax);
      if (failed(chain))
        return signalPassFailure();
      // Emit where the last store is, so every view is defined there.
      Operation *last = chain->outStore;
      if (chain->lseStore && last->isBeforeInBlock(chain->lseStore))
        last = chain->lseStore;
      bool packGqa = config->packGqa.value_or(false);
      OpBuilder b(last);
      TilingEmitter(b, softmax.getLoc(), *chain, br, bc, packGqa,
                    config->alignRowsToEnd.value_or(false))
          .emit();

      IRRewriter rewriter(&getContext());
      rewriter.eraseOp(chain->outStore);
      if (chain->lseStore)
        rewriter.eraseOp(chain->lseStore);
      SmallVector<Operation *> dead = {chain->pv, chain->softmax};
      for (auto it = chain->scoreOps.rbegin(); it != chain->scoreOps.rend(); ++it)
        dead.push_back(*it);
      dead.push_back(chain->qk);
      for (Operation *op : dead)
        rewriter.eraseOp(op);
      llvm::SmallPtrSet<Operation *, 3> loads = {chain->v, chain->k, chain->q};
      for (Operation *load : loads)
        if (load->use_empty())
          rewriter.eraseOp(load);
    }
  }
};

} // namespace
