//===- TileCheckWrittenForm.cpp - the front door's checks of a kernel -----===//
//
// Op verifiers accept some IR that later code cannot take: `memref.dim %Q, %c` with a constant
// %c = -3 verifies (upstream checks only index < rank), and then a canonicalization pattern of
// the GPU lowering reads dimension -3 of a type and faults; a view whose head dimension is 0
// verifies, and the GPU lowering divides by it. Such input is a kernel author's typo, so it is
// answered here, at its file:line:col, before any pass runs.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Analysis/DataFlow/ConstantPropagationAnalysis.h"
#include "mlir/Analysis/DataFlow/DeadCodeAnalysis.h"
#include "mlir/Analysis/DataFlow/IntegerRangeAnalysis.h"
#include "mlir/Analysis/DataFlowFramework.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ShapedOpInterfaces.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILECHECKWRITTENFORM
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;

/// A dimension index of memref.dim / tensor.dim that is known before anything runs (a constant,
/// or arithmetic on constants that a folder would turn into one: `solver`'s integer ranges)
/// names a dimension of its operand: 0 <= index < rank.
static LogicalResult checkDimIndex(ShapedDimOpInterface dimOp, DataFlowSolver &solver) {
  auto shaped = dyn_cast<ShapedType>(dimOp.getShapedValue().getType());
  if (!shaped || !shaped.hasRank())
    return success();
  Value dimension = llvm::dyn_cast_if_present<Value>(dimOp.getDimension());
  if (!dimension)
    return success();
  auto *range = solver.lookupState<dataflow::IntegerValueRangeLattice>(dimension);
  if (!range || range->getValue().isUninitialized())
    return success();
  const ConstantIntRanges &index = range->getValue().getValue();
  int64_t rank = shaped.getRank();
  // Only an index that is out of range whatever the run-time values is an error.
  if (index.smax().isNegative() || index.smin().sge(rank)) {
    InFlightDiagnostic diag = dimOp->emitOpError("dimension index ");
    if (std::optional<APInt> value = index.getConstantValue())
      diag << value->getSExtValue();
    else
      diag << "(between " << index.smin().getSExtValue() << " and " << index.smax().getSExtValue()
           << ")";
    return diag << " is out of range for its rank-" << rank << " operand " << shaped << " (0 to "
                << rank - 1 << ")";
  }
  return success();
}

/// Views and tiles have no empty static dimension: the lowerings divide by sizes (a head
/// dimension of 0 is a division by zero in the GPU lowering).
static LogicalResult checkStaticSizes(Type type, llvm::function_ref<InFlightDiagnostic()> emit) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasRank())
    return success();
  for (auto [i, size] : llvm::enumerate(shaped.getShape()))
    if (size == 0)
      return emit() << "dimension " << i << " of " << shaped
                    << " is 0: a view or tile cannot be empty";
  return success();
}

LogicalResult tilefuse::checkWrittenForm(Operation *root) {
  // The first empty size only: the ops that use an empty view would repeat it.
  WalkResult empty = root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto fn = dyn_cast<func::FuncOp>(op)) {
      for (BlockArgument arg : fn.getArguments())
        if (failed(checkStaticSizes(arg.getType(), [&] {
              return emitError(arg.getLoc())
                     << "argument " << arg.getArgNumber() << " of @" << fn.getSymName() << ": ";
            })))
          return WalkResult::interrupt();
      return WalkResult::advance();
    }
    if (!isa<tile::TileDialect>(op->getDialect()))
      return WalkResult::advance();
    for (Type type : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
      if (failed(checkStaticSizes(type, [&] { return op->emitOpError(); })))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (empty.wasInterrupted())
    return failure();

  bool ok = true;
  // Integer ranges of every index value, constants folded through arith.
  DataFlowSolver solver;
  solver.load<dataflow::DeadCodeAnalysis>();
  solver.load<dataflow::SparseConstantPropagation>();
  solver.load<dataflow::IntegerRangeAnalysis>();
  if (failed(solver.initializeAndRun(root)))
    return failure();
  root->walk([&](ShapedDimOpInterface dimOp) {
    if (failed(checkDimIndex(dimOp, solver)))
      ok = false;
  });
  return success(ok);
}

namespace {
struct TileCheckWrittenForm
    : public tilefuse::impl::TileCheckWrittenFormBase<TileCheckWrittenForm> {
  void runOnOperation() override {
    if (failed(tilefuse::checkWrittenForm(getOperation())))
      signalPassFailure();
  }
};
} // namespace
