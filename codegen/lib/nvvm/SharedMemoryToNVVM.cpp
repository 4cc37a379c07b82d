//===- SharedMemoryToNVVM.cpp - shared buffers and ring stages ------------===//
//
// Every buffer lives in the kernel's dynamic shared memory (static shared memory stops at
// 48 KiB): tgpu.alloc is the address of the symbol `tilefuse_dynamic_smem` plus the offset
// tgpu-allocate-shared-memory gave it; tgpu.stage adds the stage's index times the ring's
// stage stride. tgpu.local_store writes each thread's pairs of an accumulator (adjacent
// columns) as one 32-bit st.shared at the pair's swizzled chunk: the eight rows of a quad
// group land in eight different chunks, so a warp's 32 stores hit 32 banks.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "tilefuse/dialect/TileGPUOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

struct AllocToDynamicSharedMemory : OpConversionPattern<tgpu::AllocOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::AllocOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<int64_t> offset = op.getOffset();
    if (!offset)
      return op.emitOpError("has no offset: run tgpu-allocate-shared-memory first");
    Location loc = op.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(rewriter.getContext(), 3);
    Value base = LLVM::AddressOfOp::create(rewriter, loc, ptr, kDynamicSharedMemorySymbol);
    rewriter.replaceOpWithNewOp<LLVM::GEPOp>(op, ptr, rewriter.getI8Type(), base,
                                             ArrayRef<LLVM::GEPArg>{int32_t(*offset)});
    return success();
  }
};

struct StageOfRing : OpConversionPattern<tgpu::StageOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::StageOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    tgpu::RingType ring = op.getRing().getType();
    int64_t stride = ring.getStageStrideInBytes();
    if (ring.getStages() == 2) {
      // Two stages (the key double buffer): a select between the two stage addresses, which
      // stay loop-invariant, instead of recomputing base + index * stride in every iteration.
      Value second = LLVM::GEPOp::create(rewriter, loc, adaptor.getRing().getType(),
                                         rewriter.getI8Type(), adaptor.getRing(),
                                         ArrayRef<LLVM::GEPArg>{int32_t(stride)});
      Value isSecond = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ne,
                                             adaptor.getIndex(), indexConstant(rewriter, loc, 0));
      rewriter.replaceOpWithNewOp<arith::SelectOp>(op, isSecond, second, adaptor.getRing());
      return success();
    }
    Value offset = mulIndex(rewriter, loc, adaptor.getIndex(), indexConstant(rewriter, loc, stride));
    rewriter.replaceOp(op, sharedAddress(rewriter, loc, adaptor.getRing(), offset));
    return success();
  }
};

struct LocalStoreToShared : OpConversionPattern<tgpu::LocalStoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::LocalStoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    std::optional<tgpu::RegisterLayout> layout = registerLayoutOf(op.getValue().getType());
    tgpu::BufferType buffer = op.getBuffer().getType();
    tgpu::SharedTile tile = buffer.getSharedTile();
    Type elt = buffer.getElementType();
    int64_t rowsPerWarp = layout->getRows() * 32 / layout->getThreads();
    ThreadCoordinates t = threadCoordinates(b, op);
    Value rowOrigin = t.firstRow(b, loc, rowsPerWarp);
    // The pair's chunk is its column / 8 (16-bit elements), its byte in the chunk 4c.
    Value inChunk = mulIndex(b, loc, t.c, indexConstant(b, loc, 4));
    Value base = rematerializedPerIteration(b, loc, adaptor.getBuffer(), op);
    Value value = adaptor.getValue();
    for (int64_t e = 0; e + 1 < layout->getValuesPerThread(); e += 2) {
      tgpu::RowCol offset = layout->elementOf(/*thread=*/0, e);
      Value row = addIndex(b, loc, rowOrigin, indexConstant(b, loc, offset.row));
      Value chunk = indexConstant(b, loc, offset.col / 8);
      Value byte = addIndex(b, loc, sharedChunkOffset(b, loc, tile, row, chunk), inChunk);
      Value pair = packPair(b, loc, extractValue(b, loc, value, e),
                            extractValue(b, loc, value, e + 1), elt);
      LLVM::StoreOp::create(b, loc, pair, sharedAddress(b, loc, base, byte), 4);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateSharedMemoryToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                        RewritePatternSet &patterns) {
  patterns.add<AllocToDynamicSharedMemory, StageOfRing, LocalStoreToShared>(
      converter, patterns.getContext());
}
