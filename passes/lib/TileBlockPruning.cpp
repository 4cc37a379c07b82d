//===- TileBlockPruning.cpp - skip empty blocks, drop masks on full ones --===//
//
// Level 3 -> level 4. For each key/value loop whose body applies block_mask ops, the mask regions
// are evaluated over the block's index intervals (IntervalMask.h), giving per block:
//   empty   - no score kept:   the loop range starts after the leading empty blocks and ends
//             before the trailing ones; empty blocks in between are skipped;
//   full    - every score kept: the body runs with every block_mask removed;
//   partial - otherwise:        the body as it was.
// For causal attention about half the blocks leave the range, and only the diagonal blocks pay
// for the mask. Nothing here knows which variant it prunes: the mask region says it all.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/IntervalMask.h"
#include "tilefuse/passes/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILEBLOCKPRUNING
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// Whether a score modifier (block_score_mod, or a backward's block_score_mod_grad) reads what
/// `mask` gives, directly or through other ops: it may turn a masked -inf into a finite score
/// (a soft cap after a mask), so the mask alone cannot make a block empty.
bool feedsScoreModifier(BlockMaskOp mask) {
  SmallVector<Value> work = {mask.getResult()};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (isa<BlockScoreModOp, BlockScoreModGradOp>(user))
        return true;
      llvm::append_range(work, user->getResults());
    }
  }
  return false;
}

/// Emits the classification of block `iv` of `loop`: (mayKeep, mayDrop) over all its masks.
class LoopClassifier {
public:
  LoopClassifier(scf::ForOp loop, SmallVector<BlockMaskOp> masks)
      : loop(loop), masks(std::move(masks)) {}

  /// Whether some mask can make a block empty (one that no score modifier follows).
  bool canBeEmpty() const {
    return llvm::any_of(masks, [](BlockMaskOp mask) { return !feedsScoreModifier(mask); });
  }

  /// The operands of the masks (row, col, ...) may be computed in the body from the induction
  /// variable; they must be pure so they can be recomputed for any block index.
  bool canRecompute() {
    BackwardSliceOptions opts;
    opts.filter = [&](Operation *op) { return op->getBlock() == loop.getBody(); };
    opts.inclusive = true;
    for (BlockMaskOp mask : masks)
      for (Value v : {mask.getBatch(), mask.getHead(), mask.getRow(), mask.getCol(),
                      mask.getHeadRows()})
        if (Operation *def = v ? v.getDefiningOp() : nullptr)
          if (def->getBlock() == loop.getBody())
            (void)getBackwardSlice(def, &slice, opts);
    for (BlockMaskOp mask : masks)
      if (mask.getBody().walk([&](Operation *op) {
            for (Value v : op->getOperands())
              if (Operation *d = v.getDefiningOp())
                if (d->getBlock() == loop.getBody())
                  return WalkResult::interrupt(); // region reads a body value: not modeled
            return WalkResult::advance();
          }).wasInterrupted())
        return false;
    return llvm::all_of(slice, [](Operation *op) { return isPure(op); });
  }

