//===- WgmmaToNVVM.cpp - tgpu.wgmma and tgpu.wgmma_wait to wgmma PTX ------===//
//
// tgpu.wgmma: wgmma.fence, one wgmma.mma_async.m64nNk16 per k-step (f32 accumulators, A from
// registers or by a descriptor, K-major or, transposed, MN-major; B by a 128-byte-swizzle
// matrix descriptor; with row sums an m64n8k16 against the ones after each), wgmma.commit_group.
// tgpu.wgmma_wait: wgmma.wait_group N. The row sums' two ends are here too: tgpu.fill (the
// ones) and tgpu.split_row_sums. MLIR's
// nvvm.wgmma.mma_async takes A only by descriptor, so the register-A form is inline PTX here,
// in this one file (shared/DESIGN.md), and the descriptor-A form beside it.
//
// The fence and the wait take every accumulator and A register as read-write operands
// ("pinning" them): no read or write of those registers moves across them, which is what
// makes the asynchronous tensor-core reads and writes safe.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "tilefuse/dialect/TileGPUHints.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

/// Runs `text` with every value of `regs` as a read-write operand; returns the new values.
SmallVector<Value> pinRegisters(OpBuilder &b, Location loc, StringRef text,
                                ArrayRef<Value> regs) {
  if (regs.empty()) {
    inlinePtx(b, loc, {}, {}, text, "");
    return {};
  }
  SmallVector<Type> types;
  std::string constraints;
  for (Value r : regs) {
    types.push_back(r.getType());
    constraints += r.getType().isF32() ? "=f," : "=r,";
  }
  for (size_t i = 0; i < regs.size(); ++i)
    constraints += std::to_string(i) + (i + 1 < regs.size() ? "," : "");
  return inlinePtx(b, loc, types, regs, text, constraints);
}

/// The 64-bit wgmma matrix descriptor of the 128-byte-swizzled tile at `base`: start
/// address / 16 (bits 0-13), leading byte offset / 16 (16-29), stride byte offset / 16
/// (32-45), swizzle mode 1 = 128 bytes (62-63). A k-step's descriptor is this one plus its
/// byte offset / 16: shared addresses stay below 2^18, so the start field never carries.
Value descriptor(OpBuilder &b, Location loc, Value base, int64_t leadingBytes,
                 int64_t strideBytes) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Value addr = LLVM::PtrToIntOp::create(b, loc, i32, base);
  Value start = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, addr, i32Constant(b, loc, 4)),
      i32Constant(b, loc, 0x3FFF));
  uint64_t fixed = (uint64_t(leadingBytes >> 4) & 0x3FFF) << 16 |
                   (uint64_t(strideBytes >> 4) & 0x3FFF) << 32 | uint64_t(1) << 62;
  Value fixedV = arith::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(int64_t(fixed)));
  return arith::OrIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64, start), fixedV);
}

/// A k-step's A operand: four registers of fragments, or a descriptor (`transposed`: the
/// buffer is K x M, read MN-major).
struct OperandA {
  ArrayRef<Value> registers;
  Value descriptor;
  bool transposed = false;
};

/// One wgmma.mma_async.m64nNk16: `acc` (N/2 values) in, the new accumulators out; without
/// `acc` the accumulator input is disabled (scale-d = 0).
SmallVector<Value> wgmmaAsync(OpBuilder &b, Location loc, ArrayRef<Value> acc, int64_t n,
                              const OperandA &a, Value desc, bool transB, Type elt) {
  int64_t outs = n / 2;
  bool tied = !acc.empty();
  std::string constraints, text;
  llvm::raw_string_ostream os(text);
  for (int64_t i = 0; i < outs; ++i)
    constraints += "=f,";
  SmallVector<Value> operands;
  if (tied)
    for (int64_t i = 0; i < outs; ++i) {
      constraints += std::to_string(i) + ",";
      operands.push_back(acc[i]);
    }
  int64_t first = tied ? 2 * outs : outs;
  std::string aText;
  if (a.descriptor) {
    constraints += "l,";
    operands.push_back(a.descriptor);
    aText = "$" + std::to_string(first);
  } else {
    constraints += "r,r,r,r,";
    operands.append(a.registers.begin(), a.registers.end());
    aText = llvm::formatv("{${0}, ${1}, ${2}, ${3}}", first, first + 1, first + 2, first + 3);
  }
  int64_t bIndex = first + (a.descriptor ? 1 : 4);
  constraints += "l,n";
  operands.push_back(desc);
  operands.push_back(i32Constant(b, loc, tied ? 1 : 0));
  StringRef ty = elt.isBF16() ? "bf16" : "f16";
  os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << bIndex + 1 << ", 0;\n"
     << "wgmma.mma_async.sync.aligned.m64n" << n << "k16.f32." << ty << "." << ty << " {";
  for (int64_t i = 0; i < outs; ++i)
    os << (i ? ", " : "") << "$" << i;
  os << "}, " << aText << ", $" << bIndex << ", p, 1, 1, ";
  // The transpose immediates: the descriptor form names A's as well, the register form only B's.
  if (a.descriptor)
    os << (a.transposed ? 1 : 0) << ", ";
  os << (transB ? 1 : 0) << ";\n}";
  return inlinePtx(b, loc, SmallVector<Type>(outs, b.getF32Type()), operands, text,
                   constraints);
}

