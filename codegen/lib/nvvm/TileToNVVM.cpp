//===- TileToNVVM.cpp - tiled tile IR to NVVM kernels (mma.sync) ---------===//
//
// One program of the tiled form becomes one CTA of 32 x warps threads, warps = Br / 16. Every
// block value gets a per-thread representation fixed by its shape and role:
//
//   f32/i1 Br x C block   accumulator layout of mma.m16n8: vector<C/8*4>, element 4j+e holds
//                         (row 16w + g + 8*(e/2), col 8j + 2c + e%2), g = lane/4, c = lane%4
//   f32/i1 Br row vector  vector<2>: rows 16w + g and 16w + g + 8
//   bf16/f16 block read   m16k16 A fragments (vector<D/16*4 x i32>, straight from global), or
//     as a dot's lhs      with q-operand=shared a shared-memory tile read with ldmatrix per k-step
//   bf16/f16 block read   a shared-memory tile, rows of 16-byte chunks XOR-swizzled by row % 8,
//     as a dot's rhs      read with ldmatrix (.trans for V)
//
// With mma=wgmma (sm_90a) each group of four warps is a warpgroup owning 64 rows, and each dot is a
// chain of wgmma.mma_async m64nNk16 with A from registers (the same per-warp fragments as above:
// Q, or P packed from the accumulator layout, which wgmma's m64nN accumulator shares) and B read
// by the tensor cores from shared memory through a matrix descriptor. Shared tiles then use the
// 128-byte-swizzle canonical layout: the D columns split into 64-column panels, each rows x 128
// bytes with chunk c of row r at ((c ^ r % 8) * 16); K is read K-major, V transposed (MN-major).
//
// Shared tiles are named buffers while a kernel is emitted; afterwards they are laid out one
// after the other in the kernel's dynamic shared memory (static shared memory stops at 48 KiB),
// and the size is recorded on the module for the launcher.
//
// Scalar control flow (grid, pruning scans, branches) is cloned as is; the scf.forall grid maps
// to (blockIdx.z, blockIdx.y, blockIdx.x).
//
//===----------------------------------------------------------------------===//
#include "tilefuse/codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileMath.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

#include <cmath>
#include <functional>

namespace tilefuse {
#define GEN_PASS_DEF_TILETONVVM
#include "tilefuse/codegen/Passes.h.inc"
} // namespace tilefuse

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::tile;

namespace {

/// A kernel argument view: base pointer, sizes and strides (in elements) as index values.
struct ViewInfo {
  Value ptr;
  Type elementType;
  SmallVector<Value> sizes, strides;
};

class KernelEmitter {
public:
  KernelEmitter(OpBuilder &b, Location loc, int64_t br, int64_t mTiles, ModuleOp module,
                gpu::GPUModuleOp gm, bool copiesAtBarrier, bool qInShared, bool wgmma)
      : b(b), loc(loc), br(br), mTiles(mTiles), warps(br / (16 * mTiles)),
        threads(32 * (br / (16 * mTiles))), gpuModule(gm), copiesAtBarrier(copiesAtBarrier),
        qInShared(qInShared), wgmma(wgmma) {}

  LogicalResult emit(func::FuncOp fn) {
    MLIRContext *ctx = b.getContext();
    auto gptr = LLVM::LLVMPointerType::get(ctx, 1);
    Type idxTy = b.getIndexType();
    // The launch ABI (tilefuse/runtime/device/LaunchAbi.h): the tensors' pointers, then the
    // sizes and the strides, i64 (.u64 in PTX).
    SmallVector<Type> argTypes(launch_abi::kTensorCount, gptr);
    argTypes.append(launch_abi::kSizeCount + launch_abi::kStrideCount, b.getI64Type());
    auto kernel = gpu::GPUFuncOp::create(b, loc, fn.getSymName(),
                                         b.getFunctionType(argTypes, {}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
    kernel->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
    kernel->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
    kernelOp = kernel;
    Block &entry = kernel.getBody().front();
    b.setInsertionPointToStart(&entry);

    // Sizes and strides arrive as i64; the kernel computes in index (32-bit on the GPU: the
    // launcher checks that every element offset fits).
    SmallVector<Value> scalars;
    for (unsigned i = launch_abi::kFirstSize; i < entry.getNumArguments(); ++i)
      scalars.push_back(arith::IndexCastOp::create(b, loc, idxTy, entry.getArgument(i)));
    auto arg = [&](unsigned i) -> Value {
      return i < launch_abi::kFirstSize ? Value(entry.getArgument(i))
                                        : scalars[i - launch_abi::kFirstSize];
    };
    auto size = [&](launch_abi::SizeParameter p) {
      return arg(launch_abi::kFirstSize + launch_abi::sizeIndex(p));
    };
    using launch_abi::SizeParameter;
    Value B = size(SizeParameter::B), H = size(SizeParameter::H), Hkv = size(SizeParameter::Hkv),
          M = size(SizeParameter::M), N = size(SizeParameter::N);
    auto stride = [&](unsigned i) { return arg(launch_abi::kFirstStride + i); };
    Value one = idx(1);
    auto argTy = [&](unsigned i) { return cast<MemRefType>(fn.getArgument(i).getType()); };
    auto dimOf = [&](unsigned i, unsigned d) { return idx(argTy(i).getDimSize(d)); };
    views[fn.getArgument(0)] = {arg(0), argTy(0).getElementType(), {B, H, M, dimOf(0, 3)},
                                {stride(0), stride(1), stride(2), one}};
    views[fn.getArgument(1)] = {arg(1), argTy(1).getElementType(), {B, Hkv, N, dimOf(1, 3)},
                                {stride(3), stride(4), stride(5), one}};
    views[fn.getArgument(2)] = {arg(2), argTy(2).getElementType(), {B, Hkv, N, dimOf(2, 3)},
                                {stride(6), stride(7), stride(8), one}};
    views[fn.getArgument(3)] = {arg(3), argTy(3).getElementType(), {B, H, M, dimOf(3, 3)},
                                {stride(9), stride(10), stride(11), one}};
    views[fn.getArgument(4)] = {arg(4), argTy(4).getElementType(), {B, H, M},
                                {stride(12), stride(13), one}};

    // Thread coordinates, fixed for the whole kernel.
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value lane = arith::RemUIOp::create(b, loc, tid, idx(32));
    Value warp = arith::DivUIOp::create(b, loc, tid, idx(32));
    laneG = arith::DivUIOp::create(b, loc, lane, idx(4));
    laneC = arith::RemUIOp::create(b, loc, lane, idx(4));
    tidx = tid;
    warpRow = arith::MulIOp::create(b, loc, warp, idx(16 * mTiles));
    rowBase = arith::AddIOp::create(b, loc, warpRow, laneG);
    // ldmatrix: lane l addresses row l % 8 of matrix l / 8.
    Value ldMat = arith::DivUIOp::create(b, loc, lane, idx(8));
    ldMatHi = arith::DivUIOp::create(b, loc, ldMat, idx(2));
    ldMatLo = arith::RemUIOp::create(b, loc, ldMat, idx(2));
    ldRow = arith::RemUIOp::create(b, loc, lane, idx(8));

    if (failed(lowerBlock(fn.getBody().front())))
      return failure();
    return success();
  }

private:
  //===--------------------------------------------------------------------===//
  // Small builders
  //===--------------------------------------------------------------------===//
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value i32(int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32Type(), b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return b.createOrFold<arith::AddIOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.createOrFold<arith::MulIOp>(loc, x, y); }
  Value ult(Value x, Value y) {
    return b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, x, y);
  }
  Value minU(Value x, Value y) { return b.createOrFold<arith::MinUIOp>(loc, x, y); }
  Value extract(Value vec, int64_t i) { return vector::ExtractOp::create(b, loc, vec, i); }
  Value fromElements(Type elt, ArrayRef<Value> xs) {
    return vector::FromElementsOp::create(b, loc, VectorType::get({(int64_t)xs.size()}, elt), xs);
  }

  /// Per-thread representation of a block type (see the file comment).
  Type convertType(Type t) {
    auto tt = dyn_cast<RankedTensorType>(t);
    if (!tt)
      return t;
    if (isTileType(tt)) // a block in shared memory is carried as its buffer's address
      return LLVM::LLVMPointerType::get(b.getContext(), 3);
    if (tt.getRank() == 2)
      return VectorType::get({mTiles * (tt.getDimSize(1) / 8) * 4}, tt.getElementType());
    return VectorType::get({2 * mTiles}, tt.getElementType());
  }

  /// bf16/f16 matrices only ever live in shared memory (or as fragments, never carried).
  static bool isTileType(Type t) {
    auto tt = dyn_cast<RankedTensorType>(t);
    return tt && tt.getRank() == 2 && (tt.getElementType().isBF16() || tt.getElementType().isF16());
  }
  static int64_t rowBytesOf(Type t) { return cast<RankedTensorType>(t).getDimSize(1) * 2; }
  SmallVector<StringRef> allBuffers() {
    return {"tilefuse_smem_q", "tilefuse_smem_k0", "tilefuse_smem_k1", "tilefuse_smem_v"};
  }

  /// Accumulator element e of a block with `cols` columns: m-tile t = e / (cols/8*4), then n-tile
  /// j and register r. Its row within the block, its column, and its row-vector slot.
  Value accRow(int64_t e, int64_t cols) {
    int64_t t = e / (cols / 8 * 4), r = e % 4;
    return add(rowBase, idx(16 * t + (r >= 2 ? 8 : 0)));
  }
  Value accCol(int64_t e, int64_t cols) {
    int64_t j = e % (cols / 8 * 4) / 4;
    return add(mul(laneC, idx(2)), idx(8 * j + e % 2));
  }
  static int64_t rowSlot(int64_t e, int64_t cols) {
    return 2 * (e / (cols / 8 * 4)) + (e % 4 >= 2 ? 1 : 0);
  }

  /// Address of view element (indices...) in global memory.
  Value globalAddress(const ViewInfo &v, ArrayRef<Value> indices) {
    Value off = idx(0);
    for (auto [i, s] : llvm::zip(indices, v.strides))
      off = add(off, mul(i, s));
    Value off64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), off);
    return LLVM::GEPOp::create(b, loc, v.ptr.getType(), v.elementType, v.ptr, ValueRange{off64});
  }

