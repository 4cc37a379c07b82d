//===- TileScoreModDerivative.cpp - df/ds of a score region, op by op ----===//
//
// Forward-mode differentiation of a score region with respect to its score argument s: every
// floating-point value v of the region that depends on s gets a tangent dv/ds, emitted right
// after the copy of the op that defines v, from the op's chain rule:
//
//   %x = arith.divf %score, %cap         %dx = arith.divf %one, %cap        (d(score) = 1)
//   %t = math.tanh %x                    %dt = (1 - %t * %t) * %dx
//   %r = arith.mulf %t, %cap             %dr = %dt * %cap
//   tile.yield %r                        tile.yield %r, %dr
//
// Forward mode because a score region has one input that carries a gradient (s) and one output,
// so one sweep in program order gives df/ds with no tape, and f's ops are copied as they are, so
// the backward pass recomputes exactly the forward scores. A value that does not depend on s
// (an index, a constant, a value captured from above, anything computed from those) has tangent
// zero and is represented by no tangent at all, so alibi's bias emits no derivative ops and its
// df/ds is the constant 1. Integer and i1 values carry no gradient: a comparison of s or a
// conversion of s to an integer is piecewise constant (its derivative is zero wherever it
// exists), and a select on such a condition differentiates to a select of the tangents.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/Passes.h"
#include "tilefuse/passes/ScoreModDerivative.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVectorExtras.h"
#include "llvm/ADT/TypeSwitch.h"


namespace tilefuse {
#define GEN_PASS_DEF_TILESCOREMODDERIVATIVE
#include "tilefuse/passes/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// How an op that reads the score (directly or through other ops) is differentiated.
enum class Rule {
  ChainRule,         ///< its float result gets a tangent from its operands' tangents
  PiecewiseConstant, ///< its result (an integer or i1) carries no gradient
  None,              ///< no derivative: an error at the op
};

Rule ruleFor(Operation *op) {
  if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp, arith::NegFOp,
          arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp,
          arith::SelectOp, arith::ExtFOp, arith::TruncFOp, math::TanhOp, math::ExpOp,
          math::Exp2Op, math::ExpM1Op, math::LogOp, math::Log2Op, math::Log1pOp, math::SqrtOp,
          math::RsqrtOp, math::AbsFOp, math::FmaOp, math::PowFOp>(op))
    return Rule::ChainRule;
  if (isa<arith::CmpFOp, arith::FPToSIOp, arith::FPToUIOp, math::IsNaNOp, math::IsInfOp,
          math::IsFiniteOp>(op))
    return Rule::PiecewiseConstant;
  return Rule::None;
}

/// Whether `op` reads a value of `active`, as an operand or from inside one of its regions.
bool readsActive(Operation *op, const llvm::DenseSet<Value> &active) {
  WalkResult found = op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      if (active.contains(operand))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found.wasInterrupted();
}

/// Builds tangents in one float type. A null Value is a zero tangent (a value independent of
/// the score), so only the terms that can be non-zero are emitted.
class TangentBuilder {
public:
  TangentBuilder(OpBuilder &b, Location loc, Type type) : b(b), loc(loc), type(type) {}

  Value constant(double v) { return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v)); }
  Value orZero(Value t) { return t ? t : constant(0.0); }
  Value add(Value x, Value y) {
    if (!x || !y)
      return x ? x : y;
    return arith::AddFOp::create(b, loc, x, y);
  }
  Value sub(Value x, Value y) {
    if (!y)
      return x;
    if (!x)
      return neg(y);
    return arith::SubFOp::create(b, loc, x, y);
  }
  Value neg(Value x) { return x ? arith::NegFOp::create(b, loc, x).getResult() : Value(); }
  /// A tangent times a primal value (or two primal values).
  Value mul(Value x, Value y) {
    if (!x || !y)
      return Value();
    return arith::MulFOp::create(b, loc, x, y);
  }
  Value div(Value x, Value y) {
    if (!x)
      return Value();
    return arith::DivFOp::create(b, loc, x, y);
  }
  Value select(Value condition, Value x, Value y) {
    if (!x && !y)
      return Value();
    return arith::SelectOp::create(b, loc, condition, orZero(x), orZero(y));
  }
  Value cmp(arith::CmpFPredicate predicate, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, predicate, x, y);
  }

private:
  OpBuilder &b;
  Location loc;
  Type type;
};

