//===- BarrierToNVVM.cpp - named barriers ---------------------------------===//
//
// tgpu.named_barrier: bar.sync (nvvm.barrier) or bar.arrive (nvvm.barrier.arrive) on hardware
// barrier `id` for `threads` threads. The CTA-wide gpu.barrier and the proxy fence
// (nvvm.fence.proxy) that tgpu-insert-barriers places are upstream ops, lowered upstream.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

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
