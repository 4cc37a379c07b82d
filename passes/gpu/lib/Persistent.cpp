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
//       (b, h, r) = the t-th tile of the order below       (descending: a serpentine deal, below)
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
//   block into R - 1 - r, so ascending r here runs the longest tiles first. The list is dealt
//   in rounds of P = programs tiles, serpentine: program p takes place p of even rounds and
//   P - 1 - p of odd ones (t = k·P + p or k·P + P - 1 - p in its k-th iteration). Dealt in
//   the same direction every round (t = p, p + P, ...), program 0 took the longest tile of
//   every round: about 6% more work than program P - 1 at d128 16k causal (a round spans 8
//   row blocks, 15 rounds), where the persistent kernel measured 0.92x of the one-tile-per-CTA
//   grid, whose hardware scheduler deals greedily; dealt serpentine it gained 5-12% at 4k and
//   16k from d128 up (docs/perf.md, 2026-12-02). A head's row blocks kept together
//   instead measured 0.67x at d128 16k causal: with a stride of programs = 132 over 128 row
//   blocks, program 0 got the 16 longest blocks of its heads and program 64 the 16 shortest.
//
// - Paired (row_order=paired, descending rows): balance and L2 reuse together, statically. A
//   pair's row blocks i and R - 1 - i cost R + 1 key blocks together under a causal mask,
//   whatever i is, so the tiles are dealt two at a time, such a two to a program, in a list
//   that runs head by head: every program gets the same work, and the ~P programs in flight
//   hold the twos of about 2·P / R consecutive (batch, head) pairs, which read the same K and V
//   blocks at about the same time. Where R is odd, the odd pairs' sequences run backwards, so
//   the middle row blocks of two pairs make a two (R + 1 as well). Longest first level by level
//   across every pair (serpentine) has the 132 CTAs in flight on 132 different pairs: at d128
//   1k causal under ncu the K and V came from DRAM once per row block that read them (DRAM 71%
//   of peak; docs/perf.md, 2026-12-04). The balance needs the cost of row block r to be about
//   linear in r (a causal mask; under a window or a prefix the twos are nearer equal than the
//   row blocks, not equal), and a varlen grid's row blocks past a sequence's end are empty, so
//   the pairing does not balance those.
//
// Without the paired order, a static schedule has either balance (serpentine) or L2 reuse
// (head-major); a dynamic one (an atomic tile counter) can have both under any mask.
//
// - Varlen (a packed batch): the grid's row blocks are the longest sequence's, so a list of
//   them holds the empty row blocks of every shorter sequence (35-49% of the tiles at the
//   bench's mixes), which persistence measured 5-35% slower for. The list is each sequence's
//   own row blocks instead, head by head (loopOverSequences): a loop over the sequences carries
//   the count of tiles before each, and a tile loop per sequence takes the program's share.
//   Ascending or descending within each sequence (descending: tile-order-row-blocks counts the
//   body's row block from the longest sequence's last, so the list passes the index that
//   lands on the sequence's own); not paired.
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
#include "mlir/Dialect/MemRef/IR/MemRef.h"
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
    TileConfig options;
    if (!rowOrder.empty())
      if (llvm::Error error = options.set("row_order", rowOrder)) {
        kernel.emitError("tgpu-persistent: ") << llvm::toString(std::move(error));
        return signalPassFailure();
      }
    FailureOr<TileConfig> config = tile::configForPass(kernel, options);
    if (failed(config))
      return signalPassFailure();
    if (!config->persistent.value_or(false) && !force)
      return;
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
    TileOrder order = config->rowOrder == RowOrder::Paired ? TileOrder::Paired
                      : config->longestFirst()             ? TileOrder::Serpentine
                                                           : TileOrder::HeadMajor;
    if (kernel->hasAttr(tile::kVarlenAttr)) {
      // The tile list holds each sequence's own row blocks (not the longest one's), counted
      // from the queries' offsets, in ascending or descending order within each sequence. The
      // paired order balances twos of a grid's row blocks, which a sequence's are not.
      if (order == TileOrder::Paired) {
        kernel.emitError("persistent: a varlen kernel's tile list runs each sequence's row "
                         "blocks in ascending or descending order (row_order=ascending or "
                         "descending), not paired");
        return signalPassFailure();
      }
      if (!config->blockM) {
        kernel.emitError("persistent: a varlen kernel's tile list needs the row block (Br)");
        return signalPassFailure();
      }
      Value offsets = queryOffsets(kernel);
      if (!offsets) {
        kernel.emitError("persistent: a varlen kernel takes the queries' offsets "
                         "(memref<?xi32>) after its views");
        return signalPassFailure();
      }
      loopOverSequences(grids.front(), offsets, *config->blockM,
                        /*lastFirst=*/order == TileOrder::Serpentine);
      return;
    }
    loopOverTiles(grids.front(), order);
  }

  /// How the tile loop deals the tiles (the file comment has the why of each).
  enum class TileOrder { HeadMajor, Serpentine, Paired };

  /// A varlen kernel's cu_seqlens_q: its first memref<?xi32> argument, after the views
  /// (LaunchAbi.h's varlen form: the queries' offsets, then the keys').
  static Value queryOffsets(func::FuncOp kernel) {
    for (BlockArgument argument : kernel.getArguments()) {
      auto type = dyn_cast<MemRefType>(argument.getType());
      if (type && type.getRank() == 1 && type.getElementType().isInteger(32))
        return argument;
    }
    return Value();
  }

  /// A varlen kernel's tile list: sequence b's tiles are its H · ceil(len_b / Br) (head, row
  /// block) pairs, head by head, after the H · Σ_{c<b} ceil(len_c / Br) tiles of the sequences
  /// before it, so no tile lies past its sequence's end. Program p takes the tiles t = p, p + P,
  /// ...: a loop over the sequences carries the count of tiles before each, and within sequence
  /// b the tile loop runs its local tiles u ≡ p - before (mod P):
  ///
  ///   scf.for %b = 0 to B iter_args(%before = 0) {
  ///     %n = H · ceil(len_b / Br)
  ///     scf.for %u = (p - %before) mod P to %n step P {   tgpu.tile_loop
  ///       (h, r) = (u / ceil(len_b / Br), u mod ceil(len_b / Br));  body(b, h, r)
  ///     }
  ///     scf.yield %before + %n
  ///   }
  ///
  /// Every program walks the B sequences (two loads of the offsets each); the producer of
  /// tgpu-warp-specialize carries %before as the consumers do.
  ///
  /// `lastFirst` (row_order=descending): tile-order-row-blocks has made the body run row block
  /// R - 1 - x for the grid's x (R: the longest sequence's row blocks), so local tile u passes
  /// x = R - n + (u mod n) (n = ceil(len_b / Br)) and the sequence's row blocks run from n - 1
  /// down to 0: no sequence's longest tiles come last.
  void loopOverSequences(scf::ForallOp grid, Value offsets, int64_t blockM, bool lastFirst) {
    MLIRContext *ctx = grid.getContext();
    Location loc = grid.getLoc();
    OpBuilder b(grid);
    SmallVector<Value> bounds =
        getValueOrCreateConstantIndexOp(b, loc, grid.getMixedUpperBound());
    Value sequences = bounds[0], heads = bounds[1];
    auto [persistent, programs] = programGrid(b, grid);
    b.setInsertionPointToStart(persistent.getBody());
    Value program = persistent.getInductionVar(0);
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    Value rows = arith::ConstantIndexOp::create(b, loc, blockM);
    auto sequenceLoop = scf::ForOp::create(b, loc, c0, sequences, c1, ValueRange{c0});
    b.setInsertionPointToStart(sequenceLoop.getBody());
    Value sequence = sequenceLoop.getInductionVar();
    Value before = sequenceLoop.getRegionIterArgs()[0];
    auto offsetAt = [&](Value index) {
      Value raw = memref::LoadOp::create(b, loc, offsets, index);
      return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), raw).getResult();
    };
    Value start = offsetAt(sequence);
    Value end = offsetAt(arith::AddIOp::create(b, loc, sequence, c1));
    Value length = arith::SubIOp::create(b, loc, end, start);
    Value rowBlocks = arith::CeilDivUIOp::create(b, loc, length, rows);
    Value tiles = arith::MulIOp::create(b, loc, heads, rowBlocks);
    // (p - before) mod P, kept non-negative: (p + P - before mod P) mod P.
    Value behind = arith::RemUIOp::create(b, loc, before, programs);
    Value first = arith::RemUIOp::create(
        b, loc,
        arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, program, programs), behind),
        programs);
    auto tileLoop = scf::ForOp::create(b, loc, first, tiles, programs);
    tileLoop->setAttr(tgpu::kTileLoopAttr, UnitAttr::get(ctx));
    Value after = arith::AddIOp::create(b, loc, before, tiles);
    scf::YieldOp::create(b, loc, after);

    b.setInsertionPointToStart(tileLoop.getBody());
    Value u = tileLoop.getInductionVar();
    Value head = arith::DivUIOp::create(b, loc, u, rowBlocks);
    Value row = arith::RemUIOp::create(b, loc, u, rowBlocks);
    if (lastFirst) {
      Value gridRowBlocks = bounds[2];
      row = arith::AddIOp::create(
          b, loc, arith::SubIOp::create(b, loc, gridRowBlocks, rowBlocks), row);
    }

    moveBodyIntoTileLoop(grid, tileLoop, {sequence, head, row});
  }

  void loopOverTiles(scf::ForallOp grid, TileOrder order) {
    MLIRContext *ctx = grid.getContext();
    Location loc = grid.getLoc();
    OpBuilder b(grid);
    SmallVector<Value> bounds =
        getValueOrCreateConstantIndexOp(b, loc, grid.getMixedUpperBound());
    Value batches = bounds[0], heads = bounds[1], rowBlocks = bounds[2];
    auto [persistent, programs] = programGrid(b, grid);
    b.setInsertionPointToStart(persistent.getBody());
    Value tiles = arith::MulIOp::create(
        b, loc, arith::MulIOp::create(b, loc, batches, heads), rowBlocks);
    Value program = persistent.getInductionVar(0);
    Value row, head;
    scf::ForOp tileLoop;
    if (order == TileOrder::Paired) {
      // The list is every (batch, head)'s row blocks in turn, each pair's in the sequence
      // s(j) = R - 1 - j/2 for even j, j/2 for odd j (the body reverses it: row blocks 0, R - 1,
      // 1, R - 2, ...), read backwards for odd pairs where R is odd. Cut into twos, every two
      // is row blocks i and R - 1 - i, or for odd R a middle row block and the next pair's
      // middle one: R + 1 key blocks under a causal mask either way. Program p takes twos p,
      // p + P, ...: its k-th tile is t = 2·((k / 2)·P + p) + k mod 2. Its trip count: twice its
      // twos, less one where it has the list's last two and that holds one tile.
      Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
      Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
      Value c2 = arith::ConstantIndexOp::create(b, loc, 2);
      Value twos = arith::CeilDivUIOp::create(b, loc, tiles, c2);
      // ceil((twos - p) / P), zero where p >= twos (p < P, so the numerator stays >= 0).
      Value mine = arith::DivUIOp::create(
          b, loc,
          arith::SubIOp::create(
              b, loc,
              arith::AddIOp::create(b, loc, twos,
                                    arith::SubIOp::create(b, loc, programs, c1)),
              program),
          programs);
      Value oddTiles = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                             arith::RemUIOp::create(b, loc, tiles, c2), c0);
      Value lastOwner = arith::RemUIOp::create(
          b, loc, arith::SubIOp::create(b, loc, twos, c1), programs);
      Value ownsSingle = arith::AndIOp::create(
          b, loc, oddTiles,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, program, lastOwner));
      // (Sibling operands built one statement each: C++ leaves their order open.)
      Value both = arith::MulIOp::create(b, loc, mine, c2);
      Value less = arith::SelectOp::create(b, loc, ownsSingle, c1, c0);
      Value trips = arith::SubIOp::create(b, loc, both, less);
      // Whether odd pairs run backwards (R odd), and the last row block: the same every tile.
      Value oddRows = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ne, arith::RemUIOp::create(b, loc, rowBlocks, c2), c0);
      Value lastRow = arith::SubIOp::create(b, loc, rowBlocks, c1);
      tileLoop = scf::ForOp::create(b, loc, c0, trips, c1);
      b.setInsertionPointToStart(tileLoop.getBody());
      Value k = tileLoop.getInductionVar();
      Value two = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, k, c2), programs),
          program);
      Value first = arith::MulIOp::create(b, loc, two, c2);
      Value t = arith::AddIOp::create(b, loc, first, arith::RemUIOp::create(b, loc, k, c2));
      head = arith::DivUIOp::create(b, loc, t, rowBlocks);
      Value place = arith::RemUIOp::create(b, loc, t, rowBlocks);
      Value oddHead = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ne, arith::RemUIOp::create(b, loc, head, c2), c0);
      Value backwards = arith::AndIOp::create(b, loc, oddRows, oddHead);
      Value j = arith::SelectOp::create(b, loc, backwards,
                                        arith::SubIOp::create(b, loc, lastRow, place), place);
      Value half = arith::DivUIOp::create(b, loc, j, c2);
      Value evenPlace = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                              arith::RemUIOp::create(b, loc, j, c2), c0);
      row = arith::SelectOp::create(b, loc, evenPlace,
                                    arith::SubIOp::create(b, loc, lastRow, half), half);
    } else if (order == TileOrder::Serpentine) {
      // Round k of the list (tiles k·P to k·P + P - 1) goes to the programs in ascending order
      // when k is even and descending when odd, so the program that took a round's longest tile
      // takes the next round's shortest. Round by round every program's total stays within one
      // round's spread of the others'. Program p's trip count: the full rounds, and the last
      // partial round where p's place in it, p or P - 1 - p, is below the tiles left.
      Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
      Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
      Value c2 = arith::ConstantIndexOp::create(b, loc, 2);
      Value mirrored = arith::SubIOp::create(
          b, loc, arith::SubIOp::create(b, loc, programs, c1), program);
      Value rounds = arith::DivUIOp::create(b, loc, tiles, programs);
      Value left = arith::RemUIOp::create(b, loc, tiles, programs);
      Value lastEven = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                             arith::RemUIOp::create(b, loc, rounds, c2), c0);
      Value lastPlace = arith::SelectOp::create(b, loc, lastEven, program, mirrored);
      Value inLast = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, lastPlace, left);
      Value trips = arith::AddIOp::create(
          b, loc, rounds, arith::SelectOp::create(b, loc, inLast, c1, c0));
      tileLoop = scf::ForOp::create(b, loc, c0, trips, c1);
      b.setInsertionPointToStart(tileLoop.getBody());
      Value k = tileLoop.getInductionVar();
      Value even = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         arith::RemUIOp::create(b, loc, k, c2), c0);
      Value place = arith::SelectOp::create(b, loc, even, program, mirrored);
      Value t = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, k, programs), place);
      Value batchHeads = arith::MulIOp::create(b, loc, batches, heads);
      row = arith::DivUIOp::create(b, loc, t, batchHeads);
      head = arith::RemUIOp::create(b, loc, t, batchHeads);
    } else {
      tileLoop = scf::ForOp::create(b, loc, program, tiles, programs);
      b.setInsertionPointToStart(tileLoop.getBody());
      Value t = tileLoop.getInductionVar();
      head = arith::DivUIOp::create(b, loc, t, rowBlocks);
      row = arith::RemUIOp::create(b, loc, t, rowBlocks);
    }
    tileLoop->setAttr(tgpu::kTileLoopAttr, UnitAttr::get(ctx));
    Value batch = arith::DivUIOp::create(b, loc, head, heads);
    Value headInBatch = arith::RemUIOp::create(b, loc, head, heads);

    moveBodyIntoTileLoop(grid, tileLoop, {batch, headInBatch, row});
  }

  /// The persistent grid that replaces `grid` (built before it): one program per CTA the launch
  /// starts (gridDim.x), with `grid`'s attributes; and that program count.
  static std::pair<scf::ForallOp, Value> programGrid(OpBuilder &b, scf::ForallOp grid) {
    MLIRContext *ctx = grid.getContext();
    Location loc = grid.getLoc();
    Value programs = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
    auto persistent = scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{programs}, ValueRange{},
        ArrayAttr::get(ctx, {tile::GridDimAttr::get(ctx, tile::GridDim::Program)}));
    persistent->setDiscardableAttrs(grid->getDiscardableAttrDictionary());
    return {persistent, programs};
  }

  /// Moves the grid's body into the tile loop, its induction variables bound to the tile's
  /// `indices` (batch or sequence, head, row block), and erases the grid.
  static void moveBodyIntoTileLoop(scf::ForallOp grid, scf::ForOp tileLoop, ValueRange indices) {
    Block *body = grid.getBody();
    Block *loopBody = tileLoop.getBody();
    Operation *yield = loopBody->getTerminator();
    body->getTerminator()->erase();
    loopBody->getOperations().splice(yield->getIterator(), body->getOperations());
    for (auto [arg, value] : llvm::zip(grid.getInductionVars(), indices))
      arg.replaceAllUsesWith(value);
    grid.erase();
  }
};

} // namespace
