//===- TileDeriveBackward.cpp - the backward written form, derived from the forward -===//
//
// A variant is written once: its backward kernel comes out of its forward text. From a forward
// written-form kernel
//
//   @k(Q, K, V, O, LSE):  S = dot(Q, K^T) -> [scale | score_mod | mask]* -> P, lse = softmax
//                         O = dot(P, V); store O, lse
//
// this pass adds, beside it, the backward written form
//
//   @k_backward(Q, K, V, O, dO, LSE, dQ, dK, dV)
//
// for the loss whose gradient with respect to O is dO (the logsumexp is an auxiliary output:
// no gradient flows through it):
//
//   S' = the forward's score chain on dot(Q, K^T), each score_mod a score_mod_grad (f and f')
//   P  = softmax_from_lse(S', LSE)             recomputed, never stored
//   D  = row_reduce sum (dO o O)               once per query row
//   dV = sum_head_groups(dot(P^T, dO))
//   dP = dot(dO, V^T)
//   dS = P o (dP - D)                          the softmax's backward
//   then back through the score chain, last op first:
//     score_mod:  dS = dS o f'(its input)      (the derivative tile-score-mod-derivative builds)
//     scale:      nothing on dS: every step back is linear in dS, so the factors multiply dQ
//                 and dK instead (tile.scale of the gradients), once per gradient element
//                 rather than once per score
//     mask:       nothing: masked scores have P = 0, so dS is 0 there already; only where a
//                 score_mod follows the mask (it may turn -inf into a finite score) are the
//                 masked elements zeroed explicitly
//   dQ = c dot(dS, K),  dK = c sum_head_groups(dot(dS^T, Q)),  c the product of the scales
//
// GQA: dot reads key/value head h / (H / Hkv) for query head h, so the gradients of K and V sum
// the query heads of each group (tile.sum_head_groups). Everything stays whole-tensor written
// form, so the backward is evaluated by the float64 reference like any kernel, and later tiled.
// A score_mod op without a derivative rule is an error at its file:line:col; so is anything in
// the kernel this derivation does not model.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/ScoreModDerivative.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>

