//===- CpuLoopsToLLVM.cpp - upstream lowering of the CPU loops to LLVM ----===//
#include "tilefuse/codegen/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"

void tilefuse::buildCpuLoopsToLLVMPipeline(mlir::OpPassManager &pm) {
  // Buffers get freed (ownership-based deallocation handles buffers carried through loops), then
  // the usual conversions. bf16 has no host arithmetic: arith-expand rewrites its conversions to
  // integer ops. Math ops with an LLVM intrinsic use it; the rest (tanh) call libm.
  static constexpr llvm::StringLiteral kPipeline =
      "buffer-deallocation-pipeline,"
      "convert-scf-to-cf,"
      "expand-strided-metadata,"
      "lower-affine,"
      "func.func(arith-expand{include-bf16=true}),"
      "convert-math-to-llvm,"
      "convert-math-to-libm,"
      "finalize-memref-to-llvm,"
      "convert-func-to-llvm,"
      "convert-arith-to-llvm,"
      "convert-index-to-llvm,"
      "convert-cf-to-llvm,"
      "reconcile-unrealized-casts";
  if (mlir::failed(mlir::parsePassPipeline(kPipeline, pm)))
    llvm::report_fatal_error("tilefuse: the built-in CPU lowering pipeline does not parse");
}
