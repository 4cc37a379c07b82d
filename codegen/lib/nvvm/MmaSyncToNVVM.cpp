//===- MmaSyncToNVVM.cpp - tgpu.mma to ldmatrix + mma.sync m16n8k16 --------===//
//
// Each warp multiplies its m16 tiles: per k-step of 16 and pair of n8 tiles, one ldmatrix.x4
// reads the B fragments of both n-tiles from the rhs tile (K rows for Q K^T; V transposed with
// .trans for P V), and each B fragment serves every m-tile of the warp. A shared lhs (Q with
// q-operand=shared) is read with ldmatrix at the k-step that uses it, so only one k-step's
// fragments are live. A transposed lhs (P^T, dS^T of a backward kernel: a K x M tile) is read
// with ldmatrix.trans: the 8 x 8 matrices at (k rows, m chunks) transposed are the A
// fragments of (m rows, k columns), and the warp's m rows are its own chunks of the tile.
//
// Lane l of an ldmatrix.x4 addresses row l % 8 of matrix l / 8; for a 16 x 16 square at a row
// that is a multiple of 8, the chunk_xor swizzle (xor with row % 8) is the lane's l % 8, so a
// lane's offset depends on the chunk pair only and the square's row adds a constant, which
// stays a separate GEP to fold into the instruction's immediate.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "tilefuse/dialect/TileGPUOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

/// The lanes' ldmatrix coordinates: matrix (l / 8) split in its row half and chunk, and the
/// row within the matrix.
struct LdMatrixLanes {
  Value hi, lo, row;
  LdMatrixLanes(OpBuilder &b, Location loc, const ThreadCoordinates &t) {
    Value matrix = arith::DivUIOp::create(b, loc, t.lane, indexConstant(b, loc, 8));
    hi = arith::DivUIOp::create(b, loc, matrix, indexConstant(b, loc, 2));
    lo = arith::RemUIOp::create(b, loc, matrix, indexConstant(b, loc, 2));
    row = arith::RemUIOp::create(b, loc, t.lane, indexConstant(b, loc, 8));
  }
};

/// ldmatrix.x4 of the 16 x 16 square at rows rowReg (may be null) + rowConst, chunks
/// 2 * chunkPair.. of a chunk_xor tile with `rowBytes`: matrices in the order (rows +0,
/// chunk +0), (+0, +1), (+8, +0), (+8, +1).
SmallVector<Value> ldmatrix4(OpBuilder &b, Location loc, const LdMatrixLanes &lanes, Value base,
                             int64_t rowBytes, Value rowReg, int64_t rowConst, int64_t chunkPair,
                             bool trans) {
  // The swizzle only touches a chunk's low 3 bits: chunk pairs 4 apart differ by a constant
  // 128 bytes, so only four lane offsets exist.
  auto c = [&](int64_t v) { return indexConstant(b, loc, v); };
  Value chunk = addIndex(b, loc, c(2 * (chunkPair % 4)), lanes.lo);
  Value laneOffset = addIndex(
      b, loc, mulIndex(b, loc, addIndex(b, loc, mulIndex(b, loc, lanes.hi, c(8)), lanes.row),
                       c(rowBytes)),
      mulIndex(b, loc, arith::XOrIOp::create(b, loc, chunk, lanes.row), c(16)));
  if (rowReg)
    base = sharedAddress(b, loc, base, mulIndex(b, loc, rowReg, c(rowBytes)));
  Value addr = sharedAddress(b, loc, base, laneOffset);
  if (int64_t constant = rowConst * rowBytes + chunkPair / 4 * 128)
    addr = LLVM::GEPOp::create(b, loc, addr.getType(), b.getI8Type(), addr,
                               ArrayRef<LLVM::GEPArg>{int32_t(constant)});
  auto i32 = b.getI32Type();
  auto st = LLVM::LLVMStructType::getLiteral(b.getContext(), {i32, i32, i32, i32});
  Value r = NVVM::LdMatrixOp::create(
      b, loc, st, addr, 4, trans ? NVVM::MMALayout::col : NVVM::MMALayout::row,
      NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8), NVVM::LdStMatrixEltType::B16);
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, r, i));
  return out;
}

