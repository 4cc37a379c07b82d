//===- KernelToNVVM.cpp - kernel functions and the grid to NVVM -----------===//
//
// A kernel function (Q, K, V, O, LSE) becomes a gpu.func with the launch ABI's parameters
// (tilefuse/runtime/device/LaunchAbi.h, the one definition the runtime and the AOT launcher
// follow too): the tensors' base pointers, the sizes and the strides (in elements, innermost
// stride 1 implied), all 64-bit. Each view is rebuilt from them as the KernelView struct its
// converted type is; a dimension the ABI has no size for (D) is the type's static size. The program grid,
// scf.forall (batch, head, row block), maps to (blockIdx.z, blockIdx.y, blockIdx.x). A split-KV
// kernel (tile-split-kv) also takes the workspace pointers and S, and its grid's x is
// split * row blocks + row block. A paged kernel (tile-paged-kv) takes the page table, the
// lengths, the table's row stride and the page size before those; its K and V views are the
// caches, page_size rows a page. A varlen kernel (tile-varlen) takes the queries' and the keys'
// sequence offsets after the base (and paged) parameters; its views are packed batches, whose
// batch index counts rows (batch stride = row stride, the ABI's batch strides unread), all but
// a paged kernel's caches.
//
//===----------------------------------------------------------------------===//
#include "TGPUToNVVMPatterns.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "tilefuse/dialect/KernelConfig.h"
#include "tilefuse/dialect/TileGPUOps.h"
#include "tilefuse/dialect/TileOps.h"
#include "tilefuse/runtime/device/LaunchAbi.h"

#include <limits>

using namespace mlir;
using namespace tilefuse;
using namespace tilefuse::nvvm;

namespace {

struct ForallToBlockIds : OpConversionPattern<scf::ForallOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(scf::ForallOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    // A persistent grid (tgpu-persistent): its programs are blockIdx.x of a one-dimensional
    // grid of as many CTAs as the launcher starts.
    MLIRContext *ctx = op.getContext();
    if (op.getRank() == 1 && op.getOutputs().empty() &&
        op.getMappingAttr() ==
            ArrayAttr::get(ctx, {tile::GridDimAttr::get(ctx, tile::GridDim::Program)})) {
      Value program = gpu::BlockIdOp::create(rewriter, op.getLoc(), gpu::Dimension::x);
      Block *body = op.getBody();
      rewriter.eraseOp(body->getTerminator());
      rewriter.inlineBlockBefore(body, op, ValueRange{program});
      rewriter.eraseOp(op);
      return success();
    }
    // The grid's dimensions by their mapping (tile-tiling, tile-split-kv), not by position
    // alone: an unmapped forall may have lost unit dimensions to canonicalization.
    if ((op.getRank() != 3 && op.getRank() != 4) || !op.getOutputs().empty() ||
        op.getMappingAttr() != tile::gridMapping(op.getContext(), op.getRank() == 4))
      return op.emitOpError("the GPU grid is (batch, head, row block[, key split]): a rank-3 "
                            "or rank-4 scf.forall mapped to #tile.grid<batch, head, row_block"
                            "[, split]>, or a persistent one (#tile.grid<program>), without "
                            "outputs");
    Location loc = op.getLoc();
    SmallVector<Value> ids = {gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::z),
                              gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::y),
                              gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::x)};
    if (op.getRank() == 4) {
      // blockIdx.x = split * row blocks + row block (LaunchAbi.h).
      OpFoldResult rows = op.getMixedUpperBound()[2];
      Value rowBlocks = isa<Value>(rows) ? rewriter.getRemappedValue(cast<Value>(rows))
                                         : getValueOrCreateConstantIndexOp(rewriter, loc, rows);
      Value x = ids.back();
      ids.back() = arith::RemUIOp::create(rewriter, loc, x, rowBlocks);
      ids.push_back(arith::DivUIOp::create(rewriter, loc, x, rowBlocks));
    }
    Block *body = op.getBody();
    Operation *terminator = body->getTerminator();
    rewriter.eraseOp(terminator);
    rewriter.inlineBlockBefore(body, op, ids);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

namespace {

/// The launch attributes every kernel carries: its block, and the register budget's bounds.
void setLaunchAttributes(gpu::GPUFuncOp kernel, int64_t threads, int64_t ctasPerSm) {
  OpBuilder b(kernel);
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
  // setmaxnreg and the register budget need both (shared/DESIGN.md, toolchain facts).
  kernel->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({(int32_t)threads, 1, 1}));
  // The register budget (TileConfig ctas_per_sm): CTAs an SM must hold at once.
  kernel->setAttr("nvvm.minctasm", b.getI32IntegerAttr(ctasPerSm));
}