  /// A static shared-memory buffer of the module, grown to `bytes` if needed.
  Value sharedBuffer(StringRef name, int64_t bytes) {
    int64_t &have = sharedBytes[name];
    auto glob = gpuModule.lookupSymbol<LLVM::GlobalOp>(name);
    if (!glob || have < bytes) {
      if (glob)
        glob.erase();
      OpBuilder gb = OpBuilder::atBlockBegin(gpuModule.getBody());
      auto arrTy = LLVM::LLVMArrayType::get(gb.getI8Type(), bytes);
      glob = LLVM::GlobalOp::create(gb, loc, arrTy, /*isConstant=*/false, LLVM::Linkage::Internal,
                                    name, Attribute(), /*alignment=*/1024, /*addrSpace=*/3);
      have = bytes;
    }
    return LLVM::AddressOfOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 3),
                                     name);
  }

  Value sharedAddress(Value base, Value byteOffset) {
    Value off64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), byteOffset);
    return LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base, ValueRange{off64});
  }

  /// `ptr`, recomputed in every iteration of the loop around `op` (an opaque move that takes
  /// the induction variable). Without it LLVM hoists every ldmatrix address of a fixed buffer
  /// (base + lane offset + constant) out of the loop, one register each (dozens at D = 128),
  /// where in the loop the constant folds into the instruction's immediate.
  Value perIteration(Value ptr, Operation *op) {
    auto loop = op->getParentOfType<scf::ForOp>();
    if (!loop)
      return ptr;
    Type i32Ty = b.getI32Type();
    Value iv = arith::IndexCastOp::create(b, loc, i32Ty, map.lookup(loop.getInductionVar()));
    Value bits = LLVM::PtrToIntOp::create(b, loc, i32Ty, ptr);
    Value moved = LLVM::InlineAsmOp::create(b, loc, i32Ty, ValueRange{bits, iv},
                                            "mov.b32 $0, $1;", "=r,r,r",
                                            /*has_side_effects=*/false, /*is_align_stack=*/false,
                                            LLVM::tailcallkind::TailCallKind::None,
                                            LLVM::AsmDialectAttr(), ArrayAttr())
                      .getResult(0);
    return LLVM::IntToPtrOp::create(b, loc, ptr.getType(), moved);
  }

  /// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile with `rowBytes` and
  /// `rows`: rows of rowBytes (mma.sync), or 64-column panels of rows x 128 bytes (wgmma's
  /// 128-byte-swizzle layout); either way the chunk's low 3 bits are xor'ed with row % 8.
  Value swizzled(Value row, Value chunk, int64_t rowBytes, int64_t rows) {
    Value rowLow = arith::AndIOp::create(b, loc, row, idx(7));
    if (!wgmma) {
      Value sw = arith::XOrIOp::create(b, loc, chunk, rowLow);
      return add(mul(row, idx(rowBytes)), mul(sw, idx(16)));
    }
    Value panel = arith::DivUIOp::create(b, loc, chunk, idx(8));
    Value sw = arith::XOrIOp::create(b, loc, arith::RemUIOp::create(b, loc, chunk, idx(8)), rowLow);
    return add(add(mul(panel, idx(rows * 128)), mul(row, idx(128))), mul(sw, idx(16)));
  }
  /// Bytes between consecutive rows of a shared tile.
  int64_t rowPitch(int64_t rowBytes) const { return wgmma ? 128 : rowBytes; }

  /// The m16k16 A fragment of k-tile kt of m-tile t, packed from an f32 block in the accumulator
  /// layout whose columns are the contraction (P): its n-tiles 2kt and 2kt+1.
  SmallVector<Value, 4> packedAFragment(Value acc, int64_t cols, int64_t t, int64_t kt,
                                        Type elt) {
    int64_t base = t * (cols / 8 * 4), e0 = base + 4 * (2 * kt), e1 = base + 4 * (2 * kt + 1);
    return {pack(extract(acc, e0), extract(acc, e0 + 1), elt),
            pack(extract(acc, e0 + 2), extract(acc, e0 + 3), elt),
            pack(extract(acc, e1), extract(acc, e1 + 1), elt),
            pack(extract(acc, e1 + 2), extract(acc, e1 + 3), elt)};
  }

  /// Two f32 -> one i32 holding two 16-bit values of `elt` (first in the low half).
  Value pack(Value x, Value y, Type elt) {
    Value v = fromElements(elt, {arith::TruncFOp::create(b, loc, elt, x),
                                 arith::TruncFOp::create(b, loc, elt, y)});
    return LLVM::BitcastOp::create(b, loc, b.getI32Type(), v);
  }

  //===--------------------------------------------------------------------===//
  // Structure
  //===--------------------------------------------------------------------===//
  /// Lowers the ops of `block`. Asynchronous copies may stay in flight past the block only for
  /// the tiles it yields (a prefetched key block); every other copy issued in the block is waited
  /// for before its terminator. What the enclosing code believed pending is restored afterwards:
  /// believing a finished copy pending only costs a redundant wait.
  LogicalResult lowerBlock(Block &block) {
    SmallVector<Value> outer = pendingTiles;
    for (Operation &op : block) {
      if (op.hasTrait<OpTrait::IsTerminator>()) {
        barrierAndFlush(); // nothing requested stays unissued past the block
        DenseSet<Value> yielded(op.getOperands().begin(), op.getOperands().end());
        for (Value t : SmallVector<Value>(pendingTiles)) {
          if (yielded.contains(t))
            continue;
          if (!llvm::is_contained(outer, t))
            waitForTile(t); // issued here: complete before leaving
          else if (isa<BlockArgument>(t) && t.getParentBlock() == &block)
            // This iteration's carried block, normally consumed already; a skipped block (a hole
            // in the key range) leaves its copy in flight, and the next iteration reuses the
            // buffer. Completion suffices; no reader needs a barrier.
            waitForTile(t, /*makeVisible=*/false);
        }
      }
      if (failed(lowerOp(op)))
        return failure();
    }
    pendingTiles = std::move(outer);
    deferred.clear();
    return success();
  }

  LogicalResult lowerRegionInto(Region &from, Block *to) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(to);
    return lowerBlock(from.front());
  }

  SmallVector<Value> mapped(ValueRange vs) {
    SmallVector<Value> out;
    for (Value v : vs)
      out.push_back(map.lookup(v));
    return out;
  }

  SmallVector<Type> convertTypes(TypeRange ts) {
    SmallVector<Type> out;
    for (Type t : ts)
      out.push_back(convertType(t));
    return out;
  }

  LogicalResult lowerOp(Operation &op) {
    if (auto o = dyn_cast<scf::ForallOp>(op))
      return lowerForall(o);
    if (isa<scf::ForOp, scf::WhileOp>(op))
      barrierAndFlush(); // requested copies do not wait across a loop boundary
    if (auto o = dyn_cast<scf::ForOp>(op)) {
      auto loop = scf::ForOp::create(b, loc, map.lookup(o.getLowerBound()),
                                     map.lookup(o.getUpperBound()), map.lookup(o.getStep()),
                                     mapped(o.getInitArgs()));
      map.map(o.getInductionVar(), loop.getInductionVar());
      for (auto [x, y] : llvm::zip(o.getRegionIterArgs(), loop.getRegionIterArgs()))
        map.map(x, y);
      if (!loop.getBody()->empty())
        loop.getBody()->back().erase(); // the builder's implicit yield
      // A carried tile's copy was issued last before the loop or by the previous iteration: at
      // the top of the body it is the newest copy in flight, and it is the same copy as the init
      // value it replaces. Every buffer may have been read since the last barrier.
      SmallVector<Value> saved = pendingTiles;
      for (auto [arg, init] : llvm::zip(o.getRegionIterArgs(), o.getInitArgs()))
        if (isTileType(arg.getType())) {
          llvm::erase(pendingTiles, init);
          pendingTiles.push_back(arg);
          tileRowBytes[arg] = rowBytesOf(arg.getType());
          tileRows[arg] = cast<RankedTensorType>(arg.getType()).getDimSize(0);
        }
      dirtyBuffers = allBuffers();
      if (failed(lowerRegionInto(o.getRegion(), loop.getBody())))
        return failure();
      pendingTiles = std::move(saved);
      dirtyBuffers = allBuffers();
      map.map(o.getResults(), loop.getResults());
      return success();
    }
    if (auto o = dyn_cast<scf::IfOp>(op)) {
      auto ifOp = scf::IfOp::create(b, loc, convertTypes(o.getResultTypes()),
                                    map.lookup(o.getCondition()), !o.getElseRegion().empty());
      for (Block *blk : {ifOp.thenBlock(), ifOp.elseBlock()})
        if (blk && !blk->empty())
          blk->getTerminator()->erase();
      if (o.getElseRegion().empty())
        barrierAndFlush(); // a path without a branch would not issue them
      // Requested copies are issued by whichever branch runs, each at its first barrier.
      auto dirtyBefore = dirtyBuffers;
      auto deferredBefore = deferred;
      if (failed(lowerRegionInto(o.getThenRegion(), ifOp.thenBlock())))
        return failure();
      dirtyBuffers = dirtyBefore;
      deferred = deferredBefore;
      if (!o.getElseRegion().empty() &&
          failed(lowerRegionInto(o.getElseRegion(), ifOp.elseBlock())))
        return failure();
      for (DeferredCopy &c : orderForIssue(deferredBefore))
        pendingTiles.push_back(c.tile);
      deferred.clear();
      dirtyBuffers = allBuffers(); // either branch may have read any buffer
      map.map(o.getResults(), ifOp.getResults());
      return success();
    }
    if (auto o = dyn_cast<scf::WhileOp>(op)) {
      auto w = scf::WhileOp::create(b, loc, convertTypes(o.getResultTypes()),
                                    mapped(o.getInits()));
      Block *before = b.createBlock(&w.getBefore(), {}, convertTypes(ValueRange(o.getBeforeArguments()).getTypes()),
                                    SmallVector<Location>(o.getBeforeArguments().size(), loc));
      Block *after = b.createBlock(&w.getAfter(), {}, convertTypes(ValueRange(o.getAfterArguments()).getTypes()),
                                   SmallVector<Location>(o.getAfterArguments().size(), loc));
      b.setInsertionPointAfter(w);
      map.map(o.getBeforeArguments(), before->getArguments());
      map.map(o.getAfterArguments(), after->getArguments());
      if (failed(lowerRegionInto(o.getBefore(), before)) ||
          failed(lowerRegionInto(o.getAfter(), after)))
        return failure();
      map.map(o.getResults(), w.getResults());
      return success();
    }
    if (auto o = dyn_cast<scf::YieldOp>(op)) {
      scf::YieldOp::create(b, loc, mapped(o.getOperands()));
      return success();
    }
    if (auto o = dyn_cast<scf::ConditionOp>(op)) {
      scf::ConditionOp::create(b, loc, map.lookup(o.getCondition()), mapped(o.getArgs()));
      return success();
    }
    if (isa<func::ReturnOp>(op)) {
      gpu::ReturnOp::create(b, loc);
      return success();
    }
    if (auto o = dyn_cast<memref::DimOp>(op)) {
      auto it = views.find(o.getSource());
      auto d = o.getConstantIndex();
      if (it == views.end() || !d)
        return o.emitOpError("tile-to-nvvm: only dims of kernel arguments are supported");
      map.map(o.getResult(), it->second.sizes[*d]);
      return success();
    }
    if (auto o = dyn_cast<arith::ConstantOp>(op)) {
      if (auto tt = dyn_cast<RankedTensorType>(o.getType())) {
        auto dense = cast<DenseElementsAttr>(o.getValue());
        auto vt = cast<VectorType>(convertType(tt));
        map.map(o.getResult(), arith::ConstantOp::create(
                                   b, loc, vt, DenseElementsAttr::get(vt, dense.getSplatValue<Attribute>())));
        return success();
      }
    }
    if (isa<BlockEventOp>(op))
      return success(); // counting is a CPU-backend feature
    if (auto o = dyn_cast<BlockLoadOp>(op))
      return lowerBlockLoad(o);
    if (auto o = dyn_cast<BlockStoreOp>(op))
      return lowerBlockStore(o);
    if (auto o = dyn_cast<BlockDotOp>(op))
      return lowerBlockDot(o);
    if (auto o = dyn_cast<ReduceOp>(op))
      return lowerReduce(o);
    if (auto o = dyn_cast<BroadcastOp>(op)) {
      int64_t n = cast<VectorType>(convertType(o.getType())).getNumElements();
      int64_t cols = o.getType().getDimSize(1);
      SmallVector<int64_t> mask;
      for (int64_t e = 0; e < n; ++e)
        mask.push_back(rowSlot(e, cols));
      Value row = map.lookup(o.getInput());
      map.map(o.getResult(), vector::ShuffleOp::create(b, loc, row, row, mask));
      return success();
    }
    if (auto o = dyn_cast<BlockScoreModOp>(op))
      return lowerElementRegion(o, /*isMask=*/false);
    if (auto o = dyn_cast<BlockMaskOp>(op))
      return lowerElementRegion(o, /*isMask=*/true);
    if (op.getNumRegions() != 0 || isa<TileDialect>(op.getDialect()))
      return op.emitOpError("tile-to-nvvm: no GPU lowering for this op");
    // Scalars and elementwise ops on blocks: the same op on the per-thread values.
    OperationState state(loc, op.getName());
    state.addOperands(mapped(op.getOperands()));
    state.addTypes(convertTypes(op.getResultTypes()));
    state.addAttributes(op.getAttrs());
    Operation *clone = b.create(state);
    map.map(op.getResults(), clone->getResults());
    return success();
  }

  LogicalResult lowerForall(scf::ForallOp o) {
    if (o.getRank() != 3)
      return o.emitOpError("tile-to-nvvm: expected the (batch, head, row block) grid");
    map.map(o.getInductionVar(0), gpu::BlockIdOp::create(b, loc, gpu::Dimension::z));
    map.map(o.getInductionVar(1), gpu::BlockIdOp::create(b, loc, gpu::Dimension::y));
    map.map(o.getInductionVar(2), gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
    for (Operation &inner : o.getBody()->without_terminator())
      if (failed(lowerOp(inner)))
        return failure();
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Block ops
  //===--------------------------------------------------------------------===//

  /// The role of a loaded block: A fragments (dot lhs) in registers or in a shared tile, or a
  /// shared tile (dot rhs).
  enum class Role { Fragments, QueryTile, KeyTile, ValueTile };
  FailureOr<Role> roleOf(BlockLoadOp load) {
    std::optional<Role> role;
    bool conflict = false;
    // Follows the block through the loops that carry it (a prefetched key block).
    std::function<void(Value)> visit = [&](Value v) {
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (auto loop = dyn_cast<scf::ForOp>(user)) {
          if (BlockArgument arg = loop.getTiedLoopRegionIterArg(&use))
            visit(arg);
          continue;
        }
        if (auto yield = dyn_cast<scf::YieldOp>(user)) {
          if (auto loop = dyn_cast<scf::ForOp>(yield->getParentOp()))
            visit(loop.getRegionIterArgs()[use.getOperandNumber()]);
          continue;
        }
        auto dot = dyn_cast<BlockDotOp>(user);
        if (!dot) {
          conflict = true;
          continue;
        }
        Role r = dot.getLhs() == v ? Role::Fragments
                 : dot.getTransposeRhs() ? Role::KeyTile
                                         : Role::ValueTile;
        if (role && *role != r)
          conflict = true;
        role = r;
      }
    };
    visit(load.getResult());
    if (conflict)
      return load.emitOpError("tile-to-nvvm: a loaded block may only feed tile.block_dot, in "
                              "one role");
    if (!role)
      role = Role::Fragments;
    if (*role == Role::Fragments && qInShared)
      role = Role::QueryTile;
    return *role;
  }

  LogicalResult lowerBlockLoad(BlockLoadOp o) {
    FailureOr<Role> role = roleOf(o);
    if (failed(role))
      return failure();
    const ViewInfo &view = views[o.getView()];
    auto ty = o.getType();
    int64_t rows = ty.getDimSize(0), d = ty.getDimSize(1);
    Type elt = ty.getElementType();
    if (!elt.isBF16() && !elt.isF16())
      return o.emitOpError("tile-to-nvvm: blocks must be bf16 or f16");
    SmallVector<Value> lead = mapped(o.getIndices());
    Value row0 = lead.pop_back_val();
    Value bound = map.lookup(o.getBound());
    Value lastRow = arith::SubIOp::create(b, loc, bound, idx(1));

    if (*role == Role::Fragments) {
      // Q lives in registers, d / 16 fragments per m-tile: past 256 they are more than a
      // thread has (and the unrolled lowering grows without bound).
      if (rows != br || d <= 0 || d % 16 || d > 256)
        return o.emitOpError("tile-to-nvvm: the Q block must be Br x (multiple of 16 up to 256)");
      // A fragment regs of m-tile t, k-tile kt: (g, 16kt+2c), (g+8, 16kt+2c), (g, 16kt+8+2c),
      // (g+8, 16kt+8+2c), rows counted from the m-tile's first row.
      SmallVector<Value> regs;
      Value zero = i32(0);
      Value c2 = mul(laneC, idx(2));
      for (int64_t t = 0; t < mTiles; ++t) {
        Value rowsOk[2], rowsAt[2];
        for (int h = 0; h < 2; ++h) {
          Value r = add(row0, add(rowBase, idx(16 * t + 8 * h)));
          rowsOk[h] = ult(r, bound);
          rowsAt[h] = minU(r, lastRow); // a valid row to read; the value is discarded if not ok
        }
        for (int64_t kt = 0; kt < d / 16; ++kt)
          for (int reg = 0; reg < 4; ++reg) {
            int h = reg % 2;
            SmallVector<Value> at(lead);
            at.push_back(rowsAt[h]);
            at.push_back(add(c2, idx(16 * kt + 8 * (reg / 2))));
            Value v = LLVM::LoadOp::create(b, loc, b.getI32Type(), globalAddress(view, at), 4);
            regs.push_back(arith::SelectOp::create(b, loc, rowsOk[h], v, zero));
          }
      }
      map.map(o.getResult(), fromElements(b.getI32Type(), regs));
      return success();
    }

    // Shared tile: every thread issues asynchronous 16-byte copies (cp.async.cg); rows past the
    // bound copy 0 bytes and are zero-filled. The copy is waited for where the tile is first
    // read (waitForTile), so whatever runs in between overlaps it.
    bool isKey = *role == Role::KeyTile;
    int64_t rowBytes = d * 2, chunksPerRow = d / 8;
    if (d % 64)
      return o.emitOpError("tile-to-nvvm: a block in shared memory needs a head dimension that "
                           "is a multiple of 64 (the swizzle spans 8 chunks of 16 bytes)");
    if (*role == Role::QueryTile && rows != br)
      return o.emitOpError("tile-to-nvvm: the Q block must be Br x D");
    int64_t tileBytes = rows * rowBytes;
    // Key blocks alternate between two buffers by block index, so the next key block can be in
    // flight while this one is read (tile-pipeline's prefetch); values use one buffer.
    Value base;
    SmallVector<StringRef> written;
    if (isKey) {
      Value k0 = sharedBuffer("tilefuse_smem_k0", tileBytes);
      Value k1 = sharedBuffer("tilefuse_smem_k1", tileBytes);
      Value odd = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::eq,
          arith::AndIOp::create(b, loc, arith::DivUIOp::create(b, loc, row0, idx(rows)), idx(1)),
          idx(1));
      base = arith::SelectOp::create(b, loc, odd, k1, k0);
      written = {"tilefuse_smem_k0", "tilefuse_smem_k1"};
    } else if (*role == Role::QueryTile) {
      base = sharedBuffer("tilefuse_smem_q", tileBytes);
      written = {"tilefuse_smem_q"};
    } else {
      base = sharedBuffer("tilefuse_smem_v", tileBytes);
      written = {"tilefuse_smem_v"};
    }
    int64_t chunks = rows * chunksPerRow;
    // The copy, as a closure over the addresses computed here: it runs now, or after the next
    // barrier when a warp may still read the buffer it overwrites (write after read).
    ViewInfo v = view;
    Operation *loadOp = o;
    auto emit = [this, v, lead, row0, bound, lastRow, base, chunks, chunksPerRow, rowBytes,
                 rows, loadOp]() {
      Value dst = perIteration(base, loadOp);
      // When a round of copies covers a multiple of 8 rows, every round has the thread's first
      // chunk and swizzle: its shared offset is the first round's plus a constant.
      int64_t rowsPerRound = threads / chunksPerRow;
      bool sameSwizzle = threads % chunksPerRow == 0 && rowsPerRound % 8 == 0;
      Value r0 = arith::DivUIOp::create(b, loc, tidx, idx(chunksPerRow));
      Value ch0 = arith::RemUIOp::create(b, loc, tidx, idx(chunksPerRow));
      Value firstOffset = swizzled(r0, ch0, rowBytes, rows);
      for (int64_t i = 0; i * threads < chunks; ++i) {
        Value chunkIdx = add(tidx, idx(i * threads));
        Value r = sameSwizzle ? add(r0, idx(i * rowsPerRound))
                              : arith::DivUIOp::create(b, loc, chunkIdx, idx(chunksPerRow));
        Value ch = sameSwizzle ? ch0 : arith::RemUIOp::create(b, loc, chunkIdx, idx(chunksPerRow));
        Value sharedOffset =
            sameSwizzle ? add(firstOffset, idx(i * rowsPerRound * rowPitch(rowBytes)))
                        : swizzled(r, ch, rowBytes, rows);
        Value gRow = add(row0, r);
        SmallVector<Value> at(lead);
        at.push_back(minU(gRow, lastRow));
        at.push_back(mul(ch, idx(8)));
        Value bytes = arith::SelectOp::create(b, loc, ult(gRow, bound), i32(16), i32(0));
        auto copy = [&] {
          NVVM::CpAsyncOp::create(b, loc, sharedAddress(dst, sharedOffset),
                                  globalAddress(v, at), b.getI32IntegerAttr(16),
                                  NVVM::LoadCacheModifierKindAttr::get(
                                      b.getContext(), NVVM::LoadCacheModifierKind::CG),
                                  bytes);
        };
        if ((i + 1) * threads <= chunks) {
          copy();
        } else { // the last round has fewer chunks than threads
          auto guard = scf::IfOp::create(b, loc, ult(chunkIdx, idx(chunks)), false);
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(guard.thenBlock());
          copy();
        }
      }
    };
    bool carried = llvm::any_of(o->getUsers(), [](Operation *u) { return isa<scf::YieldOp>(u); });
    DeferredCopy copy{o.getResult(), emit, carried};
    tileRowBytes[o.getResult()] = rowBytes;
    tileRows[o.getResult()] = rows;
    map.map(o.getResult(), base);
    if (llvm::any_of(written, [&](StringRef n) { return llvm::is_contained(dirtyBuffers, n); })) {
      if (copiesAtBarrier) {
        deferred.push_back(std::move(copy));
        return success();
      }
      gpu::BarrierOp::create(b, loc);
      dirtyBuffers.clear();
    }
    issue(copy);
    return success();
  }

  /// A copy requested but not yet issued: its buffer had readers since the last barrier.
  struct DeferredCopy {
    Value tile;
    std::function<void()> emit;
    bool carried; ///< yielded to the next iteration: read last, so issued last
  };

  void issue(DeferredCopy &c) {
    c.emit();
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    pendingTiles.push_back(c.tile);
  }

  /// Issue order: tiles read in this iteration first, so waiting for them leaves the carried
  /// (next iteration's) copy in flight.
  static SmallVector<DeferredCopy> orderForIssue(SmallVector<DeferredCopy> copies) {
    std::stable_partition(copies.begin(), copies.end(),
                          [](const DeferredCopy &c) { return !c.carried; });
    return copies;
  }

  /// Issues the requested copies; needs no barrier when no buffer has readers since the last.
  void flushDeferred() {
    for (DeferredCopy &c : orderForIssue(std::exchange(deferred, {})))
      issue(c);
  }

  void barrierAndFlush() {
    if (deferred.empty())
      return;
    if (!dirtyBuffers.empty()) {
      gpu::BarrierOp::create(b, loc);
      dirtyBuffers.clear();
    }
    flushDeferred();
  }

  /// Waits for the copy group of `tile` (and the older ones), then makes it visible to all.
  /// The copies still requested are issued right after that barrier, when their buffers are
  /// free: FA2's order (wait K_j, barrier, issue V_j and K_j+1, Q K_j^T, ...).
  void waitForTile(Value tile, bool makeVisible = true) {
    if (llvm::any_of(deferred, [&](const DeferredCopy &c) { return c.tile == tile; }))
      barrierAndFlush();
    auto it = llvm::find(pendingTiles, tile);
    if (it == pendingTiles.end())
      return;
    int64_t newer = pendingTiles.end() - it - 1;
    NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(newer));
    pendingTiles.erase(pendingTiles.begin(), it + 1);
    if (makeVisible) {
      if (wgmma) // the tensor cores read through the async proxy; cp.async wrote through generic
        asmStatement("fence.proxy.async.shared::cta;");
      gpu::BarrierOp::create(b, loc);
      dirtyBuffers.clear(); // every earlier read is done too
      flushDeferred();
    }
  }

  /// ldmatrix.x4 of the 16 x 16 square at rows row0.., chunks 2 * chunkPair.. of a swizzled tile
  /// (row0 a multiple of 8): matrices in the order (rows +0, chunk +0), (+0, +1), (+8, +0),
  /// (+8, +1). Lane l addresses row row0 + 8 * (l/8/2) + l%8 of chunk 2 * chunkPair + (l/8)%2;
  /// as row0 % 8 == 0 the swizzle is the lane's l%8, so the lane's offset depends on chunkPair
  /// only: Q, K and V squares share it (computed once per chunk pair after CSE and LICM), and
  /// row0 adds a constant or one register.
  /// row0 = rowReg (a register, may be null) + rowConst; the constant part stays a separate
  /// constant GEP so that it folds into ldmatrix's immediate offset.
  SmallVector<Value> ldmatrix4(Value base, int64_t rowBytes, Value rowReg, int64_t rowConst,
                               int64_t chunkPair, bool trans) {
    // The swizzle (xor with l%8) only touches a chunk's low 3 bits: chunk pairs 4 apart differ by
    // 8 chunks, a constant 128 bytes, so only four lane offsets exist.
    Value chunk = add(idx(2 * (chunkPair % 4)), ldMatLo);
    Value laneOffset =
        add(mul(add(mul(ldMatHi, idx(8)), ldRow), idx(rowBytes)),
            mul(arith::XOrIOp::create(b, loc, chunk, ldRow), idx(16)));
    if (rowReg)
      base = sharedAddress(base, mul(rowReg, idx(rowBytes)));
    Value addr = sharedAddress(base, laneOffset);
    if (int64_t constant = rowConst * rowBytes + chunkPair / 4 * 128)
      addr = LLVM::GEPOp::create(b, loc, addr.getType(), b.getI8Type(), addr,
                                 ArrayRef<LLVM::GEPArg>{int32_t(constant)});
    auto i32Ty = b.getI32Type();
    auto st = LLVM::LLVMStructType::getLiteral(b.getContext(), {i32Ty, i32Ty, i32Ty, i32Ty});
    Value r = NVVM::LdMatrixOp::create(
        b, loc, st, addr, 4, trans ? NVVM::MMALayout::col : NVVM::MMALayout::row,
        NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8), NVVM::LdStMatrixEltType::B16);
    SmallVector<Value> out;
    for (int64_t i = 0; i < 4; ++i)
      out.push_back(LLVM::ExtractValueOp::create(b, loc, r, i));
    return out;
  }

  SmallVector<Value> mma(ArrayRef<Value> a, ArrayRef<Value> bFrag, ArrayRef<Value> c, Type elt) {
    auto f32Ty = b.getF32Type();
    auto st = LLVM::LLVMStructType::getLiteral(b.getContext(), {f32Ty, f32Ty, f32Ty, f32Ty});
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
    Value r = NVVM::MmaOp::create(b, loc, st, aOps, bOps, c, {16, 8, 16}, std::nullopt,
                                  std::nullopt, std::array<NVVM::MMATypes, 2>{t, t},
                                  std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                                                 NVVM::MMALayout::col});
    SmallVector<Value> out;
    for (int64_t i = 0; i < 4; ++i)
      out.push_back(LLVM::ExtractValueOp::create(b, loc, r, i));
    return out;
  }

  /// The buffers `dot` read (either key buffer, when the tile is carried; Q's when it is in
  /// shared memory) have readers until the next barrier.
  void noteReaders(BlockDotOp dot, bool lhsShared) {
    SmallVector<StringRef> read =
        dot.getTransposeRhs() ? SmallVector<StringRef>{"tilefuse_smem_k0", "tilefuse_smem_k1"}
                              : SmallVector<StringRef>{"tilefuse_smem_v"};
    if (lhsShared)
      read.push_back("tilefuse_smem_q");
    for (StringRef n : read)
      if (!llvm::is_contained(dirtyBuffers, n))
        dirtyBuffers.push_back(n);
  }

  LogicalResult lowerBlockDot(BlockDotOp o) {
    if (wgmma)
      return lowerBlockDotWgmma(o);
    auto resTy = o.getType();
    int64_t cols = resTy.getDimSize(1), k = o.getLhs().getType().getDimSize(1);
    if (resTy.getDimSize(0) != br || cols % 16 || k % 16)
      return o.emitOpError("tile-to-nvvm: dot shapes must be Br x (16n) x (16k)");
    auto rowBytesIt = tileRowBytes.find(o.getRhs());
    if (rowBytesIt == tileRowBytes.end())
      return o.emitOpError("tile-to-nvvm: the rhs must be a block loaded into shared memory");
    Value base = perIteration(map.lookup(o.getRhs()), o);
    int64_t rowBytes = rowBytesIt->second;
    Type elt = o.getRhs().getType().getElementType();
    // The rhs first: a Q tile in shared memory was copied before it, so that wait covers both.
    waitForTile(o.getRhs());
    auto lhsRowBytesIt = tileRowBytes.find(o.getLhs());
    bool lhsShared = lhsRowBytesIt != tileRowBytes.end();
    if (lhsShared)
      waitForTile(o.getLhs());

    // A fragments per m-tile and k-tile: Q in registers, the f32 lhs (P, whose columns are the
    // contraction) packed to the rhs element type, or (Q in shared memory) read with ldmatrix
    // at the k-step that uses them, so only one k-step's fragments are live.
    int64_t kTiles = k / 16;
    SmallVector<SmallVector<Value, 4>> aFrag(mTiles * kTiles);
    Value lhs = map.lookup(o.getLhs());
    if (lhsShared)
      lhs = perIteration(lhs, o);
    auto loadSharedA = [&](int64_t kt) {
      // The m-tile's 16 rows x k 16kt..: a0 = (rows +0, k +0), a1 = (+8, +0), a2 = (+0, +8),
      // a3 = (+8, +8).
      for (int64_t t = 0; t < mTiles; ++t) {
        auto m = ldmatrix4(lhs, lhsRowBytesIt->second, warpRow, 16 * t, kt, /*trans=*/false);
        aFrag[t * kTiles + kt] = {m[0], m[2], m[1], m[3]};
      }
    };
    if (lhsShared) {
      // loaded per k-step below
    } else if (o.getLhs().getType().getElementType().isF32()) {
      for (int64_t t = 0; t < mTiles; ++t)
        for (int64_t kt = 0; kt < kTiles; ++kt)
          aFrag[t * kTiles + kt] = packedAFragment(lhs, k, t, kt, elt);
    } else {
      for (int64_t f = 0; f < mTiles * kTiles; ++f)
        for (int r = 0; r < 4; ++r)
          aFrag[f].push_back(extract(lhs, 4 * f + r));
    }

    int64_t nTiles = cols / 8;
    SmallVector<SmallVector<Value, 4>> acc(mTiles * nTiles); // [t * nTiles + j]
    Value accIn = o.getAcc() ? map.lookup(o.getAcc()) : Value();
    for (int64_t f = 0; f < mTiles * nTiles; ++f)
      for (int e = 0; e < 4; ++e)
        acc[f].push_back(accIn ? extract(accIn, 4 * f + e) : f32(0.0));

    for (int64_t kt = 0; kt < k / 16; ++kt) {
      if (lhsShared)
        loadSharedA(kt);
      for (int64_t jp = 0; jp < nTiles / 2; ++jp) {
        // B fragments {b0, b1} of n-tiles 2jp and 2jp+1 at k-step kt.
        SmallVector<Value> m;
        if (o.getTransposeRhs()) {
          // K tile [n][k]: rows 16jp.. are the two n-tiles, chunks 2kt.. the k halves.
          m = ldmatrix4(base, rowBytes, Value(), 16 * jp, kt, /*trans=*/false);
        } else {
          // V tile [k][n], transposed: rows 16kt.. are the k halves, chunks 2jp.. the n-tiles.
          auto v = ldmatrix4(base, rowBytes, Value(), 16 * kt, jp, /*trans=*/true);
          m = {v[0], v[2], v[1], v[3]};
        }
        // Each B fragment serves every m-tile of the warp.
        for (int64_t t = 0; t < mTiles; ++t) {
          auto &a = aFrag[t * kTiles + kt];
          acc[t * nTiles + 2 * jp] = mma(a, {m[0], m[1]}, acc[t * nTiles + 2 * jp], elt);
          acc[t * nTiles + 2 * jp + 1] =
              mma(a, {m[2], m[3]}, acc[t * nTiles + 2 * jp + 1], elt);
        }
      }
    }
    noteReaders(o, lhsShared);
    SmallVector<Value> flat;
    for (auto &t : acc)
      flat.append(t.begin(), t.end());
    map.map(o.getResult(), fromElements(b.getF32Type(), flat));
    return success();
  }

  //===--------------------------------------------------------------------===//
  // wgmma (sm_90a)
  //===--------------------------------------------------------------------===//

  /// Inline asm with side effects returning `types` (a struct when several), as values.
  SmallVector<Value> inlineAsm(TypeRange types, ValueRange operands, StringRef text,
                               StringRef constraints) {
    auto st = LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(types));
    Value res = LLVM::InlineAsmOp::create(b, loc, st, operands, text, constraints,
                                          /*has_side_effects=*/true, /*is_align_stack=*/false,
                                          LLVM::tailcallkind::TailCallKind::None,
                                          LLVM::AsmDialectAttr(), ArrayAttr())
                    .getResult(0);
    SmallVector<Value> out;
    for (size_t i = 0; i < types.size(); ++i)
      out.push_back(LLVM::ExtractValueOp::create(b, loc, res, i));
    return out;
  }

  /// An inline-asm statement with side effects and no operands.
  void asmStatement(StringRef text) {
    LLVM::InlineAsmOp::create(b, loc, TypeRange(), ValueRange(), text, "",
                              /*has_side_effects=*/true, /*is_align_stack=*/false,
                              LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
                              ArrayAttr());
  }

  /// Runs `text` (side effects) with every value of `regs` as a read-write operand, so that no
  /// read or write of them moves across it: wgmma.fence before the MMAs read accumulators and A
  /// fragments written by ordinary instructions, and wgmma.wait_group before anything reads the
  /// results or reuses the A registers the tensor cores read asynchronously.
  SmallVector<Value> pinRegisters(StringRef text, ArrayRef<Value> regs) {
    if (regs.empty()) {
      asmStatement(text);
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
    return inlineAsm(types, regs, text, constraints);
  }

  /// The 64-bit wgmma matrix descriptor of the 128-byte-swizzled tile at `base`: start
  /// address / 16 (bits 0-13), leading byte offset / 16 (16-29), stride byte offset / 16
  /// (32-45), swizzle mode 1 = 128 bytes (62-63). A k-step's descriptor is this one plus its
  /// byte offset / 16: shared addresses stay below 2^18, so the start field never carries.
  Value descriptor(Value base, int64_t leadingBytes, int64_t strideBytes) {
    Type i32Ty = b.getI32Type(), i64Ty = b.getI64Type();
    Value addr = LLVM::PtrToIntOp::create(b, loc, i32Ty, base);
    Value start = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, addr, i32(4)), i32(0x3FFF));
    uint64_t fixed = (uint64_t(leadingBytes >> 4) & 0x3FFF) << 16 |
                     (uint64_t(strideBytes >> 4) & 0x3FFF) << 32 | uint64_t(1) << 62;
    Value fixedV = arith::ConstantOp::create(b, loc, i64Ty, b.getI64IntegerAttr(int64_t(fixed)));
    return arith::OrIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64Ty, start), fixedV);
  }

  /// One wgmma.mma_async.m64nNk16 (f32 accumulators, A from registers, B by descriptor):
  /// `acc` (N/2 values) in, the new accumulators out. Without `acc` the accumulator input is
  /// disabled (scale-d = 0).
  SmallVector<Value> wgmmaAsync(ArrayRef<Value> acc, int64_t n, ArrayRef<Value> a, Value desc,
                                bool transB, Type elt) {
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
    constraints += "r,r,r,r,l,n";
    operands.append(a.begin(), a.end());
    operands.push_back(desc);
    operands.push_back(i32(tied ? 1 : 0));
    int64_t first = tied ? 2 * outs : outs;
    StringRef ty = elt.isBF16() ? "bf16" : "f16";
    os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << first + 5 << ", 0;\n"
       << "wgmma.mma_async.sync.aligned.m64n" << n << "k16.f32." << ty << "." << ty << " {";
    for (int64_t i = 0; i < outs; ++i)
      os << (i ? ", " : "") << "$" << i;
    os << "}, {$" << first << ", $" << first + 1 << ", $" << first + 2 << ", $" << first + 3
       << "}, $" << first + 4 << ", p, 1, 1, " << (transB ? 1 : 0) << ";\n}";
    return inlineAsm(SmallVector<Type>(outs, b.getF32Type()), operands, text, constraints);
  }

  /// A dot as one warpgroup MMA chain: fence, one m64nNk16 per k-step of 16, commit, wait. The
  /// rhs tile is K (Q K^T: B is K-major, the panel and 32-byte step give the start address) or
  /// V (P V: B is V transposed, MN-major: k-steps of 16 rows, panels `leading` bytes apart).
  LogicalResult lowerBlockDotWgmma(BlockDotOp o) {
    auto resTy = o.getType();
    int64_t cols = resTy.getDimSize(1), k = o.getLhs().getType().getDimSize(1);
    if (resTy.getDimSize(0) != br || cols % 16 || cols > 256 || k % 16)
      return o.emitOpError("tile-to-nvvm: wgmma dot shapes must be Br x (16n <= 256) x (16k)");
    if (!tileRows.count(o.getRhs()))
      return o.emitOpError("tile-to-nvvm: the rhs must be a block loaded into shared memory");
    int64_t rows = tileRows.lookup(o.getRhs());
    Type elt = o.getRhs().getType().getElementType();
    waitForTile(o.getRhs());
    Value base = perIteration(map.lookup(o.getRhs()), o);

    int64_t kTiles = k / 16;
    Value lhs = map.lookup(o.getLhs());
    SmallVector<SmallVector<Value, 4>> aFrag(kTiles);
    if (o.getLhs().getType().getElementType().isF32()) {
      for (int64_t kt = 0; kt < kTiles; ++kt)
        aFrag[kt] = packedAFragment(lhs, k, /*t=*/0, kt, elt);
    } else {
      if (tileRows.count(o.getLhs()))
        return o.emitOpError("tile-to-nvvm: mma=wgmma takes Q from registers (q-operand=registers)");
      for (int64_t kt = 0; kt < kTiles; ++kt)
        for (int r = 0; r < 4; ++r)
          aFrag[kt].push_back(extract(lhs, 4 * kt + r));
    }

    SmallVector<Value> acc;
    if (Value accIn = o.getAcc() ? map.lookup(o.getAcc()) : Value())
      for (int64_t e = 0; e < cols / 2; ++e)
        acc.push_back(extract(accIn, e));
    // Fence: everything that wrote the accumulators and A fragments is ordered before the MMAs.
    SmallVector<Value> pinned(acc);
    for (auto &f : aFrag)
      pinned.append(f.begin(), f.end());
    pinned = pinRegisters("wgmma.fence.sync.aligned;", pinned);
    acc.assign(pinned.begin(), pinned.begin() + acc.size());
    for (int64_t kt = 0, p = acc.size(); kt < kTiles; ++kt)
      for (int r = 0; r < 4; ++r)
        aFrag[kt][r] = pinned[p++];

    bool transposed = o.getTransposeRhs(); // Q K^T
    Value tileDesc = transposed ? descriptor(base, /*leadingBytes=*/16, /*strideBytes=*/1024)
                                : descriptor(base, /*leadingBytes=*/rows * 128,
                                             /*strideBytes=*/1024);
    for (int64_t kt = 0; kt < kTiles; ++kt) {
      int64_t offset = transposed ? (kt / 4) * rows * 128 + (kt % 4) * 32 : kt * 16 * 128;
      Value desc = tileDesc;
      if (offset)
        desc = arith::AddIOp::create(b, loc, tileDesc,
                                     arith::ConstantOp::create(b, loc, b.getI64Type(),
                                                               b.getI64IntegerAttr(offset >> 4)));
      acc = wgmmaAsync(acc, cols, aFrag[kt], desc, /*transB=*/!transposed, elt);
    }
    asmStatement("wgmma.commit_group.sync.aligned;");
    pinned.assign(acc.begin(), acc.end());
    for (auto &f : aFrag)
      pinned.append(f.begin(), f.end());
    pinned = pinRegisters("wgmma.wait_group.sync.aligned 0;", pinned);
    acc.assign(pinned.begin(), pinned.begin() + cols / 2);

    noteReaders(o, /*lhsShared=*/false); // wait_group 0 finished the reads
    map.map(o.getResult(), fromElements(b.getF32Type(), acc));
    return success();
  }

  LogicalResult lowerReduce(ReduceOp o) {
    Value in = map.lookup(o.getInput());
    int64_t n = cast<VectorType>(in.getType()).getNumElements();
    bool isMax = o.getKind() == ReduceKind::Max;
    auto combine = [&](Value x, Value y) -> Value {
      return isMax ? arith::MaximumFOp::create(b, loc, x, y).getResult()
                   : arith::AddFOp::create(b, loc, x, y).getResult();
    };
    int64_t cols = o.getInput().getType().getDimSize(1);
    SmallVector<Value> rows;
    for (int64_t slot = 0; slot < 2 * mTiles; ++slot) {
      Value r;
      for (int64_t e = 0; e < n; ++e)
        if (rowSlot(e, cols) == slot)
          r = r ? combine(r, extract(in, e)) : extract(in, e);
      // The four lanes of a quad share the row.
      for (int offset : {1, 2}) {
        auto shfl = gpu::ShuffleOp::create(b, loc, r, i32(offset), i32(32),
                                           gpu::ShuffleMode::XOR);
        r = combine(r, shfl.getShuffleResult());
      }
      rows.push_back(r);
    }
    map.map(o.getResult(), fromElements(b.getF32Type(), rows));
    return success();
  }

  template <typename OpTy> LogicalResult lowerElementRegion(OpTy o, bool isMask) {
    Value in = map.lookup(o.getInput());
    int64_t n = cast<VectorType>(in.getType()).getNumElements();
    Value row0 = map.lookup(o.getRow()), col0 = map.lookup(o.getCol());
    Block &body = o.getBody().front();
    SmallVector<Value> out;
    for (int64_t e = 0; e < n; ++e) {
      Value s = extract(in, e);
      IRMapping local = map;
      unsigned first = 0;
      if (!isMask)
        local.map(body.getArgument(first++), s);
      local.map(body.getArgument(first), map.lookup(o.getBatch()));
      local.map(body.getArgument(first + 1), map.lookup(o.getHead()));
      int64_t cols = o.getType().getDimSize(1);
      local.map(body.getArgument(first + 2), add(row0, accRow(e, cols)));
      local.map(body.getArgument(first + 3), add(col0, accCol(e, cols)));
      for (Operation &inner : body.without_terminator())
        b.clone(inner, local);
      Value y = local.lookup(cast<YieldOp>(body.getTerminator()).getValues()[0]);
      out.push_back(isMask ? arith::SelectOp::create(b, loc, y, s, f32(-INFINITY)).getResult()
                           : y);
    }
    map.map(o.getResult(), fromElements(b.getF32Type(), out));
    return success();
  }

  LogicalResult lowerBlockStore(BlockStoreOp o) {
    const ViewInfo &view = views[o.getView()];
    SmallVector<Value> lead = mapped(o.getIndices());
    Value row0 = lead.pop_back_val();
    Value bound = map.lookup(o.getBound());
    Value val = map.lookup(o.getValue());
    auto ty = o.getValue().getType();
    for (int64_t slot = 0; slot < 2 * mTiles; ++slot) {
      int64_t t = slot / 2, h = slot % 2;
      Value row = add(row0, add(rowBase, idx(16 * t + 8 * h)));
      Value ok = ult(row, bound);
      if (ty.getRank() == 1) // a row vector (the logsumexp): lane c == 0 of each quad writes
        ok = arith::AndIOp::create(
            b, loc, ok,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, laneC, idx(0)));
      auto guard = scf::IfOp::create(b, loc, ok, false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(guard.thenBlock());
      if (ty.getRank() == 1) {
        SmallVector<Value> at(lead);
        at.push_back(row);
        Value x = extract(val, slot);
        if (view.elementType != x.getType())
          x = arith::TruncFOp::create(b, loc, view.elementType, x);
        LLVM::StoreOp::create(b, loc, x, globalAddress(view, at), 4);
        continue;
      }
      int64_t nTiles = ty.getDimSize(1) / 8;
      for (int64_t j = 0; j < nTiles; ++j) {
        SmallVector<Value> at(lead);
        at.push_back(row);
        at.push_back(add(mul(laneC, idx(2)), idx(8 * j)));
        int64_t e = 4 * (t * nTiles + j) + 2 * h;
        Value x = extract(val, e), y = extract(val, e + 1);
        if (view.elementType.isF32()) {
          Value addr = globalAddress(view, at);
          LLVM::StoreOp::create(b, loc, fromElements(b.getF32Type(), {x, y}), addr, 8);
        } else {
          LLVM::StoreOp::create(b, loc, pack(x, y, view.elementType), globalAddress(view, at), 4);
        }
      }
    }
    return success();
  }

  OpBuilder &b;
  Location loc;
  int64_t br, mTiles, warps, threads; // mTiles: m16 tiles (16 rows each) per warp
  gpu::GPUModuleOp gpuModule;
  bool copiesAtBarrier; // copy-issue=at-barrier
  bool qInShared;       // q-operand=shared
  bool wgmma;           // mma=wgmma: warpgroup MMAs, shared tiles in the 128-byte-swizzle layout
  DenseMap<Value, int64_t> tileRows; // rows of each shared tile (wgmma descriptors)
  gpu::GPUFuncOp kernelOp;
  IRMapping map;
  DenseMap<Value, ViewInfo> views;
  DenseMap<Value, int64_t> tileRowBytes; // blocks in shared memory (their mapped value is the base)
  SmallVector<Value> pendingTiles;       // tiles whose copy groups are in flight, oldest first
  SmallVector<DeferredCopy> deferred;    // copies requested, waiting for a barrier
  SmallVector<StringRef> dirtyBuffers;   // shared buffers read since the last barrier
  llvm::StringMap<int64_t> sharedBytes;
  Value tidx, laneG, laneC, warpRow, rowBase, ldMatHi, ldMatLo, ldRow;
};

