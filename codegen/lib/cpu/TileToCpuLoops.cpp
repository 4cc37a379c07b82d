//===- TileToCpuLoops.cpp - CPU reference lowering of tiled tile IR -------===//
//
// Block tensors (always statically shaped in the tiled form) become memref buffers; each block op
// becomes a scalar loop nest. This is the reference backend: clarity over speed.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"
#include "tilefuse/dialect/TileOps.h"

namespace tilefuse {
#define GEN_PASS_DEF_TILETOCPULOOPS
#include "tilefuse/codegen/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

bool isBlockTensor(Type t) { return isa<RankedTensorType>(t); }

MemRefType bufferType(Type t) {
  auto tt = cast<RankedTensorType>(t);
  return MemRefType::get(tt.getShape(), tt.getElementType());
}

Value idx(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Loops over every element of `shape`; `body` gets the element's indices.
void forEachElement(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                    function_ref<void(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d : shape) {
    lbs.push_back(idx(b, loc, 0));
    ubs.push_back(idx(b, loc, d));
    steps.push_back(idx(b, loc, 1));
  }
  scf::buildLoopNest(b, loc, lbs, ubs, steps, body);
}

Value convertScalar(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return arith::ExtFOp::create(b, loc, to, v);
  return arith::TruncFOp::create(b, loc, to, v);
}

/// i16 for the 16-bit float types, which the CPU may lack registers and instructions for; null
/// otherwise.
Type floatBitsType(Type t) {
  if (isa<BFloat16Type, Float16Type>(t))
    return IntegerType::get(t.getContext(), 16);
  return nullptr;
}

Value floatConst(OpBuilder &b, Location loc, Type t, double v) {
  return arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, v));
}

/// arith.constant dense<splat> : tensor<...> -> a filled buffer.
struct ConstantLowering : OpConversionPattern<arith::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(arith::ConstantOp op, OpAdaptor,
                                ConversionPatternRewriter &rw) const override {
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    if (!isBlockTensor(op.getType()) || !dense || !dense.isSplat())
      return rw.notifyMatchFailure(op, "only splat block constants are lowered");
    Location loc = op.getLoc();
    auto ty = bufferType(op.getType());
    Value buf = memref::AllocOp::create(rw, loc, ty);
    Value scalar = arith::ConstantOp::create(rw, loc, ty.getElementType(),
                                             cast<TypedAttr>(dense.getSplatValue<Attribute>()));
    forEachElement(rw, loc, ty.getShape(), [&](OpBuilder &b, Location l, ValueRange iv) {
      memref::StoreOp::create(b, l, scalar, buf, iv);
    });
    rw.replaceOp(op, buf);
    return success();
  }
};

/// Any elementwise arith/math op on blocks -> the same op on scalars in a loop nest.
struct ElementwiseLowering : ConversionPattern {
  ElementwiseLowering(TypeConverter &tc, MLIRContext *ctx)
      : ConversionPattern(tc, MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rw) const override {
    if (!op->hasTrait<OpTrait::Elementwise>() || op->getNumResults() != 1 ||
        !isBlockTensor(op->getResult(0).getType()) ||
        !isa<arith::ArithDialect, math::MathDialect>(op->getDialect()))
      return failure();
    Location loc = op->getLoc();
    auto resTy = bufferType(op->getResult(0).getType());
    Value buf = memref::AllocOp::create(rw, loc, resTy);
    forEachElement(rw, loc, resTy.getShape(), [&](OpBuilder &b, Location l, ValueRange iv) {
      OperationState state(l, op->getName());
      for (Value v : operands)
        state.addOperands(isa<MemRefType>(v.getType())
                              ? memref::LoadOp::create(b, l, v, iv).getResult()
                              : v);
      state.addTypes(resTy.getElementType());
      state.addAttributes(op->getAttrs());
      Operation *scalar = b.create(state);
      memref::StoreOp::create(b, l, scalar->getResult(0), buf, iv);
    });
    rw.replaceOp(op, buf);
    return success();
  }
};

