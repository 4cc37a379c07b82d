//===- InsertBarriers.cpp - cp.async waits, barriers and proxy fences -----===//
//
// tile-to-tgpu leaves a nvgpu.device_async_wait before each reader of a shared buffer, naming
// the copy group that filled it, and nothing else. This pass decides what those waits and the
// copies cost: how many groups each wait lets stay in flight, and where a CTA barrier has to
// order a buffer's readers before the copy that overwrites it, or a copy before its readers in
// other threads. It is the schedule tile-to-nvvm's emitter kept in hidden state (pendingTiles,
// dirtyBuffers, deferred; see its lowerBlock, waitForTile and barrierAndFlush), walked over
// the IR in program order, one block at a time, so that the default (copy-issue=eager) gives
// the kernels exactly the emitter's waits, barriers and fences.
//
// Two facts are tracked while walking a block:
//   * the copy groups in flight, oldest first: cp.async.wait_group N completes all but the N
//     newest, so a wait for group g may leave in flight exactly the groups issued after g;
//   * the buffers (tgpu.alloc values; a ring's stages count as the ring) read since the last
//     barrier: a copy into one of them could overwrite data some warp has yet to read.
//   * the buffers register blocks were written into (tgpu.local_store) since the last barrier:
//     a matrix op reading one needs a barrier first, since the block's elements come from
//     other warps (a wgmma, which reads through the async proxy, a proxy fence before it), and
//     the write itself waits for a barrier after the buffer's last readers, as a copy does.
// Both are conservative where control flow joins: a region starts from the state before its
// op, and after the op (and at the top of a loop body, which the previous iteration reached)
// every buffer may have readers. Believing a finished group in flight only costs a redundant
// wait; believing a buffer read only costs a barrier.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/passes/gpu/BufferAllocs.h"
#include "tilefuse/passes/gpu/NamedBarriers.h"
#include "llvm/ADT/SetVector.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUINSERTBARRIERS
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

bool isToken(Value v) { return isa<nvgpu::DeviceAsyncTokenType>(v.getType()); }

/// What the walk knows at a point of a block.
struct CopyState {
  /// Copy groups (create_group results, or the token arguments carrying them), oldest first.
  SmallVector<Value> inFlight;
  /// Buffers read since the last barrier; `allRead` stands for every buffer.
  llvm::SmallSetVector<Value, 4> read;
  bool allRead = false;
  /// Buffers tgpu.local_store wrote since the last barrier; `allWritten`: any of them.
  llvm::SmallSetVector<Value, 4> written;
  bool allWritten = false;

  void clearReaders() {
    read.clear();
    allRead = false;
    written.clear();
    allWritten = false;
  }
  void everyBufferRead() { allRead = true; }
};

class BarrierInserter {
public:
  BarrierInserter(func::FuncOp kernel, bool issueAtBarrier)
      : issueAtBarrier(issueAtBarrier) {
    kernel.walk([&](WgmmaOp) { hasWgmma = true; });
  }

  LogicalResult run(Block &body) {
    CopyState state;
    return walkBlock(body, state);
  }

private:
  bool hasUnorderedWrite(const CopyState &state, Operation *reader) {
    for (Value operand : reader->getOperands()) {
      if (!isa<BufferType>(operand.getType()))
        continue;
      if (state.allWritten)
        return true;
      SmallVector<Value> allocs = allocsOf(operand);
      if (allocs.empty() ? !state.written.empty()
                         : llvm::any_of(allocs, [&](Value a) { return state.written.contains(a); }))
        return true;
    }
    return false;
  }

  bool hasReaders(const CopyState &state, Value buffer) {
    if (state.allRead)
      return true;
    SmallVector<Value> allocs = allocsOf(buffer);
    if (allocs.empty())
      return !state.read.empty();
    return llvm::any_of(allocs, [&](Value a) { return state.read.contains(a); });
  }

  void noteRead(CopyState &state, Value buffer) {
    SmallVector<Value> allocs = allocsOf(buffer);
    if (allocs.empty())
      state.everyBufferRead(); // a buffer we cannot name: assume it could be any
    state.read.insert(allocs.begin(), allocs.end());
  }

