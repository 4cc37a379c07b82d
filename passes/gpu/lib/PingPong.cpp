//===- PingPong.cpp - consumer warpgroups take turns at the tensor cores --===//
//
// FlashAttention-3's inter-warpgroup ping-pong, on the consumer partition of a warp-specialized
// kernel: its warpgroups issue their GEMMs in turn, so that while one runs its softmax the
// tensor cores work through the other's GEMMs, instead of all warpgroups contending for them at
// once and then all running softmax at once.
//
// A GEMM section is a run of tgpu.wgmma issues in one block with no tgpu.wgmma_wait between them
// (in the rotated loop of tgpu-overlap-softmax: Q·Kᵀ of block j and P·V of block j - 1; the
// first block's Q·Kᵀ; the last P·V). Before a section a warpgroup syncs on its own named barrier;
// after it, it arrives on the next warpgroup's (`tgpu.named_barrier ... warpgroup own|next`).
// The last warpgroup arrives once before the first section, so warpgroup 0 goes first, and
// warpgroup 0 syncs once after the last section, which takes that extra arrival back: every
// barrier then sees as many arrivals as syncs. Every warpgroup of the partition runs the same
// control flow (the key loop's bounds and branches are the CTA's), so all run the same
// sections, in the same order, and each section's arrival pairs with exactly one sync.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/passes/gpu/NamedBarriers.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUPINGPONG
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

/// The scheduler barriers: ids kFirstBarrier .. kFirstBarrier + N - 1 (NamedBarriers.h).
constexpr int32_t kFirstBarrier = kPingPongFirstBarrier;
constexpr int64_t kWarpgroupThreads = 128;

struct TGPUPingPong : public tilefuse::tgpu::impl::TGPUPingPongBase<TGPUPingPong> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    FailureOr<TileConfig> config = tile::configForPass(kernel, TileConfig());
    if (failed(config))
      return signalPassFailure();
    if (!config->pingpong.value_or(false) && !force)
      return;
    SmallVector<WarpSpecializeOp> roles;
    kernel.walk([&](WarpSpecializeOp op) { roles.push_back(op); });
    if (roles.empty()) {
      kernel.emitError("pingpong: the kernel has no consumer warpgroups to alternate "
                       "(it needs warp_specialize=true)");
      return signalPassFailure();
    }
    for (WarpSpecializeOp op : roles)
      if (failed(alternate(op)))
        return signalPassFailure();
  }

  LogicalResult alternate(WarpSpecializeOp roles) {
    // The consumers are the first partition (tgpu-warp-specialize's order).
    int64_t warpgroups = roles.partitionWarpgroups(0);
    int64_t first = roles.partitionFirstWarp(0) / 4;
    if (warpgroups < 2)
      return roles.emitOpError("pingpong: the consumers are one warpgroup, with no other to "
                               "take turns with (it needs Br >= 128)");
    Block &consumers = roles->getRegion(0).front();
    MLIRContext *ctx = roles.getContext();
    auto barrier = [&](OpBuilder &b, Location loc, BarrierKind kind, WarpgroupBarrier which) {
      NamedBarrierOp::create(b, loc, BarrierKindAttr::get(ctx, kind),
                             b.getI32IntegerAttr(kFirstBarrier),
                             b.getI32IntegerAttr(2 * kWarpgroupThreads),
                             WarpgroupBarrierAttr::get(ctx, which),
                             b.getI32IntegerAttr(warpgroups), b.getI32IntegerAttr(first));
    };

    // The sections, block by block.
    SmallVector<std::pair<WgmmaOp, WgmmaOp>> sections;
    roles->getRegion(0).walk([&](Block *block) {
      WgmmaOp start, last;
      for (Operation &op : *block) {
        if (auto mma = dyn_cast<WgmmaOp>(op)) {
          if (!start)
            start = mma;
          last = mma;
        } else if (isa<WgmmaWaitOp>(op) && start) {
          sections.push_back({start, last});
          start = last = {};
        }
      }
      if (start)
        sections.push_back({start, last});
    });
    if (sections.empty())
      return roles.emitOpError("pingpong: the consumers issue no wgmma");
    for (auto [start, last] : sections) {
      OpBuilder b(start);
      barrier(b, start.getLoc(), BarrierKind::Sync, WarpgroupBarrier::Own);
      b.setInsertionPointAfter(last);
      barrier(b, last.getLoc(), BarrierKind::Arrive, WarpgroupBarrier::Next);
    }

    // The last warpgroup lets warpgroup 0 go first; warpgroup 0 takes that arrival back at the
    // end.
    Location loc = roles.getLoc();
    auto onWarpgroup = [&](OpBuilder &b, int64_t w) {
      Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
      Value wg = arith::DivUIOp::create(b, loc, tid,
                                        arith::ConstantIndexOp::create(b, loc, kWarpgroupThreads));
      Value is = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, wg,
                                       arith::ConstantIndexOp::create(b, loc, first + w));
      return scf::IfOp::create(b, loc, is, /*withElseRegion=*/false);
    };
    OpBuilder b = OpBuilder::atBlockBegin(&consumers);
    scf::IfOp lastGoesFirst = onWarpgroup(b, warpgroups - 1);
    b.setInsertionPointToStart(lastGoesFirst.thenBlock());
    barrier(b, loc, BarrierKind::Arrive, WarpgroupBarrier::Next);
    b.setInsertionPointToEnd(&consumers);
    scf::IfOp firstTakesBack = onWarpgroup(b, 0);
    b.setInsertionPointToStart(firstTakesBack.thenBlock());
    barrier(b, loc, BarrierKind::Sync, WarpgroupBarrier::Own);
    return success();
  }
};

} // namespace
