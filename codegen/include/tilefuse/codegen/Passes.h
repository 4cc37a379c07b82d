//===- Passes.h - tilefuse code generation passes ---------------*- C++ -*-===//
#ifndef TILEFUSE_CODEGEN_PASSES_H
#define TILEFUSE_CODEGEN_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tilefuse {

#define GEN_PASS_DECL
#include "tilefuse/codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tilefuse/codegen/Passes.h.inc"

/// The C symbol tile.block_event lowers to on the CPU: void tilefuse_block_event(int32_t kind).
constexpr llvm::StringLiteral kBlockEventSymbol = "tilefuse_block_event";

/// Upstream passes from the output of tile-to-cpu-loops to the LLVM dialect.
void buildCpuLoopsToLLVMPipeline(mlir::OpPassManager &pm);

/// The gpu.module convert-tgpu-to-nvvm creates.
constexpr llvm::StringLiteral kGpuModuleName = "tilefuse_kernels";

/// Upstream passes from the output of convert-tgpu-to-nvvm to a gpu.binary holding PTX.
void buildNVVMToPTXPipeline(mlir::OpPassManager &pm);

} // namespace tilefuse

#endif
