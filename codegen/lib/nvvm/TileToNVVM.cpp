//===- TileToNVVM.cpp - tiled tile IR to NVVM kernels (mma.sync) ---------===//
//
// One program of the tiled form becomes one CTA of 32 x warps threads, warps = Br / 16. Every
// block value gets a per-thread representation fixed by its shape and role:
//
//   f32/i1 Br x C block   accumulator layout of mma.m16n8: vector<C/8*4>, element 4j+e holds
//                         (row 16w + g + 8*(e/2), col 8j + 2c + e%2), g = lane/4, c = lane%4
//   f32/i1 Br row vector  vector<2>: rows 16w + g and 16w + g + 8
//   bf16/f16 block read   m16k16 A fragments (vector<D/16*4 x i32>, straight from global)
//     as a dot's lhs
//   bf16/f16 block read   a shared-memory tile, rows of 16-byte chunks XOR-swizzled by row % 8,
//     as a dot's rhs      read with ldmatrix (.trans for V)
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
#include "tilefuse/dialect/TileMath.h"
#include "tilefuse/dialect/TileOps.h"

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
                gpu::GPUModuleOp gm, bool copiesAtBarrier)
      : b(b), loc(loc), br(br), mTiles(mTiles), warps(br / (16 * mTiles)),
        threads(32 * (br / (16 * mTiles))), gpuModule(gm), copiesAtBarrier(copiesAtBarrier) {}

  LogicalResult emit(func::FuncOp fn) {
    MLIRContext *ctx = b.getContext();
    auto gptr = LLVM::LLVMPointerType::get(ctx, 1);
    Type idxTy = b.getIndexType();
    SmallVector<Type> argTypes(5, gptr);
    argTypes.append(5 + 14, b.getI64Type()); // B H Hkv M N, then 14 strides: .u64 in the ABI
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
    for (unsigned i = 5; i < entry.getNumArguments(); ++i)
      scalars.push_back(arith::IndexCastOp::create(b, loc, idxTy, entry.getArgument(i)));
    auto arg = [&](unsigned i) -> Value {
      return i < 5 ? Value(entry.getArgument(i)) : scalars[i - 5];
    };
    Value B = arg(5), H = arg(6), Hkv = arg(7), M = arg(8), N = arg(9);
    auto stride = [&](unsigned i) { return arg(10 + i); };
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
    rowBase = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, warp, idx(16 * mTiles)), laneG);
    // ldmatrix: lane l addresses row l % 8 of matrix l / 8.
    ldMat = arith::DivUIOp::create(b, loc, lane, idx(8));
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
  SmallVector<StringRef> allBuffers() { return {"tilefuse_smem_k0", "tilefuse_smem_k1", "tilefuse_smem_v"}; }

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
                                    name, Attribute(), /*alignment=*/128, /*addrSpace=*/3);
      have = bytes;
    }
    return LLVM::AddressOfOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 3),
                                     name);
  }

  Value sharedAddress(Value base, Value byteOffset) {
    Value off64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), byteOffset);
    return LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base, ValueRange{off64});
  }

  /// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile with `rowBytes`.
  Value swizzled(Value row, Value chunk, int64_t rowBytes) {
    Value sw = arith::XOrIOp::create(b, loc, chunk, arith::AndIOp::create(b, loc, row, idx(7)));
    return add(mul(row, idx(rowBytes)), mul(sw, idx(16)));
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

  /// The role of a loaded block: A fragments (dot lhs) or a shared tile (dot rhs).
  enum class Role { Fragments, KeyTile, ValueTile };
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
      return Role::Fragments;
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
      if (rows != br || d % 16)
        return o.emitOpError("tile-to-nvvm: the Q block must be Br x (multiple of 16)");
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
      return o.emitOpError("tile-to-nvvm: K/V head dimension must be a multiple of 64");
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
    } else {
      base = sharedBuffer("tilefuse_smem_v", tileBytes);
      written = {"tilefuse_smem_v"};
    }
    int64_t chunks = rows * chunksPerRow;
    // The copy, as a closure over the addresses computed here: it runs now, or after the next
    // barrier when a warp may still read the buffer it overwrites (write after read).
    ViewInfo v = view;
    auto emit = [this, v, lead, row0, bound, lastRow, base, chunks, chunksPerRow,
                 rowBytes]() {
      for (int64_t i = 0; i * threads < chunks; ++i) {
        Value chunkIdx = add(tidx, idx(i * threads));
        Value r = arith::DivUIOp::create(b, loc, chunkIdx, idx(chunksPerRow));
        Value ch = arith::RemUIOp::create(b, loc, chunkIdx, idx(chunksPerRow));
        Value gRow = add(row0, r);
        SmallVector<Value> at(lead);
        at.push_back(minU(gRow, lastRow));
        at.push_back(mul(ch, idx(8)));
        Value bytes = arith::SelectOp::create(b, loc, ult(gRow, bound), i32(16), i32(0));
        auto copy = [&] {
          NVVM::CpAsyncOp::create(b, loc, sharedAddress(base, swizzled(r, ch, rowBytes)),
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
      gpu::BarrierOp::create(b, loc);
      dirtyBuffers.clear(); // every earlier read is done too
      flushDeferred();
    }
  }

  /// ldmatrix.x4 from a swizzled tile: lane l reads row `row0 + (l/8 / rowsMatDiv)...`.
  SmallVector<Value> ldmatrix4(Value base, int64_t rowBytes, Value row, Value chunk, bool trans) {
    Value addr = sharedAddress(base, swizzled(row, chunk, rowBytes));
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

  LogicalResult lowerBlockDot(BlockDotOp o) {
    auto resTy = o.getType();
    int64_t cols = resTy.getDimSize(1), k = o.getLhs().getType().getDimSize(1);
    if (resTy.getDimSize(0) != br || cols % 16 || k % 16)
      return o.emitOpError("tile-to-nvvm: dot shapes must be Br x (16n) x (16k)");
    auto rowBytesIt = tileRowBytes.find(o.getRhs());
    if (rowBytesIt == tileRowBytes.end())
      return o.emitOpError("tile-to-nvvm: the rhs must be a block loaded into shared memory");
    Value base = map.lookup(o.getRhs());
    int64_t rowBytes = rowBytesIt->second;
    Type elt = o.getRhs().getType().getElementType();
    waitForTile(o.getRhs());

    // A fragments per m-tile and k-tile: loaded Q, or the f32 lhs (P, whose columns are the
    // contraction) packed to the rhs element type.
    int64_t kTiles = k / 16;
    SmallVector<SmallVector<Value, 4>> aFrag(mTiles * kTiles);
    Value lhs = map.lookup(o.getLhs());
    if (o.getLhs().getType().getElementType().isF32()) {
      int64_t perTile = k / 8 * 4; // P's elements per m-tile
      for (int64_t t = 0; t < mTiles; ++t)
        for (int64_t kt = 0; kt < kTiles; ++kt) {
          int64_t e0 = t * perTile + 4 * (2 * kt), e1 = t * perTile + 4 * (2 * kt + 1);
          aFrag[t * kTiles + kt] = {pack(extract(lhs, e0), extract(lhs, e0 + 1), elt),
                                    pack(extract(lhs, e0 + 2), extract(lhs, e0 + 3), elt),
                                    pack(extract(lhs, e1), extract(lhs, e1 + 1), elt),
                                    pack(extract(lhs, e1 + 2), extract(lhs, e1 + 3), elt)};
        }
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

    Value matHi = arith::DivUIOp::create(b, loc, ldMat, idx(2)); // l/8/2
    Value matLo = arith::RemUIOp::create(b, loc, ldMat, idx(2)); // (l/8)%2
    for (int64_t kt = 0; kt < k / 16; ++kt)
      for (int64_t jp = 0; jp < nTiles / 2; ++jp) {
        SmallVector<Value> m;
        if (o.getTransposeRhs()) {
          // K tile [n][k]: matrices (n-tile 2jp | 2jp+1) x (k chunk 2kt | 2kt+1).
          Value row = add(idx(16 * jp), add(mul(matHi, idx(8)), ldRow));
          Value chunk = add(idx(2 * kt), matLo);
          m = ldmatrix4(base, rowBytes, row, chunk, /*trans=*/false);
        } else {
          // V tile [k][n]: matrices (k rows 16kt | 16kt+8) x (n chunk 2jp | 2jp+1), transposed.
          Value row = add(idx(16 * kt), add(mul(matLo, idx(8)), ldRow));
          Value chunk = add(idx(2 * jp), matHi);
          m = ldmatrix4(base, rowBytes, row, chunk, /*trans=*/true);
        }
        // Each B fragment serves every m-tile of the warp.
        for (int64_t t = 0; t < mTiles; ++t) {
          auto &a = aFrag[t * kTiles + kt];
          acc[t * nTiles + 2 * jp] = mma(a, {m[0], m[1]}, acc[t * nTiles + 2 * jp], elt);
          acc[t * nTiles + 2 * jp + 1] =
              mma(a, {m[2], m[3]}, acc[t * nTiles + 2 * jp + 1], elt);
        }
      }
    // The tile's buffer (either key buffer, when carried) has readers until the next barrier.
    for (StringRef n : o.getTransposeRhs()
                           ? SmallVector<StringRef>{"tilefuse_smem_k0", "tilefuse_smem_k1"}
                           : SmallVector<StringRef>{"tilefuse_smem_v"})
      if (!llvm::is_contained(dirtyBuffers, n))
        dirtyBuffers.push_back(n);
    SmallVector<Value> flat;
    for (auto &t : acc)
      flat.append(t.begin(), t.end());
    map.map(o.getResult(), fromElements(b.getF32Type(), flat));
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
  gpu::GPUFuncOp kernelOp;
  IRMapping map;
  DenseMap<Value, ViewInfo> views;
  DenseMap<Value, int64_t> tileRowBytes; // blocks in shared memory (their mapped value is the base)
  SmallVector<Value> pendingTiles;       // tiles whose copy groups are in flight, oldest first
  SmallVector<DeferredCopy> deferred;    // copies requested, waiting for a barrier
  SmallVector<StringRef> dirtyBuffers;   // shared buffers read since the last barrier
  llvm::StringMap<int64_t> sharedBytes;
  Value tidx, laneG, laneC, rowBase, ldMat, ldRow;
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

struct TileToNVVMPass : public tilefuse::impl::TileToNVVMBase<TileToNVVMPass> {
  using TileToNVVMBase::TileToNVVMBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
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
      if (rowsPerWarp != 16 && rowsPerWarp != 32) {
        fn.emitError("tile-to-nvvm: rows-per-warp must be 16 or 32, not ") << rowsPerWarp.getValue();
        return signalPassFailure();
      }
      if (br <= 0 || br % rowsPerWarp || br / rowsPerWarp > 16) {
        fn.emitError("tile-to-nvvm: Br must be a multiple of ")
            << rowsPerWarp.getValue() << " (rows per warp) for at most 16 warps (got " << br
            << ")";
        return signalPassFailure();
      }
      if (fn.getNumArguments() != 5) {
        fn.emitError("tile-to-nvvm: kernels take (Q, K, V, O, LSE)");
        return signalPassFailure();
      }
      OpBuilder kb = OpBuilder::atBlockEnd(gm.getBody());
      if (copyIssue != "eager" && copyIssue != "at-barrier") {
        fn.emitError("tile-to-nvvm: copy-issue must be eager or at-barrier, not '")
            << copyIssue << "'";
        return signalPassFailure();
      }
      KernelEmitter emitter(kb, fn.getLoc(), br, rowsPerWarp / 16, module, gm,
                            copyIssue == "at-barrier");
      if (failed(emitter.emit(fn)))
        return signalPassFailure();
      fn.erase();
    }
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
