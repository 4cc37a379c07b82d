//===- StoreOutputByTma.cpp - the O store through shared memory by TMA ----===//
//
// FlashAttention-3's epilogue on tgpu IR (TileConfig o_tma=true): the consumers' store of the
// normalized O, every thread writing its accumulator fragments to global memory (32 scattered
// 4-byte stores a thread at d128), becomes
//
//   (in a loop: the issuing thread waits until its last store has read the buffer)
//   named barrier of the warpgroup          the buffer's rows are free
//   tgpu.local_store %o, %obuf              each thread's fragments, rounded, swizzled
//   fence.proxy.async                       ... visible to the async proxy TMA reads through
//   named barrier of the warpgroup          every thread's rows written
//   thread 0 of the warpgroup:  tgpu.tma_store %obuf[64 w] into %o_map[0, row + 64 w, h, b]
//
// Each consumer warpgroup w stores its own 64 rows (a wgmma accumulator's) with a barrier of its
// own (kOutputStoreFirstBarrier + w), so warpgroups that take turns (tgpu-pingpong) never wait
// for each other here. The bulk store runs while the consumers go on to the next tile (a
// persistent kernel's tile loop) or exit; the issuing threads wait for their stores once, at
// the end of the consumers' partition. The map (the launch ABI's o_map: boxes of
// kOutputBoxRows rows) bounds the rows at M, so a last row block past M writes nothing there.
//
// Runs after tgpu-insert-barriers, so its synchronization is its own and that pass never sees
// the buffer; needs the warp-specialized kernel of a padded batch whose producer loads Q with
// TMA (TileConfig::storesOWithTma), which is what the verifier of the configuration allows.
//
//===----------------------------------------------------------------------===//
#include "tilefuse/passes/gpu/NamedBarriers.h"
#include "tilefuse/passes/gpu/TensorMaps.h"
#include "tilefuse/passes/gpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

namespace tilefuse::tgpu {
#define GEN_PASS_DEF_TGPUSTOREOUTPUTBYTMA
#include "tilefuse/passes/gpu/Passes.h.inc"
} // namespace tilefuse::tgpu

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tgpu;

namespace {

/// The kernel arguments the launch ABI maps (LaunchAbi.h kTensors): Q is argument 0, O 3.
constexpr unsigned kQueryArgument = 0, kOutputArgument = 3;

bool isArgument(Value v, unsigned number) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && isa<func::FuncOp>(arg.getOwner()->getParentOp()) && arg.getArgNumber() == number;
}

/// Whether `bound` is M: dimension 2 of Q or O, the extent the map clips rows at.
bool isRowExtent(Value bound) {
  auto dim = bound.getDefiningOp<memref::DimOp>();
  std::optional<int64_t> index = dim ? dim.getConstantIndex() : std::nullopt;
  return index == 2 &&
         (isArgument(dim.getSource(), kQueryArgument) || isArgument(dim.getSource(), kOutputArgument));
}

