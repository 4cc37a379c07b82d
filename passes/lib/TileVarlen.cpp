//===- TileVarlen.cpp - a packed batch of variable-length sequences --------===//
//
// Level 1 -> level 1: a written-form kernel runs on a packed batch (the THD layout of
// FlashAttention's varlen API): its loads and stores address the views through cumulative
// sequence offsets, the queries' (Q, O, LSE) and the keys' (K, V). Nothing else changes: the
// score and mask regions see indices within each sequence, and tile-tiling turns `sequences`
// into per-program row offsets and bounds, so masks and pruning work per sequence.
//
// Over a paged K/V cache (tile-paged-kv ran first: chunked prefill, or prefill and decode
// mixed in one batch) only the queries pack: the key loads stay paged, each sequence's keys
// are its kv_lengths rows of its pages, and the key offsets argument is there for the launch
// ABI's one varlen form but not read.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "tilefuse/dialect/TileOps.h"
#include "llvm/ADT/SetVector.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILEVARLEN
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// The views' dimensions that keep their meaning in a packed batch: heads (1) and the head
/// dimension (3). The batch dimension (0) counts packed rows instead of sequences, and the
/// rows (2) become the longest sequence's, which no region may mistake for its own length.
bool keepsMeaning(memref::DimOp dim) {
  std::optional<int64_t> index = getConstantIntValue(dim.getIndex());
  return index && (*index == 1 || *index == 3);
}

