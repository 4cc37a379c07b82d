//===- TilePagedKV.cpp - keys and values from a paged cache ----------------===//
//
// Level 1 -> level 1: a written-form kernel's K and V loads read a paged cache instead of
// contiguous B x Hkv x N x D views (vLLM's PagedAttention layout). Nothing else changes: the
// score and mask regions see logical key indices (0 .. lens[b]) as before, and tile-tiling
// turns the loads' `pages` / `lengths` into paged block loads and a per-batch key loop.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "tilefuse/dialect/TileOps.h"
#include "llvm/ADT/SetVector.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILEPAGEDKV
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

struct TilePagedKVPass : public tilefuse::impl::TilePagedKVBase<TilePagedKVPass> {
  using TilePagedKVBase::TilePagedKVBase;

  /// A fixed page size goes into the caches' types, where every lowering reads it.
  LogicalResult fixPageSize(func::FuncOp func, ArrayRef<LoadOp> loads) {
    if (pageSize < 0)
      return func.emitError() << "tile-paged-kv: page-size must be positive (or 0: any), not "
                              << pageSize;
    if (pageSize == 0)
      return success();
    llvm::SmallDenseSet<unsigned, 2> caches;
    for (LoadOp load : loads)
      caches.insert(cast<BlockArgument>(load.getView()).getArgNumber());
    SmallVector<Type> inputs(func.getArgumentTypes());
    for (unsigned i : caches) {
      auto type = cast<MemRefType>(inputs[i]);
      SmallVector<int64_t> shape(type.getShape());
      if (!ShapedType::isDynamic(shape[2]) && shape[2] != pageSize)
        return func.emitError() << "tile-paged-kv: argument " << i << " declares " << shape[2]
                                << " rows a page, not page-size " << pageSize;
      shape[2] = pageSize;
      inputs[i] = MemRefType::get(shape, type.getElementType(), type.getLayout(),
                                  type.getMemorySpace());
      func.getArgument(i).setType(inputs[i]);
    }
    func.setType(FunctionType::get(func.getContext(), inputs, func.getResultTypes()));
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (func->hasAttr(kPagedKVAttr))
      return;
    // The key and value loads: what a dot takes as its right operand.
    llvm::SetVector<LoadOp> loads;
    func.walk([&](DotOp dot) {
      if (auto load = dot.getRhs().getDefiningOp<LoadOp>())
        loads.insert(load);
    });
    if (loads.empty()) {
      func.emitError("tile-paged-kv: no tile.load feeds a tile.dot's right operand: there are "
                     "no keys or values to page");
      return signalPassFailure();
    }
    // Written paged by hand: every key/value load pages through the two trailing arguments.
    unsigned arguments = func.getNumArguments();
    if (llvm::all_of(loads, [&](LoadOp load) {
          auto table = dyn_cast_or_null<BlockArgument>(load.getPageTable());
          auto lengths = dyn_cast_or_null<BlockArgument>(load.getKvLengths());
          return table && lengths && arguments >= 2 &&
                 table.getArgNumber() == arguments - 2 &&
                 lengths.getArgNumber() == arguments - 1;
        })) {
      func->setAttr(kPagedKVAttr, UnitAttr::get(&getContext()));
      if (failed(fixPageSize(func, loads.getArrayRef())))
        return signalPassFailure();
      return;
    }
    for (LoadOp load : loads) {
      if (load.isPaged()) {
        load.emitOpError("tile-paged-kv: a kernel written paged pages every key/value load "
                         "through its last two arguments (the page table, then the lengths)");
        return signalPassFailure();
      }
      if (!isa<BlockArgument>(load.getView()) || load.getView().getType().getRank() != 4) {
        load.emitOpError("tile-paged-kv: a key or value load must read a rank-4 kernel "
                         "argument");
        return signalPassFailure();
      }
      // The view becomes a cache of pages: any other reader would see its pages, not the
      // sequence it read before.
      for (Operation *user : load.getView().getUsers())
        if (!isa<LoadOp>(user) || !loads.contains(cast<LoadOp>(user))) {
          InFlightDiagnostic diag =
              user->emitOpError("tile-paged-kv: uses the key/value view ")
              << cast<BlockArgument>(load.getView()).getArgNumber()
              << " other than by its load; paged, the view is a cache of pages (pages x heads "
                 "x page rows x D), not B x Hkv x N x D";
          diag.attachNote(load.getLoc()) << "the paged load";
          return signalPassFailure();
        }
    }

    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    int64_t dyn = ShapedType::kDynamic;
    auto tableType = MemRefType::get({dyn, dyn}, b.getI32Type(),
                                     StridedLayoutAttr::get(ctx, 0, {dyn, 1}));
    auto lengthsType = MemRefType::get({dyn}, b.getI32Type());
    unsigned first = func.getNumArguments();
    if (failed(func.insertArguments({first, first}, {tableType, lengthsType},
                                    {DictionaryAttr::get(ctx), DictionaryAttr::get(ctx)},
                                    {func.getLoc(), func.getLoc()}))) {
      func.emitError("tile-paged-kv: cannot add the page table and lengths arguments");
      return signalPassFailure();
    }
    Value table = func.getArgument(first), lengths = func.getArgument(first + 1);
    for (LoadOp load : loads) {
      b.setInsertionPoint(load);
      auto paged = LoadOp::create(b, load.getLoc(), load.getType(), load.getView(), table,
                                  lengths);
      load.getResult().replaceAllUsesWith(paged.getResult());
      load.erase();
    }
    SmallVector<LoadOp> paged;
    func.walk([&](LoadOp load) {
      if (load.isPaged())
        paged.push_back(load);
    });
    if (failed(fixPageSize(func, paged)))
      return signalPassFailure();
    // The launch ABI's paged form (tilefuse/runtime/device/LaunchAbi.h) follows from this mark.
    func->setAttr(kPagedKVAttr, b.getUnitAttr());
  }
};

} // namespace
