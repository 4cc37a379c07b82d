//===- RowSumOnTensorCores.cpp - the softmax's row sums as 8 more columns of P·V ----===//
//
// The online softmax carries l' = alpha·l + rowsum(P) beside O' = alpha·O + P·V. In the
// warp-specialized kernel the key loop is issue-bound (docs/perf.md, thirty-first session), and
// the row sum is its largest removable piece: an FADD a score and two shuffles a row (92 FADD a
// thread a key block at d128, Bc = 176). P · 1 computes the same sums on the tensor cores from the
// A registers P·V already reads, so the sums become 8 more columns of P·V's accumulator: the
// product's tgpu.wgmma takes `row_sums %ones` (an 8 x 64 block of ones in shared memory, written
// once by tgpu.fill), O's rescale by alpha rescales them too, and after the key loop
// tgpu.split_row_sums hands the epilogue O and l as before. Every later pass (the pipeline, warp
// roles, the rotation, ping-pong) sees one P·V and one accumulator, as without it.
//
// On tile-to-tgpu's output, for each key loop (`tile.kv_loop`) whose every P·V (a tgpu.wgmma
// of `tgpu.pack_operand_a %p` accumulating into alpha·O) sits beside l's update
// `alpha·l + tile.reduce sum %p` with the same alpha and yields both; a loop of any other
// form is left as it is. The sums are of P as P·V reads it (rounded to the 16-bit type).
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUROWSUMONTENSORCORES
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

constexpr int64_t kRowSumColumns = WgmmaOp::kRowSumColumns;

/// One key block's P·V and l update, as tile-to-tgpu writes them.
struct BlockUpdate {
  WgmmaOp product;         ///< P·V: lhs pack_operand_a(P), acc alpha·O
  WgmmaWaitOp productWait; ///< its wait
  arith::MulFOp rescaledO; ///< alpha·O
  Value previousO;         ///< O before the block
  Value previousL;         ///< l before the block
  Value alpha;             ///< the rescale factor of both
  scf::YieldOp yield;      ///< the block's yield of both
  unsigned oIndex, lIndex; ///< their positions in it
};

/// `v` is `mulf(x, broadcast(alpha))` or `mulf(broadcast(alpha), x)`: x and alpha.
static std::optional<std::pair<Value, Value>> scaledByBroadcast(Value v) {
  auto mul = v.getDefiningOp<arith::MulFOp>();
  if (!mul)
    return std::nullopt;
  for (int i = 0; i < 2; ++i)
    if (auto b = mul->getOperand(i).getDefiningOp<tile::BroadcastOp>())
      return std::make_pair(mul->getOperand(1 - i), b.getInput());
  return std::nullopt;
}

/// `v` is `addf(mulf(l, alpha), reduce sum p)` in either order: l and alpha.
static std::optional<std::pair<Value, Value>> rowSumUpdate(Value v, Value p) {
  auto add = v.getDefiningOp<arith::AddFOp>();
  if (!add)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    auto sum = add->getOperand(i).getDefiningOp<tile::ReduceOp>();
    auto scaled = add->getOperand(1 - i).getDefiningOp<arith::MulFOp>();
    if (!sum || sum.getKind() != tile::ReduceKind::Sum || sum.getInput() != p || !scaled)
      continue;
    return std::make_pair(scaled.getLhs(), scaled.getRhs());
  }
  return std::nullopt;
}

/// The P·V of `product`'s block and l's update beside it, or nothing if the block is not of
/// that form.
static std::optional<BlockUpdate> matchBlock(WgmmaOp product) {
  BlockUpdate u;
  u.product = product;
  auto pack = product.getLhs().getDefiningOp<PackOperandAOp>();
  if (!pack || !product.getAcc() || product.getRowSums())
    return std::nullopt;
  Value p = pack.getInput();
  auto scaledO = scaledByBroadcast(product.getAcc());
  if (!scaledO)
    return std::nullopt;
  u.rescaledO = product.getAcc().getDefiningOp<arith::MulFOp>();
  u.previousO = scaledO->first;
  u.alpha = scaledO->second;
  // Its wait, and the block's yield of the waited accumulator and of l's update.
  if (!product.getResult().hasOneUse())
    return std::nullopt;
  u.productWait = dyn_cast<WgmmaWaitOp>(*product.getResult().getUsers().begin());
  if (!u.productWait || u.productWait->getBlock() != product->getBlock())
    return std::nullopt;
  Value o = u.productWait.getResult(0);
  if (!o.hasOneUse())
    return std::nullopt;
  u.yield = dyn_cast<scf::YieldOp>(*o.getUsers().begin());
  if (!u.yield || u.yield->getBlock() != product->getBlock())
    return std::nullopt;
  u.oIndex = o.getUses().begin()->getOperandNumber();
  for (OpOperand &operand : u.yield->getOpOperands()) {
    auto update = rowSumUpdate(operand.get(), p);
    if (!update || update->second != u.alpha)
      continue;
    u.previousL = update->first;
    u.lIndex = operand.getOperandNumber();
    return u;
  }
  return std::nullopt;
}

