//===- IssueWgmmaEarly.cpp - warpgroup MMAs issued early, waited for late --===//
//
// tile-to-tgpu gives every tgpu.wgmma its own tgpu.wgmma_wait right after it (pending 0), and
// writes a transposed lhs into its staging buffer (tgpu.local_store) right before the product
// that reads it: correct, and fully serial. A backward kernel's body has five products with
// little dependence between them (S = Q K^T and dP = dO V^T need only the copies; dV += P^T dO
// needs P, long before dS exists), so the tensor cores idle through every softmax and every
// reduction. This pass moves, within each block (never across a region op, a barrier or a
// terminator):
//
//   1. each tgpu.local_store up to just after the value it stores (and its buffer) is defined,
//      past nothing that reads or writes a buffer it may alias: P is staged as soon as it exists;
//   2. each tgpu.wgmma, with the nvgpu.device_async_waits right before it (the waits for the
//      copies it reads), up to just after its ready point, the last op it depends on (the
//      definition of an operand, a write of a buffer it reads); the products are issued in
//      the order of their ready points (the kernel's order among equals), so dP follows S
//      and dV += P^T dO, ready once P is staged, goes before dK += dS^T Q;
//   3. each tgpu.wgmma_wait down to just before the first op that uses its results, writes a
//      buffer its wgmmas read, or issues another wgmma: every group in flight holds its
//      accumulators, and with three of a head dimension of 128 in flight (dV, dK, dQ: 192
//      registers a thread) ptxas runs out of registers and serializes every wgmma of the
//      kernel (C7512);
//
// then sets every wait's `pending` to the wgmma groups issued between its own and it (the
// groups that may stay in flight). Buffers alias through a ring's stages and the loops that
// carry them, as tgpu-insert-barriers counts them; one whose alloc cannot be named aliases
// every buffer. Runs after tile-to-tgpu, before tgpu-insert-barriers (which places the
// barriers and proxy fences for the new order). The backward pipeline runs it; the forward's
// schedule is tgpu-overlap-softmax's.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/passes/gpu/BufferAllocs.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUISSUEWGMMAEARLY
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

/// The buffers `op` writes (copies, local stores).
SmallVector<Value> buffersWritten(Operation *op) {
  if (auto copy = dyn_cast<AsyncCopyOp>(op))
    return {copy.getBuffer()};
  if (auto tma = dyn_cast<TmaLoadOp>(op))
    return {tma.getBuffer()};
  if (auto store = dyn_cast<LocalStoreOp>(op))
    return {store.getBuffer()};
  return {};
}

/// The buffers a matrix op reads; for a wgmma_wait, those of the wgmmas it completes (their
/// reads last until it).
SmallVector<Value> buffersRead(Operation *op) {
  SmallVector<Value> read;
  auto operandsOf = [&](Operation *mma) {
    for (Value v : mma->getOperands())
      if (isa<BufferType>(v.getType()))
        read.push_back(v);
  };
  if (isa<WgmmaOp, MmaOp>(op))
    operandsOf(op);
  if (auto wait = dyn_cast<WgmmaWaitOp>(op))
    for (Value v : wait.getValues())
      if (auto mma = v.getDefiningOp<WgmmaOp>())
        operandsOf(mma);
  return read;
}

bool conflicts(ArrayRef<Value> xs, ArrayRef<Value> ys) {
  return llvm::any_of(xs, [&](Value x) {
    return llvm::any_of(ys, [&](Value y) { return mayAlias(x, y); });
  });
}

/// Ops nothing moves across: control flow (whose regions may do anything), barriers and
/// terminators. The element-wise region ops of the tile dialect (a mask, a score function, a
/// map) compute on registers only.
bool isFence(Operation *op) {
  if (isa<tile::BlockMaskOp, tile::BlockMapOp, tile::BlockScoreModOp,
          tile::BlockScoreModGradOp>(op))
    return false;
  // (Allocations head the kernel: nothing is gained above them.)
  return op->getNumRegions() > 0 || op->hasTrait<OpTrait::IsTerminator>() ||
         isa<gpu::BarrierOp, NamedBarrierOp, AllocOp>(op);
}