/// ldmatrix.x4.trans of the 16 x 16 square at rows rowConst.. (a multiple of 8) and chunks
/// 2 * chunkPair.. (an index value) of a chunk_xor tile: matrices (rows +0, chunk +0), (+0, +1),
/// (+8, +0), (+8, +1).
SmallVector<Value> ldmatrix4TransAt(OpBuilder &b, Location loc, const LdMatrixLanes &lanes,
                                    Value base, int64_t rowBytes, int64_t rowConst,
                                    Value chunkPair) {
  auto c = [&](int64_t v) { return indexConstant(b, loc, v); };
  Value chunk = addIndex(b, loc, mulIndex(b, loc, chunkPair, c(2)), lanes.lo);
  Value laneOffset = addIndex(
      b, loc, mulIndex(b, loc, addIndex(b, loc, mulIndex(b, loc, lanes.hi, c(8)), lanes.row),
                       c(rowBytes)),
      mulIndex(b, loc, arith::XOrIOp::create(b, loc, chunk, lanes.row), c(16)));
  Value addr = sharedAddress(b, loc, base, laneOffset);
  if (rowConst)
    addr = LLVM::GEPOp::create(b, loc, addr.getType(), b.getI8Type(), addr,
                               ArrayRef<LLVM::GEPArg>{int32_t(rowConst * rowBytes)});
  auto i32 = b.getI32Type();
  auto st = LLVM::LLVMStructType::getLiteral(b.getContext(), {i32, i32, i32, i32});
  Value r = NVVM::LdMatrixOp::create(b, loc, st, addr, 4, NVVM::MMALayout::col,
                                     NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8),
                                     NVVM::LdStMatrixEltType::B16);
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, r, i));
  return out;
}

SmallVector<Value> mmaSync(OpBuilder &b, Location loc, ArrayRef<Value> a, ArrayRef<Value> bFrag,
                           ArrayRef<Value> acc, Type elt) {
  auto f32 = b.getF32Type();
  auto st = LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes t = elt.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  // bf16 operands travel as i32 pairs; f16 ones as vector<2xf16>.
  SmallVector<Value> aOps(a), bOps(bFrag);
  if (elt.isF16()) {
    auto h2 = VectorType::get({2}, elt);
    for (Value &v : aOps)
      v = LLVM::BitcastOp::create(b, loc, h2, v);
    for (Value &v : bOps)
      v = LLVM::BitcastOp::create(b, loc, h2, v);
  }
  Value r = NVVM::MmaOp::create(b, loc, st, aOps, bOps, acc, {16, 8, 16}, std::nullopt,
                                std::nullopt, std::array<NVVM::MMATypes, 2>{t, t},
                                std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                                               NVVM::MMALayout::col});
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, r, i));
  return out;
}