/// Indices of the view element for block element `iv` at (block) row `row`; with packed rows
/// (`headRows`) the last leading index and the row are unpacked into (head, row).
SmallVector<Value> viewIndices(OpBuilder &b, Location loc, ValueRange lead, Value row,
                               ValueRange iv, Value headRows) {
  SmallVector<Value> out(lead.begin(), lead.end());
  if (headRows) {
    tile::HeadAndRow at = tile::unpackRow(b, loc, out.back(), row, headRows);
    out.back() = at.head;
    row = at.row;
  }
  out.push_back(row);
  out.append(iv.begin() + 1, iv.end());
  return out;
}

/// Indices of the paged cache element for block element `iv` at logical (batch, head, row)
/// (`lead` is batch, head): tile::pagedRow's page and row within it.
SmallVector<Value> pagedViewIndices(OpBuilder &b, Location loc,
                                    const tile::PageDivisor &pageSize, Value table,
                                    ValueRange lead, Value row, ValueRange iv) {
  tile::PageAndRow at = tile::pagedRow(
      b, loc, row, pageSize, [&](OpBuilder &b, Location loc, Value column) -> Value {
        Value page = memref::LoadOp::create(b, loc, table, ValueRange{lead[0], column});
        return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), page);
      });
  SmallVector<Value> out = {at.page, lead[1], at.row};
  out.append(iv.begin() + 1, iv.end());
  return out;
}

struct BlockLoadLowering : OpConversionPattern<BlockLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BlockLoadOp op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto ty = bufferType(op.getType());
    Value buf = memref::AllocOp::create(rw, loc, ty);
    ValueRange all = a.getIndices();
    ValueRange lead = all.drop_back();
    Value row0 = all.back();
    Type elt = ty.getElementType();
    // The guarded element leaves the scf.if as its bits: a bf16 that crosses a branch (an LLVM
    // phi) is promoted to f32 and rounded back by a compiler-runtime call (__truncsfbf2) on
    // CPUs without bf16 instructions; an integer is not. (LLVM's InstCombine may still fold the
    // bits back into a bf16 phi: tile-define-conversion-libcalls gives the module that call.)
    Type bits = floatBitsType(elt);
    // A paged cache's page size, and for one given at launch its reciprocal, once where the
    // view is defined (the function's entry), as the GPU's lowering computes them: not per
    // element in the key loop.
    tile::PageDivisor pageSize;
    if (a.getPageTable()) {
      OpBuilder::InsertionGuard atView(rw);
      rw.setInsertionPointAfterValue(a.getView());
      pageSize = tile::pageDivisor(rw, loc, rw.createOrFold<memref::DimOp>(loc, a.getView(), 2));
    }
    forEachElement(rw, loc, ty.getShape(), [&](OpBuilder &b, Location l, ValueRange iv) {
      Value row = arith::AddIOp::create(b, l, row0, iv[0]);
      Value inside = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, row, a.getBound());
      auto ifOp = scf::IfOp::create(
          b, l, inside,
          [&](OpBuilder &tb, Location tl) {
            Value v = memref::LoadOp::create(
                tb, tl, a.getView(),
                a.getPageTable()
                    ? pagedViewIndices(tb, tl, pageSize, a.getPageTable(), lead, row, iv)
                    : viewIndices(tb, tl, lead, row, iv, a.getHeadRows()));
            if (bits)
              v = arith::BitcastOp::create(tb, tl, bits, v);
            scf::YieldOp::create(tb, tl, v);
          },
          [&](OpBuilder &eb, Location el) {
            Value zero = bits ? arith::ConstantIntOp::create(eb, el, bits, 0).getResult()
                              : floatConst(eb, el, elt, 0.0);
            scf::YieldOp::create(eb, el, zero);
          });
      Value v = ifOp.getResult(0);
      if (bits)
        v = arith::BitcastOp::create(b, l, elt, v);
      memref::StoreOp::create(b, l, v, buf, iv);
    });
    rw.replaceOp(op, buf);
    return success();
  }
};

