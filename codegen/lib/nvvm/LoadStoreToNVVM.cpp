//===- LoadStoreToNVVM.cpp - global loads and stores of blocks ------------===//
//
// tile.block_load of a block in registers (#tgpu.operand_a: Q's fragments, loaded once):
// each thread loads its 32-bit pairs straight from global memory; rows at or past the bound
// read the view's first element and are replaced by zeros. tile.block_store of an accumulator
// (#tgpu.mma_acc, #tgpu.wgmma_acc) or of its rows (#tgpu.acc_rows: the logsumexp): each
// thread stores its pairs (rounded to the view's type), guarded by the bound; to a 16-bit view
// whose rows are 16-byte aligned the quad first transposes its pairs (xor-shuffles), so that
// each lane stores 16 whole bytes of its row; a row vector is written by lane c == 0 of each
// quad. tile.block_load of an accumulator or its rows from an
// f32 view (tile-split-kv's partial results, written by other CTAs) is the store's mirror:
// each thread loads the elements it holds, volatile (coherent at system scope, so no stale
// L1 line of another CTA's write), rows past the bound read row 0 and are replaced by zeros;
// from a 16-bit view (the backward's dO and O, for D = rowsum(dO o O)) it loads each pair as
// 32 bits. tile.block_atomic_add is the store with an atomic f32 add per element (the
// backward's dQ accumulator). A block with packed rows
// (`packed R`: a GQA group's heads) unpacks each thread's rows into (head, row) through
// tile::unpackRow, once per row. memref.dim reads a view's size.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/TileOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

int64_t rowsPerWarpOf(const tgpu::RegisterLayout &layout) {
  return layout.getRows() * 32 / layout.getThreads();
}

/// What a block load or store addresses: the view, the leading indices, the block's first row
/// and the row bound; the first row of this thread within the block; the rows per head of a
/// packed block (else null).
struct BlockRows {
  KernelView view;
  SmallVector<Value> lead;
  Value row0, bound, threadRow, headRows;

  /// The view indices of (block) row `row`, unpacked into (head, row) when the rows are packed,
  /// then `trailing`.
  SmallVector<Value> at(OpBuilder &b, Location loc, Value row, ValueRange trailing = {}) const {
    SmallVector<Value> indices(lead);
    if (headRows) {
      tile::HeadAndRow unpacked = tile::unpackRow(b, loc, indices.back(), row, headRows);
      indices.back() = unpacked.head;
      row = unpacked.row;
    }
    indices.push_back(row);
    indices.append(trailing.begin(), trailing.end());
    return indices;
  }
};
BlockRows blockRows(OpBuilder &b, Operation *op, Value view, Type viewType, ValueRange indices,
                    Value bound, Value headRows, int64_t rowsPerWarp) {
  Location loc = op->getLoc();
  BlockRows r{KernelView::unpack(b, loc, view, cast<MemRefType>(viewType)),
              SmallVector<Value>(indices), Value(), bound, Value(), headRows};
  r.row0 = r.lead.pop_back_val();
  r.threadRow = threadCoordinates(b, op).firstRow(b, loc, rowsPerWarp);
  return r;
}