/// The tangent of `copy`'s result (the copy of a ChainRule op), from its operands (`copy`'s own,
/// already the copies) and their tangents `d` (null where zero). Each builder call is its own
/// statement: the order of evaluation of a call's arguments is unspecified in C++, and the
/// emitted IR must not depend on the compiler.
Value chainRule(OpBuilder &b, Operation *copy, ArrayRef<Value> d) {
  Value r = copy->getResult(0);
  Location loc = copy->getLoc();
  TangentBuilder t(b, loc, r.getType());
  auto x = [&](unsigned i) { return copy->getOperand(i); };
  constexpr double ln2 = 0.69314718055994530942;
  return llvm::TypeSwitch<Operation *, Value>(copy)
      .Case([&](arith::AddFOp) { return t.add(d[0], d[1]); })
      .Case([&](arith::SubFOp) { return t.sub(d[0], d[1]); })
      .Case([&](arith::NegFOp) { return t.neg(d[0]); })
      .Case([&](arith::MulFOp) {
        Value lhsTerm = t.mul(d[0], x(1));
        Value rhsTerm = t.mul(x(0), d[1]);
        return t.add(lhsTerm, rhsTerm);
      })
      // d(a / b) = (da - (a / b) db) / b.
      .Case([&](arith::DivFOp) {
        Value rhsTerm = t.mul(r, d[1]);
        return t.div(t.sub(d[0], rhsTerm), x(1));
      })
      // The result is one of the operands; the tangent is that operand's. On a tie (equal
      // operands) each gets half, as PyTorch's autograd of maximum/minimum does, so a clamp at
      // exactly its bound has derivative 1/2 in both. A NaN result equals neither operand and
      // takes the second's tangent; its value is NaN anyway.
      .Case<arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp>(
          [&](Operation *) -> Value {
            Value fromLhs = t.cmp(arith::CmpFPredicate::OEQ, r, x(0));
            Value fromRhs = t.cmp(arith::CmpFPredicate::OEQ, r, x(1));
            Value sum = t.add(d[0], d[1]);
            Value half = t.constant(0.5);
            Value tie = t.mul(sum, half);
            Value lhsOrTie = t.select(fromRhs, tie, d[0]);
            return t.select(fromLhs, lhsOrTie, d[1]);
          })
      // The condition carries no gradient: the derivative selects the same way.
      .Case([&](arith::SelectOp) { return t.select(x(0), d[1], d[2]); })
      .Case([&](arith::ExtFOp) { return arith::ExtFOp::create(b, loc, r.getType(), d[0]); })
      .Case([&](arith::TruncFOp) { return arith::TruncFOp::create(b, loc, r.getType(), d[0]); })
      // d tanh(x) = (1 - tanh^2(x)) dx.
      .Case([&](math::TanhOp) {
        Value one = t.constant(1.0);
        Value square = t.mul(r, r);
        return t.mul(d[0], t.sub(one, square));
      })
      .Case([&](math::ExpOp) { return t.mul(d[0], r); })
      .Case([&](math::Exp2Op) {
        Value lnTwo = t.constant(ln2);
        return t.mul(d[0], t.mul(r, lnTwo));
      })
      .Case([&](math::ExpM1Op) {
        Value one = t.constant(1.0);
        return t.mul(d[0], t.add(r, one));
      })
      .Case([&](math::LogOp) { return t.div(d[0], x(0)); })
      .Case([&](math::Log2Op) {
        Value lnTwo = t.constant(ln2);
        return t.div(d[0], t.mul(x(0), lnTwo));
      })
      .Case([&](math::Log1pOp) {
        Value one = t.constant(1.0);
        return t.div(d[0], t.add(x(0), one));
      })
      // d sqrt(x) = dx / (2 sqrt(x)): +inf at x = 0, as in PyTorch.
      .Case([&](math::SqrtOp) {
        Value half = t.constant(0.5);
        return t.div(t.mul(d[0], half), r);
      })
      // d x^(-1/2) = -1/2 x^(-3/2) dx = -1/2 r^3 dx.
      .Case([&](math::RsqrtOp) {
        Value minusHalf = t.constant(-0.5);
        Value square = t.mul(r, r);
        Value cube = t.mul(r, square);
        return t.mul(d[0], t.mul(minusHalf, cube));
      })
      // sign(x) dx, with the subgradient 0 at x = 0 (sign(0) = 0, as in PyTorch).
      .Case([&](math::AbsFOp) {
        Value zero = t.constant(0.0);
        Value positive = t.cmp(arith::CmpFPredicate::OGT, x(0), zero);
        Value negative = t.cmp(arith::CmpFPredicate::OLT, x(0), zero);
        Value negated = t.neg(d[0]);
        Value negativeOrZero = t.select(negative, negated, Value());
        return t.select(positive, d[0], negativeOrZero);
      })
      .Case([&](math::FmaOp) {
        Value lhsTerm = t.mul(d[0], x(1));
        Value rhsTerm = t.mul(x(0), d[1]);
        return t.add(t.add(lhsTerm, rhsTerm), d[2]);
      })
      // Only the base depends on the score (checkScoreDifferentiable): d x^e = e x^(e-1) dx.
      .Case([&](math::PowFOp) {
        Value one = t.constant(1.0);
        Value exponentLessOne = arith::SubFOp::create(b, loc, x(1), one);
        Value power = math::PowFOp::create(b, loc, x(0), exponentLessOne);
        return t.mul(d[0], t.mul(x(1), power));
      })
      .Default([](Operation *) -> Value { llvm_unreachable("an op without a chain rule"); });
}

} // namespace