/// For each element `iv` of a block (of `shape`) written to a view at `indices` (the last is the
/// block's first row), only where its row is below `bound`: `write(b, loc, iv, view indices)`.
void forEachWrittenElement(ConversionPatternRewriter &rw, Location loc, ArrayRef<int64_t> shape,
                           ValueRange indices, Value bound, Value headRows,
                           function_ref<void(OpBuilder &, Location, ValueRange, ValueRange)> write) {
  ValueRange lead = indices.drop_back();
  Value row0 = indices.back();
  forEachElement(rw, loc, shape, [&](OpBuilder &b, Location l, ValueRange iv) {
    Value row = arith::AddIOp::create(b, l, row0, iv[0]);
    Value inside = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, row, bound);
    scf::IfOp::create(b, l, inside, [&](OpBuilder &tb, Location tl) {
      write(tb, tl, iv, viewIndices(tb, tl, lead, row, iv, headRows));
      scf::YieldOp::create(tb, tl);
    });
  });
}

struct BlockStoreLowering : OpConversionPattern<BlockStoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BlockStoreOp op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto ty = cast<MemRefType>(a.getValue().getType());
    Type viewElt = op.getView().getType().getElementType();
    forEachWrittenElement(
        rw, loc, ty.getShape(), a.getIndices(), a.getBound(), a.getHeadRows(),
        [&](OpBuilder &b, Location l, ValueRange iv, ValueRange at) {
          Value v = memref::LoadOp::create(b, l, a.getValue(), iv);
          memref::StoreOp::create(b, l, convertScalar(b, l, v, viewElt), a.getView(), at);
        });
    rw.eraseOp(op);
    return success();
  }
};

struct BlockDotLowering : OpConversionPattern<BlockDotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BlockDotOp op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto ty = bufferType(op.getType());
    Type f32 = rw.getF32Type();
    Value buf = memref::AllocOp::create(rw, loc, ty);
    bool tl = op.getTransposeLhs();
    int64_t k = op.getLhs().getType().getDimSize(tl ? 0 : 1);
    bool tr = op.getTransposeRhs();
    forEachElement(rw, loc, ty.getShape(), [&](OpBuilder &b, Location l, ValueRange iv) {
      Value init = a.getAcc() ? memref::LoadOp::create(b, l, a.getAcc(), iv).getResult()
                              : floatConst(b, l, f32, 0.0);
      auto red = scf::ForOp::create(
          b, l, idx(b, l, 0), idx(b, l, k), idx(b, l, 1), ValueRange{init},
          [&](OpBuilder &kb, Location kl, Value kk, ValueRange sum) {
            Value x = memref::LoadOp::create(kb, kl, a.getLhs(),
                                             tl ? ValueRange{kk, iv[0]} : ValueRange{iv[0], kk});
            Value y = memref::LoadOp::create(kb, kl, a.getRhs(),
                                             tr ? ValueRange{iv[1], kk} : ValueRange{kk, iv[1]});
            Value prod = arith::MulFOp::create(kb, kl, convertScalar(kb, kl, x, f32),
                                               convertScalar(kb, kl, y, f32));
            scf::YieldOp::create(kb, kl, ValueRange{arith::AddFOp::create(kb, kl, sum[0], prod)});
          });
      memref::StoreOp::create(b, l, red.getResult(0), buf, iv);
    });
    rw.replaceOp(op, buf);
    return success();
  }
};

