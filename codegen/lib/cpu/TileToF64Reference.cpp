//===- TileToF64Reference.cpp - a kernel's written form, evaluated in f64 -===//
//
// The float64 reference of a kernel is its own written form (level 1), evaluated the naive way:
// every op by its definition, one query row at a time, in f64, with none of the passes it is
// used to check (no tiling, no online softmax, no block pruning). A variant is written once; its
// reference comes from the same text, so a user's own kernel is checked exactly like a bundled
// one.
//
// Kernel @k(Q, K, V, O, LSE) becomes
//
//   func.func @k_reference(%Q: memref<?x?x?x?xf64, strided<[?, ?, ?, ?], offset: ?>>, ...,
//                          %row_begin: index, %row_end: index)
//
// every view retyped to f64 with dynamic sizes and strides (the caller checks the kernel's
// declared sizes), evaluating the query rows r in [row_begin, row_end) of the B x H x M row space
// of the stored outputs (r = (b * H + h) * M + i), so a caller can spread rows over threads.
// Within a row, each written-form op is a loop over its row:
//
//   tile.load       the view itself (read where it is used)
//   tile.dot        s[j] = sum_k lhs[k] * rhs[b, h / (H / Hkv), j, k]  (or rhs[.., k, j])
//   tile.scale      s[j] * factor (1/sqrt of the contraction length without `by`)
//   tile.score_mod  the region per element, its f32 arithmetic promoted to f64
//   tile.mask       the region per element; -inf where it yields false
//   tile.softmax    two-pass: row max, then exp(s - max) / sum and max + log(sum); a row with
//                   no kept score gives zeros and -inf
//   tile.store      the row (or the logsumexp) into the view
//
// Scalar ops outside the regions (constants, memref.dim of a view, ...) are evaluated once at
// the top, promoted the same way.
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
#include "mlir/IR/Verifier.h"
#include "tilefuse/dialect/TileOps.h"

#include <cmath>

namespace tilefuse {
#define GEN_PASS_DEF_TILETOF64REFERENCE
#include "tilefuse/codegen/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// What a written-form value is, one query row (b, h, i) at a time.
struct RowValue {
  enum Kind { View, Row, Scalar } kind = View;
  /// View: the f64 view; Row: a memref<?xf64> holding the row; Scalar: an f64.
  Value value;
  /// Row: its length.
  Value length;
  /// Row of scores: the contraction length of the tile.dot it comes from (tile.scale's D).
  Value contraction;
};

/// Builds the reference of one kernel function.
class ReferenceBuilder {
public:
  ReferenceBuilder(func::FuncOp kernel) : kernel(kernel), ctx(kernel.getContext()) {
    f64 = Float64Type::get(ctx);
  }

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
    Type index = top.getIndexType();
    argTypes.append({index, index});
    auto fn = func::FuncOp::create(top, loc, (kernel.getSymName() + "_reference").str(),
                                   top.getFunctionType(argTypes, {}));
    fn->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
    Block *entry = fn.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockBegin(entry);
    for (auto [from, to] : llvm::zip(kernel.getArguments(), entry->getArguments()))
      map.map(from, to);
    Value rowBegin = entry->getArgument(kernel.getNumArguments());
    Value rowEnd = entry->getArgument(kernel.getNumArguments() + 1);

    // Scalars outside the regions first: they may only depend on the arguments.
    for (Operation &op : kernel.getBody().front().without_terminator())
      if (!isa<TileDialect>(op.getDialect()))
        if (failed(cloneInF64(b, op, map)))
          return failure();

    // The row space: B x H x M of the first stored view.
    StoreOp firstStore = *kernel.getBody().getOps<StoreOp>().begin();
    Value grid = map.lookup(firstStore.getView());
    heads = memref::DimOp::create(b, loc, grid, 1);
    rows = memref::DimOp::create(b, loc, grid, 2);

