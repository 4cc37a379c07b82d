//===- TilePipeline.cpp - issue key/value block loads early ---------------===//
//
// Level 4 -> level 5 (scheduling), two steps per key/value loop:
//  1. every block load moves up to where its operands allow, so the value block is requested
//     with the key block and arrives while the scores are computed;
//  2. the key block becomes loop-carried: the block for the first iteration is loaded before the
//     loop, and each iteration loads the next one at its start. The GPU lowering keeps key blocks
//     in a ring of two shared buffers and waits for a copy only where it is first read, so the
//     next key block travels during this iteration's softmax and P x V. With prefetch_values
//     (TileConfig) the value block is carried the same way, requested after the next key block.
// A backward's loop over query blocks (tile.query_loop: dK and dV of one key block) gets the
// same two steps for its query-side blocks, Q and dO (the lhs of Q K^T and dO V^T): both are
// requested at the top of the iteration, and the next iteration's while this one computes.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/MapVector.h"
#include "tilefuse/dialect/KernelConfig.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILEPIPELINE
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// Moves `load` to just after the last op of its block that defines one of its operands (or to
/// the block start).
void hoist(BlockLoadOp load) {
  Block *block = load->getBlock();
  Operation *after = nullptr;
  for (Value v : load->getOperands()) {
    Operation *def = v.getDefiningOp();
    // Walk up to the ancestor in this block, if the value comes from inside a nested region.
    while (def && def->getBlock() != block)
      def = def->getParentOp();
    if (def && (!after || after->isBeforeInBlock(def)))
      after = def;
  }
  if (after)
    load->moveAfter(after);
  else
    load->moveBefore(&block->front());
}

/// Key blocks: loads whose block feeds a dot as its transposed rhs.
bool isKeyLoad(BlockLoadOp load) {
  return !load->use_empty() && llvm::all_of(load->getUsers(), [&](Operation *user) {
    auto dot = dyn_cast<BlockDotOp>(user);
    return dot && dot.getTransposeRhs() && dot.getRhs() == load.getResult();
  });
}

/// Whether `a` and `b` are the same value in every iteration: one value, or the same pure op
/// (without regions) of such values. tile-block-pruning clones a loop body into its full and
/// partial branches, so each branch computes a key block's address itself (a packed batch's
/// sequence start plus the block's first row, say): the copies are the same block.
bool sameValue(Value a, Value b) {
  if (a == b)
    return true;
  auto x = dyn_cast<OpResult>(a), y = dyn_cast<OpResult>(b);
  if (!x || !y || x.getResultNumber() != y.getResultNumber() || !isPure(x.getOwner()) ||
      !isPure(y.getOwner()) || x.getOwner()->getNumRegions())
    return false;
  return OperationEquivalence::isEquivalentTo(
      x.getOwner(), y.getOwner(),
      [](Value p, Value q) { return success(sameValue(p, q)); }, /*markEquivalent=*/nullptr,
      OperationEquivalence::IgnoreLocations);
}

/// Value blocks: loads whose block feeds a dot as its rhs, not transposed (V of P·V).
bool isValueLoad(BlockLoadOp load) {
  return !load->use_empty() && llvm::all_of(load->getUsers(), [&](Operation *user) {
    auto dot = dyn_cast<BlockDotOp>(user);
    return dot && !dot.getTransposeRhs() && dot.getRhs() == load.getResult();
  });
}

/// Query-side blocks of a backward's query loop: loads whose block is the lhs of a dot with a
/// transposed rhs (Q of Q K^T, dO of dO V^T), and is read only by dots.
bool isQuerySideLoad(BlockLoadOp load) {
  if (load->use_empty() || !llvm::all_of(load->getUsers(), [](Operation *user) {
        return isa<BlockDotOp>(user);
      }))
    return false;
  return llvm::any_of(load->getUsers(), [&](Operation *user) {
    auto dot = cast<BlockDotOp>(user);
    return dot.getTransposeRhs() && dot.getLhs() == load.getResult();
  });
}

