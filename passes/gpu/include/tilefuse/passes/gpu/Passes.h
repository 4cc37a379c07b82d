//===- Passes.h - GPU-level scheduling passes (tgpu) ------------*- C++ -*-===//
#ifndef TILEFUSE_PASSES_GPU_PASSES_H
#define TILEFUSE_PASSES_GPU_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "tilefuse/dialect/TileGPUDialect.h"

namespace tilefuse::tgpu {

#define GEN_PASS_DECL
#include "tilefuse/passes/gpu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tilefuse/passes/gpu/Passes.h.inc"

/// Module attributes the launch reads, each a dictionary {kernel name = i64}: the CTA's dynamic
/// shared memory in bytes and its thread count.
constexpr llvm::StringLiteral kSharedBytesAttr = "tilefuse.shared_bytes";
constexpr llvm::StringLiteral kThreadsAttr = "tilefuse.threads";

} // namespace tilefuse::tgpu

#endif