/// The descriptor of k-step `kt` of a canonical_128b tile whose k-steps start at `tileDesc`:
/// K-major (`kMajor`: a 64-element panel holds 4 k-steps 32 bytes apart, panels `rows * 128`
/// bytes apart) or MN-major (k-steps of 16 rows of 128 bytes).
Value kStepDescriptor(OpBuilder &b, Location loc, Value tileDesc, bool kMajor, int64_t rows,
                      int64_t kt) {
  int64_t offset = kMajor ? (kt / 4) * rows * 128 + (kt % 4) * 32 : kt * 16 * 128;
  if (!offset)
    return tileDesc;
  return arith::AddIOp::create(
      b, loc, tileDesc,
      arith::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(offset >> 4)));
}

/// The descriptor of a canonical_128b tile of `rows` rows at `base`, K-major or MN-major.
Value tileDescriptor(OpBuilder &b, Location loc, Value base, bool kMajor, int64_t rows) {
  return kMajor ? descriptor(b, loc, base, /*leadingBytes=*/16, /*strideBytes=*/1024)
                : descriptor(b, loc, base, /*leadingBytes=*/rows * 128, /*strideBytes=*/1024);
}

SmallVector<Value> elementsOf(OpBuilder &b, Location loc, Value vector) {
  SmallVector<Value> out;
  for (int64_t i = 0; i < cast<VectorType>(vector.getType()).getNumElements(); ++i)
    out.push_back(extractValue(b, loc, vector, i));
  return out;
}