/// Step 2: carries the block `keys` load through `loop` (see the file comment) and returns the
/// loop, which is a new one when it did. Leaves the loop alone unless every load reads the same
/// block, addressed from the induction variable and values defined before the loop by pure ops
/// inside it. The next block's load goes at the top of the body, or after `*issued`, the
/// previous prefetch's (which it then becomes): blocks carried through one loop are loaded in
/// the same order before the loop and in it, so that the copy groups in flight at the top of
/// every iteration are in one order (tgpu-insert-barriers counts on it).
scf::ForOp prefetch(scf::ForOp loop, ArrayRef<BlockLoadOp> keys, Operation **issued) {
  if (keys.empty())
    return loop;
  BlockLoadOp first = keys.front();
  for (BlockLoadOp k : keys)
    if (k.getView() != first.getView() || k.getType() != first.getType() ||
        !sameValue(k.getBound(), first.getBound()) ||
        k.getIndices().size() != first.getIndices().size() ||
        !llvm::all_of(llvm::zip(k.getIndices(), first.getIndices()), [](auto pair) {
          return sameValue(std::get<0>(pair), std::get<1>(pair));
        }))
      return loop;
  Block *body = loop.getBody();
  // The block address must be computable before the loop and for the next iteration: from the
  // induction variable and values defined before the loop, by pure ops without regions.
  auto inLoop = [&](Operation *op) { return loop->isProperAncestor(op); };
  auto knownBeforeOrIv = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return !arg || v == loop.getInductionVar() || !loop->isAncestor(arg.getOwner()->getParentOp());
  };
  SetVector<Operation *> slice;
  BackwardSliceOptions opts;
  opts.filter = inLoop;
  opts.inclusive = true;
  opts.omitBlockArguments = true;
  for (Value v : first->getOperands()) {
    if (!knownBeforeOrIv(v))
      return loop; // an iter_arg: not known before the loop
    if (Operation *def = v.getDefiningOp(); def && inLoop(def))
      (void)getBackwardSlice(def, &slice, opts);
  }
  for (Operation *op : slice)
    if (!isPure(op) || op->getNumRegions() || !llvm::all_of(op->getOperands(), knownBeforeOrIv))
      return loop;
  SetVector<Operation *> ordered = topologicalSort(slice);
  auto loadAt = [&](OpBuilder &b, Value iv) -> Value {
    IRMapping map;
    map.map(loop.getInductionVar(), iv);
    for (Operation *op : ordered)
      b.clone(*op, map);
    return b.clone(*first, map)->getResult(0);
  };

  OpBuilder before(loop);
  Value k0 = loadAt(before, loop.getLowerBound());
  IRRewriter rewriter(loop.getContext());
  auto attrs = loop->getDiscardableAttrDictionary();
  FailureOr<LoopLikeOpInterface> grown =
      cast<LoopLikeOpInterface>(loop.getOperation())
          .replaceWithAdditionalYields(
              rewriter, ValueRange{k0}, /*replaceInitOperandUsesInLoop=*/false,
              [&](OpBuilder &, Location loc, ArrayRef<BlockArgument>) -> SmallVector<Value> {
                // The next block is requested first thing in the iteration.
                OpBuilder b = OpBuilder::atBlockBegin(body);
                if (*issued)
                  b.setInsertionPointAfter(*issued);
                Value next = arith::AddIOp::create(b, loc, loop.getInductionVar(), loop.getStep());
                Value block = loadAt(b, next);
                *issued = block.getDefiningOp();
                return {block};
              });
  if (failed(grown))
    return loop;
  auto newLoop = cast<scf::ForOp>(grown->getOperation());
  newLoop->setDiscardableAttrs(attrs);
  Value current = newLoop.getRegionIterArgs().back();
  for (BlockLoadOp k : keys) {
    k.getResult().replaceAllUsesWith(current);
    k.erase();
  }
  return newLoop;
}

struct TilePipelinePass : public tilefuse::impl::TilePipelineBase<TilePipelinePass> {
  void runOnOperation() override {
    // A warp-specialized kernel's producer runs ahead of its consumers through rings of stages
    // (tgpu-warp-specialize): nothing to prefetch or hoist here.
    FailureOr<TileConfig> config = tile::readModuleConfig(getOperation());
    if (failed(config))
      return signalPassFailure();
    if (config->warpSpecialize.value_or(false))
      return;
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) {
      if (loop->hasAttr(kKVLoopAttr) || loop->hasAttr(kQueryLoopAttr))
        loops.push_back(loop);
    });
    for (scf::ForOp loop : loops) {
      SmallVector<BlockLoadOp> loads;
      loop.getBody()->walk([&](BlockLoadOp load) { loads.push_back(load); });
      // Last first: loads that end up at the same place keep their order (keys before values).
      for (BlockLoadOp load : llvm::reverse(loads))
        hoist(load);
      if (loop->hasAttr(kKVLoopAttr)) {
        SmallVector<BlockLoadOp> keys;
        for (BlockLoadOp load : loads)
          if (isKeyLoad(load))
            keys.push_back(load);
        Operation *issued = nullptr;
        loop = prefetch(loop, keys, &issued);
        // prefetch_values: the value blocks carried too, requested after the next key block.
        if (config->prefetchValues.value_or(false)) {
          SmallVector<BlockLoadOp> values;
          loop.getBody()->walk([&](BlockLoadOp load) {
            if (isValueLoad(load))
              values.push_back(load);
          });
          prefetch(loop, values, &issued);
        }
        continue;
      }
      // Query loop: each query-side view's blocks, one ring each.
      llvm::MapVector<Value, SmallVector<BlockLoadOp>> byView;
      for (BlockLoadOp load : loads)
        if (isQuerySideLoad(load))
          byView[load.getView()].push_back(load);
      Operation *issued = nullptr;
      for (auto &[view, group] : byView)
        loop = prefetch(loop, group, &issued);
    }
  }
};

} // namespace
