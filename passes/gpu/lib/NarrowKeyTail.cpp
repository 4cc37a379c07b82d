//===- NarrowKeyTail.cpp - a partial last key block's softmax on its first columns ===//
//
// A key length that Bc does not divide leaves a last key block with fewer keys than columns:
// at d128, N = 4096, Bc = 176 it holds 48. The masked body still runs the mask and the softmax
// on all 176 columns, and since the softmax's instructions bound the key loop that block costs
// 1.4 full blocks by the thirtieth session's probe (narrowed, the kernel measured +0.9% there,
// +0.4-1.2% from 4k at d96-d192: docs/perf.md, thirty-eighth session). With key_tail=N (the
// module's tile.config, or the `width` option), the masked body of each key loop branches on
// whether every key from column N on is past the key bound:
//
//   S = Q·Kᵀ (all Bc columns, as before)
//   (stats, P) = scf.if (key0 + N >= bound) {
//     the mask and softmax on tgpu.leading_columns(S) (N columns); P padded back to Bc
//     columns with zeros (tgpu.pad_columns), which add nothing to P·V
//   } else {
//     the mask and softmax as they were
//   }
//   O = alpha·O + P·V (as before)
//
// key0 and bound are the key block's copy's first row and bound (the tgpu.async_copy that
// filled the buffer Q·Kᵀ reads), so a varlen kernel's per-sequence length counts too. Only the
// softmax moves into the branch: the GEMMs, the copies and the P·V stay where they were, so the
// passes after this one (the ring, the warp roles, the rotation, ping-pong) see the key block
// they saw, with one more branch of straight-line code in its softmax.
//
// The softmax is the scores' forward slice up to P's tgpu.pack_operand_a: ops on key-indexed
// blocks (the scores and what elementwise ops, masks and score mods make of them, with the
// splat constants and row broadcasts they combine with) narrowed to N columns, and the row
// vectors computed from them (max, sum, rescale factors) cloned as they are. A body with an
// op this does not know on a key-indexed block, or a key-indexed block leaving the softmax for
// anything but P's packing, is left as it is: the narrowing is an optimization, never needed.
//
// Runs on tile-to-tgpu's output (after tgpu-row-sum-on-tensor-cores), before tgpu-pipeline and
// tgpu-warp-specialize turn the copies into rings: a key block whose copy was moved to an
// earlier iteration (tile-pipeline's prefetch, in the kernels without warp roles) has no copy
// beside its Q·Kᵀ and keeps its softmax.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"
#include "llvm/ADT/SetVector.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUNARROWKEYTAIL
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

/// A 2-D block's type with `cols` columns (same rows, element type and layout).
RankedTensorType withColumns(Type type, int64_t cols) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get({tensor.getDimSize(0), cols}, tensor.getElementType(),
                               tensor.getEncoding());
}

bool is2D(Value v) {
  auto tensor = dyn_cast<RankedTensorType>(v.getType());
  return tensor && tensor.getRank() == 2;
}

/// Ops that compute a block element by element from blocks of its shape (and, for
/// tile.block_map, per-row vectors): what a narrower block is computed with as well.
bool isElementwise(Operation *op) {
  return op->hasTrait<OpTrait::Elementwise>() ||
         isa<tile::BlockMaskOp, tile::BlockScoreModOp, tile::BlockMapOp>(op);
}

/// The softmax of one masked key block, as the analysis finds it, before anything changes.
struct Softmax {
  Value scores;                         ///< S, the Q·Kᵀ wait's result
  AsyncCopyOp keyCopy;                  ///< the copy that filled the buffer Q·Kᵀ reads
  SmallVector<Operation *> ops;         ///< the softmax, in program order
  llvm::SetVector<Value> keyIndexed;    ///< its 2-D blocks indexed by the block's keys
  SmallVector<Value> escaping;          ///< its results read after it
};