  /// The buffers a matrix op's chain reads.
  void noteReads(CopyState &state, Operation *op) {
    if (auto wait = dyn_cast<WgmmaWaitOp>(op)) {
      for (Value v : wait.getValues())
        if (auto mma = v.getDefiningOp<WgmmaOp>())
          noteReads(state, mma);
      return;
    }
    for (Value operand : op->getOperands())
      if (isa<BufferType>(operand.getType()))
        noteRead(state, operand);
    // A wgmma accumulating onto another's result is one chain, completed by the same wait.
    if (auto mma = dyn_cast<WgmmaOp>(op))
      if (auto previous = mma.getAcc() ? mma.getAcc().getDefiningOp<WgmmaOp>() : WgmmaOp())
        noteReads(state, previous);
  }

  Operation *barrier(OpBuilder &b, Location loc, CopyState &state) {
    state.clearReaders();
    if (partitionThreads)
      return NamedBarrierOp::create(b, loc, BarrierKindAttr::get(b.getContext(), BarrierKind::Sync),
                                    b.getI32IntegerAttr(kConsumersBarrier),
                                    b.getI32IntegerAttr(partitionThreads), WarpgroupBarrierAttr(),
                                    IntegerAttr(), IntegerAttr());
    return gpu::BarrierOp::create(b, loc);
  }

  /// A copy waiting for the next barrier (copy-issue=at-barrier), with its group.
  struct DeferredCopy {
    AsyncCopyOp copy;
    nvgpu::DeviceAsyncCreateGroupOp group;
    bool carried; ///< its group is yielded to the next iteration: read last, issued last
  };

  /// Issues the deferred copies after `point`: the ones read in this iteration first, so that
  /// waiting for them leaves the carried (next iteration's) copy in flight.
  void issueDeferred(Operation *point, CopyState &state, SmallVector<DeferredCopy> &deferred) {
    std::stable_partition(deferred.begin(), deferred.end(),
                          [](const DeferredCopy &c) { return !c.carried; });
    for (DeferredCopy &c : deferred) {
      c.copy->moveAfter(point);
      c.group->moveAfter(c.copy);
      point = c.group;
      state.inFlight.push_back(c.group);
    }
    deferred.clear();
  }

  /// A barrier before `op` for the deferred copies, which follow it.
  void barrierAndIssue(Operation *op, CopyState &state, SmallVector<DeferredCopy> &deferred) {
    if (deferred.empty())
      return;
    OpBuilder b(op);
    issueDeferred(barrier(b, op->getLoc(), state), state, deferred);
  }

  /// Completes `wait` for its group: the groups issued after it may stay in flight. With
  /// `makeVisible`, a barrier follows (after a proxy fence for the tensor cores' reads), and
  /// every earlier read of any buffer is done. Returns the last op it inserted (or the wait).
  Operation *complete(nvgpu::DeviceAsyncWaitOp wait, CopyState &state, bool makeVisible,
                      bool fence) {
    Value group = wait.getAsyncDependencies();
    auto it = llvm::find(state.inFlight, group);
    assert(it != state.inFlight.end() && "waiting for a group not in flight");
    int32_t newer = state.inFlight.end() - it - 1;
    wait.setNumGroupsAttr(OpBuilder(wait).getI32IntegerAttr(newer));
    state.inFlight.erase(state.inFlight.begin(), it + 1);
    if (!makeVisible)
      return wait;
    OpBuilder b(wait->getContext());
    b.setInsertionPointAfter(wait);
    if (fence)
      fenceForTensorCores(b, wait.getLoc());
    return barrier(b, wait.getLoc(), state);
  }

  /// fence.proxy.async.shared::cta: this thread's generic-proxy writes of shared memory (its
  /// cp.async chunks, its st.shared) become visible to the async proxy wgmma reads through.
  static void fenceForTensorCores(OpBuilder &b, Location loc) {
    NVVM::FenceProxyOp::create(
        b, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(b.getContext(), NVVM::SharedSpace::shared_cta));
  }

  /// The reader a wait guards: the next matrix op after it in its block.
  static Operation *guardedBy(nvgpu::DeviceAsyncWaitOp wait) {
    Operation *op = wait->getNextNode();
    while (op && !isa<WgmmaOp, MmaOp>(op))
      op = op->getNextNode();
    return op;
  }