/// math ops to the NVVM approximate intrinsics (ex2.approx.ftz, lg2.approx.ftz): one
/// instruction each, and the PTX never needs libdevice. convert-gpu-to-nvvm would send math ops
/// and llvm.intr.exp2 to libdevice, so these become intrinsic calls it leaves alone.
struct MathToIntrinsics : RewritePattern {
  MathToIntrinsics(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}

  /// Applies a scalar f32 intrinsic to every element.
  static Value call(PatternRewriter &rw, Location loc, StringRef name, Value x) {
    auto vt = dyn_cast<VectorType>(x.getType());
    Type f32 = rw.getF32Type();
    auto one = [&](Value v) -> Value {
      return LLVM::CallIntrinsicOp::create(rw, loc, f32, rw.getStringAttr(name), ValueRange{v})
          .getResult(0);
    };
    if (!vt)
      return one(x);
    SmallVector<Value> out;
    for (int64_t i = 0; i < vt.getNumElements(); ++i)
      out.push_back(one(vector::ExtractOp::create(rw, loc, x, i)));
    return vector::FromElementsOp::create(rw, loc, vt, out);
  }

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    Location loc = op->getLoc();
    if (!isa<math::Exp2Op, math::ExpOp, math::LogOp, math::Log2Op, math::TanhOp>(op))
      return failure();
    Value x = op->getOperand(0);
    Type t = x.getType();
    if (!getElementTypeOrSelf(t).isF32())
      return rw.notifyMatchFailure(op, "only f32 is lowered without libdevice");
    auto c = [&](double v) -> Value {
      if (auto vt = dyn_cast<VectorType>(t))
        return arith::ConstantOp::create(
            rw, loc, vt, DenseElementsAttr::get(vt, rw.getF32FloatAttr(v)));
      return arith::ConstantOp::create(rw, loc, t, rw.getF32FloatAttr(v));
    };
    auto exp2 = [&](Value v) { return call(rw, loc, "llvm.nvvm.ex2.approx.ftz.f", v); };
    auto log2 = [&](Value v) { return call(rw, loc, "llvm.nvvm.lg2.approx.ftz.f", v); };
    Value r;
    if (isa<math::Exp2Op>(op))
      r = exp2(x);
    else if (isa<math::ExpOp>(op))
      r = exp2(arith::MulFOp::create(rw, loc, x, c(kLog2E)));
    else if (isa<math::Log2Op>(op))
      r = log2(x);
    else if (isa<math::LogOp>(op))
      r = arith::MulFOp::create(rw, loc, log2(x), c(kLn2));
    else { // tanh x = 1 - 2 / (exp(2x) + 1): saturates to +-1, exact enough for scores
      Value e = exp2(arith::MulFOp::create(rw, loc, x, c(2 * kLog2E)));
      Value q = arith::DivFOp::create(rw, loc, c(2.0), arith::AddFOp::create(rw, loc, e, c(1.0)));
      r = arith::SubFOp::create(rw, loc, c(1.0), q);
    }
    rw.replaceOp(op, r);
    return success();
  }
};

