//===- AllocateSharedMemory.cpp - offsets of shared buffers, CTA size ----===//
//
// Gives every tgpu.alloc of a kernel its byte offset in the dynamic shared memory, reusing
// bytes between buffers whose lifetimes do not overlap, and records the kernel's shared bytes
// and thread count on the module, so that no launcher recomputes them. Lifetimes come from
// MLIR's Liveness analysis, turned into intervals of a pre-order numbering of the kernel's ops
// (as Triton's Allocation analysis does); placement is first fit, largest buffer first.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Analysis/Liveness.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUDialect.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUALLOCATESHAREDMEMORY
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse::tgpu;

namespace {

/// A closed interval of op numbers in which a buffer is live.
struct Lifetime {
  int64_t first = 0, last = 0;
  bool overlaps(const Lifetime &o) const { return first <= o.last && o.first <= last; }
};

struct Buffer {
  AllocOp alloc;
  int64_t order; // program order, for a deterministic placement of equal sizes
  int64_t size, alignment;
  Lifetime lifetime;
  int64_t offset = -1;
  int64_t end() const { return offset + size; }
};

/// Numbers ops in pre-order; `last[op]` is the largest number inside op's regions, so that
/// [first[op], last[op]] covers the op and everything it holds.
struct OpNumbering {
  DenseMap<Operation *, int64_t> first, last;
  explicit OpNumbering(Operation *root) {
    int64_t next = 0;
    root->walk<WalkOrder::PreOrder>([&](Operation *op) { first[op] = next++; });
    root->walk<WalkOrder::PostOrder>([&](Operation *op) {
      int64_t end = first[op];
      for (Region &region : op->getRegions())
        for (Operation &inner : region.getOps())
          end = std::max(end, last[&inner]);
      last[op] = end;
    });
  }
  Lifetime span(Operation *op) const { return {first.at(op), last.at(op)}; }
};

bool isSharedMemory(Type type) { return isa<BufferType, RingType>(type); }

/// The alloc's result and every value selecting from it (tgpu.stage), or a located error at a
/// use through which the buffer escapes: its bytes would then be used where its lifetime
/// cannot be seen.
FailureOr<SmallVector<Value>> aliasesOf(AllocOp alloc) {
  SmallVector<Value> aliases{alloc.getResult()};
  for (size_t i = 0; i < aliases.size(); ++i) {
    for (OpOperand &use : aliases[i].getUses()) {
      Operation *user = use.getOwner();
      if (auto stage = dyn_cast<StageOp>(user)) {
        aliases.push_back(stage.getResult());
        continue;
      }
      // Loops and branches carry a stage to the next iteration or out of the branch (the key
      // ring of tile-to-tgpu): the carried values and results are the same bytes.
      auto addOnce = [&](Value v) {
        if (!llvm::is_contained(aliases, v))
          aliases.push_back(v);
      };
      if (auto loop = dyn_cast<scf::ForOp>(user)) {
        if (OpResult result = loop.getTiedLoopResult(&use)) {
          addOnce(loop.getTiedLoopRegionIterArg(&use));
          addOnce(result);
          continue;
        }
      }
      if (auto yield = dyn_cast<scf::YieldOp>(user)) {
        Operation *parent = yield->getParentOp();
        unsigned i = use.getOperandNumber();
        if (auto loop = dyn_cast<scf::ForOp>(parent)) {
          addOnce(loop.getRegionIterArgs()[i]);
          addOnce(loop.getResult(i));
          continue;
        }
        if (auto branch = dyn_cast<scf::IfOp>(parent)) {
          addOnce(branch.getResult(i));
          continue;
        }
      }
      if (user->hasTrait<OpTrait::IsTerminator>() ||
          isa<RegionBranchOpInterface, CallOpInterface>(user) ||
          llvm::any_of(user->getResultTypes(), isSharedMemory))
        return user->emitOpError()
               << "takes shared buffer #" << use.getOperandNumber()
               << " beyond what tgpu-allocate-shared-memory follows (tgpu.stage, scf.for and scf.if "
                  "carrying it, and ops that read or write the buffer in place): its lifetime would be unknown";
    }
  }
  return aliases;
}

/// The kernel's threads: from its warp_specialize partitions, else from its register layouts,
/// which must agree. A located error when they disagree or nothing says.
FailureOr<int64_t> threadsOf(FunctionOpInterface kernel) {
  std::optional<int64_t> threads;
  Location firstAt = kernel.getLoc();
  WalkResult partitions = kernel->walk([&](WarpSpecializeOp ws) {
    int64_t warps = 0;
    for (int32_t w : ws.getPartitionWarps())
      warps += w;
    if (threads && *threads != 32 * warps) {
      ws.emitOpError() << "partitions " << 32 * warps << " threads, but another "
                       << "tgpu.warp_specialize of the kernel partitions " << *threads;
      return WalkResult::interrupt();
    }
    threads = 32 * warps;
    return WalkResult::advance();
  });
  if (partitions.wasInterrupted())
    return failure();
  if (threads)
    return *threads;

  auto check = [&](Value value) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(value.getType());
    auto layout = tensor ? dyn_cast_or_null<RegisterLayoutInterface>(tensor.getEncoding())
                         : RegisterLayoutInterface();
    if (!layout)
      return success();
    int64_t here = layout.getRegisterLayout(tensor.getShape()).getThreads();
    if (!threads) {
      threads = here;
      firstAt = value.getLoc();
      return success();
    }
    if (here == *threads)
      return success();
    InFlightDiagnostic diag = emitError(value.getLoc())
                              << "a block laid out for " << here << " threads (" << tensor
                              << ") in a kernel whose other blocks use " << *threads;
    diag.attachNote(firstAt) << "the first block laid out for " << *threads << " threads";
    return failure();
  };
  WalkResult layouts = kernel->walk([&](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (failed(check(arg)))
            return WalkResult::interrupt();
    for (Value result : op->getResults())
      if (failed(check(result)))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (layouts.wasInterrupted())
    return failure();
  if (!threads)
    return kernel.emitOpError()
           << "has no register layout and no tgpu.warp_specialize: its thread count is "
              "unknown (run tgpu-assign-layouts first)";
  return *threads;
}

/// First fit, largest first: each buffer goes to the lowest aligned offset that no placed
/// buffer with an overlapping lifetime occupies. Returns the bytes used.
int64_t place(MutableArrayRef<Buffer> buffers) {
  SmallVector<Buffer *> bySize;
  for (Buffer &b : buffers)
    bySize.push_back(&b);
  llvm::stable_sort(bySize, [](const Buffer *x, const Buffer *y) {
    return x->size != y->size ? x->size > y->size : x->order < y->order;
  });
  int64_t total = 0;
  SmallVector<Buffer *> placed;
  for (Buffer *b : bySize) {
    SmallVector<Buffer *> conflicts;
    for (Buffer *p : placed)
      if (p->lifetime.overlaps(b->lifetime))
        conflicts.push_back(p);
    // The lowest free offset is 0 or just after some conflicting buffer.
    SmallVector<int64_t> candidates{0};
    for (Buffer *p : conflicts)
      candidates.push_back(llvm::alignTo(p->end(), b->alignment));
    llvm::sort(candidates);
    for (int64_t offset : candidates) {
      bool fits = llvm::none_of(
          conflicts, [&](Buffer *p) { return offset < p->end() && p->offset < offset + b->size; });
      if (fits) {
        b->offset = offset;
        break;
      }
    }
    placed.push_back(b);
    total = std::max(total, b->end());
  }
  return total;
}

struct AllocateSharedMemory
    : public tilefuse::tgpu::impl::TGPUAllocateSharedMemoryBase<AllocateSharedMemory> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    auto i64 = IntegerType::get(ctx, 64);
    SmallVector<NamedAttribute> sharedBytes, threads;
    bool failed = false;
    for (auto kernel : module.getOps<FunctionOpInterface>()) {
      if (kernel.isExternal())
        continue;
      FailureOr<int64_t> total = allocate(kernel);
      FailureOr<int64_t> ctaThreads = threadsOf(kernel);
      if (mlir::failed(total) || mlir::failed(ctaThreads)) {
        failed = true;
        continue;
      }
      StringAttr name = kernel.getNameAttr();
      sharedBytes.emplace_back(name, IntegerAttr::get(i64, *total));
      threads.emplace_back(name, IntegerAttr::get(i64, *ctaThreads));
    }
    if (failed)
      return signalPassFailure();
    module->setAttr(kSharedBytesAttr, DictionaryAttr::get(ctx, sharedBytes));
    module->setAttr(kThreadsAttr, DictionaryAttr::get(ctx, threads));
  }