  LogicalResult walkBlock(Block &block, CopyState &state) {
    SmallVector<Value> atEntry = state.inFlight;
    SmallVector<DeferredCopy> deferred;
    auto isDeferred = [&](Operation *copy) {
      return llvm::any_of(deferred, [&](const DeferredCopy &c) { return c.copy == copy; });
    };

    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (op.hasTrait<OpTrait::IsTerminator>()) {
        barrierAndIssue(&op, state, deferred); // nothing requested stays unissued past the block
        waitAtExit(op, atEntry, state);
        break;
      }

      if (auto copy = dyn_cast<AsyncCopyOp>(op)) {
        if (!hasReaders(state, copy.getBuffer()))
          continue;
        if (!issueAtBarrier) {
          OpBuilder b(copy);
          barrier(b, copy.getLoc(), state);
          continue;
        }
        auto group = dyn_cast_or_null<nvgpu::DeviceAsyncCreateGroupOp>(copy->getNextNode());
        if (!group || group.getInputTokens().size() != 1 || !copy->hasOneUse() ||
            group.getInputTokens()[0] != copy.getToken())
          return copy.emitOpError("tgpu-insert-barriers: copy-issue=at-barrier moves a copy "
                                  "with its group, which must follow it and hold it alone");
        bool carried = llvm::any_of(group->getUsers(),
                                    [](Operation *u) { return isa<scf::YieldOp>(u); });
        deferred.push_back({copy, group, carried});
        continue;
      }

      if (auto group = dyn_cast<nvgpu::DeviceAsyncCreateGroupOp>(op)) {
        bool issued = llvm::none_of(group.getInputTokens(), [&](Value t) {
          return t.getDefiningOp() && isDeferred(t.getDefiningOp());
        });
        if (issued)
          state.inFlight.push_back(group);
        continue;
      }

      if (auto wait = dyn_cast<nvgpu::DeviceAsyncWaitOp>(op)) {
        Value group = wait.getAsyncDependencies();
        // A reader of a copy still waiting for a barrier: issue it now.
        if (llvm::any_of(deferred, [&](DeferredCopy &c) { return c.group.getAsyncToken() == group; }))
          barrierAndIssue(wait, state, deferred);
        if (!llvm::is_contained(state.inFlight, group)) {
          wait.erase(); // an earlier wait completed it
          continue;
        }
        Operation *reader = guardedBy(wait);
        Operation *last = complete(wait, state, /*makeVisible=*/true,
                                   /*fence=*/isa_and_nonnull<WgmmaOp>(reader));
        // The buffers are free: the requested copies go now (FA2's order: wait K_j,
        // barrier, issue V_j and K_j+1, then Q K_j^T).
        issueDeferred(last, state, deferred);
        continue;
      }

      if (auto store = dyn_cast<LocalStoreOp>(op)) {
        // Its buffer's earlier readers first; its readers after the next barrier.
        if (hasReaders(state, store.getBuffer())) {
          OpBuilder b(store);
          barrier(b, store.getLoc(), state);
        }
        SmallVector<Value> allocs = allocsOf(store.getBuffer());
        if (allocs.empty())
          state.allWritten = true;
        state.written.insert(allocs.begin(), allocs.end());
        continue;
      }

      if (isa<MmaOp, WgmmaOp>(op) && hasUnorderedWrite(state, &op)) {
        OpBuilder b(&op);
        // The tensor cores read a wgmma's operands through the async proxy: each thread's
        // st.shared must be fenced into it before the barrier publishes them.
        if (isa<WgmmaOp>(op))
          fenceForTensorCores(b, op.getLoc());
        barrier(b, op.getLoc(), state);
      }
      if (isa<WgmmaWaitOp, MmaOp>(op)) {
        noteReads(state, &op);
        continue;
      }

      if (isa<gpu::BarrierOp>(op)) { // one already there orders the reads before it as well
        state.clearReaders();
        continue;
      }

      if (isa<scf::ForOp, scf::IfOp, scf::WhileOp, scf::ForallOp>(op))
        barrierAndIssue(&op, state, deferred); // requested copies do not enter regions
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        waitBeforeLoop(loop, state);
        if (failed(walkLoop(loop, state)))
          return failure();
        continue;
      }
      if (isa<scf::IfOp, scf::WhileOp>(op)) {
        for (Region &region : op.getRegions())
          if (!region.empty()) {
            CopyState inRegion = state;
            // Each region of a while loop also runs after the other one.
            if (isa<scf::WhileOp>(op))
              inRegion.everyBufferRead();
            if (failed(walkBlock(region.front(), inRegion)))
              return failure();
          }
        // A group a region yields is in flight after it.
        for (Value result : op.getResults())
          if (isToken(result))
            state.inFlight.push_back(result);
        state.everyBufferRead();
        noteWritesIn(&op, state);
        continue;
      }
      if (auto grid = dyn_cast<scf::ForallOp>(op)) {
        // Each program is one CTA: its body runs once, from this state.
        CopyState inProgram = state;
        if (failed(walkBlock(*grid.getBody(), inProgram)))
          return failure();
        state.everyBufferRead();
        continue;
      }
      if (auto roles = dyn_cast<WarpSpecializeOp>(op)) {
        // Partitions order the rings with mbarriers (tgpu-warp-specialize: TMA completes on a
        // stage's full barrier, a consumer releases it on its empty one); a CTA-wide barrier
        // inside one would wait for threads of the others forever. The consumers' own copies
        // (Q with q=shared) are ordered among the consumers alone: the same walk over their
        // partition, with the consumers' named barrier for the CTA's.
        // (tgpu.async_copy's verifier keeps cp.async in the first partition, the consumers'.)
        bool consumersCopy = roles->getRegion(0)
                                 .walk([](Operation *inner) {
                                   return isa<AsyncCopyOp, nvgpu::DeviceAsyncWaitOp>(inner)
                                              ? WalkResult::interrupt()
                                              : WalkResult::advance();
                                 })
                                 .wasInterrupted();
        if (consumersCopy) {
          if (partitionThreads)
            return op.emitOpError("tgpu-insert-barriers: nested warp-specialized partitions");
          BarrierInserter consumers(*this);
          consumers.partitionThreads = int32_t(roles.partitionWarpgroups(0) * 128);
          // What the CTA did before the partitions is ordered by the barrier after the
          // mbarriers' init (tgpu-warp-specialize puts it right before them); without it, any
          // buffer may have readers yet.
          CopyState inConsumers;
          if (!isa_and_nonnull<gpu::BarrierOp>(roles->getPrevNode()))
            inConsumers.everyBufferRead();
          if (failed(consumers.walkBlock(roles->getRegion(0).front(), inConsumers)))
            return failure();
        }
        state.everyBufferRead();
        continue;
      }
      if (op.getNumRegions() != 0) {
        WalkResult async = op.walk([](Operation *inner) {
          return isa<AsyncCopyOp, nvgpu::DeviceAsyncWaitOp, WgmmaOp, MmaOp>(inner)
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        });
        if (async.wasInterrupted())
          return op.emitOpError("tgpu-insert-barriers: copies or buffer reads inside an op "
                                "whose regions it does not know how to order");
      }
    }
    return success();
  }

  /// A wait in `loop` for a group issued before it (a backward's K and V, copied once per
  /// program) completes the group in the first iteration and nothing in the others, whose
  /// barrier it still costs: the group is waited for before the loop instead (once, with its
  /// barrier), and the waits inside then find it complete and go.
  void waitBeforeLoop(scf::ForOp loop, CopyState &state) {
    // The youngest such group: waiting for it completes the older ones too.
    auto youngest = state.inFlight.end();
    loop.walk([&](nvgpu::DeviceAsyncWaitOp wait) {
      auto it = llvm::find(state.inFlight, wait.getAsyncDependencies());
      if (it != state.inFlight.end() && (youngest == state.inFlight.end() || it > youngest))
        youngest = it;
    });
    if (youngest == state.inFlight.end())
      return;
    OpBuilder b(loop);
    auto wait = nvgpu::DeviceAsyncWaitOp::create(b, loop.getLoc(), *youngest, IntegerAttr());
    complete(wait, state, /*makeVisible=*/true, /*fence=*/hasWgmma);
  }

  LogicalResult walkLoop(scf::ForOp loop, CopyState &state) {
    // A carried group was issued last before the loop or by the previous iteration: at the top
    // of the body it is the newest in flight, and the same group as the init it replaces. With
    // several, one order must hold for both: the inits' (issued before the loop) and the
    // yielded groups' (issued in the body), or no wait count is right in every iteration.
    SmallVector<std::pair<Value, Value>> carried; // (init, iter arg), in the inits' order
    for (auto [init, arg] : llvm::zip_equal(loop.getInitArgs(), loop.getRegionIterArgs()))
      if (isToken(arg))
        carried.push_back({init, arg});
    auto issuedAt = [&](Value init) {
      return llvm::find(state.inFlight, init) - state.inFlight.begin();
    };
    llvm::stable_sort(carried, [&](auto &a, auto &b) { return issuedAt(a.first) < issuedAt(b.first); });
    Block *loopBody = loop.getBody();
    auto bodyOp = [&](BlockArgument arg) -> Operation * {
      Value yielded = loop.getTiedLoopYieldedValue(arg)->get();
      Operation *def = yielded.getDefiningOp();
      return def ? loopBody->findAncestorOpInBlock(*def) : nullptr;
    };
    for (size_t i = 1; i < carried.size(); ++i) {
      Operation *earlier = bodyOp(cast<BlockArgument>(carried[i - 1].second));
      Operation *later = bodyOp(cast<BlockArgument>(carried[i].second));
      if (earlier && later && later->isBeforeInBlock(earlier))
        return loop.emitOpError("tgpu-insert-barriers: the loop carries copy groups issued in "
                                "one order before it and in another in its body; no "
                                "cp.async.wait_group count is right in every iteration");
    }
    CopyState body = state;
    for (auto [init, arg] : carried) {
      llvm::erase(body.inFlight, init);
      body.inFlight.push_back(arg);
    }
    body.everyBufferRead(); // the previous iteration's reads
    noteWritesIn(loop, body); // and writes
    if (failed(walkBlock(*loop.getBody(), body)))
      return failure();
    // After the loop the carried group is the loop's result: it takes its init's place.
    for (auto [init, result] : llvm::zip_equal(loop.getInitArgs(), loop.getResults()))
      if (isToken(result)) {
        auto it = llvm::find(state.inFlight, init);
        if (it != state.inFlight.end())
          *it = result;
        else
          state.inFlight.push_back(result);
      }
    state.everyBufferRead();
    noteWritesIn(loop, state);
    return success();
  }

  /// After (or around) an op whose regions write register blocks into buffers, any of them
  /// may be unordered.
  static void noteWritesIn(Operation *op, CopyState &state) {
    WalkResult w = op->walk([](LocalStoreOp) { return WalkResult::interrupt(); });
    if (w.wasInterrupted())
      state.allWritten = true;
  }

  /// Before a terminator: only the groups it yields may stay in flight past the block. The
  /// others issued in the block are completed and made visible; this block's carried group (a
  /// loop body's token argument), normally waited for already, is completed without a
  /// barrier: a skipped key block leaves its copy in flight, and the next iteration refills
  /// its stage; no reader needs to see it.
  void waitAtExit(Operation &terminator, ArrayRef<Value> atEntry, CopyState &state) {
    DenseSet<Value> yielded(terminator.getOperands().begin(), terminator.getOperands().end());
    for (Value group : SmallVector<Value>(state.inFlight)) {
      if (yielded.contains(group) || !llvm::is_contained(state.inFlight, group))
        continue;
      bool issuedHere = !llvm::is_contained(atEntry, group);
      auto arg = dyn_cast<BlockArgument>(group);
      bool carriedHere = arg && arg.getOwner() == terminator.getBlock();
      if (!issuedHere && !carriedHere)
        continue;
      OpBuilder b(&terminator);
      auto wait = nvgpu::DeviceAsyncWaitOp::create(b, terminator.getLoc(), group, IntegerAttr());
      complete(wait, state, /*makeVisible=*/issuedHere, /*fence=*/hasWgmma);
    }
  }

  bool issueAtBarrier;
  bool hasWgmma = false;
  /// Inside the consumers' partition: their thread count, barriers are the named barrier
  /// kConsumersBarrier over them; 0 at the CTA's level (gpu.barrier).
  int32_t partitionThreads = 0;
};

struct InsertBarriers
    : public tilefuse::tgpu::impl::TGPUInsertBarriersBase<InsertBarriers> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    // The module's tile.config wins over the option (tilefuse/dialect/KernelConfig.h).
    TileConfig options;
    if (llvm::Error error = options.set("copy-issue", copyIssue)) {
      kernel.emitError() << "tgpu-insert-barriers: " << llvm::toString(std::move(error));
      return signalPassFailure();
    }
    FailureOr<TileConfig> config = tile::configForPass(kernel, options);
    if (failed(config))
      return signalPassFailure();
    BarrierInserter inserter(kernel, config->copyIssue == CopyIssue::AtBarrier);
    if (failed(inserter.run(kernel.getBody().front())))
      return signalPassFailure();
  }
};

} // namespace
