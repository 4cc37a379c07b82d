//===- OverlapUtils.h - helpers of the overlap passes -----------*- C++ -*-===//
//
// What tgpu-overlap-softmax and tgpu-overlap-tiles both do: clone parts of a block in a new
// order (with the constants they read), stand in a value for carried state that is never read
// before it is set, and tell a branch of the softmax from control flow they cannot reorder.
//
//===----------------------------------------------------------------------===//
#ifndef TILEFUSE_PASSES_GPU_LIB_OVERLAPUTILS_H
#define TILEFUSE_PASSES_GPU_LIB_OVERLAPUTILS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "tilefuse/dialect/TileGPUOps.h"

namespace tilefuse::tgpu::overlap {

/// Clones `ops` at the builder with `map`; the constants of `from` they read (in their regions
/// too) that `map` does not map yet are cloned first, so the ops may be cloned in any order.
inline void cloneAll(mlir::OpBuilder &b, llvm::ArrayRef<mlir::Operation *> ops,
                     mlir::IRMapping &map, mlir::Block *from) {
  for (mlir::Operation *op : ops) {
    op->walk([&](mlir::Operation *inner) {
      for (mlir::Value v : inner->getOperands()) {
        mlir::Operation *def = v.getDefiningOp();
        if (def && def->getBlock() == from && !map.contains(v) &&
            mlir::matchPattern(def, mlir::m_Constant()))
          b.clone(*def, map);
      }
    });
    b.clone(*op, map);
  }
}

/// A splat of `type` (carried state before anything sets it: never read).
inline mlir::Value placeholder(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type) {
  if (auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type)) {
    mlir::Type elt = tensor.getElementType();
    mlir::Attribute zero = mlir::isa<mlir::FloatType>(elt)
                               ? mlir::Attribute(b.getFloatAttr(elt, 0.0))
                               : mlir::Attribute(b.getIntegerAttr(elt, 0));
    return mlir::arith::ConstantOp::create(b, loc, mlir::DenseElementsAttr::get(tensor, zero));
  }
  if (mlir::isa<mlir::IndexType>(type))
    return mlir::arith::ConstantIndexOp::create(b, loc, 0);
  if (mlir::isa<mlir::FloatType>(type))
    return mlir::arith::ConstantOp::create(b, loc, b.getFloatAttr(type, 0.0));
  return mlir::arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, 0));
}

/// Whether placeholder() can stand in for `type`.
inline bool hasPlaceholder(mlir::Type type) {
  return mlir::isa<mlir::RankedTensorType, mlir::IndexType, mlir::FloatType,
                   mlir::IntegerType>(type);
}

/// Whether `op`, a region branch in a key block's body, only computes: no memory effects, no
/// GEMM and no wait inside (tgpu-narrow-key-tail's two forms of the softmax). Such a branch
/// reads and yields registers that no wgmma in flight writes, so the body around it may be
/// reordered as if it were straight-line code; any other control flow would carry a wgmma's
/// results in flight across it.
inline bool isComputeBranch(mlir::Operation *op) {
  if (!mlir::isMemoryEffectFree(op))
    return false;
  bool gemm = op->walk([](mlir::Operation *inner) {
                  return mlir::isa<WgmmaOp, WgmmaWaitOp>(inner) ? mlir::WalkResult::interrupt()
                                                                : mlir::WalkResult::advance();
                }).wasInterrupted();
  return !gemm;
}

} // namespace tilefuse::tgpu::overlap

#endif // TILEFUSE_PASSES_GPU_LIB_OVERLAPUTILS_H
