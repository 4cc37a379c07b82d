//===- Persistent.cpp - persistent programs looping over the kernel's tiles ===//
//
// FlashAttention-3's persistent kernel with a static tile scheduler, on tgpu IR: the program
// grid (batch, head, row block) becomes a one-dimensional grid of as many programs as the
// launcher starts (LaunchAbi.h, "Persistent kernels": the CTAs the GPU holds at once), and each
// program loops over the tiles t = program, program + programs, ...:
//
//   scf.forall (%b, %h, %r) in (B, H, R) {body}
//     ->
//   %programs = gpu.grid_dim x
//   scf.forall (%p) in (%programs) {                       mapping [#tile.grid<program>]
//     scf.for %t = %p to B·H·R step %programs {           tgpu.tile_loop
//       (b, h, r) = the t-th tile of the order below
//       body
//     }
//   }
//
// The order is the kernel's row order (TileConfig row_order, in the IR's tile.config):
//
// - Unset or ascending, where every row block is the same work (no causal-like mask), a head's
//   row blocks stay together: bh = t / R, r = t mod R, b = bh / H, h = bh mod H. The tiles
//   running at once share their heads' K and V in L2, as the one-tile-per-CTA grid's do.
//   Longest first across all heads measured 0.89x at d128 1k full, heads together +4% (tenth
//   session), where every head's K and V read at once took DRAM from 38% to 64% of its peak.
// - Descending (the default of causal-like masks, whose row block r has about r + 1 key blocks):
//   longest first, every (batch, head)'s last row block before any second-to-last one:
//   r = t / (B·H), bh = t mod (B·H). tile-order-row-blocks has already turned the body's row
//   block into R - 1 - r, so ascending r here runs the longest tiles first. Each program takes
//   every programs-th tile of that list (a static longest-processing-time schedule: the
//   programs' totals differ by about one tile's work). A head's row blocks kept together
//   instead measured 0.67x at d128 16k causal: with a stride of programs = 132 over 128 row
//   blocks, program 0 got the 16 longest blocks of its heads and program 64 the 16 shortest.
//
// A static schedule cannot have both balance and L2 reuse under a causal mask; a dynamic one (an
// atomic tile counter) can.
//
// Run before tgpu-warp-specialize, the tile loop is a loop holding the copies like the key loop:
// the producer clones it and the fill counters run through it, so a CTA's rings, barriers and
// register split carry on from tile to tile, and the producer loads the next tile's keys while
// the consumers store this tile's output.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUPERSISTENT
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;

namespace {

struct TGPUPersistent : public tilefuse::tgpu::impl::TGPUPersistentBase<TGPUPersistent> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    FailureOr<TileConfig> config = tile::configForPass(kernel, TileConfig());
    if (failed(config))
      return signalPassFailure();
    if (!config->persistent.value_or(false) && !force)
      return;
    // A varlen grid is (sequences, heads, row blocks of the longest sequence): a tile past its
    // sequence's end runs no key block and stores nothing (its bounds say so), which in the
    // tile loop costs a few instructions where the one-tile-per-CTA grid launches a CTA.
    if (kernel->hasAttr(tile::kPagedKVAttr) || kernel->hasAttr(tile::kSplitKVAttr)) {
      kernel.emitError("persistent: paged and split-KV kernels are not persistent yet "
                       "(use persistent=false)");
      return signalPassFailure();
    }
    auto grids = llvm::to_vector(kernel.getBody().front().getOps<scf::ForallOp>());
    if (grids.size() != 1 || grids.front().getRank() != 3 ||
        grids.front().getMappingAttr() != tile::gridMapping(kernel.getContext(), false) ||
        !grids.front().getOutputs().empty()) {
      kernel.emitError("persistent: expects one program grid, an scf.forall over (batch, head, "
                       "row block)");
      return signalPassFailure();
    }
    loopOverTiles(grids.front(), config->descendingRows.value_or(false));
  }

  void loopOverTiles(scf::ForallOp grid, bool longestFirst) {
    MLIRContext *ctx = grid.getContext();
    Location loc = grid.getLoc();
    OpBuilder b(grid);
    SmallVector<Value> bounds =
        getValueOrCreateConstantIndexOp(b, loc, grid.getMixedUpperBound());
    Value batches = bounds[0], heads = bounds[1], rowBlocks = bounds[2];
    Value programs = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
    auto persistent = scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{programs}, ValueRange{},
        ArrayAttr::get(ctx, {tile::GridDimAttr::get(ctx, tile::GridDim::Program)}));
    persistent->setDiscardableAttrs(grid->getDiscardableAttrDictionary());

    b.setInsertionPointToStart(persistent.getBody());
    Value tiles = arith::MulIOp::create(
        b, loc, arith::MulIOp::create(b, loc, batches, heads), rowBlocks);
    Value program = persistent.getInductionVar(0);
    auto tileLoop = scf::ForOp::create(b, loc, program, tiles, programs);
    tileLoop->setAttr(kTileLoopAttr, UnitAttr::get(ctx));

    b.setInsertionPointToStart(tileLoop.getBody());
    Value t = tileLoop.getInductionVar();
    Value row, head;
    if (longestFirst) {
      Value batchHeads = arith::MulIOp::create(b, loc, batches, heads);
      row = arith::DivUIOp::create(b, loc, t, batchHeads);
      head = arith::RemUIOp::create(b, loc, t, batchHeads);
    } else {
      head = arith::DivUIOp::create(b, loc, t, rowBlocks);
      row = arith::RemUIOp::create(b, loc, t, rowBlocks);
    }
    Value batch = arith::DivUIOp::create(b, loc, head, heads);
    Value headInBatch = arith::RemUIOp::create(b, loc, head, heads);

    // The body moves into the tile loop with its indices bound to the tile's.
    Block *body = grid.getBody();
    Block *loopBody = tileLoop.getBody();
    Operation *yield = loopBody->getTerminator();
    body->getTerminator()->erase();
    loopBody->getOperations().splice(yield->getIterator(), body->getOperations());
    for (auto [arg, value] : llvm::zip(grid.getInductionVars(),
                                       ValueRange{batch, headInBatch, row}))
      arg.replaceAllUsesWith(value);
    grid.erase();
  }

  static constexpr llvm::StringLiteral kTileLoopAttr = "tgpu.tile_loop";
};

} // namespace
