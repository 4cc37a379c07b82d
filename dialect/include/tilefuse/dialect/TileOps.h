//===- TileOps.h - tile dialect operations ----------------------*- C++ -*-===//
#ifndef TILEFUSE_DIALECT_TILEOPS_H
#define TILEFUSE_DIALECT_TILEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/SCF/IR/DeviceMappingInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "tilefuse/dialect/TileConfig.h"
#include "tilefuse/dialect/TileDialect.h"

#include "tilefuse/dialect/TileEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tilefuse/dialect/TileAttrs.h.inc"

#define GET_OP_CLASSES
#include "tilefuse/dialect/TileOps.h.inc"

namespace tilefuse::tile {
/// On a kernel tile-split-kv split: after (Q, K, V, O, LSE) it takes the workspace views
/// (O_part, LSE_part, the arrival counters) and the split count; its grid has a split dimension.
/// The GPU launch ABI's split form follows from it (tilefuse/runtime/device/LaunchAbi.h).
constexpr llvm::StringLiteral kSplitKVAttr = "tile.split_kv";

/// The mapping of a kernel grid's scf.forall: #tile.grid<batch>, <head>, <row_block>[, <split>].
mlir::ArrayAttr gridMapping(mlir::MLIRContext *context, bool split);

/// A view row of a block op with packed rows (`packed %headRows`, tile.block_load): packed row
/// p of the group starting at head `head` is row p mod headRows of head head + p div headRows.
/// The one definition of the map; every lowering of a packed op emits it through this.
struct HeadAndRow {
  mlir::Value head, row;
};
HeadAndRow unpackRow(mlir::OpBuilder &b, mlir::Location loc, mlir::Value head,
                     mlir::Value packedRow, mlir::Value headRows);
} // namespace tilefuse::tile

#endif