struct WgmmaToPtx : OpConversionPattern<tgpu::WgmmaOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::WgmmaOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto resultType = cast<RankedTensorType>(op.getResult().getType());
    int64_t cols = resultType.getDimSize(1);
    tgpu::BufferType rhsType = op.getRhs().getType();
    Type elt = rhsType.getElementType();
    int64_t rows = rhsType.getRows();
    bool transposed = op.getTransposeRhs(); // Q K^T: B is K-major
    int64_t k = transposed ? rhsType.getCols() : rhsType.getRows();
    int64_t kTiles = k / 16;
    Value base = rematerializedPerIteration(b, loc, adaptor.getRhs(), op);
    // With row sums: the product's N columns, then an m64n8 of the same A against the ones
    // (tgpu-row-sum-on-tensor-cores), K-major: any k-step of the 8 x 64 block reads ones.
    Value onesDesc;
    if (op.getRowSums()) {
      cols -= tgpu::WgmmaOp::kRowSumColumns;
      Value ones = rematerializedPerIteration(b, loc, adaptor.getRowSums(), op);
      onesDesc = tileDescriptor(b, loc, ones, /*kMajor=*/true, tgpu::WgmmaOp::kRowSumColumns);
    }

    SmallVector<Value> acc;
    if (adaptor.getAcc())
      acc = elementsOf(b, loc, adaptor.getAcc());
    auto sharedLhs = dyn_cast<tgpu::BufferType>(op.getLhs().getType());
    SmallVector<Value> aRegs;
    if (!sharedLhs)
      aRegs = elementsOf(b, loc, adaptor.getLhs());
    // Fence: everything that wrote the accumulators and A registers is ordered before the MMAs.
    SmallVector<Value> pinned(acc);
    pinned.append(aRegs);
    pinned = pinRegisters(b, loc, "wgmma.fence.sync.aligned;", pinned);
    acc.assign(pinned.begin(), pinned.begin() + acc.size());
    aRegs.assign(pinned.begin() + acc.size(), pinned.end());

    // K (Q K^T) is read K-major: the panel and a 32-byte step give a k-step's start. V (P V) is
    // read transposed (MN-major): k-steps of 16 rows, panels `rows * 128` bytes apart.
    Value tileDesc = tileDescriptor(b, loc, base, /*kMajor=*/transposed, rows);
    // A shared lhs the same way: Q (Q K^T) K-major, M x K; P or dS (P^T dO) transposed, K x M,
    // MN-major. Each warpgroup reads its 64 rows of M: 64 panel rows further K-major, the next
    // 64-element panel MN-major.
    Value lhsDesc;
    bool lhsKMajor = !op.getTransposeLhs();
    int64_t lhsRows = sharedLhs ? sharedLhs.getRows() : 0;
    if (sharedLhs) {
      Value lhsBase = rematerializedPerIteration(b, loc, adaptor.getLhs(), op);
      auto accLayout = cast<tgpu::WgmmaAccumulatorLayoutAttr>(resultType.getEncoding());
      if (accLayout.getWarpgroups() > 1) {
        ThreadCoordinates t = threadCoordinates(b, op);
        Value warpgroup = arith::DivUIOp::create(b, loc, t.warp, indexConstant(b, loc, 4));
        Value offset = mulIndex(b, loc, warpgroup,
                                indexConstant(b, loc, lhsKMajor ? 64 * 128 : lhsRows * 128));
        lhsBase = sharedAddress(b, loc, lhsBase, offset);
      }
      lhsDesc = tileDescriptor(b, loc, lhsBase, lhsKMajor, lhsRows);
    }
    for (int64_t kt = 0; kt < kTiles; ++kt) {
      Value desc = kStepDescriptor(b, loc, tileDesc, /*kMajor=*/transposed, rows, kt);
      OperandA a;
      if (sharedLhs) {
        a.descriptor = kStepDescriptor(b, loc, lhsDesc, lhsKMajor, lhsRows, kt);
        a.transposed = !lhsKMajor;
      } else {
        a.registers = ArrayRef<Value>(aRegs).slice(4 * kt, 4);
      }
      if (!onesDesc) {
        acc = wgmmaAsync(b, loc, acc, cols, a, desc, /*transB=*/!transposed, elt);
        continue;
      }
      // Both read the same A registers in one commit group; every accumulator register is
      // written here and read after the wait (split_row_sums reads all four sums' copies).
      ArrayRef<Value> all(acc);
      SmallVector<Value> product =
          wgmmaAsync(b, loc, all.take_front(acc.empty() ? 0 : cols / 2), cols, a, desc,
                     /*transB=*/!transposed, elt);
      SmallVector<Value> sums = wgmmaAsync(
          b, loc, all.drop_front(acc.empty() ? 0 : cols / 2), tgpu::WgmmaOp::kRowSumColumns, a,
          kStepDescriptor(b, loc, onesDesc, /*kMajor=*/true, tgpu::WgmmaOp::kRowSumColumns,
                          kt % 4),
          /*transB=*/false, elt);
      acc = std::move(product);
      acc.append(sums);
    }
    inlinePtx(b, loc, {}, {}, "wgmma.commit_group.sync.aligned;", "");
    // The A registers in flight are the fenced copies the instructions read: the wait keeps
    // exactly those alive until the group completes.
    SmallVector<Value> results = {fromValues(b, loc, b.getF32Type(), acc)};
    if (op.getLhsInFlight())
      results.push_back(fromValues(b, loc, b.getI32Type(), aRegs));
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// O and l out of an accumulator with row sums: its first N / 2 values a thread, and each row's
/// sum as the larger of its two copies (all four copies are read, since a wgmma accumulator
/// register nothing reads makes ptxas serialize the wgmma pipeline: C7511).
struct SplitRowSumsToNVVM : OpConversionPattern<tgpu::SplitRowSumsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::SplitRowSumsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> values = elementsOf(rewriter, loc, adaptor.getInput());
    int64_t productValues = cast<RankedTensorType>(op.getProduct().getType()).getDimSize(1) / 2;
    // One m64n8 tile: values (row g, cols 2c, 2c + 1), (row g + 8, the same columns).
    ArrayRef<Value> sums = ArrayRef<Value>(values).drop_front(productValues);
    if (sums.size() != 4)
      return rewriter.notifyMatchFailure(op, "one m64n8 tile of sums a thread");
    Value rowG = arith::MaxNumFOp::create(rewriter, loc, sums[0], sums[1]);
    Value rowG8 = arith::MaxNumFOp::create(rewriter, loc, sums[2], sums[3]);
    Type f32 = rewriter.getF32Type();
    rewriter.replaceOp(
        op, {fromValues(rewriter, loc, f32, ArrayRef<Value>(values).take_front(productValues)),
             fromValues(rewriter, loc, f32, {rowG, rowG8})});
    return success();
  }
};

