//===- Pipelines.cpp - the named tilefuse pipelines, end to end -----------===//
//
//   tile-front-end  levels 1-4: tile-check-written-form, [tile-paged-kv], [tile-varlen], tile-tiling,
//                   tile-online-softmax,
//                   tile-unscaled-row-max, tile-block-pruning, [tile-split-kv], cleanup
//   tile-to-cpu     the front end, then the CPU reference lowering to the LLVM dialect
//   tile-to-cpu-backward
//                   tile-derive-backward, tile-tiling-backward, then tile-to-cpu: each kernel
//                   and its derived backward, tiled, to the LLVM dialect
//   tile-to-ptx     tile-specialize{config}, the front end, tile-pipeline, the GPU-level passes
//                   (tgpu-assign-layouts, tile-to-tgpu, tgpu-pipeline{config's stages},
//                   tgpu-persistent, tgpu-warp-specialize, tgpu-overlap-softmax,
//                   tgpu-overlap-tiles, tgpu-pingpong,
//                   tgpu-insert-barriers, tgpu-store-output-by-tma,
//                   tgpu-allocate-shared-memory), convert-tgpu-to-nvvm and PTX generation
//   tile-to-f64-reference-llvm
//                   the float64 reference (the written form evaluated naively, no front end)
//                   to the LLVM dialect
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "tilefuse/codegen/Passes.h"
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/gpu/Passes.h"

using namespace mlir;
using namespace tilefuse;

void tilefuse::buildTileFrontEndPipeline(OpPassManager &pm, const FrontEndOptions &options) {
  pm.addPass(createTileCheckWrittenForm());
  if (options.pagedKv) {
    TilePagedKVOptions paged;
    paged.pageSize = options.pageSize;
    pm.addNestedPass<func::FuncOp>(createTilePagedKV(paged));
  }
  if (options.varlen)
    pm.addNestedPass<func::FuncOp>(createTileVarlen());
  // tile-tiling uses these where the module's tile.config sets no Br / Bc.
  TileTilingOptions tiling;
  tiling.blockM = options.blockM;
  tiling.blockN = options.blockN;
  tiling.packGqa = options.packGqa;
  tiling.alignRowsToEnd = options.alignRowsToEnd;
  pm.addNestedPass<func::FuncOp>(createTileTiling(tiling));
  pm.addNestedPass<func::FuncOp>(createTileOnlineSoftmax());
  pm.addNestedPass<func::FuncOp>(createTileUnscaledRowMax());
  TileBlockPruningOptions pruning;
  pruning.instrument = options.instrument;
  pm.addNestedPass<func::FuncOp>(createTileBlockPruning(pruning));
  // After pruning: the split shares out the key blocks pruning left.
  if (options.splitKv)
    pm.addNestedPass<func::FuncOp>(createTileSplitKV());
  // The grid's row-block order (row_order in the module's tile.config).
  TileOrderRowBlocksOptions order;
  order.force = options.descendingRows;
  order.forceGrouped = options.groupedRows;
  if (options.rowGroupBytes > 0) // else the pass's own default, its one definition
    order.groupBytes = options.rowGroupBytes;
  pm.addNestedPass<func::FuncOp>(createTileOrderRowBlocks(order));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void tilefuse::buildTileToCpuPipeline(OpPassManager &pm, const FrontEndOptions &options) {
  buildTileFrontEndPipeline(pm, options);
  // The CPU reference runs the GPU's schedule too, so the numerics tests cover it.
  pm.addNestedPass<func::FuncOp>(createTilePipeline());
  pm.addPass(createTileToCpuLoops());
  pm.addPass(createCanonicalizerPass());
  buildCpuLoopsToLLVMPipeline(pm);
}

void tilefuse::buildTileBackwardToCpuPipeline(OpPassManager &pm,
                                              const BackwardPipelineOptions &options) {
  pm.addPass(createTileCheckWrittenForm());
  TileTilingBackwardOptions tiling;
  tiling.blockM = options.blockM;
  tiling.blockN = options.blockN;
  tiling.deterministic = options.deterministic;
  pm.addNestedPass<func::FuncOp>(createTileTilingBackward(tiling));
  // The forward's passes leave the tiled backward as it is, except tile-block-pruning, which
  // prunes its query and key loops too.
  FrontEndOptions frontEnd;
  frontEnd.blockM = options.blockM;
  frontEnd.blockN = options.blockN;
  frontEnd.instrument = options.instrument;
  frontEnd.descendingRows = options.descendingRows;
  buildTileToCpuPipeline(pm, frontEnd);
}

/// The forward's levels 1-5: the front end, then the GPU-level scheduling passes.
static void buildForwardToTGPU(OpPassManager &pm, const GpuPipelineOptions &options) {
  FrontEndOptions frontEnd;
  frontEnd.splitKv = options.splitKv;
  frontEnd.pagedKv = options.pagedKv;
  frontEnd.pageSize = options.pageSize;
  frontEnd.varlen = options.varlen;
  buildTileFrontEndPipeline(pm, frontEnd);
  // (A warp-specialized kernel's tile-pipeline leaves it alone: its rings are its pipeline.)
  pm.addNestedPass<func::FuncOp>(createTilePipeline());
  // The layouts, the copy issue and the tile sizes come from the module's tile.config.
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUAssignLayouts());
  pm.addNestedPass<func::FuncOp>(tgpu::createTileToTGPU());
  // The softmax's row sums as 8 more columns of P·V (row_sum_mma), before any pass that
  // reorders the key loop, so that those see one product and one accumulator.
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPURowSumOnTensorCores());
  // A partial last key block's softmax on its first columns (key_tail), while the key block's
  // copy still sits beside its Q·Kᵀ.
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUNarrowKeyTail());
  // The ring's stages come from the module's tile.config (stages=N).
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUPipeline());
  // Persistent programs looping over the tiles (persistent), then the producer and consumer
  // roles, when the module's tile.config asks for them.
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUPersistent());
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUWarpSpecialize());
  // Their key loop rotated (softmax_overlap, on where warp-specialized).
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUOverlapSoftmax());
  // A persistent consumer's tile boundaries overlapped (overlap_tiles).
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUOverlapTiles());
  // Their consumer warpgroups taking turns at the tensor cores (pingpong).
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUPingPong());
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUInsertBarriers());
  // The consumers' O store through shared memory by TMA (o_tma), with its own barriers.
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUStoreOutputByTma());
}