/// Lays the module's named shared buffers out one after the other (128-byte aligned, in name
/// order) in the dynamic shared memory, rewrites their uses to offsets from its base, and records
/// the size per kernel on `module` as tilefuse.shared_bytes = {kernel = bytes}: the launcher
/// passes it (and opts in above 48 KiB). Static buffers would cap a kernel at 48 KiB.
static void placeInDynamicSharedMemory(ModuleOp module, gpu::GPUModuleOp gm) {
  MLIRContext *ctx = module.getContext();
  SmallVector<LLVM::GlobalOp> buffers;
  for (auto glob : gm.getOps<LLVM::GlobalOp>())
    if (glob.getAddrSpace() == 3 && glob.getSymName().starts_with("tilefuse_smem_"))
      buffers.push_back(glob);
  llvm::sort(buffers, [](LLVM::GlobalOp x, LLVM::GlobalOp y) {
    return x.getSymName() < y.getSymName();
  });
  llvm::StringMap<int64_t> offsets;
  int64_t total = 0;
  for (LLVM::GlobalOp glob : buffers) {
    offsets[glob.getSymName()] = total;
    int64_t bytes = cast<LLVM::LLVMArrayType>(glob.getType()).getNumElements();
    total += llvm::alignTo(bytes, 1024); // wgmma's swizzle atoms are 1024-byte aligned
  }
  SmallVector<NamedAttribute> perKernel;
  for (auto fn : gm.getOps<gpu::GPUFuncOp>())
    perKernel.push_back(NamedAttribute(fn.getNameAttr(),
                                       IntegerAttr::get(IntegerType::get(ctx, 64), total)));
  module->setAttr("tilefuse.shared_bytes", DictionaryAttr::get(ctx, perKernel));
  if (buffers.empty())
    return;

  OpBuilder gb = OpBuilder::atBlockBegin(gm.getBody());
  StringRef dynName = "tilefuse_dynamic_smem";
  auto i8 = IntegerType::get(ctx, 8);
  LLVM::GlobalOp::create(gb, gm.getLoc(), LLVM::LLVMArrayType::get(i8, 0), /*isConstant=*/false,
                         LLVM::Linkage::External, dynName, Attribute(), /*alignment=*/1024,
                         /*addrSpace=*/3);
  auto ptr3 = LLVM::LLVMPointerType::get(ctx, 3);
  gm.walk([&](LLVM::AddressOfOp addr) {
    auto it = offsets.find(addr.getGlobalName());
    if (it == offsets.end())
      return;
    OpBuilder rb(addr);
    Value base = LLVM::AddressOfOp::create(rb, addr.getLoc(), ptr3, dynName);
    Value off = LLVM::ConstantOp::create(rb, addr.getLoc(), rb.getI64Type(), it->second);
    addr.replaceAllUsesWith(
        LLVM::GEPOp::create(rb, addr.getLoc(), ptr3, i8, base, ValueRange{off}).getResult());
    addr.erase();
  });
  for (LLVM::GlobalOp glob : buffers)
    glob.erase();
}

