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
// row_order=grouped goes further on a forward one-tile-per-CTA grid: all three induction
// variables are mapped (groupPairs), so that the launch runs L2-sized groups of (batch, head)
// pairs one after another, each level by level from its last row block down. Head by head
// keeps K and V in L2 but leaves a late head's long row blocks to the launch's tail; every
// pair's level at once (the persistent order) is longest first but reads every head's K and V
// at the same time; a group is both, as long as its K and V fit.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/SmallPtrSet.h"
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

/// The first block the grid's program loads outside its key loop (a varlen program's under
/// its sequence's guard): the Q block, Br x D.
RankedTensorType queryBlockType(scf::ForallOp grid) {
  RankedTensorType found;
  grid.getBody()->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto loop = dyn_cast<scf::ForOp>(op); loop && loop->hasAttr(kKVLoopAttr))
      return WalkResult::skip();
    if (auto load = dyn_cast<BlockLoadOp>(op)) {
      found = dyn_cast<RankedTensorType>(load.getType());
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return found;
}

struct TileOrderRowBlocksPass
    : public tilefuse::impl::TileOrderRowBlocksBase<TileOrderRowBlocksPass> {
  using TileOrderRowBlocksBase::TileOrderRowBlocksBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    FailureOr<TileConfig> config = tile::configForPass(fn, TileConfig());
    if (failed(config))
      return signalPassFailure();
    bool grouped = forceGrouped || config->rowOrder == RowOrder::Grouped;
    if (!force && !grouped && !config->longestFirst())
      return;
    bool failed = false;
    fn.walk([&](scf::ForallOp grid) {
      auto phase = grid->getAttrOfType<StringAttr>(kBackwardPhaseAttr);
      if (phase && phase.getValue() != launch_abi::backwardPhaseName(
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
      // Grouped: a forward one-tile-per-CTA grid of (batch, head, row block) whose Q block
      // says what a pair's K and V weigh; the others (split, the backward's dQ grid) descend.
      if (grouped && !split && !phase) {
        RankedTensorType query = queryBlockType(grid);
        if (!query || query.getRank() != 2 || !query.hasStaticShape() ||
            !query.getElementType().isIntOrFloat()) {
          grid.emitError("tile-order-row-blocks: row_order=grouped sizes its groups by the "
                         "program's Q block, and this grid loads none outside its key loop");
          failed = true;
          return;
        }
        groupPairs(grid, query);
        return;
      }
      OpBuilder b = OpBuilder::atBlockBegin(grid.getBody());
      Location loc = grid.getLoc();
      OpFoldResult bound = grid.getMixedUpperBound()[rowBlockDim];
      Value rows = getValueOrCreateConstantIndexOp(b, loc, bound);
      Value one = arith::ConstantIndexOp::create(b, loc, 1);
      Value last = b.createOrFold<arith::SubIOp>(loc, rows, one);
      Value reversed = arith::SubIOp::create(b, loc, last, x);
      x.replaceAllUsesExcept(reversed, reversed.getDefiningOp());
    });
    if (failed)
      signalPassFailure();
  }

  /// row_order=grouped: the program at launch position L = x + R (h + H b) (the GPU starts
  /// CTAs in that order) takes, with the B·H pairs p = b' H + h' cut into groups of G,
  ///   g = L / (G R),  G' = min(G, B H - g G)  (the last group may be short),
  ///   w = L - g G R,  row block r = R - 1 - w / G',  pair p = g G + w % G',
  /// a bijection of the grid's programs: each group's pairs run level by level from their
  /// last row block down. G is the pairs whose K and V (about R·Br keys each, as many as
  /// their rows; a varlen grid's R is the longest sequence's) fit in `groupBytes`, so the
  /// CTAs in flight share one group's K and V in L2; a pair's GQA neighbours (adjacent heads)
  /// share a group.
  void groupPairs(scf::ForallOp grid, RankedTensorType query) {
    OpBuilder b = OpBuilder::atBlockBegin(grid.getBody());
    Location loc = grid.getLoc();
    auto bound = [&](unsigned dim) {
      return getValueOrCreateConstantIndexOp(b, loc, grid.getMixedUpperBound()[dim]);
    };
    auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v).getResult(); };
    Value batches = bound(0), heads = bound(1), rows = bound(2);
    Value bi = grid.getInductionVar(0), hi = grid.getInductionVar(1),
          xi = grid.getInductionVar(2);
    SmallPtrSet<Operation *, 16> mapping;
    auto note = [&](Value v) {
      if (Operation *op = v.getDefiningOp())
        mapping.insert(op);
      return v;
    };
    auto mul = [&](Value l, Value r) { return note(arith::MulIOp::create(b, loc, l, r)); };
    auto add = [&](Value l, Value r) { return note(arith::AddIOp::create(b, loc, l, r)); };
    auto sub = [&](Value l, Value r) { return note(arith::SubIOp::create(b, loc, l, r)); };
    auto div = [&](Value l, Value r) { return note(arith::DivUIOp::create(b, loc, l, r)); };
    auto rem = [&](Value l, Value r) { return note(arith::RemUIOp::create(b, loc, l, r)); };
    auto min = [&](Value l, Value r) { return note(arith::MinUIOp::create(b, loc, l, r)); };
    auto max = [&](Value l, Value r) { return note(arith::MaxUIOp::create(b, loc, l, r)); };

    int64_t blockRows = query.getDimSize(0), headDim = query.getDimSize(1);
    int64_t elementBytes = std::max<int64_t>(1, query.getElementTypeBitWidth() / 8);
    // K and V of a pair: R·Br rows of D elements each. One op a statement, so that the IR's
    // order is the source's (C++ leaves the order of a call's arguments open).
    Value one = c(1);
    Value pairBytes = mul(rows, c(2 * blockRows * headDim * elementBytes));
    Value pairs = mul(batches, heads);
    Value fit = div(c(groupBytes), max(pairBytes, one));
    Value group = min(max(fit, one), max(pairs, one));
    Value pairIndex = add(hi, mul(heads, bi));
    Value position = add(xi, mul(rows, pairIndex));
    Value groupTiles = mul(group, rows);
    Value index = div(position, groupTiles);
    Value first = mul(index, group);
    Value size = min(group, sub(pairs, first));
    Value within = sub(position, mul(index, groupTiles));
    Value last = sub(rows, one);
    Value rowBlock = sub(last, div(within, size));
    Value pair = add(first, rem(within, size));
    Value batch = div(pair, heads);
    Value head = rem(pair, heads);
    std::pair<Value, Value> mapped[] = {{bi, batch}, {hi, head}, {xi, rowBlock}};
    for (auto [iv, value] : mapped)
      iv.replaceUsesWithIf(value, [&](OpOperand &use) {
        return !mapping.contains(use.getOwner());
      });
  }
};

} // namespace