struct ReduceLowering : OpConversionPattern<ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ReduceOp op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto ty = bufferType(op.getType());
    Type f32 = rw.getF32Type();
    int64_t cols = op.getInput().getType().getDimSize(1);
    bool isMax = op.getKind() == ReduceKind::Max;
    Value buf = memref::AllocOp::create(rw, loc, ty);
    forEachElement(rw, loc, ty.getShape(), [&](OpBuilder &b, Location l, ValueRange iv) {
      Value init = floatConst(b, l, f32, isMax ? -INFINITY : 0.0);
      auto red = scf::ForOp::create(
          b, l, idx(b, l, 0), idx(b, l, cols), idx(b, l, 1), ValueRange{init},
          [&](OpBuilder &kb, Location kl, Value j, ValueRange acc) {
            Value x = memref::LoadOp::create(kb, kl, a.getInput(), ValueRange{iv[0], j});
            Value r = isMax ? arith::MaximumFOp::create(kb, kl, acc[0], x).getResult()
                            : arith::AddFOp::create(kb, kl, acc[0], x).getResult();
            scf::YieldOp::create(kb, kl, r);
          });
      memref::StoreOp::create(b, l, red.getResult(0), buf, iv);
    });
    rw.replaceOp(op, buf);
    return success();
  }
};

struct BroadcastLowering : OpConversionPattern<BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BroadcastOp op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto ty = bufferType(op.getType());
    Value buf = memref::AllocOp::create(rw, loc, ty);
    forEachElement(rw, loc, ty.getShape(), [&](OpBuilder &b, Location l, ValueRange iv) {
      Value v = memref::LoadOp::create(b, l, a.getInput(), ValueRange{iv[0]});
      memref::StoreOp::create(b, l, v, buf, iv);
    });
    rw.replaceOp(op, buf);
    return success();
  }
};

/// block_score_mod / block_mask: the scalar region runs once per element with
/// (b, h, row + i, col + j).
template <typename OpTy>
struct BlockRegionLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpTy::Adaptor;
  LogicalResult matchAndRewrite(OpTy op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    constexpr bool isMask = std::is_same_v<OpTy, BlockMaskOp>;
    Location loc = op.getLoc();
    auto ty = bufferType(op.getType());
    Value buf = memref::AllocOp::create(rw, loc, ty);
    Block &body = op.getBody().front();
    forEachElement(rw, loc, ty.getShape(), [&](OpBuilder &b, Location l, ValueRange iv) {
      Value s = memref::LoadOp::create(b, l, a.getInput(), iv);
      Value q = arith::AddIOp::create(b, l, a.getRow(), iv[0]);
      Value kv = arith::AddIOp::create(b, l, a.getCol(), iv[1]);
      Value head = a.getHead();
      if (a.getHeadRows()) {
        tile::HeadAndRow at = tile::unpackRow(b, l, head, q, a.getHeadRows());
        head = at.head;
        q = at.row;
      }
      IRMapping map;
      unsigned first = 0;
      if (!isMask)
        map.map(body.getArgument(first++), s);
      map.map(body.getArgument(first + 0), a.getBatch());
      map.map(body.getArgument(first + 1), head);
      map.map(body.getArgument(first + 2), q);
      map.map(body.getArgument(first + 3), kv);
      for (Operation &inner : body.without_terminator())
        b.clone(inner, map);
      Value y = map.lookupOrDefault(cast<YieldOp>(body.getTerminator()).getValues()[0]);
      Value out = y;
      if (isMask)
        out = arith::SelectOp::create(b, l, y, s, floatConst(b, l, b.getF32Type(), -INFINITY));
      memref::StoreOp::create(b, l, out, buf, iv);
    });
    rw.replaceOp(op, buf);
    return success();
  }
};