/// Moves `fn`'s body into the kernel's entry block, after the code that rebuilt its views.
LogicalResult moveBody(func::FuncOp fn, gpu::GPUFuncOp kernel, ArrayRef<Value> views) {
  Block &entry = kernel.getBody().front();
  Block &body = fn.getBody().front();
  if (!fn.getBody().hasOneBlock())
    return fn.emitError("a GPU kernel's body is one block (structured control flow)");
  for (auto [arg, view] : llvm::zip(body.getArguments(), views))
    arg.replaceAllUsesWith(view);
  Operation *ret = body.getTerminator();
  entry.getOperations().splice(entry.end(), body.getOperations(), body.begin(),
                               std::prev(body.end()));
  OpBuilder b = OpBuilder::atBlockEnd(&entry);
  gpu::ReturnOp::create(b, ret->getLoc());
  return success();
}

/// A phase of a derived backward (tile-outline-backward-phases): the backward ABI's views
/// (launch_abi::kBackwardTensors), each from its pointer, the sizes and its strides.
FailureOr<gpu::GPUFuncOp> createBackwardKernelFunction(func::FuncOp fn,
                                                       gpu::GPUModuleOp gpuModule,
                                                       int64_t threads) {
  namespace abi = launch_abi;
  MLIRContext *ctx = fn.getContext();
  auto argumentTypes = fn.getArgumentTypes();
  if (fn.getNumArguments() != abi::kBackwardTensorCount || !fn.getResultTypes().empty() ||
      !llvm::all_of(argumentTypes, [](Type t) { return isa<MemRefType>(t); }))
    return fn.emitError() << "a backward kernel takes the views (Q, K, V, O, dO, LSE, dQ, dK, "
                             "dV, D, dQ_accum) and returns nothing";
  for (auto [i, t] : llvm::enumerate(argumentTypes)) {
    if (cast<MemRefType>(t).getRank() != abi::kBackwardTensors[i].rank)
      return fn.emitError() << "view #" << i << " (" << abi::kBackwardTensors[i].name
                            << ") has rank " << cast<MemRefType>(t).getRank()
                            << ", the backward launch ABI's has "
                            << abi::kBackwardTensors[i].rank;
  }
  FailureOr<TileConfig> config = tile::readModuleConfig(fn);
  if (failed(config))
    return failure();
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Location loc = fn.getLoc();
  SmallVector<Type> params(abi::kBackwardTensorCount, LLVM::LLVMPointerType::get(ctx, 1));
  params.append(abi::kSizeCount + abi::kBackwardStrideCount, b.getI64Type());
  auto kernel = gpu::GPUFuncOp::create(b, loc, fn.getSymName(), b.getFunctionType(params, {}));
  setLaunchAttributes(kernel, threads, config->ctasPerSm.value_or(1));

  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  TGPUToNVVMTypeConverter converter(ctx);
  auto narrow = [&](Value x) { return LLVM::TruncOp::create(b, loc, b.getI32Type(), x); };
  SmallVector<Value> views;
  for (auto [i, t] : llvm::enumerate(argumentTypes)) {
    auto type = cast<MemRefType>(t);
    const abi::Tensor &tensor = abi::kBackwardTensors[i];
    Value v = LLVM::PoisonOp::create(b, loc, converter.convertType(type));
    v = LLVM::InsertValueOp::create(b, loc, v, entry.getArgument(i), ArrayRef<int64_t>{0});
    for (int64_t d = 0; d < type.getRank(); ++d) {
      int sizeIndex = abi::sizeIndex(tensor.dimensions[d]);
      Value size = sizeIndex >= 0
                       ? narrow(entry.getArgument(abi::kBackwardFirstSize + sizeIndex))
                       : LLVM::ConstantOp::create(b, loc, b.getI32Type(), type.getDimSize(d))
                             .getResult();
      Value stride =
          d + 1 < type.getRank()
              ? narrow(entry.getArgument(abi::kBackwardFirstStride +
                                         abi::backwardFirstStride(int(i)) + int(d)))
              : LLVM::ConstantOp::create(b, loc, b.getI32Type(), 1).getResult();
      v = LLVM::InsertValueOp::create(b, loc, v, size, ArrayRef<int64_t>{1, d});
      v = LLVM::InsertValueOp::create(b, loc, v, stride, ArrayRef<int64_t>{2, d});
    }
    views.push_back(UnrealizedConversionCastOp::create(b, loc, type, v).getResult(0));
  }
  if (failed(moveBody(fn, kernel, views)))
    return failure();
  return kernel;
}

} // namespace

