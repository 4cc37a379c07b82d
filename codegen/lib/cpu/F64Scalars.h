//===- F64Scalars.h - scalar code of the written form, promoted to f64 -*- C++ -*-===//
//
// Shared by the two float64 references (tile-to-f64-reference, row by row; and
// tile-to-f64-tensor-reference, whole tensors): the kernel's f32 arithmetic evaluated in f64.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_CODEGEN_CPU_F64SCALARS_H
#define TILEFUSE_CODEGEN_CPU_F64SCALARS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse::cpu {

/// The reference's arithmetic type for a scalar type of the written form: f32 (the kernel's
/// compute type) becomes f64; everything else (index, integers, i1) is kept.
mlir::Type promoteToF64(mlir::Type t);

/// A view retyped for the reference: f64 elements, every size and stride dynamic.
mlir::MemRefType f64ViewType(mlir::MemRefType t);

/// Clones a scalar op with its f32 arithmetic in f64 (constants widened, f32 <-> f64 casts
/// dropped), mapping its results in `m`. An op that does not verify in f64 (a bitcast of an f32,
/// say), or one with regions, is an error at it.
mlir::LogicalResult cloneScalarInF64(mlir::OpBuilder &b, mlir::Operation &op,
                                     mlir::IRMapping &m);

/// An f64 constant.
mlir::Value f64Constant(mlir::OpBuilder &b, mlir::Location loc, double v);

/// fold(acc, j) over j in [0, length), from `init`: an scf.for carrying the accumulator.
mlir::Value reduceOver(mlir::OpBuilder &b, mlir::Location loc, mlir::Value length,
                       mlir::Value init,
                       llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Value, mlir::Value)>
                           step);

/// The factor of `scale` in f64: its `by` constant, or 1/sqrt(contraction) where the scores
/// come from a tile.dot of that contraction length (null: an error at the op).
mlir::FailureOr<mlir::Value> scaleFactorInF64(mlir::OpBuilder &b, tile::ScaleOp scale,
                                              mlir::Value contraction);

/// A non-tile op of a written-form kernel the references can evaluate: scalar, never a tensor
/// operand or result, never a new view. Else an error at it.
mlir::LogicalResult checkScalarOpOfWrittenForm(mlir::Operation &op);

} // namespace tilefuse::cpu

#endif
