//===- KernelConfig.h - a kernel module's configuration ---------*- C++ -*-===//
//
// A kernel module carries its configuration (tilefuse/dialect/TileConfig.h) as the module
// attribute `tile.config = #tile.config<"TEXT">`, written by tile-specialize{config=TEXT}. The
// passes that have a setting of it read it from there:
//
//   tile-tiling    Br, Bc
//   tgpu-assign-layouts    rows_per_warp, mma, q
//   tile-pipeline          prefetch_values
//   tgpu-pipeline          stages
//   tgpu-insert-barriers   copy_issue
//
// The attribute wins over a pass's options: it is what the kernel was specialized, cached and
// tuned as, so every pass of one compilation must use it. A pass option only fills a field the
// module leaves unset (hand-written lit inputs carry no attribute at all); to compile another
// configuration, write another one (tile-specialize{config=...} replaces it). The reverse rule
// (an explicit option wins) cannot be kept: a pass built from its generated options struct
// reports every option as given, so "explicit" is not observable.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_DIALECT_KERNELCONFIG_H
#define TILEFUSE_DIALECT_KERNELCONFIG_H

#include "mlir/IR/BuiltinOps.h"
#include "tilefuse/dialect/TileConfig.h"

namespace tilefuse::tile {

/// The configuration of the module `op` is or is in: its `tile.config`, or the empty
/// configuration when it has none. A `tile.config` that is not a #tile.config (the verifier
/// refuses it, but a pass may run before the verifier sees it) is an error located at the module.
mlir::FailureOr<TileConfig> readModuleConfig(mlir::Operation *op);

/// Sets `module`'s `tile.config` to `config` (replacing any).
void writeModuleConfig(mlir::ModuleOp module, const TileConfig &config);

/// The configuration a pass runs with on `op`: the fields of its module's `tile.config`, and
/// `options` (the pass's option values) for the fields that sets none.
mlir::FailureOr<TileConfig> configForPass(mlir::Operation *op, const TileConfig &options);

} // namespace tilefuse::tile

#endif
