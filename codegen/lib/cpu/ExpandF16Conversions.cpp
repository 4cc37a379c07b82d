//===- ExpandF16Conversions.cpp - f16 <-> f32 as integer arithmetic -------===//
//
// The CPU backend JITs for whatever CPU it runs on. Where that CPU has no half-precision
// conversion instructions (x86-64 without F16C, e.g. when the JIT targets the baseline), LLVM
// lowers `fpext half` and `fptrunc ... to half` to compiler-runtime calls (__extendhfsf2,
// __truncsfhf2) that a process may not have. Expanding them here, in IR, keeps the generated code
// self-contained on every CPU. (bf16 has the same problem; MLIR's arith-expand covers it.)
//
// f16 -> f32 is exact: the f16 magnitude bits shifted into place are an f32 whose value is the
// f16's times 2^-112 (for normal and subnormal inputs alike), so one multiplication by 2^112
// rebiases it; infinities and NaNs get the all-ones exponent. f32 -> f16 rounds to nearest even:
// overflow gives infinity, NaN stays NaN (quiet), results below the smallest normal come from a
// float addition that rounds in hardware, and normal results add the rounding bias to the bits.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tilefuse {
#define GEN_PASS_DEF_EXPANDF16CONVERSIONS
#include "tilefuse/codegen/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;

namespace {

/// Scalar or vector `t` with element type `elt`.
Type withElement(Type t, Type elt) {
  if (auto v = dyn_cast<VectorType>(t))
    return v.clone(elt);
  return elt;
}

Value constantLike(OpBuilder &b, Location loc, Type t, int64_t bits, unsigned width) {
  Type elt = IntegerType::get(b.getContext(), width);
  Attribute value = b.getIntegerAttr(elt, bits);
  if (auto v = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(v.clone(elt), value));
  return arith::ConstantOp::create(b, loc, cast<TypedAttr>(value));
}

Value floatConstantLike(OpBuilder &b, Location loc, Type t, float v) {
  Type f32 = b.getF32Type();
  Attribute value = b.getFloatAttr(f32, v);
  if (auto vt = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vt.clone(f32), value));
  return arith::ConstantOp::create(b, loc, cast<TypedAttr>(value));
}

/// arith.extf f16 -> f32 (and -> f64 through f32).
struct ExpandF16Extension : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op, PatternRewriter &rw) const override {
    Type in = op.getIn().getType();
    if (!getElementTypeOrSelf(in).isF16())
      return failure();
    Location loc = op.getLoc();
    Type i16 = withElement(in, rw.getI16Type()), i32 = withElement(in, rw.getI32Type());
    Type f32 = withElement(in, rw.getF32Type());
    auto c32 = [&](int64_t v) { return constantLike(rw, loc, in, v, 32); };
    Value h = arith::ExtUIOp::create(rw, loc, i32, arith::BitcastOp::create(rw, loc, i16, op.getIn()));
    Value sign = arith::ShLIOp::create(rw, loc, arith::AndIOp::create(rw, loc, h, c32(0x8000)), c32(16));
    Value magnitude = arith::AndIOp::create(rw, loc, h, c32(0x7fff));
    // |x| * 2^-112 as f32 bits, then * 2^112: exact for zero, subnormals and normals.
    Value scaled = arith::BitcastOp::create(
        rw, loc, f32, arith::ShLIOp::create(rw, loc, magnitude, c32(13)));
    Value finite = arith::MulFOp::create(rw, loc, scaled,
                                         floatConstantLike(rw, loc, in, 0x1p112f));
    Value finiteBits = arith::BitcastOp::create(rw, loc, i32, finite);
    // Infinity and NaN: the f32 exponent all ones, the payload kept.
    Value special = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::uge, magnitude,
                                          c32(0x7c00));
    Value specialBits = arith::OrIOp::create(
        rw, loc, arith::ShLIOp::create(rw, loc, magnitude, c32(13)), c32(0x7f800000));
    Value bits = arith::SelectOp::create(rw, loc, special, specialBits, finiteBits);
    Value result = arith::BitcastOp::create(rw, loc, f32,
                                            arith::OrIOp::create(rw, loc, bits, sign));
    if (getElementTypeOrSelf(op.getType()).isF32())
      rw.replaceOp(op, result);
    else
      rw.replaceOpWithNewOp<arith::ExtFOp>(op, op.getType(), result);
    return success();
  }
};