  /// Sets the offset of every alloc of `kernel`; returns its shared bytes.
  FailureOr<int64_t> allocate(FunctionOpInterface kernel) {
    OpNumbering numbering(kernel);
    Liveness liveness(kernel);
    SmallVector<Buffer> buffers;
    WalkResult walk = kernel->walk([&](AllocOp alloc) {
      FailureOr<SmallVector<Value>> aliases = aliasesOf(alloc);
      if (failed(aliases))
        return WalkResult::interrupt();
      Lifetime lifetime = numbering.span(alloc);
      auto cover = [&](Lifetime span) {
        lifetime.first = std::min(lifetime.first, span.first);
        lifetime.last = std::max(lifetime.last, span.last);
      };
      // An op holding a use in its regions keeps the buffer live over all of them (a loop
      // reads it again on the next iteration).
      for (Value alias : *aliases)
        for (Operation *live : liveness.resolveLiveness(alias))
          cover(numbering.span(live));
      // Partitions run concurrently: a partition's buffer lives over all of them.
      for (auto ws = alloc->getParentOfType<WarpSpecializeOp>(); ws;
           ws = ws->getParentOfType<WarpSpecializeOp>())
        cover(numbering.span(ws));
      buffers.push_back(
          {alloc, (int64_t)buffers.size(), alloc.getSizeInBytes(), alloc.getAlignment(), lifetime});
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    int64_t total = place(buffers);
    FailureOr<tilefuse::TileConfig> config =
        tilefuse::tile::configForPass(kernel, tilefuse::TileConfig());
    if (mlir::failed(config))
      return failure();
    // Q's second stage (tgpu-warp-specialize under overlap_tiles=true) is what the setting adds:
    // name it rather than the buffers.
    if (total > maxSharedBytes.getValue() && config->overlapTiles.value_or(false)) {
      kernel.emitOpError() << "overlap_tiles=true needs a second Q stage: "
                           << llvm::divideCeil(total, 1024) << " KiB of shared memory over the "
                           << maxSharedBytes.getValue() / 1024
                           << " KiB limit; use a smaller block_n";
      return failure();
    }
    if (total > maxSharedBytes.getValue()) {
      kernel.emitOpError() << "needs " << total << " bytes of shared memory for " << buffers.size()
                           << " buffers, over the chip's " << maxSharedBytes.getValue()
                           << " (max-shared-bytes)";
      return failure();
    }
    // A register budget of N CTAs an SM (TileConfig ctas_per_sm) is only met where N of them
    // also fit the SM's shared memory: the limit a CTA can opt into is the SM's less the 1 KiB
    // the driver reserves per CTA (sm_90: 233472 - 1024; sm_80: 167936 - 1024). Otherwise the
    // kernel would run one CTA an SM on the registers of N, spilling for nothing.
    int64_t ctas = config->ctasPerSm.value_or(1);
    constexpr int64_t kReservedPerCta = 1024;
    int64_t smBytes = maxSharedBytes.getValue() + kReservedPerCta;
    if (ctas > 1 && ctas * (total + kReservedPerCta) > smBytes) {
      kernel.emitOpError() << "ctas_per_sm=" << ctas << " asks for " << ctas
                           << " CTAs an SM, but " << ctas << " x (" << total << " + "
                           << kReservedPerCta << ") bytes of shared memory exceed the SM's "
                           << smBytes << ": ask for at most "
                           << std::max<int64_t>(1, smBytes / (total + kReservedPerCta))
                           << ", or for smaller tiles";
      return failure();
    }
    Builder b(kernel.getContext());
    for (Buffer &buffer : buffers)
      buffer.alloc.setOffsetAttr(b.getI64IntegerAttr(buffer.offset));
    return total;
  }
};

} // namespace
