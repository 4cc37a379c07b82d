//===- TMAToNVVM.cpp - TMA loads and the mbarriers they complete on -------===//
//
// tgpu.tma_load: one `cp.async.bulk.tensor` per 128-byte panel of the buffer (the tensor map's
// box is one panel, LaunchAbi.h), panel p at column p * box columns into the panel's bytes
// (rows x 128), all completing on the one mbarrier. tgpu.tma_store: the same panels the other
// way, from a box of the buffer's rows, as one bulk async-group. The descriptor is the address
// of the kernel's grid-constant tensor-map parameter (KernelToNVVM.cpp).
//
// The nvgpu mbarrier ops on a tgpu.alloc'd group (a shared-memory pointer, 8 bytes a barrier):
// init, arrive, arrive.expect_tx and try_wait.parity, as the NVVM ops of the same names.
// (Upstream's NVGPU-to-NVVM lowering of them expects groups made by nvgpu.mbarrier.create, a
// memref global; ours live in the kernel's dynamic shared memory.)
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

Value toI32(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
}

/// Barrier `id` of a group: its base plus 8 bytes a barrier.
Value barrierAddress(OpBuilder &b, Location loc, Value group, Value id) {
  Value bytes = indexConstant(b, loc, tgpu::kMBarrierBytes);
  return sharedAddress(b, loc, group, mulIndex(b, loc, id, bytes));
}

struct TmaLoadToBulkTensor : OpConversionPattern<tgpu::TmaLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::TmaLoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    tgpu::BufferType buffer = op.getBuffer().getType();
    tgpu::SharedTile tile = buffer.getSharedTile();
    if (buffer.getLayout().getSwizzle() != tgpu::SharedSwizzle::Canonical128B)
      return op.emitOpError("lowers for canonical_128b buffers (one transfer per 128-byte "
                            "panel) only");
    int64_t boxColumns = launch_abi::tmaBoxColumns(tile.elementBytes);
    int64_t panels = launch_abi::tmaPanels(buffer.getCols(), tile.elementBytes);
    int64_t panelBytes = buffer.getRows() * launch_abi::kTmaBoxBytes;
    Value barrier = barrierAddress(rewriter, loc, adaptor.getBarriers(), adaptor.getBarrierId());
    SmallVector<Value> coordinates;
    for (Value c : adaptor.getCoordinates())
      coordinates.push_back(toI32(rewriter, loc, c));
    Value column0 = coordinates.front();
    for (int64_t p = 0; p < panels; ++p) {
      Value destination = sharedAddress(rewriter, loc, adaptor.getBuffer(),
                                        indexConstant(rewriter, loc, p * panelBytes));
      // The PTX 8.0 form writes shared::cluster; a CTA's own shared memory is part of its
      // cluster's window (a cluster of one here).
      destination = LLVM::AddrSpaceCastOp::create(
          rewriter, loc, LLVM::LLVMPointerType::get(rewriter.getContext(), 7), destination);
      coordinates.front() = arith::AddIOp::create(rewriter, loc, column0,
                                                  i32Constant(rewriter, loc, p * boxColumns));
      NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
          rewriter, loc, destination, adaptor.getDescriptor(), coordinates, barrier,
          /*im2colOffsets=*/ValueRange{}, /*multicastMask=*/Value{}, /*l2CacheHint=*/Value{},
          NVVM::TMALoadMode::TILE, /*isCTAOnly=*/false, /*group=*/NVVM::CTAGroupKindAttr{},
          /*predicate=*/Value{});
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// tgpu.tma_store: one `cp.async.bulk.tensor` shared::cta -> global per 128-byte panel, panel p
/// from the box's rows of the panel's bytes (rows x 128) at column p * box columns, then one
/// commit: the transfers are one bulk async-group, which the issuing thread's
/// cp.async.bulk.wait_group counts.
struct TmaStoreToBulkTensor : OpConversionPattern<tgpu::TmaStoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tgpu::TmaStoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    tgpu::BufferType buffer = op.getBuffer().getType();
    tgpu::SharedTile tile = buffer.getSharedTile();
    int64_t boxColumns = launch_abi::tmaBoxColumns(tile.elementBytes);
    int64_t panels = launch_abi::tmaPanels(buffer.getCols(), tile.elementBytes);
    int64_t panelBytes = buffer.getRows() * launch_abi::kTmaBoxBytes;
    Value firstRowBytes =
        mulIndex(rewriter, loc, adaptor.getFirstRow(),
                 indexConstant(rewriter, loc, launch_abi::kTmaBoxBytes));
    SmallVector<Value> coordinates;
    for (Value c : adaptor.getCoordinates())
      coordinates.push_back(toI32(rewriter, loc, c));
    Value column0 = coordinates.front();
    for (int64_t p = 0; p < panels; ++p) {
      Value offset = arith::AddIOp::create(rewriter, loc, firstRowBytes,
                                           indexConstant(rewriter, loc, p * panelBytes));
      Value source = sharedAddress(rewriter, loc, adaptor.getBuffer(), offset);
      coordinates.front() = arith::AddIOp::create(rewriter, loc, column0,
                                                  i32Constant(rewriter, loc, p * boxColumns));
      NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
          rewriter, loc, adaptor.getDescriptor(), source, coordinates, /*l2CacheHint=*/Value{},
          NVVM::TMAStoreMode::TILE, /*predicate=*/Value{});
    }
    NVVM::CpAsyncBulkCommitGroupOp::create(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

struct MBarrierInitToNVVM : OpConversionPattern<nvgpu::MBarrierInitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(nvgpu::MBarrierInitOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (op.getPredicate())
      return op.emitOpError("with a predicate is not lowered here");
    Location loc = op.getLoc();
    Value barrier = barrierAddress(rewriter, loc, adaptor.getBarriers(), adaptor.getMbarId());
    NVVM::MBarrierInitOp::create(rewriter, loc, barrier, toI32(rewriter, loc, adaptor.getCount()),
                                 Value{});
    rewriter.eraseOp(op);
    return success();
  }
};

