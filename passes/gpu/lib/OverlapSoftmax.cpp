//===- OverlapSoftmax.cpp - the key loop rotated: softmax j beside P·V j-1 ===//
//
// FlashAttention-3's intra-warpgroup overlap ("two-stage GEMM-softmax pipelining"), on the
// consumer partition of a warp-specialized kernel. In the key loop as tgpu-warp-specialize
// leaves it, every key block runs S = Q·Kᵀ, waits for it, runs the softmax, then P·V, and waits
// for that: the tensor cores idle during the softmax, and the softmax units during both GEMMs.
// Rotated, iteration j issues S_j, then P_{j-1}·V_{j-1} (the block before, whose P and rescale
// factor the loop carries), waits for S_j alone (wgmma.wait_group 1), runs softmax j while the
// tensor cores still compute P_{j-1}·V_{j-1}, and then waits for that:
//
//   before   wait K_j; S_j = Q K_jᵀ; wait(0); release K_j; softmax_j -> P_j, alpha_j;
//            wait V_j; O = O·alpha_j + P_j V_j; wait(0); release V_j
//   after    [O' = O·alpha_p; wait V_p]; wait K_j; S_j = Q K_jᵀ;
//            [O = O' + P_p V_p]              (the pending block, issued, not waited for)
//            wait(1); release K_j; softmax_j -> P_j, alpha_j;
//            wait(0); release V_p;  pending := (P_j, alpha_j)
//
// The first block with work has nothing pending: a flag the loop carries picks the unrotated
// body (without its P·V) there, and after the loop the last pending P·V runs (the epilogue).
// Both bodies are straight-line code, so no wgmma result in flight crosses a branch.
//
// The P·V part of a block is read from the IR: the ops of the block's body that depend on the
// output accumulator the loop carries (its rescale, the wgmma, the wait) or on the counter of
// the ring the wgmma's B stage comes from (the stage, its full and empty barriers, the counter's
// increment), and the broadcasts only they read. What they take from the rest of the body (the
// packed P, the rescale factor) is what the loop carries for the pending block; the narrower
// side of a broadcast is carried. The value counter then counts completed P·V blocks, and
// every V stage is still waited for, read and released in fill order, so the producer is
// unchanged.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "OverlapUtils.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUHints.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"
#include "llvm/ADT/SetVector.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUOVERLAPSOFTMAX
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;
using tilefuse::tgpu::overlap::cloneAll;
using tilefuse::tgpu::overlap::placeholder;

namespace {

/// The element bits of a value (what carrying it costs in registers).
int64_t bitsOf(Type type) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.getNumElements() * shaped.getElementTypeBitWidth();
  return type.isIntOrFloat() ? type.getIntOrFloatBitWidth() : 64;
}

/// One key block's body (a block of the loop, possibly inside branches) split in two.
struct BlockBody {
  Block *block;
  WgmmaOp scores, product;        ///< Q·Kᵀ (transpose_rhs) and P·V (with an accumulator)
  WgmmaWaitOp scoresWait, productWait;
  /// The P·V part, in program order: issued (before the P·V wait) and completed (the wait and
  /// what follows it).
  SmallVector<Operation *> issue, complete;
  llvm::SetVector<Operation *> part;
  /// What the P·V part reads from the rest of the body: carried for the pending block.
  SmallVector<Value> boundary;
};

/// The pending block's state as it flows through the loop body in program order.
struct Pending {
  Value has;                  ///< i1: a block's P·V waits
  SmallVector<Value> carried; ///< its boundary values
};