struct BlockLoadToRegisters : OpConversionPattern<tile::BlockLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tile::BlockLoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<tgpu::RegisterLayout> layout = registerLayoutOf(op.getType());
    if (!layout || layout->getKind() != tgpu::RegisterLayout::Kind::OperandA)
      return rewriter.notifyMatchFailure(op, "loads into registers only A fragments");
    if (op.getPageTable())
      return op.emitOpError("a paged cache's blocks are copied to shared memory (keys and "
                            "values), not loaded into registers");
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    int64_t rowsPerWarp = rowsPerWarpOf(*layout), cols = op.getType().getDimSize(1);
    BlockRows rows =
        blockRows(b, op, adaptor.getView(), op.getView().getType(), adaptor.getIndices(),
                  adaptor.getBound(), adaptor.getHeadRows(), rowsPerWarp);
    const KernelView &view = rows.view;
    Value row0 = rows.row0, bound = rows.bound, rowBase = rows.threadRow;
    ThreadCoordinates t = threadCoordinates(b, op);
    Value c2 = mulIndex(b, loc, t.c, indexConstant(b, loc, 2));
    Value zero = i32Constant(b, loc, 0);
    // Fragment regs of m-tile mt, k-tile kt: (g, 16kt+2c), (g+8, 16kt+2c), (g, 16kt+8+2c),
    // (g+8, 16kt+8+2c), rows counted from the m-tile's first row (#tgpu.operand_a).
    SmallVector<Value> regs;
    for (int64_t mt = 0; mt < rowsPerWarp / 16; ++mt) {
      Value rowOk[2];
      SmallVector<Value> rowAt[2];
      for (int h = 0; h < 2; ++h) {
        Value r = addIndex(b, loc, row0,
                           addIndex(b, loc, rowBase, indexConstant(b, loc, 16 * mt + 8 * h)));
        rowOk[h] = b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, r, bound);
        rowAt[h] = rows.at(b, loc, r);
      }
      for (int64_t kt = 0; kt < cols / 16; ++kt)
        for (int reg = 0; reg < 4; ++reg) {
          int h = reg % 2;
          SmallVector<Value> at(rowAt[h]);
          at.push_back(addIndex(b, loc, c2, indexConstant(b, loc, 16 * kt + 8 * (reg / 2))));
          // A row at or past the bound reads the view's first element instead, and is
          // discarded: with a bound of 0 (a packed sequence without rows) no row of its own
          // exists to read.
          Value address = LLVM::SelectOp::create(b, loc, rowOk[h], view.address(b, loc, at),
                                                 view.pointer);
          Value v = LLVM::LoadOp::create(b, loc, b.getI32Type(), address, 4);
          regs.push_back(arith::SelectOp::create(b, loc, rowOk[h], v, zero));
        }
    }
    rewriter.replaceOp(op, fromValues(b, loc, b.getI32Type(), regs));
    return success();
  }
};

struct BlockLoadToAccumulator : OpConversionPattern<tile::BlockLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tile::BlockLoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<tgpu::RegisterLayout> layout = registerLayoutOf(op.getType());
    using Kind = tgpu::RegisterLayout::Kind;
    if (!layout || layout->getKind() == Kind::OperandA)
      return rewriter.notifyMatchFailure(op, "loads accumulators and their rows");
    Type elt = op.getType().getElementType();
    bool rowVector = layout->getKind() == Kind::AccumulatorRows;
    if ((rowVector && !elt.isF32()) || op.getPageTable())
      return op.emitOpError("an accumulator's rows are loaded from an f32 view only, and no "
                            "accumulator from a paged one");
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    int64_t rowsPerWarp = rowsPerWarpOf(*layout);
    BlockRows rows =
        blockRows(b, op, adaptor.getView(), op.getView().getType(), adaptor.getIndices(),
                  adaptor.getBound(), adaptor.getHeadRows(), rowsPerWarp);
    const KernelView &view = rows.view;
    Value row0 = rows.row0, bound = rows.bound, rowBase = rows.threadRow;
    ThreadCoordinates t = threadCoordinates(b, op);
    int64_t nTiles = rowVector ? 0 : layout->getCols() / 8;
    Type f32 = b.getF32Type();
    Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(elt, 0));
    SmallVector<Value> values(rowVector ? 2 * (rowsPerWarp / 16) : 4 * (rowsPerWarp / 16) * nTiles);
    // Slot = (m-tile, half): rows g and g + 8 of each m-tile, as the store numbers them.
    for (int64_t slot = 0; slot < 2 * (rowsPerWarp / 16); ++slot) {
      int64_t mt = slot / 2, h = slot % 2;
      Value row = addIndex(b, loc, row0,
                           addIndex(b, loc, rowBase, indexConstant(b, loc, 16 * mt + 8 * h)));
      Value ok = b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, row, bound);
      // A row at or past the bound reads row 0 instead, and is discarded: with a bound of 0 (a
      // packed sequence without rows) no row of its own exists to read, and bound - 1 would
      // wrap. The workspace this reads (tile-split-kv's partials) has a row 0 for every
      // (split, batch, head), and packed row 0 is the group's first head's.
      Value safeRow = arith::SelectOp::create(b, loc, ok, row, indexConstant(b, loc, 0));
      SmallVector<Value> rowAt = rows.at(b, loc, safeRow);
      auto load = [&](Type type, ValueRange at, unsigned alignment) {
        return LLVM::LoadOp::create(b, loc, type, view.address(b, loc, at), alignment,
                                    /*isVolatile=*/true);
      };
      if (rowVector) {
        values[slot] = arith::SelectOp::create(b, loc, ok, load(f32, rowAt, 4), zero);
        continue;
      }
      for (int64_t j = 0; j < nTiles; ++j) {
        SmallVector<Value> at(rowAt);
        at.push_back(addIndex(b, loc, mulIndex(b, loc, t.c, indexConstant(b, loc, 2)),
                              indexConstant(b, loc, 8 * j)));
        Value pair = load(VectorType::get({2}, elt), at, elt.isF32() ? 8 : 4);
        int64_t e = 4 * (mt * nTiles + j) + 2 * h;
        for (int k = 0; k < 2; ++k)
          values[e + k] = arith::SelectOp::create(b, loc, ok, extractValue(b, loc, pair, k), zero);
      }
    }
    rewriter.replaceOp(op, fromValues(b, loc, rowVector ? f32 : elt, values));
    return success();
  }
};

