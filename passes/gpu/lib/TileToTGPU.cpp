//===- TileToTGPU.cpp - layout-annotated tile IR to tgpu IR ---------------===//
//
// Turns the blocks that tgpu-assign-layouts put in shared memory into shared buffers filled by
// asynchronous copies, and the dots into the tgpu matrix ops. Every decision is read from the
// types the layouts are written into; nothing is inferred by following a block's uses (what
// tile-to-nvvm's roleOf did):
//
//   * a tile.block_load of a #tgpu.shared block becomes a tgpu.async_copy into a buffer plus a
//     copy group (nvgpu.device_async_create_group); the block's value becomes the buffer;
//   * a block carried by an scf.for (tile-pipeline's key prefetch: the load before the loop is
//     the init, the load in the body is yielded to the next iteration) is copied into a ring of
//     two stages, so the next block can be in flight while this one is read;
//   * the copy group's token travels with the buffer (an extra iter_arg / yield / result next to
//     it), so that every reader can name the group that filled what it reads: a
//     nvgpu.device_async_wait on it goes right before the reader. How many groups may stay in
//     flight there, and which barriers make the copy visible, is tgpu-insert-barriers' job;
//   * tile.block_dot becomes tgpu.wgmma + tgpu.wgmma_wait (a #tgpu.wgmma_acc result) or
//     tgpu.mma (#tgpu.mma_acc), an f32 lhs (P) packed into A fragments in place first; an f32
//     lhs the dot reads transposed (a backward kernel's P^T dO, dS^T Q) is written into a
//     shared buffer of its own by tgpu.local_store first, which the mma or wgmma reads
//     transposed (tgpu-insert-barriers orders the write against the buffer's readers).
//
// Everything else (register loads, stores, reductions, element-wise ops, the scalar control
// flow) is left as it is.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "tilefuse/dialect/TileGPUDialect.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TILETOTGPU
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

/// Stages of the ring a loop-carried block is copied into: tile-pipeline prefetches one block
/// ahead, so one stage is read while the next is filled. (The software-pipelining pass is to
/// choose more.)
constexpr int64_t kCarriedStages = 2;

SharedLayoutAttr sharedLayoutOf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? dyn_cast_or_null<SharedLayoutAttr>(tensor.getEncoding()) : nullptr;
}
bool isShared(Value v) { return sharedLayoutOf(v.getType()) != nullptr; }

BufferType bufferTypeOf(Type sharedBlock) {
  auto tensor = cast<RankedTensorType>(sharedBlock);
  return BufferType::get(tensor.getContext(), tensor.getShape(), tensor.getElementType(),
                         sharedLayoutOf(tensor));
}

/// Which buffer each shared tile.block_load fills.
///
/// A block that a loop carries is read in one iteration while the next one's copy is in
/// flight, so its loads (the init and every load yielded to the next iteration, joined
/// through the loop and any scf.if in between) share a ring and alternate between its two
/// stages. Every other load has a buffer per (source view, block type): it is waited for and
/// read before the next load of the same view is issued (tgpu-insert-barriers orders the
/// overwrite after the reads), so e.g. the value blocks of the full and partial branches of
/// the causal kernel share one buffer, as tile-to-nvvm's tilefuse_smem_v did. A second load
/// into the buffer while the first block still has readers ahead would overwrite it: an error
/// (tile-pipeline never produces it; a kernel that does needs a ring or a second buffer).
class BufferPlan {
public:
  LogicalResult build(func::FuncOp kernel) {
    // Values joined by the loops and branches that carry them.
    kernel.walk([&](Operation *op) {
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        for (auto [init, arg, yielded, result] :
             llvm::zip_equal(loop.getInitArgs(), loop.getRegionIterArgs(),
                             loop.getYieldedValues(), loop.getResults()))
          if (isShared(arg)) {
            unite(init, arg);
            unite(arg, yielded);
            unite(arg, result);
            carriedRoots.push_back(arg);
          }
      } else if (auto branch = dyn_cast<scf::IfOp>(op)) {
        for (Region *region : {&branch.getThenRegion(), &branch.getElseRegion()})
          if (!region->empty())
            for (auto [yielded, result] : llvm::zip_equal(
                     region->front().getTerminator()->getOperands(), branch.getResults()))
              if (isShared(result))
                unite(yielded, result);
      }
    });
    DenseSet<Value> ringClasses;
    for (Value arg : carriedRoots)
      ringClasses.insert(find(arg));

