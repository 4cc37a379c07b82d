//===- Pipelines.h - the named tilefuse pipelines ---------------*- C++ -*-===//
//
// Their own target (TilefusePipelines): they assemble the tile-level passes (TilefusePasses,
// which depend on the dialect only) and codegen's lowerings.
//
// The kernel configuration reaches the passes as the module's `tile.config`
// (tilefuse/dialect/KernelConfig.h): tile-to-ptx{config=TEXT} writes it first (tile-specialize),
// and tile-tiling and the GPU-level passes read it. The front end's block-m/block-n are tile-tiling's
// options, forwarded only when given: a module's tile.config wins over them.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_PIPELINES_H
#define TILEFUSE_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace tilefuse {

/// Options of the front-end pipeline (levels 1-4): tile sizes and instrumentation.
struct FrontEndOptions : public mlir::PassPipelineOptions<FrontEndOptions> {
  Option<int64_t> blockM{*this, "block-m",
                         llvm::cl::desc("Br: rows of Q per program (tile-tiling's block-m)"),
                         llvm::cl::init(64)};
  Option<int64_t> blockN{*this, "block-n",
                         llvm::cl::desc("Bc: key/value columns per block (tile-tiling's block-n)"),
                         llvm::cl::init(64)};
  Option<bool> packGqa{*this, "pack-gqa",
                        llvm::cl::desc("Pack the query heads of a key/value head into one "
                                       "program's rows (tile-tiling's pack-gqa)"),
                        llvm::cl::init(false)};
  Option<bool> groupedRows{*this, "row-order-grouped",
                           llvm::cl::desc("Run the grid's (batch, head) pairs in L2-sized "
                                          "groups, each level by level from the last row block "
                                          "(tile-order-row-blocks; without it the module's "
                                          "tile.config decides)"),
                           llvm::cl::init(false)};
  Option<int64_t> rowGroupBytes{*this, "row-group-bytes",
                                llvm::cl::desc("The K and V bytes of one group of (batch, head) "
                                               "pairs under row_order=grouped (0: "
                                               "tile-order-row-blocks' group-bytes default)"),
                                llvm::cl::init(0)};
  Option<bool> alignRowsToEnd{*this, "row-align-end",
                              llvm::cl::desc("Align the row blocks to the rows' end (tile-tiling's "
                                             "row-align-end; without it the module's tile.config "
                                             "decides)"),
                              llvm::cl::init(false)};
  Option<bool> descendingRows{*this, "row-order-descending",
                              llvm::cl::desc("Run the grid's row blocks last first "
                                             "(tile-order-row-blocks; without it the module's "
                                             "tile.config decides)"),
                              llvm::cl::init(false)};
  Option<bool> instrument{*this, "instrument",
                          llvm::cl::desc("Count visited blocks (tile.block_event)"),
                          llvm::cl::init(false)};
  Option<bool> splitKv{*this, "split-kv",
                       llvm::cl::desc("Split each row block's keys across a grid dimension and "
                                      "merge the partials (tile-split-kv; split-KV decode)"),
                       llvm::cl::init(false)};
  Option<bool> pagedKv{*this, "paged-kv",
                       llvm::cl::desc("Read K and V from a paged cache through a page table "
                                      "and per-batch lengths (tile-paged-kv)"),
                       llvm::cl::init(false)};
  Option<int64_t> pageSize{*this, "page-size",
                           llvm::cl::desc("--paged-kv: rows per page, fixed (0: any)"),
                           llvm::cl::init(0)};
  Option<bool> varlen{*this, "varlen",
                      llvm::cl::desc("Run on a packed batch of variable-length sequences "
                                     "through cumulative offsets (tile-varlen; LaunchAbi.h's "
                                     "varlen form)"),
                      llvm::cl::init(false)};
};

