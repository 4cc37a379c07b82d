//===- WarpSpecialize.cpp - TMA producer and wgmma consumer warpgroups ----===//
//
// FlashAttention-3's split of a CTA into roles, on tgpu IR: the key/value tiles that
// tile-to-tgpu copies with cp.async into one shared buffer each become rings of `stages`
// stages filled by TMA, and the CTA becomes a tgpu.warp_specialize of
//
//   consumers  the Br / 64 warpgroups of the kernel as it was (warps 0 .. 4·Br/64 - 1, so every
//              register layout keeps its warp numbering): the Q load, the key loop's wgmma and
//              softmax work and the epilogue. Where the kernel waited for a copy it waits on the
//              stage's `full` mbarrier; after the wgmma that read the stage has completed, every
//              consumer thread arrives on the stage's `empty` mbarrier;
//   producer   one warpgroup after them, of which one thread runs the kernel's control flow
//              down to the copies (the key loop, its branches and the index arithmetic, cloned)
//              and, per copy, waits for the stage to be empty, arms its `full` mbarrier with the
//              tile's bytes and issues the TMA load (tgpu.tma_load, one transfer per 128-byte
//              panel).
//
// Both roles number the fills of each ring in program order with a counter carried through the
// loops and branches that hold copies (an iter_arg, a branch result): fill n goes to stage
// n % stages with phase (n / stages) & 1, so the two sides agree on every stage and phase by
// construction, also when a branch skips a block (block pruning's empty blocks). The producer
// runs ahead of the consumers by up to `stages` fills per ring, limited only by the empty
// barriers: the ring is the software pipeline, and tile-pipeline's prefetch is not used.
//
// setmaxnreg moves registers from the producer (at least 24 a thread, 32 when persistent) to
// the consumers (up to 240), from the CTA's share at launch (65536 / (threads · ctas_per_sm));
// the producer keeps what the consumers leave.
//
// Expects the IR of tile-to-tgpu without tile-pipeline: every cp.async fills a canonical_128b
// buffer from a kernel argument (K or V) at rows bounded by that argument's extent, and each
// copy's group is waited for once, right before the wgmma that reads it.
//
// Q in shared memory (q=shared: the consumers' wgmma read Q by descriptor) is a channel too, of
// one stage (TileConfig::loadsQWithTma, the launch ABI's q_map): the producer loads each tile's
// Q with TMA, the consumers wait on its full barrier where they waited for their copy, and
// release it once every wgmma that read it has completed, after the last op of the tile's body
// that holds one (the key loops). The producer fills a tile's Q after the tile's first K block
// (FlashAttention-3's order; a flag bit of Q's fill counter says the fill is owed, and a tile
// without key blocks fills it at its end; beside three consumer warpgroups or a second Q stage
// the producer keeps Q first, deferQueryFill): in a persistent kernel the next tile's first K
// block then loads as soon as its ring stage is free, during this tile's last blocks, and only
// Q waits for the release, loading while the consumers finish this tile (normalize, store O).
// With q_tma=false (the ablation's kernel) the consumers copy Q themselves, shared by their
// threads alone (the copy's `threads`).
//
// A varlen kernel (tile.varlen: a packed batch) reads Q, K and V as packed tensors: their
// copies' batch index is the sequence's first row `start` and their bound the sequence's length
// `len`. Rows past a sequence's end must read as zeros, as cp.async's bound makes them: they
// belong to the next sequence or to no sequence (anything, NaN included, and 0 · NaN in P·V is
// NaN; a query row past the end is not stored, but zeros keep its softmax finite). A tensor map
// bounds each of its dimensions, so the maps (LaunchAbi.h) address a packed row through two
// dimensions of the same stride, a of extent N (the longest sequence; Q's: M) and b, over a
// base N rows before the tensor's: row r of the sequence is a = r + N - len, b = start + len,
// at base + (a + b - N) rows = start + r. Its rows r < len have a < N; those past its end have
// a >= N and read as zeros. A Q tile wholly past its sequence's end (a row block of a shorter
// sequence than the longest) starts at a = M - 1 instead: a box wholly outside a map faulted
// (illegal address at the UTMALDG on a 67 MB Q, H100). Such a tile still loads (one row, never
// stored), waits and releases like any other: skipping all three measured within ±3% on the
// H200 (docs/perf.md, twenty-ninth session), not worth a second path through the fills.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"
#include "tilefuse/passes/gpu/NamedBarriers.h"
#include "tilefuse/passes/gpu/TensorMaps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/runtime/device/LaunchAbi.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUWARPSPECIALIZE
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

constexpr int64_t kProducerRegisters = TileConfig::kProducerRegisters;
/// The most a consumer thread takes (FA3's; leaves the SM's pool room for a producer).
constexpr int64_t kMaxConsumerRegisters = 240;
/// The least a persistent producer keeps (its tile loop's state; see buildPartitions).
constexpr int64_t kPersistentProducerRegisters = 32;
/// The least a producer keeps whose tile loop runs inside a loop over a packed batch's
/// sequences (tgpu-persistent's varlen tile list): the sequence loop's start, length and tile
/// count beside the tile loop's state; at 40 it spilled 32 bytes (ptxas, d128; SASS: stores
/// and loads after the producer's setmaxnreg), at 56 (what two consumer warpgroups at 224
/// leave) none, nor do the consumers at 224.
constexpr int64_t kNestedTileLoopProducerRegisters = 48;
/// The most a producer keeps: one thread issuing TMA needs no more.
constexpr int64_t kMaxProducerRegisters = 56;
constexpr int64_t kWarpgroupThreads = 128;
/// The bit of Q's fill counter, in the producer, that says the tile's Q fill is still owed
/// (cloneProducer): far above any count of fills, within a 32-bit index.
constexpr int64_t kQueryOwed = int64_t(1) << 30;