    // One alloc per ring class and per (view, type), in the order of the first load.
    DenseMap<Value, unsigned> allocOfRing;
    DenseMap<std::pair<Value, Type>, unsigned> allocOfView;
    kernel.walk([&](tile::BlockLoadOp load) {
      if (!isShared(load.getResult()))
        return;
      Type bufferType = bufferTypeOf(load.getType());
      unsigned index = allocTypes.size();
      if (ringClasses.contains(find(load.getResult()))) {
        auto [it, inserted] = allocOfRing.try_emplace(find(load.getResult()), index);
        if (inserted)
          allocTypes.push_back(
              RingType::get(load.getContext(), kCarriedStages, cast<BufferType>(bufferType)));
        allocOf[load] = it->second;
        return;
      }
      auto [it, inserted] = allocOfView.try_emplace({load.getView(), bufferType}, index);
      if (inserted)
        allocTypes.push_back(bufferType);
      allocOf[load] = it->second;
      loadsInto[it->second].push_back(load);
    });
    return checkOverwrites();
  }

  /// The buffers and rings to allocate, and the one each shared load fills.
  SmallVector<Type> allocTypes;
  DenseMap<Operation *, unsigned> allocOf;

private:
  /// Two loads into one buffer in a block: every reader of the first must come before the
  /// second (walk order is program order within a block).
  LogicalResult checkOverwrites() {
    for (auto &[buffer, loads] : loadsInto)
      for (auto [i, first] : llvm::enumerate(loads))
        for (tile::BlockLoadOp second : llvm::drop_begin(loads, i + 1)) {
          Block *block = first->getBlock();
          if (second->getBlock() != block)
            continue;
          for (Operation *reader : first->getUsers()) {
            Operation *inBlock = block->findAncestorOpInBlock(*reader);
            if (inBlock && second->isBeforeInBlock(inBlock)) {
              InFlightDiagnostic diag =
                  second.emitOpError()
                  << "fills the shared buffer of an earlier load of the same view, whose block "
                     "is still read afterwards: it would be overwritten";
              diag.attachNote(first.getLoc()) << "the earlier load";
              diag.attachNote(reader->getLoc()) << "read here";
              return failure();
            }
          }
        }
    return success();
  }

  /// The class of `v`: its leader among the values carried as one block.
  Value find(Value v) { return carried.getOrInsertLeaderValue(v); }
  void unite(Value a, Value b) { carried.unionSets(a, b); }

  llvm::EquivalenceClasses<Value> carried;
  SmallVector<Value> carriedRoots;
  /// The loads of each buffer that is not a ring, in program order.
  llvm::MapVector<unsigned, SmallVector<tile::BlockLoadOp>> loadsInto;
};

