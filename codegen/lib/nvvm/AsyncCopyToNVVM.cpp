//===- AsyncCopyToNVVM.cpp - cp.async copies, their groups and waits ------===//
//
// tgpu.async_copy: the CTA's threads (or the op's `threads` first ones) copy the block's rows
// in 16-byte chunks with cp.async.cg (global -> shared, bypassing L1), chunk i of the block by
// thread i % threads,
// each to its swizzled place in the buffer; rows at or past the bound copy 0 bytes (the
// hardware zero-fills them). A paged copy (`pages %table`) maps each row through
// tile::pagedRow, one table read per row a thread copies, or per page where `row_alignment`
// and a fixed page size say which rows share one. nvgpu.device_async_create_group is cp.async.commit_group and
// nvgpu.device_async_wait cp.async.wait_group N: groups are counted, so a token is a
// placeholder i32 once converted.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

struct AsyncCopyToCpAsync : OpConversionPattern<tgpu::AsyncCopyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::AsyncCopyOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    tgpu::SharedTile tile = op.getBuffer().getType().getSharedTile();
    if (tile.rowBytes() % 16)
      return op.emitOpError("copies 16-byte chunks: rows must be a multiple of 16 bytes");
    auto kernel = op->getParentOfType<gpu::GPUFuncOp>();
    std::optional<ArrayRef<int32_t>> block = kernel.getKnownBlockSize();
    if (!block)
      return op.emitOpError("the kernel's thread count is unknown");
    // The copying threads: the IR's `threads` (the consumers' own copy under warp
    // specialization, whose producer warps never reach it), else the CTA's.
    int64_t threads = op.getThreads().value_or((*block)[0]);
    if (threads > (*block)[0])
      return op.emitOpError() << "is shared by " << threads << " threads; the kernel has "
                              << (*block)[0];
    auto viewType = cast<MemRefType>(op.getView().getType());
    KernelView view = KernelView::unpack(b, loc, adaptor.getView(), viewType);
    SmallVector<Value> lead(adaptor.getIndices());
    Value row0 = lead.pop_back_val();
    Value bound = adaptor.getBound();
    Value lastRow = arith::SubIOp::create(b, loc, bound, indexConstant(b, loc, 1));
    // A paged cache (tile-paged-kv): the view indices of a logical (batch, head) row. A row past
    // the bound, whose chunk copies 0 bytes, reads table[batch, 0] (every table row has one
    // entry) and the cache's page 0, so even an empty sequence addresses valid memory.
    std::optional<KernelView> table;
    tile::PageDivisor pageSize;
    if (Value pages = adaptor.getPageTable()) {
      table = KernelView::unpack(b, loc, pages, cast<MemRefType>(op.getPageTable().getType()));
      if (viewType.isDynamicDim(2)) {
        // A page size given at launch: its reciprocal once, where the view is defined (the
        // kernel's entry), not once per row in the key loop.
        OpBuilder::InsertionGuard atView(b);
        b.setInsertionPointAfterValue(adaptor.getView());
        Value size = KernelView::unpack(b, loc, adaptor.getView(), viewType).sizes[2];
        pageSize = tile::pageDivisor(b, loc, size);
      } else {
        // A fixed page size (tile-paged-kv's page-size) is the type's: a constant divisor.
        pageSize = tile::pageDivisor(b, loc, indexConstant(b, loc, viewType.getDimSize(2)));
      }
    }
    Value zeroIndex = indexConstant(b, loc, 0);
    auto rowIndices = [&](Value gRow, Value inBounds) -> SmallVector<Value> {
      SmallVector<Value> at(lead);
      if (!table) {
        at.push_back(b.createOrFold<arith::MinUIOp>(loc, gRow, lastRow));
        return at;
      }
      Value row = arith::SelectOp::create(b, loc, inBounds, gRow, zeroIndex);
      tile::PageAndRow paged = tile::pagedRow(
          b, loc, row, pageSize, [&](OpBuilder &b, Location loc, Value column) -> Value {
            Value page = table->load(b, loc, ValueRange{lead[0], column});
            return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), page);
          });
      Value page = arith::SelectOp::create(b, loc, inBounds, paged.page, zeroIndex);
      return {page, lead[1], paged.row};
    };
    ThreadCoordinates t = threadCoordinates(b, op);
    Value dst = rematerializedPerIteration(b, loc, adaptor.getBuffer(), op);

    int64_t chunksPerRow = tile.rowBytes() / 16, chunks = tile.rows * chunksPerRow;
    int64_t elementsPerChunk = 16 / tile.elementBytes;
    // When a round of copies covers a multiple of 8 rows, every round has the thread's first
    // chunk and swizzle: its shared offset is the first round's plus a constant.
    int64_t rowsPerRound = threads / chunksPerRow;
    bool sameSwizzle = threads % chunksPerRow == 0 && rowsPerRound % 8 == 0;
    Value r0 = arith::DivUIOp::create(b, loc, t.tid, indexConstant(b, loc, chunksPerRow));
    Value ch0 = arith::RemUIOp::create(b, loc, t.tid, indexConstant(b, loc, chunksPerRow));
    Value firstOffset = sharedChunkOffset(b, loc, tile, r0, ch0);
    // A paged copy reads every round's page from the table before the first copy: the reads
    // are then in flight together (a cp.async between them would order them one after
    // another, a global load's latency each).
    struct Round {
      Value chunkIdx, offset, bytes;
      SmallVector<Value> at;
      bool guarded;
    };
    auto copy = [&](const Round &round) {
      auto emit = [&] {
        NVVM::CpAsyncOp::create(b, loc, sharedAddress(b, loc, dst, round.offset),
                                view.address(b, loc, round.at), b.getI32IntegerAttr(16),
                                NVVM::LoadCacheModifierKindAttr::get(
                                    b.getContext(), NVVM::LoadCacheModifierKind::CG),
                                round.bytes);
      };
      if (!round.guarded) {
        emit();
        return;
      }
      // The last round has fewer chunks than threads.
      auto guard = scf::IfOp::create(
          b, loc,
          b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, round.chunkIdx,
                                        indexConstant(b, loc, chunks)),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(guard.thenBlock());
      emit();
    };
    // Pages read once per page rather than once per row (`row_alignment`, a page size fixed
    // in the type): round i's rows r0 + i·R (R = rowsPerRound, r0 < R) of a block starting at
    // a multiple of A lie in page group pageGroup(i), which starts at block row groupRow(g).
    // Where S is a multiple of A and the block has at most A rows, the block is one page
    // (one group, at row 0); where A is a multiple of S and R divides S, rows i·R to i·R + R - 1
    // are in the page starting at row S·⌊i·R / S⌋ of the block. Each group's page is read
    // through tile::pagedRow at its first row, and a round's row in the page is that row's
    // plus its distance from the group's first row.
    std::optional<int64_t> alignment = op.getRowAlignment();
    int64_t S = viewType.getDimSize(2);
    bool onePage = table && alignment && !viewType.isDynamicDim(2) &&
                   threads % chunksPerRow == 0 && S % *alignment == 0 &&
                   tile.rows <= *alignment;
    bool pageRuns = table && alignment && !viewType.isDynamicDim(2) && !onePage &&
                    threads % chunksPerRow == 0 && *alignment % S == 0 && S % rowsPerRound == 0;
    auto pageGroup = [&](int64_t i) { return onePage ? 0 : i * rowsPerRound / S; };
    SmallVector<tile::PageAndRow> groups;
    if (onePage || pageRuns) {
      int64_t count = onePage ? 1 : pageGroup((chunks + threads - 1) / threads - 1) + 1;
      for (int64_t g = 0; g < count; ++g) {
        // A group at or past the bound reads table[batch, 0] (every table row has one entry),
        // as a row past it does below; its rows copy 0 bytes.
        Value first = addIndex(b, loc, row0, indexConstant(b, loc, onePage ? 0 : g * S));
        Value inBounds =
            b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, first, bound);
        Value row = arith::SelectOp::create(b, loc, inBounds, first, zeroIndex);
        groups.push_back(tile::pagedRow(
            b, loc, row, pageSize, [&](OpBuilder &b, Location loc, Value column) -> Value {
              Value page = table->load(b, loc, ValueRange{lead[0], column});
              return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), page);
            }));
      }
    }
    auto groupedRowIndices = [&](int64_t i, Value r, Value inBounds) -> SmallVector<Value> {
      const tile::PageAndRow &group = groups[pageGroup(i)];
      Value fromGroup = onePage ? r : arith::SubIOp::create(
                                          b, loc, r, indexConstant(b, loc, pageGroup(i) * S));
      Value page = arith::SelectOp::create(b, loc, inBounds, group.page, zeroIndex);
      return {page, lead[1], addIndex(b, loc, group.row, fromGroup)};
    };
    SmallVector<Round> pending;
    for (int64_t i = 0; i * threads < chunks; ++i) {
      Round round;
      round.chunkIdx = addIndex(b, loc, t.tid, indexConstant(b, loc, i * threads));
      Value r = sameSwizzle
                    ? addIndex(b, loc, r0, indexConstant(b, loc, i * rowsPerRound))
                    : arith::DivUIOp::create(b, loc, round.chunkIdx,
                                             indexConstant(b, loc, chunksPerRow))
                          .getResult();
      Value ch = sameSwizzle ? ch0
                             : arith::RemUIOp::create(b, loc, round.chunkIdx,
                                                      indexConstant(b, loc, chunksPerRow))
                                   .getResult();
      round.offset =
          sameSwizzle
              ? addIndex(b, loc, firstOffset,
                         indexConstant(b, loc, i * rowsPerRound * tile.rowPitchBytes()))
              : sharedChunkOffset(b, loc, tile, r, ch);
      Value gRow = addIndex(b, loc, row0, r);
      auto rowInBounds = [&] {
        return b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, gRow, bound);
      };
      // (A contiguous copy computes the bound check after the address, as it always has.)
      Value inBounds = table ? rowInBounds() : Value();
      round.at = groups.empty() ? rowIndices(gRow, inBounds) : groupedRowIndices(i, r, inBounds);
      round.at.push_back(mulIndex(b, loc, ch, indexConstant(b, loc, elementsPerChunk)));
      if (!inBounds)
        inBounds = rowInBounds();
      round.bytes = arith::SelectOp::create(b, loc, inBounds, i32Constant(b, loc, 16),
                                            i32Constant(b, loc, 0));
      round.guarded = (i + 1) * threads > chunks;
      if (table)
        pending.push_back(std::move(round));
      else
        copy(round);
    }
    for (const Round &round : pending)
      copy(round);
    // The token only orders the group after the copy; cp.async counts groups.
    rewriter.replaceOp(op, i32Constant(b, loc, 0));
    return success();
  }
};

struct CreateGroupToCommit : OpConversionPattern<nvgpu::DeviceAsyncCreateGroupOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(nvgpu::DeviceAsyncCreateGroupOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    NVVM::CpAsyncCommitGroupOp::create(rewriter, op.getLoc());
    rewriter.replaceOp(op, i32Constant(rewriter, op.getLoc(), 0));
    return success();
  }
};

struct WaitToWaitGroup : OpConversionPattern<nvgpu::DeviceAsyncWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(nvgpu::DeviceAsyncWaitOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    int32_t newer = op.getNumGroups().value_or(0);
    rewriter.replaceOpWithNewOp<NVVM::CpAsyncWaitGroupOp>(op, rewriter.getI32IntegerAttr(newer));
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateAsyncCopyToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                     RewritePatternSet &patterns) {
  patterns.add<AsyncCopyToCpAsync, CreateGroupToCommit, WaitToWaitGroup>(converter,
                                                                        patterns.getContext());
}