  BlockClassification emit(OpBuilder &b, Location loc, Value iv) {
    IRMapping map;
    map.map(loop.getInductionVar(), iv);
    SmallVector<Operation *> ordered(slice.begin(), slice.end());
    llvm::sort(ordered, [](Operation *a, Operation *c) { return a->isBeforeInBlock(c); });
    for (Operation *op : ordered)
      b.clone(*op, map);
    Value mayKeep, mayDrop;
    for (BlockMaskOp mask : masks) {
      auto ty = mask.getType();
      Value row = map.lookupOrDefault(mask.getRow()), col = map.lookupOrDefault(mask.getCol());
      Value rowHi = b.createOrFold<arith::AddIOp>(
          loc, row, arith::ConstantIndexOp::create(b, loc, ty.getDimSize(0) - 1));
      Value colHi = b.createOrFold<arith::AddIOp>(
          loc, col, arith::ConstantIndexOp::create(b, loc, ty.getDimSize(1) - 1));
      Value head = map.lookupOrDefault(mask.getHead()), headHi = head;
      if (Value headRows = mask.getHeadRows()) {
        // Packed rows: the block's (head, row) pairs lie in heads [first, last] (unpackRow of
        // its first and last packed rows); within one head its rows are [row, rowHi] of that
        // head, across several any row of theirs may be in it.
        headRows = map.lookupOrDefault(headRows);
        tile::HeadAndRow first = tile::unpackRow(b, loc, head, row, headRows);
        tile::HeadAndRow last = tile::unpackRow(b, loc, head, rowHi, headRows);
        Value oneHead =
            b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, first.head, last.head);
        Value zero = arith::ConstantIndexOp::create(b, loc, 0);
        Value lastRow = b.createOrFold<arith::SubIOp>(
            loc, headRows, arith::ConstantIndexOp::create(b, loc, 1));
        head = first.head;
        headHi = last.head;
        row = b.createOrFold<arith::SelectOp>(loc, oneHead, first.row, zero);
        rowHi = b.createOrFold<arith::SelectOp>(loc, oneHead, last.row, lastRow);
      }
      BlockClassification c =
          emitIntervalMaskEvaluation(b, loc, mask.getBody(), map.lookupOrDefault(mask.getBatch()),
                                     head, headHi, row, rowHi, col, colHi);
      // Scores pass every mask in turn: kept only if each keeps them. A mask a score modifier
      // follows drops nothing for good (f(-inf) may be finite): it cannot empty a block, but
      // where it keeps everything it is still the identity, so it takes part in `full`.
      if (!feedsScoreModifier(mask))
        mayKeep = mayKeep ? b.createOrFold<arith::AndIOp>(loc, mayKeep, c.mayKeep) : c.mayKeep;
      mayDrop = mayDrop ? b.createOrFold<arith::OrIOp>(loc, mayDrop, c.mayDrop) : c.mayDrop;
    }
    if (!mayKeep)
      mayKeep = arith::ConstantIntOp::create(b, loc, 1, 1);
    return {mayKeep, mayDrop};
  }

private:
  scf::ForOp loop;
  SmallVector<BlockMaskOp> masks;
  SetVector<Operation *> slice;
};

/// `while (j != end && block j is empty) j += dir` as an scf.while; returns the final j.
/// For the upper end the block examined is j - 1.
Value scanEmpty(OpBuilder &b, Location loc, LoopClassifier &cls, Value start, Value end,
                bool fromTop) {
  Type idxTy = b.getIndexType();
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::WhileOp::create(
      b, loc, TypeRange{idxTy}, ValueRange{start},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value j = args[0];
        Value more = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ne, j, end);
        auto check = scf::IfOp::create(
            nb, l, more,
            [&](OpBuilder &tb, Location tl) {
              Value blk = fromTop ? arith::SubIOp::create(tb, tl, j, one).getResult() : j;
              BlockClassification c = cls.emit(tb, tl, blk);
              Value empty = tb.createOrFold<arith::XOrIOp>(
                  tl, c.mayKeep, arith::ConstantIntOp::create(tb, tl, 1, 1));
              scf::YieldOp::create(tb, tl, empty);
            },
            [&](OpBuilder &eb, Location el) {
              scf::YieldOp::create(eb, el, ValueRange{arith::ConstantIntOp::create(eb, el, 0, 1)});
            });
        scf::ConditionOp::create(nb, l, check.getResult(0), ValueRange{j});
      },
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value next = fromTop ? arith::SubIOp::create(nb, l, args[0], one).getResult()
                             : arith::AddIOp::create(nb, l, args[0], one).getResult();
        scf::YieldOp::create(nb, l, next);
      });
  return loop.getResult(0);
}