/// Whether `later` uses a value `earlier` defines (in its operands or nested regions).
bool dependsOn(Operation *later, Operation *earlier) {
  bool found = false;
  later->walk([&](Operation *nested) {
    for (Value v : nested->getOperands())
      if (v.getDefiningOp() == earlier) {
        found = true;
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return found;
}

struct IssueWgmmaEarly
    : public tilefuse::tgpu::impl::TGPUIssueWgmmaEarlyBase<IssueWgmmaEarly> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *block) {
      if (llvm::any_of(*block, [](Operation &op) { return isa<WgmmaOp>(op); }))
        blocks.push_back(block);
    });
    for (Block *block : blocks)
      schedule(*block);
  }

  /// Moves `group` (ops in program order, contiguous) up past the ops before it while
  /// `blocks(prev)` is false.
  static void hoist(ArrayRef<Operation *> group,
                    function_ref<bool(Operation *)> blocks) {
    Operation *first = group.front();
    Operation *point = first->getPrevNode();
    while (point && !blocks(point))
      point = point->getPrevNode();
    // Insert after `point` (or at the block's start).
    for (Operation *op : group) {
      if (point)
        op->moveAfter(point);
      else
        op->moveBefore(&op->getBlock()->front());
      point = op;
    }
  }

  void schedule(Block &block) {
    // 1. Stores up to their operands.
    SmallVector<LocalStoreOp> stores;
    for (Operation &op : block)
      if (auto store = dyn_cast<LocalStoreOp>(op))
        stores.push_back(store);
    for (LocalStoreOp store : stores) {
      Value buffer = store.getBuffer();
      hoist({store}, [&](Operation *prev) {
        return isFence(prev) || dependsOn(store, prev) ||
               conflicts(buffersRead(prev), {buffer}) ||
               conflicts(buffersWritten(prev), {buffer});
      });
    }

    // 2. Products up to what they depend on, with the copy waits that guard them. Each has a
    // ready point (the last op before it that it depends on; other products count only through
    // their results); they are issued in the order of their ready points (the kernel's order
    // among equals), each after its ready point and after the product issued before it.
    struct Product {
      SmallVector<Operation *> group; ///< the guarding copy waits, then the wgmma
      Operation *ready;               ///< null: the block's start
    };
    SmallVector<Product> products;
    for (Operation &op : block) {
      auto mma = dyn_cast<WgmmaOp>(op);
      if (!mma)
        continue;
      Product p;
      for (Operation *at = mma->getPrevNode(); isa_and_nonnull<nvgpu::DeviceAsyncWaitOp>(at);
           at = at->getPrevNode())
        p.group.insert(p.group.begin(), at);
      p.group.push_back(mma);
      SmallVector<Value> read = buffersRead(mma);
      p.ready = p.group.front()->getPrevNode();
      while (p.ready && !isFence(p.ready) &&
             llvm::none_of(p.group, [&](Operation *op) { return dependsOn(op, p.ready); }) &&
             !conflicts(buffersWritten(p.ready), read))
        p.ready = p.ready->getPrevNode();
      products.push_back(std::move(p));
    }
    auto before = [](Operation *a, Operation *b) { // a strictly before b (null: the start)
      return b && (!a || a->isBeforeInBlock(b));
    };
    std::stable_sort(products.begin(), products.end(), [&](const Product &x, const Product &y) {
      return before(x.ready, y.ready);
    });
    Operation *previous = nullptr; // the last op of the product issued last
    for (Product &p : products) {
      Operation *point = before(p.ready, previous) ? previous : p.ready;
      for (Operation *op : p.group) {
        if (point)
          op->moveAfter(point);
        else
          op->moveBefore(&block.front());
        point = op;
      }
      previous = point;
    }

    // 3. Waits down to the first use of what they complete, a write of what their wgmmas
    // read, or the next product.
    SmallVector<WgmmaWaitOp> waits;
    for (Operation &op : block)
      if (auto wait = dyn_cast<WgmmaWaitOp>(op))
        waits.push_back(wait);
    for (WgmmaWaitOp wait : llvm::reverse(waits)) {
      SmallVector<Value> read = buffersRead(wait);
      Operation *point = wait->getNextNode();
      while (point && !isFence(point) && !isa<WgmmaOp>(point) && !dependsOn(point, wait) &&
             !conflicts(buffersWritten(point), read))
        point = point->getNextNode();
      if (point && point != wait->getNextNode())
        wait->moveBefore(point);
    }

    // Each wait leaves in flight the groups issued after the newest group it completes.
    for (Operation &op : block) {
      auto wait = dyn_cast<WgmmaWaitOp>(op);
      if (!wait)
        continue;
      Operation *newest = nullptr;
      for (Value v : wait.getValues()) {
        Operation *def = v.getDefiningOp();
        if (!isa_and_nonnull<WgmmaOp>(def) || def->getBlock() != &block) {
          newest = nullptr; // a group of another block: leave the count as it is
          break;
        }
        if (!newest || newest->isBeforeInBlock(def))
          newest = def;
      }
      if (!newest)
        continue;
      uint32_t later = 0;
      for (Operation *op = newest->getNextNode(); op != wait; op = op->getNextNode())
        if (isa<WgmmaOp>(op))
          ++later;
      wait.setPendingAttr(OpBuilder(wait).getI32IntegerAttr(later));
    }
  }
};

} // namespace
