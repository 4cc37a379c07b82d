//===- TilePipeline.cpp - issue key/value block loads early ---------------===//
//
// Level 4 -> level 5 (scheduling). Today: one stage, the value block requested with the key
// block. Multi-stage rings (the next key block in flight during this iteration's P x V) extend
// this pass; the lowering already waits for each load at its first use.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

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

struct TilePipelinePass : public tilefuse::impl::TilePipelineBase<TilePipelinePass> {
  void runOnOperation() override {
    getOperation().walk([](scf::ForOp loop) {
      if (!loop->hasAttr(kKVLoopAttr))
        return;
      SmallVector<BlockLoadOp> loads;
      loop.getBody()->walk([&](BlockLoadOp load) { loads.push_back(load); });
      // Last first: loads that end up at the same place keep their order (keys before values).
      for (BlockLoadOp load : llvm::reverse(loads))
        hoist(load);
    });
  }
};

} // namespace