    auto loop = scf::ForOp::create(b, loc, rowBegin, rowEnd, idx(b, 1));
    // Buffers and sizes the ops below need go before the row loop.
    setup = OpBuilder::InsertPoint(entry, loop->getIterator());
    b.setInsertionPointToStart(loop.getBody());
    Value r = loop.getInductionVar();
    qIdx = arith::RemUIOp::create(b, loc, r, rows);
    Value bh = arith::DivUIOp::create(b, loc, r, rows);
    hIdx = arith::RemUIOp::create(b, loc, bh, heads);
    bIdx = arith::DivUIOp::create(b, loc, bh, heads);
    for (Operation &op : kernel.getBody().front().without_terminator())
      if (isa<TileDialect>(op.getDialect()))
        if (failed(evaluate(b, op)))
          return failure();
    b.setInsertionPointAfter(loop);
    func::ReturnOp::create(b, loc);
    return fn;
  }

private:
  /// The written form only: tile ops of level 1, scalar ops that never see a tensor, one store.
  LogicalResult check() {
    if (!kernel.getBody().hasOneBlock())
      return kernel.emitOpError("the float64 reference needs a kernel body of one block");
    if (kernel.getNumResults() != 0)
      return kernel.emitOpError("the float64 reference needs a kernel that returns nothing");
    bool stores = false;
    for (Operation &op : kernel.getBody().front().without_terminator()) {
      if (isa<TileDialect>(op.getDialect())) {
        if (!isa<LoadOp, DotOp, ScaleOp, ScoreModOp, MaskOp, SoftmaxOp, StoreOp>(op))
          return op.emitOpError("is not part of the written form the float64 reference "
                                "evaluates (tile.load, dot, scale, score_mod, mask, softmax, "
                                "store)");
        stores |= isa<StoreOp>(op);
        continue;
      }
      if (failed(cpu::checkScalarOpOfWrittenForm(op)))
        return failure();
    }
    if (!stores)
      return kernel.emitOpError("stores nothing: the float64 reference has no output to compute");
    return success();
  }