void pruneLoop(scf::ForOp loop, SmallVector<BlockMaskOp> masks, bool instrument) {
  LoopClassifier cls(loop, masks);
  if (!cls.canRecompute())
    return;
  Location loc = loop.getLoc();
  OpBuilder b(loop);

  // Trim the range: first and one-past-last blocks that may keep a score (when some mask can
  // empty a block at all). Steps other than 1 would need a strided scan; tiling only emits unit
  // steps.
  auto step = getConstantIntValue(loop.getStep());
  if (cls.canBeEmpty() && step && *step == 1) {
    Value lo = scanEmpty(b, loc, cls, loop.getLowerBound(), loop.getUpperBound(), false);
    Value hi = scanEmpty(b, loc, cls, loop.getUpperBound(), lo, true);
    loop.getLowerBoundMutable().assign(lo);
    loop.getUpperBoundMutable().assign(hi);
  }

  // Body: if empty { pass through } else if full { unmasked copy } else { original }.
  Block *body = loop.getBody();
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  TypeRange iterTypes = loop.getResultTypes();
  b.setInsertionPointToStart(body);
  BlockClassification c = cls.emit(b, loc, loop.getInductionVar());
  // Everything from here to the yield moves into the branches.
  Operation *firstMoved = b.getInsertionPoint() == body->end() ? nullptr : &*b.getInsertionPoint();
  auto outer = scf::IfOp::create(b, loc, iterTypes, c.mayKeep, /*withElse=*/true);
  scf::YieldOp::create(b, loc, outer.getResults());
  // Empty block (a hole inside the range): carry the loop values through.
  {
    OpBuilder eb = OpBuilder::atBlockEnd(outer.elseBlock());
    if (!outer.elseBlock()->empty())
      outer.elseBlock()->getTerminator()->erase();
    scf::YieldOp::create(eb, loc, loop.getRegionIterArgs());
  }
  OpBuilder tb = OpBuilder::atBlockEnd(outer.thenBlock());
  if (!outer.thenBlock()->empty())
    outer.thenBlock()->getTerminator()->erase();
  auto inner = scf::IfOp::create(tb, loc, iterTypes, c.mayDrop, /*withElse=*/true);
  scf::YieldOp::create(tb, loc, inner.getResults());

  // Partial: the original ops, moved.
  Block *partial = inner.thenBlock();
  if (!partial->empty())
    partial->getTerminator()->erase();
  for (Operation *op = firstMoved; op && op != yield.getOperation();) {
    Operation *next = op->getNextNode();
    if (op != outer.getOperation())
      op->moveBefore(partial, partial->end());
    op = next;
  }
  OpBuilder pb = OpBuilder::atBlockEnd(partial);
  if (instrument)
    BlockEventOp::create(pb, loc, BlockClass::Partial);
  scf::YieldOp::create(pb, loc, yield.getOperands());

  // Full: a copy without any block_mask.
  Block *full = inner.elseBlock();
  if (!full->empty())
    full->getTerminator()->erase();
  OpBuilder fb = OpBuilder::atBlockEnd(full);
  IRMapping map;
  for (Operation &op : partial->without_terminator()) {
    if (auto mask = dyn_cast<BlockMaskOp>(op)) {
      map.map(mask.getResult(), map.lookupOrDefault(mask.getInput()));
      continue;
    }
    if (isa<BlockEventOp>(op))
      continue;
    fb.clone(op, map);
  }
  if (instrument)
    BlockEventOp::create(fb, loc, BlockClass::Full);
  SmallVector<Value> fullYield;
  for (Value v : yield.getOperands())
    fullYield.push_back(map.lookupOrDefault(v));
  scf::YieldOp::create(fb, loc, fullYield);
  yield->erase();
}

struct TileBlockPruningPass : public tilefuse::impl::TileBlockPruningBase<TileBlockPruningPass> {
  using TileBlockPruningBase::TileBlockPruningBase;

  void runOnOperation() override {
    SmallVector<std::pair<scf::ForOp, SmallVector<BlockMaskOp>>> work;
    getOperation().walk([&](scf::ForOp loop) {
      // The backward's loops over query blocks prune the same way: their masks' row interval
      // follows the induction variable and the column interval is the program's.
      if (!loop->hasAttr(kKVLoopAttr) && !loop->hasAttr(kQueryLoopAttr))
        return;
      SmallVector<BlockMaskOp> masks;
      for (Operation &op : *loop.getBody())
        if (auto m = dyn_cast<BlockMaskOp>(op))
          masks.push_back(m);
      if (!masks.empty())
        work.push_back({loop, masks});
    });
    for (auto &[loop, masks] : work)
      pruneLoop(loop, masks, instrument);
  }
};

} // namespace