struct MBarrierArriveToNVVM : OpConversionPattern<nvgpu::MBarrierArriveOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(nvgpu::MBarrierArriveOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!op.getToken().use_empty())
      return op.emitOpError("'s token is used; the lowering drops it (waits go by parity)");
    Location loc = op.getLoc();
    Value barrier = barrierAddress(rewriter, loc, adaptor.getBarriers(), adaptor.getMbarId());
    NVVM::MBarrierArriveOp::create(rewriter, loc, rewriter.getI64Type(), barrier, Value{});
    rewriter.eraseOp(op);
    return success();
  }
};

struct MBarrierArriveExpectTxToNVVM : OpConversionPattern<nvgpu::MBarrierArriveExpectTxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(nvgpu::MBarrierArriveExpectTxOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (op.getPredicate())
      return op.emitOpError("with a predicate is not lowered here");
    Location loc = op.getLoc();
    Value barrier = barrierAddress(rewriter, loc, adaptor.getBarriers(), adaptor.getMbarId());
    NVVM::MBarrierArriveExpectTxOp::create(rewriter, loc, Type{}, barrier,
                                           toI32(rewriter, loc, adaptor.getTxcount()),
                                           NVVM::MemScopeKind::CTA, /*relaxed=*/false,
                                           /*predicate=*/Value{});
    rewriter.eraseOp(op);
    return success();
  }
};

struct MBarrierTryWaitParityToNVVM : OpConversionPattern<nvgpu::MBarrierTryWaitParityOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(nvgpu::MBarrierTryWaitParityOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value barrier = barrierAddress(rewriter, loc, adaptor.getBarriers(), adaptor.getMbarId());
    Value parity = arith::ExtUIOp::create(rewriter, loc, rewriter.getI32Type(),
                                          adaptor.getPhaseParity());
    // A structured loop around one try_wait that yields its predicate, rather than NVVM's
    // op, whose inline PTX loops on labels of its own: ptxas then sees the wait's control flow
    // as the kernel's (with branch labels inside inline PTX, a kernel whose loop held several
    // such waits lost a live register across the key loop: Q at D = Bc = 128).
    auto loop = scf::WhileOp::create(rewriter, loc, TypeRange{}, ValueRange{});
    {
      OpBuilder::InsertionGuard guard(rewriter);
      Block *before = rewriter.createBlock(&loop.getBefore());
      rewriter.setInsertionPointToStart(before);
      Value done = inlinePtx(rewriter, loc, {rewriter.getI32Type()}, {barrier, parity},
                             "{\n.reg .pred p;\n"
                             "mbarrier.try_wait.parity.shared.b64 p, [$1], $2;\n"
                             "selp.u32 $0, 1, 0, p;\n}",
                             "=r,r,r")[0];
      Value waiting = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, done,
                                            i32Constant(rewriter, loc, 0));
      scf::ConditionOp::create(rewriter, loc, waiting, ValueRange{});
      Block *after = rewriter.createBlock(&loop.getAfter());
      rewriter.setInsertionPointToStart(after);
      scf::YieldOp::create(rewriter, loc);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateTMAToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                               RewritePatternSet &patterns) {
  patterns.add<TmaLoadToBulkTensor, TmaStoreToBulkTensor, MBarrierInitToNVVM, MBarrierArriveToNVVM,
               MBarrierArriveExpectTxToNVVM, MBarrierTryWaitParityToNVVM>(converter,
                                                                          patterns.getContext());
}
