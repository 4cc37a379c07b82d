//===- IntervalMask.cpp - mask regions evaluated over index intervals -----===//
//
// Integers are closed signed intervals [lo, hi] with a `valid` flag: an unsigned op on an
// interval that may hold negative numbers is not modeled and turns `valid` false at run time.
// Predicates are pairs (mayBeTrue, mayBeFalse). Everything is emitted with createOrFold, so
// constant parts fold away and a causal mask costs a couple of compares per block.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/IntervalMask.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "tilefuse/dialect/TileOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tilefuse;

namespace {

struct IntInterval {
  Value lo, hi;
  Value valid; // i1; null means always valid
  bool known() const { return lo && hi; }
};

struct BoolInterval {
  Value mayTrue, mayFalse;
};

class IntervalEvaluator {
public:
  IntervalEvaluator(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  void setInt(Value v, IntInterval iv) { ints[v] = iv; }

  BlockClassification run(Region &body) {
    Block &block = body.front();
    for (Operation &op : block.without_terminator())
      visit(op);
    auto yield = cast<tile::YieldOp>(block.getTerminator());
    BoolInterval r = getBool(yield.getValues()[0]);
    return {r.mayTrue, r.mayFalse};
  }

private:
  Value i1(bool v) { return arith::ConstantIntOp::create(b, loc, v ? 1 : 0, 1); }
  Value notB(Value v) { return b.createOrFold<arith::XOrIOp>(loc, v, i1(true)); }
  Value andB(Value x, Value y) { return b.createOrFold<arith::AndIOp>(loc, x, y); }
  Value orB(Value x, Value y) { return b.createOrFold<arith::OrIOp>(loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return b.createOrFold<arith::CmpIOp>(loc, p, x, y);
  }
  Value minS(Value x, Value y) { return b.createOrFold<arith::MinSIOp>(loc, x, y); }
  Value maxS(Value x, Value y) { return b.createOrFold<arith::MaxSIOp>(loc, x, y); }
  Value sel(Value c, Value x, Value y) { return b.createOrFold<arith::SelectOp>(loc, c, x, y); }
  Value cst(Type t, int64_t v) {
    return arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, v));
  }
  Value andValid(Value a, Value c) { return !a ? c : !c ? a : andB(a, c); }
  Value nonNegative(IntInterval iv) {
    return cmp(arith::CmpIPredicate::sge, iv.lo, cst(iv.lo.getType(), 0));
  }

  bool isBool(Value v) { return v.getType().isInteger(1); }

  IntInterval getInt(Value v) {
    auto it = ints.find(v);
    if (it != ints.end())
      return it->second;
    // Defined above the region: one known value.
    if (v.getType().isIntOrIndex() && !isBool(v) && !region()->isAncestor(v.getParentRegion()))
      return {v, v, Value()};
    return {};
  }

  BoolInterval getBool(Value v) {
    auto it = bools.find(v);
    if (it != bools.end())
      return it->second;
    if (isBool(v) && !region()->isAncestor(v.getParentRegion()))
      return {v, notB(v)};
    return {i1(true), i1(true)};
  }

  Region *region() { return regionPtr; }

  void visit(Operation &op) {
    if (op.getNumResults() != 1)
      return; // results stay unknown
    Value res = op.getResult(0);
    if (isBool(res)) {
      bools[res] = evalBool(op);
      return;
    }
    if (res.getType().isIntOrIndex())
      ints[res] = evalInt(op);
  }

