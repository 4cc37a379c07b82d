//===- Pipeline.cpp - software pipelining of a loop's ring copies ---------===//
//
// tile-to-tgpu turns the key block that tile-pipeline loads one iteration ahead (with
// prefetch_values the value block too) into a copy into a two-stage ring, carried through the
// loop with its copy group's token. This pass deepens that pipeline to `stages` stages: the
// copies run stages - 1 blocks ahead, every carried block's ring alike.
//
//   before the loop   the copy of the first block (there), then copies of the next
//                     stages - 2 blocks (clones of the loop's copy for the first iterations)
//   in the loop       iteration j reads the oldest carried block (unchanged) and copies
//                     block j + stages - 1 (the loop's copy with its induction variable
//                     advanced by stages - 2); the carried (buffer, token) pairs shift by one
//   the ring          stages buffers, the stage of block b being b % stages
//
// Only the copy moves: the reads, their waits and the blocks' contents are the same; the wait
// counts and barriers come from tgpu-insert-barriers, which runs after this pass. Blocks past
// the loop's end are copied too (rows past the bound are zero-filled, as for the last block).
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUOps.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUPIPELINE
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

/// A block carried by a loop in a ring stage, with its copy group: the iter_args of the block
/// and of its token, and the copy chain in the body that fills the next block.
struct CarriedRingBlock {
  unsigned bufferArg, tokenArg;
  AllocOp ring;
  /// The body's ops that compute the next block's copy, in order, ending with the stage, the
  /// copy and the group (the backward slice of the group within the body).
  SetVector<Operation *> chain;
  StageOp stage;
  nvgpu::DeviceAsyncCreateGroupOp group;
};

/// The carried ring blocks of `loop`, or an empty list when it has none this pass handles.
SmallVector<CarriedRingBlock> carriedRingBlocks(scf::ForOp loop) {
  SmallVector<CarriedRingBlock> found;
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  for (auto [i, arg] : llvm::enumerate(loop.getRegionIterArgs())) {
    if (!isa<BufferType>(arg.getType()))
      continue;
    auto stage = yield.getOperand(i).getDefiningOp<StageOp>();
    if (!stage || stage->getParentOp() != loop)
      continue;
    auto ring = stage.getRing().getDefiningOp<AllocOp>();
    if (!ring)
      continue;
    // The token carried beside it: the yield of the group of the copy into the stage.
    for (auto [k, yielded] : llvm::enumerate(yield.getOperands())) {
      auto group = yielded.getDefiningOp<nvgpu::DeviceAsyncCreateGroupOp>();
      if (!group || group.getInputTokens().size() != 1)
        continue;
      auto copy = group.getInputTokens()[0].getDefiningOp<AsyncCopyOp>();
      if (!copy || copy.getBuffer() != stage.getResult())
        continue;
      CarriedRingBlock block{(unsigned)i, (unsigned)k, ring, {}, stage, group};
      BackwardSliceOptions options;
      options.inclusive = true;
      options.filter = [&](Operation *op) { return op->getParentOp() == loop; };
      if (failed(getBackwardSlice(group.getOperation(), &block.chain, options)))
        continue;
      found.push_back(block);
    }
  }
  return found;
}

struct TGPUPipeline : public tilefuse::tgpu::impl::TGPUPipelineBase<TGPUPipeline> {
  using Base::Base;

  void runOnOperation() override {
    if (stages < 2) {
      getOperation().emitError() << "tgpu-pipeline: stages must be 2 or more, not "
                                 << stages.getValue();
      return signalPassFailure();
    }
    // The module's tile.config wins over the option (tilefuse/dialect/KernelConfig.h).
    TileConfig options;
    options.stages = stages;
    FailureOr<TileConfig> config = tile::configForPass(getOperation(), options);
    if (failed(config))
      return signalPassFailure();
    depth = config->stages.value_or(stages);
    if (depth < 2) {
      getOperation().emitError() << "tgpu-pipeline: stages must be 2 or more, not " << depth;
      return signalPassFailure();
    }
    if (depth == 2)
      return; // what tile-to-tgpu built: one block ahead
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      if (failed(pipeline(loop)))
        return signalPassFailure();
  }

  /// The ring's stages: stages - 1 blocks in flight ahead of the one read.
  int64_t depth = 2;

