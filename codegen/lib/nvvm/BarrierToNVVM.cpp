//===- BarrierToNVVM.cpp - named barriers ---------------------------------===//
//
// tgpu.named_barrier: bar.sync (nvvm.barrier) or bar.arrive (nvvm.barrier.arrive) on hardware
// barrier `id` for `threads` threads; per warpgroup (`warpgroup own|next among N from F`),
// the id offset by the warpgroup's index among the N from F. The CTA-wide gpu.barrier and the
// proxy fence (nvvm.fence.proxy) that tgpu-insert-barriers places are upstream ops, lowered
// upstream.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "tilefuse/dialect/TileGPUOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

struct NamedBarrierToBar : OpConversionPattern<tgpu::NamedBarrierOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::NamedBarrierOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value id = i32Constant(rewriter, loc, op.getId());
    if (std::optional<tgpu::WarpgroupBarrier> which = op.getWarpgroup()) {
      // The warpgroup's index in its partition, from the thread index (warp-uniform, so the
      // barrier id stays uniform as bar.sync requires): w = tid.x / 128 - first; the id is
      // id + w, or id + (w + 1) % N for the next warpgroup's barrier. No branch: the ops stand
      // between wgmma groups in flight.
      int64_t firstWarpgroup = *op.getFirstWarpgroup(), warpgroups = *op.getWarpgroups();
      Type i32 = rewriter.getI32Type();
      Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, i32);
      Value w = arith::SubIOp::create(
          rewriter, loc, arith::ShRUIOp::create(rewriter, loc, tid, i32Constant(rewriter, loc, 7)),
          i32Constant(rewriter, loc, firstWarpgroup));
      if (*which == tgpu::WarpgroupBarrier::Next) {
        Value next = arith::AddIOp::create(rewriter, loc, w, i32Constant(rewriter, loc, 1));
        Value wraps = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, next,
                                            i32Constant(rewriter, loc, warpgroups));
        w = arith::SelectOp::create(rewriter, loc, wraps, i32Constant(rewriter, loc, 0), next);
      }
      id = arith::AddIOp::create(rewriter, loc, id, w);
    }
    Value threads = i32Constant(rewriter, loc, op.getThreads());
    if (op.getKind() == tgpu::BarrierKind::Sync)
      NVVM::BarrierOp::create(rewriter, loc, TypeRange{}, id, threads, {}, Value{});
    else
      NVVM::BarrierArriveOp::create(rewriter, loc, id, threads);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateBarrierToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                   RewritePatternSet &patterns) {
  patterns.add<NamedBarrierToBar>(converter, patterns.getContext());
}