struct TGPUStoreOutputByTma
    : public tilefuse::tgpu::impl::TGPUStoreOutputByTmaBase<TGPUStoreOutputByTma> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (kernel.isExternal())
      return;
    FailureOr<TileConfig> config = tile::configForPass(kernel, TileConfig());
    if (failed(config))
      return signalPassFailure();
    if (!config->oTma.value_or(false) && !force)
      return;
    if (failed(rewrite(kernel)))
      signalPassFailure();
  }

  LogicalResult rewrite(func::FuncOp kernel) {
    // A split kernel stores partials and merges them (tile-split-kv); a packed batch's rows end
    // at each sequence's end, which no map bounds.
    if (kernel->hasAttr(tile::kSplitKVAttr) || kernel->hasAttr(tile::kVarlenAttr) ||
        kernel->hasAttr(tile::kPagedKVAttr))
      return kernel.emitError("o_tma: split-KV, paged and varlen kernels store O themselves "
                              "(o_tma=false)");
    SmallVector<WarpSpecializeOp> roles;
    kernel.walk([&](WarpSpecializeOp op) { roles.push_back(op); });
    if (roles.size() != 1)
      return kernel.emitError("o_tma: needs the warp-specialized kernel (warp_specialize=true), "
                              "one tgpu.warp_specialize whose first partition is the consumers");
    WarpSpecializeOp warpRoles = roles.front();
    bool loadsQueryByTma = false;
    kernel.walk([&](TensorMapOp map) {
      loadsQueryByTma |= isArgument(map.getView(), kQueryArgument);
    });
    if (!loadsQueryByTma)
      return kernel.emitError("o_tma: O's map follows Q's in the launch ABI; the producer must "
                              "load Q with TMA (q=shared, q_tma)");
    Region &consumers = warpRoles->getRegion(0);
    SmallVector<tile::BlockStoreOp> stores;
    consumers.walk([&](tile::BlockStoreOp store) {
      if (isArgument(store.getView(), kOutputArgument))
        stores.push_back(store);
    });
    if (stores.size() != 1)
      return warpRoles.emitError("o_tma: expects one store of O in the consumers' partition, "
                                 "found ")
             << stores.size();
    tile::BlockStoreOp store = stores.front();
    auto value = cast<RankedTensorType>(store.getValue().getType());
    auto layout = dyn_cast_or_null<WgmmaAccumulatorLayoutAttr>(value.getEncoding());
    if (!layout)
      return store.emitError("o_tma: stores a warpgroup MMA accumulator (#tgpu.wgmma_acc) "
                             "only, got ")
             << value;
    if (store.getHeadRows())
      return store.emitError("o_tma: packed GQA rows (head_rows) are not one box of O");
    if (store.getIndices().size() != 3 || !isRowExtent(store.getBound()))
      return store.emitError("o_tma: expects O stored at [batch, head, row] bounded by M (Q's "
                             "or O's dimension 2), the extent its map clips rows at");
    int64_t warpgroups = layout.getWarpgroups();
    int64_t boxRows = launch_abi::kOutputBoxRows;
    if (value.getDimSize(0) != warpgroups * boxRows)
      return store.emitError("o_tma: a warpgroup's rows of the tile must be one box of ")
             << boxRows << " rows";
    if (kOutputStoreFirstBarrier + warpgroups - 1 > 15)
      return store.emitError("o_tma: more consumer warpgroups than named barriers");

    MLIRContext *ctx = kernel.getContext();
    Value output = store.getView();
    auto view = cast<MemRefType>(output.getType());
    Type element = view.getElementType();
    int elementBytes = int(element.getIntOrFloatBitWidth() / 8);
    if (elementBytes != 2)
      return store.emitError("o_tma: stores a 16-bit O, not ") << element;

    // The buffer and the map, beside the kernel's other allocations and maps.
    OpBuilder b(warpRoles);
    Location loc = store.getLoc();
    auto bufferType = BufferType::get(ctx, value.getShape(), element,
                                      SharedLayoutAttr::get(ctx, SharedSwizzle::Canonical128B));
    Value buffer = AllocOp::create(b, loc, bufferType, IntegerAttr());
    Value map = TensorMapOp::create(b, loc, panelMapType(ctx, boxRows, element), output);

    // The warpgroup's barrier, its index and its issuing thread.
    b.setInsertionPoint(store);
    auto warpgroupBarrier = [&](OpBuilder &b) {
      NamedBarrierOp::create(b, loc, BarrierKindAttr::get(ctx, BarrierKind::Sync),
                             b.getI32IntegerAttr(kOutputStoreFirstBarrier),
                             b.getI32IntegerAttr(128),
                             WarpgroupBarrierAttr::get(ctx, WarpgroupBarrier::Own),
                             b.getI32IntegerAttr(int32_t(warpgroups)), b.getI32IntegerAttr(0));
    };
    auto issuingThread = [&](OpBuilder &b) {
      Value thread = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
      Value lane = arith::RemUIOp::create(b, loc, thread,
                                          arith::ConstantIndexOp::create(b, loc, 128));
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                   arith::ConstantIndexOp::create(b, loc, 0));
    };
    auto waitForStores = [&](OpBuilder &b, bool readsOnly) {
      auto issuer = scf::IfOp::create(b, loc, issuingThread(b), /*withElseRegion=*/false);
      OpBuilder inside = issuer.getThenBodyBuilder();
      NVVM::CpAsyncBulkWaitGroupOp::create(inside, loc, inside.getI32IntegerAttr(0),
                                           readsOnly ? inside.getUnitAttr() : UnitAttr());
    };

    // A store inside a loop (a persistent kernel's tile loop) may find its last one still
    // reading the buffer.
    if (store->getParentOfType<LoopLikeOpInterface>() &&
        warpRoles->isProperAncestor(store->getParentOfType<LoopLikeOpInterface>())) {
      waitForStores(b, /*readsOnly=*/true);
      warpgroupBarrier(b);
    }
    LocalStoreOp::create(b, loc, store.getValue(), buffer);
    NVVM::FenceProxyOp::create(b, loc, NVVM::ProxyKind::async_shared,
                               NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    warpgroupBarrier(b);
    auto issuer = scf::IfOp::create(b, loc, issuingThread(b), /*withElseRegion=*/false);
    {
      OpBuilder inside = issuer.getThenBodyBuilder();
      Value thread = gpu::ThreadIdOp::create(inside, loc, gpu::Dimension::x);
      Value warpgroup = arith::DivUIOp::create(inside, loc, thread,
                                               arith::ConstantIndexOp::create(inside, loc, 128));
      Value firstRow = arith::MulIOp::create(
          inside, loc, warpgroup, arith::ConstantIndexOp::create(inside, loc, boxRows));
      ValueRange indices = store.getIndices();
      Value row = arith::AddIOp::create(inside, loc, indices[2], firstRow);
      Value column = arith::ConstantIndexOp::create(inside, loc, 0);
      TmaStoreOp::create(inside, loc, buffer, firstRow, map,
                         ValueRange{column, row, indices[1], indices[0]});
    }
    store.erase();

    // The shared memory must outlive the stores' reads, and the kernel their writes.
    Block &body = consumers.front();
    b.setInsertionPointToEnd(&body);
    waitForStores(b, /*readsOnly=*/false);
    return success();
  }
};

} // namespace