namespace tilefuse {
#define GEN_PASS_DEF_TILEDERIVEBACKWARD
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// The forward attention of a kernel, as the derivation reads it.
struct ForwardAttention {
  LoadOp q, k, v;
  DotOp scores;                      ///< Q K^T
  SmallVector<Operation *> scoreOps; ///< scale / score_mod / mask, in forward order
  SoftmaxOp softmax;
  DotOp out; ///< P V
  StoreOp outStore, lseStore;
};

/// A view the backward takes as an argument: the forward must read or write it as one.
LogicalResult checkArgumentView(Operation *op, Value view) {
  if (!isa<BlockArgument>(view))
    return op->emitOpError("the derived backward needs this view to be an argument of the "
                           "kernel");
  return success();
}

FailureOr<ForwardAttention> matchForward(func::FuncOp fn, SoftmaxOp softmax) {
  ForwardAttention a;
  a.softmax = softmax;
  Value s = softmax.getInput();
  while (Operation *def = s.getDefiningOp()) {
    if (!isa<ScaleOp, ScoreModOp, MaskOp>(def))
      break;
    a.scoreOps.push_back(def);
    s = def->getOperand(0);
  }
  std::reverse(a.scoreOps.begin(), a.scoreOps.end());
  Operation *def = s.getDefiningOp();
  a.scores = dyn_cast_or_null<DotOp>(def);
  if (!a.scores || !a.scores.getTransposeRhs() || a.scores.getTransposeLhs()) {
    Operation *at = def ? def : softmax.getOperation();
    return at->emitOpError("is where the derived backward stops: the scores of tile.softmax "
                           "must come from tile.dot %q, %k transpose_rhs through tile.scale, "
                           "tile.score_mod and tile.mask only");
  }
  a.q = a.scores.getLhs().getDefiningOp<LoadOp>();
  a.k = a.scores.getRhs().getDefiningOp<LoadOp>();
  if (!a.q || !a.k)
    return a.scores.emitOpError("the derived backward needs both operands to be tile.load "
                                "results");

  for (Operation *user : softmax.getProbs().getUsers()) {
    auto dot = dyn_cast<DotOp>(user);
    if (!dot || dot.getLhs() != softmax.getProbs() || dot.getTransposeRhs() ||
        dot.getTransposeLhs() || a.out)
      return user->emitOpError("the derived backward needs the probabilities to feed exactly "
                               "one tile.dot %p, %v");
    a.out = dot;
  }
  if (!a.out)
    return softmax.emitOpError("the derived backward needs the probabilities to feed a "
                               "tile.dot %p, %v");
  a.v = a.out.getRhs().getDefiningOp<LoadOp>();
  if (!a.v)
    return a.out.emitOpError("the derived backward needs the value operand to be a tile.load "
                             "result");
  for (Operation *user : a.out.getResult().getUsers()) {
    auto store = dyn_cast<StoreOp>(user);
    if (!store || a.outStore)
      return user->emitOpError("the derived backward needs the attention output to feed "
                               "exactly one tile.store");
    a.outStore = store;
  }
  for (Operation *user : softmax.getLogsumexp().getUsers()) {
    auto store = dyn_cast<StoreOp>(user);
    if (!store || a.lseStore)
      return user->emitOpError("the derived backward needs the logsumexp to feed exactly one "
                               "tile.store");
    a.lseStore = store;
  }
  if (!a.outStore || !a.lseStore)
    return softmax.emitOpError("the derived backward recomputes P from the stored logsumexp: "
                               "the kernel must store both the output and the logsumexp");
  for (auto [op, view] :
       {std::pair<Operation *, Value>{a.q, a.q.getView()}, {a.k, a.k.getView()},
        {a.v, a.v.getView()}, {a.outStore, a.outStore.getView()},
        {a.lseStore, a.lseStore.getView()}})
    if (failed(checkArgumentView(op, view)))
      return failure();

  // Every other tile op would compute something the gradient does not account for.
  llvm::SmallPtrSet<Operation *, 16> known = {a.q,       a.k,          a.v,         a.scores,
                                              a.softmax, a.out,        a.outStore, a.lseStore};
  known.insert(a.scoreOps.begin(), a.scoreOps.end());
  for (Operation &op : fn.getBody().front().without_terminator())
    if (isa<TileDialect>(op.getDialect()) && !known.contains(&op))
      return op.emitOpError("is not part of the attention the derived backward differentiates "
                            "(Q, K, V loads, Q.K^T, scale/score_mod/mask, softmax, P.V, the "
                            "stores of O and the logsumexp)");
  return a;
}

RankedTensorType f32Tensor(ArrayRef<int64_t> shape, MLIRContext *ctx) {
  return RankedTensorType::get(shape, Float32Type::get(ctx));
}

/// The tensor a tile.load of `view` gives.
RankedTensorType loadedType(Value view) {
  auto t = cast<MemRefType>(view.getType());
  return RankedTensorType::get(t.getShape(), t.getElementType());
}

/// tile.map over `inputs` with the scalar body `body` (one f32 per input).
Value buildMap(OpBuilder &b, Location loc, RankedTensorType type, ValueRange inputs,
               function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  auto map = MapOp::create(b, loc, type, inputs);
  OpBuilder::InsertionGuard guard(b);
  SmallVector<Type> argTypes(inputs.size(), b.getF32Type());
  SmallVector<Location> argLocs(inputs.size(), loc);
  Block *block = b.createBlock(&map.getBody(), {}, argTypes, argLocs);
  YieldOp::create(b, loc, ValueRange{body(b, loc, block->getArguments())});
  return map.getResult();
}

/// The factor of a tile.scale of the scores: its `by`, else 1/sqrt(D) of Q.K^T.
FailureOr<double> scaleFactor(ScaleOp scale, ForwardAttention &a) {
  if (scale.getFactor())
    return scale.getFactor()->convertToDouble();
  int64_t d = a.q.getResult().getType().getDimSize(3);
  if (ShapedType::isDynamic(d))
    return scale.emitOpError("the derived backward needs the factor: give tile.scale `by`, or "
                             "specialize the kernel to a static head dimension");
  return 1.0 / std::sqrt(double(d));
}

/// Builds @NAME_backward after `fn`; on failure nothing is left behind.
LogicalResult deriveBackward(func::FuncOp fn, ForwardAttention &a) {
  MLIRContext *ctx = fn.getContext();
  std::string name = (fn.getSymName() + "_backward").str();
  if (SymbolTable::lookupNearestSymbolFrom(fn, StringAttr::get(ctx, name)))
    return fn.emitOpError("already has a function named @") << name;

  Value Q = a.q.getView(), K = a.k.getView(), V = a.v.getView(), O = a.outStore.getView(),
        LSE = a.lseStore.getView();
  if (llvm::SmallDenseSet<Value, 8>({Q, K, V, O, LSE}).size() != 5)
    return fn.emitOpError("the derived backward needs Q, K, V, O and the logsumexp to be five "
                          "different arguments");
  SmallVector<Type> argTypes = {Q.getType(), K.getType(), V.getType(),   O.getType(),
                                O.getType(), LSE.getType(), Q.getType(), K.getType(),
                                V.getType()};
  OpBuilder b(ctx);
  b.setInsertionPointAfter(fn);
  auto bwd = func::FuncOp::create(b, fn.getLoc(), name, b.getFunctionType(argTypes, {}));
  Block *entry = bwd.addEntryBlock();
  auto fail = [&]() {
    bwd.erase();
    return failure();
  };
  b.setInsertionPointToStart(entry);
  Value bQ = entry->getArgument(0), bK = entry->getArgument(1), bV = entry->getArgument(2),
        bO = entry->getArgument(3), bDO = entry->getArgument(4), bLSE = entry->getArgument(5),
        bDQ = entry->getArgument(6), bDK = entry->getArgument(7), bDV = entry->getArgument(8);
  IRMapping map;
  map.map(Q, bQ);
  map.map(K, bK);
  map.map(V, bV);
  map.map(O, bO);
  map.map(LSE, bLSE);
  // The backward's signature holds these five (and the gradients) only; scalar code may use any
  // argument (its sizes), so another argument would have nothing to map to.
  for (BlockArgument arg : fn.getArguments())
    if (!map.contains(arg)) {
      bwd.erase();
      return fn.emitOpError("the derived backward needs every argument to be Q, K, V, O or the "
                            "logsumexp; argument #")
             << arg.getArgNumber() << " is none of them";
    }

  // Scalars outside the tensors (constants, sizes of views) that the regions capture.
  for (Operation &op : fn.getBody().front().without_terminator()) {
    if (isa<TileDialect>(op.getDialect()))
      continue;
    if (llvm::any_of(op.getOperands(), [&](Value v) { return !map.contains(v); })) {
      bwd.erase();
      return op.emitOpError("uses a tensor of the attention, which the derived backward "
                            "cannot differentiate");
    }
    b.clone(op, map);
  }

  Location loc = a.softmax.getLoc();
  Value q = b.clone(*a.q, map)->getResult(0);
  Value k = b.clone(*a.k, map)->getResult(0);
  Value v = b.clone(*a.v, map)->getResult(0);
  Value o = LoadOp::create(b, a.outStore.getLoc(), loadedType(bO), bO);
  Value dO = LoadOp::create(b, a.outStore.getLoc(), loadedType(bDO), bDO);
  Value lse = LoadOp::create(b, a.lseStore.getLoc(), loadedType(bLSE), bLSE);

  // The forward scores again, with every score_mod's derivative beside its value.
  struct ChainStep {
    Operation *forward;
    double factor = 1.0;  ///< scale
    Value derivative;     ///< score_mod: f'(input)
    Value output;         ///< mask: the masked scores
  };
  SmallVector<ChainStep> steps;
  b.clone(*a.scores, map);
  for (Operation *op : a.scoreOps) {
    ChainStep step{op};
    if (auto scoreMod = dyn_cast<ScoreModOp>(op)) {
      auto copy = cast<ScoreModOp>(b.clone(*op, map));
      FailureOr<ScoreModGradOp> grad = buildScoreModGrad(b, copy);
      if (failed(grad))
        return fail();
      copy.erase();
      map.map(scoreMod.getResult(), grad->getValue());
      step.derivative = grad->getDerivative();
    } else if (auto scale = dyn_cast<ScaleOp>(op)) {
      FailureOr<double> factor = scaleFactor(scale, a);
      if (failed(factor))
        return fail();
      step.factor = *factor;
      // The backward states the factor it differentiates with.
      auto copy = cast<ScaleOp>(b.clone(*op, map));
      copy.setFactorAttr(b.getF64FloatAttr(*factor));
    } else {
      b.clone(*op, map);
    }
    step.output = map.lookup(op->getResult(0));
    steps.push_back(step);
  }
  Value s = map.lookup(a.softmax.getInput());

  auto scoresType = cast<RankedTensorType>(s.getType());
  ArrayRef<int64_t> qShape = a.q.getResult().getType().getShape();
  ArrayRef<int64_t> kShape = a.k.getResult().getType().getShape();
  ArrayRef<int64_t> vShape = a.v.getResult().getType().getShape();
  ArrayRef<int64_t> oShape = cast<RankedTensorType>(o.getType()).getShape();
  int64_t B = qShape[0], H = qShape[1], N = kShape[2];
  RankedTensorType rowsType = f32Tensor(qShape.take_front(3), ctx);

  Value p = SoftmaxFromLseOp::create(b, loc, scoresType, s, lse);
  // D_i = sum_d dO[i, d] O[i, d]: the softmax backward's row term, once per row.
  Location outLoc = a.out.getLoc();
  Value dOo = buildMap(b, outLoc, f32Tensor(oShape, ctx), ValueRange{dO, o},
                       [](OpBuilder &nb, Location l, ValueRange x) -> Value {
                         return arith::MulFOp::create(nb, l, x[0], x[1]);
                       });
  Value rowTerm = RowReduceOp::create(b, outLoc, rowsType,
                                      ReduceKindAttr::get(ctx, ReduceKind::Sum), dOo);

  // dV = P^T dO, summed over the query heads of each key/value head.
  Value dVPerHead = DotOp::create(b, outLoc, f32Tensor({B, H, N, vShape[3]}, ctx), p, dO,
                                  /*transpose_rhs=*/false, /*transpose_lhs=*/true);
  Value vHeads = memref::DimOp::create(b, outLoc, bV, 1);
  Value dV = SumHeadGroupsOp::create(b, outLoc, f32Tensor(vShape, ctx), dVPerHead, vHeads);

  // dS = P o (dP - D), dP = dO V^T.
  Value dP = DotOp::create(b, outLoc, scoresType, dO, v, /*transpose_rhs=*/true,
                           /*transpose_lhs=*/false);
  Value dS = buildMap(b, loc, scoresType, ValueRange{p, dP, rowTerm},
                      [](OpBuilder &nb, Location l, ValueRange x) -> Value {
                        Value centered = arith::SubFOp::create(nb, l, x[1], x[2]);
                        return arith::MulFOp::create(nb, l, x[0], centered);
                      });

  // Back through the score chain, last op first.
  bool scoreModFollows = false;
  double gradientFactor = 1.0; ///< the chain's scales, applied to dQ and dK
  Location gradientFactorLoc = loc;
  for (const ChainStep &step : llvm::reverse(steps)) {
    Location stepLoc = step.forward->getLoc();
    if (isa<ScoreModOp>(step.forward)) {
      dS = buildMap(b, stepLoc, scoresType, ValueRange{dS, step.derivative},
                    [](OpBuilder &nb, Location l, ValueRange x) -> Value {
                      return arith::MulFOp::create(nb, l, x[0], x[1]);
                    });
      scoreModFollows = true;
    } else if (isa<ScaleOp>(step.forward)) {
      // Every step back through the chain is linear in dS, so the factor moves out of it into
      // the gradients that dS feeds: once per gradient element instead of once per score.
      gradientFactor *= step.factor;
      gradientFactorLoc = stepLoc;
    } else if (scoreModFollows) {
      // A masked score is the constant -inf: no gradient reaches the input there, whatever the
      // score_mod after it made of -inf (and its derivative at -inf may be NaN).
      dS = buildMap(b, stepLoc, scoresType, ValueRange{dS, step.output},
                    [](OpBuilder &nb, Location l, ValueRange x) -> Value {
                      Value negInf = arith::ConstantOp::create(
                          nb, l, nb.getF32FloatAttr(-INFINITY));
                      Value zero = arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(0.0f));
                      Value masked =
                          arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, x[1], negInf);
                      return arith::SelectOp::create(nb, l, masked, zero, x[0]);
                    });
    }
  }

  // dQ = dS K (query head h reads key head h / (H / Hkv)); dK = dS^T Q, summed per group.
  Location qkLoc = a.scores.getLoc();
  Value dQ = DotOp::create(b, qkLoc, f32Tensor(qShape, ctx), dS, k, /*transpose_rhs=*/false,
                           /*transpose_lhs=*/false);
  Value dKPerHead = DotOp::create(b, qkLoc, f32Tensor({B, H, N, kShape[3]}, ctx), dS, q,
                                  /*transpose_rhs=*/false, /*transpose_lhs=*/true);
  Value kHeads = memref::DimOp::create(b, qkLoc, bK, 1);
  Value dK = SumHeadGroupsOp::create(b, qkLoc, f32Tensor(kShape, ctx), dKPerHead, kHeads);
  if (gradientFactor != 1.0) {
    dQ = ScaleOp::create(b, gradientFactorLoc, dQ.getType(), dQ,
                         b.getF64FloatAttr(gradientFactor));
    dK = ScaleOp::create(b, gradientFactorLoc, dK.getType(), dK,
                         b.getF64FloatAttr(gradientFactor));
  }

  StoreOp::create(b, qkLoc, dQ, bDQ);
  StoreOp::create(b, qkLoc, dK, bDK);
  StoreOp::create(b, outLoc, dV, bDV);
  func::ReturnOp::create(b, fn.getLoc());
  return success();
}