/// `type` with 8 more columns.
static RankedTensorType widened(Type type) {
  auto t = cast<RankedTensorType>(type);
  return RankedTensorType::get({t.getDimSize(0), t.getDimSize(1) + kRowSumColumns},
                               t.getElementType(), t.getEncoding());
}

struct TGPURowSumOnTensorCores
    : public tilefuse::tgpu::impl::TGPURowSumOnTensorCoresBase<TGPURowSumOnTensorCores> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    FailureOr<TileConfig> config = tile::configForPass(kernel, TileConfig());
    if (failed(config))
      return signalPassFailure();
    if (!config->rowSumMma.value_or(false) && !force)
      return;
    onesByType.clear();
    SmallVector<scf::ForOp> loops;
    kernel.walk([&](scf::ForOp loop) {
      if (loop->hasAttr(tile::kKVLoopAttr))
        loops.push_back(loop);
    });
    for (scf::ForOp loop : loops)
      if (failed(rewriteLoop(kernel, loop)))
        return signalPassFailure();
  }

  /// The ones buffer of `elt`, allocated and filled once per kernel, before `grid`.
  Value onesFor(func::FuncOp kernel, scf::ForallOp grid, Type elt) {
    auto &ones = onesByType[elt];
    if (ones)
      return ones;
    MLIRContext *ctx = kernel.getContext();
    OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
    auto type = BufferType::get(ctx, {kRowSumColumns, 64}, elt,
                                SharedLayoutAttr::get(ctx, SharedSwizzle::Canonical128B));
    ones = AllocOp::create(b, kernel.getLoc(), type, IntegerAttr()).getResult();
    // Before the grid: every thread of the CTA writes its share once, ahead of the barrier
    // that the warp roles start with (tgpu-warp-specialize), which publishes it.
    b.setInsertionPoint(grid);
    FillOp::create(b, kernel.getLoc(), ones, b.getF32FloatAttr(1.0f));
    return ones;
  }

  LogicalResult rewriteLoop(func::FuncOp kernel, scf::ForOp loop) {
    SmallVector<BlockUpdate> blocks;
    bool otherProducts = false;
    loop.getBody()->walk([&](WgmmaOp product) {
      if (product.getTransposeRhs())
        return; // Q·Kᵀ (K read K-major): no P
      if (auto u = matchBlock(product))
        blocks.push_back(*u);
      else
        otherProducts = true;
    });
    if (blocks.empty() || otherProducts)
      return success(); // not the online softmax's form: left as it is
    auto grid = loop->getParentOfType<scf::ForallOp>();
    if (!grid)
      return success();

    // Which of the loop's carried values are O and l: every block's previous O and l must be
    // the loop's own (the blocks sit in scf.if branches of the body, which pass them on), and
    // each must reach the loop's yield through the branches at one index.
    Block *body = loop.getBody();
    auto carriedIndex = [&](Value v) -> std::optional<unsigned> {
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg || arg.getOwner() != body || arg.getArgNumber() == 0)
        return std::nullopt;
      return arg.getArgNumber() - 1;
    };
    std::optional<unsigned> oCarried = carriedIndex(blocks.front().previousO);
    std::optional<unsigned> lCarried = carriedIndex(blocks.front().previousL);
    if (!oCarried || !lCarried)
      return success();
    for (BlockUpdate &u : blocks)
      if (carriedIndex(u.previousO) != oCarried || carriedIndex(u.previousL) != lCarried ||
          !reachesLoopYield(u.yield, u.oIndex, loop, *oCarried) ||
          !reachesLoopYield(u.yield, u.lIndex, loop, *lCarried))
        return success();

    Value o = body->getArgument(1 + *oCarried);
    auto oType = cast<RankedTensorType>(o.getType());
    if (!isa<WgmmaAccumulatorLayoutAttr>(oType.getEncoding()))
      return success();
    // An m64nN accumulator holds N <= 256 columns: at D = 256 there is no room for 8 more.
    if (oType.getDimSize(1) + kRowSumColumns > 256)
      return success();
    // O starts at zero (tile-online-softmax), so the 8 more columns start at zero too.
    if (!matchPattern(loop.getInitArgs()[*oCarried], m_AnyZeroFloat()))
      return success();
    Type elt = cast<BufferType>(blocks.front().product.getRhs().getType()).getElementType();
    Value ones = onesFor(kernel, grid, elt);
    RankedTensorType wide = widened(oType);

    // Each block: alpha broadcast over the wider accumulator, the product with its row sums,
    // and l passed on unchanged (its update goes; the loop's l is replaced below).
    for (BlockUpdate &u : blocks) {
      OpBuilder b(u.rescaledO);
      Value wideFactor = tile::BroadcastOp::create(b, u.rescaledO.getLoc(), wide, u.alpha);
      Value wideRescaled =
          arith::MulFOp::create(b, u.rescaledO.getLoc(), wide, u.previousO, wideFactor)
              .getResult();
      u.product.getAccMutable().assign(wideRescaled);
      u.product.getRowSumsMutable().assign(ones);
      u.product.getResult().setType(wide);
      u.productWait.getResult(0).setType(wide);
      u.yield->setOperand(u.lIndex, u.previousL);
    }
    // The carried O, through the branches to the loop, gets the wider type.
    if (failed(widenCarried(loop, *oCarried, wide)))
      return failure();

    // After the loop: O and l from the accumulator.
    OpBuilder after(loop->getContext());
    after.setInsertionPointAfter(loop);
    Value lResult = loop.getResult(*lCarried);
    auto split = SplitRowSumsOp::create(after, loop.getLoc(), oType, lResult.getType(),
                                        loop.getResult(*oCarried));
    loop.getResult(*oCarried).replaceAllUsesExcept(split.getProduct(), split);
    lResult.replaceAllUsesWith(split.getSums());

    // What computed l and the old rescale of O is dead now.
    IRRewriter rewriter(kernel.getContext());
    (void)runRegionDCE(rewriter, loop->getRegions());
    return success();
  }

  /// Whether value `index` of `yield` reaches the yield of `loop` at `carried` through the
  /// scf.if results that enclose it.
  static bool reachesLoopYield(scf::YieldOp yield, unsigned index, scf::ForOp loop,
                               unsigned carried) {
    while (true) {
      Operation *parent = yield->getParentOp();
      if (parent == loop.getOperation())
        return index == carried;
      auto branch = dyn_cast<scf::IfOp>(parent);
      if (!branch)
        return false;
      Value result = branch.getResult(index);
      if (!result.hasOneUse())
        return false;
      OpOperand &use = *result.getUses().begin();
      yield = dyn_cast<scf::YieldOp>(use.getOwner());
      if (!yield)
        return false;
      index = use.getOperandNumber();
    }
  }

  /// Gives the loop's carried value `index` (its block argument, init, result) and every
  /// scf.if result and yield operand that carries it in the body type `wide`. The values that
  /// flow into it are the products' waited accumulators (already wide) and the carried value
  /// itself (branches that skip a block).
  LogicalResult widenCarried(scf::ForOp loop, unsigned index, RankedTensorType wide) {
    Block *body = loop.getBody();
    BlockArgument arg = body->getArgument(1 + index);
    arg.setType(wide);
    loop.getResult(index).setType(wide);
    // The init (zeros, checked before any change): zeros of the wider type.
    OpBuilder b(loop);
    Value zeros = arith::ConstantOp::create(
        b, loop.getLoc(), wide, DenseElementsAttr::get(wide, b.getF32FloatAttr(0.0f)));
    loop.getInitArgsMutable()[index].assign(zeros);
    // The branches: every scf.if whose yields carry a wide value at some index takes the wide
    // type there, up to the loop's yield. Widen innermost first, until nothing changes.
    bool changed = true;
    while (changed) {
      changed = false;
      body->walk([&](scf::YieldOp yield) {
        auto branch = dyn_cast<scf::IfOp>(yield->getParentOp());
        if (!branch)
          return;
        for (auto [i, v] : llvm::enumerate(yield.getOperands()))
          if (v.getType() == wide && branch.getResult(i).getType() != wide) {
            branch.getResult(i).setType(wide);
            changed = true;
          }
      });
    }
    // Every yield at O's place now carries the wide type; anything else is a form this pass
    // does not know.
    WalkResult bad = body->walk([&](scf::YieldOp yield) {
      Operation *parent = yield->getParentOp();
      if (!isa<scf::IfOp, scf::ForOp>(parent))
        return WalkResult::advance();
      for (auto [v, r] : llvm::zip(yield.getOperands(), parent->getResults()))
        if (v.getType() != r.getType())
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (bad.wasInterrupted())
      return loop.emitError("row sums on the tensor cores: O reaches the key loop's yield "
                            "through a form other than scf.if branches");
    return success();
  }

  llvm::DenseMap<Type, Value> onesByType;
};

} // namespace
