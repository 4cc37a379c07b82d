//===- TileOrderRowBlocks.cpp - the forward grid's row blocks, last first --===//
//
// The GPU starts a grid's CTAs in block-index order, x fastest: each (batch, head)'s row blocks
// 0, 1, ..., R - 1 in turn. Under a causal mask row block r has about r + 1 key blocks, so the
// longest programs of the last heads start last and run on alone at the end of the launch.
// With row_order=descending the program of row-block index x takes row block R - 1 - x:
//
//   scf.forall (%b, %h, %x) in (B, H, R) { body(%x) }
//     ->
//   scf.forall (%b, %h, %x) in (B, H, R) { %r = R - 1 - %x; body(%r) }
//
// Every use of the induction variable is rewritten, so the block loads, the pruned key range,
// split-KV's arrival counters and the stores all agree on the row block. Which row blocks a
// head's programs run, and that they stay adjacent (K and V stay in L2), is unchanged; only
// their order within the head reverses. A split grid (rank 4) reverses its row-block dimension
// the same way. So does the backward's query_gradients grid, whose row block r runs r + 1 key
// blocks under a causal mask in the ordered dQ loop; its key_gradients grid is left alone (key
// block j runs the query blocks from j on: ascending is already longest first), and so is the
// preprocessing (every program the same work). In a persistent kernel tgpu-persistent then
// runs its tile loop's row blocks in ascending index order across heads, so with the reversal
// here the longest tiles come first.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILEORDERROWBLOCKS
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

struct TileOrderRowBlocksPass
    : public tilefuse::impl::TileOrderRowBlocksBase<TileOrderRowBlocksPass> {
  using TileOrderRowBlocksBase::TileOrderRowBlocksBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    FailureOr<TileConfig> config = tile::configForPass(fn, TileConfig());
    if (failed(config))
      return signalPassFailure();
    if (!force && !config->descendingRows.value_or(false))
      return;
    fn.walk([&](scf::ForallOp grid) {
      if (auto phase = grid->getAttrOfType<StringAttr>(kBackwardPhaseAttr);
          phase && phase.getValue() != launch_abi::backwardPhaseName(
                                           launch_abi::BackwardPhase::QueryGradients))
        return;
      bool split = grid.getRank() == 4;
      if ((grid.getRank() != 3 && !split) ||
          grid.getMappingAttr() != gridMapping(fn.getContext(), split))
        return;
      constexpr unsigned rowBlockDim = 2;
      Value x = grid.getInductionVar(rowBlockDim);
      if (x.use_empty())
        return;
      OpBuilder b = OpBuilder::atBlockBegin(grid.getBody());
      Location loc = grid.getLoc();
      OpFoldResult bound = grid.getMixedUpperBound()[rowBlockDim];
      Value rows = getValueOrCreateConstantIndexOp(b, loc, bound);
      Value one = arith::ConstantIndexOp::create(b, loc, 1);
      Value last = b.createOrFold<arith::SubIOp>(loc, rows, one);
      Value reversed = arith::SubIOp::create(b, loc, last, x);
      x.replaceAllUsesExcept(reversed, reversed.getDefiningOp());
    });
  }
};

} // namespace
