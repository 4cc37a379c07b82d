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

/// Marks the scf.for over a persistent program's tiles (tgpu-persistent); tgpu-warp-specialize
/// reads it to size the producer's registers for the loop's state.
constexpr llvm::StringLiteral kTileLoopAttr = "tgpu.tile_loop";

} // namespace tilefuse::tgpu

#endif
