//===- SharedMemoryToNVVM.cpp - shared buffers and ring stages ------------===//
//
// Every buffer lives in the kernel's dynamic shared memory (static shared memory stops at
// 48 KiB): tgpu.alloc is the address of the symbol `tilefuse_dynamic_smem` plus the offset
// tgpu-allocate-shared-memory gave it; tgpu.stage adds the stage's index times the ring's
// stage stride.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "tilefuse/dialect/TileGPUOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

struct AllocToDynamicSharedMemory : OpConversionPattern<tgpu::AllocOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::AllocOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<int64_t> offset = op.getOffset();
    if (!offset)
      return op.emitOpError("has no offset: run tgpu-allocate-shared-memory first");
    Location loc = op.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(rewriter.getContext(), 3);
    Value base = LLVM::AddressOfOp::create(rewriter, loc, ptr, kDynamicSharedMemorySymbol);
    rewriter.replaceOpWithNewOp<LLVM::GEPOp>(op, ptr, rewriter.getI8Type(), base,
                                             ArrayRef<LLVM::GEPArg>{int32_t(*offset)});
    return success();
  }
};

struct StageOfRing : OpConversionPattern<tgpu::StageOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::StageOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    tgpu::RingType ring = op.getRing().getType();
    int64_t stride = ring.getStageStrideInBytes();
    if (ring.getStages() == 2) {
      // Two stages (the key double buffer): a select between the two stage addresses, which
      // stay loop-invariant, instead of recomputing base + index * stride in every iteration.
      Value second = LLVM::GEPOp::create(rewriter, loc, adaptor.getRing().getType(),
                                         rewriter.getI8Type(), adaptor.getRing(),
                                         ArrayRef<LLVM::GEPArg>{int32_t(stride)});
      Value isSecond = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ne,
                                             adaptor.getIndex(), indexConstant(rewriter, loc, 0));
      rewriter.replaceOpWithNewOp<arith::SelectOp>(op, isSecond, second, adaptor.getRing());
      return success();
    }
    Value offset = mulIndex(rewriter, loc, adaptor.getIndex(), indexConstant(rewriter, loc, stride));
    rewriter.replaceOp(op, sharedAddress(rewriter, loc, adaptor.getRing(), offset));
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateSharedMemoryToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                        RewritePatternSet &patterns) {
  patterns.add<AllocToDynamicSharedMemory, StageOfRing>(converter, patterns.getContext());
}
