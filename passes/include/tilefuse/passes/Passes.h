//===- Passes.h - tilefuse passes and pipelines -----------------*- C++ -*-===//
#ifndef TILEFUSE_PASSES_PASSES_H
#define TILEFUSE_PASSES_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse {

#define GEN_PASS_DECL
#include "tilefuse/passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tilefuse/passes/Passes.h.inc"

/// Attribute names shared by the passes: which sweep of the tiled softmax a key/value loop is.
constexpr llvm::StringLiteral kSweepAttr = "tile.sweep";
/// Marks every loop over key/value blocks (the sweeps, and the fused loop).
constexpr llvm::StringLiteral kKVLoopAttr = "tile.kv_loop";

/// The check of tile-check-written-form, for entries that parse a kernel without running a
/// pipeline first (the runtime): emits a located error for each problem found under `root`.
mlir::LogicalResult checkWrittenForm(mlir::Operation *root);

/// Options of the front-end pipeline (levels 1-4): tile sizes and instrumentation.
struct FrontEndOptions : public mlir::PassPipelineOptions<FrontEndOptions> {
  Option<int64_t> blockM{*this, "block-m", llvm::cl::desc("Br: rows of Q per program"),
                         llvm::cl::init(64)};
  Option<int64_t> blockN{*this, "block-n", llvm::cl::desc("Bc: key/value columns per block"),
                         llvm::cl::init(64)};
  Option<bool> instrument{*this, "instrument",
                          llvm::cl::desc("Count visited blocks (tile.block_event)"),
                          llvm::cl::init(false)};
};

/// Options of the GPU pipeline: tile sizes and target.
struct GpuPipelineOptions : public mlir::PassPipelineOptions<GpuPipelineOptions> {
  Option<int64_t> blockM{*this, "block-m",
                         llvm::cl::desc("Br: rows of Q per program (16 per warp)"),
                         llvm::cl::init(64)};
  Option<int64_t> blockN{*this, "block-n", llvm::cl::desc("Bc: key/value columns per block"),
                         llvm::cl::init(64)};
  Option<std::string> chip{*this, "arch", llvm::cl::desc("Target chip: sm_80, sm_90a, ..."),
                           llvm::cl::init("sm_90a")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("NVPTX features, e.g. +ptx80 (the PTX version)"),
                               llvm::cl::init("+ptx80")};
  Option<int64_t> rowsPerWarp{*this, "rows-per-warp",
                              llvm::cl::desc("16 or 32 (see tile-to-nvvm)"), llvm::cl::init(16)};
  Option<std::string> copyIssue{*this, "copy-issue",
                                llvm::cl::desc("eager or at-barrier (see tile-to-nvvm)"),
                                llvm::cl::init("eager")};
  Option<std::string> mma{*this, "mma", llvm::cl::desc("sync or wgmma (see tile-to-nvvm)"),
                          llvm::cl::init("sync")};
  Option<std::string> qOperand{*this, "q-operand",
                               llvm::cl::desc("registers or shared (see tile-to-nvvm)"),
                               llvm::cl::init("registers")};
  Option<std::string> lowering{
      *this, "lowering",
      llvm::cl::desc("`tgpu` (the GPU-level IR: tgpu-assign-layouts, tile-to-tgpu, "
                     "tgpu-insert-barriers, tgpu-allocate-shared-memory, convert-tgpu-to-nvvm) "
                     "or `emitter` (tile-to-nvvm, kept to compare the two side by side)"),
      llvm::cl::init("tgpu")};
};

/// tile-check-written-form, tile-tiling, tile-online-softmax, tile-block-pruning, then cleanup.
void buildTileFrontEndPipeline(mlir::OpPassManager &pm, const FrontEndOptions &options);
/// The front end, then the CPU reference lowering down to the LLVM dialect.
void buildTileToCpuPipeline(mlir::OpPassManager &pm, const FrontEndOptions &options);
/// The front end, then tile-to-nvvm and the upstream path to a gpu.binary holding PTX.
void buildTileToPTXPipeline(mlir::OpPassManager &pm, const GpuPipelineOptions &options);
/// tile-to-f64-reference (the naive float64 evaluation of the written form), then the upstream
/// path to the LLVM dialect. Runs on a written-form module (specialized, never tiled).
void buildTileToF64ReferenceLLVMPipeline(mlir::OpPassManager &pm);
/// Registers the named pipelines `tile-front-end`, `tile-to-cpu` and `tile-to-ptx`.
void registerTilePipelines();

} // namespace tilefuse

#endif