struct MmaToMmaSync : OpConversionPattern<tgpu::MmaOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::MmaOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    auto resultType = cast<RankedTensorType>(op.getType());
    auto accLayout = cast<tgpu::MmaAccumulatorLayoutAttr>(resultType.getEncoding());
    int64_t mTiles = accLayout.getRowsPerWarp() / 16;
    int64_t cols = resultType.getDimSize(1);
    tgpu::BufferType rhsType = op.getRhs().getType();
    Type elt = rhsType.getElementType();
    int64_t k = op.getTransposeRhs() ? rhsType.getCols() : rhsType.getRows();
    int64_t kTiles = k / 16, nTiles = cols / 8;
    int64_t rhsRowBytes = rhsType.getSharedTile().rowPitchBytes();
    ThreadCoordinates t = threadCoordinates(b, op);
    LdMatrixLanes lanes(b, loc, t);
    Value rhs = rematerializedPerIteration(b, loc, adaptor.getRhs(), op);

    // A fragments per m-tile and k-step: from registers, or read per k-step from shared.
    auto sharedLhs = dyn_cast<tgpu::BufferType>(op.getLhs().getType());
    Value lhs = adaptor.getLhs();
    Value warpRow;
    if (sharedLhs) {
      lhs = rematerializedPerIteration(b, loc, lhs, op);
      warpRow = mulIndex(b, loc, t.warp, indexConstant(b, loc, accLayout.getRowsPerWarp()));
    }
    SmallVector<SmallVector<Value, 4>> aFrag(mTiles * kTiles);
    if (!sharedLhs)
      for (int64_t f = 0; f < mTiles * kTiles; ++f)
        for (int r = 0; r < 4; ++r)
          aFrag[f].push_back(extractValue(b, loc, lhs, 4 * f + r));

    SmallVector<SmallVector<Value, 4>> acc(mTiles * nTiles); // [m-tile * nTiles + n-tile]
    Value accIn = adaptor.getAcc();
    Value zero;
    if (!accIn)
      zero = arith::ConstantOp::create(b, loc, b.getF32Type(), b.getF32FloatAttr(0.0));
    for (int64_t f = 0; f < mTiles * nTiles; ++f)
      for (int e = 0; e < 4; ++e)
        acc[f].push_back(accIn ? extractValue(b, loc, accIn, 4 * f + e) : zero);

    for (int64_t kt = 0; kt < kTiles; ++kt) {
      if (sharedLhs && op.getTransposeLhs()) // tile [k][m]: rows 16kt.., the m-tile's chunks
        for (int64_t mt = 0; mt < mTiles; ++mt) {
          Value chunkPair = addIndex(
              b, loc,
              mulIndex(b, loc, t.warp, indexConstant(b, loc, accLayout.getRowsPerWarp() / 16)),
              indexConstant(b, loc, mt));
          aFrag[mt * kTiles + kt] = ldmatrix4TransAt(
              b, loc, lanes, lhs, sharedLhs.getSharedTile().rowPitchBytes(), 16 * kt, chunkPair);
        }
      else if (sharedLhs) // a0 = (rows +0, k +0), a1 = (+8, +0), a2 = (+0, +8), a3 = (+8, +8)
        for (int64_t mt = 0; mt < mTiles; ++mt) {
          auto m = ldmatrix4(b, loc, lanes, lhs, sharedLhs.getSharedTile().rowPitchBytes(), warpRow,
                             16 * mt, kt, /*trans=*/false);
          aFrag[mt * kTiles + kt] = {m[0], m[2], m[1], m[3]};
        }
      for (int64_t jp = 0; jp < nTiles / 2; ++jp) {
        // B fragments {b0, b1} of n-tiles 2jp and 2jp+1 at k-step kt.
        SmallVector<Value> m;
        if (op.getTransposeRhs()) {
          // K tile [n][k]: rows 16jp.. are the two n-tiles, chunks 2kt.. the k halves.
          m = ldmatrix4(b, loc, lanes, rhs, rhsRowBytes, Value(), 16 * jp, kt, /*trans=*/false);
        } else {
          // V tile [k][n], transposed: rows 16kt.. are the k halves, chunks 2jp.. the n-tiles.
          auto v = ldmatrix4(b, loc, lanes, rhs, rhsRowBytes, Value(), 16 * kt, jp,
                             /*trans=*/true);
          m = {v[0], v[2], v[1], v[3]};
        }
        for (int64_t mt = 0; mt < mTiles; ++mt) {
          auto &a = aFrag[mt * kTiles + kt];
          acc[mt * nTiles + 2 * jp] = mmaSync(b, loc, a, {m[0], m[1]}, acc[mt * nTiles + 2 * jp], elt);
          acc[mt * nTiles + 2 * jp + 1] =
              mmaSync(b, loc, a, {m[2], m[3]}, acc[mt * nTiles + 2 * jp + 1], elt);
        }
      }
    }
    SmallVector<Value> flat;
    for (auto &f : acc)
      flat.append(f.begin(), f.end());
    rewriter.replaceOp(op, fromValues(b, loc, b.getF32Type(), flat));
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateMmaSyncToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                   RewritePatternSet &patterns) {
  patterns.add<MmaToMmaSync>(converter, patterns.getContext());
}
