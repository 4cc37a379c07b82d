//===- SplitArriveToNVVM.cpp - programs of one row block meeting ---------===//
//
// tile.split_arrive (tile-split-kv): the CTAs that share a row block's keys each store a partial
// result, then count themselves at the row block's counter; the last to arrive merges. The
// threadfence-reduction protocol:
//
//   every thread   membar.gl: its partial stores are visible on the whole GPU before the count
//   the CTA        bar.sync: every thread has stored and fenced before thread 0 counts
//   thread 0       atom.add.global counter, 1 -> old; last = old + 1 == S; the last resets the
//                  counter to 0 (nothing else touches it in this launch; the next launch is
//                  stream-ordered after it)
//   the CTA        bar.red.or.pred last: every thread learns thread 0's answer, and the barrier
//                  orders thread 0's atomic before any thread's later loads
//   every thread   membar.gl again, so the merge's loads come after the count was observed
//
// The merge's loads of the partials are volatile (LoadStoreToNVVM), so no L1 line is stale.
//
// In a warp-specialized kernel the op names the threads that arrive (the consumers) and their
// named barrier (tgpu-warp-specialize): both barriers above are then `bar.sync id, threads` and
// `bar.red.or.pred id, threads` (LLVM's barrier.cta.red.or.aligned.count), since the producer
// never comes to the CTA's barrier 0.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/TileOps.h"

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

struct SplitArriveToAtomic : OpConversionPattern<tile::SplitArriveOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(tile::SplitArriveOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Type i32 = b.getI32Type();
    KernelView counters = KernelView::unpack(b, loc, adaptor.getCounters(),
                                             cast<MemRefType>(op.getCounters().getType()));
    Value counter = counters.address(b, loc, adaptor.getIndices());
    // Every thread's partial stores, fenced, before thread 0 counts the CTA: without the barrier
    // thread 0 could count while other warps still store, and the merging CTA would read them
    // half written.
    // The CTA's barrier 0, or the named barrier of the threads that arrive.
    Value barrierId, barrierThreads;
    if (std::optional<uint32_t> id = op.getBarrierId()) {
      barrierId = i32Constant(b, loc, int64_t(*id));
      barrierThreads = i32Constant(b, loc, int64_t(*op.getThreads()));
    }
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    if (barrierId)
      NVVM::BarrierOp::create(b, loc, TypeRange{}, barrierId, barrierThreads, {}, Value{});
    else
      NVVM::Barrier0Op::create(b, loc);
    ThreadCoordinates t = threadCoordinates(b, op);
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, t.tid,
                                        indexConstant(b, loc, 0));
    Value splits = arith::IndexCastOp::create(b, loc, i32, adaptor.getCount());
    auto count = scf::IfOp::create(b, loc, TypeRange{b.getI1Type()}, first,
                                   /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(count.thenBlock());
      Value one = i32Constant(b, loc, 1);
      Value before = LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, counter, one,
                                               LLVM::AtomicOrdering::monotonic);
      Value last = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         arith::AddIOp::create(b, loc, before, one), splits);
      auto reset = scf::IfOp::create(b, loc, last, /*withElseRegion=*/false);
      b.setInsertionPointToStart(reset.thenBlock());
      LLVM::StoreOp::create(b, loc, i32Constant(b, loc, 0), counter, 4);
      b.setInsertionPointAfter(reset);
      scf::YieldOp::create(b, loc, last);
      b.setInsertionPointToStart(count.elseBlock());
      scf::YieldOp::create(b, loc, arith::ConstantIntOp::create(b, loc, 0, 1).getResult());
    }
    Value last;
    if (barrierId) {
      // nvvm.barrier takes a reduction on barrier 0 only; bar.red.or.pred on a named barrier
      // is LLVM's intrinsic of it with an id and a thread count.
      last = LLVM::CallIntrinsicOp::create(
                 b, loc, b.getI1Type(),
                 b.getStringAttr("llvm.nvvm.barrier.cta.red.or.aligned.count"),
                 ValueRange{barrierId, barrierThreads, count.getResult(0)})
                 .getResult(0);
    } else {
      Value predicate = arith::ExtUIOp::create(b, loc, i32, count.getResult(0));
      Value any = NVVM::BarrierOp::create(b, loc, TypeRange{i32}, Value{}, Value{},
                                          NVVM::BarrierReductionAttr::get(
                                              b.getContext(), NVVM::BarrierReduction::OR),
                                          predicate)
                      .getResult(0);
      last = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, any,
                                   i32Constant(b, loc, 0));
    }
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    rewriter.replaceOp(op, last);
    return success();
  }
};

} // namespace

void tilefuse::nvvm::populateSplitArriveToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                       RewritePatternSet &patterns) {
  patterns.add<SplitArriveToAtomic>(converter, patterns.getContext());
}
