//===- NVVMToPTX.cpp - upstream lowering of the NVVM kernels to PTX -------===//
#include "tilefuse/codegen/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

void tilefuse::buildNVVMToPTXPipeline(mlir::OpPassManager &pm) {
  using namespace mlir;
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
  gpuPm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions toBinary;
  toBinary.compilationTarget = "isa"; // PTX text, loaded by the driver's JIT
  pm.addPass(createGpuModuleToBinaryPass(toBinary));
}
