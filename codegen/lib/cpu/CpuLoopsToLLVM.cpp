//===- CpuLoopsToLLVM.cpp - upstream lowering of the CPU loops to LLVM ----===//
#include "tilefuse/codegen/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"

void tilefuse::buildCpuLoopsToLLVMPipeline(mlir::OpPassManager &pm) {
  using namespace mlir;
  // Buffers get freed: ownership-based deallocation handles buffers carried through loops.
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // bf16 and f16 conversions become integer ops: no host CPU feature (AVX512-BF16, F16C) and no
  // compiler-runtime call (__truncsfbf2, __truncsfhf2) is needed, whatever CPU the JIT targets.
  // LLVM may still call them (a 16-bit phi it re-forms): the module defines them itself, in
  // arith, expanded below with the kernel's conversions.
  pm.addPass(createDefineConversionLibcalls());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addNestedPass<func::FuncOp>(arith::createArithExpandOpsPass(expand));
  pm.addNestedPass<func::FuncOp>(createExpandF16Conversions());
  // Math ops with an LLVM intrinsic use it; the rest (tanh) call libm.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}
