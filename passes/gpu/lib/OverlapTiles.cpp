//===- OverlapTiles.cpp - a tile's last P·V and epilogue in the next tile ===//
//
// The tile boundary of a persistent consumer whose key loop tgpu-overlap-softmax rotated. After
// the key loop a tile runs its last pending P·V (the flush), releases Q, and runs its epilogue
// (O · 1/l, the stores of O and the LSE); the next tile's first key block then has nothing
// pending, so its Q·Kᵀ is waited for alone and its softmax runs beside no GEMM. The tensor cores
// idle through all of it: the flush's wait, the epilogue, the first Q·Kᵀ wait and the first
// softmax (~9% of a d128 tile of 6 key blocks; docs/perf.md, twenty-sixth session).
//
// Here the first key block of each tile is peeled off the key loop, and the previous tile's
// flush and epilogue move into it, the previous P·V beside this tile's first softmax:
//
//   before   tile t:   [key loop: block 0 unrotated, blocks 1.. rotated]
//                      O_t += P V (flush); wait(0); release V; release Q_t; epilogue_t
//            tile t+1: wait K_0; S_0 = Q K_0ᵀ; wait(0); softmax_0; ...
//   after    tile t:   [key loop from block 1, rotated]; release Q_t
//                      (carried: O_t, l_t, m_t, P_t, alpha_t, t's coordinates)
//            tile t+1: [O_t' = O_t·alpha_t; wait V]; wait K_0; S_0 = Q K_0ᵀ;
//                      [O_t = O_t' + P_t V]       (the previous tile's P·V, not waited for)
//                      wait(1); release K_0; softmax_0;
//                      wait(0); release V; epilogue_t;  pending := (P_0, alpha_0)
//                      [key loop from block 1, rotated]; release Q_{t+1}
//            after the tile loop: the last tile's flush and epilogue
//
// Every first-block body (one per mask branch) branches once, at its top, on whether the
// previous tile left a P·V pending: the rotated variant above, or the body as it was followed by
// the previous tile's epilogue where one awaits (a tile with no block of work); so no wgmma
// result in flight crosses a branch. Where this tile's first block does not run (an empty range,
// or a block its mask skips), the previous tile's flush and epilogue run in that branch instead,
// so every path through the peeled block consumes the previous tile's state (none of it stays
// live past the block, and its P·V accumulates in place). The V ring's counter is the one the tile loop carries, so V stages are
// still waited for, read and released in fill order; the producer is unchanged. The Q release
// stays in its tile, right after its key loop: the next tile's first block reads the other Q
// stage (tgpu-warp-specialize gives Q two under overlap_tiles) and must not wait for it behind
// a flush.
//
// The pieces are read from the IR tgpu-overlap-softmax leaves: the flush is the scf.if on the
// key loop's pending flag right after it; its then block holds the P·V (what goes before its
// wait is issued, the rest completes it). The Q release is the mbarrier arrive after the key
// loop that reads none of its results (none where Q is in registers), with the wait for Q's
// fill right before it; the epilogue is every
// other op after the flush. What the
// flush and the epilogue read from the key loop (its results but the value counter) and from
// the tile's body before it (the coordinates) is what the tile loop carries for the previous
// tile.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "OverlapUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUHints.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"
#include "llvm/ADT/SetVector.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUOVERLAPTILES
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;
using tilefuse::tgpu::overlap::cloneAll;
using tilefuse::tgpu::overlap::placeholder;

