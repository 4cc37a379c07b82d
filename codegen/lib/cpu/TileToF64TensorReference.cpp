//===- TileToF64TensorReference.cpp - the written form, whole tensors in f64 -===//
//
// The float64 reference of written forms that are not row by row: a derived backward kernel
// (tile-derive-backward) reduces over query rows (dV = P^T dO, dK = dS^T Q) and over query heads
// (tile.sum_head_groups), so the row reference (tile-to-f64-reference) cannot evaluate it. Here
// every tile op of the written form becomes a loop nest that fills an f64 buffer holding its whole
// result, by the op's definition, and nothing else: no tiling, no fusion, no online softmax. It is
// single-threaded and O(B H M N) in memory: a reference for tests and small problems.
//
// Kernel @k(views...) becomes @k_reference(views...), every view retyped to f64 with dynamic
// sizes and strides (the caller checks sizes), with a C interface. Per op:
//
//   tile.load            the view itself (read where it is used)
//   tile.dot             sum_k lhs[b, h, i, k] * rhs[b, h / (H / Hkv), k, j], either operand
//                        transposed as the op says
//   tile.scale           * factor (1/sqrt of the contraction of the tile.dot the scores come from
//                        without `by`)
//   tile.score_mod,
//   tile.score_mod_grad,
//   tile.mask, tile.map  the region per element, its f32 arithmetic promoted to f64
//   tile.softmax         two-pass per row; a row with no kept score gives zeros and -inf
//   tile.softmax_from_lse  exp(s - lse), 0 where lse = -inf
//   tile.row_reduce      sum (from 0) or max (from -inf) over the last dimension
//   tile.sum_head_groups sum over the H / Hkv query heads of each group
//   tile.store           copy into the view
//
//===----------------------------------------------------------------------===//
#include "tilefuse/codegen/Passes.h"

#include "F64Scalars.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "tilefuse/dialect/TileOps.h"

#include <cmath>

namespace tilefuse {
#define GEN_PASS_DEF_TILETOF64TENSORREFERENCE
#include "tilefuse/codegen/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// A written-form tensor in the reference: an f64 memref (a view, or a buffer holding it) and
/// its sizes.
struct Buffer {
  Value memref;
  SmallVector<Value> sizes;
  /// Scores: the contraction length of the tile.dot they come from (tile.scale's D).
  Value contraction;
};

class TensorReferenceBuilder {
public:
  explicit TensorReferenceBuilder(func::FuncOp kernel)
      : kernel(kernel), ctx(kernel.getContext()), f64(Float64Type::get(ctx)) {}

  FailureOr<func::FuncOp> build() {
    if (failed(check()))
      return failure();
    Location loc = kernel.getLoc();
    OpBuilder top(kernel);
    SmallVector<Type> argTypes;
    for (Type t : kernel.getArgumentTypes()) {
      auto view = dyn_cast<MemRefType>(t);
      if (!view)
        return kernel.emitOpError("the float64 reference takes views (memrefs) only, not ")
               << t;
      argTypes.push_back(cpu::f64ViewType(view));
    }
    auto fn = func::FuncOp::create(top, loc, (kernel.getSymName() + "_reference").str(),
                                   top.getFunctionType(argTypes, {}));
    fn->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
    Block *entry = fn.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockBegin(entry);
    for (auto [from, to] : llvm::zip(kernel.getArguments(), entry->getArguments()))
      map.map(from, to);
    // Scalars first: they depend on the arguments only (check() makes sure).
    for (Operation &op : kernel.getBody().front().without_terminator())
      if (!isa<TileDialect>(op.getDialect()))
        if (failed(cpu::cloneScalarInF64(b, op, map)))
          return failure();
    for (Operation &op : kernel.getBody().front().without_terminator())
      if (isa<TileDialect>(op.getDialect()))
        if (failed(evaluate(b, op)))
          return failure();
    func::ReturnOp::create(b, loc);
    return fn;
  }

private:
  LogicalResult check() {
    if (!kernel.getBody().hasOneBlock())
      return kernel.emitOpError("the float64 reference needs a kernel body of one block");
    if (kernel.getNumResults() != 0)
      return kernel.emitOpError("the float64 reference needs a kernel that returns nothing");
    for (Operation &op : kernel.getBody().front().without_terminator()) {
      if (isa<TileDialect>(op.getDialect())) {
        if (!isa<LoadOp, DotOp, ScaleOp, ScoreModOp, ScoreModGradOp, MaskOp, MapOp, SoftmaxOp,
                 SoftmaxFromLseOp, RowReduceOp, SumHeadGroupsOp, StoreOp>(op))
          return op.emitOpError("is not part of the written form the float64 reference "
                                "evaluates");
        continue;
      }
      if (failed(cpu::checkScalarOpOfWrittenForm(op)))
        return failure();
    }
    return success();
  }