LogicalResult tilefuse::checkScoreDifferentiable(Block &body) {
  llvm::DenseSet<Value> active{body.getArgument(0)};
  for (Operation &op : body.without_terminator()) {
    if (!readsActive(&op, active))
      continue;
    if (op.getNumRegions() != 0 || ruleFor(&op) == Rule::None)
      return op.emitOpError(
          "cannot be differentiated with respect to the score: the derivative of a score "
          "region is taken op by op, and only arith/math ops with a derivative rule (add, sub, "
          "mul, div, neg, maximum, minimum, select, float casts, comparisons, tanh, exp, exp2, "
          "expm1, log, log2, log1p, sqrt, rsqrt, absf, fma, powf of a score base) may read the "
          "score");
    if (auto pow = dyn_cast<math::PowFOp>(op); pow && active.contains(pow.getRhs()))
      return op.emitOpError("cannot be differentiated with respect to the score: its exponent "
                            "depends on the score (only a score base is supported)");
    if (ruleFor(&op) == Rule::ChainRule)
      active.insert(op.getResult(0));
  }
  return success();
}

ScoreValueAndDerivative tilefuse::emitScoreDerivative(OpBuilder &b, Block &body,
                                                      ValueRange arguments) {
  IRMapping mapping;
  mapping.map(body.getArguments(), arguments);
  // Tangents of the body's values (keyed by the original value); absent means zero.
  llvm::DenseMap<Value, Value> tangent;
  Value score = body.getArgument(0);
  tangent[score] = TangentBuilder(b, score.getLoc(), score.getType()).constant(1.0);
  for (Operation &op : body.without_terminator()) {
    Operation *copy = b.clone(op, mapping);
    if (ruleFor(&op) != Rule::ChainRule ||
        llvm::none_of(op.getOperands(), [&](Value v) { return tangent.contains(v); }))
      continue;
    SmallVector<Value> operandTangents =
        llvm::map_to_vector(op.getOperands(), [&](Value v) { return tangent.lookup(v); });
    if (Value d = chainRule(b, copy, operandTangents))
      tangent[op.getResult(0)] = d;
  }
  Value f = body.getTerminator()->getOperand(0);
  Value df = tangent.lookup(f);
  if (!df)
    df = TangentBuilder(b, f.getLoc(), f.getType()).constant(0.0);
  return {mapping.lookupOrDefault(f), df};
}

FailureOr<ScoreModGradOp> tilefuse::buildScoreModGrad(OpBuilder &b, ScoreModOp scoreMod) {
  Block &body = scoreMod.getBody().front();
  if (failed(checkScoreDifferentiable(body)))
    return failure();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(scoreMod);
  Type scoresType = scoreMod.getType();
  auto grad = ScoreModGradOp::create(b, scoreMod.getLoc(), TypeRange{scoresType, scoresType},
                                     scoreMod.getInput());
  SmallVector<Location> argLocs =
      llvm::map_to_vector(body.getArguments(), [](BlockArgument a) { return a.getLoc(); });
  Block *gradBody = b.createBlock(&grad.getBody(), {}, body.getArgumentTypes(), argLocs);
  ScoreValueAndDerivative result = emitScoreDerivative(b, body, gradBody->getArguments());
  YieldOp::create(b, body.getTerminator()->getLoc(),
                  ValueRange{result.value, result.derivative});
  return grad;
}

namespace {

struct TileScoreModDerivativePass
    : public tilefuse::impl::TileScoreModDerivativeBase<TileScoreModDerivativePass> {
  void runOnOperation() override {
    SmallVector<ScoreModOp> scoreMods;
    getOperation().walk([&](ScoreModOp op) { scoreMods.push_back(op); });
    OpBuilder b(&getContext());
    bool failedAny = false;
    for (ScoreModOp scoreMod : scoreMods) {
      FailureOr<ScoreModGradOp> grad = buildScoreModGrad(b, scoreMod);
      if (failed(grad)) {
        failedAny = true; // every region's error is reported, not only the first
        continue;
      }
      scoreMod.getResult().replaceAllUsesWith(grad->getValue());
      scoreMod.erase();
    }
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