namespace {

struct TGPUOverlapTiles : public tilefuse::tgpu::impl::TGPUOverlapTilesBase<TGPUOverlapTiles> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    FailureOr<TileConfig> config = tile::configForPass(kernel, TileConfig());
    if (failed(config))
      return signalPassFailure();
    if (!config->overlapTiles.value_or(false) && !force)
      return;
    // The tile loops of the consumers (the first partition, in tgpu-warp-specialize's order).
    SmallVector<scf::ForOp> tileLoops;
    kernel.walk([&](WarpSpecializeOp roles) {
      roles->getRegion(0).walk([&](scf::ForOp loop) {
        if (loop->hasAttr(kTileLoopAttr))
          tileLoops.push_back(loop);
      });
    });
    if (tileLoops.empty()) {
      kernel.emitOpError("tgpu-overlap-tiles: no tile loop (tgpu.tile_loop) in the consumers of "
                         "a tgpu.warp_specialize: overlap_tiles=true needs persistent=true and "
                         "warp_specialize=true");
      return signalPassFailure();
    }
    for (scf::ForOp loop : tileLoops) {
      // A varlen kernel's tile loops run inside its loop over the sequences (tgpu-persistent):
      // the boundary between two sequences' tiles would need the rotation across that loop,
      // which this pass does not do.
      if (loop->getParentOfType<scf::ForOp>()) {
        loop.emitOpError("tgpu-overlap-tiles: the tile loop runs inside another loop (a varlen "
                         "kernel's loop over its sequences); overlapped tile boundaries need "
                         "one tile loop over every tile (use overlap_tiles=false)");
        return signalPassFailure();
      }
      if (failed(analyze(loop)) || failed(rewrite()))
        return signalPassFailure();
    }
  }

  //===--------------------------------------------------------------------===//
  // Reading the tile loop's body
  //===--------------------------------------------------------------------===//

  scf::ForOp tiles, keys;
  /// The last pending P·V after the key loop, and its parts.
  scf::IfOp flush;
  WgmmaOp product;
  WgmmaWaitOp productWait;
  SmallVector<Operation *> flushFeed, flushComplete;
  /// The Q stage's release, where Q is in shared memory (none with Q in registers).
  Operation *queryRelease = nullptr;
  /// The tile's epilogue, in program order.
  SmallVector<Operation *> epilogue;
  /// Key loop positions: the pending flag, the output accumulator and the value counter; and
  /// the flush's result positions of the latter two.
  unsigned hasAt = 0, accAt = 0, counterAt = 0, flushAccAt = 0, flushCounterAt = 0;
  /// The tile loop's yield position of the value counter.
  unsigned tileCounterAt = 0;
  /// What the flush and the epilogue read: key loop result positions (all but the value
  /// counter), and values of the tile's body (by index: block arguments of the tile loop's
  /// body are renumbered when it is widened).
  SmallVector<unsigned> keyState;
  SmallVector<Value> tileState;
  SmallVector<std::optional<unsigned>> tileStateArg;
  /// The key body's branches on the pending flag (tgpu-overlap-softmax's two variants).
  SmallVector<scf::IfOp> pendingBranches;

  InFlightDiagnostic refuse(Operation *op, const Twine &why) {
    InFlightDiagnostic diag =
        op->emitOpError("cannot overlap the tile boundary (tgpu-overlap-tiles): ");
    diag << why << " (use overlap_tiles=false)";
    return diag;
  }

  /// Whether `v` is defined inside `op` (by an op in its regions, or as a block argument).
  static bool definedIn(Value v, Operation *op) {
    if (Operation *def = v.getDefiningOp())
      return op->isAncestor(def);
    return op->isAncestor(cast<BlockArgument>(v).getOwner()->getParentOp());
  }

  LogicalResult analyze(scf::ForOp tileLoop) {
    tiles = tileLoop;
    keys = {};
    flush = {};
    product = {};
    productWait = {};
    queryRelease = nullptr;
    flushFeed.clear();
    flushComplete.clear();
    epilogue.clear();
    keyState.clear();
    tileState.clear();
    tileStateArg.clear();
    pendingBranches.clear();
    Block *body = tiles.getBody();
    for (auto loop : body->getOps<scf::ForOp>()) {
      if (!loop->hasAttr(tile::kKVLoopAttr))
        continue;
      if (keys)
        return refuse(loop, "the tile loop holds more than one key loop");
      keys = loop;
    }
    if (!keys)
      return refuse(tiles, "no key loop (tile.kv_loop) directly in the tile loop's body");
    if (keys.getNumRegionIterArgs() != keys.getNumResults())
      return refuse(keys, "the key loop's results are not its iter_args");

    // The flush: the branch on the key loop's pending flag right after it.
    flush = dyn_cast_or_null<scf::IfOp>(keys->getNextNode());
    auto flag = flush ? dyn_cast<OpResult>(flush.getCondition()) : OpResult();
    if (!flag || flag.getOwner() != keys.getOperation())
      return refuse(keys, "no branch on the key loop's pending flag follows it (the key loop "
                          "is not rotated: overlap_tiles=true needs softmax_overlap=true)");
    hasAt = flag.getResultNumber();
    if (!matchPattern(keys.getInitArgs()[hasAt], m_Zero()))
      return refuse(keys, "the key loop's pending flag does not start false");
    if (flush.getElseRegion().empty() || flush.getNumResults() != 2)
      return refuse(flush, "the flush does not yield the output and the value counter");
    for (Operation &op : flush.getThenRegion().front()) {
      if (op.getNumRegions())
        return refuse(&op, "the flush holds a region");
      if (auto mma = dyn_cast<WgmmaOp>(op)) {
        if (product || !mma.getAcc() || mma.getTransposeRhs())
          return refuse(&op, "the flush holds a wgmma other than one P·V");
        product = mma;
      }
    }
    if (!product)
      return refuse(flush, "the flush holds no P·V wgmma");
    for (Operation *user : product.getResult().getUsers())
      if (auto wait = dyn_cast<WgmmaWaitOp>(user);
          wait && wait->getBlock() == product->getBlock() && !productWait)
        productWait = wait;
    if (!productWait || productWait.getPending() != 0)
      return refuse(product, "the flush's P·V is not completed by a wgmma_wait pending 0");
    auto thenYield = cast<scf::YieldOp>(flush.thenBlock()->getTerminator());
    auto elseYield = cast<scf::YieldOp>(flush.elseBlock()->getTerminator());
    if (&flush.elseBlock()->front() != elseYield.getOperation())
      return refuse(flush, "the flush's else branch does more than pass the key loop's values on");
    std::optional<unsigned> accFound, counterFound;
    for (unsigned i = 0; i < 2; ++i) {
      auto passed = dyn_cast<OpResult>(elseYield.getOperand(i));
      if (!passed || passed.getOwner() != keys.getOperation())
        return refuse(flush, "the flush's else branch does not yield the key loop's results");
      if (thenYield.getOperand(i) == productWait.getResult(0)) {
        accFound = i;
        accAt = passed.getResultNumber();
      } else {
        counterFound = i;
        counterAt = passed.getResultNumber();
      }
    }
    if (!accFound || !counterFound)
      return refuse(flush, "the flush does not yield its P·V's output and a value counter");
    flushAccAt = *accFound;
    flushCounterAt = *counterFound;
    for (Operation &op : flush.thenBlock()->without_terminator()) {
      if (&op == product.getOperation())
        continue;
      (productWait->isBeforeInBlock(&op) || &op == productWait.getOperation() ? flushComplete
                                                                              : flushFeed)
          .push_back(&op);
    }
    for (Operation *op : flushFeed)
      if (product->isBeforeInBlock(op))
        return refuse(op, "the flush runs code between its P·V and the P·V's wait");

    // The tail: the Q release (reads nothing of the key loop or the flush) and the epilogue.
    llvm::SetVector<Operation *> tail;
    auto readsTail = [&](Operation *op) {
      bool reads = false;
      op->walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          if (Operation *def = v.getDefiningOp())
            reads |= def == keys.getOperation() || def == flush.getOperation() ||
                     tail.contains(def);
      });
      return reads;
    };
    Operation *terminator = body->getTerminator();
    for (Operation *op = flush->getNextNode(); op != terminator; op = op->getNextNode()) {
      // Q's release waits for Q's fill first (tgpu-warp-specialize: a tile whose key loop ran
      // no block waited for none); the wait stays with the release.
      if (auto wait = dyn_cast<nvgpu::MBarrierTryWaitParityOp>(op);
          wait && !readsTail(op) && isa_and_nonnull<nvgpu::MBarrierArriveOp>(op->getNextNode()) &&
          !readsTail(op->getNextNode()))
        continue;
      if (isa<nvgpu::MBarrierArriveOp>(op) && !readsTail(op)) {
        if (queryRelease)
          return refuse(op, "more than one mbarrier arrive follows the key loop (one Q "
                            "release expected)");
        queryRelease = op;
        continue;
      }
      if (isa<nvgpu::MBarrierArriveOp, nvgpu::MBarrierTryWaitParityOp, WgmmaOp, WgmmaWaitOp>(op))
        return refuse(op, "the epilogue synchronizes or computes on the tensor cores");
      tail.insert(op);
      epilogue.push_back(op);
    }
    for (Operation *op : epilogue)
      for (Operation *user : op->getUsers())
        if (!llvm::any_of(epilogue, [&](Operation *e) { return e->isAncestor(user); }))
          return refuse(op, "the epilogue's results are read after it");
    // The tile loop's yield: the flush's counter once, none of its output.
    std::optional<unsigned> counterYield;
    for (OpOperand &yielded : terminator->getOpOperands()) {
      Value v = yielded.get();
      if (v == flush.getResult(flushAccAt))
        return refuse(flush, "the tile loop carries the flushed output");
      if (v == flush.getResult(flushCounterAt)) {
        if (counterYield)
          return refuse(flush, "the tile loop carries the value counter twice");
        counterYield = yielded.getOperandNumber();
      }
    }
    if (!counterYield)
      return refuse(flush, "the tile loop does not carry the value counter the flush advances");
    tileCounterAt = *counterYield;
    for (Operation *user : flush->getUsers())
      if (user != terminator && !llvm::any_of(epilogue, [&](Operation *e) {
            return e->isAncestor(user);
          }))
        return refuse(user, "reads the flush outside the epilogue");

    // What the flush and the epilogue read.
    SmallVector<Operation *> readers = {flush.getOperation()};
    llvm::append_range(readers, epilogue);
    for (Operation *reader : readers) {
      WalkResult walk = reader->walk([&](Operation *inner) {
        for (Value v : inner->getOperands()) {
          if (auto result = dyn_cast<OpResult>(v); result && result.getOwner() == keys) {
            unsigned at = result.getResultNumber();
            if (at != counterAt && !llvm::is_contained(keyState, at))
              keyState.push_back(at);
            continue;
          }
          if (!definedIn(v, tiles) || definedIn(v, flush) || v.getDefiningOp() == flush ||
              llvm::any_of(epilogue, [&](Operation *e) { return definedIn(v, e) ||
                                                                v.getDefiningOp() == e; }))
            continue;
          if (Operation *def = v.getDefiningOp();
              def && def->getBlock() == body && matchPattern(def, m_Constant()))
            continue; // cloned where it is needed
          if (v.getParentBlock() != body) {
            inner->emitOpError("cannot overlap the tile boundary (tgpu-overlap-tiles): the "
                               "epilogue reads a value of a nested region");
            return WalkResult::interrupt();
          }
          if (!llvm::is_contained(tileState, v)) {
            tileState.push_back(v);
            auto arg = dyn_cast<BlockArgument>(v);
            tileStateArg.push_back(arg ? std::optional<unsigned>(arg.getArgNumber())
                                       : std::nullopt);
          }
        }
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return failure();
    }
    llvm::sort(keyState);
    if (!llvm::is_contained(keyState, hasAt))
      return refuse(flush, "the flush's condition is not read as the key loop's pending flag");
    for (unsigned at : keyState)
      if (!overlap::hasPlaceholder(keys.getResult(at).getType()))
        return refuse(keys, "a carried value of the key loop is neither a block nor a scalar");
    for (Value v : tileState)
      if (!overlap::hasPlaceholder(v.getType()))
        return refuse(tiles, "the epilogue reads a value that is neither a block nor a scalar");

    // The key body's variants: branches on its pending flag, whose else branch (nothing
    // pending) is one straight-line body with its Q·Kᵀ.
    for (OpOperand &use : keys.getRegionIterArgs()[hasAt].getUses()) {
      Operation *user = use.getOwner();
      if (isa<scf::YieldOp>(user))
        continue;
      auto branch = dyn_cast<scf::IfOp>(user);
      if (!branch || branch.getElseRegion().empty() || branch.getNumResults() == 0)
        return refuse(user, "the key loop's pending flag is read other than by the rotated "
                            "and unrotated variants of a key block's body");
      pendingBranches.push_back(branch);
    }
    if (pendingBranches.empty())
      return refuse(keys, "the key loop's pending flag selects no body");
    for (scf::IfOp branch : pendingBranches)
      if (failed(splitFirstBody(branch.elseBlock(), nullptr)))
        return failure();
    return success();
  }

  /// The unrotated body of a first key block, split at its Q·Kᵀ wait.
  struct FirstBody {
    WgmmaWaitOp scoresWait;
    SmallVector<Operation *> upToScores, now, later;
  };

  LogicalResult splitFirstBody(Block *block, FirstBody *out) {
    FirstBody split;
    WgmmaOp scores;
    for (Operation &op : block->without_terminator()) {
      if (auto mma = dyn_cast<WgmmaOp>(op)) {
        if (scores || !mma.getTransposeRhs() || mma.getAcc())
          return refuse(&op, "a first key block's body holds a wgmma other than one Q·Kᵀ");
        scores = mma;
      }
      if (isa<RegionBranchOpInterface>(op) && !overlap::isComputeBranch(&op))
        return refuse(&op, "a first key block's body is not straight-line code");
    }
    if (!scores)
      return refuse(block->getParentOp(), "a first key block's body holds no Q·Kᵀ");
    for (Operation *user : scores.getResult().getUsers())
      if (auto wait = dyn_cast<WgmmaWaitOp>(user); wait && wait->getBlock() == block)
        split.scoresWait = wait;
    if (!split.scoresWait)
      return refuse(scores, "a first key block's Q·Kᵀ is not waited for in its body");
    Operation *terminator = block->getTerminator();
    if (terminator->getNumOperands() != keys.getNumRegionIterArgs())
      return refuse(terminator, "a key block's body does not yield the key loop's values");
    if (definedIn(terminator->getOperand(counterAt), block->getParentOp()))
      return refuse(terminator, "a first key block's body advances the value counter");
    if (!out)
      return success();
    SmallVector<Operation *> afterScoresWait;
    bool pastScores = false;
    for (Operation &op : block->without_terminator()) {
      if (&op == split.scoresWait.getOperation()) {
        pastScores = true;
        continue;
      }
      (pastScores ? afterScoresWait : split.upToScores).push_back(&op);
    }
    // What only the next block's P·V reads (the packed P, yielded as pending state) waits for
    // the previous tile's P·V: ptxas serializes the wgmma groups when registers a wgmma reads
    // are written while a group is in flight (as tgpu-overlap-softmax defers it).
    llvm::SetVector<Operation *> deferred;
    for (Operation *op : llvm::reverse(afterScoresWait)) {
      bool forThePending = isPure(op) && op->getNumResults() &&
                           llvm::all_of(op->getUses(), [&](OpOperand &use) {
                             if (use.getOwner() == terminator)
                               return use.getOperandNumber() > hasAt;
                             return deferred.contains(use.getOwner());
                           });
      if (forThePending)
        deferred.insert(op);
    }
    for (Operation *op : afterScoresWait)
      (deferred.contains(op) ? split.later : split.now).push_back(op);
    *out = std::move(split);
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Rewriting
  //===--------------------------------------------------------------------===//

  /// The previous tile's state, as the tile loop's body (or its results) hold it.
  struct Previous {
    Value awaits;
    SmallVector<Value> keys, tile;
  };

  /// What the flush and the epilogue read, mapped to the previous tile's state; the value
  /// counter to `counter`.
  IRMapping previousMap(const Previous &previous, Value counter) {
    IRMapping map;
    for (auto [at, v] : llvm::zip(keyState, previous.keys))
      map.map(keys.getResult(at), v);
    for (auto [v, carried] : llvm::zip(tileState, previous.tile))
      map.map(v, carried);
    map.map(keys.getResult(counterAt), counter);
    return map;
  }

  /// The previous tile's flush and epilogue, as they were; returns the value counter after.
  Value flushAndEpilogue(OpBuilder &b, const Previous &previous, Value counter) {
    IRMapping map = previousMap(previous, counter);
    cloneAll(b, {flush.getOperation()}, map, tiles.getBody());
    cloneAll(b, epilogue, map, tiles.getBody());
    return map.lookup(flush.getResult(flushCounterAt));
  }

  /// `flushAndEpilogue` under `condition`; yields the value counter.
  Value flushAndEpilogueIf(OpBuilder &b, Location loc, Value condition, const Previous &previous,
                           Value counter) {
    auto branch = scf::IfOp::create(b, loc, TypeRange{counter.getType()}, condition,
                                    /*withElseRegion=*/true);
    OpBuilder then = OpBuilder::atBlockBegin(branch.thenBlock());
    Value after = flushAndEpilogue(then, previous, counter);
    scf::YieldOp::create(then, loc, after);
    OpBuilder otherwise = OpBuilder::atBlockBegin(branch.elseBlock());
    scf::YieldOp::create(otherwise, loc, counter);
    return branch.getResult(0);
  }

  /// The peeled first block's branch on the (folded) pending flag becomes a branch on the
  /// previous tile's: its P·V beside this block's softmax, then its epilogue; or this block as
  /// it was, then the epilogue of a previous tile without a P·V pending.
  LogicalResult rewriteFirstBody(scf::IfOp branch, const Previous &previous, Value previousHas) {
    Block *block = branch.elseBlock();
    FirstBody first;
    if (failed(splitFirstBody(block, &first)))
      return failure();
    Operation *terminator = block->getTerminator();
    Location loc = branch.getLoc();
    OpBuilder b(branch);
    auto overlapped = scf::IfOp::create(b, loc, branch.getResultTypes(), previousHas,
                                        /*withElseRegion=*/true);
    Value counter = terminator->getOperand(counterAt);
    Block *flushBlock = flush.thenBlock();
    auto flushYield = cast<scf::YieldOp>(flushBlock->getTerminator());
    auto flushElseYield = cast<scf::YieldOp>(flush.elseBlock()->getTerminator());
    // Pending: this block's Q·Kᵀ issued, then the previous tile's P·V, then the wait for Q·Kᵀ
    // alone.
    {
      OpBuilder then = OpBuilder::atBlockBegin(overlapped.thenBlock());
      IRMapping rest;
      IRMapping prev = previousMap(previous, counter);
      // What feeds the P·V (its rescale, its stage and barrier) goes before Q·Kᵀ is issued: a
      // register a wgmma reads that is written while another group is in flight makes ptxas
      // serialize the groups.
      cloneAll(then, flushFeed, prev, flushBlock);
      cloneAll(then, first.upToScores, rest, block);
      cloneAll(then, {product.getOperation()}, prev, flushBlock);
      auto wait = cast<WgmmaWaitOp>(then.clone(*first.scoresWait, rest));
      wait.setPendingAttr(then.getI32IntegerAttr(1));
      cloneAll(then, first.now, rest, block);
      cloneAll(then, flushComplete, prev, flushBlock);
      // The P·V's wait follows this block's softmax; held there through ptxas only on request,
      // as tgpu-overlap-softmax's (TileGPUHints.h; measured slower there, docs/perf.md).
      if (holdProductWait)
        prev.lookup(productWait.getOperation())
            ->setAttr(kWaitAfterPrecedingCodeAttr, then.getUnitAttr());
      for (unsigned i = 0; i < flush.getNumResults(); ++i)
        prev.map(flush.getResult(i), prev.lookup(flushYield.getOperand(i)));
      cloneAll(then, epilogue, prev, tiles.getBody());
      cloneAll(then, first.later, rest, block);
      SmallVector<Value> results;
      for (Value v : terminator->getOperands())
        results.push_back(rest.lookupOrDefault(v));
      results[counterAt] = prev.lookup(flush.getResult(flushCounterAt));
      scf::YieldOp::create(then, loc, results);
    }
    // Nothing pending: the block as it was, then the previous tile's epilogue if one awaits.
    {
      OpBuilder otherwise = OpBuilder::atBlockBegin(overlapped.elseBlock());
      IRMapping rest;
      cloneAll(otherwise, llvm::to_vector(llvm::make_pointer_range(block->without_terminator())),
               rest, block);
      auto awaiting = scf::IfOp::create(otherwise, loc, TypeRange(), previous.awaits,
                                        /*withElseRegion=*/false);
      OpBuilder epilogueAt = OpBuilder::atBlockBegin(awaiting.thenBlock());
      IRMapping prev = previousMap(previous, counter);
      for (unsigned i = 0; i < flush.getNumResults(); ++i)
        prev.map(flush.getResult(i), prev.lookup(flushElseYield.getOperand(i)));
      cloneAll(epilogueAt, epilogue, prev, tiles.getBody());
      SmallVector<Value> results;
      for (Value v : terminator->getOperands())
        results.push_back(rest.lookupOrDefault(v));
      scf::YieldOp::create(otherwise, loc, results);
    }
    branch.replaceAllUsesWith(overlapped.getResults());
    branch.erase();
    overlappedBodies.push_back(overlapped);
    return success();
  }

  /// The peeled first bodies (rewriteFirstBody's branches).
  SmallVector<Operation *> overlappedBodies;

  /// The branches in `peeled` (and `peeled` itself) that hold a first body, outermost first.
  SmallVector<Operation *> collectBranchesAround(scf::IfOp peeled) {
    llvm::SetVector<Operation *> around;
    for (Operation *body : overlappedBodies)
      for (Operation *up = body->getParentOp(); up; up = up->getParentOp()) {
        around.insert(up);
        if (up == peeled.getOperation())
          break;
      }
    return llvm::to_vector(around);
  }

  LogicalResult rewrite() {
    Location loc = tiles.getLoc();
    IRRewriter rewriter(tiles.getContext());
    // The tile loop carries the previous tile's state: whether one awaits its epilogue, what
    // its flush and epilogue read of its key loop and of its body.
    rewriter.setInsertionPoint(tiles);
    SmallVector<Value> inits = {
        arith::ConstantIntOp::create(rewriter, loc, rewriter.getI1Type(), 0)};
    for (unsigned at : keyState)
      inits.push_back(placeholder(rewriter, loc, keys.getResult(at).getType()));
    for (Value v : tileState)
      inits.push_back(placeholder(rewriter, loc, v.getType()));
    unsigned original = tiles.getNumRegionIterArgs();
    FailureOr<LoopLikeOpInterface> widened = tiles.replaceWithAdditionalYields(
        rewriter, inits, /*replaceInitOperandUsesInLoop=*/false,
        [&](OpBuilder &, Location, ArrayRef<BlockArgument> added) {
          return SmallVector<Value>(added.begin(), added.end());
        });
    if (failed(widened))
      return tiles.emitOpError("tgpu-overlap-tiles: cannot carry the previous tile's state");
    tiles = cast<scf::ForOp>(widened->getOperation());
    Block *body = tiles.getBody();
    // Block arguments of the old body were replaced by the new body's.
    for (auto [v, arg] : llvm::zip(tileState, tileStateArg))
      if (arg)
        v = body->getArgument(*arg);
    auto previousFrom = [&](ValueRange values) {
      Previous previous;
      previous.awaits = values[original];
      previous.keys.assign(values.begin() + original + 1,
                           values.begin() + original + 1 + keyState.size());
      previous.tile.assign(values.begin() + original + 1 + keyState.size(),
                           values.begin() + original + 1 + keyState.size() + tileState.size());
      return previous;
    };
    Previous previous = previousFrom(ValueRange(tiles.getRegionIterArgs()));

    // After the tile loop: the last tile's flush and epilogue.
    rewriter.setInsertionPointAfter(tiles);
    Previous last = previousFrom(tiles.getResults());
    Value counterOut = tiles.getResult(tileCounterAt);
    Value lastCounter = flushAndEpilogueIf(rewriter, loc, last.awaits, last, counterOut);
    counterOut.replaceUsesWithIf(lastCounter, [&](OpOperand &use) {
      return !lastCounter.getDefiningOp()->isAncestor(use.getOwner());
    });

    // The first key block peeled: taken where the range has one.
    rewriter.setInsertionPoint(keys);
    Location keysLoc = keys.getLoc();
    Value lo = keys.getLowerBound(), hi = keys.getUpperBound();
    Value any = arith::CmpIOp::create(
        rewriter, keysLoc,
        keys.getUnsignedCmp() ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt, lo, hi);
    auto peeled = scf::IfOp::create(rewriter, keysLoc, keys.getResultTypes(), any,
                                    /*withElseRegion=*/true);
    IRMapping peel;
    {
      OpBuilder then = OpBuilder::atBlockBegin(peeled.thenBlock());
      peel.map(keys.getInductionVar(), lo);
      for (auto [arg, init] : llvm::zip(keys.getRegionIterArgs(), keys.getInitArgs()))
        peel.map(arg, init);
      for (Operation &op : keys.getBody()->without_terminator())
        then.clone(op, peel);
      SmallVector<Value> results;
      for (Value v : keys.getBody()->getTerminator()->getOperands())
        results.push_back(peel.lookupOrDefault(v));
      scf::YieldOp::create(then, keysLoc, results);
      OpBuilder otherwise = OpBuilder::atBlockBegin(peeled.elseBlock());
      scf::YieldOp::create(otherwise, keysLoc, keys.getInitArgs());
    }
    // In the peeled block nothing of this tile is pending (the flag starts false): its
    // branches on the flag take the previous tile's instead.
    Value previousHas = previous.keys[llvm::find(keyState, hasAt) - keyState.begin()];
    overlappedBodies.clear();
    for (scf::IfOp branch : pendingBranches) {
      auto copy = cast<scf::IfOp>(peel.lookup(branch.getResult(0)).getDefiningOp());
      if (failed(rewriteFirstBody(copy, previous, previousHas)))
        return failure();
    }
    // Where no first block runs (no range, or its mask skips it), the previous tile's flush and
    // epilogue run in that branch, before this tile's P·V blocks take V stages: every path
    // through the peeled block consumes the previous tile's state, so none of it stays live
    // past it (its accumulator is updated in place by its P·V).
    for (Operation *op : collectBranchesAround(peeled)) {
      auto around = dyn_cast<scf::IfOp>(op);
      if (!around)
        return refuse(op, "a key block's body is nested in an op other than scf.if in the key "
                          "loop");
      if (around.getNumResults() != keys.getNumRegionIterArgs())
        return refuse(around, "a branch around a key block's body does not pass the key loop's "
                              "values on");
      for (Region *region : {&around.getThenRegion(), &around.getElseRegion()}) {
        if (region->empty() || llvm::any_of(overlappedBodies, [&](Operation *body) {
              return region->isAncestor(body->getParentRegion());
            }))
          continue;
        Operation *terminator = region->front().getTerminator();
        OpBuilder at(terminator);
        Value counter = flushAndEpilogueIf(at, keysLoc, previous.awaits, previous,
                                           terminator->getOperand(counterAt));
        terminator->setOperand(counterAt, counter);
      }
    }
    // The key loop from its second block.
    Value second = arith::AddIOp::create(rewriter, keysLoc, lo, keys.getStep());
    keys.setLowerBound(second);
    for (unsigned i = 0; i < keys.getNumRegionIterArgs(); ++i)
      keys.getInitArgsMutable()[i].set(peeled.getResult(i));

    // The tile yields its state for the next tile, and its value counter unflushed.
    auto yield = cast<scf::YieldOp>(body->getTerminator());
    yield.setOperand(tileCounterAt, keys.getResult(counterAt));
    rewriter.setInsertionPoint(yield);
    yield.setOperand(original, arith::ConstantIntOp::create(rewriter, loc,
                                                            rewriter.getI1Type(), 1));
    for (auto [i, at] : llvm::enumerate(keyState))
      yield.setOperand(original + 1 + i, keys.getResult(at));
    for (auto [i, v] : llvm::enumerate(tileState))
      yield.setOperand(original + 1 + keyState.size() + i, v);
    // This tile's flush and epilogue go (they run in the next tile, or after the loop).
    for (Operation *op : llvm::reverse(epilogue))
      op->erase();
    flush.erase();
    return success();
  }
};

} // namespace
