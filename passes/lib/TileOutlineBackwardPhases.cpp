//===- TileOutlineBackwardPhases.cpp - one kernel per backward grid -------===//
//
// tile-tiling-backward leaves the backward as one function of three grids (preprocess,
// key_gradients, query_gradients) and function-level workspaces. The CPU backend runs that
// function as it is; a GPU runs each grid as its own launch, in order, with the workspaces in
// memory the launcher owns. This pass makes that split in the IR: each grid becomes a function
// @NAME_PHASE of its own, marked tile.backward_phase, whose arguments are the backward's views
// (Q, K, V, O, dO, LSE, dQ, dK, dV) followed by the workspaces (D = rowsum(dO o O), B x H x M
// f32, then the dQ accumulator, B x H x M x D f32), as the launch ABI's backward kernels
// (tilefuse/runtime/device/LaunchAbi.h) take them. A deterministic backward has no accumulator;
// its kernels take the argument all the same (unread), so every backward kernel has one
// signature. Each function keeps the scalar code the grids share (sizes, constants); the
// canonicalizer drops what one grid does not use.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILEOUTLINEBACKWARDPHASES
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;

namespace {

/// The workspaces in the launch ABI's order.
constexpr llvm::StringLiteral kWorkspaceOrder[] = {"row_reduce", "dq_accumulator"};

/// A view type of `rank` dynamic sizes and strides, the innermost contiguous, with `cols` as
/// the static innermost size of a 4-D one: what the launch ABI hands a kernel.
MemRefType workspaceViewType(MLIRContext *ctx, int64_t rank, int64_t cols) {
  SmallVector<int64_t> shape(rank, ShapedType::kDynamic);
  if (rank == 4)
    shape.back() = cols;
  SmallVector<int64_t> strides(rank, ShapedType::kDynamic);
  strides.back() = 1;
  return MemRefType::get(shape, Float32Type::get(ctx),
                         StridedLayoutAttr::get(ctx, ShapedType::kDynamic, strides));
}

struct TileOutlineBackwardPhasesPass
    : public tilefuse::impl::TileOutlineBackwardPhasesBase<TileOutlineBackwardPhasesPass> {
  using TileOutlineBackwardPhasesBase::TileOutlineBackwardPhasesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> backwards;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal() && llvm::any_of(fn.getBody().front(), [](Operation &op) {
            return op.hasAttr(kBackwardPhaseAttr);
          }))
        backwards.push_back(fn);
    for (func::FuncOp fn : backwards)
      if (failed(outline(fn)))
        return signalPassFailure();
  }

  LogicalResult outline(func::FuncOp fn) {
    MLIRContext *ctx = fn.getContext();
    Block &body = fn.getBody().front();
    if (fn.getNumArguments() != 9 || !fn.getResultTypes().empty())
      return fn.emitOpError("a tiled backward takes the nine views (Q, K, V, O, dO, LSE, dQ, "
                            "dK, dV) and returns nothing");
    // The workspaces: one D, at most one dQ accumulator.
    SmallVector<memref::AllocOp> allocs(std::size(kWorkspaceOrder));
    for (auto alloc : body.getOps<memref::AllocOp>()) {
      auto kind = alloc->getAttrOfType<StringAttr>(kWorkspaceAttr);
      const auto *slot = kind ? llvm::find(kWorkspaceOrder, kind.getValue())
                              : std::end(kWorkspaceOrder);
      if (slot == std::end(kWorkspaceOrder))
        return alloc.emitOpError("is not a workspace the backward's launch provides (a "
                                 "row_reduce or a dq_accumulator tile.workspace)");
      memref::AllocOp &held = allocs[slot - std::begin(kWorkspaceOrder)];
      if (held) {
        InFlightDiagnostic diag = alloc.emitOpError()
                                  << "is a second " << kind << " workspace; the launch "
                                  << "provides one";
        diag.attachNote(held.getLoc()) << "the first";
        return failure();
      }
      held = alloc;
    }
    if (!allocs[0])
      return fn.emitOpError("has no row_reduce workspace (D = rowsum(dO o O)): not a tiled "
                            "backward");
    // The query views' head dimension sizes the accumulator.
    int64_t cols = cast<MemRefType>(fn.getArgumentTypes()[0]).getDimSize(3);
    SmallVector<Type> workspaceTypes = {workspaceViewType(ctx, 3, cols),
                                        workspaceViewType(ctx, 4, cols)};

    SmallVector<scf::ForallOp> grids;
    for (auto grid : body.getOps<scf::ForallOp>())
      if (grid->hasAttr(kBackwardPhaseAttr))
        grids.push_back(grid);

    SymbolTable symbols(fn->getParentOfType<ModuleOp>());
    OpBuilder b(fn);
    for (scf::ForallOp grid : grids) {
      StringRef phase = grid->getAttrOfType<StringAttr>(kBackwardPhaseAttr).getValue();
      auto kernel = cast<func::FuncOp>(b.clone(*fn));
      kernel.setSymName((fn.getSymName() + "_" + phase).str());
      kernel->setAttr(kBackwardPhaseAttr, b.getStringAttr(phase));
      Block &entry = kernel.getBody().front();
      // The workspaces become arguments (through the casts that forget static sizes), and
      // the other grids go.
      SmallVector<BlockArgument> workspaceArgs;
      for (Type t : workspaceTypes)
        workspaceArgs.push_back(entry.addArgument(t, kernel.getLoc()));
      for (Operation &op : llvm::make_early_inc_range(entry)) {
        if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
          auto kind = alloc->getAttrOfType<StringAttr>(kWorkspaceAttr).getValue();
          Value arg = workspaceArgs[llvm::find(kWorkspaceOrder, kind) - std::begin(kWorkspaceOrder)];
          for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
            if (auto cast = dyn_cast<memref::CastOp>(user)) {
              cast.getResult().replaceAllUsesWith(arg);
              cast.erase();
            }
          alloc.getResult().replaceAllUsesWith(arg);
          alloc.erase();
          continue;
        }
        if (auto other = dyn_cast<scf::ForallOp>(op);
            other && other->hasAttr(kBackwardPhaseAttr) &&
            other->getAttr(kBackwardPhaseAttr) != grid->getAttr(kBackwardPhaseAttr))
          other.erase();
      }
      kernel.setType(FunctionType::get(ctx, entry.getArgumentTypes(), {}));
      symbols.insert(kernel);
    }
    fn.erase();
    return success();
  }
};

} // namespace
