//===- F64Scalars.cpp - scalar code of the written form, promoted to f64 --===//
#include "F64Scalars.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;

Type tilefuse::cpu::promoteToF64(Type t) {
  return t.isF32() ? Float64Type::get(t.getContext()) : t;
}

MemRefType tilefuse::cpu::f64ViewType(MemRefType t) {
  int64_t rank = t.getRank();
  auto layout = StridedLayoutAttr::get(t.getContext(), ShapedType::kDynamic,
                                       SmallVector<int64_t>(rank, ShapedType::kDynamic));
  return MemRefType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic),
                         Float64Type::get(t.getContext()), layout);
}

LogicalResult tilefuse::cpu::cloneScalarInF64(OpBuilder &b, Operation &op, IRMapping &m) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Type f64 = Float64Type::get(ctx);
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    if (auto fa = dyn_cast<FloatAttr>(c.getValue()); fa && fa.getType().isF32()) {
      m.map(c.getResult(),
            arith::ConstantOp::create(b, loc, f64, b.getFloatAttr(f64, fa.getValueAsDouble())));
      return success();
    }
  }
  if (isa<arith::ExtFOp, arith::TruncFOp>(op)) {
    Value in = m.lookupOrDefault(op.getOperand(0));
    Type to = promoteToF64(op.getResult(0).getType());
    Type from = in.getType();
    if (from == to)
      m.map(op.getResult(0), in);
    else if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
      m.map(op.getResult(0), arith::ExtFOp::create(b, loc, to, in));
    else
      m.map(op.getResult(0), arith::TruncFOp::create(b, loc, to, in));
    return success();
  }
  if (op.getNumRegions() != 0)
    return op.emitOpError("has regions, which the float64 reference does not evaluate inside "
                          "a score or mask region; use arith.select");
  Operation *clone = b.clone(op, m);
  for (OpResult result : clone->getResults())
    result.setType(promoteToF64(result.getType()));
  // The verifier's complaint about the f64 clone becomes part of one error at the original op.
  std::string why;
  LogicalResult verified = success();
  {
    ScopedDiagnosticHandler capture(ctx, [&](Diagnostic &diag) {
      if (why.empty())
        why = diag.str();
      return success();
    });
    verified = verify(clone);
  }
  if (failed(verified)) {
    clone->erase();
    return op.emitOpError("cannot be evaluated in f64 by the float64 reference (its f32 "
                          "arithmetic is promoted to f64: ")
           << why << ")";
  }
  return success();
}

Value tilefuse::cpu::f64Constant(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF64Type(), b.getF64FloatAttr(v));
}

Value tilefuse::cpu::reduceOver(OpBuilder &b, Location loc, Value length, Value init,
                                function_ref<Value(OpBuilder &, Value, Value)> step) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(b, loc, zero, length, one, ValueRange{init},
                                 [&](OpBuilder &nb, Location, Value j, ValueRange acc) {
                                   scf::YieldOp::create(nb, loc, step(nb, acc[0], j));
                                 });
  return loop.getResult(0);
}

FailureOr<Value> tilefuse::cpu::scaleFactorInF64(OpBuilder &b, tile::ScaleOp scale,
                                                 Value contraction) {
  Location loc = scale.getLoc();
  if (scale.getFactor())
    return f64Constant(b, loc, scale.getFactor()->convertToDouble());
  if (!contraction)
    return scale.emitOpError("the float64 reference needs the scores of a tile.dot to take "
                             "1/sqrt(D) of");
  Value d = arith::IndexCastOp::create(b, loc, b.getI64Type(), contraction);
  Value df = arith::SIToFPOp::create(b, loc, b.getF64Type(), d);
  return arith::DivFOp::create(b, loc, f64Constant(b, loc, 1.0),
                               math::SqrtOp::create(b, loc, df))
      .getResult();
}

LogicalResult tilefuse::cpu::checkScalarOpOfWrittenForm(Operation &op) {
  auto isTensor = [](Type t) { return isa<TensorType>(t); };
  if (llvm::any_of(op.getOperandTypes(), isTensor) ||
      llvm::any_of(op.getResultTypes(), isTensor))
    return op.emitOpError("works on whole tensors, which the float64 reference cannot "
                          "evaluate: only tile ops may");
  if (llvm::any_of(op.getResultTypes(), [](Type t) { return isa<MemRefType>(t); }))
    return op.emitOpError("makes a view, which the float64 reference cannot evaluate: "
                          "tile.load the kernel's arguments directly");
  return success();
}