struct BlockAtomicAddFromRegisters : OpConversionPattern<tile::BlockAtomicAddOp> {
  BlockAtomicAddFromRegisters(TypeConverter &converter, MLIRContext *ctx, bool paired)
      : OpConversionPattern(converter, ctx), paired(paired) {}
  bool paired;
  LogicalResult matchAndRewrite(tile::BlockAtomicAddOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<tgpu::RegisterLayout> layout = registerLayoutOf(op.getValue().getType());
    using Kind = tgpu::RegisterLayout::Kind;
    if (!layout || (layout->getKind() != Kind::MmaAccumulator &&
                    layout->getKind() != Kind::WgmmaAccumulator))
      return op.emitOpError("adds an accumulator block only");
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    int64_t rowsPerWarp = rowsPerWarpOf(*layout);
    BlockRows rows = blockRows(b, op, adaptor.getView(), op.getView().getType(),
                               adaptor.getIndices(), adaptor.getBound(), Value(), rowsPerWarp);
    const KernelView &view = rows.view;
    Value val = adaptor.getValue();
    ThreadCoordinates t = threadCoordinates(b, op);
    int64_t nTiles = layout->getCols() / 8;
    for (int64_t slot = 0; slot < 2 * (rowsPerWarp / 16); ++slot) {
      int64_t mt = slot / 2, h = slot % 2;
      Value row = addIndex(b, loc, rows.row0,
                           addIndex(b, loc, rows.threadRow, indexConstant(b, loc, 16 * mt + 8 * h)));
      Value ok = b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, row, rows.bound);
      auto guard = scf::IfOp::create(b, loc, ok, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(guard.thenBlock());
      SmallVector<Value> rowAt = rows.at(b, loc, row);
      for (int64_t j = 0; j < nTiles; ++j) {
        int64_t e = 4 * (mt * nTiles + j) + 2 * h;
        if (paired) {
          // The pair's two columns are adjacent (8-byte aligned: an even column of a row).
          SmallVector<Value> at(rowAt);
          at.push_back(addIndex(b, loc, mulIndex(b, loc, t.c, indexConstant(b, loc, 2)),
                                indexConstant(b, loc, 8 * j)));
          inlinePtx(b, loc, {},
                    {view.address(b, loc, at), extractValue(b, loc, val, e),
                     extractValue(b, loc, val, e + 1)},
                    "red.relaxed.gpu.global.add.v2.f32 [$0], {$1, $2};", "l,f,f");
          continue;
        }
        for (int k = 0; k < 2; ++k) {
          SmallVector<Value> at(rowAt);
          at.push_back(addIndex(b, loc, mulIndex(b, loc, t.c, indexConstant(b, loc, 2)),
                                indexConstant(b, loc, 8 * j + k)));
          // Unused result: ptxas makes it a red.global.add.f32.
          LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::fadd, view.address(b, loc, at),
                                    extractValue(b, loc, val, e + k),
                                    LLVM::AtomicOrdering::monotonic);
        }
      }
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct BlockStoreFromRegisters : OpConversionPattern<tile::BlockStoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tile::BlockStoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<tgpu::RegisterLayout> layout = registerLayoutOf(op.getValue().getType());
    using Kind = tgpu::RegisterLayout::Kind;
    if (!layout || layout->getKind() == Kind::OperandA)
      return rewriter.notifyMatchFailure(op, "stores accumulators and their rows");
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    int64_t rowsPerWarp = rowsPerWarpOf(*layout);
    BlockRows rows =
        blockRows(b, op, adaptor.getView(), op.getView().getType(), adaptor.getIndices(),
                  adaptor.getBound(), adaptor.getHeadRows(), rowsPerWarp);
    const KernelView &view = rows.view;
    Value row0 = rows.row0, bound = rows.bound, rowBase = rows.threadRow;
    Value val = adaptor.getValue();
    ThreadCoordinates t = threadCoordinates(b, op);
    bool rowVector = layout->getKind() == Kind::AccumulatorRows;
    int64_t nTiles = rowVector ? 0 : layout->getCols() / 8;
    int64_t slots = 2 * (rowsPerWarp / 16);
    // Slot = (m-tile, half): rows g and g + 8 of each m-tile. The four lanes of a quad hold the
    // same rows.
    auto rowOf = [&](int64_t slot) {
      int64_t mt = slot / 2, h = slot % 2;
      return addIndex(b, loc, row0,
                      addIndex(b, loc, rowBase, indexConstant(b, loc, 16 * mt + 8 * h)));
    };
    auto inBounds = [&](Value row) {
      return b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, row, bound);
    };
    // Each thread's pairs, a 4- or 8-byte store each: a warp's instruction writes 16 bytes of
    // each of 8 rows (32 bytes of f32).
    auto storePairs = [&] {
      for (int64_t slot = 0; slot < slots; ++slot) {
        int64_t mt = slot / 2, h = slot % 2;
        Value row = rowOf(slot);
        Value ok = inBounds(row);
        if (rowVector) // the four lanes of a quad hold the row; one writes it
          ok = arith::AndIOp::create(b, loc, ok,
                                     arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                                           t.c, indexConstant(b, loc, 0)));
        auto guard = scf::IfOp::create(b, loc, ok, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(guard.thenBlock());
        SmallVector<Value> rowAt = rows.at(b, loc, row);
        if (rowVector) {
          Value x = extractValue(b, loc, val, slot);
          if (view.elementType != x.getType())
            x = arith::TruncFOp::create(b, loc, view.elementType, x);
          LLVM::StoreOp::create(b, loc, x, view.address(b, loc, rowAt), 4);
          continue;
        }
        for (int64_t j = 0; j < nTiles; ++j) {
          SmallVector<Value> at(rowAt);
          at.push_back(addIndex(b, loc, mulIndex(b, loc, t.c, indexConstant(b, loc, 2)),
                                indexConstant(b, loc, 8 * j)));
          int64_t e = 4 * (mt * nTiles + j) + 2 * h;
          Value x = extractValue(b, loc, val, e), y = extractValue(b, loc, val, e + 1);
          Value addr = view.address(b, loc, at);
          if (view.elementType.isF32())
            LLVM::StoreOp::create(b, loc, fromValues(b, loc, b.getF32Type(), {x, y}), addr, 8);
          else
            LLVM::StoreOp::create(b, loc, packPair(b, loc, x, y, view.elementType), addr, 4);
        }
      }
    };
    // 16-bit elements, 8-column tiles in fours: the quad's 4 x 4 packed pairs transposed by two
    // rounds of xor-shuffles, so that lane c holds all 16 bytes of tile 4q + c in its row and
    // stores them at once. A warp's instruction then writes 64 whole bytes of each of 8 rows,
    // a quarter of the instructions through the LSU, whose queue the 4-byte stores filled at
    // the end of every tile (ncu: stall_lg on them, stall_long_sb on the next writes of their
    // address registers; docs/perf.md, 2026-12-07, thirty-fifth session).
    auto storeRows16 = [&] {
      Type i32 = b.getI32Type();
      auto laneBit = [&](int64_t mask) -> Value {
        return arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::ne,
            arith::AndIOp::create(b, loc, t.c, indexConstant(b, loc, mask)),
            indexConstant(b, loc, 0));
      };
      Value hi = laneBit(2), odd = laneBit(1);
      auto select = [&](Value p, Value x, Value y) -> Value {
        return arith::SelectOp::create(b, loc, p, x, y);
      };
      auto xorShuffle = [&](Value x, int64_t offset) -> Value {
        return gpu::ShuffleOp::create(b, loc, x, i32Constant(b, loc, offset),
                                      i32Constant(b, loc, 32), gpu::ShuffleMode::XOR)
            .getShuffleResult();
      };
      // w[k]: this lane's pair of tile 4q + k. Round 1 (lanes c and c ^ 2) swaps the
      // off-diagonal 2 x 2 blocks, round 2 (c and c ^ 1) the off-diagonal pairs within each.
      auto transpose = [&](std::array<Value, 4> w) {
        for (int64_t k = 0; k < 2; ++k) {
          Value got = xorShuffle(select(hi, w[k], w[2 + k]), 2);
          w[k] = select(hi, got, w[k]);
          w[2 + k] = select(hi, w[2 + k], got);
        }
        for (int64_t k = 0; k < 2; ++k) {
          Value got = xorShuffle(select(odd, w[2 * k], w[2 * k + 1]), 1);
          w[2 * k] = select(odd, got, w[2 * k]);
          w[2 * k + 1] = select(odd, w[2 * k + 1], got);
        }
        return w;
      };
      for (int64_t slot = 0; slot < slots; ++slot) {
        int64_t mt = slot / 2, h = slot % 2;
        // Every lane shuffles (the shuffles are the warp's, the bound is the row's); then the
        // row's guard.
        SmallVector<Value> vectors;
        for (int64_t q = 0; q < nTiles / 4; ++q) {
          std::array<Value, 4> w;
          for (int64_t k = 0; k < 4; ++k) {
            int64_t e = 4 * (mt * nTiles + 4 * q + k) + 2 * h;
            w[k] = packPair(b, loc, extractValue(b, loc, val, e),
                            extractValue(b, loc, val, e + 1), view.elementType);
          }
          vectors.push_back(fromValues(b, loc, i32, transpose(w)));
        }
        Value row = rowOf(slot);
        auto guard = scf::IfOp::create(b, loc, inBounds(row), /*withElseRegion=*/false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(guard.thenBlock());
        SmallVector<Value> rowAt = rows.at(b, loc, row);
        for (int64_t q = 0; q < nTiles / 4; ++q) {
          SmallVector<Value> at(rowAt);
          at.push_back(addIndex(b, loc, mulIndex(b, loc, t.c, indexConstant(b, loc, 8)),
                                indexConstant(b, loc, 32 * q)));
          LLVM::StoreOp::create(b, loc, vectors[q], view.address(b, loc, at), 16);
        }
      }
    };
    if (rowVector || view.elementType.getIntOrFloatBitWidth() != 16 || nTiles % 4 != 0) {
      storePairs();
    } else {
      // 16-byte stores need 16-byte rows: a base aligned to 16, strides of whole 8 elements and
      // contiguous columns. The launch ABI promises O 4-byte alignment only, so the kernel
      // checks (the same answer in every thread: no shuffle diverges) and keeps the pairs'
      // stores for other views.
      Type i64 = b.getI64Type();
      Value misaligned = arith::AndIOp::create(
          b, loc, LLVM::PtrToIntOp::create(b, loc, i64, view.pointer),
          arith::ConstantIntOp::create(b, loc, i64, 15));
      for (size_t d = 0; d + 1 < view.strides.size(); ++d)
        misaligned = arith::OrIOp::create(
            b, loc, misaligned,
            arith::IndexCastOp::create(
                b, loc, i64,
                arith::AndIOp::create(b, loc, view.strides[d], indexConstant(b, loc, 7))));
      Value aligned = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, misaligned,
                                arith::ConstantIntOp::create(b, loc, i64, 0)),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, view.strides.back(),
                                indexConstant(b, loc, 1)));
      auto choice = scf::IfOp::create(b, loc, aligned, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(choice.thenBlock());
      storeRows16();
      b.setInsertionPointToStart(choice.elseBlock());
      storePairs();
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct DimOfView : OpConversionPattern<memref::DimOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(memref::DimOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast<MemRefType>(op.getSource().getType());
    std::optional<int64_t> d = op.getConstantIndex();
    if (!type || !d)
      return op.emitOpError("only constant dimensions of kernel views have a GPU form");
    KernelView view = KernelView::unpack(rewriter, op.getLoc(), adaptor.getSource(), type);
    rewriter.replaceOp(op, view.sizes[*d]);
    return success();
  }
};

/// memref.load of a kernel view: one element from global memory (tile-paged-kv's per-sequence
/// lengths, read once per program).
struct LoadOfView : OpConversionPattern<memref::LoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(memref::LoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    KernelView view =
        KernelView::unpack(rewriter, op.getLoc(), adaptor.getMemref(), op.getMemRefType());
    rewriter.replaceOp(op, view.load(rewriter, op.getLoc(), adaptor.getIndices()));
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateLoadStoreToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                     RewritePatternSet &patterns,
                                                     bool pairedReductions) {
  patterns.add<BlockLoadToRegisters, BlockLoadToAccumulator, BlockStoreFromRegisters, DimOfView,
               LoadOfView>(converter, patterns.getContext());
  patterns.add<BlockAtomicAddFromRegisters>(converter, patterns.getContext(), pairedReductions);
}