/// The softmax of the key block whose Q·Kᵀ `scoresWait` waits for, or failure (with why) where
/// it cannot be narrowed.
FailureOr<Softmax> findSoftmax(WgmmaWaitOp scoresWait, WgmmaOp scoresProduct,
                               std::string &why) {
  Softmax softmax;
  Block *body = scoresWait->getBlock();
  softmax.scores = scoresWait.getResults()[0];
  for (Operation &op : *body)
    if (auto copy = dyn_cast<AsyncCopyOp>(op); copy && copy.getBuffer() == scoresProduct.getRhs())
      softmax.keyCopy = copy;
  if (!softmax.keyCopy) {
    why = "the buffer Q·Kᵀ reads is not copied in this body (a prefetched key block)";
    return failure();
  }

  // The scores' forward slice in this body, up to P's packing and the GEMMs.
  DenseSet<Value> dependent{softmax.scores};
  SmallVector<Operation *> slice;
  for (Operation *op = scoresWait->getNextNode(); op && op != body->getTerminator();
       op = op->getNextNode()) {
    if (llvm::none_of(op->getOperands(), [&](Value v) { return dependent.contains(v); }))
      continue;
    if (isa<PackOperandAOp, WgmmaOp, WgmmaWaitOp>(op))
      continue; // past the softmax: they read its results
    slice.push_back(op);
    for (Value r : op->getResults())
      dependent.insert(r);
  }

  // Key-indexed blocks: the scores and what element-wise ops make of them.
  softmax.keyIndexed.insert(softmax.scores);
  for (Operation *op : slice)
    if (isElementwise(op) && op->getNumResults() == 1 && is2D(op->getResult(0)) &&
        llvm::any_of(op->getOperands(), [&](Value v) { return softmax.keyIndexed.contains(v); }))
      softmax.keyIndexed.insert(op->getResult(0));

  // The softmax: the key-indexed blocks, the row broadcasts they combine with, and the row
  // vectors. A 2-D block of the slice that no key-indexed op reads (alpha broadcast to O's
  // shape, O's rescale) stays outside, after the branch.
  auto computesKeyIndexed = [&](Operation *user) {
    return user->getNumResults() == 1 && softmax.keyIndexed.contains(user->getResult(0));
  };
  for (Operation *op : slice) {
    if (op->getNumResults() != 1) {
      why = "'" + op->getName().getStringRef().str() + "' reads the scores' blocks";
      return failure();
    }
    Value result = op->getResult(0);
    bool keyIndexed = softmax.keyIndexed.contains(result);
    bool rowVector = isa<RankedTensorType>(result.getType()) &&
                     cast<RankedTensorType>(result.getType()).getRank() == 1;
    // A row broadcast belongs to the softmax when key-indexed ops read it, and then only
    // they may (it is narrowed with them, so it never leaves the softmax).
    bool rowBroadcast =
        isa<tile::BroadcastOp>(op) && llvm::any_of(result.getUsers(), computesKeyIndexed);
    if (!keyIndexed && !rowVector && !rowBroadcast)
      continue;
    if (rowBroadcast && !llvm::all_of(result.getUsers(), computesKeyIndexed)) {
      why = "a row broadcast is read by both the scores' blocks and others";
      return failure();
    }
    // What reads a key-indexed block must compute one, or reduce its rows.
    if (!keyIndexed && !rowBroadcast &&
        llvm::any_of(op->getOperands(), [&](Value v) { return softmax.keyIndexed.contains(v); }) &&
        !isa<tile::ReduceOp>(op)) {
      why = "'" + op->getName().getStringRef().str() + "' reads the scores' blocks";
      return failure();
    }
    if (!isMemoryEffectFree(op)) {
      why = "'" + op->getName().getStringRef().str() + "' has memory effects";
      return failure();
    }
    softmax.ops.push_back(op);
  }
  if (softmax.ops.empty()) {
    why = "no softmax on the scores";
    return failure();
  }

  // The other 2-D blocks the key-indexed ops read must have narrow forms: splat constants
  // (row broadcasts are in the softmax).
  llvm::SmallPtrSet<Operation *, 32> inSoftmax(softmax.ops.begin(), softmax.ops.end());
  for (Operation *op : softmax.ops) {
    if (!softmax.keyIndexed.contains(op->getResult(0)))
      continue;
    for (Value v : op->getOperands()) {
      if (!is2D(v) || softmax.keyIndexed.contains(v) || inSoftmax.contains(v.getDefiningOp()))
        continue;
      SplatElementsAttr splat;
      if (!matchPattern(v, m_Constant(&splat))) {
        why = "a key-indexed op reads a block that is neither the scores' nor a splat";
        return failure();
      }
    }
  }

  // Everything the softmax reads from this body is there before its first op, where the
  // branch goes.
  Operation *first = softmax.ops.front();
  auto availableAtBranch = [&](Value v) {
    Operation *def = v.getDefiningOp();
    Block *defBlock = def ? def->getBlock() : cast<BlockArgument>(v).getOwner();
    if (defBlock != body)
      return true; // defined above the body (or inside the softmax's own regions)
    return !def || inSoftmax.contains(def) || def->isBeforeInBlock(first);
  };
  for (Operation *op : softmax.ops) {
    llvm::SetVector<Value> above;
    for (Region &region : op->getRegions())
      getUsedValuesDefinedAbove(region, above);
    for (Value v : llvm::concat<const Value>(op->getOperands(), above.getArrayRef()))
      if (!availableAtBranch(v)) {
        why = "the softmax reads a value defined after its first op";
        return failure();
      }
  }
  if (!availableAtBranch(softmax.keyCopy.getIndices().back()) ||
      !availableAtBranch(softmax.keyCopy.getBound())) {
    why = "the key block's first row or bound is defined after the softmax starts";
    return failure();
  }

  // What leaves the softmax: row vectors, and P for its packing alone (zero columns are right
  // for probabilities, not for scores).
  for (Operation *op : softmax.ops) {
    Value result = op->getResult(0);
    bool readOutside = llvm::any_of(result.getUsers(), [&](Operation *user) {
      return !inSoftmax.contains(user);
    });
    if (!readOutside)
      continue;
    if (softmax.keyIndexed.contains(result) &&
        !llvm::all_of(result.getUsers(), [&](Operation *user) {
          return inSoftmax.contains(user) || isa<PackOperandAOp>(user);
        })) {
      why = "a key-indexed block leaves the softmax for something other than P's packing";
      return failure();
    }
    softmax.escaping.push_back(result);
  }
  return softmax;
}