  LogicalResult pipeline(scf::ForOp loop) {
    SmallVector<CarriedRingBlock> blocks = carriedRingBlocks(loop);
    if (blocks.empty())
      return success();
    // Each carried block (the key block; with prefetch_values the value block too) in a ring
    // of its own, in the order the body issues their copies: the prologue and the loop copy
    // them in that order, so the groups in flight at the top of every iteration are in one
    // order (tgpu-insert-barriers counts on it).
    llvm::sort(blocks, [](const CarriedRingBlock &a, const CarriedRingBlock &b) {
      return a.group->isBeforeInBlock(b.group);
    });
    for (size_t i = 0; i < blocks.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (blocks[i].ring == blocks[j].ring)
          return loop.emitError("tgpu-pipeline: a loop carrying two blocks in one ring");
    IRRewriter rewriter(loop.getContext());
    Location loc = loop.getLoc();
    Value iv = loop.getInductionVar();
    size_t count = blocks.size();

    // A block's chain computes its block iv + 1's copy; cloned with iv -> iv + shift it
    // copies block iv + 1 + shift.
    auto cloneChain = [&](CarriedRingBlock &carried,
                          Value shiftedIv) -> std::pair<Value, Value> {
      IRMapping map;
      map.map(iv, shiftedIv);
      Operation *last = nullptr;
      for (Operation *op : carried.chain)
        last = rewriter.clone(*op, map);
      return {map.lookup(carried.stage.getResult()), last->getResult(0)};
    };
    auto step = [&](int64_t k) -> Value {
      Value c = arith::ConstantIndexOp::create(rewriter, loc, k);
      return arith::MulIOp::create(rewriter, loc, loop.getStep(), c);
    };

    // Prologue: blocks lb + 1 ... lb + depth - 2 (the block lb is the loop's init), each
    // block's copies in the body's order: the pair of block b at distance m (m = 1 ..
    // depth - 2) is prologue pair (m - 1) * count + b.
    rewriter.setInsertionPoint(loop);
    SmallVector<Value> prologue;
    for (int64_t k = 0; k + 2 < depth; ++k) {
      Value at = arith::AddIOp::create(rewriter, loc, loop.getLowerBound(), step(k));
      for (CarriedRingBlock &carried : blocks) {
        auto [buffer, token] = cloneChain(carried, at);
        prologue.append({buffer, token});
      }
    }

    // In the loop: each block's copy runs depth - 2 iterations further ahead, where its chain
    // ends.
    SmallVector<std::pair<Value, Value>> newest;
    for (CarriedRingBlock &carried : blocks) {
      rewriter.setInsertionPointAfter(carried.chain.back());
      Value ahead = arith::AddIOp::create(rewriter, loc, iv, step(depth - 2));
      newest.push_back(cloneChain(carried, ahead));
    }

    // Carry the blocks in flight: a block's read pair (the original iter_args) takes its
    // distance-1 pair's value next, the pair at distance m that at m + 1, and the farthest the
    // newest copy.
    FailureOr<LoopLikeOpInterface> widened = loop.replaceWithAdditionalYields(
        rewriter, prologue, /*replaceInitOperandUsesInLoop=*/false,
        [&](OpBuilder &, Location, ArrayRef<BlockArgument> added) {
          SmallVector<Value> yields;
          for (size_t m = 2 * count; m < added.size(); m += 2)
            yields.append({added[m], added[m + 1]});
          for (auto [buffer, token] : newest)
            yields.append({buffer, token});
          return yields;
        });
    if (failed(widened))
      return loop.emitError("tgpu-pipeline: cannot add the carried blocks to the loop");
    auto newLoop = cast<scf::ForOp>(widened->getOperation());
    auto yield = cast<scf::YieldOp>(newLoop.getBody()->getTerminator());
    unsigned firstAdded = newLoop.getNumRegionIterArgs() - prologue.size();
    for (auto [b, carried] : llvm::enumerate(blocks)) {
      yield.setOperand(carried.bufferArg, newLoop.getRegionIterArgs()[firstAdded + 2 * b]);
      yield.setOperand(carried.tokenArg, newLoop.getRegionIterArgs()[firstAdded + 2 * b + 1]);
    }

    // The old copy chains are dead now (their stages and groups were only yielded); chains
    // may share ops (the next block's index), so they go last op first over all of them.
    SetVector<Operation *> old;
    for (CarriedRingBlock &carried : blocks)
      old.insert(carried.chain.begin(), carried.chain.end());
    SmallVector<Operation *> dead(old.begin(), old.end());
    llvm::sort(dead, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    for (Operation *op : llvm::reverse(dead))
      if (op->use_empty())
        rewriter.eraseOp(op);

    // Each ring: `depth` stages, the stage of block b being b % depth.
    for (CarriedRingBlock &carried : blocks) {
      auto ringType = cast<RingType>(carried.ring.getType());
      auto deeper = RingType::get(ringType.getContext(), depth, ringType.getBuffer());
      carried.ring.getResult().setType(deeper);
      for (Operation *user : carried.ring->getUsers()) {
        auto stage = dyn_cast<StageOp>(user);
        if (!stage)
          continue;
        auto rem = stage.getIndex().getDefiningOp<arith::RemUIOp>();
        if (!rem)
          return stage.emitOpError("tgpu-pipeline: a stage index that is not block % stages");
        rewriter.setInsertionPoint(rem);
        rem.getRhsMutable().assign(
            arith::ConstantIndexOp::create(rewriter, rem.getLoc(), depth).getResult());
      }
    }
    return success();
  }
};

} // namespace