  BoolInterval evalBool(Operation &op) {
    APInt cv;
    if (matchPattern(&op, m_ConstantInt(&cv)))
      return {i1(!cv.isZero()), i1(cv.isZero())};
    if (auto c = dyn_cast<arith::CmpIOp>(op))
      return evalCmp(c);
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op)) {
      BoolInterval x = getBool(op.getOperand(0)), y = getBool(op.getOperand(1));
      if (isa<arith::AndIOp>(op))
        return {andB(x.mayTrue, y.mayTrue), orB(x.mayFalse, y.mayFalse)};
      if (isa<arith::OrIOp>(op))
        return {orB(x.mayTrue, y.mayTrue), andB(x.mayFalse, y.mayFalse)};
      return {orB(andB(x.mayTrue, y.mayFalse), andB(x.mayFalse, y.mayTrue)),
              orB(andB(x.mayTrue, y.mayTrue), andB(x.mayFalse, y.mayFalse))};
    }
    if (auto s = dyn_cast<arith::SelectOp>(op)) {
      BoolInterval c = getBool(s.getCondition());
      BoolInterval x = getBool(s.getTrueValue()), y = getBool(s.getFalseValue());
      return {orB(andB(c.mayTrue, x.mayTrue), andB(c.mayFalse, y.mayTrue)),
              orB(andB(c.mayTrue, x.mayFalse), andB(c.mayFalse, y.mayFalse))};
    }
    return {i1(true), i1(true)};
  }

  BoolInterval evalCmp(arith::CmpIOp c) {
    using P = arith::CmpIPredicate;
    IntInterval x = getInt(c.getLhs()), y = getInt(c.getRhs());
    if (!x.known() || !y.known())
      return {i1(true), i1(true)};
    P p = c.getPredicate();
    Value valid = andValid(x.valid, y.valid);
    bool isUnsigned = p == P::ult || p == P::ule || p == P::ugt || p == P::uge;
    if (isUnsigned) // the signed reading is right when both sides are non-negative
      valid = andValid(valid, andB(nonNegative(x), nonNegative(y)));
    auto lessThan = [&](IntInterval a, IntInterval d, bool orEqual) -> BoolInterval {
      // a < d (or a <= d)
      if (orEqual)
        return {cmp(P::sle, a.lo, d.hi), cmp(P::sgt, a.hi, d.lo)};
      return {cmp(P::slt, a.lo, d.hi), cmp(P::sge, a.hi, d.lo)};
    };
    BoolInterval r;
    switch (p) {
    case P::slt:
    case P::ult:
      r = lessThan(x, y, false);
      break;
    case P::sle:
    case P::ule:
      r = lessThan(x, y, true);
      break;
    case P::sgt:
    case P::ugt:
      r = lessThan(y, x, false);
      break;
    case P::sge:
    case P::uge:
      r = lessThan(y, x, true);
      break;
    case P::eq:
    case P::ne: {
      Value overlap = andB(cmp(P::sle, x.lo, y.hi), cmp(P::sle, y.lo, x.hi));
      Value single = andB(andB(cmp(P::eq, x.lo, x.hi), cmp(P::eq, y.lo, y.hi)),
                          cmp(P::eq, x.lo, y.lo));
      r = {overlap, notB(single)};
      if (p == P::ne)
        std::swap(r.mayTrue, r.mayFalse);
      break;
    }
    }
    if (valid)
      r = {orB(r.mayTrue, notB(valid)), orB(r.mayFalse, notB(valid))};
    return r;
  }

  IntInterval evalInt(Operation &op) {
    APInt cv;
    if (matchPattern(&op, m_ConstantInt(&cv))) {
      // A copy where the interval code goes: the region's own constant does not dominate it
      // (until a canonicalizer hoists the constant out of the region).
      Value v = b.clone(op)->getResult(0);
      return {v, v, Value()};
    }
    return llvm::TypeSwitch<Operation *, IntInterval>(&op)
        .Case<arith::AddIOp>([&](auto o) {
          IntInterval x = getInt(o.getLhs()), y = getInt(o.getRhs());
          if (!x.known() || !y.known())
            return IntInterval{};
          return IntInterval{b.createOrFold<arith::AddIOp>(loc, x.lo, y.lo),
                             b.createOrFold<arith::AddIOp>(loc, x.hi, y.hi),
                             andValid(x.valid, y.valid)};
        })
        .Case<arith::SubIOp>([&](auto o) {
          IntInterval x = getInt(o.getLhs()), y = getInt(o.getRhs());
          if (!x.known() || !y.known())
            return IntInterval{};
          return IntInterval{b.createOrFold<arith::SubIOp>(loc, x.lo, y.hi),
                             b.createOrFold<arith::SubIOp>(loc, x.hi, y.lo),
                             andValid(x.valid, y.valid)};
        })
        .Case<arith::MulIOp>([&](auto o) {
          IntInterval x = getInt(o.getLhs()), y = getInt(o.getRhs());
          if (!x.known() || !y.known())
            return IntInterval{};
          Value p[4] = {b.createOrFold<arith::MulIOp>(loc, x.lo, y.lo),
                        b.createOrFold<arith::MulIOp>(loc, x.lo, y.hi),
                        b.createOrFold<arith::MulIOp>(loc, x.hi, y.lo),
                        b.createOrFold<arith::MulIOp>(loc, x.hi, y.hi)};
          return IntInterval{minS(minS(p[0], p[1]), minS(p[2], p[3])),
                             maxS(maxS(p[0], p[1]), maxS(p[2], p[3])),
                             andValid(x.valid, y.valid)};
        })
        .Case<arith::MinSIOp, arith::MaxSIOp>([&](auto o) {
          IntInterval x = getInt(o.getLhs()), y = getInt(o.getRhs());
          if (!x.known() || !y.known())
            return IntInterval{};
          bool isMin = isa<arith::MinSIOp>(o.getOperation());
          return IntInterval{isMin ? minS(x.lo, y.lo) : maxS(x.lo, y.lo),
                             isMin ? minS(x.hi, y.hi) : maxS(x.hi, y.hi),
                             andValid(x.valid, y.valid)};
        })
        .Case<arith::DivSIOp, arith::FloorDivSIOp, arith::CeilDivSIOp, arith::DivUIOp,
              arith::CeilDivUIOp>([&](auto o) {
          // Monotone in the dividend for a positive constant divisor.
          IntInterval x = getInt(o.getLhs());
          APInt d;
          if (!x.known() || !matchPattern(o.getRhs(), m_ConstantInt(&d)) || !d.isStrictlyPositive())
            return IntInterval{};
          Value valid = x.valid;
          if (isa<arith::DivUIOp, arith::CeilDivUIOp>(o.getOperation()))
            valid = andValid(valid, nonNegative(x));
          using OpTy = decltype(o);
          return IntInterval{b.createOrFold<OpTy>(loc, x.lo, o.getRhs()),
                             b.createOrFold<OpTy>(loc, x.hi, o.getRhs()), valid};
        })
        .Case<arith::RemSIOp, arith::RemUIOp>([&](auto o) {
          IntInterval x = getInt(o.getLhs());
          APInt d;
          if (!x.known() || !matchPattern(o.getRhs(), m_ConstantInt(&d)) || !d.isStrictlyPositive())
            return IntInterval{};
          Type t = x.lo.getType();
          Value c = o.getRhs();
          Value nonNeg = nonNegative(x);
          Value sameQuot = andB(nonNeg, cmp(arith::CmpIPredicate::eq,
                                            b.createOrFold<arith::DivSIOp>(loc, x.lo, c),
                                            b.createOrFold<arith::DivSIOp>(loc, x.hi, c)));
          int64_t dm1 = d.getSExtValue() - 1;
          Value lo = sel(sameQuot, b.createOrFold<arith::RemSIOp>(loc, x.lo, c),
                         sel(nonNeg, cst(t, 0), cst(t, -dm1)));
          Value hi = sel(sameQuot, b.createOrFold<arith::RemSIOp>(loc, x.hi, c), cst(t, dm1));
          Value valid = x.valid;
          if (isa<arith::RemUIOp>(o.getOperation()))
            valid = andValid(valid, nonNeg);
          return IntInterval{lo, hi, valid};
        })
        .Case<arith::IndexCastOp, arith::ExtSIOp, arith::TruncIOp>([&](auto o) {
          IntInterval x = getInt(o.getIn());
          if (!x.known())
            return IntInterval{};
          Type t = o.getType();
          using OpTy = decltype(o);
          return IntInterval{b.createOrFold<OpTy>(loc, t, x.lo), b.createOrFold<OpTy>(loc, t, x.hi),
                             x.valid};
        })
        .Case<arith::IndexCastUIOp, arith::ExtUIOp>([&](auto o) {
          IntInterval x = getInt(o.getIn());
          if (!x.known())
            return IntInterval{};
          Type t = o.getType();
          using OpTy = decltype(o);
          return IntInterval{b.createOrFold<OpTy>(loc, t, x.lo), b.createOrFold<OpTy>(loc, t, x.hi),
                             andValid(x.valid, nonNegative(x))};
        })
        .Case<arith::SelectOp>([&](auto o) {
          BoolInterval c = getBool(o.getCondition());
          IntInterval x = getInt(o.getTrueValue()), y = getInt(o.getFalseValue());
          if (!x.known() || !y.known())
            return IntInterval{};
          // Only true: x; only false: y; either: the hull.
          Value onlyTrue = notB(c.mayFalse), onlyFalse = notB(c.mayTrue);
          Value lo = sel(onlyTrue, x.lo, sel(onlyFalse, y.lo, minS(x.lo, y.lo)));
          Value hi = sel(onlyTrue, x.hi, sel(onlyFalse, y.hi, maxS(x.hi, y.hi)));
          return IntInterval{lo, hi, andValid(x.valid, y.valid)};
        })
        .Default([](Operation *) { return IntInterval{}; });
  }