struct TGPUOverlapSoftmax
    : public tilefuse::tgpu::impl::TGPUOverlapSoftmaxBase<TGPUOverlapSoftmax> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    FailureOr<TileConfig> config = tile::configForPass(kernel, TileConfig());
    if (failed(config))
      return signalPassFailure();
    bool wanted = config->warpSpecialize.value_or(false) && config->softmaxOverlap.value_or(false);
    if (!wanted && !force)
      return;
    // The key loops: the loops around the consumers' P·V GEMMs (the first partition, in
    // tgpu-warp-specialize's order).
    llvm::SetVector<scf::ForOp> loops;
    kernel.walk([&](WarpSpecializeOp roles) {
      roles->getRegion(0).walk([&](WgmmaOp mma) {
        if (mma.getAcc() && !mma.getTransposeRhs())
          if (auto loop = mma->getParentOfType<scf::ForOp>())
            loops.insert(loop);
      });
    });
    for (scf::ForOp loop : loops)
      if (failed(rotate(loop)))
        return signalPassFailure();
  }

  // The loop's iter_args that the P·V part updates: the output accumulator and the counter of
  // the value ring (positions in the loop's iter_args).
  unsigned accPosition = 0, counterPosition = 0;
  scf::ForOp loop;
  SmallVector<BlockBody, 2> bodies;
  SmallVector<Type> carriedTypes;

  LogicalResult rotate(scf::ForOp kvLoop) {
    loop = kvLoop;
    bodies.clear();
    carriedTypes.clear();
    SmallVector<WgmmaOp> products;
    loop.walk([&](WgmmaOp op) {
      if (op.getAcc() && !op.getTransposeRhs())
        products.push_back(op);
    });
    if (products.empty())
      return success(); // no P·V in this loop: nothing to overlap
    for (WgmmaOp product : products)
      if (product->getParentOfType<scf::ForOp>() == loop && failed(analyze(product)))
        return failure();
    for (BlockBody &body : bodies) {
      SmallVector<Type> types = llvm::to_vector(TypeRange(ValueRange(body.boundary)));
      if (carriedTypes.empty())
        carriedTypes = types;
      else if (types != carriedTypes)
        return body.product.emitOpError("tgpu-overlap-softmax: the key blocks' P·V parts read "
                                        "different values; a pending block's state must be one");
    }
    return rewriteLoop();
  }

  //===--------------------------------------------------------------------===//
  // Reading a block's body
  //===--------------------------------------------------------------------===//

  InFlightDiagnostic refuse(Operation *op, const Twine &why) {
    InFlightDiagnostic diag = op->emitOpError("cannot overlap the softmax with the P·V GEMM: ");
    diag << why << " (use softmax_overlap=false)";
    return diag;
  }

  /// The loop iter_arg position of `v` when it is one of the loop's region iter_args.
  std::optional<unsigned> iterArgPosition(Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != loop.getBody() || arg == loop.getInductionVar())
      return std::nullopt;
    return arg.getArgNumber() - loop.getNumInductionVars();
  }

  LogicalResult analyze(WgmmaOp product) {
    BlockBody body;
    body.block = product->getBlock();
    body.product = product;
    // Branches only between the loop and the body: the pending state threads through them.
    for (Operation *up = body.block->getParentOp(); up != loop; up = up->getParentOp())
      if (!isa<scf::IfOp>(up))
        return refuse(product, "the P·V GEMM is nested in an op other than scf.if in the "
                               "key loop");
    for (Operation &op : *body.block) {
      if (auto mma = dyn_cast<WgmmaOp>(op); mma && mma != product) {
        if (!mma.getTransposeRhs() || body.scores)
          return refuse(product, "its block body holds a wgmma other than one Q·Kᵀ");
        body.scores = mma;
      }
      // Regions of ops that compute per element (masks, score functions) are straight-line,
      // and so is a branch that only computes (overlap::isComputeBranch); other control flow
      // would carry the wgmma results in flight across it.
      if (isa<RegionBranchOpInterface>(op) && !overlap::isComputeBranch(&op))
        return refuse(&op, "the key block's body is not straight-line code");
    }
    if (!body.scores || !body.scores->isBeforeInBlock(product))
      return refuse(product, "no Q·Kᵀ wgmma precedes it in its block body");
    auto waitOf = [&](WgmmaOp mma) -> WgmmaWaitOp {
      for (Operation *user : mma.getResult().getUsers())
        if (auto wait = dyn_cast<WgmmaWaitOp>(user); wait && wait->getBlock() == body.block)
          return wait;
      return {};
    };
    body.scoresWait = waitOf(body.scores);
    body.productWait = waitOf(product);
    if (!body.scoresWait || !body.productWait || !body.scoresWait->isBeforeInBlock(product))
      return refuse(product, "its Q·Kᵀ is not waited for before it, or it is not waited for");

    // The seeds: the accumulator the loop carries (rescaled or not) and the value counter.
    Value acc = product.getAcc();
    std::optional<unsigned> accAt = iterArgPosition(acc);
    if (!accAt)
      if (auto scaled = acc.getDefiningOp<arith::MulFOp>())
        for (Value factor : scaled->getOperands())
          if ((accAt = iterArgPosition(factor)))
            break;
    if (!accAt)
      return refuse(product, "its accumulator is not the loop's output (or its rescale)");
    llvm::SetVector<Operation *> stageSlice;
    BackwardSliceOptions options;
    options.filter = [&](Operation *op) { return loop->isProperAncestor(op); };
    options.inclusive = true;
    if (Operation *def = product.getRhs().getDefiningOp())
      (void)getBackwardSlice(def, &stageSlice, options);
    std::optional<unsigned> counterAt;
    for (Operation *op : stageSlice)
      for (Value v : op->getOperands())
        if (std::optional<unsigned> at = iterArgPosition(v)) {
          if (counterAt && *counterAt != *at)
            return refuse(product, "its B stage depends on more than one loop-carried value");
          counterAt = at;
        }
    if (!counterAt)
      return refuse(product, "its B stage is not chosen by a fill counter the loop carries");
    if (!bodies.empty() && (*accAt != accPosition || *counterAt != counterPosition))
      return refuse(product, "the key blocks' P·V GEMMs update different loop values");
    accPosition = *accAt;
    counterPosition = *counterAt;
    Value seeds[] = {loop.getRegionIterArgs()[accPosition],
                     loop.getRegionIterArgs()[counterPosition]};

    // The part: everything depending on the seeds, then the broadcasts only it reads.
    for (Operation &op : *body.block) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        continue;
      for (Value v : op.getOperands()) {
        Operation *def = v.getDefiningOp();
        if (llvm::is_contained(seeds, v) || (def && body.part.contains(def))) {
          body.part.insert(&op);
          break;
        }
      }
    }
    if (!body.part.contains(product) || !body.part.contains(body.productWait))
      return refuse(product, "its accumulator does not come from the loop's output");
    for (bool grew = true; grew;) {
      grew = false;
      for (Operation &op : *body.block) {
        if (body.part.contains(&op) || op.getNumResults() == 0 || !isPure(&op) ||
            matchPattern(&op, m_Constant()))
          continue;
        bool onlyPart = llvm::all_of(op.getUsers(), [&](Operation *u) {
          return body.part.contains(u);
        });
        int64_t in = 0, out = 0;
        for (Value v : op.getOperands())
          if (!matchPattern(v, m_Constant()))
            in += bitsOf(v.getType());
        for (Value v : op.getResults())
          out += bitsOf(v.getType());
        if (onlyPart && in < out) {
          body.part.insert(&op);
          grew = true;
        }
      }
    }
    if (body.part.contains(body.scores) || body.part.contains(body.scoresWait))
      return refuse(product, "its Q·Kᵀ depends on the output accumulator");
    for (Operation &op : *body.block) {
      if (!body.part.contains(&op))
        continue;
      if (op.getNumRegions())
        return refuse(&op, "the P·V part holds a region");
      (body.productWait->isBeforeInBlock(&op) || &op == body.productWait ? body.complete
                                                                         : body.issue)
          .push_back(&op);
      for (Value v : op.getOperands()) {
        Operation *def = v.getDefiningOp();
        bool inLoop = loop->isAncestor(def ? def : v.getParentBlock()->getParentOp());
        if (!inLoop || llvm::is_contained(seeds, v) || (def && body.part.contains(def)) ||
            (def && matchPattern(def, m_Constant())))
          continue;
        if (v == loop.getInductionVar())
          return refuse(&op, "the P·V part reads the loop's induction variable");
        if (!llvm::is_contained(body.boundary, v))
          body.boundary.push_back(v);
      }
    }
    // What the body yields from the part must be the seeds' next values, passed up unchanged
    // to the loop's yield at the seeds' positions.
    Operation *terminator = body.block->getTerminator();
    for (OpOperand &yielded : terminator->getOpOperands()) {
      Operation *def = yielded.get().getDefiningOp();
      if (!def || !body.part.contains(def))
        continue;
      unsigned at = yielded.getOperandNumber();
      if (at != accPosition && at != counterPosition)
        return refuse(def, "the P·V part yields a value the loop carries for something else");
      Operation *parent = body.block->getParentOp();
      Value up = yielded.get();
      while (parent != loop.getOperation()) {
        auto branch = cast<scf::IfOp>(parent);
        up = branch.getResult(at);
        Operation *next = branch->getBlock()->getTerminator();
        if (next->getOperand(at) != up)
          return refuse(branch, "a branch around a key block's body passes the loop's output "
                                "or value counter on at another position");
        parent = branch->getParentOp();
      }
    }
    bodies.push_back(std::move(body));
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Rewriting
  //===--------------------------------------------------------------------===//

  /// The body's ops outside the P·V part, in order, split at the Q·Kᵀ wait.
  void restOf(BlockBody &body, SmallVector<Operation *> &upToScores,
              SmallVector<Operation *> &afterScoresWait) {
    bool pastScores = false;
    for (Operation &op : *body.block) {
      if (op.hasTrait<OpTrait::IsTerminator>() || body.part.contains(&op))
        continue;
      if (&op == body.scoresWait.getOperation()) {
        pastScores = true;
        continue;
      }
      (pastScores ? afterScoresWait : upToScores).push_back(&op);
    }
  }

  /// The body under `pending`: one branch rotated (the pending P·V beside this softmax), one
  /// unrotated without its P·V (nothing pending); both yield this block as the pending one.
  Pending rewriteBody(BlockBody &body, const Pending &in) {
    Block *block = body.block;
    Operation *terminator = block->getTerminator();
    Location loc = body.product.getLoc();
    SmallVector<Operation *> old, upToScores, afterScoresWait;
    for (Operation &op : *block)
      if (&op != terminator)
        old.push_back(&op);
    restOf(body, upToScores, afterScoresWait);
    OpBuilder b(terminator);
    SmallVector<Type> types(terminator->getOperandTypes());
    types.push_back(b.getI1Type());
    llvm::append_range(types, carriedTypes);
    Value yes = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
    auto branch = scf::IfOp::create(b, loc, types, in.has, /*withElseRegion=*/true);

    auto finish = [&](OpBuilder &at, IRMapping &rest, IRMapping *pendingMap) {
      SmallVector<Value> results;
      for (OpOperand &yielded : terminator->getOpOperands()) {
        Value v = yielded.get();
        Operation *def = v.getDefiningOp();
        if (def && body.part.contains(def)) {
          // The part's results are the pending block's (rotated), or, with no P·V in this
          // body (first), the seeds' values as the iteration found them (analyze checked
          // that only the seeds' positions yield them).
          results.push_back(pendingMap ? pendingMap->lookup(v)
                                       : loop.getRegionIterArgs()[yielded.getOperandNumber()]);
        } else {
          results.push_back(rest.lookupOrDefault(v));
        }
      }
      results.push_back(yes);
      for (Value v : body.boundary)
        results.push_back(rest.lookupOrDefault(v));
      scf::YieldOp::create(at, loc, results);
    };

    // Rotated: Q·Kᵀ issued, then the pending P·V, then the wait for Q·Kᵀ alone.
    {
      OpBuilder then = OpBuilder::atBlockBegin(branch.thenBlock());
      IRMapping rest, pending;
      for (auto [v, carried] : llvm::zip(body.boundary, in.carried))
        pending.map(v, carried);
      // What feeds the pending P·V (its rescale, its stage and barrier) goes before Q·Kᵀ is
      // issued: a register a wgmma reads that is written while another group is in flight
      // makes ptxas serialize the groups.
      SmallVector<Operation *> feed(body.issue);
      llvm::erase(feed, body.product.getOperation());
      cloneAll(then, feed, pending, block);
      cloneAll(then, upToScores, rest, block);
      cloneAll(then, {body.product.getOperation()}, pending, block);
      auto wait = cast<WgmmaWaitOp>(then.clone(*body.scoresWait, rest));
      wait.setPendingAttr(then.getI32IntegerAttr(1));
      // What only the next P·V reads and writes its A registers (P packed) waits for this
      // one: ptxas serializes the groups when a wgmma's input registers are written while a
      // group is in flight (FlashAttention-3 converts P after its wait too). Only the packing:
      // the exponentials before it stay beside the pending P·V also where nothing but the
      // packing reads P (its row sums on the tensor cores), which would otherwise defer them
      // too, and LLVM then merged the bodies' tails (docs/perf.md, thirty-third session).
      auto writesOperandA = [](Operation *op) {
        return llvm::all_of(op->getResultTypes(), [](Type t) {
          auto block = dyn_cast<RankedTensorType>(t);
          return block && isa_and_nonnull<OperandALayoutAttr>(block.getEncoding());
        });
      };
      llvm::SetVector<Operation *> deferred;
      for (Operation *op : llvm::reverse(afterScoresWait)) {
        bool forTheProduct = isPure(op) && op->getNumResults() && writesOperandA(op) &&
                             llvm::all_of(op->getUsers(), [&](Operation *user) {
                               return body.part.contains(user) || deferred.contains(user);
                             });
        if (forTheProduct)
          deferred.insert(op);
      }
      SmallVector<Operation *> now, later;
      for (Operation *op : afterScoresWait)
        (deferred.contains(op) ? later : now).push_back(op);
      cloneAll(then, now, rest, block);
      cloneAll(then, body.complete, pending, block);
      // The pending P·V's wait follows this block's softmax; held there through ptxas only on
      // request (the lowering ends the basic block before it; TileGPUHints.h): it measured 1-6%
      // slower at every head dim on the H100 (docs/perf.md, 2026-12-06).
      if (holdProductWait)
        pending.lookup(body.productWait.getOperation())
            ->setAttr(kWaitAfterPrecedingCodeAttr, then.getUnitAttr());
      cloneAll(then, later, rest, block);
      finish(then, rest, &pending);
    }
    // First: the block as it was, without a P·V.
    {
      OpBuilder otherwise = OpBuilder::atBlockBegin(branch.elseBlock());
      IRMapping rest;
      cloneAll(otherwise, upToScores, rest, block);
      otherwise.clone(*body.scoresWait, rest);
      cloneAll(otherwise, afterScoresWait, rest, block);
      finish(otherwise, rest, nullptr);
    }
    unsigned n = terminator->getNumOperands();
    SmallVector<Value> results(branch.getResults().take_front(n));
    terminator->setOperands(results);
    // The old body goes, users first.
    for (Operation *op : llvm::reverse(old))
      op->erase();
    Pending out;
    out.has = branch.getResult(n);
    for (unsigned i = 0; i < carriedTypes.size(); ++i)
      out.carried.push_back(branch.getResult(n + 1 + i));
    return out;
  }

  bool holdsBody(Operation *op) {
    return llvm::any_of(bodies, [&](const BlockBody &body) {
      return op->isProperAncestor(body.block->getParentOp()) ||
             op == body.block->getParentOp();
    });
  }

  /// Threads the pending state through `block` in program order; returns it at the end.
  Pending thread(Block *block, Pending state) {
    for (BlockBody &body : bodies)
      if (body.block == block)
        return rewriteBody(body, state);
    for (Operation &op : llvm::make_early_inc_range(*block)) {
      auto branch = dyn_cast<scf::IfOp>(op);
      if (!branch || !holdsBody(branch))
        continue;
      OpBuilder b(branch);
      SmallVector<Type> types(branch.getResultTypes());
      types.push_back(b.getI1Type());
      llvm::append_range(types, carriedTypes);
      auto replacement = scf::IfOp::create(b, branch.getLoc(), types, branch.getCondition(),
                                           /*addThenBlock=*/false, /*addElseBlock=*/false);
      replacement->setDiscardableAttrs(branch->getDiscardableAttrDictionary());
      replacement.getThenRegion().takeBody(branch.getThenRegion());
      if (branch.getElseRegion().empty()) {
        Block *elseBlock = b.createBlock(&replacement.getElseRegion());
        b.setInsertionPointToEnd(elseBlock);
        scf::YieldOp::create(b, branch.getLoc());
      } else {
        replacement.getElseRegion().takeBody(branch.getElseRegion());
      }
      unsigned n = branch.getNumResults();
      for (Region *region : {&replacement.getThenRegion(), &replacement.getElseRegion()}) {
        Pending inner = thread(&region->front(), state);
        auto yield = cast<scf::YieldOp>(region->front().getTerminator());
        yield.getResultsMutable().append(inner.has);
        yield.getResultsMutable().append(inner.carried);
      }
      branch.replaceAllUsesWith(replacement.getResults().take_front(n));
      branch.erase();
      state.has = replacement.getResult(n);
      state.carried.assign(replacement.getResults().begin() + n + 1,
                           replacement.getResults().end());
    }
    return state;
  }

  LogicalResult rewriteLoop() {
    Location loc = loop.getLoc();
    IRRewriter rewriter(loop.getContext());
    rewriter.setInsertionPoint(loop);
    for (Type t : carriedTypes)
      if (!isa<RankedTensorType, IndexType, FloatType, IntegerType>(t))
        return refuse(bodies.front().product, "a pending value is neither a block nor a scalar");
    SmallVector<Value> inits = {
        arith::ConstantIntOp::create(rewriter, loc, rewriter.getI1Type(), 0)};
    for (Type t : carriedTypes)
      inits.push_back(placeholder(rewriter, loc, t));
    unsigned original = loop.getNumRegionIterArgs();
    FailureOr<LoopLikeOpInterface> widened = loop.replaceWithAdditionalYields(
        rewriter, inits, /*replaceInitOperandUsesInLoop=*/false,
        [&](OpBuilder &, Location, ArrayRef<BlockArgument> added) {
          return SmallVector<Value>(added.begin(), added.end());
        });
    if (failed(widened))
      return loop.emitOpError("tgpu-overlap-softmax: cannot carry the pending block");
    loop = cast<scf::ForOp>(widened->getOperation());
    // The body moved into the new loop (with new block arguments): read it again there.
    bodies.clear();
    SmallVector<WgmmaOp> products;
    loop.walk([&](WgmmaOp op) {
      if (op.getAcc() && !op.getTransposeRhs() && op->getParentOfType<scf::ForOp>() == loop)
        products.push_back(op);
    });
    for (WgmmaOp product : products)
      if (failed(analyze(product)))
        return failure();
    Pending state;
    state.has = loop.getRegionIterArgs()[original];
    for (unsigned i = 0; i < carriedTypes.size(); ++i)
      state.carried.push_back(loop.getRegionIterArgs()[original + 1 + i]);
    // Snapshot the epilogue's template before the bodies are rewritten.
    BlockBody &model = bodies.front();
    SmallVector<Operation *> partOps(model.issue);
    llvm::append_range(partOps, model.complete);
    Operation *modelTerminator = model.block->getTerminator();
    Value nextAcc = modelTerminator->getOperand(accPosition);
    Value nextCounter = modelTerminator->getOperand(counterPosition);
    // The epilogue after the loop, cloned from the first body's part while it still exists.
    rewriter.setInsertionPointAfter(loop);
    Value lastHas = loop.getResult(original);
    SmallVector<Value> lastCarried;
    for (unsigned i = 0; i < carriedTypes.size(); ++i)
      lastCarried.push_back(loop.getResult(original + 1 + i));
    Value accOut = loop.getResult(accPosition), counterOut = loop.getResult(counterPosition);
    auto epilogue =
        scf::IfOp::create(rewriter, loc, TypeRange{accOut.getType(), counterOut.getType()},
                          lastHas, /*withElseRegion=*/true);
    {
      OpBuilder then = OpBuilder::atBlockBegin(epilogue.thenBlock());
      IRMapping map;
      map.map(loop.getRegionIterArgs()[accPosition], accOut);
      map.map(loop.getRegionIterArgs()[counterPosition], counterOut);
      for (auto [v, carried] : llvm::zip(model.boundary, lastCarried))
        map.map(v, carried);
      cloneAll(then, partOps, map, model.block);
      Value acc = map.lookupOrNull(nextAcc), counter = map.lookupOrNull(nextCounter);
      if (!acc || !counter)
        return refuse(model.product, "the P·V part does not yield the output and the counter");
      scf::YieldOp::create(then, loc, ValueRange{acc, counter});
      OpBuilder otherwise = OpBuilder::atBlockBegin(epilogue.elseBlock());
      scf::YieldOp::create(otherwise, loc, ValueRange{accOut, counterOut});
    }
    auto outsideEpilogue = [&](OpOperand &use) {
      return !epilogue->isAncestor(use.getOwner());
    };
    accOut.replaceUsesWithIf(epilogue.getResult(0), outsideEpilogue);
    counterOut.replaceUsesWithIf(epilogue.getResult(1), outsideEpilogue);

    Pending end = thread(loop.getBody(), state);
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    yield.setOperand(original, end.has);
    for (unsigned i = 0; i < carriedTypes.size(); ++i)
      yield.setOperand(original + 1 + i, end.carried[i]);
    return success();
  }
};

} // namespace