/// Every 32-bit word of the buffer by the CTA's threads in turn (thread t: words t, t + ntid,
/// ...), then the async-proxy fence that lets a wgmma read them after the next barrier.
struct FillToNVVM : OpConversionPattern<tgpu::FillOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::FillOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    tgpu::BufferType buffer = op.getBuffer().getType();
    Type elt = buffer.getElementType();
    float value = op.getValue().convertToFloat();
    // The element's 16 bits, twice.
    APFloat half(value);
    bool lost = false;
    half.convert(elt.isBF16() ? APFloat::BFloat() : APFloat::IEEEhalf(),
                 APFloat::rmNearestTiesToEven, &lost);
    uint32_t bits = uint32_t(half.bitcastToAPInt().getZExtValue());
    uint32_t word = bits | bits << 16;
    int64_t words = buffer.getRows() * buffer.getCols() / 2;
    Value base = LLVM::PtrToIntOp::create(rewriter, loc, rewriter.getI32Type(),
                                          adaptor.getBuffer());
    std::string text =
        "{\n\t.reg .pred %fill_p;\n\t.reg .u32 %fill_i, %fill_a, %fill_n;\n"
        "\tmov.u32 %fill_i, %tid.x;\n\tmov.u32 %fill_n, %ntid.x;\n"
        "FILL_${:uid}:\n\tsetp.ge.u32 %fill_p, %fill_i, " +
        std::to_string(words) +
        ";\n\t@%fill_p bra FILLED_${:uid};\n\tmad.lo.u32 %fill_a, %fill_i, 4, $0;\n"
        "\tst.shared.b32 [%fill_a], " +
        std::to_string(word) +
        ";\n\tadd.u32 %fill_i, %fill_i, %fill_n;\n\tbra FILL_${:uid};\n"
        "FILLED_${:uid}:\n\tfence.proxy.async.shared::cta;\n\t}";
    inlinePtx(rewriter, loc, {}, {base}, text, "r");
    rewriter.eraseOp(op);
    return success();
  }
};

struct WgmmaWaitToPtx : OpConversionPattern<tgpu::WgmmaWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::WgmmaWaitOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> regs;
    SmallVector<int64_t> counts;
    for (Value v : adaptor.getValues()) {
      auto values = elementsOf(rewriter, loc, v);
      counts.push_back(values.size());
      regs.append(values);
    }
    std::string text =
        "wgmma.wait_group.sync.aligned " + std::to_string(op.getPendingAttr().getInt()) + ";";
    // A branch ptxas cannot fold ends the basic block before the wait, so its scheduler keeps
    // the wait below the code before it (TileGPUHints.h). %clock never reads all ones within
    // a kernel's lifetime, so the branch is always taken and the fence it jumps over (there so
    // that the branch has something to skip) never runs; about 4 instructions a key block.
    if (op->hasAttr(tgpu::kWaitAfterPrecedingCodeAttr))
      text = "{\n\t.reg .pred %hold_p;\n\t.reg .b32 %hold_c;\n\tmov.u32 %hold_c, %clock;\n"
             "\tsetp.ne.u32 %hold_p, %hold_c, -1;\n\t@%hold_p bra HOLD_${:uid};\n"
             "\tmembar.cta;\nHOLD_${:uid}:\n\t}\n\t" +
             text;
    SmallVector<Value> pinned = pinRegisters(rewriter, loc, text, regs);
    SmallVector<Value> results;
    size_t at = 0;
    for (auto [v, n] : llvm::zip(adaptor.getValues(), counts)) {
      Type elt = cast<VectorType>(v.getType()).getElementType();
      results.push_back(fromValues(rewriter, loc, elt, ArrayRef<Value>(pinned).slice(at, n)));
      at += n;
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateWgmmaToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                 RewritePatternSet &patterns) {
  patterns.add<WgmmaToPtx, WgmmaWaitToPtx, SplitRowSumsToNVVM, FillToNVVM>(
      converter, patterns.getContext());
}