/// The derived backward's levels 1-5: derived from the forward written form (which goes),
/// tiled in FlashAttention-2's schedule, each phase a kernel of its own
/// (tile-outline-backward-phases), its query blocks prefetched (tile-pipeline). The forward's
/// GPU-level scheduling passes (stages, warp roles) do not apply to it yet.
static void buildBackwardToTGPU(OpPassManager &pm, const GpuPipelineOptions &options) {
  pm.addPass(createTileCheckWrittenForm());
  TileDeriveBackwardOptions derive;
  derive.keepForward = false;
  pm.addPass(createTileDeriveBackward(derive));
  TileTilingBackwardOptions tiling;
  tiling.deterministic = options.deterministic;
  pm.addNestedPass<func::FuncOp>(createTileTilingBackward(tiling));
  // Before the canonicalizer, which rebuilds allocations with static sizes without their
  // tile.workspace marks.
  pm.addPass(createTileOutlineBackwardPhases());
  pm.addNestedPass<func::FuncOp>(createTileBlockPruning());
  // The dQ grid's row-block order (row_order in the module's tile.config).
  pm.addNestedPass<func::FuncOp>(createTileOrderRowBlocks());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Q and dO of the next query block copied while this one computes.
  pm.addNestedPass<func::FuncOp>(createTilePipeline());
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUAssignLayouts());
  pm.addNestedPass<func::FuncOp>(tgpu::createTileToTGPU());
  // Its independent products in flight together (warpgroup MMAs, sm_90a).
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUIssueWgmmaEarly());
  pm.addNestedPass<func::FuncOp>(tgpu::createTGPUInsertBarriers());
}

void tilefuse::buildTileToPTXPipeline(OpPassManager &pm, const GpuPipelineOptions &options) {
  // The configuration goes on the module once; tile-tiling and the GPU-level passes read it
  // there.
  if (!options.config.empty()) {
    TileSpecializeOptions specialize;
    specialize.config = options.config;
    pm.addPass(createTileSpecialize(specialize));
  }
  if (options.backward)
    buildBackwardToTGPU(pm, options);
  else
    buildForwardToTGPU(pm, options);
  tgpu::TGPUAllocateSharedMemoryOptions shared;
  // The opt-in dynamic shared memory per CTA: 227 KiB on sm_90, 163 KiB on sm_80.
  shared.maxSharedBytes = StringRef(options.chip).starts_with("sm_9") ? 232448 : 166912;
  pm.addPass(tgpu::createTGPUAllocateSharedMemory(shared));
  ConvertTGPUToNVVMOptions nvvm;
  nvvm.chip = options.chip;
  nvvm.features = options.features;
  pm.addPass(createConvertTGPUToNVVM(nvvm));
  buildNVVMToPTXPipeline(pm);
}

void tilefuse::buildTileToF64ReferenceLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createTileToF64Reference());
  pm.addPass(createCanonicalizerPass());
  buildCpuLoopsToLLVMPipeline(pm);
}

void tilefuse::registerTilePipelines() {
  PassPipelineRegistration<FrontEndOptions>(
      "tile-front-end", "Tiling, online softmax and block pruning (levels 1-4)",
      buildTileFrontEndPipeline);
  PassPipelineRegistration<FrontEndOptions>(
      "tile-to-cpu", "The front end, then the CPU reference lowering to the LLVM dialect",
      buildTileToCpuPipeline);
  PassPipelineRegistration<BackwardPipelineOptions>(
      "tile-to-cpu-backward",
      "Derives each kernel's backward (tile-derive-backward), tiles it (tile-tiling-backward) and "
      "lowers forward and backward to the LLVM dialect for the CPU",
      [](OpPassManager &pm, const BackwardPipelineOptions &options) {
        pm.addPass(createTileDeriveBackward());
        buildTileBackwardToCpuPipeline(pm, options);
      });
  PassPipelineRegistration<GpuPipelineOptions>(
      "tile-to-ptx", "The front end, then the NVVM lowering to PTX (gpu.binary)",
      buildTileToPTXPipeline);
  PassPipelineRegistration<>(
      "tile-to-f64-reference-llvm",
      "The float64 reference of a written-form kernel (no front end), to the LLVM dialect",
      buildTileToF64ReferenceLLVMPipeline);
}