struct TileVarlenPass : public tilefuse::impl::TileVarlenBase<TileVarlenPass> {
  using TileVarlenBase::TileVarlenBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || func->hasAttr(kVarlenAttr))
      return;
    // Paged (tile-paged-kv ran first), the keys are the cache's pages: only the queries pack.
    bool paged = func->hasAttr(kPagedKVAttr);
    // Keys and values are what a tile.dot takes as its right operand; every other load is
    // per query row (Q), as every store is (O, LSE).
    llvm::SetVector<LoadOp> keyLoads, queryLoads;
    SmallVector<StoreOp> stores;
    bool bad = false;
    func.walk([&](Operation *op) {
      if (auto load = dyn_cast<LoadOp>(op)) {
        bool rhs = false, other = false;
        for (Operation *user : load->getUsers()) {
          auto dot = dyn_cast<DotOp>(user);
          if (dot && dot.getRhs() == load.getResult())
            rhs = true;
          if (!dot || dot.getLhs() == load.getResult())
            other = true;
        }
        if (rhs && other) {
          load.emitOpError("tile-varlen: a load read both as keys (a tile.dot's right "
                           "operand) and as queries cannot take one sequence offset");
          bad = true;
        }
        (rhs ? keyLoads : queryLoads).insert(load);
      } else if (auto store = dyn_cast<StoreOp>(op)) {
        stores.push_back(store);
      }
    });
    if (bad)
      return signalPassFailure();
    if (keyLoads.empty() || queryLoads.empty()) {
      func.emitError("tile-varlen: no query and key loads (a tile.dot of two tile.load "
                     "results): nothing to pack");
      return signalPassFailure();
    }

    // Written varlen by hand: every access packs through the two trailing arguments.
    unsigned arguments = func.getNumArguments();
    auto isArgument = [&](Value v, unsigned fromEnd) {
      auto arg = dyn_cast_or_null<BlockArgument>(v);
      return arg && arguments >= 2 && arg.getArgNumber() == arguments - fromEnd;
    };
    auto packedKeys = [&](LoadOp l) {
      return paged ? l.isPaged() && !l.getSequences() : isArgument(l.getSequences(), 1);
    };
    if (llvm::all_of(queryLoads, [&](LoadOp l) { return isArgument(l.getSequences(), 2); }) &&
        llvm::all_of(keyLoads, packedKeys) &&
        llvm::all_of(stores, [&](StoreOp s) { return isArgument(s.getSequences(), 2); })) {
      func->setAttr(kVarlenAttr, UnitAttr::get(&getContext()));
      return;
    }

    // Every view is a kernel argument read or written by its accesses alone: packed, the
    // view's rows are a sequence's only through the offsets.
    llvm::SmallPtrSet<Operation *, 8> accesses;
    SmallVector<Operation *> all;
    for (LoadOp load : queryLoads)
      all.push_back(load);
    if (!paged)
      for (LoadOp load : keyLoads)
        all.push_back(load);
    for (StoreOp store : stores)
      all.push_back(store);
    for (LoadOp load : keyLoads)
      if (paged && !load.isPaged()) {
        load.emitOpError("tile-varlen: a paged kernel's key and value loads are paged");
        return signalPassFailure();
      }
    for (Operation *op : all) {
      accesses.insert(op);
      if (auto load = dyn_cast<LoadOp>(op); load && (load.getSequences() || load.isPaged())) {
        load.emitOpError("tile-varlen: a kernel written varlen packs every load and store "
                         "through its last two arguments (the query offsets, then the key "
                         "offsets)");
        return signalPassFailure();
      }
      if (auto store = dyn_cast<StoreOp>(op); store && store.getSequences()) {
        store.emitOpError("tile-varlen: a kernel written varlen packs every load and store "
                          "through its last two arguments (the query offsets, then the key "
                          "offsets)");
        return signalPassFailure();
      }
    }
    for (Operation *op : all) {
      Value view = isa<LoadOp>(op) ? cast<LoadOp>(op).getView() : cast<StoreOp>(op).getView();
      if (!isa<BlockArgument>(view)) {
        op->emitOpError("tile-varlen: a packed view must be a kernel argument");
        return signalPassFailure();
      }
      if (isa<LoadOp>(op) && cast<MemRefType>(view.getType()).getRank() != 4) {
        op->emitOpError("tile-varlen: a packed load reads a rank-4 B x H x L x D view");
        return signalPassFailure();
      }
      for (Operation *user : view.getUsers()) {
        if (accesses.contains(user))
          continue;
        if (auto dim = dyn_cast<memref::DimOp>(user); dim && keepsMeaning(dim))
          continue;
        InFlightDiagnostic diag =
            user->emitOpError("tile-varlen: uses view ")
            << cast<BlockArgument>(view).getArgNumber()
            << " other than by its loads, stores and its head or head-dimension sizes; packed, "
               "its batch size counts rows and its rows are the longest sequence's";
        diag.attachNote(op->getLoc()) << "the packed access";
        return signalPassFailure();
      }
    }

    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    auto offsetsType = MemRefType::get({ShapedType::kDynamic}, b.getI32Type());
    unsigned first = func.getNumArguments();
    if (failed(func.insertArguments({first, first}, {offsetsType, offsetsType},
                                    {DictionaryAttr::get(ctx), DictionaryAttr::get(ctx)},
                                    {func.getLoc(), func.getLoc()}))) {
      func.emitError("tile-varlen: cannot add the sequence offsets arguments");
      return signalPassFailure();
    }
    Value queryOffsets = func.getArgument(first), keyOffsets = func.getArgument(first + 1);
    auto pack = [&](LoadOp load, Value offsets) {
      b.setInsertionPoint(load);
      auto packed = LoadOp::create(b, load.getLoc(), load.getType(), load.getView(), Value(),
                                   Value(), offsets);
      load.getResult().replaceAllUsesWith(packed.getResult());
      load.erase();
    };
    for (LoadOp load : queryLoads)
      pack(load, queryOffsets);
    if (!paged)
      for (LoadOp load : keyLoads)
        pack(load, keyOffsets);
    for (StoreOp store : stores) {
      b.setInsertionPoint(store);
      StoreOp::create(b, store.getLoc(), store.getValue(), store.getView(), queryOffsets);
      store.erase();
    }
    // The launch ABI's varlen form (tilefuse/runtime/device/LaunchAbi.h) follows from this mark.
    func->setAttr(kVarlenAttr, b.getUnitAttr());
  }
};

} // namespace