struct TileToTGPU : public tilefuse::tgpu::impl::TileToTGPUBase<TileToTGPU> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    if (failed(checkInput(kernel)))
      return signalPassFailure();
    BufferPlan plan;
    if (failed(plan.build(kernel)))
      return signalPassFailure();
    SmallVector<Value> allocs = allocate(kernel, plan);
    issueCopies(kernel, plan, allocs);
    if (failed(carryGroups(kernel.getBody().front())))
      return signalPassFailure();
    if (failed(waitBeforeReaders(kernel)))
      return signalPassFailure();
    replaceBlocksByBuffers(kernel);
    if (failed(lowerDots(kernel)))
      return signalPassFailure();
  }

  /// Every block has a layout; a shared one comes from a load or a loop / branch carrying
  /// it, and is read only by dots (carried by scf.for and scf.if on the way).
  LogicalResult checkInput(func::FuncOp kernel) {
    // Outer ops first: a loop that may not carry a shared block is the error, not its body.
    WalkResult walk = kernel.walk<WalkOrder::PreOrder>([&](Operation *op) -> WalkResult {
      // The async copies address whole rows of one head; packed rows (GQA packing) load to
      // registers only (TileConfig::verify keeps q=shared and pack_gqa apart).
      if (auto load = dyn_cast<tile::BlockLoadOp>(op); load && load.getHeadRows() &&
                                                        isShared(load.getResult()))
        return op->emitOpError("packed rows (pack_gqa) are loaded into registers only, not "
                               "copied to shared memory");
      for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults())) {
        auto tensor = dyn_cast<RankedTensorType>(v.getType());
        if (tensor && !tensor.getEncoding())
          return op->emitOpError() << "has a block without a layout (" << tensor
                                   << "): run tgpu-assign-layouts first";
      }
      for (OpOperand &use : op->getOpOperands()) {
        if (!isShared(use.get()))
          continue;
        if (auto dot = dyn_cast<tile::BlockDotOp>(op); dot && use.get() != dot.getAcc())
          continue;
        if (isa<scf::ForOp>(op) || (isa<scf::YieldOp>(op) &&
                                    isa<scf::ForOp, scf::IfOp>(op->getParentOp())))
          continue;
        return op->emitOpError()
               << "uses a block in shared memory (" << use.get().getType()
               << "); only tile.block_dot reads one, and only scf.for and scf.if carry one";
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    // A shared block starts at a load: one passed in has no copy that fills it.
    for (BlockArgument arg : kernel.getArguments())
      if (isShared(arg))
        return kernel.emitOpError() << "takes a block in shared memory as argument #"
                                    << arg.getArgNumber() << ": no copy fills it";
    return success();
  }

  /// The buffers and rings, at the top of the kernel (before the program grid): one CTA's
  /// shared memory lives as long as the kernel.
  SmallVector<Value> allocate(func::FuncOp kernel, const BufferPlan &plan) {
    OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
    SmallVector<Value> allocs;
    for (Type type : plan.allocTypes)
      allocs.push_back(AllocOp::create(b, kernel.getLoc(), type, IntegerAttr()));
    return allocs;
  }

  /// A ring's rows per stage and stage count as index constants, defined once after its
  /// alloc: every load into the ring computes its stage from them.
  std::pair<Value, Value> ringConstants(Value ring) {
    auto [it, inserted] = ringSizes.try_emplace(ring);
    if (inserted) {
      auto type = cast<RingType>(ring.getType());
      OpBuilder b(ring.getContext());
      b.setInsertionPointAfterValue(ring);
      it->second = {arith::ConstantIndexOp::create(b, ring.getLoc(), type.getBuffer().getRows()),
                    arith::ConstantIndexOp::create(b, ring.getLoc(), type.getStages())};
    }
    return it->second;
  }

  /// Each shared load's copy, at the load (which stays until its uses are rewritten).
  void issueCopies(func::FuncOp kernel, const BufferPlan &plan, ArrayRef<Value> allocs) {
    Type tokenType = nvgpu::DeviceAsyncTokenType::get(kernel.getContext());
    kernel.walk([&](tile::BlockLoadOp load) {
      auto it = plan.allocOf.find(load);
      if (it == plan.allocOf.end())
        return;
      OpBuilder b(load);
      Location loc = load.getLoc();
      Value buffer = allocs[it->second];
      if (auto ring = dyn_cast<RingType>(buffer.getType())) {
        // Block i of the view (its first row / rows) goes to stage i % stages: consecutive
        // blocks alternate, whatever block the loop starts at.
        auto [rows, stages] = ringConstants(buffer);
        Value row0 = load.getIndices().back();
        Value block = arith::DivUIOp::create(b, loc, row0, rows);
        Value stage = arith::RemUIOp::create(b, loc, block, stages);
        buffer = StageOp::create(b, loc, buffer, stage);
      }
      // A paged key block's first row is its block index times a constant (tile-tiling's
      // key loop): the copy's lowering then reads one table entry per page, not per row.
      IntegerAttr rowAlignment;
      APInt factor;
      if (load.getPageTable() &&
          matchPattern(load.getIndices().back(),
                       m_Op<arith::MulIOp>(matchers::m_Any(), m_ConstantInt(&factor))) &&
          factor.isStrictlyPositive())
        rowAlignment = b.getI64IntegerAttr(factor.getSExtValue());
      Value copy = AsyncCopyOp::create(b, loc, load.getView(), load.getIndices(),
                                       load.getBound(), buffer, load.getPageTable(),
                                       /*threads=*/IntegerAttr(), rowAlignment);
      Value group = nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, copy);
      fills[load.getResult()] = {buffer, group};
      groupOf[load.getResult()] = group;
    });
  }

  /// Gives every shared block carried by an scf.for or scf.if the token of its copy group as a
  /// companion: an iter_arg (init, yield, result) or a result (both branches' yields) of the
  /// token type next to it. Loops get their token arguments before their bodies are visited
  /// (a branch inside may yield the carried block unchanged), and their new results after.
  LogicalResult carryGroups(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        if (failed(carryThroughLoop(loop)))
          return failure();
        continue;
      }
      if (auto branch = dyn_cast<scf::IfOp>(op)) {
        if (failed(carryThroughBranch(branch)))
          return failure();
        continue;
      }
      for (Region &region : op.getRegions())
        for (Block &inner : region)
          if (failed(carryGroups(inner)))
            return failure();
    }
    return success();
  }

  FailureOr<Value> groupFor(Value sharedBlock, Operation *carrier) {
    Value group = groupOf.lookup(sharedBlock);
    if (!group)
      return carrier->emitOpError()
             << "carries a block in shared memory that no tile.block_load fills";
    return group;
  }

  LogicalResult carryThroughLoop(scf::ForOp loop) {
    Block *body = loop.getBody();
    SmallVector<unsigned> carried;
    for (BlockArgument arg : loop.getRegionIterArgs())
      if (isShared(arg))
        carried.push_back(arg.getArgNumber() - loop.getNumInductionVars());
    Type tokenType = nvgpu::DeviceAsyncTokenType::get(loop.getContext());
    for (unsigned i : carried)
      groupOf[loop.getRegionIterArgs()[i]] = body->addArgument(tokenType, loop.getLoc());
    if (failed(carryGroups(*body)))
      return failure();
    if (carried.empty())
      return success();

    SmallVector<Value> inits(loop.getInitArgs());
    auto yield = cast<scf::YieldOp>(body->getTerminator());
    SmallVector<Value> yieldedGroups;
    for (unsigned i : carried) {
      FailureOr<Value> init = groupFor(loop.getInitArgs()[i], loop);
      FailureOr<Value> next = groupFor(yield.getOperand(i), yield);
      if (failed(init) || failed(next))
        return failure();
      inits.push_back(*init);
      yieldedGroups.push_back(*next);
    }
    yield.getResultsMutable().append(yieldedGroups);

    // A loop's results are fixed: build one with the tokens and move the body over (its
    // block already has the token arguments, in the order of the new inits).
    IRRewriter rewriter(loop.getContext());
    rewriter.setInsertionPoint(loop);
    auto replacement = scf::ForOp::create(rewriter, loop.getLoc(), loop.getLowerBound(),
                                          loop.getUpperBound(), loop.getStep(), inits,
                                          /*bodyBuilder=*/nullptr, loop.getUnsignedCmp());
    replacement->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
    replacement.getRegion().takeBody(loop.getRegion());
    unsigned results = loop.getNumResults();
    for (auto [k, i] : llvm::enumerate(carried))
      groupOf[replacement.getResult(i)] = replacement.getResult(results + k);
    rewriter.replaceOp(loop, replacement.getResults().take_front(results));
    return success();
  }

  LogicalResult carryThroughBranch(scf::IfOp branch) {
    for (Region *region : {&branch.getThenRegion(), &branch.getElseRegion()})
      for (Block &inner : *region)
        if (failed(carryGroups(inner)))
          return failure();
    SmallVector<unsigned> carried;
    for (OpResult result : branch.getResults())
      if (isShared(result))
        carried.push_back(result.getResultNumber());
    if (carried.empty())
      return success();

    Type tokenType = nvgpu::DeviceAsyncTokenType::get(branch.getContext());
    SmallVector<Type> types(branch.getResultTypes());
    types.append(carried.size(), tokenType);
    for (Region *region : {&branch.getThenRegion(), &branch.getElseRegion()}) {
      auto yield = cast<scf::YieldOp>(region->front().getTerminator());
      SmallVector<Value> groups;
      for (unsigned i : carried) {
        FailureOr<Value> group = groupFor(yield.getOperand(i), yield);
        if (failed(group))
          return failure();
        groups.push_back(*group);
      }
      yield.getResultsMutable().append(groups);
    }
    IRRewriter rewriter(branch.getContext());
    rewriter.setInsertionPoint(branch);
    auto replacement = scf::IfOp::create(rewriter, branch.getLoc(), types, branch.getCondition(),
                                         /*addThenBlock=*/false, /*addElseBlock=*/false);
    replacement->setDiscardableAttrs(branch->getDiscardableAttrDictionary());
    replacement.getThenRegion().takeBody(branch.getThenRegion());
    replacement.getElseRegion().takeBody(branch.getElseRegion());
    unsigned results = branch.getNumResults();
    for (auto [k, i] : llvm::enumerate(carried))
      groupOf[replacement.getResult(i)] = replacement.getResult(results + k);
    rewriter.replaceOp(branch, replacement.getResults().take_front(results));
    return success();
  }

  /// A wait for the group that filled each shared operand of a dot, right before it: the rhs
  /// first, then a shared lhs (copied before the rhs, so usually complete by then).
  LogicalResult waitBeforeReaders(func::FuncOp kernel) {
    WalkResult walk = kernel.walk([&](tile::BlockDotOp dot) -> WalkResult {
      OpBuilder b(dot);
      for (Value operand : {dot.getRhs(), dot.getLhs()}) {
        if (!isShared(operand))
          continue;
        Value group = groupOf.lookup(operand);
        if (!group)
          return dot.emitOpError() << "reads a block in shared memory that no copy fills";
        nvgpu::DeviceAsyncWaitOp::create(b, dot.getLoc(), group, IntegerAttr());
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// The loads' blocks become their buffers; the loops and branches carrying them take the
  /// buffer type.
  void replaceBlocksByBuffers(func::FuncOp kernel) {
    for (auto &[block, fill] : fills) {
      Operation *load = block.getDefiningOp();
      block.replaceAllUsesWith(fill.buffer);
      load->erase();
    }
    fills.clear();
    groupOf.clear();
    kernel.walk([&](Operation *op) {
      for (OpResult result : op->getResults())
        if (isShared(result))
          result.setType(bufferTypeOf(result.getType()));
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            if (isShared(arg))
              arg.setType(bufferTypeOf(arg.getType()));
    });
  }

  /// The shared buffer for the transposed lhs of `dot`, allocated at the top of the kernel: one
  /// per (buffer type, the dot's rank among the transposed-lhs dots of its block), so the
  /// copies of a loop body that tile-block-pruning made (the full and the partial branch, which
  /// never both run) share their buffers, while the dots of one body (dS^T Q and P^T dO) have one
  /// each and need not wait for each other's readers.
  /// Its swizzle is the one the product reads: ldmatrix's for mma.sync, the 128-byte
  /// descriptor's for a warpgroup accumulator.
  Value stagingBuffer(func::FuncOp kernel, tile::BlockDotOp dot, RankedTensorType lhs,
                      Type element) {
    SharedSwizzle swizzle = isa<WgmmaAccumulatorLayoutAttr>(lhs.getEncoding())
                                ? SharedSwizzle::Canonical128B
                                : SharedSwizzle::ChunkXor;
    auto type = BufferType::get(dot.getContext(), lhs.getShape(), element,
                                SharedLayoutAttr::get(dot.getContext(), swizzle));
    Value &buffer = stagingBuffers[{type, transposedRank.lookup(dot)}];
    if (!buffer) {
      OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
      buffer = AllocOp::create(b, dot.getLoc(), type, IntegerAttr());
    }
    return buffer;
  }
  DenseMap<std::pair<Type, unsigned>, Value> stagingBuffers;
  /// Each transposed-lhs dot's rank in its block (before any is lowered).
  DenseMap<Operation *, unsigned> transposedRank;

  /// tile.block_dot as the matrix op its result's layout names.
  LogicalResult lowerDots(func::FuncOp kernel) {
    SmallVector<tile::BlockDotOp> dots;
    DenseMap<Block *, unsigned> transposedInBlock;
    kernel.walk([&](tile::BlockDotOp dot) {
      dots.push_back(dot);
      if (dot.getTransposeLhs())
        transposedRank[dot] = transposedInBlock[dot->getBlock()]++;
    });
    for (tile::BlockDotOp dot : dots) {
      IRRewriter rewriter(dot.getContext());
      // Register work that does not read shared memory goes before the waits in front of the
      // dot, so that it overlaps the copies.
      Operation *beforeWaits = dot;
      while (isa_and_nonnull<nvgpu::DeviceAsyncWaitOp>(beforeWaits->getPrevNode()))
        beforeWaits = beforeWaits->getPrevNode();
      rewriter.setInsertionPoint(beforeWaits);
      Location loc = dot.getLoc();
      auto resultType = cast<RankedTensorType>(dot.getResult().getType());
      Attribute accumulator = resultType.getEncoding();
      auto rhsType = dyn_cast<BufferType>(dot.getRhs().getType());
      if (!rhsType)
        return dot.emitOpError() << "has its rhs in registers (" << dot.getRhs().getType()
                                 << "); tgpu.wgmma and tgpu.mma read it from shared memory";

      // P (f32, in the accumulator layout) becomes A fragments of the rhs's element type in
      // place: the layouts put every element in the same thread and slot.
      Value lhs = dot.getLhs();
      auto lhsTensor = dyn_cast<RankedTensorType>(lhs.getType());
      if (dot.getTransposeLhs() && lhsTensor) {
        // Other warps read the columns this warp's rows hold: through shared memory.
        if (!isa<MmaAccumulatorLayoutAttr, WgmmaAccumulatorLayoutAttr>(lhsTensor.getEncoding()))
          return dot.emitOpError() << "reads a transposed lhs in " << lhsTensor
                                   << "; only an accumulator is written to shared memory for it "
                                      "(tgpu.local_store)";
        Value buffer = stagingBuffer(kernel, dot, lhsTensor, rhsType.getElementType());
        LocalStoreOp::create(rewriter, loc, lhs, buffer);
        lhs = buffer;
        lhsTensor = nullptr;
      }
      if (lhsTensor && lhsTensor.getElementType().isF32()) {
        int64_t warps, rowsPerWarp;
        if (auto acc = dyn_cast<WgmmaAccumulatorLayoutAttr>(lhsTensor.getEncoding())) {
          warps = 4 * acc.getWarpgroups();
          rowsPerWarp = 16;
        } else if (auto acc = dyn_cast<MmaAccumulatorLayoutAttr>(lhsTensor.getEncoding())) {
          warps = acc.getWarps();
          rowsPerWarp = acc.getRowsPerWarp();
        } else {
          return dot.emitOpError() << "has an f32 lhs that is not an accumulator (" << lhsTensor
                                   << "): only an accumulator can be packed into A fragments";
        }
        auto fragments = RankedTensorType::get(
            lhsTensor.getShape(), rhsType.getElementType(),
            OperandALayoutAttr::get(dot.getContext(), warps, rowsPerWarp));
        lhs = PackOperandAOp::create(rewriter, loc, fragments, lhs);
      }
      rewriter.setInsertionPoint(dot);

      Value result;
      if (isa<WgmmaAccumulatorLayoutAttr>(accumulator)) {
        // The tensor cores write the accumulators and read a register lhs until the group
        // completes: both are results in flight, and both go through the wait.
        Type inFlight = isa<RankedTensorType>(lhs.getType()) ? lhs.getType() : Type();
        auto product =
            WgmmaOp::create(rewriter, loc, resultType, inFlight, lhs, dot.getRhs(), dot.getAcc(),
                            /*row_sums=*/Value(), dot.getTransposeLhs(), dot.getTransposeRhs());
        SmallVector<Value> guarded = {product.getResult()};
        if (product.getLhsInFlight())
          guarded.push_back(product.getLhsInFlight());
        result = WgmmaWaitOp::create(rewriter, loc, guarded, /*pending=*/uint32_t(0)).getResult(0);
      } else if (isa<MmaAccumulatorLayoutAttr>(accumulator)) {
        result = MmaOp::create(rewriter, loc, resultType, lhs, dot.getRhs(), dot.getAcc(),
                               dot.getTransposeLhs(), dot.getTransposeRhs());
      } else {
        return dot.emitOpError() << "has a result in " << accumulator
                                 << ", not an accumulator (#tgpu.wgmma_acc or #tgpu.mma_acc)";
      }
      rewriter.replaceOp(dot, result);
    }
    return success();
  }

  /// The buffer and copy group each shared load became (until the load is replaced).
  struct Fill {
    Value buffer, group;
  };
  llvm::MapVector<Value, Fill> fills;
  /// The copy group holding the copy that filled each shared block value.
  DenseMap<Value, Value> groupOf;
  DenseMap<Value, std::pair<Value, Value>> ringSizes;
};

} // namespace