struct TileToNVVMPass : public tilefuse::impl::TileToNVVMBase<TileToNVVMPass> {
  using TileToNVVMBase::TileToNVVMBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    // The configuration: the module's tile.config, the options where it sets nothing
    // (tilefuse/dialect/KernelConfig.h).
    TileConfig options;
    options.rowsPerWarp = rowsPerWarp;
    for (auto [key, value] : {std::pair<StringRef, StringRef>{"mma", mma},
                              {"q-operand", qOperand},
                              {"copy-issue", copyIssue}})
      if (llvm::Error error = options.set(key, value)) {
        module.emitError("tile-to-nvvm: ") << llvm::toString(std::move(error));
        return signalPassFailure();
      }
    FailureOr<TileConfig> config = tile::configForPass(module, options);
    if (failed(config))
      return signalPassFailure();
    int64_t warpRows = *config->rowsPerWarp;
    bool wgmma = config->mma == MmaKind::Wgmma, qInShared = config->qOperand == QOperand::Shared;
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto target = NVVM::NVVMTargetAttr::get(ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", chip,
                                            features);
    auto gm = gpu::GPUModuleOp::create(b, module.getLoc(), kGpuModuleName,
                                       b.getArrayAttr({target}));
    SmallVector<func::FuncOp> kernels;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal())
        kernels.push_back(fn);
    for (func::FuncOp fn : kernels) {
      // The program's row count fixes the warps: read it from the Q block load.
      int64_t br = 0;
      fn.walk([&](BlockLoadOp load) {
        if (load.getView() == fn.getArgument(0))
          br = load.getType().getDimSize(0);
      });
      if (warpRows != 16 && warpRows != 32) {
        fn.emitError("tile-to-nvvm: rows-per-warp must be 16 or 32, not ") << warpRows;
        return signalPassFailure();
      }
      if (br <= 0 || br % warpRows || br / warpRows > 16) {
        fn.emitError("tile-to-nvvm: Br must be a multiple of ")
            << warpRows << " (rows per warp) for at most 16 warps (got " << br << ")";
        return signalPassFailure();
      }
      if (fn.getNumArguments() != launch_abi::kTensorCount) {
        fn.emitError("tile-to-nvvm: kernels take (Q, K, V, O, LSE)");
        return signalPassFailure();
      }
      OpBuilder kb = OpBuilder::atBlockEnd(gm.getBody());
      if (wgmma) {
        // Warpgroups of 4 warps x 16 rows; sm_90a only (wgmma does not exist elsewhere).
        if (chip != "sm_90a" || warpRows != 16 || br % 64 || qInShared) {
          fn.emitError("tile-to-nvvm: mma=wgmma needs chip=sm_90a, rows-per-warp=16, "
                       "q-operand=registers and Br a multiple of 64 (got chip=")
              << chip << ", rows-per-warp=" << warpRows
              << ", q-operand=" << qOperandName(*config->qOperand) << ", Br=" << br << ")";
          return signalPassFailure();
        }
      }
      KernelEmitter emitter(kb, fn.getLoc(), br, warpRows / 16, module, gm,
                            config->copyIssue == CopyIssue::AtBarrier, qInShared, wgmma);
      if (failed(emitter.emit(fn)))
        return signalPassFailure();
      fn.erase();
    }
    placeInDynamicSharedMemory(module, gm);
    RewritePatternSet patterns(ctx);
    patterns.add<MathToIntrinsics>(ctx);
    if (failed(applyPatternsGreedily(gm, std::move(patterns))))
      return signalPassFailure();
    // Let a multiply and an add fuse into one FFMA (s * scale - m before ex2, the accumulator
    // rescale): without `contract` NVPTX emits mul.rn / sub.rn, which ptxas may not fuse.
    auto contract = arith::FastMathFlagsAttr::get(ctx, arith::FastMathFlags::contract);
    gm.walk([&](arith::ArithFastMathInterface op) {
      op->setAttr(op.getFastMathAttrName(), contract);
    });
  }
};

} // namespace
