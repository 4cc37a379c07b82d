//===- Passes.h - the tile-level passes -------------------------*- C++ -*-===//
//
// The named pipelines that run them (tile-front-end, tile-to-cpu, tile-to-ptx) are in
// tilefuse/passes/Pipelines.h (target TilefusePipelines).
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_PASSES_H
#define TILEFUSE_PASSES_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse {

#define GEN_PASS_DECL
#include "tilefuse/passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tilefuse/passes/Passes.h.inc"

/// Attribute names shared by the passes: which sweep of the tiled softmax a key/value loop is.
constexpr llvm::StringLiteral kSweepAttr = "tile.sweep";
using tile::kKVLoopAttr;
/// Marks a backward kernel's loop over query blocks (dK and dV of one key block); pruned like a
/// key/value loop, with the mask's intervals the other way round.
constexpr llvm::StringLiteral kQueryLoopAttr = "tile.query_loop";
using tile::kBackwardPhaseAttr;
/// A function-level buffer of a tiled kernel that a launcher provides (row_reduce: B x H x M
/// f32; dq_accumulator: B x H x M x D f32, zeroed by the kernel's preprocessing grid).
constexpr llvm::StringLiteral kWorkspaceAttr = "tile.workspace";

/// The check of tile-check-written-form, for entries that parse a kernel without running a
/// pipeline first (the runtime): emits a located error for each problem found under `root`.
mlir::LogicalResult checkWrittenForm(mlir::Operation *root);

} // namespace tilefuse

#endif