/// block_score_mod_grad: the region runs once per element with (s, b, h, row + i, col + j);
/// its two yielded values fill the two result buffers.
struct BlockScoreModGradLowering : OpConversionPattern<BlockScoreModGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BlockScoreModGradOp op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto ty = bufferType(op.getValue().getType());
    Value value = memref::AllocOp::create(rw, loc, ty);
    Value derivative = memref::AllocOp::create(rw, loc, ty);
    Block &body = op.getBody().front();
    forEachElement(rw, loc, ty.getShape(), [&](OpBuilder &b, Location l, ValueRange iv) {
      IRMapping map;
      map.map(body.getArgument(0), memref::LoadOp::create(b, l, a.getInput(), iv).getResult());
      map.map(body.getArgument(1), a.getBatch());
      map.map(body.getArgument(2), a.getHead());
      map.map(body.getArgument(3), arith::AddIOp::create(b, l, a.getRow(), iv[0]).getResult());
      map.map(body.getArgument(4), arith::AddIOp::create(b, l, a.getCol(), iv[1]).getResult());
      for (Operation &inner : body.without_terminator())
        b.clone(inner, map);
      auto yielded = cast<YieldOp>(body.getTerminator()).getValues();
      memref::StoreOp::create(b, l, map.lookupOrDefault(yielded[0]), value, iv);
      memref::StoreOp::create(b, l, map.lookupOrDefault(yielded[1]), derivative, iv);
    });
    rw.replaceOp(op, ValueRange{value, derivative});
    return success();
  }
};

/// block_map: the region runs once per element on one f32 per operand (a vector operand gives
/// its row's value; bf16 and f16 elements are extended).
struct BlockMapLowering : OpConversionPattern<BlockMapOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BlockMapOp op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto ty = bufferType(op.getType());
    Value buf = memref::AllocOp::create(rw, loc, ty);
    Block &body = op.getBody().front();
    forEachElement(rw, loc, ty.getShape(), [&](OpBuilder &b, Location l, ValueRange iv) {
      IRMapping map;
      for (auto [arg, input] : llvm::zip(body.getArguments(), a.getInputs())) {
        bool perRow = cast<MemRefType>(input.getType()).getRank() == 1;
        Value x = memref::LoadOp::create(b, l, input, perRow ? iv.take_front(1) : iv);
        map.map(arg, convertScalar(b, l, x, b.getF32Type()));
      }
      for (Operation &inner : body.without_terminator())
        b.clone(inner, map);
      Value y = map.lookupOrDefault(cast<YieldOp>(body.getTerminator()).getValues()[0]);
      memref::StoreOp::create(b, l, y, buf, iv);
    });
    rw.replaceOp(op, buf);
    return success();
  }
};

/// block_atomic_add: the host runs the grid's programs one after another, so a read-add-write
/// per element is atomic here.
struct BlockAtomicAddLowering : OpConversionPattern<BlockAtomicAddOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BlockAtomicAddOp op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    auto ty = cast<MemRefType>(a.getValue().getType());
    forEachWrittenElement(
        rw, loc, ty.getShape(), a.getIndices(), a.getBound(), /*headRows=*/Value(),
        [&](OpBuilder &b, Location l, ValueRange iv, ValueRange at) {
          Value old = memref::LoadOp::create(b, l, a.getView(), at);
          Value add = memref::LoadOp::create(b, l, a.getValue(), iv);
          memref::StoreOp::create(b, l, arith::AddFOp::create(b, l, old, add), a.getView(), at);
        });
    rw.eraseOp(op);
    return success();
  }
};

struct BlockEventLowering : OpConversionPattern<BlockEventOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BlockEventOp op, OpAdaptor,
                                ConversionPatternRewriter &rw) const override {
    Value kind = arith::ConstantIntOp::create(rw, op.getLoc(),
                                              static_cast<int64_t>(op.getKind()), 32);
    rw.replaceOpWithNewOp<func::CallOp>(op, kBlockEventSymbol, TypeRange{}, ValueRange{kind});
    return success();
  }
};