  static Value idx(OpBuilder &b, Location loc, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }

  /// An f64 buffer of `sizes`.
  Buffer alloc(OpBuilder &b, Location loc, ArrayRef<Value> sizes) {
    auto type = MemRefType::get(SmallVector<int64_t>(sizes.size(), ShapedType::kDynamic), f64);
    Value buf = memref::AllocOp::create(b, loc, type, ValueRange(sizes));
    return {buf, SmallVector<Value>(sizes), {}};
  }

  /// for ivs in [0, sizes): body(ivs).
  void forAll(OpBuilder &b, Location loc, ArrayRef<Value> sizes,
              function_ref<void(OpBuilder &, ValueRange)> body) {
    SmallVector<Value> zeros(sizes.size(), idx(b, loc, 0)), ones(sizes.size(), idx(b, loc, 1));
    scf::buildLoopNest(b, loc, zeros, sizes, ones,
                       [&](OpBuilder &nb, Location, ValueRange ivs) { body(nb, ivs); });
  }


  FailureOr<Buffer> bufferOf(Operation &user, Value v) {
    auto it = values.find(v);
    if (it == values.end())
      return user.emitOpError("the float64 reference cannot evaluate an operand that is not a "
                              "tile op's result");
    return it->second;
  }

  Value load(OpBuilder &b, Location loc, const Buffer &buf, ValueRange ivs) {
    return memref::LoadOp::create(b, loc, buf.memref, ivs);
  }

  /// The region `body` at one element: its arguments bound to `args`, its ops cloned in f64;
  /// returns what it yields.
  FailureOr<SmallVector<Value>> inlineRegion(OpBuilder &b, Block &body, ValueRange args) {
    IRMapping m = map;
    m.map(body.getArguments(), args);
    for (Operation &inner : body.without_terminator())
      if (failed(cpu::cloneScalarInF64(b, inner, m)))
        return failure();
    return llvm::map_to_vector(cast<YieldOp>(body.getTerminator()).getValues(),
                               [&](Value v) { return m.lookupOrDefault(v); });
  }

  /// An op of one region applied per element of `in` (score_mod, score_mod_grad, mask): fills
  /// one buffer per result from the region's values.
  LogicalResult evaluateScoreRegion(OpBuilder &b, Operation &op, const Buffer &in) {
    Location loc = op.getLoc();
    bool isMask = isa<MaskOp>(op);
    SmallVector<Buffer> outs;
    for (unsigned i = 0; i < op.getNumResults(); ++i)
      outs.push_back(alloc(b, loc, in.sizes));
    LogicalResult status = success();
    forAll(b, loc, in.sizes, [&](OpBuilder &nb, ValueRange ivs) {
      if (failed(status))
        return;
      Value s = load(nb, loc, in, ivs);
      SmallVector<Value> args;
      if (!isMask)
        args.push_back(s);
      args.append(ivs.begin(), ivs.end());
      FailureOr<SmallVector<Value>> yielded = inlineRegion(nb, op.getRegion(0).front(), args);
      if (failed(yielded)) {
        status = failure();
        return;
      }
      if (isMask) {
        Value y = arith::SelectOp::create(nb, loc, (*yielded)[0], s,
                                          cpu::f64Constant(nb, loc, -INFINITY));
        memref::StoreOp::create(nb, loc, y, outs[0].memref, ivs);
        return;
      }
      for (auto [y, out] : llvm::zip(*yielded, outs))
        memref::StoreOp::create(nb, loc, y, out.memref, ivs);
    });
    if (failed(status))
      return failure();
    for (auto [result, out] : llvm::zip(op.getResults(), outs)) {
      out.contraction = in.contraction;
      values[result] = out;
    }
    return success();
  }