struct TileDeriveBackwardPass
    : public tilefuse::impl::TileDeriveBackwardBase<TileDeriveBackwardPass> {
  using TileDeriveBackwardBase::TileDeriveBackwardBase;

  void runOnOperation() override {
    SmallVector<func::FuncOp> kernels;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal() && !fn.getBody().getOps<SoftmaxOp>().empty())
        kernels.push_back(fn);
    bool failedAny = false;
    for (func::FuncOp fn : kernels) {
      // Every kernel's errors are reported, not only the first kernel's.
      auto fail = [&] { failedAny = true; };
      if (!fn.getBody().hasOneBlock() || fn.getNumResults() != 0) {
        fn.emitOpError("the derived backward needs a kernel of one block that returns nothing");
        fail();
        continue;
      }
      auto softmaxes = llvm::to_vector(fn.getBody().getOps<SoftmaxOp>());
      if (softmaxes.size() != 1) {
        softmaxes[1].emitOpError("is a second attention in the kernel: the derived backward "
                                 "differentiates one");
        fail();
        continue;
      }
      FailureOr<ForwardAttention> forward = matchForward(fn, softmaxes.front());
      if (failed(forward) || failed(deriveBackward(fn, *forward)))
        fail();
    }
    if (failedAny)
      return signalPassFailure();
    if (!keepForward)
      for (func::FuncOp fn : kernels)
        fn.erase();
  }
};

} // namespace