/// One pipelined buffer: the cp.async buffer it replaces and what stands for it now.
struct Channel {
  AllocOp buffer;
  BlockArgument view;
  Value ring, full, empty, descriptor;
  int64_t bytes = 0;  ///< transaction bytes of one fill (whole panels, as TMA counts them)
  int64_t stages = 0; ///< the ring's depth: `stages` for K and V, one for Q
  /// Q's: read by every Q·Kᵀ of the tile and released once after them, not after one wgmma.
  bool query = false;
};

/// Where fill number `counter` of a channel goes.
struct Slot {
  Value stage; ///< index
  Value phase; ///< i1
};

Slot slotOf(OpBuilder &b, Location loc, Value counter, int64_t stages) {
  Value s = arith::ConstantIndexOp::create(b, loc, stages);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value stage = arith::RemUIOp::create(b, loc, counter, s);
  Value round = arith::DivUIOp::create(b, loc, counter, s);
  Value odd = arith::AndIOp::create(b, loc, round, one);
  Value phase = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, odd, zero);
  return {stage, phase};
}

struct TGPUWarpSpecialize
    : public tilefuse::tgpu::impl::TGPUWarpSpecializeBase<TGPUWarpSpecialize> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    TileConfig options;
    options.stages = stages;
    FailureOr<TileConfig> config = tile::configForPass(kernel, options);
    if (failed(config))
      return signalPassFailure();
    // A pass option of its own for lit tests; in the pipeline the module's config decides.
    if (!config->warpSpecialize.value_or(force))
      return;
    depth = config->stages.value_or(stages);
    queryByTma = config->qTma.value_or(true);
    ctasPerSm = config->ctasPerSm.value_or(1);
    queryStages = config->overlapTiles.value_or(false) ? 2 : 1;
    if (depth < 2 || depth > 8) {
      kernel.emitError() << "tgpu-warp-specialize: stages must be 2 to 8, not " << depth;
      return signalPassFailure();
    }
    if (failed(run(kernel)))
      return signalPassFailure();
  }

  int64_t depth = 2, ctasPerSm = 1;
  /// Q's ring depth: one, two under overlap_tiles=true.
  int64_t queryStages = 1;
  /// A varlen kernel: Q, K and V are packed, their rows offset by the copies' batch index.
  bool packed = false;
  /// Q's copy becomes the producer's TMA load (TileConfig::loadsQWithTma): not with
  /// q_tma=false.
  bool queryByTma = true;
  SmallVector<Channel> channels;
  DenseMap<Operation *, unsigned> channelOf; // AsyncCopyOp -> channel
  /// The copies the consumers keep (Q with q=shared).
  SmallVector<AsyncCopyOp> consumerCopies;
  /// The fill counter before each copy, in the consumer (the original IR).
  DenseMap<Operation *, Value> counterAt;
  /// Loops and branches that hold copies: they carry the counters.
  DenseSet<Operation *> carriers;
  /// The carriers' own loop-carried integers that the producer needs (producerSlice): it
  /// carries them beside its counters.
  llvm::SetVector<BlockArgument> carriedArgs;
  /// Whether the producer fills Q after the tile's first K block (cloneProducer): not where it
  /// keeps only the persistent least of registers (three consumer warpgroups), where Q's
  /// coordinates, live through the key loop until the fill, spilled (ptxas, chunked_local at
  /// d64: 4 bytes), nor where Q has a second stage (overlapped tile boundaries), whose fill
  /// does not wait for this tile's release.
  bool deferQueryFill = false;
  /// Q's copy while its fill waits for the tile's first K fill (cloneProducer).
  AsyncCopyOp deferredQuery;

  LogicalResult run(func::FuncOp kernel) {
    if (kernel->hasAttr(tile::kPagedKVAttr))
      return kernel.emitError("warp_specialize: paged kernels gather their keys page by page; "
                              "their TMA loads are not implemented (use "
                              "warp_specialize=false)");
    packed = kernel->hasAttr(tile::kVarlenAttr);
    auto grids = llvm::to_vector(kernel.getBody().front().getOps<scf::ForallOp>());
    if (grids.size() != 1)
      return kernel.emitError("tgpu-warp-specialize: expects one program grid (scf.forall)");
    scf::ForallOp grid = grids.front();
    if (failed(collectChannels(kernel, grid)))
      return failure();
    if (channels.empty())
      return kernel.emitError("tgpu-warp-specialize: the kernel copies nothing into shared "
                              "memory; there is nothing for a producer to load");
    int64_t consumerThreads = 0;
    if (failed(checkConsumers(kernel, consumerThreads)))
      return failure();
    // The producer's warps never reach the consumers' own copies: the consumers share them
    // among themselves (cp.async's lowering would deal chunks to every thread of the CTA).
    for (AsyncCopyOp copy : consumerCopies)
      copy.setThreadsAttr(Builder(kernel).getI64IntegerAttr(consumerThreads));
    // A split-KV kernel's partial result is the consumers' (tile-split-kv): they alone arrive at
    // the row block's counter, and the last CTA's consumers merge. They meet on a named barrier
    // of their own, where the producer, which never arrives, is not waited for.
    kernel.walk([&](tile::SplitArriveOp arrive) {
      Builder attrs(arrive);
      arrive.setBarrierIdAttr(attrs.getI32IntegerAttr(kSplitArriveBarrier));
      arrive.setThreadsAttr(attrs.getI32IntegerAttr(int32_t(consumerThreads)));
    });
    createChannelValues(kernel);

    // The counters, in the consumer (the original IR), then the producer from it.
    Block &body = *grid.getBody();
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    Location loc = grid.getLoc();
    SmallVector<Value> counters;
    for (size_t i = 0; i < channels.size(); ++i)
      counters.push_back(arith::ConstantIndexOp::create(b, loc, 0));
    Operation *firstOfBody = counters.front().getDefiningOp();
    markCarriers(body);
    if (failed(threadCounters(body, counters)))
      return failure();

    // Slice and clone the producer before the consumer is rewritten (the copies are its
    // template).
    FailureOr<llvm::SetVector<Operation *>> needed = producerSlice(grid);
    if (failed(needed))
      return failure();
    return buildPartitions(grid, firstOfBody, *needed, consumerThreads);
  }

  //===--------------------------------------------------------------------===//
  // Channels
  //===--------------------------------------------------------------------===//

  LogicalResult collectChannels(func::FuncOp kernel, scf::ForallOp grid) {
    DenseMap<Operation *, unsigned> channelOfAlloc;
    WalkResult walk = kernel.walk([&](AsyncCopyOp copy) -> WalkResult {
      if (!grid->isProperAncestor(copy))
        return copy.emitOpError("is outside the program grid; tgpu-warp-specialize pipelines "
                                "the copies of the key loop");
      if (copy.getPageTable())
        return copy.emitOpError("reads a paged cache; its TMA load is not implemented");
      auto alloc = copy.getBuffer().getDefiningOp<AllocOp>();
      if (!alloc || !isa<BufferType>(alloc.getType()))
        return copy.emitOpError("fills a ring stage; tgpu-warp-specialize expects the copies of "
                                "tile-to-tgpu without tile-pipeline (one buffer per view)");
      BufferType buffer = copy.getBuffer().getType();
      if (buffer.getLayout().getSwizzle() != SharedSwizzle::Canonical128B)
        return copy.emitOpError("fills a buffer that is not canonical_128b: TMA writes wgmma's "
                                "128-byte swizzle (warp specialization needs mma=wgmma)");
      auto view = dyn_cast<BlockArgument>(copy.getView());
      bool query =
          view && view.getOwner() == &kernel.getBody().front() && view.getArgNumber() == 0;
      // Q in shared memory (q=shared) with q_tma=false: the consumers copy it themselves, once
      // per tile; its copy, group and wait stay in the consumer partition, and
      // tgpu-insert-barriers orders it among the consumers.
      // (TileConfig::loadsQWithTma says the same for the launch metadata.)
      if (query && !queryByTma) {
        consumerCopies.push_back(copy);
        return WalkResult::advance();
      }
      if (!view || view.getOwner() != &kernel.getBody().front() || view.getArgNumber() > 2)
        return copy.emitOpError("copies from a view that is not the kernel's Q, K or V "
                                "argument: only those have tensor maps in the launch ABI");
      // The tensor map's row extent bounds the rows (zeros past it, as cp.async's bound): N,
      // the length of K and of V alike (the launch ABI gives both one N), or Q's M. Packed, the
      // bound is the sequence's length, which the maps' two row dimensions apply (the file
      // comment).
      auto dim = copy.getBound().getDefiningOp<memref::DimOp>();
      std::optional<int64_t> dimIndex = dim ? dim.getConstantIndex() : std::nullopt;
      auto dimOf = dim ? dyn_cast<BlockArgument>(dim.getSource()) : BlockArgument();
      bool ownLength = dimOf && dimOf.getOwner() == view.getOwner() && dimIndex == 2 &&
                       (query ? dimOf.getArgNumber() == 0
                              : dimOf.getArgNumber() >= 1 && dimOf.getArgNumber() <= 2);
      if (!packed && !ownLength)
        return copy.emitOpError("bounds its rows by something other than the view's length: a "
                                "TMA load reads zeros past the tensor's own extent only");
      auto [it, inserted] = channelOfAlloc.try_emplace(alloc, channels.size());
      if (inserted) {
        Channel channel;
        channel.buffer = alloc;
        channel.view = view;
        // Q gets a second stage where the tile boundaries overlap (tgpu-overlap-tiles): the
        // next tile's first Q·Kᵀ issues before this tile's Q is released, so its Q must
        // already be in the other stage.
        channel.stages = query ? queryStages : depth;
        channel.query = query;
        channels.push_back(channel);
      } else if (channels[it->second].view != view) {
        return copy.emitOpError("fills a buffer that another copy fills from another view");
      }
      channelOf[copy] = it->second;
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// The consumers are the kernel's warps: every block is laid out for them (wgmma
  /// accumulators, whole warpgroups), and nothing waits for the whole CTA.
  LogicalResult checkConsumers(func::FuncOp kernel, int64_t &consumerThreads) {
    int64_t warpgroups = 0;
    WalkResult walk = kernel.walk([&](Operation *op) -> WalkResult {
      if (isa<gpu::BarrierOp, NamedBarrierOp, WarpSpecializeOp>(op))
        return op->emitOpError("is already a barrier or partition; tgpu-warp-specialize runs "
                               "before tgpu-insert-barriers on a kernel without roles");
      if (auto mma = dyn_cast<MmaOp>(op))
        return mma.emitOpError("is an mma.sync; warp-specialized consumers issue wgmma "
                               "(mma=wgmma)");
      for (Type t : op->getResultTypes())
        if (auto tensor = dyn_cast<RankedTensorType>(t))
          if (auto acc = dyn_cast_or_null<WgmmaAccumulatorLayoutAttr>(tensor.getEncoding()))
            warpgroups = std::max(warpgroups, acc.getWarpgroups());
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (!warpgroups)
      return kernel.emitError("tgpu-warp-specialize: no wgmma accumulator in the kernel; the "
                              "consumers are warpgroups (mma=wgmma)");
    consumerThreads = warpgroups * kWarpgroupThreads;
    return success();
  }

  void createChannelValues(func::FuncOp kernel) {
    MLIRContext *ctx = kernel.getContext();
    OpBuilder b(ctx);
    b.setInsertionPointAfter(channels.back().buffer);
    for (Channel &c : channels) {
      auto buffer = cast<BufferType>(c.buffer.getType());
      Location loc = c.buffer.getLoc();
      c.ring = AllocOp::create(b, loc, RingType::get(ctx, c.stages, buffer), IntegerAttr());
      auto workgroup = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
      auto barriers = nvgpu::MBarrierGroupType::get(ctx, workgroup, c.stages);
      c.full = AllocOp::create(b, loc, barriers, IntegerAttr());
      c.empty = AllocOp::create(b, loc, barriers, IntegerAttr());
      int elementBytes = buffer.getSharedTile().elementBytes;
      c.descriptor = TensorMapOp::create(
          b, loc, panelMapType(ctx, buffer.getRows(), buffer.getElementType()), c.view);
      c.bytes = int64_t(launch_abi::tmaPanels(buffer.getCols(), elementBytes)) *
                buffer.getRows() * launch_abi::kTmaBoxBytes;
    }
  }

  //===--------------------------------------------------------------------===//
  // Fill counters
  //===--------------------------------------------------------------------===//

  bool holdsCopies(Operation *op) {
    bool found = false;
    op->walk([&](AsyncCopyOp copy) {
      if (channelOf.count(copy))
        found = true;
    });
    return found;
  }

  void markCarriers(Block &body) {
    body.walk([&](Operation *op) {
      if (op->getNumRegions() && !isa<AsyncCopyOp>(op) && holdsCopies(op))
        carriers.insert(op);
    });
  }

  /// Threads one counter per channel through `block`: the value before each copy is recorded in
  /// counterAt, the copy increments it, and loops and branches holding copies carry it.
  LogicalResult threadCounters(Block &block, SmallVector<Value> &counters) {
    IRRewriter rewriter(block.getParentOp()->getContext());
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (auto copy = dyn_cast<AsyncCopyOp>(op)) {
        auto it = channelOf.find(copy);
        if (it == channelOf.end())
          continue;
        counterAt[copy] = counters[it->second];
        rewriter.setInsertionPointAfter(copy);
        Value one = arith::ConstantIndexOp::create(rewriter, copy.getLoc(), 1);
        counters[it->second] =
            arith::AddIOp::create(rewriter, copy.getLoc(), counters[it->second], one);
        continue;
      }
      if (!carriers.contains(&op))
        continue;
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        SmallVector<Value> inits(counters);
        FailureOr<LoopLikeOpInterface> widened = loop.replaceWithAdditionalYields(
            rewriter, inits, /*replaceInitOperandUsesInLoop=*/false,
            [&](OpBuilder &, Location, ArrayRef<BlockArgument> added) {
              return SmallVector<Value>(added.begin(), added.end());
            });
        if (failed(widened))
          return loop.emitOpError("cannot carry the pipeline's fill counters");
        auto newLoop = cast<scf::ForOp>(widened->getOperation());
        carriers.erase(loop);
        carriers.insert(newLoop);
        unsigned first = newLoop.getNumRegionIterArgs() - counters.size();
        SmallVector<Value> inner;
        for (size_t i = 0; i < counters.size(); ++i)
          inner.push_back(newLoop.getRegionIterArgs()[first + i]);
        if (failed(threadCounters(*newLoop.getBody(), inner)))
          return failure();
        auto yield = cast<scf::YieldOp>(newLoop.getBody()->getTerminator());
        for (size_t i = 0; i < counters.size(); ++i) {
          yield.setOperand(first + i, inner[i]);
          counters[i] = newLoop.getResult(first + i);
        }
        continue;
      }
      if (auto branch = dyn_cast<scf::IfOp>(op)) {
        SmallVector<Type> types(branch.getResultTypes());
        types.append(counters.size(), rewriter.getIndexType());
        rewriter.setInsertionPoint(branch);
        auto replacement = scf::IfOp::create(rewriter, branch.getLoc(), types,
                                             branch.getCondition(), /*addThenBlock=*/false,
                                             /*addElseBlock=*/false);
        replacement->setDiscardableAttrs(branch->getDiscardableAttrDictionary());
        replacement.getThenRegion().takeBody(branch.getThenRegion());
        if (branch.getElseRegion().empty()) {
          Block *elseBlock = rewriter.createBlock(&replacement.getElseRegion());
          rewriter.setInsertionPointToEnd(elseBlock);
          scf::YieldOp::create(rewriter, branch.getLoc());
        } else {
          replacement.getElseRegion().takeBody(branch.getElseRegion());
        }
        for (Region *region : {&replacement.getThenRegion(), &replacement.getElseRegion()}) {
          SmallVector<Value> inner(counters);
          if (failed(threadCounters(region->front(), inner)))
            return failure();
          auto yield = cast<scf::YieldOp>(region->front().getTerminator());
          yield.getResultsMutable().append(inner);
        }
        unsigned results = branch.getNumResults();
        carriers.erase(branch);
        carriers.insert(replacement);
        rewriter.replaceOp(branch, replacement.getResults().take_front(results));
        for (size_t i = 0; i < counters.size(); ++i)
          counters[i] = replacement.getResult(results + i);
        continue;
      }
      return op.emitOpError("holds copies of the key loop; tgpu-warp-specialize carries its "
                            "fill counters through scf.for and scf.if only");
    }
    return success();
  }

  //===--------------------------------------------------------------------===//
  // The producer
  //===--------------------------------------------------------------------===//

  /// The ops of the grid's body the producer needs, besides the carriers and the copies: what
  /// computes the copies' indices and the carriers' bounds and conditions (whole, with their
  /// regions, when they hold no copies: the pruning's bound searches).
  FailureOr<llvm::SetVector<Operation *>> producerSlice(scf::ForallOp grid) {
    llvm::SetVector<Operation *> needed;
    SmallVector<Value> worklist;
    auto useOperandsOf = [&](Operation *op) {
      // Operands of the op and of everything nested in it that come from outside it.
      op->walk([&](Operation *inner) {
        for (Value v : inner->getOperands()) {
          Operation *def = v.getDefiningOp();
          Operation *owner = def ? def : v.getParentRegion()->getParentOp();
          if (owner != op && !op->isProperAncestor(owner))
            worklist.push_back(v);
        }
      });
    };
    for (auto &[copyOp, channel] : channelOf) {
      auto copy = cast<AsyncCopyOp>(copyOp);
      llvm::append_range(worklist, copy.getIndices());
      if (packed)
        worklist.push_back(copy.getBound()); // part of a packed fill's coordinates
    }
    for (Operation *carrier : carriers) {
      if (auto loop = dyn_cast<scf::ForOp>(carrier))
        worklist.append({loop.getLowerBound(), loop.getUpperBound(), loop.getStep()});
      else
        worklist.push_back(cast<scf::IfOp>(carrier).getCondition());
    }
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (!grid->isProperAncestor(v.getParentRegion()->getParentOp()) &&
          v.getParentRegion()->getParentOp() != grid)
        continue; // defined above the grid: the partitions use it as it is
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        Operation *owner = arg.getOwner()->getParentOp();
        if (owner == grid)
          continue; // a program index: used as it is
        if (auto loop = dyn_cast<scf::ForOp>(owner); loop && carriers.contains(loop)) {
          if (arg == loop.getInductionVar())
            continue;
          // A loop-carried integer steering a copy (a varlen tile list's count of the tiles
          // before a sequence, tgpu-persistent): the producer carries it too, from the same
          // init and what the body yields for it. The softmax state (tensors) it lacks.
          if (!arg.getType().isIntOrIndex())
            return loop.emitOpError("carries a value that a copy's index or a branch around "
                                    "it depends on; the producer cannot compute it");
          if (carriedArgs.insert(arg))
            worklist.append({loop.getTiedLoopInit(arg)->get(),
                             loop.getTiedLoopYieldedValue(arg)->get()});
          continue;
        }
        needed.insert(owner);
        useOperandsOf(owner);
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (carriers.contains(def))
        return def->emitOpError("computes a value that a copy's index depends on in a loop or "
                                "branch holding copies; the producer cannot compute it");
      if (needed.contains(def))
        continue;
      if (llvm::any_of(def->getResultTypes(),
                       [](Type t) { return isa<RankedTensorType, BufferType, RingType>(t); }))
        return def->emitOpError("computes a block that a copy's index depends on; the "
                                "producer computes indices only");
      needed.insert(def);
      useOperandsOf(def);
    }
    return needed;
  }

  /// Clones `block` into the producer: the needed ops, the carriers (as loops and branches
  /// carrying the producer's counters), and each copy as a TMA fill. Q's fill is deferred
  /// behind the tile's first K fill (deferQueryFill).
  void cloneProducer(Block &block, OpBuilder &b, IRMapping &map,
                     const llvm::SetVector<Operation *> &needed, SmallVector<Value> &counters) {
    bool defersHere = false;
    for (Operation &op : block) {
      if (auto copy = dyn_cast<AsyncCopyOp>(op); copy && channelOf.count(copy)) {
        unsigned c = channelOf.lookup(copy);
        if (channels[c].query && deferQueryFill) {
          // The next tile's first K block can load while this tile's consumers still hold Q:
          // FlashAttention-3's producer order (K, then the wait for Q's release, then Q). Q's
          // counter carries the owed fill as a flag bit (kQueryOwed) rather than a value of
          // its own, which would take the producer another register through the key loop.
          deferredQuery = copy;
          Value owedBit = arith::ConstantIndexOp::create(b, copy.getLoc(), kQueryOwed);
          counters[c] = arith::OrIOp::create(b, copy.getLoc(), counters[c], owedBit);
          defersHere = true;
          continue;
        }
        emitFill(b, copy, map, channels[c], counters[c]);
        bool keys = channels[c].view.getArgNumber() == 1; // (Q, K, V: the kernel's arguments)
        if (deferredQuery && keys)
          emitOwedQueryFill(b, map, counters);
        continue;
      }
      if (carriers.contains(&op)) {
        if (auto loop = dyn_cast<scf::ForOp>(op)) {
          // The loop's own carried integers the producer needs first, then the counters.
          SmallVector<BlockArgument> kept;
          SmallVector<Value> inits;
          for (BlockArgument arg : loop.getRegionIterArgs())
            if (carriedArgs.contains(arg)) {
              kept.push_back(arg);
              inits.push_back(map.lookupOrDefault(loop.getTiedLoopInit(arg)->get()));
            }
          inits.append(counters);
          auto cloned = scf::ForOp::create(
              b, loop.getLoc(), map.lookupOrDefault(loop.getLowerBound()),
              map.lookupOrDefault(loop.getUpperBound()), map.lookupOrDefault(loop.getStep()),
              inits, /*bodyBuilder=*/nullptr, loop.getUnsignedCmp());
          map.map(loop.getInductionVar(), cloned.getInductionVar());
          for (auto [i, arg] : llvm::enumerate(kept))
            map.map(arg, cloned.getRegionIterArgs()[i]);
          OpBuilder inner = OpBuilder::atBlockBegin(cloned.getBody());
          SmallVector<Value> carried(cloned.getRegionIterArgs().drop_front(kept.size()));
          cloneProducer(*loop.getBody(), inner, map, needed, carried);
          SmallVector<Value> yielded;
          for (BlockArgument arg : kept)
            yielded.push_back(map.lookupOrDefault(loop.getTiedLoopYieldedValue(arg)->get()));
          yielded.append(carried);
          scf::YieldOp::create(inner, loop.getLoc(), yielded);
          for (auto [i, arg] : llvm::enumerate(kept))
            map.map(loop.getTiedLoopResult(arg), cloned.getResult(i));
          counters.assign(cloned.getResults().begin() + kept.size(), cloned.getResults().end());
        } else {
          auto branch = cast<scf::IfOp>(op);
          SmallVector<Type> types(counters.size(), b.getIndexType());
          auto cloned = scf::IfOp::create(b, branch.getLoc(), types,
                                          map.lookupOrDefault(branch.getCondition()),
                                          /*withElseRegion=*/true);
          for (auto [from, to] : {std::pair{&branch.getThenRegion(), &cloned.getThenRegion()},
                                  std::pair{&branch.getElseRegion(), &cloned.getElseRegion()}}) {
            // scf.if's builder may leave a region without its block when results are given.
            if (to->empty())
              to->push_back(new Block());
            OpBuilder inner = OpBuilder::atBlockEnd(&to->front());
            SmallVector<Value> carried(counters);
            cloneProducer(from->front(), inner, map, needed, carried);
            scf::YieldOp::create(inner, branch.getLoc(), carried);
          }
          counters.assign(cloned.getResults().begin(), cloned.getResults().end());
        }
        continue;
      }
      if (needed.contains(&op))
        b.clone(op, map);
    }
    // A tile without key blocks still owes its consumers Q (they wait for it before the loops).
    if (defersHere) {
      emitOwedQueryFill(b, map, counters);
      deferredQuery = nullptr;
    }
  }

  /// Fills Q's stage if its counter's flag bit says the tile's fill is still owed; the fill
  /// counts from the counter without the bit and leaves it cleared.
  void emitOwedQueryFill(OpBuilder &b, IRMapping &map, SmallVector<Value> &counters) {
    Location loc = deferredQuery.getLoc();
    unsigned q = channelOf.lookup(deferredQuery);
    Value owedBit = arith::ConstantIndexOp::create(b, loc, kQueryOwed);
    Value flag = arith::AndIOp::create(b, loc, counters[q], owedBit);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value owed = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, flag, zero);
    auto branch = scf::IfOp::create(b, loc, TypeRange{b.getIndexType()}, owed,
                                    /*withElseRegion=*/true);
    {
      OpBuilder then = OpBuilder::atBlockBegin(branch.thenBlock());
      Value counter = arith::XOrIOp::create(then, loc, counters[q], owedBit);
      emitFill(then, deferredQuery, map, channels[q], counter);
      scf::YieldOp::create(then, loc, counter);
      OpBuilder otherwise = OpBuilder::atBlockBegin(branch.elseBlock());
      scf::YieldOp::create(otherwise, loc, counters[q]);
    }
    counters[q] = branch.getResult(0);
  }

  /// Waits for the stage to be empty, arms its full barrier with the tile's bytes and loads it.
  void emitFill(OpBuilder &b, AsyncCopyOp copy, IRMapping &map, const Channel &c,
                Value &counter) {
    Location loc = copy.getLoc();
    Slot slot = slotOf(b, loc, counter, c.stages);
    // The empty barrier's phase before the first consumer release is the one "before" phase 0:
    // waiting on the opposite parity passes at once for the first round of stages.
    Value yes = arith::ConstantIntOp::create(b, loc, 1, 1);
    Value emptyPhase = arith::XOrIOp::create(b, loc, slot.phase, yes);
    Value ticks = arith::ConstantIndexOp::create(b, loc, 0);
    nvgpu::MBarrierTryWaitParityOp::create(b, loc, c.empty, emptyPhase, ticks, slot.stage);
    Value bytes = arith::ConstantIndexOp::create(b, loc, c.bytes);
    nvgpu::MBarrierArriveExpectTxOp::create(b, loc, c.full, bytes, slot.stage, Value());
    Value buffer = StageOp::create(b, loc, c.ring, slot.stage);
    // TMA counts coordinates innermost first: (column, row, head, batch); packed, (column,
    // row + N - len, head, start + len) (the file comment).
    SmallVector<Value> indices;
    for (Value index : copy.getIndices())
      indices.push_back(map.lookupOrDefault(index));
    if (packed) {
      Value length = map.lookupOrDefault(copy.getBound());
      Value longest = memref::DimOp::create(b, loc, c.view, 2);
      Value shifted = arith::AddIOp::create(b, loc, indices[2], longest);
      indices[2] = arith::SubIOp::create(b, loc, shifted, length);
      indices[0] = arith::AddIOp::create(b, loc, indices[0], length);
      // A query tile past its sequence's end (a row block of a shorter sequence) would be a box
      // wholly outside the map, which faulted on large tensors (H100, 67 MB of Q); its rows are
      // never stored, so it starts at the map's last row instead and reads that row.
      if (c.query) {
        Value one = arith::ConstantIndexOp::create(b, loc, 1);
        Value last = arith::SubIOp::create(b, loc, longest, one);
        indices[2] = arith::MinUIOp::create(b, loc, indices[2], last);
      }
    }
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    SmallVector<Value> coordinates = {zero};
    coordinates.append(indices.rbegin(), indices.rend());
    TmaLoadOp::create(b, loc, c.descriptor, coordinates, c.full, slot.stage, buffer);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    counter = arith::AddIOp::create(b, loc, counter, one);
  }

  //===--------------------------------------------------------------------===//
  // The partitions
  //===--------------------------------------------------------------------===//

  LogicalResult buildPartitions(scf::ForallOp grid, Operation *firstOfBody,
                                const llvm::SetVector<Operation *> &needed,
                                int64_t consumerThreads) {
    Location loc = grid.getLoc();
    Block &body = *grid.getBody();
    OpBuilder b = OpBuilder::atBlockBegin(&body);

    // The barriers, by one thread, before either role uses them: full takes the producer's one
    // arrival (plus the TMA bytes), empty one arrival per consumer thread.
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
    auto init = scf::IfOp::create(b, loc, isFirst, /*withElseRegion=*/false);
    {
      OpBuilder inner = OpBuilder::atBlockBegin(init.thenBlock());
      Value one = arith::ConstantIndexOp::create(inner, loc, 1);
      Value consumers = arith::ConstantIndexOp::create(inner, loc, consumerThreads);
      for (Channel &c : channels)
        for (int64_t s = 0; s < c.stages; ++s) {
          Value stage = arith::ConstantIndexOp::create(inner, loc, s);
          nvgpu::MBarrierInitOp::create(inner, loc, c.full, one, stage, Value());
          nvgpu::MBarrierInitOp::create(inner, loc, c.empty, consumers, stage, Value());
        }
    }
    gpu::BarrierOp::create(b, loc);

    // The roles: the consumers first (their warps keep the layouts' numbering).
    SmallVector<int32_t> warps = {int32_t(consumerThreads / 32),
                                  int32_t(kWarpgroupThreads / 32)};
    int64_t threads = consumerThreads + kWarpgroupThreads;
    int64_t share = WarpSpecializeOp::registersAtLaunch(threads, ctasPerSm);
    int64_t pool = share * threads;
    // A persistent producer also carries the tile loop's state (the tile index and count, the
    // tile's coordinates) through its key loop: at 24 registers it spilled 4-24 bytes there
    // (ptxas, every persistent kernel), at 32 or more none (ptxas: 32 beside three consumer
    // warpgroups at 160, 40 beside two at 232).
    bool tileLoop = false, nestedTileLoop = false;
    grid.walk([&](scf::ForOp loop) {
      if (!loop->hasAttr(kTileLoopAttr))
        return;
      tileLoop = true;
      nestedTileLoop |= bool(loop->getParentOfType<scf::ForOp>());
    });
    // Beside three consumer warpgroups (d64) the nested loop's producer keeps the persistent
    // least: its 8 more registers would cost each consumer thread 8 (160 -> 152: 128-244 bytes
    // of spills in the consumers' key loop, ptxas).
    bool roomForNestedLoop = consumerThreads <= 2 * kWarpgroupThreads;
    int64_t producerLeast = nestedTileLoop && roomForNestedLoop ? kNestedTileLoopProducerRegisters
                            : tileLoop                          ? kPersistentProducerRegisters
                                                                : kProducerRegisters;
    int64_t consumerRegisters =
        std::min<int64_t>(kMaxConsumerRegisters,
                          (pool - kWarpgroupThreads * producerLeast) / consumerThreads / 8 * 8);
    consumerRegisters = std::max(consumerRegisters, share);
    // The producer keeps what the consumers leave of the pool: 24 beside two consumer
    // warpgroups at 240, 32 beside three at 160 (FA3's splits), never more than it can use.
    int64_t producerRegisters = std::clamp<int64_t>(
        (pool - consumerRegisters * consumerThreads) / kWarpgroupThreads / 8 * 8,
        std::min(kProducerRegisters, share), kMaxProducerRegisters);
    if (consumerRegisters * consumerThreads + producerRegisters * kWarpgroupThreads > pool) {
      consumerRegisters = share; // no room to move: keep the launch share
      producerRegisters = std::min(kProducerRegisters, share);
    }
    deferQueryFill = producerRegisters > kPersistentProducerRegisters && queryStages == 1;
    SmallVector<int32_t> registers = {int32_t(consumerRegisters), int32_t(producerRegisters)};
    auto ws = WarpSpecializeOp::create(b, loc, b.getDenseI32ArrayAttr(warps),
                                       b.getDenseI32ArrayAttr(registers), /*partitions=*/2);
    Block *consumer = b.createBlock(&ws.getPartitions()[0]);
    Block *producer = b.createBlock(&ws.getPartitions()[1]);

    // The producer: one thread (the first of its warpgroup) runs the skeleton.
    {
      OpBuilder pb = OpBuilder::atBlockBegin(producer);
      Value ptid = gpu::ThreadIdOp::create(pb, loc, gpu::Dimension::x);
      Value leader = arith::ConstantIndexOp::create(pb, loc, consumerThreads);
      Value isLeader = arith::CmpIOp::create(pb, loc, arith::CmpIPredicate::eq, ptid, leader);
      auto issue = scf::IfOp::create(pb, loc, isLeader, /*withElseRegion=*/false);
      OpBuilder inner = OpBuilder::atBlockBegin(issue.thenBlock());
      IRMapping map;
      SmallVector<Value> counters;
      for (size_t i = 0; i < channels.size(); ++i)
        counters.push_back(arith::ConstantIndexOp::create(inner, loc, 0));
      cloneProducer(body, inner, map, needed, counters);
    }

    // The consumer: the body as it was (from the counters' zeros on, which follow the
    // partitions: the init, the barrier and the partitions went in at the block's begin).
    assert(ws->isBeforeInBlock(firstOfBody) && "the partitions precede the old body");
    Operation *terminator = body.getTerminator();
    consumer->getOperations().splice(consumer->end(), body.getOperations(),
                                     std::next(ws->getIterator()), terminator->getIterator());
    return rewriteConsumer(consumer);
  }

  /// In the consumer: each copy and its group go; its wait becomes a wait on the stage's full
  /// barrier; its reader reads the stage; after the reader's wgmma completes, the stage is
  /// released.
  LogicalResult rewriteConsumer(Block *consumer) {
    IRRewriter rewriter(consumer->getParentOp()->getContext());
    for (auto &[copyOp, counter] : counterAt) {
      auto copy = cast<AsyncCopyOp>(copyOp);
      Channel &c = channels[channelOf.lookup(copy)];
      Location loc = copy.getLoc();
      if (!copy.getToken().hasOneUse())
        return copy.emitOpError("has a token used other than by one copy group");
      auto group = dyn_cast<nvgpu::DeviceAsyncCreateGroupOp>(*copy.getToken().getUsers().begin());
      if (!group || group.getInputTokens().size() != 1)
        return copy.emitOpError("is not alone in its copy group");
      rewriter.setInsertionPoint(copy);
      Slot slot = slotOf(rewriter, loc, counter, c.stages);
      Value stageBuffer = StageOp::create(rewriter, loc, c.ring, slot.stage);
      // Q's group may be waited for in every block that reads Q (tile-to-tgpu waits for it
      // beside each key block's copy): each wait becomes a wait on Q's full barrier. It passes
      // at once after the first, as the phase cannot move on before the tile's release.
      if (c.query) {
        for (Operation *user : llvm::make_early_inc_range(group.getAsyncToken().getUsers())) {
          auto wait = dyn_cast<nvgpu::DeviceAsyncWaitOp>(user);
          if (!wait)
            return user->emitOpError("uses Q's copy group other than by waiting for it");
          rewriter.setInsertionPoint(wait);
          Value ticks = arith::ConstantIndexOp::create(rewriter, loc, 0);
          nvgpu::MBarrierTryWaitParityOp::create(rewriter, loc, c.full, slot.phase, ticks,
                                                 slot.stage);
          rewriter.eraseOp(wait);
        }
        if (failed(readQueryStage(copy, c, stageBuffer, slot, rewriter)))
          return failure();
        rewriter.eraseOp(group);
        rewriter.eraseOp(copy);
        continue;
      }
      if (!group.getAsyncToken().hasOneUse())
        return copy.emitOpError("is not alone in a copy group waited for once");
      auto wait = dyn_cast<nvgpu::DeviceAsyncWaitOp>(*group.getAsyncToken().getUsers().begin());
      if (!wait || wait->getBlock() != copy->getBlock())
        return copy.emitOpError("is waited for outside its block (a prefetch across "
                                "iterations: run without tile-pipeline)");
      rewriter.setInsertionPoint(wait);
      Value ticks = arith::ConstantIndexOp::create(rewriter, loc, 0);
      nvgpu::MBarrierTryWaitParityOp::create(rewriter, loc, c.full, slot.phase, ticks,
                                             slot.stage);
      // The reader: the first op after the wait that reads the buffer.
      Operation *reader = nullptr;
      for (Operation *op = wait->getNextNode(); op && !reader; op = op->getNextNode())
        if (llvm::is_contained(op->getOperands(), c.buffer.getResult()))
          reader = op;
      auto product = dyn_cast_or_null<WgmmaOp>(reader);
      if (!product || !product.getResult().hasOneUse())
        return copy.emitOpError("is read by something other than a wgmma waited for once");
      auto completed = dyn_cast<WgmmaWaitOp>(*product.getResult().getUsers().begin());
      if (!completed || completed.getPending() != 0)
        return product.emitOpError("is not completed by a wgmma_wait pending 0; the stage "
                                   "would be released while the tensor cores read it");
      product.getRhsMutable().assign(stageBuffer);
      rewriter.setInsertionPointAfter(completed);
      nvgpu::MBarrierArriveOp::create(
          rewriter, loc, nvgpu::MBarrierTokenType::get(rewriter.getContext()), c.empty,
          slot.stage);
      rewriter.eraseOp(wait);
      rewriter.eraseOp(group);
      rewriter.eraseOp(copy);
    }
    for (Channel &c : channels) {
      if (!c.buffer.getResult().use_empty())
        return (*c.buffer.getResult().getUsers().begin())
            ->emitOpError("reads a pipelined buffer outside the copies' waits");
      c.buffer.erase();
    }
    return success();
  }

  /// Q's stage (one, loaded once per tile): every wgmma of the tile's body that read the Q
  /// buffer reads the stage, each completed by a wgmma_wait pending 0 in its own block; after
  /// the last op of the copy's block that holds one of those waits (the key loops), every
  /// consumer thread releases the stage for the next tile's Q.
  LogicalResult readQueryStage(AsyncCopyOp copy, Channel &c, Value stageBuffer, Slot slot,
                               IRRewriter &rewriter) {
    Block *tileBody = copy->getBlock();
    Operation *last = nullptr;
    for (OpOperand &use : llvm::make_early_inc_range(c.buffer.getResult().getUses())) {
      Operation *reader = use.getOwner();
      if (reader == copy.getOperation())
        continue;
      auto product = dyn_cast<WgmmaOp>(reader);
      if (!product || !tileBody->getParentOp()->isProperAncestor(product))
        return reader->emitOpError("reads Q's shared buffer; tgpu-warp-specialize expects only "
                                   "the tile's wgmma to read it");
      auto completed = product.getResult().hasOneUse()
                           ? dyn_cast<WgmmaWaitOp>(*product.getResult().getUsers().begin())
                           : WgmmaWaitOp();
      if (!completed || completed.getPending() != 0 ||
          completed->getBlock() != product->getBlock())
        return product.emitOpError("reads Q and is not completed by a wgmma_wait pending 0 in "
                                   "its block; Q's stage would be released while the tensor "
                                   "cores read it");
      use.set(stageBuffer);
      Operation *holder = tileBody->findAncestorOpInBlock(*completed);
      if (!holder || holder->isBeforeInBlock(copy))
        return completed.emitOpError("completes a read of Q outside the tile that loaded it");
      if (!last || last->isBeforeInBlock(holder))
        last = holder;
    }
    if (!last)
      return copy.emitOpError("fills Q's buffer, which no wgmma reads");
    // (The wait's tick count goes before the copy, so the release after the key loop is two
    // ops, which tgpu-overlap-tiles keeps together in the tile.)
    rewriter.setInsertionPoint(copy);
    Value ticks = arith::ConstantIndexOp::create(rewriter, copy.getLoc(), 0);
    rewriter.setInsertionPointAfter(last);
    // Wait for Q's fill before releasing it, also where the key loop ran no block and so
    // waited for none (a sliding window's rows past the band's end, M > N + window): a release
    // without the wait let the producer arm the full barrier for the next tile's Q while this
    // fill's bytes were still in flight, two arrivals on one phase (undefined; sliding_window
    // d256 persistent failed its launch at M = 1000, N = 17). Where a block waited, it passes
    // at once: the phase cannot move on before this release.
    nvgpu::MBarrierTryWaitParityOp::create(rewriter, copy.getLoc(), c.full, slot.phase, ticks,
                                           slot.stage);
    nvgpu::MBarrierArriveOp::create(rewriter, copy.getLoc(),
                                    nvgpu::MBarrierTokenType::get(rewriter.getContext()),
                                    c.empty, slot.stage);
    return success();
  }
};

} // namespace
