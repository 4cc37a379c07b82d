//===- AssignLayouts.cpp - where every block of a tiled kernel lives ------===//
//
// Writes the layout of every block tensor of tiled `tile` IR into its type, from the roles the
// IR gives it, so that no later lowering infers a layout by chasing uses (as the first emitter's
// roleOf did):
//
//   * the result and accumulator of tile.block_dot, and the operand of tile.reduce and result
//     of tile.broadcast, are accumulators (#tgpu.mma_acc, or #tgpu.wgmma_acc with mma=wgmma);
//   * the result of tile.reduce and the operand of tile.broadcast are that accumulator's rows
//     (#tgpu.acc_rows);
//   * a 16-bit lhs of tile.block_dot (Q) is A-operand fragments in registers (#tgpu.operand_a),
//     or a shared tile with q-operand=shared, or where the dot reads it transposed, or where
//     another dot reads the same block as its rhs (a backward kernel's Q and dO: Q K^T and
//     dS^T Q); an f32 lhs (P) stays an accumulator, which the dot converts to A fragments in
//     place (the layouts put the same elements in the same registers, see #tgpu.operand_a),
//     or, read transposed (P^T dO), tile-to-tgpu writes into a shared tile first (ldmatrix.trans
//     reads it for mma.sync, wgmma's MN-major descriptor for mma=wgmma);
//   * a vector operand of tile.block_map (a per-row value: D of the backward) is the rows of
//     the accumulator its result is;
//   * the rhs of tile.block_dot (K, V) is a shared tile (#tgpu.shared), swizzled as the chosen
//     mma reads it: chunk_xor for ldmatrix, canonical_128b for wgmma's descriptors.
//
// Every other op with blocks (arith, math, tile.block_mask / block_score_mod, constants) gives
// its operands and results one layout, and the scf loops and branches give each carried value,
// its init, its yields and its result one layout. So the values fall into classes that must
// share a layout (a union-find), the roles above anchor them, and every class gets its anchor
// or a located error: two anchors disagree, or the dialect's verifier rejects the block's
// shape in that layout (the same check the types get when they are parsed). A class no role
// anchors (a block only loaded, computed on and stored, as the backward's dQ conversion) is
// an accumulator, or its rows if it is a vector: whatever layout it had, each thread would
// move the elements it holds, and the accumulator's is the one the rest of the kernel uses.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/GPULayouts.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUDialect.h"
#include "tilefuse/dialect/TileOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUASSIGNLAYOUTS
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

bool isBlock(Value v) { return isa<RankedTensorType>(v.getType()); }

/// The op a value comes from, for diagnostics: its defining op, or the op whose region
/// declares it (a loop's carried block).
Operation *ownerOf(Value v) {
  if (Operation *def = v.getDefiningOp())
    return def;
  return cast<BlockArgument>(v).getOwner()->getParentOp();
}

/// Values that must share a layout, as a union-find, with the layout a role asks of each class
/// and the op that asked first.
class LayoutClasses {
public:
  Value find(Value v) {
    auto it = parent.find(v);
    if (it == parent.end() || it->second == v)
      return v;
    Value root = find(it->second);
    parent[v] = root;
    return root;
  }
  void unite(Value a, Value b) {
    if (!isBlock(a) || !isBlock(b))
      return;
    members.insert(a);
    members.insert(b);
    Value ra = find(a), rb = find(b);
    if (ra != rb)
      parent[ra] = rb;
  }
  void add(Value v) {
    if (isBlock(v))
      members.insert(v);
  }
  /// Asks `layout` of `v`'s class for `role` (an op using or defining it).
  void anchor(Value v, Attribute layout, Operation *role) {
    add(v);
    anchors.push_back({v, layout, role});
  }

  struct Anchor {
    Value value;
    Attribute layout;
    Operation *role;
  };
  llvm::SetVector<Value> members;
  SmallVector<Anchor> anchors;

private:
  DenseMap<Value, Value> parent;
};

/// Ops whose blocks all share one layout: element by element, or per element with indices.
bool isElementwise(Operation *op) {
  return isa<tile::BlockMaskOp, tile::BlockScoreModOp, tile::BlockScoreModGradOp,
             arith::ConstantOp>(op) ||
         op->hasTrait<OpTrait::Elementwise>() ||
         isa<arith::ArithDialect, math::MathDialect>(op->getDialect());
}