/// split_arrive: an atomic increment of the row block's counter; the program that makes it
/// `count` is the last, and resets it. (The host runs the grid in order, but the same protocol
/// as on the GPU keeps one meaning.)
struct SplitArriveLowering : OpConversionPattern<SplitArriveOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SplitArriveOp op, OpAdaptor a,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Type i32 = rw.getI32Type();
    Value one = arith::ConstantIntOp::create(rw, loc, i32, 1);
    Value before = memref::AtomicRMWOp::create(rw, loc, arith::AtomicRMWKind::addi, one,
                                               a.getCounters(), a.getIndices());
    Value count = arith::IndexCastOp::create(rw, loc, i32, a.getCount());
    Value last = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq,
                                       arith::AddIOp::create(rw, loc, before, one), count);
    auto reset = scf::IfOp::create(rw, loc, last, /*withElseRegion=*/false);
    OpBuilder b = reset.getThenBodyBuilder();
    memref::StoreOp::create(b, loc, arith::ConstantIntOp::create(b, loc, i32, 0),
                            a.getCounters(), a.getIndices());
    rw.replaceOp(op, last);
    return success();
  }
};

struct TileToCpuLoopsPass : public tilefuse::impl::TileToCpuLoopsBase<TileToCpuLoopsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    // The grid runs sequentially on the host.
    SmallVector<scf::ForallOp> foralls;
    module.walk([&](scf::ForallOp op) { foralls.push_back(op); });
    IRRewriter rewriter(ctx);
    for (scf::ForallOp op : foralls) {
      rewriter.setInsertionPoint(op);
      if (failed(scf::forallToForLoop(rewriter, op)))
        return signalPassFailure();
    }

    bool hasEvents = false;
    module.walk([&](BlockEventOp) { hasEvents = true; });
    if (hasEvents && !module.lookupSymbol(kBlockEventSymbol)) {
      OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
      auto fn = func::FuncOp::create(b, module.getLoc(), kBlockEventSymbol,
                                     b.getFunctionType({b.getI32Type()}, {}));
      fn.setPrivate();
    }

    TypeConverter tc;
    tc.addConversion([](Type t) { return t; });
    tc.addConversion([](RankedTensorType t) -> Type { return bufferType(t); });
    auto materialize = [](OpBuilder &b, Type t, ValueRange in, Location loc) -> Value {
      return UnrealizedConversionCastOp::create(b, loc, t, in).getResult(0);
    };
    tc.addSourceMaterialization(materialize);
    tc.addTargetMaterialization(materialize);

    ConversionTarget target(*ctx);
    target.addIllegalDialect<TileDialect>();
    target.addLegalDialect<memref::MemRefDialect, func::FuncDialect>();
    auto noTensors = [&](Operation *op) {
      return llvm::none_of(op->getOperandTypes(), isBlockTensor) &&
             llvm::none_of(op->getResultTypes(), isBlockTensor);
    };
    target.addDynamicallyLegalDialect<arith::ArithDialect, math::MathDialect>(noTensors);
    RewritePatternSet patterns(ctx);
    patterns.add<ConstantLowering, BlockLoadLowering, BlockStoreLowering, BlockDotLowering,
                 ReduceLowering, BroadcastLowering, BlockRegionLowering<BlockScoreModOp>,
                 BlockRegionLowering<BlockMaskOp>, BlockEventLowering, SplitArriveLowering,
                 BlockScoreModGradLowering, BlockMapLowering, BlockAtomicAddLowering>(tc, ctx);
    patterns.add<ElementwiseLowering>(tc, ctx);
    scf::populateSCFStructuralTypeConversionsAndLegality(tc, patterns, target);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    // The passes' loop markers (tile.kv_loop, tile.sweep) mean nothing below the tile level.
    module.walk([](Operation *op) {
      for (NamedAttribute attr : llvm::to_vector(op->getDiscardableAttrs()))
        if (attr.getName().getValue().starts_with("tile."))
          op->removeDiscardableAttr(attr.getName());
    });
  }
};

} // namespace
