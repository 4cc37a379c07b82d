//===- TileOnlineSoftmax.cpp - fuse the softmax sweeps (FA2 recurrence) ---===//
//
// Level 2 -> level 3. tile-tiling emits three loops over the same key/value blocks:
//   max:  m = max_j rowmax(S_j)
//   sum:  l = sum_j rowsum(exp(S_j - m))
//   pv:   O = sum_j (exp(S_j - m) / l) V_j
// This pass replaces them with one loop carrying (m, l, acc) and working in base 2:
//   T_j = S_j * log2(e)            (folded into the scale constant when only masks follow it)
//   m' = max(m, rowmax(T_j));  p = exp2(T_j - m');  alpha = exp2(m - m')
//   l' = alpha * l + rowsum(p);  acc' = alpha * acc + p V_j
// and normalizes once after the loop: O = acc / l. The loop results stand in for the old ones
// (m * ln 2 for the max, l for the sum, acc / l for the output), so whatever tiling computed from
// them after the loops (the logsumexp) stays as it was.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/Base2Scores.h"
#include "tilefuse/dialect/TileMath.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

#include <cmath>

namespace tilefuse {
#define GEN_PASS_DEF_TILEONLINESOFTMAX
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

bool isSweep(Operation *op, StringRef name) {
  auto attr = op->getAttrOfType<StringAttr>(kSweepAttr);
  return attr && attr.getValue() == name;
}

bool sameRange(scf::ForOp a, scf::ForOp b) {
  return a.getLowerBound() == b.getLowerBound() && a.getUpperBound() == b.getUpperBound() &&
         a.getStep() == b.getStep();
}

/// The three sweeps of one tiled softmax and the values fusion needs from them.
struct Sweeps {
  scf::ForOp max, sum, pv;
  Value scores;   // S_j inside the max loop
  Value valueBlk; // V_j inside the pv loop
};

/// Recognizes the sweep shape tile-tiling emits; anything else is left alone (it is correct as
/// it stands, only slower).
std::optional<Sweeps> matchSweeps(scf::ForOp maxLoop) {
  Sweeps s;
  s.max = maxLoop;
  auto yieldMax = cast<scf::YieldOp>(maxLoop.getBody()->getTerminator());
  auto maxOp = yieldMax.getOperand(0).getDefiningOp<arith::MaximumFOp>();
  if (!maxOp || maxOp.getLhs() != maxLoop.getRegionIterArgs()[0])
    return std::nullopt;
  auto red = maxOp.getRhs().getDefiningOp<ReduceOp>();
  if (!red || red.getKind() != ReduceKind::Max)
    return std::nullopt;
  s.scores = red.getInput();
  for (Operation *op = maxLoop->getNextNode(); op; op = op->getNextNode()) {
    auto loop = dyn_cast<scf::ForOp>(op);
    if (!loop)
      continue;
    if (!s.sum && isSweep(loop, "sum") && sameRange(loop, maxLoop))
      s.sum = loop;
    else if (s.sum && isSweep(loop, "pv") && sameRange(loop, maxLoop)) {
      s.pv = loop;
      break;
    }
  }
  if (!s.sum || !s.pv)
    return std::nullopt;
  auto yieldPv = cast<scf::YieldOp>(s.pv.getBody()->getTerminator());
  auto dot = yieldPv.getOperand(0).getDefiningOp<BlockDotOp>();
  if (!dot || dot.getAcc() != s.pv.getRegionIterArgs()[0] || dot.getTransposeRhs())
    return std::nullopt;
  s.valueBlk = dot.getRhs();
  return s;
}

/// Clones into the fused body every op of `loop`'s body that `root` depends on.
Value cloneSlice(OpBuilder &b, scf::ForOp loop, Value root, Value newIv) {
  IRMapping map;
  map.map(loop.getInductionVar(), newIv);
  BackwardSliceOptions opts;
  opts.filter = [&](Operation *op) { return op->getBlock() == loop.getBody(); };
  opts.inclusive = true;
  SetVector<Operation *> slice;
  if (Operation *def = root.getDefiningOp())
    (void)getBackwardSlice(def, &slice, opts);
  // Regions of score_mod / mask ops may use values of the loop body defined above them.
  for (Operation *op : SetVector<Operation *>(slice))
    visitUsedValuesDefinedAbove(op->getRegions(), [&](OpOperand *operand) {
      if (Operation *d = operand->get().getDefiningOp())
        if (d->getBlock() == loop.getBody())
          (void)getBackwardSlice(d, &slice, opts), slice.insert(d);
    });
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered, [](Operation *a, Operation *c) { return a->isBeforeInBlock(c); });
  for (Operation *op : ordered)
    b.clone(*op, map);
  return map.lookupOrDefault(root);
}

Value splat(OpBuilder &b, Location loc, RankedTensorType ty, double v) {
  return arith::ConstantOp::create(b, loc, ty,
                                   DenseElementsAttr::get(ty, APFloat(static_cast<float>(v))));
}