/// arith.truncf f32 -> f16 (f64 goes to f32 first: double rounding, which no kernel does).
struct ExpandF16Truncation : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op, PatternRewriter &rw) const override {
    Type out = op.getType();
    if (!getElementTypeOrSelf(out).isF16())
      return failure();
    Location loc = op.getLoc();
    Value x = op.getIn();
    if (!getElementTypeOrSelf(x.getType()).isF32())
      x = arith::TruncFOp::create(rw, loc, withElement(out, rw.getF32Type()), x);
    Type i16 = withElement(out, rw.getI16Type()), i32 = withElement(out, rw.getI32Type());
    auto c32 = [&](int64_t v) { return constantLike(rw, loc, out, v, 32); };
    auto select = [&](Value c, Value a, Value b) {
      return arith::SelectOp::create(rw, loc, c, a, b).getResult();
    };
    auto ult = [&](Value a, int64_t b) {
      return arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::ult, a, c32(b)).getResult();
    };
    Value bits = arith::BitcastOp::create(rw, loc, i32, x);
    Value sign = arith::ShRUIOp::create(rw, loc, arith::AndIOp::create(rw, loc, bits, c32(0x80000000)), c32(16));
    Value magnitude = arith::AndIOp::create(rw, loc, bits, c32(0x7fffffff));

    // >= 65536 (2^16): infinity; NaN: a quiet NaN.
    Value isNaN = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::ugt, magnitude,
                                        c32(0x7f800000));
    Value overflow = select(isNaN, c32(0x7e00), c32(0x7c00));
    // Below 2^-14 (f16 subnormals and zero): adding 0.5 puts the f16 subnormal's bits at the
    // bottom of the f32 mantissa, rounded to nearest even by the addition itself.
    Value magnitudeF = arith::BitcastOp::create(rw, loc, withElement(out, rw.getF32Type()),
                                                magnitude);
    Value shifted = arith::AddFOp::create(rw, loc, magnitudeF,
                                          floatConstantLike(rw, loc, out, 0.5f));
    Value subnormal = arith::SubIOp::create(
        rw, loc, arith::BitcastOp::create(rw, loc, i32, shifted), c32(0x3f000000));
    // Normal: rebias the exponent (127 -> 15), add the rounding bias (0xfff plus the lowest
    // kept mantissa bit, for ties to even) and drop the 13 low bits; a carry into the
    // exponent rounds up correctly, into infinity too.
    Value odd = arith::AndIOp::create(
        rw, loc, arith::ShRUIOp::create(rw, loc, magnitude, c32(13)), c32(1));
    Value biased = arith::AddIOp::create(rw, loc, magnitude,
                                         c32(((15 - 127) << 23) + 0xfff));
    Value normal = arith::ShRUIOp::create(
        rw, loc, arith::AddIOp::create(rw, loc, biased, odd), c32(13));

    Value result = select(ult(magnitude, 0x38800000), subnormal,
                          select(ult(magnitude, 0x47800000), normal, overflow));
    result = arith::OrIOp::create(rw, loc, result, sign);
    Value half = arith::TruncIOp::create(rw, loc, i16, result);
    rw.replaceOpWithNewOp<arith::BitcastOp>(op, out, half);
    return success();
  }
};

struct ExpandF16ConversionsPass
    : public tilefuse::impl::ExpandF16ConversionsBase<ExpandF16ConversionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandF16Extension, ExpandF16Truncation>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