public:
  Region *regionPtr = nullptr;

private:
  OpBuilder &b;
  Location loc;
  DenseMap<Value, IntInterval> ints;
  DenseMap<Value, BoolInterval> bools;
};

} // namespace

namespace {
/// The predicate with its operands exchanged: a < b  <=>  b > a.
arith::CmpIPredicate swapOperands(arith::CmpIPredicate p) {
  using P = arith::CmpIPredicate;
  switch (p) {
  case P::slt: return P::sgt;
  case P::sgt: return P::slt;
  case P::sle: return P::sge;
  case P::sge: return P::sle;
  case P::ult: return P::ugt;
  case P::ugt: return P::ult;
  case P::ule: return P::uge;
  case P::uge: return P::ule;
  default: return p;
  }
}

/// Narrows the intervals of q_idx and kv_idx by the mask's top-level conjuncts that bound them
/// directly (`kv_idx < N`, `kv_idx <= q_idx + w` with the other side known outside the region),
/// so that conjuncts are not judged separately where they can only hold at different elements
/// (a window edge that lies past the key bound). Elements cut away fail a conjunct: they count
/// as dropped, and a block cut down to nothing keeps nothing.
struct Narrowing {
  IntInterval q, kv;
  Value cutSomething; // i1
  Value nonEmpty;     // i1
};

Narrowing narrowByConjuncts(OpBuilder &b, Location loc, Region &body, IntInterval q,
                            IntInterval kv) {
  using P = arith::CmpIPredicate;
  Block &block = body.front();
  Value qArg = block.getArgument(2), kvArg = block.getArgument(3);
  IntInterval nq = q, nkv = kv;
  SmallVector<Value> work = {cast<tile::YieldOp>(block.getTerminator()).getValues()[0]};
  auto outside = [&](Value v) { return !body.isAncestor(v.getParentRegion()); };
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto a = v.getDefiningOp<arith::AndIOp>()) {
      work.push_back(a.getLhs());
      work.push_back(a.getRhs());
      continue;
    }
    auto c = v.getDefiningOp<arith::CmpIOp>();
    if (!c)
      continue;
    Value lhs = c.getLhs(), rhs = c.getRhs();
    P p = c.getPredicate();
    if (outside(lhs) && (rhs == qArg || rhs == kvArg)) { // bound OP arg -> arg OP' bound
      std::swap(lhs, rhs);
      p = swapOperands(p);
    }
    if ((lhs != qArg && lhs != kvArg) || !outside(rhs) || !rhs.getType().isIndex())
      continue;
    IntInterval &iv = lhs == qArg ? nq : nkv;
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    // Unsigned bounds read the same as signed ones only for a non-negative bound.
    bool isUnsigned = p == P::ult || p == P::ule || p == P::ugt || p == P::uge;
    Value usable = isUnsigned ? b.createOrFold<arith::CmpIOp>(loc, P::sge, rhs, zero) : Value();
    auto guarded = [&](Value narrowed, Value old) {
      return usable ? b.createOrFold<arith::SelectOp>(loc, usable, narrowed, old) : narrowed;
    };
    switch (p) {
    case P::slt:
    case P::ult:
      iv.hi = guarded(b.createOrFold<arith::MinSIOp>(
                          loc, iv.hi, b.createOrFold<arith::SubIOp>(loc, rhs, one)),
                      iv.hi);
      break;
    case P::sle:
    case P::ule:
      iv.hi = guarded(b.createOrFold<arith::MinSIOp>(loc, iv.hi, rhs), iv.hi);
      break;
    case P::sgt:
    case P::ugt:
      iv.lo = guarded(b.createOrFold<arith::MaxSIOp>(
                          loc, iv.lo, b.createOrFold<arith::AddIOp>(loc, rhs, one)),
                      iv.lo);
      break;
    case P::sge:
    case P::uge:
      iv.lo = guarded(b.createOrFold<arith::MaxSIOp>(loc, iv.lo, rhs), iv.lo);
      break;
    default:
      break;
    }
  }
  auto ne = [&](Value x, Value y) { return b.createOrFold<arith::CmpIOp>(loc, P::ne, x, y); };
  auto orB = [&](Value x, Value y) { return b.createOrFold<arith::OrIOp>(loc, x, y); };
  auto andB = [&](Value x, Value y) { return b.createOrFold<arith::AndIOp>(loc, x, y); };
  auto le = [&](Value x, Value y) { return b.createOrFold<arith::CmpIOp>(loc, P::sle, x, y); };
  Narrowing n{nq, nkv, Value(), Value()};
  n.cutSomething = orB(orB(ne(nq.lo, q.lo), ne(nq.hi, q.hi)), orB(ne(nkv.lo, kv.lo), ne(nkv.hi, kv.hi)));
  n.nonEmpty = andB(le(nq.lo, nq.hi), le(nkv.lo, nkv.hi));
  return n;
}
} // namespace

BlockClassification tilefuse::emitIntervalMaskEvaluation(OpBuilder &b, Location loc,
                                                         Region &maskBody, Value batch,
                                                         Value headLo, Value headHi,
                                                         Value rowLo, Value rowHi,
                                                         Value colLo, Value colHi) {
  IntervalEvaluator eval(b, loc);
  eval.regionPtr = &maskBody;
  Block &block = maskBody.front();
  eval.setInt(block.getArgument(0), {batch, batch, Value()});
  eval.setInt(block.getArgument(1), {headLo, headHi, Value()});
  Narrowing n = narrowByConjuncts(b, loc, maskBody, {rowLo, rowHi, Value()},
                                  {colLo, colHi, Value()});
  eval.setInt(block.getArgument(2), n.q);
  eval.setInt(block.getArgument(3), n.kv);
  BlockClassification c = eval.run(maskBody);
  c.mayKeep = b.createOrFold<arith::AndIOp>(loc, c.mayKeep, n.nonEmpty);
  c.mayDrop = b.createOrFold<arith::OrIOp>(loc, c.mayDrop, n.cutSomething);
  return c;
}