FailureOr<gpu::GPUFuncOp> tilefuse::nvvm::createKernelFunction(func::FuncOp fn,
                                                               gpu::GPUModuleOp gpuModule,
                                                               int64_t threads) {
  MLIRContext *ctx = fn.getContext();
  namespace abi = launch_abi;
  if (fn->hasAttr(tile::kBackwardPhaseAttr))
    return createBackwardKernelFunction(fn, gpuModule, threads);
  // tile-paged-kv's kernels take the page table and lengths after the ABI's views, and
  // tile-split-kv's the workspace views and the split count after those.
  bool paged = fn->hasAttr(tile::kPagedKVAttr);
  bool split = fn->hasAttr(tile::kSplitKVAttr);
  bool varlen = fn->hasAttr(tile::kVarlenAttr);
  unsigned viewCount = abi::kTensorCount;
  unsigned pagedArguments = paged ? abi::kPagedPointerCount : 0;
  unsigned arguments = viewCount + pagedArguments + (varlen ? abi::kVarlenPointerCount : 0) +
                       (split ? abi::kSplitParameterCount : 0);
  auto argumentTypes = fn.getArgumentTypes();
  if (fn.getNumArguments() != arguments || !fn.getResultTypes().empty() ||
      !llvm::all_of(argumentTypes.take_front(arguments - (split ? 1 : 0)),
                    [](Type t) { return isa<MemRefType>(t); }) ||
      (split && !argumentTypes.back().isIndex()))
    return fn.emitError() << "a " << (paged ? "paged " : "") << (varlen ? "varlen " : "")
                          << (split ? "split-KV " : "")
                          << "GPU kernel takes the views (Q, K, V, O, LSE"
                          << (paged ? ", page table, lengths" : "")
                          << (varlen ? ", query offsets, key offsets" : "")
                          << (split ? ", O_part, LSE_part, counters), the split count" : ")")
                          << " and returns nothing";
  for (auto [i, t] : llvm::enumerate(argumentTypes.take_front(viewCount))) {
    auto m = cast<MemRefType>(t);
    if (m.getRank() != abi::kTensors[i].rank)
      return fn.emitError() << "view #" << i << " (" << abi::kTensors[i].name << ") has rank "
                            << m.getRank() << ", the launch ABI's has "
                            << abi::kTensors[i].rank;
  }
  int64_t blockM = 0;
  bool packGqa = false;
  FailureOr<TileConfig> config = tile::readModuleConfig(fn);
  if (failed(config))
    return failure();
  if (split) {
    if (!config->blockM)
      return fn.emitError("a split-KV kernel needs its Br in the module's tile.config (the "
                          "counters' row blocks)");
    blockM = *config->blockM;
    packGqa = config->packGqa.value_or(false);
  }
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Location loc = fn.getLoc();
  auto global = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> params(abi::kTensorCount, global);
  params.append(abi::kSizeCount + abi::kStrideCount, b.getI64Type());
  if (paged) {
    params.append(abi::kPagedPointerCount, global);
    params.append(abi::kPagedSizeCount, b.getI64Type()); // table_b, page_size
  }
  if (varlen)
    params.append(abi::kVarlenPointerCount, global);
  if (split) {
    params.append(abi::kSplitPointerCount, global);
    params.push_back(b.getI64Type()); // S
  }
  // TMA kernels (tgpu-warp-specialize wrote tgpu.tensor_map of K and V, and of Q where its
  // producer loads Q; tgpu-store-output-by-tma O's): K's and V's tensor maps, then Q's, then
  // O's, by value, last.
  SmallVector<tgpu::TensorMapOp> maps;
  bool queryMap = false, outputMap = false;
  fn.walk([&](tgpu::TensorMapOp map) {
    maps.push_back(map);
    auto view = dyn_cast<BlockArgument>(map.getView());
    queryMap |= view && view.getArgNumber() == 0;
    outputMap |= view && view.getArgNumber() == 3;
  });
  if (outputMap && !queryMap)
    return fn.emitOpError("stores O with TMA (o_map) without loading Q with TMA: the launch "
                          "ABI's o_map follows q_map");
  unsigned firstMap = params.size();
  if (!maps.empty())
    params.append(abi::tensorMapCount(queryMap, outputMap), LLVM::LLVMPointerType::get(ctx));
  auto kernel = gpu::GPUFuncOp::create(b, loc, fn.getSymName(), b.getFunctionType(params, {}));
  // The maps are grid constants: the kernel reads them in place, in parameter space, and TMA
  // takes their generic address. convert-gpu-to-nvvm keeps neither llvm.byval nor
  // nvvm.grid_constant of a gpu.func's arguments, so the function lists them and
  // tilefuse-mark-grid-constants sets both on the llvm.func it becomes.
  if (!maps.empty()) {
    SmallVector<int32_t> positions;
    for (unsigned i = firstMap; i < params.size(); ++i)
      positions.push_back(int32_t(i));
    kernel->setAttr(kGridConstantsAttr, b.getDenseI32ArrayAttr(positions));
  }
  setLaunchAttributes(kernel, threads, config->ctasPerSm.value_or(1));

  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto stride = [&](int s) { return entry.getArgument(abi::kFirstStride + s); };
  TGPUToNVVMTypeConverter converter(ctx);
  // Truncated once here: the parameters are 64-bit in the ABI, the kernel's index arithmetic
  // is 32-bit.
  auto narrow = [&](Value x) { return LLVM::TruncOp::create(b, loc, b.getI32Type(), x); };
  auto constant = [&](int64_t x) {
    return LLVM::ConstantOp::create(b, loc, b.getI32Type(), x).getResult();
  };
  auto size = [&](abi::SizeParameter p) {
    return narrow(entry.getArgument(abi::kFirstSize + abi::sizeIndex(p)));
  };
  // A view of `type` from its pointer, sizes and strides (i32, as the converted type holds).
  auto makeView = [&](MemRefType type, Value pointer, ArrayRef<Value> sizes,
                      ArrayRef<Value> strides) {
    Value v = LLVM::PoisonOp::create(b, loc, converter.convertType(type));
    v = LLVM::InsertValueOp::create(b, loc, v, pointer, ArrayRef<int64_t>{0});
    for (int64_t d = 0; d < type.getRank(); ++d) {
      v = LLVM::InsertValueOp::create(b, loc, v, sizes[d], ArrayRef<int64_t>{1, d});
      v = LLVM::InsertValueOp::create(b, loc, v, strides[d], ArrayRef<int64_t>{2, d});
    }
    return UnrealizedConversionCastOp::create(b, loc, type, v).getResult(0);
  };
  // Paged: K and V are pages x Hkv x page_size x D caches whose page count the kernel never
  // needs (the table picks pages), and the table and lengths views follow the ABI's views.
  unsigned firstPaged = abi::kParameterCount;
  Value unbounded = constant(std::numeric_limits<int32_t>::max());
  SmallVector<Value> views;
  for (auto [i, t] : llvm::enumerate(argumentTypes.take_front(abi::kTensorCount))) {
    auto type = cast<MemRefType>(t);
    const abi::Tensor &tensor = abi::kTensors[i];
    bool cache = paged && tensor.dimensions[2] == abi::SizeParameter::N;
    SmallVector<Value> sizes, strides;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      int sizeIndex = abi::sizeIndex(tensor.dimensions[d]);
      if (varlen && d == 0 && !cache) {
        // A packed batch: the batch index is a packed row (tile.load `sequences`); a paged
        // cache's keys are not packed.
        sizes.push_back(unbounded);
        strides.push_back(type.getRank() == 3 ? constant(1)
                                              : narrow(stride(abi::firstStride(i) + 2)));
        continue;
      }
      if (cache && d == 0)
        sizes.push_back(unbounded);
      else if (cache && d == 2 && type.isDynamicDim(2))
        sizes.push_back(narrow(entry.getArgument(firstPaged + abi::kPagedPointerCount + 1)));
      else if (cache && d == 2) // a fixed page size (the launch checked page_size against it)
        sizes.push_back(constant(type.getDimSize(2)));
      else
        sizes.push_back(sizeIndex >= 0 ? narrow(entry.getArgument(abi::kFirstSize + sizeIndex))
                                       : constant(type.getDimSize(d)));
      // The innermost dimension is contiguous; the others take their stride parameters.
      strides.push_back(d + 1 < type.getRank() ? narrow(stride(abi::firstStride(i) + d))
                                               : constant(1));
    }
    views.push_back(makeView(type, entry.getArgument(i), sizes, strides));
  }
  if (paged) {
    Value B = size(abi::SizeParameter::B), one = constant(1);
    Value tableRows = narrow(entry.getArgument(firstPaged + abi::kPagedPointerCount));
    views.push_back(makeView(cast<MemRefType>(argumentTypes[views.size()]),
                             entry.getArgument(firstPaged), {B, unbounded}, {tableRows, one}));
    views.push_back(makeView(cast<MemRefType>(argumentTypes[views.size()]),
                             entry.getArgument(firstPaged + 1), {B}, {one}));
  }
  if (varlen) {
    // B + 1 offsets each, after the base (and paged) parameters.
    unsigned firstVarlen = firstPaged + (paged ? abi::kPagedParameterCount : 0);
    Value offsets = LLVM::AddOp::create(b, loc, size(abi::SizeParameter::B), constant(1));
    for (int i = 0; i < abi::kVarlenPointerCount; ++i)
      views.push_back(makeView(cast<MemRefType>(argumentTypes[views.size()]),
                               entry.getArgument(firstVarlen + i), {offsets}, {constant(1)}));
  }
  if (split) {
    // The workspace is contiguous (LaunchAbi.h): strides are products of the sizes.
    unsigned firstPointer = abi::kParameterCount + (paged ? abi::kPagedParameterCount : 0) +
                            (varlen ? abi::kVarlenPointerCount : 0);
    Value splits = entry.getArgument(firstPointer + abi::kSplitPointerCount);
    Value S = narrow(splits);
    Value B = size(abi::SizeParameter::B), H = size(abi::SizeParameter::H);
    Value M = size(abi::SizeParameter::M), Hkv = size(abi::SizeParameter::Hkv);
    auto mul = [&](Value x, Value y) { return LLVM::MulOp::create(b, loc, x, y).getResult(); };
    auto outputPart = cast<MemRefType>(argumentTypes[views.size()]);
    Value D = constant(outputPart.getDimSize(3));
    // One counter per program of the unsplit grid (abi::programGrid): packed, a program's rows
    // are G·M rows of a key/value head.
    Value gridHeads = packGqa ? Hkv : H;
    Value rows = packGqa ? mul(LLVM::UDivOp::create(b, loc, H, Hkv).getResult(), M) : M;
    Value rowBlocks = LLVM::UDivOp::create(
        b, loc, LLVM::AddOp::create(b, loc, rows, constant(blockM - 1)), constant(blockM));
    Value one = constant(1), SB = mul(S, B);
    views.push_back(makeView(outputPart, entry.getArgument(firstPointer), {SB, H, M, D},
                             {mul(H, mul(M, D)), mul(M, D), D, one}));
    views.push_back(makeView(cast<MemRefType>(argumentTypes[views.size()]),
                             entry.getArgument(firstPointer + 1), {SB, H, M},
                             {mul(H, M), M, one}));
    views.push_back(makeView(cast<MemRefType>(argumentTypes[views.size()]),
                             entry.getArgument(firstPointer + 2), {B, gridHeads, rowBlocks},
                             {mul(gridHeads, rowBlocks), rowBlocks, one}));
    views.push_back(arith::IndexCastOp::create(b, loc, b.getIndexType(), splits));
  }

  // Each tensor map is its parameter: K's, V's, then Q's and O's (the ABI's order).
  for (tgpu::TensorMapOp map : maps) {
    auto view = dyn_cast<BlockArgument>(map.getView());
    int index = view ? abi::tensorMapIndex(int(view.getArgNumber())) : -1;
    if (index < 0)
      return map.emitOpError("maps a view the launch ABI has no tensor map for (only Q, K, V "
                             "and O)");
    Value parameter = entry.getArgument(firstMap + index);
    Value descriptor =
        UnrealizedConversionCastOp::create(b, map.getLoc(), map.getType(), parameter).getResult(0);
    map.getResult().replaceAllUsesWith(descriptor);
    map.erase();
  }

  // Move the body: the function's entry block takes the rebuilt views as its arguments.
  if (failed(moveBody(fn, kernel, views)))
    return failure();
  return kernel;
}

void tilefuse::nvvm::populateKernelToNVVMPatterns(TGPUToNVVMTypeConverter &converter,
                                                  RewritePatternSet &patterns) {
  patterns.add<ForallToBlockIds>(converter, patterns.getContext());
}
