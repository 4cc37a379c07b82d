//===- NVVMToPTX.cpp - upstream lowering of the NVVM kernels to PTX -------===//
#include "tilefuse/codegen/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "TGPUToNVVMPatterns.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

#include <mutex>

namespace tilefuse {
#define GEN_PASS_DEF_MARKGRIDCONSTANTS
#include "tilefuse/codegen/Passes.h.inc"
} // namespace tilefuse

namespace {
struct MarkGridConstants : public tilefuse::impl::MarkGridConstantsBase<MarkGridConstants> {
  void runOnOperation() override {
    getOperation().walk([](mlir::LLVM::LLVMFuncOp fn) {
      auto positions = fn->getAttrOfType<mlir::DenseI32ArrayAttr>(
          tilefuse::nvvm::kGridConstantsAttr);
      if (!positions)
        return;
      mlir::Builder b(fn.getContext());
      auto bytes = mlir::LLVM::LLVMArrayType::get(b.getI8Type(),
                                                  tilefuse::launch_abi::kTensorMapBytes);
      for (int32_t i : positions.asArrayRef()) {
        fn.setArgAttr(i, mlir::LLVM::LLVMDialect::getByValAttrName(), mlir::TypeAttr::get(bytes));
        fn.setArgAttr(i, mlir::LLVM::LLVMDialect::getAlignAttrName(),
                      b.getI64IntegerAttr(tilefuse::launch_abi::kTensorMapAlignment));
        fn.setArgAttr(i, mlir::NVVM::NVVMDialect::getGridConstantAttrName(), b.getUnitAttr());
      }
      fn->removeAttr(tilefuse::nvvm::kGridConstantsAttr);
    });
  }
};
} // namespace

/// Shared-memory pointers as 32 bits (the NVPTX back end's `nvptx-short-ptr`, which Triton sets
/// too): a shared window is far below 4 GiB, and 64-bit ones cost two registers per hoisted
/// ldmatrix/cp.async address. The option is process-wide in LLVM; it is set once, before any
/// pipeline that reaches the back end is built.
static void useShortSharedPointers() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto &options = llvm::cl::getRegisteredOptions();
    auto it = options.find("nvptx-short-ptr");
    if (it != options.end())
      (void)it->second->addOccurrence(0, "nvptx-short-ptr", "true");
  });
}

void tilefuse::buildNVVMToPTXPipeline(mlir::OpPassManager &pm) {
  using namespace mlir;
  useShortSharedPointers();
  OpPassManager &gpuPm = pm.nest<gpu::GPUModuleOp>();
  gpuPm.addPass(createSCFToControlFlowPass());
  gpuPm.addPass(createCanonicalizerPass());
  gpuPm.addPass(createCSEPass());
  gpuPm.addPass(createConvertVectorToLLVMPass());
  // 32-bit index arithmetic: half the registers of 64-bit; element offsets are < 2^31 (the
  // runtime checks the tensor sizes).
  ConvertGpuOpsToNVVMOpsOptions toNVVM;
  toNVVM.indexBitwidth = 32;
  gpuPm.addPass(createConvertGpuOpsToNVVMOps(toNVVM));
  gpuPm.addPass(tilefuse::createMarkGridConstants());
  // NVVM ops without an LLVM intrinsic (mbarrier.try_wait.parity's wait loop) as inline PTX.
  gpuPm.addPass(createConvertNVVMToLLVMPass());
  gpuPm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions toBinary;
  toBinary.compilationTarget = "isa"; // PTX text, loaded by the driver's JIT
  pm.addPass(createGpuModuleToBinaryPass(toBinary));
}