void fuse(Sweeps s) {
  Location loc = s.pv.getLoc();
  OpBuilder b(s.max);
  auto rowTy = cast<RankedTensorType>(s.max.getResult(0).getType());
  auto accTy = cast<RankedTensorType>(s.pv.getResult(0).getType());
  auto scoreTy = cast<RankedTensorType>(s.scores.getType());
  // The fused loop takes the max sweep's place: its bounds and everything its body reads are
  // defined before that sweep, and the values replacing the sweeps' results then dominate all
  // their users.
  Value negInf = splat(b, loc, rowTy, -INFINITY), zeroRow = splat(b, loc, rowTy, 0.0);
  Value zeroAcc = splat(b, loc, accTy, 0.0);
  auto fused = scf::ForOp::create(
      b, loc, s.max.getLowerBound(), s.max.getUpperBound(), s.max.getStep(),
      ValueRange{negInf, zeroRow, zeroAcc},
      [&](OpBuilder &nb, Location l, Value iv, ValueRange it) {
        Value m = it[0], sum = it[1], acc = it[2];
        Value t = scoresInBase2(nb, l, cloneSlice(nb, s.max, s.scores, iv));
        Value vBlk = cloneSlice(nb, s.pv, s.valueBlk, iv);
        Value bm = ReduceOp::create(nb, l, rowTy, ReduceKind::Max, t);
        Value mNew = arith::MaximumFOp::create(nb, l, m, bm);
        // A row with nothing kept yet has m' = -inf: shift by 0 so exp2 gives 0, not NaN.
        Value empty = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, mNew,
                                            splat(nb, l, rowTy, -INFINITY));
        Value mSafe = arith::SelectOp::create(nb, l, empty, splat(nb, l, rowTy, 0.0), mNew);
        Value p = math::Exp2Op::create(
            nb, l, arith::SubFOp::create(nb, l, t, BroadcastOp::create(nb, l, scoreTy, mSafe)));
        Value alpha = math::Exp2Op::create(nb, l, arith::SubFOp::create(nb, l, m, mSafe));
        Value lNew = arith::AddFOp::create(nb, l, arith::MulFOp::create(nb, l, sum, alpha),
                                           ReduceOp::create(nb, l, rowTy, ReduceKind::Sum, p));
        auto accB = BroadcastOp::create(nb, l, accTy, alpha);
        Value scaled = arith::MulFOp::create(nb, l, acc, accB);
        Value accNew = BlockDotOp::create(nb, l, accTy, p, vBlk, scaled, false);
        scf::YieldOp::create(nb, l, ValueRange{mNew, lNew, accNew});
      });
  fused->setAttr(kKVLoopAttr, b.getUnitAttr());
  // Deferred normalization, once per row block.
  Value mOut = fused.getResult(0), lOut = fused.getResult(1), accOut = fused.getResult(2);
  Value lZero = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, lOut, zeroRow);
  Value lSafe = arith::SelectOp::create(b, loc, lZero, splat(b, loc, rowTy, 1.0), lOut);
  // O = acc · (1 / l): one reciprocal a row and a multiply an element. Dividing every element
  // (acc / l) costs an IEEE division each, a dozen instructions and a slow-path branch on the
  // GPU: 17% of a causal d128 tile's issue slots at 1k keys (docs/perf.md, 2026-12-04).
  Value rl = arith::DivFOp::create(b, loc, splat(b, loc, rowTy, 1.0), lSafe);
  Value out = arith::MulFOp::create(b, loc, accOut, BroadcastOp::create(b, loc, accTy, rl));
  Value mNat = arith::MulFOp::create(b, loc, mOut, splat(b, loc, rowTy, kLn2));

  s.pv.getResult(0).replaceAllUsesWith(out);
  s.sum.getResult(0).replaceAllUsesWith(lOut);
  s.max.getResult(0).replaceAllUsesWith(mNat);
  IRRewriter rewriter(b);
  rewriter.eraseOp(s.pv);
  rewriter.eraseOp(s.sum);
  rewriter.eraseOp(s.max);
}

/// What only the old sweeps used (1/l, broadcasts) is dead after fusion.
void eraseDeadPureOps(Block &block) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (isOpTriviallyDead(&op)) {
        op.erase();
        changed = true;
      }
  }
}

struct TileOnlineSoftmaxPass
    : public tilefuse::impl::TileOnlineSoftmaxBase<TileOnlineSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<Sweeps> found;
    getOperation().walk([&](scf::ForOp loop) {
      if (isSweep(loop, "max"))
        if (auto s = matchSweeps(loop))
          found.push_back(*s);
    });
    for (Sweeps s : found) {
      Block *parent = s.max->getBlock();
      fuse(s);
      eraseDeadPureOps(*parent);
    }
  }
};

} // namespace