/// Options of the GPU pipeline: the kernel configuration and the target.
struct GpuPipelineOptions : public mlir::PassPipelineOptions<GpuPipelineOptions> {
  Option<std::string> config{
      *this, "config",
      llvm::cl::desc("The kernel configuration, TileConfig's text (Br=64,Bc=128,mma=wgmma,...; "
                     "written on the module as tile.config; empty: the module's, else the "
                     "passes' defaults)"),
      llvm::cl::init("")};
  Option<std::string> chip{*this, "arch", llvm::cl::desc("Target chip: sm_80, sm_90a, ..."),
                           llvm::cl::init("sm_90a")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("NVPTX features, e.g. +ptx80 (the PTX version)"),
                               llvm::cl::init("+ptx80")};
  Option<bool> splitKv{*this, "split-kv",
                       llvm::cl::desc("tile-split-kv: the kernel takes the split workspace and "
                                      "count (LaunchAbi.h's split form)"),
                       llvm::cl::init(false)};
  Option<bool> pagedKv{*this, "paged-kv",
                       llvm::cl::desc("tile-paged-kv: K and V are paged caches; the kernel takes "
                                      "the page table and lengths (LaunchAbi.h's paged form)"),
                       llvm::cl::init(false)};
  Option<int64_t> pageSize{*this, "page-size",
                           llvm::cl::desc("--paged-kv: rows per page, fixed (0: any)"),
                           llvm::cl::init(0)};
  Option<bool> varlen{*this, "varlen",
                      llvm::cl::desc("Run on a packed batch of variable-length sequences "
                                     "through cumulative offsets (tile-varlen; LaunchAbi.h's "
                                     "varlen form)"),
                      llvm::cl::init(false)};
  Option<bool> backward{*this, "backward",
                        llvm::cl::desc("Compile the kernel's derived backward instead: its "
                                       "three phases as kernels (LaunchAbi.h's backward form)"),
                        llvm::cl::init(false)};
  Option<bool> deterministic{*this, "deterministic",
                             llvm::cl::desc("--backward: dQ by an ordered loop over key blocks "
                                            "instead of atomic adds"),
                             llvm::cl::init(false)};
};

/// tile-check-written-form, tile-tiling, tile-online-softmax, tile-block-pruning, then cleanup.
/// The options of the CPU pipeline for a kernel and its derived backward.
struct BackwardPipelineOptions : public mlir::PassPipelineOptions<BackwardPipelineOptions> {
  Option<int64_t> blockM{*this, "block-m", llvm::cl::desc("Br, forward and backward"),
                         llvm::cl::init(64)};
  Option<int64_t> blockN{*this, "block-n", llvm::cl::desc("Bc, forward and backward"),
                         llvm::cl::init(64)};
  Option<bool> deterministic{
      *this, "deterministic",
      llvm::cl::desc("dQ by an ordered loop over key blocks instead of atomic adds "
                     "(tile-tiling-backward)"),
      llvm::cl::init(false)};
  Option<bool> instrument{*this, "instrument",
                          llvm::cl::desc("Count visited blocks (tile.block_event)"),
                          llvm::cl::init(false)};
  Option<bool> descendingRows{*this, "row-order-descending",
                              llvm::cl::desc("The forward's and the dQ grid's row blocks last "
                                             "first (tile-order-row-blocks)"),
                              llvm::cl::init(false)};
};

void buildTileFrontEndPipeline(mlir::OpPassManager &pm, const FrontEndOptions &options);
/// A module holding forward kernels and their derived backwards (tile-derive-backward has run):
/// tile-tiling-backward, then the forward's front end and the CPU lowering (tile-to-cpu), so
/// both of each pair run on the CPU reference backend.
void buildTileBackwardToCpuPipeline(mlir::OpPassManager &pm,
                                    const BackwardPipelineOptions &options);
/// The front end, then the CPU reference lowering down to the LLVM dialect.
void buildTileToCpuPipeline(mlir::OpPassManager &pm, const FrontEndOptions &options);
/// tile-specialize{config} (when a configuration is given), the front end, tile-pipeline, the
/// GPU-level passes, convert-tgpu-to-nvvm and the upstream path to a gpu.binary holding PTX.
void buildTileToPTXPipeline(mlir::OpPassManager &pm, const GpuPipelineOptions &options);
/// tile-to-f64-reference (the naive float64 evaluation of the written form), then the upstream
/// path to the LLVM dialect. Runs on a written-form module (specialized, never tiled).
void buildTileToF64ReferenceLLVMPipeline(mlir::OpPassManager &pm);
/// Registers the named pipelines `tile-front-end`, `tile-to-cpu`, `tile-to-ptx` and
/// `tile-to-f64-reference-llvm`.
void registerTilePipelines();

} // namespace tilefuse

#endif
