//===- TGPUToNVVM.cpp - the convert-tgpu-to-nvvm pass ---------------------===//
//
// Assembles the conversion: creates the gpu.module, turns each kernel function into a gpu.func
// with the launch ABI (KernelToNVVM.cpp), and converts every op with the patterns of its
// family (TGPUToNVVMPatterns.h lists the files). The decisions were made by the passes before
// (layouts in the types, buffers and their offsets, copies, waits, barriers); nothing here
// chooses a layout, a schedule or an offset.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"
#include "tilefuse/codegen/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "tilefuse/dialect/TileGPUDialect.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse {
#define GEN_PASS_DEF_CONVERTTGPUTONVVM
#include "tilefuse/codegen/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

bool hasBlocksOrBuffers(Operation *op) {
  auto unconverted = [](Type t) {
    return isa<RankedTensorType, MemRefType, tgpu::BufferType, tgpu::RingType,
               nvgpu::DeviceAsyncTokenType, nvgpu::MBarrierGroupType,
               nvgpu::TensorMapDescriptorType>(t);
  };
  return llvm::any_of(op->getOperandTypes(), unconverted) ||
         llvm::any_of(op->getResultTypes(), unconverted);
}

struct ConvertTGPUToNVVMPass
    : public tilefuse::impl::ConvertTGPUToNVVMBase<ConvertTGPUToNVVMPass> {
  using ConvertTGPUToNVVMBase::ConvertTGPUToNVVMBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto threadsAttr = module->getAttrOfType<DictionaryAttr>("tilefuse.threads");
    SmallVector<func::FuncOp> kernels;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal())
        kernels.push_back(fn);
    // Warpgroup MMAs exist on sm_90a only (plain sm_90 rejects them too): say so at the op
    // rather than let ptxas refuse the PTX at load time.
    WalkResult wgmmaOnChip = module.walk([&](tgpu::WgmmaOp op) {
      if (chip == "sm_90a")
        return WalkResult::advance();
      op.emitOpError() << "needs chip sm_90a (warpgroup MMAs), not " << chip
                       << ": lay the kernel out for mma=sync";
      return WalkResult::interrupt();
    });
    if (wgmmaOnChip.wasInterrupted())
      return signalPassFailure();

    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto target = NVVM::NVVMTargetAttr::get(ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", chip,
                                            features);
    auto gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), kGpuModuleName,
                                              b.getArrayAttr({target}));
    b.setInsertionPointToStart(gpuModule.getBody());
    LLVM::GlobalOp::create(b, module.getLoc(), LLVM::LLVMArrayType::get(b.getI8Type(), 0),
                           /*isConstant=*/false, LLVM::Linkage::External,
                           kDynamicSharedMemorySymbol, Attribute(), /*alignment=*/1024,
                           /*addrSpace=*/3);
    for (func::FuncOp fn : kernels) {
      auto threads = threadsAttr ? threadsAttr.getAs<IntegerAttr>(fn.getSymName()) : nullptr;
      if (!threads) {
        fn.emitError("the kernel's thread count is not recorded (tilefuse.threads): run "
                     "tgpu-allocate-shared-memory first");
        return signalPassFailure();
      }
      // Block events count visited blocks on the CPU backend; the GPU does not count them.
      fn.walk([](tile::BlockEventOp event) { event.erase(); });
      if (failed(createKernelFunction(fn, gpuModule, threads.getInt())))
        return signalPassFailure();
      fn.erase();
    }

    TGPUToNVVMTypeConverter converter(ctx);
    ConversionTarget legality(*ctx);
    legality.addLegalDialect<LLVM::LLVMDialect, NVVM::NVVMDialect, gpu::GPUDialect,
                             vector::VectorDialect>();
    legality.addIllegalDialect<tile::TileDialect, tgpu::TGPUDialect, nvgpu::NVGPUDialect>();
    legality.addIllegalOp<memref::DimOp, scf::ForallOp>();
    legality.addLegalOp<UnrealizedConversionCastOp>();
    legality.markUnknownOpDynamicallyLegal(
        [](Operation *op) { return !hasBlocksOrBuffers(op); });
    RewritePatternSet patterns(ctx);
    populateKernelToNVVMPatterns(converter, patterns);
    // Vector reductions (red.global.add.v2.f32) need sm_90 and PTX 8.1: the features' +ptxNN.
    unsigned ptx = 0;
    for (llvm::StringRef feature : llvm::split(llvm::StringRef(features), ','))
      if (feature.consume_front("+ptx"))
        (void)feature.getAsInteger(10, ptx);
    populateLoadStoreToNVVMPatterns(converter, patterns,
                                    llvm::StringRef(chip).starts_with("sm_9") && ptx >= 81);
    populateSharedMemoryToNVVMPatterns(converter, patterns);
    populateAsyncCopyToNVVMPatterns(converter, patterns);
    populateBarrierToNVVMPatterns(converter, patterns);
    populateMmaSyncToNVVMPatterns(converter, patterns);
    populateWgmmaToNVVMPatterns(converter, patterns);
    populateReductionToNVVMPatterns(converter, patterns);
    populateElementwiseToNVVMPatterns(converter, patterns, legality);
    populateWarpRolesToNVVMPatterns(converter, patterns);
    populateSplitArriveToNVVMPatterns(converter, patterns);
    populateTMAToNVVMPatterns(converter, patterns);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, legality);
    if (failed(applyPartialConversion(gpuModule, legality, std::move(patterns))))
      return signalPassFailure();

    RewritePatternSet math(ctx);
    populateMathToNVVMIntrinsicsPatterns(math);
    if (failed(applyPatternsGreedily(gpuModule, std::move(math))))
      return signalPassFailure();
    // Let a multiply and an add fuse into one FFMA (s * scale - m before ex2, the accumulator
    // rescale): without `contract` NVPTX emits mul.rn / sub.rn, which ptxas may not fuse.
    auto contract = arith::FastMathFlagsAttr::get(ctx, arith::FastMathFlags::contract);
    gpuModule.walk([&](arith::ArithFastMathInterface op) {
      op->setAttr(op.getFastMathAttrName(), contract);
    });
  }
};

} // namespace
