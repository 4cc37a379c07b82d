//===- WarpRolesToNVVM.cpp - warp-specialized partitions ------------------===//
//
// tgpu.warp_specialize: partition i runs on the warps [first_i, first_i + warps_i) (the
// partitions' warps in order), each under `scf.if` on the thread's warp index, and starts by
// moving its warps' register budget with setmaxnreg: a decrease below the CTA's starting
// share (64K registers over its threads and the CTAs an SM holds, at most 255, a multiple of 8:
// WarpSpecializeOp::registersAtLaunch) frees registers, an
// increase takes them (FA3's producer / consumer split). setmaxnreg acts on whole warpgroups,
// which the op's verifier guarantees.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/TileGPUOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

struct WarpSpecializeToBranches : OpConversionPattern<tgpu::WarpSpecializeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::WarpSpecializeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto kernel = op->getParentOfType<gpu::GPUFuncOp>();
    std::optional<ArrayRef<int32_t>> block = kernel.getKnownBlockSize();
    if (!block)
      return op.emitOpError("the kernel's thread count is unknown");
    int64_t threads = (*block)[0];
    auto ctas = kernel->getAttrOfType<IntegerAttr>("nvvm.minctasm");
    int64_t startingShare =
        tgpu::WarpSpecializeOp::registersAtLaunch(threads, ctas ? ctas.getInt() : 1);
    ThreadCoordinates t = threadCoordinates(rewriter, op);
    int64_t first = 0;
    for (auto [region, warps, registers] : llvm::zip(
             op.getPartitions(), op.getPartitionWarps(), op.getPartitionRegisters())) {
      Value from = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::uge, t.warp,
                                         indexConstant(rewriter, loc, first));
      Value to = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, t.warp,
                                       indexConstant(rewriter, loc, first + warps));
      auto branch = scf::IfOp::create(rewriter, loc, arith::AndIOp::create(rewriter, loc, from, to),
                                      /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(branch.thenBlock());
      if (registers != startingShare)
        NVVM::SetMaxRegisterOp::create(rewriter, loc, registers,
                                       registers < startingShare
                                           ? NVVM::SetMaxRegisterAction::decrease
                                           : NVVM::SetMaxRegisterAction::increase);
      rewriter.inlineBlockBefore(&region.front(), branch.thenBlock()->getTerminator());
      first += warps;
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateWarpRolesToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                     RewritePatternSet &patterns) {
  patterns.add<WarpSpecializeToBranches>(converter, patterns.getContext());
}