  LogicalResult evaluate(OpBuilder &b, Operation &op) {
    Location loc = op.getLoc();
    if (auto ld = dyn_cast<LoadOp>(op)) {
      Value view = map.lookup(ld.getView());
      Buffer buf{view, {}, {}};
      for (int64_t d = 0; d < ld.getView().getType().getRank(); ++d)
        buf.sizes.push_back(memref::DimOp::create(b, loc, view, d));
      values[ld.getResult()] = buf;
      return success();
    }
    if (auto dot = dyn_cast<DotOp>(op)) {
      FailureOr<Buffer> lhs = bufferOf(op, dot.getLhs()), rhs = bufferOf(op, dot.getRhs());
      if (failed(lhs) || failed(rhs))
        return failure();
      bool tl = dot.getTransposeLhs(), tr = dot.getTransposeRhs();
      Value rows = lhs->sizes[tl ? 3 : 2], contraction = lhs->sizes[tl ? 2 : 3];
      Value cols = rhs->sizes[tr ? 2 : 3];
      Buffer out = alloc(b, loc, {lhs->sizes[0], lhs->sizes[1], rows, cols});
      // GQA: query head h reads key/value head h / (H / Hkv).
      Value group = arith::DivUIOp::create(b, loc, lhs->sizes[1], rhs->sizes[1]);
      forAll(b, loc, out.sizes, [&](OpBuilder &nb, ValueRange ivs) {
        Value bi = ivs[0], h = ivs[1], i = ivs[2], j = ivs[3];
        Value hkv = arith::DivUIOp::create(nb, loc, h, group);
        Value sum = cpu::reduceOver(nb, loc, contraction, cpu::f64Constant(nb, loc, 0.0),
                           [&](OpBuilder &kb, Value acc, Value k) -> Value {
                             Value x = load(kb, loc, *lhs,
                                            tl ? ValueRange{bi, h, k, i} : ValueRange{bi, h, i, k});
                             Value y = load(kb, loc, *rhs,
                                            tr ? ValueRange{bi, hkv, j, k}
                                               : ValueRange{bi, hkv, k, j});
                             return arith::AddFOp::create(
                                 kb, loc, acc, arith::MulFOp::create(kb, loc, x, y));
                           });
        memref::StoreOp::create(nb, loc, sum, out.memref, ivs);
      });
      out.contraction = contraction;
      values[dot.getResult()] = out;
      return success();
    }
    if (auto scale = dyn_cast<ScaleOp>(op)) {
      FailureOr<Buffer> in = bufferOf(op, scale.getInput());
      if (failed(in))
        return failure();
      FailureOr<Value> scaleFactor = cpu::scaleFactorInF64(b, scale, in->contraction);
      if (failed(scaleFactor))
        return failure();
      Value factor = *scaleFactor;
      Buffer out = alloc(b, loc, in->sizes);
      forAll(b, loc, in->sizes, [&](OpBuilder &nb, ValueRange ivs) {
        Value s = load(nb, loc, *in, ivs);
        memref::StoreOp::create(nb, loc, arith::MulFOp::create(nb, loc, s, factor), out.memref,
                                ivs);
      });
      out.contraction = in->contraction;
      values[scale.getResult()] = out;
      return success();
    }
    if (isa<ScoreModOp, ScoreModGradOp, MaskOp>(op)) {
      FailureOr<Buffer> in = bufferOf(op, op.getOperand(0));
      if (failed(in))
        return failure();
      return evaluateScoreRegion(b, op, *in);
    }
    if (auto mapOp = dyn_cast<MapOp>(op)) {
      SmallVector<Buffer> ins;
      for (Value input : mapOp.getInputs()) {
        FailureOr<Buffer> in = bufferOf(op, input);
        if (failed(in))
          return failure();
        ins.push_back(*in);
      }
      int64_t rank = mapOp.getResult().getType().getRank();
      const Buffer *full = llvm::find_if(ins, [&](const Buffer &in) {
        return int64_t(in.sizes.size()) == rank;
      });
      Buffer out = alloc(b, loc, full->sizes);
      LogicalResult status = success();
      forAll(b, loc, out.sizes, [&](OpBuilder &nb, ValueRange ivs) {
        if (failed(status))
          return;
        // A rank-3 operand beside rank-4 ones is per row: repeated along the last dimension.
        SmallVector<Value> args = llvm::map_to_vector(ins, [&](const Buffer &in) -> Value {
          return load(nb, loc, in, ivs.take_front(in.sizes.size()));
        });
        FailureOr<SmallVector<Value>> yielded =
            inlineRegion(nb, mapOp.getBody().front(), args);
        if (failed(yielded)) {
          status = failure();
          return;
        }
        memref::StoreOp::create(nb, loc, (*yielded)[0], out.memref, ivs);
      });
      if (failed(status))
        return failure();
      values[mapOp.getResult()] = out;
      return success();
    }
    if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
      FailureOr<Buffer> in = bufferOf(op, softmax.getInput());
      if (failed(in))
        return failure();
      ArrayRef<Value> rowSizes = ArrayRef<Value>(in->sizes).take_front(3);
      Buffer probs = alloc(b, loc, in->sizes);
      Buffer lse = alloc(b, loc, rowSizes);
      Value n = in->sizes[3];
      forAll(b, loc, rowSizes, [&](OpBuilder &rb, ValueRange row) {
        auto at = [&](Value j) {
          return SmallVector<Value>{row[0], row[1], row[2], j};
        };
        Value negInf = cpu::f64Constant(rb, loc, -INFINITY), zero = cpu::f64Constant(rb, loc, 0.0);
        Value max =
            cpu::reduceOver(rb, loc, n, negInf, [&](OpBuilder &nb, Value acc, Value j) -> Value {
              return arith::MaximumFOp::create(nb, loc, acc, load(nb, loc, *in, at(j)));
            });
        // No kept score: shift by 0, so every exp is 0, P is 0 and the logsumexp -inf.
        Value empty = arith::CmpFOp::create(rb, loc, arith::CmpFPredicate::OEQ, max, negInf);
        Value shift = arith::SelectOp::create(rb, loc, empty, zero, max);
        auto shiftedExp = [&](OpBuilder &nb, Value j) -> Value {
          return math::ExpOp::create(
              nb, loc, arith::SubFOp::create(nb, loc, load(nb, loc, *in, at(j)), shift));
        };
        Value sum =
            cpu::reduceOver(rb, loc, n, zero, [&](OpBuilder &nb, Value acc, Value j) -> Value {
              return arith::AddFOp::create(nb, loc, acc, shiftedExp(nb, j));
            });
        Value none = arith::CmpFOp::create(rb, loc, arith::CmpFPredicate::OEQ, sum, zero);
        forAll(rb, loc, {n}, [&](OpBuilder &nb, ValueRange j) {
          Value p = arith::DivFOp::create(nb, loc, shiftedExp(nb, j[0]), sum);
          p = arith::SelectOp::create(nb, loc, none, zero, p);
          memref::StoreOp::create(nb, loc, p, probs.memref, at(j[0]));
        });
        Value l = arith::AddFOp::create(rb, loc, shift, math::LogOp::create(rb, loc, sum));
        memref::StoreOp::create(rb, loc, l, lse.memref, row);
      });
      values[softmax.getProbs()] = probs;
      values[softmax.getLogsumexp()] = lse;
      return success();
    }
    if (auto fromLse = dyn_cast<SoftmaxFromLseOp>(op)) {
      FailureOr<Buffer> in = bufferOf(op, fromLse.getScores()),
                        lse = bufferOf(op, fromLse.getLogsumexp());
      if (failed(in) || failed(lse))
        return failure();
      Buffer out = alloc(b, loc, in->sizes);
      forAll(b, loc, in->sizes, [&](OpBuilder &nb, ValueRange ivs) {
        Value l = load(nb, loc, *lse, ivs.take_front(3));
        Value s = load(nb, loc, *in, ivs);
        Value p = math::ExpOp::create(nb, loc, arith::SubFOp::create(nb, loc, s, l));
        // A fully masked row has lse = -inf (and s = -inf): its probabilities are 0, not NaN.
        Value empty = arith::CmpFOp::create(nb, loc, arith::CmpFPredicate::OEQ, l,
                                            cpu::f64Constant(nb, loc, -INFINITY));
        p = arith::SelectOp::create(nb, loc, empty, cpu::f64Constant(nb, loc, 0.0), p);
        memref::StoreOp::create(nb, loc, p, out.memref, ivs);
      });
      values[fromLse.getProbs()] = out;
      return success();
    }
    if (auto rowReduce = dyn_cast<RowReduceOp>(op)) {
      FailureOr<Buffer> in = bufferOf(op, rowReduce.getInput());
      if (failed(in))
        return failure();
      bool isMax = rowReduce.getKind() == ReduceKind::Max;
      ArrayRef<Value> rowSizes = ArrayRef<Value>(in->sizes).take_front(3);
      Buffer out = alloc(b, loc, rowSizes);
      forAll(b, loc, rowSizes, [&](OpBuilder &rb, ValueRange row) {
        Value init = cpu::f64Constant(rb, loc, isMax ? -INFINITY : 0.0);
        Value r = cpu::reduceOver(rb, loc, in->sizes[3], init,
                         [&](OpBuilder &nb, Value acc, Value j) -> Value {
                           Value x = load(nb, loc, *in, {row[0], row[1], row[2], j});
                           if (isMax)
                             return arith::MaximumFOp::create(nb, loc, acc, x);
                           return arith::AddFOp::create(nb, loc, acc, x);
                         });
        memref::StoreOp::create(rb, loc, r, out.memref, row);
      });
      values[rowReduce.getResult()] = out;
      return success();
    }
    if (auto groups = dyn_cast<SumHeadGroupsOp>(op)) {
      FailureOr<Buffer> in = bufferOf(op, groups.getInput());
      if (failed(in))
        return failure();
      Value kvHeads = map.lookupOrDefault(groups.getKvHeads());
      Value groupSize = arith::DivUIOp::create(b, loc, in->sizes[1], kvHeads);
      Buffer out = alloc(b, loc, {in->sizes[0], kvHeads, in->sizes[2], in->sizes[3]});
      forAll(b, loc, out.sizes, [&](OpBuilder &nb, ValueRange ivs) {
        Value first = arith::MulIOp::create(nb, loc, ivs[1], groupSize);
        Value sum = cpu::reduceOver(nb, loc, groupSize, cpu::f64Constant(nb, loc, 0.0),
                           [&](OpBuilder &kb, Value acc, Value j) -> Value {
                             Value h = arith::AddIOp::create(kb, loc, first, j);
                             Value x = load(kb, loc, *in, {ivs[0], h, ivs[2], ivs[3]});
                             return arith::AddFOp::create(kb, loc, acc, x);
                           });
        memref::StoreOp::create(nb, loc, sum, out.memref, ivs);
      });
      values[groups.getResult()] = out;
      return success();
    }
    auto store = cast<StoreOp>(op);
    FailureOr<Buffer> value = bufferOf(op, store.getValue());
    if (failed(value))
      return failure();
    Value view = map.lookup(store.getView());
    forAll(b, loc, value->sizes, [&](OpBuilder &nb, ValueRange ivs) {
      memref::StoreOp::create(nb, loc, load(nb, loc, *value, ivs), view, ivs);
    });
    return success();
  }

  func::FuncOp kernel;
  MLIRContext *ctx;
  Type f64;
  IRMapping map; ///< kernel values -> reference values (arguments, scalars)
  llvm::DenseMap<Value, Buffer> values;
};

struct TileToF64TensorReferencePass
    : public tilefuse::impl::TileToF64TensorReferenceBase<TileToF64TensorReferencePass> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> kernels;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal())
        kernels.push_back(fn);
    for (func::FuncOp kernel : kernels) {
      if (failed(TensorReferenceBuilder(kernel).build()))
        return signalPassFailure();
      kernel.erase();
    }
  }
};

} // namespace