  static Value idx(OpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, b.getUnknownLoc(), v);
  }

  LogicalResult cloneInF64(OpBuilder &b, Operation &op, IRMapping &m) {
    return cpu::cloneScalarInF64(b, op, m);
  }

  /// A row buffer of `length` f64, allocated once before the row loop.
  Value rowBuffer(Value length) {
    OpBuilder b(ctx);
    b.restoreInsertionPoint(setup);
    auto type = MemRefType::get({ShapedType::kDynamic}, f64);
    Value buf = memref::AllocOp::create(b, kernel.getLoc(), type, ValueRange{length});
    setup = b.saveInsertionPoint();
    return buf;
  }

  /// memref.dim of a view, computed once before the row loop.
  Value dimBeforeLoop(Value view, int64_t d) {
    OpBuilder b(ctx);
    b.restoreInsertionPoint(setup);
    Value dim = memref::DimOp::create(b, kernel.getLoc(), view, d);
    setup = b.saveInsertionPoint();
    return dim;
  }

  using LoadAt = function_ref<Value(OpBuilder &, Value)>;
  using LoadAt2 = function_ref<Value(OpBuilder &, Value, Value)>;

  /// out[j] = sum over k of x(k) · y(j, k), four j at a time (four independent sums, each in k
  /// order), then the remaining j one at a time.
  void dotByColumnQuads(OpBuilder &b, Location loc, Value length, Value contraction, Value out,
                        LoadAt x, LoadAt2 y) {
    Value zero = cpu::f64Constant(b, loc, 0.0);
    Value four = idx(b, 4);
    Value quads = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, length, four),
                                        four);
    scf::ForOp::create(
        b, loc, idx(b, 0), quads, four, ValueRange{},
        [&](OpBuilder &nb, Location, Value j0, ValueRange) {
          SmallVector<Value> columns;
          for (int64_t c = 0; c < 4; ++c)
            columns.push_back(arith::AddIOp::create(nb, loc, j0, idx(nb, c)));
          auto sums = scf::ForOp::create(
              nb, loc, idx(nb, 0), contraction, idx(nb, 1),
              ValueRange{zero, zero, zero, zero},
              [&](OpBuilder &kb, Location, Value k, ValueRange acc) {
                Value xk = x(kb, k);
                SmallVector<Value> next;
                for (int64_t c = 0; c < 4; ++c)
                  next.push_back(arith::AddFOp::create(
                      kb, loc, acc[c], arith::MulFOp::create(kb, loc, xk, y(kb, columns[c], k))));
                scf::YieldOp::create(kb, loc, next);
              });
          for (int64_t c = 0; c < 4; ++c)
            memref::StoreOp::create(nb, loc, sums.getResult(c), out, columns[c]);
          scf::YieldOp::create(nb, loc);
        });
    scf::ForOp::create(b, loc, quads, length, idx(b, 1), ValueRange{},
                       [&](OpBuilder &nb, Location, Value j, ValueRange) {
                         Value sum = cpu::reduceOver(
                             nb, loc, contraction, zero,
                             [&](OpBuilder &kb, Value acc, Value k) -> Value {
                               return arith::AddFOp::create(
                                   kb, loc, acc,
                                   arith::MulFOp::create(kb, loc, x(kb, k), y(kb, j, k)));
                             });
                         memref::StoreOp::create(nb, loc, sum, out, j);
                         scf::YieldOp::create(nb, loc);
                       });
  }

  /// out[j] = sum over k of x(k) · y(j, k), by rows: out = 0, then for each k in order,
  /// out[j] += x(k) · y(j, k) for every j.
  void dotByRows(OpBuilder &b, Location loc, Value length, Value contraction, Value out,
                 LoadAt x, LoadAt2 y) {
    Value zero = cpu::f64Constant(b, loc, 0.0);
    forEach(b, loc, length,
            [&](OpBuilder &nb, Value j) { memref::StoreOp::create(nb, loc, zero, out, j); });
    forEach(b, loc, contraction, [&](OpBuilder &kb, Value k) {
      Value xk = x(kb, k);
      forEach(kb, loc, length, [&](OpBuilder &jb, Value j) {
        Value acc = memref::LoadOp::create(jb, loc, out, j);
        Value sum =
            arith::AddFOp::create(jb, loc, acc, arith::MulFOp::create(jb, loc, xk, y(jb, j, k)));
        memref::StoreOp::create(jb, loc, sum, out, j);
      });
    });
  }

  /// for j in [0, length): body(j).
  void forEach(OpBuilder &b, Location loc, Value length,
               function_ref<void(OpBuilder &, Value)> body) {
    scf::ForOp::create(b, loc, idx(b, 0), length, idx(b, 1), ValueRange{},
                       [&](OpBuilder &nb, Location, Value j, ValueRange) {
                         body(nb, j);
                         scf::YieldOp::create(nb, loc);
                       });
  }


  FailureOr<RowValue> rowOf(Operation &user, Value v, bool allowView = false) {
    auto it = values.find(v);
    if (it == values.end())
      return user.emitOpError("the float64 reference cannot evaluate an operand that is not a "
                              "tile op's result");
    if (it->second.kind == RowValue::View && !allowView)
      return user.emitOpError("the float64 reference needs this operand to be computed, not a "
                              "tile.load");
    if (it->second.kind == RowValue::Scalar)
      return user.emitOpError("the float64 reference cannot use a per-row scalar (the "
                              "logsumexp) here");
    return it->second;
  }

  LogicalResult evaluate(OpBuilder &b, Operation &op) {
    Location loc = op.getLoc();
    if (auto load = dyn_cast<LoadOp>(op)) {
      values[load.getResult()] = {RowValue::View, map.lookup(load.getView()), {}, {}};
      return success();
    }
    if (auto dot = dyn_cast<DotOp>(op)) {
      if (dot.getTransposeLhs())
        return dot.emitOpError("contracts over rows (transpose_lhs), which the row-by-row float64 "
                               "reference cannot evaluate (tile-to-f64-tensor-reference can)");
      FailureOr<RowValue> lhs = rowOf(op, dot.getLhs(), /*allowView=*/true);
      if (failed(lhs))
        return failure();
      auto rhsIt = values.find(dot.getRhs());
      if (rhsIt == values.end() || rhsIt->second.kind != RowValue::View)
        return dot.emitOpError("the float64 reference needs the right operand of tile.dot to "
                               "be a tile.load of a view");
      Value rhs = rhsIt->second.value;
      bool tr = dot.getTransposeRhs();
      Value length = dimBeforeLoop(rhs, tr ? 2 : 3);
      Value contraction = dimBeforeLoop(rhs, tr ? 3 : 2);
      Value kvHeads = dimBeforeLoop(rhs, 1);
      Value out = rowBuffer(length);
      // GQA: query head h reads key/value head h / (H / Hkv).
      Value group = arith::DivUIOp::create(b, loc, heads, kvHeads);
      Value hkv = arith::DivUIOp::create(b, loc, hIdx, group);
      auto lhsAt = [&](OpBuilder &kb, Value k) -> Value {
        return lhs->kind == RowValue::View
                   ? memref::LoadOp::create(kb, loc, lhs->value, ValueRange{bIdx, hIdx, qIdx, k})
                   : memref::LoadOp::create(kb, loc, lhs->value, k);
      };
      auto rhsAt = [&](OpBuilder &kb, Value j, Value k) -> Value {
        return memref::LoadOp::create(
            kb, loc, rhs, tr ? ValueRange{bIdx, hkv, j, k} : ValueRange{bIdx, hkv, k, j});
      };
      // Each out[j] is 0 + x[0]·y[0, j] + x[1]·y[1, j] + ... in this order, one rounding per
      // step: the definition. The loops are only arranged for the CPU (the references take most
      // of a GPU test run): scores (transpose_rhs, rows of K contiguous) four columns at a time,
      // four independent sums; P·V (rows of V contiguous) row k of V at a time into all of out.
      if (tr)
        dotByColumnQuads(b, loc, length, contraction, out, lhsAt, rhsAt);
      else
        dotByRows(b, loc, length, contraction, out, lhsAt, rhsAt);
      values[dot.getResult()] = {RowValue::Row, out, length, contraction};
      return success();
    }
    if (auto scale = dyn_cast<ScaleOp>(op)) {
      FailureOr<RowValue> in = rowOf(op, scale.getInput());
      if (failed(in))
        return failure();
      FailureOr<Value> scaleFactor = cpu::scaleFactorInF64(b, scale, in->contraction);
      if (failed(scaleFactor))
        return failure();
      Value factor = *scaleFactor;
      Value out = rowBuffer(in->length);
      forEach(b, loc, in->length, [&](OpBuilder &nb, Value j) {
        Value s = memref::LoadOp::create(nb, loc, in->value, j);
        memref::StoreOp::create(nb, loc, arith::MulFOp::create(nb, loc, s, factor), out, j);
      });
      values[scale.getResult()] = {RowValue::Row, out, in->length, in->contraction};
      return success();
    }
    if (isa<ScoreModOp, MaskOp>(op)) {
      bool isMask = isa<MaskOp>(op);
      FailureOr<RowValue> in = rowOf(op, op.getOperand(0));
      if (failed(in))
        return failure();
      Value out = rowBuffer(in->length);
      Block &body = op.getRegion(0).front();
      LogicalResult status = success();
      forEach(b, loc, in->length, [&](OpBuilder &nb, Value j) {
        Value s = memref::LoadOp::create(nb, loc, in->value, j);
        IRMapping m = map;
        unsigned first = 0;
        if (!isMask)
          m.map(body.getArgument(first++), s);
        m.map(body.getArgument(first + 0), bIdx);
        m.map(body.getArgument(first + 1), hIdx);
        m.map(body.getArgument(first + 2), qIdx);
        m.map(body.getArgument(first + 3), j);
        for (Operation &inner : body.without_terminator())
          if (failed(cloneInF64(nb, inner, m))) {
            status = failure();
            return;
          }
        Value y = m.lookupOrDefault(cast<YieldOp>(body.getTerminator()).getValues()[0]);
        if (isMask)
          y = arith::SelectOp::create(nb, loc, y, s, cpu::f64Constant(nb, loc, -INFINITY));
        memref::StoreOp::create(nb, loc, y, out, j);
      });
      if (failed(status))
        return failure();
      values[op.getResult(0)] = {RowValue::Row, out, in->length, in->contraction};
      return success();
    }
    if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
      FailureOr<RowValue> in = rowOf(op, softmax.getInput());
      if (failed(in))
        return failure();
      Value n = in->length;
      auto load = [&](OpBuilder &nb, Value j) -> Value {
        return memref::LoadOp::create(nb, loc, in->value, j);
      };
      Value negInf = cpu::f64Constant(b, loc, -INFINITY), zero = cpu::f64Constant(b, loc, 0.0);
      Value max =
          cpu::reduceOver(b, loc, n, negInf, [&](OpBuilder &nb, Value acc, Value j) -> Value {
            return arith::MaximumFOp::create(nb, loc, acc, load(nb, j));
          });
      // A row with no kept score has max -inf: shift by 0 instead, so every exp is 0, the sum
      // is 0, the probabilities are 0 and the logsumexp is log(0) = -inf.
      Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, max, negInf);
      Value shift = arith::SelectOp::create(b, loc, empty, zero, max);
      auto shiftedExp = [&](OpBuilder &nb, Value j) -> Value {
        return math::ExpOp::create(nb, loc, arith::SubFOp::create(nb, loc, load(nb, j), shift));
      };
      Value sum = cpu::reduceOver(b, loc, n, zero, [&](OpBuilder &nb, Value acc, Value j) -> Value {
        return arith::AddFOp::create(nb, loc, acc, shiftedExp(nb, j));
      });
      Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, sum, zero);
      Value probs = rowBuffer(n);
      forEach(b, loc, n, [&](OpBuilder &nb, Value j) {
        Value p = arith::DivFOp::create(nb, loc, shiftedExp(nb, j), sum);
        p = arith::SelectOp::create(nb, loc, none, zero, p);
        memref::StoreOp::create(nb, loc, p, probs, j);
      });
      Value lse = arith::AddFOp::create(b, loc, shift, math::LogOp::create(b, loc, sum));
      values[softmax.getProbs()] = {RowValue::Row, probs, n, {}};
      values[softmax.getLogsumexp()] = {RowValue::Scalar, lse, {}, {}};
      return success();
    }
    auto store = cast<StoreOp>(op);
    auto it = values.find(store.getValue());
    if (it == values.end() || it->second.kind == RowValue::View)
      return store.emitOpError("the float64 reference stores computed values only");
    Value view = map.lookup(store.getView());
    int64_t rank = cast<MemRefType>(view.getType()).getRank();
    const RowValue &value = it->second;
    if (value.kind == RowValue::Scalar) {
      if (rank != 3)
        return store.emitOpError("the float64 reference stores a per-row scalar into a "
                                 "B x H x M view only");
      memref::StoreOp::create(b, loc, value.value, view, ValueRange{bIdx, hIdx, qIdx});
      return success();
    }
    if (rank != 4)
      return store.emitOpError("the float64 reference stores a row into a B x H x M x D view "
                               "only");
    forEach(b, loc, value.length, [&](OpBuilder &nb, Value d) {
      Value x = memref::LoadOp::create(nb, loc, value.value, d);
      memref::StoreOp::create(nb, loc, x, view, ValueRange{bIdx, hIdx, qIdx, d});
    });
    return success();
  }

  func::FuncOp kernel;
  MLIRContext *ctx;
  Type f64;
  IRMapping map; ///< kernel values -> reference values (arguments, scalars)
  llvm::DenseMap<Value, RowValue> values;
  OpBuilder::InsertPoint setup; ///< before the row loop: buffers and sizes
  Value heads, rows;            ///< H and M of the row space
  Value bIdx, hIdx, qIdx;       ///< the current row
};

struct TileToF64ReferencePass
    : public tilefuse::impl::TileToF64ReferenceBase<TileToF64ReferencePass> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> kernels;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal())
        kernels.push_back(fn);
    for (func::FuncOp kernel : kernels) {
      FailureOr<func::FuncOp> reference = ReferenceBuilder(kernel).build();
      if (failed(reference))
        return signalPassFailure();
      kernel.erase();
    }
  }
};

} // namespace
