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
/// Marks every loop over key/value blocks (tile-tiling's sweeps, and the fused loop); the GPU
/// passes find the consumers' key loop by it too.
constexpr llvm::StringLiteral kKVLoopAttr = "tile.kv_loop";

/// On a kernel tile-split-kv split: after (Q, K, V, O, LSE) it takes the workspace views
/// (O_part, LSE_part, the arrival counters) and the split count; its grid has a split dimension.
/// The GPU launch ABI's split form follows from it (tilefuse/runtime/device/LaunchAbi.h).
constexpr llvm::StringLiteral kSplitKVAttr = "tile.split_kv";

/// On a kernel tile-paged-kv rewrote: after (Q, K, V, O, LSE) it takes the page table
/// (B x pages per sequence, i32) and the key/value rows per batch (B, i32), and K and V are
/// paged caches (tile.load's `pages`). The GPU launch ABI's paged form follows from it.
constexpr llvm::StringLiteral kPagedKVAttr = "tile.paged_kv";

/// On a kernel tile-varlen rewrote: after (Q, K, V, O, LSE) it takes the queries' and the
/// keys' cumulative sequence offsets (B + 1 each, i32), and every view is a packed batch of
/// variable-length sequences (tile.load's and tile.store's `sequences`). The GPU launch ABI's
/// varlen form follows from it.
constexpr llvm::StringLiteral kVarlenAttr = "tile.varlen";

/// Which grid of a tiled backward an scf.forall is (preprocess, key_gradients,
/// query_gradients), and on a function tile-outline-backward-phases made of one, that its
/// arguments are the backward launch ABI's (tilefuse/runtime/device/LaunchAbi.h).
constexpr llvm::StringLiteral kBackwardPhaseAttr = "tile.backward_phase";

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

/// The page size S of a paged cache as tile::pagedRow divides by it. A size fixed at compile
/// time (tile-paged-kv's page-size: a constant) is divided by as it is, which LLVM already
/// turns into a multiply or a shift. A size given at launch carries its round-up reciprocal
/// (`multiplier`, `shift`, both i32), so that a row's division is a multiply-high, an add and a
/// shift instead of a run-time division (a few dozen instructions on a GPU), once per row.
struct PageDivisor {
  mlir::Value size;              ///< S, an index
  mlir::Value multiplier, shift; ///< i32; null when S is a constant
};
/// S's divisor, emitted at the current insertion point: emit it where S is defined (a
/// kernel view's size: the function's entry), outside the key loop, so that it costs once per
/// program and not once per row. A constant S emits nothing.
PageDivisor pageDivisor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value pageSize);
/// The round-up reciprocal of S whether or not S is a constant (pageDivisor's arithmetic,
/// folded when S is one; the unit tests evaluate it so). Needs 1 <= S <= 2^31.
PageDivisor pageReciprocal(mlir::OpBuilder &b, mlir::Location loc, mlir::Value pageSize);
/// row div S (an index) for a row < 2^31.
mlir::Value divideByPage(mlir::OpBuilder &b, mlir::Location loc, mlir::Value row,
                         const PageDivisor &pageSize);

/// Where logical row `row` of a paged cache lives (tile.load / tile.block_load `pages`): row
/// row mod S of page table[batch, row div S], S = `pageSize`. `readTable(column)` emits the
/// read of table[batch, column] (as an index): each backend reads memory its own way. The one
/// definition of the map; every lowering of a paged op emits it through this. Rows are below
/// 2^31: a row that reads the table is below its sequence's length, an i32.
struct PageAndRow {
  mlir::Value page, row;
};
PageAndRow pagedRow(mlir::OpBuilder &b, mlir::Location loc, mlir::Value row,
                    const PageDivisor &pageSize,
                    llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                                   mlir::Value column)>
                        readTable);
} // namespace tilefuse::tile

#endif