/// Rewrites the masked body's softmax into a branch between its narrow and its full form.
void narrow(Softmax &softmax, int64_t width) {
  Operation *first = softmax.ops.front();
  Location loc = first->getLoc();
  OpBuilder b(first);

  // Narrow where every key from column `width` on is past the bound.
  Value key0 = softmax.keyCopy.getIndices().back();
  Value bound = softmax.keyCopy.getBound();
  Value lastNarrowKey = arith::AddIOp::create(
      b, loc, key0, arith::ConstantIndexOp::create(b, loc, width));
  Value narrowTail =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, lastNarrowKey, bound);

  SmallVector<Type> types;
  for (Value v : softmax.escaping)
    types.push_back(v.getType());
  auto branch = scf::IfOp::create(b, loc, types, narrowTail, /*withElseRegion=*/true);

  // The full form: the ops as they were.
  Block *full = branch.elseBlock();
  b.setInsertionPointToEnd(full);
  auto fullYield = scf::YieldOp::create(b, loc, softmax.escaping);
  for (Operation *op : softmax.ops)
    op->moveBefore(fullYield);
  for (auto [v, result] : llvm::zip_equal(softmax.escaping, branch.getResults()))
    v.replaceUsesWithIf(result, [&](OpOperand &use) {
      return !branch->isAncestor(use.getOwner());
    });

  // The narrow form: the same ops on `width` columns.
  b.setInsertionPointToStart(branch.thenBlock());
  IRMapping map;
  map.map(softmax.scores,
          LeadingColumnsOp::create(b, loc, withColumns(softmax.scores.getType(), width),
                                   softmax.scores));
  DenseMap<Value, Value> narrowSplats;
  for (Operation *op : softmax.ops) {
    Value result = op->getResult(0);
    bool narrowed = softmax.keyIndexed.contains(result) || isa<tile::BroadcastOp>(op);
    if (narrowed) {
      for (Value v : op->getOperands()) {
        if (!is2D(v) || map.contains(v))
          continue;
        Value &twin = narrowSplats[v];
        if (!twin) {
          SplatElementsAttr splat;
          (void)matchPattern(v, m_Constant(&splat)); // findSoftmax checked
          auto type = withColumns(v.getType(), width);
          twin = arith::ConstantOp::create(b, loc, type, splat.resizeSplat(type));
        }
        map.map(v, twin);
      }
    }
    Operation *clone = b.clone(*op, map);
    if (narrowed)
      clone->getResult(0).setType(withColumns(result.getType(), width));
  }
  SmallVector<Value> yields;
  for (Value v : softmax.escaping) {
    Value narrowValue = map.lookup(v);
    if (softmax.keyIndexed.contains(v))
      narrowValue = PadColumnsOp::create(b, loc, v.getType(), narrowValue);
    yields.push_back(narrowValue);
  }
  scf::YieldOp::create(b, loc, yields);
}

struct NarrowKeyTailPass : tgpu::impl::TGPUNarrowKeyTailBase<NarrowKeyTailPass> {
  using TGPUNarrowKeyTailBase::TGPUNarrowKeyTailBase;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    FailureOr<TileConfig> config = tile::configForPass(kernel, TileConfig());
    if (failed(config))
      return signalPassFailure();
    int64_t columns = width > 0 ? int64_t(width) : config->keyTail.value_or(0);
    if (columns <= 0)
      return;
    // The masked bodies: a Q·Kᵀ whose scores a tile.block_mask reads, in a key loop.
    SmallVector<std::pair<WgmmaWaitOp, WgmmaOp>> bodies;
    kernel.walk([&](scf::ForOp loop) {
      if (!loop->hasAttr(tile::kKVLoopAttr))
        return;
      loop.getBody()->walk([&](WgmmaWaitOp wait) {
        auto product = wait.getValues().empty()
                           ? WgmmaOp()
                           : wait.getValues()[0].getDefiningOp<WgmmaOp>();
        if (!product || !product.getTransposeRhs())
          return;
        bool masked = llvm::any_of(*wait->getBlock(), [](Operation &op) {
          return isa<tile::BlockMaskOp>(op);
        });
        if (masked)
          bodies.push_back({wait, product});
      });
    });
    for (auto [wait, product] : bodies) {
      auto scores = cast<RankedTensorType>(wait.getResults()[0].getType());
      if (scores.getRank() != 2 || scores.getDimSize(1) <= columns)
        continue; // a block no wider than the tail
      std::string why;
      FailureOr<Softmax> softmax = findSoftmax(wait, product, why);
      if (failed(softmax)) {
        // Not an error: the body keeps its one softmax (`explain` says why).
        if (explain)
          wait->emitRemark() << "tgpu-narrow-key-tail: the softmax stays whole: " << why;
        continue;
      }
      narrow(*softmax, columns);
    }
  }
};

} // namespace