struct AssignLayouts : public tilefuse::tgpu::impl::TGPUAssignLayoutsBase<AssignLayouts> {
  using Base::Base;

  /// The configuration this run lays out for (runOnOperation reads it).
  bool wgmma = false, qInShared = false;
  int64_t warpRows = 16;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    // The configuration: the module's tile.config, the options where it sets nothing
    // (tilefuse/dialect/KernelConfig.h).
    TileConfig options;
    options.rowsPerWarp = rowsPerWarp;
    for (auto [key, value] :
         {std::pair<StringRef, StringRef>{"mma", mma}, {"q-operand", qOperand}})
      if (llvm::Error error = options.set(key, value)) {
        kernel.emitError() << "tgpu-assign-layouts: " << llvm::toString(std::move(error));
        return signalPassFailure();
      }
    FailureOr<TileConfig> config = tile::configForPass(kernel, options);
    if (failed(config))
      return signalPassFailure();
    wgmma = config->mma == MmaKind::Wgmma;
    warpRows = *config->rowsPerWarp;
    qInShared = config->qOperand == QOperand::Shared;
    splitTensorConstants(kernel);
    if (failed(assign(kernel)))
      return signalPassFailure();
  }

  /// A tensor constant used by several ops gets one copy per use, since each use may ask
  /// another layout of it (a 64x64 zero can be a score block and a Q-shaped block). CSE folds
  /// the copies that end up with the same type back together.
  void splitTensorConstants(func::FuncOp kernel) {
    SmallVector<arith::ConstantOp> constants;
    kernel.walk([&](arith::ConstantOp c) {
      if (isa<RankedTensorType>(c.getType()) && !c->hasOneUse() && !c->use_empty())
        constants.push_back(c);
    });
    OpBuilder b(kernel.getContext());
    for (arith::ConstantOp c : constants) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : llvm::drop_begin(c->getUses()))
        uses.push_back(&use);
      for (OpOperand *use : uses) {
        b.setInsertionPoint(c);
        use->set(b.clone(*c)->getResult(0));
      }
    }
  }

  /// Br: the rows of every accumulator (block_dot results, reduced and broadcast blocks),
  /// which must agree: one CTA lays them all out on the same warps.
  FailureOr<int64_t> programRows(func::FuncOp kernel) {
    std::optional<int64_t> rows;
    Operation *first = nullptr;
    auto check = [&](Operation *op, Value accumulator) {
      int64_t here = cast<RankedTensorType>(accumulator.getType()).getDimSize(0);
      if (!rows) {
        rows = here;
        first = op;
        return WalkResult::advance();
      }
      if (here == *rows)
        return WalkResult::advance();
      InFlightDiagnostic diag = op->emitOpError()
                                << "accumulates " << here << " rows, where the kernel's other "
                                << "accumulators have " << *rows
                                << ": a CTA lays out one row count on its warps";
      diag.attachNote(first->getLoc()) << "an accumulator of " << *rows << " rows";
      return WalkResult::interrupt();
    };
    WalkResult walk = kernel.walk([&](Operation *op) {
      if (auto dot = dyn_cast<tile::BlockDotOp>(op))
        return check(op, dot.getResult());
      if (auto reduce = dyn_cast<tile::ReduceOp>(op))
        return check(op, reduce.getInput());
      if (auto broadcast = dyn_cast<tile::BroadcastOp>(op))
        return check(op, broadcast.getResult());
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    // A kernel that only moves blocks (the backward's dQ conversion): its blocks' rows.
    if (!rows)
      kernel.walk([&](Operation *op) {
        for (Type t : op->getResultTypes())
          if (auto block = dyn_cast<RankedTensorType>(t); block && block.getRank() == 2) {
            rows = block.getDimSize(0);
            return WalkResult::interrupt();
          }
        return WalkResult::advance();
      });
    if (!rows)
      return kernel.emitOpError() << "has no 2-D block: nothing decides where its blocks live";
    return *rows;
  }

  LogicalResult assign(func::FuncOp kernel) {
    MLIRContext *ctx = kernel.getContext();
    FailureOr<int64_t> rows = programRows(kernel);
    if (failed(rows))
      return failure();

    // The kernel's layouts, from the options and Br.
    Attribute accumulator, operandA;
    SharedSwizzle swizzle = wgmma ? SharedSwizzle::Canonical128B : SharedSwizzle::ChunkXor;
    if (wgmma) {
      if (warpRows != 16 || *rows % 64)
        return kernel.emitOpError()
               << "with mma=wgmma needs Br a multiple of 64 and rows-per-warp=16 (a warpgroup "
                  "computes 64 rows, 16 per warp), not Br = "
               << *rows << ", rows-per-warp=" << warpRows;
      accumulator = WgmmaAccumulatorLayoutAttr::get(ctx, *rows / 64);
      operandA = OperandALayoutAttr::get(ctx, *rows / 16, 16);
    } else {
      if (*rows % warpRows)
        return kernel.emitOpError() << "has accumulators of " << *rows << " rows, not a whole "
                                    << "number of warps of rows-per-warp=" << warpRows;
      auto acc = MmaAccumulatorLayoutAttr::getChecked([&] { return kernel.emitOpError(); }, ctx,
                                                      *rows / warpRows, warpRows);
      if (!acc)
        return failure();
      accumulator = acc;
      operandA = OperandALayoutAttr::get(ctx, *rows / warpRows, warpRows);
    }
    Attribute accRows = AccumulatorRowsLayoutAttr::get(ctx, accumulator);
    Attribute shared = SharedLayoutAttr::get(ctx, swizzle);

    // Blocks some dot reads as its rhs: in shared memory, so a dot that takes one as its lhs
    // reads it there too.
    DenseSet<Value> rhsBlocks;
    kernel.walk([&](tile::BlockDotOp dot) { rhsBlocks.insert(dot.getRhs()); });

    // Classes, and the roles that anchor them.
    LayoutClasses classes;
    WalkResult walk = kernel.walk([&](Operation *op) -> WalkResult {
      if (auto dot = dyn_cast<tile::BlockDotOp>(op)) {
        classes.anchor(dot.getResult(), accumulator, op);
        if (Value acc = dot.getAcc())
          classes.anchor(acc, accumulator, op);
        Type lhsElement = dot.getLhs().getType().getElementType();
        bool lhsShared =
            qInShared || dot.getTransposeLhs() || rhsBlocks.contains(dot.getLhs());
        Attribute lhs = lhsElement.isF32() ? accumulator : lhsShared ? shared : operandA;
        classes.anchor(dot.getLhs(), lhs, op);
        classes.anchor(dot.getRhs(), shared, op);
        return WalkResult::advance();
      }
      if (auto reduce = dyn_cast<tile::ReduceOp>(op)) {
        classes.anchor(reduce.getInput(), accumulator, op);
        classes.anchor(reduce.getResult(), accRows, op);
        return WalkResult::advance();
      }
      if (auto map = dyn_cast<tile::BlockMapOp>(op)) {
        // Blocks share the result's layout; a vector is its rows, repeated along the columns.
        for (Value input : map.getInputs()) {
          if (cast<RankedTensorType>(input.getType()).getRank() == 1)
            classes.anchor(input, accRows, op);
          else
            classes.unite(input, map.getResult());
        }
        classes.add(map.getResult());
        return WalkResult::advance();
      }
      if (auto broadcast = dyn_cast<tile::BroadcastOp>(op)) {
        classes.anchor(broadcast.getInput(), accRows, op);
        classes.anchor(broadcast.getResult(), accumulator, op);
        return WalkResult::advance();
      }
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
        for (auto [init, arg, yielded, result] :
             llvm::zip_equal(loop.getInitArgs(), loop.getRegionIterArgs(), yield.getResults(),
                             loop.getResults())) {
          classes.unite(init, arg);
          classes.unite(arg, yielded);
          classes.unite(arg, result);
        }
        return WalkResult::advance();
      }
      if (auto branch = dyn_cast<scf::IfOp>(op)) {
        for (Region *region : {&branch.getThenRegion(), &branch.getElseRegion()})
          if (!region->empty())
            for (auto [yielded, result] : llvm::zip_equal(
                     region->front().getTerminator()->getOperands(), branch.getResults()))
              classes.unite(yielded, result);
        return WalkResult::advance();
      }
      if (auto loop = dyn_cast<scf::WhileOp>(op)) {
        for (auto [init, arg, yielded] : llvm::zip_equal(loop.getInits(), loop.getBeforeArguments(),
                                                         loop.getYieldOp().getResults())) {
          classes.unite(init, arg);
          classes.unite(arg, yielded);
        }
        for (auto [forwarded, arg, result] : llvm::zip_equal(
                 loop.getConditionOp().getArgs(), loop.getAfterArguments(), loop.getResults())) {
          classes.unite(forwarded, arg);
          classes.unite(arg, result);
        }
        return WalkResult::advance();
      }
      // Terminators of the loops and branches above (their blocks joined there), and ops
      // that carry blocks in place.
      if (isa<scf::YieldOp, scf::ConditionOp, func::ReturnOp, tile::BlockLoadOp,
              tile::BlockStoreOp, tile::BlockAtomicAddOp>(op)) {
        for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
          classes.add(v);
        return WalkResult::advance();
      }
      SmallVector<Value> blocks;
      for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
        if (isBlock(v))
          blocks.push_back(v);
      if (blocks.empty())
        return WalkResult::advance();
      if (!isElementwise(op))
        return op->emitOpError() << "has blocks, but tgpu-assign-layouts knows neither its "
                                    "role nor that it works element by element";
      for (Value v : blocks)
        classes.unite(blocks.front(), v);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    // Each class takes its first anchor; another anchor that disagrees is an error.
    DenseMap<Value, LayoutClasses::Anchor> layoutOf;
    for (const LayoutClasses::Anchor &a : classes.anchors) {
      auto [it, inserted] = layoutOf.try_emplace(classes.find(a.value), a);
      if (inserted || it->second.layout == a.layout)
        continue;
      InFlightDiagnostic diag = a.role->emitOpError()
                                << "needs a block in " << a.layout << ", but it is also in "
                                << it->second.layout;
      diag.attachNote(it->second.role->getLoc()) << "which this op needs";
      return failure();
    }

    // Every block gets its class's layout, checked by the dialect's own verifiers.
    for (Value v : classes.members) {
      auto type = cast<RankedTensorType>(v.getType());
      auto it = layoutOf.find(classes.find(v));
      Attribute layout = it != layoutOf.end()      ? it->second.layout
                         : type.getRank() == 1 ? accRows
                                               : accumulator;
      auto emitError = [&] { return ownerOf(v)->emitOpError(); };
      if (auto sharedLayout = dyn_cast<SharedLayoutAttr>(layout)) {
        unsigned bits = type.getElementTypeBitWidth();
        std::string why = type.getRank() != 2 || type.hasStaticShape() == false || bits % 8
                              ? "a shared tile is a static 2-D block of whole-byte elements"
                              : sharedTileError({sharedLayout.getSwizzle(), type.getDimSize(0),
                                                 type.getDimSize(1), bits / 8});
        if (!why.empty())
          return emitError() << "defines " << type << " as a shared tile in " << layout << ": "
                             << why;
      } else if (failed(cast<VerifiableTensorEncoding>(layout).verifyEncoding(
                     type.getShape(), type.getElementType(), emitError))) {
        return failure();
      }
      auto laidOut = RankedTensorType::get(type.getShape(), type.getElementType(), layout);
      v.setType(laidOut);
      // A constant's value carries its type too.
      if (auto constant = v.getDefiningOp<arith::ConstantOp>())
        constant.setValueAttr(cast<DenseElementsAttr>(constant.getValue()).reshape(laidOut));
    }

    // Shared tiles are read only by tile.block_dot (and carried by loops): no register op
    // computes on them.
    walk = kernel.walk([&](Operation *op) {
      if (!isElementwise(op))
        return WalkResult::advance();
      for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
        if (auto type = dyn_cast<RankedTensorType>(v.getType());
            type && isa_and_nonnull<SharedLayoutAttr>(type.getEncoding())) {
          op->emitOpError() << "computes on a block in shared memory (" << type
                            << "); a shared tile is only an operand of tile.block_dot";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    // Blocks passed in or returned change the signature with them.
    Block &entry = kernel.getBody().front();
    kernel.setType(
        FunctionType::get(ctx, entry.getArgumentTypes(), entry.getTerminator()->getOperandTypes()));
    return success();
  }
};

} // namespace
